//! [`RedisGcra`]: GCRA on Redis, one script call a decision, with an optional debt policy.

use super::{answer, int, micros, verdict, Answer, MAX_SPAN_US};
use crate::client::Redis;
use crate::error::Error;
use crate::policy::{Fallback, Policy, Verdict};
use crate::scripts::scripts;
use crate::time::RedisMicros;
use limitcore::{BudgetConfig, Decision, Denied, Mode, Quota};
use redis::Value;
use std::time::Duration;

/// GCRA (ATM Forum TM 4.0, virtual scheduling) on Redis: one key per limit holding the
/// theoretical arrival time in integer µs, decided by one script call at Redis's `TIME`;
/// with a debt policy ([`RedisGcra::with_max_debt`]) and forced charges
/// ([`RedisGcra::charge`]), the core's [`Budget`](limitcore::Budget) decisions.
///
/// # Contract
///
/// The core's [`Gcra`](limitcore::Gcra) contract, on Redis's clock, in µs (`T` is the
/// quota's emission interval rounded up to whole µs, [`gcra_micros`](crate::gcra_micros);
/// `S = burst·T`; `D` the maximum debt, 0 by default):
///
/// - `n ≤ burst` permits at `now` are admitted iff `max(TAT, now) + n·T ≤ now + S`; the TAT
///   then becomes `max(TAT, now) + n·T`.
/// - Without debt (the default) `n > burst` is
///   [`Denied::ExceedsCapacity`](limitcore::Denied::ExceedsCapacity). Under a debt policy
///   the capacity is `⌊(S + D)/T⌋` permits, and `burst < n ≤ capacity` is admitted iff the
///   key is full (`TAT ≤ now`), leaving `TAT = now + n·T`: in debt, later requests wait
///   until it is repaid at the rate; while the key is not full it is refused with the
///   exact wait `TAT − now`. Above the capacity: `ExceedsCapacity` with that capacity.
/// - `n = 0` writes nothing, and is admitted unless the key is in debt (`TAT − now > S`: a
///   recorded charge or an oversized admission took it past the burst's span), when it is
///   refused with the exact wait `TAT − now − S` (the core's check with no cost, Envoy's
///   `hits_addend: 0`). A denial writes nothing.
/// - A forced charge ([`RedisGcra::charge`]) is never refused by the limit: it adds
///   `min(n, ⌊(S + D − backlog)/T⌋)` permits and reports the rest as the shortfall (the
///   core's [`Budget`](limitcore::Budget)).
/// - A recorded charge ([`RedisGcra::record`]) and a reservation's settle
///   ([`RedisGcra::try_reserve`], [`RedisGcra::try_settle`]) are costs known after the
///   work: the charge, or the settle's excess over its estimate, is recorded whole as debt
///   past the burst, whatever `D` (the core's [`Refund::charge_at`](limitcore::Refund::charge_at)
///   and [`Refund::settle`](limitcore::Refund::settle) on GCRA); a settle below its
///   estimate gives back the unused tail at its own schedule position, less what a reading
///   since may have absorbed. Nothing is lost: only a backlog past 2^52 µs (142 years)
///   cannot be written, and that part is reported as the shortfall.
/// - `retry_after` is exact in µs, the script's resolution: `TIME` reads the server's
///   clock rounded down to the µs, so the wait is never early.
/// - In any window of length Δ the fleet consumes at most `B + ⌈(Δ + D)/T⌉ − 1` permits
///   per key (admissions and charges together), whatever the number of nodes (one state,
///   decided atomically by Redis); with `D = 0` that is GCRA's `B + ⌈Δ/T⌉ − 1`. Recorded
///   charges are never refused, so they can pass it; what they record past the limit is
///   debt that every later request waits out: the window's admissions plus everything it
///   consumed before its last admission stay within the bound. The proof is in
///   [`leased`](crate::leased)'s docs ("The bound", step (i), and "Charges recorded past
///   the limit").
/// - The key expires when its state becomes indistinguishable from a fresh one (`TAT ≤
///   now`: the TTL is `TAT − now`, rounded up to the ms): an idle key vanishes on its own,
///   a limited key never does.
/// - The sums are checked: `S + D ≤ 2^52` µs, times below 2^52 µs, all exact in the
///   doubles of Redis's Lua ([`scripts`](crate::scripts), "Numbers").
///
/// Every limiter on one key (exact or leased, on every node) must use the same quota and
/// debt: the bound is the one of the configuration they share.
///
/// # Async use (an HTTP layer)
///
/// The exact mode is asynchronous (a round trip), so it does not implement the core's
/// synchronous [`KeyedRateLimiter`](limitcore::KeyedRateLimiter) but its asynchronous seam,
/// [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter) (with this crate's
/// [`Error`]), which code written once for both (an HTTP layer) awaits: the decision's
/// `state` gives the `RateLimit` headers as a synchronous limiter's does. How the outage
/// policy relates to the seam's `Err` is [`Policy`]'s "The asynchronous seam". The
/// [`LeasedLimiter`](crate::LeasedLimiter) is the synchronous one.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "1000/s burst 50".parse()?, Policy::FailLocal)?;
/// let verdict = limit.decide("{tenant-42}:api", 1).await;
/// if let Some(wait) = verdict.decision.retry_after() {
///     println!("429, Retry-After: {}", wait.as_secs_f64().ceil());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedisGcra {
    redis: Redis,
    quota: Quota,
    pub(super) numbers: Numbers,
    prefix: String,
    pub(super) fallback: Fallback,
}

