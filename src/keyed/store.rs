//! The maps a [`Keyed`](crate::Keyed) limiter can keep its per-key states in: [`Store`],
//! [`DashMapStore`] (the default) and [`PapayaStore`], and the hasher both use unless given
//! another, [`KeyHasher`].
//!
//! A store knows nothing of rates: it finds a key's slot, inserts one, and removes a slot
//! when [`Keyed`](crate::Keyed) says it is retired (see [`cell`](crate::cell)'s
//! "Orderings"). A store type is a *kind* of map with its settings (the hasher, a
//! capacity); `Keyed` builds its maps itself, for its own slot types. Both maps publish a
//! new entry with their own release/acquire protocol, so a slot's initial content is
//! visible to every thread that finds the slot; every later change of the state goes
//! through the slot's own cell.
//!
//! # Which to use
//!
//! Measured against governor's keyed limiter (dashmap, SipHash) in the same runs
//! (`BENCHMARKS.md`, "Keyed throughput", "Keyed first requests" and "Keyed memory"; 2 cores,
//! `Keyed<u64, GcraRule>`, checks per second ÷ governor's, the spread over three runs; bytes
//! per key at 10^6 `u64` keys):
//!
//! | store, hasher | 1 key, 1 thread | 1 key, 2 threads | 10^5 keys, 1 thread | 10^5 keys, 2 threads | first requests | bytes/key at 10^6 |
//! |---|---:|---:|---:|---:|---:|---:|
//! | **`DashMapStore`, `KeyHasher` (default)** | **1.26–1.33** | **1.66–3.74** | **1.13–1.24** | **1.05–1.08** | **1.20–1.29** | **35.7** (governor's: 35.7) |
//! | `DashMapStore`, SipHash | 0.96–0.99 | 1.34–2.38 | 0.93–1.01 | 0.97–0.99 | 0.90–1.02 | 35.7 |
//! | `PapayaStore`, `KeyHasher` | 1.19–1.34 | 1.66–3.56 | 0.67–0.80 | 1.51–1.56 | 0.77–0.85 | 53.8 |
//!
//! - **The default, [`DashMapStore`] with [`KeyHasher`]**, is the one that is at least
//!   governor's in every cell, and at most its memory: one thread per core serving many
//!   clients (a proxy) or a few hot ones. Its entries sit inline in dashmap's shards, the key
//!   and the state word only (16 bytes for a `u64` key: governor's layout), so a lookup is
//!   two dependent cache misses, as governor's; the faster hash is what puts it ahead.
//!   The one cell it only just leads is 10^5 keys from 2 threads: every lookup takes its
//!   shard's read lock, whose cache line the two cores pass back and forth (governor pays
//!   the same).
//! - [`PapayaStore`] takes no lock at all on a lookup, so it is the fastest when threads
//!   share keys (10^5 keys from 2 threads: 1.5× governor's, the best of the three), at half
//!   as much memory again (each entry is allocated on its own, behind a pointer: one cache
//!   miss more, the slowest for one thread over many keys and for first requests).
//!   **A flood from one client on many cores** (one key refused from every thread) is where
//!   it leads most: a refusal writes nothing, so the cores never pass a line between them
//!   (2.7–3.3× governor's on 2 threads, `limitcore bench --contenders keyed-hot-papaya`),
//!   while the default store takes the shard's read lock there as governor does, two
//!   read-modify-writes on one line per decision (0.51–0.96× governor's in the same runs:
//!   which side the line's traffic favours changes from run to run). Choose it for a proxy
//!   that must keep refusing one abusive client at full speed on every core.
//! - SipHash-1-3 (std's `RandomState`, designed as a cryptographic PRF under a random key:
//!   governor's hash) is available through `DashMapStore::with_hasher`; it costs about
//!   12–13 ns a lookup (26 on a first request, which hashes twice), which brings the dashmap
//!   store down to governor's speed (the same map, hash and entry size): 0.93–1.02× in every
//!   cell but the hot key from 2 threads.
//!
//! Memory is the same for any hasher, and the default's is governor's to the byte for the
//! same keys (a redirected key aside): 35.7 bytes per `u64` key, 52.4 per `Ipv6Addr` (16
//! bytes, alignment 1: 24-byte entries), 69.2 per `u128` (alignment 16: 32-byte entries), at
//! 10^6 keys; `PapayaStore` 53.8, 61.8 and 69.8.

use core::borrow::Borrow;
use core::fmt;
use core::hash::Hasher;
use core::hash::{BuildHasher, Hash};

