//! Per-lane counters ([`LaneCounts`]): units granted, requests, pending, delayed, total wait,
//! cancelled. A grant's two counts (a request, its units) are one `fetch_add` on the current
//! CPU's stripe (picked as [`Counted`](crate::Counted)'s are); the rest change only with
//! the queue's lock held.
//!
//! # A stripe's word
//!
//! Requests in the top 16 bits, units in the low 48. The add that takes the requests to
//! 2^15 *drains* the stripe: it swaps the word for 0 and adds both fields to the lane's wide
//! totals. Exactly one add crosses 2^15 between two drains (the adds are totally ordered),
//! and adds that land after the swap start again from 0. The units cannot overflow: at most
//! 2^15 requests plus one per thread adding at that moment, of fewer than 2^32 units each,
//! stay below 2^48 for fewer than 2^15 threads on one stripe.
//!
//! # Orderings
//!
//! Every counter is a tally or a gauge that no decision reads and that publishes no other
//! memory, so every access is `Relaxed`: a read-modify-write loses no increment whatever its
//! ordering (those of one atomic are totally ordered), the gauges are stored only with the
//! lock held (so their stores are ordered by it), and a reader sums loads of the totals and
//! the stripes. A read while grants are made can miss a drain in flight (its swap done, its
//! adds to the totals not yet: at most 2^15 requests of one stripe, for that instant); once
//! the threads that decided are joined (or synchronised with the reader otherwise), a read
//! is exact.

use crate::sync::{self, AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;
use crossbeam_utils::CachePadded;

/// What one lane of a [`Lanes`](super::Lanes) limiter did, since it was built.
///
/// # Examples
///
/// ```
/// use limitcore::{Lane, Lanes, LanesConfig};
/// use limitcore::clock::ManualClock;
///
/// let lanes = Lanes::with_clock(LanesConfig::new("1MiB/s burst 64KiB".parse()?), ManualClock::new())?;
/// lanes.try_acquire(Lane::USER, 4096)?;
/// let counts = lanes.counts(Lane::USER).unwrap();
/// assert_eq!((counts.requests, counts.granted, counts.delayed), (1, 4096, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct LaneCounts {
    /// Units (bytes) granted to the lane's requests, in full or in pieces, including the
    /// pieces of requests later cancelled.
    pub granted: u64,
    /// Requests made (every call that asked for at least one unit, granted or not).
    pub requests: u64,
    /// Requests waiting now.
    pub pending: u64,
    /// Requests that waited (not granted in full when made), cancelled ones included.
    pub delayed: u64,
    /// Requests that gave up waiting (a deadline, a dropped future or ticket).
    pub cancelled: u64,
    /// The total time the delayed requests that were granted in full waited, from their
    /// submission to the schedule's time of their last piece (ns, as a duration).
    pub wait: Duration,
}

/// The counts of one lane on one CPU: requests (top 16 bits) and units (low 48 bits) in one
/// word (the module's "A stripe's word").
#[derive(Debug, Default)]
struct Fast {
    packed: AtomicU64,
}

/// The requests field's shift.
const REQUESTS: u32 = 48;
/// The units field.
const UNITS: u64 = (1 << REQUESTS) - 1;
/// The requests at which a stripe drains.
const DRAIN: u64 = 1 << 15;

/// The slow-path counts of one lane, and the totals its stripes drain into.
#[derive(Debug, Default)]
struct Slow {
    requests: AtomicU64,
    granted: AtomicU64,
    pending: AtomicU64,
    delayed: AtomicU64,
    cancelled: AtomicU64,
    wait_ns: AtomicU64,
}

/// Every lane's counters.
#[derive(Debug)]
pub(crate) struct Counters {
    lanes: usize,
    /// The number of stripes less one (a power of two less one).
    mask: usize,
    /// `stripes × lanes`, stripe-major: the current CPU's stripe's lane `l` is at
    /// `stripe · lanes + l`.
    fast: Box<[CachePadded<Fast>]>,
    slow: Box<[Slow]>,
}

