//! [`Keyed`]: one limiter per key (tenant, user, client IP, channel) with bounded memory.
//!
//! # Orderings
//!
//! Each key's whole state is one `AtomicU64` updated by the crate's CAS loop
//! ([`cas`](crate::cas), `Relaxed`, for the reasons given there). Eviction adds one protocol
//! on the same word: the evictor replaces an idle state by the reserved word [`RETIRED`]
//! with a compare-and-swap, and only then removes the key from the map. Every acquirer's CAS
//! expects the exact word it decided on, so exactly one of "an acquirer's charge" and "the
//! retirement" wins (the word's modification order is total); an acquirer that finds
//! `RETIRED` helps remove the dead entry and looks the key up again, getting a fresh state
//! that is indistinguishable from the retired one. No charge is ever applied to a removed
//! state, and none is applied twice. The map (the [`Store`]) publishes its entries with its
//! own release/acquire protocol, so a slot's initial word is visible to every thread that
//! finds the slot; a store never runs a retiring CAS itself, it only removes retired slots.

use crate::cas;
use crate::clock::{Clock, Nanos};
use crate::fixed_window::{Position, Windows};
use crate::gcra::Schedule;
use crate::keyed_store::{KeySlot, PapayaStore, Store};
use crate::limiter::{precheck, Denied, Snapshot};
use crate::sliding_window::Counter;
use crate::sync::{AtomicU64, Ordering};
use crate::token_bucket::Bucket;
use crate::{
    DefaultClock, FixedWindow, Gcra, LeakyBucket, Quota, QuotaError, SlidingWindow, TokenBucket,
};
use alloc::boxed::Box;
use core::fmt;
use core::hash::Hash;
use core::marker::PhantomData;
use core::time::Duration;

/// The word no rule ever stores: a key state retired by eviction.
///
/// A new state equal to it is refused instead (with `retry_after = Duration::MAX`); that can
/// only happen at the last nanosecond of the clock's range.
pub(crate) const RETIRED: u64 = u64::MAX;

/// How long after a key's state became indistinguishable from a fresh one it may be evicted:
/// 2^30 ns (1.07 s). Within this grace a stale clock reading (a thread preempted between
/// reading the clock and deciding) could still see the old state as stricter than a fresh
/// one; after it, no plausible reading can, so eviction changes no decision.
pub const EVICTION_GRACE_NS: Nanos = 1 << 30;

/// The rules of one single-word algorithm for one quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    Gcra(Schedule),
    Pacer(Schedule),
    Bucket(Bucket),
    Window(Windows),
    Sliding(Counter),
}

impl Rule {
    fn capacity(&self) -> u32 {
        match self {
            Rule::Gcra(s) | Rule::Pacer(s) => s.burst,
            Rule::Bucket(b) => b.schedule.burst,
            Rule::Window(w) => w.count,
            Rule::Sliding(c) => c.count,
        }
    }

    fn fresh(&self) -> u64 {
        match self {
            Rule::Bucket(b) => b.full(),
            _ => 0,
        }
    }

    /// The transition for `1 ≤ n ≤ capacity`.
    #[inline]
    fn take(&self, word: u64, now: Nanos, n: u32) -> Result<u64, Denied> {
        match self {
            Rule::Gcra(s) => s.gcra(word, now, n),
            Rule::Pacer(s) => s.reserve(word, now, n, 0, true).map(|(next, _)| next),
            Rule::Bucket(b) => b.take(word, now, n),
            Rule::Window(w) => w.take(word, now, n),
            Rule::Sliding(c) => c.lease(word, now, u64::from(n)).map(|(next, _, _)| next),
        }
    }

    fn snapshot(&self, word: u64, now: Nanos) -> Snapshot {
        match self {
            Rule::Gcra(s) | Rule::Pacer(s) => s.snapshot(word, now),
            Rule::Bucket(b) => b.snapshot(word, now),
            Rule::Window(w) => w.snapshot(word, now),
            Rule::Sliding(c) => {
                let w = c.window(word, now);
                Snapshot {
                    remaining: c.available(&w) as u32,
                    full_after: c.full_after(&w, now),
                }
            }
        }
    }

