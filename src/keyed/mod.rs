//! Layer 3, keyed limits: [`Keyed`] (one state per key, bounded memory), [`KeyedSketch`]
//! (a count-min sketch in fixed memory), [`Global`] (one limiter for every key), and the
//! maps `Keyed` keeps its states in ([`Store`]).
//!
//! # Orderings
//!
//! Each key's whole state is one cell of its rule's state type, updated through the
//! crate's CAS loop (or lock, for a sliding log); eviction retires a cell before its key
//! is removed from the map, and an acquirer that meets a retired cell looks the key up
//! again. The protocol and why `Relaxed` is enough are in [`cell`](crate::cell)'s
//! "Orderings". The map (the [`Store`]) publishes its entries with its own
//! release/acquire protocol, so a slot's initial content (a fresh state, or the redirect
//! marker) is visible to every thread that finds the slot; a store never retires a slot
//! itself, it only removes retired ones.
//!
//! ## Keys with a quota of their own
//!
//! `Keyed` keeps three maps of one kind (`S`; the last two are built by the first
//! `reconfigure_key`, so a `Keyed` without per-key quotas has only the first):
//!
//! - `map`, the main map: per key, the cell of a state under the *default* rule, or the
//!   reserved word `REDIRECT` ("this key's state lives in `own`");
//! - `quotas`: the rule of each key given a quota of its own ([`Keyed::reconfigure_key`]); an
//!   entry is replaced by a later `reconfigure_key`, never removed;
//! - `own`: for a redirected key, its state's cell and the rule it was created under.
//!
//! (For a state behind a lock, the sliding log's, `REDIRECT` is the slot holding
//! `Held::Redirect` and `RETIRED` the slot holding `Held::Retired`: `cell`'s "The redirect
//! word".) The rules:
//!
//! 1. A request looks the key up in `map`. A live state there is used under the default
//!    rule (even if the key was given a quota since: the quota applies to the key's next
//!    fresh state). `RETIRED`: help remove it and look again. `REDIRECT`: look the key up
//!    in `own`, creating a fresh state under `quotas`' rule for the key if it has none
//!    (the same retirement protocol applies there).
//! 2. A key absent from `map` gets, through one get-or-insert, either a fresh default state
//!    (if the request saw no entry for it in `quotas`) or `REDIRECT` (if it did). Whichever
//!    insert wins decides, and a loser uses what it finds, as in rule 1.
//! 3. Eviction retires and removes idle states in `map` and in `own` alike. A `REDIRECT`
//!    word is **never** retired: once a key is redirected, it stays redirected.
//! 4. `reconfigure_key` inserts the rule in `quotas` first, then retires and removes the key's
//!    state (in `map`, or in `own`) if it is idle.
//!
//! **Invariant: a key never has a live default-rule state and a live state in `own` at
//! the same time**, so every charge for a key lands on the one live state a sequential
//! limiter would have.
//!
//! Proof. Take the history of `map`'s entry for key `k`: a sequence of insertions and
//! removals, totally ordered by the map (its per-key linearizability; every store
//! publishes an insertion with release and finds it with acquire). A default state is
//! retired (by one CAS, after which no charge lands on it: `cell`'s "Orderings") before
//! it is removed, so at most one default state of `k` is live at a time, and only while it
//! is `map`'s entry. `own`'s entry for `k` is created only by a thread that has read
//! `REDIRECT` in `map` (rule 1), so after a `REDIRECT` was inserted; from that insertion
//! on, `map`'s entry for `k` is that `REDIRECT` for good (rule 3: it is never retired, so
//! never removed, and rule 2's get-or-insert finds it), so no default state of `k` is
//! inserted again. And when the `REDIRECT` was inserted, `k` had no entry in `map`, so its
//! last default state had been retired already. Hence every live default state of `k` lies
//! before the `REDIRECT` in `k`'s history, and every live `own` state after it. Within
//! `own`, the retirement protocol keeps one live state per key as in `map`. ∎
//!
//! The proof uses nothing about how fresh a thread's view of `quotas` is: a request that
//! read "no quota" just before a `reconfigure_key` creates a default state, which is allowed
//! (the request is ordered before the `reconfigure_key`), or finds the `REDIRECT` another
//! request inserted and follows it. Nor about when a thread first sees the side maps
//! (`quotas` and `own` are built by the first `reconfigure_key`, in a `OnceLock`): not seeing them
//! yet is such a stale "no quota". A request that follows `REDIRECT` finds the side maps and
//! the key's rule in `quotas`: the `REDIRECT`'s inserter read that entry before inserting,
//! the map's release/acquire carries it (and the `OnceLock`'s initialisation before it) to
//! every thread that finds the `REDIRECT`, and entries of `quotas` are never removed.
//!
//! Why rule 3 (a first design retired a `REDIRECT` whose key had no state in `own`): a
//! request `A` reads "no quota" for `k` and is preempted; `reconfigure_key(k, quota)` runs, a request
//! `B` inserts `REDIRECT` and, while an evictor has just found no `own` state for `k`,
//! creates one and is charged; the evictor retires and removes the `REDIRECT`; `A` resumes
//! and inserts a fresh default state. Now `k` has two live states, `B`'s charge sits on
//! the unreachable one, and `k` is admitted `2·burst` in a burst. A redirected key costs
//! one entry of `map` for good instead (its 8-byte word, or the log's lock), counted by
//! [`Keyed::len`] and against `max_keys`; `quotas` keeps the key and its rule for good in
//! any case.