/// Relaxed: a tally (module note).
#[inline(always)]
fn bump(counter: &AtomicU64, v: u64) {
    counter.fetch_add(v, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn new(lanes: usize) -> Counters {
        let stripes = sync::cpus().max(1).next_power_of_two();
        Counters {
            lanes,
            mask: stripes - 1,
            fast: (0..stripes * lanes)
                .map(|_| CachePadded::new(Fast::default()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            slow: (0..lanes).map(|_| Slow::default()).collect(),
        }
    }

    #[inline(always)]
    fn fast(&self, lane: usize) -> &Fast {
        let stripe = sync::shard_hint() & self.mask;
        &self.fast[stripe * self.lanes + lane]
    }

    /// Add `requests` (0 or 1) and `units` to `lane`'s stripe, draining it at 2^15 requests.
    #[inline(always)]
    fn add(&self, lane: usize, requests: u64, units: u32) {
        let fast = self.fast(lane);
        let add = requests << REQUESTS | u64::from(units);
        // Relaxed: a tally (module note).
        let before = fast.packed.fetch_add(add, Ordering::Relaxed);
        if requests > 0 && before >> REQUESTS == DRAIN - 1 {
            self.drain(lane, fast);
        }
    }

    /// Move a stripe's counts into the lane's totals (see the module).
    #[cold]
    #[inline(never)]
    fn drain(&self, lane: usize, fast: &Fast) {
        // Relaxed: RMWs of tallies (module note); the swap takes every add before it.
        let taken = fast.packed.swap(0, Ordering::Relaxed);
        let slow = &self.slow[lane];
        bump(&slow.requests, taken >> REQUESTS);
        bump(&slow.granted, taken & UNITS);
    }

    /// A request of `lane` granted `units` at once (on the fast path).
    #[inline(always)]
    pub(crate) fn fast_grant(&self, lane: usize, units: u32) {
        self.add(lane, 1, units);
    }

    /// A request of `lane` made (it will wait, or was granted in part on the fast path).
    pub(crate) fn request(&self, lane: usize, units: u32) {
        self.add(lane, 1, units);
    }

    /// A piece of `units` granted to a waiting request of `lane`.
    pub(crate) fn piece(&self, lane: usize, units: u32) {
        self.add(lane, 0, units);
    }

    /// A request of `lane` started waiting.
    pub(crate) fn delayed(&self, lane: usize) {
        bump(&self.slow[lane].delayed, 1);
    }

    /// A waiting request of `lane` finished after `waited` ns.
    pub(crate) fn waited(&self, lane: usize, waited: u64) {
        bump(&self.slow[lane].wait_ns, waited);
    }

    /// A waiting request of `lane` gave up.
    pub(crate) fn cancelled(&self, lane: usize) {
        bump(&self.slow[lane].cancelled, 1);
    }

    /// `lane` has `pending` requests waiting (with the queue's lock held).
    pub(crate) fn pending(&self, lane: usize, pending: usize) {
        // Relaxed: stored only with the lock held (module note).
        self.slow[lane]
            .pending
            .store(pending as u64, Ordering::Relaxed);
    }

    /// The counts of `lane`.
    pub(crate) fn counts(&self, lane: usize) -> LaneCounts {
        // Relaxed loads: partners of the relaxed tallies above (module note).
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let slow = &self.slow[lane];
        let (mut requests, mut granted) = (load(&slow.requests), load(&slow.granted));
        for fast in self.fast.iter().skip(lane).step_by(self.lanes) {
            let packed = load(&fast.packed);
            requests = requests.wrapping_add(packed >> REQUESTS);
            granted = granted.wrapping_add(packed & UNITS);
        }
        LaneCounts {
            granted,
            requests,
            pending: load(&slow.pending),
            delayed: load(&slow.delayed),
            cancelled: load(&slow.cancelled),
            wait: Duration::from_nanos(load(&slow.wait_ns)),
        }
    }
}

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_drains_into_the_totals_and_loses_nothing() {
        let c = Counters::new(2);
        // Past several drains: 3 × 2^15 + 5 requests of u32::MAX units on one stripe.
        let n = 3 * DRAIN + 5;
        for _ in 0..n {
            c.fast_grant(1, u32::MAX);
        }
        c.piece(1, 7);
        let counts = c.counts(1);
        assert_eq!(counts.requests, n);
        assert_eq!(counts.granted, n * u64::from(u32::MAX) + 7);
        // Drains happened (with 2 stripes, at least one held 2^15 requests at some point).
        assert!(c.slow[1].requests.load(Ordering::Relaxed) >= DRAIN);
        assert_eq!(c.counts(0), LaneCounts::default());
    }
}
