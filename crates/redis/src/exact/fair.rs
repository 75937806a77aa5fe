//! The fair lease on [`RedisGcra`]: up to `n` cells of the key's GCRA, no more than the
//! asking node's max-min fair share allows ([`fair`](crate::fair)).

use super::gcra::{Numbers, RedisGcra};
use super::{answer, int, micros, Answer, MAX_SPAN_US};
use crate::error::Error;
use crate::fair::{fair_key, Demand, FULL_DEMAND_PPM};
use crate::scripts::scripts;
use crate::time::RedisMicros;
use limitcore::Denied;
use redis::Value;

/// What a fair lease request got ([`RedisGcra::try_take_fair`]): the cells granted (with the
/// key's state and the server's time, as [`RedisGcra::try_take_up_to`]'s answer), the
/// node's max-min fair share of the key's rate and the live nodes it was computed over.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Demand, Policy, Redis, RedisConfig, RedisGcra, FULL_DEMAND_PPM};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limit = RedisGcra::new(redis, "1000/s burst 50".parse()?, Policy::FailClosed)?;
/// let me = Demand::new("node-a", FULL_DEMAND_PPM, Duration::from_secs(1));
/// let lease = limit.try_take_fair("hot", 16, &me).await?;
/// assert_eq!(lease.nodes, 1);
/// assert_eq!(lease.share_ppm, FULL_DEMAND_PPM); // alone: the whole rate
/// assert_eq!(lease.answer.granted, 16);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FairAnswer {
    /// The cells granted (`granted`, 0 on refusal, with the exact wait for one cell as the
    /// decision's `retry_after`), the key's state after it, the server's time.
    pub answer: Answer,
    /// The node's max-min fair share of the key's rate, millionths (`1 ..=
    /// FULL_DEMAND_PPM`).
    pub share_ppm: u32,
    /// The live nodes the shares were computed over (the asking one included).
    pub nodes: u32,
}

impl Numbers {
    /// The fair script's arguments: `T`, burst, `now`, `n`, the node, its demand, its
    /// horizon (µs).
    fn fair_args(&self, want: u32, demand: &Demand<'_>, now: Option<RedisMicros>) -> Vec<String> {
        let horizon_us = u64::try_from(demand.horizon.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_SPAN_US);
        vec![
            self.interval_us.to_string(),
            self.burst.to_string(),
            now.map(|t| t.as_micros().to_string()).unwrap_or_default(),
            want.max(1).to_string(),
            demand.node.to_owned(),
            demand.ppm.clamp(1, FULL_DEMAND_PPM).to_string(),
            horizon_us.to_string(),
        ]
    }

    /// The fair script's reply `{now, granted, retry_us, backlog_us, share_ppm, nodes}`.
    fn parse_fair(&self, value: &Value) -> Result<FairAnswer, Error> {
        let bad = || Error::Reply(format!("unexpected fair lease reply {value:?}"));
        let Value::Array(items) = value else {
            return Err(bad());
        };
        let ints: Vec<i64> = items
            .iter()
            .map(int)
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let [now, granted, retry, backlog, share, nodes] = ints[..] else {
            return Err(bad());
        };
        if backlog < 0 || retry < 0 || granted < 0 || (granted == 0) != (retry > 0) {
            return Err(bad());
        }
        let result = match retry {
            0 => Ok(()),
            r => Err(Denied::RateLimited {
                retry_after: micros(r),
            }),
        };
        let share_ppm = u32::try_from(share)
            .ok()
            .filter(|s| (1..=FULL_DEMAND_PPM).contains(s))
            .ok_or_else(bad)?;
        let nodes = u32::try_from(nodes)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(bad)?;
        Ok(FairAnswer {
            answer: answer(result, self.remaining(backlog), backlog, granted, now),
            share_ppm,
            nodes,
        })
    }
}

impl RedisGcra {
    /// Take up to `want` cells for `key` (at least 1, at most the burst), as many as both
    /// the key's GCRA and the asking node's fair share allow now: the leased mode's lease
    /// ([`LeasedLimiter`](crate::LeasedLimiter)). `demand` names the node and reports its
    /// offered load on the key; the script keeps each live node's last report and grants
    /// by max-min fair shares of the key's rate over them ([`fair`](crate::fair)). A
    /// refusal (`granted == 0`) carries the exact wait until one cell would be granted to
    /// this node if nothing else happened. Like [`RedisGcra::try_take_up_to`], a fair lease
    /// never runs into debt and is charged to the key's GCRA exactly as that many
    /// admissions of the exact mode would be.
    ///
    /// The node's report lives in a hash beside the key ([`fair_key`]), in the key's hash
    /// slot on a cluster.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide`].
    ///
    /// # Examples
    ///
    /// See [`FairAnswer`].
    pub async fn try_take_fair(
        &self,
        key: &str,
        want: u32,
        demand: &Demand<'_>,
    ) -> Result<FairAnswer, Error> {
        self.fair_call(key, want, demand, None).await
    }

    /// As [`RedisGcra::try_take_fair`] at the explicit time `now` on Redis's clock (tests;
    /// no expiry is set, on the key nor on its fair-share hash).
    ///
    /// # Errors
    ///
    /// As [`RedisGcra::try_decide_at`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{Demand, Policy, Redis, RedisConfig, RedisGcra, RedisMicros};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limit = RedisGcra::new(redis, "1000/s burst 50".parse()?, Policy::FailClosed)?;
    /// let t = RedisMicros::new(1_750_000_000_000_000);
    /// let (a, b) = (Demand::new("a", 1_000_000, Duration::from_secs(1)), Demand::new("b", 1_000_000, Duration::from_secs(1)));
    /// limit.try_take_fair_at("k", 1, &a, t).await?;
    /// let lease = limit.try_take_fair_at("k", 1, &b, t).await?;
    /// assert_eq!((lease.nodes, lease.share_ppm), (2, 500_000)); // two saturated nodes: halves
    /// # Ok(()) }
    /// ```
    pub async fn try_take_fair_at(
        &self,
        key: &str,
        want: u32,
        demand: &Demand<'_>,
        now: RedisMicros,
    ) -> Result<FairAnswer, Error> {
        self.fair_call(key, want, demand, Some(now)).await
    }

    async fn fair_call(
        &self,
        key: &str,
        want: u32,
        demand: &Demand<'_>,
        now: Option<RedisMicros>,
    ) -> Result<FairAnswer, Error> {
        let tat_key = self.redis_key(key);
        let shares_key = fair_key(&tat_key);
        let args = self.numbers.fair_args(want, demand, now);
        let reply = self
            .redis()
            .eval(&scripts().fair, &[&tat_key, &shares_key], &args)
            .await?;
        self.numbers.parse_fair(&reply)
    }
}
