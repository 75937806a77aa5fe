//! The example server's application (`main.rs` runs it; `tests.rs`, the example's tests,
//! serves it on 127.0.0.1:0): the command line, every contender of the load
//! comparison, and the `/metrics` page.
//!
//! `--limiter none` serves without a layer and `governor` with tower_governor on the same
//! quota (peer or global key, reject mode): the load comparison in
//! `crates/tower/bench/load.sh`. `--limiter concurrency` serves behind limitcore-tower's
//! `ConcurrencyLimitLayer` (a fixed limit of `--concurrency` requests in flight, shedding
//! with 503, or queueing up to `--queue-ms` with `--queue-ms`) instead of a rate limit, and
//! `tower-concurrency` behind tower's `ConcurrencyLimit` on the same limit (its requests
//! wait for a permit in `poll_ready`); the quota is not used then.
//!
//! With a Prometheus handle (`run`'s `page`; the example passes one when built with the
//! feature `metrics`), `GET /metrics` answers the recorder's page in Prometheus' text format.
//! The page is served **outside** every layer: it is not rate-limited, not counted, and not
//! held by the concurrency limit (a scrape must work while clients are refused). Every other
//! request goes through the contender as without the page.
#![allow(dead_code)]

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Parser;
use limitcore::rules::GcraRule;
use limitcore::{Algorithm, Keyed, KeyedRateLimiter, Quota};
use limitcore_tower::{
    Builder, ForwardHeader, ForwardedIp, GlobalKey, HeaderKey, KeyExtractor, PeerIp,
    RateLimitHeaders, RateLimitLayer, Trust,
};
use metrics_exporter_prometheus::PrometheusHandle;
use pin_project_lite::pin_project;
use std::convert::Infallible;
use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service};

/// The command line.
#[derive(Parser, Debug)]
#[command(about = "GET / answers \"ok\" behind a rate-limit layer")]
pub(crate) struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) addr: SocketAddr,
    /// The quota per key, e.g. "5/s", "100/min burst 20".
    #[arg(long, default_value = "5/s")]
    pub(crate) quota: Quota,
    /// global | peer | xff:<n> (n trusted proxies) | header:<name>.
    #[arg(long, default_value = "peer")]
    pub(crate) key: String,
    /// reject | delay | dry-run.
    #[arg(long, default_value = "reject")]
    pub(crate) mode: String,
    /// Delay mode: the longest wait for a slot, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub(crate) max_wait_ms: u64,
    /// The algorithm per key (reject and dry-run modes; delay mode is GCRA).
    #[arg(long, default_value = "gcra")]
    pub(crate) algorithm: Algorithm,
    /// RateLimit-Policy and RateLimit fields on every response (not only refusals).
    #[arg(long)]
    pub(crate) headers: bool,
    /// The most keys with a state of their own.
    #[arg(long, default_value_t = limitcore_tower::DEFAULT_MAX_KEYS)]
    pub(crate) max_keys: usize,
    /// No `Outcome` extension on responses (`Builder::outcome_extension(false)`).
    #[arg(long)]
    pub(crate) no_outcome: bool,
    /// limitcore | none | governor | concurrency | tower-concurrency.
    #[arg(long, default_value = "limitcore")]
    pub(crate) limiter: String,
    /// concurrency, tower-concurrency: the most requests in flight.
    #[arg(long, default_value_t = 1024)]
    pub(crate) concurrency: u32,
    /// concurrency: wait up to this long (ms) for a permit, among as many waiters as the
    /// limit (0: shed at once with 503).
    #[arg(long, default_value_t = 0)]
    pub(crate) queue_ms: u64,
    /// The rate limit's policy name (the `RateLimit` fields' and the metrics' `limit` label).
    #[arg(long, default_value = "default")]
    pub(crate) policy_name: String,
}

impl Args {
    /// What `main` prints once it listens.
    pub(crate) fn describe(&self) -> String {
        format!(
            "limiter {}, key {}, mode {}, quota {}",
            self.limiter, self.key, self.mode, self.quota
        )
    }
}

