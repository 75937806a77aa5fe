//! [`RemoteFuture`]: the future of a [`Remote`](crate::Remote) layer's service.

use crate::body::RefusalBody;
use crate::future::Post;
use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tower::Service;

/// What the awaited decision made of a request.
pub(crate) enum Ruling {
    /// Call the inner service, then add this to its response.
    Pass(Post),
    /// The layer's own answer (a refusal, the error policy's).
    Refuse(Response<Bytes>),
}

/// The decision, on its way: it owns what it borrows (the layer's state, the key).
pub(crate) type Deciding = Pin<Box<dyn Future<Output = Ruling> + Send>>;

pin_project! {
    /// The future of a [`Remote`](crate::Remote) layer's service: the awaited decision,
    /// then the inner service's response with the layer's fields and
    /// [`Outcome`](crate::Outcome), or the layer's own answer (a refusal, the
    /// [`OnLimiterError`](crate::OnLimiterError) policy's).
    ///
    /// `Send` when the inner service, its future and the request are.
    ///
    /// # Panics
    ///
    /// If polled again after it completed (as most futures).
    ///
    /// # Examples
    ///
    /// See [`RateLimitLayer::remote`](crate::RateLimitLayer::remote).
    pub struct RemoteFuture<F, S, R> {
        #[pin]
        state: State<F, S, R>,
        post: Post,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, R> {
        Decide { deciding: Deciding, call: Option<(S, R)> },
        Call { #[pin] fut: F },
        Done { response: Option<Response<Bytes>> },
    }
}

impl<F, S, R> RemoteFuture<F, S, R> {
    /// `deciding`, then `service` (ready) called with `request` if it passes.
    pub(crate) fn decide(deciding: Deciding, service: S, request: R) -> Self {
        RemoteFuture {
            state: State::Decide {
                deciding,
                call: Some((service, request)),
            },
            post: Post::NONE,
        }
    }

    /// The layer's answer without a decision (no usable key).
    pub(crate) fn done(response: Response<Bytes>) -> Self {
        RemoteFuture {
            state: State::Done {
                response: Some(response),
            },
            post: Post::NONE,
        }
    }
}

impl<F, S, R> fmt::Debug for RemoteFuture<F, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Decide { .. } => "deciding",
            State::Call { .. } => "call",
            State::Done { .. } => "done",
        };
        f.debug_struct("RemoteFuture")
            .field("state", &state)
            .field("outcome", &self.post.outcome)
            .finish_non_exhaustive()
    }
}

impl<F, S, R, B, E> Future for RemoteFuture<F, S, R>
where
    F: Future<Output = Result<Response<B>, E>>,
    S: Service<R, Future = F, Response = Response<B>, Error = E>,
    B: RefusalBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let this = self.as_mut().project();
            match this.state.project() {
                StateProj::Decide { deciding, call } => {
                    let ruling = ready!(deciding.as_mut().poll(cx));
                    let Some((mut service, request)) = call.take() else {
                        panic!("RemoteFuture polled after completion");
                    };
                    match ruling {
                        Ruling::Pass(post) => {
                            *this.post = post;
                            let fut = service.call(request);
                            self.as_mut().project().state.set(State::Call { fut });
                        }
                        Ruling::Refuse(response) => {
                            self.as_mut()
                                .project()
                                .state
                                .set(State::Done { response: None });
                            return Poll::Ready(Ok(response.map(B::refusal)));
                        }
                    }
                }
                StateProj::Call { fut } => {
                    let mut response = ready!(fut.poll(cx))?;
                    this.post.apply(&mut response);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done { response } => {
                    let Some(response) = response.take() else {
                        panic!("RemoteFuture polled after completion");
                    };
                    return Poll::Ready(Ok(response.map(B::refusal)));
                }
            }
        }
    }
}
