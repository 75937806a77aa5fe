//! [`Builder`](crate::Builder): the configuration of a [`RateLimitLayer`](crate::RateLimitLayer),
//! and the layer's constructors (each makes a builder, or builds one with the defaults).

use crate::headers::{Fields, InvalidPolicyName, RateLimitHeaders, quote_policy};
use crate::key::{GlobalKey, KeyExtractor, MissingKey, PeerIp, RequestHead};
use crate::layer::{DEFAULT_MAX_KEYS, RateLimitLayer};
use crate::mode::{Local, Metered, OnLimiterError, Remote};
use crate::policy::{CostFn, DelayMode, Shared, reserve};
use crate::response_cost::ResponseCost;
use crate::telemetry::{Naming, RateMetrics};
use http::StatusCode;
use limitcore::rules::GcraRule;
use limitcore::{
    AsyncKeyedRateLimiter, Gcra, Global, Keyed, KeyedRateLimiter, KeyedRefund, KeyedReserve, Quota,
    QuotaError,
};
use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Configures a [`RateLimitLayer`](crate::RateLimitLayer); made by [`RateLimitLayer::builder`](crate::RateLimitLayer::builder) and the
/// convenience constructors, or by [`RateLimitLayer::remote`](crate::RateLimitLayer::remote) for a limiter whose
/// decisions are awaited (`M` = [`Remote`]: every setting but [`Builder::delay`], plus
/// [`Builder::on_limiter_error`]); [`Builder::response_cost`] turns a local one into a
/// layer whose requests cost what their responses say (`M` = [`Metered`]: every setting
/// but [`Builder::delay`]).
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use limitcore::{Keyed, Quota};
/// use limitcore_tower::{HeaderKey, MissingKey, RateLimitHeaders, RateLimitLayer};
///
/// let per_api_key: Keyed<http::HeaderValue> = Keyed::new(Quota::per_minute(600)?)?;
/// let layer = RateLimitLayer::builder(per_api_key, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
///     .status(StatusCode::SERVICE_UNAVAILABLE)
///     .headers(RateLimitHeaders::Always)
///     .problem_details(true)
///     .policy_name("per-key")
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder<X: KeyExtractor, L, M = Local> {
    pub(crate) limiter: L,
    pub(crate) extractor: X,
    pub(crate) missing: Option<MissingKey<X::Key>>,
    pub(crate) delay: Option<DelayMode<L, X::Key>>,
    pub(crate) cost: Option<Box<CostFn>>,
    pub(crate) response_cost: Option<ResponseCost>,
    pub(crate) dry_run: bool,
    pub(crate) status: StatusCode,
    pub(crate) too_large: StatusCode,
    pub(crate) headers: RateLimitHeaders,
    pub(crate) legacy: bool,
    pub(crate) problem: bool,
    pub(crate) policy: String,
    pub(crate) outcome: bool,
    pub(crate) on_error: OnLimiterError,
    pub(crate) naming: Naming,
    pub(crate) mode: PhantomData<fn() -> M>,
}

impl<X: KeyExtractor, L, M> fmt::Debug for Builder<X, L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("delay", &self.delay.as_ref().map(|d| d.max_wait))
            .field("dry_run", &self.dry_run)
            .field("cost", &self.cost.is_some())
            .field("response_cost", &self.response_cost)
            .field("status", &self.status)
            .field("too_large", &self.too_large)
            .field("headers", &self.headers)
            .field("legacy", &self.legacy)
            .field("problem", &self.problem)
            .field("policy", &self.policy)
            .field("outcome", &self.outcome)
            .field("on_error", &self.on_error)
            .field("metrics", &self.naming)
            .finish_non_exhaustive()
    }
}