/// What `run` may fail with.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// Serves `app` on `listener` until the process ends, the peer address of each connection
/// in the requests' extensions (axum's `ConnectInfo`, and without the crate's `axum`
/// feature also as the plain `SocketAddr` that `PeerIp` reads then); `GET /metrics` answered
/// from `page` ahead of `app` when there is one.
///
/// A rate-limit layer wraps the whole `Router` here (`ServiceBuilder`, outside the
/// routing), not each route (`Router::layer`): every request is limited, an unknown path
/// too, and a request costs no per-route clone of the layer. Every contender of the load
/// comparison is wired the same way.
async fn serve<S>(
    listener: tokio::net::TcpListener,
    app: S,
    page: Option<PrometheusHandle>,
) -> std::io::Result<()>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    match page {
        Some(handle) => {
            let app = MetricsPage { inner: app, handle };
            axum::serve(
                listener,
                axum::ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app),
            )
            .await
        }
        None => {
            axum::serve(
                listener,
                axum::ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app),
            )
            .await
        }
    }
}

/// `GET /metrics` answered with the recorder's page, ahead of `inner` (which every other
/// request goes to): a path comparison per request, and no layer sees the scrape.
#[derive(Clone)]
struct MetricsPage<S> {
    inner: S,
    handle: PrometheusHandle,
}

pin_project! {
    /// The page, or the inner service's response.
    #[project = PageProj]
    enum PageFuture<F> {
        Page { response: Option<Response> },
        Inner { #[pin] fut: F },
    }
}

impl<S> Service<Request> for MetricsPage<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = PageFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if req.uri().path() == "/metrics" && req.method() == http::Method::GET {
            let page = (
                [(
                    http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                self.handle.render(),
            );
            return PageFuture::Page {
                response: Some(page.into_response()),
            };
        }
        PageFuture::Inner {
            fut: self.inner.call(req),
        }
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for PageFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            PageProj::Page { response } => {
                Poll::Ready(Ok(response.take().expect("polled after completion")))
            }
            PageProj::Inner { fut } => fut.poll(cx),
        }
    }
}

