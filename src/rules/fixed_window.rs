//! [`FixedWindowRule`]: at most `count` permits in each aligned window, one word.

use super::{window_quota, Rule};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

/// Where a time falls relative to the stored window `k`.
pub(crate) enum Position {
    /// In window `k`.
    Same,
    /// In a later window: the stored count no longer applies.
    Later,
    /// Before window `k` (a stale or backwards reading): counted against window `k`, which
    /// can only be stricter.
    Earlier,
}

/// The fixed-window counter on one word: the window number and the permits used in it. The
/// rule of [`FixedWindow`](crate::FixedWindow).
///
/// At most `count` permits in each window `[k·period, (k+1)·period)` of the clock's
/// timeline; the window resets lazily, on the first request in a new window. A window has
/// no burst of its own: its capacity is `count`, and a quota whose burst differs is refused
/// ([`QuotaError::BurstNotSupported`]) rather than silently ignored.
///
/// # Word layout
///
/// ```text
///  63                      b  b-1              0
/// +-------------------------+-----------------+
/// | window number k          | used (b bits)   |
/// +-------------------------+-----------------+
///   k = now / period           b = bit length of count + 1 (1..=33)
/// ```
///
/// Every `k` for a `u64` time fits its `64 − b` bits because the period must be at least
/// `2^b` ns (refused otherwise with [`QuotaError::WindowTooShort`]; only quotas faster
/// than one permit per 2 ns are). No wrap-around. The count field holds up to `2^b − 1 >
/// count`, so a count past the limit (a charge's debt) is held too. A reading earlier than
/// the stored window (stale, or a clock stepped back) is counted against the stored window:
/// stricter, never more permissive.
///
/// # Rule
///
/// `retry_after` is the exact time until the window ends (inclusive: the request succeeds at
/// the first nanosecond of the next window).
///
/// # Refund
///
/// The receipt's mark is the window number. A refund at a time still inside that window
/// subtracts the permits from its count (the count then holds exactly the other
/// admissions, so the window still admits at most `count`); later, the window is over and
/// nothing is given back.
///
/// # Charges
///
/// A charge ([`Rule::charge`]) adds to the window's count past `count`: the window then
/// refuses every request, one for no permits included ([`Rule::debt`]), until it ends,
/// exactly as a window whose count had been that high (envoyproxy/ratelimit's `INCRBY` and
/// its `limitAfterIncrease > limit`). The field holds up to `2^b − 1`; a charge past that
/// leaves the count there, *saturated*, and reports the rest as the shortfall: the window is
/// closed to its end either way, and a saturated count gives nothing back to a refund or a
/// credit (its true count is unknown; never more permissive). The next window starts from
/// zero: a window's debt ends with it.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{FixedWindowRule, Rule};
/// use limitcore::Quota;
///
/// let rule = FixedWindowRule::new(&Quota::per_second(3)?)?;
/// let mut word = rule.fresh();
/// rule.take(&mut word, 900_000_000, 3).unwrap();
/// let wait = rule.take(&mut word, 900_000_000, 1).unwrap_err().retry_after().unwrap();
/// assert_eq!(wait.as_millis(), 100);
/// rule.take(&mut word, 1_000_000_000, 3).unwrap(); // the next window
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindowRule {
    pub(crate) period: Nanos,
    pub(crate) count: u32,
    /// `b`, the bit length of `count + 1`: the count field holds up to `2^b − 1 > count`.
    pub(crate) used_bits: u32,
    quota: Quota,
}

impl FixedWindowRule {
    #[inline]
    pub(crate) fn unpack(&self, word: u64) -> (u64, u64) {
        (
            word >> self.used_bits,
            word & ((1u64 << self.used_bits) - 1),
        )
    }

    /// `now` against window `k`, with one multiplication (no division) on the hot path.
    #[inline]
    pub(crate) fn position(&self, k: u64, now: Nanos) -> Position {
        // k·period ≤ now for some earlier reading, so it fits in u64.
        let start = k * self.period;
        if now < start {
            Position::Earlier
        } else if now - start < self.period {
            Position::Same
        } else {
            Position::Later
        }
    }

    /// The largest count the field holds, `2^b − 1 > count`: a count there is saturated
    /// (see "Charges").
    #[inline]
    fn ceiling(&self) -> u64 {
        (1u64 << self.used_bits) - 1
    }

    /// Time from `now` until window `k` ends, or `None` if it ends past the clock's range.
    #[inline]
    fn until_end(&self, k: u64, now: Nanos) -> Option<Nanos> {
        (k + 1).checked_mul(self.period).map(|end| end - now)
    }
}

impl Rule for FixedWindowRule {
    type State = u64;

    /// # Errors
    ///
    /// [`QuotaError::WindowTooShort`] if the period is shorter than `2^b` ns (`b` = bit
    /// length of the count); [`QuotaError::BurstNotSupported`] if the burst is not the
    /// count.
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        window_quota(quota, "fixed-window")?;
        let count = quota.count();
        let used_bits = u64::BITS - (u64::from(count) + 1).leading_zeros();
        let min_period = 1u64 << used_bits;
        if quota.period_ns() < min_period {
            return Err(QuotaError::WindowTooShort {
                period_ns: quota.period_ns(),
                min_period_ns: min_period,
            });
        }
        Ok(FixedWindowRule {
            period: quota.period_ns(),
            count,
            used_bits,
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
        let (k, used) = self.unpack(*word);
        let n64 = u64::from(n);
        match self.position(k, now) {
            Position::Later => {
                let k = now / self.period;
                *word = (k << self.used_bits) | n64;
                Ok(Receipt::new(n, k))
            }
            Position::Same | Position::Earlier => {
                if used + n64 <= u64::from(self.count) {
                    *word += n64;
                    Ok(Receipt::new(n, k))
                } else {
                    Err(self
                        .until_end(k, now)
                        .map_or(Denied::NEVER, Denied::rate_limited))
                }
            }
        }
    }

    fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let (k, used) = self.unpack(*word);
        match self.position(k, now) {
            Position::Later => Snapshot {
                remaining: self.count,
                full_after: Duration::ZERO,
            },
            _ if used == 0 => Snapshot {
                remaining: self.count,
                full_after: Duration::ZERO,
            },
            _ => Snapshot {
                // A count past the limit (a charge's debt) leaves nothing.
                remaining: self.count.saturating_sub(used as u32),
                full_after: self
                    .until_end(k, now)
                    .map_or(Duration::MAX, Duration::from_nanos),
            },
        }
    }

