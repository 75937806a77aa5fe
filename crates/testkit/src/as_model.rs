//! [`AsModel`]: the one adapter between the limiters and the reference models.

use core::fmt;
use limitcore::clock::Nanos;
use limitcore::reference::Model;
use limitcore::{Denied, RateLimiter, Snapshot};

/// A [`RateLimiter`] seen as a [`Model`]: `acquire` is
/// [`try_acquire_n_at`](RateLimiter::try_acquire_n_at) and `snapshot` is
/// [`snapshot_at`](RateLimiter::snapshot_at), at the explicit time given, so a limiter and
/// the models it must agree with can be driven through one list of `&mut dyn Model`.
///
/// `L` may be the limiter itself, a reference to it (`AsModel(&limiter)`, so the caller
/// keeps it), a `Box` or an `Arc`: the crate implements [`RateLimiter`] for all of them.
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::reference::{FixedWindowModel, Model};
/// use limitcore::{FixedWindow, Quota};
/// use limitcore_testkit::AsModel;
///
/// let q = Quota::per_second(2)?;
/// let limiter = FixedWindow::with_clock(q, ManualClock::new())?;
/// let mut model = FixedWindowModel::new(q);
/// let mut limiter_as_model = AsModel(&limiter);
/// for now in [0, 10, 20, 1_000_000_000] {
///     assert_eq!(limiter_as_model.acquire(1, now), model.acquire(1, now));
///     assert_eq!(limiter_as_model.snapshot(now), model.snapshot(now));
/// }
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct AsModel<L>(pub L);

impl<L: RateLimiter> fmt::Debug for AsModel<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsModel")
            .field("quota", &self.0.quota())
            .finish_non_exhaustive()
    }
}

impl<L: RateLimiter> Model for AsModel<L> {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.try_acquire_n_at(n, now)
    }

    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.0.snapshot_at(now)
    }
}
