//! An adaptive concurrency limit in front of a server with a capacity knee, under a real
//! HTTP load on loopback, beside the same load with no layer.
//!
//! ```text
//! cargo run --release -p limitcore-tower --features axum --example adaptive -- \
//!     --capacity 8 --clients 64 --seconds 10 [--json] [--rule envoy|vegas|gradient2|aimd]
//!     [--base-ms 5] [--backoff-ms 10]
//! ```
//!
//! The handler of `GET /` takes `base` while at most `capacity` requests are in it, and
//! `base × (1 + excess)` once `excess` more are: the latency of a server whose workers are
//! saturated (a knee). `clients` loops each send one request at a time over hyper-util's
//! client, for `seconds`, first against the server alone, then against the same server
//! behind `ConcurrencyLimitLayer::adaptive` (shedding at once with 503; a shed client pauses
//! `backoff` before its next request). Printed: the limit over time, admitted and shed,
//! p50/p99 latency of the admitted requests in both runs, and the in-flight counts after the
//! run (the layer's and the handler's, both 0). Everything stays on 127.0.0.1.
//!
//! The rule is Envoy's gradient controller by default (`EnvoyGradient` with its defaults),
//! which holds this knee best: its limit stays near the capacity. The others, with their
//! sources' defaults and a sample per request, on the same knee (2 cores): Vegas oscillates
//! between about 0.8× and 2× the capacity; AIMD (its timeout here 4 × the base latency)
//! cuts to its minimum on each run of slow samples and climbs back; Gradient2 follows the
//! latency its long-term average has got used to, and climbs to the number of clients.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use bytes::Bytes;
use clap::Parser;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limitcore::concurrency::{
    Adaptive, AdaptiveRule, Aimd, EnvoyGradient, Feedback, Gradient2, Permits, Vegas,
};
use limitcore_tower::ConcurrencyLimitLayer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "An adaptive concurrency limit in front of a server with a capacity knee")]
struct Args {
    /// Requests the handler serves at its base latency; more slow it down.
    #[arg(long, default_value_t = 8)]
    capacity: u32,
    /// Concurrent client loops.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// Seconds of load per run (two runs: no layer, then the layer).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The handler's latency at or under capacity, in milliseconds.
    #[arg(long, default_value_t = 5)]
    base_ms: u64,
    /// How long a shed client pauses before its next request, in milliseconds.
    #[arg(long, default_value_t = 10)]
    backoff_ms: u64,
    /// envoy | vegas | gradient2 | aimd (see the module's docs).
    #[arg(long, default_value = "envoy")]
    rule: String,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The handler's view: requests in it now, its capacity and base latency.
struct Backend {
    in_flight: AtomicU32,
    capacity: u32,
    base: Duration,
}

async fn handler(State(backend): State<Arc<Backend>>) -> &'static str {
    let now = backend.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    let excess = now.saturating_sub(backend.capacity);
    tokio::time::sleep(backend.base * (1 + excess)).await;
    backend.in_flight.fetch_sub(1, Ordering::SeqCst);
    "ok"
}

/// Serves `router` on 127.0.0.1:0 until the process ends.
async fn serve(router: Router) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// What one run's clients saw.
#[derive(Default)]
struct Load {
    admitted: AtomicU64,
    shed: AtomicU64,
    other: AtomicU64,
}

