//! [`Counted`]: any limiter's decisions counted, for an operator to see it work; the
//! snapshot of its counts is [`Counts`].
//!
//! A limiter that is not wrapped pays nothing: the counters live in the wrapper only.

mod counts;
mod stripes;

pub use counts::Counts;

use crate::clock::Nanos;
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::limiter::{KeyedRateLimiter, KeyedRefund, RateLimiter, Refund};
use crate::limiters::{KeyedReserve, Reservation, Reserve};
use crate::quota::Quota;
use core::time::Duration;
use stripes::Counters;

/// A limiter whose decisions are counted: admitted, refused (rate-limited or final),
/// delayed, permits charged and refunded, wait granted, time spent exhausted ([`Counts`]
/// says exactly what each call counts).
///
/// `Counted<L>` is `L` with the same traits, each by delegation to `L` followed by the
/// counting: [`RateLimiter`], [`Refund`] and [`Reserve`] when `L` has them, and
/// [`KeyedRateLimiter<K>`](KeyedRateLimiter), [`KeyedRefund<K>`](KeyedRefund) and
/// [`KeyedReserve<K>`](KeyedReserve) when `L` has those. It makes the same decisions as `L`
/// (counting reads a decision, never changes it), and a limiter that is not wrapped pays
/// nothing. Wrap a composite ([`All`](crate::All), [`Keyed`][crate::Keyed]) to count its
/// combined decisions, or its parts to count each; a part of an `All` that admitted a
/// request which a later part refused counts an admission and then a refund.
///
/// # Cost and stripes
///
/// One plain add (a relaxed load and store, no locked instruction) on the calling thread's
/// own stripe per decision (one more for a request of `n ≠ 1` permits, two more for a
/// delayed reservation), and one relaxed load of a shared word that changes only when an
/// exhausted episode opens or closes. Each thread that decides gets a stripe of its own on
/// its first decision (the `thread_local` crate's per-object slots), alone on its cache
/// lines (`crossbeam_utils::CachePadded`), written by that thread only, so no two threads
/// ever write one line. [`Counted::counts`] sums the stripes. Without `std` (and under
/// loom) there is one stripe, counted with atomic read-modify-writes.
///
/// # Exactness
///
/// No increment is lost, whatever the threads: each stripe has one writer. A
/// [`Counted::counts`] while decisions run is a sum of values each of which was current at
/// some moment of the read (a concurrent reader may see one thread's latest decisions and
/// not another's); once the deciding threads are joined (or otherwise synchronised with the
/// reader) it is exact. The time exhausted is a measure by decision times, with the limits
/// that [`Counts`] lists ("Time exhausted"). A thread's stripe lives as long as the
/// limiter: its counts stay in the sum after the thread ends, and a later thread may
/// take the stripe over and add to it.
///
/// # Examples
///
/// ```
/// use limitcore::{Counted, LeakyBucket, Quota, RateLimiter, Reserve};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let pacer = Counted::new(LeakyBucket::with_clock(Quota::per_second(10)?.with_burst(3)?, ManualClock::new())?);
/// for _ in 0..3 {
///     pacer.reserve_n(1).unwrap();                   // starts at 0, 100 and 200 ms
/// }
/// assert!(pacer.reserve_n(1).is_err());              // the queue is full
/// assert!(pacer.try_acquire_n(4).is_err());          // more than its capacity: final
/// let counts = pacer.counts();
/// assert_eq!((counts.admitted, counts.delayed), (3, 2));
/// assert_eq!(counts.wait(), Duration::from_millis(300));
/// assert_eq!((counts.rate_limited, counts.final_refusals), (1, 1));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
///
/// Keyed, shared by threads:
///
/// ```
/// use limitcore::{Counted, Keyed, KeyedRateLimiter, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
/// use std::sync::Arc;
///
/// let per_client: Keyed<u32, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(5)?, ManualClock::new())?;
/// let limiter = Arc::new(Counted::new(per_client));
/// let threads: Vec<_> = (0..2)
///     .map(|_| {
///         let limiter = limiter.clone();
///         std::thread::spawn(move || (0..10).filter(|_| limiter.try_acquire(&7).is_ok()).count())
///     })
///     .collect();
/// let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
/// assert_eq!(admitted, 5);                           // the clock is frozen: the burst
/// let counts = limiter.counts();
/// assert_eq!((counts.admitted, counts.rate_limited), (5, 15));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct Counted<L> {
    inner: L,
    counters: Counters,
}

