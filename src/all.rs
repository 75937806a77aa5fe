//! [`All`]: several limits at once, all or nothing, keyed or not.

use crate::clock::Nanos;
use crate::decision::{Decision, Denied, Receipt, Snapshot};
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

/// One limit of a decision, keyed or not: the operations the all-or-nothing protocol needs.
trait Part {
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied>;
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot);
    fn refund(&self, receipt: Receipt, at: Nanos);
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied>;
    fn snapshot(&self, now: Nanos) -> Snapshot;
    fn now(&self) -> Nanos;
}

impl<L: Refund> Part for L {
    #[inline]
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.acquire_refundable_at(n, now)
    }
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        self.decide_refundable_at(n, now)
    }
    fn refund(&self, receipt: Receipt, at: Nanos) {
        Refund::refund(self, receipt, at);
    }
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.check_at(n, now)
    }
    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.snapshot_at(now)
    }
    fn now(&self) -> Nanos {
        RateLimiter::now(self)
    }
}

/// A keyed limit with its key.
struct Keyed<'a, L: ?Sized, K: ?Sized>(&'a L, &'a K);

impl<L: KeyedRefund<K> + ?Sized, K: ?Sized> Part for Keyed<'_, L, K> {
    #[inline]
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.0.acquire_refundable_at(self.1, n, now)
    }
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        self.0.decide_refundable_at(self.1, n, now)
    }
    fn refund(&self, receipt: Receipt, at: Nanos) {
        self.0.refund(self.1, receipt, at);
    }
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.check_at(self.1, n, now)
    }
    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.0.snapshot_at(self.1, now)
    }
    fn now(&self) -> Nanos {
        self.0.now()
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

/// The all-or-nothing protocol over the parts `get(0)`, `get(1)`, … (limits seen through
/// [`Part`], built on the fly: a keyed limit with its key is two references, so a decision
/// allocates nothing).
struct Protocol<G> {
    get: G,
}

impl<P: Part, G: Fn(usize) -> Option<P>> Protocol<G> {
    /// Acquire `n` on the parts from `i` on, in order (with `STATE`, through their decisions,
    /// combining the states they left). On a refusal, every part that had admitted is
    /// refunded (the latest first) before the refusal, its index and the refund time are
    /// returned; the receipts live on the stack of this recursion, one frame per limit.
    fn acquire_from<const STATE: bool>(
        &self,
        i: usize,
        n: u32,
        now: Nanos,
    ) -> Result<Snapshot, (usize, Denied, Nanos)> {
        let Some(part) = (self.get)(i) else {
            return Ok(OPEN);
        };
        let (receipt, state) = if STATE {
            part.decide(n, now)
        } else {
            (part.acquire(n, now), OPEN)
        };
        let receipt = match receipt {
            Ok(receipt) => receipt,
            // Refund at the later of the request's time and the clock's, so that every
            // request decided in between was decided before it.
            Err(denied) => return Err((i, denied, now.max(part.now()))),
        };
        match self.acquire_from::<STATE>(i + 1, n, now) {
            Ok(rest) => Ok(tighter(state, rest)),
            Err((j, denied, at)) => {
                part.refund(receipt, at);
                Err((j, denied, at))
            }
        }
    }

    /// The refusal of part `i`, with the later parts only checked.
    fn refusal(&self, i: usize, denied: Denied, n: u32, now: Nanos) -> Denied {
        (i + 1..)
            .map_while(|j| (self.get)(j))
            .filter_map(|part| part.check(n, now).err())
            .fold(denied, Denied::stricter)
    }

    fn try_acquire(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        match self.acquire_from::<false>(0, n, now) {
            Ok(_) => Ok(()),
            Err((i, denied, _)) => Err(self.refusal(i, denied, n, now)),
        }
    }

    /// The decision and the states it left: on admission, each limit's state from its own
    /// decision, combined; on refusal (everything refunded), each limit's state read after.
    fn decide(&self, n: u32, now: Nanos) -> Decision {
        match self.acquire_from::<true>(0, n, now) {
            Ok(state) => Decision {
                result: Ok(()),
                state,
            },
            Err((i, denied, _)) => Decision {
                result: Err(self.refusal(i, denied, n, now)),
                state: self.snapshot(now),
            },
        }
    }

    /// The smallest `remaining` and the largest `full_after` of the parts.
    fn snapshot(&self, now: Nanos) -> Snapshot {
        (0..)
            .map_while(|i| (self.get)(i))
            .map(|p| p.snapshot(now))
            .fold(OPEN, tighter)
    }
}

impl<L> All<L> {
    /// The protocol over the unkeyed limits.
    fn unkeyed<'a>(&'a self) -> Protocol<impl Fn(usize) -> Option<&'a L> + 'a> {
        Protocol {
            get: move |i| self.limits.get(i),
        }
    }

    /// The protocol over the keyed limits, each with `key`.
    fn keyed<'a, K: ?Sized>(
        &'a self,
        key: &'a K,
    ) -> Protocol<impl Fn(usize) -> Option<Keyed<'a, L, K>> + 'a> {
        Protocol {
            get: move |i| self.limits.get(i).map(|l| Keyed(l, key)),
        }
    }
}

impl<L: Refund> RateLimiter for All<L> {
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.unkeyed().try_acquire(n, now)
    }

    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        self.unkeyed().decide(n, now)
    }

    /// The first limit's clock.
    fn now(&self) -> Nanos {
        self.limits[0].now()
    }

    /// The smallest `remaining` and the largest `full_after` of the limits.
    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.unkeyed().snapshot(now)
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
        self.keyed(key).try_acquire(n, now)
    }

    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        self.keyed(key).decide(n, now)
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        self.keyed(key).snapshot(now)
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
