//! The leased fast path: each node takes leases of cells from the Redis GCRA and spends
//! them from a local lock-free counter, so a decision is a local compare-and-swap and
//! Redis sees one script call per lease; with the core's debt policy and forced charges
//! across the fleet.
//!
//! # Protocol
//!
//! Per key, a node holds a [`LeaseRule`] word in a [`WordCell`](limitcore::cell::WordCell)
//! (the core's one compare-and-swap loop, on a word of this crate's own protocol):
//!
//! 1. **Lease.** One script call takes up to `g` cells from the key's GCRA on Redis, as many
//!    as conform now and the node's fair share allows ([`RedisGcra::try_take_fair`], the
//!    design in [`fair`](crate::fair); first come, first served with
//!    [`LeaseConfig::fair`]`(false)`: [`RedisGcra::try_take_up_to`]): they are charged there
//!    first, exactly as `g` admissions of the exact mode would be.
//! 2. **Spend.** Requests take cells from the local word ([`LeaseRule::spend`], through
//!    [`WordCell::update`](limitcore::cell::WordCell::update)); nothing else is on the
//!    request path. A word with too few cells either is blocked (step 5) or needs a lease
//!    ([`Spend::NeedsLease`]), which starts a fetch.
//! 3. **Refill ahead.** When a decision leaves at most half the current lease size, the
//!    next lease is fetched by a spawned task (off the request path), asking for
//!    `g = size − held`; at most one fetch per key is in flight. It is installed with
//!    [`WordCell::update`](limitcore::cell::WordCell::update) ([`LeaseRule::install`]):
//!    cells still held plus the new ones.
//! 4. **Expire.** A lease's cells expire `ttl` after it arrived; unspent cells are never
//!    refunded (a refund could create a permit under a race; letting them lapse cannot).
//! 5. **Refusal.** When Redis grants nothing it returns the exact wait `R` for one cell; the
//!    node blocks the key locally until `t_recv + R` ([`LeaseRule::block`]), with `t_recv`
//!    the local time the reply *arrived*: Redis decided at some instant before `t_recv`, so
//!    at `t_recv + R` Redis's clock has passed its own `now + R` (the wait is never early,
//!    whatever the round trip). Until then every decision is refused locally with that
//!    exact remaining wait (rounded up to the ms), and Redis is not asked.
//! 6. **Adapt.** The lease size follows the node's own rate on the key: `size ≈ rate ×
//!    target` (the cells spent since the previous request over the time since, times the
//!    target lease duration), doubled when the node ran dry, within `1 ..= L`. The request
//!    also reports the node's demand on the key for the fair shares: its offered load
//!    (admitted plus refused) as a share of the key's rate, averaged over about the target.
//!
//! # Debt, oversized requests and forced charges
//!
//! The key's limit on Redis may run a debt policy ([`LeaseConfig::max_debt`], `D`: the
//! core's [`Budget`](limitcore::Budget) semantics, [`RedisGcra`]'s "Contract"), and nodes
//! may charge usage after the fact; CockroachDB's distributed token bucket is the model
//! (pods spend a local bucket filled by grants from a central one, and report usage that
//! cannot be throttled into debt):
//!
//! - **A lease never runs into debt** and never holds more than `L` cells: it takes only
//!   what fits below the burst span, as before.
//! - **A request above `L`** cannot be served by a lease. [`LeasedLimiter::acquire`] (and
//!   [`LeasedKey::acquire`]) decides it on Redis by the exact script, one call, as
//!   [`RedisGcra::decide`] would: up to the burst, or under debt up to `⌊(B·T + D)/T⌋`
//!   admitted only from a full key. The synchronous calls, which never wait for Redis,
//!   refuse it as [`Denied::ExceedsCapacity`] with capacity `min(burst, L)`, as before.
//! - **A forced charge** ([`LeasedLimiter::charge`], [`LeasedKey::charge`]) spends the
//!   cells the node holds for the key first (one compare-and-swap on the key's word:
//!   Redis charged them when it leased them), then charges the rest on Redis in one script
//!   call, never refused by the limit (saturating at `B·T + D` of backlog, the rest
//!   reported as the shortfall). If Redis's answer says a request must now wait, the node
//!   blocks the key until that wait has passed, as after a refused lease (step 5).
//! - **A recorded charge** ([`LeasedLimiter::record`], [`LeasedKey::record`]: a cost known
//!   after the work, an LLM response's tokens) spends the held cells first in the same way,
//!   and records the rest on Redis whole, as debt past the burst and past `D`
//!   ([`RedisGcra::record`]): never refused, never lost (only a backlog past 2^52 µs is
//!   short, and reported), with the same local block after it.
//! - **A reservation** ([`LeasedLimiter::reserve`]) is an admission of its estimate with a
//!   receipt; its settle ([`LeasedLimiter::settle`]) records the excess of the actual cost
//!   as a recorded charge does, and gives nothing back below the estimate (step 4: cells
//!   are never refunded), so it is stricter than the exact settle by at most the unused
//!   part, never looser.
//!
//! # The bound
//!
//! Let `N` nodes share a key, `L` be the largest lease ([`LeaseConfig::max_lease`]), `B`
//! the burst, `T` the emission interval and `D` the maximum debt (zero without a debt
//! policy), `T` and `D` in µs as on Redis. What the fleet *consumes* of the key is what it
//! admits plus what its forced charges record (from held cells, or on Redis). While Redis
//! answers, in any window `[a, a + Δ)`:
//!
//! ```text
//! consumed(fleet, [a, a+Δ))  ≤  B + ⌈(Δ + D) / T⌉ − 1  +  N·L          (the exact bound + N·L)
//! consumed(fleet, [0, t))    ≤  consumed(Redis, [0, t))  ≤  B + ⌈(t + D) / T⌉ − 1   (long run)
//! ```
//!
//! With no debt (`D = 0`) this is GCRA's `B + ⌈Δ/T⌉ − 1 + N·L`, the bound before charges
//! existed, now counting the charges in it: **the charge path adds nothing** to the window
//! bound. The debt adds `⌈(Δ + D)/T⌉ − ⌈Δ/T⌉` permits (at most `⌈D/T⌉`) to the bound of
//! a window and of the long run, whether requests or charges run the key into it.
//!
//! *Proof.* (i) **Redis.** Every script call on the key that changes it consumes `m ≥ 1`
//! permits: a lease of `m` cells (plain or fair: a fair lease takes at most what the plain
//! one would, and moves the TAT exactly as it does, [`fair`](crate::fair)), an admission of
//! `m` permits (at most the burst, or
//! under debt above it from a full key), a charge of `m` permits; every call runs on one
//! state, atomically, whichever node sent it. Such a call at Redis's time `t` moves the
//! TAT to `max(TAT, t) + m·T` and leaves `TAT − t ≤ B·T + D`: a lease or an admission of
//! at most the burst by its own condition (`≤ B·T`), an oversized admission because `m`
//! is at most the capacity `⌊(B·T + D)/T⌋`, a charge because it is cut to the room below
//! `B·T + D`. Let the calls consuming `m₁ … m_k` run at `a ≤ t₁ ≤ … ≤ t_k < a + Δ`. The
//! first leaves `TAT ≥ t₁ + m₁·T ≥ a + m₁·T`, each later one adds at least its `m_i·T`,
//! so after the last `TAT ≥ a + Σm_i·T`, and the last left
//! `TAT ≤ t_k + B·T + D < a + Δ + B·T + D`. Hence `Σm_i·T < Δ + B·T + D`, and as `Σm_i`
//! is an integer, `Σm_i ≤ B + ⌈(Δ + D)/T⌉ − 1`. Calls that change nothing (refusals,
//! charges cut to 0) consume nothing; an expired key is a full one (its TTL is its
//! backlog). This holds whatever the offset of Redis's clock, provided it runs at the true
//! rate and never steps back.
//! (ii) **Cells.** A node consumes locally only by spending cells: an admission spends
//! `n`, a charge `min(held, n)` before it asks Redis for the rest. Cells are created only
//! by leases and never added by a spend, so a cell spent in the window was granted either
//! within it, and is counted in (i), or before `a`, and was then *owned* by its node at
//! `a`, held or in flight. A node asks for `g = size − held` with `size ≤ L`, has at most
//! one fetch in flight, and its held cells only decrease until that fetch installs (a
//! decision and a charge spend them, a block keeps them until it ends, expiry drops them);
//! so at every instant `held + in flight ≤ L`, and the fleet owns at most `N·L` at `a`.
//! (iii) Everything else the fleet consumes is a Redis call of (i): a request above `L`,
//! the part of a charge beyond the held cells. Summing (i) and (ii) gives the first line.
//! For the second, every local consumption spends a granted cell and every other one is a
//! Redis call, so the fleet never consumes more than Redis did, which (i) bounds with
//! `a = 0`, `Δ = t`: no `N·L` term, and the cells that expire unspent only lower it. ∎
//!
//! A refusal from Redis only blocks locally, expiry only removes cells, and the fair shares
//! only lower what a lease takes: none can break the bound. Every limiter on the key
//! (leased or exact, on every node) must share the quota and the debt: the bound is that
//! configuration's. The outage policies ([`Policy`]) state their own, charges included; a
//! charge whose call timed out may have been recorded on Redis as well as by the policy
//! (stricter, never looser).
//!
//! # Charges recorded past the limit
//!
//! A recorded charge ([`LeasedLimiter::record`], [`RedisGcra::record`], a settle's excess)
//! is never refused, so no limit can bound what the fleet consumes with it: one record of
//! a million tokens consumes a million. What stays bounded is everything else, by what the
//! fleet still owes: let `R` be the debt that the window's last call on Redis left
//! (`max(0, TAT − t − B·T)` after it, µs: zero unless a charge took the key past its
//! burst), and count a settled reservation as its actual cost. Then, while Redis answers:
//!
//! ```text
//! consumed(fleet, [a, a+Δ))  ≤  B + ⌈(Δ + max(D, R)) / T⌉ − 1  +  N·L
//! consumed(fleet, [0, t))    ≤  consumed(Redis, [0, t))  ≤  B + ⌈(t + max(D, R_t)) / T⌉ − 1
//! ```
//!
//! with `R_t` the debt outstanding at `t`. Without recorded charges `R ≤ D` and these are
//! the lines above. Every permit recorded past the limit is owed: each adds one to the
//! bound only while it is unpaid, and every request on the key, one for no permits
//! included (exact mode), is refused until it is paid back at the rate, so over time the
//! fleet admits exactly that much less.
//!
//! *Proof.* (i′) As (i), with the calls of a window at Redis times `a ≤ t₁ ≤ … ≤ t_k <
//! a + Δ`: a record of `m` moves the TAT to `max(TAT, t) + m·T` as every consuming call
//! does, and a settle below its estimate leaves a state never more permissive than
//! charging the actual cost at the reservation (the core's GCRA refund gives back only the
//! part of the unused tail no reading since has absorbed), so a settled reservation
//! counts as its actual cost. Then `a + (Σ m)·T ≤ TAT_k = t_k + backlog_k`, and the last
//! call left `backlog_k ≤ B·T + max(D, R)` (an admission or a lease at most `B·T`, an
//! oversized admission or a budget's charge at most `B·T + D`, a record `B·T + R` by the
//! definition of `R`): `(Σ m)·T < Δ + B·T + max(D, R)`, so `Σ m ≤ B + ⌈(Δ + max(D, R))/T⌉
//! − 1`. (ii) and (iii) are unchanged: a record spends held cells (granted, counted by
//! (i′) or owned at `a`) before it asks Redis for the rest, and a leased settle gives no
//! cell back. ∎
//!
//! The nodes that did not record learn of the debt when their next lease is refused; until
//! then they spend the cells they hold, which is the `N·L` term. A request for no permits
//! on the leased path is decided locally: it sees this node's block after its own record,
//! not the fleet's debt; a check of no cost that must see every debt belongs on the exact
//! limiter ([`RedisGcra`]), whose script answers it from the key's TAT.
//!
//! # Cost
//!
//! A decision is a map lookup and a compare-and-swap on the key's word (on a [`LeasedKey`],
//! resolved once, the compare-and-swap alone): debt and charges add nothing to it (no
//! field, no atomic operation; the limit's debt lives in the Redis script's arguments), and
//! neither do the fair shares to an admission (the node's admitted count is derived from
//! the cells it spent). A refusal for want of cells also counts itself towards the node's
//! demand: two loads on the word's cache line, and a plain store only until the sample
//! reaches the key's whole rate (then a saturated key's refusals write nothing).
//! Redis sees about one command per lease (`rate × target` decisions), plus heartbeats,
//! plus one per request above `L` and one per charge that the held cells do not cover; a
//! node that is refused by Redis sends no lease request until Redis's wait has passed.
//! Under saturation a node asks about as often as its share yields cells, in small leases
//! (the `fleet` example, 4 nodes at `1000/s burst 50` for 5 s: 16,000 to 19,000 commands
//! for the fleet's 5,000 cells, heartbeats included; first come, first served: 16,000 to
//! 25,000), and a fair lease call reads the key's fair-share hash, one field per live node
//! ([`fair`](crate::fair), "Cost"). Per decision that is well under a command per 10,000
//! (a saturated node refuses locally millions of times a second).
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
use crate::error::Error;
use crate::exact::RedisGcra;
use crate::policy::Policy;
use crate::telemetry::LeaseMetrics;
use limitcore::clock::{Clock, MonotonicClock, Nanos};
use limitcore::{Decision, Denied, KeyHasher, KeyedRateLimiter, Quota, Snapshot};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod awaited;
mod charge;
mod config;
mod decide;
mod demand;
mod entry;
mod fetch;
mod key;
#[cfg(all(test, limitcore_loom))]
mod loom;
mod rule;