/// The hasher of [`DashMapStore`] and [`PapayaStore`] unless given another: aHash (the
/// `ahash` crate) under keys drawn at random for each map.
///
/// # Keys an attacker chooses
///
/// A client that picks its own keys (an address, a user name) can degrade a hash map only by
/// sending many keys that land in the same buckets, which takes knowing the hash function
/// *with its keys*. aHash is a keyed hash: each `KeyHasher` takes fresh keys (aHash's
/// `RandomState::new`: a process-wide secret drawn from the operating system's generator,
/// mixed with a per-instance counter and address), the map's hashes are never shown to a
/// client, and without the keys the bucket of a key cannot be predicted (aHash's authors'
/// design argument: its README, "Design", and FAQ). That is the same defence as std's
/// `RandomState` (SipHash-1-3 under a random key), with a weaker primitive: aHash is not a
/// cryptographic PRF, SipHash is designed as one. For that margin, pass std's `RandomState`
/// to [`DashMapStore::with_hasher`] and pay about 12–13 ns a lookup (see "Which to use").
/// (On x86-64 aHash uses AES rounds only when built with the `aes` target feature; a default
/// build runs its fallback, built on folded 64×64→128-bit multiplications, measured above.)
///
/// # Examples
///
/// ```
/// use limitcore::{DashMapStore, KeyHasher, Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// // What `Keyed::with_clock` builds.
/// let keyed: Keyed<u64, GcraRule, ManualClock, DashMapStore<u64, KeyHasher>> =
///     Keyed::with_store(Quota::per_second(5)?, ManualClock::new(), DashMapStore::new())?;
/// assert!(keyed.try_acquire(&7).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
#[derive(Clone)]
pub struct KeyHasher(ahash::RandomState);

impl KeyHasher {
    /// A hasher under fresh random keys.
    pub fn new() -> Self {
        KeyHasher(ahash::RandomState::new())
    }
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher::new()
    }
}

impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys are the defence: never printed.
        f.debug_struct("KeyHasher").finish_non_exhaustive()
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = KeyHash;

    #[inline]
    fn build_hasher(&self) -> KeyHash {
        KeyHash(self.0.build_hasher())
    }
}

/// The hasher of one key, built by [`KeyHasher`].
///
/// # Examples
///
/// ```
/// use limitcore::KeyHasher;
/// use std::hash::BuildHasher;
///
/// let hasher = KeyHasher::new();
/// assert_eq!(hasher.hash_one(42u64), hasher.hash_one(42u64)); // one map, one function
/// ```
#[derive(Clone)]
pub struct KeyHash(ahash::AHasher);

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHash").finish_non_exhaustive()
    }
}

impl Hasher for KeyHash {
    #[inline]
    fn finish(&self) -> u64 {
        self.0.finish()
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.0.write_u8(i)
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.0.write_u16(i)
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.0.write_u32(i)
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0.write_u64(i)
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.0.write_u128(i)
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.0.write_usize(i)
    }
}

/// A kind of concurrent map for [`Keyed`](crate::Keyed)'s `S` parameter, with its settings:
/// [`DashMapStore`] (the default) or [`PapayaStore`]; see the module's "Which to use".
///
/// Sealed: the maps' protocols with the crate's eviction are the crate's own.
///
/// # Examples
///
/// Code that takes any `Keyed`, whatever its store:
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
/// use limitcore::{Keyed, PapayaStore, Quota, Store};
///
/// fn admit_all<S: Store<u32>>(keyed: &Keyed<u32, GcraRule, ManualClock, S>, keys: &[u32]) -> usize {
///     keys.iter().filter(|k| keyed.try_acquire(*k).is_ok()).count()
/// }
///
/// let keyed: Keyed<u32, GcraRule, ManualClock, PapayaStore<u32>> =
///     Keyed::with_store(Quota::per_second(1)?, ManualClock::new(), PapayaStore::new())?;
/// assert_eq!(admit_all(&keyed, &[1, 2, 1]), 2); // key 1's second request waits 1 s
/// assert_eq!(keyed.len(), 2);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub trait Store<K>: sealed::Maps<K> {}

impl<K, S: sealed::Maps<K>> Store<K> for S {}

pub(crate) mod sealed {
    use core::borrow::Borrow;
    use core::hash::Hash;

    /// The map operations `Keyed` uses (see the module). In a private module: not callable
    /// outside the crate.
    pub trait Maps<K>: Send + Sync + Sized + 'static {
        /// The map of slots `V` by key.
        type Map<V: Send + Sync + 'static>: Send + Sync;

