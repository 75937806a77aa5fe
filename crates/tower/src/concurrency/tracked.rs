//! [`Tracked`]: an admitted request's permit, counted in flight (feature `metrics`) for as
//! long as it is held.

use crate::telemetry::{ConcurrencyMetrics, InFlight};
use limitcore::concurrency::{Completion, Feedback, OwnedPermit};
use std::time::Duration;

/// A permit and its place in `limitcore_concurrency_in_flight`: both go when it is
/// completed, or dropped (which releases the permit as [`Completion::Ignored`]). Without the
/// feature `metrics`, the permit alone.
pub(crate) struct Tracked<F: Feedback> {
    permit: OwnedPermit<F>,
    _in_flight: InFlight,
}

impl<F: Feedback> Tracked<F> {
    /// `permit`, just granted: counted as admitted and in flight.
    #[inline]
    pub(crate) fn new(permit: OwnedPermit<F>, metrics: &ConcurrencyMetrics) -> Self {
        let in_flight = metrics.admitted(permit.limit_at_grant());
        Tracked {
            permit,
            _in_flight: in_flight,
        }
    }

    /// Time since the grant, on the limit's clock.
    #[inline]
    pub(crate) fn elapsed(&self) -> Duration {
        self.permit.elapsed()
    }

    /// Gives the permit back with `outcome`.
    #[inline]
    pub(crate) fn complete(self, outcome: Completion) {
        self.permit.complete(outcome);
    }

    /// Gives the permit back as dropped.
    #[inline]
    pub(crate) fn dropped(self) {
        self.permit.dropped();
    }

    /// Gives the permit back without a sample.
    #[inline]
    pub(crate) fn ignore(self) {
        self.permit.ignore();
    }
}
