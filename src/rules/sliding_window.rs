//! [`SlidingWindowRule`]: the sliding-window counter's arithmetic on one word, and the
//! [`Counter`] the per-CPU [`SlidingWindow`](crate::SlidingWindow) shares with it.
//!
//! Source: Cloudflare, "How we built rate limiting capable of scaling to millions of
//! domains" (Julien Desgats, 2017): the rate in the sliding window ending now is estimated
//! as `previous window's count × (part of it still inside) + current window's count`.

use super::{window_quota, Rule};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

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
/// least 2^16 windows): a reading up to [`SlidingWindowRule::MAX_CLOCK_LAG_NS`] earlier than it is stale,
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
    /// [`SlidingWindowRule::MAX_CLOCK_LAG_NS`]).
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
        if count > SlidingWindowRule::MAX_COUNT {
            return Err(QuotaError::CountTooLarge {
                count,
                max: SlidingWindowRule::MAX_COUNT,
            });
        }
        // One bit more than `count` needs: a count past the limit (a charge's debt) is held
        // up to `2^bits − 1 > count`, and that value marks a saturated count.
        let bits = u64::BITS - (u64::from(count) + 1).leading_zeros();
        if quota.period_ns() < 1 << bits {
            return Err(QuotaError::WindowTooShort {
                period_ns: quota.period_ns(),
                min_period_ns: 1 << bits,
            });
        }
        let shards = shards.max(1).next_power_of_two();
        let batch = batch.unwrap_or(count / (16 * shards as u32)).min(count);
        let window_mask = u64::MAX >> (2 * bits);
        let behind = SlidingWindowRule::MAX_CLOCK_LAG_NS
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
    /// The largest count a field holds, `2^bits − 1 > count`: a count there is saturated
    /// (a charge past it), and a saturated previous count weighs as the whole limit.
    #[inline]
    pub(crate) fn ceiling(&self) -> u64 {
        self.mask()
    }

    /// Whether a count of `w` (read from this counter's own word, not a sketch's cell) is
    /// saturated: a charge went past the field.
    #[inline]
    fn saturated(&self, w: &Window) -> bool {
        w.prev == self.ceiling() || w.curr == self.ceiling()
    }

    /// What the formula still allows in `w`, 0 while a count is saturated: the
    /// [`Counter::available`] of the counter's own words.
    #[inline]
    pub(crate) fn room(&self, w: &Window) -> u64 {
        if self.saturated(w) {
            0
        } else {
            self.available(w)
        }
    }

    /// The exact wait from `now` until `n` (0 for a request for no permits: until the
    /// estimate is back within the limit) fit in `w` of the counter's own word: a saturated
    /// count weighs as the whole limit while it counts (its true count is unknown; never
    /// more permissive), a current one through the next window, a previous one to the end
    /// of its window.
    pub(crate) fn wait(&self, w: &Window, now: Nanos, n: u64) -> Denied {
        if !self.saturated(w) {
            return self.retry_after(w, now, n);
        }
        let start = |k: u64| k.checked_mul(self.period);
        if w.curr == self.ceiling() {
            return match w.k.checked_add(2).and_then(start) {
                Some(at) => Denied::rate_limited(at - now),
                None => Denied::NEVER,
            };
        }
        // The previous count: in window k + 1 it is gone, and `curr` is the previous one.
        let Some(at) = w.k.checked_add(1).and_then(start) else {
            return Denied::NEVER;
        };
        let next = Window {
            k: w.k + 1,
            prev: w.curr,
            curr: 0,
            at,
        };
        if self.available(&next) >= n {
            Denied::rate_limited(at - now)
        } else {
            self.retry_after(&next, now, n)
        }
    }

    /// The answer to a request for no permits on `global` at `now`: refused while a count
    /// is saturated or the estimate passes `count` (a charge's debt), until it is back
    /// within the limit.
    pub(crate) fn debt(&self, global: u64, now: Nanos) -> Result<(), Denied> {
        let w = self.window(global, now);
        let over = self.saturated(&w) || {
            let p = u128::from(self.period);
            let e = u128::from(w.at - w.k * self.period);
            let weighted = (u128::from(w.prev) * (p - e)).div_ceil(p);
            u128::from(w.curr) + weighted > u128::from(self.count)
        };
        if over {
            Err(self.wait(&w, now, 0))
        } else {
            Ok(())
        }
    }

    /// `global` with `n` more in the window of `now` (of the stored one, for a reading behind
    /// it), up to the ceiling; and the permits past it.
    pub(crate) fn charge(&self, global: u64, now: Nanos, n: u32) -> (u64, u32) {
        let w = self.window(global, now);
        let total = w.curr + u64::from(n);
        let held = total.min(self.ceiling());
        (self.pack_global(w.k, w.prev, held), (total - held) as u32)
    }

    /// `global` with up to `n` fewer in the window of `at`, never below 0; a saturated count
    /// gives nothing back. `None` when nothing changes.
    pub(crate) fn credit(&self, global: u64, n: u32, at: Nanos) -> Option<u64> {
        let w = self.window(global, at);
        if w.curr == 0 || w.curr == self.ceiling() || n == 0 {
            return None;
        }
        let give = w.curr.min(u64::from(n));
        Some(self.pack_global(w.k, w.prev, w.curr - give))
    }

    pub(crate) fn available(&self, w: &Window) -> u64 {
        let p = u128::from(self.period);
        let e = u128::from(w.at - w.k * self.period);
        let weighted = (u128::from(w.prev) * (p - e)).div_ceil(p);
        (u128::from(self.count)).saturating_sub(u128::from(w.curr) + weighted) as u64
    }

    /// The global-word transition: `n` permits plus up to `batch` extra for a shard, if the
    /// formula admits them now. Returns the new word, the window decided in, and the extra.
    // Always inlined: the per-CPU limiter's CAS loop applies it in a closure, and out of line
    // its result (a window and two words) would travel through memory.
    #[inline(always)]
    pub(crate) fn lease(
        &self,
        global: u64,
        now: Nanos,
        n: u64,
    ) -> Result<(u64, Window, u64), Denied> {
        let w = self.window(global, now);
        let available = self.room(&w);
        if available < n {
            return Err(self.wait(&w, now, n));
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
    #[inline(always)]
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

    /// The global word without the `receipt.n()` permits counted in window `receipt.mark()`,
    /// at refund time `at`; `None` if there is nothing to subtract (the permits aged out of
    /// the formula, or the word moved on).
    pub(crate) fn unlease(&self, global: u64, receipt: &Receipt, at: Nanos) -> Option<u64> {
        let (k, n) = (receipt.mark(), u64::from(receipt.n()));
        if n == 0 || at / self.period > k.saturating_add(1) {
            return None;
        }
        let (stored, prev, curr) = (
            global >> (2 * self.bits),
            (global >> self.bits) & self.mask(),
            global & self.mask(),
        );
        let wm = self.window_mask();
        let ceiling = self.ceiling();
        if stored == k & wm && curr >= n && curr != ceiling {
            Some(self.pack_global(k, prev, curr - n))
        } else if stored == k.wrapping_add(1) & wm && prev >= n && prev != ceiling {
            Some(self.pack_global(k + 1, prev - n, curr))
        } else {
            None
        }
    }
}

/// The sliding-window counter on one word: the formula on exact counts, with no per-CPU
/// shards. The rule of [`Keyed`][crate::Keyed]`<K, SlidingWindowRule>` (one word per key);
/// the standalone [`SlidingWindow`](crate::SlidingWindow) runs the same formula with its
/// counts leased to per-CPU shards.
///
/// A request for `n` at time `e` into window `k` is admitted iff
/// `⌈prev · (period − e) / period⌉ + curr + n ≤ count`, where `prev` and `curr` are the
/// counts of windows `k − 1` and `k` (Cloudflare, 2017). A window has no burst of its own:
/// its capacity is `count`, and a quota whose burst differs is refused
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Word layout
///
/// ```text
///  63                     2b 2b-1          b  b-1           0
/// +-------------------------+---------------+---------------+
/// | window k mod 2^(64−2b)   | prev (b bits) | curr (b bits) |
/// +-------------------------+---------------+---------------+
/// ```
///
/// `b` is the bit length of `count + 1`, at most 25 ([`SlidingWindowRule::MAX_COUNT`]), so
/// the window number has at least 14 bits and is compared modulo its width. A reading from an
/// earlier window than the stored one, by up to [`SlidingWindowRule::MAX_CLOCK_LAG_NS`]
/// (8.59 s; at least 4 windows, at most a quarter of the field's range), is stale and
/// counts against the stored window at its start (stricter). A word left idle for about a
/// multiple of `2^(64−2b)` windows may read its old counts as current or stale: stricter for
/// at most the lag plus one window, never more permissive. The period must be at least
/// `2^b` ns ([`QuotaError::WindowTooShort`]).
///
/// # Refund
///
/// The receipt's mark is the window the permits were counted in; a refund subtracts them
/// from that window's count (`curr`, or `prev` once the word has moved one window on), and
/// nothing once the refund time is two windows later (the permits no longer count).
///
/// # Charges
///
/// A charge ([`Rule::charge`]) adds to the current window's count past `count`, up to the
/// field's `2^b − 1`: while the estimate passes `count`, every request is refused, one for
/// no permits included ([`Rule::debt`]), and the debt weighs on the next window through
/// the formula, as an admitted count would. A charge past the field leaves the count
/// *saturated* and reports the rest as the shortfall; a saturated count admits nothing
/// until the window after its own has ended (its true count is unknown: it weighs as
/// the whole limit) and gives nothing back to a refund or a credit. Never more permissive.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{Rule, SlidingWindowRule};
/// use limitcore::Quota;
///
/// let rule = SlidingWindowRule::new(&Quota::per_second(10)?)?;
/// let mut word = rule.fresh();
/// rule.take(&mut word, 0, 10).unwrap();                   // window 0 is full
/// // Halfway through window 1, 10 × 0.5 = 5 still count: 5 are left.
/// assert_eq!(rule.snapshot(&word, 1_500_000_000).remaining, 5);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowRule {
    pub(crate) counter: Counter,
    quota: Quota,
}