pub use awaited::AwaitLeases;
pub use charge::LeasedReceipt;
pub use config::LeaseConfig;
use entry::{live_entry, Entry, Keys, KeysRef};
pub use key::LeasedKey;
pub use rule::{LeaseRule, Spend, MAX_CELLS};

/// `d` in nanoseconds, saturating at `u64::MAX` (585 years).
fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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
    /// The key's emission interval on Redis, ns (`T`: the unit of the demand reports).
    interval_ns: u64,
    /// This node's id in the fair-share reports (the heartbeat's).
    node: String,
    /// Round-trip estimate of lease fetches, ns (EWMA, 1/8).
    rtt: AtomicU64,
    leases: AtomicU64,
    granted: AtomicU64,
    refusals: AtomicU64,
    /// The fetches through the `metrics` facade (feature `metrics`; empty without it).
    metrics: LeaseMetrics,
}

/// A fleet-wide limit per key with local, synchronous, lock-free decisions: the GCRA on
/// Redis hands out leases of cells, and each node spends its own from a [`LeaseRule`]
/// word. Implements the core's [`KeyedRateLimiter<str>`](KeyedRateLimiter), so an HTTP
/// layer generic over it (`limitcore-tower`) uses it as it uses any keyed limiter.
///
/// # Bound
///
/// With `N` nodes, largest lease `L` and maximum debt `D` ([`LeaseConfig::max_debt`], zero
/// by default), in any window of length Δ the fleet consumes (admits, plus charges) at
/// most `B + ⌈(Δ + D)/T⌉ − 1 + N·L` per key (the exact bound plus `N·L`), and over the
/// long run never more than the exact limit. Charges recorded past the limit
/// ([`LeasedLimiter::record`]) replace `D` by `max(D, R)`, `R` the debt still owed at the
/// window's end. The proofs are in the [module docs](self).
///
/// # Capacity
///
/// The synchronous calls (the [`KeyedRateLimiter`] trait, [`LeasedLimiter::decide_verdict_at`])
/// take at most `min(burst, L)` permits a request (a lease never holds more); larger ones
/// are [`Denied::ExceedsCapacity`] with that capacity. [`LeasedLimiter::acquire`] decides a
/// request above `L` on Redis instead (one script call), up to
/// [`LeasedLimiter::capacity`]: the burst, or `⌊(burst·T + D)/T⌋` under debt (admitted only
/// from a full key). Forced charges ([`LeasedLimiter::charge`]) have no capacity.
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
/// charged), by decisions and by charges alike; then the [`Policy`] decides, or records a
/// charge as it says ([`Source::Fallback`](crate::Source::Fallback); [`Policy`], "Charges").
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
    /// ([`gcra_micros`](crate::gcra_micros)), or its burst span plus the configured debt
    /// exceeds 2^52 µs ([`RedisGcra::with_max_debt`]).
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
        let node = redis.config().get_node_id().to_owned();
        // Checks the quota (the same `Error::Quota` as `gcra_micros`) before anything else;
        // its outage policy is the leased path's too.
        let gcra = RedisGcra::new(redis, quota, policy)?
            .with_max_debt(config.max_debt)?
            .with_prefix(config.prefix.clone());
        let interval_ns = gcra.interval_us().saturating_mul(1_000);
        let rule = LeaseRule::with_epoch(quota, clock.now(), config.max_lease);
        let config = LeaseConfig {
            max_lease: rule.capacity(),
            ..config
        };
        let metrics = LeaseMetrics::register(&config.prefix);
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
            interval_ns,
            node,
            // A first guess until a fetch is measured: a loopback round trip, at most.
            rtt: AtomicU64::new((deadline.as_nanos() / 4).min(1_000_000) as u64),
            leases: AtomicU64::new(0),
            granted: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            metrics,
        });
        inner.runtime.spawn(fetch::sweep(Arc::downgrade(&inner)));
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

    /// The most permits one request may take through [`LeasedLimiter::acquire`]: the
    /// burst, or `⌊(burst·T + D)/T⌋` under a debt policy ([`LeaseConfig::max_debt`]).
    /// Requests up to `L` ([`LeasedLimiter::max_lease`]) are decided locally, larger ones
    /// on Redis; the synchronous calls take at most `L`.
    pub fn capacity(&self) -> u32 {
        self.inner.gcra.capacity()
    }

    /// The maximum debt on Redis (whole µs; zero: none).
    pub fn max_debt(&self) -> Duration {
        self.inner.gcra.max_debt()
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
}

impl<C: Clock> Inner<C> {
    /// A key's first entry: the fresh word, a first lease size of a quarter of `L`.
    fn entry(&self) -> Entry {
        Entry::new(&self.rule, (self.config.max_lease / 4).max(1))
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
