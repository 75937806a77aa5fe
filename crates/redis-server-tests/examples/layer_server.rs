//! An HTTP server with one limit per client behind `limitcore-tower`'s layer, the limit kept
//! in-process or on Redis: the contenders of the load comparison in `bench/layer.sh` (exact
//! Redis behind the awaited seam beside the in-process layer, under wrk).
//!
//! ```text
//! cargo run --release -p redis-server-tests --example layer_server -- \
//!     --addr 127.0.0.1:18282 --limit exact --quota 1000000/s
//! ```
//!
//! `--limit`:
//! - `local`: a `Keyed<String>` (the core, in-process) behind `RateLimitLayer::builder`;
//! - `local-awaited`: the same limiter behind `RateLimitLayer::remote` (the awaited seam,
//!   whose future is ready at once): the seam's own cost;
//! - `exact`: `RedisGcra` (one script call a request) behind `RateLimitLayer::remote`;
//! - `leased`: `LeasedLimiter` (local decisions on leases) behind `RateLimitLayer::builder`
//!   (a node out of cells refuses until its next lease arrives);
//! - `leased-awaited`: the same behind `RateLimitLayer::remote` through `AwaitLeases` (a
//!   node out of cells waits for its next lease).
//!
//! The Redis contenders start their own `redis-server` on a free loopback port (stopped with
//! the process). The client key is the `x-client` header (wrk sends none: every request is
//! the shared key `anonymous`), so every contender decides on one key.

use clap::{Parser, ValueEnum};
use limitcore::{Keyed, Quota};
use limitcore_redis::server::RedisServer;
use limitcore_redis::{
    AwaitLeases, LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig, RedisGcra,
};
use limitcore_tower::{FnKey, RateLimitLayer, RequestHead};
use std::io::Write;
use std::net::SocketAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Limit {
    Local,
    LocalAwaited,
    Exact,
    Leased,
    LeasedAwaited,
}

/// An HTTP server behind one rate limit (see the file's docs).
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18282")]
    addr: SocketAddr,
    /// Where the limit is kept.
    #[arg(long, value_enum)]
    limit: Limit,
    /// The limit per client, in the core's quota syntax.
    #[arg(long, default_value = "1000000/s")]
    quota: Quota,
    /// The leased contender's largest lease (cells).
    #[arg(long, default_value_t = 64)]
    max_lease: u32,
}

fn client_key(head: RequestHead<'_>) -> Option<String> {
    Some(
        head.headers()
            .get("x-client")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("anonymous")
            .to_owned(),
    )
}

async fn handler() -> &'static str {
    "ok"
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let key = FnKey::new(client_key);
    let app = axum::Router::new().route("/", axum::routing::get(handler));
    // Kept until the process ends (dropping it stops the server).
    let mut redis_server = None;
    let mut redis = || -> Result<_, Box<dyn std::error::Error>> {
        let server = RedisServer::start()?;
        let url = server.url();
        redis_server = Some(server);
        Ok(url)
    };
    let app = match args.limit {
        Limit::Local => {
            let limit: Keyed<String> = Keyed::new(args.quota)?;
            app.layer(RateLimitLayer::new(limit, key))
        }
        Limit::LocalAwaited => {
            let limit: Keyed<String> = Keyed::new(args.quota)?;
            app.layer(RateLimitLayer::remote(limit, key).build()?)
        }
        Limit::Exact => {
            let redis = Redis::connect(&redis()?, RedisConfig::default()).await?;
            let limit = RedisGcra::new(redis, args.quota, Policy::FailClosed)?;
            app.layer(RateLimitLayer::remote(limit, key).build()?)
        }
        Limit::Leased => {
            let redis = Redis::connect(&redis()?, RedisConfig::default()).await?;
            let limit = LeasedLimiter::new(
                redis,
                args.quota,
                LeaseConfig::new(args.max_lease),
                Policy::FailClosed,
            )?;
            app.layer(RateLimitLayer::new(limit, key))
        }
        Limit::LeasedAwaited => {
            let redis = Redis::connect(&redis()?, RedisConfig::default()).await?;
            let limit = LeasedLimiter::new(
                redis,
                args.quota,
                LeaseConfig::new(args.max_lease),
                Policy::FailClosed,
            )?;
            app.layer(RateLimitLayer::remote(AwaitLeases::new(limit), key).build()?)
        }
    };
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    println!(
        "listening on http://{} ({:?})",
        listener.local_addr()?,
        args.limit
    );
    std::io::stdout().flush()?;
    axum::serve(listener, app).await?;
    drop(redis_server);
    Ok(())
}
