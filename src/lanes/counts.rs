//! Per-lane counters ([`LaneCounts`]): units granted, requests, pending, delayed, total wait,
//! cancelled. The fast path's two counts (a request, its units) go to the current CPU's
//! stripe, as [`Counted`](crate::Counted)'s do; the rest change only with the queue's lock
//! held.
//!
//! # Orderings
//!
//! Every counter is a tally or a gauge that no decision reads and that publishes no other
//! memory, so every access is `Relaxed`: a `fetch_add` loses no increment whatever its
//! ordering (read-modify-writes of one atomic are totally ordered), the gauges are stored
//! only with the lock held (so their stores are ordered by it), and a reader's loads each
//! return a value the counter had; once the threads that decided are joined (or
//! synchronised with the reader otherwise), a read is exact.

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

/// The fast-path counts of one lane on one CPU.
#[derive(Debug, Default)]
struct Fast {
    requests: AtomicU64,
    granted: AtomicU64,
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
    lanes: usize,
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
            fast: (0..stripes * lanes)
                .map(|_| CachePadded::new(Fast::default()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            slow: (0..lanes).map(|_| Slow::default()).collect(),
        }
    }

    #[inline(always)]
    fn fast(&self, lane: usize) -> &Fast {
        let stripes = self.fast.len() / self.lanes;
        let stripe = sync::shard_hint() & (stripes - 1);
        &self.fast[stripe * self.lanes + lane]
    }

    /// A request of `lane` granted `units` at once (on the fast path).
    #[inline(always)]
    pub(crate) fn fast_grant(&self, lane: usize, units: u32) {
        let fast = self.fast(lane);
        bump(&fast.requests, 1);
        bump(&fast.granted, u64::from(units));
    }

    /// A request of `lane` made (it will wait, or was granted in part on the fast path).
    pub(crate) fn request(&self, lane: usize, units: u32) {
        let fast = self.fast(lane);
        bump(&fast.requests, 1);
        if units > 0 {
            bump(&fast.granted, u64::from(units));
        }
    }

    /// A piece of `units` granted to a waiting request of `lane`.
    pub(crate) fn piece(&self, lane: usize, units: u32) {
        bump(&self.fast(lane).granted, u64::from(units));
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
        let (mut requests, mut granted) = (0u64, 0u64);
        for fast in self.fast.iter().skip(lane).step_by(self.lanes) {
            requests = requests.wrapping_add(load(&fast.requests));
            granted = granted.wrapping_add(load(&fast.granted));
        }
        let slow = &self.slow[lane];
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