        /// The main map (with the store's settings, a capacity too).
        fn build<V: Send + Sync + 'static>(&self) -> Self::Map<V>;

        /// A side map for a few keys: the store's hasher, no capacity reserved.
        fn build_side<V: Send + Sync + 'static>(&self) -> Self::Map<V>;

        /// How many keys have a slot (live, or retired and not yet removed).
        fn len<V: Send + Sync + 'static>(map: &Self::Map<V>) -> usize;

        /// `f` applied to `key`'s slot, if it has one.
        fn with_slot<V, Q, T>(map: &Self::Map<V>, key: &Q, f: impl FnOnce(&V) -> T) -> Option<T>
        where
            V: Send + Sync + 'static,
            K: Borrow<Q>,
            Q: Hash + Eq + ?Sized;

        /// `f` applied to `key`'s slot, inserting `make()` first if it has none.
        fn with_slot_or_insert<V, Q, T>(
            map: &Self::Map<V>,
            key: &Q,
            make: impl FnOnce() -> V,
            f: impl FnOnce(&V) -> T,
        ) -> T
        where
            V: Send + Sync + 'static,
            K: Borrow<Q>,
            Q: Hash + Eq + ToOwned<Owned = K> + ?Sized;

        /// Insert `value` for `key`, replacing the value it had.
        fn insert<V: Send + Sync + 'static>(map: &Self::Map<V>, key: K, value: V);

        /// Remove `key`'s slot if `retired` says it is; whether this call removed it.
        fn remove_if<V, Q>(map: &Self::Map<V>, key: &Q, retired: impl Fn(&V) -> bool) -> bool
        where
            V: Send + Sync + 'static,
            K: Borrow<Q>,
            Q: Hash + Eq + ?Sized;

        /// Offer every slot to `retire` (which retires it or leaves it as it is, returning
        /// whether it is retired) and remove the retired ones; how many this call removed.
        /// `retired` tells a retired slot, for maps that must check again before removing.
        fn retire_each<V: Send + Sync + 'static>(
            map: &Self::Map<V>,
            retire: impl FnMut(&V) -> bool,
            retired: impl Fn(&V) -> bool,
        ) -> usize;
    }
}

/// A [`Store`] on `papaya`'s lock-free hash map, hashing keys with `H` (default:
/// [`KeyHasher`]).
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
/// use limitcore::{Keyed, PapayaStore, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let keyed: Keyed<u64, GcraRule, ManualClock, PapayaStore<u64>> =
///     Keyed::with_store(Quota::per_second(5)?, ManualClock::new(), PapayaStore::new())?;
/// assert!(keyed.try_acquire(&7).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub struct PapayaStore<K, H = KeyHasher> {
    hasher: H,
    _key: core::marker::PhantomData<fn(K)>,
}

impl<K> PapayaStore<K> {
    /// A store hashing with [`KeyHasher`] under fresh random keys.
    pub fn new() -> Self {
        PapayaStore::with_hasher(KeyHasher::new())
    }
}

impl<K, H: BuildHasher + Clone> PapayaStore<K, H> {
    /// A store hashing keys with `hasher`: a faster hash pays off on keys nobody hostile
    /// chooses (papaya's lookups are bound by cache misses more than by hashing: measured in
    /// `BENCHMARKS.md`, "Keyed throughput").
    pub fn with_hasher(hasher: H) -> Self {
        PapayaStore {
            hasher,
            _key: core::marker::PhantomData,
        }
    }
}

impl<K> Default for PapayaStore<K> {
    fn default() -> Self {
        PapayaStore::new()
    }
}

impl<K, H> fmt::Debug for PapayaStore<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PapayaStore").finish_non_exhaustive()
    }
}