impl SlidingWindowRule {
    /// The largest count the rule accepts: `2^24 − 1`, so that two counts (24 bits each) and
    /// a 16-bit window number share the word.
    pub const MAX_COUNT: u32 = (1 << 24) - 1;

    /// How far behind the stored window a reading may be and still be taken as stale
    /// (decided against the stored window, stricter) rather than as a wrap of the window
    /// field: 2^33 ns (8.59 s) worth of windows, at least 4, at most a quarter of the
    /// field's range.
    pub const MAX_CLOCK_LAG_NS: Nanos = 1 << 33;
}

impl Rule for SlidingWindowRule {
    type State = u64;

    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] above [`SlidingWindowRule::MAX_COUNT`];
    /// [`QuotaError::WindowTooShort`] for a period under `2^b` ns (`b` = bit length of the
    /// count); [`QuotaError::BurstNotSupported`] if the burst is not the count.
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        window_quota(quota, "sliding-window")?;
        Ok(SlidingWindowRule {
            counter: Counter::new(quota, 1, Some(0))?,
            quota: *quota,
        })
    }

    #[inline]
    fn quota(&self) -> Quota {
        self.quota
    }

    #[inline]
    fn fresh(&self) -> u64 {
        0
    }

    #[inline]
    fn take(&self, word: &mut u64, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        let (next, w, _) = self.counter.lease(*word, now, u64::from(n))?;
        *word = next;
        Ok(Receipt::new(n, w.k))
    }

    fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let c = &self.counter;
        let w = c.window(*word, now);
        Snapshot {
            remaining: c.room(&w) as u32,
            full_after: c.full_after(&w, now),
        }
    }

    fn refund(&self, word: &mut u64, receipt: &Receipt, at: Nanos) -> bool {
        match self.counter.unlease(*word, receipt, at) {
            Some(next) => {
                *word = next;
                true
            }
            None => false,
        }
    }

    fn fresh_since(&self, word: &u64, since: Nanos, _now: Nanos) -> bool {
        let w = self.counter.window(*word, since);
        w.prev == 0 && w.curr == 0
    }

    /// `n` more in the window of `now`, up to the field's ceiling (see "Charges").
    fn charge(&self, word: &mut u64, now: Nanos, n: u32) -> u32 {
        let (next, short) = self.counter.charge(*word, now, n);
        *word = next;
        short
    }

    /// In debt while the estimate of the window ending now passes `count`.
    fn debt(&self, word: &u64, now: Nanos) -> Result<(), Denied> {
        self.counter.debt(*word, now)
    }

    /// Up to `n` off the count of the window of `at`; a saturated count gives nothing back.
    fn credit(&self, word: &mut u64, n: u32, at: Nanos) -> bool {
        match self.counter.credit(*word, n, at) {
            Some(next) => {
                *word = next;
                true
            }
            None => false,
        }
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

    #[test]
    fn refund_subtracts_from_the_receipts_window() {
        let q = Quota::new(10, Duration::from_nanos(1_000)).unwrap();
        let rule = SlidingWindowRule::new(&q).unwrap();
        let mut word = rule.fresh();
        rule.take(&mut word, 100, 3).unwrap();
        let r = rule.take(&mut word, 200, 4).unwrap();
        let mut now = word;
        assert!(rule.refund(&mut now, &r, 200));
        assert_eq!(rule.snapshot(&now, 200).remaining, 7);
        // One window later the permits count as `prev`.
        let mut next = word;
        rule.take(&mut next, 1_100, 1).unwrap();
        assert!(rule.refund(&mut next, &r, 1_100));
        assert_eq!(rule.counter.window(next, 1_100).prev, 3);
        // Two windows later they no longer count: nothing to give back.
        let mut late = word;
        assert!(!rule.refund(&mut late, &r, 2_000));
    }
}
