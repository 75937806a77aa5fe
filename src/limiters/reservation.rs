//! Reservations: permits taken now for a start time that may lie in the future.

use crate::clock::Nanos;
use crate::decision::Denied;
use crate::limiter::{KeyedRateLimiter, RateLimiter};
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::time::Duration;

/// Permits that have been taken, with the time at which they may be used.
///
/// A reservation consumes its permits when it is made, so reservations are served in the
/// order they were made (FIFO across threads): a load generator that sends each request at
/// [`Reservation::start`] keeps its schedule and can measure its lateness against it,
/// without coordinated omission.
///
/// # Examples
///
/// ```
/// use limitcore::{LeakyBucket, Quota, Reserve};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let pacer = LeakyBucket::with_clock(Quota::per_second(4)?, ManualClock::new())?;
/// let delays: Vec<_> = (0..3).map(|_| pacer.reserve_n(1).unwrap().delay()).collect();
/// assert_eq!(delays, [Duration::ZERO, Duration::from_millis(250), Duration::from_millis(500)]);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reservation {
    /// When the permits may be used, ns on the limiter's clock.
    start: Nanos,
    /// How long after the time of the reservation that is.
    delay: Nanos,
}

impl Reservation {
    pub(crate) fn new(now: Nanos, delay: Nanos) -> Self {
        Reservation {
            // now + delay cannot overflow: the new TAT, at least this large, was checked.
            start: now.saturating_add(delay),
            delay,
        }
    }

    /// How long to wait, from the time the reservation was made, before using the permits.
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay)
    }

    /// [`Reservation::delay`] in ns, as the limiter decided it.
    #[cfg(feature = "counters")]
    pub(crate) fn delay_ns(&self) -> Nanos {
        self.delay
    }

    /// When the permits may be used, in nanoseconds of the limiter's clock.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Block the thread until `clock` reaches [`Reservation::start`] (the clock of the
    /// limiter that made the reservation), returning at once if it has: the waiting layer's
    /// wait for a clock's time on its blocking driver. It sleeps as the clock says
    /// ([`Clock::sleep_hint`](crate::clock::Clock::sleep_hint)): on the OS timer for an OS
    /// clock, until the clock is moved for a [`ManualClock`](crate::clock::ManualClock);
    /// never spinning.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{LeakyBucket, Quota, Reserve};
    /// use limitcore::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pacer = LeakyBucket::with_clock(Quota::per_second(4)?, clock.clone())?;
    /// pacer.reserve_n(1)?.wait_blocking(&clock); // its start is now
    /// let second = pacer.reserve_n(1)?; // 250 ms from now, on the clock
    /// let mover = {
    ///     let clock = clock.clone();
    ///     std::thread::spawn(move || {
    ///         for _ in 0..5 {
    ///             clock.advance(Duration::from_millis(50));
    ///         }
    ///     })
    /// };
    /// second.wait_blocking(&clock); // woken by the moves, returns at 250 ms or later
    /// assert!(clock.now() >= 250_000_000);
    /// mover.join().unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn wait_blocking<C: crate::clock::Clock + ?Sized>(&self, clock: &C) {
        crate::notify::driver::block_on(crate::clock::Until {
            clock,
            at: self.start,
        });
    }
}

