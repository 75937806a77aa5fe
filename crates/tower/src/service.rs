//! [`RateLimit`](crate::RateLimit): the service of a [`RateLimitLayer`](crate::RateLimitLayer): decides
//! each request in `call`, then calls the inner service or answers with the refusal.

use crate::body::RefusalBody;
use crate::future::{Post, ResponseFuture};
use crate::key::{KeyExtractor, MissingKey, RequestHead};
use crate::mode::Local;
use crate::outcome::Outcome;
use crate::policy::{Shared, missing_key};
use http::{Request, Response};
use limitcore::KeyedRateLimiter;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

/// The service of a [`RateLimitLayer`](crate::RateLimitLayer): decides each request, then calls the inner service
/// (at once, or at the request's slot in delay mode) or answers with the refusal.
///
/// Clones share the layer's limiter. `M` is the layer's decision mode: [`Local`] (decided
/// in `call`) or [`Remote`](crate::Remote) (awaited in the response future,
/// [`RemoteFuture`](crate::RemoteFuture)).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use http::{Request, Response, StatusCode};
/// use limitcore_tower::RateLimitLayer;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let inner = service_fn(|_req: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new("ok".to_owned())) });
/// let svc = RateLimitLayer::global("1/min".parse()?)?.build()?.layer(inner);
/// let first = svc.clone().oneshot(Request::new(())).await?;
/// let second = svc.oneshot(Request::new(())).await?;     // another clone, the same limit
/// assert_eq!(first.status(), StatusCode::OK);
/// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(second.headers()["retry-after"], "60");
/// # Ok(())
/// # }
/// ```
pub struct RateLimit<S, X: KeyExtractor, L, M = Local> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared<X, L>>,
    mode: PhantomData<fn() -> M>,
}

impl<S, X: KeyExtractor, L, M> RateLimit<S, X, L, M> {
    /// The service of a layer whose state is `shared`, around `inner`.
    pub(crate) fn from_shared(inner: S, shared: Arc<Shared<X, L>>) -> Self {
        RateLimit {
            inner,
            shared,
            mode: PhantomData,
        }
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// use tower::Layer;
    ///
    /// let svc = RateLimitLayer::global("10/s".parse()?)?.build()?.layer(7_u8);
    /// assert_eq!(*svc.get_ref(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably (the layer's limiter stays shared).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// use tower::Layer;
    ///
    /// let mut svc = RateLimitLayer::global("10/s".parse()?)?.build()?.layer(7_u8);
    /// *svc.get_mut() += 1;
    /// assert_eq!(*svc.get_ref(), 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, taken out of the rate limit (this service's share of the limiter
    /// is dropped; the layer and other services keep theirs).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// use tower::Layer;
    ///
    /// let svc = RateLimitLayer::global("10/s".parse()?)?.build()?.layer(7_u8);
    /// assert_eq!(svc.into_inner(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, X: KeyExtractor, L, M> Clone for RateLimit<S, X, L, M> {
    fn clone(&self) -> Self {
        RateLimit::from_shared(self.inner.clone(), Arc::clone(&self.shared))
    }
}

impl<S: fmt::Debug, X: KeyExtractor, L, M> fmt::Debug for RateLimit<S, X, L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, X, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, X, L, Local>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: RefusalBody,
    X: KeyExtractor,
    L: KeyedRateLimiter<X::Key>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, S, Request<ReqBody>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        // The key (and cost) are read from the request as it is (no split and rebuild).
        let head = RequestHead::from(&req);
        let extracted = shared.extractor.extract(head);
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&head));
        let key = match (&extracted, &shared.missing) {
            (Some(key), _) | (None, MissingKey::Shared(key)) => key,
            (None, MissingKey::Reject(status)) => {
                shared.metrics.record(&Outcome::MissingKey);
                return ResponseFuture::done(missing_key(*status, shared.outcome));
            }
        };
        let verdict = shared.decide(key, cost);
        shared.metrics.record(&verdict.outcome);
        if verdict.outcome.is_refused() {
            return ResponseFuture::done(shared.refusal(key, &verdict));
        }
        let post = Post {
            outcome: shared.outcome.then_some(verdict.outcome),
            fields: match &verdict.state {
                Some(state) if shared.state_on_pass => Some(shared.pass_fields(key, state)),
                _ => None,
            },
        };
        match verdict.outcome {
            Outcome::Delayed { wait } => {
                // The ready service goes with the request; this one keeps a fresh clone.
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                ResponseFuture::wait(wait, ready, req, post)
            }
            _ => ResponseFuture::call(self.inner.call(req), post),
        }
    }
}