#[cfg(feature = "budget")]
mod budget;
mod charge;
mod global;
mod per_key;
mod sketch;
pub(crate) mod store;

pub use global::Global;
pub use per_key::KeyConfig;
pub use sketch::KeyedSketch;
#[cfg(limitcore_loom)]
pub use store::LoomStore;
pub use store::{DashMapStore, KeyHash, KeyHasher, PapayaStore, Store};

use crate::cell::sealed::Cells;
use crate::cell::{Attempt, Gone};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::decision::{Charged, Decision, Denied, Packed, Receipt, Snapshot};
use crate::limiter::{KeyedRateLimiter, KeyedRefund};
use crate::limiters::{KeyedReserve, Reservation};
use crate::quota::{Quota, QuotaError};
use crate::rules::{precheck, GcraRule, ReserveRule, Rule};
use crate::sync::{AtomicU64, OnceLock, Ordering};
use core::borrow::Borrow;
use core::fmt;
use core::hash::Hash;
use core::time::Duration;

/// The bit of a receipt's tag a `Keyed` sets when the permits were charged to its shared
/// overflow state rather than to the key's own: one of the high bits, the rule's own being
/// the low ones (`Receipt::RULE_TAG`).
const OVERFLOW: u8 = 1 << 4;
const _: () = assert!(OVERFLOW & Receipt::RULE_TAG == 0);

/// A key's entry in the main map: the cell of a state under the default rule, or the
/// redirect marker (see the module's "Orderings").
type Cell<R> = <<R as Rule>::State as Cells>::Slot;

/// The state of a key with a quota of its own: its cell and the rule it was created under.
struct Own<R: Rule> {
    state: Cell<R>,
    rule: R,
}

/// The maps of keys with a quota of their own (module "Orderings"), built by the first
/// `reconfigure_key`: a `Keyed` that never gets one allocates nothing beside its main map.
struct Side<K, R: Rule, S: Store<K>> {
    /// The rule of each key given a quota of its own; never removed.
    quotas: S::Map<R>,
    /// The states of redirected keys, each with the rule it was created under.
    own: S::Map<Own<R>>,
}

/// A refusal with the state it saw, for `decide_*`: the rule's denials carry it, the
/// size checks and the reserved word do not (the caller reads it then).
struct Refused {
    denied: Denied,
    state: Option<Snapshot>,
}

impl From<Denied> for Refused {
    fn from(denied: Denied) -> Self {
        Refused {
            denied,
            state: None,
        }
    }
}

