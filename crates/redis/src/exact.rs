//! The exact limits: every decision is one script call on Redis (one round trip), so the
//! whole fleet shares one state per key and the contract is the core's, on Redis's clock.

use crate::client::Redis;
use crate::policy::{Charge, Fallback, Policy, Source, Verdict};
use crate::scripts::{scripts, Script};
use crate::Error;
use limitcore::{Decision, Denied, Quota, Snapshot};
use redis::Value;
use std::time::Duration;

/// `2^52` µs: the largest burst span (and explicit time) the scripts accept, so that
/// every sum they form stays exact in a double (below 2^53).
pub const MAX_SPAN_US: u64 = 1 << 52;

/// A script's answer: the decision with the state Redis left, the cells taken and the
/// server's time.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "10/s".parse()?, Policy::FailClosed)?;
/// let answer = limit.try_decide("k", 4).await?;
/// assert_eq!(answer.granted, 4);
/// assert_eq!(answer.decision.state.remaining, 6);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Answer {
    /// The decision; its `state` is the key's state on Redis just after it.
    pub decision: Decision,
    /// Cells taken (`n` on admission, 0 on refusal; a lease may take fewer than asked).
    pub granted: u32,
    /// The time the script decided at: Redis's `TIME` in µs since the Unix epoch, or the
    /// explicit time given.
    pub server_time_us: u64,
}

/// The verdict of a script call: Redis's answer, or the outage policy's (`fallback`) when
/// Redis gave none.
fn verdict(answer: Result<Answer, Error>, fallback: impl FnOnce() -> Verdict) -> Verdict {
    match answer {
        Ok(answer) => Verdict {
            decision: answer.decision,
            source: Source::Redis {
                server_time_us: answer.server_time_us,
            },
        },
        Err(_) => fallback(),
    }
}

/// Parse a sliding-log or all-or-nothing script's reply `{code, granted, retry_us,
/// remaining, full_after_us, now_us}` (see [`scripts`](crate::scripts)).
pub(crate) fn parse(value: Value, capacity: u32) -> Result<Answer, Error> {
    let bad = |v: &Value| Error::Reply(format!("unexpected script reply {v:?}"));
    let [code, granted, retry, remaining, full, now] =
        ints::<6>(&value).ok_or_else(|| bad(&value))?;
    let result = match code {
        1 => Ok(()),
        0 => Err(Denied::RateLimited {
            retry_after: micros(retry),
        }),
        -1 => Err(Denied::ExceedsCapacity { capacity }),
        _ => return Err(bad(&value)),
    };
    Ok(answer(result, remaining, full, granted, now))
}

/// Parse the GCRA script's reply to `count` requests on one key: `{now_us, granted,
/// retry_us, backlog_us, …}` (see [`scripts`](crate::scripts)), the permits remaining
/// computed from each backlog as the script would (`⌊(burst·T − backlog)/T⌋`).
fn parse_gcra(value: Value, burst: u32, t_us: u64, count: usize) -> Result<Vec<Answer>, Error> {
    let bad = |v: &Value| Error::Reply(format!("unexpected script reply {v:?}"));
    let Value::Array(items) = &value else {
        return Err(bad(&value));
    };
    if items.len() != 1 + 3 * count {
        return Err(bad(&value));
    }
    let now = int(&items[0]).ok_or_else(|| bad(&value))?;
    let span = u64::from(burst) * t_us;
    items[1..]
        .chunks_exact(3)
        .map(|group| {
            let (Some(granted), Some(retry), Some(backlog)) =
                (int(&group[0]), int(&group[1]), int(&group[2]))
            else {
                return Err(bad(&value));
            };
            let result = match retry {
                0 => Ok(()),
                -1 => Err(Denied::ExceedsCapacity { capacity: burst }),
                r if r > 0 => Err(Denied::RateLimited {
                    retry_after: micros(r),
                }),
                _ => return Err(bad(&value)),
            };
            let remaining = span.saturating_sub(backlog.max(0) as u64) / t_us.max(1);
            Ok(answer(result, remaining as i64, backlog, granted, now))
        })
        .collect()
}

