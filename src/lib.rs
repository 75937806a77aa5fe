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
//! The crate is built in layers, each using only the ones below it:
//!
//! 0. **Primitives**: the one module that imports atomics (`sync`), the one
//!    compare-and-swap loop (`cas`), and the cells a state is shared in ([`cell`]).
//! 1. **Rules** ([`rules`]): each algorithm's pure arithmetic, from (old state, now,
//!    request) to (new state, receipt) or a denial, behind one trait,
//!    [`Rule`](rules::Rule).
//! 2. **Shells**: [`Limiter<R, C>`](Limiter) applies any rule to one shared state;
//!    [`Gcra`], [`TokenBucket`], [`FixedWindow`], [`LeakyBucket`] and [`SlidingLog`] are its
//!    aliases. [`SlidingWindow`] spreads its counts over per-CPU shards.
//! 3. **Composites**: [`Keyed`] (any rule per key), [`KeyedSketch`], [`Global`], [`All`]
//!    (keyed and unkeyed limits, all or nothing), [`Throttler`], [`Lanes`] (a budget
//!    shared by priority lanes), and [`Counted`] (any limiter, keyed or not, with its
//!    decisions counted).
//!
//! The concurrency limits ([`concurrency`]) are built the same way: a pure rule on one
//! word, its shell, keyed and partitioned composites.
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
//!   [`concurrency`], and [`Algorithm::limiter`]. Without it the crate is `no_std` + `alloc`: every limiter
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
mod sync;

pub mod clock;
mod decision;
mod limiter;
mod quota;

// Layer 1: the pure rules.
pub mod rules;

// Layer 2: the shells.
mod limiters;

// Layer 3: the composites.
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

mod algorithm;
mod async_limiter;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod io;
pub mod reference;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod wait;

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
pub use keyed::{DashMapStore, Global, KeyHash, KeyHasher, Keyed, KeyedSketch, PapayaStore, Store};
#[cfg(feature = "std")]
pub use lanes::{
    AutoTune, Lane, LaneCounts, LaneError, Lanes, LanesConfig, LanesError, Progress, Ticket,
    DEFAULT_MAX_PIECE, MAX_LANES, MAX_WEIGHT,
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
