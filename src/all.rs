//! [`All`]: several limits at once, all or nothing.

use crate::cas;
use crate::clock::{Clock, Nanos};
use crate::gcra::Schedule;
use crate::limiter::{Denied, RateLimiter, Snapshot};
use crate::sync::{AtomicU64, Ordering};
use crate::{Gcra, LeakyBucket, Quota};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// What an admission took, so that it can be given back: the schedule position it started
/// from and its cost, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// `max(TAT before, time of the admission)`.
    base: Nanos,
    /// `n × emission interval`.
    cost: Nanos,
}

/// Limiters whose admissions can be given back without ever creating a permit: the
/// TAT-based ones, [`Gcra`] and [`LeakyBucket`].
///
/// # Refund rule
///
/// An admission of cost `c` moved the TAT from `base = max(TAT, t)` to `base + c`. Other
/// requests may have been decided since, against the larger TAT. Taking `c` back is exact
/// unless one of them found the limiter full (its time past what the TAT would have been
/// without us), in which case part of `c` was already absorbed. Every such request was
/// decided at a time before the refund time `r`, so at most `min(c, r − base)` can have been
/// absorbed; the refund gives back `c − min(c, max(0, r − base))`. So a refund never makes
/// the limiter more permissive than if the admission had not happened, and is exact when it
/// is made at the admission's own time (as [`All`] does with an explicit time) or while the
/// limiter is still backlogged past `r`.
pub trait Refund: RateLimiter {
    /// Decide `n` permits at `now` like `try_acquire_n_at`, returning what to give back.
    ///
    /// # Errors
    ///
    /// As `try_acquire_n_at`.
    fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied>;

    /// Give back an admission at time `at` (see the trait's "Refund rule").
    fn refund(&self, receipt: Receipt, at: Nanos);

    /// The denial `n` permits would get at `now`, consuming nothing.
    fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied>;
}

/// The refund CAS on a TAT word.
fn refund_tat(tat: &AtomicU64, receipt: Receipt, at: Nanos) {
    let kept = receipt.cost.min(at.saturating_sub(receipt.base));
    let give = receipt.cost - kept;
    if give == 0 {
        return;
    }
    // Saturating: other refunds lower the TAT too, each by at most its own admission.
    let _ = cas::apply::<(), (), _>(tat, |t| Ok((t.saturating_sub(give), ())));
}

/// The acquisition, recording the receipt.
#[inline]
fn acquire_tat(
    tat: &AtomicU64,
    schedule: &Schedule,
    pace: bool,
    n: u32,
    now: Nanos,
) -> Result<Receipt, Denied> {
    if !schedule.precheck(n)? {
        return Ok(Receipt { base: now, cost: 0 });
    }
    let cost = schedule.interval * u64::from(n);
    cas::apply(tat, |t| {
        let next = if pace {
            schedule.reserve(t, now, n, 0, true)?.0
        } else {
            schedule.gcra(t, now, n)?
        };
        Ok((
            next,
            Receipt {
                base: next - cost,
                cost,
            },
        ))
    })
}

fn check_tat(
    tat: &AtomicU64,
    schedule: &Schedule,
    pace: bool,
    n: u32,
    now: Nanos,
) -> Result<(), Denied> {
    if !schedule.precheck(n)? {
        return Ok(());
    }
    // Relaxed: a read-only observation.
    let t = tat.load(Ordering::Relaxed);
    if pace {
        schedule.reserve(t, now, n, 0, true).map(|_| ())
    } else {
        schedule.gcra(t, now, n).map(|_| ())
    }
}

/// `Refund` for a TAT-based limiter: its word, its schedule, and whether it paces.
macro_rules! refund_on_tat {
    ($limiter:ident, pace = $pace:expr) => {
        impl<C: Clock> Refund for $limiter<C> {
            fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
                acquire_tat(self.state(), self.schedule(), $pace, n, now)
            }

            fn refund(&self, receipt: Receipt, at: Nanos) {
                refund_tat(self.state(), receipt, at);
            }

            fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
                check_tat(self.state(), self.schedule(), $pace, n, now)
            }
        }
    };
}
refund_on_tat!(Gcra, pace = false);
refund_on_tat!(LeakyBucket, pace = true);

