//! The exact limits: every decision is one script call on Redis (one round trip), so the
//! whole fleet shares one state per key and the contract is the core's, on Redis's clock.

use crate::error::Error;
use crate::policy::{Policy, Source, Verdict};
use crate::time::RedisMicros;
use limitcore::{Decision, Denied, Quota, Snapshot};
use redis::Value;
use std::time::Duration;

mod all;
mod charge;
mod fair;
mod gcra;
mod reservation;
mod seam;
mod sliding_log;

pub use all::RedisAll;
pub use charge::ChargeAnswer;
pub use fair::FairAnswer;
pub use gcra::RedisGcra;
pub use reservation::{GcraReceipt, LogReceipt, Reservation};
pub use sliding_log::RedisSlidingLog;

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
    /// The time the script decided at: Redis's `TIME` (µs since the Unix epoch on Redis's
    /// clock), or the explicit time given.
    pub server_time: RedisMicros,
}

/// The verdict of a script call: Redis's answer, or the outage policy's (`fallback`) when
/// Redis gave none.
fn verdict(answer: Result<Answer, Error>, fallback: impl FnOnce() -> Verdict) -> Verdict {
    match answer {
        Ok(answer) => Verdict {
            decision: answer.decision,
            source: Source::Redis {
                server_time: answer.server_time,
            },
        },
        Err(_) => fallback(),
    }
}

/// The asynchronous seam's answer ([`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter)):
/// Redis's decision; when Redis gave none, the outage policy's (`fallback`), unless the
/// policy is [`Policy::Propagate`](crate::Policy::Propagate), which returns the error. A
/// request no policy can decide ([`Error::Quota`]) is always the error.
fn settle(
    answer: Result<Answer, Error>,
    policy: Policy,
    fallback: impl FnOnce() -> Verdict,
) -> Result<Decision, Error> {
    match answer {
        Ok(answer) => Ok(answer.decision),
        Err(e @ Error::Quota(_)) => Err(e),
        Err(e) if policy.propagates() => Err(e),
        Err(_) => Ok(fallback().decision),
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
        server_time: RedisMicros::new(now_us.max(0) as u64),
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
