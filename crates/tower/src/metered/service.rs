//! The service of a [`Metered`](crate::Metered) layer: the request's estimate reserved in
//! `call`, its response's cost recorded by its body ([`MeteredBody`](super::MeteredBody)).

use super::bill::Bill;
use super::body::MeteredBody;
use super::future::MeteredFuture;
use crate::body::RefusalBody;
use crate::future::Post;
use crate::key::{KeyExtractor, MissingKey, RequestHead};
use crate::mode::Metered;
use crate::outcome::Outcome;
use crate::policy::{Shared, Verdict, missing_key, rejected};
use crate::service::RateLimit;
use http::{Request, Response};
use limitcore::{Denied, KeyedRefund, Receipt, Snapshot};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

impl<X: KeyExtractor, L: KeyedRefund<X::Key>> Shared<X, L> {
    /// The admission of a request of `estimate` permits for `key`, now, and its
    /// reservation: `None` when nothing was reserved (an estimate of 0, a refusal).
    ///
    /// An estimate of 0 is the check with no cost ([`Shared::decide`] of 0 permits):
    /// admitted while the key is not in debt. Any other estimate is reserved with
    /// `acquire_refundable_at`, so that the reservation can be settled to the response's
    /// cost; the state fields follow [`Shared::decide`]'s rule: the state of the decision
    /// that made the response, a refusal whose response carries them decided again at the
    /// same instant (and, should the key's state have moved in between, that decision's
    /// admission is the request's, with its receipt).
    fn reserve(&self, key: &X::Key, estimate: u32) -> (Verdict, Option<Receipt>) {
        if estimate == 0 {
            return (self.decide(key, 0), None);
        }
        let now = self.limiter.now();
        if self.state_on_pass {
            let (result, state) = self.limiter.decide_refundable_at(key, estimate, now);
            return self.reserved(estimate, result, Some(state));
        }
        match self.limiter.acquire_refundable_at(key, estimate, now) {
            Ok(receipt) => self.reserved(estimate, Ok(receipt), None),
            Err(denied) if !self.state_on_refusal => self.reserved(estimate, Err(denied), None),
            Err(_) => {
                let (result, state) = self.limiter.decide_refundable_at(key, estimate, now);
                self.reserved(estimate, result, Some(state))
            }
        }
    }

    /// The verdict on a reservation's `result`, with the `state` its response carries.
    fn reserved(
        &self,
        estimate: u32,
        result: Result<Receipt, Denied>,
        state: Option<Snapshot>,
    ) -> (Verdict, Option<Receipt>) {
        let (outcome, receipt) = match result {
            Ok(receipt) => (Outcome::Passed, Some(receipt)),
            Err(denied) => (rejected(estimate, denied), None),
        };
        let verdict = Verdict {
            outcome: self.report(outcome),
            state,
        };
        (verdict, receipt)
    }
}

impl<S, X, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, X, L, Metered>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body + RefusalBody,
    X: KeyExtractor,
    L: KeyedRefund<X::Key>,
{
    type Response = Response<MeteredBody<ResBody, X, L>>;
    type Error = S::Error;
    type Future = MeteredFuture<S::Future, X, L>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let head = RequestHead::from(&req);
        let extracted = shared.extractor.extract(head);
        // With a response cost, a request's own cost is an estimate, 0 unless told: the
        // response says what it cost.
        let estimate = shared.cost.as_ref().map_or(0, |cost| cost(&head));
        let key = match (&extracted, &shared.missing) {
            (Some(key), _) | (None, MissingKey::Shared(key)) => key,
            (None, MissingKey::Reject(status)) => {
                shared.metrics.record(&Outcome::MissingKey);
                return MeteredFuture::done(missing_key(*status, shared.outcome));
            }
        };
        let (verdict, receipt) = shared.reserve(key, estimate);
        shared.metrics.record(&verdict.outcome);
        if verdict.outcome.is_refused() {
            return MeteredFuture::done(shared.refusal(key, &verdict));
        }
        let post = Post {
            outcome: shared.outcome.then_some(verdict.outcome),
            fields: match &verdict.state {
                Some(state) if shared.state_on_pass => Some(shared.pass_fields(key, state)),
                _ => None,
            },
        };
        // The bill owns the request's key (the shared key stays the layer's).
        let bill = Bill::new(Arc::clone(&self.shared), extracted, receipt, estimate);
        MeteredFuture::call(self.inner.call(req), post, bill)
    }
}