/// All-or-nothing over several limits (for example a per-channel limit and a global one, or
/// 50/s and 1000/min together): a request is admitted only if every limit admits it, and
/// when one refuses, every limit that had already admitted it is refunded, so no other limit
/// keeps a charge.
///
/// The limits are tried in order; on the first refusal the earlier ones are refunded (see
/// [`Refund`]'s rule: exact at the request's own time, so an explicit-time decision leaves
/// no trace; with the clock, at most the nanoseconds between the two steps stay charged,
/// never a permit), and the later ones are only checked, so `retry_after` is the largest
/// wait any limit reports. [`Denied::ExceedsCapacity`] from any limit is returned at once
/// (waiting cannot help).
///
/// `All` is itself a [`RateLimiter`] (its `quota` is the first limit's) and can be shared
/// by threads; the limits can be shared with other `All`s (the refund rule holds under any
/// interleaving). Between a charge and its refund, the charge is visible to other threads:
/// a concurrent request may be refused because of a request that is about to be refused
/// itself. That only ever makes a decision stricter, for the nanoseconds between the two
/// steps; no interleaving admits more than every limit allows.
///
/// # Examples
///
/// ```
/// use limitcore::{All, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::sync::Arc;
///
/// let clock = ManualClock::new();
/// let global = Arc::new(Gcra::with_clock(Quota::per_second(100)?, clock.clone()));
/// let channel = Arc::new(Gcra::with_clock(Quota::per_second(2)?, clock.clone()));
/// let both = All::new(vec![channel.clone(), global.clone()], clock.clone());
///
/// assert!(both.try_acquire_n(2).is_ok());
/// assert!(both.try_acquire().is_err());        // the channel refuses...
/// assert_eq!(global.snapshot().remaining, 98); // ...and the global limit kept no charge
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct All<L, C> {
    limits: Vec<L>,
    clock: C,
}

impl<L, C: fmt::Debug> fmt::Debug for All<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("All")
            .field("limits", &self.limits.len())
            .field("clock", &self.clock)
            .finish()
    }
}

impl<L: core::ops::Deref<Target = R> + Send + Sync, R: Refund + ?Sized, C: Clock> All<L, C> {
    /// All of `limits` (tried in this order), reading time from `clock`.
    ///
    /// # Panics
    ///
    /// If `limits` is empty: an empty conjunction would admit everything.
    pub fn new(limits: Vec<L>, clock: C) -> Self {
        assert!(!limits.is_empty(), "All needs at least one limit");
        All { limits, clock }
    }

    /// The limits, in order.
    pub fn limits(&self) -> &[L] {
        &self.limits
    }
}

impl<L: core::ops::Deref<Target = R> + Send + Sync, R: Refund + ?Sized, C: Clock> All<L, C> {
    /// Acquire `n` on the limits from `i` on, in order. On a refusal, every limit that had
    /// admitted is refunded (the latest first) before the refusal and its index are
    /// returned; the receipts live on the stack of this recursion, one frame per limit, so a
    /// decision allocates nothing.
    fn acquire_from(&self, i: usize, n: u32, now: Nanos) -> Result<(), (usize, Denied, Nanos)> {
        let Some(limit) = self.limits.get(i) else {
            return Ok(());
        };
        let receipt = match limit.acquire_refundable_at(n, now) {
            Ok(receipt) => receipt,
            // Refund at the later of the request's time and the clock's, so that every
            // request decided in between was decided before it.
            Err(denied) => return Err((i, denied, now.max(self.clock.now()))),
        };
        self.acquire_from(i + 1, n, now).map_err(|(j, denied, at)| {
            limit.refund(receipt, at);
            (j, denied, at)
        })
    }
}

/// A boxed limit of an [`All`] over different limiter types.
pub type DynRefund = Box<dyn Refund>;

impl<L: core::ops::Deref<Target = R> + Send + Sync, R: Refund + ?Sized, C: Clock> RateLimiter
    for All<L, C>
{
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        let (i, denied, _) = match self.acquire_from(0, n, now) {
            Ok(()) => return Ok(()),
            Err(refusal) => refusal,
        };
        // The later limits are only checked, so `retry_after` is the largest wait.
        Err(self.limits[i + 1..]
            .iter()
            .filter_map(|limit| limit.check_at(n, now).err())
            .fold(denied, Denied::stricter))
    }

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// The smallest `remaining` and the largest `full_after` of the limits.
    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.limits.iter().map(|l| l.snapshot_at(now)).fold(
            Snapshot {
                remaining: u32::MAX,
                full_after: core::time::Duration::ZERO,
            },
            |a, b| Snapshot {
                remaining: a.remaining.min(b.remaining),
                full_after: a.full_after.max(b.full_after),
            },
        )
    }

    fn quota(&self) -> Quota {
        self.limits[0].quota()
    }
}
