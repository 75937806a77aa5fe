//! Lease fetches (the refill that starts one, with the measurements it reports; the task
//! that installs its answer) and the idle-key sweep.

use super::{demand, nanos, Entry, Inner, LeasedLimiter};
use crate::fair::Demand;
use crate::sync::Ordering;
use limitcore::clock::{Clock, Nanos};
use std::sync::atomic::Ordering as StdOrdering;
use std::sync::{Arc, Weak};

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// Fetch the next lease for `key` in the background unless one is in flight.
    #[inline]
    pub(super) fn refill(&self, entry: &Arc<Entry>, key: &str, now: Nanos, dry: bool) {
        // A look before the swap (`Entry::fetch_in_flight`): the decisions made while a
        // fetch is in flight read the slot instead of writing it.
        if entry.fetch_in_flight() {
            return;
        }
        self.start_fetch(entry, key, now, dry);
    }

    /// [`LeasedLimiter::refill`]'s slow part: take the fetch slot, read what the node
    /// measured on the key since its previous request (the lease size and the demand it
    /// reports follow from it, [`demand`]) and spawn the fetch.
    #[cold]
    #[inline(never)]
    fn start_fetch(&self, entry: &Arc<Entry>, key: &str, now: Nanos, dry: bool) {
        if !entry.take_fetch_slot() {
            return;
        }
        let inner = &self.inner;
        let config = &inner.config;
        let held = inner.rule.cells(&entry.word.load(), now);
        let measured = entry.report(now, held);
        // Relaxed (the size, both ways): a tuning hint; a stale one only moves the refill.
        let size = entry.size.load(Ordering::Relaxed);
        let next = demand::next_size(&measured, size, dry, config.target, config.max_lease);
        entry.size.store(next, Ordering::Relaxed);
        let ppm = demand::demand_ppm(&measured, inner.interval_ns, config.target);
        entry.set_demand(ppm);
        let want = next.saturating_sub(held);
        if want == 0 {
            entry.end_fetch(0);
            return;
        }
        let task = fetch(
            Arc::clone(&self.inner),
            Arc::clone(entry),
            key.to_owned(),
            want,
            ppm,
        );
        inner.runtime.spawn(task);
    }
}

/// One lease fetch: ask Redis for `want` cells (reporting the node's demand, `ppm`, when the
/// leases are fair) and install what it grants, or block the key until Redis's wait has
/// passed (counted from the reply's arrival).
async fn fetch<C: Clock + Clone + 'static>(
    inner: Arc<Inner<C>>,
    entry: Arc<Entry>,
    key: String,
    want: u32,
    ppm: u32,
) {
    let sent = inner.clock.now();
    let answer = if inner.config.fair {
        let demand = Demand::new(&inner.node, ppm, inner.config.ttl);
        inner
            .gcra
            .try_take_fair(&key, want, &demand)
            .await
            .map(|fair| fair.answer)
    } else {
        inner.gcra.try_take_up_to(&key, want).await
    };
    let arrived = inner.clock.now();
    let rule = inner.rule;
    let mut granted = 0;
    if let Ok(answer) = answer {
        let rtt = arrived.saturating_sub(sent);
        // Relaxed: a moving average for `retry_after` estimates; concurrent updates from two
        // keys' fetches may lose one sample, which only slows the average.
        let old = inner.rtt.load(StdOrdering::Relaxed);
        inner
            .rtt
            .store(old - old / 8 + rtt / 8, StdOrdering::Relaxed);
        if answer.granted > 0 {
            let expires = arrived.saturating_add(nanos(inner.config.ttl));
            entry.install(&rule, answer.granted, arrived, expires);
            granted = answer.granted;
            // Relaxed: statistics counters.
            inner.leases.fetch_add(1, StdOrdering::Relaxed);
            inner
                .granted
                .fetch_add(u64::from(answer.granted), StdOrdering::Relaxed);
            inner.metrics.granted(answer.granted);
        } else if let Some(wait) = answer.decision.retry_after() {
            entry.block(&rule, arrived, arrived.saturating_add(nanos(wait)));
            // Relaxed: a statistics counter.
            inner.refusals.fetch_add(1, StdOrdering::Relaxed);
            inner.metrics.blocked();
        }
    } else {
        inner.metrics.failed();
    }
    // Gives the slot back (publishing the word installed above and the cells granted, for
    // the next request's measurement) and wakes the waiters.
    entry.end_fetch(granted);
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
