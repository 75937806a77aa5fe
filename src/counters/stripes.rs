//! The counters behind [`Counted`](super::Counted): one stripe of tallies per thread, each
//! on its own cache line and written by its thread alone ([`tally`](crate::tally): a plain
//! add, no locked instruction, no shared line), and one shared word for the open exhausted
//! episode, which a decision reads and writes only when an episode opens or closes.
//!
//! # Orderings
//!
//! Every counter is a monotone tally (modulo 2^64) that no decision reads and that
//! publishes no other memory, so every access is `Relaxed` (see [`tally`](crate::tally) for
//! why a sum read while decisions run is a sum of real values, and exact once the deciding
//! threads are joined).
//!
//! - The episode word's RMWs (open: a `compare_exchange` from `NONE`; close: a `swap` to
//!   `NONE`) are also totally ordered in its modification order, so exactly one admission
//!   closes an episode that exactly one refusal opened, and the closed time is added once.
//!   The word only carries a time, no other data, so `Relaxed` is enough there too.

use crate::clock::Nanos;
use crate::decision::Denied;
use crate::sync::{AtomicU64, Ordering};
use crate::tally::{PerThread, Tally};
use core::fmt;
use crossbeam_utils::CachePadded;

use super::Counts;

/// "No exhausted episode is open" in [`Counters::episode`]. A refusal at exactly this time
/// opens its episode one nanosecond earlier (the clock's last nanosecond, 584 years from its
/// epoch).
const NONE: Nanos = Nanos::MAX;

/// One thread's counters. Together they are 88 bytes, in one [`CachePadded`] block of the
/// per-thread slots (128 bytes on x86-64, two lines that the adjacent-line prefetcher moves
/// together), so that no stripe shares a line with another. The fields every decision
/// touches come first.
#[derive(Debug, Default)]
struct Stripe {
    /// Decisions admitted (reservations included).
    admitted: Tally,
    /// Permits charged beyond one per admitted decision, modulo 2^64: `n − 1` per admission
    /// (`u64::MAX`, that is −1, for `n = 0`), so that the common `n = 1` admission bumps one
    /// counter, not two; the permits are `admitted + permits_beyond_one` (wrapping).
    permits_beyond_one: Tally,
    /// Refusals with [`Denied::RateLimited`].
    rate_limited: Tally,
    /// Final refusals ([`Denied::is_final`]).
    final_refusals: Tally,
    /// Admitted reservations with a non-zero delay.
    delayed: Tally,
    /// Their delays, ns.
    wait_ns: Tally,
    /// Receipts given back (with at least one permit).
    refunds: Tally,
    /// Their permits.
    permits_refunded: Tally,
    /// Permits charged after the work, as recorded.
    permits_charged: Tally,
    /// Permits credited.
    permits_credited: Tally,
    /// The closed exhausted episodes' time, ns.
    exhausted_ns: Tally,
}

/// Add `v` to a counter of the current thread's stripe (see [`Tally::add`]).
#[inline(always)]
fn bump(counter: &Tally, v: u64) {
    counter.add(v);
}

/// The striped counters of one [`Counted`](super::Counted) limiter.
pub(crate) struct Counters {
    /// One stripe per thread that counted (one in all without `std`).
    stripes: PerThread<Stripe>,
    /// The decision time of the refusal that opened the current exhausted episode, or
    /// [`NONE`]. Read by every admission and every rate-limited refusal, written only when
    /// an episode opens or closes, so that in a steady state (admitting, or refusing) its
    /// line stays shared in every CPU's cache.
    episode: CachePadded<AtomicU64>,
}

/// The stripes' number and their sum, rather than every stripe's every atomic.
impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counters")
            .field("stripes", &self.stripes())
            .field("counts", &self.counts())
            .finish()
    }
}

impl Counters {
    /// Fresh counters: no stripe yet (each thread's is made at its first decision).
    pub(crate) fn new() -> Self {
        Counters {
            stripes: PerThread::new(Stripe::default),
            episode: CachePadded::new(AtomicU64::new(NONE)),
        }
    }

    /// The number of stripes: the threads that have counted (1 without `std`).
    pub(crate) fn stripes(&self) -> usize {
        self.stripes.iter().count()
    }

    /// The current thread's stripe.
    #[inline(always)]
    fn stripe(&self) -> &Stripe {
        self.stripes.get(Stripe::default)
    }

