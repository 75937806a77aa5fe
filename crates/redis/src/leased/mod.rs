//! The leased fast path: each node takes leases of cells from the Redis GCRA and spends
//! them from a local lock-free counter, so a decision is a local compare-and-swap and
//! Redis sees one script call per lease.
//!
//! # Protocol
//!
//! Per key, a node holds a [`LeaseRule`] word in a [`WordCell`] (the core's one
//! compare-and-swap loop, on a word of this crate's own protocol):
//!
//! 1. **Lease.** One script call takes up to `g` cells from the key's GCRA on Redis, as many
//!    as conform now ([`RedisGcra::try_take_up_to`]): they are charged there first, exactly
//!    as `g` admissions of the exact mode would be.
//! 2. **Spend.** Requests take cells from the local word ([`LeaseRule::spend`], through
//!    [`WordCell::update`]); nothing else is on the request path. A word with too few
//!    cells either is blocked (step 5) or needs a lease ([`Spend::NeedsLease`]), which
//!    starts a fetch.
//! 3. **Refill ahead.** When a decision leaves at most half the current lease size, the
//!    next lease is fetched by a spawned task (off the request path), asking for
//!    `g = size − held`; at most one fetch per key is in flight. It is installed with
//!    [`WordCell::update`] ([`LeaseRule::install`]): cells still held plus the new ones.
//! 4. **Expire.** A lease's cells expire `ttl` after it arrived; unspent cells are never
//!    refunded (a refund could create a permit under a race; letting them lapse cannot).
//! 5. **Refusal.** When Redis grants nothing it returns the exact wait `R` for one cell; the
//!    node blocks the key locally until `t_recv + R` ([`LeaseRule::block`]), with `t_recv`
//!    the local time the reply *arrived*: Redis decided at some instant before `t_recv`, so
//!    at `t_recv + R` Redis's clock has passed its own `now + R` (the wait is never early,
//!    whatever the round trip). Until then every decision is refused locally with that
//!    exact remaining wait (rounded up to the ms), and Redis is not asked.
//! 6. **Adapt.** The lease size follows the node's own rate on the key: `size ≈ rate ×
//!    target` (the cells spent since the last lease over the time it took, times the
//!    target lease duration), doubled when the node ran dry, within `1 ..= L`.
//!
//! # The bound
//!
//! Let `N` nodes share a key, `L` be the largest lease ([`LeaseConfig::max_lease`]), `B`
//! the burst and `T` the emission interval. Then in any window `[a, a + Δ)`:
//!
//! ```text
//! admitted(fleet, [a, a+Δ))  ≤  B + ⌈Δ / T⌉ − 1  +  N·L          (exact GCRA bound + N·L)
//! admitted(fleet, [0, t))    ≤  granted(Redis, [0, t))  ≤  B + ⌈t / T⌉ − 1   (long run)
//! ```
//!
//! *Proof sketch.* Every local admission spends a cell that Redis granted earlier (a cell is
//! created only by a lease, and a local take never adds cells), so each admission in the
//! window spends a cell granted either (i) within the window or (ii) before it.
//! (i) Grants are admissions of the exact GCRA on Redis (a lease of `g` cells is one
//! admission of `g` permits), and in any window of length Δ the GCRA admits at most
//! `B + ⌈Δ/T⌉ − 1` permits (the TAT rises by `T` per permit from at least the window's
//! start and may not pass the last admission's time plus `B·T`), whatever the offset of
//! Redis's clock, provided it runs at the true rate. (ii) Cells granted before `a` and
//! spent in the window were *owned* by a node at `a`, held or in flight. A node asks for
//! `g = size − held` with `size ≤ L`, has at most one fetch in flight, and its held cells
//! only decrease until that fetch installs; so at every instant `held + in flight ≤ L`,
//! and the fleet owns at most `N·L` at `a`. Summing (i) and (ii) gives the first line; the
//! second follows from "every admission spends a granted cell", with no `N·L` term: over
//! the long run the fleet never exceeds the exact limit, and the cells that expire unspent
//! only lower it. ∎
//!
//! A refusal from Redis only blocks locally, and expiry only removes cells: neither can
//! break the bound. The outage policies ([`Policy`]) state their own.
//!
//! # Cost
//!
//! A decision is a map lookup and a compare-and-swap on the key's word (on a [`LeasedKey`],
//! resolved once, the compare-and-swap alone). Redis sees about
//! one command per lease (`rate × target` decisions), plus heartbeats; a node that is
//! refused by Redis sends nothing until Redis's wait has passed.
//!
//! # First requests
//!
//! A key the node holds no lease for is refused through the synchronous trait until the
//! first lease arrives (about one round trip), and the refusal starts the fetch. Its
//! `retry_after` is an *estimate*: the node's round-trip time for lease fetches
//! ([`LeasedLimiter::rtt`]), not the exact wait of the core's
//! [`Denied::RateLimited`] contract, which no node can know before Redis answers (the
//! lease may come back refused, with Redis's own exact wait, or later than usual).
//! [`LeasedLimiter::acquire`] awaits that lease instead.
//!
//! # Idle keys
//!
//! A background sweep drops the local state of keys idle for a lease TTL (see `sweep` in
//! the source for the protocol). A request that was waiting on a swept key's entry in
//! [`LeasedLimiter::acquire`] is woken at once and looks the key up again, getting a fresh
//! entry and a new lease fetch.

