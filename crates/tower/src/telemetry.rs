//! The layers' metrics through the `metrics` facade (feature `metrics`; the crate docs list
//! them). Every handle is registered once, when a layer is built, and kept in the layer's
//! shared state: a request then costs an atomic add or two on handles it already holds (with
//! no recorder installed, a check of an empty handle). Labels are the names the user gives
//! (a limit name, extra labels such as a route template), never anything read from a
//! request. Without the feature every type here is empty and every call does nothing.

use crate::outcome::Outcome;
use limitcore::concurrency::AcquireError;

/// The series' names: the `limit` label (defaulting to the layer's own name) and extra
/// labels.
#[derive(Debug, Clone, Default)]
pub(crate) struct Naming {
    #[cfg(feature = "metrics")]
    name: Option<String>,
    #[cfg(feature = "metrics")]
    labels: Vec<(String, String)>,
}

/// Label keys the layers write themselves.
#[cfg(feature = "metrics")]
const RESERVED: [&str; 2] = ["limit", "outcome"];

#[cfg(feature = "metrics")]
impl Naming {
    /// The `limit` label's value.
    pub(crate) fn set_name(&mut self, name: String) {
        self.name = Some(name);
    }

    /// One more label on every series.
    ///
    /// # Panics
    ///
    /// If `key` is `limit` or `outcome` (the layers write those), or is already given.
    pub(crate) fn add_label(&mut self, key: String, value: String) {
        assert!(
            !RESERVED.contains(&key.as_str()),
            "the metrics label {key:?} is the layer's own"
        );
        assert!(
            self.labels.iter().all(|(k, _)| *k != key),
            "the metrics label {key:?} is given twice"
        );
        self.labels.push((key, value));
    }

    /// `limit` (the name, or `default_name`), then the extra labels.
    fn labels(&self, default_name: &str) -> Vec<metrics::Label> {
        let name = self.name.as_deref().unwrap_or(default_name).to_owned();
        let mut labels = vec![metrics::Label::new("limit", name)];
        labels.extend(
            self.labels
                .iter()
                .map(|(k, v)| metrics::Label::new(k.clone(), v.clone())),
        );
        labels
    }
}

/// `limitcore_requests_total`'s `outcome` values, in the order of [`RateMetrics`]' counters.
#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 7] = [
    "admitted",
    "limited",
    "delayed",
    "dry_run",
    "too_large",
    "missing_key",
    "error",
];

/// The rate-limit layer's handles.
pub(crate) struct RateMetrics {
    /// `limitcore_requests_total` by outcome, in the order of [`OUTCOMES`].
    #[cfg(feature = "metrics")]
    requests: [metrics::Counter; 7],
    /// `limitcore_wait_seconds`.
    #[cfg(feature = "metrics")]
    wait: metrics::Histogram,
}

impl RateMetrics {
    /// The handles of a layer named `default_name` unless `naming` names it, from the
    /// recorder in force now (the global one, or a local one in
    /// `metrics::with_local_recorder`).
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn register(naming: &Naming, default_name: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            use metrics::{Unit, describe_counter, describe_histogram};
            describe_counter!(
                "limitcore_requests_total",
                Unit::Count,
                "Requests the rate-limit layer decided, by limit and outcome."
            );
            describe_histogram!(
                "limitcore_wait_seconds",
                Unit::Seconds,
                "Delays the rate-limit layer granted (delay mode), in seconds."
            );
            let labels = naming.labels(default_name);
            let requests = OUTCOMES.map(|outcome| {
                let mut labels = labels.clone();
                labels.push(metrics::Label::new("outcome", outcome));
                metrics::counter!("limitcore_requests_total", labels)
            });
            let wait = metrics::histogram!("limitcore_wait_seconds", labels);
            RateMetrics { requests, wait }
        }
        #[cfg(not(feature = "metrics"))]
        RateMetrics {}
    }

    /// Counts one request decided as `outcome` (and its wait, if delayed).
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn record(&self, outcome: &Outcome) {
        #[cfg(feature = "metrics")]
        {
            let index = match outcome {
                Outcome::Passed => 0,
                Outcome::Rejected { .. } => 1,
                Outcome::Delayed { wait } => {
                    self.wait.record(wait.as_secs_f64());
                    2
                }
                Outcome::DryRunDelayed { .. } | Outcome::DryRunRejected { .. } => 3,
                Outcome::TooLarge { .. } => 4,
                Outcome::MissingKey => 5,
                Outcome::LimiterError { .. } => 6,
            };
            self.requests[index].increment(1);
        }
    }
}

/// The concurrency layer's handles (cloned into a queued request's future).
#[derive(Clone)]
pub(crate) struct ConcurrencyMetrics {
    #[cfg(feature = "metrics")]
    admitted: metrics::Counter,
    #[cfg(feature = "metrics")]
    shed: metrics::Counter,
    #[cfg(feature = "metrics")]
    in_flight: metrics::Gauge,
    #[cfg(feature = "metrics")]
    limit: metrics::Gauge,
}

impl ConcurrencyMetrics {
    /// The handles of a layer named `default_name` unless `naming` names it, its limit
    /// gauge set to `limit`.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn register(naming: &Naming, default_name: &str, limit: u32) -> Self {
        #[cfg(feature = "metrics")]
        {
            use metrics::{Unit, describe_counter, describe_gauge};
            describe_counter!(
                "limitcore_concurrency_requests_total",
                Unit::Count,
                "Requests the concurrency layer admitted or shed, by limit and outcome."
            );
            describe_gauge!(
                "limitcore_concurrency_in_flight",
                Unit::Count,
                "Requests holding a permit of the concurrency layer (until their body ends)."
            );
            describe_gauge!(
                "limitcore_concurrency_limit",
                Unit::Count,
                "The concurrency layer's limit, as of its latest grant or shed."
            );
            let labels = naming.labels(default_name);
            let with_outcome = |outcome: &'static str| {
                let mut labels = labels.clone();
                labels.push(metrics::Label::new("outcome", outcome));
                labels
            };
            let metrics = ConcurrencyMetrics {
                admitted: metrics::counter!(
                    "limitcore_concurrency_requests_total",
                    with_outcome("admitted")
                ),
                shed: metrics::counter!(
                    "limitcore_concurrency_requests_total",
                    with_outcome("shed")
                ),
                in_flight: metrics::gauge!("limitcore_concurrency_in_flight", labels.clone()),
                limit: metrics::gauge!("limitcore_concurrency_limit", labels),
            };
            metrics.limit.set(limit);
            metrics
        }
        #[cfg(not(feature = "metrics"))]
        ConcurrencyMetrics {}
    }

    /// Counts an admission granted under `limit`; the request is in flight until the guard
    /// drops.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn admitted(&self, limit: u32) -> InFlight {
        #[cfg(feature = "metrics")]
        {
            self.admitted.increment(1);
            self.limit.set(limit);
            self.in_flight.increment(1.0);
            InFlight {
                gauge: self.in_flight.clone(),
            }
        }
        #[cfg(not(feature = "metrics"))]
        InFlight {}
    }

    /// Counts a request shed for `error` (which tells the limit when it was full).
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn shed(&self, error: AcquireError) {
        #[cfg(feature = "metrics")]
        {
            self.shed.increment(1);
            if let AcquireError::Full { limit, .. } = error {
                self.limit.set(limit);
            }
        }
    }
}

/// One request counted in `limitcore_concurrency_in_flight`, until dropped.
pub(crate) struct InFlight {
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

#[cfg(feature = "metrics")]
impl Drop for InFlight {
    #[inline]
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}
