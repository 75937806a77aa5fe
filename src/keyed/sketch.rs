//! [`KeyedSketch`]: a keyed sliding-window limit in fixed memory for huge key spaces, a
//! count-min sketch of windowed atomic counters.
//!
//! Sources: G. Cormode and S. Muthukrishnan, "An improved data stream summary: the count-min
//! sketch and its applications", Journal of Algorithms 55(1), 2005 (the sketch and its error
//! bound); Cloudflare 2017 for the sliding-window formula every cell keeps (as
//! [`SlidingWindow`](crate::SlidingWindow)); M. Dietzfelbinger, "Universal hashing and k-wise
//! independent random variables via integer arithmetic without primes", STACS 1996 (the
//! multiply-add-shift row hashes).
//!
//! # The protocol
//!
//! A request for `n` permits of key `x`, read at `now` (window `j = now / period`):
//!
//! 1. **Add.** For each row `i = 0..d`, in that order, add `n` to `x`'s cell of row `i`
//!    (a CAS loop; the cell first rotates into window `j` if it is behind; if it is *ahead*,
//!    in a later window than `j`, the `n` is added to that later window). The add's absolute
//!    window number is kept for the refund.
//! 2. **Read.** The word written by row `d − 1`'s add is that row's read; rows
//!    `0..d − 1` are then read with `fetch_add(0)`, stopping at the first row that admits.
//!    A row *admits* if its read is in window `j` (not ahead), neither count is saturated,
//!    and its formula estimate, which includes the request's own `n`, is at most `count`.
//! 3. **Decide.** Admitted iff some row admits. Otherwise every row subtracts `n` again
//!    from the window it was added to (from `curr` if the cell is still in that window,
//!    from `prev` if it has rotated once since, nothing if it has moved further or the
//!    count is saturated) and the request is refused.
//!
//! # Orderings
//!
//! Why a separate read step: an admission depends on `d` words, and the values a
//! request's own adds return are not enough. With count 1 and depth 2: R adds row 0 (1),
//! S adds row 0 (2), S adds row 1 (1), R adds row 1 (2); deciding on those values, R's
//! minimum is 1 and S's is 1, and both would be admitted. Why not `Relaxed`, unlike the
//! single-word limiters ([`cas`](crate::cas)): the read step works only if, of two
//! requests, one's reads include the other's adds, and for `Relaxed` read-modify-writes on
//! different words the memory model allows each request's read to miss the other's add (R
//! reads row 0 before S adds there, S reads row 1 before R adds there: a cycle with program
//! order that only synchronization rules out). The orderings that rule it out:
//!
//! - the successful CAS of an add (step 1): `AcqRel` (the acquire half is what the proof
//!   uses; the release half because row `d − 1`'s add doubles as its read);
//! - the reads of step 2: `fetch_add(0, AcqRel)` (the release half is what the proof uses);
//! - refunds (step 3), every CAS failure and the first load of every CAS loop: `Relaxed`;
//! - the loads of [`KeyedSketch::estimate_at`] and [`KeyedSketch::snapshot_at`]: `Relaxed`
//!   (observations; no admission is decided on them).
//!
//! The proof, for a key `x`, with `mo` the modification order of one cell:
//!
//! - *(F1) Every write to a cell is a read-modify-write* (cells are created zero and never
//!   `store`d). So an acquire RMW that comes after a release RMW `q` in `mo` reads from
//!   `q`'s release sequence, and synchronizes with `q`; refunds, being RMWs too, do not
//!   break release sequences whatever their ordering.
//! - *(F2) An RMW reads the latest value in `mo`*, whatever its ordering; so if a write
//!   happens before an RMW on the same cell, the RMW's value includes it (coherence).
//! - **Lemma 1 (of two requests, one sees the other).** Say S's read on row `i` misses R's
//!   add on row `i` (S's read is before R's add in `mo`). S's read is a release RMW and R's
//!   add an acquire RMW after it (F1): S's read synchronizes with R's add. Every add of S
//!   is sequenced before S's reads, so it happens before R's add on row `i`, and before
//!   every read R makes (all sequenced after R's adds). By (F2) every read of R includes
//!   every add of S.
//! - **Lemma 2 (an order).** If S misses R (on row `i`), then S's last add (row `d − 1`,
//!   sequenced before or equal to S's read on row `i`) happens before R's add on row `i`,
//!   hence before or at R's last add. So "misses" follows happens-before between the
//!   requests' last adds and has no cycle. In any finite set of requests one request misses
//!   none of the others (it sees them all); taking it off repeatedly orders the set so that
//!   each request's reads include the adds of every request before it.
//! - **Lemma 3 (no under-count).** A cell's count for a window is at least the permits of
//!   the admitted requests recorded in it: an admitted add is never subtracted; a refund
//!   subtracts exactly its own request's `n`, from the window that request added to (known
//!   by its absolute number, not by position); a saturated count (2^24 − 1) stands for
//!   "too many to count", is read as infinite, and is never subtracted from. And an add is
//!   recorded in a window at or after its reading's window, never before.
//! - **Theorem.** Order the admitted requests of `x` as in Lemma 2 (`x`'s requests all use
//!   the same cells). Take one, S, read in window `j`, admitted by row `i`. Every earlier R
//!   is included in that read and recorded in a window `w_R` with `r_R ≤ w_R ≤ j` (`r_R`:
//!   R's reading window; `w_R ≤ j` because the cell's window only moves forward, for
//!   readings within the stale tolerance, and is `j` at S's read: a written cell keeps its
//!   window number even when both its counts are 0, so a row never vouches for a window
//!   before its own). So the order has non-decreasing reading windows, and the estimate row
//!   `i` computed, `⌈prev·(period − e)/period⌉ + curr`, is at least the exact per-key
//!   formula at S's reading over the earlier requests and S: a permit recorded in a later
//!   window than its reading's only weighs more (1 instead of the previous window's
//!   weight), and other keys' permits only add. So the exact per-key sliding-window
//!   counter, fed `x`'s admitted requests in that order, admits every one of them: **a
//!   collision, a concurrent request or a refund in flight can only make a decision
//!   stricter.** With a frozen clock this is: at most `count` permits per key per window.
//!
//! The refunds need no ordering: only Lemma 3, arithmetic on one cell, depends on them.
//! The sketch does not act as a memory fence for the caller's data.
//!
//! Loom (`loom-tests/tests/keyed_sketch.rs`) checks the protocol's interleavings: the read
//! step, refunds racing admissions, refunds across a window rotation. It runs every
//! read-modify-write in one total order, so it cannot show what `Relaxed` would allow here
//! (the same models pass with `Relaxed` adds and reads): the orderings rest on the proof
//! above.