/// The first `N` integers of an array reply of exactly `N`.
fn ints<const N: usize>(value: &Value) -> Option<[i64; N]> {
    let Value::Array(items) = value else {
        return None;
    };
    if items.len() != N {
        return None;
    }
    let mut out = [0i64; N];
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = int(item)?;
    }
    Some(out)
}

/// An integer reply's value.
fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// A non-negative number of µs as a duration (negatives, which no script returns, as 0).
fn micros(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

/// An answer from its parts (µs and counts as the scripts return them).
fn answer(
    result: Result<(), Denied>,
    remaining: i64,
    full_us: i64,
    granted: i64,
    now_us: i64,
) -> Answer {
    Answer {
        decision: Decision {
            result,
            state: Snapshot::new(
                remaining.clamp(0, i64::from(u32::MAX)) as u32,
                micros(full_us),
            ),
        },
        granted: granted.clamp(0, i64::from(u32::MAX)) as u32,
        server_time_us: now_us.max(0) as u64,
    }
}

/// The GCRA numbers of a quota on Redis: the emission interval in whole µs, rounded up
/// (so the rate enforced is never faster than the quota's; the difference is below
/// `1 µs / T` relative), and the burst.
///
/// # Errors
///
/// [`Error::Quota`] if the interval is below 1 µs (a rate above 10^6 per second) or the
/// burst span `burst × T` exceeds [`MAX_SPAN_US`].
pub fn gcra_micros(quota: &Quota) -> Result<(u64, u32), Error> {
    let ns = quota.emission_interval_ns();
    if ns < 1_000 {
        return Err(Error::Quota(format!(
            "{quota}: emission interval {ns} ns is below the scripts' resolution of 1 µs"
        )));
    }
    let t = ns.div_ceil(1_000);
    if u128::from(t) * u128::from(quota.burst()) > u128::from(MAX_SPAN_US) {
        return Err(Error::Quota(format!(
            "{quota}: burst × interval exceeds 2^52 µs"
        )));
    }
    Ok((t, quota.burst()))
}

/// GCRA (ATM Forum TM 4.0, virtual scheduling) on Redis: one key per limit holding the
/// theoretical arrival time in integer µs, decided by one script call at Redis's `TIME`.
///
/// # Contract
///
/// The core's [`Gcra`](limitcore::Gcra) contract, on Redis's clock, in µs:
///
/// - `n` permits at `now` are admitted iff `max(TAT, now) + n·T ≤ now + burst·T`; the TAT
///   then becomes `max(TAT, now) + n·T`. `T` is the quota's emission interval rounded up
///   to whole µs ([`gcra_micros`]).
/// - `n = 0` succeeds and writes nothing; `n > burst` is [`Denied::ExceedsCapacity`]; a
///   denial writes nothing.
/// - `retry_after` is exact in µs, the script's resolution: `TIME` reads the server's
///   clock rounded down to the µs, so the wait is never early.
/// - In any window of length Δ the fleet is admitted at most `burst + ⌈Δ/T⌉ − 1` permits
///   per key, whatever the number of nodes (one state, decided atomically by Redis).
/// - The key expires when its state becomes indistinguishable from a fresh one (`TAT ≤
///   now`: the TTL is `TAT − now`, rounded up to the ms): an idle key vanishes on its own,
///   a limited key never does.
/// - The sums are checked: `burst·T ≤ 2^52` µs, times below 2^52 µs, all exact in the
///   doubles of Redis's Lua.
///
/// # Async use (an HTTP layer)
///
/// The exact mode is asynchronous (a round trip), so it does not implement the core's
/// synchronous [`KeyedRateLimiter`](limitcore::KeyedRateLimiter); a tower service calls
/// [`RedisGcra::decide`] in its `call` future and maps the [`Verdict`]'s decision to the
/// response exactly as it maps a `KeyedRateLimiter`'s (`Decision::state` gives the
/// `RateLimit` headers). The [`LeasedLimiter`](crate::LeasedLimiter) is the synchronous
/// one.
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
    interval_us: u64,
    prefix: String,
    fallback: Fallback,
}

