//! One key's local state ([`Entry`]) and the map of them: the lease word, the fetch slot,
//! the handles' pins and the sweep's retirement.

use super::LeaseRule;
use limitcore::cell::WordCell;
use limitcore::clock::Nanos;
use limitcore::KeyHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// One key's local state. `repr(C)`, the hot fields first: the lease word every decision
/// compare-and-swaps (a [`LeaseRule`] word; the rule itself is the limiter's), then the two
/// that the refill check of an admission reads, then `pins`, which every keyed lookup
/// reads; the fetch's statistics and the waiters' `Notify` after them.
#[repr(C)]
pub(super) struct Entry {
    /// The lease word, changed only through the core's compare-and-swap loop.
    pub(super) word: WordCell,
    /// Current lease size (cells), `1 ..= L`.
    pub(super) size: AtomicU32,
    pub(super) fetching: AtomicBool,
    /// The [`LeasedKey`] handles on this entry, or [`RETIRED`] once the sweep has removed it
    /// (see [`Entry::pin`]).
    pub(super) pins: AtomicUsize,
    /// When the last lease was installed (ns) and the cells held right after.
    pub(super) installed_cells: AtomicU32,
    pub(super) installed_at: AtomicU64,
    /// Woken when the entry's fetch slot is given back (a fetch ended, or the sweep let go
    /// of an entry it kept) or the sweep retired the entry.
    pub(super) arrived: tokio::sync::Notify,
}

/// [`Entry::pins`] of an entry the sweep retired: no handle may pin it again, no lookup
/// returns it again, and it never holds a cell again (the sweep also keeps its fetch slot).
const RETIRED: usize = usize::MAX;

impl Entry {
    /// A key's first entry: the fresh word of `rule`, no fetch, a lease size of `size`.
    pub(super) fn new(rule: &LeaseRule, size: u32) -> Self {
        Entry {
            word: WordCell::new(rule.fresh()),
            size: AtomicU32::new(size),
            fetching: AtomicBool::new(false),
            pins: AtomicUsize::new(0),
            installed_cells: AtomicU32::new(0),
            installed_at: AtomicU64::new(0),
            arrived: tokio::sync::Notify::new(),
        }
    }

    /// Pin the entry for a [`LeasedKey`]: `false` if the sweep has retired it (the caller
    /// then looks the key up again). While pinned the sweep does not retire it.
    ///
    /// One word decides between the two: the sweep retires with a compare-and-swap
    /// `0 → RETIRED`, a pin adds one to any other value, so either the sweep sees the pin
    /// (and keeps the entry) or the pin sees `RETIRED` (and takes another entry).
    pub(super) fn pin(&self) -> bool {
        // Relaxed (the three operations on `pins`): the choice between a pin and the
        // retirement rests on this one word's modification order alone (each is a
        // read-modify-write, which reads the latest value), and nothing else is published
        // through it: the lease word has its own compare-and-swap, and the fetch slot,
        // which the sweep holds while it decides, keeps cells from arriving meanwhile.
        self.pins
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |pins| {
                (pins < RETIRED - 1).then(|| pins + 1)
            })
            .is_ok()
    }

    /// Undo one [`Entry::pin`] (a handle dropped).
    pub(super) fn unpin(&self) {
        // Relaxed: see `pin`.
        self.pins.fetch_sub(1, Ordering::Relaxed);
    }

    /// Retire an idle entry (the sweep, holding its fetch slot): `false` if a handle pins it.
    pub(super) fn retire(&self) -> bool {
        // Relaxed: see `pin`.
        self.pins
            .compare_exchange(0, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the sweep retired the entry (for good: `RETIRED` is never left).
    #[inline]
    pub(super) fn is_retired(&self) -> bool {
        // Relaxed: a retired entry only ever refuses (it holds no cell and its fetch slot is
        // the sweep's for good), so a lookup that reads a stale "not retired" decides on it
        // as it would have just before the retirement: a refusal, after which it looks
        // again. Partner: the compare-and-swap in `retire`. Where a waiter must see the
        // retirement (`await_lease`), the `Notify` orders it.
        self.pins.load(Ordering::Relaxed) == RETIRED
    }

    /// One step of the idle-key sweep on this entry: take the fetch slot, and if the word
    /// has been idle since `since` (ns) and no handle pins the entry, retire it
    /// (`true`, the slot kept for good); otherwise give the slot back (`false`). Either way
    /// the requests waiting on the entry (`await_lease`) are woken: on a retired entry
    /// they look the key up again at once, instead of waiting for a fetch that will never
    /// come.
    pub(super) fn sweep_step(&self, rule: &LeaseRule, since: Nanos) -> bool {
        // Acquire on success: pairs with the Release that ends a fetch, so the installed
        // word is seen below; the slot, once ours, is never given back for a retired entry.
        if self
            .fetching
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let retired = rule.idle_since(&self.word.load(), since) && self.retire();
        if !retired {
            // Release: pairs with the Acquire of the next refill's swap.
            self.fetching.store(false, Ordering::Release);
        }
        // After the store (or the retirement) above: a waiter whose `Notified` was made
        // before this call is woken; one made after it sees the store or the retirement
        // (see `await_lease`).
        self.arrived.notify_waiters();
        retired
    }
}

/// The map of a limiter's entries, and a pinned reference to it.
pub(super) type Keys = papaya::HashMap<String, Arc<Entry>, KeyHasher>;
pub(super) type KeysRef<'m> =
    papaya::HashMapRef<'m, String, Arc<Entry>, KeyHasher, papaya::LocalGuard<'m>>;

/// `key`'s live entry in `keys`: the one there unless the sweep retired it, else a new one
/// made by `make` (a key's first request, or the first after the sweep). A retired entry
/// met in the map is removed, and only it (as the sweep's own removal: a newer entry put
/// in its place is left alone). A lookup borrows the key (`&str`); only a new entry
/// allocates it.
#[inline]
pub(super) fn live_entry<'g>(
    keys: &'g KeysRef<'_>,
    key: &str,
    make: impl Fn() -> Entry,
) -> &'g Arc<Entry> {
    match keys.get(key) {
        Some(entry) if !entry.is_retired() => entry,
        _ => insert_entry(keys, key, make),
    }
}

