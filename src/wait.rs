//! Sleep-and-retry waits for any limiter: [`Blocking`] for threads, [`Async`] (feature
//! `tokio`) for tasks.
//!
//! Both are implemented for every [`RateLimiter`], including `dyn RateLimiter`. A wait asks;
//! on a refusal it sleeps exactly the `retry_after` the limiter reports (never spinning,
//! never longer than the limiter says is needed), then asks again. With a deadline it fails
//! at once with the [`Denied`] value if the reported wait would end after it, instead of
//! sleeping first. A denial that waiting cannot cure ([`Denied::is_final`]:
//! [`Denied::ExceedsCapacity`], [`Denied::BeyondHorizon`]) is returned at once.
//!
//! The names say how they wait: `retry_acquire…`. Waiters are **not queued**: when several
//! wait on one limiter, whichever asks first after a permit becomes available gets it. The
//! waits that are first come, first served are the queues' own: a
//! [`Budget`](crate::Budget)'s `acquire_blocking` / `acquire`, a
//! [`Lanes`](crate::lanes::Lanes)' `acquire_blocking` / `acquire`, and
//! [`Permits`](crate::concurrency::Permits)' `acquire_blocking` / `acquire`; or take a
//! [`Reservation`](crate::Reservation) and sleep until its start
//! ([`Reservation::wait_blocking`](crate::Reservation::wait_blocking)).
//!
//! Sleeps follow the limiter's clock ([`RateLimiter::sleep_hint`]): the OS timer (or tokio's)
//! for an OS clock; on a [`ManualClock`](crate::clock::ManualClock) a wait sleeps until the
//! clock is moved, so it can be tested at explicit times. Each wait is written once, as a
//! poll, and run blocking or async by the waiting layer's driver ([`notify`](crate::notify)).

use crate::clock::{deadline_until, deadline_within, duration_to_nanos, Nanos};
use crate::decision::Denied;
use crate::limiter::RateLimiter;
#[cfg(feature = "tokio")]
use crate::notify::driver::WaitFuture;
use crate::notify::driver::{block_on, Nap, Wait};
use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::time::Instant;

/// The sleep-and-retry wait for `n` permits by `deadline` (ns of the limiter's clock).
#[derive(Debug)]
struct Retry<'a, L: ?Sized> {
    limiter: &'a L,
    n: u32,
    deadline: Option<Nanos>,
    /// When to ask again (after a refusal), ns of the clock.
    again_at: Option<Nanos>,
}

impl<'a, L: RateLimiter + ?Sized> Retry<'a, L> {
    fn new(limiter: &'a L, n: u32, deadline: Option<Nanos>) -> Self {
        Retry {
            limiter,
            n,
            deadline,
            again_at: None,
        }
    }
}

impl<L: RateLimiter + ?Sized> Wait for Retry<'_, L> {
    type Output = Result<(), Denied>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        let (limiter, n) = (self.limiter, self.n);
        poll_retry(limiter, &mut self.again_at, self.deadline, cx, nap, |now| {
            limiter.try_acquire_n_at(n, now)
        })
    }
}

/// The one sleep-and-retry loop (governor's `until_ready` shape), shared by every
/// retrying wait ([`Blocking`], [`Async`](self::Async), the I/O adapters' retrying pacers):
/// `attempt` at the limiter's time; after a refusal, sleep the `retry_after` it reports on
/// the limiter's clock (until `again_at`, kept between polls) and attempt again. A refusal
/// no wait cures, or a wait that would end after `deadline` (ns of the clock), ends it at
/// once, before sleeping.
pub(crate) fn poll_retry<L: RateLimiter + ?Sized, T>(
    limiter: &L,
    again_at: &mut Option<Nanos>,
    deadline: Option<Nanos>,
    cx: &mut Context<'_>,
    nap: &mut Nap,
    mut attempt: impl FnMut(Nanos) -> Result<T, Denied>,
) -> Poll<Result<T, Denied>> {
    loop {
        if let Some(at) = *again_at {
            ready!(limiter.sleep_hint(at, cx.waker()).follow(nap));
            *again_at = None;
        }
        let now = limiter.now();
        let denied = match attempt(now) {
            Ok(taken) => return Poll::Ready(Ok(taken)),
            Err(denied) => denied,
        };
        let Some(wait) = denied.retry_after() else {
            return Poll::Ready(Err(denied));
        };
        let at = now.saturating_add(duration_to_nanos(wait));
        if deadline.is_some_and(|d| at > d) {
            return Poll::Ready(Err(denied));
        }
        *again_at = Some(at);
    }
}