use crate::client::Redis;
use crate::exact::RedisGcra;
use crate::policy::{Policy, Source, Verdict};
use crate::Error;
use limitcore::cell::WordCell;
use limitcore::clock::{Clock, MonotonicClock, Nanos};
use limitcore::{Decision, Denied, KeyHasher, KeyedRateLimiter, Quota, Snapshot};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

mod key;
mod rule;

pub use key::LeasedKey;
pub use rule::{LeaseRule, Spend, MAX_CELLS};

/// The leased mode's settings.
///
/// # Examples
///
/// ```
/// use limitcore_redis::LeaseConfig;
/// use std::time::Duration;
///
/// let config = LeaseConfig::new(16).target(Duration::from_millis(20));
/// assert_eq!(config.get_max_lease(), 16);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    max_lease: u32,
    target: Duration,
    ttl: Duration,
    prefix: String,
}

impl LeaseConfig {
    /// Leases of at most `max_lease` cells (`L` of the bound; clamped to the burst and
    /// [`MAX_CELLS`], at least 1), lasting about 50 ms each, expiring 1 s after they arrive.
    pub fn new(max_lease: u32) -> Self {
        LeaseConfig {
            max_lease: max_lease.max(1),
            target: Duration::from_millis(50),
            ttl: Duration::from_secs(1),
            prefix: "lc:gcra:".to_owned(),
        }
    }

    /// Store keys on Redis as `prefix` + key (default `lc:gcra:`, [`RedisGcra`]'s: a leased
    /// and an exact limiter of the same quota on the same key share one limit).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The largest lease, `L` in the bound `GCRA + N·L`, in cells (permits).
    #[must_use]
    pub fn max_lease(mut self, max_lease: u32) -> Self {
        self.max_lease = max_lease.max(1);
        self
    }

    /// How long a lease should last at the node's own rate (its size is `rate × target`).
    #[must_use]
    pub fn target(mut self, target: Duration) -> Self {
        self.target = target;
        self
    }

    /// How long a lease's cells stay valid after it arrives.
    ///
    /// # Panics
    ///
    /// If `ttl` is below 1 ms (the word's resolution).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        assert!(
            ttl >= Duration::from_millis(1),
            "a lease must live at least 1 ms"
        );
        self.ttl = ttl;
        self
    }

    /// `L`, the largest lease, in cells (permits).
    pub fn get_max_lease(&self) -> u32 {
        self.max_lease
    }
}