    /// Has `word` been indistinguishable from a fresh state, for every reading at or after
    /// `now −` [`EVICTION_GRACE_NS`], since that time?
    fn idle(&self, word: u64, now: Nanos) -> bool {
        let Some(at) = now.checked_sub(EVICTION_GRACE_NS) else {
            return false;
        };
        if word == self.fresh() {
            return true;
        }
        match self {
            // A TAT at or before `at`: max(TAT, t) = t for every t ≥ at, as for TAT 0.
            Rule::Gcra(_) | Rule::Pacer(_) => word <= at,
            // Full for the grace, measured from `now` (the time field wraps; see `full_for`).
            Rule::Bucket(b) => b
                .full_for(word, now)
                .is_some_and(|d| d >= EVICTION_GRACE_NS),
            Rule::Window(w) => {
                let (k, used) = w.unpack(word);
                used == 0 || matches!(w.position(k, at), Position::Later)
            }
            Rule::Sliding(c) => {
                let w = c.window(word, at);
                w.prev == 0 && w.curr == 0
            }
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The algorithms [`Keyed`] can run per key: [`Gcra`], [`TokenBucket`], [`FixedWindow`],
/// [`LeakyBucket`] (whose per-key `try_acquire` admits only what can start now) and
/// [`SlidingWindow`] (per key as one word: the formula on exact counts, without per-CPU
/// shards). Each keeps one `AtomicU64` per key.
///
/// This trait is sealed: its only purpose is to name the algorithm in `Keyed<K, L>`.
pub trait Algorithm: sealed::Sealed {
    #[doc(hidden)]
    fn rule(quota: &Quota) -> Result<KeyRule, QuotaError>;
}

/// The per-quota rules of an [`Algorithm`], opaque.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRule(Rule);

macro_rules! algorithm {
    ($ty:ident, |$q:ident| $rule:expr) => {
        impl<C> sealed::Sealed for $ty<C> {}
        impl<C> Algorithm for $ty<C> {
            fn rule($q: &Quota) -> Result<KeyRule, QuotaError> {
                Ok(KeyRule($rule))
            }
        }
    };
}
algorithm!(Gcra, |q| Rule::Gcra(Schedule::new(q)));
algorithm!(LeakyBucket, |q| Rule::Pacer(Schedule::new(q)));
algorithm!(TokenBucket, |q| Rule::Bucket(Bucket::new(q)?));
algorithm!(FixedWindow, |q| Rule::Window(Windows::new(q)?));
algorithm!(SlidingWindow, |q| Rule::Sliding(Counter::new(
    q,
    1,
    Some(0)
)?));

/// The outcome of one attempt on a slot.
enum Attempt {
    Denied(Denied),
    /// The slot was retired by eviction: look the key up again.
    Retired,
}

/// Apply `rule` to `word` for `n` permits at `now`, refusing to meet or create [`RETIRED`].
#[inline]
fn acquire_word(word: &AtomicU64, rule: &Rule, n: u32, now: Nanos) -> Result<(), Attempt> {
    cas::apply(word, |w| {
        if w == RETIRED {
            return Err(Attempt::Retired);
        }
        match rule.take(w, now, n) {
            Ok(RETIRED) => Err(Attempt::Denied(Denied::NEVER)),
            Ok(next) => Ok((next, ())),
            Err(d) => Err(Attempt::Denied(d)),
        }
    })
}

/// One rate limiter per key, created on first use from a default [`Quota`], with per-key
/// overrides and bounded memory.
///
/// `L` names the algorithm (see [`Algorithm`]; default [`Gcra`]), `C` the clock, `S` the
/// concurrent map that holds the per-key states (see [`Store`]; default [`PapayaStore`]).
///
/// # Contract
///
/// Per key, exactly the contract of `L` (same decisions, same `retry_after`), with these
/// additions:
///
/// - **Eviction never changes a decision.** A key is removed only when its state has been
///   indistinguishable from a fresh one for [`EVICTION_GRACE_NS`] (for GCRA: its TAT is at
///   least that far in the past), so a limited key is never reset, and a key that comes back
///   gets exactly the state it would have had. Removal is safe against concurrent requests on
///   the same key (see the module's "Orderings": no charge lost or applied twice). It runs by
///   itself, at most once per sweep interval (default 1 s of the clock), inside the call that
///   inserts a new key; on demand with [`Keyed::evict_idle`]; [`Keyed::len`] observes it.
/// - **Bounded memory under a flood of fresh keys.** With [`Keyed::with_max_keys`], once the
///   map holds `max_keys` keys (after an eviction sweep), requests for keys not in the map
///   share one **overflow limiter** with the default quota, instead of getting a state of
///   their own: the flood is limited as one client, and no existing (possibly limited) key
///   is ever dropped to make room. The bound is soft by at most the number of threads
///   inserting at the same instant.
/// - **The clock's last nanoseconds.** A transition whose new state would be the word
///   `u64::MAX` (reserved to mark an evicted state) is refused with `retry_after =
///   Duration::MAX` where `L` alone would admit. It can only happen at the very end of the
///   clock's 584-year range.
/// - **Per-key quotas.** [`Keyed::set_quota`] gives one key its own quota. It applies to
///   the key's next fresh state: at once for a key that is new or idle, otherwise once its
///   current state (decided under its old quota) goes idle and is evicted. A quota change
///   never resets a limited key.
///
/// The default map is `papaya`'s lock-free hash map ([`PapayaStore`]): a lookup takes no
/// lock, global or sharded, the better choice when threads share keys. With the feature
/// `dashmap`, `DashMapStore` (through [`Keyed::with_store`]) is faster for one thread over
/// many keys; decisions are the same on either.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let per_ip: Keyed<&str, Gcra, ManualClock> = Keyed::with_clock(Quota::per_second(2)?, clock.clone())?;
/// assert!(per_ip.try_acquire_n(&"10.0.0.1", 2).is_ok());
/// assert!(per_ip.try_acquire(&"10.0.0.1").is_err());
/// assert!(per_ip.try_acquire(&"10.0.0.2").is_ok()); // another key, its own budget
/// assert_eq!(per_ip.len(), 2);
///
/// clock.advance(Duration::from_secs(3)); // both idle for longer than the grace
/// assert_eq!(per_ip.evict_idle(), 2);
/// assert_eq!(per_ip.len(), 0);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct Keyed<K, L = Gcra, C = DefaultClock, S = PapayaStore<K>> {
    map: S,
    default: Rule,
    quota: Quota,
    overrides: papaya::HashMap<K, Rule>,
    /// Whether `overrides` may be non-empty (0 or 1), so the common case skips its lookup.
    any_overrides: AtomicU64,
    max_keys: usize,
    /// The shared state of keys refused a slot of their own (default rule).
    overflow: AtomicU64,
    sweep_every: Nanos,
    /// The clock time after which the next automatic sweep may run.
    next_sweep: AtomicU64,
    clock: C,
    _algorithm: PhantomData<fn() -> L>,
}

impl<K: Hash + Eq, L, C: fmt::Debug, S: Store<K>> fmt::Debug for Keyed<K, L, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("quota", &self.quota)
            .field("keys", &self.map.len())
            .field("max_keys", &self.max_keys)
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(feature = "std")]
impl<K: Hash + Eq + Clone, L: Algorithm> Keyed<K, L, DefaultClock> {
    /// Keyed limiters for `quota` on the default clock, unbounded key count.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `L` for this quota (see each limiter's `with_clock`).
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Keyed::with_clock(quota, DefaultClock::new())
    }
}

