//! [`ResponseFuture`]: the future of [`RateLimit`](crate::RateLimit).

use crate::body::RefusalBody;
use crate::outcome::Outcome;
use bytes::Bytes;
use http::{HeaderMap, Response};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Sleep;
use tower::Service;

/// What a passed response gets on its way out.
pub(crate) struct Post {
    /// The outcome, unless the layer writes none ([`Builder::outcome_extension`](crate::Builder::outcome_extension)).
    pub(crate) outcome: Option<Outcome>,
    /// The state fields of an admission, when it carries them.
    pub(crate) fields: Option<Box<HeaderMap>>,
}

impl Post {
    /// Nothing to add (the layer's own answers carry theirs).
    pub(crate) const NONE: Post = Post {
        outcome: None,
        fields: None,
    };

    /// Adds the fields and the outcome to a passed `response`.
    #[inline]
    pub(crate) fn apply<B>(&mut self, response: &mut Response<B>) {
        if let Some(fields) = self.fields.take() {
            crate::headers::merge(response.headers_mut(), *fields);
        }
        if let Some(outcome) = self.outcome {
            response.extensions_mut().insert(outcome);
        }
    }
}

pin_project! {
    /// The future of [`RateLimit`](crate::RateLimit): the inner service's response (after the wait, in delay
    /// mode) with the layer's fields and [`Outcome`](crate::Outcome), or the layer's refusal.
    ///
    /// # Panics
    ///
    /// If polled again after it completed (as most futures).
    pub struct ResponseFuture<F, S, R> {
        #[pin]
        state: State<F, S, R>,
        post: Post,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, R> {
        Call { #[pin] fut: F },
        Wait { sleep: Pin<Box<Sleep>>, call: Option<Box<(S, R)>> },
        Done { response: Option<Response<Bytes>> },
    }
}

impl<F, S, R> ResponseFuture<F, S, R> {
    /// The inner service's response, on its way: `fut`, then `post`.
    pub(crate) fn call(fut: F, post: Post) -> Self {
        ResponseFuture {
            state: State::Call { fut },
            post,
        }
    }

    /// Delay mode: `service` (ready) is called with `request` after `wait`, then `post`.
    pub(crate) fn wait(wait: Duration, service: S, request: R, post: Post) -> Self {
        ResponseFuture {
            state: State::Wait {
                sleep: Box::pin(tokio::time::sleep(wait)),
                call: Some(Box::new((service, request))),
            },
            post,
        }
    }

    /// The layer's own answer (a refusal, no usable key).
    pub(crate) fn done(response: Response<Bytes>) -> Self {
        ResponseFuture {
            state: State::Done {
                response: Some(response),
            },
            post: Post::NONE,
        }
    }
}

impl<F, S, R> fmt::Debug for ResponseFuture<F, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("outcome", &self.post.outcome)
            .finish_non_exhaustive()
    }
}

impl<F, S, R, B, E> Future for ResponseFuture<F, S, R>
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
                StateProj::Call { fut } => {
                    let mut response = ready!(fut.poll(cx))?;
                    this.post.apply(&mut response);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Wait { sleep, call } => {
                    ready!(sleep.as_mut().poll(cx));
                    let Some(pending) = call.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let (mut service, request) = *pending;
                    let fut = service.call(request);
                    self.as_mut().project().state.set(State::Call { fut });
                }
                StateProj::Done { response } => {
                    let Some(response) = response.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    return Poll::Ready(Ok(response.map(B::refusal)));
                }
            }
        }
    }
}
