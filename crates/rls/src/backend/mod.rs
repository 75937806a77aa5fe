//! Where decisions are made: in process ([`memory`]), exactly on Redis (`redis_exact`:
//! one script call decides every descriptor of a request), or leased from Redis
//! (`redis_leased`: local decisions on cells leased from Redis).

pub(crate) mod memory;
pub(crate) mod redis_exact;
pub(crate) mod redis_leased;

use crate::config::Limit;
use memory::{Memory, RuleLimiter};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use redis_exact::RedisExact;
pub use redis_leased::RedisLeased;

/// What one descriptor asks of its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Take this many permits (at least 1).
    Take(u32),
    /// Consume nothing: report the state (a `hits_addend` of 0).
    Check,
    /// Give this many permits back (`is_negative_hits`), never past an empty state.
    Refund(u32),
}

/// One descriptor's part of a decision.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// What it asks.
    pub(crate) op: Op,
    /// The counter's key within the rule (the matched descriptor's values).
    pub(crate) key: String,
    /// A refusal of this item does not refuse the request (shadow or quota mode).
    pub(crate) soft: bool,
    /// The rule's state in the backend.
    pub(crate) handle: Handle,
}

/// A rule's state in a backend.
#[derive(Debug, Clone)]
pub(crate) enum Handle {
    /// In process.
    Memory(Arc<RuleLimiter>),
    /// On Redis, exact.
    Exact(Arc<redis_exact::RuleParams>),
    /// On Redis, leased.
    Leased(Arc<redis_leased::RuleLease>),
}

/// One descriptor's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether its rule admitted it (alone: in an all-or-nothing refusal, a rule that would
    /// admit is reported admitted, and was not charged).
    pub(crate) admitted: bool,
    /// Permits left after the decision.
    pub(crate) remaining: u32,
    /// Admitted: the time until the state is full again; refused: the time until the same
    /// request would be admitted in full.
    pub(crate) reset: Option<Duration>,
}

impl Outcome {
    pub(crate) fn admitted(remaining: u32, full_after: Duration) -> Self {
        Outcome {
            admitted: true,
            remaining,
            reset: Some(full_after),
        }
    }

    pub(crate) fn refused(remaining: u32, reset: Duration) -> Self {
        Outcome {
            admitted: false,
            remaining,
            reset: Some(reset),
        }
    }
}

/// How a request's descriptors are charged.
///
/// # Examples
///
/// ```
/// use limitcore_rls::Mode;
///
/// assert_eq!("charge-each".parse::<Mode>(), Ok(Mode::ChargeEach));
/// assert_eq!(Mode::default(), Mode::AllOrNothing);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A request is admitted only if every matched descriptor admits it, and a refusal
    /// charges none of them (the default).
    #[default]
    AllOrNothing,
    /// envoyproxy/ratelimit's behaviour: every descriptor is charged on its own, so a
    /// refused request still charges the descriptors that admitted it (and a refused
    /// fixed-window descriptor stays closed for the rest of its window, as its counter
    /// would).
    ChargeEach,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all-or-nothing" => Ok(Mode::AllOrNothing),
            "charge-each" => Ok(Mode::ChargeEach),
            other => Err(format!(
                "unknown mode {other:?}; expected all-or-nothing or charge-each"
            )),
        }
    }
}

/// A backend could not decide (Redis unreachable under the `error` policy, a rule it cannot
/// run); answered as gRPC `UNAVAILABLE` (or, for a request it can never decide,
/// `INVALID_ARGUMENT`), so that the proxy applies its `failure_mode_deny`.
///
/// # Examples
///
/// ```
/// let e = limitcore_rls::BackendError("redis: connection refused".into());
/// assert_eq!(e.to_string(), "redis: connection refused");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError(pub String);

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendError {}

/// The backend of a service.
#[derive(Debug, Clone)]
pub enum Backend {
    /// In process: the core's keyed limiters.
    Memory(Memory),
    /// On Redis, exact: one script call per request.
    RedisExact(RedisExact),
    /// On Redis, leased: local decisions on cells leased from Redis.
    RedisLeased(RedisLeased),
}

impl Backend {
    /// An in-process backend on `clock`, at most `max_keys` keys per rule.
    pub fn memory(clock: crate::SharedClock, max_keys: usize) -> Self {
        Backend::Memory(Memory { clock, max_keys })
    }

    /// The state of a rule with `limit` (a nonzero count), keeping `previous`'s where the
    /// backend can (a changed limit carries usage over).
    pub(crate) fn handle(
        &self,
        scope: &str,
        limit: Limit,
        previous: Option<&Handle>,
    ) -> Result<Handle, BackendError> {
        match self {
            Backend::Memory(m) => {
                let previous = match previous {
                    Some(Handle::Memory(p)) => Some(Arc::clone(p)),
                    _ => None,
                };
                Ok(Handle::Memory(RuleLimiter::new(
                    limit, &m.clock, m.max_keys, previous,
                )?))
            }
            Backend::RedisExact(r) => r.handle(scope, limit).map(Handle::Exact),
            Backend::RedisLeased(r) => r.handle(scope, limit).map(Handle::Leased),
        }
    }

    /// Whether a handle can be kept as it is for `limit` (same limit, same backend).
    pub(crate) fn keeps(handle: &Handle, limit: &Limit) -> bool {
        match handle {
            Handle::Memory(rl) => rl.limit == *limit,
            Handle::Exact(p) => p.limit == *limit,
            Handle::Leased(l) => l.limit == *limit,
        }
    }

    /// Decide `items` for `domain`.
    pub(crate) async fn decide(
        &self,
        domain: &str,
        items: &[Item],
        mode: Mode,
    ) -> Result<Vec<Outcome>, BackendError> {
        match self {
            Backend::Memory(m) => {
                let limiters: Vec<&RuleLimiter> = items
                    .iter()
                    .map(|i| match &i.handle {
                        Handle::Memory(rl) => Ok(&**rl),
                        _ => Err(BackendError("a rule of another backend".into())),
                    })
                    .collect::<Result<_, _>>()?;
                m.decide(items, &limiters, mode)
            }
            Backend::RedisExact(r) => r.decide(domain, items, mode).await,
            Backend::RedisLeased(r) => r.decide(items, mode).await,
        }
    }
}
