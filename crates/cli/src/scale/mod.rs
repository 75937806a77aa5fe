//! `limitcore bench`: how each limiter scales from one thread to every core (and twice as
//! many threads as cores), beside its peers from other crates and the floor of a bare atomic
//! add, in one run of one binary.
//!
//! Every point is one [`Contender`] under one [`QuotaKind`] on `t` threads sharing **one**
//! limiter (built fresh for the point), each thread pinned to a core where the OS allows it
//! (thread `i` to the `i`-th CPU of the process's affinity mask, wrapping around when there
//! are more threads than CPUs). The threads start together on a barrier after a warm-up and
//! count their calls in local variables until a stop flag; the point's time is the wall time
//! between the barrier's release and the flag (`crates/cli/src/scale/measure.rs` gives the
//! details). A point reports decisions per second in total and per thread (and
//! the slowest and fastest thread), the ratio to the contender's peer at the same thread
//! count and quota ([`Contender::peer`]), and the efficiency against one thread: the
//! per-thread rate at `t` threads ÷ the rate at 1 thread (1.0 is perfect scaling; beyond the
//! cores it can be at most `cores / t`).
//!
//! # Examples
//!
//! Two contenders (the peer of `gcra`, governor, is added for its ratio) for 20 ms a point:
//!
//! ```
//! use limitcore_cli::scale::{self, Config, Contender, QuotaKind};
//!
//! let config = Config {
//!     contenders: vec![Contender::Gcra, Contender::FetchAddShared],
//!     threads: vec![1, 2],
//!     seconds: 0.02,
//!     ..Config::new(2)
//! };
//! let report = scale::run(&config, &mut |_point| {})?;
//! assert_eq!(report.added_peers, [Contender::Governor]);
//! let point = report.point(Contender::Gcra, QuotaKind::Refusing, 2).expect("measured");
//! assert!(point.decisions_per_second > 0.0);
//! assert_eq!(point.admitted, 0); // the refusing quota refused every call
//! assert!(point.ratio_to_peer.is_some()); // ÷ governor at 2 threads, refusing
//! assert!(report.text().contains("gcra ÷ governor"));
//! # Ok::<(), String>(())
//! ```

mod contender;
mod machine;
mod measure;
mod plot;
mod table;

pub use contender::{Contender, QuotaKind, Role, UnknownContender, SPREAD_KEYS};
pub use machine::Machine;
pub use plot::plot;

use measure::Timing;
use serde::Serialize;

/// The most threads a point may run.
pub const MAX_THREADS: usize = 4096;

/// The longest point, in seconds.
pub const MAX_SECONDS: f64 = 3600.0;

/// The thread counts measured by default on `cores` cores: 1, 2, 4, … up to the cores, the
/// cores themselves, and twice the cores (oversubscription).
///
/// # Examples
///
/// ```
/// use limitcore_cli::scale::default_threads;
///
/// assert_eq!(default_threads(2), [1, 2, 4]);
/// assert_eq!(default_threads(6), [1, 2, 4, 6, 12]);
/// assert_eq!(default_threads(1), [1, 2]);
/// ```
pub fn default_threads(cores: usize) -> Vec<usize> {
    let cores = cores.clamp(1, MAX_THREADS / 2);
    let mut threads: Vec<usize> = std::iter::successors(Some(1usize), |&t| Some(t * 2))
        .take_while(|&t| t <= cores)
        .collect();
    threads.extend([cores, 2 * cores]);
    threads.sort_unstable();
    threads.dedup();
    threads
}

/// What a run measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The contenders asked for; the run adds the peers of limitcore's that are missing
    /// ([`Report::added_peers`]).
    pub contenders: Vec<Contender>,
    /// Thread counts; the run always measures 1 (the efficiency's base) and measures each
    /// count once, in increasing order.
    pub threads: Vec<usize>,
    /// Seconds measured per point.
    pub seconds: f64,
    /// Seconds of warm-up per point; `None`: a fifth of `seconds`, between 10 and 200 ms.
    pub warmup: Option<f64>,
    /// Pin each thread to a core where the OS allows it.
    pub pin: bool,
}

