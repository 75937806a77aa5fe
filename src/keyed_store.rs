//! The maps a [`Keyed`](crate::Keyed) limiter can keep its per-key states in: [`Store`],
//! [`PapayaStore`] (the default) and `DashMapStore` (feature `dashmap`).
//!
//! A store holds one [`KeySlot`] per key and knows nothing of rates: it finds a key's slot,
//! inserts one, and removes a slot once [`Keyed`](crate::Keyed) has retired it (the word
//! `RETIRED`, see `keyed.rs`'s "Orderings"). Both maps publish a new entry with their own
//! release/acquire protocol, so a slot's initial word is visible to every thread that finds
//! the slot; every later change of the word goes through the slot's own compare-and-swap.
//!
//! Which to use (`keyed/*` in `BENCHMARKS.md`, "Keyed throughput"; 2 cores, same hasher on
//! both): papaya's lookups take no lock at all, so it is the faster under contention (one
//! key hit from 2 threads: 1.2–1.65× `DashMapStore`'s checks/s); dashmap keeps entries inline
//! in its shards (one cache miss fewer per lookup), so it is the faster for one thread over
//! many keys (10^5 keys: 1.3–1.5× papaya's).

use crate::keyed::{Rule, RETIRED};
use crate::sync::{AtomicU64, Ordering};
use alloc::boxed::Box;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;

/// One key's state in a [`Store`]: its word, and its own rule if the key has a quota of its
/// own. Opaque: only [`Keyed`](crate::Keyed) reads or writes it.
#[doc(hidden)]
pub struct KeySlot {
    pub(crate) word: AtomicU64,
    pub(crate) rule: Option<Box<Rule>>,
}

impl fmt::Debug for KeySlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a read-only observation for display.
        f.debug_struct("KeySlot")
            .field("word", &self.word.load(Ordering::Relaxed))
            .finish()
    }
}

impl KeySlot {
    /// Whether eviction has retired this slot.
    fn is_retired(&self) -> bool {
        // Relaxed: the retiring CAS is the slot's last write (see `keyed.rs`'s "Orderings");
        // a stale read only leaves a live slot in place.
        self.word.load(Ordering::Relaxed) == RETIRED
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A concurrent map from keys to per-key limiter states, for [`Keyed`](crate::Keyed)'s `S`
/// parameter: [`PapayaStore`] (the default) or `DashMapStore` (feature `dashmap`).
///
/// This trait is sealed; its methods are the crate's own.
///
/// # Examples
///
/// Code that takes any `Keyed`, whatever its store:
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::{Gcra, Keyed, PapayaStore, Quota, Store};
///
/// fn admit_all<S: Store<u32>>(keyed: &Keyed<u32, Gcra, ManualClock, S>, keys: &[u32]) -> usize {
///     keys.iter().filter(|k| keyed.try_acquire(k).is_ok()).count()
/// }
///
/// let keyed: Keyed<u32, Gcra, ManualClock, PapayaStore<u32>> =
///     Keyed::with_store(Quota::per_second(1)?, ManualClock::new(), PapayaStore::new())?;
/// assert_eq!(admit_all(&keyed, &[1, 2, 1]), 2); // key 1's second request waits 1 s
/// assert_eq!(keyed.len(), 2);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait Store<K>: sealed::Sealed {
    /// How many keys have a slot (live or retired and not yet removed).
    fn len(&self) -> usize;

    /// Whether no key has a slot.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `f` applied to `key`'s slot, if it has one.
    #[doc(hidden)]
    fn with_slot<R>(&self, key: &K, f: impl FnOnce(&KeySlot) -> R) -> Option<R>;

    /// `f` applied to `key`'s slot, inserting `make()` first if it has none.
    #[doc(hidden)]
    fn with_slot_or_insert<R>(
        &self,
        key: &K,
        make: impl FnOnce() -> KeySlot,
        f: impl FnOnce(&KeySlot) -> R,
    ) -> R;

    /// Remove `key`'s slot if it is retired; whether this call removed it.
    #[doc(hidden)]
    fn remove_retired(&self, key: &K) -> bool;

    /// Offer every slot to `retire` (which retires it or leaves it as it is, returning
    /// whether it is retired) and remove the retired ones; how many this call removed.
    #[doc(hidden)]
    fn retire_each(&self, retire: impl FnMut(&KeySlot) -> bool) -> usize;
}

/// The default [`Store`]: `papaya`'s lock-free hash map, hashing keys with `H` (default:
/// std's `RandomState`, SipHash-1-3 with a random key, safe with keys an attacker picks).
///
/// A lookup takes no lock, global or sharded, and writes nothing shared but papaya's
/// per-thread epoch marker, so threads that hit the same key only contend on that key's own
/// word. Each entry is allocated on its own (a table slot points to it). Tables resize in
/// one blocking step: papaya's incremental mode left a table filled by `get_or_insert`
/// mid-migration, with lookups probing about 500 slots (measured: 720 against 110 ns per
/// keyed check at 10^5 keys).
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Keyed, PapayaStore, Quota};
/// use limitcore::clock::ManualClock;
///
/// let keyed: Keyed<u64, Gcra, ManualClock, PapayaStore<u64>> =
///     Keyed::with_store(Quota::per_second(5)?, ManualClock::new(), PapayaStore::new())?;
/// assert!(keyed.try_acquire(&7).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct PapayaStore<K, H = RandomState> {
    map: papaya::HashMap<K, KeySlot, H>,
}

