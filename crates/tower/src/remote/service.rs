//! The service of a [`Remote`](crate::Remote) layer: the key and cost read in `call`, the
//! decision awaited in its [`RemoteFuture`].

use super::future::{Deciding, RemoteFuture, Ruling};
use crate::body::RefusalBody;
use crate::future::Post;
use crate::key::{KeyExtractor, MissingKey, RequestHead};
use crate::mode::{OnLimiterError, Remote};
use crate::outcome::Outcome;
use crate::policy::{Shared, Verdict, answer, missing_key, rejected};
use crate::service::RateLimit;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use limitcore::{AsyncKeyedRateLimiter, Decision};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

impl<X: KeyExtractor, L: AsyncKeyedRateLimiter<X::Key>> Shared<X, L> {
    /// The ruling on `cost` permits for `key`: one awaited decision, which carries its state;
    /// a failed one answered by the error policy.
    async fn rule(&self, key: &X::Key, cost: u32) -> Ruling {
        let Decision { result, state } = match self.limiter.decide_async(key, cost).await {
            Ok(decision) => decision,
            Err(_) => return self.limiter_error(),
        };
        let outcome = self.report(match result {
            Ok(()) => Outcome::Passed,
            Err(denied) => rejected(cost, denied),
        });
        self.metrics.record(&outcome);
        if outcome.is_refused() {
            let verdict = Verdict {
                outcome,
                state: self.state_on_refusal.then_some(state),
            };
            let quota = || self.limiter.quota_for_key(key);
            return Ruling::Refuse(self.refusal_with(&verdict, quota));
        }
        Ruling::Pass(Post {
            outcome: self.outcome.then_some(outcome),
            fields: self
                .state_on_pass
                .then(|| self.pass_fields_with(&self.limiter.quota_for_key(key), &state)),
        })
    }

    /// The error policy's answer (a dry run passes).
    #[cold]
    fn limiter_error(&self) -> Ruling {
        self.metrics
            .record(&Outcome::LimiterError { admitted: false });
        match self.on_error {
            OnLimiterError::Refuse(status) if !self.dry_run => Ruling::Refuse(answer(
                status,
                HeaderMap::new(),
                Bytes::from_static(b"rate limiter unavailable\n"),
                self.outcome
                    .then_some(Outcome::LimiterError { admitted: false }),
            )),
            _ => Ruling::Pass(Post {
                outcome: self
                    .outcome
                    .then_some(Outcome::LimiterError { admitted: true }),
                fields: None,
            }),
        }
    }
}

/// The key a request is decided under: its own, or the shared bucket of requests without
/// one; `Err` with the refusal's status when there is neither.
fn key_of<'a, K>(
    extracted: &'a Option<K>,
    missing: &'a MissingKey<K>,
) -> Result<&'a K, http::StatusCode> {
    match (extracted, missing) {
        (Some(key), _) | (None, MissingKey::Shared(key)) => Ok(key),
        (None, MissingKey::Reject(status)) => Err(*status),
    }
}

impl<S, X, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, X, L, Remote>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: RefusalBody,
    X: KeyExtractor,
    L: AsyncKeyedRateLimiter<X::Key> + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RemoteFuture<S::Future, S, Request<ReqBody>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let head = RequestHead::from(&req);
        let extracted = shared.extractor.extract(head);
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&head));
        if let Err(status) = key_of(&extracted, &shared.missing) {
            shared.metrics.record(&Outcome::MissingKey);
            return RemoteFuture::done(missing_key(status, shared.outcome));
        }
        let shared = Arc::clone(&self.shared);
        let deciding: Deciding = Box::pin(async move {
            match key_of(&extracted, &shared.missing) {
                Ok(key) => shared.rule(key, cost).await,
                Err(status) => Ruling::Refuse(missing_key(status, shared.outcome)),
            }
        });
        // The ready service goes with the request; this one keeps a fresh clone.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        RemoteFuture::decide(deciding, ready, req)
    }
}