use crate::cas;
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::limiter::{KeyedRateLimiter, KeyedRefund};
use crate::quota::{Quota, QuotaError};
use crate::rules::{precheck, window_quota, Counter, SlidingWindowRule, Window};
use crate::sync::{AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::convert::Infallible;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::time::Duration;
use std::collections::hash_map::RandomState;

/// The most rows a sketch may have.
const MAX_DEPTH: usize = 16;

/// The largest count a sketch accepts (see [`KeyedSketch::MAX_COUNT`]).
const MAX_COUNT: u32 = (1 << COUNT_BITS) - 2;

/// Set in a receipt's mark when the rows recorded the permits in different windows (a
/// cell was ahead of the reading): such an admission is not refunded (stricter), since a
/// refund by one window number could subtract from another window's count. Window numbers
/// are below 2^63 (a period is at least 2 ns).
const MIXED_WINDOWS: u64 = 1 << 63;

/// Bits of each of a cell's two counts.
const COUNT_BITS: u32 = 24;

/// A count that stands for "at least this many, too many to count": read as infinite,
/// never subtracted from, dropped only when its window ages out.
const SATURATED: u64 = (1 << COUNT_BITS) - 1;

/// Bits of a cell's window number (kept modulo `2^15`).
const WINDOW_BITS: u32 = 15;

const WINDOW_MASK: u64 = (1 << WINDOW_BITS) - 1;

/// Set in every cell that was ever written: a cell that was never written reads as empty in
/// every window, a written one keeps its window number even when both counts are 0.
const TOUCHED: u64 = 1 << 63;

/// A cell word decoded against a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// The counts of the reading's window `k` and the one before (`at` = the reading).
    Live(Window),
    /// The cell is in a later window `k` than the reading (`at` = the start of `k`). It
    /// cannot bound a key's count at the reading (it may have dropped the window before the
    /// reading's), so it admits nothing until then.
    Ahead(Window),
}

impl View {
    fn window(&self) -> &Window {
        match self {
            View::Live(w) | View::Ahead(w) => w,
        }
    }
}

/// The cell arithmetic, fixed at construction.
///
/// ```text
///  63   62          48 47            24 23             0
/// +---+--------------+----------------+----------------+
/// | T | window k mod | prev (24 bits) | curr (24 bits) |
/// |   |  2^15        |                |                |
/// +---+--------------+----------------+----------------+
/// ```
///
/// `T` ([`TOUCHED`]) is set once the cell was written. `prev` and `curr` are the permits
/// recorded in windows `k − 1` and `k` by every key of the cell, each either exact or
/// [`SATURATED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cells {
    /// The sliding-window formula (period, count) and its exact waits.
    counter: Counter,
    /// Windows a reading may lag a cell's window and still be taken as from an earlier
    /// window (not as a wrap of the window field): [`SlidingWindowRule::MAX_CLOCK_LAG_NS`] worth, within
    /// `[4, 2^13 − 1]`.
    behind: u64,
}

impl Cells {
    fn new(quota: &Quota) -> Result<Cells, QuotaError> {
        window_quota(quota, "keyed-sketch")?;
        if quota.count() > MAX_COUNT {
            return Err(QuotaError::CountTooLarge {
                count: quota.count(),
                max: MAX_COUNT,
            });
        }
        // The formula on exact counts, as `Keyed<_, SlidingWindow>` builds it.
        let counter = Counter::new(quota, 1, Some(0))?;
        let behind = SlidingWindowRule::MAX_CLOCK_LAG_NS
            .div_ceil(quota.period_ns())
            .clamp(4, WINDOW_MASK >> 2);
        Ok(Cells { counter, behind })
    }

    #[inline]
    fn pack(k: u64, prev: u64, curr: u64) -> u64 {
        TOUCHED | ((k & WINDOW_MASK) << (2 * COUNT_BITS)) | (prev << COUNT_BITS) | curr
    }

    #[inline]
    fn unpack(word: u64) -> (u64, u64, u64) {
        (
            (word >> (2 * COUNT_BITS)) & WINDOW_MASK,
            (word >> COUNT_BITS) & SATURATED,
            word & SATURATED,
        )
    }

    /// `word` as seen from `now`.
    #[inline]
    fn view(&self, word: u64, now: Nanos) -> View {
        let k = now / self.counter.period;
        let fresh = View::Live(Window {
            k,
            prev: 0,
            curr: 0,
            at: now,
        });
        if word & TOUCHED == 0 {
            return fresh;
        }
        let (stored, prev, curr) = Cells::unpack(word);
        match (k & WINDOW_MASK).wrapping_sub(stored) & WINDOW_MASK {
            0 => View::Live(Window {
                k,
                prev,
                curr,
                at: now,
            }),
            1 => View::Live(Window {
                k,
                prev: curr,
                curr: 0,
                at: now,
            }),
            d if d > WINDOW_MASK - self.behind => {
                // Ahead by `WINDOW_MASK − d + 1` windows. A start past the clock's range
                // cannot be a stored window: the field has wrapped, the counts are gone.
                let k = k + (WINDOW_MASK - d + 1);
                match k.checked_mul(self.counter.period) {
                    Some(at) => View::Ahead(Window { k, prev, curr, at }),
                    None => fresh,
                }
            }
            // Two or more windows behind the reading: both counts have aged out.
            _ => fresh,
        }
    }

