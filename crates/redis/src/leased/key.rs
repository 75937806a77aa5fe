//! One key of a [`LeasedLimiter`] looked up once: [`LeasedKey`].

use super::{live_entry, Entry, KeysRef, LeasedLimiter};
use crate::policy::Verdict;
use limitcore::clock::{Clock, MonotonicClock, Nanos};
use limitcore::{Decision, Denied, Quota, RateLimiter, Snapshot};
use std::sync::Arc;

/// One key of a [`LeasedLimiter`], looked up once: its decisions go straight to the key's
/// lease word (a clock read and one compare-and-swap), with no map lookup. For a limit the
/// fleet shares under one key (an upstream's quota, a global cap) or a hot tenant that a
/// service resolves once. Implements the core's unkeyed [`RateLimiter`].
///
/// # Sharing
///
/// The handle and the limiter's keyed decisions on the same key use the same word: the
/// node still holds at most `L` cells for the key, and the fleet bound
/// `B + ⌈(Δ + D)/T⌉ − 1 + N·L` ([`LeasedLimiter`]) is unchanged. Clones share it too.
///
/// # Memory
///
/// While a handle (or a clone of it) lives, the idle-key sweep keeps the key's entry (the
/// key, its lease word and the fetch's bookkeeping); a dropped handle's key is swept as
/// any other once idle.
///
/// # Capacity
///
/// At most `min(burst, L)` permits a request through the synchronous calls, as the
/// limiter; [`LeasedKey::acquire`] decides a larger one on Redis, up to
/// [`LeasedLimiter::capacity`]; [`LeasedKey::charge`] has no capacity (the handle's cells
/// first, then Redis).
///
/// # Refusals
///
/// As the limiter's ([`LeasedLimiter`], "Refusals"): while the node holds no cells for the
/// key, the synchronous calls refuse with the round-trip *estimate* as `retry_after` and
/// fetch a lease; [`LeasedKey::acquire`] waits for it.
///
/// # Examples
///
/// ```no_run
/// use limitcore::RateLimiter;
/// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limiter = LeasedLimiter::new(redis, "1000/s burst 50".parse()?, LeaseConfig::new(16), Policy::FailLocal)?;
/// let upstream = limiter.key("upstream-api");
/// upstream.acquire(1).await;              // waits for the first lease
/// let admitted = upstream.try_acquire();  // local: no lookup, no round trip
/// # let _ = admitted;
/// # Ok(()) }
/// ```
pub struct LeasedKey<C: Clock + Clone + 'static = MonotonicClock> {
    limiter: LeasedLimiter<C>,
    entry: Arc<Entry>,
    key: Box<str>,
}

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// A handle on `key` whose decisions skip the lookup ([`LeasedKey`]). It shares the
    /// key's local state with this limiter's keyed decisions.
    pub fn key(&self, key: &str) -> LeasedKey<C> {
        let guard = self.inner.keys.pin();
        let entry = pinned_entry(&guard, key, || self.inner.entry());
        LeasedKey {
            limiter: self.clone(),
            entry,
            key: key.into(),
        }
    }
}

/// `key`'s live entry in `keys` ([`live_entry`]), pinned for a handle. The sweep may
/// retire the entry between the lookup and the pin; the pin then fails, and the next
/// lookup puts a new entry in the retired one's place (removing only it: the sweep's own
/// removal is conditional in the same way).
fn pinned_entry(keys: &KeysRef<'_>, key: &str, make: impl Fn() -> Entry) -> Arc<Entry> {
    loop {
        let entry = live_entry(keys, key, &make);
        if entry.pin() {
            return Arc::clone(entry);
        }
    }
}

impl<C: Clock + Clone + 'static> LeasedKey<C> {
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The limiter the handle belongs to.
    pub fn limiter(&self) -> &LeasedLimiter<C> {
        &self.limiter
    }

    /// The pinned entry.
    pub(super) fn entry(&self) -> &Arc<Entry> {
        &self.entry
    }

    /// Decide `n` permits at `now` (ns of the limiter's clock), with where the decision came
    /// from: as [`LeasedLimiter::decide_verdict_at`] for this key.
    pub fn decide_verdict_at(&self, n: u32, now: Nanos) -> Verdict {
        self.limiter.decide_entry(&self.entry, &self.key, n, now)
    }

    /// Decide `n` permits now, waiting (up to the Redis deadline) for a lease if the node
    /// holds none: as [`LeasedLimiter::acquire`] for this key (a request above the largest
    /// lease is decided on Redis).
    pub async fn acquire(&self, n: u32) -> Verdict {
        if n > self.limiter.max_lease() {
            return self.limiter.oversized(&self.key, n).await;
        }
        self.limiter
            .acquire_by(|| {
                let verdict = self.decide_verdict_at(n, self.now());
                (verdict, Arc::clone(&self.entry))
            })
            .await
    }
}

