//! The counters behind [`Counted`](super::Counted): one stripe of plain counters per CPU,
//! each on its own cache line, and one shared word for the open exhausted episode.
//!
//! # Orderings
//!
//! Every counter is a monotone tally (modulo 2^64) that no decision reads and that
//! publishes no other memory, so every access is `Relaxed`:
//!
//! - A `fetch_add` is a read-modify-write, so no increment is lost whatever its ordering:
//!   all RMWs on one atomic are totally ordered (its modification order) and each one adds
//!   to the value the previous one left. Two threads sharing a stripe (a stale CPU hint,
//!   more threads than CPUs) are slower, never wrong.
//! - [`Counters::counts`] sums the stripes with `Relaxed` loads. Each load returns some value
//!   of that counter's modification order, so a read while decisions are running is a sum of
//!   per-stripe values that may come from slightly different moments, never a torn or
//!   invented value; and two reads by one thread never go backwards (read-read coherence).
//!   Once the deciding threads are joined (or synchronised with the reader by any other
//!   means), the read is exact: the join's happens-before edge carries every increment.
//! - The episode word's RMWs (open: a `compare_exchange` from `NONE`; close: a `swap` to
//!   `NONE`) are also totally ordered in its modification order, so exactly one admission
//!   closes an episode that exactly one refusal opened, and the closed time is added once.
//!   The word only carries a time, no other data, so `Relaxed` is enough there too.

use crate::clock::Nanos;
use crate::decision::Denied;
use crate::sync::{self, AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use crossbeam_utils::CachePadded;

use super::Counts;

/// "No exhausted episode is open" in [`Counters::episode`]. A refusal at exactly this time
/// opens its episode one nanosecond earlier (the clock's last nanosecond, 584 years from its
/// epoch).
const NONE: Nanos = Nanos::MAX;

/// One CPU's counters. Together they are 72 bytes: one [`CachePadded`] block (128 bytes on
/// x86-64, two lines that the adjacent-line prefetcher moves together), so that no stripe
/// shares a line with another. The fields every decision touches come first.
#[derive(Debug, Default)]
struct Stripe {
    /// Decisions admitted (reservations included).
    admitted: AtomicU64,
    /// Permits charged beyond one per admitted decision, modulo 2^64: `n − 1` per admission
    /// (`u64::MAX`, that is −1, for `n = 0`), so that the common `n = 1` admission bumps one
    /// counter, not two; the permits are `admitted + permits_beyond_one` (wrapping).
    permits_beyond_one: AtomicU64,
    /// Refusals with [`Denied::RateLimited`].
    rate_limited: AtomicU64,
    /// Final refusals ([`Denied::is_final`]).
    final_refusals: AtomicU64,
    /// Admitted reservations with a non-zero delay.
    delayed: AtomicU64,
    /// Their delays, ns.
    wait_ns: AtomicU64,
    /// Receipts given back (with at least one permit).
    refunds: AtomicU64,
    /// Their permits.
    permits_refunded: AtomicU64,
    /// The closed exhausted episodes' time, ns.
    exhausted_ns: AtomicU64,
}

/// Add `v` to a counter of the current thread's stripe.
///
/// Relaxed: a monotone tally, read only by the `Relaxed` loads in [`Counters::counts`] (its
/// partner); the RMW loses no increment whatever the ordering (module note).
#[inline(always)]
fn bump(counter: &AtomicU64, v: u64) {
    counter.fetch_add(v, Ordering::Relaxed);
}

/// The striped counters of one [`Counted`](super::Counted) limiter.
pub(crate) struct Counters {
    /// One stripe per CPU (the number rounded up to a power of two), picked by
    /// [`sync::shard_hint`] as [`SlidingWindow`](crate::SlidingWindow) picks its shards.
    stripes: Box<[CachePadded<Stripe>]>,
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
            .field("stripes", &self.stripes.len())
            .field("counts", &self.counts())
            .finish()
    }
}

impl Counters {
    /// Fresh counters, one stripe per CPU.
    pub(crate) fn new() -> Self {
        Self::with_stripes(sync::cpus())
    }

    /// Fresh counters with `stripes` stripes, rounded up to a power of two (at least 1).
    pub(crate) fn with_stripes(stripes: usize) -> Self {
        let stripes = stripes.max(1).next_power_of_two();
        Counters {
            stripes: (0..stripes)
                .map(|_| CachePadded::new(Stripe::default()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            episode: CachePadded::new(AtomicU64::new(NONE)),
        }
    }

    /// The number of stripes.
    pub(crate) fn stripes(&self) -> usize {
        self.stripes.len()
    }

    /// The current thread's stripe.
    #[inline(always)]
    fn stripe(&self) -> &Stripe {
        &self.stripes[sync::shard_hint() & (self.stripes.len() - 1)]
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
        // Relaxed (every load here): observations of monotone tallies (module note);
        // partners: the `fetch_add`s in `bump`, and `open`/`close` for the episode.
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
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
            counts.exhausted_ns = counts.exhausted_ns.wrapping_add(load(&s.exhausted_ns));
        }
        counts.permits = counts.admitted.wrapping_add(beyond_one);
        let since = load(&self.episode);
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
    fn stripes_round_up_to_a_power_of_two() {
        assert_eq!(Counters::with_stripes(0).stripes(), 1);
        assert_eq!(Counters::with_stripes(3).stripes(), 4);
        assert_eq!(Counters::with_stripes(8).stripes(), 8);
        assert!(Counters::new().stripes() >= 1);
    }

    #[test]
    fn stripes_do_not_share_a_cache_line() {
        let c = Counters::with_stripes(2);
        let a = &*c.stripes[0] as *const Stripe as usize;
        let b = &*c.stripes[1] as *const Stripe as usize;
        assert!(core::mem::size_of::<Stripe>() <= core::mem::size_of::<CachePadded<Stripe>>());
        assert!(b - a >= 64, "stripes {} bytes apart", b - a);
        assert_eq!(a % core::mem::align_of::<CachePadded<Stripe>>(), 0);
    }

    #[test]
    fn permits_beyond_one_sum_exactly_with_zero_and_large_requests() {
        let c = Counters::with_stripes(1);
        for n in [1, 0, 7, 0, 0, 1, u32::MAX] {
            c.decided(n, 0, &Ok::<(), Denied>(()));
        }
        let counts = c.counts();
        assert_eq!(counts.admitted, 7);
        assert_eq!(counts.permits, 9 + u64::from(u32::MAX));
    }

    #[test]
    fn an_episode_runs_from_the_opening_refusal_to_the_next_admission() {
        let c = Counters::with_stripes(1);
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
        let c = Counters::with_stripes(2);
        c.decided(3, 0, &Ok::<(), Denied>(()));
        let text = alloc::format!("{c:?}");
        assert!(
            text.starts_with("Counters { stripes: 2, counts: Counts { admitted: 1, permits: 3,"),
            "{text}"
        );
    }

    #[test]
    fn refunds_of_nothing_are_not_counted() {
        let c = Counters::with_stripes(1);
        c.refunded(0);
        c.refunded(3);
        let counts = c.counts();
        assert_eq!((counts.refunds, counts.permits_refunded), (1, 3));
    }
}
