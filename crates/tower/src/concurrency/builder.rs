//! [`Builder`]: the configuration of a [`ConcurrencyLimitLayer`].

use super::classify::{Classify, DefaultClassifier, Latency};
use super::layer::{ConcurrencyLimitLayer, Shared};
use crate::telemetry::{ConcurrencyMetrics, Naming};
use http::StatusCode;
use limitcore::concurrency::{Feedback, Fixed, LimitError, Order, Permits};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Configures a [`ConcurrencyLimitLayer`]; made by [`ConcurrencyLimitLayer::fixed`],
/// [`ConcurrencyLimitLayer::adaptive`] and [`ConcurrencyLimitLayer::builder`].
///
/// Defaults: shed at once (no queue), status 503 Service Unavailable, the
/// [`DefaultClassifier`], latency to the body's end ([`Latency::BodyEnd`]).
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use limitcore::concurrency::{Aimd, Order, Completion};
/// use limitcore_tower::ConcurrencyLimitLayer;
/// use std::time::Duration;
///
/// let layer = ConcurrencyLimitLayer::adaptive(Aimd::new())?
///     .queue(200, Duration::from_millis(250))?
///     .order(Order::Lifo)
///     .status(StatusCode::TOO_MANY_REQUESTS)
///     .classifier(|status: StatusCode| {
///         if status == StatusCode::GATEWAY_TIMEOUT { Completion::Dropped } else { Completion::Success }
///     })
///     .build();
/// assert_eq!(layer.status(), StatusCode::TOO_MANY_REQUESTS);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
pub struct Builder<F: Feedback = Fixed, C = DefaultClassifier> {
    permits: Permits<F>,
    classifier: C,
    status: StatusCode,
    max_wait: Option<Duration>,
    latency: Latency,
    naming: Naming,
}

impl<F: Feedback, C> fmt::Debug for Builder<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("permits", &self.permits)
            .field("status", &self.status)
            .field("max_wait", &self.max_wait)
            .field("latency", &self.latency)
            .field("metrics", &self.naming)
            .finish_non_exhaustive()
    }
}

impl<F: Feedback> Builder<F> {
    /// The defaults over `permits`.
    pub(crate) fn new(permits: Permits<F>) -> Self {
        Builder {
            permits,
            classifier: DefaultClassifier,
            status: StatusCode::SERVICE_UNAVAILABLE,
            max_wait: None,
            latency: Latency::BodyEnd,
            naming: Naming::default(),
        }
    }
}

impl<F: Feedback, C: Classify> Builder<F, C> {
    /// Queue mode: a request that finds the limit full waits for a permit, among at most
    /// `backlog` waiters, for at most `max_wait`; past either bound it is shed (the
    /// [`Shed`](super::Shed) extension says which). Waiters are served in the limit's
    /// [`Order`] (FIFO by default: no request overtakes a waiter). Without it (the
    /// default), a request that finds the limit full is shed at once.
    ///
    /// The wait is an async timer on tokio (the task yields; no thread is held), and the
    /// inner service, ready, waits with the request: the layer needs `S: Clone`, as
    /// [`Builder::delay`](crate::Builder::delay) of the rate limit.
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroBacklog`] for a backlog of 0; [`LimitError::Parameter`] for a
    /// zero `max_wait` (leave the queue off to shed at once).
    ///
    /// # Panics
    ///
    /// A waiting request is timed by `tokio::time::timeout`: the service's `call` panics
    /// for it outside a tokio runtime with the time driver enabled (hyper and axum servers
    /// run on one).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::LimitError;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use std::time::Duration;
    ///
    /// let ms = Duration::from_millis;
    /// assert!(ConcurrencyLimitLayer::fixed(8)?.queue(16, ms(50)).is_ok());
    /// assert_eq!(ConcurrencyLimitLayer::fixed(8)?.queue(0, ms(50)).unwrap_err(), LimitError::ZeroBacklog);
    /// assert!(ConcurrencyLimitLayer::fixed(8)?.queue(16, Duration::ZERO).is_err());
    /// # Ok::<(), LimitError>(())
    /// ```
    pub fn queue(mut self, backlog: u32, max_wait: Duration) -> Result<Self, LimitError> {
        if max_wait.is_zero() {
            return Err(LimitError::Parameter {
                name: "max_wait",
                value: 0.0,
                expected: "a positive duration (leave the queue off to shed at once)",
            });
        }
        self.permits = self.permits.with_backlog(backlog)?;
        self.max_wait = Some(max_wait);
        Ok(self)
    }

