//! The replay's report: a table for people, JSON for programs, an SVG plot.
//!
//! # Examples
//!
//! ```
//! use limitcore_cli::engine::{self, Algorithm, Settings};
//! use limitcore_cli::report::Report;
//! use limitcore_cli::trace;
//!
//! let trace = trace::synthetic(20, 10, 1);
//! let settings = Settings { quota: "10/s".parse()?, global: None, threads: 1 };
//! let outcomes = vec![engine::replay(&trace, Algorithm::Gcra, &settings)?];
//! let report = Report::new(&trace, "generated, seed 1", &settings, &outcomes, &[], 3);
//! assert!(report.text().starts_with("trace: generated, seed 1 (synthetic): "));
//! assert_eq!(report.algorithms[0].algorithm, "gcra");
//! assert!(report.json().contains("\"differing_decisions\": 0"));
//! // The core's counters, beside the table's own columns.
//! let row = &report.algorithms[0];
//! assert_eq!((row.counters.admitted, row.counters.refused), (row.admitted, row.denied));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::engine::{Outcome, Settings};
use crate::trace::{Request, Trace};
use limitcore::{Counts, Quota};
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// A client's entry in an algorithm's top-by-denials list ([`Row::top_denied`]).
#[derive(Debug, Serialize)]
pub struct TopClient {
    /// Its name (host or IP).
    pub client: String,
    /// Requests it offered.
    pub requests: u64,
    /// Requests refused.
    pub denied: u64,
}

/// The core's counters of one algorithm's replay ([`limitcore::Counted`] around the deciding
/// limiters: [`Outcome::counts`]), as the report shows them. They count the same decisions
/// as the table's columns, by another route: `admitted` and `refused` equal [`Row::admitted`]
/// and [`Row::denied`] ([`Outcome::counts_agree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowCounters {
    /// Decisions admitted.
    pub admitted: u64,
    /// Decisions refused: `rate_limited + final_refusals`.
    pub refused: u64,
    /// Refusals that a wait would cure ([`limitcore::Denied::RateLimited`]).
    pub rate_limited: u64,
    /// Refusals that no wait would cure ([`limitcore::Denied::is_final`]; none in a replay,
    /// whose requests ask for one permit each).
    pub final_refusals: u64,
    /// Permits charged by the admitted decisions (one each in a replay).
    pub permits: u64,
}

impl From<&Counts> for RowCounters {
    fn from(c: &Counts) -> RowCounters {
        RowCounters {
            admitted: c.admitted,
            refused: c.refused(),
            rate_limited: c.rate_limited,
            final_refusals: c.final_refusals,
            permits: c.permits,
        }
    }
}

/// One algorithm's row of the report, from its [`Outcome`].
#[derive(Debug, Serialize)]
pub struct Row {
    /// The algorithm's command-line name.
    pub algorithm: &'static str,
    /// Requests offered.
    pub requests: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied.
    pub denied: u64,
    /// Clients with at least one refusal.
    pub clients_limited: u64,
    /// The most admitted for one client in one window of the promise's kind.
    pub max_in_window: u64,
    /// The client it was.
    pub max_in_window_client: String,
    /// What the algorithm promises for that number.
    pub promise: u64,
    /// The promise's rule.
    pub promise_rule: &'static str,
    /// The most admitted for one client in any window `[t, t + period)`, whatever the
    /// promise's kind.
    pub max_in_any_window: u64,
    /// Decisions that differ from the reference model (must be 0).
    pub differing_decisions: u64,
    /// The first differing decision, if any.
    pub first_difference: Option<String>,
    /// Decisions per second of wall time in the decision phase
    /// ([`Outcome::decisions_per_second`]).
    pub decisions_per_second: f64,
    /// Threads the decisions ran on.
    pub threads: usize,
    /// Keys the keyed limiters held at the end (the rest were evicted as idle).
    pub keys_held_at_end: usize,
    /// Top clients by denials.
    pub top_denied: Vec<TopClient>,
    /// The core's counters of the same decisions.
    pub counters: RowCounters,
    /// Whether they agree with `admitted` and `denied` ([`Outcome::counts_agree`]).
    pub counters_agree: bool,
}