    fn refund(&self, word: &mut u64, receipt: &Receipt, at: Nanos) -> bool {
        let (k, used) = self.unpack(*word);
        let n = u64::from(receipt.n());
        // Only while the receipt's window is the stored one and still running at `at`.
        if n == 0
            || k != receipt.mark()
            || !matches!(self.position(k, at), Position::Same | Position::Earlier)
            || used < n
            || used == self.ceiling()
        {
            return false;
        }
        *word -= n;
        true
    }

    /// `n` more in the window of `now` (a new window if the stored one is over), up to the
    /// field's ceiling (see "Charges").
    fn charge(&self, word: &mut u64, now: Nanos, n: u32) -> u32 {
        let (k, used) = self.unpack(*word);
        let (k, used) = match self.position(k, now) {
            Position::Later => (now / self.period, 0),
            Position::Same | Position::Earlier => (k, used),
        };
        let total = used + u64::from(n);
        let held = total.min(self.ceiling());
        *word = (k << self.used_bits) | held;
        // ≤ n: `held ≥ used`.
        (total - held) as u32
    }

    /// In debt while the window of `now` (or the stored one, for a reading behind it) holds
    /// more than `count`: until it ends.
    fn debt(&self, word: &u64, now: Nanos) -> Result<(), Denied> {
        let (k, used) = self.unpack(*word);
        match self.position(k, now) {
            Position::Same | Position::Earlier if used > u64::from(self.count) => Err(self
                .until_end(k, now)
                .map_or(Denied::NEVER, Denied::rate_limited)),
            _ => Ok(()),
        }
    }

    /// Up to `n` off the count of the window of `at`, never below 0; a saturated count
    /// gives nothing back.
    fn credit(&self, word: &mut u64, n: u32, at: Nanos) -> bool {
        let (k, used) = self.unpack(*word);
        if used == 0
            || used == self.ceiling()
            || !matches!(self.position(k, at), Position::Same | Position::Earlier)
        {
            return false;
        }
        let give = used.min(u64::from(n));
        *word -= give;
        give > 0
    }

    fn fresh_since(&self, word: &u64, since: Nanos, _now: Nanos) -> bool {
        let (k, used) = self.unpack(*word);
        used == 0 || matches!(self.position(k, since), Position::Later)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(count: u32, period: u64) -> FixedWindowRule {
        FixedWindowRule::new(&Quota::new(count, Duration::from_nanos(period)).unwrap()).unwrap()
    }

    fn step(r: &FixedWindowRule, mut w: u64, now: Nanos, n: u32) -> Result<u64, Denied> {
        r.take(&mut w, now, n).map(|_| w)
    }

    #[test]
    fn transition_by_hand() {
        let w = rule(3, 100);
        let s = step(&w, 0, 150, 2).unwrap();
        assert_eq!(w.unpack(s), (1, 2));
        let s = step(&w, s, 199, 1).unwrap();
        assert_eq!(step(&w, s, 199, 1), Err(Denied::rate_limited(1)));
        assert_eq!(w.unpack(step(&w, s, 200, 3).unwrap()), (2, 3));
        // Stale reading from window 0: counted against window 1, which is full.
        assert_eq!(step(&w, s, 50, 1), Err(Denied::rate_limited(150)));
    }

    #[test]
    fn too_short_a_window_or_a_burst_is_refused_and_the_last_window_never_conforms() {
        assert!(
            FixedWindowRule::new(&Quota::new(1000, Duration::from_nanos(1023)).unwrap()).is_err()
        );
        assert!(
            FixedWindowRule::new(&Quota::new(1000, Duration::from_nanos(1024)).unwrap()).is_ok()
        );
        let bursty = Quota::per_second(100).unwrap().with_burst(10).unwrap();
        assert_eq!(
            FixedWindowRule::new(&bursty),
            Err(QuotaError::BurstNotSupported {
                algorithm: "fixed-window",
                count: 100,
                burst: 10
            })
        );
        let w = rule(1, 1 << 62);
        let s = step(&w, 0, u64::MAX, 1).unwrap();
        assert_eq!(w.unpack(s), (3, 1));
        assert_eq!(step(&w, s, u64::MAX, 1), Err(Denied::NEVER));
    }

    #[test]
    fn refund_only_inside_the_receipts_window() {
        let w = rule(3, 100);
        let mut s = step(&w, 0, 150, 1).unwrap();
        let r = w.take(&mut s, 160, 2).unwrap();
        let mut now = s;
        assert!(w.refund(&mut now, &r, 170));
        assert_eq!(w.unpack(now), (1, 1));
        // The window is over at 200: nothing to give back.
        let mut late = s;
        assert!(!w.refund(&mut late, &r, 200));
        assert_eq!(late, s);
    }
}