impl Default for LeaseConfig {
    /// `L = 16` (clamped to the burst), 50 ms leases, 1 s expiry.
    fn default() -> Self {
        LeaseConfig::new(16)
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX` (585 years).
fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One key's local state. `repr(C)`, the hot fields first: the lease word every decision
/// compare-and-swaps (a [`LeaseRule`] word; the rule itself is the limiter's), then the two
/// that the refill check of an admission reads, then `pins`, which every keyed lookup
/// reads; the fetch's statistics and the waiters' `Notify` after them.
#[repr(C)]
struct Entry {
    /// The lease word, changed only through the core's compare-and-swap loop.
    word: WordCell,
    /// Current lease size (cells), `1 ..= L`.
    size: AtomicU32,
    fetching: AtomicBool,
    /// The [`LeasedKey`] handles on this entry, or [`RETIRED`] once the sweep has removed it
    /// (see [`Entry::pin`]).
    pins: AtomicUsize,
    /// When the last lease was installed (ns) and the cells held right after.
    installed_cells: AtomicU32,
    installed_at: AtomicU64,
    /// Woken when the entry's fetch slot is given back (a fetch ended, or the sweep let go
    /// of an entry it kept) or the sweep retired the entry.
    arrived: tokio::sync::Notify,
}

/// [`Entry::pins`] of an entry the sweep retired: no handle may pin it again, no lookup
/// returns it again, and it never holds a cell again (the sweep also keeps its fetch slot).
const RETIRED: usize = usize::MAX;

impl Entry {
    /// A key's first entry: the fresh word of `rule`, no fetch, a lease size of `size`.
    fn new(rule: &LeaseRule, size: u32) -> Self {
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
    fn pin(&self) -> bool {
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
    fn unpin(&self) {
        // Relaxed: see `pin`.
        self.pins.fetch_sub(1, Ordering::Relaxed);
    }

    /// Retire an idle entry (the sweep, holding its fetch slot): `false` if a handle pins it.
    fn retire(&self) -> bool {
        // Relaxed: see `pin`.
        self.pins
            .compare_exchange(0, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the sweep retired the entry (for good: `RETIRED` is never left).
    #[inline]
    fn is_retired(&self) -> bool {
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
    fn sweep_step(&self, rule: &LeaseRule, since: Nanos) -> bool {
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
type Keys = papaya::HashMap<String, Arc<Entry>, KeyHasher>;
type KeysRef<'m> = papaya::HashMapRef<'m, String, Arc<Entry>, KeyHasher, papaya::LocalGuard<'m>>;

/// `key`'s live entry in `keys`: the one there unless the sweep retired it, else a new one
/// made by `make` (a key's first request, or the first after the sweep). A retired entry
/// met in the map is removed, and only it (as the sweep's own removal: a newer entry put
/// in its place is left alone). A lookup borrows the key (`&str`); only a new entry
/// allocates it.
#[inline]
fn live_entry<'g>(keys: &'g KeysRef<'_>, key: &str, make: impl Fn() -> Entry) -> &'g Arc<Entry> {
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

struct Inner<C: Clock> {
    gcra: RedisGcra,
    rule: LeaseRule,
    clock: C,
    config: LeaseConfig,
    /// Per key, its entry: papaya (lock-free lookups: threads deciding on one hot key share
    /// no lock word) hashing with the core's [`KeyHasher`] (aHash under random keys; see
    /// BENCHMARKS.md, "limitcore-redis", for the lookup's cost against SipHash and dashmap).
    keys: Keys,
    runtime: tokio::runtime::Handle,
    /// Round-trip estimate of lease fetches, ns (EWMA, 1/8).
    rtt: AtomicU64,
    leases: AtomicU64,
    granted: AtomicU64,
    refusals: AtomicU64,
}

/// A fleet-wide limit per key with local, synchronous, lock-free decisions: the GCRA on
/// Redis hands out leases of cells, and each node spends its own from a [`LeaseRule`]
/// word. Implements the core's [`KeyedRateLimiter<str>`](KeyedRateLimiter), so an HTTP
/// layer generic over it (`limitcore-tower`) uses it as it uses any keyed limiter.
///
/// # Bound
///
/// With `N` nodes and largest lease `L`, in any window of length Δ the fleet admits at most
/// `B + ⌈Δ/T⌉ − 1 + N·L` per key (the exact GCRA's bound plus `N·L`), and over the long run
/// never more than the exact limit. The proof is in the [module docs](self).
///
/// # Capacity
///
/// A request can take at most `min(burst, L)` permits (a lease never holds more);
/// larger ones are [`Denied::ExceedsCapacity`] with that capacity.
///
/// # Refusals
///
/// A refusal is [`Denied::RateLimited`] with the exact wait when Redis refused the key's
/// last lease (the local block), and [`Denied::ExceedsCapacity`] above the capacity. A key
/// the node holds no valid cells for is refused through the synchronous calls with
/// `retry_after` = the round-trip *estimate* ([`LeasedLimiter::rtt`]) while its lease is
/// fetched: not the core's exact wait, since none is known before Redis answers.
/// [`LeasedLimiter::acquire`] waits for that lease instead.
///
/// # Outages
///
/// While the circuit breaker is open, cells already held are spent first (they were
/// charged); then the [`Policy`] decides ([`Source::Fallback`]).
///
/// # Examples
///
/// ```no_run
/// use limitcore::KeyedRateLimiter;
/// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let limiter = LeasedLimiter::new(redis, "1000/s burst 50".parse()?, LeaseConfig::new(16), Policy::FailLocal)?;
/// limiter.acquire("tenant-42", 1).await;            // waits for the first lease
/// let decision = limiter.decide_n("tenant-42", 1);  // local, synchronous
/// # Ok(()) }
/// ```
pub struct LeasedLimiter<C: Clock + Clone + 'static = MonotonicClock> {
    inner: Arc<Inner<C>>,
}

impl<C: Clock + Clone + 'static> std::fmt::Debug for LeasedLimiter<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedLimiter")
            .field("quota", &self.inner.gcra.quota())
            .field("config", &self.inner.config)
            .field("keys", &self.inner.keys.len())
            .field("leases", &self.leases())
            .finish()
    }
}

