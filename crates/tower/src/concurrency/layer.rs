//! [`ConcurrencyLimitLayer`]: the layer, its constructors, and the state every clone and
//! every service it makes shares.

use super::builder::Builder;
use super::classify::{DefaultClassifier, Latency};
use super::service::ConcurrencyLimit;
use crate::telemetry::ConcurrencyMetrics;
use http::StatusCode;
use limitcore::concurrency::{Adaptive, AdaptiveRule, Feedback, Fixed, LimitError, Permits};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// The state every clone of the layer and of its services shares.
pub(crate) struct Shared<F: Feedback, C> {
    /// The limit (an `Arc` of its own: each permit holds a reference, so that it can live
    /// in a response body).
    pub(crate) permits: Arc<Permits<F>>,
    pub(crate) classifier: C,
    /// The status of a shed request.
    pub(crate) status: StatusCode,
    /// The longest a request waits in the queue (`None`: shed at once).
    pub(crate) max_wait: Option<Duration>,
    pub(crate) latency: Latency,
    /// The layer's metrics (feature `metrics`; empty without it).
    pub(crate) metrics: ConcurrencyMetrics,
}

/// A tower [`Layer`] that limits the requests in flight through a service, fixed or
/// adaptive, holding each request's permit until its response **body** ends.
///
/// See the [module's docs](crate::concurrency) for the behaviour (what is counted, shed
/// requests, classification, upgrades, errors). The limit is a
/// [`Permits`](limitcore::concurrency::Permits) of `limitcore`: a grant and a release are
/// one compare-and-swap each when nobody waits.
///
/// `F` is the limit's feedback ([`Fixed`], or [`Adaptive`] over a rule); `C` the
/// classifier ([`DefaultClassifier`]).
///
/// # Examples
///
/// ```
/// use axum::{routing::get, Router};
/// use limitcore::concurrency::Vegas;
/// use limitcore_tower::ConcurrencyLimitLayer;
///
/// // At most 64 requests in flight, their bodies included.
/// let fixed: Router = Router::new()
///     .route("/", get(|| async { "ok" }))
///     .layer(ConcurrencyLimitLayer::new(64)?);
/// // A limit Vegas finds from latency; shed requests wait up to 50 ms among at most 100.
/// let adaptive = ConcurrencyLimitLayer::adaptive(Vegas::new())?
///     .queue(100, std::time::Duration::from_millis(50))?
///     .build();
/// let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(adaptive.clone());
/// assert_eq!(adaptive.permits().limit(), 20); // Vegas' initial limit, shared by every clone
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
pub struct ConcurrencyLimitLayer<F: Feedback = Fixed, C = DefaultClassifier> {
    pub(crate) shared: Arc<Shared<F, C>>,
}

impl<F: Feedback, C> Clone for ConcurrencyLimitLayer<F, C> {
    fn clone(&self) -> Self {
        ConcurrencyLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<F: Feedback, C> fmt::Debug for ConcurrencyLimitLayer<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("ConcurrencyLimitLayer")
            .field("permits", &s.permits)
            .field("status", &s.status)
            .field("max_wait", &s.max_wait)
            .field("latency", &s.latency)
            .finish_non_exhaustive()
    }
}

impl ConcurrencyLimitLayer<Fixed, DefaultClassifier> {
    /// A fixed limit of `limit` requests in flight with every default: shed at once with
    /// 503, the [`DefaultClassifier`].
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above
    /// [`MAX_LIMIT`](limitcore::concurrency::MAX_LIMIT).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::new(8)?;
    /// assert_eq!((layer.permits().limit(), layer.permits().in_flight()), (8, 0));
    /// assert!(ConcurrencyLimitLayer::new(0).is_err());
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn new(limit: u32) -> Result<Self, LimitError> {
        Ok(ConcurrencyLimitLayer::fixed(limit)?.build())
    }

