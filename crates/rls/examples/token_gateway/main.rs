//! A token gateway a gateway operator can run (issue 37): an OpenAI-style upstream (a
//! local axum server answering each chat completion with random token usage), and
//! concurrent clients sent through the tower layer (`limitcore-tower` in an axum gateway)
//! and through this rate-limit service (this program as the proxy, as Envoy would be),
//! each with reserve-then-settle and with check-then-report, against one tenant's limit
//! of tokens a minute. It prints the tokens each run admitted against the limit.
//!
//! ```text
//! cargo run --release -p limitcore-rls --example token_gateway -- \
//!     [--requests 1000] [--limit 10000] [--estimate 100] [--max-tokens 100] [--seed 37] \
//!     [--latency-ms MS] [--refused-hits record|drop]
//! ```
//!
//! Everything runs on 127.0.0.1 with ports chosen by the system. The limit is a fixed
//! window of a minute, opened as each run starts; a run takes well under a second, so each
//! run's requests fall in one window, and "tokens admitted in the window" is what the run
//! admitted. `scenario.rs` has the scenario; `tests/token_gateway.rs` runs it with the
//! issue's numbers on a frozen clock.

mod scenario;

use clap::Parser;
use limitcore_rls::RefusedHits;
use scenario::{Answer, Scenario, Time};
use std::process::ExitCode;
use std::time::Duration;

/// The token gateway demo: reserve-then-settle beside check-then-report, through the
/// tower layer and through the rate-limit service.
#[derive(Debug, Parser)]
#[command(name = "token_gateway")]
struct Args {
    /// Concurrent requests per run, all sent at once.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// The tenant's limit, in tokens a minute.
    #[arg(long, default_value_t = 10_000)]
    limit: u32,
    /// Reserve-then-settle's estimate per request, in tokens.
    #[arg(long, default_value_t = 100)]
    estimate: u32,
    /// The upstream's largest answer: each answer's total is uniform in 0..=max-tokens.
    #[arg(long, default_value_t = 100)]
    max_tokens: u32,
    /// The seed of the upstream's token counts (request i gets the i-th draw).
    #[arg(long, default_value_t = 37)]
    seed: u64,
    /// Answer each request after this many milliseconds, as the requests come. Without
    /// it, the upstream holds every answer until all the run's requests are decided: all
    /// of them in flight at once, the same on any machine.
    #[arg(long)]
    latency_ms: Option<u64>,
    /// The service's --refused-hits (record: a refused request's hits are recorded past
    /// the limit; drop: a refused request changes nothing).
    #[arg(long, default_value = "record")]
    refused_hits: RefusedHits,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let scenario = Scenario {
        requests: args.requests,
        limit: args.limit,
        estimate: args.estimate,
        max_tokens: args.max_tokens,
        seed: args.seed,
        answer: match args.latency_ms {
            Some(ms) => Answer::After(Duration::from_millis(ms)),
            None => Answer::WhenAllDecided,
        },
        refused_hits: args.refused_hits,
    };
    if let Err(e) = scenario.validate() {
        eprintln!("token_gateway: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("token_gateway: the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(scenario::run(&scenario, Time::Real)) {
        Ok(outcomes) => {
            print!("{}", scenario::report(&scenario, Time::Real, &outcomes));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("token_gateway: {e}");
            ExitCode::FAILURE
        }
    }
}
