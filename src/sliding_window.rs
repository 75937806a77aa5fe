//! [`SlidingWindow`]: the sliding-window counter, with its counts leased to per-CPU shards.
//!
//! Source: Cloudflare, "How we built rate limiting capable of scaling to millions of
//! domains" (Julien Desgats, 2017): the rate in the sliding window ending now is estimated
//! as `previous window's count × (part of it still inside) + current window's count`.
//! The per-CPU leases follow the batching of Linux's `percpu_counter`.
//!
//! # Orderings
//!
//! The global word and each shard word are independent single-word states, each updated by
//! compare-and-swap. The only cross-word invariant is "a permit is admitted only out of a
//! lease already counted in the global word": a thread first wins the global CAS (which
//! counts the whole lease), and only then adds the remainder to its shard. Anything that
//! reads the shard sees a lease that the global word has counted in its modification order
//! already, whatever the ordering, because it is the same thread's program order that put
//! it there *after* its own successful RMW, and the shard word itself is only changed by
//! RMWs. So `Relaxed` suffices everywhere, as in [`cas`](crate::cas).

use crate::clock::{Clock, Nanos};
use crate::limiter::{precheck, Denied, RateLimiter, Snapshot};
use crate::sync::{self, AtomicU64, Backoff, Ordering};
use crate::{DefaultClock, Quota, QuotaError};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;
use crossbeam_utils::CachePadded;

/// The largest count a [`SlidingWindow`] accepts: `2^24 − 1`, so that two counts (24 bits
/// each) and a 16-bit window number share the global word.
pub const MAX_SLIDING_WINDOW_COUNT: u32 = (1 << 24) - 1;

/// How far behind the stored window a reading may be and still be taken as stale (decided
/// against the stored window, stricter) rather than as a wrap of the window field:
/// 2^33 ns (8.59 s) worth of windows, at least 4, at most a quarter of the field's range.
pub const STALE_TOLERANCE_NS: Nanos = 1 << 33;

/// The arithmetic and the two word layouts, fixed at construction.
///
/// ```text
/// global:  | window k mod 2^(64−2b) | prev (b bits) | curr (b bits) |
/// shard:   | window k (64−b bits)   | lease (b bits)                |
/// ```
///
/// `b` is the bit length of `count` (≤ 24). `prev` and `curr` count permits *leased* in
/// windows `k − 1` and `k` (every admitted permit was leased first, so they never
/// under-count admissions). A shard's window number is exact (`period ≥ 2^b`, as for
/// [`FixedWindow`](crate::FixedWindow)); the global one is kept modulo `2^(64−2b)` (at
/// least 2^16 windows): a reading up to [`STALE_TOLERANCE_NS`] earlier than it is stale,
/// anything else is a later window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    pub(crate) period: Nanos,
    pub(crate) count: u32,
    /// `b`.
    pub(crate) bits: u32,
    /// Extra permits a shard leases beyond the request, at most.
    pub(crate) batch: u32,
    /// The number of shards (a power of two).
    pub(crate) shards: usize,
    /// Windows a reading may lag the stored window and still be stale (see
    /// [`STALE_TOLERANCE_NS`]).
    pub(crate) behind: u64,
}

/// The global word, unpacked and brought to the window of the reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// The absolute window number.
    pub(crate) k: u64,
    pub(crate) prev: u64,
    pub(crate) curr: u64,
    /// The time the decision is made at: `now`, or the start of window `k` for a stale
    /// reading from an earlier window.
    pub(crate) at: Nanos,
}

impl Counter {
    pub(crate) fn new(
        quota: &Quota,
        shards: usize,
        batch: Option<u32>,
    ) -> Result<Counter, QuotaError> {
        let count = quota.count();
        if count > MAX_SLIDING_WINDOW_COUNT {
            return Err(QuotaError::CountTooLarge {
                count,
                max: MAX_SLIDING_WINDOW_COUNT,
            });
        }
        let bits = u32::BITS - count.leading_zeros();
        if quota.period_ns() < 1 << bits {
            return Err(QuotaError::WindowTooShort {
                period_ns: quota.period_ns(),
                min_period_ns: 1 << bits,
            });
        }
        let shards = shards.max(1).next_power_of_two();
        let batch = batch.unwrap_or(count / (16 * shards as u32)).min(count);
        let window_mask = u64::MAX >> (2 * bits);
        let behind = STALE_TOLERANCE_NS
            .div_ceil(quota.period_ns())
            .clamp(4, (window_mask >> 2).max(4));
        Ok(Counter {
            period: quota.period_ns(),
            count,
            bits,
            batch,
            shards,
            behind,
        })
    }

