//! A rate-limited HTTP server: `GET /` answers 200 "ok" behind the layer.
//!
//! ```text
//! cargo run --release -p limitcore-tower --example server -- --addr 127.0.0.1:8080 --quota "5/s"
//!     [--key global|peer|xff:<n>|header:<name>] [--mode reject|delay|dry-run]
//!     [--max-wait-ms 1000] [--algorithm gcra|token-bucket|…] [--headers] [--max-keys N]
//!     [--limiter limitcore|none|governor]
//! ```
//!
//! `--key xff:<n>`: `n` trusted proxies stand in front of the server, so the client is the
//! `n`-th `X-Forwarded-For` entry from the right (`xff:1`: the rightmost, appended by the
//! one proxy). `--limiter none` serves without a layer and `governor` with tower_governor
//! on the same quota (peer or global key, reject mode): the load comparison in
//! `crates/tower/bench/load.sh`.

use axum::Router;
use axum::routing::get;
use clap::Parser;
use limitcore::rules::GcraRule;
use limitcore::{Algorithm, Keyed, KeyedRateLimiter, Quota};
use limitcore_tower::{
    Builder, ForwardHeader, ForwardedIp, GlobalKey, HeaderKey, KeyExtractor, PeerIp,
    RateLimitHeaders, RateLimitLayer, Trust,
};
use std::hash::Hash;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

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
    /// limitcore | none | governor.
    #[arg(long, default_value = "limitcore")]
    limiter: String,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// `router` behind a layer of `limiter` keyed by `extractor`, configured by `args`.
fn apply<X, L>(router: Router, builder: Builder<X, L>, args: &Args) -> Result<Router, Error>
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
        .build()?;
    Ok(router.layer(layer))
}

/// The layer for a key type: GCRA per key (delay mode: with reservations), or another
/// algorithm through `Algorithm::keyed`.
fn limited<X>(router: Router, extractor: X, args: &Args) -> Result<Router, Error>
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
            apply(router, builder, args)
        }
        "reject" | "dry-run" if args.algorithm == Algorithm::Gcra => {
            apply(router, RateLimitLayer::builder(gcra()?, extractor), args)
        }
        "reject" | "dry-run" => {
            let clock = limitcore::DefaultClock::new();
            let limiter =
                args.algorithm
                    .keyed::<X::Key, _>(args.quota, clock, Some(args.max_keys))?;
            apply(router, RateLimitLayer::builder(limiter, extractor), args)
        }
        other => Err(format!("unknown mode {other:?}: reject, delay or dry-run").into()),
    }
}

fn with_limitcore(router: Router, args: &Args) -> Result<Router, Error> {
    match args.key.split_once(':') {
        None if args.key == "global" => limited(router, GlobalKey, args),
        None if args.key == "peer" => limited(router, PeerIp::new(), args),
        Some(("xff", n)) => {
            let hops: usize = n.parse().map_err(|_| format!("xff:<n>: bad count {n:?}"))?;
            let extractor = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(hops));
            limited(router, extractor, args)
        }
        Some(("header", name)) => {
            let name = http::HeaderName::from_bytes(name.as_bytes())?;
            limited(router, HeaderKey::new(name), args)
        }
        _ => Err(format!(
            "unknown key {:?}: global, peer, xff:<n> or header:<name>",
            args.key
        )
        .into()),
    }
}

fn with_governor(router: Router, args: &Args) -> Result<Router, Error> {
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
    Ok(match args.key.as_str() {
        "peer" => router.layer(GovernorLayer::new(
            config.finish().ok_or("governor config")?,
        )),
        "global" => router.layer(GovernorLayer::new(
            config
                .key_extractor(GlobalKeyExtractor)
                .finish()
                .ok_or("governor config")?,
        )),
        other => {
            return Err(format!("governor: key {other:?} not supported (peer, global)").into());
        }
    })
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    let router = Router::new().route("/", get(|| async { "ok" }));
    let app = match args.limiter.as_str() {
        "none" => router,
        "limitcore" => with_limitcore(router, &args)?,
        "governor" => with_governor(router, &args)?,
        other => {
            return Err(format!("unknown limiter {other:?}: limitcore, none or governor").into());
        }
    };
    // Without the crate's `axum` feature, `PeerIp` reads a plain `SocketAddr` extension:
    // copy axum's `ConnectInfo` into one (outside the rate-limit layer, so it runs first).
    #[cfg(not(feature = "axum"))]
    let app = app.layer(axum::middleware::map_request(
        |mut req: axum::extract::Request| async move {
            let peer = req
                .extensions()
                .get::<axum::extract::ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            if let Some(peer) = peer {
                req.extensions_mut().insert(peer);
            }
            req
        },
    ));
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    println!(
        "listening on http://{addr} (limiter {}, key {}, mode {}, quota {})",
        args.limiter, args.key, args.mode, args.quota
    );
    std::io::stdout().flush()?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
