//! The leased Redis backend: each GCRA rule is a [`LeasedLimiter`] (limitcore-redis): the
//! node decides locally on cells leased from Redis (one script call per lease, not per
//! request), with the fleet bound `B + ⌈(Δ + D)/T⌉ − 1 + N·L` per key.
//!
//! All or nothing is kept as far as leases allow: a descriptor the node's key is blocked
//! for (Redis refused its last lease, or a charge left it owing) refuses the request before
//! any cell is spent; otherwise the descriptors are taken in order, and on the first
//! refusal the later ones are only read. Cells the earlier descriptors already took stay
//! spent (a leased cell given back could create a permit under a race, limitcore-redis's
//! "Leased mode"), so a refusal that only Redis's answer reveals may cost earlier
//! descriptors their cells, never admit more than the bound. The exact and in-process
//! backends charge nothing on a refusal. Only `gcra` and `token-bucket` rules run leased.
//!
//! A refused descriptor's hits are recorded ([`RefusedHits::Record`]) by the leased
//! limiter's forced charge (the node's cells first, then Redis, one script call), into a
//! debt of up to one period of the rule (`D`, the rule's unit: a key may owe up to its
//! whole limit; a charge past that is the limiter's shortfall, not recorded). A check
//! (`hits_addend: 0`) is refused while the node's key is blocked with no cells left (Redis
//! refused its last lease, the key empty or in debt, or a charge left it owing): stricter
//! than the exact backends, which refuse a check only while the key is in debt, and only
//! for what this node has learnt from Redis (another node's charge is seen at this node's
//! next lease). Negative hits are refused as
//! `INVALID_ARGUMENT`: leased cells are never given back, so no credit can be exact.

use super::{Backend, BackendError, Item, Mode, Op, Outcome, RefusedHits};
use crate::config::Limit;
use limitcore::{Algorithm, KeyedRateLimiter};
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, Source};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One rule's state in the leased Redis backend ([`RedisLeased`]'s [`Backend::Rule`]):
/// its leased limiter. Built by [`Backend::rule`].
#[derive(Debug)]
pub struct RuleLease {
    limiter: LeasedLimiter,
    /// The most permits a request may take (the quota's burst): a request above it is
    /// refused here, as by the other backends (the limiter's debt would admit one from a
    /// full key).
    burst: u32,
}

/// The leased Redis backend: each rule a [`LeasedLimiter`] deciding locally on cells
/// leased from Redis.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig};
/// use limitcore_rls::{Options, RedisLeased, Service};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let leased = RedisLeased::new(redis, Policy::FailLocal, "lcrls:", 16, Duration::from_millis(50));
/// let service = Service::new(leased, Options::default());
/// # let _ = service;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisLeased {
    redis: Redis,
    policy: Policy,
    prefix: String,
    max_lease: u32,
    target: Duration,
}

impl std::fmt::Debug for RedisLeased {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLeased")
            .field("policy", &self.policy)
            .field("prefix", &self.prefix)
            .field("max_lease", &self.max_lease)
            .finish()
    }
}

impl RedisLeased {
    /// The backend on `redis`: leases of at most `max_lease` cells sized to last about
    /// `target` at the node's rate, keys under `prefix`, `policy` when Redis cannot answer
    /// (rules are built inside a tokio runtime).
    pub fn new(
        redis: Redis,
        policy: Policy,
        prefix: impl Into<String>,
        max_lease: u32,
        target: Duration,
    ) -> Self {
        RedisLeased {
            redis,
            policy,
            prefix: prefix.into(),
            max_lease: max_lease.max(1),
            target,
        }
    }

    /// The Redis handle.
    pub fn redis(&self) -> &Redis {
        &self.redis
    }
}

impl Backend for RedisLeased {
    type Rule = RuleLease;

    /// A rule's leased limiter (rules are built inside a tokio runtime), with a debt of
    /// one period of the rule for the charges of refused hits.
    fn rule(
        &self,
        scope: &str,
        limit: Limit,
        _previous: Option<&Arc<RuleLease>>,
    ) -> Result<Arc<RuleLease>, BackendError> {
        if !matches!(limit.algorithm, Algorithm::Gcra | Algorithm::TokenBucket) {
            return Err(BackendError(format!(
                "{scope}: {} rules cannot run leased (the leased backend runs gcra and token-bucket)",
                limit.algorithm
            )));
        }
        let quota = limit
            .quota()
            .map_err(|e| BackendError(format!("{scope}: {e}")))?;
        let (domain, path) = scope.split_once(' ').unwrap_or((scope, ""));
        let config = LeaseConfig::new(self.max_lease)
            .target(self.target)
            .prefix(format!("{}lease:{{{domain}}}:{path}:", self.prefix))
            .max_debt(limit.unit.period());
        let limiter = LeasedLimiter::new(self.redis.clone(), quota, config, self.policy)
            .map_err(|e| BackendError(format!("{scope}: {e}")))?;
        Ok(Arc::new(RuleLease {
            limiter,
            burst: quota.burst(),
        }))
    }

