//! Per-lane counters ([`LaneCounts`]): units granted, requests, pending, delayed, total wait,
//! cancelled. A grant's two counts (a request, its units) are two plain adds on the
//! calling thread's own tallies ([`tally`](crate::tally): no locked instruction, no shared
//! line); the rest change only with the queue's lock held.
//!
//! # Orderings
//!
//! Every counter is a tally or a gauge that no decision reads and that publishes no other
//! memory, so every access is `Relaxed`: the per-thread tallies have one writer each (see
//! [`tally`](crate::tally)), the slow counts are read-modify-writes (which lose no increment
//! whatever their ordering), the gauges are stored only with the lock held (so their stores
//! are ordered by it), and a reader sums loads. Once the threads that decided are joined (or
//! synchronised with the reader otherwise), a read is exact.

use super::config::MAX_LANES;
use crate::sync::{AtomicU64, Ordering};
use crate::tally::{PerThread, Tally};
use alloc::boxed::Box;
use core::time::Duration;

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

/// One lane's grant counts on one thread.
#[derive(Debug, Default)]
struct Fast {
    requests: Tally,
    units: Tally,
}

/// The slow-path counts of one lane.
#[derive(Debug, Default)]
struct Slow {
    pending: AtomicU64,
    delayed: AtomicU64,
    cancelled: AtomicU64,
    wait_ns: AtomicU64,
}

/// Every lane's counters.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Each thread's grant counts, one [`Fast`] per lane (inline: no pointer to follow).
    fast: PerThread<[Fast; MAX_LANES]>,
    slow: Box<[Slow]>,
}

/// Relaxed: a tally (module note).
#[inline(always)]
fn bump(counter: &AtomicU64, v: u64) {
    counter.fetch_add(v, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn new(lanes: usize) -> Counters {
        Counters {
            fast: PerThread::new(Default::default),
            slow: (0..lanes).map(|_| Slow::default()).collect(),
        }
    }

    /// Add `requests` (0 or 1) and `units` to `lane`'s counts on this thread.
    #[inline(always)]
    fn add(&self, lane: usize, requests: u64, units: u32) {
        let fast = &self.fast.get(Default::default)[lane % MAX_LANES];
        fast.requests.add(requests);
        fast.units.add(u64::from(units));
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
        let (mut requests, mut granted) = (0u64, 0u64);
        for stripe in self.fast.iter() {
            requests = requests.wrapping_add(stripe[lane].requests.get());
            granted = granted.wrapping_add(stripe[lane].units.get());
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
    fn every_thread_counts_apart_and_nothing_is_lost() {
        let c = Counters::new(2);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        c.fast_grant(1, u32::MAX);
                    }
                    c.piece(1, 7);
                });
            }
        });
        let counts = c.counts(1);
        assert_eq!(counts.requests, 30_000);
        assert_eq!(counts.granted, 30_000 * u64::from(u32::MAX) + 21);
        assert_eq!(c.counts(0), LaneCounts::default());
    }
}