impl<L> Counted<L> {
    /// `inner`, counted from now on: fresh counters (all zero), a stripe for each thread
    /// that decides through it.
    pub fn new(inner: L) -> Self {
        Counted {
            inner,
            counters: Counters::new(),
        }
    }

    /// The wrapped limiter. Decisions made through it directly are not counted.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The wrapped limiter, unwrapped (the counts are dropped).
    pub fn into_inner(self) -> L {
        self.inner
    }

    /// A snapshot of the counts: every stripe summed (see the type's "Exactness").
    pub fn counts(&self) -> Counts {
        // A gauge of the limiter's state (the budgets' debt, see `Counts`, "Gauges") would
        // be read from `self.inner` here, beside the totals.
        self.counters.counts()
    }

    /// The number of stripes the counts are spread over: one per thread that has decided
    /// through this wrapper (a thread that ended leaves its stripe to the next thread
    /// started; 1 without `std`).
    pub fn stripes(&self) -> usize {
        self.counters.stripes()
    }
}

impl<L: RateLimiter> RateLimiter for Counted<L> {
    // Always inlined, as `Limiter`'s: counting reads the refusal's tag only, so a caller that
    // does not look at `retry_after` still never computes it.
    #[inline(always)]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        let result = self.inner.try_acquire_n_at(n, now);
        self.counters.decided(n, now, &result);
        result
    }

    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        let decision = self.inner.decide_n_at(n, now);
        self.counters.decided(n, now, &decision.result);
        decision
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.inner.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.inner.snapshot_at(now)
    }

    fn quota(&self) -> Quota {
        self.inner.quota()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.inner.capacity()
    }

    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
        self.inner.sleep_hint(deadline, waker)
    }
}

impl<L: Refund> Refund for Counted<L> {
    #[inline]
    fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        let result = self.inner.acquire_refundable_at(n, now);
        self.counters.decided(n, now, &result);
        result
    }

    fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        let (result, state) = self.inner.decide_refundable_at(n, now);
        self.counters.decided(n, now, &result);
        (result, state)
    }

    fn refund(&self, receipt: Receipt, at: Nanos) {
        self.counters.refunded(receipt.n());
        self.inner.refund(receipt, at);
    }

    fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.inner.check_at(n, now)
    }

    fn charge_at(&self, n: u32, now: Nanos) -> Charged {
        let charged = self.inner.charge_at(n, now);
        self.counters.charged(charged.charged);
        charged
    }

    fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        let estimate = receipt.n();
        if actual < estimate {
            self.counters.refunded(estimate - actual);
        }
        let charged = self.inner.settle(receipt, actual, at);
        self.counters.charged(charged.charged);
        charged
    }

    fn credit(&self, n: u32, at: Nanos) {
        self.counters.credited(n);
        self.inner.credit(n, at);
    }
}

impl<L: Reserve> Reserve for Counted<L> {
    #[inline]
    fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied> {
        let result = self.inner.reserve_n_at(n, now, max_wait);
        self.counters
            .reserved(n, now, result.as_ref().map(Reservation::delay_ns));
        result
    }
}

impl<K: ?Sized, L: KeyedRateLimiter<K>> KeyedRateLimiter<K> for Counted<L> {
    #[inline(always)]
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        let result = self.inner.try_acquire_n_at(key, n, now);
        self.counters.decided(n, now, &result);
        result
    }

    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        let decision = self.inner.decide_n_at(key, n, now);
        self.counters.decided(n, now, &decision.result);
        decision
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        self.inner.snapshot_at(key, now)
    }

    fn quota_for(&self, key: &K) -> Quota {
        self.inner.quota_for(key)
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.inner.now()
    }
}

