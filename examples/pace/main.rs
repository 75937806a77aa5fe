//! `pace`: an open-loop load generator paced by [`LeakyBucket`](limitcore::LeakyBucket)
//! reservations, beside the same run paced by governor's `until_ready`.
//!
//! `W` worker threads share one pacer at `R` requests per second for `D` seconds. Each send
//! has a scheduled start given by the pacer (`reserve_n_at`), fixed in advance and
//! independent of how long sends take; a worker sleeps, then spins the last stretch, until
//! that instant, "sends" (a no-op by default) and records how late it started. Then the same
//! `W` threads send paced by a `governor::RateLimiter::direct` of the same rate, each awaiting
//! `until_ready()` on its own current-thread tokio runtime. The engine and the exact
//! definitions are in `pacing.rs`.
//!
//! ```text
//! cargo run --release --example pace -- [--rate R] [--workers W] [--seconds D] [--json]
//!     [--live] [--spin-us S] [--work-ns N] [--governor-burst B]
//! cargo run --release --example pace                       # 10000/s, 2 workers, 2 s
//! cargo run --release --example pace -- --rate 50000 --workers 2 --seconds 3
//! ```
//!
//! The figures, for each run (`governor / limitcore` in the last column):
//!
//! - `sends`: requests sent with a start in the run's `D` seconds.
//! - `rate = sends / D`: the paced rate. For the open-loop pacer this is exactly the slot
//!   count `⌈D / T⌉` over `D` (`T = ⌈10⁹ / R⌉` ns).
//! - `wall rate = (sends − 1) / (last actual start − first actual start)`: the rate of the
//!   real send times, lateness included.
//! - `lateness vs schedule` (limitcore only): actual start − the reservation's start, µs
//!   (p50, p99, max). Governor does not expose a scheduled time.
//! - `lateness vs t0 + k/R` (both, the comparable measure): sort a run's sends by actual
//!   start; the k-th should have started at `t0 + k / R`; actual − that, µs (min, p50, p99,
//!   max). Signed: a governor send may be early by its interval's rounding.
//! - `slip` (limitcore only): how much the pacer's schedule lost to idle time, 0 in the
//!   open loop by construction; with `--live` (reservations at the live clock, the way a
//!   server uses `reserve`) it is the time lost whenever every worker was late.
//!
//! `--json` prints one JSON object instead: `config`, `limitcore`, `governor` (the figures
//! above, lateness in µs) and `ratio` (`governor / limitcore`, `null` where undefined).
//!
//! Lateness is the noisy figure: it is the scheduling latency of the machine (a spinning
//! worker that keeps its CPU starts within a clock read of its slot; one that is preempted
//! starts when it runs again). Use `W ≤ cores` for meaningful lateness.

mod pacing;

use clap::Parser;
use pacing::{Config, Percentiles, Schedule, Summary};
use serde::Serialize;
use std::time::Duration;

/// An open-loop load generator paced by limitcore's LeakyBucket, beside governor's
/// until_ready.
#[derive(Debug, Parser)]
#[command(name = "pace")]
struct Args {
    /// R: requests per second.
    #[arg(long, default_value_t = 10_000)]
    rate: u32,
    /// W: worker threads sharing one pacer.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// D: seconds of scheduled sends.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Reserve at the live clock reading (closed loop: the schedule slips when every worker
    /// is late) instead of the run's start (open loop).
    #[arg(long)]
    live: bool,
    /// Spin (instead of sleeping) for the last S µs of each wait.
    #[arg(long, default_value_t = 100)]
    spin_us: u64,
    /// Busy work of one send, in ns (0: a no-op).
    #[arg(long, default_value_t = 0)]
    work_ns: u64,
    /// The governor limiter's burst (governor's `per_second(R)` alone has burst R).
    #[arg(long, default_value_t = 1)]
    governor_burst: u32,
}

/// `governor / limitcore` for the figures where both are defined and the divisor is not 0.
#[derive(Debug, Serialize)]
struct Ratio {
    sends: Option<f64>,
    rate: Option<f64>,
    wall_rate: Option<f64>,
    ideal_lateness_p50: Option<f64>,
    ideal_lateness_p99: Option<f64>,
    ideal_lateness_max: Option<f64>,
}

/// The `--json` output.
#[derive(Debug, Serialize)]
struct Report<'a> {
    config: &'a Config,
    cores: usize,
    interval_ns: u64,
    limitcore: &'a Summary,
    governor: &'a Summary,
    ratio: Ratio,
}

fn ratio(governor: Option<f64>, limitcore: Option<f64>) -> Option<f64> {
    match (governor, limitcore) {
        (Some(g), Some(l)) if l != 0.0 && l.is_finite() && g.is_finite() => Some(g / l),
        _ => None,
    }
}

fn ideal(s: &Summary, f: fn(&Percentiles) -> f64) -> Option<f64> {
    s.ideal_lateness_us.as_ref().map(f)
}