/// A limit's numbers on Redis, µs: what the GCRA script is called with and what its replies
/// are read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Numbers {
    /// `T`, µs.
    pub(super) interval_us: u64,
    pub(super) burst: u32,
    /// `D`, µs (0: no debt).
    pub(super) debt_us: u64,
    /// The most permits one request may take: the burst, or `⌊(S + D)/T⌋` under debt
    /// (at most `u32::MAX`).
    pub(super) capacity: u32,
}

/// The GCRA script's operations (its fourth argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Decide,
    UpTo,
    Charge,
    /// A charge recorded as debt past the burst, never refused ([`RedisGcra::try_record`]).
    Record,
}

impl Numbers {
    /// The numbers of `T = interval_us`, `burst` with up to `debt_us` of debt.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if `burst·T + D` exceeds [`MAX_SPAN_US`].
    fn new(interval_us: u64, burst: u32, debt_us: u64) -> Result<Numbers, String> {
        let ceiling = u128::from(interval_us) * u128::from(burst) + u128::from(debt_us);
        if ceiling > u128::from(MAX_SPAN_US) {
            return Err(format!(
                "burst × interval + debt = {ceiling} µs exceeds 2^52 µs"
            ));
        }
        // ≤ 2^52 / 1: in a u64; the burst at least.
        let most = (ceiling as u64) / interval_us;
        Ok(Numbers {
            interval_us,
            burst,
            debt_us,
            capacity: u32::try_from(most).unwrap_or(u32::MAX).max(burst),
        })
    }

    /// `S = burst·T`, µs.
    pub(super) fn span(&self) -> u64 {
        u64::from(self.burst) * self.interval_us
    }

    /// The script's arguments for the requests `ns` (in order) on one key.
    pub(super) fn args(
        &self,
        op: Op,
        ns: impl IntoIterator<Item = u32>,
        now: Option<RedisMicros>,
    ) -> Vec<String> {
        let op = match op {
            Op::Decide => "0",
            Op::UpTo => "1",
            Op::Charge => "2",
            Op::Record => "3",
        };
        let mut args = vec![
            self.interval_us.to_string(),
            self.burst.to_string(),
            self.debt_us.to_string(),
            op.to_owned(),
            now.map(|t| t.as_micros().to_string()).unwrap_or_default(),
        ];
        args.extend(ns.into_iter().map(|n| n.to_string()));
        args
    }

    /// The script's reply to `count` requests on one key, `{now_us, granted, retry_us,
    /// backlog_us, …}` (see [`scripts`](crate::scripts)): the time and each request's three
    /// integers (`backlog` at least 0).
    pub(super) fn items(value: &Value, count: usize) -> Result<(i64, Vec<[i64; 3]>), Error> {
        let bad = || Error::Reply(format!("unexpected script reply {value:?}"));
        let Value::Array(items) = value else {
            return Err(bad());
        };
        if items.len() != 1 + 3 * count {
            return Err(bad());
        }
        let now = int(&items[0]).ok_or_else(bad)?;
        items[1..]
            .chunks_exact(3)
            .map(
                |group| match (int(&group[0]), int(&group[1]), int(&group[2])) {
                    (Some(granted), Some(retry), Some(backlog)) if backlog >= 0 => {
                        Ok([granted, retry, backlog])
                    }
                    _ => Err(bad()),
                },
            )
            .collect::<Result<_, _>>()
            .map(|items| (now, items))
    }

