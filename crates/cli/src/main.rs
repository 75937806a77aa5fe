//! `limitcore`: the command line of limitcore's tools.
//!
//! ```text
//! limitcore replay [LOG] [--quota 10/s] [--burst N] [--global QUOTA]
//!     [--algorithms gcra,token-bucket,fixed-window,sliding-window,sliding-log,leaky-bucket]
//!     [--threads N] [--top K] [--json] [--plot FILE.svg]
//! limitcore pace [--rate R] [--workers W] [--seconds D] [--json] [--live] [--spin-us S]
//!     [--work-ns N] [--governor-burst B]
//! limitcore copy SRC DST --rate 64MiB/s [--burst 1MiB] [--json]
//! limitcore lanes [--rate 64MiB/s] [--burst 1MiB] [--seconds 10] [--json]
//! limitcore bench [--threads 1,2,4] [--seconds 1] [--warmup S] [--contenders gcra,...]
//!     [--no-pin] [--json] [--plot FILE.svg]
//! ```
//!
//! From the repository: `cargo run --release -p limitcore-cli -- replay ...`; installed with
//! `cargo install --path crates/cli`. The work is done by the `limitcore_cli` library
//! (`src/lib.rs`); this file parses the arguments, draws progress bars and prints.

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use limitcore::Quota;
use limitcore_cli::copy::{self, Failure};
use limitcore_cli::engine::{self, Algorithm, Settings};
use limitcore_cli::pace::{Comparison, Config, Schedule};
use limitcore_cli::scale::{self, Contender};
use limitcore_cli::{report, trace};
use std::io::{BufReader, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// limitcore's tools: replay access logs through every limiter, pace a load generator, copy a
/// file at a byte rate, measure how the limiters scale.
#[derive(Debug, Parser)]
#[command(name = "limitcore", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Replay(ReplayArgs),
    Pace(PaceArgs),
    Copy(CopyArgs),
    Lanes(limitcore_cli::lanes::Args),
    Bench(BenchArgs),
}

/// Replay an access log (or a synthetic trace) through limitcore's limiters.
///
/// LOG is a NASA-HTTP TSV, an SEC EDGAR CSV or an Apache/nginx combined log, detected from
/// its content; whole-second timestamps are spread evenly within their second. Without LOG a
/// deterministic synthetic trace is generated (2,000 clients with heavy-tailed rates and
/// bursts over 10 minutes, seed 42).
///
/// For each algorithm it prints requests, admitted, denied, clients limited, the most
/// requests admitted for one client in one window of the quota's period beside what the
/// algorithm promises, the decisions that differ from the algorithm's reference model
/// (always 0), decisions per second, and the top clients by denials; then the core's counters
/// of each algorithm's decisions (limitcore::Counted: admitted, refused, rate-limited, final,
/// permits), which must agree with the table. Malformed lines are counted and listed with
/// their line numbers.
///
/// Exit status: 0 when every check held, 1 if a decision differs from the reference model, a
/// promise is broken or the counters disagree with the table, 2 on an error (unreadable log,
/// a quota no algorithm can take).
#[derive(Debug, Args)]
struct ReplayArgs {
    /// NASA-HTTP TSV, EDGAR CSV or combined-format log; a synthetic trace if absent.
    log: Option<PathBuf>,
    /// The per-client quota, e.g. "10/s", "600/min burst 20".
    #[arg(long, default_value = "10/s")]
    quota: Quota,
    /// The per-client burst (overrides a burst given in --quota); the window algorithms
    /// (fixed-window, sliding-window, sliding-log) have none and run on the count per period.
    #[arg(long)]
    burst: Option<u32>,
    /// A global quota over all clients, applied together with the per-client one (all or
    /// nothing, every algorithm; runs on one thread).
    #[arg(long)]
    global: Option<Quota>,
    /// Comma-separated algorithms to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "gcra,token-bucket,fixed-window,sliding-window,sliding-log,leaky-bucket"
    )]
    algorithms: Vec<Algorithm>,
    /// Threads for the replay (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// How many top clients by denials to list.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Draw offered vs admitted requests per second for the busiest clients into this SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// An open-loop load generator paced by limitcore's LeakyBucket, beside governor's
