//! [`PaceLayer`]: a client-side pacer for outgoing requests.

use limitcore::{LeakyBucket, Quota, QuotaError, Reserve};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::time::Sleep;
use tower::{Layer, Service};

/// A tower [`Layer`] for a client (a hyper-util or reqwest-style tower client, a crawler, a
/// load generator) that starts each request at its own slot, so that a remote API's limit
/// is kept without bursts: request `k` of a quick succession starts `k` emission intervals
/// after the first.
///
/// The slots come from a pacer `P` ([`Reserve`]; by default a [`LeakyBucket`], whose burst
/// is how many requests may wait for a slot at once). Each call reserves the next slot,
/// then waits for it asynchronously (tokio's timer; no thread is held, nothing spins) before
/// calling the inner service. When the pacer's queue is full, the call waits the pacer's
/// exact `retry_after` and reserves again. Every clone of the layer and of its services
/// shares one pacer.
///
/// # Panics
///
/// A request that waits is held by `tokio::time::sleep`: `call` and the future panic for it
/// outside a tokio runtime with the time driver enabled (as `sleep` does).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use limitcore_tower::PaceLayer;
/// use std::time::{Duration, Instant};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// // Stands for a hyper-util client: returns when the request was sent.
/// let send = service_fn(|_req: ()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
/// let paced = PaceLayer::new("20/s burst 10".parse()?)?.layer(send);
/// let start = Instant::now();
/// let calls: Vec<_> = (0..3).map(|_| tokio::spawn(paced.clone().oneshot(()))).collect();
/// let mut last = start;
/// for call in calls {
///     last = last.max(call.await??);
/// }
/// assert!(last - start >= Duration::from_millis(100)); // slots at 0, 50 and 100 ms
/// # Ok(())
/// # }
/// ```
pub struct PaceLayer<P = LeakyBucket> {
    pacer: Arc<P>,
}

impl<P> Clone for PaceLayer<P> {
    fn clone(&self) -> Self {
        PaceLayer {
            pacer: Arc::clone(&self.pacer),
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for PaceLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceLayer")
            .field("pacer", &self.pacer)
            .finish()
    }
}

impl PaceLayer<LeakyBucket> {
    /// Paces requests at `quota`'s rate on the default clock, with up to `quota.burst()`
    /// requests waiting for a slot.
    ///
    /// # Errors
    ///
    /// The leaky bucket's [`QuotaError`] for `quota`.
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Ok(PaceLayer::with_pacer(LeakyBucket::new(quota)?))
    }
}

impl<P: Reserve> PaceLayer<P> {
    /// Paces requests by the slots of `pacer` (a [`LeakyBucket`] or a `Gcra`, on a clock of
    /// your choice). Its clock must run at real time: the waits are tokio sleeps.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{LeakyBucket, Quota};
    /// use limitcore_tower::PaceLayer;
    ///
    /// // 100 requests per minute, at most 5 waiting for a slot at once.
    /// let layer = PaceLayer::with_pacer(LeakyBucket::new(Quota::per_minute(100)?.with_burst(5)?)?);
    /// assert_eq!(layer.pacer().capacity(), 5);
    /// # use limitcore::RateLimiter;
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn with_pacer(pacer: P) -> Self {
        PaceLayer {
            pacer: Arc::new(pacer),
        }
    }

    /// The pacer.
    pub fn pacer(&self) -> &P {
        &self.pacer
    }
}

impl<S, P> Layer<S> for PaceLayer<P> {
    type Service = Pace<S, P>;

    fn layer(&self, inner: S) -> Pace<S, P> {
        Pace {
            inner,
            pacer: Arc::clone(&self.pacer),
        }
    }
}

/// The service of a [`PaceLayer`].
pub struct Pace<S, P = LeakyBucket> {
    inner: S,
    pacer: Arc<P>,
}

impl<S: Clone, P> Clone for Pace<S, P> {
    fn clone(&self) -> Self {
        Pace {
            inner: self.inner.clone(),
            pacer: Arc::clone(&self.pacer),
        }
    }
}

impl<S: fmt::Debug, P> fmt::Debug for Pace<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pace")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, P, R> Service<R> for Pace<S, P>
where
    S: Service<R> + Clone,
    P: Reserve,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = PaceFuture<S, P, R>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let (wait, retry) = match self.pacer.reserve_n(1) {
            Ok(slot) if slot.delay().is_zero() => {
                return PaceFuture {
                    state: PaceState::Call {
                        fut: self.inner.call(req),
                    },
                };
            }
            Ok(slot) => (slot.delay(), None),
            // The queue is full: wait until there is room, then reserve again.
            Err(denied) => (
                denied.retry_after().unwrap_or_default(),
                Some(Arc::clone(&self.pacer)),
            ),
        };
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        PaceFuture {
            state: PaceState::Wait {
                sleep: Box::pin(tokio::time::sleep(wait)),
                retry,
                call: Some((ready, req)),
            },
        }
    }
}

pin_project! {
    /// The future of [`Pace`]: waits for the request's slot, then the inner response.
    ///
    /// # Panics
    ///
    /// If polled again after it completed (as most futures).
    pub struct PaceFuture<S: Service<R>, P, R> {
        #[pin]
        state: PaceState<S, P, R>,
    }
}

pin_project! {
    #[project = PaceProj]
    enum PaceState<S: Service<R>, P, R> {
        Call { #[pin] fut: S::Future },
        Wait { sleep: Pin<Box<Sleep>>, retry: Option<Arc<P>>, call: Option<(S, R)> },
    }
}

impl<S: Service<R>, P, R> fmt::Debug for PaceFuture<S, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceFuture").finish_non_exhaustive()
    }
}

impl<S: Service<R>, P: Reserve, R> Future for PaceFuture<S, P, R> {
    type Output = Result<S::Response, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project().state.project() {
                PaceProj::Call { fut } => return fut.poll(cx),
                PaceProj::Wait { sleep, retry, call } => {
                    ready!(sleep.as_mut().poll(cx));
                    if let Some(pacer) = retry {
                        match pacer.reserve_n(1) {
                            Ok(slot) => {
                                *retry = None;
                                sleep.set(tokio::time::sleep(slot.delay()));
                            }
                            Err(denied) => {
                                let wait = denied.retry_after().unwrap_or_default();
                                sleep.set(tokio::time::sleep(wait));
                            }
                        }
                        continue;
                    }
                    let Some((mut service, request)) = call.take() else {
                        panic!("PaceFuture polled after completion");
                    };
                    let fut = service.call(request);
                    self.as_mut().project().state.set(PaceState::Call { fut });
                }
            }
        }
    }
}