/// One rate limiter per key (tenant, user, client address, channel), created on first use
/// from a default [`Quota`], with per-key overrides and bounded memory.
///
/// `R` is the rule run per key (see [`rules`](crate::rules); default [`GcraRule`]),
/// `C` the clock, `S` the kind of concurrent map that holds the per-key states (see
/// [`Store`]; default [`DashMapStore`]). Lookups take the key by any borrowed form
/// (`Keyed<String>` is queried with a `&str`), and `Keyed` implements
/// [`KeyedRateLimiter`] and [`KeyedRefund`] for each of them.
///
/// # Contract
///
/// Per key, exactly the contract of `R` in a [`Limiter`](crate::Limiter) (same decisions,
/// same `retry_after`), with these additions:
///
/// - **Eviction never changes a decision.** A key is removed only when its state has been
///   indistinguishable from a fresh one for [`Keyed::EVICTION_GRACE_NS`] (for GCRA: its
///   TAT is at least that far in the past), so a limited key is never reset, and a key that
///   comes back gets exactly the state it would have had. Removal is safe against concurrent
///   requests on the same key (see the module's "Orderings": no charge lost or applied
///   twice). It runs by itself, at most once per sweep interval (default 1 s of the clock),
///   inside the call that inserts a new key; on demand with [`Keyed::evict_idle`];
///   [`Keyed::len`] observes it.
/// - **Bounded memory under a flood of fresh keys.** With [`Keyed::with_max_keys`], once the
///   map holds `max_keys` keys (after an eviction sweep), requests for keys not in the map
///   share one **overflow state** with the default quota, instead of getting a state of
///   their own: the flood is limited as one client, and no existing (possibly limited) key
///   is ever dropped to make room. The bound is soft by at most the number of threads
///   inserting at the same instant.
/// - **The clock's last nanoseconds.** For a rule with a `u64` state, a transition whose new
///   state would be one of the words `u64::MAX` and `u64::MAX − 1` (reserved: an evicted
///   state, and a key whose state lives with its own quota) is refused with
///   [`Denied::BeyondHorizon`] where the rule alone would admit. It can only happen at
///   the very end of the clock's 584-year range.
/// - **Per-key configurations.** [`Keyed::reconfigure_key`] gives one key a configuration
///   of its own ([`KeyConfig`]). For the rules whose configuration is a quota
///   ([`QuotaRule`](crate::rules::QuotaRule): every rule but the budget's) it applies to the key's next fresh state:
///   at once for a key that is new or idle, otherwise once its current state (decided
///   under its old quota) goes idle and is evicted. A budget ([`BudgetRule`](crate::budget::BudgetRule)) converts the
///   key's state and applies it at once, keeping every setting not given. A change never
///   resets a limited key, a live state is never read under another quota's rule, and a
///   key never has two live states (even while `reconfigure_key`, eviction and requests
///   for the key race: the module's "Orderings"). A key given its own quota keeps one entry
///   for good once it has been used (it holds the key and a redirect word when its state is
///   evicted), counted by [`Keyed::len`] and against `max_keys`; the quota itself is kept
///   for good in any case.
/// - **Refunds** ([`KeyedRefund`]) go to the state that was charged (the key's, or the
///   overflow state). A key evicted since its charge is fresh already and gets nothing;
///   that is exact as long as the refund's time does not lag the sweep's clock by more than
///   the grace (the assumption eviction itself makes).
///
/// # Memory
///
/// A key without a quota of its own costs one map entry holding the key and its state (for
/// a `u64` state, one 8-byte word): 16 bytes of entry for a `u64` key, the same layout as
/// governor's keyed limiter. Keys with their own quota add a rule per key and, while their
/// state lives, a second small map's entry.
///
/// # Stores
///
/// The default map is [`DashMapStore`] hashing with [`KeyHasher`] (aHash under random keys:
/// safe with keys an attacker picks), measured to be at least governor's keyed limiter in
/// every throughput cell and at most its memory; [`PapayaStore`] (no lock on a lookup) is
/// the faster when threads share keys, at more memory per key. See [`Store`], "Which to
/// use"; decisions are the same on either.
///
/// # Examples
///
/// ```
/// use limitcore::{Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let per_ip: Keyed<String, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(2)?, clock.clone())?;
/// assert!(per_ip.try_acquire_n("10.0.0.1", 2).is_ok()); // looked up by &str
/// assert!(per_ip.try_acquire("10.0.0.1").is_err());
/// assert!(per_ip.try_acquire("10.0.0.2").is_ok()); // another key, its own budget
/// assert_eq!(per_ip.len(), 2);
///
/// clock.advance(Duration::from_secs(3)); // both idle for longer than the grace
/// assert_eq!(per_ip.evict_idle(), 2);
/// assert_eq!(per_ip.len(), 0);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub struct Keyed<K, R: Rule = GcraRule, C = DefaultClock, S: Store<K> = DashMapStore<K>> {
    /// Per key: a state under `default`, or the redirect marker (module "Orderings").
    map: S::Map<Cell<R>>,
    default: R,
    /// Set once, by the first `reconfigure_key` (under loom: at construction, see `with_store`).
    side: OnceLock<Side<K, R, S>>,
    /// The kind of map, for the side maps.
    store: S,
    max_keys: usize,
    /// The shared state of keys refused a slot of their own (default rule); never retired.
    overflow: <R::State as Cells>::Slot,
    sweep_every: Nanos,
    /// The clock time after which the next automatic sweep may run.
    next_sweep: AtomicU64,
    clock: C,
}