impl RedisGcra {
    /// The limit `quota` per key on `redis`, deciding by `policy` when Redis cannot. Keys
    /// are stored as `lc:gcra:` + the key (see [`RedisGcra::with_prefix`]).
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if the quota cannot be represented in µs ([`gcra_micros`]).
    pub fn new(redis: Redis, quota: Quota, policy: Policy) -> Result<Self, Error> {
        let (interval_us, _) = gcra_micros(&quota)?;
        let cooldown = redis.config().get_cooldown();
        Ok(RedisGcra {
            redis,
            quota,
            interval_us,
            prefix: "lc:gcra:".to_owned(),
            fallback: Fallback::new(policy, quota, cooldown),
        })
    }

    /// Store keys as `prefix` + key. In a cluster, put a hash tag in the key (`{tenant}`),
    /// not in the prefix.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The quota enforced.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The emission interval on Redis, µs.
    pub fn interval_us(&self) -> u64 {
        self.interval_us
    }

    /// The Redis key holding `key`'s TAT.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The Redis handle.
    pub fn redis(&self) -> &Redis {
        &self.redis
    }

    /// The GCRA script's arguments for the requests `ns` (in order) on one key.
    fn args(
        &self,
        ns: impl IntoIterator<Item = u32>,
        upto: bool,
        now_us: Option<u64>,
    ) -> Vec<String> {
        let mut args = vec![
            self.interval_us.to_string(),
            self.quota.burst().to_string(),
            if upto { "1" } else { "0" }.to_owned(),
            now_us.map(|t| t.to_string()).unwrap_or_default(),
        ];
        args.extend(ns.into_iter().map(|n| n.to_string()));
        args
    }

    async fn call(&self, key: &str, n: u32, upto: bool, now: Option<u64>) -> Result<Answer, Error> {
        let redis_key = self.redis_key(key);
        let reply = self
            .redis
            .eval(&scripts().gcra, &[&redis_key], &self.args([n], upto, now))
            .await?;
        let mut answers = parse_gcra(reply, self.quota.burst(), self.interval_us, 1)?;
        Ok(answers.remove(0))
    }

    /// Decide `n` permits for `key` on Redis; when Redis cannot answer within the deadline
    /// (or the breaker is open) the outage policy decides.
    pub async fn decide(&self, key: &str, n: u32) -> Verdict {
        let answer = self.try_decide(key, n).await;
        verdict(answer, || self.fall_back(key, n))
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

    /// Decide `n` permits for `key` at the explicit time `now_us` (µs, at most 2^52)
    /// instead of Redis's clock: for tests and replays. Such decisions set no expiry (a
    /// TTL is measured on the server's clock); do not mix them with clock-time decisions
    /// on one key.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`]; [`Error::Redis`] (a script error) for `now_us > 2^52`.
    pub async fn try_decide_at(&self, key: &str, n: u32, now_us: u64) -> Result<Answer, Error> {
        self.call(key, n, false, Some(now_us)).await
    }

    /// Take up to `want` cells for `key` (at least 1, at most the burst), as many as
    /// conform now: the lease of the leased mode. A refusal (`granted == 0`) carries the
    /// exact wait for one cell.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`].
    pub async fn try_take_up_to(&self, key: &str, want: u32) -> Result<Answer, Error> {
        self.call(key, want, true, None).await
    }

    /// As [`RedisGcra::try_take_up_to`] at the explicit time `now_us` (tests).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`].
    pub async fn try_take_up_to_at(
        &self,
        key: &str,
        want: u32,
        now_us: u64,
    ) -> Result<Answer, Error> {
        self.call(key, want, true, Some(now_us)).await
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

    /// As [`RedisGcra::try_decide_many`] at the explicit time `now_us` (tests, replays; see
    /// [`RedisGcra::try_decide_at`]).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`], for the whole batch.
    pub async fn try_decide_many_at(
        &self,
        requests: &[(&str, u32)],
        now_us: u64,
    ) -> Result<Vec<Answer>, Error> {
        self.many(requests, Some(now_us)).await
    }

    async fn many(&self, requests: &[(&str, u32)], now: Option<u64>) -> Result<Vec<Answer>, Error> {
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
                (vec![key.as_str()], self.args(ns, false, now))
            })
            .collect();
        let replies = self.redis.eval_pipeline(&scripts().gcra, &calls).await?;
        let mut out: Vec<Option<Answer>> = vec![None; requests.len()];
        for (reply, (_, at)) in replies.into_iter().zip(&groups) {
            let answers = parse_gcra(reply, self.quota.burst(), self.interval_us, at.len())?;
            for (answer, &i) in answers.into_iter().zip(at) {
                out[i] = Some(answer);
            }
        }
        out.into_iter()
            .map(|a| a.ok_or_else(|| Error::Reply("a request got no answer".into())))
            .collect()
    }
}

