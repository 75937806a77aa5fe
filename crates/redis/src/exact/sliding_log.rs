//! [`RedisSlidingLog`]: the exact sliding log on a sorted set.

use super::{parse, verdict, Answer, MAX_SPAN_US};
use crate::client::Redis;
use crate::error::Error;
use crate::policy::{Fallback, Policy, Verdict};
use crate::scripts::scripts;
use crate::time::RedisMicros;
use limitcore::{Decision, Quota};

/// The exact sliding log on Redis: at most `count` permits in **any** window of `period`
/// for each key, on a sorted set of admission times (µs), decided by one script call.
///
/// # Contract
///
/// The core's [`SlidingLog`](limitcore::SlidingLog) contract on Redis's clock in µs: an
/// admission is recorded at `max(now, newest entry)`; `n` permits are admitted iff the
/// entries inside the window ending there, plus `n`, are at most `count`; `retry_after` is
/// exact (when the entry that must leave leaves); `n = 0` succeeds and writes nothing;
/// `n > count` is [`Denied::ExceedsCapacity`](limitcore::Denied::ExceedsCapacity); a
/// denial writes nothing. The period is rounded up to whole µs (stricter). Memory: one sorted-set
/// entry per admitted permit in the window (about `count` entries per busy key). The key
/// expires when its newest entry leaves the window.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisSlidingLog};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let log = RedisSlidingLog::new(redis, "100/min".parse()?, Policy::FailClosed)?;
/// assert!(log.decide("upstream-api", 1).await.is_admitted());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedisSlidingLog {
    redis: Redis,
    quota: Quota,
    period_us: u64,
    prefix: String,
    fallback: Fallback,
}

impl RedisSlidingLog {
    /// At most `quota.count()` per `quota.period()` for each key.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if the quota has a burst other than its count (a window has none),
    /// a count above `u32::MAX` as written (a log keeps the written count per written
    /// period), a period below 1 µs, or a period above [`MAX_SPAN_US`] µs.
    pub fn new(redis: Redis, quota: Quota, policy: Policy) -> Result<Self, Error> {
        if quota.is_scaled() {
            return Err(Error::Quota(format!(
                "{quota}: a sliding log counts at most 4294967295 per window"
            )));
        }
        if quota.burst() != quota.count() {
            return Err(Error::Quota(format!(
                "{quota}: a sliding log has no burst of its own (burst must equal count)"
            )));
        }
        let ns = quota.period_ns();
        let period_us = ns.div_ceil(1_000);
        if ns < 1_000 || period_us > MAX_SPAN_US {
            return Err(Error::Quota(format!(
                "{quota}: the period must lie between 1 µs and 2^52 µs"
            )));
        }
        let cooldown = redis.config().get_cooldown();
        Ok(RedisSlidingLog {
            redis,
            quota,
            period_us,
            prefix: "lc:log:".to_owned(),
            fallback: Fallback::new(policy, quota, cooldown, "lc:log:"),
        })
    }

    /// Store keys as `prefix` + key.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self.fallback = self.fallback.renamed(&self.prefix);
        self
    }

    /// The quota enforced.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    async fn call(&self, key: &str, n: u32, now: Option<RedisMicros>) -> Result<Answer, Error> {
        let redis_key = format!("{}{key}", self.prefix);
        let args = [
            self.period_us.to_string(),
            self.quota.count().to_string(),
            n.to_string(),
            now.map(|t| t.as_micros().to_string()).unwrap_or_default(),
        ];
        let reply = self
            .redis
            .eval(&scripts().sliding_log, &[&redis_key], &args)
            .await?;
        parse(reply, self.quota.count())
    }

    /// Decide `n` permits for `key` on Redis, or by the outage policy (whose local limit
    /// for a sliding log is a budget, GCRA without debt, of the same rate share).
    pub async fn decide(&self, key: &str, n: u32) -> Verdict {
        let answer = self.call(key, n, None).await;
        verdict(answer, || self.fallback.decide(key, n, self.redis.nodes()))
    }

    /// The asynchronous seam's decision (see [`Policy`], "The asynchronous seam"): Redis's,
    /// the outage policy's, or under [`Policy::Propagate`] the error.
    pub(super) async fn decide_or_error(&self, key: &str, n: u32) -> Result<Decision, Error> {
        let answer = self.call(key, n, None).await;
        super::settle(answer, self.fallback.policy(), || {
            self.fallback.decide(key, n, self.redis.nodes())
        })
    }

    /// Decide on Redis at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`](crate::RedisGcra::try_decide).
    pub async fn try_decide(&self, key: &str, n: u32) -> Result<Answer, Error> {
        self.call(key, n, None).await
    }

    /// Decide at the explicit time `now` on Redis's clock (tests, replays; no expiry is
    /// set).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`](crate::RedisGcra::try_decide_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisMicros, RedisSlidingLog};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let log = RedisSlidingLog::new(redis, "2/s".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// assert!(log.try_decide_at("replay", 2, t).await?.decision.is_admitted());
    /// assert!(!log.try_decide_at("replay", 1, t).await?.decision.is_admitted());
    /// # Ok(()) }
    /// ```
    pub async fn try_decide_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<Answer, Error> {
        self.call(key, n, Some(now)).await
    }
}
