//! [`Gcra`]: the Generic Cell Rate Algorithm, whole state in one `AtomicU64`.
//!
//! Source: ATM Forum Traffic Management Specification 4.0 (af-tm-0056.000, 1996), section
//! 4.4.2 and Annex C, "virtual scheduling" form. The specification's equivalent
//! "continuous-state leaky bucket" form is implemented independently in
//! [`reference::GcraModel`](crate::reference::GcraModel), and the two are tested against
//! each other.

use crate::cas;
use crate::clock::{duration_to_nanos, Clock, Nanos};
use crate::limiter::{Denied, RateLimiter, Snapshot};
use crate::reservation::{Reservation, Reserve};
use crate::sync::{AtomicU64, Ordering};
use crate::DefaultClock;
use crate::Quota;
use core::time::Duration;

/// The numbers a GCRA-family decision needs, precomputed from a [`Quota`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// Emission interval T, ns (≥ 1).
    pub(crate) interval: Nanos,
    /// `burst × T`, ns (≤ `MAX_BURST_SPAN_NS`): the most a request may run ahead of now,
    /// its own cost included. GCRA's τ is `span − T`.
    pub(crate) span: Nanos,
    /// Most permits at once.
    pub(crate) burst: u32,
}

impl Schedule {
    pub(crate) fn new(quota: &Quota) -> Self {
        Schedule {
            interval: quota.emission_interval_ns(),
            span: quota.burst_span_ns(),
            burst: quota.burst(),
        }
    }

    /// The checks every limiter makes before touching its state: `Ok(false)` for `n == 0`
    /// (admitted, nothing to do), [`Denied::ExceedsCapacity`] for `n > burst`.
    #[inline]
    pub(crate) fn precheck(&self, n: u32) -> Result<bool, Denied> {
        crate::limiter::precheck(n, self.burst)
    }

    /// The GCRA transition: from theoretical arrival time `tat`, decide `n` permits at `now`
    /// and return the new TAT, or the denial.
    ///
    /// Requires `1 ≤ n ≤ burst` (see [`Schedule::precheck`]). Admits iff
    /// `max(tat, now) + n·T ≤ now + burst·T`, computed as `backlog ≤ span − n·T` with
    /// `backlog = tat − now` (0 if `tat ≤ now`), so no sum near `u64::MAX` can wrap into an
    /// admission. The new TAT is `max(tat, now) + n·T ≥ tat`: the state never moves back, and
    /// a `now` behind the state only enlarges the backlog (stricter).
    ///
    /// The TAT a request would leave (`now + backlog + n·T`, whether it conforms now or after
    /// waiting) must fit in `u64`; within one burst span of the clock's 584-year horizon it
    /// may not, and such a request can never conform: it is refused with
    /// `retry_after = Duration::MAX`.
    #[inline]
    pub(crate) fn gcra(&self, tat: Nanos, now: Nanos, n: u32) -> Result<Nanos, Denied> {
        // ≤ span ≤ 2^62 because n ≤ burst: no overflow.
        let cost = self.interval * u64::from(n);
        let backlog = tat.saturating_sub(now);
        let Some(next) = backlog.checked_add(cost).and_then(|b| now.checked_add(b)) else {
            return Err(Denied::NEVER);
        };
        let allowance = self.span - cost;
        if backlog > allowance {
            return Err(Denied::rate_limited(backlog - allowance));
        }
        Ok(next)
    }

    /// A reservation of `n` permits at `now` from `tat`: `(new TAT, delay)`, where the
    /// permits conform at `now + delay` and the TAT advances as if they had been admitted
    /// then (`max(tat, now) + n·T`, the same new TAT as [`Schedule::gcra`]).
    ///
    /// With `pace == false` (GCRA) the delay is the wait until the request conforms,
    /// `backlog − (span − n·T)` or 0, and there is no bound but `max_wait`. With `pace ==
    /// true` (the leaky bucket as a queue) every request starts when the previous one's
    /// slots end, so the delay is the whole backlog, and a request whose slots would end
    /// more than `burst` slots from now is refused as [`Schedule::gcra`] refuses it.
    /// A delay above `max_wait` is refused without any write; `retry_after` is the exact
    /// wait after which both bounds (capacity and `max_wait`) hold.
    #[inline]
    pub(crate) fn reserve(
        &self,
        tat: Nanos,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
        pace: bool,
    ) -> Result<(Nanos, Nanos), Denied> {
        let cost = self.interval * u64::from(n);
        let backlog = tat.saturating_sub(now);
        let Some(next) = backlog.checked_add(cost).and_then(|b| now.checked_add(b)) else {
            return Err(Denied::NEVER);
        };
        let allowance = self.span - cost;
        // Both constraints are bounds on the backlog, which shrinks 1 ns per ns, so one
        // combined bound gives the exact `retry_after`: pacing needs the backlog within the
        // capacity *and* within the wait; GCRA waits for conformance, then up to max_wait.
        let limit = if pace {
            allowance.min(max_wait)
        } else {
            allowance.saturating_add(max_wait)
        };
        if backlog > limit {
            return Err(Denied::rate_limited(backlog - limit));
        }
        let delay = if pace {
            backlog
        } else {
            backlog.saturating_sub(allowance)
        };
        Ok((next, delay))
    }

