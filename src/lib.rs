//! # limitcore
//!
//! A lock-free rate-limiter core for hot paths: proxies, databases, multi-threaded load
//! generators, and any library that must decide "now or later?" on every request.
//!
//! - [`Gcra`]: the Generic Cell Rate Algorithm (ATM Forum TM 4.0); its whole state is one
//!   `AtomicU64` (the theoretical arrival time) updated by one compare-and-swap loop.
//! - [`TokenBucket`]: tokens and last refill time packed in one `AtomicU64`; decisions
//!   identical to `Gcra`'s within its documented time window.
//! - [`FixedWindow`], [`SlidingWindow`] (Cloudflare's counter, per-CPU leases),
//!   [`SlidingLog`] (exact "at most N in any T") and [`LeakyBucket`] (a pacer that gives each
//!   request its start time, through [`Reserve`]).
//! - [`Keyed`]: one limiter per key with bounded memory, on a concurrent map of your choice
//!   ([`Store`]); [`All`]: several limits, keyed or not, all or nothing, on [`Batch`] (the
//!   protocol itself, each limit with its own request and its own report); [`Throttler`]:
//!   calls started in submission order under per-channel and total limits.
//! - [`KeyedSketch`]: a per-key sliding-window limit in fixed memory for huge key spaces (a
//!   count-min sketch, Cormode & Muthukrishnan 2005): collisions only make it stricter.
//! - [`Budget`] ([`budget`]): units (bytes, CPU time, I/O operations) at an exact rational
//!   rate, with debt, forced charges, pause and live reconfiguration, and waiters served
//!   first come, first served: the limiter storage engines need.
//! - [`Lanes`] ([`lanes`]): one byte budget shared by priority lanes (the top lane strictly
//!   first, the others by weight, grants at exact GCRA times, lock-free when nobody waits):
//!   RocksDB's and TiKV's I/O rate limiters without a refill quantum, with their bounds.
//! - [`Counted`]: any limiter's decisions counted (admitted, refused, delayed, permits, wait
//!   granted, time exhausted) in per-thread stripes (each thread adds to its own: no
//!   locked instruction), read as [`Counts`]; a limiter that is not wrapped pays nothing.
//! - [`wait`]: blocking and async sleep-and-retry waits for any limiter, with deadlines;
//!   [`notify`]: the waiting layer every wait of the crate is written on (its
//!   [`Wait`](notify::Wait) trait public, for a wait of your own).
//! - [`concurrency`]: concurrency limits (at most N in flight) whose count and limit share
//!   one `AtomicU64`: resizable permits with FIFO or LIFO waiters, fixed or adaptive (AIMD,
//!   Vegas and Gradient2 after Netflix's concurrency-limits, Envoy's gradient controller),
//!   per key and partitioned.
//! - [`io`]: readers and writers paced through a limiter, a permit a byte (blocking,
//!   and tokio's with feature `tokio`).
//! - [`Quota`]: `count` per `period` with a `burst`, parsed from `"100/s"`-style text,
//!   validated with [`QuotaError`] instead of silent rounding.
//! - [`clock`]: the [`Clock`](clock::Clock) trait, a fast TSC-based
//!   [`MonotonicClock`](clock::MonotonicClock) (default), and a
//!   [`ManualClock`](clock::ManualClock) for tests and replays.
//! - [`reference`](mod@reference): plain models the limiters are differentially tested against.
//!
//! Every limiter implements [`RateLimiter`], whose decisions can also be made at an
//! explicit time (`try_acquire_n_at`) and can return the state they left
//! ([`Decision`]); the keyed ones implement [`KeyedRateLimiter`]. [`Algorithm`] names
//! them all and builds one from text.
//!
//! # Verbs
//!
//! One verb per operation, named the same way in every area: decide now (`try_…`, never
//! waits); costs known after the work (`charge_at`: never refused, past the limit as debt;
//! `settle`: a reservation's receipt to its actual cost; `credit`: permits given back that
//! no receipt names; on every limiter, [`Refund`] and [`KeyedRefund`]); wait (tokio's
//! scheme: the async wait takes the plain name, the blocking one ends in `_blocking`, with a
//! timeout `_within(max_wait)`, with a deadline `_until(Option<Instant>)`, a wait that owns
//! its limiter `_owned`); change a limit (`reconfigure`, per key `reconfigure_key`); look
//! (`snapshot`). Every decision and change that reads the clock has an `_at(…, now)` form
//! at an explicit time.
//!
//! Every wait has one shape: a future, borrowed (`acquire`) or owned (`acquire_owned`),
//! that gives its place back the moment it is dropped (tokio's `Semaphore::acquire` and
//! `acquire_owned`), and a [`notify::Wait`]; its blocking form runs the same wait on a
//! thread ([`notify::block_on`]). A wait's deadline follows its limiter's clock.
//!
//! | area (feature) | decide | wait (async / blocking) | reconfigure | inspect |
//! |---|---|---|---|---|
//! | single-word limiters: [`Gcra`], [`TokenBucket`], [`FixedWindow`], [`LeakyBucket`], [`SlidingWindow`], [`SlidingLog`] ([`RateLimiter`]) | `try_acquire_n(n)`, `decide_n(n)`; `reserve_n(n, max_wait)` ([`Reserve`]) | `retry_acquire_n(n)` / `retry_acquire_n_blocking(n)`, `_within`, `_until` ([`wait::Async`], [`wait::Blocking`]: sleep and retry, unordered); a reservation's start: [`Reservation::wait_blocking`] | none: a limiter's rule is fixed (build a new one; per key, [`Keyed::reconfigure_key`]) | `snapshot()`, `quota()` |
//! | keyed limits: [`Keyed`], [`KeyedSketch`], [`Global`], [`All`] (`keyed`; [`KeyedRateLimiter`]) | `try_acquire_n(key, n)`, `decide_n(key, n)`; `reserve_n(key, n, max_wait)` ([`KeyedReserve`]) | none of their own: a [`Reservation`] says when to go | [`Keyed::reconfigure_key`]`(key, config)` (a [`Quota`], for a budget a [`BudgetConfig`] too: [`KeyConfig`]); keyed budgets' default `reconfigure(&config)` | `snapshot(key)`, `len()` |
//! | [`Budget`] (`budget`) | `try_acquire_n(n)`, `take_up_to(n)`, `charge(n)` | `acquire(n)` / `acquire_blocking(n)`, `_within`, `_until`, `acquire_owned(n)` (first come, first served; [`budget::Acquire`]) | `reconfigure(&config)`, `set_mode(mode)` | `snapshot()`, `config()`, `waiting()` |
//! | [`Lanes`] (`lanes`) | `try_acquire(lane, n)`, `take_up_to(lane, n)`, `submit(lane, n)` | `acquire(lane, n)` / `acquire_blocking(lane, n)`, `_within`, `_until`, `acquire_owned(lane, n)` (in the lanes' order; [`lanes::Acquire`]) | `reconfigure(&config)`, `set_weights(weights)` | `snapshot()`, `config()`, `counts(lane)` |
//! | [`Permits`](concurrency::Permits) (`concurrency`) | `try_acquire(n)`, `try_acquire_owned(n)` | `acquire(n)` / `acquire_blocking(n)`, `_within`, `_until`, `_owned` (FIFO or LIFO; [`concurrency::Acquire`]) | `reconfigure(limit)` (an adaptive rule sets it too) | `snapshot()`: [`PermitsSnapshot`](concurrency::PermitsSnapshot) `{ limit, in_flight, waiting }` |
//! | [`KeyedPermits`](concurrency::KeyedPermits) (`concurrency`, `keyed`) | `try_acquire(key, n)` | `acquire(key, n)` / `acquire_blocking(key, n)`, `_within`, `_until` | `reconfigure_key(key, limit)`, `reset_limit(key)` | `limit(key)`, `in_flight(key)`, `len()` |
//! | [`Partitioned`](concurrency::Partitioned) (`concurrency`) | `try_acquire(i, n)`, `try_acquire_owned(i, n)` | none: a partition never queues (its share is guaranteed, the rest borrowed) | `reconfigure(limit)` (every share follows) | `limit()`, `partition_limit(i)`, `partition_in_flight(i)` |
//! | [`Throttler`] (`throttler`) | `reserve(channel)` | `submit(channel, task)` (a task started in submission order), async `run(channel, future)`; a task's outcome: `handle.await` / `handle.wait_blocking()`, `_within`, `_until`; `shutdown()`, `shutdown_within`, `_until` | none: its limits are fixed (build a new one) | `TaskHandle::start()`, `is_finished()` |
//! | [`Counted`] (`counters`) | the wrapped limiter's | the wrapped limiter's | the wrapped limiter's (`inner()`) | `counts()`: [`Counts`] |
//!
//! # Layers
//!
//! The crate is built in layers, each using only the ones below it (within a layer, its
//! modules use one another without a cycle; `tests/layers.rs` checks both on the source,
//! and that this file is a facade only: nothing imports through it):
//!
//! 0. **Primitives**: the one module that imports atomics (`sync`), the one
//!    compare-and-swap loop (`cas`), the cells a state is shared in ([`cell`]), the clocks
//!    ([`clock`]), [`notify`], the waiting layer: one event, one ordered waiter list, one
//!    driver that runs each wait blocking or async, and `tally`, per-thread counters that
//!    each thread adds to alone (the counters' stripes).
//! 1. **Vocabulary**: [`Quota`]; the decisions (`decision`: [`Receipt`], [`Denied`],
//!    [`Snapshot`], [`Decision`], which import nothing of the crate); the traits every
//!    limiter implements ([`RateLimiter`], [`Refund`], [`KeyedRateLimiter`],
//!    [`KeyedRefund`], [`AsyncKeyedRateLimiter`]).
//! 2. **Rules** ([`rules`]): each algorithm's pure arithmetic, from (old state, now,
//!    request) to (new state, receipt) or a denial, behind one trait,
//!    [`Rule`](rules::Rule).
//! 3. **Shells**: [`Limiter<R, C>`](Limiter) applies any rule to one shared state;
//!    [`Gcra`], [`TokenBucket`], [`FixedWindow`], [`LeakyBucket`] and [`SlidingLog`] are its
//!    aliases. [`SlidingWindow`] spreads its counts over per-CPU shards. [`wait`]: waits
//!    that sleep and retry over any [`RateLimiter`].
//! 4. **Composites**: [`Budget`] ([`budget`]: units with debt, forced charges and live
//!    reconfiguration, first-come-first-served waits), [`Keyed`] (any rule per key, keyed
//!    budgets), [`KeyedSketch`], [`Global`], [`All`] (keyed and unkeyed limits, all or
//!    nothing, on [`Batch`]: the protocol over [`Part`]s), [`Counted`] (any limiter, keyed
//!    or not, with its decisions counted), [`Throttler`], [`Lanes`] ([`lanes`]: a budget shared by priority lanes), and the
//!    concurrency limits ([`concurrency`]): a sibling stack on the primitives, built the
//!    same way (a pure rule on one word, its shell, keyed, partitioned and adaptive
//!    composites), that uses none of the rules nor the decision vocabulary, only the keyed
//!    maps ([`Store`]).
//! 5. **On top**: [`io`] (readers and writers paced through a limiter, a budget or a
//!    lane; each direction of an async adapter owns its wait on the limiter, the same poll
//!    the limiter's own futures run, given back when dropped), [`Algorithm`] (the
//!    algorithms by name), and the plain models ([`reference`](mod@reference)).
//!
//! Integrations live in their own crates of the workspace: the `limitcore` command
//! (`crates/cli`), a tower layer (`crates/tower`) and a Redis backend (`crates/redis`).
//!
//! # Examples
//!
//! ```
//! use limitcore::{Gcra, Quota, RateLimiter};
//!
//! let limiter = Gcra::new("100/s burst 10".parse()?)?;
//! for _ in 0..10 {
//!     assert!(limiter.try_acquire().is_ok());
//! }
//! let denied = limiter.try_acquire().unwrap_err();
//! assert!(denied.retry_after().unwrap().as_millis() <= 10);
//! # Ok::<(), limitcore::QuotaError>(())
//! ```
//!
//! # Features
//!
//! Each area is a feature, so that a user compiles only what it uses (a crate that wants
//! `Gcra` builds neither budgets, nor lanes, nor concurrency limits). Features are
//! additive: turning one on only adds items. docs.rs shows every item with the feature it
//! needs.
//!
//! | feature | adds | needs |
//! |---|---|---|
//! | `std` (default) | the OS clocks ([`MonotonicClock`](clock::MonotonicClock), the default), [`SlidingLog`], the waits ([`wait`], [`notify`]), [`Algorithm::limiter`] | |
//! | `keyed` (default) | [`Keyed`] (on dashmap, [`DashMapStore`], or papaya, [`PapayaStore`]; hashing with [`KeyHasher`]), [`KeyedSketch`], [`Global`], [`Algorithm::keyed`]; keyed budgets with `budget`, [`KeyedPermits`](concurrency::KeyedPermits) with `concurrency` | `std` |
//! | `tokio` | the waits as futures, their naps on tokio's timer ([`wait::Async`]; the budgets' and lanes' `acquire` futures, the permits' `_within` / `_until` ones; [`notify::WaitFuture`]'s naps), [`io::AsyncPaced`] with `io` | `std` |
//! | `budget` | [`Budget`], [`BudgetConfig`], [`BudgetRule`] ([`budget`]); their ordered waits with `std` | |
//! | `lanes` | [`Lanes`] ([`lanes`]) | `budget`, `std` |
//! | `concurrency` | [`concurrency`]: [`Permits`](concurrency::Permits), adaptive rules, [`Partitioned`](concurrency::Partitioned) | `std` |
//! | `io` | [`io`]: readers and writers paced through a limiter (a budget with `budget`, a lane with `lanes`) | `std` |
//! | `counters` | [`Counted`], [`Counts`] | |
//! | `throttler` | [`Throttler`] | `std` |
//! | `reference` | [`reference`](mod@reference): the plain models ([`BudgetModel`](reference::BudgetModel) with `budget`, [`LanesModel`](reference::LanesModel) with `lanes`) | |
//! | `full` | all of the above | |
//! | `dashmap` | the same as `keyed` (it used to add `DashMapStore`, now `keyed`'s default store); kept so that builds naming it keep working | |
//!
//! The default set, `std` and `keyed`, is the common user's: the single-word limiters,
//! keyed limits and the waits. Without `std` the crate is `no_std` + `alloc`: every
//! limiter takes an explicit clock (a [`ManualClock`](clock::ManualClock), or your own),
//! and the default clock type, [`MonotonicClock`](clock::MonotonicClock), has no values.
//!
//! # Checking
//!
//! `--cfg limitcore_loom` swaps every atomic for loom's (see `loom-tests/`); `fuzz/` holds cargo-fuzz
//! differential targets against [`reference`](mod@reference).
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