    /// The add of step 1: `n` more in the window of `now`, or in the cell's own window if it
    /// is ahead. Returns the new word and the absolute window the `n` was recorded in.
    #[inline]
    fn add(&self, word: u64, now: Nanos, n: u64) -> (u64, u64) {
        let w = *self.view(word, now).window();
        // n ≤ count < SATURATED and an unsaturated curr < SATURATED: no overflow.
        let curr = if w.curr == SATURATED {
            SATURATED
        } else {
            (w.curr + n).min(SATURATED)
        };
        (Cells::pack(w.k, w.prev, curr), w.k)
    }

    /// The refund of step 3: `word` without the `n` recorded in window `k_add`, or `None`
    /// if there is nothing to subtract (aged out, or saturated).
    #[inline]
    fn refund(&self, word: u64, k_add: u64, n: u64) -> Option<u64> {
        if word & TOUCHED == 0 {
            return None;
        }
        let (stored, prev, curr) = Cells::unpack(word);
        // `saturating_sub`: the count holds this `n` (Lemma 3); never borrow from another field.
        match stored.wrapping_sub(k_add & WINDOW_MASK) & WINDOW_MASK {
            0 if curr != SATURATED => Some(Cells::pack(stored, prev, curr.saturating_sub(n))),
            1 if prev != SATURATED => Some(Cells::pack(stored, prev.saturating_sub(n), curr)),
            _ => None,
        }
    }

    /// The formula estimate `⌈prev·(P − e)/P⌉ + curr` of a window, or `None` if a count is
    /// saturated.
    #[inline]
    fn estimate(&self, w: &Window) -> Option<u64> {
        if w.prev == SATURATED || w.curr == SATURATED {
            return None;
        }
        let p = u128::from(self.counter.period);
        let e = u128::from(w.at - w.k * self.counter.period);
        let weighted = (u128::from(w.prev) * (p - e)).div_ceil(p);
        // prev < 2^24: the weighted part fits.
        Some(weighted as u64 + w.curr)
    }

    /// Does a read of this row admit a request at `now` whose own permits it includes?
    #[inline]
    fn admits(&self, word: u64, now: Nanos) -> bool {
        match self.view(word, now) {
            View::Live(w) => self
                .estimate(&w)
                .is_some_and(|e| e <= u64::from(self.counter.count)),
            View::Ahead(_) => false,
        }
    }

    /// The key's estimate from this row at `now` (`u64::MAX` if the row cannot bound it).
    fn row_estimate(&self, word: u64, now: Nanos) -> u64 {
        match self.view(word, now) {
            View::Live(w) => self.estimate(&w).unwrap_or(u64::MAX),
            View::Ahead(_) => u64::MAX,
        }
    }

    /// The exact wait from `now` until this row (holding `word`, without the request's own
    /// permits) admits `n ≤ count`, if nothing else changes it.
    fn retry(&self, word: u64, now: Nanos, n: u64) -> Denied {
        let c = &self.counter;
        let w = *self.view(word, now).window();
        let start = |k: u64| k.checked_mul(c.period);
        if w.curr == SATURATED {
            // Window k + 1 still weighs it (as prev); window k + 2 starts empty.
            return match w.k.checked_add(2).and_then(start) {
                Some(at) => Denied::rate_limited(at - now),
                None => Denied::NEVER,
            };
        }
        let w = if w.prev == SATURATED {
            // Window k + 1: the saturated count is gone, `curr` is the previous one.
            match w.k.checked_add(1).and_then(start) {
                Some(at) => Window {
                    k: w.k + 1,
                    prev: w.curr,
                    curr: 0,
                    at,
                },
                None => return Denied::NEVER,
            }
        } else {
            w
        };
        // `estimate + n ≤ count`: `available ≥ n` for a request, and for a request for no
        // permits (a debt's wait) an estimate back within the limit.
        if self
            .estimate(&w)
            .is_some_and(|e| e + n <= u64::from(c.count))
        {
            // Admits from the start of a later window (a row ahead of the reading).
            Denied::rate_limited(w.at - now)
        } else {
            c.retry_after(&w, now, n)
        }
    }

    /// Time from `now` until this row counts nothing for a reading at that time.
    fn full_after(&self, word: u64, now: Nanos) -> Duration {
        match self.view(word, now) {
            View::Live(w) => self.counter.full_after(&w, now),
            View::Ahead(w) => self
                .counter
                .full_after(&w, now)
                .max(Duration::from_nanos(w.at - now)),
        }
    }
}

