//! Reservations on Redis settled to their actual cost: an estimate is admitted before the
//! work ([`RedisGcra::try_reserve`], [`RedisSlidingLog::try_reserve`](crate::RedisSlidingLog::try_reserve)),
//! held while it runs, and settled once its cost is known ([`RedisGcra::try_settle`]): the
//! unused part given back, the excess recorded as debt. Reserve-then-settle never lets the
//! fleet overshoot a limit the way check-then-report does: the estimate is held meanwhile.

use super::charge::ChargeAnswer;
use super::gcra::RedisGcra;
use super::Answer;
use crate::error::Error;
use crate::policy::{ChargeVerdict, Source};
use crate::scripts::scripts;
use crate::time::RedisMicros;

/// A reservation's answer: the decision, and on admission the receipt to settle it with
/// (exactly once: a receipt is neither `Clone` nor `Copy`).
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let tokens = RedisGcra::new(redis, "10000/min".parse()?, Policy::FailClosed)?;
/// let reservation = tokens.try_reserve("tenant", 100).await?;
/// match reservation.receipt {
///     Some(receipt) => { tokens.try_settle("tenant", receipt, 37).await?; }
///     None => println!("429, retry after {:?}", reservation.answer.decision.retry_after()),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Reservation<R> {
    /// The decision on the estimate, with the state it left and Redis's time.
    pub answer: Answer,
    /// What to settle (`Some` iff the estimate was admitted).
    pub receipt: Option<R>,
}

/// A reservation on a [`RedisGcra`] key: `n` permits whose schedule started at `mark`
/// (µs on Redis's clock: `max(TAT, now)` when they were admitted). Settled exactly once by
/// [`RedisGcra::try_settle`], which consumes it; it names no key, so settle it on the key
/// it was reserved on.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "10/s burst 5".parse()?, Policy::FailClosed)?;
/// let t = RedisMicros::new(1_750_000_000_000_000);
/// let receipt = limit.try_reserve_at("k", 3, t).await?.receipt.unwrap();
/// assert_eq!((receipt.n(), receipt.mark()), (3, t)); // a fresh key: its schedule starts now
/// # Ok(()) }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a reservation holds its permits until it is settled"]
pub struct GcraReceipt {
    n: u32,
    mark: RedisMicros,
}

impl GcraReceipt {
    /// Permits reserved.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// Where their schedule started, µs on Redis's clock.
    pub fn mark(&self) -> RedisMicros {
        self.mark
    }
}

/// A reservation on a [`RedisSlidingLog`](crate::RedisSlidingLog) key: `n` entries written
/// at `at` (µs on Redis's clock) with the sequence numbers `seq .. seq + n`. Settled exactly
/// once by [`RedisSlidingLog::try_settle`](crate::RedisSlidingLog::try_settle), which
/// consumes it.
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
/// let receipt = log.try_reserve_at("k", 10, t).await?.receipt.unwrap();
/// assert_eq!((receipt.n(), receipt.at()), (10, t));
/// # Ok(()) }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a reservation holds its entries until it is settled"]
pub struct LogReceipt {
    pub(super) n: u32,
    pub(super) at: RedisMicros,
    pub(super) seq: u64,
}

impl LogReceipt {
    /// Entries reserved.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The time they were written at, µs on Redis's clock.
    pub fn at(&self) -> RedisMicros {
        self.at
    }
}

impl RedisGcra {
    /// Reserve `n` permits for `key` on Redis (an estimate of a cost known only after the
    /// work: an LLM request's tokens), one script call at Redis's `TIME`: decided exactly as
    /// [`RedisGcra::try_decide`] decides `n`, and on admission the receipt that
    /// [`RedisGcra::try_settle`] settles to the actual cost.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`].
    pub async fn try_reserve(&self, key: &str, n: u32) -> Result<Reservation<GcraReceipt>, Error> {
        let answer = self.try_decide(key, n).await?;
        Ok(self.reservation(answer, n))
    }

    /// As [`RedisGcra::try_reserve`] at the explicit time `now` on Redis's clock (tests,
    /// replays; no expiry is set, see [`RedisGcra::try_decide_at`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "10/s burst 5".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// assert!(limit.try_reserve_at("k", 5, t).await?.receipt.is_some());
    /// assert!(limit.try_reserve_at("k", 1, t).await?.receipt.is_none()); // held meanwhile
    /// # Ok(()) }
    /// ```
    pub async fn try_reserve_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<Reservation<GcraReceipt>, Error> {
        let answer = self.try_decide_at(key, n, now).await?;
        Ok(self.reservation(answer, n))
    }

    /// The reservation of `n` permits that got `answer`: the receipt's mark is where the
    /// admission's schedule started, `now + backlog − n·T` (the backlog the admission left
    /// less its own cost; for an oversized admission under debt, `now`).
    fn reservation(&self, answer: Answer, n: u32) -> Reservation<GcraReceipt> {
        let receipt = answer.decision.is_admitted().then(|| {
            let backlog =
                u64::try_from(answer.decision.state.full_after.as_micros()).unwrap_or(u64::MAX);
            let cost = u64::from(n) * self.interval_us();
            GcraReceipt {
                n,
                mark: RedisMicros::new(
                    (answer.server_time.as_micros() + backlog).saturating_sub(cost),
                ),
            }
        });
        Reservation { answer, receipt }
    }