/// Blocking sleep-and-retry waits for any [`RateLimiter`] (see the module).
///
/// # Errors (for every method)
///
/// [`Denied::ExceedsCapacity`] at once for `n > burst`; the [`Denied::RateLimited`] that
/// could not be waited out before the deadline (at once, without sleeping); a
/// [`Denied::BeyondHorizon`] (the request can never conform) at once.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::wait::Blocking;
/// use std::time::{Duration, Instant};
///
/// let limiter = Gcra::new(Quota::per_second(100)?.with_burst(1)?)?;
/// let t0 = Instant::now();
/// for _ in 0..3 {
///     limiter.retry_acquire_blocking()?; // the 2nd and 3rd sleep about 10 ms each
/// }
/// assert!(t0.elapsed() >= Duration::from_millis(19));
/// // Cannot succeed within 1 ms: refused at once, not after sleeping.
/// assert!(limiter.retry_acquire_n_blocking_within(1, Duration::from_millis(1)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// On a [`ManualClock`](crate::clock::ManualClock) the wait sleeps until the clock moves:
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use limitcore::wait::Blocking;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = Arc::new(Gcra::with_clock("10/s burst 1".parse()?, clock.clone())?);
/// limiter.try_acquire()?;
/// let waiter = {
///     let limiter = limiter.clone();
///     std::thread::spawn(move || limiter.retry_acquire_blocking())
/// };
/// clock.advance(Duration::from_millis(100)); // virtual time: the waiter's permit is due
/// waiter.join().unwrap()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Blocking: RateLimiter {
    /// Take `n` permits, sleeping and retrying until they are admitted.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n_blocking(&self, n: u32) -> Result<(), Denied> {
        block_on(Retry::new(self, n, None))
    }

    /// Take one permit, sleeping and retrying until it is admitted.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_blocking(&self) -> Result<(), Denied> {
        block_on(Retry::new(self, 1, None))
    }

    /// Take `n` permits if that is possible within `max_wait` (of the limiter's clock).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n_blocking_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        block_on(Retry::new(self, n, deadline_within(self.now(), max_wait)))
    }

    /// Take `n` permits if that is possible by `deadline` (`None`: no deadline; the time
    /// left until it is counted on the limiter's clock from the call).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n_blocking_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), Denied> {
        block_on(Retry::new(self, n, deadline_until(self.now(), deadline)))
    }
}

impl<L: RateLimiter + ?Sized> Blocking for L {}

/// Async sleep-and-retry waits for any [`RateLimiter`] (feature `tokio`: on an OS clock
/// they sleep on tokio's timer). The async waits take the plain names and [`Blocking`]'s end
/// in `_blocking` (tokio's scheme), so both traits can be in scope at once. Cancellation-safe: a wait takes
/// nothing until it completes.
///
/// # Errors (for every method)
///
/// As [`Blocking`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use limitcore::{Gcra, Quota};
/// use limitcore::wait::Async;
/// use std::time::Duration;
///
/// let limiter = Gcra::new(Quota::per_second(1_000)?.with_burst(1)?)?;
/// limiter.retry_acquire().await?;
/// limiter.retry_acquire_n(1).await?; // about 1 ms later
/// assert!(limiter.retry_acquire_n_within(1, Duration::ZERO).await.is_err());
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub trait Async: RateLimiter {
    /// Take `n` permits, sleeping (asynchronously) and retrying until they are admitted.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n(
        &self,
        n: u32,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        WaitFuture::new(Retry::new(self, n, None))
    }

    /// Take one permit, sleeping (asynchronously) and retrying until it is admitted.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire(&self) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        WaitFuture::new(Retry::new(self, 1, None))
    }

    /// Take `n` permits if that is possible within `max_wait` (of the limiter's clock).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        WaitFuture::new(Retry::new(self, n, deadline_within(self.now(), max_wait)))
    }

    /// Take `n` permits if that is possible by `deadline` (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn retry_acquire_n_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        WaitFuture::new(Retry::new(self, n, deadline_until(self.now(), deadline)))
    }
}

#[cfg(feature = "tokio")]
impl<L: RateLimiter + ?Sized> Async for L {}