    /// Count a decision for `n` permits at `now` whose result is `result`.
    #[inline(always)]
    pub(crate) fn decided<T>(&self, n: u32, now: Nanos, result: &Result<T, Denied>) {
        match result {
            Ok(_) => {
                self.admitted(n, now);
            }
            Err(denied) => self.refused(denied, now),
        }
    }

    /// Count a reservation for `n` permits at `now` that was refused or admitted with a delay
    /// of `delay` ns.
    #[inline]
    pub(crate) fn reserved(&self, n: u32, now: Nanos, result: Result<Nanos, &Denied>) {
        match result {
            Ok(delay) => {
                let stripe = self.admitted(n, now);
                if delay > 0 {
                    bump(&stripe.delayed, 1);
                    bump(&stripe.wait_ns, delay);
                }
            }
            Err(denied) => self.refused(denied, now),
        }
    }

    /// Count a charge after the work of `n` permits (as recorded).
    #[inline]
    pub(crate) fn charged(&self, n: u32) {
        if n > 0 {
            bump(&self.stripe().permits_charged, u64::from(n));
        }
    }

    /// Count a credit of `n` permits.
    #[inline]
    pub(crate) fn credited(&self, n: u32) {
        if n > 0 {
            bump(&self.stripe().permits_credited, u64::from(n));
        }
    }

    /// Count a refund of `n` permits.
    #[inline]
    pub(crate) fn refunded(&self, n: u32) {
        if n > 0 {
            let stripe = self.stripe();
            bump(&stripe.refunds, 1);
            bump(&stripe.permits_refunded, u64::from(n));
        }
    }

    /// Count an admission of `n` permits at `now`, closing an open episode if `n > 0`; the
    /// stripe it was counted in.
    #[inline(always)]
    fn admitted(&self, n: u32, now: Nanos) -> &Stripe {
        let stripe = self.stripe();
        bump(&stripe.admitted, 1);
        if n != 1 {
            bump(&stripe.permits_beyond_one, u64::from(n).wrapping_sub(1));
        }
        // Relaxed: a stale `NONE` (an episode a concurrent refusal has just opened) only
        // leaves that episode to the next admission to close; partner: the
        // `compare_exchange` in `open`.
        if n > 0 && self.episode.load(Ordering::Relaxed) != NONE {
            self.close(stripe, now);
        }
        stripe
    }

    /// Count a refusal at `now`; a rate-limited one opens an episode if none is open.
    #[inline(always)]
    fn refused(&self, denied: &Denied, now: Nanos) {
        let stripe = self.stripe();
        if denied.is_final() {
            bump(&stripe.final_refusals, 1);
        } else {
            bump(&stripe.rate_limited, 1);
            // Relaxed: a stale value only decides whether to try the CAS below, which is
            // exact on its own; partner: the `swap` in `close`.
            if self.episode.load(Ordering::Relaxed) == NONE {
                self.open(now);
            }
        }
    }