impl<X: KeyExtractor, L: KeyedReserve<X::Key>> Builder<X, L, Local> {
    /// Delay mode: a request the limiter refuses is given the next slot (a reservation,
    /// `KeyedReserve::reserve_n_at`) if it is at most `max_wait` away, and the inner service
    /// is called when the slot comes (an async sleep on tokio's timer: the task yields, no
    /// thread is held); a request whose slot is further away is refused, with `Retry-After`
    /// the wait after which it would not be. `Duration::ZERO` is reject mode.
    ///
    /// Needs a limiter that reserves: `Keyed` with GCRA or the leaky bucket, `Global` over
    /// one of them. Not for a [`Remote`] layer: a reservation is a second, conditional
    /// operation on the key's state, which an awaited limiter (one round trip per decision)
    /// does not offer.
    ///
    /// # Panics
    ///
    /// A delayed request is held by `tokio::time::sleep`: the service's `call` panics for it
    /// outside a tokio runtime with the time driver enabled (as `sleep` does); hyper and axum
    /// servers run on one.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, Quota};
    /// use limitcore_tower::{GlobalKey, Outcome, RateLimitLayer};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, Service, ServiceExt};
    ///
    /// // 20/s, one at a time: a slot every 50 ms; wait at most 120 ms (a frozen clock).
    /// let limiter = Global::new(Gcra::with_clock("20/s burst 1".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(limiter, GlobalKey)
    ///     .delay(Duration::from_millis(120))
    ///     .build()?;
    /// let mut svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let mut pending = Vec::new();
    /// for _ in 0..4 {
    ///     pending.push(svc.ready().await?.call(Request::new(()))); // decided in `call`
    /// }
    /// let mut outcomes = Vec::new();
    /// for response in pending {
    ///     outcomes.push(*response.await?.extensions().get::<Outcome>().unwrap());
    /// }
    /// let ms = Duration::from_millis;
    /// assert_eq!(outcomes, [
    ///     Outcome::Passed,
    ///     Outcome::Delayed { wait: ms(50) },
    ///     Outcome::Delayed { wait: ms(100) },
    ///     Outcome::Rejected { retry_after: Some(ms(30)) }, // 150 ms away: 30 ms too far
    /// ]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delay(mut self, max_wait: Duration) -> Self {
        self.delay = (!max_wait.is_zero()).then_some(DelayMode {
            max_wait,
            reserve: reserve::<L, X::Key>,
        });
        self
    }
}

impl<X: KeyExtractor, L: KeyedRefund<X::Key>> Builder<X, L, Local> {
    /// Requests cost what their **responses** say: `cost` read from each response (a header,
    /// the body's bytes, a closure over its head: [`ResponseCost`]) and recorded once, when
    /// its body ends or is dropped. The layer becomes [`Metered`] (its responses' body is
    /// [`MeteredBody`](crate::MeteredBody)); see [`Metered`] for the whole behaviour.
    ///
    /// - A request's own cost ([`Builder::cost`]) becomes an **estimate**, 0 by default: a
    ///   request is then admitted while its key is not in debt, and charged its response's
    ///   cost at the end (`KeyedRefund::charge_at`). A non-zero estimate is reserved
    ///   (`KeyedRefund::acquire_refundable_at`) and **settled** to the response's cost
    ///   (`KeyedRefund::settle`): the unused part given back, the excess charged as debt.
    /// - The response's `RateLimit` fields are the state before its own cost is charged
    ///   (the head goes out first); the next request sees it.
    ///
    /// Needs a local limiter that refunds and charges ([`KeyedRefund`]: `Keyed`, `Global`,
    /// `KeyedSketch`, `All`, `Counted` of any of them). Not for a [`Remote`] layer (no such
    /// method: an awaited limiter has no charge after the decision), nor with
    /// [`Builder::delay`] (a `Metered` builder has none).
    ///
    /// # Panics
    ///
    /// If delay mode was set on this builder ([`Builder::delay`] with a non-zero wait): a
    /// delayed request's slot is a reservation with no receipt to settle, so the two do
    /// not combine, and a layer silently without one of them would be a worse surprise
    /// than a panic at configuration.
    ///
    /// # Examples
    ///
    /// Reserve-then-settle: each request reserves its declared estimate (`x-estimate`, 100 if
    /// absent), and is settled to the tokens its answer used:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{HeaderName, Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, KeyedRateLimiter};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let tokens = Global::new(Gcra::with_clock("1000/min".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(tokens, GlobalKey)
    ///     .response_cost(ResponseCost::header(HeaderName::from_static("x-tokens")))
    ///     .cost(|head| {
    ///         head.headers().get("x-estimate")
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(100)
    ///     })
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, http::Error>(Response::builder().header("x-tokens", "30").body(Full::from("..."))?)
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// let remaining = || layer.limiter().snapshot_at(&(), 0).remaining;
    /// assert_eq!(remaining(), 900);  // 100 reserved while the body is out
    /// response.into_body().collect().await?;
    /// assert_eq!(remaining(), 970);  // settled to 30: 70 given back
    /// # Ok(())
    /// # }
    /// ```
    pub fn response_cost(self, cost: ResponseCost) -> Builder<X, L, Metered> {
        assert!(
            self.delay.is_none(),
            "a response cost does not combine with delay mode (Builder::delay)"
        );
        Builder {
            limiter: self.limiter,
            extractor: self.extractor,
            missing: self.missing,
            delay: None,
            cost: self.cost,
            response_cost: Some(cost),
            dry_run: self.dry_run,
            status: self.status,
            too_large: self.too_large,
            headers: self.headers,
            legacy: self.legacy,
            problem: self.problem,
            policy: self.policy,
            outcome: self.outcome,
            on_error: self.on_error,
            naming: self.naming,
            mode: PhantomData,
        }
    }
}

