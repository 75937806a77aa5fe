//! [`AsyncKeyedRateLimiter`]: the seam for keyed limiters that decide asynchronously and can
//! fail (a limit kept on a server, such as `limitcore-redis`'s exact modes), so that code
//! written once over it (an HTTP layer) takes them and every synchronous keyed limiter alike.

use crate::decision::Decision;
use crate::limiter::KeyedRateLimiter;
use crate::quota::Quota;
use core::convert::Infallible;
use core::future::{ready, Future};

/// A keyed limiter whose decision is a future and may fail: a remote limiter (one round trip
/// to a server that keeps the state), whose errors are its own (`Self::Error`). Every
/// [`KeyedRateLimiter`] implements it for free, with a future that is ready at once and
/// never fails.
///
/// # Contract
///
/// An `Ok` decision keeps [`KeyedRateLimiter`]'s contract for the limit it decides by (for a
/// remote limiter, on its own clock: `retry_after` is exact and never early, the state is
/// the one the decision left). An `Err` means no decision was made: nothing was charged
/// that the caller can rely on, and what to do (admit, refuse, decide locally) is the
/// caller's policy, or the limiter's own if it has one (then it returns `Ok` with that
/// decision instead).
///
/// # Examples
///
/// Code written once, over a synchronous limiter here:
///
/// ```
/// use limitcore::{AsyncKeyedRateLimiter, Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// async fn admitted<L: AsyncKeyedRateLimiter<str>>(limit: &L, key: &str) -> bool {
///     matches!(limit.decide_async(key, 1).await, Ok(d) if d.is_admitted())
/// }
///
/// let per_client: Keyed<String, GcraRule, ManualClock> =
///     Keyed::with_clock(Quota::per_second(1)?, ManualClock::new())?;
/// let decide = |key| futures_lite_block_on(admitted(&per_client, key));
/// assert!(decide("a"));
/// assert!(!decide("a"));
///
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait AsyncKeyedRateLimiter<K: ?Sized>: Send + Sync {
    /// Why a decision could not be made.
    type Error: core::fmt::Debug + core::fmt::Display + Send + Sync + 'static;

    /// Decide `n` permits for `key` now (on the limiter's own clock), with the state the
    /// decision left.
    ///
    /// # Errors
    ///
    /// `Self::Error` when no decision could be made (see the trait's contract).
    fn decide_async<'a>(
        &'a self,
        key: &'a K,
        n: u32,
    ) -> impl Future<Output = Result<Decision, Self::Error>> + Send + 'a;

    /// The quota `key` is limited by (for the `RateLimit-Policy` of an HTTP response).
    fn quota_for_key(&self, key: &K) -> Quota;
}

impl<K: ?Sized + Sync, L: KeyedRateLimiter<K>> AsyncKeyedRateLimiter<K> for L {
    type Error = Infallible;

    #[inline]
    fn decide_async<'a>(
        &'a self,
        key: &'a K,
        n: u32,
    ) -> impl Future<Output = Result<Decision, Infallible>> + Send + 'a {
        ready(Ok(self.decide_n(key, n)))
    }

    fn quota_for_key(&self, key: &K) -> Quota {
        self.quota_for(key)
    }
}