/// A keyed sliding-window limit in fixed memory: a count-min sketch of `depth` rows of
/// `width` windowed counters, for key spaces too large (or too adversarial) for one state
/// per key.
///
/// Each key maps to one cell per row. A cell is one `AtomicU64` holding the counts of two
/// consecutive windows (the sliding-window counter of [`SlidingWindow`](crate::SlidingWindow),
/// Cloudflare 2017) summed over every key that maps to it. A key's estimate at time `t` is
/// the minimum over its cells of `⌈prev·(period − e)/period⌉ + curr` (`e`: time into the
/// current window), and a request for `n` is admitted iff that minimum plus `n` is at most
/// `count`. A window has no burst: a quota whose burst is not its count is refused
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Contract: never looser than one exact limiter per key
///
/// A cell counts at least every permit admitted to each of its keys, so a key's estimate is
/// never below its exact count, also under concurrency (the protocol and its proof are in
/// the module source, "Orderings"): for each key, the admitted requests, in a suitable order
/// (call order for one thread), are all admitted by an exact per-key sliding-window counter
/// ([`reference::SlidingWindowModel`](crate::reference::SlidingWindowModel)). With a frozen
/// clock, at most `count` permits per key per window, whatever the threads. A collision can
/// only make a decision **stricter**: a key may be refused early because other keys share
/// its cells; it is never admitted beyond its quota.
///
/// Readings from before a cell's current window (a thread preempted across a window
/// boundary, a clock stepped back) cannot be bounded by that cell, which may already have
/// dropped the window before the reading's; the cell then admits nothing until its window
/// starts (stricter). The exact per-key counter would decide such a reading at its own
/// latest window instead, so with a clock that goes back, or across keys in a shared cell,
/// the sketch is stricter than it. As for [`SlidingWindow`](crate::SlidingWindow), a reading
/// must not lag the latest one by more than [`SlidingWindowRule::MAX_CLOCK_LAG_NS`] (8.59 s), nor by more than
/// 8 191 periods (the window number is kept modulo 2^15): anything further behind is taken
/// as a later window.
///
/// # Error bound
///
/// Let `w` be the width (after rounding up to a power of two) and `d` the depth. For a
/// reading at which the previous window weighs `ω = (period − elapsed)/period`, let `N` be
/// the weighted total of *all* keys, `N = ω·P_all + C_all`, with `P_all` and `C_all` every
/// permit counted in the previous and the current window (admitted, or in flight). Then for
/// any key whose exact estimate is `a`:
///
/// ```text
/// a ≤ estimate,   P[ estimate > a + ⌈ε·N⌉ ] ≤ δ,   ε = e / w,   δ = e^(−d)   (e = 2.718…)
/// ```
///
/// ([`KeyedSketch::epsilon`], [`KeyedSketch::delta`]). This is Theorem 1 of Cormode &
/// Muthukrishnan (2005) applied to the weighted sum: a row's excess over `a` is at most
/// `⌈ω·B + D⌉`, with `B` and `D` the other keys' permits in that row's cell; pairwise
/// independent rows give `E[ω·B + D] ≤ N / w`, Markov's inequality `P[ω·B + D > ε·N] ≤ 1/e`
/// per row, and the `d` rows are independent. The probability is over the random hash
/// functions, for traffic not chosen by someone who can see which keys collide (the hash
/// keys are secret and random per sketch). (Readings from before a cell's window add to a
/// later window of that cell, which can only raise the excess, as described above.)
///
/// What it means: a key is never admitted beyond its quota; it may be refused early, when
/// other keys' traffic inflates all its cells, and with probability at least `1 − δ` by at
/// most `⌈ε·N⌉` permits. Size the sketch so that `ε·N` is small against `count`. Example:
/// `2^16 × 4` cells (2 MiB) and a million permits per window across all keys: `ε·N` ≈ 41.5
/// permits, `δ` ≈ 1.8 %; `2^20 × 8` (64 MiB): ≈ 2.6 permits, `δ` ≈ 0.03 %. Saturation: a
/// cell whose count for one window reaches `2^24 − 1` permits refuses all its keys until
/// that count ages out (at most two windows).
///
/// # Hashing
///
/// One 64-bit hash per key (`std`'s [`RandomState`], SipHash-1-3 with random keys per
/// sketch), then per row `i` the multiply-add-shift function
/// `h_i(x) = ((a_i·x + b_i) mod 2^128) >> (128 − log2 w)` with random 128-bit `a_i`, `b_i`
/// (Dietzfelbinger 1996), which is strongly universal (pairwise independent) on 64-bit
/// hashes, and independent across rows: the assumption of the bound above, up to two keys
/// having equal 64-bit hashes.
///
/// # Memory
///
/// `width × depth × 8` bytes of cells, plus the struct and 32 bytes of hash parameters per
/// row ([`KeyedSketch::memory_bytes`]), fixed at construction: independent of the number of
/// keys. No key is ever stored.
///
/// # Cost
///
/// A request makes `depth` compare-and-swap loops (one per row); if the last row does not
/// admit it, up to `depth − 1` more read-modify-writes, and on refusal `depth` refund loops.
///
/// # Examples
///
/// ```
/// use limitcore::{KeyedSketch, Quota};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let per_ip: KeyedSketch<str, ManualClock> =
///     KeyedSketch::with_clock(Quota::per_second(3)?, 1 << 12, 4, clock.clone())?;
/// assert_eq!(per_ip.memory_bytes(), (1 << 12) * 4 * 8 + per_ip.header_bytes());
/// per_ip.try_acquire_n("10.0.0.1", 3).unwrap();
/// let denied = per_ip.try_acquire("10.0.0.1").unwrap_err();
/// // Window 0 is full; in window 1 its 3 weigh ⌈3·(1 − e/1 s)⌉: 1 fits from e = ⅓ s on.
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(1_333) + Duration::from_nanos(333_334)));
/// // Another key: its own budget, unless all 4 of its cells collide (probability 2^−48).
/// assert!(per_ip.try_acquire("10.0.0.2").is_ok());
/// clock.advance(Duration::from_millis(1_500)); // halfway through window 1
/// assert_eq!(per_ip.estimate("10.0.0.1"), 2); // ⌈3 × ½⌉
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub struct KeyedSketch<K: ?Sized, C = DefaultClock> {
    /// `depth` rows of `width` cells, row-major.
    cells: Box<[AtomicU64]>,
    /// `(a_i, b_i)` of each row's hash.
    rows: Box<[(u128, u128)]>,
    /// `log2(width)`.
    width_bits: u32,
    hasher: RandomState,
    arith: Cells,
    quota: Quota,
    clock: C,
    _key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, C: fmt::Debug> fmt::Debug for KeyedSketch<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSketch")
            .field("quota", &self.quota)
            .field("width", &self.width())
            .field("depth", &self.depth())
            .field("clock", &self.clock)
            .finish()
    }
}

