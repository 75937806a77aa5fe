//! One key's local state ([`Entry`]) and the map of them: the lease word, the fetch slot,
//! the handles' pins, the sweep's retirement, the waiters' wake-ups and what the node
//! measured on the key for its next lease request (its size and the demand it reports).
//!
//! # Why not the core's keyed slot protocol
//!
//! The core's keyed maps ([`Keyed`](limitcore::Keyed), `src/cell.rs` and `src/keyed/`)
//! retire an idle key with one compare-and-swap of its *state word* to a reserved word
//! (`RETIRED`, `u64::MAX`), after which every update of the slot fails and its caller looks
//! the key up again. The lease entry does not use that protocol, and cannot without
//! changing what it protects:
//!
//! 1. **No word is free to reserve.** Every `u64` is a lease word: [`LeaseRule`]'s 24 bits of
//!    cells, the block bit and 39 bits of time are all in use, and `u64::MAX` is the word
//!    of `MAX_CELLS` cells blocked until the end of its time range (`REDIRECT`, `u64::MAX −
//!    1`, is a valid word too). Reserving one would take a bit from the cells or the time.
//! 2. **Idle is not a property of the word alone.** The core retires a state that is
//!    indistinguishable from a fresh one. An entry whose word is idle may still be pinned
//!    by a [`LeasedKey`](super::LeasedKey) handle, which keeps using it for as long as it
//!    lives and must never find it retired (its decisions would refuse for good, since the
//!    handle never looks the key up again): the pins are a second word, and the choice
//!    between "pinned" and "retired" has to be made on that word ([`Entry::pin`],
//!    [`Entry::retire`]). The core's slots are never held beyond one decision, so they
//!    have no pins.
//! 3. **The entry is more than its word.** A fetch in flight is about to install cells
//!    Redis has already charged; the waiters of [`LeasedLimiter::acquire`](super::LeasedLimiter::acquire)
//!    sleep on the entry's [`Event`] and must be woken when it is retired (they would
//!    otherwise wait for a fetch that never comes); and the entry keeps the measurements
//!    of the node's next lease request. The sweep therefore takes the fetch slot first and
//!    keeps it for good, so that nothing is installed after it found the word idle, then
//!    retires through the pins, then wakes the waiters (the order the loom models check,
//!    `leased/loom.rs`).
//! 4. **The protocol is sealed.** The core keeps its slots' cells and its stores sealed
//!    (`cell::Shared`, `Store`): this crate can use [`WordCell`] (one word, the core's
//!    compare-and-swap loop), which the lease word does, but not the slots' retirement.
//!
//! What the two protocols share is the shape of the lookup: a retired entry met in the map
//! is removed (only it: [`live_entry`]'s removal, like the sweep's, is conditional on the
//! entry being the one it retired), and the key is looked up again, getting a fresh entry
//! that decides as the retired one would (a fresh word needs a lease, as an idle word does).

use super::LeaseRule;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Event, Ordering, WordCell};
use limitcore::clock::Nanos;
use limitcore::KeyHasher;
use std::sync::Arc;

/// One key's local state. `repr(C)`, the hot fields first: the lease word every decision
/// compare-and-swaps (a [`LeaseRule`] word; the rule itself is the limiter's), then the two
/// that the refill check of an admission reads, then `pins`, which every keyed lookup
/// reads, then the two a refusal reads to count the node's demand; the fetch's
/// measurements and the waiters' `Event` after them.
#[repr(C)]
pub(super) struct Entry {
    /// The lease word, changed only through the core's compare-and-swap loop.
    pub(super) word: WordCell,
    /// Current lease size (cells), `1 ..= L`.
    pub(super) size: AtomicU32,
    /// The fetch slot: held by a fetch in flight, or by the sweep while it looks at the
    /// entry (for good once it retired it).
    pub(super) fetching: AtomicBool,
    /// The [`LeasedKey`](super::LeasedKey) handles on this entry, or [`RETIRED`] once the
    /// sweep has removed it (see [`Entry::pin`]).
    pub(super) pins: AtomicUsize,
    /// Permits refused since the last lease request was sized (the refused part of the
    /// node's offered load), counted only while they could still raise the demand sample
    /// ([`Entry::count_refused`]).
    refused: AtomicU64,
    /// When the last lease request was sized (ns of the limiter's clock; 0: never).
    reported_at: AtomicU64,
    /// Written only by the fetch slot's holder, published by the slot's release and
    /// acquire: the cells held when the last request was sized, the cells its fetch
    /// installed, and the node's demand on the key (millionths of the key's rate).
    held_at_report: AtomicU32,
    last_granted: AtomicU32,
    demand_ppm: AtomicU32,
    /// Woken when the entry's fetch slot is given back (a fetch ended, or the sweep let go
    /// of an entry it kept) or the sweep retired the entry.
    pub(super) arrived: Event,
}

/// [`Entry::pins`] of an entry the sweep retired: no handle may pin it again, no lookup
/// returns it again, and it never holds a cell again (the sweep also keeps its fetch slot).
const RETIRED: usize = usize::MAX;

