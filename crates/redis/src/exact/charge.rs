//! Forced charges on [`RedisGcra`]: usage measured after the work (bytes read, CPU time,
//! an LLM response's tokens), never refused by the limit: saturating at the burst plus the
//! debt ([`RedisGcra::charge`], a budget's), or recorded whole as debt
//! ([`RedisGcra::record`]).

use super::gcra::RedisGcra;
use super::gcra::{Numbers, Op};
use super::micros;
use crate::error::Error;
use crate::policy::{ChargeVerdict, Source};
use crate::time::RedisMicros;
use limitcore::{Charged, Snapshot};

/// What a forced charge on Redis did ([`RedisGcra::try_charge`]): the core's [`Charged`]
/// (µs resolution), the state the charge left and the server's time.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "10/s burst 5".parse()?, Policy::FailClosed)?
///     .with_max_debt(Duration::from_millis(500))?;
/// // A fresh key holds 5 permits and may owe 5 more: a charge of 12 records 10.
/// let answer = limit.try_charge("tenant", 12).await?;
/// assert_eq!((answer.charged.charged, answer.charged.shortfall), (10, 2));
/// assert_eq!(answer.charged.wait, Duration::from_millis(600)); // 1 s of backlog, 0.5 s span
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChargeAnswer {
    /// Permits charged, permits short (past `burst·T + D`), and the exact wait of a request
    /// for one permit now (zero if it would be admitted), in whole µs.
    pub charged: Charged,
    /// The key's state on Redis just after the charge (`remaining` 0 in debt).
    pub state: Snapshot,
    /// The time the script charged at: Redis's `TIME` (on Redis's clock), or the explicit
    /// time given.
    pub server_time: RedisMicros,
}

impl Numbers {
    /// The charge in the script's reply to one charge of `n` permits.
    pub(super) fn parse_charge(&self, value: &redis::Value, n: u32) -> Result<ChargeAnswer, Error> {
        let bad = || Error::Reply(format!("unexpected charge reply {value:?}"));
        let (now, items) = Numbers::items(value, 1)?;
        let [granted, wait, backlog] = items[0];
        let charged = u32::try_from(granted)
            .ok()
            .filter(|&c| c <= n)
            .ok_or_else(bad)?;
        if wait < 0 || now < 0 {
            return Err(bad());
        }
        let remaining = u32::try_from(self.remaining(backlog)).unwrap_or(u32::MAX);
        Ok(ChargeAnswer {
            charged: Charged {
                charged,
                shortfall: n - charged,
                wait: micros(wait),
            },
            state: Snapshot::new(remaining, micros(backlog)),
            server_time: RedisMicros::new(now as u64),
        })
    }
}

impl RedisGcra {
    /// Charge `n` permits to `key` on Redis (one script call), never refused by the limit;
    /// when Redis cannot answer within the deadline (or the breaker is open) the outage
    /// policy records it, or not ([`Policy`](crate::Policy), "Charges"): the verdict's
    /// source says which.
    ///
    /// The backlog grows by `min(n, ⌊(burst·T + D − backlog)/T⌋)` permits (a fresh key
    /// holds `burst`; under a debt policy it may owe `⌊D/T⌋` more, and fractions of `T`
    /// count); the rest is [`Charged::shortfall`]. The wait is the exact wait of a request
    /// for one permit after the charge. Charges count against the limit's bound as
    /// admissions do ([`RedisGcra`], "Contract").
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // 1 MB/s of reads in kB, charged after each read (TiKV's `consume_sample`).
    /// let reads = RedisGcra::new(redis, "1000/s burst 100".parse()?, Policy::FailLocal)?
    ///     .with_max_debt(Duration::from_secs(1))?;
    /// let charge = reads.charge("tenant-7", 64).await;
    /// if !charge.charged.wait.is_zero() {
    ///     tokio::time::sleep(charge.charged.wait).await; // back-pressure before the next read
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn charge(&self, key: &str, n: u32) -> ChargeVerdict {
        match self.try_charge(key, n).await {
            Ok(answer) => ChargeVerdict {
                charged: answer.charged,
                from_lease: 0,
                source: Source::Redis {
                    server_time: answer.server_time,
                },
            },
            Err(_) => self.charge_fallback(key, n),
        }
    }

    /// Charge `n` permits to `key` on Redis, at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// [`Error::CircuitOpen`], [`Error::Timeout`], [`Error::Redis`], [`Error::Reply`]: the
    /// charge may or may not have been recorded when the deadline passed (a script in
    /// flight runs to its end); it is never sent twice.
    pub async fn try_charge(&self, key: &str, n: u32) -> Result<ChargeAnswer, Error> {
        self.charge_call(key, n, None).await
    }