impl<K: ?Sized, C> KeyedSketch<K, C> {
    /// The most rows a sketch may have: 16 (failure probability `e^−16` ≈ 1.1·10^−7).
    pub const MAX_DEPTH: usize = MAX_DEPTH;

    /// The widest row a sketch may have: 2^30 cells (8 GiB per row).
    pub const MAX_WIDTH: usize = 1 << 30;

    /// The largest count a sketch accepts: `2^24 − 2`, one below a cell's saturated value
    /// (each of a cell's two counts has 24 bits).
    pub const MAX_COUNT: u32 = MAX_COUNT;

    /// Cells per row (a power of two).
    pub fn width(&self) -> usize {
        1 << self.width_bits
    }

    /// Rows (hash functions).
    pub fn depth(&self) -> usize {
        self.rows.len()
    }

    /// The per-key quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Bytes this sketch holds: `width × depth × 8` for the cells plus
    /// [`KeyedSketch::header_bytes`]; fixed at construction, whatever the number of keys.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    ///
    /// let s: KeyedSketch<u64, ManualClock> =
    ///     KeyedSketch::with_clock(Quota::per_second(10)?, 1 << 16, 4, ManualClock::new())?;
    /// let bytes = s.memory_bytes();
    /// assert_eq!(bytes, (1 << 16) * 4 * 8 + s.header_bytes()); // 2 MiB and a few hundred bytes
    /// for key in 0..100_000u64 {
    ///     let _ = s.try_acquire(&key);
    /// }
    /// assert_eq!(s.memory_bytes(), bytes);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        self.cells.len() * core::mem::size_of::<AtomicU64>() + self.header_bytes()
    }

    /// The bytes besides the cells: the struct itself and the row hash parameters (32 bytes
    /// per row).
    pub fn header_bytes(&self) -> usize {
        core::mem::size_of::<Self>() + core::mem::size_of_val::<[(u128, u128)]>(&self.rows)
    }

    /// `ε = e / width`: with probability at least `1 − δ`, a key's estimate exceeds its
    /// exact count by at most `⌈ε·N⌉` permits, `N` being the weighted count of all keys (see
    /// "Error bound").
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    ///
    /// let s: KeyedSketch<u64, ManualClock> =
    ///     KeyedSketch::with_clock(Quota::per_second(100)?, 1 << 16, 4, ManualClock::new())?;
    /// // With 10^6 permits per window across all keys: ≤ 42 extra with probability ≥ 98 %.
    /// assert_eq!((s.epsilon() * 1e6).ceil(), 42.0);
    /// assert!((s.delta() - 0.0183).abs() < 1e-4);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn epsilon(&self) -> f64 {
        core::f64::consts::E / self.width() as f64
    }

    /// `δ = e^(−depth)`: the probability that a key's estimate exceeds its exact count by
    /// more than `⌈ε·N⌉` (see "Error bound").
    pub fn delta(&self) -> f64 {
        (-(self.depth() as f64)).exp()
    }
}