    /// Decide `items` on the leases.
    #[allow(clippy::manual_async_fn)] // The trait's future must be `Send`.
    fn decide(
        &self,
        _domain: &str,
        items: &[Item<'_, RuleLease>],
        mode: Mode,
        refused: RefusedHits,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        async move {
            if items.iter().any(|i| matches!(i.op, Op::Refund(_))) {
                return Err(BackendError(
                    "is_negative_hits is not supported by the redis-leased backend: leased cells are never given back (a cell given back could create a permit under a race), so no credit can be exact; use redis-exact or memory".into(),
                ));
            }
            // All or nothing: a descriptor the node's key is blocked for refuses the
            // request before any cell is spent.
            let all = mode == Mode::AllOrNothing;
            let mut refusal = all && items.iter().any(|i| !i.soft && blocked(i).is_some());
            let mut out = Vec::with_capacity(items.len());
            // Whether each refusal is one the limit made (a lease refused, a block, the
            // capacity), not only a node holding no cells yet: those are recorded.
            let mut made = Vec::with_capacity(items.len());
            for item in items {
                let limiter = &item.rule.limiter;
                let (outcome, by_limit) = match item.op {
                    Op::Check | Op::Refund(_) => match blocked(item) {
                        Some(wait) => (Outcome::refused(0, wait), true),
                        None => (read(limiter, &item.key), false),
                    },
                    Op::Take(n) if n > item.rule.burst => {
                        let s = limiter.snapshot(item.key.as_str());
                        (Outcome::refused(s.remaining, s.full_after), true)
                    }
                    Op::Take(n) if refusal => {
                        let s = limiter.snapshot(item.key.as_str());
                        if s.remaining >= n {
                            (Outcome::admitted(s.remaining, s.full_after), false)
                        } else {
                            let wait = s.full_after.max(Duration::from_micros(1));
                            (Outcome::refused(s.remaining, wait), blocked(item).is_some())
                        }
                    }
                    Op::Take(n) => {
                        let verdict = limiter.acquire(&item.key, n).await;
                        if self.policy == Policy::Propagate
                            && matches!(verdict.source, Source::Fallback { .. })
                        {
                            return Err(BackendError("redis unavailable (leased backend)".into()));
                        }
                        (verdict.decision.into(), true)
                    }
                };
                if !outcome.admitted && !item.soft && all {
                    refusal = true;
                }
                out.push(outcome);
                made.push(by_limit);
            }
            if refused == RefusedHits::Record {
                for ((item, outcome), by_limit) in items.iter().zip(&mut out).zip(made) {
                    if let (Op::Take(n), false, true) = (item.op, outcome.admitted, by_limit) {
                        *outcome = record(&item.rule.limiter, &item.key, n, *outcome).await;
                    }
                }
            }
            Ok(out)
        }
    }
}

/// The node's state of `key`, read: admitted, its cells and block.
fn read(limiter: &LeasedLimiter, key: &str) -> Outcome {
    let s = limiter.snapshot(key);
    Outcome::admitted(s.remaining, s.full_after)
}

/// The time left of the block of `item`'s key, if the node's key is blocked (a Redis
/// refusal, or a charge's debt) with fewer cells left than `item` asks (a check: one).
fn blocked(item: &Item<'_, RuleLease>) -> Option<Duration> {
    let s = item.rule.limiter.snapshot(item.key.as_str());
    let asks = match item.op {
        Op::Take(n) => n,
        Op::Check | Op::Refund(_) => 1,
    };
    (s.remaining < asks && !s.full_after.is_zero()).then_some(s.full_after)
}

/// A refused take of `n` for `key` recorded by the leased limiter's forced charge (the
/// node's cells first, then Redis, into the rule's debt), and the refusal `was` answered
/// on the state it left: the longer of its wait and the charge's.
async fn record(limiter: &LeasedLimiter, key: &str, n: u32, was: Outcome) -> Outcome {
    let charge = limiter.charge(key, n).await;
    let s = limiter.snapshot(key);
    let wait = was.reset.unwrap_or_default().max(charge.charged.wait);
    Outcome::refused(s.remaining, wait)
}
