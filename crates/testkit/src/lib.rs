//! # limitcore-testkit
//!
//! The differential test kit of `limitcore`: everything its tests, fuzz targets and loom
//! models share to check a limiter against the plain reference models of
//! [`limitcore::reference`], written once over [`reference::Model`].
//!
//! - [`AsModel`]: any [`RateLimiter`] seen as a [`reference::Model`], so that one driver
//!   runs limiters and models side by side (always built; the loom models use it too).
//! - [`strategies`] and [`differential`] (feature `proptest`): the random histories of the
//!   core's property tests and the driver that applies one history to several limiters and
//!   models and requires identical decisions and states.
//! - [`fuzz`] (feature `fuzz`): the cargo-fuzz drivers, as plain `fn(&[u8])`, called by
//!   the one-line targets in `fuzz/fuzz_targets/` and replayed on stable by this crate's
//!   `tests/fuzz_regressions.rs`.
//!
//! # Layers
//!
//! Each layer uses only the ones below it, without a cycle; no module imports through
//! this file, which only re-exports (`tests/layers.rs` of the workspace checks it, with
//! the layers, on the source: `cargo test -p limitcore --test layers`):
//! the models and strategies (`as_model`, `strategies`); the drivers (`differential`,
//! `fuzz`).
//!
//! # Features
//!
//! Both on by default; `proptest` and `fuzz` pull in their decoding crates.
//! [`fuzz::keyed_differential`] runs every input on both of `Keyed`'s stores, which come
//! with limitcore's `keyed`. The loom models (`loom-tests`, built with `--cfg limitcore_loom`) use
//! this crate with neither.
//!
//! # Examples
//!
//! ```
//! use limitcore::clock::ManualClock;
//! use limitcore::reference::{GcraModel, Model};
//! use limitcore::{Gcra, Quota};
//! use limitcore_testkit::AsModel;
//!
//! let q = Quota::per_second(4)?;
//! let gcra = Gcra::with_clock(q, ManualClock::new())?;
//! let mut subjects: [&mut dyn Model; 2] = [&mut AsModel(&gcra), &mut GcraModel::new(q)];
//! for now in [0, 1, 250_000_000, 250_000_001] {
//!     let answers: Vec<_> = subjects.iter_mut().map(|s| s.acquire(3, now)).collect();
//!     assert_eq!(answers[0], answers[1]);
//! }
//! # Ok::<(), limitcore::QuotaError>(())
//! ```
//!
//! [`RateLimiter`]: limitcore::RateLimiter
//! [`reference::Model`]: limitcore::reference::Model
//! [`limitcore::reference`]: limitcore::reference

mod as_model;
#[cfg(feature = "proptest")]
pub mod differential;
#[cfg(feature = "fuzz")]
pub mod fuzz;
#[cfg(feature = "proptest")]
pub mod strategies;

pub use as_model::AsModel;
#[cfg(feature = "proptest")]
pub use differential::run;
#[cfg(feature = "proptest")]
pub use strategies::{cases, Step};