impl<K: Hash + Eq + Clone, L: Algorithm, C: Clock> Keyed<K, L, C> {
    /// Keyed limiters for `quota` reading time from `clock`, unbounded key count, on the
    /// default store ([`PapayaStore`]).
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `L` for this quota (see each limiter's `with_clock`).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Keyed::with_store(quota, clock, PapayaStore::new())
    }
}

impl<K: Hash + Eq + Clone, L: Algorithm, C: Clock, S: Store<K>> Keyed<K, L, C, S> {
    /// Keyed limiters for `quota` reading time from `clock`, unbounded key count, keeping
    /// the per-key states in `store` (which should be empty: keys already in it are used as
    /// they are).
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `L` for this quota (see each limiter's `with_clock`).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "dashmap")] {
    /// use limitcore::{DashMapStore, Keyed, Quota, TokenBucket};
    /// use limitcore::clock::MonotonicClock;
    ///
    /// // One thread over many keys: dashmap's inline entries are one cache miss cheaper.
    /// let per_user: Keyed<u64, TokenBucket, MonotonicClock, DashMapStore<u64>> =
    ///     Keyed::with_store(Quota::per_second(100)?, MonotonicClock::new(), DashMapStore::new())?;
    /// assert!(per_user.try_acquire(&42).is_ok());
    /// # }
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn with_store(quota: Quota, clock: C, store: S) -> Result<Self, QuotaError> {
        let default = L::rule(&quota)?.0;
        Ok(Keyed {
            map: store,
            default,
            quota,
            overrides: papaya::HashMap::new(),
            any_overrides: AtomicU64::new(0),
            max_keys: usize::MAX,
            overflow: AtomicU64::new(default.fresh()),
            sweep_every: 1_000_000_000,
            next_sweep: AtomicU64::new(0),
            clock,
            _algorithm: PhantomData,
        })
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
        self.quota
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many keys have a state of their own.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key has a state of its own.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Give `key` its own quota (see "Per-key quotas"), as of the clock's current time.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `L` for this quota.
    pub fn set_quota(&self, key: K, quota: Quota) -> Result<(), QuotaError> {
        self.set_quota_at(key, quota, self.clock.now())
    }

    /// As [`Keyed::set_quota`], at the explicit time `now`: if the key's current state is
    /// idle at `now` (see "Contract"), it is evicted at once, so the new quota applies to the
    /// key's next request; otherwise the key keeps its state, under its old quota, until it
    /// goes idle.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of `L` for this quota.
    pub fn set_quota_at(&self, key: K, quota: Quota, now: Nanos) -> Result<(), QuotaError> {
        let rule = L::rule(&quota)?.0;
        // Relaxed: a hint that only lets lookups skip an empty map; `overrides` publishes
        // its entries itself.
        self.any_overrides.store(1, Ordering::Relaxed);
        self.overrides.pin().insert(key.clone(), rule);
        if self
            .map
            .with_slot(&key, |slot| self.retire_if_idle(slot, now))
            == Some(true)
        {
            self.map.remove_retired(&key);
        }
        Ok(())
    }

    /// Retire `slot` if its state is idle at `now` (see the module's "Orderings"); whether
    /// the slot is retired now (by this call, or earlier by a sweep or `set_quota` that has
    /// not removed it yet). The caller then removes it from the store.
    fn retire_if_idle(&self, slot: &KeySlot, now: Nanos) -> bool {
        let rule = slot.rule.as_deref().unwrap_or(&self.default);
        // Relaxed: see the module's "Orderings"; the CAS below decides.
        let word = slot.word.load(Ordering::Relaxed);
        word == RETIRED
            || (rule.idle(word, now)
                // Relaxed: the retirement only has to be ordered against the other writes of
                // this word, which the word's modification order does; it publishes nothing.
                && slot
                    .word
                    .compare_exchange(word, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok())
    }

    /// The rule a new state for `key` gets.
    fn rule_for_new(&self, key: &K) -> Rule {
        // Relaxed: see `set_quota`.
        if self.any_overrides.load(Ordering::Relaxed) != 0 {
            if let Some(rule) = self.overrides.pin().get(key) {
                return *rule;
            }
        }
        self.default
    }

    /// Decide `n` permits for `key` at the explicit time `now` (ns of the clock).
    ///
    /// # Errors
    ///
    /// [`Denied`] as for `L`: [`Denied::ExceedsCapacity`] for `n` above the key's capacity,
    /// [`Denied::RateLimited`] with the exact wait otherwise.
    pub fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        if n == 0 {
            return Ok(());
        }
        let attempt = |slot: &KeySlot| {
            let rule = slot.rule.as_deref().unwrap_or(&self.default);
            precheck(n, rule.capacity()).map_err(Attempt::Denied)?;
            acquire_word(&slot.word, rule, n, now)
        };
        loop {
            let outcome = match self.map.with_slot(key, attempt) {
                Some(outcome) => outcome,
                None => {
                    let rule = self.rule_for_new(key);
                    precheck(n, rule.capacity())?;
                    if !self.room_for_new_key(now) {
                        return self.acquire_overflow(n, now);
                    }
                    let own = (rule != self.default).then(|| Box::new(rule));
                    let make = || KeySlot {
                        word: AtomicU64::new(rule.fresh()),
                        rule: own,
                    };
                    self.map.with_slot_or_insert(key, make, attempt)
                }
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err(Attempt::Denied(d)) => return Err(d),
                // Help the evictor remove the dead entry, then look again.
                Err(Attempt::Retired) => {
                    self.map.remove_retired(key);
                }
            }
        }
    }

    /// Decide `n` permits for `key` now.
    ///
    /// # Errors
    ///
    /// As [`Keyed::try_acquire_n_at`].
    pub fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(key, n, self.clock.now())
    }

    /// Decide one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`Keyed::try_acquire_n_at`].
    pub fn try_acquire(&self, key: &K) -> Result<(), Denied> {
        self.try_acquire_n(key, 1)
    }

    /// The state of `key` at `now`, consuming nothing (a fresh state for an unknown key).
    pub fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        let seen = self.map.with_slot(key, |slot| {
            // Relaxed: a read-only observation.
            let word = slot.word.load(Ordering::Relaxed);
            let rule = slot.rule.as_deref().unwrap_or(&self.default);
            rule.snapshot(if word == RETIRED { rule.fresh() } else { word }, now)
        });
        seen.unwrap_or_else(|| {
            let rule = self.rule_for_new(key);
            rule.snapshot(rule.fresh(), now)
        })
    }

