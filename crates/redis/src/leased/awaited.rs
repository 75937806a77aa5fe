//! [`AwaitLeases`]: a leased limiter behind the core's asynchronous decision seam
//! ([`AsyncKeyedRateLimiter`]), deciding by [`LeasedLimiter::acquire`], which waits for a
//! key's lease instead of refusing while it is fetched.
//!
//! A [`LeasedLimiter`] is a synchronous keyed limiter, so the core's seam already takes it
//! as it is: each decision is the synchronous one, ready at once, and a key the node holds
//! no cells for is refused until its lease arrives (a fresh key's first requests; any key
//! whose lease runs dry under load). This adapter trades that refusal for a wait of at most
//! the Redis deadline: behind an HTTP layer's awaited seam (`limitcore-tower`'s
//! `RateLimitLayer::remote`) a request is then refused only by a Redis refusal (with its
//! exact wait), above the capacity, or by the outage policy.
//!
//! The key types are named one by one (`str`, `String`, `Box<str>`, `Arc<str>`) for the
//! reason given in the exact limits' seam: a generic implementation would overlap the
//! core's.

use super::LeasedLimiter;
use limitcore::clock::{Clock, MonotonicClock};
use limitcore::{AsyncKeyedRateLimiter, Decision, KeyedRateLimiter, Quota};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

/// A [`LeasedLimiter`] whose asynchronous decisions wait for the key's lease
/// ([`LeasedLimiter::acquire`]) instead of refusing while it is fetched: the leased limit
/// for code written over [`AsyncKeyedRateLimiter`], such as `limitcore-tower`'s
/// `RateLimitLayer::remote`.
///
/// The bound is the leased limiter's ([`LeasedLimiter`]'s "Bound": the exact bound plus
/// `N·L` in any window, never more than the exact limit over the long run); only the
/// refusals change: a decision waits (at most the Redis deadline) for a lease where the
/// synchronous one refuses with the round-trip estimate. Its error type is
/// [`Infallible`]: the limiter's outage [`Policy`](crate::Policy) decides while Redis is
/// unreachable.
///
/// Cloning shares the limiter.
///
/// # Examples
///
/// ```no_run
/// use limitcore::AsyncKeyedRateLimiter;
/// use limitcore_redis::{AwaitLeases, LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let leased = LeasedLimiter::new(redis, "1000/s burst 100".parse()?, LeaseConfig::new(16), Policy::FailOpen)?;
/// let limit = AwaitLeases::new(leased);
/// // A fresh key's first request waits for its lease (one round trip) and is admitted.
/// let decision = limit.decide_async("tenant-42", 1).await?;
/// assert!(decision.is_admitted());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AwaitLeases<C: Clock + Clone + 'static = MonotonicClock> {
    limiter: LeasedLimiter<C>,
}

impl<C: Clock + Clone + 'static> AwaitLeases<C> {
    /// `limiter`'s decisions, waiting for leases.
    pub fn new(limiter: LeasedLimiter<C>) -> Self {
        AwaitLeases { limiter }
    }

    /// The leased limiter (its counters, its synchronous calls).
    pub fn limiter(&self) -> &LeasedLimiter<C> {
        &self.limiter
    }

    /// The leased limiter back.
    pub fn into_inner(self) -> LeasedLimiter<C> {
        self.limiter
    }
}

/// The seam for each key type in the list.
macro_rules! awaited_seam {
    ($($key:ty),*) => {$(
        /// [`LeasedLimiter::acquire`]'s decision: waits for the key's lease (at most the
        /// Redis deadline) instead of refusing while it is fetched.
        ///
        /// # Errors
        ///
        /// None: the limiter's outage policy decides while Redis is unreachable.
        impl<C: Clock + Clone + 'static> AsyncKeyedRateLimiter<$key> for AwaitLeases<C> {
            type Error = Infallible;

            fn decide_async<'a>(
                &'a self,
                key: &'a $key,
                n: u32,
            ) -> impl Future<Output = Result<Decision, Infallible>> + Send + 'a {
                let key: &str = key.as_ref();
                async move { Ok(self.limiter.acquire(key, n).await.decision) }
            }

            fn quota_for_key(&self, key: &$key) -> Quota {
                KeyedRateLimiter::<$key>::quota_for(&self.limiter, key)
            }
        }
    )*};
}

awaited_seam!(str, String, Box<str>, Arc<str>);