impl<K: Hash + ?Sized> KeyedSketch<K, DefaultClock> {
    /// A sketch of `depth` rows of `width` cells (rounded up to a power of two) for `quota`
    /// per key, on the default clock.
    ///
    /// # Errors
    ///
    /// As [`KeyedSketch::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota};
    ///
    /// let per_ip: KeyedSketch<str> = KeyedSketch::new("100/s".parse()?, 1 << 16, 4)?;
    /// assert!(per_ip.try_acquire("192.0.2.7").is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn new(quota: Quota, width: usize, depth: usize) -> Result<Self, QuotaError> {
        KeyedSketch::with_clock(quota, width, depth, DefaultClock::new())
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedSketch<K, C> {
    /// A sketch of `depth` rows of `width` cells for `quota` per key, reading time from
    /// `clock`. `width` is rounded up to a power of two; the cells take `width × depth × 8`
    /// bytes, allocated here, all zero (every key fresh).
    ///
    /// # Errors
    ///
    /// [`QuotaError::SketchSize`] for `width` outside `1..=`[`Self::MAX_WIDTH`], `depth`
    /// outside `1..=`[`Self::MAX_DEPTH`], or cells that cannot be allocated;
    /// [`QuotaError::CountTooLarge`] above [`Self::MAX_COUNT`];
    /// [`QuotaError::WindowTooShort`] for a period under `2^b` ns (`b` = bit length of the
    /// count), as for [`SlidingWindow`](crate::SlidingWindow).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota, QuotaError};
    /// use limitcore::clock::ManualClock;
    ///
    /// let q = Quota::per_second(10)?;
    /// let s: KeyedSketch<u64, ManualClock> = KeyedSketch::with_clock(q, 1000, 3, ManualClock::new())?;
    /// assert_eq!((s.width(), s.depth()), (1024, 3));
    /// let bad = KeyedSketch::<u64, ManualClock>::with_clock(q, 1000, 0, ManualClock::new());
    /// assert_eq!(bad.unwrap_err(), QuotaError::SketchSize { width: 1000, depth: 0 });
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn with_clock(
        quota: Quota,
        width: usize,
        depth: usize,
        clock: C,
    ) -> Result<Self, QuotaError> {
        let size = QuotaError::SketchSize { width, depth };
        if !(1..=Self::MAX_WIDTH).contains(&width) || !(1..=Self::MAX_DEPTH).contains(&depth) {
            return Err(size);
        }
        let arith = Cells::new(&quota)?;
        let width = width.next_power_of_two();
        let total = width.checked_mul(depth).ok_or_else(|| size.clone())?;
        let mut cells = Vec::new();
        cells.try_reserve_exact(total).map_err(|_| size)?;
        cells.extend((0..total).map(|_| AtomicU64::new(0)));
        // Row parameters from their own random SipHash keys.
        let params = RandomState::new();
        let word = |i: usize, j: u8| u128::from(params.hash_one((i, j)));
        let rows = (0..depth)
            .map(|i| {
                (
                    (word(i, 0) << 64) | word(i, 1),
                    (word(i, 2) << 64) | word(i, 3),
                )
            })
            .collect::<Vec<_>>();
        Ok(KeyedSketch {
            cells: cells.into_boxed_slice(),
            rows: rows.into_boxed_slice(),
            width_bits: width.trailing_zeros(),
            hasher: RandomState::new(),
            arith,
            quota,
            clock,
            _key: PhantomData,
        })
    }

    /// The index in `cells` of `key`'s cell in every row (the first `depth` entries).
    #[inline]
    fn cells_of(&self, key: &K) -> [usize; MAX_DEPTH] {
        let h = u128::from(self.hasher.hash_one(key));
        let mut out = [0; MAX_DEPTH];
        for (i, &(a, b)) in self.rows.iter().enumerate() {
            let column = if self.width_bits == 0 {
                0
            } else {
                // Multiply-add-shift: the top `log2 w` bits of a·h + b mod 2^128.
                (a.wrapping_mul(h).wrapping_add(b) >> (128 - self.width_bits)) as usize
            };
            out[i] = (i << self.width_bits) | column;
        }
        out
    }

    /// Step 1 on one cell: add `n` at `now`; returns the word written and the window of the add.
    #[inline]
    fn add(&self, cell: &AtomicU64, now: Nanos, n: u64) -> (u64, u64) {
        // AcqRel on success: acquire to synchronize with an earlier release read (Lemma 1),
        // release because row d − 1's add is also its read.
        let added = cas::apply_ordered(cell, Ordering::AcqRel, |word| {
            let (next, k) = self.arith.add(word, now, n);
            Ok::<_, Infallible>((next, (next, k)))
        });
        match added {
            Ok(added) => added,
            Err(never) => match never {},
        }
    }

    /// Step 3 on one cell: take back the `n` added in window `k_add` (nothing to take back:
    /// no write).
    fn refund_cell(&self, cell: &AtomicU64, k_add: u64, n: u64) {
        // Relaxed: refunds only need single-cell arithmetic (Lemma 3); as RMWs they keep
        // release sequences intact whatever their ordering (F1).
        let _ = cas::apply(cell, |word| {
            self.arith
                .refund(word, k_add, n)
                .map(|next| (next, ()))
                .ok_or(())
        });
    }

    /// Decide `n` permits for `key` at the explicit time `now` (ns of the clock).
    ///
    /// # Errors
    ///
    /// [`Denied::ExceedsCapacity`] for `n > count` (nothing counted);
    /// [`Denied::RateLimited`] when no row of the key admits `n`, with the earliest time
    /// any row would admit it if nothing else changed: never too short (asking earlier is
    /// refused again), and exact when the key shares no cell with a busier key.
    /// [`Denied::BeyondHorizon`] when no row admits it within the clock's range. A refusal leaves the
    /// counts as they were (its permits are subtracted again).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Denied, KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let s: KeyedSketch<u32, ManualClock> =
    ///     KeyedSketch::with_clock(Quota::per_second(4)?, 1 << 10, 2, ManualClock::new())?;
    /// let sec = 1_000_000_000;
    /// assert_eq!(s.try_acquire_n_at(&1, 5, 0), Err(Denied::ExceedsCapacity { capacity: 4 }));
    /// s.try_acquire_n_at(&1, 4, sec / 2).unwrap();
    /// // Window 1: the 4 of window 0 weigh ⌈4·(1 − e)⌉ ≤ 3 from e = ¼ s.
    /// let denied = s.try_acquire_n_at(&1, 1, sec / 2).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(750)));
    /// assert!(s.try_acquire_n_at(&1, 1, sec + sec / 4).is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.acquire(key, n, now).map(|_| ())
    }

    /// The protocol of the module's notes; the receipt's mark is the window every row
    /// recorded the permits in (or [`MIXED_WINDOWS`]).
    fn acquire(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        if !precheck(n, self.arith.counter.count)? {
            return self.debt_at(key, now).map(|()| Receipt::NOTHING);
        }
        let n32 = n;
        let n = u64::from(n);
        let depth = self.depth();
        let cells = self.cells_of(key);
        // Step 1: add to every row, in row order.
        let mut added = [0u64; MAX_DEPTH];
        let mut reads = [0u64; MAX_DEPTH];
        for i in 0..depth {
            (reads[i], added[i]) = self.add(&self.cells[cells[i]], now, n);
        }
        let mark = if added[..depth].iter().all(|&k| k == added[0]) {
            added[0]
        } else {
            MIXED_WINDOWS
        };
        // Step 2: the last row's add is its read; then the other rows, until one admits.
        if self.arith.admits(reads[depth - 1], now) {
            return Ok(Receipt::new(n32, mark));
        }
        for i in 0..depth - 1 {
            // AcqRel: the release half makes this read head a release sequence that a
            // later add synchronizes with (Lemma 1); RMW, so it reads the latest value (F2).
            reads[i] = self.cells[cells[i]].fetch_add(0, Ordering::AcqRel);
            if self.arith.admits(reads[i], now) {
                return Ok(Receipt::new(n32, mark));
            }
        }
        // Step 3: refused by every row. The wait is the earliest at which any row, without
        // this request, admits it.
        let mut denied = Denied::NEVER;
        for i in 0..depth {
            let without = self.arith.refund(reads[i], added[i], n).unwrap_or(reads[i]);
            let row = self.arith.retry(without, now, n);
            denied = sooner(denied, row);
            self.refund_cell(&self.cells[cells[i]], added[i], n);
        }
        Err(denied)
    }