/// The whole report of a replay: the trace, the settings and one [`Row`] per algorithm.
///
/// Serialised as is by [`Report::json`] (field names are the JSON keys).
#[derive(Debug, Serialize)]
pub struct Report {
    /// Where the trace came from.
    pub source: String,
    /// Its format.
    pub format: &'static str,
    /// Non-empty lines read (with the header and malformed ones).
    pub lines: u64,
    /// Requests in the trace.
    pub requests: u64,
    /// Distinct clients.
    pub clients: u64,
    /// From first to last request, in seconds.
    pub span_seconds: f64,
    /// Malformed lines.
    pub malformed_lines: u64,
    /// The first (at most 10) malformed lines: (1-based line number, reason).
    pub malformed_first: Vec<(usize, String)>,
    /// The per-client quota, e.g. `"10/s"`.
    pub quota: String,
    /// The global quota, if any.
    pub global: Option<String>,
    /// One row per algorithm run.
    pub algorithms: Vec<Row>,
    /// Algorithms that could not run, and why.
    pub skipped: Vec<String>,
}

impl Report {
    /// Gather the report of a replay of `trace` (from `source`, a file name or a description)
    /// with `settings`: a row per outcome, in order, each listing its `top` clients by
    /// denials; `skipped` lists the algorithms that could not run, and why.
    pub fn new(
        trace: &Trace,
        source: &str,
        settings: &Settings,
        outcomes: &[Outcome],
        skipped: &[String],
        top: usize,
    ) -> Report {
        let name = |i: usize| trace.clients.get(i).cloned().unwrap_or_default();
        let algorithms = outcomes
            .iter()
            .map(|o| {
                let (worst, max_in_window) = o.worst_window();
                let admitted = o.admitted_count();
                let mut by_denials: Vec<usize> = (0..o.clients.len())
                    .filter(|&c| o.clients[c].denied > 0)
                    .collect();
                by_denials.sort_by_key(|&c| (std::cmp::Reverse(o.clients[c].denied), c));
                Row {
                    algorithm: o.algorithm.name(),
                    requests: o.requests(),
                    admitted,
                    denied: o.requests() - admitted,
                    clients_limited: o.clients_limited(),
                    max_in_window,
                    max_in_window_client: name(worst),
                    promise: o.promise.bound,
                    promise_rule: o.promise.rule,
                    max_in_any_window: o
                        .clients
                        .iter()
                        .map(|c| c.max_any_window)
                        .max()
                        .unwrap_or(0),
                    differing_decisions: o.differing,
                    first_difference: o.first_difference.clone(),
                    decisions_per_second: o.decisions_per_second(),
                    threads: o.threads,
                    keys_held_at_end: o.keys_held,
                    top_denied: by_denials
                        .into_iter()
                        .take(top)
                        .map(|c| TopClient {
                            client: name(c),
                            requests: o.clients[c].requests,
                            denied: o.clients[c].denied,
                        })
                        .collect(),
                    counters: RowCounters::from(&o.counts),
                    counters_agree: o.counts_agree(),
                }
            })
            .collect();
        Report {
            source: source.to_owned(),
            format: trace.format.name(),
            lines: trace.lines as u64,
            requests: trace.requests.len() as u64,
            clients: trace.clients.len() as u64,
            span_seconds: trace.span_ns() as f64 / 1e9,
            malformed_lines: trace.malformed.len() as u64,
            malformed_first: trace
                .malformed
                .iter()
                .take(10)
                .map(|m| (m.line, m.reason.clone()))
                .collect(),
            quota: settings.quota.to_string(),
            global: settings.global.map(|g| g.to_string()),
            algorithms,
            skipped: skipped.to_vec(),
        }
    }