impl<K, R: Rule, C: fmt::Debug, S: Store<K>> fmt::Debug for Keyed<K, R, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("rule", &self.default)
            .field("keys", &S::len(&self.map))
            .field("max_keys", &self.max_keys)
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(feature = "std")]
impl<K: Hash + Eq + Send + Sync + 'static, R: Rule> Keyed<K, R, DefaultClock> {
    /// Keyed limiters for `quota` on the default clock, unbounded key count.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `R` for this quota ([`Rule::new`]).
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Keyed::with_clock(quota, DefaultClock::new())
    }
}

impl<K: Hash + Eq + Send + Sync + 'static, R: Rule, C: Clock> Keyed<K, R, C> {
    /// Keyed limiters for `quota` reading time from `clock`, unbounded key count, on the
    /// default store ([`DashMapStore`] with [`KeyHasher`]).
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `R` for this quota ([`Rule::new`]).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Keyed::with_store(quota, clock, DashMapStore::new())
    }
}

impl<K, R: Rule, C, S: Store<K>> Keyed<K, R, C, S> {
    /// How long after a key's state became indistinguishable from a fresh one it may be
    /// evicted: 2^30 ns (1.07 s). Within this grace a stale clock reading (a thread preempted
    /// between reading the clock and deciding) could still see the old state as stricter
    /// than a fresh one; after it, no plausible reading can, so eviction changes no decision.
    pub const EVICTION_GRACE_NS: Nanos = 1 << 30;
}

