//! [`PermitWord`]: a concurrency limit's whole shared state in one `u64`, and its pure
//! transitions (layer 1 of the concurrency limits: no atomics, no lock, testable by hand).
//! The crate's own: users read a limit through [`Permits::snapshot`](super::Permits::snapshot).

use super::error::{AcquireError, LimitError};

/// The largest concurrency limit: 2^30 − 1 permits (the 30 bits of the limit's word).
pub const MAX_LIMIT: u32 = (1 << 30) - 1;

/// Mask of the in-flight count, bits 0–30.
const IN_FLIGHT: u64 = (1 << 31) - 1;
/// The most permits the in-flight field holds, 2^31 − 1: twice [`MAX_LIMIT`] and one, so
/// that a partition's guaranteed share can take it over the limit (see `force`).
const MAX_IN_FLIGHT: u32 = (1 << 31) - 1;
/// Bit 31: the queue of waiters is not empty.
const WAITING: u64 = 1 << 31;
/// The limit's field starts at bit 32.
const LIMIT_SHIFT: u32 = 32;
/// Mask of the limit, bits 32–61.
const LIMIT: u64 = (MAX_LIMIT as u64) << LIMIT_SHIFT;
/// Bit 62: a keyed state given a limit of its own, never evicted.
const PINNED: u64 = 1 << 62;
/// Bit 63: never set in a live word. The one word with it set is the retired keyed state,
/// `u64::MAX` (see `crate::cell`'s "Orderings of the retirement protocol").
#[cfg(any(feature = "keyed", test))]
const DEAD: u64 = 1 << 63;

/// The word of a retired keyed state (`crate::cell::RETIRED`, all ones): its in-flight field
/// is full and its waiting bit set, so every transition that admits refuses it.
pub(crate) const RETIRED: u64 = crate::cell::RETIRED;

/// A concurrency limit's whole shared state, the in-flight count and the limit in one `u64`,
/// with its pure transitions: old word and request in, new word (or a refusal) out.
/// [`Permits`](super::Permits) keeps it in one `AtomicU64` and applies these functions
/// through the crate's one compare-and-swap loop, so a decision and the count it leaves are
/// one atomic step.
///
/// # Layout
///
/// ```text
///  63   62   61                32   31   30                 0
/// +----+----+--------------------+----+-----------------------+
/// | 0  | P  | limit (30 bits)    | W  | in flight (31 bits)   |
/// +----+----+--------------------+----+-----------------------+
/// ```
///
/// - **in flight** (bits 0–30): permits held. At most the limit, except just after the limit
///   shrank (a cut takes effect as permits come back, never by revoking one) and for a
///   partition's guaranteed share (see [`Partitioned`](super::Partitioned)); 31 bits, so
///   neither can overflow it.
/// - **W** (bit 31): the queue of waiters is not empty. Set and cleared only under the
///   queue's lock, together with the queue's change; while it is set a request that does not
///   wait is refused (it never overtakes a waiter), and a release hands permits to the queue.
/// - **limit** (bits 32–61): 1 to [`MAX_LIMIT`] = 2^30 − 1.
/// - **P** (bit 62): a keyed state given a limit of its own, never evicted
///   ([`KeyedPermits::reconfigure_key`][reconfigure_key]).
/// - bit 63: 0 in every live word; the all-ones word marks a keyed state retired by eviction.
///
/// # Rule
///
/// `n ≥ 1` permits are granted iff `in flight + n ≤ limit` (and, for a request that does
/// not wait, no one is queued); in flight then grows by `n`. `n > limit` can never be
/// granted under the current limit ([`AcquireError::ExceedsLimit`]). A release lowers in
/// flight by what was granted; a resize changes only the limit.
///
/// (`cuts_take_effect_as_permits_come_back` below shows the rule on a word.)
///
/// [reconfigure_key]: super::KeyedPermits::reconfigure_key
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PermitWord(u64);

impl core::fmt::Debug for PermitWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 == RETIRED {
            return f.write_str("PermitWord(retired)");
        }
        f.debug_struct("PermitWord")
            .field("in_flight", &self.in_flight())
            .field("limit", &self.limit())
            .field("waiting", &self.waiting())
            .field("pinned", &self.pinned())
            .finish()
    }
}

/// `limit` if it is one a word can hold (1 to [`MAX_LIMIT`]).
pub(crate) fn check_limit(limit: u32) -> Result<u32, LimitError> {
    match limit {
        0 => Err(LimitError::ZeroLimit),
        l if l > MAX_LIMIT => Err(LimitError::LimitTooLarge {
            limit: u64::from(l),
            max: MAX_LIMIT,
        }),
        l => Ok(l),
    }
}

