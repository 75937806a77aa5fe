//! Lease fetches (the refill that starts one, the task that installs its answer) and the
//! idle-key sweep.

use super::{nanos, Entry, Inner, LeasedLimiter};
use limitcore::clock::{Clock, Nanos};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// Fetch the next lease for `key` in the background unless one is in flight.
    #[inline]
    pub(super) fn refill(&self, entry: &Arc<Entry>, key: &str, now: Nanos, dry: bool) {
        // Relaxed: a look before the swap, so that the decisions made while a fetch is in
        // flight (every admission below half the lease size) read the slot instead of
        // writing it; the swap below is what takes the slot (its Acquire pairs with the
        // Release that ends a fetch). A stale `true` skips one attempt, which the next
        // admission (or the refusal of a dry word) makes again.
        if entry.fetching.load(Ordering::Relaxed) {
            return;
        }
        self.start_fetch(entry, key, now, dry);
    }

    /// [`LeasedLimiter::refill`]'s slow part: take the fetch slot, size the lease and spawn
    /// its fetch.
    #[cold]
    #[inline(never)]
    fn start_fetch(&self, entry: &Arc<Entry>, key: &str, now: Nanos, dry: bool) {
        // Acquire: pairs with the Release that ends the previous fetch (in `fetch`), so the
        // lease statistics it wrote are seen below.
        if entry.fetching.swap(true, Ordering::Acquire) {
            return;
        }
        let inner = &self.inner;
        let held = inner.rule.cells(&entry.word.load(), now);
        // Relaxed (these three): statistics of the key's last lease for the size estimate,
        // written by the fetch task before its Release of `fetching`, which the Acquire swap
        // above pairs with; a value from an older lease only skews the estimate.
        let installed_at = entry.installed_at.load(Ordering::Relaxed);
        let used = u64::from(
            entry
                .installed_cells
                .load(Ordering::Relaxed)
                .saturating_sub(held),
        );
        let elapsed = now.saturating_sub(installed_at);
        // Relaxed: a tuning hint (see above).
        let size = u64::from(entry.size.load(Ordering::Relaxed));
        let mut next = if installed_at != 0 && elapsed > 0 {
            (u128::from(used) * inner.config.target.as_nanos()).div_ceil(u128::from(elapsed)) as u64
        } else {
            size
        };
        if dry {
            next = next.max(size * 2);
        }
        let next = next.clamp(1, u64::from(inner.config.max_lease)) as u32;
        // Relaxed: a tuning hint (see above).
        entry.size.store(next, Ordering::Relaxed);
        let want = next.saturating_sub(held);
        if want == 0 {
            // Release: gives the fetch slot back; partner: the next refill's Acquire swap.
            entry.fetching.store(false, Ordering::Release);
            return;
        }
        let task = fetch(
            Arc::clone(&self.inner),
            Arc::clone(entry),
            key.to_owned(),
            want,
        );
        inner.runtime.spawn(task);
    }
}

/// One lease fetch: ask Redis for `want` cells and install what it grants, or block the
/// key until Redis's wait has passed (counted from the reply's arrival).
async fn fetch<C: Clock + Clone + 'static>(
    inner: Arc<Inner<C>>,
    entry: Arc<Entry>,
    key: String,
    want: u32,
) {
    let sent = inner.clock.now();
    let answer = inner.gcra.try_take_up_to(&key, want).await;
    let arrived = inner.clock.now();
    let rule = inner.rule;
    if let Ok(answer) = answer {
        let rtt = arrived.saturating_sub(sent);
        // Relaxed: a moving average for `retry_after` estimates; concurrent updates from two
        // keys' fetches may lose one sample, which only slows the average.
        let old = inner.rtt.load(Ordering::Relaxed);
        inner.rtt.store(old - old / 8 + rtt / 8, Ordering::Relaxed);
        if answer.granted > 0 {
            let ttl = nanos(inner.config.ttl);
            let expires = arrived.saturating_add(ttl);
            let Ok(held) = entry.word.update(|w| {
                rule.install(w, answer.granted, arrived, expires);
                Ok::<_, Infallible>(rule.cells(w, arrived))
            });
            // Relaxed: published by the Release of `fetching` below (see `refill`).
            entry.installed_at.store(arrived, Ordering::Relaxed);
            entry.installed_cells.store(held, Ordering::Relaxed);
            // Relaxed: statistics counters.
            inner.leases.fetch_add(1, Ordering::Relaxed);
            inner
                .granted
                .fetch_add(u64::from(answer.granted), Ordering::Relaxed);
        } else if let Some(wait) = answer.decision.retry_after() {
            let wait = nanos(wait);
            let until = arrived.saturating_add(wait);
            let Ok(()) = entry.word.update(|w| {
                rule.block(w, arrived, until);
                Ok::<_, Infallible>(())
            });
            // Relaxed: a statistics counter.
            inner.refusals.fetch_add(1, Ordering::Relaxed);
        }
    }
    // Release: the lease statistics above are visible to the next refill, whose Acquire swap
    // takes the slot; the word itself went through the core's CAS loop.
    entry.fetching.store(false, Ordering::Release);
    entry.arrived.notify_waiters();
}

/// Drop the local state of keys whose lease or block ended more than a lease TTL ago and
/// that have no fetch in flight and no [`LeasedKey`] handle. Ends with the limiter.
///
/// A removed entry may still be held by a decision that looked it up just before (an
/// `Arc`). So that such a decision can never spend cells beside the key's next entry, the
/// sweep first takes the entry's fetch slot (`fetching`, false → true) and keeps it for
/// good: cells only ever arrive by a fetch, so the entry, idle when checked under the slot,
/// never holds a cell again, and a late decision on it is refused (stricter, never more).
/// It then retires the entry ([`Entry::retire`]), which fails while a [`LeasedKey`] pins
/// it: a handle's entry stays the key's only one for as long as the handle lives.
///
/// A retired entry is dead: the sweep wakes the requests waiting on it
/// ([`Entry::sweep_step`]), a keyed lookup never returns it (it puts a new entry in its
/// place, [`live_entry`]), and the sweep removes it from the map unless that happened
/// first.
pub(super) async fn sweep<C: Clock + Clone + 'static>(inner: Weak<Inner<C>>) {
    loop {
        let every = match inner.upgrade() {
            Some(inner) => inner.config.ttl,
            None => return,
        };
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let now = inner.clock.now();
        let ttl = nanos(inner.config.ttl);
        let since = now.saturating_sub(ttl);
        let guard = inner.keys.pin();
        let idle: Vec<(String, Arc<Entry>)> = guard
            .iter()
            .filter(|(_, e)| e.sweep_step(&inner.rule, since))
            .map(|(k, e)| (k.clone(), Arc::clone(e)))
            .collect();
        for (key, entry) in idle {
            // Only the entry retired above: a lookup (keyed, or a handle's) that met it
            // retired may already have put a fresh one in its place.
            let _ = guard.remove_if(&key, |_, e| Arc::ptr_eq(e, &entry));
        }
    }
}
