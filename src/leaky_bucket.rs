//! [`LeakyBucket`]: the leaky bucket as a queue, a pacer that gives each request its start.
//!
//! Source: the "leaky bucket as a queue" of Tanenbaum, *Computer Networks* (3rd ed., 1996,
//! §5.3.4): requests leave at a constant rate, one every emission interval, and a full queue
//! refuses. It is built on the same single-word theoretical arrival time as
//! [`Gcra`](crate::Gcra), which in the queue reading is the time the queue drains.

use crate::cas;
use crate::clock::{duration_to_nanos, Clock, Nanos};
use crate::gcra::Schedule;
use crate::limiter::{Denied, RateLimiter, Snapshot};
use crate::reservation::{Reservation, Reserve};
use crate::sync::{AtomicU64, Ordering};
use crate::{DefaultClock, Quota};
use core::time::Duration;

/// A pacer: admitted requests start exactly one emission interval `T = period / count`
/// apart, in the order they were reserved, and a request is refused when it would end more
/// than `capacity` slots from now.
///
/// The capacity is the quota's burst: how many permits may be queued (scheduled but not yet
/// started) at once, the one being reserved included.
///
/// # State
///
/// One `AtomicU64`: the time, in nanoseconds of the clock, at which the queue drains (the
/// end of the last reserved slot; 0 when fresh), exactly GCRA's TAT. 584-year horizon; never
/// moves backwards.
///
/// # Contract
///
/// - [`Reserve::reserve_n`] gives `n` permits the `n` slots starting at
///   `start = max(drain time, now)`, with `delay = start − now`, if
///   `start + n·T − now ≤ capacity·T`; otherwise it refuses with the exact `retry_after`
///   after which it would fit. A refusal writes nothing.
/// - [`RateLimiter::try_acquire_n`] admits only a request that can start *now*
///   (delay 0): smooth output, no bursts. `retry_after` is the exact time until the queue
///   drains.
/// - `n == 0` succeeds without change; `n > capacity` is [`Denied::ExceedsCapacity`].
///
/// # Examples
///
/// ```
/// use limitcore::{LeakyBucket, Quota, RateLimiter, Reserve};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// // 10 per second, at most 3 queued.
/// let pacer = LeakyBucket::with_clock(Quota::per_second(10)?.with_burst(3)?, clock.clone());
/// for expected in [0, 100, 200] {
///     assert_eq!(pacer.reserve_n(1).unwrap().delay(), Duration::from_millis(expected));
/// }
/// assert_eq!(pacer.reserve_n(1).unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// // Nothing can start now: the queue drains at 300 ms.
/// assert_eq!(pacer.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(300)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct LeakyBucket<C = DefaultClock> {
    /// When the queue drains, ns since the clock's epoch (GCRA's TAT).
    drain: AtomicU64,
    schedule: Schedule,
    quota: Quota,
    clock: C,
}

#[cfg(feature = "std")]
impl LeakyBucket<DefaultClock> {
    /// An empty pacer for `quota` (capacity = its burst) on the default clock.
    pub fn new(quota: Quota) -> Self {
        LeakyBucket::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> LeakyBucket<C> {
    /// An empty pacer for `quota` (capacity = its burst) reading time from `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        LeakyBucket {
            drain: AtomicU64::new(0),
            schedule: Schedule::new(&quota),
            quota,
            clock,
        }
    }

    /// The clock this pacer reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many permits may be queued at once (the quota's burst).
    pub fn capacity(&self) -> u32 {
        self.schedule.burst
    }

    pub(crate) fn state(&self) -> &AtomicU64 {
        &self.drain
    }

    pub(crate) fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    fn drain_time(&self) -> Nanos {
        // Relaxed: a read-only observation of the single state word (see `cas` "Orderings").
        self.drain.load(Ordering::Relaxed)
    }
}

impl<C: Clock> RateLimiter for LeakyBucket<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !self.schedule.precheck(n)? {
            return Ok(());
        }
        cas::apply(&self.drain, |drain| {
            let (next, delay) = self.schedule.reserve(drain, now, n, 0, true)?;
            debug_assert_eq!(delay, 0);
            Ok((next, ()))
        })
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.schedule.snapshot(self.drain_time(), now)
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

impl<C: Clock> Reserve for LeakyBucket<C> {
    #[inline]
    fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied> {
        if !self.schedule.precheck(n)? {
            return Ok(Reservation::new(now, 0));
        }
        let max_wait = duration_to_nanos(max_wait);
        let delay = cas::apply(&self.drain, |drain| {
            self.schedule.reserve(drain, now, n, max_wait, true)
        })?;
        Ok(Reservation::new(now, delay))
    }
}