    /// Decide `n` permits for `key` now.
    ///
    /// # Errors
    ///
    /// As [`KeyedSketch::try_acquire_n_at`].
    pub fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(key, n, self.clock.now())
    }

    /// Decide one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`KeyedSketch::try_acquire_n_at`].
    pub fn try_acquire(&self, key: &K) -> Result<(), Denied> {
        self.try_acquire_n(key, 1)
    }

    /// The permits the sketch counts against `key` at `now` (ns of the clock): the minimum
    /// over the key's rows of `⌈prev·(period − e)/period⌉ + curr`. Never below the key's
    /// exact count; `u64::MAX` if no row can bound it (saturated, or in a later window
    /// than `now`). Consumes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    ///
    /// // Width 1: every key shares every cell, so each key's estimate is everyone's count.
    /// let s: KeyedSketch<&str, ManualClock> =
    ///     KeyedSketch::with_clock(Quota::per_second(10)?, 1, 2, ManualClock::new())?;
    /// s.try_acquire_n_at(&"a", 3, 0).unwrap();
    /// s.try_acquire_n_at(&"b", 2, 0).unwrap();
    /// assert_eq!(s.estimate_at(&"a", 0), 5); // at least its own 3, never less
    /// assert_eq!(s.estimate_at(&"a", 1_500_000_000), 3); // ⌈5 × ½⌉ halfway into window 1
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn estimate_at(&self, key: &K, now: Nanos) -> u64 {
        let cells = self.cells_of(key);
        cells[..self.depth()]
            .iter()
            // Relaxed: an observation (module "Orderings").
            .map(|&c| {
                self.arith
                    .row_estimate(self.cells[c].load(Ordering::Relaxed), now)
            })
            .min()
            .unwrap_or(0)
    }

    /// [`KeyedSketch::estimate_at`] now.
    pub fn estimate(&self, key: &K) -> u64 {
        self.estimate_at(key, self.clock.now())
    }

    /// The state of `key` at `now`, consuming nothing: `remaining`, the most permits one
    /// request could take (`count − estimate`, at least 0); `full_after`, until some row of
    /// the key counts nothing (the earliest over its rows).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let s: KeyedSketch<u8, ManualClock> =
    ///     KeyedSketch::with_clock(Quota::per_second(10)?, 64, 2, ManualClock::new())?;
    /// s.try_acquire_n_at(&7, 4, 0).unwrap();
    /// let snap = s.snapshot_at(&7, 0);
    /// assert_eq!(snap.remaining, 6);
    /// assert_eq!(snap.full_after, Duration::from_secs(2)); // window 0 weighs until window 2
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        let cells = self.cells_of(key);
        let count = u64::from(self.arith.counter.count);
        let (mut estimate, mut full_after) = (u64::MAX, Duration::MAX);
        for &c in &cells[..self.depth()] {
            // Relaxed: an observation (module "Orderings").
            let word = self.cells[c].load(Ordering::Relaxed);
            estimate = estimate.min(self.arith.row_estimate(word, now));
            full_after = full_after.min(self.arith.full_after(word, now));
        }
        Snapshot {
            remaining: (count - estimate.min(count)) as u32,
            full_after,
        }
    }

    /// [`KeyedSketch::snapshot_at`] now.
    pub fn snapshot(&self, key: &K) -> Snapshot {
        self.snapshot_at(key, self.clock.now())
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K> for KeyedSketch<K, C> {
    #[inline]
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        KeyedSketch::try_acquire_n_at(self, key, n, now)
    }

    /// The decision, then the key's state read at once after it: the key's rows cannot be
    /// read in one step.
    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        Decision {
            result: KeyedSketch::try_acquire_n_at(self, key, n, now),
            state: KeyedSketch::snapshot_at(self, key, now),
        }
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        KeyedSketch::snapshot_at(self, key, now)
    }

    fn quota_for(&self, _key: &K) -> Quota {
        self.quota
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedRefund<K> for KeyedSketch<K, C> {
    fn acquire_refundable_at(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.acquire(key, n, now)
    }

    fn decide_refundable_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot) {
        let result = self.acquire(key, n, now);
        (result, KeyedSketch::snapshot_at(self, key, now))
    }

    /// Step 3 of the protocol for an admitted request: subtract its permits from every row's
    /// cell, in the window they were recorded in (Lemma 3: a cell then still counts every
    /// other admitted permit). Not when the rows recorded them in different windows
    /// (stricter).
    fn refund(&self, key: &K, receipt: Receipt, _at: Nanos) {
        if receipt.n() == 0 || receipt.mark() & MIXED_WINDOWS != 0 {
            return;
        }
        let cells = self.cells_of(key);
        for &c in &cells[..self.depth()] {
            self.refund_cell(&self.cells[c], receipt.mark(), u64::from(receipt.n()));
        }
    }

    /// Whether some row of the key would admit `n` now (its estimate plus `n` within the
    /// count), else the earliest wait of any row.
    fn check_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.arith.counter.count)? {
            return self.debt_at(key, now);
        }
        let n = u64::from(n);
        let cells = self.cells_of(key);
        let mut denied = Denied::NEVER;
        for &c in &cells[..self.depth()] {
            // Relaxed: an observation (module "Orderings"); nothing is admitted on it.
            let word = self.cells[c].load(Ordering::Relaxed);
            if self.arith.admits(self.arith.add(word, now, n).0, now) {
                return Ok(());
            }
            let row = self.arith.retry(word, now, n);
            denied = sooner(denied, row);
        }
        Err(denied)
    }

    /// `n` more in every row's cell for `key` (each cell saturating: a saturated count
    /// admits none of its keys until it ages out), never refused, with no shortfall: the
    /// sketch holds any charge, at worst as a saturated count.
    fn charge_at(&self, key: &K, n: u32, now: Nanos) -> Charged {
        let cells = self.cells_of(key);
        for &c in &cells[..self.depth()] {
            self.add(&self.cells[c], now, u64::from(n));
        }
        Charged::after(n, 0, KeyedRefund::check_at(self, key, 1, now))
    }

    /// The unused permits refunded from the receipt's window (see [`KeyedRefund::refund`]),
    /// or the excess charged.
    fn settle(&self, key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        let estimate = receipt.n();
        if actual > estimate {
            return KeyedRefund::charge_at(self, key, actual - estimate, at);
        }
        if actual < estimate {
            KeyedRefund::refund(self, key, receipt.tail(actual, receipt.mark()), at);
        }
        Charged::after(0, 0, KeyedRefund::check_at(self, key, 1, at))
    }

    /// Nothing: a cell counts every key that maps to it, and cannot tell `key`'s permits
    /// from its neighbours', so a credit could give back theirs (stricter, never more
    /// permissive).
    fn credit(&self, _key: &K, _n: u32, _at: Nanos) {}
}