impl<K: ?Sized, L: KeyedRefund<K>> KeyedRefund<K> for Counted<L> {
    #[inline]
    fn acquire_refundable_at(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        let result = self.inner.acquire_refundable_at(key, n, now);
        self.counters.decided(n, now, &result);
        result
    }

    fn decide_refundable_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot) {
        let (result, state) = self.inner.decide_refundable_at(key, n, now);
        self.counters.decided(n, now, &result);
        (result, state)
    }

    fn refund(&self, key: &K, receipt: Receipt, at: Nanos) {
        self.counters.refunded(receipt.n());
        self.inner.refund(key, receipt, at);
    }

    fn check_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.inner.check_at(key, n, now)
    }

    fn charge_at(&self, key: &K, n: u32, now: Nanos) -> Charged {
        let charged = self.inner.charge_at(key, n, now);
        self.counters.charged(charged.charged);
        charged
    }

    fn settle(&self, key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        let estimate = receipt.n();
        if actual < estimate {
            self.counters.refunded(estimate - actual);
        }
        let charged = self.inner.settle(key, receipt, actual, at);
        self.counters.charged(charged.charged);
        charged
    }

    fn credit(&self, key: &K, n: u32, at: Nanos) {
        self.counters.credited(n);
        self.inner.credit(key, n, at);
    }
}

impl<K: ?Sized, L: KeyedReserve<K>> KeyedReserve<K> for Counted<L> {
    #[inline]
    fn reserve_n_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let result = self.inner.reserve_n_at(key, n, now, max_wait);
        self.counters
            .reserved(n, now, result.as_ref().map(Reservation::delay_ns));
        result
    }
}

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::limiters::{Gcra, LeakyBucket};

    fn gcra(per_second: u32) -> Counted<Gcra<ManualClock>> {
        Counted::new(
            Gcra::with_clock(Quota::per_second(per_second).unwrap(), ManualClock::new()).unwrap(),
        )
    }

    #[test]
    fn every_entry_point_counts_its_decision() {
        let l = gcra(4);
        l.try_acquire_n_at(1, 0).unwrap();
        assert!(l.decide_n_at(2, 0).is_admitted());
        let receipt = l.acquire_refundable_at(1, 0).unwrap();
        assert!(l.decide_refundable_at(1, 0).0.is_err()); // full: opens an episode at 0
        assert_eq!(l.check_at(1, 0), l.inner().check_at(1, 0)); // not counted
        let _ = l.snapshot_at(0);
        l.refund(receipt, 0);
        l.refund(Receipt::NOTHING, 0); // nothing given back: not counted
        assert!(l.try_acquire_n_at(5, 0).unwrap_err().is_final());
        let c = l.counts();
        assert_eq!((c.admitted, c.permits), (3, 4));
        assert_eq!((c.rate_limited, c.final_refusals), (1, 1));
        assert_eq!((c.refunds, c.permits_refunded), (1, 1));
        assert_eq!((c.exhausted_ns, c.exhausted_since), (0, Some(0)));
        // The refunded permit is available again: this closes the episode at 1 ms.
        l.try_acquire_n_at(1, 1_000_000).unwrap();
        let c = l.counts();
        assert_eq!((c.exhausted_ns, c.exhausted_since), (1_000_000, None));
    }

    #[test]
    fn reservations_count_their_delays() {
        let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
        let l = Counted::new(LeakyBucket::with_clock(q, ManualClock::new()).unwrap());
        let delays: alloc::vec::Vec<Nanos> = (0..2)
            .map(|_| l.reserve_n_at(1, 0, Duration::MAX).unwrap().delay_ns())
            .collect();
        assert_eq!(delays, [0, 100_000_000]);
        assert!(l.reserve_n_at(1, 0, Duration::MAX).is_err());
        assert_eq!(l.reserve_n_at(0, 0, Duration::MAX).unwrap().delay_ns(), 0);
        let c = l.counts();
        assert_eq!(
            (c.admitted, c.permits, c.delayed, c.wait_ns),
            (3, 2, 1, 100_000_000)
        );
        assert_eq!(c.rate_limited, 1);
        assert_eq!(l.stripes(), 1, "one thread decided");
        assert_eq!(l.into_inner().snapshot_at(0).remaining, 0);
    }
}
