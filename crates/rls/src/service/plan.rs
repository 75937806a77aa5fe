//! A request's plan ([`plan`]): the request checked, each descriptor matched to its rule
//! (or to its request-side limit), `replaces` applied, and what each matched descriptor
//! asks of its rule's state: the items the backend decides.

use super::options::Options;
use super::rules::{Slot, State};
use crate::backend::{Item, Mode, Op};
use crate::config::{Domain, Limit, Rule};
use crate::matching;
use crate::metrics::RuleCounters;
use crate::protocol::{Descriptor, Request, RequestError, MAX_HITS};
use smallvec::SmallVec;
use std::borrow::Cow;

/// The descriptors a request's plan holds inline, without an allocation: one, the common
/// request. Measured on examples/decide.rs (callgrind): inline one, 109 instructions a
/// request fewer than two `Vec`s; inline two, 87 more (the larger future is copied).
const INLINE: usize = 1;

/// What a descriptor was matched to.
pub(crate) enum Target<'s> {
    /// No rule, a whitelisting rule (`unlimited`), or a replaced one.
    Open { unlimited: bool },
    /// A rule with a limit.
    Limited(Limited<'s>),
}

/// A descriptor matched to a rule with a limit, borrowed from the configuration in force
/// (`'s`): no rule's, state's or counter's reference count is touched per request.
pub(crate) struct Limited<'s> {
    pub(crate) rule: &'s Rule,
    pub(crate) limit: Limit,
    /// The index of its item (`None` for a zero limit, decided without the backend).
    pub(crate) item: Option<usize>,
    pub(crate) op: Op,
    /// The rule's counters, or a runtime label's own (`detailed_metric`, `value_to_metric`).
    pub(crate) counters: Cow<'s, RuleCounters>,
    /// Its refusal does not refuse the request.
    pub(crate) soft: bool,
}

/// Each descriptor's target, and the items the backend decides.
pub(crate) struct Plan<'s, R> {
    pub(crate) targets: SmallVec<[Target<'s>; INLINE]>,
    pub(crate) items: SmallVec<[Item<'s, R>; INLINE]>,
}

/// A descriptor's match: its rule and limit, counter key, metric label and the rule's
/// state.
struct Match<'s, R> {
    rule: &'s Rule,
    limit: Option<Limit>,
    counter: String,
    metric: Option<String>,
    slot: &'s Slot<R>,
}

/// The request's own checks: a domain, descriptors, entries in each.
///
/// # Errors
///
/// [`RequestError::InvalidArgument`] for an empty domain or descriptor list, or a
/// descriptor without entries.
pub(crate) fn check(request: &Request) -> Result<(), RequestError> {
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

/// The plan of `request` (already [`check`]ed) under `state`: each descriptor with a
/// request-side limit takes the next of `overrides` (their limits and states, in the
/// descriptors' order, built before the plan, which borrows them), as `override_rule`.
pub(crate) fn plan<'s, R>(
    request: &Request,
    state: &'s State<R>,
    options: &Options,
    overrides: &'s [(Limit, Slot<R>)],
    override_rule: &'s Rule,
) -> Plan<'s, R> {
    let n = request.descriptors.len();
    let mut plan = Plan {
        targets: SmallVec::with_capacity(n),
        items: SmallVec::with_capacity(n),
    };
    let Some(domain) = state.config.domain(&request.domain) else {
        plan.targets
            .resize_with(n, || Target::Open { unlimited: false });
        return plan;
    };
    let mut overrides = overrides.iter();
    let mut matched = |d: &Descriptor| match d.limit {
        Some(_) => overrides.next().map(|(limit, slot)| Match {
            rule: override_rule,
            limit: Some(*limit),
            counter: override_counter(d),
            metric: None,
            slot,
        }),
        None => configured(domain, d, state),
    };
    let request_hits = u64::from(request.hits_addend.max(1));
    let hits = |d: &Descriptor| d.hits_addend.unwrap_or(request_hits).min(MAX_HITS) as u32;
    let mut zero_refusal = false;
    if request.descriptors.len() == 1 {
        // One descriptor (the common request): no other rule can replace its rule, and no
        // list of the matches is needed.
        let d = &request.descriptors[0];
        let target = plan.target(matched(d), d.is_negative_hits, hits(d), options.shadow_mode);
        zero_refusal = target.refuses_alone();
        plan.targets.push(target);
    } else {
        let matched: Vec<Option<Match<'s, R>>> = request.descriptors.iter().map(matched).collect();
        // `replaces`: a matched rule's listed names drop the other matched rules so named.
        let replaced: Vec<&str> = matched
            .iter()
            .flatten()
            .flat_map(|m| m.rule.replaces.iter().map(String::as_str))
            .collect();
        for (d, m) in request.descriptors.iter().zip(matched) {
            let m = m.filter(|m| {
                !m.rule
                    .name
                    .as_deref()
                    .is_some_and(|n| replaced.contains(&n))
            });
            let target = plan.target(m, d.is_negative_hits, hits(d), options.shadow_mode);
            zero_refusal |= target.refuses_alone();
            plan.targets.push(target);
        }
    }
    if zero_refusal && options.mode == Mode::AllOrNothing {
        // A zero limit refuses the request: nothing is charged, the others are read.
        for item in &mut plan.items {
            if let Op::Take(_) = item.op {
                item.op = Op::Check;
            }
        }
    }
    plan
}

/// The configured rule `d` matches in `domain`, with its state.
fn configured<'s, R>(
    domain: &'s Domain,
    d: &Descriptor,
    state: &'s State<R>,
) -> Option<Match<'s, R>> {
    let m = matching::find_in(domain, &d.entries)?;
    let slot = state.slot(m.rule)?;
    Some(Match {
        rule: m.rule,
        limit: m.rule.limit,
        counter: m.counter,
        metric: m.metric,
        slot,
    })
}

/// The counter key of a request-side limit: the whole descriptor, `key=value` joined by `|`.
fn override_counter(d: &Descriptor) -> String {
    d.entries
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("|")
}

impl<'s, R> Plan<'s, R> {
    /// The target of a descriptor matched to `m` (`None`: no rule, or a replaced one)
    /// asking `hits` (given back if `negative`), its item added to the plan; every refusal
    /// soft under the global `shadow_mode`.
    fn target(
        &mut self,
        m: Option<Match<'s, R>>,
        negative: bool,
        hits: u32,
        shadow_mode: bool,
    ) -> Target<'s> {
        let Some(Match {
            rule,
            limit,
            counter,
            metric,
            slot,
        }) = m
        else {
            return Target::Open { unlimited: false };
        };
        let Some(limit) = limit else {
            return Target::Open { unlimited: true };
        };
        let op = match (negative, hits) {
            (_, 0) => Op::Check,
            (true, n) => Op::Refund(n),
            (false, n) => Op::Take(n),
        };
        let soft = rule.shadow_mode || rule.quota_mode || shadow_mode;
        let counters = match &metric {
            Some(label) => Cow::Owned(RuleCounters::new(&rule.domain, label)),
            None => Cow::Borrowed(&slot.counters),
        };
        let item = match &slot.state {
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

impl Target<'_> {
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