/// `clients` loops against `addr` for `duration`; the latencies of the admitted requests
/// (ms, sorted).
async fn load(addr: SocketAddr, args: &Args, counts: Arc<Load>) -> Result<Vec<f64>, Error> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let backoff = Duration::from_millis(args.backoff_ms);
    let uri: http::Uri = format!("http://{addr}/").parse()?;
    let loops: Vec<_> = (0..args.clients)
        .map(|_| {
            let (client, uri, counts) = (client.clone(), uri.clone(), counts.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    let response = client.get(uri.clone()).await?;
                    let status = response.status();
                    response.into_body().collect().await?;
                    match status {
                        StatusCode::OK => {
                            latencies.push(started.elapsed().as_secs_f64() * 1e3);
                            counts.admitted.fetch_add(1, Ordering::Relaxed);
                        }
                        StatusCode::SERVICE_UNAVAILABLE => {
                            counts.shed.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(backoff).await;
                        }
                        _ => {
                            counts.other.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Ok::<_, Error>(latencies)
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in loops {
        all.extend(task.await??);
    }
    all.sort_by(f64::total_cmp);
    Ok(all)
}

/// The `q`-quantile of sorted `values` (nearest rank; 0 for none).
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// One run's summary.
struct Summary {
    admitted: u64,
    shed: u64,
    other: u64,
    p50: f64,
    p99: f64,
    seconds: f64,
}

impl Summary {
    fn new(counts: &Load, latencies: &[f64], seconds: f64) -> Self {
        Summary {
            admitted: counts.admitted.load(Ordering::Relaxed),
            shed: counts.shed.load(Ordering::Relaxed),
            other: counts.other.load(Ordering::Relaxed),
            p50: quantile(latencies, 0.5),
            p99: quantile(latencies, 0.99),
            seconds,
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "admitted": self.admitted,
            "admitted_per_second": self.admitted as f64 / self.seconds,
            "shed": self.shed,
            "other": self.other,
            "p50_ms": self.p50,
            "p99_ms": self.p99,
        })
    }

    fn row(&self, name: &str) -> String {
        format!(
            "{name:<10} {:>9} {:>11.0} {:>8} {:>8.1} {:>8.1}",
            self.admitted,
            self.admitted as f64 / self.seconds,
            self.shed,
            self.p50,
            self.p99
        )
    }
}

/// The limit every `every` while `run` lasts: (seconds since the start, limit, in flight).
async fn sample<F: Feedback>(
    permits: Arc<Permits<F>>,
    counts: Arc<Load>,
    seconds: u64,
    print: bool,
) -> Vec<serde_json::Value> {
    let every = Duration::from_millis(500);
    let start = Instant::now();
    let mut samples = Vec::new();
    if print {
        println!(
            "{:>6} {:>6} {:>10} {:>9} {:>7}",
            "t (s)", "limit", "in flight", "admitted", "shed"
        );
    }
    for i in 1..=(seconds * 2) {
        tokio::time::sleep_until((start + every * i as u32).into()).await;
        let t = start.elapsed().as_secs_f64();
        let (limit, in_flight) = (permits.limit(), permits.in_flight());
        let (admitted, shed) = (
            counts.admitted.load(Ordering::Relaxed),
            counts.shed.load(Ordering::Relaxed),
        );
        if print {
            println!("{t:>6.1} {limit:>6} {in_flight:>10} {admitted:>9} {shed:>7}");
        }
        samples.push(serde_json::json!({
            "t": t, "limit": limit, "in_flight": in_flight, "admitted": admitted, "shed": shed,
        }));
    }
    samples
}

async fn run<R: AdaptiveRule>(rule: R, args: Args) -> Result<(), Error> {
    let backend = |args: &Args| {
        Arc::new(Backend {
            in_flight: AtomicU32::new(0),
            capacity: args.capacity,
            base: Duration::from_millis(args.base_ms),
        })
    };
    let text = !args.json;
    if text {
        println!(
            "capacity {} (base {} ms, + {} ms per request over it), {} clients, {} s per run, rule {}",
            args.capacity, args.base_ms, args.base_ms, args.clients, args.seconds, args.rule
        );
    }
    // The server alone.
    let alone = backend(&args);
    let addr = serve(
        Router::new()
            .route("/", get(handler))
            .with_state(alone.clone()),
    )
    .await?;
    let counts = Arc::new(Load::default());
    let started = Instant::now();
    let latencies = load(addr, &args, counts.clone()).await?;
    let none = Summary::new(&counts, &latencies, started.elapsed().as_secs_f64());

    // Behind the adaptive layer.
    let layer = ConcurrencyLimitLayer::builder(Permits::<Adaptive<R>>::adaptive(rule)?).build();
    let limited = backend(&args);
    let router = Router::new()
        .route("/", get(handler))
        .with_state(limited.clone())
        .layer(layer.clone());
    let addr = serve(router).await?;
    let counts = Arc::new(Load::default());
    if text {
        println!("\nbehind the adaptive layer:");
    }
    let sampler = tokio::spawn(sample(
        layer.permits().clone(),
        counts.clone(),
        args.seconds,
        text,
    ));
    let started = Instant::now();
    let latencies = load(addr, &args, counts.clone()).await?;
    let adaptive = Summary::new(&counts, &latencies, started.elapsed().as_secs_f64());
    let samples = sampler.await?;
    let after = (
        layer.permits().in_flight(),
        limited.in_flight.load(Ordering::SeqCst),
    );

    if args.json {
        let report = serde_json::json!({
            "capacity": args.capacity, "clients": args.clients, "seconds": args.seconds,
            "base_ms": args.base_ms, "backoff_ms": args.backoff_ms, "rule": args.rule,
            "limit_over_time": samples,
            "no_layer": none.json(),
            "adaptive": adaptive.json(),
            "in_flight_after": after.0,
            "handler_in_flight_after": after.1,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "\n{:<10} {:>9} {:>11} {:>8} {:>8} {:>8}",
            "run", "admitted", "admitted/s", "shed", "p50 ms", "p99 ms"
        );
        println!("{}", none.row("no layer"));
        println!("{}", adaptive.row("adaptive"));
        println!(
            "\nin flight after the run: layer {}, handler {}",
            after.0, after.1
        );
    }
    if after != (0, 0) {
        return Err(format!("requests still in flight after the run: {after:?}").into());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    match args.rule.as_str() {
        "vegas" => run(Vegas::new(), args).await,
        "gradient2" => run(Gradient2::new(), args).await,
        "aimd" => {
            // AIMD backs off on drops and on latency past its timeout: 4 × the base latency.
            let timeout = Duration::from_millis(args.base_ms * 4);
            run(
                Aimd::new()
                    .with_limits(1, 200)?
                    .with_initial(20)?
                    .with_timeout(timeout)?,
                args,
            )
            .await
        }
        "envoy" => run(EnvoyGradient::new(), args).await,
        other => Err(format!("unknown rule {other:?}: vegas, gradient2, aimd or envoy").into()),
    }
}
