//! The replay engine: a trace through one algorithm, sharded by client on a rayon pool, then
//! through the algorithm's plain reference model, with the per-client window bounds checked.
//!
//! # How a replay runs
//!
//! 1. **Decisions** (timed). Clients are split into shards (`client mod shards`); each shard
//!    is replayed by one rayon task in trace order, so every client's decisions are made in
//!    the order its requests were logged, at their logged times, through the explicit-time
//!    API (`try_acquire_n_at`). A shard holds one [`Keyed`] with the algorithm's rule
//!    (automatic eviction on: a shard's clock only moves forward, so evicting changes no
//!    decision, which step 2 checks). With a global limit (`--global`) every decision
//!    depends on every earlier one, so the replay runs on one thread in trace order: the
//!    per-client [`Keyed`] and the global limit (in [`Global`]), all or nothing, through
//!    [`All`], for every algorithm (each one refunds exactly). Either way the deciding
//!    limiter (each shard's `Keyed`, or the `All`) is wrapped in the core's [`Counted`], and
//!    its counts are kept ([`Outcome::counts`]): they must agree with the decisions
//!    ([`Outcome::counts_agree`]).
//! 2. **Check** (not timed). Each shard runs its clients again through the algorithm's
//!    reference model ([`reference::model`], a different formulation in plain `u128`
//!    arithmetic) and counts the decisions that differ (refusals compared with their
//!    `retry_after`). It also measures, per client, the most requests admitted in any
//!    half-open window `[t, t + period)` (and in any aligned window `[k·period,
//!    (k+1)·period)`), to compare with what the algorithm promises ([`Promise`]).
//!
//! Times are nanoseconds since the Unix epoch ([`Request::t`]); every limiter runs on a
//! [`ManualClock`] and is given each request's time explicitly.
//!
//! The window algorithms (fixed window, sliding window, sliding log) have no burst: with a
//! quota that sets one, they run on the quota's count per period ([`Settings::quota_for`]),
//! and the report says so.
//!
//! # Examples
//!
//! ```
//! use limitcore_cli::engine::{self, Algorithm, Settings};
//! use limitcore_cli::trace;
//!
//! let trace = trace::synthetic(50, 30, 7);
//! let settings = Settings { quota: "5/s".parse()?, global: None, threads: 2 };
//! for algorithm in Algorithm::ALL {
//!     let outcome = engine::replay(&trace, algorithm, &settings)?;
//!     assert_eq!(outcome.differing, 0, "{}", algorithm.name());
//!     assert!(outcome.bound_holds());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::trace::{Request, Trace};
use limitcore::clock::ManualClock;
use limitcore::reference::{self, AnyModel, Model};
use limitcore::rules::Rule;
use limitcore::{
    All, Counted, Counts, Denied, Global, Keyed, KeyedRateLimiter, KeyedRefund, Limiter, Quota,
    QuotaError, WithRule,
};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The algorithms a replay can run, each per client with the replay's quota: the core's
/// [`limitcore::Algorithm`], parsed from the same names (`"gcra"`, `"token-bucket"`, …).
pub use limitcore::Algorithm;

/// What `algorithm` promises for one client and `quota` (the core's
/// [`Algorithm::bound`], in the report's terms): at most [`Promise::bound`] requests
/// admitted in one window of the quota's period.
///
/// # Examples
///
/// ```
/// use limitcore::Quota;
/// use limitcore_cli::engine::{promise, Algorithm};
///
/// let quota: Quota = "10/s burst 20".parse()?;
/// assert_eq!(promise(Algorithm::Gcra, &quota).bound, 10 + 20 - 1);
/// let fixed = promise(Algorithm::FixedWindow, &quota);
/// assert_eq!((fixed.bound, fixed.aligned), (10, true));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn promise(algorithm: Algorithm, quota: &Quota) -> Promise {
    let b = algorithm.bound(quota);
    Promise {
        bound: b.permits,
        aligned: b.aligned,
        rule: b.statement,
    }
}

