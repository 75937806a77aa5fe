//! [`PermitBody`]: a response body that holds its request's permit until its end.

use super::tracked::Tracked;
use crate::body::RefusalBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use limitcore::concurrency::{Completion, Feedback, Fixed};
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// A permit on its way to its outcome: completed with `outcome` when the body ends, or on
/// drop as a cancellation.
pub(crate) struct Held<F: Feedback> {
    permit: Option<Tracked<F>>,
    outcome: Completion,
}

impl<F: Feedback> Held<F> {
    /// Nothing held (the layer's own responses, upgrades).
    pub(crate) fn none() -> Self {
        Held {
            permit: None,
            outcome: Completion::Ignored,
        }
    }

    /// The body ended: the permit back with its outcome.
    fn finish(&mut self) {
        if let Some(permit) = self.permit.take() {
            permit.complete(self.outcome);
        }
    }

    /// The body failed: the permit back as dropped.
    fn fail(&mut self) {
        if let Some(permit) = self.permit.take() {
            permit.dropped();
        }
    }
}

impl<F: Feedback> Drop for Held<F> {
    /// Dropped before its end (the client went away, the server gave up on the body): a
    /// cancellation is no sample, unless the response was already a drop.
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            match self.outcome {
                Completion::Dropped => permit.dropped(),
                _ => permit.ignore(),
            }
        }
    }
}

pin_project! {
    /// The response body of [`ConcurrencyLimit`](crate::ConcurrencyLimit): the inner
    /// service's body `B`, holding the request's permit until the body ends.
    ///
    /// - **At its end** (`poll_frame` returns `None`, or a frame after which the inner body
    ///   reports [`is_end_stream`](Body::is_end_stream), or already at the head for an empty
    ///   body) the permit is completed with the response's classified [`Completion`]: a
    ///   success's latency then runs to this instant ([`Latency`](super::Latency)).
    /// - **On an error** of the inner body the permit is completed as
    ///   [`Completion::Dropped`].
    /// - **Dropped before its end** (the client disconnected, the server timed the body
    ///   out) the permit is released as [`Completion::Ignored`] (a cancellation is no sample),
    ///   or [`Completion::Dropped`] if the response was classified as one.
    ///
    /// Frames, [`size_hint`](Body::size_hint) and [`is_end_stream`](Body::is_end_stream)
    /// are the inner body's. The layer's own responses (a shed request) are written in `B`
    /// too ([`RefusalBody`](crate::RefusalBody)) and hold nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = ConcurrencyLimitLayer::new(4)?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Full::from("hello")))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert!(response.body().holds_permit());
    /// assert_eq!(layer.permits().in_flight(), 1);       // the head is out, the body is not
    /// let bytes = response.into_body().collect().await?.to_bytes();
    /// assert_eq!(bytes, "hello");
    /// assert_eq!(layer.permits().in_flight(), 0);       // back at the body's end
    /// # Ok(())
    /// # }
    /// ```
    pub struct PermitBody<B, F: Feedback = Fixed> {
        #[pin]
        inner: B,
        held: Held<F>,
    }
}

impl<B: Body, F: Feedback> PermitBody<B, F> {
    /// `inner` holding `permit`, to be completed with `outcome` at its end (at once if it is
    /// already at its end).
    pub(crate) fn new(inner: B, permit: Tracked<F>, outcome: Completion) -> Self {
        let mut held = Held {
            permit: Some(permit),
            outcome,
        };
        if inner.is_end_stream() {
            held.finish();
        }
        PermitBody { inner, held }
    }
}

impl<B, F: Feedback> PermitBody<B, F> {
    /// `inner`, holding nothing.
    pub(crate) fn without_permit(inner: B) -> Self {
        PermitBody {
            inner,
            held: Held::none(),
        }
    }

    /// Whether the body still holds its request's permit (false once it ended, for the
    /// layer's own responses, and for upgrades).
    ///
    /// # Examples
    ///
    /// See the type's.
    pub fn holds_permit(&self) -> bool {
        self.held.permit.is_some()
    }

    /// The inner body.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let svc = ConcurrencyLimitLayer::new(4)?.layer(service_fn(|_: Request<()>| async {
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

impl<B: Body, F: Feedback> Body for PermitBody<B, F> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        match &frame {
            None => this.held.finish(),
            Some(Err(_)) => this.held.fail(),
            // A server need not poll a body again once it says it has ended (hyper does
            // not): the end is here.
            Some(Ok(_)) if this.inner.is_end_stream() => this.held.finish(),
            Some(Ok(_)) => {}
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

impl<B, F: Feedback> fmt::Debug for PermitBody<B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitBody")
            .field("holds_permit", &self.holds_permit())
            .field("outcome", &self.held.outcome)
            .finish_non_exhaustive()
    }
}

/// The body of one of the layer's own responses, in `B`.
pub(crate) fn refusal<B: RefusalBody, F: Feedback>(bytes: Bytes) -> PermitBody<B, F> {
    PermitBody::without_permit(B::refusal(bytes))
}
