//! What a node decides when Redis cannot: [`Policy`], and where a decision came from
//! ([`Source`], [`Verdict`]).

mod local;

use crate::telemetry::FallbackMetrics;
use crate::time::RedisMicros;
use limitcore::{BudgetConfig, Charged, Decision, Denied, Quota, Snapshot};
use local::{Admitted, LocalBudgets};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a node decides while Redis is unreachable (a call missed its deadline, or the
/// circuit breaker is open).
///
/// Bounds during an outage, for a fleet of `N` nodes of which `N₀` were announced when
/// the outage began, over any window of length Δ, with `B` the burst, `T` the emission
/// interval, `D` the maximum debt (zero without a debt policy) and `L` the leased mode's
/// largest lease (0 in exact mode). What is counted is what the fleet *consumes*: the
/// permits it admits plus those its forced charges record.
///
/// | policy | consumed by the fleet in Δ | refused by |
/// |---|---|---|
/// | [`Policy::FailOpen`] | unbounded (every request) | nothing |
/// | [`Policy::FailClosed`] | `N·L` (only cells already leased) | everything else |
/// | [`Policy::FailLocal`] | `N·L + N·(b' + ⌈(Δ + D) / (N₀·T)⌉ − 1)`, `b' = max(1, ⌊B / N₀⌋)`: about `(N / N₀)·(B + (Δ + D)/T) + N·L`, the exact bound when no node joined | each node's local budget |
/// | [`Policy::Propagate`] | as `FailClosed` | as `FailClosed`, except that the asynchronous seam returns the error instead |
///
/// `FailLocal` gives each node a local budget (the core's [`Budget`](limitcore::Budget)
/// rule) of the rate divided by the last known number of nodes (`count` per `N₀ ×
/// period`, burst `⌊B / N₀⌋`, at least 1) with the same debt `D` (a duration of backlog:
/// at the node's rate, `1/N₀` of the fleet's debt in permits), so the fleet keeps the
/// limit as long as the fleet does not grow during the outage. Its local state is rebuilt
/// (full) when the announced count changes. After recovery the Redis state is
/// authoritative again: if Redis lost its data (a restart without persistence) every key
/// starts fresh, one more burst; with the server's data intact the bound holds across.
///
/// # Charges
///
/// A forced charge ([`RedisGcra::charge`](crate::RedisGcra::charge),
/// [`LeasedLimiter::charge`](crate::LeasedLimiter::charge)) is never refused by the limit;
/// when Redis cannot record it, the policy decides what becomes of it, as it decides a
/// request ([`ChargeVerdict`], its source [`Source::Fallback`]):
///
/// | policy | the charge of `n` permits | reported |
/// |---|---|---|
/// | [`Policy::FailOpen`] | recorded nowhere (the outage forgives it, as the core's [`Mode::Disabled`](limitcore::Mode::Disabled) does) | `charged 0`, `shortfall 0`, `wait 0` |
/// | [`Policy::FailClosed`] | not recorded (every request is refused meanwhile) | `charged 0`, `shortfall n`, `wait` = the breaker's cooldown (a hint, as its refusals') |
/// | [`Policy::FailLocal`] | charged to the node's local budget, up to its burst `b'` plus the debt | the local budget's [`Charged`] (the rest as the shortfall, the local wait for one permit) |
///
/// A recorded charge ([`RedisGcra::record`](crate::RedisGcra::record),
/// [`LeasedLimiter::record`](crate::LeasedLimiter::record)) and a settle's excess
/// ([`RedisGcra::settle`](crate::RedisGcra::settle)) meet the policy as such a charge
/// (the table's report says what became of it: `FailClosed` and `FailLocal` report what
/// they do not hold as the shortfall, `FailOpen` forgives it); a settle below its
/// estimate gives nothing back while Redis cannot answer (stricter).
///
/// A charge is never sent to Redis later: after the outage Redis's state is the one it
/// kept. (A leased charge first spends the cells the node holds, which Redis had already
/// charged, under every policy; only the rest meets the policy.) [`Policy::Propagate`]
/// charges as `FailClosed` does.
///
/// # The asynchronous seam
///
/// The exact limits implement the core's
/// [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter), whose decision may fail
/// with this crate's [`Error`](crate::Error). The policy is what relates the two:
///
/// - under `FailOpen`, `FailClosed` and `FailLocal` the limiter's own policy decides when
///   Redis cannot, and the seam returns `Ok` with that decision: the caller (an HTTP layer)
///   sees the same decisions as [`RedisGcra::decide`](crate::RedisGcra::decide). Its `Err`
///   is then only a request no policy can decide ([`Error::Quota`](crate::Error::Quota): a
///   [`RedisAll`](crate::RedisAll) tenant with a brace);
/// - under [`Policy::Propagate`] the seam returns Redis's error itself (a timeout, an open
///   breaker, a connection error, an unexpected reply), and the caller's own policy for
///   errors decides. Every call that must return a decision without an error
///   ([`RedisGcra::decide`](crate::RedisGcra::decide), the leased limiter's synchronous
///   decisions, the forced charges) fails closed meanwhile.
///
/// # Examples
///
/// ```
/// use limitcore_redis::Policy;
/// assert_eq!(Policy::default(), Policy::FailLocal);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Admit every request while Redis is unreachable (availability over the limit).
    FailOpen,
    /// Refuse every request that held cells cannot serve, with `retry_after` the breaker's
    /// cooldown (a hint: when Redis will next be tried, not a promise).
    FailClosed,
    /// Decide on a local budget of the rate divided by the last known number of nodes (with
    /// the limit's debt), and record forced charges there.
    #[default]
    FailLocal,
    /// Give the error to the caller where the API can return one (the core's
    /// [`AsyncKeyedRateLimiter::decide_async`](limitcore::AsyncKeyedRateLimiter::decide_async),
    /// and every `try_` method, whatever the policy), so that the caller's own policy
    /// decides; fail closed (as [`Policy::FailClosed`]) in every call that must return a
    /// decision.
    Propagate,
}

