//! The rules' states on one backend ([`Rules`]): the configuration in force with the state
//! of each of its rules, swapped whole by [`Rules::apply`], the states of request-side
//! limits, and a request's decision over the backend; [`Decide`] is what the service asks
//! of them, whatever the backend.

use super::options::Options;
use super::plan::{check, plan, Plan};
use super::respond::respond;
use crate::backend::{Backend, BackendError};
use crate::config::{Config, Limit, Map, Rule, Unit};
use crate::metrics::RuleCounters;
use crate::protocol::{Request, RequestError, Response};
use arc_swap::ArcSwap;
use limitcore::Algorithm;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A rule's state in the backend, with the limit it was built for, and its counters.
#[derive(Debug)]
pub(crate) struct Slot<R> {
    /// `None`: no limit, or a zero one (decided without the backend).
    pub(crate) state: Option<(Limit, Arc<R>)>,
    pub(crate) counters: RuleCounters,
}

impl<R> Clone for Slot<R> {
    fn clone(&self) -> Self {
        Slot {
            state: self.state.clone(),
            counters: self.counters.clone(),
        }
    }
}

/// One configuration in force, with its rules' states.
#[derive(Debug)]
pub(crate) struct State<R> {
    pub(crate) config: Config,
    /// By the address of the rule (its `Arc` in `config`, which this state owns: stable and
    /// unique while it lives), so that a request finds its rule's state from the match
    /// without building a key (it was `(domain, path)`: two `String`s cloned and hashed with
    /// SipHash per descriptor).
    slots: Map<usize, Slot<R>>,
}

impl<R> State<R> {
    /// The state of `rule`, one of this configuration's.
    pub(crate) fn slot(&self, rule: &Arc<Rule>) -> Option<&Slot<R>> {
        self.slots.get(&address(rule))
    }
}

/// A rule's key in [`State`]'s slots.
fn address(rule: &Arc<Rule>) -> usize {
    Arc::as_ptr(rule) as usize
}

/// Why a configuration could not be applied (a rule the backend cannot run).
///
/// # Examples
///
/// ```
/// let e = limitcore_rls::ApplyError("a.yaml:4: sliding-log rules are not available".into());
/// assert!(e.to_string().starts_with("a.yaml:4"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyError(pub String);

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ApplyError {}

/// What the service asks of its rules, whatever their backend: the service is one type
/// for every backend, and the backend's rule type stays inside [`Rules`].
pub(crate) trait Decide: fmt::Debug + Send + Sync {
    /// Put `config` in force for the next request (see [`Rules::apply`]).
    fn apply(&self, config: Config) -> Result<(), ApplyError>;

    /// Match `request`'s descriptors, decide them on the backend and answer (the answer is
    /// built here, while the plan borrows the configuration in force).
    fn decide<'a>(
        &'a self,
        request: &'a Request,
        options: &'a Options,
    ) -> Pin<Box<dyn Future<Output = Result<Response, RequestError>> + Send + 'a>>;
}

/// The rules' states on backend `B`.
#[derive(Debug)]
pub(crate) struct Rules<B: Backend> {
    backend: B,
    /// Read by every request: an `ArcSwap`'s load takes no lock and, while the thread has a
    /// free debt slot, touches no shared reference count (a `RwLock<Arc<_>>` wrote two shared
    /// cache lines, the lock's and the count's, twice per request on every worker).
    state: ArcSwap<State<B::Rule>>,
    overrides: Mutex<HashMap<Limit, Slot<B::Rule>>>,
    override_counters: RuleCounters,
    /// The rule a request-side limit is decided as (its limit is the request's).
    override_rule: Rule,
    max_overrides: usize,
}

impl<B: Backend> Rules<B> {
    /// No configuration yet, on `backend`, with at most `max_overrides` request-side limits.
    pub(crate) fn new(backend: B, max_overrides: usize) -> Self {
        Rules {
            backend,
            state: ArcSwap::from_pointee(State {
                config: Config::default(),
                slots: Map::default(),
            }),
            overrides: Mutex::new(HashMap::new()),
            override_counters: RuleCounters::new("", "override"),
            override_rule: Rule {
                domain: String::new(),
                path: "override".into(),
                name: None,
                limit: None,
                replaces: Vec::new(),
                shadow_mode: false,
                quota_mode: false,
                detailed_metric: false,
                metadata: None,
                file: PathBuf::new(),
                line: 0,
            },
            max_overrides,
        }
    }

