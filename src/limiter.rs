//! The [`RateLimiter`] trait every limiter implements, and its decision types.

use crate::clock::Nanos;
use crate::Quota;
use core::fmt;
use core::time::Duration;

/// Why a request was not admitted. A denial never changes the limiter's state.
///
/// # Examples
///
/// ```
/// use limitcore::{Denied, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new());
/// assert!(limiter.try_acquire_n(2).is_ok());
/// let denied = limiter.try_acquire().unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(limiter.try_acquire_n(3), Err(Denied::ExceedsCapacity { capacity: 2 }));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
// `repr(u8)`: an explicit tag. Without it `Result<(), Denied>` keeps its discriminant in the
// niche of `Duration`'s nanoseconds, so even `is_ok()` had to compute `retry_after` (a
// division by 10^9); with the tag the compiler drops that work when the caller does not
// look. Measured: GCRA's single-thread deny path went from 1.15x to 0.89x governor's time
// (BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum Denied {
    /// Not now. The same request conforms once `retry_after` has passed, if nothing else
    /// consumes in between; asking any earlier is denied again. Exact to the nanosecond,
    /// never rounded down. `Duration::MAX` means the request can never conform within the
    /// clock's range (its schedule would pass `u64::MAX` ns, 584 years from the epoch).
    RateLimited {
        /// How long to wait before the same request conforms.
        retry_after: Duration,
    },
    /// Never: more permits were asked for at once than the limiter's burst (its capacity).
    /// Nothing was consumed.
    ExceedsCapacity {
        /// The most permits one request can ever take.
        capacity: u32,
    },
}

impl Denied {
    /// `Some(wait)` for [`Denied::RateLimited`], `None` when waiting cannot help.
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Denied::RateLimited { retry_after } => Some(*retry_after),
            Denied::ExceedsCapacity { .. } => None,
        }
    }

    /// The stricter of two refusals of the same request: [`Denied::ExceedsCapacity`] (waiting
    /// cannot help) over any wait, else the longer `retry_after`; of two capacity refusals,
    /// `self`. This is how [`All`](crate::All) reports a request that several limits refuse:
    /// waiting `retry_after` satisfies every one of them.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Denied;
    /// use std::time::Duration;
    ///
    /// let a = Denied::RateLimited { retry_after: Duration::from_millis(5) };
    /// let b = Denied::RateLimited { retry_after: Duration::from_millis(9) };
    /// assert_eq!(a.stricter(b), b);
    /// assert_eq!(a.stricter(Denied::ExceedsCapacity { capacity: 3 }), Denied::ExceedsCapacity { capacity: 3 });
    /// ```
    #[must_use]
    pub fn stricter(self, other: Denied) -> Denied {
        match (self, other) {
            (Denied::RateLimited { retry_after: a }, Denied::RateLimited { retry_after: b }) => {
                Denied::RateLimited {
                    retry_after: a.max(b),
                }
            }
            (Denied::RateLimited { .. }, capacity @ Denied::ExceedsCapacity { .. }) => capacity,
            (worst, _) => worst,
        }
    }

    /// The refusal of a request that can never conform because the state it would leave
    /// lies past the clock's range (`u64::MAX` ns, 584 years): `retry_after = Duration::MAX`.
    pub(crate) const NEVER: Denied = Denied::RateLimited {
        retry_after: Duration::MAX,
    };

    /// A [`Denied::RateLimited`] of `nanos` nanoseconds.
    #[inline]
    pub(crate) fn rate_limited(nanos: u64) -> Denied {
        Denied::RateLimited {
            retry_after: Duration::from_nanos(nanos),
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::RateLimited { retry_after } => {
                write!(f, "rate limited: retry after {retry_after:?}")
            }
            Denied::ExceedsCapacity { capacity } => write!(
                f,
                "request exceeds the limiter's capacity of {capacity} permits and can never conform"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Denied {}

/// The size checks every limiter makes before touching its state: [`Denied::ExceedsCapacity`]
/// for `n > capacity` (never conforms, consumes nothing), `Ok(false)` for `n == 0` (admitted,
/// nothing to do), `Ok(true)` for a request to decide.
#[inline]
pub(crate) fn precheck(n: u32, capacity: u32) -> Result<bool, Denied> {
    if n > capacity {
        Err(Denied::ExceedsCapacity { capacity })
    } else {
        Ok(n != 0)
    }
}

/// A read of a limiter's state that consumes nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new());
/// limiter.try_acquire_n(4).unwrap();
/// let s = limiter.snapshot();
/// assert_eq!(s.remaining, 6);
/// assert_eq!(s.full_after, Duration::from_millis(400));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Snapshot {
    /// Permits a request could take right now (`0..=burst`).
    pub remaining: u32,
    /// How long until the limiter is full again (`burst` permits); zero if it is full.
    pub full_after: Duration,
}

/// A rate limiter: every algorithm in this crate implements it.
///
/// The trait is dyn-compatible, so `Box<dyn RateLimiter>` can pick the algorithm at run
/// time. `try_acquire_n_at` is the one required decision; the others read the limiter's own
/// clock and call it.
///
/// # Contract (for every implementation)
///
/// - `n == 0` succeeds and changes nothing.
/// - `n > burst` is [`Denied::ExceedsCapacity`] and consumes nothing.
/// - A denial never changes the state.
/// - [`Denied::RateLimited`]'s `retry_after` is exact: waiting exactly that long and asking
///   again succeeds (if nothing else consumed meanwhile); asking any earlier fails.
/// - No permit is created by a race: with a frozen clock, any number of threads share
///   exactly the limiter's capacity.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter, TokenBucket};
///
/// let quota = Quota::per_second(100)?;
/// let limiter: Box<dyn RateLimiter> = if std::env::args().count() > 99 {
///     Box::new(TokenBucket::new(quota)?)
/// } else {
///     Box::new(Gcra::new(quota))
/// };
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait RateLimiter: Send + Sync {
    /// Decide a request for `n` permits at the explicit time `now`, in nanoseconds of the
    /// limiter's clock (for a caller that already holds the request's arrival time, or a
    /// replay driving trace time).
    ///
    /// # Errors
    ///
    /// [`Denied`] as described in the trait's contract.
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied>;

    /// The current time of the limiter's clock, in nanoseconds since its epoch.
    fn now(&self) -> Nanos;

    /// The state at `now`, consuming nothing.
    fn snapshot_at(&self, now: Nanos) -> Snapshot;

    /// The quota the limiter enforces.
    fn quota(&self) -> Quota;

    /// Decide a request for `n` permits now.
    ///
    /// # Errors
    ///
    /// [`Denied`] as described in the trait's contract.
    #[inline]
    fn try_acquire_n(&self, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(n, self.now())
    }

    /// Decide a request for one permit now.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] when no permit is available yet.
    #[inline]
    fn try_acquire(&self) -> Result<(), Denied> {
        self.try_acquire_n(1)
    }

    /// The state now, consuming nothing.
    #[inline]
    fn snapshot(&self) -> Snapshot {
        self.snapshot_at(self.now())
    }
}