impl<K, H> sealed::Maps<K> for PapayaStore<K, H>
where
    K: Hash + Eq + Send + Sync + 'static,
    H: BuildHasher + Clone + Send + Sync + 'static,
{
    type Map<V: Send + Sync + 'static> = papaya::HashMap<K, V, H>;

    fn build<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        papaya::HashMap::builder()
            .resize_mode(papaya::ResizeMode::Blocking)
            .hasher(self.hasher.clone())
            .build()
    }

    fn build_side<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        self.build()
    }

    fn len<V: Send + Sync + 'static>(map: &Self::Map<V>) -> usize {
        map.len()
    }

    #[inline]
    fn with_slot<V, Q, T>(map: &Self::Map<V>, key: &Q, f: impl FnOnce(&V) -> T) -> Option<T>
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        map.pin().get(key).map(f)
    }

    fn with_slot_or_insert<V, Q, T>(
        map: &Self::Map<V>,
        key: &Q,
        make: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> T,
    ) -> T
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        f(map.pin().get_or_insert_with(key.to_owned(), make))
    }

    fn insert<V: Send + Sync + 'static>(map: &Self::Map<V>, key: K, value: V) {
        map.pin().insert(key, value);
    }

    fn remove_if<V, Q>(map: &Self::Map<V>, key: &Q, retired: impl Fn(&V) -> bool) -> bool
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        matches!(map.pin().remove_if(key, |_, v| retired(v)), Ok(Some(_)))
    }

    fn retire_each<V: Send + Sync + 'static>(
        map: &Self::Map<V>,
        mut retire: impl FnMut(&V) -> bool,
        retired: impl Fn(&V) -> bool,
    ) -> usize {
        let map = map.pin();
        map.iter()
            .filter(|&(key, slot)| {
                retire(slot) && matches!(map.remove_if(key, |_, v| retired(v)), Ok(Some(_)))
            })
            .count()
    }
}

/// The default [`Store`]: `dashmap`, a sharded hash map whose entries sit inline in each
/// shard's table, behind one reader-writer lock per shard, hashing keys with `H` (default:
/// [`KeyHasher`]).
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
/// use limitcore::{DashMapStore, Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let keyed: Keyed<u64, GcraRule, ManualClock, DashMapStore<u64>> =
///     Keyed::with_store(Quota::per_second(5)?, ManualClock::new(), DashMapStore::new())?;
/// assert!(keyed.try_acquire_n(&7, 5).is_ok());
/// assert!(keyed.try_acquire(&7).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub struct DashMapStore<K, H = KeyHasher> {
    hasher: H,
    capacity: usize,
    _key: core::marker::PhantomData<fn(K)>,
}

impl<K> DashMapStore<K> {
    /// A store hashing with [`KeyHasher`] under fresh random keys.
    pub fn new() -> Self {
        DashMapStore::with_hasher(KeyHasher::new())
    }

    /// A store with room for `capacity` keys before it resizes, hashing with [`KeyHasher`].
    pub fn with_capacity(capacity: usize) -> Self {
        DashMapStore::with_capacity_and_hasher(capacity, KeyHasher::new())
    }
}

impl<K, H: BuildHasher + Clone> DashMapStore<K, H> {
    /// A store hashing keys with `hasher`. With inline entries the hash is a visible part of
    /// a lookup (SipHash-1-3 of a `u64` costs about 11–15 ns on the reference VM): a faster
    /// keyed hash pays off on keys nobody hostile chooses.
    pub fn with_hasher(hasher: H) -> Self {
        DashMapStore::with_capacity_and_hasher(0, hasher)
    }

    /// A store with room for `capacity` keys before it resizes.
    pub fn with_capacity_and_hasher(capacity: usize, hasher: H) -> Self {
        DashMapStore {
            hasher,
            capacity,
            _key: core::marker::PhantomData,
        }
    }
}

impl<K> Default for DashMapStore<K> {
    fn default() -> Self {
        DashMapStore::new()
    }
}

impl<K, H> fmt::Debug for DashMapStore<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashMapStore")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<K, H> sealed::Maps<K> for DashMapStore<K, H>
where
    K: Hash + Eq + Send + Sync + 'static,
    H: BuildHasher + Clone + Send + Sync + 'static,
{
    type Map<V: Send + Sync + 'static> = dashmap::DashMap<K, V, H>;

    fn build<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        dashmap::DashMap::with_capacity_and_hasher(self.capacity, self.hasher.clone())
    }

    fn build_side<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        dashmap::DashMap::with_hasher(self.hasher.clone())
    }

    fn len<V: Send + Sync + 'static>(map: &Self::Map<V>) -> usize {
        map.len()
    }

    #[inline]
    fn with_slot<V, Q, T>(map: &Self::Map<V>, key: &Q, f: impl FnOnce(&V) -> T) -> Option<T>
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // The shard's read lock is released when the guard drops, before the caller can take
        // the write lock (in `remove_if`): no call here holds one while taking another.
        map.get(key).map(|slot| f(&slot))
    }

    fn with_slot_or_insert<V, Q, T>(
        map: &Self::Map<V>,
        key: &Q,
        make: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> T,
    ) -> T
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        // `f` runs under the shard's write lock here (only for a key's first request).
        f(&map.entry(key.to_owned()).or_insert_with(make))
    }

    fn insert<V: Send + Sync + 'static>(map: &Self::Map<V>, key: K, value: V) {
        map.insert(key, value);
    }

    fn remove_if<V, Q>(map: &Self::Map<V>, key: &Q, retired: impl Fn(&V) -> bool) -> bool
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        map.remove_if(key, |_, v| retired(v)).is_some()
    }

    fn retire_each<V: Send + Sync + 'static>(
        map: &Self::Map<V>,
        mut retire: impl FnMut(&V) -> bool,
        _retired: impl Fn(&V) -> bool,
    ) -> usize {
        let mut removed = 0;
        map.retain(|_, slot| {
            // A slot retired here is removed at once, inside the shard's write lock, so no
            // reader ever holds it.
            let gone = retire(slot);
            removed += usize::from(gone);
            !gone
        });
        removed
    }
}

