//! [`ConcurrencyLimit`]: the service of a [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer).

use super::body::PermitBody;
use super::classify::Classify;
use super::future::ResponseFuture;
use super::layer::Shared;
use super::shed::shed;
use super::tracked::Tracked;
use crate::body::RefusalBody;
use http::{Request, Response};
use limitcore::concurrency::{AcquireError, Feedback, Fixed, Permits};
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

/// The service of a [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer): takes a
/// permit for each request in `call` (at once, or after a queue wait), calls the inner
/// service, and hands the permit to the response's body ([`PermitBody`]), which gives it
/// back when it ends; or answers a request it cannot admit with the shed status.
///
/// Always ready when the inner service is (`poll_ready` is the inner service's): the limit
/// is decided in `call`, so that a request over it is answered rather than held in
/// `poll_ready`. Clones share the layer's limit.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use http::{Request, Response, StatusCode};
/// use limitcore_tower::ConcurrencyLimitLayer;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let inner = service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new("ok".to_owned()))
/// });
/// let svc = ConcurrencyLimitLayer::new(1)?.layer(inner);
/// let first = svc.clone().oneshot(Request::new(())).await?;
/// assert_eq!(svc.permits().in_flight(), 1);   // held by `first`'s body
/// let second = svc.clone().oneshot(Request::new(())).await?;
/// assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
/// drop(first);                                 // its body is gone: the permit is back
/// assert_eq!(svc.oneshot(Request::new(())).await?.status(), StatusCode::OK);
/// # Ok(())
/// # }
/// ```
pub struct ConcurrencyLimit<S, F: Feedback = Fixed, C = super::DefaultClassifier> {
    inner: S,
    shared: Arc<Shared<F, C>>,
}

impl<S, F: Feedback, C> ConcurrencyLimit<S, F, C> {
    /// The service of a layer whose state is `shared`, around `inner`.
    pub(crate) fn from_shared(inner: S, shared: Arc<Shared<F, C>>) -> Self {
        ConcurrencyLimit { inner, shared }
    }

    /// The limit (shared with the layer and every clone).
    ///
    /// # Examples
    ///
    /// See the type's.
    pub fn permits(&self) -> &Arc<Permits<F>> {
        &self.shared.permits
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::Layer;
    ///
    /// let svc = ConcurrencyLimitLayer::new(4)?.layer(7_u8);
    /// assert_eq!(*svc.get_ref(), 7);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably (the limit stays shared).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::Layer;
    ///
    /// let mut svc = ConcurrencyLimitLayer::new(4)?.layer(7_u8);
    /// *svc.get_mut() += 1;
    /// assert_eq!(*svc.get_ref(), 8);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, taken out of the limit (permits held by responses in flight stay
    /// held until their bodies end).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::Layer;
    ///
    /// let svc = ConcurrencyLimitLayer::new(4)?.layer(7_u8);
    /// assert_eq!(svc.into_inner(), 7);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, F: Feedback, C> Clone for ConcurrencyLimit<S, F, C> {
    fn clone(&self) -> Self {
        ConcurrencyLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, F: Feedback, C> fmt::Debug for ConcurrencyLimit<S, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("inner", &self.inner)
            .field("permits", &self.shared.permits)
            .finish_non_exhaustive()
    }
}

impl<S, F, C, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S, F, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: http_body::Body + RefusalBody,
    F: Feedback,
    C: Classify,
{
    type Response = Response<PermitBody<ResBody, F>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, S, Request<ReqBody>, F, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let error = match shared.permits.try_acquire_owned(1) {
            Ok(permit) => {
                let permit = Tracked::new(permit, &shared.metrics);
                let fut = self.inner.call(req);
                return ResponseFuture::call(fut, permit, &shared.classifier, shared.latency);
            }
            Err(error) => error,
        };
        match (error, shared.max_wait) {
            (AcquireError::Full { .. }, Some(max_wait)) => {
                // The ready service goes with the request; this one keeps a fresh clone.
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                let acquire = shared.permits.acquire_owned_within(1, max_wait);
                ResponseFuture::wait(acquire, ready, req, shared)
            }
            (error, _) => {
                shared.metrics.shed(error);
                ResponseFuture::shed(shed(shared.status, error))
            }
        }
    }
}