impl<K> PapayaStore<K> {
    /// An empty store hashing with SipHash-1-3 under a random key.
    pub fn new() -> Self {
        PapayaStore::with_hasher(RandomState::new())
    }
}

impl<K, H: BuildHasher> PapayaStore<K, H> {
    /// An empty store hashing keys with `hasher`: a faster hash pays off on keys nobody
    /// hostile chooses (papaya's lookups are bound by cache misses more than by hashing:
    /// measured in `BENCHMARKS.md`, "Keyed throughput").
    pub fn with_hasher(hasher: H) -> Self {
        PapayaStore {
            map: papaya::HashMap::builder()
                .resize_mode(papaya::ResizeMode::Blocking)
                .hasher(hasher)
                .build(),
        }
    }
}

impl<K> Default for PapayaStore<K> {
    fn default() -> Self {
        PapayaStore::new()
    }
}

impl<K: Hash + Eq, H: BuildHasher> fmt::Debug for PapayaStore<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PapayaStore")
            .field("len", &self.map.len())
            .finish()
    }
}

impl<K, H> sealed::Sealed for PapayaStore<K, H> {}

impl<K: Hash + Eq + Clone, H: BuildHasher> Store<K> for PapayaStore<K, H> {
    fn len(&self) -> usize {
        self.map.len()
    }

    #[inline]
    fn with_slot<R>(&self, key: &K, f: impl FnOnce(&KeySlot) -> R) -> Option<R> {
        self.map.pin().get(key).map(f)
    }

    fn with_slot_or_insert<R>(
        &self,
        key: &K,
        make: impl FnOnce() -> KeySlot,
        f: impl FnOnce(&KeySlot) -> R,
    ) -> R {
        f(self.map.pin().get_or_insert_with(key.clone(), make))
    }

    fn remove_retired(&self, key: &K) -> bool {
        matches!(
            self.map.pin().remove_if(key, |_, s| s.is_retired()),
            Ok(Some(_))
        )
    }

    fn retire_each(&self, mut retire: impl FnMut(&KeySlot) -> bool) -> usize {
        let map = self.map.pin();
        map.iter()
            .filter(|&(key, slot)| {
                retire(slot) && matches!(map.remove_if(key, |_, s| s.is_retired()), Ok(Some(_)))
            })
            .count()
    }
}

