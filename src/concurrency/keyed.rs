//! [`KeyedPermits`]: a concurrency limit per key (client, tenant), in bounded memory, on the
//! maps of [`Keyed`](crate::Keyed) ([`Store`]).

use super::error::{AcquireError, LimitError, Refusal};
use super::permit::{Permit, Token};
use super::permits::{Order, OwnedPermit, Permits};
use super::word::{check_limit, PermitWord};
use crate::clock::instant_within;
use crate::keyed::{DashMapStore, Store};
use crate::sync::{AtomicU64, Ordering};
use alloc::sync::Arc;
use core::borrow::Borrow;
use core::fmt;
use core::hash::Hash;
use core::time::Duration;
use std::time::Instant;

/// A key's state in the map: its own limit, shared with the permits it gave out.
type Slot = Arc<Permits>;

/// One concurrency limit per key (a client, a tenant), created on first use with the
/// default limit, with per-key limits and bounded memory, in the style of
/// [`Keyed`](crate::Keyed) and on the same maps ([`Store`]; default [`DashMapStore`]).
///
/// Each key's state is a [`Permits`] (its word, its queue); a permit is an
/// [`OwnedPermit`] on it, so it stays valid whatever happens to the map.
///
/// # Contract
///
/// - Per key, exactly [`Permits`]' contract: at most the key's limit in flight (except just
///   after a cut), FIFO or LIFO waiters with the given backlog, cancellation-safe waits.
/// - **Eviction never changes a decision.** A key's state is removed only when it is idle
///   (nothing in flight, nobody waiting, no limit of its own), when it is exactly a fresh
///   state. Removal first *retires* the word (one compare-and-swap to the reserved word;
///   every grant's CAS expects the word it decided on, so exactly one of "a grant" and "the
///   retirement" wins), and a request that meets a retired word looks the key up again:
///   no key ever has two live states, and no permit is granted on a removed one (the
///   protocol of `crate::cell`'s "Orderings of the retirement protocol", on this word).
/// - **Bounded memory.** Idle keys are swept automatically, at most once per
///   `max(1024, keys)` arrivals of new keys (each sweep visits every key, so the cost is
///   amortised to O(1) per arrival), and on demand by [`KeyedPermits::evict_idle`]. With
///   [`KeyedPermits::with_max_keys`], once the map holds that many keys, new keys share one
///   **overflow** limit with the default limit instead of getting their own (a flood of new
///   keys is limited as one client; no existing key is dropped to make room). The bound is
///   soft by at most the number of threads inserting at the same instant.
/// - **Per-key limits.** [`KeyedPermits::reconfigure_key`] changes the key's limit (with
///   [`Permits::reconfigure`]'s semantics) and pins it: it is never evicted, so the limit is never
///   forgotten, and it always gets an entry (the key bound does not apply to it).
///   [`KeyedPermits::reset_limit`] gives it back the default limit and unpins it.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::KeyedPermits;
///
/// let per_tenant: KeyedPermits<String> = KeyedPermits::new(2)?;
/// let a = per_tenant.try_acquire("acme", 2)?;
/// assert!(per_tenant.try_acquire("acme", 1).is_err());   // acme's 2 are in flight
/// let b = per_tenant.try_acquire("globex", 1)?;          // another key, its own limit
/// assert_eq!(per_tenant.len(), 2);
/// drop((a, b));
/// assert_eq!(per_tenant.evict_idle(), 2);                // both idle: removed
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub struct KeyedPermits<K, S: Store<K> = DashMapStore<K>> {
    map: S::Map<Slot>,
    /// The default limit's fresh word.
    fresh: PermitWord,
    backlog: Option<u32>,
    order: Order,
    max_keys: usize,
    /// The shared state of new keys refused an entry of their own; never retired.
    overflow: Slot,
    /// New keys seen (a count that paces the sweeps).
    arrivals: AtomicU64,
    /// The arrival count at which the next sweep runs (`u64::MAX` while one runs).
    next_sweep: AtomicU64,
}