fn main() {
    let args = Args::parse();
    let config = Config {
        schedule: if args.live {
            Schedule::Live
        } else {
            Schedule::Open
        },
        spin: Duration::from_micros(args.spin_us),
        work: Duration::from_nanos(args.work_ns),
        governor_burst: args.governor_burst,
        ..Config::new(args.rate, args.workers, args.seconds)
    };
    let interval_ns = match config.validate().and_then(|()| config.interval_ns()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("pace: {e}");
            std::process::exit(2);
        }
    };
    let fail = |e: String| -> ! {
        eprintln!("pace: {e}");
        std::process::exit(1);
    };
    let lc = pacing::run_limitcore(&config)
        .unwrap_or_else(|e| fail(e))
        .summary();
    let gov = pacing::run_governor(&config)
        .unwrap_or_else(|e| fail(e))
        .summary();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let r = Ratio {
        sends: ratio(Some(gov.sends as f64), Some(lc.sends as f64)),
        rate: ratio(Some(gov.rate), Some(lc.rate)),
        wall_rate: ratio(gov.wall_rate, lc.wall_rate),
        ideal_lateness_p50: ratio(ideal(&gov, |p| p.p50), ideal(&lc, |p| p.p50)),
        ideal_lateness_p99: ratio(ideal(&gov, |p| p.p99), ideal(&lc, |p| p.p99)),
        ideal_lateness_max: ratio(ideal(&gov, |p| p.max), ideal(&lc, |p| p.max)),
    };
    if args.json {
        let report = Report {
            config: &config,
            cores,
            interval_ns,
            limitcore: &lc,
            governor: &gov,
            ratio: r,
        };
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => fail(e.to_string()),
        }
        return;
    }
    print_table(&config, cores, interval_ns, &lc, &gov, &r);
}

/// A value in a column, or `—`.
fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.decimals$}"))
}

/// A ratio in a column: two decimals, or two significant digits from 1000 up.
fn ratio_cell(v: Option<f64>) -> String {
    match v {
        Some(v) if v.abs() >= 1_000.0 => format!("{v:.1e}"),
        _ => cell(v, 2),
    }
}

fn print_table(
    config: &Config,
    cores: usize,
    interval_ns: u64,
    lc: &Summary,
    gov: &Summary,
    r: &Ratio,
) {
    let work = if config.work.is_zero() {
        "no-op".to_string()
    } else {
        format!("{} ns busy work", config.work.as_nanos())
    };
    println!(
        "pace: {}/s for {} s, {} workers on {} cores, send = {}",
        config.rate, config.seconds, config.workers, cores, work
    );
    match config.schedule {
        Schedule::Open => println!(
            "limitcore  LeakyBucket::reserve_n_at(1, t0): open loop, slot k at t0 + k·T, \
             T = {interval_ns} ns"
        ),
        Schedule::Live => println!(
            "limitcore  LeakyBucket::reserve_n_at(1, now): live clock, closed loop, \
             T = {interval_ns} ns"
        ),
    }
    println!(
        "           wait: sleep, then spin the last {} µs",
        config.spin.as_micros()
    );
    println!(
        "governor   RateLimiter::direct(per_second({}).allow_burst({})).until_ready(),",
        config.rate, config.governor_burst
    );
    println!("           block_on on a current-thread tokio runtime per worker");
    println!();
    let row = |name: &str, l: Option<f64>, g: Option<f64>, ratio: Option<f64>, d: usize| {
        println!(
            "{name:<34} {:>12} {:>12} {:>9}",
            cell(l, d),
            cell(g, d),
            ratio_cell(ratio)
        );
    };
    println!(
        "{:<34} {:>12} {:>12} {:>9}",
        "", "limitcore", "governor", "gov/lc"
    );
    row(
        "sends",
        Some(lc.sends as f64),
        Some(gov.sends as f64),
        r.sends,
        0,
    );
    row(
        "rate = sends / D (/s)",
        Some(lc.rate),
        Some(gov.rate),
        r.rate,
        1,
    );
    row(
        "wall rate = (n−1) / span (/s)",
        lc.wall_rate,
        gov.wall_rate,
        r.wall_rate,
        1,
    );
    row("slip of the schedule (µs)", lc.slip_us, None, None, 1);
    println!("lateness vs own schedule (µs)");
    let sched = |f: fn(&Percentiles) -> f64| lc.schedule_lateness_us.as_ref().map(f);
    row("  p50", sched(|p| p.p50), None, None, 2);
    row("  p99", sched(|p| p.p99), None, None, 2);
    row("  max", sched(|p| p.max), None, None, 2);
    println!("lateness vs t0 + k/R, same for both (µs)");
    row(
        "  min",
        ideal(lc, |p| p.min),
        ideal(gov, |p| p.min),
        None,
        2,
    );
    row(
        "  p50",
        ideal(lc, |p| p.p50),
        ideal(gov, |p| p.p50),
        r.ideal_lateness_p50,
        2,
    );
    row(
        "  p99",
        ideal(lc, |p| p.p99),
        ideal(gov, |p| p.p99),
        r.ideal_lateness_p99,
        2,
    );
    row(
        "  max",
        ideal(lc, |p| p.max),
        ideal(gov, |p| p.max),
        r.ideal_lateness_max,
        2,
    );
}