/// A per-client bound on admitted requests in windows of the quota's period (see
/// [`promise`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Promise {
    /// At most this many admitted...
    pub bound: u64,
    /// ...in any aligned window `[k·period, (k+1)·period)` (true) or in any window
    /// `[t, t + period)` (false).
    pub aligned: bool,
    /// The rule, for reports.
    pub rule: &'static str,
}

/// One client's figures in one replay (windows are of the quota's period).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClientStat {
    /// Requests offered.
    pub requests: u64,
    /// Requests refused.
    pub denied: u64,
    /// The most admitted in any window `[t, t + period)`.
    pub max_any_window: u64,
    /// The most admitted in any aligned window `[k·period, (k+1)·period)`.
    pub max_aligned_window: u64,
}

/// What one algorithm did to a trace: made by [`replay`].
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its promise for the quota.
    pub promise: Promise,
    /// Per client, indexed like [`Trace::clients`].
    pub clients: Vec<ClientStat>,
    /// Per request, in trace order: admitted?
    pub admitted: Vec<bool>,
    /// Decisions that differ from the reference model's (must be 0).
    pub differing: u64,
    /// The first differing decision, described.
    pub first_difference: Option<String>,
    /// Wall time of the decision phase: the median of repeated passes (at least 3 and
    /// 200 ms, fresh limiters each time) for a sharded replay, one pass with `--global`.
    pub decide_time: Duration,
    /// Threads the decisions ran on.
    pub threads: usize,
    /// Keys held by the keyed limiters when the replay ended (eviction at work).
    pub keys_held: usize,
    /// The core's counters of the deciding limiters ([`Counted`]), summed over the shards,
    /// from the pass whose decisions are [`Outcome::admitted`].
    pub counts: Counts,
}

impl Outcome {
    /// Requests offered (the trace's requests).
    pub fn requests(&self) -> u64 {
        self.admitted.len() as u64
    }

    /// Requests admitted.
    pub fn admitted_count(&self) -> u64 {
        self.admitted.iter().filter(|&&a| a).count() as u64
    }

    /// Clients with at least one refusal.
    pub fn clients_limited(&self) -> u64 {
        self.clients.iter().filter(|c| c.denied > 0).count() as u64
    }

    /// The client (an index into [`Trace::clients`]) with the most admitted in one window of
    /// the promise's kind, and that number; the lowest index on a tie, `(0, 0)` for a trace
    /// without clients.
    pub fn worst_window(&self) -> (usize, u64) {
        self.clients
            .iter()
            .map(|c| {
                if self.promise.aligned {
                    c.max_aligned_window
                } else {
                    c.max_any_window
                }
            })
            .enumerate()
            .max_by_key(|&(i, m)| (m, std::cmp::Reverse(i)))
            .unwrap_or((0, 0))
    }

    /// Whether every client kept the promise: no client had more than [`Promise::bound`]
    /// admitted in one window of the promise's kind.
    pub fn bound_holds(&self) -> bool {
        self.worst_window().1 <= self.promise.bound
    }

    /// Whether the core's counters ([`Outcome::counts`]) agree with the decisions: as many
    /// admitted and refused as [`Outcome::admitted`] says, one permit per admission (every
    /// request asks for one), and no final refusal (a request of one permit never exceeds a
    /// capacity, and trace times are far from the clock's horizon).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::engine::{self, Algorithm, Settings};
    /// use limitcore_cli::trace;
    ///
    /// let trace = trace::synthetic(30, 20, 3);
    /// let settings = Settings { quota: "2/s".parse()?, global: Some("20/s".parse()?), threads: 1 };
    /// let outcome = engine::replay(&trace, Algorithm::TokenBucket, &settings)?;
    /// assert!(outcome.counts_agree());
    /// assert_eq!(outcome.counts.admitted, outcome.admitted_count());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counts_agree(&self) -> bool {
        let (admitted, c) = (self.admitted_count(), &self.counts);
        c.admitted == admitted
            && c.permits == admitted
            && c.rate_limited == self.requests() - admitted
            && c.final_refusals == 0
    }

    /// Decisions per second of wall time in the decision phase ([`Outcome::decide_time`]).
    pub fn decisions_per_second(&self) -> f64 {
        self.requests() as f64 / self.decide_time.as_secs_f64().max(1e-9)
    }
}