impl<X: KeyExtractor, L> Builder<X, L, Remote> {
    /// What a [`Remote`] layer answers when its limiter fails to decide (its future returns
    /// `Err`: the server is down, the connection broke, a timeout of the limiter's own):
    /// [`OnLimiterError::Admit`] (the default: the request is passed, fail-open) or
    /// [`OnLimiterError::Refuse`] with a status (fail-closed, no `Retry-After`: nothing
    /// says when the limiter will be back). Either way the response carries
    /// [`Outcome::LimiterError`](crate::Outcome::LimiterError) and no `RateLimit` fields (no
    /// decision, no state). A dry run passes the request whatever the policy.
    ///
    /// # Examples
    ///
    /// See [`RateLimitLayer::remote`](crate::RateLimitLayer::remote).
    pub fn on_limiter_error(mut self, policy: OnLimiterError) -> Self {
        self.on_error = policy;
        self
    }
}

impl<X: KeyExtractor, L, M> Builder<X, L, M> {
    /// What to do with requests that have no usable key (default: the extractor's
    /// [`shared_key`](KeyExtractor::shared_key) bucket if it has one, else a refusal with
    /// 400 Bad Request).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore::{Keyed, Quota};
    /// use limitcore_tower::{MissingKey, PeerIp, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let per_ip: Keyed<std::net::IpAddr> = Keyed::new(Quota::per_second(5)?)?;
    /// let layer = RateLimitLayer::builder(per_ip, PeerIp::new())
    ///     .on_missing_key(MissingKey::Reject(StatusCode::FORBIDDEN))
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// // No peer address in the request's extensions: no key.
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(response.status(), StatusCode::FORBIDDEN);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_missing_key(mut self, answer: MissingKey<X::Key>) -> Self {
        self.missing = Some(answer);
        self
    }