    /// Open an episode at `now` unless one is open already.
    #[cold]
    #[inline(never)]
    fn open(&self, now: Nanos) {
        // Relaxed (both): the word holds only a time. Its RMWs are totally ordered, so of
        // several refusals racing here exactly one opens the episode; the losers' values are
        // not used. Partner: the `swap` in `close`, which takes the value this stores.
        let _ = self.episode.compare_exchange(
            NONE,
            now.min(NONE - 1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Close the open episode at `now`, if another admission has not closed it already, and
    /// add its length to `stripe`.
    #[cold]
    #[inline(never)]
    fn close(&self, stripe: &Stripe, now: Nanos) {
        // Relaxed: as in `open`; of several admissions racing here exactly one swaps out the
        // episode's start (the others read `NONE`), so its time is added once. Partner: the
        // `compare_exchange` in `open`.
        let since = self.episode.swap(NONE, Ordering::Relaxed);
        if since != NONE {
            // A reading older than the refusal's (another thread's clock, a stale time)
            // closes the episode with 0, never a negative or wrapped time.
            bump(&stripe.exhausted_ns, now.saturating_sub(since));
        }
    }

    /// The sum of every stripe, and the open episode.
    pub(crate) fn counts(&self) -> Counts {
        // Relaxed (every tally, in `Tally::get`): observations of monotone tallies (module
        // note); partners: the adds in `bump`.
        let load = Tally::get;
        let mut counts = Counts::default();
        let mut beyond_one = 0u64;
        for s in self.stripes.iter() {
            counts.admitted = counts.admitted.wrapping_add(load(&s.admitted));
            beyond_one = beyond_one.wrapping_add(load(&s.permits_beyond_one));
            counts.rate_limited = counts.rate_limited.wrapping_add(load(&s.rate_limited));
            counts.final_refusals = counts.final_refusals.wrapping_add(load(&s.final_refusals));
            counts.delayed = counts.delayed.wrapping_add(load(&s.delayed));
            counts.wait_ns = counts.wait_ns.wrapping_add(load(&s.wait_ns));
            counts.refunds = counts.refunds.wrapping_add(load(&s.refunds));
            counts.permits_refunded = counts
                .permits_refunded
                .wrapping_add(load(&s.permits_refunded));
            counts.permits_charged = counts
                .permits_charged
                .wrapping_add(load(&s.permits_charged));
            counts.permits_credited = counts
                .permits_credited
                .wrapping_add(load(&s.permits_credited));
            counts.exhausted_ns = counts.exhausted_ns.wrapping_add(load(&s.exhausted_ns));
        }
        counts.permits = counts.admitted.wrapping_add(beyond_one);
        // Relaxed: an observation of the word; partners: `open` and `close`.
        let since = self.episode.load(Ordering::Relaxed);
        counts.exhausted_since = (since != NONE).then_some(since);
        counts
    }
}

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;
    use core::time::Duration;

    const LIMITED: Denied = Denied::RateLimited {
        retry_after: Duration::from_nanos(5),
    };

    #[test]
    fn each_thread_counts_on_a_stripe_of_its_own() {
        let c = Counters::new();
        assert_eq!(c.stripes(), 0);
        // All three alive at once (a thread that has ended leaves its stripe to the next).
        let together = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.decided(1, 0, &Ok::<(), Denied>(()));
                    }
                    together.wait();
                });
            }
        });
        assert_eq!(c.stripes(), 3);
        assert_eq!(c.counts().admitted, 3000);
        let mut lines: alloc::vec::Vec<usize> = c
            .stripes
            .iter()
            .map(|s| s as *const Stripe as usize / 64)
            .collect();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), 3, "stripes share no cache line");
    }

    #[test]
    fn permits_beyond_one_sum_exactly_with_zero_and_large_requests() {
        let c = Counters::new();
        for n in [1, 0, 7, 0, 0, 1, u32::MAX] {
            c.decided(n, 0, &Ok::<(), Denied>(()));
        }
        let counts = c.counts();
        assert_eq!(counts.admitted, 7);
        assert_eq!(counts.permits, 9 + u64::from(u32::MAX));
    }

    #[test]
    fn an_episode_runs_from_the_opening_refusal_to_the_next_admission() {
        let c = Counters::new();
        c.decided(1, 10, &Err::<(), _>(LIMITED)); // opens at 10
        c.decided(1, 15, &Err::<(), _>(LIMITED)); // already open
        c.decided(0, 20, &Ok::<(), Denied>(())); // n = 0 does not close it
        assert_eq!(c.counts().exhausted_since, Some(10));
        c.decided(1, 40, &Ok::<(), Denied>(())); // closes: 30 ns
        c.decided(1, 50, &Err::<(), _>(Denied::BeyondHorizon)); // final: no episode
        let counts = c.counts();
        assert_eq!((counts.exhausted_ns, counts.exhausted_since), (30, None));
        // A closing admission decided at an older time than the refusal adds nothing.
        c.decided(1, 100, &Err::<(), _>(LIMITED));
        c.reserved(1, 90, Ok(3));
        let counts = c.counts();
        assert_eq!((counts.exhausted_ns, counts.exhausted_since), (30, None));
        assert_eq!((counts.delayed, counts.wait_ns), (1, 3));
        // A refusal at the clock's last nanosecond opens one nanosecond earlier.
        c.decided(1, u64::MAX, &Err::<(), _>(LIMITED));
        assert_eq!(c.counts().exhausted_since, Some(u64::MAX - 1));
    }

    #[test]
    fn debug_shows_the_sum() {
        let c = Counters::new();
        c.decided(3, 0, &Ok::<(), Denied>(()));
        let text = alloc::format!("{c:?}");
        assert!(
            text.starts_with("Counters { stripes: 1, counts: Counts { admitted: 1, permits: 3,"),
            "{text}"
        );
    }

    #[test]
    fn refunds_of_nothing_are_not_counted() {
        let c = Counters::new();
        c.refunded(0);
        c.refunded(3);
        let counts = c.counts();
        assert_eq!((counts.refunds, counts.permits_refunded), (1, 3));
    }
}