/// A replay's settings.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::Settings;
///
/// let settings = Settings {
///     quota: "600/min burst 20".parse()?,
///     global: Some("200/s".parse()?),
///     threads: 1,
/// };
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Settings {
    /// The per-client quota.
    pub quota: Quota,
    /// A global quota over all clients, if any.
    pub global: Option<Quota>,
    /// Threads for the decisions (and the checks); 0 counts as 1. A replay with a global
    /// quota decides on one thread whatever this says.
    pub threads: usize,
}

impl Settings {
    /// The per-client quota `algorithm` runs on: [`Settings::quota`], without its burst for
    /// the window algorithms (they have none: `count` per window).
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of the quota without its burst (a count whose full refill would
    /// pass `Quota::MAX_BURST_SPAN_NS`).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::engine::{Algorithm, Settings};
    ///
    /// let s = Settings { quota: "10/s burst 3".parse()?, global: None, threads: 1 };
    /// assert_eq!(s.quota_for(Algorithm::Gcra)?.to_string(), "10/s burst 3");
    /// assert_eq!(s.quota_for(Algorithm::SlidingLog)?.to_string(), "10/s");
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn quota_for(&self, algorithm: Algorithm) -> Result<Quota, QuotaError> {
        without_burst(self.quota, algorithm)
    }
}

/// `quota` as `algorithm` takes it: without a burst for the window algorithms.
fn without_burst(quota: Quota, algorithm: Algorithm) -> Result<Quota, QuotaError> {
    match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
            Quota::new(quota.count(), quota.period())
        }
        _ => Ok(quota),
    }
}

/// Split the trace's request indices into `shards` lists by client (`client mod shards`),
/// each in trace order; 0 shards count as 1.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::shard;
/// use limitcore_cli::trace::Request;
///
/// let requests = [0, 1, 2, 1].map(|client| Request { t: 0, client });
/// assert_eq!(shard(&requests, 2), [vec![0, 2], vec![1, 3]]);
/// ```
pub fn shard(requests: &[Request], shards: usize) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); shards.max(1)];
    let len = out.len();
    for (i, r) in requests.iter().enumerate() {
        out[r.client as usize % len].push(i as u32);
    }
    out
}

/// Something that decides one request of one client at an explicit time.
trait Decide {
    fn decide(&mut self, client: u32, t: u64) -> Result<(), Denied>;
    /// Keys held.
    fn keys(&self) -> usize;
    /// The core's counts of the decisions made.
    fn counts(&self) -> Counts;
}

impl<R: Rule> Decide for Counted<Keyed<u32, R, ManualClock>> {
    #[inline]
    fn decide(&mut self, client: u32, t: u64) -> Result<(), Denied> {
        self.try_acquire_n_at(&client, 1, t)
    }
    fn keys(&self) -> usize {
        self.inner().len()
    }
    fn counts(&self) -> Counts {
        Counted::counts(self)
    }
}

/// Build the limiters of `algorithm` once, to report a quota it cannot take as an error
/// before a replay starts ([`replay`] calls it first).
///
/// # Errors
///
/// The algorithm's [`QuotaError`] for the per-client quota (or the global one), as text
/// starting with the algorithm's name.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::{validate, Algorithm, Settings};
///
/// let settings = Settings { quota: "10/s".parse()?, global: Some("100/s".parse()?), threads: 1 };
/// assert!(validate(Algorithm::FixedWindow, &settings).is_ok());
/// // 1000 per µs: a fixed window's count and window number would not share its word.
/// let fast = Settings { quota: "1000/us".parse()?, global: None, threads: 1 };
/// assert!(validate(Algorithm::FixedWindow, &fast).unwrap_err().starts_with("fixed-window"));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn validate(algorithm: Algorithm, settings: &Settings) -> Result<(), String> {
    let check = |quota: Quota, what: &str| {
        without_burst(quota, algorithm)
            .and_then(|q| algorithm.limiter(q, ManualClock::new()))
            .map(drop)
            .map_err(|e| format!("{}: {what} {quota}: {e}", algorithm.name()))
    };
    check(settings.quota, "quota")?;
    if let Some(global) = settings.global {
        check(global, "global quota")?;
    }
    Ok(())
}