/// A [`Store`] that loom can see into (only under `--cfg limitcore_loom`, for the models in
/// `loom-tests`): a `loom::sync::Mutex` around a `HashMap` (with a fixed hasher, so that
/// every execution iterates in the same order) of `Arc`ed slots.
///
/// Each map operation is one critical section, a point where loom can switch threads, and
/// the lock's release/acquire is what publishes a new slot to the threads that find it (the
/// real maps' own publication, which loom cannot see in papaya or dashmap). As in
/// [`PapayaStore`], a slot is used outside the map's lock (a thread may hold a slot that has
/// been removed meanwhile), and a sweep retires each slot it met in a snapshot of the map
/// before removing it in a critical section of its own, so the models explore requests
/// between an eviction's retirement and its removal.
#[cfg(limitcore_loom)]
pub struct LoomStore<K> {
    _key: core::marker::PhantomData<fn(K)>,
}

#[cfg(limitcore_loom)]
impl<K> LoomStore<K> {
    /// The store.
    pub fn new() -> Self {
        LoomStore {
            _key: core::marker::PhantomData,
        }
    }
}

#[cfg(limitcore_loom)]
impl<K> Default for LoomStore<K> {
    fn default() -> Self {
        LoomStore::new()
    }
}

#[cfg(limitcore_loom)]
impl<K> fmt::Debug for LoomStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoomStore").finish_non_exhaustive()
    }
}

#[cfg(limitcore_loom)]
type LoomMap<K, V> = crate::sync::Mutex<
    std::collections::HashMap<
        K,
        std::sync::Arc<V>,
        core::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>,
    >,
>;

#[cfg(limitcore_loom)]
impl<K> sealed::Maps<K> for LoomStore<K>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    type Map<V: Send + Sync + 'static> = LoomMap<K, V>;

    fn build<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        crate::sync::Mutex::new(Default::default())
    }

    fn build_side<V: Send + Sync + 'static>(&self) -> Self::Map<V> {
        self.build()
    }

    fn len<V: Send + Sync + 'static>(map: &Self::Map<V>) -> usize {
        crate::sync::lock(map).len()
    }

    fn with_slot<V, Q, T>(map: &Self::Map<V>, key: &Q, f: impl FnOnce(&V) -> T) -> Option<T>
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = crate::sync::lock(map).get(key).cloned();
        slot.map(|slot| f(&slot))
    }

    fn with_slot_or_insert<V, Q, T>(
        map: &Self::Map<V>,
        key: &Q,
        make: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> T,
    ) -> T
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let slot = crate::sync::lock(map)
            .entry(key.to_owned())
            .or_insert_with(|| std::sync::Arc::new(make()))
            .clone();
        f(&slot)
    }

    fn insert<V: Send + Sync + 'static>(map: &Self::Map<V>, key: K, value: V) {
        crate::sync::lock(map).insert(key, std::sync::Arc::new(value));
    }

    fn remove_if<V, Q>(map: &Self::Map<V>, key: &Q, retired: impl Fn(&V) -> bool) -> bool
    where
        V: Send + Sync + 'static,
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut map = crate::sync::lock(map);
        let gone = map.get(key).is_some_and(|slot| retired(slot));
        if gone {
            map.remove(key);
        }
        gone
    }

    fn retire_each<V: Send + Sync + 'static>(
        map: &Self::Map<V>,
        mut retire: impl FnMut(&V) -> bool,
        retired: impl Fn(&V) -> bool,
    ) -> usize {
        let entries: Vec<(K, std::sync::Arc<V>)> = crate::sync::lock(map)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        entries
            .into_iter()
            .filter(|(key, slot)| retire(slot) && Self::remove_if(map, key, &retired))
            .count()
    }
}
