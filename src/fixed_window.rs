//! [`FixedWindow`]: at most `count` permits in each aligned window, one `AtomicU64`.

use crate::cas;
use crate::clock::{Clock, Nanos};
use crate::limiter::{precheck, Denied, RateLimiter, Snapshot};
use crate::sync::{AtomicU64, Ordering};
use crate::{DefaultClock, Quota, QuotaError};
use core::time::Duration;

/// The word of a fixed window: the window number and the permits used in it.
///
/// ```text
///  63                      b  b-1              0
/// +-------------------------+-----------------+
/// | window number k          | used (b bits)   |
/// +-------------------------+-----------------+
///   k = now / period           b = bit length of count (1..=32)
/// ```
///
/// Window `k` is `[k·period, (k+1)·period)` on the clock's timeline. Every `k` for a `u64`
/// time fits its `64 − b` bits because [`FixedWindow::with_clock`] requires
/// `period ≥ 2^b` ns, so the field never wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    pub(crate) period: Nanos,
    pub(crate) count: u32,
    /// `b`, the bit length of `count`.
    pub(crate) used_bits: u32,
}

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

impl Windows {
    pub(crate) fn new(quota: &Quota) -> Result<Windows, QuotaError> {
        let count = quota.count();
        let used_bits = u32::BITS - count.leading_zeros();
        let min_period = 1u64 << used_bits;
        if quota.period_ns() < min_period {
            return Err(QuotaError::WindowTooShort {
                period_ns: quota.period_ns(),
                min_period_ns: min_period,
            });
        }
        Ok(Windows {
            period: quota.period_ns(),
            count,
            used_bits,
        })
    }

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

    /// Time from `now` until window `k` ends, or `None` if it ends past the clock's range.
    #[inline]
    fn until_end(&self, k: u64, now: Nanos) -> Option<Nanos> {
        (k + 1).checked_mul(self.period).map(|end| end - now)
    }

    /// The transition for `1 ≤ n ≤ count` at `now`.
    #[inline]
    pub(crate) fn take(&self, word: u64, now: Nanos, n: u32) -> Result<u64, Denied> {
        let (k, used) = self.unpack(word);
        let n = u64::from(n);
        match self.position(k, now) {
            Position::Later => Ok(((now / self.period) << self.used_bits) | n),
            Position::Same | Position::Earlier => {
                if used + n <= u64::from(self.count) {
                    Ok(word + n)
                } else {
                    Err(self
                        .until_end(k, now)
                        .map_or(Denied::NEVER, Denied::rate_limited))
                }
            }
        }
    }

    pub(crate) fn snapshot(&self, word: u64, now: Nanos) -> Snapshot {
        let (k, used) = self.unpack(word);
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
                remaining: self.count - used as u32,
                full_after: self
                    .until_end(k, now)
                    .map_or(Duration::MAX, Duration::from_nanos),
            },
        }
    }
}

/// A fixed-window counter: at most `count` permits in each window
/// `[k·period, (k+1)·period)` of the clock's timeline.
///
/// The window number and the count share one `AtomicU64` (layout below); the window resets
/// lazily, on the first request in a new window, with no timer thread.
///
/// **Known weakness:** the windows are aligned, so a client can take `count` at the end of
/// one window and `count` again at the start of the next: up to `2·count` within one period.
/// Use [`Gcra`](crate::Gcra) for a smooth rate or a sliding log where "at most N in any
/// window" is the contract.
///
/// The quota's burst is not used: a window's capacity is `count`.
///
/// # Word layout
///
/// ```text
///  63                      b  b-1              0
/// +-------------------------+-----------------+
/// | window number k          | used (b bits)   |
/// +-------------------------+-----------------+
/// ```
///
/// `b` is the bit length of `count`; `k = now / period` fits the remaining `64 − b` bits for
/// every `u64` time because the period must be at least `2^b` ns (refused otherwise with
/// [`QuotaError::WindowTooShort`]; only quotas faster than one permit per 2 ns are). No
/// wrap-around. A reading earlier than the stored window (stale, or a clock stepped back)
/// is counted against the stored window: stricter, never more permissive.
///
/// # Contract
///
/// `retry_after` is the exact time until the window ends (inclusive: the request succeeds at
/// the first nanosecond of the next window). `n == 0` succeeds without change; `n > count`
/// is [`Denied::ExceedsCapacity`]; denials never write; no race creates a permit.
///
/// # Examples
///
/// ```
/// use limitcore::{FixedWindow, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = FixedWindow::with_clock(Quota::per_second(3)?, clock.clone())?;
/// clock.advance(Duration::from_millis(900));
/// limiter.try_acquire_n(3).unwrap();
/// assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// clock.advance(Duration::from_millis(100)); // the next window: 3 more at once
/// limiter.try_acquire_n(3).unwrap();
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct FixedWindow<C = DefaultClock> {
    /// `k << b | used`; see the type's "Word layout".
    word: AtomicU64,
    windows: Windows,
    quota: Quota,
    clock: C,
}

#[cfg(feature = "std")]
impl FixedWindow<DefaultClock> {
    /// A fresh limiter for `quota` on the default clock.
    ///
    /// # Errors
    ///
    /// As [`FixedWindow::with_clock`].
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        FixedWindow::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> FixedWindow<C> {
    /// A fresh limiter for `quota` reading time from `clock`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::WindowTooShort`] if the period is shorter than `2^b` ns (`b` = bit
    /// length of the count).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Ok(FixedWindow {
            word: AtomicU64::new(0),
            windows: Windows::new(&quota)?,
            quota,
            clock,
        })
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<C: Clock> RateLimiter for FixedWindow<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.windows.count)? {
            return Ok(());
        }
        cas::apply(&self.word, |word| {
            Ok((self.windows.take(word, now, n)?, ()))
        })
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        // Relaxed: a read-only observation of the single state word (see `cas` "Orderings").
        self.windows
            .snapshot(self.word.load(Ordering::Relaxed), now)
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(count: u32, period: u64) -> Windows {
        Windows::new(&Quota::new(count, Duration::from_nanos(period)).unwrap()).unwrap()
    }

    #[test]
    fn transition_by_hand() {
        let w = windows(3, 100);
        let s = w.take(0, 150, 2).unwrap();
        assert_eq!(w.unpack(s), (1, 2));
        let s = w.take(s, 199, 1).unwrap();
        assert_eq!(w.take(s, 199, 1), Err(Denied::rate_limited(1)));
        assert_eq!(w.unpack(w.take(s, 200, 3).unwrap()), (2, 3));
        // Stale reading from window 0: counted against window 1, which is full.
        assert_eq!(w.take(s, 50, 1), Err(Denied::rate_limited(150)));
    }

    #[test]
    fn too_short_a_window_is_refused_and_the_last_window_never_conforms() {
        assert!(Windows::new(&Quota::new(1000, Duration::from_nanos(1023)).unwrap()).is_err());
        assert!(Windows::new(&Quota::new(1000, Duration::from_nanos(1024)).unwrap()).is_ok());
        let w = windows(1, 1 << 62);
        let s = w.take(0, u64::MAX, 1).unwrap();
        assert_eq!(w.unpack(s), (3, 1));
        assert_eq!(w.take(s, u64::MAX, 1), Err(Denied::NEVER));
    }
}
