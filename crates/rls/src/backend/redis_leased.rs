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

use super::{Item, Mode, Op, Outcome};
use crate::config::Limit;
use crate::BackendError;
use limitcore::{Algorithm, KeyedRateLimiter};
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis};
use std::sync::Arc;
use std::time::Duration;

/// A rule's leased limiter.
#[derive(Debug)]
pub(crate) struct RuleLease {
    pub(crate) limit: Limit,
    limiter: LeasedLimiter,
}

/// The leased Redis backend.
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

    /// A rule's leased limiter.
    pub(crate) fn handle(&self, scope: &str, limit: Limit) -> Result<Arc<RuleLease>, BackendError> {
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
        Ok(Arc::new(RuleLease { limit, limiter }))
    }

    /// Decide `items` on the leases.
    pub(crate) async fn decide(
        &self,
        items: &[Item],
        mode: Mode,
    ) -> Result<Vec<Outcome>, BackendError> {
        let mut out = Vec::with_capacity(items.len());
        let mut refused = false;
        for item in items {
            let super::Handle::Leased(rule) = &item.handle else {
                return Err(BackendError("a rule of another backend".into()));
            };
            let limiter = &rule.limiter;
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
                    if self.policy == Policy::Propagate && matches!(verdict.source, limitcore_redis::Source::Fallback { .. }) {
                        return Err(BackendError("redis unavailable (leased backend)".into()));
                    }
                    let state = verdict.decision.state;
                    match verdict.decision.result {
                        Ok(()) => Outcome::admitted(state.remaining, state.full_after),
                        Err(denied) => {
                            if !item.soft && mode == Mode::AllOrNothing {
                                refused = true;
                            }
                            Outcome::refused(state.remaining, denied.retry_after().unwrap_or(state.full_after))
                        }
                    }
                }
            };
            out.push(outcome);
        }
        Ok(out)
    }
}
