//! [`RedisAll`]: several GCRA limits of one tenant, all or nothing.

use super::{gcra_micros, parse, verdict, Answer};
use crate::client::Redis;
use crate::error::Error;
use crate::policy::{Admission, Fallback, Policy, Verdict};
use crate::scripts::{scripts, Script};
use crate::time::RedisMicros;
use limitcore::{Decision, Quota};

/// Several GCRA limits of one tenant (per second, per minute, per day...), decided all or
/// nothing by one script call: the request is admitted only if every limit admits it, and
/// then charged to all; otherwise nothing is written and the stricter refusal is returned
/// ([`Denied::stricter`](limitcore::Denied::stricter): capacity over any wait, else the
/// longest wait).
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
///     &[("second", "10/s".parse()?), ("day", "10000/d burst 10".parse()?)],
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
            fallbacks.push(Fallback::new(policy, *quota, cooldown, name));
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
        let mut charged: Vec<Admission> = Vec::with_capacity(self.fallbacks.len());
        let mut last = None;
        for fallback in &self.fallbacks {
            let (verdict, admission) = fallback.decide_refundable(tenant, n, nodes);
            if !verdict.is_admitted() {
                for admission in charged {
                    admission.refund();
                }
                return verdict;
            }
            charged.extend(admission);
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

    async fn call(&self, tenant: &str, n: u32, now: Option<RedisMicros>) -> Result<Answer, Error> {
        let keys = self.redis_keys(tenant)?;
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args = vec![
            n.to_string(),
            now.map(|t| t.as_micros().to_string()).unwrap_or_default(),
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
    /// it are given their charge back (`FailLocal`'s budget refund is exact at the
    /// admission's own time).
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

    /// The asynchronous seam's decision (see [`Policy`], "The asynchronous seam"): Redis's,
    /// every limit's outage policy (all or nothing, as [`RedisAll::decide`]), or under
    /// [`Policy::Propagate`] the error; [`Error::Quota`] for a tenant with a brace.
    pub(super) async fn decide_or_error(&self, tenant: &str, n: u32) -> Result<Decision, Error> {
        let answer = self.call(tenant, n, None).await;
        super::settle(answer, self.fallbacks[0].policy(), || {
            self.fallback(tenant, n)
        })
    }

    /// The quota reported for a tenant: the limit with the smallest burst (the one that
    /// bounds a request's size, [`RedisAll`]'s capacity), the first such.
    pub(super) fn headline_quota(&self) -> Quota {
        self.limits
            .iter()
            .map(|(_, q, _)| *q)
            .min_by_key(Quota::burst)
            .unwrap_or_else(|| self.limits[0].1)
    }

    /// Decide on Redis at Redis's `TIME`, with no fallback.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`](crate::RedisGcra::try_decide), and [`Error::Quota`] for
    /// a tenant with a brace.
    pub async fn try_decide(&self, tenant: &str, n: u32) -> Result<Answer, Error> {
        self.call(tenant, n, None).await
    }

    /// Decide at the explicit time `now` on Redis's clock (tests, replays; no expiry is
    /// set).
    ///
    /// # Errors
    ///
    /// As [`RedisAll::try_decide`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Policy, Redis, RedisAll, RedisConfig, RedisMicros};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limits = RedisAll::new(redis, &[("s", "2/s".parse()?), ("m", "3/min".parse()?)], Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// assert!(limits.try_decide_at("acme", 2, t).await?.decision.is_admitted());
    /// assert!(!limits.try_decide_at("acme", 1, t).await?.decision.is_admitted());
    /// # Ok(()) }
    /// ```
    pub async fn try_decide_at(
        &self,
        tenant: &str,
        n: u32,
        now: RedisMicros,
    ) -> Result<Answer, Error> {
        self.call(tenant, n, Some(now)).await
    }
}