/// The exact sliding log on Redis: at most `count` permits in **any** window of `period`
/// for each key, on a sorted set of admission times (µs), decided by one script call.
///
/// # Contract
///
/// The core's [`SlidingLog`](limitcore::SlidingLog) contract on Redis's clock in µs: an
/// admission is recorded at `max(now, newest entry)`; `n` permits are admitted iff the
/// entries inside the window ending there, plus `n`, are at most `count`; `retry_after`
/// is exact (when the entry that must leave leaves); `n = 0` succeeds and writes nothing;
/// `n > count` is [`Denied::ExceedsCapacity`]; a denial writes nothing. The period is
/// rounded up to whole µs (stricter). Memory: one sorted-set entry per admitted permit in
/// the window (about `count` entries per busy key). The key expires when its newest entry
/// leaves the window.
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
            fallback: Fallback::new(policy, quota, cooldown),
        })
    }

    /// Store keys as `prefix` + key.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The quota enforced.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    async fn call(&self, key: &str, n: u32, now: Option<u64>) -> Result<Answer, Error> {
        let redis_key = format!("{}{key}", self.prefix);
        let args = [
            self.period_us.to_string(),
            self.quota.count().to_string(),
            n.to_string(),
            now.map(|t| t.to_string()).unwrap_or_default(),
        ];
        let reply = self
            .redis
            .eval(&scripts().sliding_log, &[&redis_key], &args)
            .await?;
        parse(reply, self.quota.count())
    }

    /// Decide `n` permits for `key` on Redis, or by the outage policy (whose local limit
    /// for a sliding log is a GCRA of the same rate share).
    pub async fn decide(&self, key: &str, n: u32) -> Verdict {
        let answer = self.call(key, n, None).await;
        verdict(answer, || self.fallback.decide(key, n, self.redis.nodes()))
    }

    /// Decide on Redis at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`].
    pub async fn try_decide(&self, key: &str, n: u32) -> Result<Answer, Error> {
        self.call(key, n, None).await
    }

    /// Decide at the explicit time `now_us` (tests, replays; no expiry is set).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`].
    pub async fn try_decide_at(&self, key: &str, n: u32, now_us: u64) -> Result<Answer, Error> {
        self.call(key, n, Some(now_us)).await
    }
}

/// Several GCRA limits of one tenant (per second, per minute, per day...), decided all or
/// nothing by one script call: the request is admitted only if every limit admits it, and
/// then charged to all; otherwise nothing is written and the stricter refusal is returned
/// ([`Denied::stricter`]: capacity over any wait, else the longest wait).
///
/// The keys are `prefix{tenant}:name`: the hash tag `{tenant}` puts all of a tenant's
/// limits in one hash slot, as a script on a cluster requires. A tenant may not contain
/// `{` or `}`.
///
/// The decision's state is the tightest of the limits' (fewest remaining, longest until
/// full).
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisAll, RedisConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limits = RedisAll::new(
///     redis,
///     &[("second", "10/s".parse()?), ("day", "10000/day burst 10".parse()?)],
///     Policy::FailClosed,
/// )?;
/// assert!(limits.decide("tenant-42", 1).await?.is_admitted());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedisAll {
    redis: Redis,
    limits: Vec<(String, Quota, u64)>,
    prefix: String,
    fallbacks: Vec<Fallback>,
}