    /// The permits remaining at a backlog of `backlog_us`, as the script would count them:
    /// `⌊(S − backlog)/T⌋`, 0 in debt.
    pub(super) fn remaining(&self, backlog_us: i64) -> i64 {
        let backlog = u64::try_from(backlog_us).unwrap_or(0);
        (self.span().saturating_sub(backlog) / self.interval_us) as i64
    }

    /// The decisions in the script's reply to `count` requests on one key, the permits
    /// remaining computed from each backlog.
    pub(super) fn parse(&self, value: Value, count: usize) -> Result<Vec<Answer>, Error> {
        let (now, items) = Numbers::items(&value, count)?;
        items
            .into_iter()
            .map(|[granted, retry, backlog]| {
                let result = match retry {
                    0 => Ok(()),
                    -1 => Err(Denied::ExceedsCapacity {
                        capacity: self.capacity,
                    }),
                    r if r > 0 => Err(Denied::RateLimited {
                        retry_after: micros(r),
                    }),
                    _ => return Err(Error::Reply(format!("unexpected script reply {value:?}"))),
                };
                Ok(answer(
                    result,
                    self.remaining(backlog),
                    backlog,
                    granted,
                    now,
                ))
            })
            .collect()
    }
}

impl RedisGcra {
    /// The limit `quota` per key on `redis`, deciding by `policy` when Redis cannot. No
    /// debt: a request above the burst is refused ([`RedisGcra::with_max_debt`] changes
    /// that). Keys are stored as `lc:gcra:` + the key (see [`RedisGcra::with_prefix`]).
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if the quota cannot be represented in µs
    /// ([`gcra_micros`](crate::gcra_micros)).
    pub fn new(redis: Redis, quota: Quota, policy: Policy) -> Result<Self, Error> {
        let (interval_us, burst) = super::gcra_micros(&quota)?;
        let numbers = Numbers::new(interval_us, burst, 0).map_err(Error::Quota)?;
        let cooldown = redis.config().get_cooldown();
        Ok(RedisGcra {
            redis,
            quota,
            numbers,
            prefix: "lc:gcra:".to_owned(),
            fallback: Fallback::new(policy, quota, cooldown, "lc:gcra:"),
        })
    }

    /// The limit of a core budget's configuration: its quota, with its debt
    /// ([`RedisGcra::with_max_debt`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::new`] and [`RedisGcra::with_max_debt`], and [`Error::Quota`] for a
    /// mode other than [`Mode::Enabled`] (Redis has no disabled or paused limit: use the
    /// outage policy, or no limiter).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore::BudgetConfig;
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // CockroachDB's "large request": 100 RU/s, 1000 at once, 10 s of debt.
    /// let config = BudgetConfig::new("100/s burst 1000".parse()?).max_debt(Duration::from_secs(10));
    /// let limit = RedisGcra::from_budget(redis, &config, Policy::FailLocal)?;
    /// assert_eq!(limit.capacity(), 2000);
    /// assert!(limit.decide("tenant", 1500).await.is_admitted()); // full: into debt
    /// # Ok(()) }
    /// ```
    pub fn from_budget(redis: Redis, config: &BudgetConfig, policy: Policy) -> Result<Self, Error> {
        if config.mode != Mode::Enabled {
            return Err(Error::Quota(format!(
                "{}: a Redis limit is always enabled (mode {:?})",
                config.quota, config.mode
            )));
        }
        RedisGcra::new(redis, config.quota, policy)?.with_max_debt(config.get_max_debt())
    }

