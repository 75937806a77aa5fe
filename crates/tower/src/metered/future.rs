//! [`MeteredFuture`]: the future of a [`Metered`](crate::Metered) layer's service.

use super::bill::Bill;
use super::body::MeteredBody;
use crate::body::RefusalBody;
use crate::future::Post;
use crate::key::KeyExtractor;
use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

pin_project! {
    /// The future of a [`Metered`](crate::Metered) layer's service: the inner service's
    /// response with the layer's fields and [`Outcome`](crate::Outcome), its body holding
    /// the request's reservation until it ends ([`MeteredBody`]); or the layer's refusal.
    ///
    /// An inner-service error, or this future dropped before the response's head (the
    /// client went away while the handler ran), settles the reservation **to its estimate**:
    /// what was reserved stays charged, nothing more is. No head says what the work cost, and
    /// the work may have been done (an upstream that answered, then a connection that broke):
    /// giving the estimate back would let a client that breaks its requests off run work
    /// for free, and charging more would be a guess. With an estimate of 0 (the default with
    /// a response cost) that is nothing.
    ///
    /// # Panics
    ///
    /// If polled again after it completed (as most futures).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use http_body_util::Full;
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, KeyedRateLimiter};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let limiter = Global::new(Gcra::with_clock("100/min".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(limiter, GlobalKey)
    ///     .response_cost(ResponseCost::body_bytes())
    ///     .cost(|_| 10)                                      // reserve 10 up front
    ///     .build()?;
    /// let failing = layer.layer(service_fn(|_: Request<()>| async {
    ///     Err::<Response<Full<bytes::Bytes>>, _>("upstream reset")
    /// }));
    /// assert!(failing.oneshot(Request::new(())).await.is_err());
    /// assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 90); // the estimate stands
    /// # Ok(())
    /// # }
    /// ```
    pub struct MeteredFuture<F, X: KeyExtractor, L> {
        #[pin]
        state: State<F>,
        post: Post,
        bill: Option<Bill<X, L>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Call { #[pin] fut: F },
        Done { response: Option<Response<Bytes>> },
    }
}

impl<F, X: KeyExtractor, L> MeteredFuture<F, X, L> {
    /// An admitted request: the inner service's `fut`, then `post`, its body holding `bill`.
    pub(crate) fn call(fut: F, post: Post, bill: Bill<X, L>) -> Self {
        MeteredFuture {
            state: State::Call { fut },
            post,
            bill: Some(bill),
        }
    }

    /// The layer's own answer (a refusal, no usable key).
    pub(crate) fn done(response: Response<Bytes>) -> Self {
        MeteredFuture {
            state: State::Done {
                response: Some(response),
            },
            post: Post::NONE,
            bill: None,
        }
    }
}

impl<F, X: KeyExtractor, L> fmt::Debug for MeteredFuture<F, X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredFuture")
            .field("outcome", &self.post.outcome)
            .field("bill", &self.bill)
            .finish_non_exhaustive()
    }
}

impl<F, X, L, B, E> Future for MeteredFuture<F, X, L>
where
    F: Future<Output = Result<Response<B>, E>>,
    X: KeyExtractor,
    B: http_body::Body + RefusalBody,
{
    type Output = Result<Response<MeteredBody<B, X, L>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Call { fut } => {
                let result = ready!(fut.poll(cx));
                let Some(mut bill) = this.bill.take() else {
                    panic!("MeteredFuture polled after completion");
                };
                let response = match result {
                    Ok(response) => response,
                    Err(error) => {
                        // Settled to its estimate (see the type), before the error goes out.
                        bill.settle();
                        return Poll::Ready(Err(error));
                    }
                };
                // The cost is read from the response as the inner service made it, before
                // the layer adds its own fields.
                let (head, body) = response.into_parts();
                bill.read(&head);
                let mut response = Response::from_parts(head, MeteredBody::new(body, bill));
                this.post.apply(&mut response);
                Poll::Ready(Ok(response))
            }
            StateProj::Done { response } => {
                let Some(response) = response.take() else {
                    panic!("MeteredFuture polled after completion");
                };
                Poll::Ready(Ok(
                    response.map(|bytes| MeteredBody::without_bill(B::refusal(bytes)))
                ))
            }
        }
    }
}
