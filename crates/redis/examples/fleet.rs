//! N independent nodes (each its own thread, tokio runtime, client and connection) hammer
//! one key through limitcore-redis for a given time; prints what each admitted and
//! refused, each node's share of an equal split of the fleet's admissions and Jain's
//! fairness index over the nodes, the fleet's most admitted in any 1 s window against the
//! mode's bound, decisions/s per node and Redis commands per 1,000 decisions, and exits
//! non-zero if the bound is broken.
//!
//! The fairness target (issue 23): under saturation every node gets between 0.8 and 1.25
//! of an equal share over the run, and Jain's index `(Σx)² / (N·Σx²)` is at least 0.95.
//! The leased mode grants by fair shares ([`LeaseConfig::fair`]); `--unfair` asks first
//! come, first served instead, for comparison.
//!
//! ```text
//! cargo run --release -p limitcore-redis --example fleet -- \
//!     --redis redis://127.0.0.1:6379 --nodes 4 --seconds 5 \
//!     --quota "1000/s burst 50" --mode leased [--unfair] [--json]
//! ```

use clap::{Parser, ValueEnum};
use limitcore::{KeyedRateLimiter, Quota};
use limitcore_redis::server::RedisServer;
use limitcore_redis::{
    gcra_micros, LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig, RedisGcra,
};
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Every decision is one script call on Redis.
    Exact,
    /// Local decisions from leases of cells taken from Redis.
    Leased,
}

