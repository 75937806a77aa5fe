//! [`Global`]: one limiter applied to every key.

use crate::clock::Nanos;
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::limiter::{KeyedRateLimiter, KeyedRefund, RateLimiter, Refund};
use crate::limiters::{KeyedReserve, Reservation, Reserve};
use crate::quota::Quota;
use core::time::Duration;

/// One [`RateLimiter`] applied to every key: the adapter that makes an unkeyed limit a
/// [`KeyedRateLimiter`] (and a [`Refund`] a [`KeyedRefund`]), so that a global limit
/// combines with per-key limits in [`All`](crate::All), or stands where code expects a
/// keyed limit (a middleware configured "global").
///
/// Every key shares the one state: `snapshot_at(key)` is the limiter's state, whatever the
/// key, and `quota_for(key)` its quota.
///
/// # Examples
///
/// ```
/// use limitcore::{All, Global, Gcra, Keyed, KeyedRateLimiter, KeyedRefund, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let clock = ManualClock::new();
/// let per_client: Keyed<String, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(2)?, clock.clone())?;
/// let global = Global::new(Gcra::with_clock(Quota::per_second(3)?, clock)?);
/// let both: All<Box<dyn KeyedRefund<str>>> = All::new(vec![Box::new(per_client), Box::new(global)]);
/// assert!(both.try_acquire_n("a", 2).is_ok());
/// assert!(both.try_acquire("a").is_err());         // a's own limit
/// assert!(both.try_acquire("b").is_ok());          // the global limit's third permit
/// assert!(both.try_acquire("c").is_err());         // the global limit
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
#[derive(Debug, Clone, Default)]
pub struct Global<L>(L);

impl<L> Global<L> {
    /// `limiter` for every key.
    pub fn new(limiter: L) -> Self {
        Global(limiter)
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.0
    }

    /// The limiter, unwrapped.
    pub fn into_inner(self) -> L {
        self.0
    }
}

impl<K: ?Sized, L: RateLimiter> KeyedRateLimiter<K> for Global<L> {
    #[inline]
    fn try_acquire_n_at(&self, _key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.try_acquire_n_at(n, now)
    }

    fn decide_n_at(&self, _key: &K, n: u32, now: Nanos) -> Decision {
        self.0.decide_n_at(n, now)
    }

    fn snapshot_at(&self, _key: &K, now: Nanos) -> Snapshot {
        self.0.snapshot_at(now)
    }

    fn quota_for(&self, _key: &K) -> Quota {
        self.0.quota()
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.0.now()
    }
}

impl<K: ?Sized, L: Refund> KeyedRefund<K> for Global<L> {
    fn acquire_refundable_at(&self, _key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.0.acquire_refundable_at(n, now)
    }

    fn decide_refundable_at(
        &self,
        _key: &K,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot) {
        self.0.decide_refundable_at(n, now)
    }

    fn refund(&self, _key: &K, receipt: Receipt, at: Nanos) {
        self.0.refund(receipt, at);
    }

    fn check_at(&self, _key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.check_at(n, now)
    }

    fn charge_at(&self, _key: &K, n: u32, now: Nanos) -> Charged {
        self.0.charge_at(n, now)
    }

    fn settle(&self, _key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        self.0.settle(receipt, actual, at)
    }

    fn credit(&self, _key: &K, n: u32, at: Nanos) {
        self.0.credit(n, at);
    }
}

impl<K: ?Sized, L: Reserve> KeyedReserve<K> for Global<L> {
    fn reserve_n_at(
        &self,
        _key: &K,
        n: u32,
        now: Nanos,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.0.reserve_n_at(n, now, max_wait)
    }
}