/// A [`Store`] on `dashmap` (feature `dashmap`): a sharded hash map whose entries sit inline
/// in each shard's table, behind one reader-writer lock per shard, hashing keys with `H`
/// (default: std's `RandomState`, SipHash-1-3 with a random key).
///
/// A lookup is one cache miss cheaper than [`PapayaStore`]'s, so one thread over many keys
/// runs faster, but every lookup takes its shard's lock for reading (two atomic
/// read-modify-writes on the lock's word), so threads that hit keys in the same shard
/// contend on that word. Eviction sweeps take each shard's lock for writing, one shard at a
/// time, and retire and remove a slot inside that one critical section.
///
/// # Examples
///
/// ```
/// use limitcore::{DashMapStore, Gcra, Keyed, Quota};
/// use limitcore::clock::ManualClock;
///
/// let keyed: Keyed<u64, Gcra, ManualClock, DashMapStore<u64>> =
///     Keyed::with_store(Quota::per_second(5)?, ManualClock::new(), DashMapStore::new())?;
/// assert!(keyed.try_acquire_n(&7, 5).is_ok());
/// assert!(keyed.try_acquire(&7).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg(feature = "dashmap")]
pub struct DashMapStore<K, H = RandomState> {
    map: dashmap::DashMap<K, KeySlot, H>,
}

#[cfg(feature = "dashmap")]
impl<K: Hash + Eq> DashMapStore<K> {
    /// An empty store hashing with SipHash-1-3 under a random key.
    pub fn new() -> Self {
        DashMapStore::with_hasher(RandomState::new())
    }

    /// An empty store with room for `capacity` keys before it resizes, hashing with
    /// SipHash-1-3 under a random key.
    pub fn with_capacity(capacity: usize) -> Self {
        DashMapStore::with_capacity_and_hasher(capacity, RandomState::new())
    }
}

#[cfg(feature = "dashmap")]
impl<K: Hash + Eq, H: BuildHasher + Clone> DashMapStore<K, H> {
    /// An empty store hashing keys with `hasher`. With inline entries the hash is a
    /// visible part of a lookup (SipHash-1-3 of a `u64` costs about 11–15 ns on the
    /// reference VM): a faster keyed hash pays off on keys nobody hostile chooses.
    pub fn with_hasher(hasher: H) -> Self {
        DashMapStore {
            map: dashmap::DashMap::with_hasher(hasher),
        }
    }

    /// An empty store with room for `capacity` keys before it resizes.
    pub fn with_capacity_and_hasher(capacity: usize, hasher: H) -> Self {
        DashMapStore {
            map: dashmap::DashMap::with_capacity_and_hasher(capacity, hasher),
        }
    }
}

#[cfg(feature = "dashmap")]
impl<K: Hash + Eq> Default for DashMapStore<K> {
    fn default() -> Self {
        DashMapStore::new()
    }
}

#[cfg(feature = "dashmap")]
impl<K: Hash + Eq, H: BuildHasher + Clone> fmt::Debug for DashMapStore<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashMapStore")
            .field("len", &self.map.len())
            .finish()
    }
}

#[cfg(feature = "dashmap")]
impl<K, H> sealed::Sealed for DashMapStore<K, H> {}

#[cfg(feature = "dashmap")]
impl<K: Hash + Eq + Clone, H: BuildHasher + Clone> Store<K> for DashMapStore<K, H> {
    fn len(&self) -> usize {
        self.map.len()
    }

    #[inline]
    fn with_slot<R>(&self, key: &K, f: impl FnOnce(&KeySlot) -> R) -> Option<R> {
        // The shard's read lock is released when the guard drops, before the caller can take
        // the write lock (in `remove_retired`): no call here holds one while taking another.
        self.map.get(key).map(|slot| f(&slot))
    }

    fn with_slot_or_insert<R>(
        &self,
        key: &K,
        make: impl FnOnce() -> KeySlot,
        f: impl FnOnce(&KeySlot) -> R,
    ) -> R {
        // `f` runs under the shard's write lock here (only for a key's first request).
        f(&self.map.entry(key.clone()).or_insert_with(make))
    }

    fn remove_retired(&self, key: &K) -> bool {
        self.map.remove_if(key, |_, s| s.is_retired()).is_some()
    }

    fn retire_each(&self, mut retire: impl FnMut(&KeySlot) -> bool) -> usize {
        let mut removed = 0;
        self.map.retain(|_, slot| {
            // A slot retired here is removed at once, inside the shard's write lock, so no
            // reader ever holds it.
            let gone = retire(slot);
            removed += usize::from(gone);
            !gone
        });
        removed
    }
}
