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
//!   ([`Store`]); [`All`]: several limits, keyed or not, all or nothing; [`Throttler`]:
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
//!   granted, time exhausted) in per-CPU stripes, read as [`Counts`]; a limiter that is not
//!   wrapped pays nothing.
//! - [`wait`]: blocking and async waits with deadlines.
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
//! # Layers
//!
//! The crate is built in layers, each using only the ones below it (within a layer, its
//! modules use one another without a cycle; `tests/layers.rs` checks both on the source,
//! and that this file is a facade only: nothing imports through it):
//!
//! 0. **Primitives**: the one module that imports atomics (`sync`), the one
//!    compare-and-swap loop (`cas`), the cells a state is shared in ([`cell`]), the clocks
//!    ([`clock`]), and `notify`, the waiting layer: one event, one ordered waiter list, one
//!    driver that runs each wait blocking or async.
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
//!    nothing), [`Counted`] (any limiter, keyed or not, with its decisions counted),
//!    [`Throttler`], [`Lanes`] ([`lanes`]: a budget shared by priority lanes), and the
//!    concurrency limits ([`concurrency`]): a sibling stack on the primitives, built the
//!    same way (a pure rule on one word, its shell, keyed, partitioned and adaptive
//!    composites), that uses none of the rules nor the decision vocabulary, only the keyed
//!    maps ([`Store`]).
//! 5. **On top**: [`io`] (readers and writers paced through a limiter, a budget or a
//!    lane), [`Algorithm`] (the algorithms by name), and the plain models
//!    ([`reference`](mod@reference)).
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
//! Features are additive: turning one on only adds items.
//!
//! - `std` (default): the OS clocks, [`SlidingLog`], [`Throttler`], [`Lanes`], [`wait`],
//!   the budgets' waits, [`concurrency`], [`io`], and [`Algorithm::limiter`]. Without it the crate is `no_std` + `alloc`: every limiter
//!   takes an explicit clock (a [`ManualClock`](clock::ManualClock), or your own), and the
//!   default clock type, [`MonotonicClock`](clock::MonotonicClock), has no values.
//! - `keyed` (default; implies `std`): [`Keyed`] (on dashmap by default, [`DashMapStore`], or
//!   on papaya, [`PapayaStore`]; both hash with [`KeyHasher`] unless told), [`KeyedSketch`],
//!   [`Global`], [`Algorithm::keyed`]. Without it, `Gcra` and the other limiters pull in no
//!   map.
//! - `tokio`: [`wait::Async`], waits on tokio's timer, and [`io::AsyncPaced`], tokio's
//!   `AsyncRead` and `AsyncWrite` paced.
//! - `dashmap`: the same as `keyed` (it used to add `DashMapStore`, now `keyed`'s default
//!   store); kept so that builds naming it keep working.
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
pub mod budget;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod concurrency;
mod counters;
#[cfg(feature = "keyed")]
mod keyed;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod lanes;
#[cfg(feature = "std")]
mod throttler;

// Layer 5: on top.
mod algorithm;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod io;
pub mod reference;

pub use algorithm::{Algorithm, Bound, UnknownAlgorithm, WithRule};
pub use all::All;
pub use async_limiter::AsyncKeyedRateLimiter;
pub use budget::{Budget, BudgetConfig, BudgetRule, Charged, Mode};
pub use clock::DefaultClock;
pub use counters::{Counted, Counts};
pub use decision::{Decision, Denied, Receipt, Snapshot};
#[cfg(all(feature = "keyed", limitcore_loom))]
pub use keyed::LoomStore;
#[cfg(feature = "keyed")]
pub use keyed::{
    DashMapStore, Global, KeyConfig, KeyHash, KeyHasher, Keyed, KeyedSketch, PapayaStore, Store,
};
#[cfg(feature = "std")]
#[allow(deprecated)]
pub use lanes::LanesError;
#[cfg(feature = "std")]
pub use lanes::{
    AutoTune, Lane, LaneCounts, LaneError, Lanes, LanesConfig, LanesConfigError, Progress, Ticket,
};
pub use limiter::{KeyedRateLimiter, KeyedRefund, RateLimiter, Refund};
#[cfg(feature = "std")]
pub use limiters::SlidingLog;
pub use limiters::{
    FixedWindow, Gcra, KeyedReserve, LeakyBucket, Limiter, Reservation, Reserve, RuleCell,
    SlidingWindow, TokenBucket,
};
pub use quota::{Quota, QuotaError};
#[cfg(feature = "std")]
pub use throttler::{SubmitError, TaskError, TaskHandle, TaskPanic, Throttler};