    /// What [`Schedule::gcra`] would allow at `now` from `tat`, consuming nothing.
    #[inline]
    pub(crate) fn snapshot(&self, tat: Nanos, now: Nanos) -> Snapshot {
        let backlog = tat.saturating_sub(now);
        let remaining = self.span.saturating_sub(backlog) / self.interval;
        Snapshot {
            // ≤ span / interval = burst.
            remaining: remaining as u32,
            full_after: Duration::from_nanos(backlog),
        }
    }
}

/// The Generic Cell Rate Algorithm: a lock-free limiter whose whole state is one
/// `AtomicU64`, the *theoretical arrival time* (TAT).
///
/// # State
///
/// The word is the TAT in nanoseconds since the clock's epoch: the time at which the limiter
/// will be full again (0 for a fresh limiter). `u64` nanoseconds give a 584-year horizon;
/// the arithmetic is checked, never wrapped (see "Overflow" below).
///
/// # Contract
///
/// - A fresh limiter admits `burst` permits at once; idle time never yields more than `burst`.
/// - A request for `n` permits at `now` is admitted iff `max(TAT, now) + n·T ≤ now + burst·T`
///   (T = emission interval); the TAT then becomes `max(TAT, now) + n·T`.
/// - Boundaries are inclusive: after a denial, waiting exactly `retry_after` and asking
///   again succeeds; asking one nanosecond earlier fails.
/// - `n == 0` succeeds and changes nothing; `n > burst` is [`Denied::ExceedsCapacity`].
/// - A denial never writes. The TAT never moves backwards, so a stale or backwards clock
///   reading can only make a decision stricter, never admit more.
/// - No permit is created by a race: the transition is applied by one CAS loop, so with a
///   frozen clock any number of threads are admitted exactly `burst` permits in total.
/// - In any half-open window of length `w` it admits at most `burst + ⌈w / T⌉ − 1` permits
///   (`2·burst − 1` for `w = period` with the default burst); where "at most N in any
///   window" is the contract, use a sliding log instead.
///
/// # Overflow
///
/// `n·T` cannot overflow (`n ≤ burst` and `burst·T ≤ 2^62` by [`Quota`]'s limits), so a
/// quota of 1 per day with burst 10 refuses `n = 213 505` with `ExceedsCapacity` instead of
/// wrapping into an admission. A request whose TAT would pass `u64::MAX` ns (possible only
/// within one burst span of the clock's 584-year horizon) can never conform and is refused
/// with `retry_after = Duration::MAX`.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = Gcra::with_clock(Quota::per_second(10)?.with_burst(2)?, clock.clone());
/// assert!(limiter.try_acquire().is_ok());
/// assert!(limiter.try_acquire().is_ok());
/// let wait = limiter.try_acquire().unwrap_err().retry_after().unwrap();
/// assert_eq!(wait, Duration::from_millis(100));
/// clock.advance(wait);
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct Gcra<C = DefaultClock> {
    /// The TAT, ns since the clock's epoch. See the type's "State".
    tat: AtomicU64,
    schedule: Schedule,
    quota: Quota,
    clock: C,
}

