//! [`Backend`]: where a service's decisions are made, behind one interface, as
//! envoyproxy/ratelimit's `RateLimitCache` and limitador's `CounterStorage` are. Three
//! places implement it: in process ([`Memory`]), exactly on Redis ([`RedisExact`]: one
//! script call decides every descriptor of a request), or leased from Redis
//! ([`RedisLeased`]: local decisions on cells leased from Redis). Each keeps its rules'
//! states in a type of its own ([`Backend::Rule`]), so a rule built by one backend cannot
//! reach another: the compiler refuses it.

pub(crate) mod memory;
pub(crate) mod redis_exact;
pub(crate) mod redis_leased;

use crate::config::Limit;
use limitcore::Decision;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A place where a service's decisions are made: the states of its rules, and the decision
/// of a request's matched descriptors ([`Item`]s) on them. The service builds each rule's
/// state when a configuration is applied ([`Backend::rule`]) and hands every request's
/// items to [`Backend::decide`].
///
/// # Examples
///
/// A backend that admits every request (a stand-in for a fail-open outage policy):
///
/// ```
/// use limitcore_rls::{Backend, BackendError, Item, Limit, Mode, Options, Outcome, RefusedHits, Service};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// struct Open;
///
/// impl Backend for Open {
///     type Rule = Limit;
///
///     fn rule(&self, _scope: &str, limit: Limit, _previous: Option<&Arc<Limit>>) -> Result<Arc<Limit>, BackendError> {
///         Ok(Arc::new(limit))
///     }
///
///     async fn decide(&self, _domain: &str, items: &[Item<'_, Limit>], _mode: Mode, _refused: RefusedHits) -> Result<Vec<Outcome>, BackendError> {
///         Ok(items.iter().map(|i| Outcome::admitted(i.rule.requests_per_unit, Duration::ZERO)).collect())
///     }
/// }
///
/// let service = Service::new(Open, Options::default());
/// # let _ = service;
/// ```
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// A rule's state in this backend (a limiter, the names and numbers of its Redis keys,
    /// its leases).
    type Rule: fmt::Debug + Send + Sync + 'static;

    /// The state of a rule with `limit` (a nonzero count), named `scope` (`"domain path"`,
    /// or `"override unit:count"` for a request-side limit). `previous` is the rule's state
    /// before a reload changed its limit: a backend that can carries its usage over.
    ///
    /// # Errors
    ///
    /// [`BackendError`] for a rule this backend cannot run (a window algorithm leased, a
    /// rate Redis cannot represent).
    fn rule(
        &self,
        scope: &str,
        limit: Limit,
        previous: Option<&Arc<Self::Rule>>,
    ) -> Result<Arc<Self::Rule>, BackendError>;

    /// Decide `items`, the matched descriptors of one request in `domain`, by `mode`, the
    /// hits of the descriptors that refuse it recorded or dropped by `refused`: one
    /// [`Outcome`] per item, in order. Every backend gives negative hits back first
    /// ([`Op::Refund`], never refused), answers a check ([`Op::Check`]) refused while its
    /// state is in debt, and, under [`RefusedHits::Record`], records a refused descriptor's
    /// hits on it past its limit, so that later checks and requests are refused until the
    /// debt is paid back (a window: until it ends).
    ///
    /// # Errors
    ///
    /// [`BackendError`] when the backend cannot decide (Redis unreachable under the
    /// `error` policy; an operation its rules do not support, named "not supported").
    fn decide(
        &self,
        domain: &str,
        items: &[Item<'_, Self::Rule>],
        mode: Mode,
        refused: RefusedHits,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send;
}

/// What one descriptor asks of its rule.
///
/// # Examples
///
/// ```
/// use limitcore_rls::Op;
///
/// assert_eq!((Op::Take(3).permits(), Op::Check.permits(), Op::Refund(3).permits()), (3, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Take this many permits (at least 1).
    Take(u32),
    /// Consume nothing: report the state (a `hits_addend` of 0), refused while it is in
    /// debt (a charge recorded past the limit and not yet paid back).
    Check,
    /// Give this many permits back (`is_negative_hits`), never past an empty state, with no
    /// receipt (the core's `credit`); never refused.
    Refund(u32),
}

impl Op {
    /// The permits the decision takes: a refund's are given back before it.
    pub fn permits(self) -> u32 {
        match self {
            Op::Take(n) => n,
            Op::Check | Op::Refund(_) => 0,
        }
    }
}

