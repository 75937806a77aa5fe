//! The lease word: cells a node holds for one key and until when, in one `u64`, and its
//! pure transitions ([`LeaseRule`]), which [`LeasedLimiter`](super::LeasedLimiter) applies
//! through the core's compare-and-swap loop ([`limitcore::cell::WordCell`]).

use limitcore::clock::Nanos;
use limitcore::{Quota, Snapshot};
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
/// # Transitions
///
/// Every transition is a pure function of the word (and the time it is given), so that a
/// shell can apply it in a compare-and-swap loop; none reads a clock.
///
/// - [`LeaseRule::spend`] admits `n` iff the word holds `n` cells valid at `now`, and
///   spends them. Otherwise it tells the two refusals apart: a blocked word is refused
///   with the exact time left until `until` ([`Spend::Blocked`]), and a word that needs a
///   lease is [`Spend::NeedsLease`]: from this word alone nothing is ever admitted again,
///   only a new lease ([`LeaseRule::install`]) can change that, and how long that takes is
///   no property of the word. The [`LeasedLimiter`](super::LeasedLimiter) turns it into a
///   lease fetch.
/// - [`LeaseRule::install`] adds a lease's cells; [`LeaseRule::block`] records a Redis
///   refusal.
/// - Nothing is ever given back: unspent cells expire instead (a refund could create a
///   permit under a race; letting cells lapse cannot).
///
/// This is not a core [`Rule`](limitcore::rules::Rule): a rule's refusal is a
/// [`Denied`](limitcore::Denied) whose `retry_after` is exact, and "needs a lease" has no
/// such wait.
///
/// # Examples
///
/// ```
/// use limitcore::Quota;
/// use limitcore_redis::{LeaseRule, Spend};
/// use std::time::Duration;
///
/// let rule = LeaseRule::new(&Quota::per_second(100)?);
/// let mut word = rule.fresh();
/// assert_eq!(rule.spend(&mut word, 0, 1), Err(Spend::NeedsLease)); // no lease yet
/// rule.install(&mut word, 5, 0, 1_000_000_000);                     // 5 cells until 1 s
/// assert_eq!(rule.spend(&mut word, 10, 3), Ok(()));
/// assert_eq!(rule.cells(&word, 10), 2);
/// assert_eq!(rule.spend(&mut word, 1_000_000_000, 1), Err(Spend::NeedsLease)); // expired
/// // Redis refused the next lease; its reply arrived at 2 s with a wait of 1.5 ms.
/// rule.block(&mut word, 2_000_000_000, 2_001_500_000);
/// assert_eq!(
///     rule.spend(&mut word, 2_000_000_000, 1),
///     Err(Spend::Blocked { retry_after: Duration::from_millis(2) }), // rounded up to the ms
/// );
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
    /// The rule for `quota` with epoch 0 and capacity `min(burst, MAX_CELLS)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_redis::LeaseRule;
    ///
    /// let rule = LeaseRule::new(&"100/s burst 20".parse::<Quota>()?);
    /// assert_eq!(rule.capacity(), 20);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn new(quota: &Quota) -> Self {
        LeaseRule::with_epoch(*quota, 0, quota.burst())
    }

    /// The rule for `quota` with its ms field counted from `epoch` (ns on the caller's
    /// clock) and at most `capacity` cells per request and per lease (clamped to
    /// `1 ..= min(burst, MAX_CELLS)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_redis::LeaseRule;
    ///
    /// let rule = LeaseRule::with_epoch(Quota::per_second(100)?, 5_000, 16);
    /// assert_eq!(rule.capacity(), 16);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn with_epoch(quota: Quota, epoch: Nanos, capacity: u32) -> Self {
        LeaseRule {
            quota,
            epoch,
            capacity: capacity.clamp(1, quota.burst().min(MAX_CELLS)),
        }
    }

    /// The quota the leases are taken from.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The most cells one request may take and one lease may hold (`L`), in permits:
    /// `with_epoch`'s `capacity` after clamping.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The word of a key the node holds nothing for: no cells, no block (it needs a lease).
    pub fn fresh(&self) -> u64 {
        0
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

    /// Spend `n` cells of `word` at `now` (ns of the limiter's clock) if it holds that many
    /// valid then; a refusal leaves the word as it was. `n = 0` is admitted and changes
    /// nothing. The capacity is the caller's check ([`LeaseRule::capacity`]): a request
    /// above it should be refused before it gets here, as the core's shells refuse it
    /// before a rule's `take`.
    ///
    /// # Errors
    ///
    /// - [`Spend::Blocked`]: Redis refused a lease and the word holds fewer than `n` cells;
    ///   `retry_after` is the exact time left until the block ends (not zero), after which
    ///   the word needs a lease.
    /// - [`Spend::NeedsLease`]: the word holds fewer than `n` valid cells and no block.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_redis::{LeaseRule, Spend};
    ///
    /// let rule = LeaseRule::new(&Quota::per_second(100)?);
    /// let mut word = rule.fresh();
    /// rule.install(&mut word, 2, 0, 1_000_000_000);
    /// assert_eq!(rule.spend(&mut word, 0, 3), Err(Spend::NeedsLease)); // only 2 held
    /// assert_eq!(rule.spend(&mut word, 0, 2), Ok(()));
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[inline]
    pub fn spend(&self, word: &mut u64, now: Nanos, n: u32) -> Result<(), Spend> {
        if n == 0 {
            return Ok(());
        }
        let (cells, blocked, until) = Self::unpack(*word);
        let until_ns = self.until_ns(until);
        if now < until_ns {
            if cells >= n {
                *word = Self::pack(cells - n, blocked, until);
                return Ok(());
            }
            if blocked {
                return Err(Spend::Blocked {
                    retry_after: Duration::from_nanos(until_ns - now),
                });
            }
        }
        Err(Spend::NeedsLease)
    }

    /// Spend as many of `n` cells of `word` as it holds valid at `now` (ns of the limiter's
    /// clock), whatever the capacity: the first part of a forced charge on the leased path
    /// (the cells were charged to Redis when leased). Returns how many were spent (0 leaves
    /// the word as it was); a block and its time are kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_redis::LeaseRule;
    ///
    /// let rule = LeaseRule::new(&Quota::per_second(100)?);
    /// let mut word = rule.fresh();
    /// rule.install(&mut word, 5, 0, 1_000_000_000);
    /// assert_eq!(rule.spend_up_to(&mut word, 10, 3), 3);
    /// assert_eq!(rule.spend_up_to(&mut word, 10, 7), 2); // the other 5 are charged elsewhere
    /// assert_eq!(rule.cells(&word, 10), 0);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[inline]
    pub fn spend_up_to(&self, word: &mut u64, now: Nanos, n: u32) -> u32 {
        let (_, blocked, until) = Self::unpack(*word);
        let spent = self.cells(word, now).min(n);
        if spent > 0 {
            let (cells, _, _) = Self::unpack(*word);
            *word = Self::pack(cells - spent, blocked, until);
        }
        spent
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

    /// The key's state at `now` as the core reports it: the cells held (`remaining`), and
    /// the time left of a block (`full_after`; zero when not blocked: a lease may be
    /// fetched at once).
    #[inline]
    pub fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let full_after = self
            .blocked_until(word, now)
            .map_or(Duration::ZERO, |until| Duration::from_nanos(until - now));
        Snapshot::new(self.cells(word, now), full_after)
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

    /// Whether `word`'s lease or block ended by `since` (ns): from then on it holds no cell
    /// and no block, and decides as the fresh word (it needs a lease) at every later time.
    /// The idle-key sweep drops such a key's local state.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_redis::LeaseRule;
    ///
    /// let rule = LeaseRule::new(&Quota::per_second(100)?);
    /// let mut word = rule.fresh();
    /// assert!(rule.idle_since(&word, 0));
    /// rule.install(&mut word, 1, 0, 5_000_000); // until 5 ms
    /// assert!(!rule.idle_since(&word, 4_999_999));
    /// assert!(rule.idle_since(&word, 5_000_000));
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn idle_since(&self, word: &u64, since: Nanos) -> bool {
        let (_, _, until) = Self::unpack(*word);
        self.until_ns(until) <= since
    }
}

/// Why [`LeaseRule::spend`] refused: a block with its exact wait, or a word that needs a
/// lease (a state of the lease protocol, not a wait).
///
/// # Examples
///
/// ```
/// use limitcore_redis::Spend;
/// use std::time::Duration;
///
/// let blocked = Spend::Blocked { retry_after: Duration::from_millis(3) };
/// assert_ne!(blocked, Spend::NeedsLease);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// Redis refused the key's last lease: nothing more is admitted, and no lease is
    /// fetched, until `retry_after` has passed (exact to the ns from the time given, never
    /// early with respect to Redis's wait; not zero).
    Blocked {
        /// How long the block lasts from the time given.
        retry_after: Duration,
    },
    /// The word holds too few valid cells and no block: only a new lease can admit.
    NeedsLease,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NS_PER_MS;

    fn rule() -> LeaseRule {
        // Epoch 1 s, so that times before the epoch are tested too.
        LeaseRule::with_epoch("1000/s burst 100".parse().unwrap(), 1_000 * MS, 8)
    }

    #[test]
    fn the_capacity_is_clamped_to_the_burst_and_at_least_one() {
        let q: Quota = "10/s burst 5".parse().unwrap();
        assert_eq!(LeaseRule::with_epoch(q, 0, 0).capacity(), 1);
        assert_eq!(LeaseRule::with_epoch(q, 0, 3).capacity(), 3);
        assert_eq!(LeaseRule::with_epoch(q, 0, 9).capacity(), 5);
        assert_eq!(LeaseRule::new(&q).capacity(), 5);
        assert_eq!(LeaseRule::new(&q).quota(), q);
    }

    #[test]
    fn the_fresh_word_needs_a_lease_and_zero_is_always_admitted() {
        let rule = rule();
        let mut word = rule.fresh();
        for now in [0, 1_000 * MS, 5_000 * MS] {
            assert_eq!(rule.spend(&mut word, now, 1), Err(Spend::NeedsLease));
            assert_eq!(rule.spend(&mut word, now, 0), Ok(()));
            assert_eq!(word, rule.fresh(), "a refusal or n = 0 writes nothing");
            assert_eq!(rule.snapshot(&word, now), Snapshot::new(0, Duration::ZERO));
        }
    }

    #[test]
    fn cells_are_spent_until_the_lease_expires_rounded_down() {
        let rule = rule();
        let mut word = rule.fresh();
        // Arrived at 1.010 s, expires at 1.0209 s: valid until 1.020 s (rounded down).
        rule.install(&mut word, 3, 1_010 * MS, 1_020 * MS + 900_000);
        assert_eq!(rule.cells(&word, 1_011 * MS), 3);
        assert_eq!(rule.spend(&mut word, 1_011 * MS, 4), Err(Spend::NeedsLease));
        assert_eq!(rule.cells(&word, 1_011 * MS), 3, "a refusal spends nothing");
        assert_eq!(rule.spend(&mut word, 1_011 * MS, 2), Ok(()));
        assert_eq!(rule.spend(&mut word, 1_020 * MS - 1, 1), Ok(()));
        assert_eq!(rule.cells(&word, 1_020 * MS - 1), 0);
        // A second lease keeps nothing of an expired one, and adds to a valid one.
        rule.install(&mut word, 2, 1_030 * MS, 1_040 * MS);
        assert_eq!(rule.cells(&word, 1_030 * MS), 2);
        rule.install(&mut word, 5, 1_031 * MS, 1_050 * MS);
        assert_eq!(rule.cells(&word, 1_049 * MS), 7);
        assert_eq!(rule.spend(&mut word, 1_050 * MS, 1), Err(Spend::NeedsLease));
        assert!(!rule.idle_since(&word, 1_050 * MS - 1));
        assert!(rule.idle_since(&word, 1_050 * MS));
    }

    #[test]
    fn a_block_keeps_its_cells_and_refuses_with_the_exact_wait_rounded_up() {
        let rule = rule();
        let mut word = rule.fresh();
        rule.install(&mut word, 2, 1_000 * MS, 2_000 * MS);
        // Refused at 1.100 s with a wait of 2.5 ms: blocked until 1.103 s (rounded up).
        rule.block(&mut word, 1_100 * MS, 1_102 * MS + 500_000);
        assert_eq!(rule.blocked_until(&word, 1_100 * MS), Some(1_103 * MS));
        assert_eq!(
            rule.snapshot(&word, 1_100 * MS),
            Snapshot::new(2, Duration::from_millis(3))
        );
        // The leftover cells are spent first, then the block refuses to the ns.
        assert_eq!(rule.spend(&mut word, 1_100 * MS, 2), Ok(()));
        assert_eq!(
            rule.spend(&mut word, 1_101 * MS + 1, 1),
            Err(Spend::Blocked {
                retry_after: Duration::from_nanos(2 * MS - 1)
            })
        );
        // At its end the word needs a lease, and is idle from then on.
        assert_eq!(rule.spend(&mut word, 1_103 * MS, 1), Err(Spend::NeedsLease));
        assert_eq!(rule.blocked_until(&word, 1_103 * MS), None);
        assert!(rule.idle_since(&word, 1_103 * MS));
        assert!(!rule.idle_since(&word, 1_103 * MS - 1));
    }

    #[test]
    fn spend_up_to_takes_what_is_valid_and_keeps_a_block() {
        let rule = rule();
        let mut word = rule.fresh();
        assert_eq!(rule.spend_up_to(&mut word, 1_000 * MS, 4), 0);
        assert_eq!(word, rule.fresh(), "nothing held: nothing written");
        rule.install(&mut word, 5, 1_000 * MS, 1_010 * MS);
        assert_eq!(rule.spend_up_to(&mut word, 1_001 * MS, 0), 0);
        assert_eq!(rule.spend_up_to(&mut word, 1_001 * MS, 2), 2);
        // A block keeps the cells left, and spending them keeps the block and its end.
        rule.block(&mut word, 1_002 * MS, 1_020 * MS);
        assert_eq!(rule.spend_up_to(&mut word, 1_003 * MS, 9), 3);
        assert_eq!(rule.blocked_until(&word, 1_003 * MS), Some(1_020 * MS));
        assert_eq!(
            rule.spend(&mut word, 1_003 * MS, 1),
            Err(Spend::Blocked {
                retry_after: Duration::from_millis(17)
            })
        );
        // Expired cells are not spent.
        let mut late = rule.fresh();
        rule.install(&mut late, 5, 1_000 * MS, 1_010 * MS);
        assert_eq!(rule.spend_up_to(&mut late, 1_010 * MS, 5), 0);
    }

    #[test]
    fn held_cells_saturate_at_max_cells() {
        let rule = LeaseRule::with_epoch("1000/s burst 100".parse().unwrap(), 0, 8);
        let mut word = rule.fresh();
        rule.install(&mut word, MAX_CELLS, 0, 10 * MS);
        rule.install(&mut word, 5, 1, 10 * MS);
        assert_eq!(rule.cells(&word, 1), MAX_CELLS);
        assert!(
            rule.blocked_until(&word, 1).is_none(),
            "the cells never reach B"
        );
    }
}