    /// Whether a new key may get a slot now, sweeping first if it is time to.
    fn room_for_new_key(&self, now: Nanos) -> bool {
        // Unbounded (the default): no need to count the keys (`DashMapStore` counts by
        // locking every shard in turn).
        let bounded = self.max_keys != usize::MAX;
        let full = bounded && self.map.len() >= self.max_keys;
        // Relaxed: `next_sweep` only elects one sweeper at a time; the CAS decides who.
        let due = self.next_sweep.load(Ordering::Relaxed);
        if (self.sweep_every > 0 || full) && now >= due {
            let next = now.saturating_add(self.sweep_every.max(1_000_000));
            // Relaxed: as above; the sweep itself synchronises through each slot's CAS.
            if self
                .next_sweep
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.evict_idle_at(now);
            }
        }
        !bounded || self.map.len() < self.max_keys
    }

    /// The shared overflow limiter, for keys refused a slot of their own.
    fn acquire_overflow(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        precheck(n, self.default.capacity())?;
        acquire_word(&self.overflow, &self.default, n, now).map_err(|a| match a {
            Attempt::Denied(d) => d,
            // The overflow word is never retired.
            Attempt::Retired => Denied::NEVER,
        })
    }

    /// Remove every key idle for at least [`EVICTION_GRACE_NS`] at the clock's current
    /// time; returns how many were removed.
    pub fn evict_idle(&self) -> usize {
        self.evict_idle_at(self.clock.now())
    }

    /// As [`Keyed::evict_idle`], at the explicit time `now`.
    pub fn evict_idle_at(&self, now: Nanos) -> usize {
        self.map.retire_each(|slot| self.retire_if_idle(slot, now))
    }
}