    /// A [`Builder`] for a fixed limit of `limit` requests in flight.
    ///
    /// # Errors
    ///
    /// As [`ConcurrencyLimitLayer::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use std::time::Duration;
    ///
    /// let layer = ConcurrencyLimitLayer::fixed(32)?
    ///     .queue(64, Duration::from_millis(100))?   // 64 may wait, 100 ms at most
    ///     .status(StatusCode::TOO_MANY_REQUESTS)
    ///     .build();
    /// assert_eq!(layer.permits().backlog(), Some(64));
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn fixed(limit: u32) -> Result<Builder<Fixed>, LimitError> {
        Ok(ConcurrencyLimitLayer::builder(Permits::new(limit)?))
    }
}

impl<R: AdaptiveRule> ConcurrencyLimitLayer<Adaptive<R>, DefaultClassifier> {
    /// A [`Builder`] for a limit `rule` sets from the outcomes of the requests
    /// ([`Permits::adaptive`]: timed on the default clock, from the rule's initial limit).
    ///
    /// # Errors
    ///
    /// As [`Permits::adaptive`]: the rule's settings do not fit together.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::Aimd;
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::adaptive(Aimd::new().with_limits(4, 256)?.with_initial(16)?)?.build();
    /// assert_eq!(layer.permits().limit(), 16);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn adaptive(rule: R) -> Result<Builder<Adaptive<R>>, LimitError> {
        Ok(ConcurrencyLimitLayer::builder(Permits::adaptive(rule)?))
    }
}

impl<F: Feedback> ConcurrencyLimitLayer<F, DefaultClassifier> {
    /// A [`Builder`] over `permits` as they are (their limit, feedback, order and backlog;
    /// an adaptive limit on a clock of your choice, say).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::ManualClock;
    /// use limitcore::concurrency::{Gradient2, Order, Permits};
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use std::time::Duration;
    ///
    /// let permits = Permits::adaptive_with_clock(Gradient2::new(), ManualClock::new())?
    ///     .with_order(Order::Lifo);
    /// let layer = ConcurrencyLimitLayer::builder(permits)
    ///     .queue(32, Duration::from_millis(20))?
    ///     .build();
    /// assert_eq!(layer.permits().order(), Order::Lifo);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn builder(permits: Permits<F>) -> Builder<F> {
        Builder::new(permits)
    }
}

impl<F: Feedback, C> ConcurrencyLimitLayer<F, C> {
    /// The limit every clone and service of this layer shares: read its limit and
    /// in-flight count, [`reconfigure`](Permits::reconfigure) a fixed one, or take permits for work
    /// of your own under the same limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// let layer = ConcurrencyLimitLayer::new(8)?;
    /// let clone = layer.clone();
    /// clone.permits().reconfigure(4)?;
    /// assert_eq!(layer.permits().limit(), 4);     // one limit
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn permits(&self) -> &Arc<Permits<F>> {
        &self.shared.permits
    }

    /// The classifier.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use limitcore_tower::concurrency::DefaultClassifier;
    ///
    /// assert_eq!(*ConcurrencyLimitLayer::new(8)?.classifier(), DefaultClassifier);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn classifier(&self) -> &C {
        &self.shared.classifier
    }

    /// The status of a shed request.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    ///
    /// assert_eq!(ConcurrencyLimitLayer::new(8)?.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn status(&self) -> StatusCode {
        self.shared.status
    }

    /// The longest a request waits for a permit in the queue (`None`: shed at once).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use std::time::Duration;
    ///
    /// assert_eq!(ConcurrencyLimitLayer::new(8)?.max_wait(), None);
    /// let queued = ConcurrencyLimitLayer::fixed(8)?.queue(16, Duration::from_millis(5))?.build();
    /// assert_eq!(queued.max_wait(), Some(Duration::from_millis(5)));
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn max_wait(&self) -> Option<Duration> {
        self.shared.max_wait
    }

    /// Which span a success's latency covers.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::ConcurrencyLimitLayer;
    /// use limitcore_tower::concurrency::Latency;
    ///
    /// assert_eq!(ConcurrencyLimitLayer::new(8)?.latency(), Latency::BodyEnd);
    /// # Ok::<(), limitcore::concurrency::LimitError>(())
    /// ```
    pub fn latency(&self) -> Latency {
        self.shared.latency
    }
}

impl<S, F: Feedback, C> Layer<S> for ConcurrencyLimitLayer<F, C> {
    type Service = ConcurrencyLimit<S, F, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit::from_shared(inner, Arc::clone(&self.shared))
    }
}