impl<C: Clock + Clone + 'static> Clone for LeasedKey<C> {
    fn clone(&self) -> Self {
        // This handle's pin keeps the entry from retirement, so the new pin cannot fail.
        let pinned = self.entry.pin();
        debug_assert!(pinned, "a pinned entry is never retired");
        LeasedKey {
            limiter: self.limiter.clone(),
            entry: Arc::clone(&self.entry),
            key: self.key.clone(),
        }
    }
}

impl<C: Clock + Clone + 'static> Drop for LeasedKey<C> {
    fn drop(&mut self) {
        self.entry.unpin();
    }
}

impl<C: Clock + Clone + 'static> std::fmt::Debug for LeasedKey<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedKey")
            .field("key", &self.key)
            .field("state", &self.snapshot())
            .finish()
    }
}

impl<C: Clock + Clone + 'static> RateLimiter for LeasedKey<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.limiter.try_entry(&self.entry, &self.key, n, now)
    }

    #[inline]
    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        self.decide_verdict_at(n, now).decision
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.limiter.inner.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.limiter
            .inner
            .rule
            .snapshot(&self.entry.word.load(), now)
    }

    fn quota(&self) -> Quota {
        self.limiter.inner.gcra.quota()
    }

    /// `min(burst, L)`: a lease never holds more.
    fn capacity(&self) -> u32 {
        self.limiter.max_lease()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leased::{Keys, LeaseRule};
    use limitcore::KeyHasher;
    use std::sync::atomic::Ordering;

    /// The sweep's race with a new handle, step by step, on the limiter's own map and entry
    /// protocol (no server): an entry the sweep has retired (but not yet removed) is never
    /// pinned; the handle puts a fresh entry in its place, which the sweep's conditional
    /// removal then leaves alone; a pinned entry cannot be retired, and once its last
    /// handle is gone it can.
    #[test]
    fn a_handle_never_pins_a_retired_entry() {
        let rule = LeaseRule::new(&"100/s burst 10".parse().unwrap());
        let make = || Entry::new(&rule, 1);
        let keys = Keys::with_hasher(KeyHasher::new());
        let guard = keys.pin();
        let old = Arc::clone(live_entry(&guard, "k", make));
        // The sweep's step on the idle entry: its fetch slot, kept, then retirement.
        // Relaxed (the loads of `fetching` in this test): one thread, nothing published.
        assert!(old.sweep_step(&rule, 0));
        assert!(old.is_retired());
        assert!(
            old.fetching.load(Ordering::Relaxed),
            "the sweep keeps the slot"
        );
        assert!(!old.pin(), "a retired entry is never pinned");
        let handle = pinned_entry(&guard, "k", make);
        assert!(!Arc::ptr_eq(&handle, &old), "pinned a retired entry");
        assert!(Arc::ptr_eq(guard.get("k").unwrap(), &handle));
        // The sweep's removal of the entry it retired leaves the new one.
        assert!(guard.remove_if("k", |_, e| Arc::ptr_eq(e, &old)).is_err());
        assert!(Arc::ptr_eq(guard.get("k").unwrap(), &handle));
        // Pinned (twice, as by a clone): the sweep keeps it and gives its slot back.
        let clone = pinned_entry(&guard, "k", make);
        assert!(Arc::ptr_eq(&clone, &handle));
        assert!(!handle.sweep_step(&rule, 0));
        assert!(!handle.is_retired());
        assert!(
            !handle.fetching.load(Ordering::Relaxed),
            "the slot is given back"
        );
        handle.unpin();
        assert!(!handle.sweep_step(&rule, 0), "one pin is left");
        clone.unpin();
        // Free again after both are dropped: retired, and the next lookup replaces it.
        assert!(handle.sweep_step(&rule, 0));
        let next = live_entry(&guard, "k", make);
        assert!(!Arc::ptr_eq(next, &handle));
        assert!(!next.is_retired());
    }
}