/// Replay `trace` through `algorithm` with `settings`: decide every request, re-run every
/// client through the algorithm's reference model, measure every client's windows (see the
/// [module documentation](self)).
///
/// A decision that differs from the reference model or a broken promise is not an error: it
/// is in the [`Outcome`] ([`Outcome::differing`], [`Outcome::bound_holds`]).
///
/// # Errors
///
/// When the quota does not suit the algorithm ([`validate`]), or the thread pool of
/// `settings.threads` threads cannot be started.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::{self, Algorithm, Settings};
/// use limitcore_cli::trace::{Format, Request, Trace};
///
/// // One client, four requests 100 ms apart.
/// let trace = Trace {
///     format: Format::Synthetic,
///     requests: (0..4).map(|i| Request { t: i * 100_000_000, client: 0 }).collect(),
///     clients: vec!["alice".into()],
///     malformed: Vec::new(),
///     lines: 4,
/// };
/// let settings = Settings { quota: "2/s".parse()?, global: None, threads: 1 };
/// let outcome = engine::replay(&trace, Algorithm::SlidingLog, &settings)?;
/// assert_eq!(outcome.admitted, [true, true, false, false]);
/// assert_eq!(outcome.clients[0].denied, 2);
/// assert_eq!(outcome.differing, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn replay(trace: &Trace, algorithm: Algorithm, settings: &Settings) -> Result<Outcome, String> {
    validate(algorithm, settings)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.threads.max(1))
        .build()
        .map_err(|e| format!("cannot start {} threads: {e}", settings.threads))?;
    let n = trace.requests.len();
    let quota = settings.quota_for(algorithm).map_err(|e| e.to_string())?;
    let global = match settings.global {
        Some(g) => Some(without_burst(g, algorithm).map_err(|e| e.to_string())?),
        None => None,
    };
    let (Decided(decisions, decide_time, keys_held, counts), threads, shards) = match global {
        Some(global) => {
            let decided = algorithm.with_rule(DecideGlobal {
                trace,
                quota,
                global,
            });
            (decided, 1, vec![(0..n as u32).collect::<Vec<_>>()])
        }
        None => {
            // Several shards per thread, so that a heavy client does not idle a thread.
            let shards = shard(&trace.requests, settings.threads.max(1).saturating_mul(8));
            let decided = algorithm.with_rule(DecideSharded {
                trace,
                shards: &shards,
                pool: &pool,
                quota,
            });
            (decided, pool.current_num_threads(), shards)
        }
    };
    let models = Models {
        algorithm,
        quota,
        global,
    };
    let checked = pool.install(|| {
        shards
            .par_iter()
            .map(|indices| check_shard(trace, indices, &decisions, &models, settings.quota))
            .collect::<Vec<_>>()
    });
    let mut clients = vec![ClientStat::default(); trace.clients.len()];
    let mut differing = 0;
    let mut first_difference: Option<(u32, String)> = None;
    for shard in checked {
        for (client, stat) in shard.clients {
            clients[client as usize] = stat;
        }
        differing += shard.differing;
        if let Some(first) = shard.first_difference {
            if first_difference.as_ref().is_none_or(|f| first.0 < f.0) {
                first_difference = Some(first);
            }
        }
    }
    Ok(Outcome {
        algorithm,
        promise: promise(algorithm, &quota),
        clients,
        admitted: decisions.iter().map(Result::is_ok).collect(),
        differing,
        first_difference: first_difference.map(|(_, text)| text),
        decide_time,
        threads,
        keys_held,
        counts,
    })
}

/// A shard's keyed limiter for `quota`: sweeps idle keys every second of trace time.
fn keyed<R: Rule>(quota: Quota) -> Keyed<u32, R, ManualClock> {
    Keyed::with_clock(quota, ManualClock::new())
        .expect("checked in `validate`")
        .with_sweep_interval(Duration::from_secs(1))
}

