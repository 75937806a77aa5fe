//! What a node decides when Redis cannot: [`Policy`], and where a decision came from
//! ([`Source`], [`Verdict`]).

use limitcore::clock::Nanos;
use limitcore::rules::{GcraRule, Receipt};
use limitcore::{Decision, Denied, Keyed, KeyedRateLimiter, KeyedRefund, Quota, Snapshot};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a node decides while Redis is unreachable (a call missed its deadline, or the
/// circuit breaker is open).
///
/// Bounds during an outage, for a fleet of `N` nodes of which `N₀` were announced when
/// the outage began, over any window of length Δ, with `B` the burst, `T` the emission
/// interval and `L` the leased mode's largest lease (0 in exact mode):
///
/// | policy | admitted by the fleet in Δ | refused by |
/// |---|---|---|
/// | [`Policy::FailOpen`] | unbounded (every request) | nothing |
/// | [`Policy::FailClosed`] | `N·L` (only cells already leased) | everything else |
/// | [`Policy::FailLocal`] | `N·L + N·(b' + ⌈Δ / (N₀·T)⌉ − 1)`, `b' = max(1, ⌊B / N₀⌋)`: about `(N / N₀)·(B + Δ/T) + N·L`, the exact bound when no node joined | each node's local GCRA |
///
/// `FailLocal` gives each node a local GCRA of the rate divided by the last known number
/// of nodes (`count` per `N₀ × period`, burst `⌊B / N₀⌋`, at least 1), so the fleet keeps
/// the limit as long as the fleet does not grow during the outage. Its local state is
/// rebuilt (full) when the announced count changes. After recovery the Redis state is
/// authoritative again: if Redis lost its data (a restart without persistence) every key
/// starts fresh, one more burst; with the server's data intact the bound holds across.
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
    /// Decide on a local GCRA of the rate divided by the last known number of nodes.
    #[default]
    FailLocal,
}

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Decided by Redis's script, at the server's time (µs since the Unix epoch, or the
    /// explicit time given).
    Redis {
        /// When the script decided, µs.
        server_time_us: u64,
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

/// `FailLocal`'s per-node limit.
type LocalLimit = Keyed<String, GcraRule>;

/// An admission by `FailLocal`'s local limit, and what gives it back: the limiter it
/// charged (the one of the divisor at that time, whatever the divisor is now), the receipt
/// and the time of the charge.
pub(crate) struct Charge {
    local: Arc<LocalLimit>,
    receipt: Receipt,
    at: Nanos,
}

impl Charge {
    /// Give the admission back (GCRA's refund is exact: it never creates a permit).
    pub(crate) fn refund(self, key: &str) {
        self.local.refund(key, self.receipt, self.at);
    }
}

/// The outage policy's state: for `FailLocal` the local limiter of the current divisor.
pub(crate) struct Fallback {
    policy: Policy,
    quota: Quota,
    cooldown: Duration,
    local: Mutex<Option<(u32, Arc<LocalLimit>)>>,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("policy", &self.policy)
            .field("quota", &self.quota)
            .finish()
    }
}

impl Fallback {
    pub(crate) fn new(policy: Policy, quota: Quota, cooldown: Duration) -> Self {
        Fallback {
            policy,
            quota,
            cooldown,
            local: Mutex::new(None),
        }
    }

    /// The quota of one of `nodes` nodes: the rate divided by `nodes`, burst `⌊B/nodes⌋`
    /// (at least 1). `None` if it cannot be represented (then the node fails closed).
    fn share(quota: Quota, nodes: u32) -> Option<Quota> {
        let period = quota.period().checked_mul(nodes)?;
        let burst = (quota.burst() / nodes).max(1);
        Quota::new_with_burst(quota.count(), period, burst).ok()
    }

    /// The policy's decision on `n` permits for `key`, with `nodes` the fleet's last known
    /// size.
    pub(crate) fn decide(&self, key: &str, n: u32, nodes: u32) -> Verdict {
        self.decide_refundable(key, n, nodes).0
    }

    /// [`Fallback::decide`], and for an admission by `FailLocal`'s local limit what gives
    /// it back ([`Charge::refund`]): the all-or-nothing of several limits on the local path
    /// ([`RedisAll`](crate::RedisAll)), where a refusal by one limit must not keep the charge
    /// of another.
    pub(crate) fn decide_refundable(
        &self,
        key: &str,
        n: u32,
        nodes: u32,
    ) -> (Verdict, Option<Charge>) {
        let capacity = self.quota.burst();
        let (decision, charge) = match self.policy {
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
                    state: Snapshot::new(capacity, Duration::ZERO),
                },
                None,
            ),
            Policy::FailClosed => (self.closed(), None),
            Policy::FailLocal => match self.local(nodes) {
                None => (self.closed(), None),
                Some(local) => {
                    let now = KeyedRateLimiter::<str>::now(&*local);
                    let (result, state) = local.decide_refundable_at(key, n, now);
                    let charge = result.ok().map(|receipt| Charge {
                        local,
                        receipt,
                        at: now,
                    });
                    let result = result.map(|_| ());
                    (Decision { result, state }, charge)
                }
            },
        };
        let source = Source::Fallback {
            policy: self.policy,
        };
        (Verdict { decision, source }, charge)
    }

    fn closed(&self) -> Decision {
        Decision {
            result: Err(Denied::RateLimited {
                retry_after: self.cooldown,
            }),
            state: Snapshot::new(0, Duration::ZERO),
        }
    }

    fn local(&self, nodes: u32) -> Option<Arc<LocalLimit>> {
        let nodes = nodes.max(1);
        let mut slot = self.local.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((n, local)) if *n == nodes => Some(Arc::clone(local)),
            _ => {
                let quota = Fallback::share(self.quota, nodes)?;
                let local = Arc::new(Keyed::new(quota).ok()?);
                *slot = Some((nodes, Arc::clone(&local)));
                Some(local)
            }
        }
    }
}
