//! Replay an access log through every limiter: what would each have done to this traffic?
//!
//! ```text
//! cargo run --release --example replay -- [LOG] [--quota 10/s] [--burst N] [--global QUOTA]
//!     [--algorithms gcra,token-bucket,fixed-window,sliding-window,sliding-log,leaky-bucket]
//!     [--threads N] [--top K] [--json] [--plot FILE.svg]
//! ```
//!
//! `LOG` is a NASA-HTTP TSV, an SEC EDGAR CSV or an Apache/nginx combined log, detected from
//! its content (see `trace.rs`; whole-second timestamps are spread evenly within their
//! second). Without `LOG` a deterministic synthetic trace is generated in-process (2,000
//! clients with heavy-tailed rates and bursts over 10 minutes), so the command works on a
//! fresh machine.
//!
//! For each algorithm it prints requests, admitted, denied, clients limited, the most
//! requests admitted for one client in one window of length `period` beside what the
//! algorithm promises, the number of decisions that differ from the algorithm's plain
//! reference model (always 0, or the run fails), decisions per second, and the top clients by
//! denials. The limiter is per client (`--quota`, default the SEC's published 10/s); with
//! `--global` a second limit over all clients applies too, all or nothing. The exit status
//! is 1 if any decision differs from the reference or any promise is broken.
//!
//! `--plot FILE.svg` draws offered against admitted requests per second for the busiest
//! clients under the first algorithm; `--json` prints the whole report as JSON instead.

mod engine;
mod report;
mod trace;

use clap::Parser;
use engine::{Algorithm, Settings};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use limitcore::Quota;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

/// Replay an access log (or a synthetic trace) through limitcore's limiters.
#[derive(Debug, Parser)]
#[command(name = "replay")]
struct Args {
    /// NASA-HTTP TSV, EDGAR CSV or combined-format log; a synthetic trace if absent.
    log: Option<PathBuf>,
    /// The per-client quota, e.g. "10/s", "600/min burst 20".
    #[arg(long, default_value = "10/s")]
    quota: Quota,
    /// The per-client burst (overrides a burst given in --quota).
    #[arg(long)]
    burst: Option<u32>,
    /// A global quota over all clients, applied together with the per-client one (all or
    /// nothing; gcra and leaky-bucket only; runs on one thread).
    #[arg(long)]
    global: Option<Quota>,
    /// Comma-separated algorithms to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "gcra,token-bucket,fixed-window,sliding-window,sliding-log,leaky-bucket",
        value_parser = parse_algorithm
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

fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).ok_or_else(|| {
        let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        format!(
            "unknown algorithm {name:?}; expected one of {}",
            names.join(", ")
        )
    })
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

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("replay: {message}");
            ExitCode::from(2)
        }
    }
}

/// Returns whether every check held.
fn run(args: Args) -> Result<bool, String> {
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
    Ok(outcomes.iter().all(|o| o.differing == 0 && o.bound_holds()))
}