    /// The same limit with a debt policy: up to `max_debt` of backlog beyond the burst
    /// (rounded down to whole µs: never more debt than given). A request of `burst < n ≤
    /// ⌊(burst·T + D)/T⌋` permits is then admitted as soon as the key is full and leaves it
    /// in debt, and forced charges may run the backlog up to `burst·T + D` (see the type's
    /// "Contract"). Zero: no debt, the default. The outage policy's local limit gets the
    /// same debt ([`Policy`], `FailLocal`).
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if `burst·T + D` exceeds [`MAX_SPAN_US`] (2^52 µs, where the
    /// script's sums would stop being exact).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // 10 MB/s of compaction in 1 kB permits, 100 kB at once, 2 s of debt.
    /// let limit = RedisGcra::new(redis, "10000/s burst 100".parse()?, Policy::FailLocal)?
    ///     .with_max_debt(Duration::from_secs(2))?;
    /// assert_eq!(limit.capacity(), 20_100);
    /// # Ok(()) }
    /// ```
    pub fn with_max_debt(mut self, max_debt: Duration) -> Result<Self, Error> {
        let debt_us = u64::try_from(max_debt.as_micros()).unwrap_or(u64::MAX);
        let numbers =
            Numbers::new(self.numbers.interval_us, self.numbers.burst, debt_us).map_err(|why| {
                Error::Quota(format!("{} with {max_debt:?} of debt: {why}", self.quota))
            })?;
        self.numbers = numbers;
        self.fallback = self
            .fallback
            .with_debt(Duration::from_micros(debt_us), numbers.capacity);
        Ok(self)
    }

    /// Store keys as `prefix` + key. In a cluster, put a hash tag in the key (`{tenant}`),
    /// not in the prefix.
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

    /// The emission interval on Redis, µs.
    pub fn interval_us(&self) -> u64 {
        self.numbers.interval_us
    }

    /// The maximum debt on Redis (whole µs; zero: none).
    pub fn max_debt(&self) -> Duration {
        Duration::from_micros(self.numbers.debt_us)
    }

    /// The most permits one request may take: the burst, or `⌊(burst·T + D)/T⌋` under a
    /// debt policy (at most `u32::MAX`).
    pub fn capacity(&self) -> u32 {
        self.numbers.capacity
    }

    /// The Redis key holding `key`'s TAT.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The Redis handle.
    pub fn redis(&self) -> &Redis {
        &self.redis
    }

    /// One script call of `op` on `n` for `key`: the reply.
    pub(super) async fn call_raw(
        &self,
        key: &str,
        op: Op,
        n: u32,
        now: Option<RedisMicros>,
    ) -> Result<Value, Error> {
        let redis_key = self.redis_key(key);
        self.redis
            .eval(
                &scripts().gcra,
                &[&redis_key],
                &self.numbers.args(op, [n], now),
            )
            .await
    }

    async fn call(
        &self,
        key: &str,
        n: u32,
        upto: bool,
        now: Option<RedisMicros>,
    ) -> Result<Answer, Error> {
        let op = if upto { Op::UpTo } else { Op::Decide };
        let reply = self.call_raw(key, op, n, now).await?;
        let mut answers = self.numbers.parse(reply, 1)?;
        Ok(answers.remove(0))
    }

    /// Decide `n` permits for `key` on Redis; when Redis cannot answer within the deadline
    /// (or the breaker is open) the outage policy decides (with the same capacity and
    /// debt, [`Policy`]).
    pub async fn decide(&self, key: &str, n: u32) -> Verdict {
        let answer = self.try_decide(key, n).await;
        verdict(answer, || self.fall_back(key, n))
    }

    /// The asynchronous seam's decision (see [`Policy`], "The asynchronous seam"): Redis's,
    /// the outage policy's, or under [`Policy::Propagate`] the error.
    pub(super) async fn decide_or_error(&self, key: &str, n: u32) -> Result<Decision, Error> {
        let answer = self.try_decide(key, n).await;
        super::settle(answer, self.fallback.policy(), || self.fall_back(key, n))
    }

    /// Decide `n` permits for `key` on Redis, at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// [`Error::CircuitOpen`], [`Error::Timeout`], [`Error::Redis`], [`Error::Reply`].
    pub async fn try_decide(&self, key: &str, n: u32) -> Result<Answer, Error> {
        self.call(key, n, false, None).await
    }

    /// The outage policy's decision on `n` permits for `key` (Redis unreachable or the
    /// breaker open), with the fleet's last known size.
    pub(crate) fn fall_back(&self, key: &str, n: u32) -> Verdict {
        self.fallback.decide(key, n, self.redis.nodes())
    }

    /// Decide `n` permits for `key` at the explicit time `now` on Redis's clock (at most
    /// [`RedisMicros::MAX`]) instead of Redis's `TIME`: for tests and replays. Such
    /// decisions set no expiry (a TTL is measured on the server's clock); do not mix them
    /// with clock-time decisions on one key.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`]; [`Error::Redis`] (a script error) for `now` above
    /// [`RedisMicros::MAX`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "10/s burst 2".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// assert!(limit.try_decide_at("replay", 2, t).await?.decision.is_admitted());
    /// // 100 ms later (on the replay's clock) one permit has come back.
    /// let later = t.saturating_add(std::time::Duration::from_millis(100));
    /// assert!(limit.try_decide_at("replay", 1, later).await?.decision.is_admitted());
    /// # Ok(()) }
    /// ```
    pub async fn try_decide_at(
        &self,
        key: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<Answer, Error> {
        self.call(key, n, false, Some(now)).await
    }

    /// Take up to `want` cells for `key` (at least 1, at most the burst), as many as
    /// conform now: the lease of the leased mode. A refusal (`granted == 0`) carries the
    /// exact wait for one cell. A lease never runs into debt: it takes only what fits
    /// below the burst span.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`].
    pub async fn try_take_up_to(&self, key: &str, want: u32) -> Result<Answer, Error> {
        self.call(key, want, true, None).await
    }

    /// As [`RedisGcra::try_take_up_to`] at the explicit time `now` on Redis's clock (tests).
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
    /// assert_eq!(limit.try_take_up_to_at("lease", 8, t).await?.granted, 5); // all that conform
    /// # Ok(()) }
    /// ```
    pub async fn try_take_up_to_at(
        &self,
        key: &str,
        want: u32,
        now: RedisMicros,
    ) -> Result<Answer, Error> {
        self.call(key, want, true, Some(now)).await
    }

    /// Decide several requests in one round trip, in order: the requests on one key go
    /// in one script call (decided one after another at one instant of Redis's clock, the
    /// key read and written once), the calls for different keys in one pipeline. Each
    /// answer is the one the request would get alone at that instant after the requests
    /// before it on its key.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`], for the whole batch.
    pub async fn try_decide_many(&self, requests: &[(&str, u32)]) -> Result<Vec<Answer>, Error> {
        self.many(requests, None).await
    }

    /// As [`RedisGcra::try_decide_many`] at the explicit time `now` on Redis's clock (tests,
    /// replays; see [`RedisGcra::try_decide_at`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`], for the whole batch.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "10/s burst 3".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// let answers = limit.try_decide_many_at(&[("a", 2), ("b", 1), ("a", 2)], t).await?;
    /// assert!(answers[0].decision.is_admitted() && answers[1].decision.is_admitted());
    /// assert!(!answers[2].decision.is_admitted()); // "a" has one permit left at `t`
    /// # Ok(()) }
    /// ```
    pub async fn try_decide_many_at(
        &self,
        requests: &[(&str, u32)],
        now: RedisMicros,
    ) -> Result<Vec<Answer>, Error> {
        self.many(requests, Some(now)).await
    }

    async fn many(
        &self,
        requests: &[(&str, u32)],
        now: Option<RedisMicros>,
    ) -> Result<Vec<Answer>, Error> {
        // The requests' positions grouped by key, keys in order of first appearance.
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, (key, _)) in requests.iter().enumerate() {
            match groups.iter_mut().find(|(k, _)| k == key) {
                Some((_, at)) => at.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        let keys: Vec<String> = groups.iter().map(|(k, _)| self.redis_key(k)).collect();
        let calls: Vec<(Vec<&str>, Vec<String>)> = groups
            .iter()
            .zip(&keys)
            .map(|((_, at), key)| {
                let ns = at.iter().map(|&i| requests[i].1);
                (vec![key.as_str()], self.numbers.args(Op::Decide, ns, now))
            })
            .collect();
        let replies = self.redis.eval_pipeline(&scripts().gcra, &calls).await?;
        let mut out: Vec<Option<Answer>> = vec![None; requests.len()];
        for (reply, (_, at)) in replies.into_iter().zip(&groups) {
            let answers = self.numbers.parse(reply, at.len())?;
            for (answer, &i) in answers.into_iter().zip(at) {
                out[i] = Some(answer);
            }
        }
        out.into_iter()
            .map(|a| a.ok_or_else(|| Error::Reply("a request got no answer".into())))
            .collect()
    }
}