impl PermitWord {
    /// A fresh word: `limit` permits, none in flight, nobody waiting.
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above [`MAX_LIMIT`].
    pub(crate) fn new(limit: u32) -> Result<Self, LimitError> {
        Ok(PermitWord(u64::from(check_limit(limit)?) << LIMIT_SHIFT))
    }

    /// The word with these bits (any bits: a word read from a [`Permits`](super::Permits),
    /// say; see the layout).
    pub(crate) const fn from_bits(bits: u64) -> Self {
        PermitWord(bits)
    }

    /// The raw bits.
    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    /// The limit, in permits.
    #[inline]
    pub(crate) const fn limit(self) -> u32 {
        ((self.0 & LIMIT) >> LIMIT_SHIFT) as u32
    }

    /// Permits in flight (held).
    #[inline]
    pub(crate) const fn in_flight(self) -> u32 {
        (self.0 & IN_FLIGHT) as u32
    }

    /// Whether the queue of waiters is not empty.
    #[inline]
    pub(crate) const fn waiting(self) -> bool {
        self.0 & WAITING != 0
    }

    /// Whether this is a keyed state with a limit of its own (never evicted).
    pub(crate) const fn pinned(self) -> bool {
        self.0 & PINNED != 0
    }

    /// Permits a request could take now: `limit − in flight`, 0 while a cut is pending.
    #[inline]
    pub(crate) const fn available(self) -> u32 {
        self.limit().saturating_sub(self.in_flight())
    }

    /// Whether the word is indistinguishable from a fresh one under its default limit:
    /// nothing in flight, nobody waiting, no limit of its own (what keyed eviction asks).
    #[cfg(any(feature = "keyed", test))]
    pub(crate) const fn is_idle(self) -> bool {
        self.0 & (IN_FLIGHT | WAITING | PINNED | DEAD) == 0
    }