impl<K: Hash + Eq + Send + Sync + 'static, R: Rule, C: Clock, S: Store<K>> Keyed<K, R, C, S> {
    /// Keyed limiters for `quota` reading time from `clock`, unbounded key count, keeping
    /// the per-key states in a map of kind `store`.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `R` for this quota ([`Rule::new`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, PapayaStore, Quota};
    /// use limitcore::clock::MonotonicClock;
    /// use limitcore::rules::TokenBucketRule;
    ///
    /// // Threads that share keys: papaya's lookups take no lock.
    /// let per_user: Keyed<u64, TokenBucketRule, MonotonicClock, PapayaStore<u64>> =
    ///     Keyed::with_store(Quota::per_second(100)?, MonotonicClock::new(), PapayaStore::new())?;
    /// assert!(per_user.try_acquire(&42).is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn with_store(quota: Quota, clock: C, store: S) -> Result<Self, QuotaError> {
        let default = R::new(&quota)?;
        let keyed = Keyed {
            map: store.build(),
            side: OnceLock::new(),
            store,
            overflow: default.fresh().slot(),
            default,
            max_keys: usize::MAX,
            sweep_every: 1_000_000_000,
            next_sweep: AtomicU64::new(0),
            clock,
        };
        // Under loom the side maps are built here, by the thread that builds the limiter:
        // loom cannot see `OnceLock`'s own publication of them (std's, not loom's).
        #[cfg(limitcore_loom)]
        keyed.side();
        Ok(keyed)
    }

    /// Bound the number of keys with a state of their own (see "Bounded memory").
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Sweep idle keys automatically at most once per `every` of clock time (default 1 s),
    /// inside the call that inserts a new key; `Duration::ZERO` turns automatic sweeps off
    /// (then only [`Keyed::evict_idle`] and the `max_keys` bound sweep).
    pub fn with_sweep_interval(mut self, every: Duration) -> Self {
        self.sweep_every = crate::clock::duration_to_nanos(every);
        self
    }

    /// The default quota.
    pub fn quota(&self) -> Quota {
        self.default.quota()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many keys have an entry in the map: a state of their own, or (a key with its own
    /// quota, once used) the redirect word its state is found through (see "Per-key quotas").
    pub fn len(&self) -> usize {
        S::len(&self.map)
    }

    /// Whether no key has an entry in the map (see [`Keyed::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Give `key` the rule `rule` when its current state is idle at `now` (the per-key
    /// reconfiguration of the rules whose configuration is a quota, [`QuotaRule`]): if it
    /// is idle (see "Contract"), it is evicted at once, so the new rule applies to the key's
    /// next request; otherwise the key keeps its state, under its old rule, until it goes
    /// idle.
    pub(crate) fn replace_rule_when_idle(&self, key: K, rule: R, now: Nanos)
    where
        K: Clone,
    {
        let side = self.side();
        S::insert(&side.quotas, key.clone(), rule);
        // Only now (rule 4 of the module's "Orderings"): a request that finds the key gone
        // finds its quota.
        let idle = |rule: &R, state: &R::State| Self::idle(rule, state, now);
        if S::with_slot(&self.map, &key, |cell| {
            R::State::retire_if(cell, |s| idle(&self.default, s))
        }) == Some(true)
        {
            S::remove_if(&self.map, &key, R::State::is_retired);
        }
        if S::with_slot(&side.own, &key, |own| {
            R::State::retire_if(&own.state, |s| idle(&own.rule, s))
        }) == Some(true)
        {
            S::remove_if(&side.own, &key, Self::own_retired);
        }
    }

    /// The side maps, built on first use. Every caller but a per-key reconfiguration and
    /// `with_store`
    /// comes here through a redirect word, which is inserted only for a key found in
    /// `quotas`, so after the maps were built.
    fn side(&self) -> &Side<K, R, S> {
        self.side.get_or_init(|| Side {
            quotas: self.store.build_side(),
            own: self.store.build_side(),
        })
    }

    fn own_retired(own: &Own<R>) -> bool {
        R::State::is_retired(&own.state)
    }

    /// Whether `state`, under `rule`, is idle at `now`: indistinguishable from a fresh state
    /// for every reading from `now` − the grace on.
    fn idle(rule: &R, state: &R::State, now: Nanos) -> bool {
        now.checked_sub(Self::EVICTION_GRACE_NS)
            .is_some_and(|since| rule.fresh_since(state, since, now))
    }

    /// `key`'s own rule, if it was given one.
    fn own_rule<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<R>
    where
        K: Borrow<Q>,
    {
        // Not built yet: no key has a quota of its own (module "Orderings": a request that
        // misses a `reconfigure_key` running meanwhile is ordered before it).
        let side = self.side.get()?;
        S::with_slot(&side.quotas, key, R::clone)
    }

    /// The rule a new state for `key` gets.
    fn rule_for_new<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> R
    where
        K: Borrow<Q>,
    {
        self.own_rule(key).unwrap_or_else(|| self.default.clone())
    }

    /// The one path of every decision: `f` applied to `key`'s state under the key's rule,
    /// after the size check of `1 ≤ n`; a new key gets a fresh state (or, at the key bound,
    /// the shared overflow state); a state retired under us is looked up again; a redirect
    /// leads to the key's own state. Receipts of the overflow state are marked so that a
    /// refund finds it.
    #[inline]
    fn with_state<Q, E: From<Denied>>(
        &self,
        key: &Q,
        n: u32,
        now: Nanos,
        f: impl Fn(&R, &mut R::State) -> Result<Receipt, E>,
    ) -> Result<Receipt, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let capacity = self.default.capacity();
        let attempt = |cell: &Cell<R>| {
            R::State::update_slot(cell, |s| {
                precheck(n, capacity)?;
                f(&self.default, s)
            })
        };
        loop {
            let outcome = match S::with_slot(&self.map, key, attempt) {
                Some(outcome) => outcome,
                None => {
                    let redirect = match self.own_rule(key) {
                        Some(rule) => {
                            precheck(n, rule.capacity())?;
                            true
                        }
                        None => {
                            precheck(n, capacity)?;
                            false
                        }
                    };
                    if !self.room_for_new_key(now) {
                        return self.with_overflow(n, &f);
                    }
                    let make = || {
                        if redirect {
                            R::State::redirect()
                        } else {
                            self.default.fresh().slot()
                        }
                    };
                    S::with_slot_or_insert(&self.map, key, make, attempt)
                }
            };
            match outcome {
                Ok(receipt) => return Ok(receipt),
                Err(Attempt::Failed(e)) => return Err(e),
                Err(Attempt::Reserved) => return Err(E::from(Denied::NEVER)),
                Err(Attempt::Redirect) => return self.with_own(key, n, &f),
                // Help the evictor remove the dead entry, then look again.
                Err(Attempt::Retired) => {
                    S::remove_if(&self.map, key, R::State::is_retired);
                }
            }
        }
    }

    /// [`Keyed::with_state`] for a redirected key: its state in `own`, created under its
    /// rule in `quotas` if it has none.
    #[cold]
    #[inline(never)]
    fn with_own<Q, E: From<Denied>>(
        &self,
        key: &Q,
        n: u32,
        f: &impl Fn(&R, &mut R::State) -> Result<Receipt, E>,
    ) -> Result<Receipt, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let attempt = |own: &Own<R>| {
            R::State::update_slot(&own.state, |s| {
                precheck(n, own.rule.capacity())?;
                f(&own.rule, s)
            })
        };
        let own = &self.side().own;
        loop {
            let outcome = match S::with_slot(own, key, attempt) {
                Some(outcome) => outcome,
                None => {
                    let rule = self.redirected_rule(key);
                    precheck(n, rule.capacity())?;
                    let make = || Own {
                        state: rule.fresh().slot(),
                        rule,
                    };
                    S::with_slot_or_insert(own, key, make, attempt)
                }
            };
            match outcome {
                Ok(receipt) => return Ok(receipt),
                Err(Attempt::Failed(e)) => return Err(e),
                // An own state is never a redirect.
                Err(Attempt::Reserved | Attempt::Redirect) => return Err(E::from(Denied::NEVER)),
                Err(Attempt::Retired) => {
                    S::remove_if(own, key, Self::own_retired);
                }
            }
        }
    }

    /// The rule of a key found redirected in the main map.
    fn redirected_rule<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> R
    where
        K: Borrow<Q>,
    {
        // The redirect's inserter read this entry first, and entries of `quotas` are never
        // removed (module "Orderings").
        S::with_slot(&self.side().quotas, key, R::clone)
            .expect("a redirected key has a quota of its own")
    }

    /// [`Keyed::with_state`] on the shared overflow state, for keys refused a slot.
    fn with_overflow<E: From<Denied>>(
        &self,
        n: u32,
        f: &impl Fn(&R, &mut R::State) -> Result<Receipt, E>,
    ) -> Result<Receipt, E> {
        precheck(n, self.default.capacity())?;
        match R::State::update_slot(&self.overflow, |s| f(&self.default, s)) {
            Ok(mut receipt) => {
                receipt.tag |= OVERFLOW;
                Ok(receipt)
            }
            Err(Attempt::Failed(e)) => Err(e),
            // The overflow state is never retired nor a redirect.
            Err(Attempt::Retired | Attempt::Redirect | Attempt::Reserved) => {
                Err(E::from(Denied::NEVER))
            }
        }
    }

    /// Decide `n` permits for `key` at the explicit time `now` (ns of the clock).
    ///
    /// # Errors
    ///
    /// [`Denied`] as for `R`: [`Denied::ExceedsCapacity`] for `n` above the key's capacity,
    /// [`Denied::RateLimited`] with the exact wait otherwise.
    // Always inlined, and only the unpacking: the decision (`try_acquire_packed`) returns a
    // refusal in two registers, and a caller that looks only at `is_ok()` never builds its
    // `retry_after` (a division). Returned whole from the lookup, the 24-byte refusal went
    // through memory and its `Duration` was always built (issue 36: `keyed-hot` refusing,
    // 0.72× governor's rate).
    #[inline(always)]
    pub fn try_acquire_n_at<Q>(&self, key: &Q, n: u32, now: Nanos) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_packed(key, n, now).map_err(Packed::unpack)
    }

    /// [`Keyed::try_acquire_n_at`] with its refusal packed in two words.
    #[inline]
    fn try_acquire_packed<Q>(&self, key: &Q, n: u32, now: Nanos) -> Result<(), Packed>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n == 0 {
            return self.debt_at(key, now).map_err(Denied::pack);
        }
        self.with_state(key, n, now, |rule, s| {
            rule.take(s, now, n).map_err(Denied::pack)
        })
        .map(|_| ())
    }

    /// Decide `n` permits for `key` now.
    ///
    /// # Errors
    ///
    /// As [`Keyed::try_acquire_n_at`].
    #[inline(always)]
    pub fn try_acquire_n<Q>(&self, key: &Q, n: u32) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n_at(key, n, self.clock.now())
    }

    /// Decide one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`Keyed::try_acquire_n_at`].
    #[inline(always)]
    pub fn try_acquire<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n(key, 1)
    }

    /// As [`Keyed::try_acquire_n_at`], with the state the decision left for `key`, read in
    /// the same update.
    pub fn decide_n_at<Q>(&self, key: &Q, n: u32, now: Nanos) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (result, state) = self.decide_refundable_at(key, n, now);
        Decision {
            result: result.map(|_| ()),
            state,
        }
    }

    /// The decision with its state: the admission's receipt, or the refusal.
    fn decide_refundable_at<Q>(
        &self,
        key: &Q,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n == 0 {
            let answer = self.debt_at(key, now).map(|()| Receipt::NOTHING);
            return (answer, self.snapshot_at(key, now));
        }
        let state = core::cell::Cell::new(None);
        let outcome = self.with_state(key, n, now, |rule, s| match rule.take(s, now, n) {
            Ok(receipt) => {
                state.set(Some(rule.snapshot(s, now)));
                Ok(receipt)
            }
            Err(denied) => Err(Refused {
                denied,
                state: Some(rule.snapshot(s, now)),
            }),
        });
        match outcome {
            Ok(receipt) => {
                let state = state.get().unwrap_or_else(|| self.snapshot_at(key, now));
                (Ok(receipt), state)
            }
            Err(Refused { denied, state }) => (
                Err(denied),
                state.unwrap_or_else(|| self.snapshot_at(key, now)),
            ),
        }
    }

    /// The state of `key` at `now`, consuming nothing (a fresh state for an unknown key).
    pub fn snapshot_at<Q>(&self, key: &Q, now: Nanos) -> Snapshot
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let seen = S::with_slot(&self.map, key, |cell| {
            R::State::read_slot(cell, |s| self.default.snapshot(s, now))
        });
        let rule = match seen {
            Some(Ok(snapshot)) => return snapshot,
            Some(Err(Gone::Redirect)) => {
                let own = S::with_slot(&self.side().own, key, |own| {
                    R::State::read_slot(&own.state, |s| own.rule.snapshot(s, now))
                });
                if let Some(Ok(snapshot)) = own {
                    return snapshot;
                }
                self.redirected_rule(key)
            }
            Some(Err(Gone::Retired)) | None => self.rule_for_new(key),
        };
        rule.snapshot(&rule.fresh(), now)
    }

    /// The state of `key` now, consuming nothing.
    pub fn snapshot<Q>(&self, key: &Q) -> Snapshot
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.snapshot_at(key, self.clock.now())
    }

    /// Whether a new key may get a slot now, sweeping first if it is time to.
    fn room_for_new_key(&self, now: Nanos) -> bool {
        // Unbounded (the default): no need to count the keys (`DashMapStore` counts by
        // locking every shard in turn).
        let bounded = self.max_keys != usize::MAX;
        let full = bounded && self.len() >= self.max_keys;
        // Relaxed: `next_sweep` only elects one sweeper at a time; the CAS decides who.
        let due = self.next_sweep.load(Ordering::Relaxed);
        if (self.sweep_every > 0 || full) && now >= due {
            let next = now.saturating_add(self.sweep_every.max(1_000_000));
            // Relaxed: as above; the sweep itself synchronises through each slot's cell.
            if self
                .next_sweep
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.evict_idle_at(now);
            }
        }
        !bounded || self.len() < self.max_keys
    }

    /// Remove every key idle for at least [`Keyed::EVICTION_GRACE_NS`] at the clock's
    /// current time; returns how many were removed.
    pub fn evict_idle(&self) -> usize {
        self.evict_idle_at(self.clock.now())
    }

    /// As [`Keyed::evict_idle`], at the explicit time `now`.
    pub fn evict_idle_at(&self, now: Nanos) -> usize {
        let main = S::retire_each(
            &self.map,
            |cell| R::State::retire_if(cell, |s| Self::idle(&self.default, s, now)),
            R::State::is_retired,
        );
        let Some(side) = self.side.get() else {
            return main;
        };
        main + S::retire_each(
            &side.own,
            |own| R::State::retire_if(&own.state, |s| Self::idle(&own.rule, s, now)),
            Self::own_retired,
        )
    }
}