impl Config {
    /// Every contender on [`default_threads`]`(cores)`, 1 s a point, the default warm-up,
    /// threads pinned.
    pub fn new(cores: usize) -> Config {
        Config {
            contenders: Contender::ALL.to_vec(),
            threads: default_threads(cores),
            seconds: 1.0,
            warmup: None,
            pin: true,
        }
    }

    /// Check the parameters.
    ///
    /// # Errors
    ///
    /// A message naming the option for: no contender; no thread count, or one of 0 or above
    /// [`MAX_THREADS`]; seconds not above 0 (at least 1 ms) or above [`MAX_SECONDS`]; a
    /// warm-up below 0 or above 60 s.
    pub fn validate(&self) -> Result<(), String> {
        if self.contenders.is_empty() {
            return Err("--contenders: name at least one".to_owned());
        }
        if self.threads.is_empty() {
            return Err("--threads: give at least one thread count".to_owned());
        }
        if let Some(&t) = self.threads.iter().find(|&&t| t == 0 || t > MAX_THREADS) {
            return Err(format!("--threads {t}: between 1 and {MAX_THREADS}"));
        }
        if !(self.seconds.is_finite() && (0.001..=MAX_SECONDS).contains(&self.seconds)) {
            return Err(format!(
                "--seconds {}: between 0.001 and {MAX_SECONDS}",
                self.seconds
            ));
        }
        if let Some(w) = self.warmup {
            if !(w.is_finite() && (0.0..=60.0).contains(&w)) {
                return Err(format!("--warmup {w}: between 0 and 60"));
            }
        }
        Ok(())
    }

    /// The warm-up per point, in seconds.
    pub fn warmup_seconds(&self) -> f64 {
        self.warmup.unwrap_or((self.seconds / 5.0).clamp(0.01, 0.2))
    }

    /// The thread counts the run measures: the asked ones and 1, sorted, each once.
    pub fn thread_counts(&self) -> Vec<usize> {
        let mut threads = self.threads.clone();
        threads.push(1);
        threads.sort_unstable();
        threads.dedup();
        threads
    }

    /// The contenders the run measures, in [`Contender::ALL`]'s order: the asked ones and
    /// the peers of limitcore's.
    pub fn contenders_run(&self) -> Vec<Contender> {
        Contender::ALL
            .into_iter()
            .filter(|c| {
                self.contenders
                    .iter()
                    .any(|&asked| asked == *c || asked.peer() == Some(*c))
            })
            .collect()
    }

    /// How many points the run measures (for a progress bar).
    pub fn points(&self) -> usize {
        let series: usize = self
            .contenders_run()
            .iter()
            .map(|c| c.quota_kinds().len())
            .sum();
        series * self.thread_counts().len()
    }
}

/// One measured point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The contender.
    pub contender: Contender,
    /// limitcore's, a peer, or the floor.
    pub role: Role,
    /// The quota it ran under.
    pub quota: QuotaKind,
    /// Threads sharing the one limiter.
    pub threads: usize,
    /// Whether every thread was pinned to its core.
    pub pinned: bool,
    /// The measured wall time, in seconds.
    pub wall_seconds: f64,
    /// Calls made by all threads in that time.
    pub decisions: u64,
    /// Of those, the admitted ones (all of them under an admitting quota, none under a
    /// refusing one, when the quota held; every call for the floor).
    pub admitted: u64,
    /// Decisions per second, all threads together.
    pub decisions_per_second: f64,
    /// Decisions per second per thread: the total ÷ threads.
    pub per_thread_per_second: f64,
    /// The slowest thread's decisions per second.
    pub slowest_thread_per_second: f64,
    /// The fastest thread's decisions per second.
    pub fastest_thread_per_second: f64,
    /// The contender's peer (limitcore's contenders only).
    pub peer: Option<Contender>,
    /// Decisions per second ÷ the peer's at the same threads and quota, in this run
    /// (limitcore's contenders only; `None` also if the peer made no call).
    pub ratio_to_peer: Option<f64>,
    /// Per-thread decisions per second ÷ the same contender's at 1 thread under the same
    /// quota (`None` if that made no call).
    pub efficiency: Option<f64>,
    /// The share of the wall time the threads spent on a CPU: their CPU time ÷ (threads ×
    /// wall time), from Linux's per-thread CPU clock (`None` elsewhere). At most
    /// `cores / threads` when the threads outnumber the cores; below that, other work on the
    /// machine took the threads' cores part of the time ([`Point::crowded`]).
    pub on_cpu: Option<f64>,
}