/// One descriptor's part of a decision, on a rule's state `R` (borrowed from the
/// configuration in force for the request: no reference count is touched per request).
#[derive(Debug)]
pub struct Item<'a, R> {
    /// What it asks.
    pub op: Op,
    /// The counter's key within the rule (the matched descriptor's values).
    pub key: String,
    /// A refusal of this item does not refuse the request (shadow or quota mode).
    pub soft: bool,
    /// The rule's state in the backend.
    pub rule: &'a R,
}

/// One descriptor's outcome.
///
/// # Examples
///
/// ```
/// use limitcore_rls::Outcome;
/// use std::time::Duration;
///
/// let o = Outcome::refused(0, Duration::from_secs(2));
/// assert!(!o.admitted && o.reset == Some(Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Whether its rule admitted it (alone: in an all-or-nothing refusal, a rule that would
    /// admit is reported admitted, and was not charged).
    pub admitted: bool,
    /// Permits left after the decision.
    pub remaining: u32,
    /// Admitted: the time until the state is full again; refused: the time until the same
    /// request would be admitted in full.
    pub reset: Option<Duration>,
}

impl Outcome {
    /// Admitted, `remaining` permits left, full again after `full_after`.
    pub fn admitted(remaining: u32, full_after: Duration) -> Self {
        Outcome {
            admitted: true,
            remaining,
            reset: Some(full_after),
        }
    }

    /// Refused, `remaining` permits left, the same request admitted after `reset`.
    pub fn refused(remaining: u32, reset: Duration) -> Self {
        Outcome {
            admitted: false,
            remaining,
            reset: Some(reset),
        }
    }
}

impl From<Decision> for Outcome {
    /// The core's decision: refused, the time until it could be admitted in full, or, when
    /// no wait can (above the capacity), the time until the state is full again.
    fn from(decision: Decision) -> Self {
        let state = decision.state;
        match decision.result {
            Ok(()) => Outcome::admitted(state.remaining, state.full_after),
            Err(denied) => Outcome::refused(
                state.remaining,
                denied.retry_after().unwrap_or(state.full_after),
            ),
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
    /// refused request still charges the descriptors that admitted it. With the default
    /// [`RefusedHits::Record`] every descriptor records every request's hits, refused or
    /// not, and refuses iff its state is past the limit after them: for a fixed window,
    /// envoyproxy/ratelimit's `INCRBY` and `limitAfterIncrease > limit`, exactly.
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

/// What becomes of the hits of a descriptor that refuses a request.
///
/// The RLS protocol carries no mark of a call made after the response (Envoy's
/// `apply_on_stream_done`), and Envoy Gateway writes the descriptors itself: the service
/// cannot tell a charge of a response's cost (tokens used, bytes sent) from a request. A
/// charge must never be lost, so by default a refused descriptor records its hits (as
/// envoyproxy/ratelimit counts a refused request), past its limit: the key is then in
/// debt, and the next checks (`hits_addend: 0`) and requests are refused until it is paid
/// back.
///
/// # Examples
///
/// ```
/// use limitcore_rls::RefusedHits;
///
/// assert_eq!("drop".parse::<RefusedHits>(), Ok(RefusedHits::Drop));
/// assert_eq!(RefusedHits::default(), RefusedHits::Record);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefusedHits {
    /// Recorded on the descriptors that refused (the default; never on those that admitted
    /// a request refused all or nothing). A client that keeps sending past a GCRA or token
    /// bucket limit extends its own wait by its refused requests' cost; a window forgives
    /// at its end, as envoyproxy/ratelimit's counters do.
    #[default]
    Record,
    /// Dropped: a refused request changes nothing (a pure request semantics, for
    /// deployments that never charge a cost after the response).
    Drop,
}

impl std::str::FromStr for RefusedHits {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "record" => Ok(RefusedHits::Record),
            "drop" => Ok(RefusedHits::Drop),
            other => Err(format!(
                "unknown refused-hits {other:?}; expected record or drop"
            )),
        }
    }
}

/// A backend could not decide (Redis unreachable under the `error` policy, a rule it cannot
/// run); answered as gRPC `UNAVAILABLE` (or, for a request it can never decide, one whose
/// message says "not supported", `INVALID_ARGUMENT`), so that the proxy applies its
/// `failure_mode_deny`.
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
