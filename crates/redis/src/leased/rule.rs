//! The lease word: cells a node holds for one key and until when, in one `u64` (the pure
//! rule under [`LeasedLimiter`](super::LeasedLimiter)'s compare-and-swap).

use limitcore::clock::Nanos;
use limitcore::rules::{Receipt, Rule};
use limitcore::{Denied, Quota, QuotaError, Snapshot};
use std::time::Duration;

const CELL_BITS: u32 = 24;
const TIME_BITS: u32 = 39;
const BLOCKED: u64 = 1 << TIME_BITS;
const TIME_MASK: u64 = BLOCKED - 1;
const NS_PER_MS: u64 = 1_000_000;

/// The local counter of a leased key: cells held and until when, in one `u64`.
///
/// # Word
///
/// ```text
///  63             40  39  38                                   0
/// +-----------------+---+--------------------------------------+
/// | cells (24 bits) | B | until: ms since the rule's epoch     |
/// +-----------------+---+--------------------------------------+
/// ```
///
/// - `cells`: cells of the current lease not yet spent (at most 2^24 − 1).
/// - `B = 0` (leased): the cells may be spent until `until` (the lease's expiry, rounded
///   *down* to the ms: never later than the lease allows); at or after it, or with no
///   cells, the key needs a new lease.
/// - `B = 1` (blocked): Redis refused a lease; the leftover cells may still be spent, and
///   after them every request is refused until `until` (rounded *up* to the ms: never
///   earlier than Redis's wait), when a new lease may be fetched.
/// - `until` counts ms from the rule's epoch (the limiter's creation): 39 bits are 17
///   years; later times saturate (a lease then expires early, a block lasts longer: both
///   stricter).
///
/// The fresh word, 0, holds no cells and needs a lease.
///
/// # Decisions
///
/// [`Rule::take`] admits `n` iff the word holds `n` cells valid at `now`, and spends them.
/// It refuses a blocked word with the exact time until `until`, and a word that needs a
/// lease with `retry_after = Duration::MAX` (from this word alone nothing is ever
/// admitted again: only a new lease, installed by [`LeaseRule::install`], can change
/// that). The [`LeasedLimiter`](super::LeasedLimiter) turns the latter into a lease fetch. There is no refund:
/// [`Rule::refund`] gives nothing back (unspent cells expire instead).
///
/// # Examples
///
/// ```
/// use limitcore::rules::Rule;
/// use limitcore::Quota;
/// use limitcore_redis::LeaseRule;
///
/// let rule = LeaseRule::new(&Quota::per_second(100)?)?;
/// let mut word = rule.fresh();
/// assert!(rule.take(&mut word, 0, 1).is_err());            // no lease yet
/// rule.install(&mut word, 5, 0, 1_000_000_000);            // 5 cells until 1 s
/// assert!(rule.take(&mut word, 10, 3).is_ok());
/// assert_eq!(rule.cells(&word, 10), 2);
/// assert!(rule.take(&mut word, 1_000_000_000, 1).is_err()); // expired
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRule {
    quota: Quota,
    epoch: Nanos,
    capacity: u32,
}

/// The largest number of cells a [`LeaseRule`] word holds.
pub const MAX_CELLS: u32 = (1 << CELL_BITS) - 1;

impl LeaseRule {
    /// The rule for `quota` with its ms field counted from `epoch` (ns on the caller's
    /// clock) and at most `capacity` cells per request and per lease (clamped to
    /// `1 ..= min(burst, MAX_CELLS)`).
    pub fn with_epoch(quota: Quota, epoch: Nanos, capacity: u32) -> Self {
        LeaseRule {
            quota,
            epoch,
            capacity: capacity.clamp(1, quota.burst().min(MAX_CELLS)),
        }
    }

    #[inline]
    pub(super) fn unpack(word: u64) -> (u32, bool, u64) {
        (
            (word >> (TIME_BITS + 1)) as u32,
            word & BLOCKED != 0,
            word & TIME_MASK,
        )
    }

