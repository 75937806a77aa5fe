//! [`RedisGcra`]: GCRA on Redis, one script call a decision.

use super::{gcra_micros, parse_gcra, verdict, Answer};
use crate::client::Redis;
use crate::policy::{Fallback, Policy, Verdict};
use crate::scripts::scripts;
use crate::Error;
use limitcore::Quota;

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
/// - `n = 0` succeeds and writes nothing; `n > burst` is [`Denied::ExceedsCapacity`](limitcore::Denied::ExceedsCapacity); a
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