impl Policy {
    /// Whether the asynchronous seam returns Redis's errors ([`Policy::Propagate`]) instead
    /// of the policy's decision.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_redis::Policy;
    /// assert!(Policy::Propagate.propagates());
    /// assert!(!Policy::FailLocal.propagates());
    /// ```
    pub fn propagates(self) -> bool {
        self == Policy::Propagate
    }

    /// The metrics' `policy` label of this policy.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Policy::FailOpen => "fail_open",
            Policy::FailClosed => "fail_closed",
            Policy::FailLocal => "fail_local",
            Policy::Propagate => "propagate",
        }
    }
}

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Decided by Redis's script, at the server's time (Redis's `TIME`, or the explicit time
    /// given).
    Redis {
        /// When the script decided, on Redis's clock.
        server_time: RedisMicros,
    },
    /// Decided locally from a lease (cells already charged to Redis), or refused locally
    /// until the time Redis gave.
    Lease,
    /// Decided by the outage policy: Redis did not answer in time or the breaker is open.
    Fallback {
        /// The policy that decided.
        policy: Policy,
    },
}

/// A decision and where it came from.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, Source};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "100/s burst 10".parse()?, Policy::FailClosed)?;
/// let verdict = limit.decide("tenant-42", 1).await;
/// if let Source::Fallback { .. } = verdict.source {
///     eprintln!("Redis is down: decided by the outage policy");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// The decision, with the state it left (Redis's state, or the local one).
    pub decision: Decision,
    /// Who decided.
    pub source: Source,
}

impl Verdict {
    /// Whether the request was admitted.
    pub fn is_admitted(&self) -> bool {
        self.decision.is_admitted()
    }
}