    #[inline]
    fn mask(&self) -> u64 {
        (1 << self.bits) - 1
    }

    #[inline]
    fn window_mask(&self) -> u64 {
        u64::MAX >> (2 * self.bits)
    }

    #[inline]
    pub(crate) fn pack_global(&self, k: u64, prev: u64, curr: u64) -> u64 {
        ((k & self.window_mask()) << (2 * self.bits)) | (prev << self.bits) | curr
    }

    #[inline]
    pub(crate) fn pack_shard(&self, k: u64, lease: u64) -> u64 {
        (k << self.bits) | lease
    }

    #[inline]
    pub(crate) fn unpack_shard(&self, word: u64) -> (u64, u64) {
        (word >> self.bits, word & self.mask())
    }

    /// The global word as seen from `now`: rotated into `now`'s window, or, for a reading
    /// from an earlier window than the stored one, the stored window at its start.
    pub(crate) fn window(&self, global: u64, now: Nanos) -> Window {
        let (stored, prev, curr) = (
            global >> (2 * self.bits),
            (global >> self.bits) & self.mask(),
            global & self.mask(),
        );
        let k = now / self.period;
        let fresh = Window {
            k,
            prev: 0,
            curr: 0,
            at: now,
        };
        if prev == 0 && curr == 0 {
            // No counts: nothing can be stale, whatever window number the word holds.
            return fresh;
        }
        let ahead = (k & self.window_mask()).wrapping_sub(stored) & self.window_mask();
        match ahead {
            0 => Window {
                k,
                prev,
                curr,
                at: now,
            },
            1 => Window {
                k,
                prev: curr,
                curr: 0,
                at: now,
            },
            d if d > self.window_mask() - self.behind => {
                // Stale: the stored window is `behind` windows after now's; decide at its
                // start. A start past the clock's range cannot be a stored window: then the
                // field has wrapped, and the counts are long gone.
                let k = k + (self.window_mask() - d + 1);
                match k.checked_mul(self.period) {
                    Some(at) => Window { k, prev, curr, at },
                    None => fresh,
                }
            }
            _ => fresh,
        }
    }

    /// The most permits the formula allows now: `count − curr − ⌈prev·(P − e)/P⌉`, with
    /// `e` the time elapsed in the window (0 if the formula is already exceeded).
    pub(crate) fn available(&self, w: &Window) -> u64 {
        let p = u128::from(self.period);
        let e = u128::from(w.at - w.k * self.period);
        let weighted = (u128::from(w.prev) * (p - e)).div_ceil(p);
        (u128::from(self.count)).saturating_sub(u128::from(w.curr) + weighted) as u64
    }

    /// The global-word transition: `n` permits plus up to `batch` extra for a shard, if the
    /// formula admits them now. Returns the new word, the window decided in, and the extra.
    #[inline]
    pub(crate) fn lease(
        &self,
        global: u64,
        now: Nanos,
        n: u64,
    ) -> Result<(u64, Window, u64), Denied> {
        let w = self.window(global, now);
        let available = self.available(&w);
        if available < n {
            return Err(self.retry_after(&w, now, n));
        }
        // Leave most of what is left for the other shards as the budget runs low.
        let extra = u64::from(self.batch).min((available - n) / self.shards as u64);
        Ok((self.pack_global(w.k, w.prev, w.curr + n + extra), w, extra))
    }

    /// Time from `now` until both counts have aged out of the formula (the limiter is full):
    /// the end of window `k` if only `prev` is left, of window `k + 1` if `curr` is not 0.
    pub(crate) fn full_after(&self, w: &Window, now: Nanos) -> Duration {
        let windows_left = if w.curr > 0 { 2 } else { u64::from(w.prev > 0) };
        if windows_left == 0 {
            return Duration::ZERO;
        }
        (w.k + windows_left)
            .checked_mul(self.period)
            .map_or(Duration::MAX, |end| {
                Duration::from_nanos(end.saturating_sub(now))
            })
    }