    /// Grant `n ≥ 1` permits to a request that does not wait: in flight grows by `n` if
    /// they fit and nobody is queued.
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsLimit`] if `n > limit`; [`AcquireError::Full`] if they do
    /// not fit now or someone is queued. The word is unchanged.
    #[inline]
    pub(crate) fn acquire(self, n: u32) -> Result<Self, AcquireError> {
        // One compare tests the `WAITING` bit with the count: the low 32 bits are the bit
        // (2^31) above the in-flight field, so while it is set they exceed any limit
        // (≤ 2^30 − 1) and a queued waiter is never overtaken; the retired word's are all
        // ones. In a `u64` the sum cannot wrap.
        if (self.0 & (WAITING | IN_FLIGHT)) + u64::from(n) <= u64::from(self.limit()) {
            // ≤ limit ≤ 2^30 − 1 after the sum: the field cannot carry into bit 31.
            Ok(PermitWord(self.0 + u64::from(n)))
        } else {
            Err(self.refusal(n))
        }
    }

    /// Why `n` permits were refused.
    #[cold]
    fn refusal(self, n: u32) -> AcquireError {
        if n > self.limit() {
            AcquireError::ExceedsLimit {
                requested: n,
                limit: self.limit(),
            }
        } else {
            AcquireError::Full {
                limit: self.limit(),
                in_flight: self.in_flight(),
            }
        }
    }

    /// A request that may wait, decided under the queue's lock: take `n ≥ 1` permits now if
    /// `may_take` (the queue is empty, or the order is LIFO) and they fit, else mark the
    /// queue non-empty for the caller to join it. `full` is `Some(backlog)` when the queue
    /// already holds `backlog` waiters: then the request is refused rather than queued.
    ///
    /// Returns the new word and whether the permits were taken.
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsLimit`] if `n > limit` (no wait can help);
    /// [`AcquireError::BacklogFull`] if it would wait and `full` is set.
    pub(crate) fn enqueue(
        self,
        n: u32,
        may_take: bool,
        full: Option<u32>,
    ) -> Result<(Self, bool), AcquireError> {
        if n > self.limit() {
            return Err(self.refusal(n));
        }
        if may_take && n <= self.available() {
            return Ok((PermitWord(self.0 + u64::from(n)), true));
        }
        match full {
            Some(backlog) => Err(AcquireError::BacklogFull { backlog }),
            None => Ok((PermitWord(self.0 | WAITING), false)),
        }
    }

    /// Grant `n` permits to the queue's first waiter if they fit, under the queue's lock;
    /// `last`: it is the only waiter, so the queue is empty afterwards (the waiting bit is
    /// cleared in the same step). `None` if they do not fit: the waiter stays first.
    #[inline]
    pub(crate) fn grant(self, n: u32, last: bool) -> Option<Self> {
        (n <= self.available()).then(|| {
            let taken = self.0 + u64::from(n);
            PermitWord(if last { taken & !WAITING } else { taken })
        })
    }

    /// Give back `n` permits (what a grant took). Saturates at 0 in flight: a release of
    /// more than is held is a bug in the caller, and it must not borrow from the limit's
    /// field.
    #[cfg(test)]
    #[inline]
    pub(crate) fn release(self, n: u32) -> Self {
        debug_assert!(n <= self.in_flight(), "released {n} of {self:?}");
        PermitWord(self.0 - u64::from(n.min(self.in_flight())))
    }

    /// The same word under a new limit: nothing in flight changes, so a cut takes effect as
    /// permits come back.
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above [`MAX_LIMIT`].
    #[cfg(test)]
    pub(crate) fn resize(self, limit: u32) -> Result<Self, LimitError> {
        Ok(self.with_limit(check_limit(limit)?))
    }

    /// The word under `limit`, which the caller has checked (1 to [`MAX_LIMIT`]).
    #[inline]
    pub(crate) const fn with_limit(self, limit: u32) -> Self {
        PermitWord((self.0 & !LIMIT) | ((limit as u64) << LIMIT_SHIFT))
    }

    /// Take `n` permits whatever the limit (a partition's guaranteed share, see
    /// [`Partitioned`](super::Partitioned)), up to what the in-flight field holds.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Full`] if in flight would pass 2^31 − 1.
    pub(crate) fn force(self, n: u32) -> Result<Self, AcquireError> {
        if n <= MAX_IN_FLIGHT - self.in_flight() {
            Ok(PermitWord(self.0 + u64::from(n)))
        } else {
            Err(AcquireError::Full {
                limit: self.limit(),
                in_flight: self.in_flight(),
            })
        }
    }

    /// The word with the waiting bit set or cleared (under the queue's lock, as the queue
    /// becomes non-empty or empty).
    pub(crate) const fn with_waiting(self, waiting: bool) -> Self {
        PermitWord(if waiting {
            self.0 | WAITING
        } else {
            self.0 & !WAITING
        })
    }

    /// The word with the pinned bit set or cleared (a keyed state's own limit).
    pub(crate) const fn with_pinned(self, pinned: bool) -> Self {
        PermitWord(if pinned {
            self.0 | PINNED
        } else {
            self.0 & !PINNED
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_take_effect_as_permits_come_back() {
        let word = PermitWord::new(3).unwrap();
        let word = word.acquire(2).unwrap(); // 2 of 3 in flight
        assert_eq!((word.in_flight(), word.available()), (2, 1));
        assert_eq!(
            word.acquire(2),
            Err(AcquireError::Full {
                limit: 3,
                in_flight: 2
            })
        );
        let word = word.resize(1).unwrap(); // a cut: nothing is revoked
        assert_eq!(
            (word.in_flight(), word.limit(), word.available()),
            (2, 1, 0)
        );
        let word = word.release(2); // the cut holds once they are back
        assert_eq!(word.acquire(1).unwrap().in_flight(), 1);
    }

    /// `acquire`'s one compare is the rule as stated: `n ≥ 1` fit iff nobody is queued and
    /// `in flight + n ≤ limit` (a word over its limit after a cut included), whatever the
    /// pinned bit; the retired word refuses.
    #[test]
    fn acquire_is_the_rule_in_one_compare() {
        for limit in [1, 2, 3, 7, MAX_LIMIT] {
            for in_flight in [0, 1, 2, 3, 6, 7, 8, MAX_LIMIT - 1, MAX_LIMIT, MAX_IN_FLIGHT] {
                for (waiting, pinned) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let word = PermitWord(
                        (u64::from(limit) << LIMIT_SHIFT)
                            | u64::from(in_flight)
                            | if waiting { WAITING } else { 0 }
                            | if pinned { PINNED } else { 0 },
                    );
                    for n in [1, 2, 3, 4, 8, MAX_LIMIT, MAX_IN_FLIGHT, u32::MAX] {
                        let fits =
                            !waiting && u64::from(in_flight) + u64::from(n) <= u64::from(limit);
                        let got = word.acquire(n);
                        assert_eq!(got.is_ok(), fits, "{word:?} n={n}");
                        if let Ok(next) = got {
                            assert_eq!(next.in_flight(), in_flight + n);
                            assert_eq!(
                                (next.limit(), next.waiting(), next.pinned()),
                                (limit, waiting, pinned)
                            );
                        }
                    }
                }
            }
        }
        assert!(PermitWord(RETIRED).acquire(1).is_err());
    }

    #[test]
    fn layout_is_as_documented() {
        let w = PermitWord::new(5).unwrap();
        assert_eq!(w.bits(), 5 << 32);
        let w = w.acquire(3).unwrap().with_waiting(true).with_pinned(true);
        assert_eq!(w.bits(), (1 << 62) | (5 << 32) | (1 << 31) | 3);
        let max = PermitWord::new(MAX_LIMIT).unwrap();
        assert_eq!(max.bits(), ((1u64 << 30) - 1) << 32);
        assert_eq!(max.bits() >> 62, 0, "bits 62 and 63 stay clear");
        assert!(PermitWord::new(MAX_LIMIT).unwrap().is_idle());
    }

    #[test]
    fn acquire_is_exact_at_the_limit() {
        let w = PermitWord::new(3).unwrap();
        let w = w.acquire(1).unwrap().acquire(2).unwrap();
        assert_eq!(w.in_flight(), 3);
        assert_eq!(
            w.acquire(1),
            Err(AcquireError::Full {
                limit: 3,
                in_flight: 3
            })
        );
        assert_eq!(
            PermitWord::new(3).unwrap().acquire(4),
            Err(AcquireError::ExceedsLimit {
                requested: 4,
                limit: 3
            })
        );
        // u32::MAX cannot wrap the sum into a grant.
        assert!(PermitWord::new(MAX_LIMIT)
            .unwrap()
            .acquire(u32::MAX)
            .is_err());
    }

    #[test]
    fn a_request_that_does_not_wait_never_overtakes_a_waiter() {
        let w = PermitWord::new(4).unwrap().with_waiting(true);
        assert_eq!(
            w.acquire(1),
            Err(AcquireError::Full {
                limit: 4,
                in_flight: 0
            })
        );
        // The queue's own grant does take them.
        assert_eq!(w.grant(4, false).unwrap().in_flight(), 4);
        assert!(
            !w.grant(1, true).unwrap().waiting(),
            "the last grant clears W"
        );
        assert_eq!(w.grant(5, false), None);
    }

    #[test]
    fn enqueue_takes_joins_or_refuses() {
        let w = PermitWord::new(2).unwrap().acquire(1).unwrap();
        assert_eq!(
            w.enqueue(1, true, None).unwrap(),
            (w.acquire(1).unwrap(), true)
        );
        let (queued, took) = w.enqueue(2, true, None).unwrap();
        assert!(!took && queued.waiting() && queued.in_flight() == 1);
        let (queued, took) = w.enqueue(1, false, None).unwrap();
        assert!(
            !took && queued.waiting(),
            "FIFO behind others: joins even if it fits"
        );
        assert_eq!(
            w.enqueue(2, true, Some(7)),
            Err(AcquireError::BacklogFull { backlog: 7 })
        );
        assert!(matches!(
            w.enqueue(3, true, None),
            Err(AcquireError::ExceedsLimit { .. })
        ));
    }

    #[test]
    fn resize_keeps_what_is_in_flight() {
        let w = PermitWord::new(10).unwrap().acquire(8).unwrap();
        let cut = w.resize(4).unwrap();
        assert_eq!((cut.in_flight(), cut.limit(), cut.available()), (8, 4, 0));
        assert!(cut.acquire(1).is_err());
        let back = cut.release(5);
        assert_eq!(back.available(), 1);
        assert_eq!(w.resize(0), Err(LimitError::ZeroLimit));
        assert!(w.resize(MAX_LIMIT + 1).is_err());
        let pinned = w
            .with_pinned(true)
            .with_waiting(true)
            .resize(MAX_LIMIT)
            .unwrap();
        assert!(pinned.pinned() && pinned.waiting() && pinned.limit() == MAX_LIMIT);
    }

    #[test]
    fn force_passes_the_limit_but_not_the_field() {
        let w = PermitWord::new(1).unwrap().acquire(1).unwrap();
        let over = w.force(3).unwrap();
        assert_eq!((over.in_flight(), over.limit()), (4, 1));
        let top = PermitWord::from_bits(u64::from(MAX_IN_FLIGHT));
        assert!(top.force(1).is_err());
        assert_eq!(top.force(0).unwrap(), top);
    }

    #[test]
    fn the_retired_word_admits_nothing_and_is_not_idle() {
        let retired = PermitWord::from_bits(RETIRED);
        assert!(retired.acquire(1).is_err());
        assert!(retired.grant(1, true).is_none(), "in flight field full");
        assert!(!retired.is_idle());
        assert_eq!(format!("{retired:?}"), "PermitWord(retired)");
    }
}