    /// The report as pretty JSON. Serialising cannot fail for this type; if it did, the
    /// result would be `{"error": "..."}`.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as text: a line on the trace (and its first malformed lines), the limit,
    /// a table with a row per algorithm, the promises' rules, the core's counters of every
    /// algorithm, any difference from a reference model, broken promise or disagreement of
    /// the counters, and the top clients by denials.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "trace: {} ({}): {} lines, {} requests, {} clients, {:.1} s; {} malformed lines",
            self.source,
            self.format,
            self.lines,
            self.requests,
            self.clients,
            self.span_seconds,
            self.malformed_lines
        );
        for (line, reason) in &self.malformed_first {
            let _ = writeln!(s, "  line {line}: {reason}");
        }
        // The window algorithms have no burst: say what they ran on.
        let windows = self
            .quota
            .parse::<limitcore::Quota>()
            .ok()
            .filter(|q| q.burst() != q.count())
            .and_then(|q| limitcore::Quota::new(q.count(), q.period()).ok())
            .map_or(String::new(), |w| {
                format!(" (window algorithms, which have no burst: {w})")
            });
        let _ = writeln!(
            s,
            "limit: {} per client{}{}\n",
            self.quota,
            windows,
            self.global.as_ref().map_or(String::new(), |g| format!(
                ", and {g} over all clients (all or nothing)"
            ))
        );
        let _ = writeln!(
            s,
            "{:<15} {:>9} {:>9} {:>9} {:>8} {:>17} {:>7} {:>13} {:>8}",
            "algorithm",
            "requests",
            "admitted",
            "denied",
            "limited",
            "max/window (≤)",
            "differ",
            "decisions/s",
            "threads"
        );
        for r in &self.algorithms {
            let _ = writeln!(
                s,
                "{:<15} {:>9} {:>9} {:>9} {:>8} {:>17} {:>7} {:>13} {:>8}",
                r.algorithm,
                r.requests,
                r.admitted,
                r.denied,
                r.clients_limited,
                format!("{} (≤ {})", r.max_in_window, r.promise),
                r.differing_decisions,
                format_rate(r.decisions_per_second),
                r.threads
            );
        }
        let _ = writeln!(
            s,
            "\nmax/window: the most requests admitted for one client in one window of the quota's \
             period\n(aligned windows for fixed-window, any window otherwise), beside the promise:"
        );
        for r in &self.algorithms {
            let _ = writeln!(s, "  {:<15} {}", r.algorithm, r.promise_rule);
        }
        let _ = writeln!(
            s,
            "\ncore counters (limitcore::Counted around each algorithm's deciding limiter):"
        );
        let _ = writeln!(
            s,
            "{:<15} {:>9} {:>9} {:>12} {:>6} {:>9}",
            "algorithm", "admitted", "refused", "rate-limited", "final", "permits"
        );
        for r in &self.algorithms {
            let c = &r.counters;
            let _ = writeln!(
                s,
                "{:<15} {:>9} {:>9} {:>12} {:>6} {:>9}",
                r.algorithm, c.admitted, c.refused, c.rate_limited, c.final_refusals, c.permits
            );
        }
        for r in &self.algorithms {
            if !r.counters_agree {
                let _ = writeln!(
                    s,
                    "COUNTERS DISAGREE ({}): counted {} admitted, {} refused, {} permits; \
                     the table: {} admitted, {} denied",
                    r.algorithm,
                    r.counters.admitted,
                    r.counters.refused,
                    r.counters.permits,
                    r.admitted,
                    r.denied
                );
            }
            if let Some(first) = &r.first_difference {
                let _ = writeln!(s, "DIFFERENCE ({}): {first}", r.algorithm);
            }
            if r.max_in_window > r.promise {
                let _ = writeln!(
                    s,
                    "BROKEN PROMISE ({}): client {} had {} admitted in one window, promise {}",
                    r.algorithm, r.max_in_window_client, r.max_in_window, r.promise
                );
            }
        }
        if self.algorithms.iter().any(|r| !r.top_denied.is_empty()) {
            let _ = writeln!(s, "\ntop clients by denials (denied/requests):");
        }
        for r in self.algorithms.iter().filter(|r| !r.top_denied.is_empty()) {
            let top: Vec<String> = r
                .top_denied
                .iter()
                .map(|c| format!("{} {}/{}", c.client, c.denied, c.requests))
                .collect();
            let _ = writeln!(s, "  {:<15} {}", r.algorithm, top.join(", "));
        }
        for why in &self.skipped {
            let _ = writeln!(s, "skipped {why}");
        }
        s
    }
}