/// What a forced charge did and who recorded it: Redis, the node's lease, or the outage
/// policy ([`Policy`], "Charges").
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, Source};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "1000/s burst 100".parse()?, Policy::FailLocal)?
///     .with_max_debt(Duration::from_secs(1))?;
/// let charge = limit.charge("tenant-42", 250).await; // CPU ms measured after the work
/// if let Source::Fallback { .. } = charge.source {
///     eprintln!("recorded by the outage policy only: {:?}", charge.charged);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChargeVerdict {
    /// Permits charged, permits short (not recorded: past the burst plus the debt, or the
    /// policy's), and the wait a request for one permit now faces.
    pub charged: Charged,
    /// Of `charged.charged`, the permits the node's held cells covered (spent locally:
    /// Redis had charged them when it leased them); the rest was recorded by `source`. Only
    /// the leased path holds cells: 0 in exact mode.
    pub from_lease: u32,
    /// Who recorded the rest (all of it when nothing came from the lease; a charge the
    /// cells covered entirely is [`Source::Lease`]).
    pub source: Source,
}

/// An admission by `FailLocal`'s local limit, and what gives it back: the budgets it
/// charged (those of the divisor at that time, whatever the divisor is now) and the
/// admission on them.
pub(crate) struct Admission {
    local: Arc<LocalBudgets>,
    admitted: Admitted,
}

impl Admission {
    /// Give the admission back (the budget's refund never creates a permit).
    pub(crate) fn refund(self) {
        self.admitted.refund(&self.local);
    }
}

/// The outage policy's state: for `FailLocal` the local budgets of the current divisor.
pub(crate) struct Fallback {
    policy: Policy,
    quota: Quota,
    /// The debt the limit runs on (zero: none), and the most permits a request may take
    /// (the burst, or the Redis capacity under debt).
    max_debt: Duration,
    capacity: u32,
    cooldown: Duration,
    local: Mutex<Option<(u32, Arc<LocalBudgets>)>>,
    /// Its decisions through the `metrics` facade (feature `metrics`; empty without it).
    metrics: FallbackMetrics,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("policy", &self.policy)
            .field("quota", &self.quota)
            .field("max_debt", &self.max_debt)
            .finish()
    }
}

impl Fallback {
    /// The policy for `quota` with no debt, on the limit named `limit` (its key prefix, or
    /// its name in a [`RedisAll`](crate::RedisAll): the `limit` label of its metrics).
    pub(crate) fn new(policy: Policy, quota: Quota, cooldown: Duration, limit: &str) -> Self {
        Fallback {
            policy,
            quota,
            max_debt: Duration::ZERO,
            capacity: quota.burst(),
            cooldown,
            local: Mutex::new(None),
            metrics: FallbackMetrics::register(policy.label(), limit),
        }
    }

    /// The same policy on the limit now named `limit` (a new key prefix).
    pub(crate) fn renamed(self, limit: &str) -> Self {
        Fallback {
            metrics: FallbackMetrics::register(self.policy.label(), limit),
            ..self
        }
    }

    /// The same on a limit with `max_debt` of debt and a capacity of `capacity` permits a
    /// request (the Redis limit's).
    pub(crate) fn with_debt(self, max_debt: Duration, capacity: u32) -> Self {
        Fallback {
            max_debt,
            capacity,
            local: Mutex::new(None),
            ..self
        }
    }

    /// The budget of one of `nodes` nodes: the rate divided by `nodes`, burst `⌊B/nodes⌋`
    /// (at least 1), the same debt (a duration: at the node's rate it is `1/nodes` of the
    /// fleet's debt in permits). `None` if it cannot be represented (then the node fails
    /// closed).
    fn share(&self, nodes: u32) -> Option<BudgetConfig> {
        let quota = self.quota;
        let period = quota.period().checked_mul(nodes)?;
        let burst = (quota.burst() / nodes).max(1);
        let share = Quota::new_with_burst(quota.count(), period, burst).ok()?;
        Some(BudgetConfig::new(share).max_debt(self.max_debt))
    }