#[cfg(feature = "std")]
impl Gcra<DefaultClock> {
    /// A full limiter for `quota` on the default [`MonotonicClock`](crate::clock::MonotonicClock).
    pub fn new(quota: Quota) -> Self {
        Gcra::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> Gcra<C> {
    /// A full limiter for `quota` reading time from `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        Gcra {
            tat: AtomicU64::new(0),
            schedule: Schedule::new(&quota),
            quota,
            clock,
        }
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    pub(crate) fn state(&self) -> &AtomicU64 {
        &self.tat
    }

    pub(crate) fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The current theoretical arrival time, ns since the clock's epoch (0 when fresh).
    pub fn tat(&self) -> Nanos {
        // Relaxed: a read-only observation of the single state word (see `cas` "Orderings").
        self.tat.load(Ordering::Relaxed)
    }
}

impl<C: Clock> RateLimiter for Gcra<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !self.schedule.precheck(n)? {
            return Ok(());
        }
        cas::apply(&self.tat, |tat| Ok((self.schedule.gcra(tat, now, n)?, ())))
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.schedule.snapshot(self.tat(), now)
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

impl<C: Clock> Reserve for Gcra<C> {
    /// Take `n` permits now for the time they conform: the delay is the wait `try_acquire`
    /// would report (0 if they conform now), and the TAT advances as if they were admitted
    /// then, so later requests queue behind them.
    #[inline]
    fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied> {
        if !self.schedule.precheck(n)? {
            return Ok(Reservation::new(now, 0));
        }
        let max_wait = duration_to_nanos(max_wait);
        let delay = cas::apply(&self.tat, |tat| {
            self.schedule.reserve(tat, now, n, max_wait, false)
        })?;
        Ok(Reservation::new(now, delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn schedule(count: u32, period_ns: u64, burst: u32) -> Schedule {
        let q = Quota::new(count, Duration::from_nanos(period_ns))
            .unwrap()
            .with_burst(burst)
            .unwrap();
        Schedule::new(&q)
    }

    #[test]
    fn transition_is_pure_and_exact() {
        let s = schedule(1, 100, 3); // T = 100, span = 300
        assert_eq!(s.gcra(0, 1_000, 1), Ok(1_100));
        assert_eq!(s.gcra(1_100, 1_000, 2), Ok(1_300));
        assert_eq!(s.gcra(1_300, 1_000, 1), Err(Denied::rate_limited(100)));
        assert_eq!(s.gcra(1_300, 1_100, 1), Ok(1_400), "inclusive boundary");
        assert_eq!(s.gcra(1_300, 1_099, 1), Err(Denied::rate_limited(1)));
    }

    #[test]
    fn backwards_now_never_moves_state_back_and_is_stricter() {
        let s = schedule(1, 100, 3);
        // now far behind the TAT: refused, not admitted from a "fresh" reading.
        assert_eq!(s.gcra(10_000, 0, 1), Err(Denied::rate_limited(9_800)));
        // Admitted when behind but within tolerance: the TAT only grows.
        assert_eq!(s.gcra(1_000, 900, 1), Ok(1_100));
    }

    #[test]
    fn no_wrap_near_the_end_of_time() {
        let s = schedule(1, 100, 3);
        let end = u64::MAX;
        assert_eq!(s.gcra(0, end - 150, 1), Ok(end - 50));
        let denied = s.gcra(end - 50, end - 150, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::MAX));
        // Not "wait 100 ns": at end - 50 the TAT would still have to pass u64::MAX.
        assert_eq!(s.gcra(end - 50, end - 250, 1), Err(Denied::NEVER));
        assert_eq!(
            s.gcra(end - 150, end - 400, 1),
            Err(Denied::rate_limited(50))
        );
        // The saturating bug this guards against: everything admitted at u64::MAX.
        assert!(s.gcra(end, end, 3).is_err());
    }

    #[test]
    fn one_per_day_burst_ten_refuses_huge_n() {
        let q = Quota::per_day(1).unwrap().with_burst(10).unwrap();
        let limiter = Gcra::with_clock(q, ManualClock::new());
        assert_eq!(
            limiter.try_acquire_n(213_505),
            Err(Denied::ExceedsCapacity { capacity: 10 })
        );
        assert_eq!(
            limiter.try_acquire_n(u32::MAX),
            Err(Denied::ExceedsCapacity { capacity: 10 })
        );
        assert_eq!(limiter.snapshot().remaining, 10);
        assert!(limiter.try_acquire_n(10).is_ok());
    }

    #[test]
    fn snapshot_reads_without_consuming() {
        let s = schedule(1, 100, 3);
        assert_eq!(
            s.snapshot(0, 5),
            Snapshot {
                remaining: 3,
                full_after: Duration::ZERO
            }
        );
        assert_eq!(
            s.snapshot(1_250, 1_000),
            Snapshot {
                remaining: 0,
                full_after: Duration::from_nanos(250)
            }
        );
        assert_eq!(
            s.snapshot(1_150, 1_000),
            Snapshot {
                remaining: 1,
                full_after: Duration::from_nanos(150)
            }
        );
        assert_eq!(s.snapshot(u64::MAX, 0).remaining, 0);
    }
}