/// A fleet of nodes sharing one limit on Redis.
#[derive(Debug, Parser)]
#[command(
    after_help = "Without --redis, the example starts its own redis-server on a free \
loopback port (Debian's redis-server must be installed: .ci/redis-deps.sh) and kills it on exit."
)]
struct Args {
    /// The Redis to use, e.g. redis://127.0.0.1:6379 (default: start a private redis-server).
    #[arg(long)]
    redis: Option<String>,
    /// Number of nodes (each its own thread, runtime, client and connection).
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// How long the nodes hammer the key.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// The fleet-wide limit.
    #[arg(long, default_value = "1000/s burst 50")]
    quota: Quota,
    /// exact (one round trip a decision) or leased (local decisions).
    #[arg(long, value_enum, default_value_t = Mode::Leased)]
    mode: Mode,
    /// Largest lease in cells (L of the leased bound).
    #[arg(long, default_value_t = 16)]
    max_lease: u32,
    /// Leased mode: leases first come, first served instead of by fair shares.
    #[arg(long)]
    unfair: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

struct NodeReport {
    admitted: Vec<u64>,
    decisions: u64,
    commands: u64,
    elapsed: Duration,
}

fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

async fn exact_node(redis: Redis, quota: Quota, key: String, end: Instant) -> (Vec<u64>, u64) {
    let limit = RedisGcra::new(redis, quota, Policy::FailClosed).expect("quota fits Redis");
    let (mut admitted, mut decisions) = (Vec::new(), 0);
    while Instant::now() < end {
        decisions += 1;
        if let Ok(a) = limit.try_decide(&key, 1).await {
            if a.decision.is_admitted() {
                admitted.push(a.server_time.as_micros());
            }
        }
    }
    (admitted, decisions)
}

async fn leased_node(
    redis: Redis,
    quota: Quota,
    config: LeaseConfig,
    key: String,
    end: Instant,
) -> (Vec<u64>, u64) {
    let limiter =
        LeasedLimiter::new(redis, quota, config, Policy::FailClosed).expect("quota fits Redis");
    // The synchronous path on its own thread; lease fetches run on this runtime.
    let hammer = std::thread::spawn(move || {
        let (mut admitted, mut decisions) = (Vec::new(), 0u64);
        while Instant::now() < end {
            for _ in 0..256 {
                decisions += 1;
                if limiter.try_acquire(&key).is_ok() {
                    admitted.push(wall_us());
                }
            }
            std::thread::yield_now();
        }
        (admitted, decisions)
    });
    while !hammer.is_finished() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    hammer.join().expect("hammer thread")
}

/// Each node's admissions over an equal split of the fleet's (1.0: exactly its share), and
/// Jain's fairness index `(Σx)² / (N·Σx²)` (1: all equal; `1/N`: one node took all).
fn fairness(admitted: &[f64]) -> (Vec<f64>, f64) {
    let n = admitted.len() as f64;
    let total: f64 = admitted.iter().sum();
    let squares: f64 = admitted.iter().map(|x| x * x).sum();
    let equal = total / n;
    let shares = admitted
        .iter()
        .map(|&x| if equal > 0.0 { x / equal } else { 0.0 })
        .collect();
    let jain = if squares > 0.0 {
        total * total / (n * squares)
    } else {
        0.0
    };
    (shares, jain)
}

fn max_in_window(times: &mut [u64], window_us: u64) -> usize {
    times.sort_unstable();
    let (mut best, mut lo) = (0, 0);
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= window_us {
            lo += 1;
        }
        best = best.max(hi + 1 - lo);
    }
    best
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (interval_us, burst) = match gcra_micros(&args.quota) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("fleet: {e}");
            return ExitCode::from(2);
        }
    };
    let own = match &args.redis {
        Some(_) => None,
        None => match RedisServer::start() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("fleet: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let url = args
        .redis
        .clone()
        .unwrap_or_else(|| own.as_ref().map(RedisServer::url).unwrap_or_default());
    let key = format!("fleet:{}:{}", std::process::id(), wall_us());
    let run = Duration::from_secs(args.seconds);
    let barrier = Arc::new(Barrier::new(args.nodes));
    let handles: Vec<_> = (0..args.nodes)
        .map(|_| {
            let (url, key, barrier) = (url.clone(), key.clone(), Arc::clone(&barrier));
            let (quota, mode) = (args.quota, args.mode);
            let lease = LeaseConfig::new(args.max_lease).fair(!args.unfair);
            std::thread::spawn(move || -> Result<NodeReport, String> {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async move {
                    let config = RedisConfig::default().deadline(Duration::from_millis(250));
                    let redis = Redis::connect(&url, config)
                        .await
                        .map_err(|e| e.to_string())?;
                    barrier.wait();
                    let start = Instant::now();
                    let end = start + run;
                    let (admitted, decisions) = match mode {
                        Mode::Exact => exact_node(redis.clone(), quota, key, end).await,
                        Mode::Leased => leased_node(redis.clone(), quota, lease, key, end).await,
                    };
                    Ok(NodeReport {
                        admitted,
                        decisions,
                        commands: redis.commands(),
                        elapsed: start.elapsed(),
                    })
                })
            })
        })
        .collect();
    let mut reports = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => {
                eprintln!("fleet: a node failed: {e}");
                return ExitCode::from(2);
            }
            Err(_) => {
                eprintln!("fleet: a node panicked");
                return ExitCode::from(2);
            }
        }
    }
    let nodes = args.nodes as u64;
    let gcra = u64::from(burst) + 1_000_000u64.div_ceil(interval_us) - 1;
    let bound = match args.mode {
        Mode::Exact => gcra,
        Mode::Leased => gcra + nodes * u64::from(args.max_lease.min(burst)),
    };
    let mut all: Vec<u64> = reports
        .iter()
        .flat_map(|r| r.admitted.iter().copied())
        .collect();
    let worst = max_in_window(&mut all, 1_000_000) as u64;
    let decisions: u64 = reports.iter().map(|r| r.decisions).sum();
    let commands: u64 = reports.iter().map(|r| r.commands).sum();
    let per_1000 = commands as f64 * 1_000.0 / decisions.max(1) as f64;
    let ok = worst <= bound;
    let mode = format!("{:?}", args.mode).to_lowercase();
    let mode = if matches!(args.mode, Mode::Leased) && args.unfair {
        format!("{mode} (first come, first served)")
    } else {
        mode
    };
    let counts: Vec<f64> = reports.iter().map(|r| r.admitted.len() as f64).collect();
    let (shares, jain) = fairness(&counts);
    let fair = shares.iter().all(|s| (0.8..=1.25).contains(s)) && jain >= 0.95;
    if args.json {
        let per_node: Vec<serde_json::Value> = reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                serde_json::json!({
                    "node": i,
                    "admitted": r.admitted.len(),
                    "refused": r.decisions - r.admitted.len() as u64,
                    "decisions_per_s": r.decisions as f64 / r.elapsed.as_secs_f64(),
                    "commands": r.commands,
                    "share_of_equal_split": shares[i],
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "mode": mode,
                "quota": args.quota.to_string(),
                "nodes": nodes,
                "seconds": args.seconds,
                "per_node": per_node,
                "max_admitted_in_1s": worst,
                "bound": bound,
                "bound_holds": ok,
                "jain_index": jain,
                "fairness_target_met": fair,
                "commands_per_1000_decisions": per_1000,
            })
        );
    } else {
        println!(
            "mode {mode}, quota {}, {nodes} nodes, {} s",
            args.quota, args.seconds
        );
        println!(
            "{:>5} {:>10} {:>12} {:>14} {:>10} {:>14}",
            "node", "admitted", "refused", "decisions/s", "commands", "share of equal"
        );
        for (i, r) in reports.iter().enumerate() {
            println!(
                "{i:>5} {:>10} {:>12} {:>14.0} {:>10} {:>14.3}",
                r.admitted.len(),
                r.decisions - r.admitted.len() as u64,
                r.decisions as f64 / r.elapsed.as_secs_f64(),
                r.commands,
                shares[i]
            );
        }
        let formula = match args.mode {
            Mode::Exact => format!(
                "B + ⌈1 s / T⌉ − 1 = {burst} + {} − 1",
                1_000_000u64.div_ceil(interval_us)
            ),
            Mode::Leased => format!(
                "B + ⌈1 s / T⌉ − 1 + N·L = {burst} + {} − 1 + {nodes}·{}",
                1_000_000u64.div_ceil(interval_us),
                args.max_lease.min(burst)
            ),
        };
        println!(
            "fleet: most admitted in any 1 s window {worst}, bound {bound} ({formula}): {}",
            if ok { "holds" } else { "BROKEN" }
        );
        let (least, most) = shares
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        println!(
            "fairness: shares of an equal split {least:.3} to {most:.3}, Jain's index {jain:.4}: target (0.8 to 1.25, Jain ≥ 0.95) {}",
            if fair { "met" } else { "MISSED" }
        );
        println!("redis commands per 1,000 decisions: {per_1000:.3}");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
