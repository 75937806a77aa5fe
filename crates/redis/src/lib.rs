//! # limitcore-redis
//!
//! One limit across a fleet: [limitcore]'s GCRA and sliding log as exact Redis
//! scripts (one round trip a decision), and a leased lock-free fast path whose overshoot
//! is stated and proved.
//!
//! | mode | type | a decision costs | fleet consumes in any window Δ |
//! |---|---|---|---|
//! | exact GCRA | [`RedisGcra`] | one script call (`EVALSHA`) | `B + ⌈(Δ + max(D, R))/T⌉ − 1` (the GCRA bound when `D = R = 0`) |
//! | exact sliding log | [`RedisSlidingLog`] | one script call | `count` per `period`, any window, plus the entries recorded past it (owed: the log refuses everything until they leave) |
//! | several limits, all or nothing | [`RedisAll`] | one script call | each limit's GCRA bound |
//! | leased | [`LeasedLimiter`] | a lookup and a local compare-and-swap; one script call per lease | `B + ⌈(Δ + max(D, R))/T⌉ − 1 + N·L` |
//! | leased, one key | [`LeasedKey`] ([`LeasedLimiter::key`]) | a local compare-and-swap | the same |
//!
//! (`B` burst, `T` emission interval, `D` maximum debt, zero without a debt policy, `R` the
//! debt that charges recorded past the limit ([`RedisGcra::record`], a settle's excess)
//! left at the window's end, zero without them, `N` nodes, `L` largest lease.) What is
//! counted is what the fleet consumes: admissions plus charges, a settled reservation as
//! its actual cost. Over the long run the leased mode never consumes more than the exact
//! limit; the proofs are in [`leased`]'s docs ("The bound", "Charges recorded past the
//! limit").
//!
//! ## Units
//!
//! Times on Redis's clock are [`RedisMicros`] (µs since the Unix epoch, as `TIME` reads
//! them, or an explicit time given to a script): every `try_…_at` method takes one and
//! every answer's server time is one ([`Answer::server_time`], [`Source::Redis`]). Times on
//! the node's own clock are the core's [`Nanos`](limitcore::clock::Nanos) (ns of a local
//! monotonic clock: the leased path's `decide_verdict_at`, [`LeaseRule`]). Durations on
//! Redis (`T`, `D`, a wait) are whole µs; counts are permits (cells, for a lease).
//!
//! ## Debt and forced charges
//!
//! The GCRA limits take the core's [`Budget`](limitcore::Budget) policy for storage
//! engines (CockroachDB's distributed token bucket is the model): a maximum debt
//! ([`RedisGcra::with_max_debt`], [`RedisGcra::from_budget`], [`LeaseConfig::max_debt`];
//! none by default) lets a request above the burst through once the key is full, leaving it
//! in debt, and forced charges ([`RedisGcra::charge`], [`LeasedLimiter::charge`]) record
//! usage measured after the work, never refused, saturating at the burst plus the debt
//! with the shortfall reported. A leased charge spends the node's cells first, then charges
//! Redis. What each outage policy does with a charge is in [`Policy`], "Charges".
//!
//! ## Costs known after the work
//!
//! An LLM gateway knows a response's tokens only after it: its charge must never be
//! refused nor lost. [`RedisGcra::record`] (and [`RedisSlidingLog::try_record`],
//! [`LeasedLimiter::record`]) records usage whole as debt past the limit, whatever the
//! maximum debt, and every later request, one for no permits included (Envoy's
//! `hits_addend: 0`), is refused until it is paid back. A reservation
//! ([`RedisGcra::try_reserve`], [`RedisSlidingLog::try_reserve`],
//! [`LeasedLimiter::reserve`]) holds an estimate while the work runs and is settled once
//! to the actual cost ([`RedisGcra::try_settle`]: the unused tail given back at its own
//! schedule position, the excess recorded), each one script call on Redis's clock:
//! reserve-then-settle never overshoots the limit the way check-then-report does
//! (measured in `crates/redis-server-tests/tests/reserve_settle.rs`).
//!
//! ## Exact mode
//!
//! The scripts ([`scripts`]) keep the core's contract on Redis's own clock (`TIME`, the
//! only clock) in integer microseconds: `n = 0` writes nothing and is refused only in debt
//! (the key past its burst, with the exact wait until it is not), `n` above the
//! capacity (the burst, without debt) is `ExceedsCapacity`, a denial writes nothing,
//! `retry_after` is exact to the µs and never early, every product is bounded below 2^53
//! (where Lua's doubles stop being exact), and each key expires exactly when its state
//! becomes indistinguishable from a fresh one. They are loaded once and invoked by hash
//! (`EVALSHA`), reloaded on `NOSCRIPT`. Each touches one hash slot, so the same API works
//! on Redis Cluster ([`Redis::connect_cluster`]); [`RedisAll`] hash-tags a tenant's keys
//! (`{tenant}`).
//!
//! The exact mode is asynchronous: [`RedisGcra`], [`RedisSlidingLog`] and [`RedisAll`] (the
//! key is the tenant) implement the core's asynchronous decision seam,
//! [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter), with [`Error`] as its error
//! type, so code written once over it (an HTTP layer) awaits them as it awaits any keyed
//! limiter. The outage policy decides when Redis cannot and the seam returns its decision,
//! except under [`Policy::Propagate`], which returns the error for the caller's own policy
//! ([`Policy`], "The asynchronous seam"). A batch ([`RedisGcra::try_decide_many`]) is one
//! round trip, and one script call per key in it: the key is read and written once for all
//! its requests.
//!
//! ## Leased mode
//!
//! [`LeasedLimiter`] implements the core's synchronous
//! [`KeyedRateLimiter<str>`](limitcore::KeyedRateLimiter): decisions are local (a
//! [`LeaseRule`] word in the core's [`WordCell`](limitcore::cell::WordCell)), leases are
//! fetched in the background before they run out, unspent cells expire rather than being
//! refunded, and after a Redis refusal the node refuses locally, with no round trip, until
//! exactly the time Redis gave (counted from the reply's arrival, so never early). A key
//! the node holds no cells for is refused while its lease is fetched, with the node's
//! round-trip time as an *estimated* `retry_after` ([`LeasedLimiter`], "Refusals");
//! [`LeasedLimiter::acquire`] waits for the lease instead. A [`LeasedKey`] is one key
//! resolved once (the core's unkeyed [`RateLimiter`](limitcore::RateLimiter)): its
//! decisions skip the map lookup and share the key's word with the keyed ones.
//!
//! Leases are granted by **fair shares** ([`fair`]): each node reports its offered load on
//! the key (admitted plus refused) with its lease requests, and the script grants by
//! max-min fair shares of the key's rate over the live nodes' reports, with a GCRA per
//! node at its share beside the key's, lending what the others leave unclaimed. Under
//! saturation every node gets an equal share (measured: between 0.8 and 1.25 of it over
//! 5 s, Jain's index at least 0.95, where first come, first served gave one node of four
//! 2.1 equal shares and another 0.43); a node alone gets the whole rate; the bounds above
//! are unchanged, since the key's GCRA still charges every grant.
//!
//! ## When Redis is down or slow
//!
//! Every call has a deadline; consecutive failures (a timeout, a broken connection, a
//! server that says it cannot serve now, such as `LOADING` or `BUSY`; not an answer about
//! the call, such as `NOSCRIPT`) open a circuit breaker so a dead Redis costs no latency
//! per request ([`RedisConfig::breaker`]); a background task probes and reconnects; and a
//! [`Policy`] decides meanwhile: fail open, fail closed, or fail to a local limit of the
//! rate divided by the last known number of nodes (nodes announce themselves with
//! heartbeats). Each policy's bound is in [`Policy`]'s docs.
//!
//! ## Metrics (feature `metrics`)
//!
//! With the feature `metrics`, the crate reports through the
//! [`metrics`](https://docs.rs/metrics/0.24) facade (the application installs a recorder,
//! such as `metrics-exporter-prometheus`'s). Handles are registered when a [`Redis`] handle
//! or a limiter is built, from the recorder in force then: install it first. Labels are
//! names the user gives, never a key.
//!
//! | series | labels | counts |
//! |---|---|---|
//! | `limitcore_redis_errors_total` | `kind`: `connection`, `server`, `timeout`, `circuit_open`, `reply` | calls of the limiters (and of [`Redis::command`], [`Redis::pipeline`]) that failed: one per decision, lease fetch or pipeline; the background heartbeats and probes are not counted |
//! | `limitcore_redis_fallback_decisions_total` | `limit` (the key prefix, or a [`RedisAll`] limit's name), `policy`: `fail_open`, `fail_closed`, `fail_local`, `propagate` | decisions and forced charges the outage [`Policy`] made because Redis gave no answer |
//! | `limitcore_lease_fetches_total` | `limit` (the key prefix), `outcome`: `granted`, `blocked`, `error` | lease fetches of a [`LeasedLimiter`] |
//! | `limitcore_lease_permits_total` | `limit` | permits (cells) leased from Redis by this node |
//!
//! So an exact limit's outage shows as one error and one fallback decision per request
//! decided locally (the fault test in `crates/redis-server-tests/tests/metrics.rs` checks
//! exactly that), and a leased limit's as fetch errors while its nodes spend what they hold.
//!
//! ## Client
//!
//! Built on the `redis` crate (redis-rs): its reconnecting `ConnectionManager` fails a call
//! in flight when the connection drops instead of sending it again (a script sent twice
//! could charge one decision twice), it reports `NOSCRIPT` as its own error kind, and its
//! cluster client is in the same crate. Measured beside `fred` (`benches/clients.rs`) the
//! two are a tie on this project's machine; BENCHMARKS.md has the figures.
//!
//! ## Servers for tests
//!
//! [`server`] starts real `redis-server` processes (stand-alone or a 3-master cluster) on
//! loopback ports for the tests, benchmarks and the `fleet` example; `bash
//! .ci/redis-deps.sh` installs Debian's `redis-server` (and `redis-cli`) where it is
//! missing.
//!
//! ## Tests
//!
//! This crate's own tests (`cargo test -p limitcore-redis`: the lease word, the idle-key
//! sweep's protocol step by step, the demand and lease size a node reports, the fair
//! shares, the outage policy's local budgets, the doc examples) need no server.
//!
//! The lease protocol's loom models (a handle's pin racing the sweep's retirement racing a
//! fetch's install; a waiter on an entry the sweep retires, and on a fetch, is woken) run
//! under this crate's own cfg, `limitcore_loom` (not `loom`, which would switch tokio and
//! every other crate that reads it), in about a second, with a target directory of their
//! own (the cfg changes every crate's fingerprint):
//!
//! ```text
//! RUSTFLAGS="--cfg limitcore_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p limitcore-redis --release --lib loom
//! ```
//! Every test that needs a live `redis-server` (the scripts against the core's reference
//! models, the debt and forced charges against the core's budget model, the fair lease
//! script against its model and simulated fleets, a 3-master cluster, faults and what
//! charges do under each outage policy, the asynchronous seam against the direct calls and
//! with Redis stopped, a fleet of nodes deciding and charging on one key and getting fair
//! shares, the leased handles and `acquire` through the sweep, the HTTP layer, charges
//! recorded past the limit and reservations settled against a GCRA-with-debt model on the
//! exact and leased paths, reserve-then-settle beside check-then-report) is in the
//! workspace's test-only package `redis-server-tests`
//! (`crates/redis-server-tests`), whose name sorts after every other package: `cargo test
//! --workspace` runs the packages in the order of their names and stops at the first that
//! fails, so on a machine without `redis-server` every other package's tests run first.
//! There, the first test that needs the server writes one line naming `bash
//! .ci/redis-deps.sh` and ends its test binary with a failure; no test is skipped. With
//! the server installed:
//!
//! ```text
//! cargo test -p limitcore-redis -p redis-server-tests --all-features
//! ```
//!
//! The benchmarks (`benches/`, `cargo bench -p limitcore-redis`) and the `fleet` example
//! stay here and start their own servers.
//!
//! ## Layers
//!
//! Each layer uses only the ones below it, without a cycle; no module imports through
//! this file, which only re-exports (`tests/layers.rs` of the workspace checks it, with
//! the layers, on the source: `cargo test -p limitcore --test layers`):
//!
//! 0. the primitives: the atomics (`sync`, loom's under `limitcore_loom`), Redis's clock
//!    ([`RedisMicros`]), [`Error`] (which imports nothing of the crate), the scripts
//!    ([`scripts`]), the metrics (`telemetry`);
//! 1. the client ([`Redis`]), the outage policies ([`Policy`]), the fair shares
//!    ([`fair`]);
//! 2. the exact limits ([`RedisGcra`], [`RedisSlidingLog`], [`RedisAll`]);
//! 3. the leased limits ([`leased`]);
//! 4. the test servers ([`server`]).
//!
//! ## Sources
//!
//! GCRA: ATM Forum Traffic Management Specification 4.0 (af-tm-0056.000, 1996), §4.4.2
//! and Annex C. Redis scripting: `EVAL`/`EVALSHA` semantics of Redis 7.0 (scripts run
//! atomically; numbers are Lua doubles; a cluster script may touch one slot only).
//!
//! # Examples
//!
//! ```no_run
//! use limitcore::KeyedRateLimiter;
//! use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig, RedisGcra};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
//! let quota = "1000/s burst 50".parse()?;
//!
//! // Exact: one round trip per decision.
//! let exact = RedisGcra::new(redis.clone(), quota, Policy::FailLocal)?;
//! assert!(exact.decide("tenant-1", 1).await.is_admitted());
//!
//! // Leased: local decisions, within GCRA + N·L fleet-wide.
//! let leased = LeasedLimiter::new(redis, quota, LeaseConfig::new(16), Policy::FailLocal)?;
//! leased.acquire("tenant-2", 1).await;
//! let decision = leased.decide_n("tenant-2", 1);
//! # let _ = decision;
//! # Ok(()) }
//! ```

mod client;
mod error;
mod exact;
pub mod fair;
pub mod leased;
mod policy;
pub mod scripts;
pub mod server;
mod sync;
mod telemetry;
mod time;

pub use client::{Redis, RedisConfig};
pub use error::Error;
pub use exact::{
    gcra_micros, Answer, ChargeAnswer, FairAnswer, GcraReceipt, LogReceipt, RedisAll, RedisGcra,
    RedisSlidingLog, Reservation, MAX_SPAN_US,
};
pub use fair::{Demand, FULL_DEMAND_PPM};
pub use leased::{
    AwaitLeases, LeaseConfig, LeaseRule, LeasedKey, LeasedLimiter, LeasedReceipt, Spend, MAX_CELLS,
};
pub use policy::{ChargeVerdict, Policy, Source, Verdict};
pub use time::RedisMicros;
