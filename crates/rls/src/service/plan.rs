//! A request's plan ([`plan`]): the request checked, each descriptor matched to its rule
//! (or to its request-side limit), `replaces` applied, and what each matched descriptor
//! asks of its rule's state: the items the backend decides.

use super::options::Options;
use super::rules::{Slot, State};
use crate::backend::{Item, Mode, Op};
use crate::config::{Domain, Limit, Rule, Unit};
use crate::matching;
use crate::metrics::RuleCounters;
use crate::protocol::{Descriptor, LimitOverride, Request, RequestError, MAX_HITS};
use limitcore::Algorithm;
use std::sync::Arc;

/// What a descriptor was matched to.
pub(crate) enum Target {
    /// No rule, a whitelisting rule (`unlimited`), or a replaced one.
    Open { unlimited: bool },
    /// A rule with a limit.
    Limited(Limited),
}

/// A descriptor matched to a rule with a limit.
pub(crate) struct Limited {
    pub(crate) rule: Arc<Rule>,
    pub(crate) limit: Limit,
    /// The index of its item (`None` for a zero limit, decided without the backend).
    pub(crate) item: Option<usize>,
    pub(crate) op: Op,
    pub(crate) counters: RuleCounters,
    /// Its refusal does not refuse the request.
    pub(crate) soft: bool,
}

/// Each descriptor's target, and the items the backend decides.
pub(crate) struct Plan<R> {
    pub(crate) targets: Vec<Target>,
    pub(crate) items: Vec<Item<R>>,
}

/// A descriptor's match: its rule, counter key, metric label and the rule's state.
struct Match<R> {
    rule: Arc<Rule>,
    counter: String,
    metric: Option<String>,
    slot: Slot<R>,
}

/// The plan of `request` under `state`, a request-side limit's state from `override_slot`.
///
/// # Errors
///
/// [`RequestError::InvalidArgument`] for an empty domain or descriptor list, a descriptor
/// without entries, a limit override with an unknown unit, or one override too many.
pub(crate) fn plan<R>(
    request: &Request,
    state: &State<R>,
    options: &Options,
    override_slot: impl Fn(Limit) -> Result<Slot<R>, RequestError>,
) -> Result<Plan<R>, RequestError> {
    check(request)?;
    let mut matched = Vec::with_capacity(request.descriptors.len());
    if let Some(domain) = state.config.domain(&request.domain) {
        for d in &request.descriptors {
            matched.push(match d.limit {
                Some(o) => Some(overridden(domain, d, o, &override_slot)?),
                None => configured(domain, d, state),
            });
        }
    } else {
        matched.resize_with(request.descriptors.len(), || None);
    }
    // `replaces`: a matched rule's listed names drop the other matched rules so named.
    let replaced: Vec<String> = matched
        .iter()
        .flatten()
        .flat_map(|m| m.rule.replaces.iter().cloned())
        .collect();
    let request_hits = u64::from(request.hits_addend.max(1));
    let mut plan = Plan {
        targets: Vec::with_capacity(matched.len()),
        items: Vec::new(),
    };
    let mut zero_refusal = false;
    for (d, m) in request.descriptors.iter().zip(matched) {
        let m = m.filter(|m| !m.rule.name.as_ref().is_some_and(|n| replaced.contains(n)));
        let hits = d.hits_addend.unwrap_or(request_hits).min(MAX_HITS) as u32;
        let target = plan.target(m, d.is_negative_hits, hits, options.shadow_mode);
        zero_refusal |= target.refuses_alone();
        plan.targets.push(target);
    }
    if zero_refusal && options.mode == Mode::AllOrNothing {
        // A zero limit refuses the request: nothing is charged, the others are read.
        for item in &mut plan.items {
            if let Op::Take(_) = item.op {
                item.op = Op::Check;
            }
        }
    }
    Ok(plan)
}