    /// The order queued requests are served in (default FIFO; LIFO serves the newest
    /// first, the one most likely to still be wanted, and lets a new request take a free
    /// permit before older waiters).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::Order;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::fixed(8)?.order(Order::Lifo).build();
    /// assert_eq!(layer.permits().order(), Order::Lifo);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn order(mut self, order: Order) -> Self {
        self.permits = self.permits.with_order(order);
        self
    }

    /// The status of a shed request (default 503 Service Unavailable).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::fixed(8)?.status(StatusCode::TOO_MANY_REQUESTS).build();
    /// assert_eq!(layer.status(), StatusCode::TOO_MANY_REQUESTS);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Which span a success's latency covers (default: to the body's end; see
    /// [`Latency`]).
    ///
    /// # Examples
    ///
    /// See [`Latency`].
    pub fn latency(mut self, latency: Latency) -> Self {
        self.latency = latency;
        self
    }

    /// How responses and errors become outcomes (default [`DefaultClassifier`]): any
    /// [`Classify`], a closure of the status included.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use limitcore::concurrency::{Aimd, Completion};
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// // 429 from the backend is overload too.
    /// let layer = ConcurrencyLimitLayer::adaptive(Aimd::new())?
    ///     .classifier(|status: StatusCode| {
    ///         if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
    ///             Completion::Dropped
    ///         } else {
    ///             Completion::Success
    ///         }
    ///     })
    ///     .build();
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn classifier<C2: Classify>(self, classifier: C2) -> Builder<F, C2> {
        Builder {
            permits: self.permits,
            classifier,
            status: self.status,
            max_wait: self.max_wait,
            latency: self.latency,
            naming: self.naming,
        }
    }

    /// The `limit` label of the layer's metrics (feature `metrics`; default `"default"`).
    /// Give each concurrency layer of a process its own name, or their series add up.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use metrics_exporter_prometheus::PrometheusBuilder;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let recorder = PrometheusBuilder::new().build_recorder();
    /// let layer = metrics::with_local_recorder(&recorder, || {
    ///     ConcurrencyLimitLayer::fixed(1).map(|b| b.metrics_name("backend").build())
    /// })?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("ok")))
    /// }));
    /// let held = svc.clone().oneshot(Request::new(())).await?; // its body holds the permit
    /// let shed = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(shed.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    /// let page = recorder.handle().render();
    /// assert!(page.contains(r#"limitcore_concurrency_in_flight{limit="backend"} 1"#));
    /// assert!(page.contains(r#"limitcore_concurrency_requests_total{limit="backend",outcome="shed"} 1"#));
    /// drop(held);
    /// assert!(recorder.handle().render().contains(r#"limitcore_concurrency_in_flight{limit="backend"} 0"#));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_name(mut self, name: impl Into<String>) -> Self {
        self.naming.set_name(name.into());
        self
    }

    /// One more label, `key="value"`, on every series of the layer (feature `metrics`): a
    /// route template, a backend's name — a value you give, fixed for the layer.
    ///
    /// # Panics
    ///
    /// If `key` is `limit` or `outcome` (the layer writes those) or was given before.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::fixed(64)?
    ///     .metrics_name("uploads")
    ///     .metrics_label("route", "/upload/{bucket}")
    ///     .build();
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.naming.add_label(key.into(), value.into());
        self
    }

    /// The layer.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::fixed(8)?.build();
    /// assert_eq!(layer.permits().limit(), 8);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn build(self) -> ConcurrencyLimitLayer<F, C> {
        let metrics = ConcurrencyMetrics::register(&self.naming, "default", self.permits.limit());
        ConcurrencyLimitLayer {
            shared: Arc::new(Shared {
                metrics,
                permits: Arc::new(self.permits),
                classifier: self.classifier,
                status: self.status,
                max_wait: self.max_wait,
                latency: self.latency,
            }),
        }
    }
}