/// [`live_entry`]'s slow path.
#[cold]
#[inline(never)]
fn insert_entry<'g>(keys: &'g KeysRef<'_>, key: &str, make: impl Fn() -> Entry) -> &'g Arc<Entry> {
    loop {
        let entry = keys.get_or_insert_with(key.to_owned(), || Arc::new(make()));
        if !entry.is_retired() {
            return entry;
        }
        let _ = keys.remove_if(key, |_, e| Arc::ptr_eq(e, entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Whether `notified` is ready now (polled once, never waiting).
    fn woken(notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(notified.poll(&mut cx), Poll::Ready(()))
    }

    /// The sweep's step, on the limiter's own map and entry protocol (no server): a busy
    /// entry is left alone, a held one is let go, an idle one retired; every step that
    /// took the fetch slot wakes the entry's waiters, and a retired entry is never returned
    /// by a lookup again (it is replaced, and only it is removed).
    #[test]
    fn the_sweep_wakes_waiters_and_the_lookup_replaces_a_retired_entry() {
        let rule = LeaseRule::with_epoch("100/s burst 10".parse().unwrap(), 0, 4);
        let make = || Entry::new(&rule, 1);
        let keys = Keys::with_hasher(KeyHasher::new());
        let guard = keys.pin();
        let entry = Arc::clone(live_entry(&guard, "k", make));
        assert!(Arc::ptr_eq(live_entry(&guard, "k", make), &entry));

        // A fetch in flight: the sweep does not touch the entry (nor wake anyone).
        // Relaxed (every access to `fetching` in this test): one thread, no other memory
        // published through it.
        entry.fetching.store(true, Ordering::Relaxed);
        let mut waiter = pin!(entry.arrived.notified());
        waiter.as_mut().enable();
        assert!(!entry.sweep_step(&rule, 0));
        assert!(
            !woken(waiter.as_mut()),
            "no wake while a fetch is in flight"
        );
        entry.fetching.store(false, Ordering::Relaxed);

        // Cells valid until 10 ms: not idle since 5 ms; the slot is given back, and the
        // waiter (which waited on the sweep's hold of it) is woken to decide again.
        let Ok(()) = entry.word.update(|w| {
            rule.install(w, 2, 0, 10_000_000);
            Ok::<_, Infallible>(())
        });
        assert!(!entry.sweep_step(&rule, 5_000_000));
        assert!(woken(waiter.as_mut()), "woken when the slot is given back");
        assert!(!entry.fetching.load(Ordering::Relaxed));
        assert!(!entry.is_retired());

        // Idle since 10 ms: retired, the slot kept, the waiter woken.
        let mut waiter = pin!(entry.arrived.notified());
        waiter.as_mut().enable();
        assert!(entry.sweep_step(&rule, 10_000_000));
        assert!(woken(waiter.as_mut()), "woken when the entry is retired");
        assert!(entry.is_retired() && entry.fetching.load(Ordering::Relaxed));

        // The next lookup meets the retired entry still in the map and replaces it.
        let fresh = Arc::clone(live_entry(&guard, "k", make));
        assert!(!Arc::ptr_eq(&fresh, &entry));
        assert_eq!(fresh.word.load(), rule.fresh());
        assert!(!fresh.is_retired() && !fresh.fetching.load(Ordering::Relaxed));
        assert_eq!(guard.len(), 1);
        // The sweep's conditional removal of the retired entry leaves the fresh one.
        assert!(guard.remove_if("k", |_, e| Arc::ptr_eq(e, &entry)).is_err());
        assert!(Arc::ptr_eq(guard.get("k").unwrap(), &fresh));
    }
}
