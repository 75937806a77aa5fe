//! The one place that imports atomics.
//!
//! Under `--cfg limitcore_loom` every atomic, and the back-off used by the CAS loops, comes from
//! [`loom`](https://docs.rs/loom) so the model checker can explore every interleaving of
//! the crate's protocols; otherwise they come from `core`. No other module names
//! `core::sync::atomic` or `loom` directly (the same shape as crossbeam-utils' `primitive`
//! module and tokio's `src/loom`).

#[cfg(limitcore_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};

/// The waiting layer's models' flags (`notify/loom.rs`), and the budget's writer flag
/// without `std`.
#[cfg(all(limitcore_loom, any(test, not(feature = "std"))))]
pub(crate) use loom::sync::atomic::AtomicBool;

#[cfg(not(limitcore_loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU64, Ordering};

/// Only the budget's writer flag, without `std` (with it, a lock).
#[cfg(all(not(limitcore_loom), not(feature = "std"), feature = "budget"))]
pub(crate) use core::sync::atomic::AtomicBool;

/// Exponential back-off for a CAS retry loop.
///
/// Outside loom this is crossbeam-utils' [`Backoff`](crossbeam_utils::Backoff), which spins
/// with `spin_loop` hints and never sleeps. Under loom a retry must hand control back to the
/// model checker, so `spin` becomes `loom::hint::spin_loop`.
#[cfg(not(limitcore_loom))]
pub(crate) type Backoff = crossbeam_utils::Backoff;

#[cfg(limitcore_loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff;

#[cfg(limitcore_loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }
    pub(crate) fn spin(&self) {
        loom::hint::spin_loop();
    }
}

/// The locks: the one limiter that needs a lock ([`SlidingLog`](crate::SlidingLog)), the
/// waiting layer's event and the owners of its waiter lists (a budget's waiters, which its
/// reconfigurations also hold; the lanes' queue; the permits' queue, with the adaptive
/// limits' sample window), and the [`Throttler`](crate::Throttler)'s schedule, queue and
/// task states. No condition variable: every sleep is the waiting layer's
/// ([`notify`](crate::notify)).
#[cfg(all(feature = "std", not(limitcore_loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(feature = "std", limitcore_loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Lock `mutex`, ignoring poison. No lock of this crate is held across code that can
/// unwind between two parts of one change (a rule's transition is computed before it is
/// written; the throttler runs tasks and callers' closures with no lock held; the clock's
/// waiters are a plain list), so a poisoned lock still guards consistent data.
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Parking a blocked thread: the waiting layer's blocking driver parks between polls, and
/// its waker unparks (loom's under loom, so the models see every park and unpark).
#[cfg(all(feature = "std", not(limitcore_loom)))]
pub(crate) use std::thread::{current as current_thread, park, Thread};

#[cfg(all(feature = "std", limitcore_loom))]
pub(crate) use loom::thread::{current as current_thread, park, Thread};

/// Park the current thread for at most `timeout` (it may wake earlier, spuriously or by an
/// unpark).
#[cfg(all(feature = "std", not(limitcore_loom)))]
pub(crate) fn park_timeout(timeout: core::time::Duration) {
    std::thread::park_timeout(timeout);
}

/// Loom has no timed park: the models never use a deadline (a waiter with one parks until
/// it is unparked, and a wait that nothing ends is reported by loom as a deadlock).
#[cfg(all(feature = "std", limitcore_loom))]
pub(crate) fn park_timeout(_timeout: core::time::Duration) {
    loom::thread::park();
}

/// A value set once: `Keyed`'s side maps, built by the first `reconfigure_key`. Std's under loom
/// too, where `Keyed` builds them before any model thread can look (see `Keyed::with_store`).
#[cfg(feature = "keyed")]
pub(crate) use std::sync::OnceLock;

/// Thread identifiers, to tell whether a call comes from the [`Throttler`](crate::Throttler)'s
/// own worker: loom's under loom, where every model thread runs on one OS thread.
#[cfg(all(feature = "throttler", not(limitcore_loom)))]
pub(crate) use std::thread::ThreadId;

#[cfg(all(feature = "throttler", limitcore_loom))]
pub(crate) use loom::thread::ThreadId;

/// The current thread's [`ThreadId`].
#[cfg(all(feature = "throttler", not(limitcore_loom)))]
pub(crate) fn current_thread_id() -> ThreadId {
    std::thread::current().id()
}

/// See the version without loom.
#[cfg(all(feature = "throttler", limitcore_loom))]
pub(crate) fn current_thread_id() -> ThreadId {
    loom::thread::current().id()
}

/// The index of the per-CPU shard the current thread should use, before masking.
///
/// On Linux with `std`, the CPU the thread is running on (`sched_getcpu`, about 5 ns on the
/// reference VM), cached per thread and read again every [`CPU_REFRESH`] calls, since threads
/// rarely migrate (a stale index only makes two CPUs share a shard for a while: slower, never
/// wrong); elsewhere, a per-thread index handed out round-robin; under loom a fixed 0, so the
/// models explore the shard and lease protocol rather than the scheduler.
#[cfg(all(not(limitcore_loom), feature = "std", target_os = "linux"))]
#[inline]
pub(crate) fn shard_hint() -> usize {
    use std::cell::Cell;
    std::thread_local! {
        /// (cached CPU, calls left before asking the kernel again).
        static CPU: Cell<(usize, u32)> = const { Cell::new((0, 0)) };
    }
    CPU.with(|c| {
        let (cpu, left) = c.get();
        if left > 0 {
            c.set((cpu, left - 1));
            return cpu;
        }
        let cpu = nix::sched::sched_getcpu().unwrap_or_else(|_| thread_index());
        c.set((cpu, CPU_REFRESH));
        cpu
    })
}

/// How many calls reuse a thread's cached CPU number before `sched_getcpu` again.
#[cfg(all(not(limitcore_loom), feature = "std", target_os = "linux"))]
const CPU_REFRESH: u32 = 64;

/// See the Linux version.
#[cfg(all(not(limitcore_loom), feature = "std", not(target_os = "linux")))]
#[inline]
pub(crate) fn shard_hint() -> usize {
    thread_index()
}

/// A small per-thread index, handed out round-robin on first use.
#[cfg(all(not(limitcore_loom), feature = "std"))]
fn thread_index() -> usize {
    use core::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        // Relaxed: any distinct-enough value will do; nothing is published through it.
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

/// See the Linux version.
#[cfg(all(not(limitcore_loom), not(feature = "std")))]
#[inline]
pub(crate) fn shard_hint() -> usize {
    0
}

/// See the Linux version.
#[cfg(limitcore_loom)]
#[inline]
pub(crate) fn shard_hint() -> usize {
    0
}

/// How many per-CPU shards to make: the machine's parallelism (1 without `std`, 2 under
/// loom), before rounding up to a power of two.
#[cfg(all(not(limitcore_loom), feature = "std"))]
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// See the `std` version.
#[cfg(all(not(limitcore_loom), not(feature = "std")))]
pub(crate) fn cpus() -> usize {
    1
}

/// See the `std` version.
#[cfg(limitcore_loom)]
pub(crate) fn cpus() -> usize {
    2
}
