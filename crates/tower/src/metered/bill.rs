//! [`Bill`]: an admitted request's reservation, on its way to its actual cost.

use crate::key::{KeyExtractor, MissingKey};
use crate::policy::Shared;
use crate::response_cost::Meter;
use http::response::Parts;
use limitcore::{KeyedRefund, Receipt};
use std::fmt;
use std::sync::Arc;

/// How a bill is recorded: the limiter's `settle` of a receipt, or its `charge_at` when
/// nothing was reserved. Captured where the limiter is known to be a
/// [`KeyedRefund`], so that the types holding a bill (the future, the body) need no bound
/// on the limiter, and their `Drop` none either.
pub(crate) type RecordFn<L, K> = fn(&L, &K, Option<Receipt>, u32);

/// Records `actual` permits for `key` now: the reservation on `receipt` settled to it (the
/// unused part given back, the excess charged into debt), or, with no receipt (an estimate
/// of 0, or a dry run's refusal, which reserved nothing), `actual` charged.
pub(crate) fn record<L: KeyedRefund<K>, K: ?Sized>(
    limiter: &L,
    key: &K,
    receipt: Option<Receipt>,
    actual: u32,
) {
    let now = limiter.now();
    match receipt {
        Some(receipt) => {
            limiter.settle(key, receipt, actual, now);
        }
        None if actual > 0 => {
            limiter.charge_at(key, actual, now);
        }
        // Nothing reserved and nothing used: a charge of 0 would only touch the key.
        None => {}
    }
}

/// An admitted request's reservation, to be recorded at its actual cost exactly once:
/// **when it is dropped**, at what its [`Meter`] says then. Ownership is the guarantee: a
/// bill moves from the response future to the body and is dropped once, wherever its
/// request's life ends (the body's end, the body dropped, the future dropped, an inner
/// error), so it is never recorded twice and never lost.
pub(crate) struct Bill<X: KeyExtractor, L> {
    shared: Arc<Shared<X, L>>,
    /// The request's own key; `None`: the shared key of requests without one.
    key: Option<X::Key>,
    /// The reservation of the estimate; `None` when nothing was reserved.
    receipt: Option<Receipt>,
    /// The cost so far: the estimate until the response's head says otherwise.
    meter: Meter,
    record: RecordFn<L, X::Key>,
}

impl<X: KeyExtractor, L: KeyedRefund<X::Key>> Bill<X, L> {
    /// The bill of a request of `estimate` permits under `key` (`None`: the shared key),
    /// reserved on `receipt` (`None`: nothing reserved).
    pub(crate) fn new(
        shared: Arc<Shared<X, L>>,
        key: Option<X::Key>,
        receipt: Option<Receipt>,
        estimate: u32,
    ) -> Self {
        Bill {
            shared,
            key,
            receipt,
            meter: Meter::Known(estimate),
            record: record::<L, X::Key>,
        }
    }
}

impl<X: KeyExtractor, L> Bill<X, L> {
    /// The response's `head` is here: from now on the bill is what the layer's response cost
    /// reads in it (a cost, or a count of the body's bytes to come); what it cannot read
    /// leaves the estimate.
    pub(crate) fn read(&mut self, head: &Parts) {
        if let Some(cost) = &self.shared.response_cost {
            // Until now the meter holds the estimate.
            self.meter = cost.meter(head, self.meter.cost());
        }
    }

    /// Counts a data frame of `len` bytes (for a cost of body bytes).
    #[inline]
    pub(crate) fn count(&mut self, len: usize) {
        self.meter.count(len);
    }

    /// Records the bill now, at what its meter says (its drop does it: see the type).
    pub(crate) fn settle(self) {
        drop(self);
    }
}

impl<X: KeyExtractor, L> Drop for Bill<X, L> {
    fn drop(&mut self) {
        let key = match (&self.key, &self.shared.missing) {
            (Some(key), _) | (None, MissingKey::Shared(key)) => key,
            // A request without a key is only admitted under the shared key: a bill has one.
            (None, MissingKey::Reject(_)) => return,
        };
        (self.record)(
            &self.shared.limiter,
            key,
            self.receipt.take(),
            self.meter.cost(),
        );
    }
}

impl<X: KeyExtractor, L> fmt::Debug for Bill<X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bill")
            .field("reserved", &self.receipt.as_ref().map_or(0, Receipt::n))
            .field("meter", &self.meter)
            .finish_non_exhaustive()
    }
}
