//! [`PermitsSnapshot`]: what a concurrency limit looks like at one instant, read-only.

use super::feedback::Feedback;
use super::permits::Permits;

/// A concurrency limit as read at one instant ([`Permits::snapshot`]): a copy, which the
/// limit may leave behind at once. The engine's word stays the crate's own; this is what a
/// user (a metrics exporter, a health page, a test) needs of it.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Permits, PermitsSnapshot};
///
/// let permits = Permits::new(4)?;
/// let _held = permits.try_acquire(3)?;
/// let PermitsSnapshot { limit, in_flight, waiting } = permits.snapshot();
/// assert_eq!((limit, in_flight, waiting), (4, 3, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PermitsSnapshot {
    /// The limit, in permits.
    pub limit: u32,
    /// Permits held (above `limit` just after a cut, until enough come back).
    pub in_flight: u32,
    /// Requests queued for permits.
    pub waiting: u32,
}

impl<F: Feedback> Permits<F> {
    /// The limit, the permits in flight and the requests waiting, read now (the count of
    /// waiters under the queue's lock, then the limit and the count in flight together, from
    /// one read of the limit's word).
    ///
    /// # Examples
    ///
    /// See [`PermitsSnapshot`].
    pub fn snapshot(&self) -> PermitsSnapshot {
        let waiting = self.waiters();
        let word = self.word();
        PermitsSnapshot {
            limit: word.limit(),
            in_flight: word.in_flight(),
            waiting,
        }
    }
}
