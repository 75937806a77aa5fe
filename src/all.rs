//! [`All`]: several limits at once, all or nothing, keyed or not.

use crate::batch::{Ask, Batch, Part, WithKey};
use crate::clock::Nanos;
use crate::decision::{Decision, Denied, Snapshot};
use crate::limiter::{KeyedRateLimiter, KeyedRefund, RateLimiter, Refund};
use crate::quota::Quota;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

/// All-or-nothing over several limits (a per-client limit and a global one, 50/s and
/// 1000/min together, a tenant's limit and its plan's): a request is admitted only if every
/// limit admits it, and when one refuses, every limit that had already admitted it is
/// refunded, so no other limit keeps a charge.
///
/// `L` is the type of the limits: any [`Refund`] (then `All` is a [`RateLimiter`]), or any
/// [`KeyedRefund<K>`](KeyedRefund) (then `All` is a [`KeyedRateLimiter<K>`]); mix keyed and
/// unkeyed limits by wrapping the unkeyed ones in [`Global`][crate::Global], and mix types
/// with `Box<dyn Refund>` / `Box<dyn KeyedRefund<K>>`. Every limiter of the crate
/// refunds exactly (see [`Refund`]).
///
/// The limits are tried in order; on the first refusal the earlier ones are refunded (at
/// the request's own time when it is later than the refusing limit's clock, so an
/// explicit-time decision leaves no trace; with the clock, at most the nanoseconds between
/// the two steps stay charged, never a permit), and the later ones are only checked, so
/// `retry_after` is the largest wait any limit reports ([`Denied::stricter`]).
/// [`Denied::ExceedsCapacity`] from any limit is returned at once (waiting cannot help).
///
/// `All` has no clock of its own: time comes from its limits (the first limit's clock for
/// the methods without an explicit time, the refusing limit's clock for a refund's time),
/// so its limits must share one time line (one clock, or clones of one). It can be shared
/// by threads, and its limits can be shared with other `All`s (the refund rules hold under
/// any interleaving). Between a charge and its refund, the charge is visible to other
/// threads: a concurrent request may be refused because of a request that is about to be
/// refused itself. That only ever makes a decision stricter, for the nanoseconds between
/// the two steps; no interleaving admits more than every limit allows.
///
/// # Examples
///
/// ```
/// use limitcore::{All, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::sync::Arc;
///
/// let clock = ManualClock::new();
/// let global = Arc::new(Gcra::with_clock(Quota::per_second(100)?, clock.clone())?);
/// let channel = Arc::new(Gcra::with_clock(Quota::per_second(2)?, clock.clone())?);
/// let both = All::new(vec![channel.clone(), global.clone()]);
///
/// assert!(both.try_acquire_n(2).is_ok());
/// assert!(both.try_acquire().is_err());        // the channel refuses...
/// assert_eq!(global.snapshot().remaining, 98); // ...and the global limit kept no charge
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct All<L> {
    limits: Vec<L>,
}

impl<L> fmt::Debug for All<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("All")
            .field("limits", &self.limits.len())
            .finish()
    }
}

impl<L> All<L> {
    /// All of `limits`, tried in this order.
    ///
    /// # Panics
    ///
    /// If `limits` is empty: an empty conjunction would admit everything, and would have no
    /// quota or clock to report.
    pub fn new(limits: Vec<L>) -> Self {
        assert!(!limits.is_empty(), "All needs at least one limit");
        All { limits }
    }

    /// The limits, in order.
    pub fn limits(&self) -> &[L] {
        &self.limits
    }
}

/// The most restrictive of two states: the fewer permits, the longer until full.
fn tighter(a: Snapshot, b: Snapshot) -> Snapshot {
    Snapshot {
        remaining: a.remaining.min(b.remaining),
        full_after: a.full_after.max(b.full_after),
    }
}

/// The state of no limit: the identity of [`tighter`].
const OPEN: Snapshot = Snapshot {
    remaining: u32::MAX,
    full_after: Duration::ZERO,
};

/// The decision of `batch` at `now` and the states it left: on admission, each limit's state
/// from its own decision, combined; on refusal (everything refunded), each limit's state
/// read after, combined.
fn decide<P: Part>(batch: Batch<impl Fn(usize) -> Option<Ask<P>>>, now: Nanos) -> Decision {
    let mut state = OPEN;
    let result = batch.decide_at(now, |_, part| state = tighter(state, part.state));
    Decision { result, state }
}

impl<L> All<L> {
    /// `n` permits of every unkeyed limit, as a batch (built on the fly: a decision
    /// allocates nothing).
    fn unkeyed<'a>(&'a self, n: u32) -> Batch<impl Fn(usize) -> Option<Ask<&'a L>> + 'a> {
        Batch::new(move |i| self.limits.get(i).map(|l| Ask::new(l, n)))
    }

    /// `n` permits of every keyed limit for `key`, as a batch.
    fn keyed<'a, K: ?Sized>(
        &'a self,
        key: &'a K,
        n: u32,
    ) -> Batch<impl Fn(usize) -> Option<Ask<WithKey<'a, L, K>>> + 'a> {
        Batch::new(move |i| self.limits.get(i).map(|l| Ask::new(WithKey(l, key), n)))
    }
}

impl<L: Refund> RateLimiter for All<L> {
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.unkeyed(n).try_acquire_at(now)
    }

    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        decide(self.unkeyed(n), now)
    }

    /// The first limit's clock.
    fn now(&self) -> Nanos {
        self.limits[0].now()
    }

    /// The smallest `remaining` and the largest `full_after` of the limits.
    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.limits
            .iter()
            .map(|l| l.snapshot_at(now))
            .fold(OPEN, tighter)
    }

    /// The first limit's quota.
    fn quota(&self) -> Quota {
        self.limits[0].quota()
    }

    /// The smallest capacity of the limits.
    fn capacity(&self) -> u32 {
        self.limits.iter().map(|l| l.capacity()).min().unwrap_or(0)
    }

    /// The first limit's clock.
    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
        self.limits[0].sleep_hint(deadline, waker)
    }
}

impl<K: ?Sized, L: KeyedRefund<K>> KeyedRateLimiter<K> for All<L> {
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.keyed(key, n).try_acquire_at(now)
    }

    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        decide(self.keyed(key, n), now)
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        self.limits
            .iter()
            .map(|l| l.snapshot_at(key, now))
            .fold(OPEN, tighter)
    }

    /// The first limit's quota for `key`.
    fn quota_for(&self, key: &K) -> Quota {
        self.limits[0].quota_for(key)
    }

    /// The first limit's clock.
    fn now(&self) -> Nanos {
        self.limits[0].now()
    }
}