/// `router` behind a layer of `limiter` keyed by `extractor`, configured by `args`, served
/// on `listener`.
async fn apply<X, L>(
    listener: tokio::net::TcpListener,
    router: Router,
    builder: Builder<X, L>,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error>
where
    X: KeyExtractor,
    L: KeyedRateLimiter<X::Key> + 'static,
{
    let headers = if args.headers {
        RateLimitHeaders::Always
    } else {
        RateLimitHeaders::OnRefusal
    };
    let layer = builder
        .headers(headers)
        .dry_run(args.mode == "dry-run")
        .outcome_extension(!args.no_outcome)
        .policy_name(args.policy_name.as_str())
        .build()?;
    Ok(serve(listener, layer.layer(router), page).await?)
}

/// The layer for a key type: GCRA per key (delay mode: with reservations), or another
/// algorithm through `Algorithm::keyed`.
async fn limited<X>(
    listener: tokio::net::TcpListener,
    router: Router,
    extractor: X,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error>
where
    X: KeyExtractor,
    X::Key: Hash + Eq + Clone,
{
    let gcra = || -> Result<Keyed<X::Key, GcraRule>, Error> {
        Ok(Keyed::new(args.quota)?.with_max_keys(args.max_keys))
    };
    match args.mode.as_str() {
        "delay" => {
            if args.algorithm != Algorithm::Gcra {
                return Err("delay mode runs GCRA".into());
            }
            let max_wait = Duration::from_millis(args.max_wait_ms);
            let builder = RateLimitLayer::builder(gcra()?, extractor).delay(max_wait);
            apply(listener, router, builder, args, page).await
        }
        "reject" | "dry-run" if args.algorithm == Algorithm::Gcra => {
            let builder = RateLimitLayer::builder(gcra()?, extractor);
            apply(listener, router, builder, args, page).await
        }
        "reject" | "dry-run" => {
            let clock = limitcore::DefaultClock::new();
            let limiter =
                args.algorithm
                    .keyed::<X::Key, _>(args.quota, clock, Some(args.max_keys))?;
            let builder = RateLimitLayer::builder(limiter, extractor);
            apply(listener, router, builder, args, page).await
        }
        other => Err(format!("unknown mode {other:?}: reject, delay or dry-run").into()),
    }
}

async fn with_limitcore(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error> {
    match args.key.split_once(':') {
        None if args.key == "global" => limited(listener, router, GlobalKey, args, page).await,
        None if args.key == "peer" => limited(listener, router, PeerIp::new(), args, page).await,
        Some(("xff", n)) => {
            let hops: usize = n.parse().map_err(|_| format!("xff:<n>: bad count {n:?}"))?;
            let extractor = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(hops));
            limited(listener, router, extractor, args, page).await
        }
        Some(("header", name)) => {
            let name = http::HeaderName::from_bytes(name.as_bytes())?;
            limited(listener, router, HeaderKey::new(name), args, page).await
        }
        _ => Err(format!(
            "unknown key {:?}: global, peer, xff:<n> or header:<name>",
            args.key
        )
        .into()),
    }
}

async fn with_governor(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error> {
    use tower_governor::GovernorLayer;
    use tower_governor::governor::GovernorConfigBuilder;
    use tower_governor::key_extractor::GlobalKeyExtractor;
    if args.mode != "reject" {
        return Err("the governor comparison runs reject mode only".into());
    }
    let mut config = GovernorConfigBuilder::default();
    config
        .period(args.quota.emission_interval())
        .burst_size(args.quota.burst());
    match args.key.as_str() {
        "peer" => {
            let layer = GovernorLayer::new(config.finish().ok_or("governor config")?);
            Ok(serve(listener, layer.layer(router), page).await?)
        }
        "global" => {
            let config = config.key_extractor(GlobalKeyExtractor).finish();
            let layer = GovernorLayer::new(config.ok_or("governor config")?);
            Ok(serve(listener, layer.layer(router), page).await?)
        }
        other => Err(format!("governor: key {other:?} not supported (peer, global)").into()),
    }
}

/// limitcore-tower's concurrency limit around the whole router; its `PermitBody` responses
/// boxed into axum's `Body`, as `Router::layer` would.
async fn with_concurrency(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error> {
    let mut builder = limitcore_tower::ConcurrencyLimitLayer::fixed(args.concurrency)?;
    if args.queue_ms > 0 {
        builder = builder.queue(args.concurrency, Duration::from_millis(args.queue_ms))?;
    }
    let to_axum = |r: http::Response<
        limitcore_tower::concurrency::PermitBody<axum::body::Body>,
    >| { r.map(axum::body::Body::new) };
    let app = tower::ServiceBuilder::new()
        .map_response(to_axum)
        .layer(builder.build())
        .service(router);
    Ok(serve(listener, app, page).await?)
}

/// tower's `ConcurrencyLimit` around the whole router.
async fn with_tower_concurrency(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error> {
    let layer = tower::limit::ConcurrencyLimitLayer::new(args.concurrency as usize);
    Ok(serve(listener, layer.layer(router), page).await?)
}

/// Serves `GET /` ("ok") on `listener` behind the contender `args` name, and `GET /metrics`
/// from `page` if given, until the process ends.
///
/// # Errors
///
/// A configuration that does not hold together (an unknown key, mode or limiter; delay mode
/// with another algorithm than GCRA; ...), or the server's I/O error.
pub(crate) async fn run(
    listener: tokio::net::TcpListener,
    args: Args,
    page: Option<PrometheusHandle>,
) -> Result<(), Error> {
    let router = Router::new().route("/", get(|| async { "ok" }));
    match args.limiter.as_str() {
        "none" => Ok(serve(listener, router, page).await?),
        "limitcore" => with_limitcore(listener, router, &args, page).await,
        "governor" => with_governor(listener, router, &args, page).await,
        "concurrency" => with_concurrency(listener, router, &args, page).await,
        "tower-concurrency" => with_tower_concurrency(listener, router, &args, page).await,
        other => Err(format!(
            "unknown limiter {other:?}: limitcore, none, governor, concurrency or tower-concurrency"
        )
        .into()),
    }
}