impl RedisAll {
    /// The limits `(name, quota)`, all applied to each tenant.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] for no limits, or a quota [`gcra_micros`] refuses.
    pub fn new(redis: Redis, limits: &[(&str, Quota)], policy: Policy) -> Result<Self, Error> {
        if limits.is_empty() {
            return Err(Error::Quota("RedisAll needs at least one limit".into()));
        }
        let cooldown = redis.config().get_cooldown();
        let mut out = Vec::with_capacity(limits.len());
        let mut fallbacks = Vec::with_capacity(limits.len());
        for (name, quota) in limits {
            let (t, _) = gcra_micros(quota)?;
            out.push(((*name).to_owned(), *quota, t));
            fallbacks.push(Fallback::new(policy, *quota, cooldown));
        }
        Ok(RedisAll {
            redis,
            limits: out,
            prefix: "lc:all:".to_owned(),
            fallbacks,
        })
    }

    /// Every limit's outage policy on `n` permits for `tenant`, all or nothing: the first
    /// refusal, after the charges of the limits that admitted before it are given back; else
    /// the last limit's admission.
    fn fallback(&self, tenant: &str, n: u32) -> Verdict {
        let nodes = self.redis.nodes();
        let mut charged: Vec<Charge> = Vec::with_capacity(self.fallbacks.len());
        let mut last = None;
        for fallback in &self.fallbacks {
            let (verdict, charge) = fallback.decide_refundable(tenant, n, nodes);
            if !verdict.is_admitted() {
                for charge in charged {
                    charge.refund(tenant);
                }
                return verdict;
            }
            charged.extend(charge);
            last = Some(verdict);
        }
        // `new` refuses an empty list of limits: one verdict at least.
        last.unwrap_or_else(|| self.fallbacks[0].decide(tenant, n, nodes))
    }

    /// The Redis keys of `tenant`'s limits, in order.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if the tenant contains `{` or `}` (it would break the hash tag).
    pub fn redis_keys(&self, tenant: &str) -> Result<Vec<String>, Error> {
        if tenant.contains(['{', '}']) {
            return Err(Error::Quota(format!(
                "tenant {tenant:?} contains a brace: it would break the hash tag"
            )));
        }
        Ok(self
            .limits
            .iter()
            .map(|(name, _, _)| format!("{}{{{tenant}}}:{name}", self.prefix))
            .collect())
    }

    fn script(&self) -> &'static Script {
        &scripts().all
    }

    fn capacity(&self) -> u32 {
        self.limits
            .iter()
            .map(|(_, q, _)| q.burst())
            .min()
            .unwrap_or(0)
    }

    async fn call(&self, tenant: &str, n: u32, now: Option<u64>) -> Result<Answer, Error> {
        let keys = self.redis_keys(tenant)?;
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args = vec![
            n.to_string(),
            now.map(|t| t.to_string()).unwrap_or_default(),
        ];
        for (_, quota, t) in &self.limits {
            args.push(t.to_string());
            args.push(quota.burst().to_string());
        }
        let reply = self.redis.eval(self.script(), &keys, &args).await?;
        parse(reply, self.capacity())
    }

    /// Decide `n` permits for `tenant` against every limit, all or nothing. When Redis
    /// cannot answer, each limit's outage policy ([`Policy`]) is asked in turn, still all
    /// or nothing: the first refusal is returned, and the local limits that admitted before
    /// it are given their charge back (`FailLocal`'s GCRA refund is exact).
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] for a tenant with a brace.
    pub async fn decide(&self, tenant: &str, n: u32) -> Result<Verdict, Error> {
        match self.call(tenant, n, None).await {
            Err(Error::Quota(why)) => Err(Error::Quota(why)),
            answer => Ok(verdict(answer, || self.fallback(tenant, n))),
        }
    }

    /// Decide on Redis at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`], and [`Error::Quota`] for a tenant with a brace.
    pub async fn try_decide(&self, tenant: &str, n: u32) -> Result<Answer, Error> {
        self.call(tenant, n, None).await
    }

    /// Decide at the explicit time `now_us` (tests, replays; no expiry is set).
    ///
    /// # Errors
    ///
    /// As [`RedisAll::try_decide`].
    pub async fn try_decide_at(&self, tenant: &str, n: u32, now_us: u64) -> Result<Answer, Error> {
        self.call(tenant, n, Some(now_us)).await
    }
}