impl<K, Q, R, C, S> KeyedRateLimiter<Q> for Keyed<K, R, C, S>
where
    K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    R: Rule,
    C: Clock,
    S: Store<K>,
{
    #[inline(always)]
    fn try_acquire_n_at(&self, key: &Q, n: u32, now: Nanos) -> Result<(), Denied> {
        Keyed::try_acquire_n_at(self, key, n, now)
    }

    fn decide_n_at(&self, key: &Q, n: u32, now: Nanos) -> Decision {
        Keyed::decide_n_at(self, key, n, now)
    }

    fn snapshot_at(&self, key: &Q, now: Nanos) -> Snapshot {
        Keyed::snapshot_at(self, key, now)
    }

    fn quota_for(&self, key: &Q) -> Quota {
        match S::with_slot(&self.map, key, |cell| R::State::read_slot(cell, |_| ())) {
            Some(Ok(())) => self.default.quota(),
            Some(Err(Gone::Redirect)) => {
                let own = S::with_slot(&self.side().own, key, |own| {
                    R::State::read_slot(&own.state, |_| own.rule.quota())
                });
                match own {
                    Some(Ok(quota)) => quota,
                    _ => self.redirected_rule(key).quota(),
                }
            }
            Some(Err(Gone::Retired)) | None => self.rule_for_new(key).quota(),
        }
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }
}

