//! The one place that imports atomics.
//!
//! Under `--cfg loom` every atomic, and the back-off used by the CAS loops, comes from
//! [`loom`](https://docs.rs/loom) so the model checker can explore every interleaving of
//! the crate's protocols; otherwise they come from `core`. No other module names
//! `core::sync::atomic` or `loom` directly (the same shape as crossbeam-utils' `primitive`
//! module and tokio's `src/loom`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, Ordering};

/// Exponential back-off for a CAS retry loop.
///
/// Outside loom this is crossbeam-utils' [`Backoff`](crossbeam_utils::Backoff), which spins
/// with `spin_loop` hints and never sleeps. Under loom a retry must hand control back to the
/// model checker, so `spin` becomes `loom::hint::spin_loop`.
#[cfg(not(loom))]
pub(crate) type Backoff = crossbeam_utils::Backoff;

#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff;

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }
    pub(crate) fn spin(&self) {
        loom::hint::spin_loop();
    }
}

/// The lock of the one limiter that needs one ([`SlidingLog`](crate::SlidingLog)).
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use std::sync::Mutex;

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