    /// Dry run: decisions are made and charged as usual (admissions take their permits,
    /// delays their slots) and reported ([`Outcome::DryRunRejected`](crate::Outcome::DryRunRejected),
    /// [`Outcome::DryRunDelayed`](crate::Outcome::DryRunDelayed), the `RateLimit` fields if [`RateLimitHeaders::Always`]),
    /// but every request is passed at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("1/min".parse()?)?.dry_run(true).build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let _ = svc.clone().oneshot(Request::new(())).await?;
    /// let second = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(second.status(), StatusCode::OK);
    /// assert!(matches!(second.extensions().get::<Outcome>(), Some(Outcome::DryRunRejected { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dry_run(mut self, on: bool) -> Self {
        self.dry_run = on;
        self
    }

    /// The status of refusals (default 429 Too Many Requests; nginx's default is 503).
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Each request's cost in permits, read from its head (default: 1): for quotas in units
    /// other than requests (an API's query cost, a declared `Content-Length`). A cost of 0
    /// passes and charges nothing (unless the key is in debt after a charge: then it is
    /// refused until the debt is paid back). With a response cost
    /// ([`Builder::response_cost`]) this is the request's *estimate*, reserved and then
    /// settled to what the response cost (default: 0, nothing reserved). A cost above what the key's limit admits at once (its
    /// capacity, the quota's burst) can never be admitted: it is answered at once with
    /// [`Builder::too_large_status`](crate::Builder::too_large_status) (413 by default), no `Retry-After`, and
    /// [`Outcome::TooLarge`](crate::Outcome::TooLarge); in a dry run it passes as [`Outcome::DryRunRejected`](crate::Outcome::DryRunRejected) with no
    /// wait.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// // 100 units a second; a request costs its `x-cost` header (1 if absent).
    /// let layer = RateLimitLayer::global("100/s".parse()?)?
    ///     .cost(|head| {
    ///         head.headers().get("x-cost")
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(1)
    ///     })
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let heavy = Request::builder().header("x-cost", "500").body(())?;
    /// let response = svc.oneshot(heavy).await?;
    /// assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    /// assert!(response.headers().get("retry-after").is_none());
    /// assert_eq!(
    ///     response.extensions().get::<Outcome>(),
    ///     Some(&Outcome::TooLarge { cost: 500, capacity: 100 })
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn cost(mut self, cost: impl Fn(&RequestHead<'_>) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// The status of a request whose cost is above the limit's capacity ([`Builder::cost`](crate::Builder::cost),
    /// [`Outcome::TooLarge`](crate::Outcome::TooLarge); default 413 Content Too Large).
    pub fn too_large_status(mut self, status: StatusCode) -> Self {
        self.too_large = status;
        self
    }

    /// When to write `RateLimit-Policy` and `RateLimit` (default: on refusals).
    pub fn headers(mut self, when: RateLimitHeaders) -> Self {
        self.headers = when;
        self
    }

    /// Also write `X-RateLimit-Limit` (the quota's count), `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds, rounded up, until the limit is full), wherever the
    /// `RateLimit` fields go (default: off).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::{RateLimitHeaders, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("100/min burst 10".parse()?)?
    ///     .headers(RateLimitHeaders::Always)
    ///     .legacy_headers(true)
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// let h = response.headers();
    /// assert_eq!(h["ratelimit-policy"], "\"default\";q=100;w=60");
    /// assert_eq!(h["ratelimit"], "\"default\";r=9;t=1"); // full again in 0.6 s: 1 s
    /// assert_eq!(h["x-ratelimit-limit"], "100");
    /// assert_eq!(h["x-ratelimit-remaining"], "9");
    /// assert_eq!(h["x-ratelimit-reset"], "1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn legacy_headers(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

    /// Refusals get an `application/problem+json` body (RFC 9457) of the draft's
    /// `quota-exceeded` problem type, naming the policy in `violated-policies` (default: a
    /// one-line `text/plain` body).
    pub fn problem_details(mut self, on: bool) -> Self {
        self.problem = on;
        self
    }

    /// Whether responses carry the [`Outcome`](crate::Outcome) extension (default `true`). Turned off, the
    /// layer writes none, on any response: a passed response then costs no allocation of
    /// the response's extension map (measured in BENCHMARKS.md, "HTTP layer"), for services
    /// that do not log or count outcomes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("1/min".parse()?)?.outcome_extension(false).build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let passed = svc.clone().oneshot(Request::new(())).await?;
    /// assert!(passed.extensions().get::<Outcome>().is_none());
    /// let refused = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    /// assert!(refused.extensions().get::<Outcome>().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn outcome_extension(mut self, on: bool) -> Self {
        self.outcome = on;
        self
    }

    /// The policy name in the `RateLimit` fields and the problem body (default
    /// `"default"`).
    pub fn policy_name(mut self, name: impl Into<String>) -> Self {
        self.policy = name.into();
        self
    }

    /// The `limit` label of the layer's metrics (feature `metrics`; default: the policy
    /// name, [`Builder::policy_name`](crate::Builder::policy_name)). Any string: it is a label
    /// value, written as the recorder escapes it. Give each layer of a process its own name,
    /// or its series add up with another's.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::RateLimitLayer;
    /// use metrics_exporter_prometheus::PrometheusBuilder;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let recorder = PrometheusBuilder::new().build_recorder();
    /// let handle = recorder.handle();
    /// // The handles are registered at `build`, with the recorder in force then.
    /// let builder = RateLimitLayer::global("1/min".parse()?)?
    ///     .metrics_name("search")
    ///     .metrics_label("route", "/search/{index}");
    /// let layer = metrics::with_local_recorder(&recorder, || builder.build())?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// svc.clone().oneshot(Request::new(())).await?;
    /// svc.oneshot(Request::new(())).await?;
    /// let page = handle.render();
    /// assert!(page.contains(r#"limitcore_requests_total{limit="search",route="/search/{index}",outcome="admitted"} 1"#));
    /// assert!(page.contains(r#"limitcore_requests_total{limit="search",route="/search/{index}",outcome="limited"} 1"#));
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
    /// route template, a tenant tier — a value **you** give, fixed for the layer. (A label
    /// per client would be one series per client: the layer never writes one.)
    ///
    /// # Panics
    ///
    /// If `key` is `limit` or `outcome` (the layer writes those) or was given before.
    ///
    /// # Examples
    ///
    /// See [`Builder::metrics_name`](crate::Builder::metrics_name).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.naming.add_label(key.into(), value.into());
        self
    }

    /// The layer. With the feature `metrics`, its metrics' handles are registered now, with
    /// the recorder in force (install yours first; see the crate docs, "Metrics").
    ///
    /// # Errors
    ///
    /// [`InvalidPolicyName`] if the policy name is empty or not printable ASCII.
    pub fn build(self) -> Result<RateLimitLayer<X, L, M>, InvalidPolicyName> {
        let (policy_sf, policy_json) = quote_policy(&self.policy)?;
        let state_on_pass = self.headers == RateLimitHeaders::Always;
        let state_on_refusal = self.headers != RateLimitHeaders::Off && !self.dry_run;
        let missing = match self.missing {
            Some(answer) => answer,
            None => match self.extractor.shared_key() {
                Some(key) => MissingKey::Shared(key),
                None => MissingKey::Reject(StatusCode::BAD_REQUEST),
            },
        };
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                limiter: self.limiter,
                extractor: self.extractor,
                missing,
                delay: self.delay,
                cost: self.cost,
                response_cost: self.response_cost,
                dry_run: self.dry_run,
                status: self.status,
                too_large: self.too_large,
                fields: Fields {
                    policy_sf,
                    policy_json,
                    legacy: self.legacy,
                    problem: self.problem,
                },
                state_on_pass,
                state_on_refusal,
                outcome: self.outcome,
                on_error: self.on_error,
                metrics: RateMetrics::register(&self.naming, &self.policy),
            }),
            mode: PhantomData,
        })
    }
}