impl Point {
    /// Whether other work took the point's threads off their cores: their on-CPU share
    /// ([`Point::on_cpu`]) below 90 % of the most it could be on `cores` cores,
    /// `min(1, cores / threads)`. `false` where the OS does not say.
    pub fn crowded(&self, cores: usize) -> bool {
        let most = (cores as f64 / self.threads as f64).min(1.0);
        self.on_cpu.is_some_and(|share| share < 0.9 * most)
    }

    /// Whether the point ran exactly as its quota says: every call admitted under an
    /// admitting quota (or the floor), none under a refusing one. (A busy machine makes a
    /// few refusals under the admitting quota: a thread preempted between its clock reading
    /// and its decision decides on a stale reading, which the limiters make stricter.)
    pub fn quota_held(&self) -> bool {
        match self.quota {
            QuotaKind::Admitting | QuotaKind::None => self.admitted == self.decisions,
            QuotaKind::Refusing => self.admitted == 0,
        }
    }
}

/// A limitcore contender and the peer its ratio is taken against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// limitcore's contender.
    pub contender: Contender,
    /// Its peer.
    pub peer: Contender,
}

/// A quota kind, as the report states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QuotaNote {
    /// The kind.
    pub kind: QuotaKind,
    /// What it is for each contender.
    pub description: &'static str,
}

/// A contender's call, as the report states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// The contender.
    pub contender: Contender,
    /// limitcore's, a peer, or the floor.
    pub role: Role,
    /// The call each thread repeats.
    pub operation: &'static str,
}

/// A whole run: the machine, the settings, and every point.
///
/// Serialised as is by [`Report::json`] (field names are the JSON keys).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// Seconds measured per point.
    pub seconds: f64,
    /// Seconds of warm-up per point.
    pub warmup_seconds: f64,
    /// Whether pinning was asked for (each point says whether it happened).
    pub pin: bool,
    /// Calls a thread makes between two looks at the stop flag.
    pub batch: u64,
    /// The thread counts measured.
    pub threads: Vec<usize>,
    /// The contenders measured, with their calls.
    pub contenders: Vec<Operation>,
    /// Peers the run added for limitcore's contenders' ratios.
    pub added_peers: Vec<Contender>,
    /// Which peer each limitcore contender's ratio is taken against.
    pub pairs: Vec<Pair>,
    /// The quota kinds.
    pub quotas: Vec<QuotaNote>,
    /// Every point: by contender, then quota, then threads.
    pub points: Vec<Point>,
}

impl Report {
    /// The point of `contender` under `quota` at `threads`, if measured.
    pub fn point(&self, contender: Contender, quota: QuotaKind, threads: usize) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.contender == contender && p.quota == quota && p.threads == threads)
    }

    /// The series measured (a contender under one quota), in the report's order.
    pub fn series(&self) -> Vec<(Contender, QuotaKind)> {
        let mut series: Vec<(Contender, QuotaKind)> = Vec::new();
        for p in &self.points {
            if !series.contains(&(p.contender, p.quota)) {
                series.push((p.contender, p.quota));
            }
        }
        series
    }

    /// The report as pretty JSON. Serialising cannot fail for this type; if it did, the
    /// result would be `{"error": "..."}`.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as text: the machine and settings, then per quota kind the decisions per
    /// second in total and per thread, the ratios to the peers and the efficiencies, each
    /// a table with a column per thread count; then the notes (points whose quota did not
    /// hold, threads not pinned) and each contender's call.
    pub fn text(&self) -> String {
        table::text(self)
    }
}

