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
///
/// # The last slot
///
/// `ThreadLocal::get_or` finds a thread's slot from the thread's id (a thread-local read
/// behind a call, then a bucket and a flag): about 20 instructions, a tenth of a counted
/// decision (BENCHMARKS.md, issue 28). Each thread keeps the last slot it used in a
/// thread-local of its own (`LAST`: the id of the `PerThread` and the slot's address), so
/// that a thread deciding on one limiter again and again finds its slot with one
/// thread-local read and one compare; on a miss (another limiter, the first call) it
/// looks the slot up and keeps it.
pub(crate) struct PerThread<T: Send + Sync> {
    #[cfg(all(feature = "std", not(limitcore_loom)))]
    slots: thread_local::ThreadLocal<CachePadded<T>>,
    /// This `PerThread`'s id, unique in the process (never 0): what `LAST` is keyed by.
    #[cfg(all(feature = "std", not(limitcore_loom)))]
    id: u64,
    #[cfg(not(all(feature = "std", not(limitcore_loom))))]
    one: CachePadded<T>,
}

/// The next `PerThread`'s id (0: no slot, `LAST`'s initial value).
#[cfg(all(feature = "std", not(limitcore_loom)))]
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[cfg(all(feature = "std", not(limitcore_loom)))]
std::thread_local! {
    /// This thread's last slot (see `PerThread`'s "The last slot"): the id of its
    /// `PerThread` (0: none yet) and its address. A `Cell` of plain values, initialised by
    /// a constant: read and written in place, with no lazy initialisation and no
    /// destructor.
    static LAST: core::cell::Cell<(u64, *const ())> =
        const { core::cell::Cell::new((0, core::ptr::null())) };
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
            // Relaxed: the ids need only be distinct (one RMW each), and they publish
            // nothing. 2^64 − 1 of them outlast any process.
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            PerThread {
                slots: thread_local::ThreadLocal::new(),
                id,
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
        {
            let (id, slot) = LAST.get();
            if id == self.id {
                // SAFETY: `LAST` holds `(id, slot)` only as stored by `find` below, on this
                // thread, with `slot` the address of this thread's slot in the slots of the
                // `PerThread` whose id is `id`. Ids are never reused (`NEXT_ID`), so
                // `self` is that `PerThread`, alive for as long as the borrow of `self`
                // that the returned reference carries. `ThreadLocal` never moves nor frees
                // a slot while it lives (its buckets are allocated once and dropped with
                // it; a slot is handed to a later thread only after its thread ended, and
                // this thread has not), and hands out only shared references to it, as
                // this does: a valid `&CachePadded<T>` for the borrow of `self`.
                #[allow(unsafe_code)]
                return unsafe { &*slot.cast::<CachePadded<T>>() };
            }
            self.find(make)
        }
        #[cfg(not(all(feature = "std", not(limitcore_loom))))]
        {
            let _ = make;
            &self.one
        }
    }

    /// The calling thread's slot looked up in `ThreadLocal` (made by `make` if it is its
    /// first), and kept as this thread's last slot.
    #[cfg(all(feature = "std", not(limitcore_loom)))]
    #[cold]
    #[inline(never)]
    fn find(&self, make: impl FnOnce() -> T) -> &T {
        let slot = self.slots.get_or(|| CachePadded::new(make()));
        LAST.set((self.id, (slot as *const CachePadded<T>).cast()));
        slot
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

    /// The last slot a thread used is kept per `PerThread`: alternating between two, and
    /// a `PerThread` made after another was dropped (perhaps at its address), each thread
    /// always adds to its own slot of the one it is given.
    #[test]
    fn the_last_slot_belongs_to_its_own_per_thread() {
        let (a, b): (PerThread<Tally>, PerThread<Tally>) = (
            PerThread::new(Tally::default),
            PerThread::new(Tally::default),
        );
        for _ in 0..1000 {
            a.get(Tally::default).add(1);
            b.get(Tally::default).add(2);
            b.get(Tally::default).add(2);
        }
        assert_eq!(a.iter().map(Tally::get).sum::<u64>(), 1000);
        assert_eq!(b.iter().map(Tally::get).sum::<u64>(), 4000);
        for round in 0..100u64 {
            let c: PerThread<Tally> = PerThread::new(Tally::default);
            c.get(Tally::default).add(round);
            c.get(Tally::default).add(1);
            assert_eq!(
                c.iter().map(Tally::get).collect::<Vec<_>>(),
                vec![round + 1]
            );
        }
        // Another thread's slots are its own, whatever this thread used last.
        std::thread::scope(|s| {
            s.spawn(|| a.get(Tally::default).add(10));
        });
        assert_eq!(a.iter().count(), 2);
        assert_eq!(a.iter().map(Tally::get).sum::<u64>(), 1010);
        a.get(Tally::default).add(1);
        assert!(a.iter().any(|t| t.get() == 1001), "this thread's slot");
    }
}
