//! Per-thread tallies: counters that each thread adds to on its own cache line, with a plain
//! read and write rather than a read-modify-write, summed by a reader. What counts decisions
//! ([`Counted`](crate::counters::Counted), the lanes' counters) uses them, so counting adds
//! no shared write and no locked instruction to a decision.
//!
//! # Exactness
//!
//! With `std` every thread gets a slot of its own ([`PerThread`], on the `thread_local`
//! crate's `ThreadLocal`): the slot's tallies have one writer, so `load` then `store` of
//! the sum loses no increment. A thread's slot outlives it and goes to a thread started
//! later, which then is its one writer (the slot's hand-over is ordered by `ThreadLocal`'s
//! own registry). Without `std`, and under loom (whose model threads share one OS thread,
//! and whose checker cannot see `ThreadLocal`'s own synchronisation), there is one slot for
//! every caller, made with the counters, and [`Tally::add`] is a `fetch_add` instead.
//!
//! # Orderings
//!
//! Every tally is monotone (modulo 2^64), no decision reads it and it publishes no other
//! memory: `Relaxed` everywhere. A reader's loads each return some value of that tally's
//! modification order, so a sum read while decisions run is a sum of values from slightly
//! different moments (never torn, never invented, never going back for one reader); once
//! the deciding threads are joined (or synchronised with the reader otherwise), it is exact.

use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// One monotone counter of one slot (see the module).
#[derive(Debug, Default)]
pub(crate) struct Tally(AtomicU64);

impl Tally {
    /// Add `v` (wrapping), from the slot's own thread.
    #[inline(always)]
    pub(crate) fn add(&self, v: u64) {
        // Relaxed: a tally (module note). One writer: the sum is this thread's own.
        #[cfg(all(feature = "std", not(limitcore_loom)))]
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(v),
            Ordering::Relaxed,
        );
        // Relaxed: a read-modify-write loses no increment whatever its ordering.
        #[cfg(not(all(feature = "std", not(limitcore_loom))))]
        self.0.fetch_add(v, Ordering::Relaxed);
    }

    /// The tally now.
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        // Relaxed: an observation of a tally (module note).
        self.0.load(Ordering::Relaxed)
    }
}

/// One `T` per thread, each on cache lines of its own, made by the first call of a thread
/// (see the module); without `std` and under loom, one `T` for all.
pub(crate) struct PerThread<T: Send + Sync> {
    #[cfg(all(feature = "std", not(limitcore_loom)))]
    slots: thread_local::ThreadLocal<CachePadded<T>>,
    #[cfg(not(all(feature = "std", not(limitcore_loom))))]
    one: CachePadded<T>,
}

impl<T: Send + Sync + core::fmt::Debug> core::fmt::Debug for PerThread<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Send + Sync> PerThread<T> {
    /// No slot yet (without `std`: the one slot, made by `make`).
    pub(crate) fn new(make: impl FnOnce() -> T) -> Self {
        #[cfg(all(feature = "std", not(limitcore_loom)))]
        {
            let _ = make;
            PerThread {
                slots: thread_local::ThreadLocal::new(),
            }
        }
        #[cfg(not(all(feature = "std", not(limitcore_loom))))]
        PerThread {
            one: CachePadded::new(make()),
        }
    }

    /// The calling thread's slot, made by `make` on its first call.
    #[inline(always)]
    pub(crate) fn get(&self, make: impl FnOnce() -> T) -> &T {
        #[cfg(all(feature = "std", not(limitcore_loom)))]
        return self.slots.get_or(|| CachePadded::new(make()));
        #[cfg(not(all(feature = "std", not(limitcore_loom))))]
        {
            let _ = make;
            &self.one
        }
    }

    /// Every slot made so far.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        #[cfg(all(feature = "std", not(limitcore_loom)))]
        return self.slots.iter().map(|slot| &**slot);
        #[cfg(not(all(feature = "std", not(limitcore_loom))))]
        core::iter::once(&*self.one)
    }
}

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;

    #[test]
    fn threads_add_to_their_own_slots_and_the_sum_is_exact() {
        let tallies: PerThread<Tally> = PerThread::new(Tally::default);
        // All four alive at once (a thread that has ended leaves its slot to the next).
        let together = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        tallies.get(Tally::default).add(3);
                    }
                    together.wait();
                });
            }
        });
        assert_eq!(tallies.iter().count(), 4, "one slot per thread");
        assert_eq!(tallies.iter().map(Tally::get).sum::<u64>(), 120_000);
        // A thread started after the others ended reuses a slot: still one writer each.
        std::thread::scope(|s| {
            s.spawn(|| tallies.get(Tally::default).add(1));
        });
        assert_eq!(tallies.iter().map(Tally::get).sum::<u64>(), 120_001);
        assert!(tallies.iter().count() <= 5);
    }
}