impl<X: KeyExtractor, L: KeyedRateLimiter<X::Key>> RateLimitLayer<X, L> {
    /// The layer with every default: reject mode, status 429, `RateLimit` fields on
    /// refusals, the extractor's own answer for requests with no key.
    ///
    /// # Panics
    ///
    /// Never (the default policy name is valid).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Gcra, Global, Quota};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::new(Global::new(Gcra::new(Quota::per_second(100)?)?), GlobalKey);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn new(limiter: L, extractor: X) -> Self {
        // The default policy name is valid.
        match RateLimitLayer::builder(limiter, extractor).build() {
            Ok(layer) => layer,
            Err(_) => unreachable!("the default policy name is valid"),
        }
    }

    /// A [`Builder`](crate::Builder) for `limiter` keyed by `extractor`, with the defaults of
    /// [`RateLimitLayer::new`](crate::RateLimitLayer::new).
    pub fn builder(limiter: L, extractor: X) -> Builder<X, L> {
        Builder::defaults(limiter, extractor)
    }
}

impl<X: KeyExtractor, L: AsyncKeyedRateLimiter<X::Key>> RateLimitLayer<X, L, Remote> {
    /// A [`Builder`](crate::Builder) for a limiter whose decisions are **awaited**: any
    /// [`AsyncKeyedRateLimiter<X::Key>`](AsyncKeyedRateLimiter) (a limit kept on a server,
    /// one round trip per decision: `limitcore-redis`'s `RedisGcra`, `RedisSlidingLog`,
    /// `RedisAll`; or one of your own), keyed by `extractor`, with the defaults of
    /// [`RateLimitLayer::new`](crate::RateLimitLayer::new) and
    /// [`OnLimiterError::Admit`]. The same headers, dry run, cost, statuses and
    /// [`Outcome`](crate::Outcome)s as the synchronous layer; no delay mode; a failed
    /// decision answered by [`Builder::on_limiter_error`](crate::Builder::on_limiter_error).
    /// See [`Remote`] for how the request waits.
    ///
    /// A synchronous limiter is an `AsyncKeyedRateLimiter` too (its future is ready at once)
    /// and works here, but [`RateLimitLayer::builder`] decides it without the boxed future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response, StatusCode};
    /// use limitcore::{AsyncKeyedRateLimiter, Decision, Keyed, KeyedRateLimiter, Quota};
    /// use limitcore_tower::{GlobalKey, OnLimiterError, Outcome, RateLimitLayer};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// /// A limit that answers after a (simulated) round trip, or fails while `down`.
    /// struct Far { limit: Keyed<()>, down: AtomicBool }
    ///
    /// impl AsyncKeyedRateLimiter<()> for Far {
    ///     type Error = &'static str;
    ///     async fn decide_async(&self, key: &(), n: u32) -> Result<Decision, &'static str> {
    ///         tokio::time::sleep(std::time::Duration::from_millis(1)).await; // the round trip
    ///         if self.down.load(Ordering::Relaxed) { return Err("server down"); }
    ///         Ok(self.limit.decide_n(key, n))
    ///     }
    ///     fn quota_for_key(&self, key: &()) -> Quota { self.limit.quota_for(key) }
    /// }
    ///
    /// let far = Far { limit: Keyed::new(Quota::per_minute(1)?)?, down: AtomicBool::new(false) };
    /// let layer = RateLimitLayer::remote(far, GlobalKey)
    ///     .on_limiter_error(OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE))
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// assert_eq!(svc.clone().oneshot(Request::new(())).await?.status(), StatusCode::OK);
    /// let second = svc.clone().oneshot(Request::new(())).await?;
    /// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(second.headers()["retry-after"], "60");
    ///
    /// layer.limiter().down.store(true, Ordering::Relaxed);
    /// let failed = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// assert!(failed.headers().get("retry-after").is_none());
    /// assert_eq!(failed.extensions().get::<Outcome>(), Some(&Outcome::LimiterError { admitted: false }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn remote(limiter: L, extractor: X) -> Builder<X, L, Remote> {
        Builder::defaults(limiter, extractor)
    }
}

