//! The rules' states on one backend ([`Rules`]): the configuration in force with the state
//! of each of its rules, swapped whole by [`Rules::apply`], the states of request-side
//! limits, and a request's decision over the backend; [`Decide`] is what the service asks
//! of them, whatever the backend.

use super::options::Options;
use super::plan::{plan, Plan, Target};
use crate::backend::{Backend, BackendError, Outcome};
use crate::config::{Config, Limit};
use crate::metrics::RuleCounters;
use crate::protocol::{Request, RequestError};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};

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
    /// By (domain, path).
    pub(crate) slots: HashMap<(String, String), Slot<R>>,
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

/// A request decided: what each descriptor was matched to, and the backend's outcome of
/// each item.
pub(crate) struct Decided {
    pub(crate) targets: Vec<Target>,
    pub(crate) outcomes: Vec<Outcome>,
}

/// What the service asks of its rules, whatever their backend: the service is one type
/// for every backend, and the backend's rule type stays inside [`Rules`].
pub(crate) trait Decide: fmt::Debug + Send + Sync {
    /// Put `config` in force for the next request (see [`Rules::apply`]).
    fn apply(&self, config: Config) -> Result<(), ApplyError>;

    /// Match `request`'s descriptors and decide them on the backend.
    fn decide<'a>(
        &'a self,
        request: &'a Request,
        options: &'a Options,
    ) -> Pin<Box<dyn Future<Output = Result<Decided, RequestError>> + Send + 'a>>;
}

/// The rules' states on backend `B`.
#[derive(Debug)]
pub(crate) struct Rules<B: Backend> {
    backend: B,
    state: RwLock<Arc<State<B::Rule>>>,
    overrides: Mutex<HashMap<Limit, Slot<B::Rule>>>,
    override_counters: RuleCounters,
    max_overrides: usize,
}

impl<B: Backend> Rules<B> {
    /// No configuration yet, on `backend`, with at most `max_overrides` request-side limits.
    pub(crate) fn new(backend: B, max_overrides: usize) -> Self {
        Rules {
            backend,
            state: RwLock::new(Arc::new(State {
                config: Config::default(),
                slots: HashMap::new(),
            })),
            overrides: Mutex::new(HashMap::new()),
            override_counters: RuleCounters::new("", "override"),
            max_overrides,
        }
    }

    fn current(&self) -> Arc<State<B::Rule>> {
        match self.state.read() {
            Ok(s) => Arc::clone(&s),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Put `config` in force: a rule whose domain, path and limit are unchanged keeps its
    /// state; one whose limit changed is built from its previous state (the backend carries
    /// what it can over); a new rule starts fresh. On an error the configuration in force
    /// stays.
    fn apply(&self, config: Config) -> Result<(), ApplyError> {
        let old = self.current();
        let mut slots = HashMap::with_capacity(config.rules().len());
        for rule in config.rules() {
            let id = (rule.domain.clone(), rule.path.clone());
            let previous = old.slots.get(&id).and_then(|s| s.state.as_ref());
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
            slots.insert(id, Slot { state, counters });
        }
        let state = Arc::new(State { config, slots });
        match self.state.write() {
            Ok(mut s) => *s = state,
            Err(p) => *p.into_inner() = state,
        }
        Ok(())
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

    /// `request` matched under the configuration in force, and its items decided.
    async fn decide_request(
        &self,
        request: &Request,
        options: &Options,
    ) -> Result<Decided, RequestError> {
        let state = self.current();
        let Plan { targets, items } =
            plan(request, &state, options, |limit| self.override_slot(limit))?;
        let outcomes = if items.is_empty() {
            Vec::new()
        } else {
            self.backend
                .decide(&request.domain, &items, options.mode, options.refused_hits)
                .await
                .map_err(unavailable)?
        };
        Ok(Decided { targets, outcomes })
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
    ) -> Pin<Box<dyn Future<Output = Result<Decided, RequestError>> + Send + 'a>> {
        Box::pin(self.decide_request(request, options))
    }
}