    #[inline]
    fn pack(cells: u32, blocked: bool, until_ms: u64) -> u64 {
        debug_assert!(cells <= MAX_CELLS);
        (u64::from(cells.min(MAX_CELLS)) << (TIME_BITS + 1))
            | if blocked { BLOCKED } else { 0 }
            | until_ms.min(TIME_MASK)
    }

    #[inline]
    fn until_ns(&self, until_ms: u64) -> Nanos {
        self.epoch
            .saturating_add(until_ms.saturating_mul(NS_PER_MS))
    }

    fn ms_down(&self, t: Nanos) -> u64 {
        (t.saturating_sub(self.epoch) / NS_PER_MS).min(TIME_MASK)
    }

    fn ms_up(&self, t: Nanos) -> u64 {
        t.saturating_sub(self.epoch)
            .div_ceil(NS_PER_MS)
            .min(TIME_MASK)
    }

    /// Cells `word` holds that may be spent at `now` (ns of the limiter's clock).
    #[inline]
    pub fn cells(&self, word: &u64, now: Nanos) -> u32 {
        let (cells, _, until) = Self::unpack(*word);
        if now < self.until_ns(until) {
            cells
        } else {
            0
        }
    }

    /// Whether `word` is blocked by a Redis refusal at `now`, and until when (ns).
    #[inline]
    pub fn blocked_until(&self, word: &u64, now: Nanos) -> Option<Nanos> {
        let (_, blocked, until) = Self::unpack(*word);
        let until = self.until_ns(until);
        (blocked && now < until).then_some(until)
    }

    /// Install a lease of `granted` cells that arrived at `now` and expires at `expires`
    /// (ns): the word then holds its still-valid cells plus `granted` (capped at
    /// [`MAX_CELLS`]), valid until `expires` rounded down to the ms.
    pub fn install(&self, word: &mut u64, granted: u32, now: Nanos, expires: Nanos) {
        let cells = self.cells(word, now).saturating_add(granted).min(MAX_CELLS);
        *word = Self::pack(cells, false, self.ms_down(expires));
    }

    /// Block the word until `until` (ns, rounded up to the ms) after a Redis refusal that
    /// arrived at `now`: cells still valid stay spendable until then.
    pub fn block(&self, word: &mut u64, now: Nanos, until: Nanos) {
        let cells = self.cells(word, now);
        *word = Self::pack(cells, true, self.ms_up(until));
    }
}

impl Rule for LeaseRule {
    type State = u64;

    /// The rule with epoch 0 and capacity `min(burst, MAX_CELLS)`.
    ///
    /// # Errors
    ///
    /// None.
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        Ok(LeaseRule::with_epoch(*quota, 0, quota.burst()))
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u32 {
        self.capacity
    }

    fn fresh(&self) -> u64 {
        0
    }

    #[inline]
    fn take(&self, word: &mut u64, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        let (cells, blocked, until) = Self::unpack(*word);
        let until_ns = self.until_ns(until);
        if now < until_ns {
            if cells >= n {
                *word = Self::pack(cells - n, blocked, until);
                return Ok(Receipt::new(n, now));
            }
            if blocked {
                return Err(Denied::RateLimited {
                    retry_after: Duration::from_nanos(until_ns - now),
                });
            }
        }
        Err(Denied::RateLimited {
            retry_after: Duration::MAX,
        })
    }

    #[inline]
    fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let full_after = self
            .blocked_until(word, now)
            .map_or(Duration::ZERO, |until| Duration::from_nanos(until - now));
        Snapshot::new(self.cells(word, now), full_after)
    }

    /// Nothing is given back: unspent cells expire instead (see the type).
    fn refund(&self, _word: &mut u64, _receipt: &Receipt, _at: Nanos) -> bool {
        false
    }

    /// A word whose `until` has passed by `since` decides as the fresh word (a lease is
    /// needed) at every later time.
    fn fresh_since(&self, word: &u64, since: Nanos, _now: Nanos) -> bool {
        let (_, _, until) = Self::unpack(*word);
        self.until_ns(until) <= since
    }
}