/// until_ready.
///
/// W worker threads share one pacer at R requests per second for D seconds: each send's start
/// is fixed in advance by a LeakyBucket reservation; a worker sleeps, then spins the last
/// stretch, until that instant, sends (a no-op by default) and records how late it started.
/// Then the same W threads send paced by a governor::RateLimiter::direct of the same rate,
/// each awaiting until_ready() on its own current-thread tokio runtime. Use W <= cores for
/// meaningful lateness.
///
/// Exit status: 0 after both runs, 2 on parameters out of range, 1 if a run failed.
#[derive(Debug, Args)]
struct PaceArgs {
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

/// Copy a file at a byte rate through limitcore's paced writer, and report the pace.
///
/// SRC is written to DST (created or truncated) through limitcore::io::Paced on a Budget of
/// --rate: each write takes at most a burst of bytes, after waiting for their permits (first
/// come, first served). A progress bar is drawn on stderr when it is a terminal (not with
/// --json). Then it prints the bytes, the seconds (from the start to the return of the last
/// write), the achieved rate, and the most bytes written in any 1 s window beside its bound,
/// rate x 1 s + burst.
///
/// Exit status: 0 when the whole file was copied, 1 if reading or writing failed part of the
/// way (the report, or the error, says what was copied; the copy is not done), 2 on an error
/// before copying (a bad rate or burst, an unreadable source, an unwritable destination).
#[derive(Debug, Args)]
struct CopyArgs {
    /// The file to copy.
    #[arg(value_name = "SRC")]
    source: PathBuf,
    /// The file to write (created or truncated).
    #[arg(value_name = "DST")]
    destination: PathBuf,
    /// Bytes per period in the quota text form: 64MiB/s, 2GB/s, 500k/100ms; an optional
    /// " burst B" sets the burst.
    #[arg(long)]
    rate: String,
    /// The most bytes at once, e.g. 1MiB (overrides a burst in --rate). Default: 1/64 s of
    /// the rate or 1 MiB, whichever is smaller.
    #[arg(long)]
    burst: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// How each limiter scales: decisions/s from one thread to every core (and twice the cores),
/// beside governor, tokio's Semaphore, leaky-bucket and a bare atomic add, in one run.
///
/// Each contender runs under an admitting quota (every decision admitted) and a refusing one
/// (every decision refused) on 1, 2, 4, ... threads up to the cores, the cores, and twice the
/// cores, all threads sharing one limiter built fresh for the point and pinned to a core each
/// (where the OS allows it). The threads start together on a barrier after a warm-up; the
/// point's time is the wall clock between the barrier's release and the stop flag. Prints the
/// machine (cores, CPU model, limitcore's clock), then per quota: decisions/s in total and
/// per thread, each limitcore contender's ratio to its peer in the same run (the pairs are
/// printed), and the efficiency against one thread (per-thread rate ÷ the 1-thread rate).
///
/// Contenders: gcra, token-bucket, fixed-window, sliding-window, budget, counted-gcra,
/// keyed-hot, keyed-spread (10^5 keys), keyed-hot-papaya and keyed-spread-papaya (the same
/// on PapayaStore instead of the default DashMapStore), permits (acquire + release); the
/// peers governor, governor-keyed-hot, governor-keyed-spread, tokio-semaphore, leaky-bucket;
/// the floor fetch-add-shared (one word) and fetch-add-per-thread (one cache-padded word
/// each).
///
/// Exit status: 0 after the run, 2 on parameters out of range, 1 if a contender could not be
/// set up or the plot could not be written.
#[derive(Debug, Args)]
struct BenchArgs {
    /// Comma-separated thread counts (1 is always measured: the efficiency's base).
    /// Default: 1, 2, 4, ... up to the cores, the cores, and twice the cores.
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Seconds measured per point (each contender, quota and thread count).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Seconds of warm-up per point, not counted. Default: a fifth of --seconds, between
    /// 0.01 and 0.2.
    #[arg(long)]
    warmup: Option<f64>,
    /// Comma-separated contenders (default: all); the peers of limitcore's are added for
    /// their ratios.
    #[arg(long, value_delimiter = ',')]
    contenders: Option<Vec<Contender>>,
    /// Let the OS place the threads (no pinning).
    #[arg(long)]
    no_pin: bool,
    /// Print the report (every point) as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Draw decisions/s against threads (both log scales), one line per contender, into
    /// this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Replay(args) => match replay(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(message) => {
                eprintln!("limitcore replay: {message}");
                ExitCode::from(2)
            }
        },
        Command::Pace(args) => pace(args),
        Command::Copy(args) => copy(args),
        Command::Lanes(args) => limitcore_cli::lanes::main(args),
        Command::Bench(args) => bench(args),
    }
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {percent:>3}% {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar
}

