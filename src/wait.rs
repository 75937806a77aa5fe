//! Waiting until admitted: [`Blocking`] for threads, [`Async`] (feature `tokio`) for tasks.
//!
//! Both are implemented for every [`RateLimiter`], including `dyn RateLimiter`. They sleep
//! for exactly the `retry_after` the limiter reports (never spinning, never sleeping longer
//! than the limiter says is needed), then ask again; with a deadline they fail at once with
//! the [`Denied`] value if the reported wait would end after it, instead of sleeping first.
//! A denial that waiting cannot cure ([`Denied::is_final`]: [`Denied::ExceedsCapacity`],
//! [`Denied::BeyondHorizon`]) is returned at once.
//!
//! Sleeps use the real time of the OS (or tokio's timer), so a limiter on a
//! [`ManualClock`](crate::clock::ManualClock) only makes progress if something advances the
//! clock. Waiters are not queued: when several threads wait on one limiter, whichever asks
//! first after a permit becomes available gets it. For first-come-first-served waiting, take
//! a [`Reservation`](crate::Reservation) and sleep until its start.

use crate::decision::Denied;
use crate::limiter::RateLimiter;
use core::time::Duration;
use std::time::Instant;

/// What to do after a denial: `Ok(wait)` to sleep and retry, `Err` to give up now.
fn next_wait(denied: Denied, deadline: Option<Instant>) -> Result<Duration, Denied> {
    let wait = match denied.retry_after() {
        Some(wait) => wait,
        None => return Err(denied),
    };
    match deadline {
        Some(deadline)
            if Instant::now()
                .checked_add(wait)
                .map_or(true, |t| t > deadline) =>
        {
            Err(denied)
        }
        _ => Ok(wait),
    }
}

/// Blocking waits for any [`RateLimiter`].
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
///     limiter.acquire_blocking()?; // the 2nd and 3rd sleep about 10 ms each
/// }
/// assert!(t0.elapsed() >= Duration::from_millis(19));
/// // Cannot succeed within 1 ms: refused at once, not after sleeping.
/// assert!(limiter.acquire_n_blocking_within(1, Duration::from_millis(1)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Blocking: RateLimiter {
    /// Take `n` permits, sleeping until they are available.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_blocking(&self, n: u32) -> Result<(), Denied> {
        self.acquire_n_blocking_until(n, None)
    }

    /// Take one permit, sleeping until it is available.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_blocking(&self) -> Result<(), Denied> {
        self.acquire_n_blocking_until(1, None)
    }

    /// Take `n` permits if that is possible within `max_wait`.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_blocking_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        self.acquire_n_blocking_until(n, Instant::now().checked_add(max_wait))
    }

    /// Take `n` permits if that is possible by `deadline` (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_blocking_until(&self, n: u32, deadline: Option<Instant>) -> Result<(), Denied> {
        loop {
            match self.try_acquire_n(n) {
                Ok(()) => return Ok(()),
                Err(denied) => std::thread::sleep(next_wait(denied, deadline)?),
            }
        }
    }
}

impl<L: RateLimiter + ?Sized> Blocking for L {}

/// Async waits for any [`RateLimiter`], sleeping on tokio's timer (feature `tokio`). The
/// method names end in `_async` and [`Blocking`]'s in `_blocking`, so both traits can be in
/// scope at once.
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
/// limiter.acquire_async().await?;
/// limiter.acquire_n_async(1).await?; // about 1 ms later
/// assert!(limiter.acquire_n_async_within(1, Duration::ZERO).await.is_err());
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub trait Async: RateLimiter {
    /// Take `n` permits, sleeping (asynchronously) until they are available.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_async(
        &self,
        n: u32,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        self.acquire_n_async_until(n, None)
    }

    /// Take one permit, sleeping (asynchronously) until it is available.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_async(&self) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        self.acquire_n_async_until(1, None)
    }

    /// Take `n` permits if that is possible within `max_wait`.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_async_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        self.acquire_n_async_until(n, Instant::now().checked_add(max_wait))
    }

    /// Take `n` permits if that is possible by `deadline` (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// See the trait.
    fn acquire_n_async_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> impl core::future::Future<Output = Result<(), Denied>> + Send {
        async move {
            loop {
                match self.try_acquire_n(n) {
                    Ok(()) => return Ok(()),
                    Err(denied) => tokio::time::sleep(next_wait(denied, deadline)?).await,
                }
            }
        }
    }
}

#[cfg(feature = "tokio")]
impl<L: RateLimiter + ?Sized> Async for L {}

/// A reusable tokio timer for hand-written futures (a budget's ordered async waits, the
/// async I/O adapters): armed for a duration, polled until it fires. The sleep is boxed once
/// and reset for every later wait.
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
pub(crate) struct Timer {
    sleep: Option<core::pin::Pin<alloc::boxed::Box<tokio::time::Sleep>>>,
    armed: bool,
}

#[cfg(feature = "tokio")]
impl Timer {
    /// Fire `after` from now (a wait too long for the OS clock to name: in 30 years, as
    /// tokio's own far future).
    pub(crate) fn arm(&mut self, after: Duration) {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(after)
            .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 86_400)))
            .unwrap_or(now);
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.sleep = Some(alloc::boxed::Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.armed = true;
    }

    /// Stop waiting (the timer stays allocated for the next wait).
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// `Ready` once an armed timer has fired (it is then disarmed); `Pending` while it has
    /// not, or when it is not armed (the caller has registered some other wake-up).
    pub(crate) fn poll(&mut self, cx: &mut core::task::Context<'_>) -> core::task::Poll<()> {
        use core::future::Future;
        match (&mut self.sleep, self.armed) {
            (Some(sleep), true) => {
                core::task::ready!(sleep.as_mut().poll(cx));
                self.armed = false;
                core::task::Poll::Ready(())
            }
            _ => core::task::Poll::Pending,
        }
    }

    /// Whether the timer is armed.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed
    }
}