/// Limiters that can take permits now for a later start: [`Gcra`](crate::Gcra) (the start is
/// when the request conforms) and [`LeakyBucket`](crate::LeakyBucket) (the start is the
/// request's slot in the queue).
///
/// # Errors (for every method)
///
/// [`Denied::ExceedsCapacity`] for `n > burst`; [`Denied::RateLimited`] when the delay would
/// exceed `max_wait` (or, for the leaky bucket, its capacity), with `retry_after` the exact
/// wait after which it would not. A refusal reserves nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, Reserve};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?.with_burst(1)?, ManualClock::new())?;
/// assert_eq!(limiter.reserve_n_within(1, Duration::ZERO)?.delay(), Duration::ZERO);
/// assert_eq!(limiter.reserve_n_within(1, Duration::from_secs(1))?.delay(), Duration::from_millis(100));
/// // A third would wait 200 ms: more than allowed.
/// let denied = limiter.reserve_n_within(1, Duration::from_millis(150)).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(50)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Reserve: RateLimiter {
    /// Reserve `n` permits at the explicit time `now` (ns of the limiter's clock) if their
    /// start is at most `max_wait` away.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied>;

    /// Reserve `n` permits now if their start is at most `max_wait` away.
    ///
    /// # Errors
    ///
    /// See the trait.
    #[inline]
    fn reserve_n_within(&self, n: u32, max_wait: Duration) -> Result<Reservation, Denied> {
        self.reserve_n_at(n, self.now(), max_wait)
    }

    /// Reserve `n` permits now with no bound on the wait but the limiter's own (a leaky
    /// bucket's capacity; none for GCRA, whose queue then grows without bound).
    ///
    /// # Errors
    ///
    /// See the trait.
    #[inline]
    fn reserve_n(&self, n: u32) -> Result<Reservation, Denied> {
        self.reserve_n_at(n, self.now(), Duration::MAX)
    }
}

/// The keyed form of [`Reserve`]: permits for a key taken now for a later start, by
/// [`Keyed`][crate::Keyed] with a rule that reserves (`GcraRule`, `LeakyBucketRule`) and
/// by [`Global`][crate::Global] over a [`Reserve`] limiter. An HTTP layer's delay mode (a
/// request over the rate waits for its slot, up to a bound) is this.
///
/// # Errors (for every method)
///
/// As [`Reserve`], for the key's state.
///
/// # Examples
///
/// ```
/// use limitcore::{Keyed, KeyedReserve, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
/// use std::time::Duration;
///
/// let per_client: Keyed<&str, GcraRule, ManualClock> =
///     Keyed::with_clock(Quota::per_second(10)?.with_burst(1)?, ManualClock::new())?;
/// let wait = |k| per_client.reserve_n_at(&k, 1, 0, Duration::from_secs(1)).map(|r| r.delay());
/// assert_eq!(wait("a")?, Duration::ZERO);
/// assert_eq!(wait("a")?, Duration::from_millis(100)); // a's next slot
/// assert_eq!(wait("b")?, Duration::ZERO);             // b has its own
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyedReserve<K: ?Sized>: KeyedRateLimiter<K> {
    /// Reserve `n` permits for `key` at the explicit time `now` (ns of the limiter's clock)
    /// if their start is at most `max_wait` away.
    ///
    /// # Errors
    ///
    /// See the trait.
    fn reserve_n_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
        max_wait: Duration,
    ) -> Result<Reservation, Denied>;

    /// Reserve `n` permits for `key` now if their start is at most `max_wait` away.
    ///
    /// # Errors
    ///
    /// See the trait.
    #[inline]
    fn reserve_n_within(&self, key: &K, n: u32, max_wait: Duration) -> Result<Reservation, Denied> {
        self.reserve_n_at(key, n, self.now(), max_wait)
    }
}

/// [`Reserve`] and [`KeyedReserve`] for a pointer to a limiter (`&L`, `Box<L>`, `Arc<L>`),
/// as the core's other traits are forwarded, so that a shared limiter (an `Arc<Keyed<…>>`
/// in an HTTP layer's delay mode) reserves like an owned one.
macro_rules! forward_reserve {
    ($($ptr:ty),*) => {$(
        impl<L: Reserve + ?Sized> Reserve for $ptr {
            #[inline]
            fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied> {
                (**self).reserve_n_at(n, now, max_wait)
            }
        }

        impl<K: ?Sized, L: KeyedReserve<K> + ?Sized> KeyedReserve<K> for $ptr {
            #[inline]
            fn reserve_n_at(
                &self,
                key: &K,
                n: u32,
                now: Nanos,
                max_wait: Duration,
            ) -> Result<Reservation, Denied> {
                (**self).reserve_n_at(key, n, now, max_wait)
            }
        }
    )*};
}
forward_reserve!(&L, Box<L>, Arc<L>);
