//! [`MeteredBody`]: a response body that records its request's cost when it ends.

use super::bill::Bill;
use crate::body::RefusalBody;
use crate::key::KeyExtractor;
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

pin_project! {
    /// The response body of a [`Metered`](crate::Metered) layer's service: the inner
    /// service's body `B`, holding its request's reservation until the body ends, then
    /// recording the response's cost ([`ResponseCost`](crate::ResponseCost)) **exactly
    /// once**:
    ///
    /// - **At its end** (`poll_frame` returns `None`, or a frame after which the inner body
    ///   reports [`is_end_stream`](Body::is_end_stream), or already at the head for an empty
    ///   body).
    /// - **On an error** of the inner body: the body ends there, at the cost so far.
    /// - **Dropped before its end** (the client went away, the server gave up on the body):
    ///   at the cost so far: the bytes counted until then for
    ///   [`ResponseCost::body_bytes`](crate::ResponseCost::body_bytes), the head's value for
    ///   a header or a closure.
    ///
    /// Frames, [`size_hint`](Body::size_hint) and [`is_end_stream`](Body::is_end_stream)
    /// are the inner body's. The layer's own responses (a refusal) are written in `B` too
    /// ([`RefusalBody`]) and record nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, KeyedRateLimiter};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let bytes = Global::new(Gcra::with_clock("1000/s".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(bytes, GlobalKey)
    ///     .response_cost(ResponseCost::body_bytes())
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Full::from("hello")))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert!(!response.body().is_settled());                 // the head is out, the body is not
    /// let bytes = response.into_body().collect().await?.to_bytes();
    /// assert_eq!(bytes, "hello");
    /// assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 995); // settled at its end
    /// # Ok(())
    /// # }
    /// ```
    pub struct MeteredBody<B, X: KeyExtractor, L> {
        // Declared first, so that a body dropped before its end records its cost before the
        // inner body is dropped (a test, or a logging body inside, sees the charge).
        bill: Option<Bill<X, L>>,
        #[pin]
        inner: B,
    }
}

impl<B: Body, X: KeyExtractor, L> MeteredBody<B, X, L> {
    /// `inner` holding `bill`, recorded at its end (at once if it is already at its end).
    pub(crate) fn new(inner: B, bill: Bill<X, L>) -> Self {
        if inner.is_end_stream() {
            bill.settle();
            return MeteredBody::without_bill(inner);
        }
        MeteredBody {
            bill: Some(bill),
            inner,
        }
    }
}

impl<B, X: KeyExtractor, L> MeteredBody<B, X, L> {
    /// `inner`, recording nothing.
    pub(crate) fn without_bill(inner: B) -> Self {
        MeteredBody { bill: None, inner }
    }

    /// Whether the body's cost is recorded (or there is none to record: the layer's own
    /// responses): false while the body holds its request's reservation.
    ///
    /// # Examples
    ///
    /// See the type's.
    pub fn is_settled(&self) -> bool {
        self.bill.is_none()
    }

    /// The inner body.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use limitcore_tower::{RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("100/s".parse()?)?
    ///     .response_cost(ResponseCost::body_bytes())
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new("hi".to_owned()))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(response.body().get_ref(), "hi");
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B: Body, X: KeyExtractor, L> Body for MeteredBody<B, X, L> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        let Some(bill) = this.bill.as_mut() else {
            return Poll::Ready(frame);
        };
        let end = match &frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    bill.count(data.remaining());
                }
                // A server need not poll a body again once it says it has ended (hyper does
                // not): the end is here.
                this.inner.is_end_stream()
            }
            // An error ends the body: what it yielded until then is what it cost.
            Some(Err(_)) | None => true,
        };
        if end {
            if let Some(bill) = this.bill.take() {
                bill.settle();
            }
        }
        Poll::Ready(frame)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B, X: KeyExtractor, L> fmt::Debug for MeteredBody<B, X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredBody")
            .field("bill", &self.bill)
            .finish_non_exhaustive()
    }
}

/// Another layer outside this one (a second rate limit, a concurrency limit) can answer in
/// this body: its responses record nothing.
impl<B: RefusalBody, X: KeyExtractor, L> RefusalBody for MeteredBody<B, X, L> {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        MeteredBody::without_bill(B::refusal(bytes))
    }
}
