//! [`RedisSlidingLog`]: the exact sliding log on a sorted set.

use super::charge::ChargeAnswer;
use super::reservation::{LogReceipt, Reservation};
use super::{ints, micros, parse, verdict, Answer, MAX_SPAN_US};
use crate::client::Redis;
use crate::error::Error;
use crate::policy::{Fallback, Policy, Verdict};
use crate::scripts::scripts;
use crate::time::RedisMicros;
use limitcore::{Charged, Decision, Quota, Snapshot};
use redis::Value;

/// The exact sliding log on Redis: at most `count` permits in **any** window of `period`
/// for each key, on a sorted set of admission times (µs), decided by one script call.
///
/// # Contract
///
/// The core's [`SlidingLog`](limitcore::SlidingLog) contract on Redis's clock in µs: an
/// admission is recorded at `max(now, newest entry)`; `n` permits are admitted iff the
/// entries inside the window ending there, plus `n`, are at most `count`; `retry_after` is
/// exact (when the entry that must leave leaves); `n = 0` writes nothing, and is admitted
/// unless a charge took the log past its limit; `n > count` is
/// [`Denied::ExceedsCapacity`](limitcore::Denied::ExceedsCapacity); a denial writes
/// nothing. The period is rounded up to whole µs (stricter). Memory: one sorted-set entry
/// per admitted permit in the window (about `count` entries per busy key). The key expires
/// when its newest entry leaves the window.
///
/// # Costs known after the work
///
/// A recorded charge ([`RedisSlidingLog::try_record`]) writes its entries whatever the
/// log holds, never refused: a log over its limit refuses every request, one for no
/// permits included, until enough entries have left the window (the exact wait of the
/// entry that must leave). A reservation ([`RedisSlidingLog::try_reserve`]) is an
/// admission whose receipt names its entries; its settle ([`RedisSlidingLog::try_settle`])
/// removes the unused ones (the state is then the one charging the actual cost up front
/// would have left) or records the excess as a charge. Each is one script call. A charge
/// of more than `count + 1` stores `count + 1` entries, as strict as all of them for every
/// later request (they leave the window together, and `count + 1` alone refuse everything
/// until then): nothing is lost, and one charge never writes more than `count + 1`
/// entries.
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
        let reply = self.call_raw(key, n, now, &[]).await?;
        parse(reply, self.quota.count())
    }

    /// One script call on `key` of `n` at `now` (`TIME` if `None`), with the operation and
    /// its arguments `more` (none: a decision).
    async fn call_raw(
        &self,
        key: &str,
        n: u32,
        now: Option<RedisMicros>,
        more: &[String],
    ) -> Result<Value, Error> {
        let redis_key = format!("{}{key}", self.prefix);
        let mut args = vec![
            self.period_us.to_string(),
            self.quota.count().to_string(),
            n.to_string(),
            now.map(|t| t.as_micros().to_string()).unwrap_or_default(),
        ];
        args.extend_from_slice(more);
        self.redis
            .eval(&scripts().sliding_log, &[&redis_key], &args)
            .await
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

impl RedisSlidingLog {
    /// Reserve `n` entries for `key` on Redis (an estimate of a cost known after the work),
    /// one script call at Redis's `TIME`: decided as [`RedisSlidingLog::try_decide`]
    /// decides `n`, and on admission the receipt naming the entries, which
    /// [`RedisSlidingLog::try_settle`] settles to the actual cost.
    ///
    /// # Errors
    ///
    /// As [`RedisSlidingLog::try_decide`].
    pub async fn try_reserve(&self, key: &str, n: u32) -> Result<Reservation<LogReceipt>, Error> {
        self.reserve_call(key, n, None).await
    }

    /// As [`RedisSlidingLog::try_reserve`] at the explicit time `now` on Redis's clock
    /// (tests, replays; no expiry is set).
    ///
    /// # Errors
    ///
    /// As [`RedisSlidingLog::try_decide_at`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisMicros, RedisSlidingLog};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let log = RedisSlidingLog::new(redis, "100/min".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// let receipt = log.try_reserve_at("k", 100, t).await?.receipt.unwrap();
    /// assert!(!log.try_decide_at("k", 1, t).await?.decision.is_admitted()); // held
    /// log.try_settle_at("k", receipt, 60, t).await?;                        // 40 unused
    /// assert_eq!(log.try_decide_at("k", 40, t).await?.granted, 40);
    /// # Ok(()) }
    /// ```
    pub async fn try_reserve_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<Reservation<LogReceipt>, Error> {
        self.reserve_call(key, n, Some(now)).await
    }

    async fn reserve_call(
        &self,
        key: &str,
        n: u32,
        now: Option<RedisMicros>,
    ) -> Result<Reservation<LogReceipt>, Error> {
        let reply = self.call_raw(key, n, now, &["1".to_owned()]).await?;
        let count = self.quota.count();
        // An admission's reply names its entries (eight integers); a refusal's is a decision's.
        if let Some([1, granted, _, remaining, full, now, at, seq]) = ints::<8>(&reply) {
            let answer = super::answer(Ok(()), remaining, full, granted, now);
            return Ok(Reservation {
                answer,
                receipt: Some(LogReceipt {
                    n,
                    at: RedisMicros::new(u64::try_from(at).unwrap_or(0)),
                    seq: u64::try_from(seq).unwrap_or(0),
                }),
            });
        }
        let answer = parse(reply, count)?;
        if answer.decision.is_admitted() {
            // An admission always names its entries.
            return Err(Error::Reply("a reservation without its entries".into()));
        }
        Ok(Reservation {
            answer,
            receipt: None,
        })
    }

    /// Record `n` entries of usage known after the work to `key` on Redis (one script
    /// call at Redis's `TIME`), never refused: the log past its limit refuses every
    /// request, one for no permits included, until enough entries have left the window
    /// ([`RedisSlidingLog`], "Costs known after the work"). The answer's wait is the exact
    /// wait of a request for one entry after it.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge`](crate::RedisGcra::try_charge).
    pub async fn try_record(&self, key: &str, n: u32) -> Result<ChargeAnswer, Error> {
        let reply = self.call_raw(key, n, None, &["2".to_owned()]).await?;
        self.parse_charge(&reply, n)
    }

    /// As [`RedisSlidingLog::try_record`] at the explicit time `now` on Redis's clock
    /// (tests, replays; no expiry is set).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge_at`](crate::RedisGcra::try_charge_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisMicros, RedisSlidingLog};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let log = RedisSlidingLog::new(redis, "1000/min".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// log.try_record_at("k", 900, t).await?;
    /// let later = t.saturating_add(Duration::from_secs(1));
    /// let over = log.try_record_at("k", 200, later).await?; // 1,100 in the window
    /// assert_eq!(over.charged.charged, 200);
    /// // A check of no permits waits until the first 900 leave, a minute after `t`.
    /// let check = log.try_decide_at("k", 0, later).await?;
    /// assert_eq!(check.decision.retry_after(), Some(Duration::from_secs(59)));
    /// # Ok(()) }
    /// ```
    pub async fn try_record_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<ChargeAnswer, Error> {
        let reply = self.call_raw(key, n, Some(now), &["2".to_owned()]).await?;
        self.parse_charge(&reply, n)
    }

    /// Settle the reservation `receipt` on `key` to its actual cost `actual` (one script
    /// call at Redis's `TIME`): below the estimate its last `n − actual` entries are
    /// removed (those still in the set; the state is then the one charging `actual` up
    /// front would have left), above it the excess is recorded as
    /// [`RedisSlidingLog::try_record`] records it. The answer's [`Charged`] is the excess
    /// charge's (0 at or below the estimate), with the exact wait of a request for one
    /// entry after the settle.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_settle`](crate::RedisGcra::try_settle).
    pub async fn try_settle(
        &self,
        key: &str,
        receipt: LogReceipt,
        actual: u32,
    ) -> Result<ChargeAnswer, Error> {
        self.settle_call(key, receipt, actual, None).await
    }

    /// As [`RedisSlidingLog::try_settle`] at the explicit time `at` on Redis's clock
    /// (tests, replays; no expiry is set).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_settle_at`](crate::RedisGcra::try_settle_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisMicros, RedisSlidingLog};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let log = RedisSlidingLog::new(redis, "100/min".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// let receipt = log.try_reserve_at("k", 80, t).await?.receipt.unwrap();
    /// let settled = log.try_settle_at("k", receipt, 130, t).await?; // 50 past the estimate
    /// assert_eq!(settled.charged.charged, 50);
    /// assert!(!log.try_decide_at("k", 0, t).await?.decision.is_admitted()); // 130 > 100
    /// # Ok(()) }
    /// ```
    pub async fn try_settle_at(
        &self,
        key: &str,
        receipt: LogReceipt,
        actual: u32,
        at: RedisMicros,
    ) -> Result<ChargeAnswer, Error> {
        self.settle_call(key, receipt, actual, Some(at)).await
    }

    async fn settle_call(
        &self,
        key: &str,
        receipt: LogReceipt,
        actual: u32,
        at: Option<RedisMicros>,
    ) -> Result<ChargeAnswer, Error> {
        let more = [
            "3".to_owned(),
            receipt.at.as_micros().to_string(),
            receipt.seq.to_string(),
            actual.to_string(),
        ];
        let reply = self.call_raw(key, receipt.n, at, &more).await?;
        self.parse_charge(&reply, actual.saturating_sub(receipt.n))
    }

    /// A record's or a settle's reply `{1, charged, wait_us, remaining, full_after_us,
    /// now_us}` for a charge of `n` entries.
    fn parse_charge(&self, reply: &Value, n: u32) -> Result<ChargeAnswer, Error> {
        let bad = || Error::Reply(format!("unexpected charge reply {reply:?}"));
        let [code, charged, wait, remaining, full, now] = ints::<6>(reply).ok_or_else(bad)?;
        let charged = u32::try_from(charged)
            .ok()
            .filter(|&c| c <= n && code == 1 && wait >= 0 && now >= 0)
            .ok_or_else(bad)?;
        let remaining = remaining.clamp(0, i64::from(u32::MAX)) as u32;
        Ok(ChargeAnswer {
            charged: Charged {
                charged,
                shortfall: n - charged,
                wait: micros(wait),
            },
            state: Snapshot::new(remaining, micros(full)),
            server_time: RedisMicros::new(now as u64),
        })
    }
}