/// What a decision phase gives: every request's decision (in trace order), the phase's wall
/// time, the keys held at the end, the deciding limiters' counts.
struct Decided(Vec<Result<(), Denied>>, Duration, usize, Counts);

/// [`decide_sharded`] for the algorithm's rule.
struct DecideSharded<'a> {
    trace: &'a Trace,
    shards: &'a [Vec<u32>],
    pool: &'a rayon::ThreadPool,
    quota: Quota,
}

impl WithRule for DecideSharded<'_> {
    type Output = Decided;
    fn run<R: Rule>(self) -> Decided {
        let quota = self.quota;
        decide_sharded(self.trace, self.shards, self.pool, || {
            Counted::new(keyed::<R>(quota))
        })
    }
}

/// The decision phase, sharded: every shard's decisions, the wall time, the keys held and
/// the counts, summed over the shards of the last pass.
fn decide_sharded<D: Decide>(
    trace: &Trace,
    shards: &[Vec<u32>],
    pool: &rayon::ThreadPool,
    make: impl Fn() -> D + Sync,
) -> Decided {
    let requests = &trace.requests;
    let once = || {
        pool.install(|| {
            shards
                .par_iter()
                .map(|indices| {
                    let mut decider = make();
                    let out: Vec<_> = indices
                        .iter()
                        .map(|&i| {
                            let r = requests[i as usize];
                            decider.decide(r.client, r.t)
                        })
                        .collect();
                    (out, decider.keys(), decider.counts())
                })
                .collect::<Vec<_>>()
        })
    };
    // A short trace is decided in well under a millisecond: repeat the whole phase (fresh
    // limiters each time) for at least 3 runs and 200 ms, and take the median run's time.
    let mut times = Vec::new();
    let begin = Instant::now();
    let mut per_shard;
    loop {
        let start = Instant::now();
        per_shard = once();
        times.push(start.elapsed());
        if times.len() >= 3
            && (begin.elapsed() >= Duration::from_millis(200) || times.len() >= 1000)
        {
            break;
        }
    }
    times.sort();
    let time = times[times.len() / 2];
    let mut decisions = vec![Ok(()); requests.len()];
    let (mut keys, mut counts) = (0, Counts::default());
    for (indices, (out, held, counted)) in shards.iter().zip(per_shard) {
        keys += held;
        counts += counted;
        for (&i, d) in indices.iter().zip(out) {
            decisions[i as usize] = d;
        }
    }
    Decided(decisions, time, keys, counts)
}

/// The decision phase with a global limit: one thread, trace order, all or nothing, through
/// `All` over the per-client `Keyed` and the global limit of the same rule.
struct DecideGlobal<'a> {
    trace: &'a Trace,
    quota: Quota,
    global: Quota,
}

impl WithRule for DecideGlobal<'_> {
    type Output = Decided;
    fn run<R: Rule>(self) -> Decided {
        // `All` refunds at the later of the request's time and its clock's; the clock stays
        // at 0, so every refund is at the request's own time: exact.
        let clock = ManualClock::new();
        let per_client = Arc::new(keyed::<R>(self.quota));
        let global: Limiter<R, ManualClock> =
            Limiter::with_clock(self.global, clock).expect("checked in `validate`");
        let both: Counted<All<Box<dyn KeyedRefund<u32>>>> = Counted::new(All::new(vec![
            Box::new(per_client.clone()),
            Box::new(Global::new(global)),
        ]));
        let start = Instant::now();
        let decisions = self
            .trace
            .requests
            .iter()
            .map(|r| both.try_acquire_n_at(&r.client, 1, r.t))
            .collect();
        Decided(decisions, start.elapsed(), per_client.len(), both.counts())
    }
}

/// The reference models of a replay: one per client, and the global one.
struct Models {
    algorithm: Algorithm,
    quota: Quota,
    global: Option<Quota>,
}

/// One shard's check results.
struct Checked {
    clients: Vec<(u32, ClientStat)>,
    differing: u64,
    /// (request index, description) of the shard's first differing decision.
    first_difference: Option<(u32, String)>,
}

