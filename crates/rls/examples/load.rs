//! A gRPC load generator for `ShouldRateLimit` (the figures of BENCHMARKS.md, "limitcore-rls"):
//! closed loop, `--concurrency` requests in flight over `--connections` HTTP/2 connections,
//! for `--seconds` after a warm-up (`--warmup-ms`); prints decisions/s, the latency
//! percentiles, and how many were admitted. It speaks only RLS v3, so the same load can be
//! pointed at any rate-limit service (`crates/rls/bench/run.sh`'s `EXTERNAL`).
//!
//! ```text
//! cargo run --release -p limitcore-rls --example load -- --addr 127.0.0.1:8081 \
//!     --domain bench --key user --keys 1000 --seconds 10 --concurrency 64
//! ```

use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// The service's gRPC address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    addr: String,
    /// The request's domain.
    #[arg(long, default_value = "bench")]
    domain: String,
    /// The descriptor key (comma-separated for several descriptors per request).
    #[arg(long, default_value = "user")]
    key: String,
    /// Distinct values per key (requests cycle through them).
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Requests in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// HTTP/2 connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds of load (after the warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Runtime worker threads of the generator.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The descriptor values' prefix (values are PREFIX0 .. PREFIX{keys-1}): a fresh prefix
    /// gives fresh counters on a server that keeps running (the overshoot trials).
    #[arg(long, default_value = "v")]
    value_prefix: String,
    /// Warm-up before the measured seconds, in ms (its requests are sent but not counted);
    /// 0 counts every request (the overshoot trials, where every admission matters).
    #[arg(long, default_value_t = 1000)]
    warmup_ms: u64,
}

fn request(domain: &str, keys: &[&str], prefix: &str, value: usize) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: keys
            .iter()
            .map(|k| RateLimitDescriptor {
                entries: vec![Entry {
                    key: (*k).to_owned(),
                    value: format!("{prefix}{value}"),
                }],
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut channels = Vec::new();
    for _ in 0..args.connections.max(1) {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", args.addr))?
            .tcp_nodelay(true)
            .connect()
            .await?;
        channels.push(ch);
    }
    let warmup = Instant::now() + Duration::from_millis(args.warmup_ms);
    let end = warmup + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for t in 0..args.concurrency.max(1) {
        let mut client = RateLimitServiceClient::new(channels[t % channels.len()].clone());
        let domain = args.domain.clone();
        let key = args.key.clone();
        let prefix = args.value_prefix.clone();
        let n = args.keys.max(1);
        tasks.push(tokio::spawn(async move {
            let keys: Vec<&str> = key.split(',').collect();
            let mut lat = Vec::with_capacity(1 << 16);
            let (mut ok, mut over, mut errors, mut sent) = (0u64, 0u64, 0u64, 0u64);
            let mut i = t;
            loop {
                let start = Instant::now();
                if start >= end {
                    break;
                }
                let r = client
                    .should_rate_limit(request(&domain, &keys, &prefix, i % n))
                    .await;
                i = i.wrapping_add(7919);
                let took = start.elapsed();
                sent += 1;
                if start < warmup {
                    continue;
                }
                lat.push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
                match r {
                    Ok(r) if r.get_ref().overall_code == 1 => ok += 1,
                    Ok(_) => over += 1,
                    Err(_) => errors += 1,
                }
            }
            (lat, ok, over, errors, sent)
        }));
    }
    let mut all = Vec::new();
    let (mut ok, mut over, mut errors, mut sent) = (0, 0, 0, 0);
    for t in tasks {
        let (l, o, v, e, s) = t.await?;
        all.extend(l);
        ok += o;
        over += v;
        errors += e;
        sent += s;
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let total = all.len() as f64;
    println!(
        "decisions/s {:.0}  p50 {} us  p99 {} us  p99.9 {} us  admitted {ok}  refused {over}  errors {errors}  sent {sent} with warm-up  ({} s, {} in flight, {} connections)",
        total / args.seconds as f64,
        pct(0.50),
        pct(0.99),
        pct(0.999),
        args.seconds,
        args.concurrency,
        args.connections
    );
    Ok(())
}