    /// The exact wait from `now` until the formula admits `n` (requires `n ≤ count` and
    /// `available < n`), or [`Denied::NEVER`] past the clock's range.
    pub(crate) fn retry_after(&self, w: &Window, now: Nanos, n: u64) -> Denied {
        let p = u128::from(self.period);
        let start = u128::from(w.k) * p;
        let count = u128::from(self.count);
        // Within window k: prev·(P − e') ≤ (count − curr − n)·P, first at
        // e' = P − ⌊A·P / prev⌋ (prev > 0 here, or nothing would be refused).
        let within = (count >= u128::from(w.curr) + u128::from(n))
            .then(|| count - u128::from(w.curr) - u128::from(n))
            .filter(|_| w.prev > 0)
            .map(|a| p - (a * p / u128::from(w.prev)).min(p))
            .filter(|&e| e < p);
        let at = match within {
            Some(e) => start + e,
            // In window k + 1, `curr` becomes the previous count: curr·(P − e'') ≤ (count − n)·P.
            None if w.curr == 0 => start + p,
            None => start + p + p - ((count - u128::from(n)) * p / u128::from(w.curr)).min(p),
        };
        match u64::try_from(at) {
            Ok(at) => Denied::rate_limited(at - now),
            Err(_) => Denied::NEVER,
        }
    }
}

/// The sliding-window counter: about `count` permits per sliding window of length
/// `period`, with its counts spread over per-CPU shards so that it scales with cores.
///
/// A request for `n` at time `e` into window `k` is admitted iff
/// `prev · (period − e) / period + curr + n ≤ count`, where `prev` and `curr` are the
/// counts of windows `k − 1` and `k` (Cloudflare, 2017).
///
/// # How a decision reads the shards: leases
///
/// Shards do not hold counts to be summed (summing would let two CPUs each see room for the
/// last permit, and admit both). Instead, one global word holds `prev` and `curr`, and a
/// shard (one per CPU, `CachePadded`, chosen by `sched_getcpu` on Linux) holds a *lease*:
/// permits of the current window that the global word has already counted as used. A
/// request is served from its CPU's lease with one uncontended CAS on that CPU's cache line;
/// only when the lease runs short does it go to the global word, where it takes its `n`
/// plus up to `batch` extra for the shard, if the formula allows them *now*. So:
///
/// - **Over-admission: none.** Every admitted permit was counted in the global word when the
///   formula allowed it, and the formula only loosens as the window ages. In each aligned
///   window at most `count` permits are admitted, with a frozen clock or not, under any
///   interleaving, and every admission satisfies the formula on the true counts.
/// - **Under-admission: at most `shards × (batch + n_max − 1)` per window**, where `n_max`
///   is the largest request: leases counted in the global word but not (yet) used, stranded
///   on other CPUs' shards or still on their way to a shard (a request that runs between
///   another thread's global CAS and its hand-off to the shard can be refused though some
///   order of the two would admit both; so with `batch > 0` decisions are not linearizable,
///   only ever stricter). Such leases also count in the next window's `prev`. The default batch is
///   `count / (16 × shards)`, so with `n = 1` at most `count / 16` (6.25 %) is stranded;
///   [`SlidingWindow::with_batch`] sets it (0: every request goes to the global word, no
///   stranding, no scaling).
/// - **The formula's own error:** it assumes the previous window's requests were spread
///   evenly, so in a sliding (unaligned) window of length `period` it can admit up to
///   `2·count − 1`, when the previous window's requests all came at its end. Use
///   [`SlidingLog`](crate::SlidingLog) when that must not happen.
///
/// The quota's burst is not used: a window's capacity is `count`.
///
/// # Word layouts
///
/// ```text
/// global:  | window k mod 2^(64−2b) | prev (b bits) | curr (b bits) |
/// shard:   | window k (64−b bits)   | lease (b bits)                |
/// ```
///
/// `b` is the bit length of `count`, at most 24 ([`MAX_SLIDING_WINDOW_COUNT`]), so the
/// global window number has at least 16 bits and is compared modulo its width. A reading
/// from an earlier window than the stored one, by up to [`STALE_TOLERANCE_NS`] (8.59 s; at
/// least 4 windows, at most a quarter of the field's range), is stale and counts against the
/// stored window at its start (stricter); so a thread preempted between reading the clock
/// and deciding can never reset the counts. A limiter left idle for about a multiple of
/// `2^(64−2b)` windows (18 hours at 1 s with 16-bit numbers) may read its old counts as
/// current or stale: stricter for at most the tolerance plus one window, never more
/// permissive. The shard's window number is exact: the period
/// must be at least `2^b` ns ([`QuotaError::WindowTooShort`]).
///
/// # Contract
///
/// `retry_after` is exact for the global formula (the request conforms then if nothing else
/// consumes; it may conform earlier out of a lease). `n == 0` succeeds without change;
/// `n > count` is [`Denied::ExceedsCapacity`]; a denial writes nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, RateLimiter, SlidingWindow};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = SlidingWindow::with_clock(Quota::per_second(10)?, clock.clone())?;
/// limiter.try_acquire_n(10).unwrap();               // window 0 is full
/// clock.advance(Duration::from_millis(1_500));      // halfway through window 1
/// // 10 × (1 − 0.5) = 5 still count from window 0: 5 are left.
/// assert_eq!(limiter.snapshot().remaining, 5);
/// limiter.try_acquire_n(5).unwrap();
/// assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct SlidingWindow<C = DefaultClock> {
    global: CachePadded<AtomicU64>,
    shards: Box<[CachePadded<AtomicU64>]>,
    counter: Counter,
    quota: Quota,
    clock: C,
}