/// Run every point of `config`, calling `progress` after each, and gather the report.
///
/// The points run thread count by thread count, and within one, quota by quota, every
/// contender in turn: a contender and its peer are measured a few seconds apart at most.
///
/// # Errors
///
/// The parameters' error ([`Config::validate`]); a contender that could not be set up (a
/// limiter refusing its quota, a refusing quota that still admits: bugs, never expected).
pub fn run(config: &Config, progress: &mut dyn FnMut(&Point)) -> Result<Report, String> {
    config.validate()?;
    let machine = Machine::this();
    let cores = if config.pin {
        measure::cores()
    } else {
        Vec::new()
    };
    let timing = Timing {
        seconds: config.seconds,
        warmup: config.warmup_seconds(),
        pin: config.pin,
    };
    let threads = config.thread_counts();
    let contenders = config.contenders_run();
    let kinds = [QuotaKind::Admitting, QuotaKind::Refusing, QuotaKind::None];
    let mut points = Vec::with_capacity(config.points());
    for &t in &threads {
        for kind in kinds {
            for &c in contenders
                .iter()
                .filter(|c| c.quota_kinds().contains(&kind))
            {
                let sample = measure::measure(c, kind, t, timing, &cores)?;
                let point = point(c, kind, t, &sample);
                progress(&point);
                points.push(point);
            }
        }
    }
    // Ratios and efficiencies, from the points of the same run.
    let totals: Vec<(Contender, QuotaKind, usize, f64)> = points
        .iter()
        .map(|p| (p.contender, p.quota, p.threads, p.decisions_per_second))
        .collect();
    let rate = |c: Contender, q: QuotaKind, t: usize| {
        totals
            .iter()
            .find(|&&(c2, q2, t2, _)| (c2, q2, t2) == (c, q, t))
            .map(|&(.., r)| r)
            .filter(|&r| r > 0.0)
    };
    for p in &mut points {
        p.ratio_to_peer = p
            .peer
            .and_then(|peer| rate(peer, p.quota, p.threads))
            .map(|peer| p.decisions_per_second / peer);
        p.efficiency = rate(p.contender, p.quota, 1).map(|one| p.per_thread_per_second / one);
    }
    points.sort_by_key(|p| (p.contender, p.quota, p.threads));
    Ok(Report {
        machine,
        seconds: config.seconds,
        warmup_seconds: timing.warmup,
        pin: config.pin,
        batch: measure::BATCH,
        threads,
        contenders: contenders
            .iter()
            .map(|&c| Operation {
                contender: c,
                role: c.role(),
                operation: c.operation(),
            })
            .collect(),
        added_peers: contenders
            .iter()
            .copied()
            .filter(|c| !config.contenders.contains(c))
            .collect(),
        pairs: contenders
            .iter()
            .filter_map(|&c| c.peer().map(|peer| Pair { contender: c, peer }))
            .collect(),
        quotas: kinds
            .into_iter()
            .filter(|k| contenders.iter().any(|c| c.quota_kinds().contains(k)))
            .map(|kind| QuotaNote {
                kind,
                description: kind.describe(),
            })
            .collect(),
        points,
    })
}

/// A point's figures from its sample (ratio and efficiency filled in later).
fn point(contender: Contender, quota: QuotaKind, threads: usize, s: &measure::Sample) -> Point {
    let wall = s.wall.as_secs_f64().max(f64::MIN_POSITIVE);
    let decisions: u64 = s.per_thread.iter().sum();
    let total = decisions as f64 / wall;
    let slowest = s.per_thread.iter().min().copied().unwrap_or(0);
    let fastest = s.per_thread.iter().max().copied().unwrap_or(0);
    Point {
        contender,
        role: contender.role(),
        quota,
        threads,
        pinned: s.pinned,
        wall_seconds: wall,
        decisions,
        admitted: s.admitted,
        decisions_per_second: total,
        per_thread_per_second: total / threads as f64,
        slowest_thread_per_second: slowest as f64 / wall,
        fastest_thread_per_second: fastest as f64 / wall,
        peer: contender.peer(),
        ratio_to_peer: None,
        efficiency: None,
        on_cpu: s.cpu.map(|cpu| cpu.as_secs_f64() / (threads as f64 * wall)),
    }
}
