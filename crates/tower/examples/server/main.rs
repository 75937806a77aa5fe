//! A rate-limited HTTP server: `GET /` answers 200 "ok" behind the layer; with the feature
//! `metrics`, `GET /metrics` answers the layers' metrics in Prometheus' text format.
//!
//! ```text
//! cargo run --release -p limitcore-tower --features axum,metrics --example server -- --addr 127.0.0.1:8080 --quota "5/s"
//!     [--key global|peer|xff:<n>|header:<name>] [--mode reject|delay|dry-run]
//!     [--max-wait-ms 1000] [--algorithm gcra|token-bucket|…] [--headers] [--max-keys N]
//!     [--no-outcome] [--limiter limitcore|none|governor|concurrency|tower-concurrency]
//!     [--concurrency N] [--queue-ms MS] [--policy-name NAME]
//! curl -s http://127.0.0.1:8080/metrics | grep limitcore_
//! ```
//!
//! `--key xff:<n>`: `n` trusted proxies stand in front of the server, so the client is the
//! `n`-th `X-Forwarded-For` entry from the right (`xff:1`: the rightmost, appended by the
//! one proxy). The contenders of the load comparison (`--limiter`) are described in
//! `app.rs`, which holds the application; `tests.rs` tests it with its `/metrics`
//! page (`cargo test -p limitcore-tower --features axum,metrics --example server`, and
//! `cargo test --workspace --all-features`).
//!
//! **`/metrics`** (feature `metrics`): the `metrics-exporter-prometheus` recorder is
//! installed as the process's recorder before any layer is built (the layers register their
//! handles when built), and its page is served on `GET /metrics` **outside the layers**: a
//! scrape is never rate-limited, shed or counted, so it works while every client is refused.
//! Histograms (`limitcore_wait_seconds`) come as Prometheus histograms with the buckets
//! below; the recorder's upkeep runs every 5 s.

mod app;
#[cfg(all(test, feature = "metrics"))]
mod tests;

use clap::Parser;
use std::io::Write;

#[tokio::main]
async fn main() -> Result<(), app::Error> {
    let args = app::Args::parse();
    let page = metrics_page()?;
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    let metrics = if page.is_some() { ", /metrics" } else { "" };
    println!("listening on http://{addr} ({}{metrics})", args.describe());
    std::io::stdout().flush()?;
    app::run(listener, args, page).await
}

/// The Prometheus recorder, installed as the process's recorder, and its handle for the
/// page.
#[cfg(feature = "metrics")]
fn metrics_page() -> Result<Option<metrics_exporter_prometheus::PrometheusHandle>, app::Error> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("limitcore_wait_seconds".to_owned()),
            &[
                0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ],
        )?
        .install_recorder()?;
    // Without its HTTP listener the recorder leaves its upkeep (draining histogram samples
    // between scrapes) to the application.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(Some(handle))
}

/// Without the feature `metrics` the layers report nothing: no page.
#[cfg(not(feature = "metrics"))]
fn metrics_page() -> Result<Option<metrics_exporter_prometheus::PrometheusHandle>, app::Error> {
    Ok(None)
}
