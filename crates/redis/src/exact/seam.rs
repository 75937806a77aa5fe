//! The exact limits behind the core's asynchronous decision seam,
//! [`AsyncKeyedRateLimiter`]: code written once over it (an HTTP layer) takes
//! [`RedisGcra`], [`RedisSlidingLog`] and [`RedisAll`] as it takes any synchronous keyed
//! limiter, with this crate's [`Error`] as the error type.
//!
//! How the limiter's outage [`Policy`](crate::Policy) relates to the seam's `Err` is the
//! policy's "The asynchronous seam": the policy decides and `Ok` carries its decision,
//! except under [`Policy::Propagate`](crate::Policy::Propagate), which returns the error so
//! that the caller's own policy decides.
//!
//! The key is a string: `str`, `String`, `Box<str>` or `Arc<str>` (an HTTP layer whose key
//! extractor yields a `String` takes these limiters as they are). The key types are named
//! one by one rather than as any `K: AsRef<str>`: the core implements the seam for every
//! synchronous keyed limiter, and a crate downstream could implement the synchronous trait
//! for these limiters with a key type of its own, so a generic implementation here would
//! overlap the core's.

use super::{RedisAll, RedisGcra, RedisSlidingLog};
use crate::error::Error;
use limitcore::{AsyncKeyedRateLimiter, Decision, Quota};
use std::future::Future;
use std::sync::Arc;

/// The seam for `$limiter` with each key type in `$key`: the decision of its
/// `decide_or_error`, the quota of its method `$quota`, and the docs in `$docs` (a braced
/// group of doc comments) on each implementation.
macro_rules! seam {
    ($docs:tt $limiter:ty, [$($key:ty),*], $quota:ident) => {
        $( seam!(@one $docs $limiter, $key, $quota); )*
    };
    (@one { $(#[$doc:meta])* } $limiter:ty, $key:ty, $quota:ident) => {
        $(#[$doc])*
        impl AsyncKeyedRateLimiter<$key> for $limiter {
            type Error = Error;

            fn decide_async<'a>(
                &'a self,
                key: &'a $key,
                n: u32,
            ) -> impl Future<Output = Result<Decision, Error>> + Send + 'a {
                let key: &str = key.as_ref();
                self.decide_or_error(key, n)
            }

            fn quota_for_key(&self, _key: &$key) -> Quota {
                self.$quota()
            }
        }
    };
}

seam! {
    {
    /// The exact GCRA behind the seam: one script call per decision, on Redis's clock (µs); the
    /// decision is [`RedisGcra::decide`]'s, or under
    /// [`Policy::Propagate`](crate::Policy::Propagate) Redis's error.
    ///
    /// # Errors
    ///
    /// Under [`Policy::Propagate`](crate::Policy::Propagate): [`Error::CircuitOpen`],
    /// [`Error::Timeout`], [`Error::Redis`], [`Error::Reply`]. Under every other policy none:
    /// the policy decides instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore::AsyncKeyedRateLimiter;
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // Errors go to the caller (an HTTP layer's own fallback), not to a local policy.
    /// let limit = RedisGcra::new(redis, "100/s burst 10".parse()?, Policy::Propagate)?;
    /// match limit.decide_async("tenant-42", 1).await {
    ///     Ok(decision) if decision.is_admitted() => println!("serve"),
    ///     Ok(decision) => println!("429, retry after {:?}", decision.retry_after()),
    ///     Err(e) => println!("Redis gave no decision: {e}"),
    /// }
    /// # Ok(()) }
    /// ```
    }
    RedisGcra, [str, String, Box<str>, Arc<str>], quota
}

seam! {
    {
    /// The exact sliding log behind the seam: one script call per decision; the decision is
    /// [`RedisSlidingLog::decide`]'s, or under [`Policy::Propagate`](crate::Policy::Propagate)
    /// Redis's error.
    ///
    /// # Errors
    ///
    /// As [`RedisGcra`]'s implementation.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore::AsyncKeyedRateLimiter;
    /// use limitcore_redis::{Policy, Redis, RedisConfig, RedisSlidingLog};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let log = RedisSlidingLog::new(redis, "100/min".parse()?, Policy::FailLocal)?;
    /// // FailLocal decides when Redis cannot: `Ok` either way.
    /// assert!(log.decide_async("upstream", 1).await?.is_admitted());
    /// # Ok(()) }
    /// ```
    }
    RedisSlidingLog, [str, String, Box<str>, Arc<str>], quota
}

seam! {
    {
    /// Several limits of one tenant behind the seam, all or nothing: the key is the tenant; the
    /// decision is [`RedisAll::decide`]'s, or under [`Policy::Propagate`](crate::Policy::Propagate)
    /// Redis's error. The quota reported (for a `RateLimit-Policy` header) is the limit with
    /// the smallest burst, the first such: the one whose burst bounds a request's size.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] for a tenant with a brace, whatever the policy; otherwise as
    /// [`RedisGcra`]'s implementation.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore::AsyncKeyedRateLimiter;
    /// use limitcore_redis::{Policy, Redis, RedisAll, RedisConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let limits = RedisAll::new(
    ///     redis,
    ///     &[("second", "10/s".parse()?), ("day", "10000/d burst 20".parse()?)],
    ///     Policy::FailClosed,
    /// )?;
    /// assert_eq!(limits.quota_for_key("acme"), "10/s".parse()?);
    /// assert!(limits.decide_async("acme", 1).await?.is_admitted());
    /// assert!(limits.decide_async("bad{tenant}", 1).await.is_err());
    /// # Ok(()) }
    /// ```
    }
    RedisAll, [str, String, Box<str>, Arc<str>], headline_quota
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiled, never run: the seam's futures are `Send` (an HTTP service spawns them) and
    /// the limiters take any string form of a key.
    fn seam_futures_are_send(gcra: &RedisGcra, log: &RedisSlidingLog, all: &RedisAll) {
        fn send<T: Send>(_: T) {}
        let owned = String::from("k");
        send(gcra.decide_async("k", 1));
        send(AsyncKeyedRateLimiter::<String>::decide_async(
            gcra, &owned, 1,
        ));
        send(log.decide_async("k", 1));
        send(all.decide_async("k", 1));
    }

    #[test]
    fn the_seam_futures_are_send() {
        let _ = seam_futures_are_send;
    }
}