    /// Settle the reservation `receipt` on `key` to its actual cost `actual` (one script
    /// call at Redis's `TIME`): the core's [`Refund::settle`](limitcore::Refund::settle) on
    /// GCRA, in µs on Redis's clock.
    ///
    /// - `actual > n`: the excess `actual − n` is recorded whole as debt, as
    ///   [`RedisGcra::record`] records it (never refused, never cut at the maximum debt;
    ///   only a backlog past 2^52 µs is short, and reported).
    /// - `actual < n`: the unused tail, `n − actual` permits whose schedule starts at
    ///   `mark + actual·T`, is given back, less what a reading since then may have absorbed
    ///   (`min((n − actual)·T, now − mark − actual·T)`): exact at the reservation's own
    ///   time, and never more permissive than charging `actual` up front.
    /// - `actual = n`: nothing changes.
    ///
    /// The answer's [`Charged`](limitcore::Charged) is the excess charge's (`charged` 0 at or below the
    /// estimate), with the exact wait of a request for one permit after the settle.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge`]. A settle whose call failed may or may not have been
    /// applied; it is never sent twice, and the receipt is spent either way (a refund lost
    /// is stricter, never looser).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let tokens = RedisGcra::new(redis, "10000/min".parse()?, Policy::FailClosed)?;
    /// if let Some(receipt) = tokens.try_reserve("tenant", 100).await?.receipt {
    ///     let used = 42; // the response's tokens
    ///     let settled = tokens.try_settle("tenant", receipt, used).await?;
    ///     assert_eq!(settled.charged.charged, 0); // 58 given back
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_settle(
        &self,
        key: &str,
        receipt: GcraReceipt,
        actual: u32,
    ) -> Result<ChargeAnswer, Error> {
        self.settle_call(key, receipt, actual, None).await
    }

    /// As [`RedisGcra::try_settle`] at the explicit time `at` on Redis's clock (tests,
    /// replays; no expiry is set, see [`RedisGcra::try_decide_at`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge_at`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "10/s burst 5".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// let receipt = limit.try_reserve_at("k", 5, t).await?.receipt.unwrap();
    /// let settled = limit.try_settle_at("k", receipt, 8, t).await?; // 3 past the estimate
    /// assert_eq!(settled.charged.charged, 3);
    /// assert_eq!(settled.charged.wait, Duration::from_millis(400)); // 800 ms of backlog
    /// # Ok(()) }
    /// ```
    pub async fn try_settle_at(
        &self,
        key: &str,
        receipt: GcraReceipt,
        actual: u32,
        at: RedisMicros,
    ) -> Result<ChargeAnswer, Error> {
        self.settle_call(key, receipt, actual, Some(at)).await
    }

    /// Settle `receipt` on `key` as [`RedisGcra::try_settle`] does; when Redis cannot
    /// answer within the deadline (or the breaker is open), the excess over the estimate,
    /// if any, goes to the outage policy as a charge ([`Policy`](crate::Policy),
    /// "Charges"), and nothing is given back (stricter, never looser): the verdict's source
    /// says which.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let tokens = RedisGcra::new(redis, "10000/min".parse()?, Policy::FailLocal)?;
    /// if let Ok(reservation) = tokens.try_reserve("tenant", 100).await {
    ///     if let Some(receipt) = reservation.receipt {
    ///         let settled = tokens.settle("tenant", receipt, 130).await;
    ///         assert_eq!(settled.charged.charged + settled.charged.shortfall, 30);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self, key: &str, receipt: GcraReceipt, actual: u32) -> ChargeVerdict {
        let excess = actual.saturating_sub(receipt.n);
        match self.try_settle(key, receipt, actual).await {
            Ok(answer) => ChargeVerdict {
                charged: answer.charged,
                from_lease: 0,
                source: Source::Redis {
                    server_time: answer.server_time,
                },
            },
            // A charge of nothing when the settle gave back: the policy's wait, no record.
            Err(_) => self.charge_fallback(key, excess),
        }
    }

    async fn settle_call(
        &self,
        key: &str,
        receipt: GcraReceipt,
        actual: u32,
        at: Option<RedisMicros>,
    ) -> Result<ChargeAnswer, Error> {
        let numbers = self.numbers;
        let args = [
            numbers.interval_us.to_string(),
            numbers.burst.to_string(),
            numbers.debt_us.to_string(),
            "4".to_owned(),
            at.map(|t| t.as_micros().to_string()).unwrap_or_default(),
            receipt.n.to_string(),
            receipt.mark.as_micros().to_string(),
            actual.to_string(),
        ];
        let redis_key = self.redis_key(key);
        let reply = self
            .redis()
            .eval(&scripts().gcra, &[&redis_key], &args)
            .await?;
        numbers.parse_charge(&reply, actual.saturating_sub(receipt.n))
    }
}
