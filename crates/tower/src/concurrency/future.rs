//! [`ResponseFuture`]: the future of [`ConcurrencyLimit`](crate::ConcurrencyLimit).

use super::body::{PermitBody, refusal};
use super::classify::{Classify, Latency};
use super::layer::Shared;
use super::shed::shed;
use super::tracked::Tracked;
use crate::body::RefusalBody;
use crate::telemetry::ConcurrencyMetrics;
use bytes::Bytes;
use http::{Response, StatusCode};
use limitcore::concurrency::{AcquireError, AcquireOwned, Completion, Feedback};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tower::Service;

/// What an admitted request's response needs: its permit, and how to classify it.
struct Admit<F: Feedback, C> {
    permit: Tracked<F>,
    classifier: C,
    latency: Latency,
}

/// A queued request: the ready inner service and the request, and what comes after.
struct Queued<S, R, C> {
    service: S,
    request: R,
    classifier: C,
    latency: Latency,
    status: StatusCode,
    metrics: ConcurrencyMetrics,
}

pin_project! {
    /// The future of [`ConcurrencyLimit`](crate::ConcurrencyLimit): the inner service's
    /// response (after a queue wait, in queue mode) with its body holding the request's
    /// permit ([`PermitBody`]), or the layer's answer to a shed request.
    ///
    /// An inner-service error completes the permit at once, with the classifier's outcome
    /// for it ([`Classify::classify_error`]: [`Completion::Dropped`] by default), and is
    /// returned as it is. Dropping the future before it resolves releases the permit
    /// ([`Completion::Ignored`]), or leaves the queue having taken nothing.
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
    /// use limitcore::concurrency::Aimd;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = ConcurrencyLimitLayer::adaptive(Aimd::new().with_initial(30)?.with_limits(1, 100)?)?.build();
    /// let failing = layer.layer(service_fn(|_: Request<()>| async {
    ///     Err::<Response<String>, _>("backend down")
    /// }));
    /// assert!(failing.oneshot(Request::new(())).await.is_err());
    /// assert_eq!(layer.permits().in_flight(), 0);   // released at once,
    /// assert_eq!(layer.permits().limit(), 27);      // as a drop: AIMD backed off (30 × 0.9)
    /// # Ok(())
    /// # }
    /// ```
    pub struct ResponseFuture<Fut, S, R, F: Feedback, C> {
        #[pin]
        state: State<Fut, S, R, F, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, S, R, F: Feedback, C> {
        Call { #[pin] fut: Fut, admit: Option<Admit<F, C>> },
        Wait {
            acquire: AcquireOwned<F>,
            queued: Option<Box<Queued<S, R, C>>>,
        },
        Shed { response: Option<Response<Bytes>> },
    }
}

impl<Fut, S, R, F: Feedback, C: Classify> ResponseFuture<Fut, S, R, F, C> {
    /// An admitted request: the inner service's `fut`, then its body holds `permit`.
    #[inline]
    pub(crate) fn call(fut: Fut, permit: Tracked<F>, classifier: &C, latency: Latency) -> Self {
        ResponseFuture {
            state: State::Call {
                fut,
                admit: Some(Admit {
                    permit,
                    classifier: classifier.clone(),
                    latency,
                }),
            },
        }
    }

    /// A queued request: `service` (ready) is called with `request` once `acquire` grants a
    /// permit; shed if it fails or times out.
    pub(crate) fn wait(
        acquire: AcquireOwned<F>,
        service: S,
        request: R,
        shared: &Shared<F, C>,
    ) -> Self {
        ResponseFuture {
            state: State::Wait {
                acquire,
                queued: Some(Box::new(Queued {
                    service,
                    request,
                    classifier: shared.classifier.clone(),
                    latency: shared.latency,
                    status: shared.status,
                    metrics: shared.metrics.clone(),
                })),
            },
        }
    }

    /// The layer's answer to a shed request.
    pub(crate) fn shed(response: Response<Bytes>) -> Self {
        ResponseFuture {
            state: State::Shed {
                response: Some(response),
            },
        }
    }
}

impl<Fut, S, R, F: Feedback, C> fmt::Debug for ResponseFuture<Fut, S, R, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Call { .. } => "call",
            State::Wait { .. } => "queued",
            State::Shed { .. } => "shed",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<Fut, S, R, F, C, B, E> Future for ResponseFuture<Fut, S, R, F, C>
where
    Fut: Future<Output = Result<Response<B>, E>>,
    S: Service<R, Future = Fut, Response = Response<B>, Error = E>,
    B: http_body::Body + RefusalBody,
    F: Feedback,
    C: Classify,
{
    type Output = Result<Response<PermitBody<B, F>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let this = self.as_mut().project();
            match this.state.project() {
                StateProj::Call { fut, admit } => {
                    let result = ready!(fut.poll(cx));
                    let Some(admit) = admit.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    return Poll::Ready(match result {
                        Ok(response) => Ok(admit.response(response)),
                        Err(error) => {
                            let outcome = admit.classifier.classify_error(&error);
                            admit.permit.complete(outcome);
                            Err(error)
                        }
                    });
                }
                StateProj::Wait { acquire, queued } => {
                    let granted = ready!(Pin::new(acquire).poll(cx));
                    let Some(pending) = queued.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let Queued {
                        mut service,
                        request,
                        classifier,
                        latency,
                        status,
                        metrics,
                    } = *pending;
                    let permit = match granted {
                        Ok(permit) => Tracked::new(permit, &metrics),
                        Err(error) => return Poll::Ready(Ok(shed_in(status, error, &metrics))),
                    };
                    let fut = service.call(request);
                    let admit = Some(Admit {
                        permit,
                        classifier,
                        latency,
                    });
                    self.as_mut()
                        .project()
                        .state
                        .set(State::Call { fut, admit });
                }
                StateProj::Shed { response } => {
                    let Some(response) = response.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    return Poll::Ready(Ok(response.map(refusal)));
                }
            }
        }
    }
}

/// The shed response in the inner body type.
#[cold]
fn shed_in<B: RefusalBody, F: Feedback>(
    status: StatusCode,
    error: AcquireError,
    metrics: &ConcurrencyMetrics,
) -> Response<PermitBody<B, F>> {
    metrics.shed(error);
    shed(status, error).map(refusal)
}

impl<F: Feedback, C: Classify> Admit<F, C> {
    /// The inner service's `response`, classified at its head; its body holds the permit,
    /// except for an upgrade (`101 Switching Protocols`), whose permit is completed now.
    #[inline]
    fn response<B: http_body::Body>(self, response: Response<B>) -> Response<PermitBody<B, F>> {
        let Admit {
            permit,
            classifier,
            latency,
        } = self;
        let outcome = classifier.classify_response(&response);
        let upgrade = response.status() == StatusCode::SWITCHING_PROTOCOLS;
        let outcome = match outcome {
            Completion::Success if upgrade || latency == Latency::Head => {
                Completion::SuccessAfter(permit.elapsed())
            }
            other => other,
        };
        if upgrade {
            // The connection is handed over: its life is not this request's, and holding a
            // permit for it would turn the request limit into a connection limit.
            permit.complete(outcome);
            return response.map(PermitBody::without_permit);
        }
        response.map(|body| PermitBody::new(body, permit, outcome))
    }
}