/// What the node measured on a key between two lease requests, read by the fetch slot's
/// holder ([`Entry::report`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Measured {
    /// The time since the previous request was sized (ns); `None` before the first.
    pub(super) elapsed: Option<Nanos>,
    /// Permits admitted meanwhile (the cells held then, plus those its fetch installed,
    /// minus those held now: spent by decisions and charges, or expired).
    pub(super) admitted: u64,
    /// Permits refused meanwhile (as counted: see [`Entry::count_refused`]).
    pub(super) refused: u64,
    /// The demand reported last (millionths of the key's rate; 0 before the first).
    pub(super) demand_ppm: u32,
}

impl Entry {
    /// A key's first entry: the fresh word of `rule`, no fetch, a lease size of `size`.
    pub(super) fn new(rule: &LeaseRule, size: u32) -> Self {
        Entry {
            word: WordCell::new(rule.fresh()),
            size: AtomicU32::new(size),
            fetching: AtomicBool::new(false),
            pins: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            reported_at: AtomicU64::new(0),
            held_at_report: AtomicU32::new(0),
            last_granted: AtomicU32::new(0),
            demand_ppm: AtomicU32::new(0),
            arrived: Event::new(),
        }
    }

    /// Pin the entry for a [`LeasedKey`](super::LeasedKey): `false` if the sweep has retired
    /// it (the caller then looks the key up again). While pinned the sweep does not retire
    /// it.
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
        // retirement (`awaits_fetch`), the `Event` orders it.
        self.pins.load(Ordering::Relaxed) == RETIRED
    }

    /// Whether a fetch (or the sweep) holds the slot: a look before
    /// [`Entry::take_fetch_slot`], never a decision.
    #[inline]
    pub(super) fn fetch_in_flight(&self) -> bool {
        // Relaxed: a look before the swap, so that the decisions made while a fetch is in
        // flight read the slot instead of writing it; the swap in `take_fetch_slot` is what
        // takes the slot. A stale `true` skips one attempt, which the next admission (or the
        // refusal of a dry word) makes again. Partner: the stores of `end_fetch` and
        // `sweep_step`.
        self.fetching.load(Ordering::Relaxed)
    }

    /// Take the fetch slot (`true`), unless a fetch or the sweep holds it.
    #[inline]
    pub(super) fn take_fetch_slot(&self) -> bool {
        // Acquire on success: pairs with the Release that ends the previous fetch
        // (`end_fetch`) or the sweep's hold, so the measurements the previous holder wrote
        // are seen by this one. Relaxed on failure: nothing is read then. A compare-and-swap
        // rather than a swap: a failed take writes nothing (a swap would write `true` over
        // `true`), which is also what loom 0.7 models faithfully (its RMWs can let a
        // concurrent store slip between their read and their write, tokio-rs/loom#254; a
        // swap that failed could then appear to store its `true` after the holder's
        // `false`, a history no hardware allows).
        self.fetching
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Count `n` permits refused at `now` (ns) towards the node's offered load on the key,
    /// while they can still raise the demand sample: once the count since the last request
    /// reaches the key's whole rate over that time (`elapsed / interval_ns` permits), the
    /// sample is at its ceiling (the whole rate) and a refusal only reads. A saturated key
    /// thus costs a refusal two loads, not a write.
    #[inline]
    pub(super) fn count_refused(&self, n: u32, now: Nanos, interval_ns: u64) {
        // Relaxed (the three accesses): an estimate on its own, published to nobody but the
        // fetch slot's holder, which reads it with a swap. A load and a store rather than a
        // read-modify-write: two threads refusing on one key at once may lose one count, and
        // a store racing `report`'s swap may carry the old count into the next sample (an
        // estimate, averaged and capped at the whole rate anyway), and a refusal stays free
        // of a locked instruction. Partners: `report`'s swap and its store of `reported_at`.
        let since = now.saturating_sub(self.reported_at.load(Ordering::Relaxed));
        let counted = self.refused.load(Ordering::Relaxed);
        if counted.saturating_mul(interval_ns) <= since {
            self.refused
                .store(counted.saturating_add(u64::from(n)), Ordering::Relaxed);
        }
    }

    /// What the node measured on the key since its previous lease request, read at `now`
    /// with `held` cells valid, and the start of the next sample: the caller holds the fetch
    /// slot (taken by [`Entry::take_fetch_slot`]), whose acquire made the previous holder's
    /// writes visible.
    pub(super) fn report(&self, now: Nanos, held: u32) -> Measured {
        // Relaxed (these loads, and the stores below): written only by the fetch slot's
        // holder, ordered from one holder to the next by the slot's Acquire
        // (`take_fetch_slot`) and Release (`end_fetch`); partners: the previous holder's
        // stores here, in `end_fetch` and in `set_demand`. Refusals also read `reported_at`
        // (`count_refused`), for an estimate only.
        let at = self.reported_at.load(Ordering::Relaxed);
        let before = self.held_at_report.load(Ordering::Relaxed);
        let granted = self.last_granted.load(Ordering::Relaxed);
        // Relaxed: the counter is an estimate (see `count_refused`); the swap starts the
        // next sample from 0, and refusals counted on either side of it land in one sample
        // or the other.
        let refused = self.refused.swap(0, Ordering::Relaxed);
        // Relaxed: see above. Never 0 once reported (0 means "never").
        self.reported_at.store(now.max(1), Ordering::Relaxed);
        self.held_at_report.store(held, Ordering::Relaxed);
        self.last_granted.store(0, Ordering::Relaxed);
        Measured {
            elapsed: (at != 0).then(|| now.saturating_sub(at)),
            admitted: u64::from(before.saturating_add(granted).saturating_sub(held)),
            refused,
            demand_ppm: self.demand_ppm.load(Ordering::Relaxed),
        }
    }

    /// Record the demand this request reports (millionths of the key's rate), by the fetch
    /// slot's holder.
    pub(super) fn set_demand(&self, ppm: u32) {
        // Relaxed: under the fetch slot (see `report`).
        self.demand_ppm.store(ppm, Ordering::Relaxed);
    }

    /// Install a lease of `granted` cells that arrived at `arrived` and expires at `expires`
    /// (ns): the cells still valid plus the new ones, through the core's compare-and-swap
    /// loop ([`LeaseRule::install`]). Returns the cells held right after.
    pub(super) fn install(
        &self,
        rule: &LeaseRule,
        granted: u32,
        arrived: Nanos,
        expires: Nanos,
    ) -> u32 {
        let installed = self.word.update(|w| {
            rule.install(w, granted, arrived, expires);
            Ok::<_, std::convert::Infallible>(rule.cells(w, arrived))
        });
        match installed {
            Ok(held) => held,
            Err(never) => match never {},
        }
    }

    /// Block the word until `until` after a Redis refusal (or a charge's wait) that arrived
    /// at `arrived` (ns): [`LeaseRule::block`] through the compare-and-swap loop.
    pub(super) fn block(&self, rule: &LeaseRule, arrived: Nanos, until: Nanos) {
        let blocked = self.word.update(|w| {
            rule.block(w, arrived, until);
            Ok::<_, std::convert::Infallible>(())
        });
        if let Err(never) = blocked {
            match never {}
        }
    }

    /// End a fetch that installed `granted` cells (0 if Redis refused or did not answer):
    /// record them for the next sample, give the fetch slot back, wake the waiters.
    pub(super) fn end_fetch(&self, granted: u32) {
        // Relaxed: published by the Release below (see `report`).
        self.last_granted.store(granted, Ordering::Relaxed);
        // Release: the word installed before (and the measurement above) are visible to
        // whoever takes the slot next (`take_fetch_slot`'s Acquire) and to a waiter that
        // reads the slot free (`awaits_fetch`'s Acquire).
        self.fetching.store(false, Ordering::Release);
        // After the store: a waiter whose listener was made before this call is woken; one
        // made after it sees the store (see `awaits_fetch`).
        self.arrived.notify();
    }

    /// A waiter's check, made *after* it made its listener on [`Entry::arrived`]: whether it
    /// must wait for it, because a fetch (or the sweep's hold)
    /// still has the slot and the entry is not retired. `false`: decide again at once (the
    /// fetch's word is installed, or the entry is retired and the lookup finds a new one).
    ///
    /// Both the end of a fetch ([`Entry::end_fetch`]) and the sweep ([`Entry::sweep_step`])
    /// notify after their store to the slot or their retirement: one made after the
    /// waiter's listener wakes it; one made before it was read by the listener's acquire
    /// (the event's own order), and then the loads here see what preceded it.
    pub(super) fn awaits_fetch(&self) -> bool {
        // Acquire: pairs with the Release of `end_fetch` (or of the sweep's `sweep_step`):
        // `false` here means the fetch's word is installed and visible. `is_retired` is
        // Relaxed: ordered by the event as said; a retired entry keeps the slot for good,
        // so only the retirement tells the waiter to look again.
        self.fetching.load(Ordering::Acquire) && !self.is_retired()
    }

    /// One step of the idle-key sweep on this entry: take the fetch slot, and if the word
    /// has been idle since `since` (ns) and no handle pins the entry, retire it
    /// (`true`, the slot kept for good); otherwise give the slot back (`false`). Either way
    /// the requests waiting on the entry are woken: on a retired entry they look the key up
    /// again at once, instead of waiting for a fetch that will never come.
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
        // After the store (or the retirement) above: a waiter whose listener was made
        // before this call is woken; one made after it sees the store or the retirement
        // (see `awaits_fetch`).
        self.arrived.notify();
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

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Whether `notified` is ready now (polled once, never waiting).
    fn woken(notified: std::pin::Pin<&mut limitcore::notify::Listener<'_>>) -> bool {
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
        let mut waiter = pin!(entry.arrived.listen());
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
        let mut waiter = pin!(entry.arrived.listen());
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