#[cfg(feature = "std")]
impl SlidingWindow<DefaultClock> {
    /// A fresh limiter for `quota` on the default clock, one shard per CPU.
    ///
    /// # Errors
    ///
    /// As [`SlidingWindow::with_clock`].
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        SlidingWindow::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// A fresh limiter for `quota` reading time from `clock`, one shard per CPU (rounded up
    /// to a power of two) and the default batch, `count / (16 × shards)`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] above [`MAX_SLIDING_WINDOW_COUNT`];
    /// [`QuotaError::WindowTooShort`] for a period under `2^b` ns (`b` = bit length of count).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Self::build(quota, clock, None)
    }

    /// As [`SlidingWindow::with_clock`], leasing at most `batch` extra permits to a shard at
    /// a time. `batch = 0` makes every decision exactly the formula on the true counts (no
    /// lease is ever stranded), at the price of one shared CAS per admission.
    ///
    /// # Errors
    ///
    /// As [`SlidingWindow::with_clock`].
    pub fn with_batch(quota: Quota, clock: C, batch: u32) -> Result<Self, QuotaError> {
        Self::build(quota, clock, Some(batch))
    }

    fn build(quota: Quota, clock: C, batch: Option<u32>) -> Result<Self, QuotaError> {
        let counter = Counter::new(&quota, sync::cpus(), batch)?;
        let shards = (0..counter.shards)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect::<Vec<_>>();
        Ok(SlidingWindow {
            global: CachePadded::new(AtomicU64::new(0)),
            shards: shards.into_boxed_slice(),
            counter,
            quota,
            clock,
        })
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The number of per-CPU shards.
    pub fn shards(&self) -> usize {
        self.counter.shards
    }

    /// The most extra permits leased to a shard at once.
    pub fn batch(&self) -> u32 {
        self.counter.batch
    }

    #[inline]
    fn shard(&self) -> &AtomicU64 {
        &self.shards[sync::shard_hint() & (self.counter.shards - 1)]
    }

    /// Take `n` from `shard`'s lease if it holds that many for `now`'s window.
    #[inline]
    fn take_leased(&self, shard: &AtomicU64, now: Nanos, n: u64) -> bool {
        let c = &self.counter;
        // Relaxed: see the module's "Orderings".
        let mut word = shard.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        loop {
            let (k, lease) = c.unpack_shard(word);
            // k·period ≤ some earlier reading, so it fits; one multiply, no division.
            let start = k * c.period;
            if now < start || now - start >= c.period || lease < n {
                return false;
            }
            // Relaxed: see the module's "Orderings".
            match shard.compare_exchange_weak(word, word - n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => {
                    word = actual;
                    backoff.spin();
                }
            }
        }
    }

    /// Lease `n` (and up to `batch` more for the shard) from the global word, or refuse.
    #[cold]
    #[inline(never)]
    fn take_global(&self, shard: &AtomicU64, now: Nanos, n: u64) -> Result<(), Denied> {
        let c = &self.counter;
        // Relaxed: see the module's "Orderings".
        let mut global = self.global.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        let (w, extra) = loop {
            let (next, w, extra) = c.lease(global, now, n)?;
            // Relaxed: the RMW on the global word is what serialises leases.
            match self.global.compare_exchange_weak(
                global,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break (w, extra),
                Err(actual) => {
                    global = actual;
                    backoff.spin();
                }
            }
        };
        if extra > 0 {
            self.give_lease(shard, w.k, extra);
        }
        Ok(())
    }

    /// Add `extra` permits of window `k`, already counted globally, to `shard`.
    fn give_lease(&self, shard: &AtomicU64, k: u64, extra: u64) {
        let c = &self.counter;
        // Relaxed: see the module's "Orderings".
        let mut word = shard.load(Ordering::Relaxed);
        loop {
            let (ks, lease) = c.unpack_shard(word);
            let next = match ks.cmp(&k) {
                // Fits: a window's leases total at most `count`.
                core::cmp::Ordering::Equal => c.pack_shard(k, lease + extra),
                core::cmp::Ordering::Less => c.pack_shard(k, extra),
                // The shard moved on to a later window: these permits stay unused.
                core::cmp::Ordering::Greater => return,
            };
            // Relaxed: see the module's "Orderings".
            match shard.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }
}

impl<C: Clock> RateLimiter for SlidingWindow<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.counter.count)? {
            return Ok(());
        }
        let shard = self.shard();
        if self.take_leased(shard, now, u64::from(n)) {
            return Ok(());
        }
        self.take_global(shard, now, u64::from(n))
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// `remaining`: what the formula still allows plus every shard's unused lease for the
    /// current window (all of it usable by some CPU); `full_after`: until both counts have
    /// aged out of the formula.
    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        let c = &self.counter;
        // Relaxed: a read-only observation (module "Orderings").
        let w = c.window(self.global.load(Ordering::Relaxed), now);
        let leased: u64 = self
            .shards
            .iter()
            // Relaxed: as above, an observation.
            .map(|s| c.unpack_shard(s.load(Ordering::Relaxed)))
            .filter(|&(k, _)| k == w.k)
            .map(|(_, lease)| lease)
            .sum();
        let remaining = (c.available(&w) + leased).min(u64::from(c.count)) as u32;
        let full_after = c.full_after(&w, now);
        Snapshot {
            remaining,
            full_after,
        }
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(count: u32, period: u64) -> Counter {
        Counter::new(
            &Quota::new(count, Duration::from_nanos(period)).unwrap(),
            1,
            Some(0),
        )
        .unwrap()
    }

    #[test]
    fn formula_and_exact_retry() {
        let c = counter(10, 1_000);
        // Window 1, 500 ns in, prev = 10, curr = 0: 10·0.5 = 5 still count.
        let w = c.window(c.pack_global(0, 0, 10), 1_500);
        assert_eq!((w.k, w.prev, w.curr), (1, 10, 0));
        assert_eq!(c.available(&w), 5);
        // 6 more need prev·(P − e) ≤ 4·P: e ≥ 600, so 100 ns from now.
        assert_eq!(c.retry_after(&w, 1_500, 6), Denied::rate_limited(100));
        let w2 = c.window(c.pack_global(1, 10, 0), 1_599);
        assert_eq!(
            c.available(&w2),
            5,
            "one ns early: 4.01 weighted, so 6 do not fit yet"
        );
        let w3 = c.window(c.pack_global(1, 10, 0), 1_600);
        assert_eq!(c.available(&w3), 6);
        // Nothing fits this window: wait into the next one, where curr becomes prev.
        let w = c.window(c.pack_global(1, 0, 10), 1_500);
        assert_eq!(c.retry_after(&w, 1_500, 10), Denied::rate_limited(1_500));
        assert_eq!(c.retry_after(&w, 1_500, 5), Denied::rate_limited(500 + 500));
    }

    #[test]
    fn stale_readings_count_against_the_stored_window() {
        let c = counter(10, 1_000);
        let w = c.window(c.pack_global(5, 0, 10), 4_200);
        assert_eq!((w.k, w.at), (5, 5_000));
        assert_eq!(c.available(&w), 0);
        // Far in the future: everything has aged out.
        let w = c.window(c.pack_global(5, 10, 10), 9_000);
        assert_eq!((w.prev, w.curr), (0, 0));
    }
}