impl<K: Hash + ?Sized, C: Clock> KeyedSketch<K, C> {
    /// The answer to a request for no permits for `key` at `now`: admitted unless a
    /// charge left every row's estimate past the limit (or saturated), until one row is
    /// back within it.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the wait until one row admits again.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{KeyedRefund, KeyedSketch, Quota};
    /// use limitcore::clock::ManualClock;
    ///
    /// let sketch: KeyedSketch<str, ManualClock> =
    ///     KeyedSketch::with_clock("10/s".parse()?, 1024, 3, ManualClock::new())?;
    /// sketch.charge_at("10.0.0.1", 25, 0);               // past the limit in every row
    /// assert!(sketch.debt_at("10.0.0.1", 0).is_err());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn debt_at(&self, key: &K, now: Nanos) -> Result<(), Denied> {
        let count = u64::from(self.arith.counter.count);
        let cells = self.cells_of(key);
        let mut denied = Denied::NEVER;
        for &c in &cells[..self.depth()] {
            // Relaxed: an observation (module "Orderings"); nothing is admitted on it.
            let word = self.cells[c].load(Ordering::Relaxed);
            if self.arith.row_estimate(word, now) <= count {
                return Ok(());
            }
            denied = sooner(denied, self.arith.retry(word, now, 0));
        }
        Err(denied)
    }
}

/// Of two rows' refusals of one request, the one that admits it sooner: the shorter wait,
/// a wait over never ([`Denied::BeyondHorizon`]).
fn sooner(a: Denied, b: Denied) -> Denied {
    match (a.retry_after(), b.retry_after()) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(count: u32, period: u64) -> Cells {
        Cells::new(&Quota::new(count, Duration::from_nanos(period)).unwrap()).unwrap()
    }

    #[test]
    fn add_rotate_refund_by_hand() {
        let c = cells(10, 1_000);
        let (w, k) = c.add(0, 1_500, 4);
        assert_eq!((k, Cells::unpack(w)), (1, (1, 0, 4)));
        // Window 2, 500 ns in: the 4 of window 1 weigh ⌈4 × ½⌉ = 2, plus 3 new.
        let (w2, k2) = c.add(w, 2_500, 3);
        assert_eq!((k2, Cells::unpack(w2)), (2, (2, 4, 3)));
        assert_eq!(c.row_estimate(w2, 2_500), 5);
        // Refund of the first add, now in `prev`; of the second, in `curr`.
        assert_eq!(Cells::unpack(c.refund(w2, 1, 4).unwrap()), (2, 0, 3));
        assert_eq!(Cells::unpack(c.refund(w2, 2, 3).unwrap()), (2, 4, 0));
        // Aged out: nothing to refund.
        assert_eq!(c.refund(w2, 0, 1), None);
    }

    #[test]
    fn a_cell_ahead_admits_nothing_until_its_window() {
        let c = cells(10, 1_000);
        let (w, k) = c.add(0, 5_100, 1);
        let w = c.refund(w, k, 1).unwrap();
        // Both counts 0, but the cell is in window 5: a reading from window 4 is ahead.
        assert!(matches!(c.view(w, 4_999), View::Ahead(_)));
        assert!(!c.admits(w, 4_999));
        assert_eq!(c.retry(w, 4_999, 1), Denied::rate_limited(1));
        assert_eq!(c.row_estimate(w, 4_999), u64::MAX);
        // An add from window 4 is recorded in window 5 (later, never earlier).
        assert_eq!(c.add(w, 4_999, 2).1, 5);
        // A fresh (never written) cell is empty in every window, even just below 2^15.
        assert!(matches!(c.view(0, 32_767 * 1_000), View::Live(_)));
        assert!(c.admits(c.add(0, 32_767 * 1_000, 10).0, 32_767 * 1_000));
    }

    #[test]
    fn saturation_sticks_until_it_ages_out() {
        let c = cells(10, 1_000);
        let full = Cells::pack(3, 0, SATURATED - 2);
        let (w, k) = c.add(full, 3_000, 5);
        assert_eq!(Cells::unpack(w), (3, 0, SATURATED));
        assert_eq!(
            c.refund(w, k, 5),
            None,
            "a saturated count is never subtracted from"
        );
        assert!(!c.admits(w, 3_999));
        assert_eq!(c.retry(w, 3_500, 1), Denied::rate_limited(1_500));
        assert!(!c.admits(c.add(w, 4_999, 1).0, 4_999));
        assert!(c.admits(c.add(w, 5_000, 10).0, 5_000));
    }
}
