//! The one place the lease protocol's shared state comes from: its atomics, the lease word's
//! cell and the waiters' event.
//!
//! Under `--cfg limitcore_loom` they are [loom](https://docs.rs/loom)'s, so that the models
//! of the lease protocol (`leased/loom.rs`) explore every interleaving of the entry's
//! protocol (the fetch slot, the pins, the retirement, the waiters' wake-ups); otherwise they
//! are std's and the core's. The cfg is scoped to this workspace: `--cfg loom`
//! would also switch tokio (and every other crate that reads it) to its own loom build, which
//! this crate's models do not need and its dependencies do not all support.
//!
//! The lease word's cell is the core's [`limitcore::cell::WordCell`] in both builds: the core
//! reads the same cfg (its `sync` module), so under the model its word is loom's too and the
//! models check the core's own compare-and-swap loop. So is the waiters' [`Event`]: the
//! core's waiting layer ([`limitcore::notify::Event`]), whose lock and atomics are loom's
//! under the cfg, so the models check the very event the crate runs on (no stand-in).
//!
//! Run the models (release, with a target directory of their own, since the cfg changes
//! every crate's fingerprint):
//!
//! ```text
//! RUSTFLAGS="--cfg limitcore_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p limitcore-redis --release --lib loom
//! ```

#[cfg(not(limitcore_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(limitcore_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

pub(crate) use limitcore::cell::WordCell;

/// The waiters' event: the core's waiting layer's.
pub(crate) use limitcore::notify::Event;