impl<X: KeyExtractor, L, M> Builder<X, L, M> {
    /// The defaults of every constructor.
    fn defaults(limiter: L, extractor: X) -> Self {
        Builder {
            limiter,
            extractor,
            missing: None,
            delay: None,
            cost: None,
            response_cost: None,
            dry_run: false,
            status: StatusCode::TOO_MANY_REQUESTS,
            too_large: StatusCode::PAYLOAD_TOO_LARGE,
            headers: RateLimitHeaders::OnRefusal,
            legacy: false,
            problem: false,
            policy: "default".to_owned(),
            outcome: true,
            on_error: OnLimiterError::Admit,
            naming: Naming::default(),
            mode: PhantomData,
        }
    }
}

impl RateLimitLayer<PeerIp, Keyed<IpAddr>> {
    /// A builder limiting each client IP address (the peer's, [`PeerIp`]: IPv6 by /64) to
    /// `quota` with GCRA, keeping at most [`DEFAULT_MAX_KEYS`] keys.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of GCRA for `quota`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::per_ip("100/min burst 20".parse()?)?.legacy_headers(true).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_ip(quota: Quota) -> Result<Builder<PeerIp, Keyed<IpAddr>>, QuotaError> {
        let limiter = Keyed::<IpAddr, GcraRule>::new(quota)?.with_max_keys(DEFAULT_MAX_KEYS);
        Ok(RateLimitLayer::builder(limiter, PeerIp::new()))
    }
}

impl RateLimitLayer<GlobalKey, Global<Gcra>> {
    /// A builder limiting all requests together to `quota` with GCRA.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of GCRA for `quota`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::global("1000/s".parse()?)?.build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn global(quota: Quota) -> Result<Builder<GlobalKey, Global<Gcra>>, QuotaError> {
        Ok(RateLimitLayer::builder(
            Global::new(Gcra::new(quota)?),
            GlobalKey,
        ))
    }
}