    /// The policy.
    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }

    /// The policy's decision on `n` permits for `key`, with `nodes` the fleet's last known
    /// size.
    pub(crate) fn decide(&self, key: &str, n: u32, nodes: u32) -> Verdict {
        self.decide_refundable(key, n, nodes).0
    }

    /// [`Fallback::decide`], and for an admission by `FailLocal`'s local limit what gives
    /// it back ([`Admission::refund`]): the all-or-nothing of several limits on the local
    /// path ([`RedisAll`](crate::RedisAll)), where a refusal by one limit must not keep the
    /// charge of another.
    pub(crate) fn decide_refundable(
        &self,
        key: &str,
        n: u32,
        nodes: u32,
    ) -> (Verdict, Option<Admission>) {
        self.metrics.record();
        let capacity = self.capacity;
        let (decision, admission) = match self.policy {
            _ if n > capacity => (
                Decision {
                    result: Err(Denied::ExceedsCapacity { capacity }),
                    state: Snapshot::new(0, Duration::ZERO),
                },
                None,
            ),
            Policy::FailOpen => (
                Decision {
                    result: Ok(()),
                    state: Snapshot::new(self.quota.burst(), Duration::ZERO),
                },
                None,
            ),
            Policy::FailClosed | Policy::Propagate => (self.closed(), None),
            Policy::FailLocal => match self.local(nodes) {
                None => (self.closed(), None),
                Some(local) => {
                    let now = local.now();
                    let (result, state) = local.decide(key, n, now);
                    let (result, admission) = match result {
                        Ok(admitted) => (
                            Ok(()),
                            admitted.map(|admitted| Admission { local, admitted }),
                        ),
                        Err(denied) => (Err(denied), None),
                    };
                    (Decision { result, state }, admission)
                }
            },
        };
        (self.verdict(decision), admission)
    }

    /// The policy's forced charge of `n` permits to `key` (see [`Policy`], "Charges"),
    /// with `nodes` the fleet's last known size.
    pub(crate) fn charge(&self, key: &str, n: u32, nodes: u32) -> ChargeVerdict {
        self.metrics.record();
        let charged = match self.policy {
            Policy::FailOpen => Charged {
                charged: 0,
                shortfall: 0,
                wait: Duration::ZERO,
            },
            Policy::FailClosed | Policy::Propagate => self.not_recorded(n),
            Policy::FailLocal => match self.local(nodes) {
                None => self.not_recorded(n),
                Some(local) => local.charge(key, n, local.now()),
            },
        };
        ChargeVerdict {
            charged,
            from_lease: 0,
            source: self.source(),
        }
    }

    /// A charge that could not be recorded: all of it short, the next request refused for
    /// the breaker's cooldown.
    fn not_recorded(&self, n: u32) -> Charged {
        Charged {
            charged: 0,
            shortfall: n,
            wait: self.cooldown,
        }
    }

    fn source(&self) -> Source {
        Source::Fallback {
            policy: self.policy,
        }
    }

    fn verdict(&self, decision: Decision) -> Verdict {
        Verdict {
            decision,
            source: self.source(),
        }
    }

    fn closed(&self) -> Decision {
        Decision {
            result: Err(Denied::RateLimited {
                retry_after: self.cooldown,
            }),
            state: Snapshot::new(0, Duration::ZERO),
        }
    }

    fn local(&self, nodes: u32) -> Option<Arc<LocalBudgets>> {
        let nodes = nodes.max(1);
        let mut slot = self.local.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((n, local)) if *n == nodes => Some(Arc::clone(local)),
            _ => {
                let config = self.share(nodes)?;
                let local = Arc::new(LocalBudgets::new(&config).ok()?);
                *slot = Some((nodes, Arc::clone(&local)));
                Some(local)
            }
        }
    }
}
