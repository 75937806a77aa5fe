//! The leased Redis backend: each GCRA rule is a [`LeasedLimiter`] (limitcore-redis): the
//! node decides locally on cells leased from Redis (one script call per lease, not per
//! request), with the fleet bound `B + ⌈(Δ + D)/T⌉ − 1 + N·L` per key.
//!
//! All or nothing is kept as far as leases allow: the descriptors are taken in order, and
//! on the first refusal the later ones are only read; cells the earlier descriptors
//! already took stay spent (a leased cell given back could create a permit under a race,
//! limitcore-redis's "Leased mode"), so a refusal may cost earlier descriptors their cells,
//! never admit more than the bound. The exact and in-process backends charge nothing on a
//! refusal. Only `gcra` and `token-bucket` rules run leased.

use super::{Backend, BackendError, Item, Mode, Op, Outcome};
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

    /// A rule's leased limiter (rules are built inside a tokio runtime).
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
            .prefix(format!("{}lease:{{{domain}}}:{path}:", self.prefix));
        let limiter = LeasedLimiter::new(self.redis.clone(), quota, config, self.policy)
            .map_err(|e| BackendError(format!("{scope}: {e}")))?;
        Ok(Arc::new(RuleLease { limiter }))
    }

    /// Decide `items` on the leases.
    #[allow(clippy::manual_async_fn)] // The trait's future must be `Send`.
    fn decide(
        &self,
        _domain: &str,
        items: &[Item<RuleLease>],
        mode: Mode,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        async move {
            let mut out = Vec::with_capacity(items.len());
            let mut refused = false;
            for item in items {
                let limiter = &item.rule.limiter;
                let read = || {
                    let s = limiter.snapshot(item.key.as_str());
                    Outcome::admitted(s.remaining, s.full_after)
                };
                let outcome = match item.op {
                Op::Check => read(),
                Op::Refund(_) => {
                    return Err(BackendError(
                        "is_negative_hits is not supported by the redis-leased backend (leased cells are never given back)".into(),
                    ))
                }
                Op::Take(n) if refused => {
                    let s = limiter.snapshot(item.key.as_str());
                    if s.remaining >= n {
                        Outcome::admitted(s.remaining, s.full_after)
                    } else {
                        Outcome::refused(s.remaining, s.full_after.max(Duration::from_micros(1)))
                    }
                }
                Op::Take(n) => {
                    let verdict = limiter.acquire(&item.key, n).await;
                    if self.policy == Policy::Propagate && matches!(verdict.source, Source::Fallback { .. }) {
                        return Err(BackendError("redis unavailable (leased backend)".into()));
                    }
                    if !verdict.decision.is_admitted() && !item.soft && mode == Mode::AllOrNothing {
                        refused = true;
                    }
                    verdict.decision.into()
                }
            };
                out.push(outcome);
            }
            Ok(out)
        }
    }
}