impl<K, Q, R, C, S> KeyedRefund<Q> for Keyed<K, R, C, S>
where
    K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    R: Rule,
    C: Clock,
    S: Store<K>,
{
    fn acquire_refundable_at(&self, key: &Q, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        if n == 0 {
            return self.debt_at(key, now).map(|()| Receipt::NOTHING);
        }
        self.with_state(key, n, now, |rule, s| rule.take(s, now, n))
    }

    fn decide_refundable_at(
        &self,
        key: &Q,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot) {
        Keyed::decide_refundable_at(self, key, n, now)
    }

    fn refund(&self, key: &Q, receipt: Receipt, at: Nanos) {
        if receipt.n() == 0 {
            return;
        }
        // A key no longer in the map was evicted: its state is fresh already.
        self.update_receipt_state(key, &receipt, |rule, s| rule.refund(s, &receipt, at));
    }

    fn check_at(&self, key: &Q, n: u32, now: Nanos) -> Result<(), Denied> {
        if n == 0 {
            return self.debt_at(key, now);
        }
        let check = |rule: &R, s: &R::State| {
            precheck(n, rule.capacity())?;
            rule.check(s, now, n)
        };
        let seen = S::with_slot(&self.map, key, |cell| {
            R::State::read_slot(cell, |s| check(&self.default, s))
        });
        match seen {
            Some(Ok(answer)) => answer,
            Some(Err(Gone::Redirect)) => {
                let own = S::with_slot(&self.side().own, key, |own| {
                    R::State::read_slot(&own.state, |s| check(&own.rule, s))
                });
                match own {
                    Some(Ok(answer)) => answer,
                    // Its next state: fresh under its own rule (it has its entry already).
                    _ => {
                        let rule = self.redirected_rule(key);
                        check(&rule, &rule.fresh())
                    }
                }
            }
            // Unknown or retired: a fresh state (or the overflow one, at the key bound).
            Some(Err(Gone::Retired)) | None => {
                let rule = self.rule_for_new(key);
                precheck(n, rule.capacity())?;
                if self.max_keys != usize::MAX && self.len() >= self.max_keys {
                    R::State::read_slot(&self.overflow, |s| self.default.check(s, now, n))
                        .unwrap_or(Err(Denied::NEVER))
                } else {
                    rule.check(&rule.fresh(), now, n)
                }
            }
        }
    }

    fn charge_at(&self, key: &Q, n: u32, now: Nanos) -> Charged {
        Keyed::charge_at(self, key, n, now)
    }

    fn settle(&self, key: &Q, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        Keyed::settle(self, key, receipt, actual, at)
    }

    fn credit(&self, key: &Q, n: u32, at: Nanos) {
        Keyed::credit(self, key, n, at);
    }
}

impl<K, Q, R, C, S> KeyedReserve<Q> for Keyed<K, R, C, S>
where
    K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    R: ReserveRule,
    C: Clock,
    S: Store<K>,
{
    fn reserve_n_at(
        &self,
        key: &Q,
        n: u32,
        now: Nanos,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        if n == 0 {
            return Ok(Reservation::new(now, 0));
        }
        let max_wait = duration_to_nanos(max_wait);
        let delay = core::cell::Cell::new(0);
        self.with_state(key, n, now, |rule, s| {
            delay.set(rule.reserve(s, now, n, max_wait)?);
            // Reservations are not refunded: the receipt is never used.
            Ok::<_, Denied>(Receipt::NOTHING)
        })?;
        Ok(Reservation::new(now, delay.get()))
    }
}