impl<C: Clock + Clone + 'static> Clone for LeasedLimiter<C> {
    fn clone(&self) -> Self {
        LeasedLimiter {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl LeasedLimiter<MonotonicClock> {
    /// A leased limit of `quota` per key on `redis`, on the default clock. Must be called
    /// inside a tokio runtime: lease fetches and the sweep of idle keys run on it.
    ///
    /// # Errors
    ///
    /// [`Error::Quota`] if the quota cannot be represented on Redis
    /// ([`gcra_micros`](crate::gcra_micros)).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn new(
        redis: Redis,
        quota: Quota,
        config: LeaseConfig,
        policy: Policy,
    ) -> Result<Self, Error> {
        LeasedLimiter::with_clock(redis, quota, config, policy, MonotonicClock::new())
    }
}

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// As [`LeasedLimiter::new`], reading local time from `clock`.
    ///
    /// # Errors
    ///
    /// As [`LeasedLimiter::new`].
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn with_clock(
        redis: Redis,
        quota: Quota,
        config: LeaseConfig,
        policy: Policy,
        clock: C,
    ) -> Result<Self, Error> {
        let deadline = redis.config().get_deadline();
        // Checks the quota (the same `Error::Quota` as `gcra_micros`) before anything else;
        // its outage policy is the leased path's too.
        let gcra = RedisGcra::new(redis, quota, policy)?.with_prefix(config.prefix.clone());
        let rule = LeaseRule::with_epoch(quota, clock.now(), config.max_lease);
        let config = LeaseConfig {
            max_lease: rule.capacity(),
            ..config
        };
        let inner = Arc::new(Inner {
            gcra,
            rule,
            clock,
            config,
            // Resizes in one blocking step, as the core's `PapayaStore`: papaya's incremental
            // mode can leave a table filled by `get_or_insert` mid-migration, with long probes.
            keys: papaya::HashMap::builder()
                .hasher(KeyHasher::new())
                .resize_mode(papaya::ResizeMode::Blocking)
                .build(),
            runtime: tokio::runtime::Handle::current(),
            // A first guess until a fetch is measured: a loopback round trip, at most.
            rtt: AtomicU64::new((deadline.as_nanos() / 4).min(1_000_000) as u64),
            leases: AtomicU64::new(0),
            granted: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        });
        inner.runtime.spawn(sweep(Arc::downgrade(&inner)));
        Ok(LeasedLimiter { inner })
    }

    /// The settings in force (`max_lease` clamped to the burst).
    pub fn config(&self) -> &LeaseConfig {
        &self.inner.config
    }

    /// `L`, the largest lease (and the largest request), in cells (permits).
    pub fn max_lease(&self) -> u32 {
        self.inner.config.max_lease
    }

    /// The Redis handle.
    pub fn redis(&self) -> &Redis {
        self.inner.gcra.redis()
    }

    /// Leases granted so far (one script call each).
    pub fn leases(&self) -> u64 {
        // Relaxed: a statistics counter (partner: the `fetch_add` in `fetch`).
        self.inner.leases.load(Ordering::Relaxed)
    }

    /// Cells granted by Redis so far, over all keys (every admission spent one of them).
    pub fn granted(&self) -> u64 {
        // Relaxed: a statistics counter (partner: the `fetch_add` in `fetch`).
        self.inner.granted.load(Ordering::Relaxed)
    }

    /// Lease requests Redis refused so far (the node then blocked the key locally).
    pub fn refusals(&self) -> u64 {
        // Relaxed: a statistics counter (partner: the `fetch_add` in `fetch`).
        self.inner.refusals.load(Ordering::Relaxed)
    }

    /// The node's current round-trip estimate for lease fetches.
    pub fn rtt(&self) -> Duration {
        // Relaxed: an estimate on its own (partner: the store in `fetch`).
        Duration::from_nanos(self.inner.rtt.load(Ordering::Relaxed))
    }

    /// Decide `n` permits for `key` at `now` (ns of this limiter's clock), with where the
    /// decision came from: [`Source::Lease`] (held cells or a local block) or
    /// [`Source::Fallback`] (Redis unreachable and no cells held). A key with no valid
    /// cells is refused with the round-trip estimate as its wait, and its lease is fetched
    /// (see the type's "Refusals").
    pub fn decide_verdict_at(&self, key: &str, n: u32, now: Nanos) -> Verdict {
        let guard = self.inner.keys.pin();
        self.decide_entry(self.entry(&guard, key), key, n, now)
    }

    /// [`LeasedLimiter::decide_verdict_at`]'s result alone: the same decision, with no
    /// snapshot of the key's state computed (what [`KeyedRateLimiter::try_acquire_n_at`]
    /// returns).
    #[inline]
    fn try_decide_at(&self, key: &str, n: u32, now: Nanos) -> Result<(), Denied> {
        let guard = self.inner.keys.pin();
        self.try_entry(self.entry(&guard, key), key, n, now)
    }

    /// The decision on `key`'s `entry` (looked up or pinned by a [`LeasedKey`]), with its
    /// state and source.
    fn decide_entry(&self, entry: &Arc<Entry>, key: &str, n: u32, now: Nanos) -> Verdict {
        let rule = &self.inner.rule;
        let lease = |result, state| Verdict {
            decision: Decision { result, state },
            source: Source::Lease,
        };
        match self.spend(entry, n, now) {
            Ok(word) => {
                self.after_admission(entry, key, n, &word, now);
                lease(Ok(()), rule.snapshot(&word, now))
            }
            Err((Refusal::Stands(denied), word)) => lease(Err(denied), rule.snapshot(&word, now)),
            Err((Refusal::NeedsLease, word)) => match self.lease_needed(entry, key, n, now) {
                Ok(retry_after) => lease(
                    Err(Denied::RateLimited { retry_after }),
                    rule.snapshot(&word, now),
                ),
                Err(fallback) => fallback,
            },
        }
    }

    /// [`LeasedLimiter::decide_entry`]'s result alone, with no snapshot computed.
    #[inline]
    fn try_entry(&self, entry: &Arc<Entry>, key: &str, n: u32, now: Nanos) -> Result<(), Denied> {
        match self.spend(entry, n, now) {
            Ok(word) => {
                self.after_admission(entry, key, n, &word, now);
                Ok(())
            }
            Err((Refusal::Stands(denied), _)) => Err(denied),
            Err((Refusal::NeedsLease, _)) => match self.lease_needed(entry, key, n, now) {
                Ok(retry_after) => Err(Denied::RateLimited { retry_after }),
                Err(fallback) => fallback.decision.result,
            },
        }
    }

    /// `key`'s live entry (see [`live_entry`]): created with no cells on its first
    /// request, and in place of an entry the sweep retired.
    #[inline]
    fn entry<'g>(&self, guard: &'g KeysRef<'_>, key: &str) -> &'g Arc<Entry> {
        live_entry(guard, key, || self.inner.entry())
    }

    /// Take `n` cells from `entry`'s word at `now` ([`LeaseRule::spend`] in the core's
    /// compare-and-swap loop, [`WordCell::update`]), with the size checks every core shell
    /// makes first (`n = 0` admits and writes nothing, `n` above the capacity is
    /// [`Denied::ExceedsCapacity`]): the word it left on admission, or the refusal with the
    /// word it saw.
    #[inline]
    fn spend(&self, entry: &Entry, n: u32, now: Nanos) -> Result<u64, (Refusal, u64)> {
        let rule = &self.inner.rule;
        if n > rule.capacity() || n == 0 {
            let word = entry.word.load();
            return if n == 0 {
                Ok(word)
            } else {
                let capacity = rule.capacity();
                Err((Refusal::Stands(Denied::ExceedsCapacity { capacity }), word))
            };
        }
        entry.word.update(|word| {
            let seen = *word;
            match rule.spend(word, now, n) {
                Ok(()) => Ok(*word),
                Err(Spend::Blocked { retry_after }) => {
                    Err((Refusal::Stands(Denied::RateLimited { retry_after }), seen))
                }
                Err(Spend::NeedsLease) => Err((Refusal::NeedsLease, seen)),
            }
        })
    }

    /// After an admission that left `word`: fetch the next lease in the background when at
    /// most half the lease size is left.
    #[inline]
    fn after_admission(&self, entry: &Arc<Entry>, key: &str, n: u32, word: &u64, now: Nanos) {
        // The cells left: the admission succeeded at `now`, so the word's cells are valid.
        let (left, _, _) = LeaseRule::unpack(*word);
        // Relaxed: the lease size is a tuning hint; a stale one only moves the refill.
        if n > 0 && left <= entry.size.load(Ordering::Relaxed) / 2 {
            self.refill(entry, key, now, false);
        }
    }

    /// After [`Spend::NeedsLease`]: `Ok(retry_after)` once a lease is being fetched, the
    /// node's round-trip estimate (at least 1 µs; an estimate, not an exact wait), or the
    /// outage policy's verdict if the breaker is open.
    #[inline]
    fn lease_needed(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Result<Duration, Verdict> {
        let gcra = &self.inner.gcra;
        if gcra.redis().is_open() {
            return Err(gcra.fall_back(key, n));
        }
        self.refill(entry, key, now, true);
        Ok(self.rtt().max(Duration::from_micros(1)))
    }

    /// Fetch the next lease for `key` in the background unless one is in flight.
    #[inline]
    fn refill(&self, entry: &Arc<Entry>, key: &str, now: Nanos, dry: bool) {
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

    /// Decide `n` permits for `key` now, waiting (up to the Redis deadline) for a lease if
    /// the node holds none for this key: the asynchronous entry point, which never refuses
    /// a key's first request only because its lease has not arrived yet.
    pub async fn acquire(&self, key: &str, n: u32) -> Verdict {
        self.acquire_by(|| {
            let guard = self.inner.keys.pin();
            let entry = self.entry(&guard, key);
            let now = self.inner.clock.now();
            (self.decide_entry(entry, key, n, now), Arc::clone(entry))
        })
        .await
    }

    /// Decide by `decide` (a decision and the entry it was made on) until it admits, or
    /// refuses for any reason but a lease not yet arrived (a Redis refusal's local block,
    /// `n` above the capacity, the outage policy), or the Redis deadline has passed; between
    /// decisions, wait for the entry's lease fetch.
    async fn acquire_by(&self, mut decide: impl FnMut() -> (Verdict, Arc<Entry>)) -> Verdict {
        let deadline = tokio::time::Instant::now() + self.redis().config().get_deadline();
        loop {
            let (verdict, entry) = decide();
            let waits = verdict.source == Source::Lease
                && matches!(verdict.decision.result, Err(Denied::RateLimited { .. }));
            if !waits || !self.await_lease(&entry, deadline).await {
                return verdict;
            }
        }
    }

    /// After a refusal of `entry`'s word: wait until its lease fetch in flight ends, if
    /// one is (the sweep's brief hold of the fetch slot counts as one), or until the sweep
    /// retires the entry; `true` to decide again at once (on a retired entry the caller's
    /// lookup then finds a new one). `false` if the key is blocked by a Redis refusal
    /// instead (the refusal, with its exact wait, is then the answer) or `deadline` has
    /// passed.
    async fn await_lease(&self, entry: &Entry, deadline: tokio::time::Instant) -> bool {
        let now = self.inner.clock.now();
        if self
            .inner
            .rule
            .blocked_until(&entry.word.load(), now)
            .is_some()
        {
            return false;
        }
        let arrived = entry.arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        // The `Notified` exists before the two loads below, and both the end of a fetch and
        // the sweep (`Entry::sweep_step`) call `notify_waiters` after their store to
        // `fetching` or their retirement: a `notify_waiters` after the `Notified` was made
        // wakes it; one before it happened-before it (the `Notify`'s own synchronisation),
        // and then these loads see what preceded it.
        //
        // Acquire: pairs with the Release that ends `fetch` (or the sweep's hold): `false`
        // here means a fetch's word is already installed. Relaxed in `is_retired`: ordered
        // by the `Notify` as said; a retired entry keeps `fetching` for good, so only the
        // retirement tells the waiter to look again.
        if entry.fetching.load(Ordering::Acquire) && !entry.is_retired() {
            return tokio::time::timeout_at(deadline, arrived).await.is_ok();
        }
        tokio::time::Instant::now() < deadline
    }
}

impl<C: Clock> Inner<C> {
    /// A key's first entry: the fresh word, a first lease size of a quarter of `L`.
    fn entry(&self) -> Entry {
        Entry::new(&self.rule, (self.config.max_lease / 4).max(1))
    }
}

/// Why [`LeasedLimiter::spend`] refused: a refusal that is the answer as it stands (the
/// local block's exact wait, the capacity), or a word that needs a lease.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    Stands(Denied),
    NeedsLease,
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
async fn sweep<C: Clock + Clone + 'static>(inner: Weak<Inner<C>>) {
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

/// Keyed by any string form (`str`, `String`, `Arc<str>`, …), so that an HTTP layer whose
/// key extractor yields a `String` (a tenant header, say) takes this limiter as it is.
impl<C: Clock + Clone + 'static, K: AsRef<str> + ?Sized> KeyedRateLimiter<K> for LeasedLimiter<C> {
    #[inline]
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.try_decide_at(key.as_ref(), n, now)
    }

    #[inline]
    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        self.decide_verdict_at(key.as_ref(), n, now).decision
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        let guard = self.inner.keys.pin();
        guard
            .get(key.as_ref())
            .map_or(Snapshot::new(0, Duration::ZERO), |e| {
                self.inner.rule.snapshot(&e.word.load(), now)
            })
    }

    fn quota_for(&self, _key: &K) -> Quota {
        self.inner.gcra.quota()
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.inner.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