/// `limitcore replay`; returns whether every check held.
fn replay(args: ReplayArgs) -> Result<bool, String> {
    let quota = match args.burst {
        Some(burst) => args
            .quota
            .with_burst(burst)
            .map_err(|e| format!("--burst: {e}"))?,
        None => args.quota,
    };
    let (trace, source) = match &args.log {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let bar = progress(size, "reading");
            let trace = trace::read(BufReader::new(file), |bytes| bar.inc(bytes))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            bar.finish_and_clear();
            (trace, path.display().to_string())
        }
        None => (
            trace::synthetic(2_000, 600, 42),
            "generated, seed 42".to_owned(),
        ),
    };
    let settings = Settings {
        quota,
        global: args.global,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    let bar = progress(args.algorithms.len() as u64, "replaying");
    let mut outcomes = Vec::new();
    let mut skipped = Vec::new();
    for &algorithm in &args.algorithms {
        match engine::replay(&trace, algorithm, &settings) {
            Ok(outcome) => outcomes.push(outcome),
            Err(why) => skipped.push(why),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if outcomes.is_empty() {
        return Err(format!("no algorithm could run: {}", skipped.join("; ")));
    }
    let report = report::Report::new(&trace, &source, &settings, &outcomes, &skipped, args.top);
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    if let Some(path) = &args.plot {
        report::plot(path, &trace, &outcomes[0], quota, 3)?;
        if !args.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(outcomes
        .iter()
        .all(|o| o.differing == 0 && o.bound_holds() && o.counts_agree()))
}

/// `limitcore pace`.
fn pace(args: PaceArgs) -> ExitCode {
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
    if let Err(e) = config.validate() {
        eprintln!("limitcore pace: {e}");
        return ExitCode::from(2);
    }
    let comparison = match Comparison::run(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("limitcore pace: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        match comparison.json() {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("limitcore pace: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        print!("{}", comparison.text());
    }
    ExitCode::SUCCESS
}

/// `limitcore copy`.
fn copy(args: CopyArgs) -> ExitCode {
    let settings = match copy::Settings::new(
        &args.source,
        &args.destination,
        &args.rate,
        args.burst.as_deref(),
    ) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("limitcore copy: {e}");
            return ExitCode::from(2);
        }
    };
    let size = std::fs::metadata(&args.source).map_or(0, |m| m.len());
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message("copying");
        bar
    };
    let outcome = copy::run(&settings, &mut |bytes| bar.inc(bytes));
    bar.finish_and_clear();
    match outcome {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            ExitCode::SUCCESS
        }
        Err(Failure::Setup(e)) => {
            eprintln!("limitcore copy: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Partial(report)) => {
            let of = report
                .source_bytes
                .map_or(String::new(), |total| format!(" of {total}"));
            eprintln!(
                "limitcore copy: {}; {} bytes{of} copied, {} is incomplete",
                report.error.as_deref().unwrap_or("failed"),
                report.bytes,
                report.destination
            );
            if args.json {
                println!("{}", report.json());
            }
            ExitCode::from(1)
        }
    }
}

/// `limitcore bench`.
fn bench(args: BenchArgs) -> ExitCode {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let defaults = scale::Config::new(cores);
    let config = scale::Config {
        contenders: args.contenders.unwrap_or(defaults.contenders),
        threads: args.threads.unwrap_or(defaults.threads),
        seconds: args.seconds,
        warmup: args.warmup,
        pin: !args.no_pin,
    };
    if let Err(e) = config.validate() {
        eprintln!("limitcore bench: {e}");
        return ExitCode::from(2);
    }
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        progress(config.points() as u64, "measuring")
    };
    let report = scale::run(&config, &mut |point| {
        bar.set_message(format!("{} {}", point.contender, point.threads));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("limitcore bench: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    if let Some(path) = &args.plot {
        if let Err(e) = scale::plot(path, &report) {
            eprintln!("limitcore bench: {e}");
            return ExitCode::from(1);
        }
        if !args.json {
            println!("plot: {}", path.display());
        }
    }
    ExitCode::SUCCESS
}