    /// As [`RedisGcra::try_charge`] at the explicit time `now` on Redis's clock (at most
    /// [`RedisMicros::MAX`]): for tests and replays; no expiry is set (see
    /// [`RedisGcra::try_decide_at`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge`]; [`Error::Redis`] (a script error) for `now` above
    /// [`RedisMicros::MAX`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "10/s burst 5".parse()?, Policy::FailClosed)?;
    /// let at = RedisMicros::new(1_750_000_000_000_000);
    /// let answer = limit.try_charge_at("replayed", 7, at).await?;
    /// assert_eq!((answer.charged.charged, answer.charged.shortfall), (5, 2));
    /// assert_eq!(answer.server_time, at);
    /// # Ok(()) }
    /// ```
    pub async fn try_charge_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<ChargeAnswer, Error> {
        self.charge_call(key, n, Some(now)).await
    }

    async fn charge_call(
        &self,
        key: &str,
        n: u32,
        now: Option<RedisMicros>,
    ) -> Result<ChargeAnswer, Error> {
        let reply = self.call_raw(key, Op::Charge, n, now).await?;
        self.numbers.parse_charge(&reply, n)
    }

    /// Record `n` permits of usage known after the work (an LLM response's tokens) to `key`
    /// on Redis (one script call, on Redis's clock), never refused and never cut at the
    /// maximum debt: the TAT moves to `max(TAT, now) + n·T` however far past the burst,
    /// and every later request, one for no permits included, is refused until the debt is
    /// paid back at the rate (the core's [`Refund::charge_at`](limitcore::Refund::charge_at)
    /// on GCRA). When Redis cannot answer within the deadline (or the breaker is open) the
    /// outage policy records it, or reports it short ([`Policy`](crate::Policy),
    /// "Charges"): the verdict's source says which.
    ///
    /// Unlike [`RedisGcra::charge`] (a budget's charge, saturating at `burst·T + D`), a
    /// record loses nothing: only a backlog past 2^52 µs (142 years of the rate) cannot be
    /// written, and that part is [`Charged::shortfall`]. The wait is the exact wait of a
    /// request for one permit after it, in µs. What it does to the bound is in
    /// [`leased`](crate::leased)'s docs, "Charges recorded past the limit".
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // 10,000 LLM tokens a minute per tenant; the response's tokens are known afterwards.
    /// let tokens = RedisGcra::new(redis, "10000/min".parse()?, Policy::FailLocal)?;
    /// if tokens.decide("tenant", 0).await.is_admitted() {   // a check with no cost
    ///     let used = 12_000; // the response, measured
    ///     let charge = tokens.record("tenant", used).await;
    ///     assert_eq!(charge.charged.charged, used); // all of it, 2,000 as debt
    ///     assert!(!tokens.decide("tenant", 0).await.is_admitted()); // until paid back
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn record(&self, key: &str, n: u32) -> ChargeVerdict {
        match self.try_record(key, n).await {
            Ok(answer) => ChargeVerdict {
                charged: answer.charged,
                from_lease: 0,
                source: Source::Redis {
                    server_time: answer.server_time,
                },
            },
            Err(_) => self.charge_fallback(key, n),
        }
    }

    /// Record `n` permits to `key` on Redis as [`RedisGcra::record`] does, at Redis's
    /// `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_charge`]: the record may or may not have been written when the
    /// deadline passed; it is never sent twice.
    pub async fn try_record(&self, key: &str, n: u32) -> Result<ChargeAnswer, Error> {
        self.record_call(key, n, None).await
    }

    /// As [`RedisGcra::try_record`] at the explicit time `now` on Redis's clock (at most
    /// [`RedisMicros::MAX`]): for tests and replays; no expiry is set (see
    /// [`RedisGcra::try_decide_at`]).
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
    /// let at = RedisMicros::new(1_750_000_000_000_000);
    /// let answer = limit.try_record_at("replayed", 7, at).await?;
    /// assert_eq!((answer.charged.charged, answer.charged.shortfall), (7, 0)); // 2 in debt
    /// assert_eq!(answer.charged.wait, Duration::from_millis(300)); // 700 ms, less 400 ms
    /// # Ok(()) }
    /// ```
    pub async fn try_record_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<ChargeAnswer, Error> {
        self.record_call(key, n, Some(now)).await
    }

    async fn record_call(
        &self,
        key: &str,
        n: u32,
        now: Option<RedisMicros>,
    ) -> Result<ChargeAnswer, Error> {
        let reply = self.call_raw(key, Op::Record, n, now).await?;
        self.numbers.parse_charge(&reply, n)
    }

    /// The outage policy's charge of `n` permits to `key` (Redis unreachable or the breaker
    /// open), with the fleet's last known size.
    pub(crate) fn charge_fallback(&self, key: &str, n: u32) -> ChargeVerdict {
        self.fallback.charge(key, n, self.redis().nodes())
    }
}
