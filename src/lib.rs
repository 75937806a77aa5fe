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
//!   ([`Store`]); [`All`]: several limits, all or
//!   nothing; [`Throttler`]: calls started in submission order under per-channel and total
//!   limits.
//! - [`KeyedSketch`]: a per-key sliding-window limit in fixed memory for huge key spaces (a
//!   count-min sketch, Cormode & Muthukrishnan 2005): collisions only make it stricter.
//! - [`wait`]: blocking and async waits with deadlines.
//! - [`Quota`]: `count` per `period` with a `burst`, parsed from `"100/s"`-style text,
//!   validated with [`QuotaError`] instead of silent rounding.
//! - [`clock`]: the [`Clock`](clock::Clock) trait, a fast TSC-based
//!   [`MonotonicClock`](clock::MonotonicClock) (default), and a
//!   [`ManualClock`](clock::ManualClock) for tests and replays.
//! - [`reference`](mod@reference): plain models the limiters are differentially tested against.
//!
//! Every limiter implements [`RateLimiter`], whose decisions can also be made at an
//! explicit time (`try_acquire_n_at`).
//!
//! # Examples
//!
//! ```
//! use limitcore::{Gcra, Quota, RateLimiter};
//!
//! let limiter = Gcra::new("100/s burst 10".parse()?);
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
//! - `std` (default): the OS clocks. Without it the crate is `no_std` + `alloc`, and the
//!   default clock is [`ManualClock`](clock::ManualClock).
//! - `tokio`: `wait::Async`, waits on tokio's timer.
//! - `dashmap`: `DashMapStore`, a [`Keyed`] store on dashmap (faster than the default
//!   [`PapayaStore`] for one thread over many keys; see [`Store`]).
//!
//! # Checking
//!
//! `--cfg loom` swaps every atomic for loom's (see `loom-tests/`); `fuzz/` holds cargo-fuzz
//! differential targets against [`reference`](mod@reference).
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

mod all;
mod cas;
pub mod clock;
mod fixed_window;
mod gcra;
#[cfg(feature = "std")]
mod keyed;
#[cfg(feature = "std")]
mod keyed_sketch;
#[cfg(feature = "std")]
mod keyed_store;
mod leaky_bucket;
mod limiter;
mod quota;
pub mod reference;
mod reservation;
#[cfg(feature = "std")]
mod sliding_log;
mod sliding_window;
mod sync;
#[cfg(feature = "std")]
mod throttler;
mod token_bucket;
#[cfg(feature = "std")]
pub mod wait;

pub use all::{All, DynRefund, Receipt, Refund};
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
#[cfg(feature = "std")]
pub use keyed::{Algorithm, KeyRule, Keyed, EVICTION_GRACE_NS};
#[cfg(feature = "std")]
pub use keyed_sketch::{KeyedSketch, MAX_SKETCH_COUNT, MAX_SKETCH_DEPTH, MAX_SKETCH_WIDTH};
#[cfg(feature = "dashmap")]
pub use keyed_store::DashMapStore;
#[cfg(feature = "std")]
pub use keyed_store::{KeySlot, PapayaStore, Store};
pub use leaky_bucket::LeakyBucket;
pub use limiter::{Denied, RateLimiter, Snapshot};
pub use quota::{Quota, QuotaError, MAX_BURST_SPAN_NS};
pub use reservation::{Reservation, Reserve};
#[cfg(feature = "std")]
pub use sliding_log::{SlidingLog, MAX_LOG_ENTRIES};
pub use sliding_window::{SlidingWindow, MAX_SLIDING_WINDOW_COUNT, STALE_TOLERANCE_NS};
#[cfg(feature = "std")]
pub use throttler::{SubmitError, TaskError, TaskHandle, TaskPanic, Throttler};
pub use token_bucket::{TokenBucket, MAX_BACKWARD_TOLERANCE_NS, MAX_TOKEN_BITS, MIN_TIME_BITS};

/// The clock a limiter uses when none is given: [`MonotonicClock`](clock::MonotonicClock)
/// with `std`, [`ManualClock`](clock::ManualClock) without it.
#[cfg(feature = "std")]
pub type DefaultClock = clock::MonotonicClock;

/// The clock a limiter uses when none is given: [`MonotonicClock`](clock::MonotonicClock)
/// with `std`, [`ManualClock`](clock::ManualClock) without it.
#[cfg(not(feature = "std"))]
pub type DefaultClock = clock::ManualClock;
