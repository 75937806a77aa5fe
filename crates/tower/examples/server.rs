//! A rate-limited HTTP server: `GET /` answers 200 "ok" behind the layer.
//!
//! ```text
//! cargo run --release -p limitcore-tower --features axum --example server -- --addr 127.0.0.1:8080 --quota "5/s"
//!     [--key global|peer|xff:<n>|header:<name>] [--mode reject|delay|dry-run]
//!     [--max-wait-ms 1000] [--algorithm gcra|token-bucket|…] [--headers] [--max-keys N]
//!     [--no-outcome] [--limiter limitcore|none|governor|concurrency|tower-concurrency]
//!     [--concurrency N] [--queue-ms MS]
//! ```
//!
//! `--key xff:<n>`: `n` trusted proxies stand in front of the server, so the client is the
//! `n`-th `X-Forwarded-For` entry from the right (`xff:1`: the rightmost, appended by the
//! one proxy). `--limiter none` serves without a layer and `governor` with tower_governor
//! on the same quota (peer or global key, reject mode): the load comparison in
//! `crates/tower/bench/load.sh`. `--limiter concurrency` serves behind limitcore-tower's
//! `ConcurrencyLimitLayer` (a fixed limit of `--concurrency` requests in flight, shedding
//! with 503, or queueing up to `--queue-ms` with `--queue-ms`) instead of a rate limit, and
//! `tower-concurrency` behind tower's `ConcurrencyLimit` on the same limit (its requests
//! wait for a permit in `poll_ready`); the quota is not used then.

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;
use clap::Parser;
use limitcore::rules::GcraRule;
use limitcore::{Algorithm, Keyed, KeyedRateLimiter, Quota};
use limitcore_tower::{
    Builder, ForwardHeader, ForwardedIp, GlobalKey, HeaderKey, KeyExtractor, PeerIp,
    RateLimitHeaders, RateLimitLayer, Trust,
};
use std::convert::Infallible;
use std::hash::Hash;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use tower::{Layer, Service};

#[derive(Parser, Debug)]
#[command(about = "GET / answers \"ok\" behind a rate-limit layer")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// The quota per key, e.g. "5/s", "100/min burst 20".
    #[arg(long, default_value = "5/s")]
    quota: Quota,
    /// global | peer | xff:<n> (n trusted proxies) | header:<name>.
    #[arg(long, default_value = "peer")]
    key: String,
    /// reject | delay | dry-run.
    #[arg(long, default_value = "reject")]
    mode: String,
    /// Delay mode: the longest wait for a slot, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    max_wait_ms: u64,
    /// The algorithm per key (reject and dry-run modes; delay mode is GCRA).
    #[arg(long, default_value = "gcra")]
    algorithm: Algorithm,
    /// RateLimit-Policy and RateLimit fields on every response (not only refusals).
    #[arg(long)]
    headers: bool,
    /// The most keys with a state of their own.
    #[arg(long, default_value_t = limitcore_tower::DEFAULT_MAX_KEYS)]
    max_keys: usize,
    /// No `Outcome` extension on responses (`Builder::outcome_extension(false)`).
    #[arg(long)]
    no_outcome: bool,
    /// limitcore | none | governor | concurrency | tower-concurrency.
    #[arg(long, default_value = "limitcore")]
    limiter: String,
    /// concurrency, tower-concurrency: the most requests in flight.
    #[arg(long, default_value_t = 1024)]
    concurrency: u32,
    /// concurrency: wait up to this long (ms) for a permit, among as many waiters as the
    /// limit (0: shed at once with 503).
    #[arg(long, default_value_t = 0)]
    queue_ms: u64,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Serves `app` on `listener` until the process ends, the peer address of each connection
/// in the requests' extensions (axum's `ConnectInfo`, and without the crate's `axum`
/// feature also as the plain `SocketAddr` that `PeerIp` reads then).
///
/// A rate-limit layer wraps the whole `Router` here (`ServiceBuilder`, outside the
/// routing), not each route (`Router::layer`): every request is limited, an unknown path
/// too, and a request costs no per-route clone of the layer. Every contender of the load
/// comparison is wired the same way.
async fn serve<S>(listener: tokio::net::TcpListener, app: S) -> std::io::Result<()>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    axum::serve(
        listener,
        axum::ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app),
    )
    .await
}

/// `router` behind a layer of `limiter` keyed by `extractor`, configured by `args`, served
/// on `listener`.
async fn apply<X, L>(
    listener: tokio::net::TcpListener,
    router: Router,
    builder: Builder<X, L>,
    args: &Args,
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
        .build()?;
    Ok(serve(listener, layer.layer(router)).await?)
}

/// The layer for a key type: GCRA per key (delay mode: with reservations), or another
/// algorithm through `Algorithm::keyed`.
async fn limited<X>(
    listener: tokio::net::TcpListener,
    router: Router,
    extractor: X,
    args: &Args,
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
            apply(listener, router, builder, args).await
        }
        "reject" | "dry-run" if args.algorithm == Algorithm::Gcra => {
            let builder = RateLimitLayer::builder(gcra()?, extractor);
            apply(listener, router, builder, args).await
        }
        "reject" | "dry-run" => {
            let clock = limitcore::DefaultClock::new();
            let limiter =
                args.algorithm
                    .keyed::<X::Key, _>(args.quota, clock, Some(args.max_keys))?;
            let builder = RateLimitLayer::builder(limiter, extractor);
            apply(listener, router, builder, args).await
        }
        other => Err(format!("unknown mode {other:?}: reject, delay or dry-run").into()),
    }
}

async fn with_limitcore(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
) -> Result<(), Error> {
    match args.key.split_once(':') {
        None if args.key == "global" => limited(listener, router, GlobalKey, args).await,
        None if args.key == "peer" => limited(listener, router, PeerIp::new(), args).await,
        Some(("xff", n)) => {
            let hops: usize = n.parse().map_err(|_| format!("xff:<n>: bad count {n:?}"))?;
            let extractor = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(hops));
            limited(listener, router, extractor, args).await
        }
        Some(("header", name)) => {
            let name = http::HeaderName::from_bytes(name.as_bytes())?;
            limited(listener, router, HeaderKey::new(name), args).await
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
            Ok(serve(listener, layer.layer(router)).await?)
        }
        "global" => {
            let config = config.key_extractor(GlobalKeyExtractor).finish();
            let layer = GovernorLayer::new(config.ok_or("governor config")?);
            Ok(serve(listener, layer.layer(router)).await?)
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
    Ok(serve(listener, app).await?)
}

/// tower's `ConcurrencyLimit` around the whole router.
async fn with_tower_concurrency(
    listener: tokio::net::TcpListener,
    router: Router,
    args: &Args,
) -> Result<(), Error> {
    let layer = tower::limit::ConcurrencyLimitLayer::new(args.concurrency as usize);
    Ok(serve(listener, layer.layer(router)).await?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    let router = Router::new().route("/", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    println!(
        "listening on http://{addr} (limiter {}, key {}, mode {}, quota {})",
        args.limiter, args.key, args.mode, args.quota
    );
    std::io::stdout().flush()?;
    match args.limiter.as_str() {
        "none" => Ok(serve(listener, router).await?),
        "limitcore" => with_limitcore(listener, router, &args).await,
        "governor" => with_governor(listener, router, &args).await,
        "concurrency" => with_concurrency(listener, router, &args).await,
        "tower-concurrency" => with_tower_concurrency(listener, router, &args).await,
        other => Err(format!(
            "unknown limiter {other:?}: limitcore, none, governor, concurrency or tower-concurrency"
        )
        .into()),
    }
}