    /// Put `config` in force: a rule whose domain, path and limit are unchanged keeps its
    /// state; one whose limit changed is built from its previous state (the backend carries
    /// what it can over); a new rule starts fresh. On an error the configuration in force
    /// stays.
    pub(crate) fn apply(&self, config: Config) -> Result<(), ApplyError> {
        let old = self.state.load_full();
        // A rule's identity across configurations is its domain and path.
        let old_slots: HashMap<(&str, &str), &Slot<B::Rule>> = old
            .config
            .rules()
            .iter()
            .filter_map(|r| Some(((r.domain.as_str(), r.path.as_str()), old.slot(r)?)))
            .collect();
        let mut slots = Map::with_capacity_and_hasher(config.rules().len(), Default::default());
        for rule in config.rules() {
            let id = (rule.domain.as_str(), rule.path.as_str());
            let previous = old_slots.get(&id).and_then(|s| s.state.as_ref());
            let state = match rule.limit {
                Some(limit) if limit.requests_per_unit > 0 => Some(match previous {
                    Some((kept, state)) if *kept == limit => (limit, Arc::clone(state)),
                    _ => {
                        let scope = format!("{} {}", rule.domain, rule.path);
                        let state = self
                            .backend
                            .rule(&scope, limit, previous.map(|(_, s)| s))
                            .map_err(|e| {
                                ApplyError(format!("{}:{}: {e}", rule.file.display(), rule.line))
                            })?;
                        (limit, state)
                    }
                }),
                _ => None,
            };
            let counters = RuleCounters::new(&rule.domain, rule.label());
            slots.insert(address(rule), Slot { state, counters });
        }
        let state = State { config, slots };
        debug_assert!(
            every_node_has_a_slot(&state),
            "a rule of the tree is not in the configuration's list"
        );
        self.state.store(Arc::new(state));
        Ok(())
    }

    /// The limits and states of `request`'s request-side limits, in its descriptors' order,
    /// when its domain is configured (as envoyproxy/ratelimit applies them).
    ///
    /// # Errors
    ///
    /// [`RequestError::InvalidArgument`] for a limit override with an unknown unit, or one
    /// override too many.
    #[allow(clippy::type_complexity)]
    fn override_slots(
        &self,
        request: &Request,
        state: &State<B::Rule>,
    ) -> Result<Vec<(Limit, Slot<B::Rule>)>, RequestError> {
        let mut out = Vec::new();
        if state.config.domain(&request.domain).is_none() {
            return Ok(out);
        }
        for o in request.descriptors.iter().filter_map(|d| d.limit) {
            let unit = Unit::from_proto(o.unit).ok_or_else(|| {
                RequestError::InvalidArgument(format!(
                    "limit override with unknown unit {}",
                    o.unit
                ))
            })?;
            let limit = Limit::new(o.requests_per_unit, unit, Algorithm::FixedWindow, None);
            out.push((limit, self.override_slot(limit)?));
        }
        Ok(out)
    }

    /// The state of a request-side limit (built on its first request, kept after).
    fn override_slot(&self, limit: Limit) -> Result<Slot<B::Rule>, RequestError> {
        if limit.requests_per_unit == 0 {
            return Ok(Slot {
                state: None,
                counters: self.override_counters.clone(),
            });
        }
        let mut map = match self.overrides.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(slot) = map.get(&limit) {
            return Ok(slot.clone());
        }
        if map.len() >= self.max_overrides {
            return Err(RequestError::InvalidArgument(format!(
                "more than {} distinct limit overrides",
                self.max_overrides
            )));
        }
        let scope = format!("override {}:{}", limit.unit.name(), limit.requests_per_unit);
        let state = self
            .backend
            .rule(&scope, limit, None)
            .map_err(|e| RequestError::InvalidArgument(e.to_string()))?;
        let slot = Slot {
            state: Some((limit, state)),
            counters: self.override_counters.clone(),
        };
        map.insert(limit, slot.clone());
        Ok(slot)
    }

    /// `request` matched under the configuration in force, its items decided, answered.
    pub(crate) async fn decide_request(
        &self,
        request: &Request,
        options: &Options,
    ) -> Result<Response, RequestError> {
        check(request)?;
        let state = self.state.load();
        let overrides = self.override_slots(request, &state)?;
        let Plan { targets, items } =
            plan(request, &state, options, &overrides, &self.override_rule);
        let outcomes = if items.is_empty() {
            Vec::new()
        } else {
            self.backend
                .decide(&request.domain, &items, options.mode, options.refused_hits)
                .await
                .map_err(unavailable)?
        };
        Ok(respond(options, request, &targets, &outcomes))
    }
}

/// A backend's error as the request's: `INVALID_ARGUMENT` for what it can never decide,
/// `UNAVAILABLE` for the rest.
fn unavailable(e: BackendError) -> RequestError {
    if e.0.contains("not supported") {
        RequestError::InvalidArgument(e.0)
    } else {
        RequestError::Unavailable(e.0)
    }
}

impl<B: Backend> Decide for Rules<B> {
    fn apply(&self, config: Config) -> Result<(), ApplyError> {
        Rules::apply(self, config)
    }

    fn decide<'a>(
        &'a self,
        request: &'a Request,
        options: &'a Options,
    ) -> Pin<Box<dyn Future<Output = Result<Response, RequestError>> + Send + 'a>> {
        Box::pin(self.decide_request(request, options))
    }
}

/// Whether every rule of `state`'s tree has its state (the tree's rules are the
/// configuration's list's, the same `Arc`s).
fn every_node_has_a_slot<R>(state: &State<R>) -> bool {
    fn level<R>(state: &State<R>, d: &crate::config::Descriptors) -> bool {
        d.nodes().all(|n| {
            n.rule.as_ref().is_none_or(|r| state.slot(r).is_some()) && level(state, &n.children)
        })
    }
    state
        .config
        .domains
        .values()
        .all(|d| level(state, &d.descriptors))
}