/// Decisions per second for the table: `12.3 M` from a million up, `456 k` below.
fn format_rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{:.1} M", per_second / 1e6)
    } else {
        format!("{:.0} k", per_second / 1e3)
    }
}

/// The longest trace [`plot`] draws, in seconds (11.6 days): one point per second.
pub const PLOT_MAX_SECONDS: u64 = 1_000_000;

/// Draw offered and admitted requests per second, over the trace's seconds, of the `busiest`
/// clients with the most requests (at least one), one panel each, into the SVG file `path`.
///
/// `outcome` must come from a replay of `trace`; `quota` is only named in the panels' titles.
///
/// # Errors
///
/// An empty trace; a trace spanning more than [`PLOT_MAX_SECONDS`]; drawing or writing the
/// file failed.
pub fn plot(
    path: &Path,
    trace: &Trace,
    outcome: &Outcome,
    quota: Quota,
    busiest: usize,
) -> Result<(), String> {
    let mut order: Vec<usize> = (0..outcome.clients.len()).collect();
    order.sort_by_key(|&c| (std::cmp::Reverse(outcome.clients[c].requests), c));
    order.truncate(busiest.max(1));
    let seconds_of = |r: &Request| r.t / 1_000_000_000;
    let (Some(t0), Some(t1)) = (
        trace.requests.iter().map(seconds_of).min(),
        trace.requests.iter().map(seconds_of).max(),
    ) else {
        return Err("an empty trace has nothing to plot".into());
    };
    if order.is_empty() {
        return Err("a replay without clients has nothing to plot".into());
    }
    // One point per second and series: a few MB at most, never an allocation that fails.
    if t1 - t0 >= PLOT_MAX_SECONDS {
        return Err(format!(
            "plot {}: the trace spans {} s; at most {PLOT_MAX_SECONDS} s (one point per second) \
             can be plotted",
            path.display(),
            t1 - t0 + 1
        ));
    }
    let seconds = (t1 - t0 + 1) as usize;
    // Per panel: offered and admitted per second.
    let mut series = vec![(vec![0u32; seconds], vec![0u32; seconds]); order.len()];
    for (r, &admitted) in trace.requests.iter().zip(&outcome.admitted) {
        if let Some(panel) = order.iter().position(|&c| c == r.client as usize) {
            let s = (seconds_of(r) - t0) as usize;
            series[panel].0[s] += 1;
            series[panel].1[s] += u32::from(admitted);
        }
    }
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let root = SVGBackend::new(path, (1000, 300 * order.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    for ((panel, area), (offered, admitted)) in order
        .iter()
        .zip(root.split_evenly((order.len(), 1)))
        .zip(&series)
    {
        let top = offered.iter().copied().max().unwrap_or(1).max(1);
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!(
                    "{}: {} requests, {} per client ({})",
                    trace.clients.get(*panel).map_or("?", String::as_str),
                    outcome.clients[*panel].requests,
                    quota,
                    outcome.algorithm.name()
                ),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0..seconds as u32, 0..top + 1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("seconds from the trace's start")
            .y_desc("requests / s")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(
                offered.iter().enumerate().map(|(s, &v)| (s as u32, v)),
                &RED,
            ))
            .map_err(|e| err(&e))?
            .label("offered")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .draw_series(LineSeries::new(
                admitted.iter().enumerate().map(|(s, &v)| (s as u32, v)),
                &BLUE,
            ))
            .map_err(|e| err(&e))?
            .label("admitted")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