// Layer 0: primitives.
mod cas;
pub mod cell;
pub mod clock;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod notify;
mod sync;
#[cfg(any(feature = "counters", feature = "lanes"))]
mod tally;

// Layer 1: the vocabulary.
mod async_limiter;
mod decision;
mod limiter;
mod quota;

// Layer 2: the pure rules.
pub mod rules;

// Layer 3: the shells.
mod limiters;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod wait;

// Layer 4: the composites.
mod all;
mod batch;
#[cfg(feature = "budget")]
#[cfg_attr(docsrs, doc(cfg(feature = "budget")))]
pub mod budget;
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub mod concurrency;
#[cfg(feature = "counters")]
mod counters;
#[cfg(feature = "keyed")]
mod keyed;
#[cfg(feature = "lanes")]
#[cfg_attr(docsrs, doc(cfg(feature = "lanes")))]
pub mod lanes;
#[cfg(feature = "throttler")]
mod throttler;

// Layer 5: on top.
mod algorithm;
#[cfg(feature = "io")]
#[cfg_attr(docsrs, doc(cfg(feature = "io")))]
pub mod io;
#[cfg(feature = "reference")]
#[cfg_attr(docsrs, doc(cfg(feature = "reference")))]
pub mod reference;

pub use algorithm::{Algorithm, Bound, UnknownAlgorithm, WithRule};
pub use all::All;
pub use async_limiter::AsyncKeyedRateLimiter;
pub use batch::{Ask, Batch, Part, WithKey};
#[cfg(feature = "budget")]
#[cfg_attr(docsrs, doc(cfg(feature = "budget")))]
pub use budget::{Budget, BudgetConfig, BudgetRule, Mode};
pub use clock::DefaultClock;
#[cfg(feature = "counters")]
#[cfg_attr(docsrs, doc(cfg(feature = "counters")))]
pub use counters::{Counted, Counts};
pub use decision::{Charged, Decision, Denied, Receipt, Snapshot};
#[cfg(all(feature = "keyed", limitcore_loom))]
pub use keyed::LoomStore;
#[cfg(feature = "keyed")]
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub use keyed::{
    DashMapStore, Global, KeyConfig, KeyHash, KeyHasher, Keyed, KeyedSketch, PapayaStore, Store,
};
#[cfg(feature = "lanes")]
#[cfg_attr(docsrs, doc(cfg(feature = "lanes")))]
pub use lanes::{
    AutoTune, Lane, LaneCounts, LaneError, Lanes, LanesConfig, LanesConfigError, Progress, Ticket,
};
pub use limiter::{KeyedRateLimiter, KeyedRefund, RateLimiter, Refund};
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub use limiters::SlidingLog;
pub use limiters::{
    FixedWindow, Gcra, KeyedReserve, LeakyBucket, Limiter, Reservation, Reserve, RuleCell,
    SlidingWindow, TokenBucket,
};
pub use quota::{Quota, QuotaError};
#[cfg(feature = "throttler")]
#[cfg_attr(docsrs, doc(cfg(feature = "throttler")))]
pub use throttler::{SubmitError, TaskError, TaskHandle, TaskPanic, TaskWait, Throttler};