/// Re-run a shard's clients through the reference models and measure their windows.
fn check_shard(
    trace: &Trace,
    indices: &[u32],
    decisions: &[Result<(), Denied>],
    models_of: &Models,
    quota: Quota,
) -> Checked {
    let mut models: HashMap<u32, AnyModel> = HashMap::new();
    let mut global = models_of
        .global
        .map(|g| reference::model(models_of.algorithm, g));
    let mut admitted_at: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut stats: HashMap<u32, ClientStat> = HashMap::new();
    let mut differing = 0;
    let mut first_difference = None;
    for &i in indices {
        let r = trace.requests[i as usize];
        let model = models
            .entry(r.client)
            .or_insert_with(|| reference::model(models_of.algorithm, models_of.quota));
        let expected = match &mut global {
            None => model.acquire(1, r.t),
            // All or nothing: charge both models only if both admit; the refusal reported
            // is the longest wait.
            Some(global) => {
                let (mut own, mut all) = (model.clone(), global.clone());
                match (own.acquire(1, r.t), all.acquire(1, r.t)) {
                    (Ok(()), Ok(())) => {
                        (*model, *global) = (own, all);
                        Ok(())
                    }
                    (Err(a), Err(b)) => Err(a.stricter(b)),
                    (Err(d), Ok(())) | (Ok(()), Err(d)) => Err(d),
                }
            }
        };
        let actual = decisions[i as usize];
        if actual != expected {
            differing += 1;
            first_difference.get_or_insert_with(|| {
                (
                    i,
                    format!(
                        "request {} (client {}, t = {} ns): limiter {:?}, reference {:?}",
                        i, trace.clients[r.client as usize], r.t, actual, expected
                    ),
                )
            });
        }
        let stat = stats.entry(r.client).or_default();
        stat.requests += 1;
        match actual {
            Ok(()) => admitted_at.entry(r.client).or_default().push(r.t),
            Err(_) => stat.denied += 1,
        }
    }
    let period = quota.period_ns();
    for (client, times) in &admitted_at {
        let stat = stats.entry(*client).or_default();
        stat.max_any_window = max_in_any_window(times, period);
        stat.max_aligned_window = max_in_aligned_window(times, period);
    }
    Checked {
        clients: stats.into_iter().collect(),
        differing,
        first_difference,
    }
}

/// The most of `times` in any window `[t, t + period)`.
///
/// `times` must be sorted ascending (otherwise the result is meaningless, but it does not
/// panic); `period` is in the times' unit (ns in a replay), 0 counts as 1.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::max_in_any_window;
///
/// assert_eq!(max_in_any_window(&[5, 6, 7, 14, 15], 10), 4); // 6, 7, 14, 15 in [6, 16)
/// assert_eq!(max_in_any_window(&[0, 9, 10, 19, 20], 10), 2);
/// assert_eq!(max_in_any_window(&[], 10), 0);
/// ```
pub fn max_in_any_window(times: &[u64], period: u64) -> u64 {
    let period = period.max(1);
    let (mut first, mut best) = (0, 0);
    for (last, &t) in times.iter().enumerate() {
        while t.saturating_sub(times[first]) >= period {
            first += 1;
        }
        best = best.max(last - first + 1);
    }
    best as u64
}

/// The most of `times` in any aligned window `[k·period, (k+1)·period)`.
///
/// `times` must be sorted ascending (otherwise the result is meaningless, but it does not
/// panic); `period` is in the times' unit (ns in a replay), 0 counts as 1.
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::max_in_aligned_window;
///
/// assert_eq!(max_in_aligned_window(&[5, 6, 7, 14, 15], 10), 3); // 5, 6, 7 in [0, 10)
/// assert_eq!(max_in_aligned_window(&[9, 10, 11, 12], 10), 3);
/// ```
pub fn max_in_aligned_window(times: &[u64], period: u64) -> u64 {
    let period = period.max(1);
    let (mut best, mut run, mut window) = (0u64, 0u64, None);
    for &t in times {
        let k = t / period;
        if window == Some(k) {
            run += 1;
        } else {
            (window, run) = (Some(k), 1);
        }
        best = best.max(run);
    }
    best
}