impl<K, S: Store<K>> fmt::Debug for KeyedPermits<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPermits")
            .field("limit", &self.fresh.limit())
            .field("keys", &S::len(&self.map))
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

/// Arrivals of new keys between two sweeps, at least.
const SWEEP_EVERY: u64 = 1024;

impl<K: Hash + Eq + Send + Sync + 'static> KeyedPermits<K> {
    /// A limit of `limit` permits per key, on the default store ([`DashMapStore`]).
    ///
    /// # Errors
    ///
    /// As [`Permits::new`].
    pub fn new(limit: u32) -> Result<Self, LimitError> {
        KeyedPermits::with_store(limit, DashMapStore::new())
    }
}

impl<K: Hash + Eq + Send + Sync + 'static, S: Store<K>> KeyedPermits<K, S> {
    /// A limit of `limit` permits per key, keeping the states in a map of kind `store`.
    ///
    /// # Errors
    ///
    /// As [`Permits::new`].
    pub fn with_store(limit: u32, store: S) -> Result<Self, LimitError> {
        let fresh = PermitWord::new(limit)?;
        Ok(KeyedPermits {
            map: store.build(),
            fresh,
            backlog: None,
            order: Order::Fifo,
            max_keys: usize::MAX,
            overflow: Arc::new(Permits::keyed_state(fresh, None, Order::Fifo)),
            arrivals: AtomicU64::new(0),
            next_sweep: AtomicU64::new(SWEEP_EVERY),
        })
    }

    /// Bound the number of keys with a state of their own (see "Bounded memory").
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Let at most `backlog` requests wait per key (and on the overflow state).
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroBacklog`] for 0.
    pub fn with_backlog(mut self, backlog: u32) -> Result<Self, LimitError> {
        if backlog == 0 {
            return Err(LimitError::ZeroBacklog);
        }
        self.backlog = Some(backlog);
        self.overflow = Arc::new(Permits::keyed_state(self.fresh, self.backlog, self.order));
        Ok(self)
    }

    /// Serve each key's waiters in `order` (default FIFO).
    pub fn with_order(mut self, order: Order) -> Self {
        self.order = order;
        self.overflow = Arc::new(Permits::keyed_state(self.fresh, self.backlog, order));
        self
    }

    /// The default limit.
    pub fn default_limit(&self) -> u32 {
        self.fresh.limit()
    }

    /// How many keys have a state in the map.
    pub fn len(&self) -> usize {
        S::len(&self.map)
    }

    /// Whether no key has a state in the map.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `key`'s limit (the default for a key without a state).
    pub fn limit<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // A retired state is a fresh one.
        S::with_slot(&self.map, key, |slot| {
            (!slot.is_retired()).then(|| slot.limit())
        })
        .flatten()
        .unwrap_or(self.fresh.limit())
    }

    /// Permits `key` holds (0 for a key without a state).
    pub fn in_flight<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        S::with_slot(&self.map, key, |slot| {
            if slot.is_retired() {
                0
            } else {
                slot.in_flight()
            }
        })
        .unwrap_or(0)
    }

    /// Take `n` permits for `key` now if they fit and nobody of the key waits.
    ///
    /// # Errors
    ///
    /// As [`Permits::try_acquire`], for the key's limit.
    pub fn try_acquire<Q>(&self, key: &Q, n: u32) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n == 0 {
            return Ok(Permit::new(self.overflow.clone(), Token::EMPTY));
        }
        // Only a grant clones the key's `Arc`: a refusal costs the lookup and one CAS.
        let attempt = move |slot: &Slot| slot.take(n).map(|token| Permit::new(slot.clone(), token));
        loop {
            let outcome = match S::with_slot(&self.map, key, attempt) {
                Some(outcome) => outcome,
                None if self.room_for_new_key() => {
                    S::with_slot_or_insert(&self.map, key, || self.new_state(), attempt)
                }
                None => attempt(&self.overflow),
            };
            match outcome {
                Ok(permit) => return Ok(permit),
                Err(Refusal::Denied(e)) => return Err(e),
                Err(Refusal::Gone) => self.remove_retired(key),
            }
        }
    }

    /// Take `n` permits for `key`, blocking until they are granted.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking`], for the key's limit.
    pub fn acquire_blocking<Q>(&self, key: &Q, n: u32) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_blocking_until(key, n, None)
    }

    /// Take `n` permits for `key`, blocking until they are granted or `max_wait` has passed.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`], for the key's limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::{AcquireError, KeyedPermits};
    /// use std::time::Duration;
    ///
    /// let per_client: KeyedPermits<u64> = KeyedPermits::new(1)?;
    /// let _held = per_client.acquire_blocking(&7, 1)?;
    /// let late = per_client.acquire_blocking_within(&7, 1, Duration::from_millis(5));
    /// assert_eq!(late.unwrap_err(), AcquireError::TimedOut);
    /// assert!(per_client.acquire_blocking_within(&8, 1, Duration::ZERO).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_within<Q>(
        &self,
        key: &Q,
        n: u32,
        max_wait: Duration,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_blocking_until(key, n, instant_within(max_wait))
    }

    /// Take `n` permits for `key`, blocking until they are granted or `deadline` passes
    /// (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`], for the key's limit.
    pub fn acquire_blocking_until<Q>(
        &self,
        key: &Q,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            let mut wait = self.slot(key).wait_owned(n, deadline);
            match wait.outcome_blocking() {
                Ok(token) => return Ok(Permit::new(Arc::clone(wait.limiter()), token)),
                Err(Refusal::Denied(e)) => return Err(e),
                Err(Refusal::Gone) => self.remove_retired(key),
            }
        }
    }

    /// Take `n` permits for `key`, waiting (asynchronously) until they are granted. Dropping
    /// the future before it resolves takes nothing.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire`], for the key's limit.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::KeyedPermits;
    ///
    /// let per_client: KeyedPermits<u64> = KeyedPermits::new(1)?;
    /// let permit = per_client.acquire(&7, 1).await?;
    /// assert_eq!(per_client.in_flight(&7), 1);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire<Q>(&self, key: &Q, n: u32) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.wait(key, n, None).await
    }

    /// The async wait for `n` permits for `key` by `deadline` (the key's limit's
    /// [`AcquireOwned`](super::AcquireOwned), again on a fresh state if the key's was retired
    /// meanwhile).
    async fn wait<Q>(
        &self,
        key: &Q,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            let mut wait = self.slot(key).wait_owned(n, deadline);
            match core::future::poll_fn(|cx| wait.poll_outcome(cx)).await {
                Ok(token) => return Ok(Permit::new(Arc::clone(wait.limiter()), token)),
                Err(Refusal::Denied(e)) => return Err(e),
                Err(Refusal::Gone) => self.remove_retired(key),
            }
        }
    }

    /// Give `key` a limit of its own (see "Per-key limits"): its state takes it at once if
    /// it has one (as [`Permits::reconfigure`]), and is pinned.
    ///
    /// # Errors
    ///
    /// As [`Permits::reconfigure`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::KeyedPermits;
    ///
    /// let per_client: KeyedPermits<u64> = KeyedPermits::new(1)?;
    /// per_client.reconfigure_key(7, 3)?;
    /// assert_eq!((per_client.limit(&7), per_client.limit(&8)), (3, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure_key(&self, key: K, limit: u32) -> Result<(), LimitError>
    where
        K: Clone,
    {
        let limit = check_limit(limit)?;
        loop {
            let slot = S::with_slot_or_insert(&self.map, &key, || self.new_state(), Arc::clone);
            match slot.set_limit(limit, Some(true)) {
                Ok(()) => return Ok(()),
                Err(_) => self.remove_retired(&key),
            }
        }
    }

    /// Give `key` the default limit back and unpin it (it is evicted once idle).
    pub fn reset_limit<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(slot) = S::with_slot(&self.map, key, Arc::clone) {
            // A retired state is fresh already: nothing to reset.
            let _ = slot.set_limit(self.fresh.limit(), Some(false));
        }
    }

    /// Remove every idle key (nothing in flight, nobody waiting, no limit of its own);
    /// returns how many were removed.
    pub fn evict_idle(&self) -> usize {
        S::retire_each(
            &self.map,
            |slot| slot.retire_if_idle(),
            |slot| slot.is_retired(),
        )
    }

    /// `key`'s state, created if it has none (the overflow state at the key bound).
    fn slot<Q>(&self, key: &Q) -> Slot
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(slot) = S::with_slot(&self.map, key, Arc::clone) {
            return slot;
        }
        if self.room_for_new_key() {
            S::with_slot_or_insert(&self.map, key, || self.new_state(), Arc::clone)
        } else {
            self.overflow.clone()
        }
    }

    fn new_state(&self) -> Slot {
        Arc::new(Permits::keyed_state(self.fresh, self.backlog, self.order))
    }

    /// Help remove a retired state before looking the key up again.
    fn remove_retired<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        S::remove_if(&self.map, key, |slot| slot.is_retired());
    }

    /// Whether a new key may get a state of its own, sweeping first if it is time to.
    fn room_for_new_key(&self) -> bool {
        // Relaxed: a count that only paces the sweeps; nothing is published through it.
        let arrivals = self.arrivals.fetch_add(1, Ordering::Relaxed) + 1;
        // Relaxed: `next_sweep` only elects one sweeper at a time; the CAS decides who,
        // and the sweep synchronises through each state's own word.
        let due = self.next_sweep.load(Ordering::Relaxed);
        if arrivals >= due
            && self
                .next_sweep
                .compare_exchange(due, u64::MAX, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.evict_idle();
            let keys = S::len(&self.map) as u64;
            // Relaxed: its partners are the other arrivals' load and CAS above, which only
            // elect the next sweeper; until this store (after `u64::MAX`) none is elected.
            self.next_sweep.store(
                arrivals.saturating_add(keys.max(SWEEP_EVERY)),
                Ordering::Relaxed,
            );
        }
        self.max_keys == usize::MAX || S::len(&self.map) < self.max_keys
    }
}

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<K: Hash + Eq + Send + Sync + 'static, S: Store<K>> KeyedPermits<K, S> {
    /// [`KeyedPermits::acquire`] that gives up once `max_wait` has passed (feature `tokio`:
    /// the future sleeps towards its deadline on tokio's timer).
    ///
    /// # Errors
    ///
    /// As [`KeyedPermits::acquire`], and [`AcquireError::TimedOut`] after `max_wait`, with
    /// nothing taken.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::{AcquireError, KeyedPermits};
    /// use std::time::Duration;
    ///
    /// let per_client: KeyedPermits<u64> = KeyedPermits::new(1)?;
    /// let _held = per_client.acquire(&7, 1).await?;
    /// let late = per_client.acquire_within(&7, 1, Duration::from_millis(5)).await;
    /// assert_eq!(late.unwrap_err(), AcquireError::TimedOut);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_within<Q>(
        &self,
        key: &Q,
        n: u32,
        max_wait: Duration,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.wait(key, n, instant_within(max_wait)).await
    }

    /// [`KeyedPermits::acquire`] that gives up at `deadline` (`None`: none; feature
    /// `tokio`).
    ///
    /// # Errors
    ///
    /// As [`KeyedPermits::acquire_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::KeyedPermits;
    ///
    /// let per_client: KeyedPermits<u64> = KeyedPermits::new(1)?;
    /// let permit = per_client.acquire_until(&7, 1, None).await?; // no deadline
    /// assert_eq!(per_client.in_flight(&7), 1);
    /// # drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_until<Q>(
        &self,
        key: &Q,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.wait(key, n, deadline).await
    }
}