/// The request's own checks: a domain, descriptors, entries in each.
fn check(request: &Request) -> Result<(), RequestError> {
    if request.domain.is_empty() {
        return Err(RequestError::InvalidArgument(
            "rate limit domain must not be empty".into(),
        ));
    }
    if request.descriptors.is_empty() {
        return Err(RequestError::InvalidArgument(
            "rate limit descriptor list must not be empty".into(),
        ));
    }
    match request
        .descriptors
        .iter()
        .position(|d| d.entries.is_empty())
    {
        Some(i) => Err(RequestError::InvalidArgument(format!(
            "rate limit descriptor {i} has no entries"
        ))),
        None => Ok(()),
    }
}

/// The configured rule `d` matches in `domain`, with its state.
fn configured<R>(domain: &Domain, d: &Descriptor, state: &State<R>) -> Option<Match<R>> {
    let m = matching::find(domain, &d.entries)?;
    let slot = state
        .slots
        .get(&(m.rule.domain.clone(), m.rule.path.clone()))?
        .clone();
    Some(Match {
        rule: m.rule,
        counter: m.counter,
        metric: m.metric,
        slot,
    })
}

/// `d`'s request-side limit `o`, as a fixed-window rule of `domain` counted by the whole
/// descriptor.
fn overridden<R>(
    domain: &Domain,
    d: &Descriptor,
    o: LimitOverride,
    override_slot: impl Fn(Limit) -> Result<Slot<R>, RequestError>,
) -> Result<Match<R>, RequestError> {
    let unit = Unit::from_proto(o.unit).ok_or_else(|| {
        RequestError::InvalidArgument(format!("limit override with unknown unit {}", o.unit))
    })?;
    let limit = Limit::new(o.requests_per_unit, unit, Algorithm::FixedWindow, None);
    let rule = Arc::new(Rule {
        domain: domain.name.clone(),
        path: "override".into(),
        name: None,
        limit: Some(limit),
        replaces: Vec::new(),
        shadow_mode: false,
        quota_mode: false,
        detailed_metric: false,
        metadata: None,
        file: Default::default(),
        line: 0,
    });
    let counter = d
        .entries
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("|");
    Ok(Match {
        rule,
        counter,
        metric: None,
        slot: override_slot(limit)?,
    })
}

impl<R> Plan<R> {
    /// The target of a descriptor matched to `m` (`None`: no rule, or a replaced one)
    /// asking `hits` (given back if `negative`), its item added to the plan; every refusal
    /// soft under the global `shadow_mode`.
    fn target(
        &mut self,
        m: Option<Match<R>>,
        negative: bool,
        hits: u32,
        shadow_mode: bool,
    ) -> Target {
        let Some(Match {
            rule,
            counter,
            metric,
            slot,
        }) = m
        else {
            return Target::Open { unlimited: false };
        };
        let Some(limit) = rule.limit else {
            return Target::Open { unlimited: true };
        };
        let op = match (negative, hits) {
            (_, 0) => Op::Check,
            (true, n) => Op::Refund(n),
            (false, n) => Op::Take(n),
        };
        let soft = rule.shadow_mode || rule.quota_mode || shadow_mode;
        let counters = match &metric {
            Some(label) => RuleCounters::new(&rule.domain, label),
            None => slot.counters,
        };
        let item = match slot.state {
            Some((_, state)) if limit.requests_per_unit > 0 => {
                self.items.push(Item {
                    op,
                    key: counter,
                    soft,
                    rule: state,
                });
                Some(self.items.len() - 1)
            }
            // A zero limit: refused without the backend (a hard refusal refuses the request).
            _ => None,
        };
        Target::Limited(Limited {
            rule,
            limit,
            item,
            op,
            counters,
            soft,
        })
    }
}

impl Target {
    /// A zero limit that refuses the request on its own (a hard take).
    fn refuses_alone(&self) -> bool {
        matches!(
            self,
            Target::Limited(Limited {
                item: None,
                op: Op::Take(_),
                soft: false,
                ..
            })
        )
    }
}
