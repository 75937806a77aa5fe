//! The replay engine: a trace through one algorithm, sharded by client on a rayon pool, then
//! through the algorithm's plain reference model, with the per-client window bounds checked.
//!
//! # How a replay runs
//!
//! 1. **Decisions** (timed). Clients are split into shards (`client mod shards`); each shard
//!    is replayed by one rayon task in trace order, so every client's decisions are made in
//!    the order its requests were logged, at their logged times, through the explicit-time
//!    API (`try_acquire_n_at`). A shard holds one [`Keyed`] for the five algorithms it
//!    supports (automatic eviction on: a shard's clock only moves forward, so evicting
//!    changes no decision, which step 2 checks), and a map of [`SlidingLog`]s for the sliding
//!    log (a log per key has no single word). With a global limit (`--global`) every decision
//!    depends on every earlier one, so the replay runs on one thread in trace order: per
//!    client limiters and the global one, all or nothing, through [`All`].
//! 2. **Check** (not timed). Each shard runs its clients again through the algorithm's
//!    reference model (`limitcore::reference`, a different formulation in plain `u128`
//!    arithmetic) and counts the decisions that differ (refusals compared with their
//!    `retry_after`). It also measures, per client, the most requests admitted in any
//!    half-open window `[t, t + period)` (and in any aligned window `[k·period,
//!    (k+1)·period)`), to compare with what the algorithm promises ([`Promise`]).
//!
//! Times are nanoseconds since the Unix epoch ([`Request::t`]); every limiter runs on a
//! [`ManualClock`] and is given each request's time explicitly.
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
use limitcore::reference::{
    FixedWindowModel, GcraModel, LeakyBucketModel, SlidingLogModel, SlidingWindowModel,
    TokenBucketModel,
};
use limitcore::{
    All, Denied, FixedWindow, Gcra, Keyed, LeakyBucket, Quota, RateLimiter, SlidingLog,
    SlidingWindow, TokenBucket,
};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The algorithms a replay can run, each per client with the replay's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// [`Gcra`] per client.
    Gcra,
    /// [`TokenBucket`] per client.
    TokenBucket,
    /// [`FixedWindow`] per client.
    FixedWindow,
    /// [`SlidingWindow`]'s counter per client.
    SlidingWindow,
    /// [`SlidingLog`] per client.
    SlidingLog,
    /// [`LeakyBucket`] per client (a request must be able to start at once).
    LeakyBucket,
}

impl Algorithm {
    /// Every algorithm, in report order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Gcra,
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::LeakyBucket,
    ];

    /// The command-line name, e.g. `"token-bucket"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Gcra => "gcra",
            Algorithm::TokenBucket => "token-bucket",
            Algorithm::FixedWindow => "fixed-window",
            Algorithm::SlidingWindow => "sliding-window",
            Algorithm::SlidingLog => "sliding-log",
            Algorithm::LeakyBucket => "leaky-bucket",
        }
    }

    /// The algorithm called `name` on the command line ([`Algorithm::name`]); `None` for any
    /// other name.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::engine::Algorithm;
    ///
    /// assert_eq!(Algorithm::from_name("sliding-log"), Some(Algorithm::SlidingLog));
    /// assert_eq!(Algorithm::from_name("Sliding-Log"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What the algorithm promises for one client and `quota`: at most [`Promise::bound`]
    /// requests admitted in one window of the quota's period.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_cli::engine::Algorithm;
    ///
    /// let quota: Quota = "10/s burst 20".parse()?;
    /// assert_eq!(Algorithm::Gcra.promise(&quota).bound, 10 + 20 - 1);
    /// let fixed = Algorithm::FixedWindow.promise(&quota);
    /// assert_eq!((fixed.bound, fixed.aligned), (10, true));
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn promise(self, quota: &Quota) -> Promise {
        let (count, burst) = (u64::from(quota.count()), u64::from(quota.burst()));
        match self {
            Algorithm::Gcra | Algorithm::TokenBucket => Promise {
                bound: count + burst - 1,
                aligned: false,
                rule: "count + burst - 1 in any window",
            },
            Algorithm::FixedWindow => Promise {
                bound: count,
                aligned: true,
                rule: "count per aligned window",
            },
            // Any window of length period meets at most two aligned windows; the formula
            // admits at most count in the later one minus what it still counts of the earlier.
            Algorithm::SlidingWindow => Promise {
                bound: 2 * count - 1,
                aligned: false,
                rule: "2 count - 1 in any window (the formula's error budget)",
            },
            Algorithm::SlidingLog => Promise {
                bound: count,
                aligned: false,
                rule: "count in any window (exact)",
            },
            // A request that must start at once is admitted only when the queue has
            // drained: admissions are at least one emission interval apart.
            Algorithm::LeakyBucket => Promise {
                bound: count,
                aligned: false,
                rule: "count in any window (one per emission interval)",
            },
        }
    }
}

/// A per-client bound on admitted requests in windows of the quota's period (see
/// [`Algorithm::promise`]).
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
}

impl<L: limitcore::Algorithm> Decide for Keyed<u32, L, ManualClock> {
    #[inline]
    fn decide(&mut self, client: u32, t: u64) -> Result<(), Denied> {
        self.try_acquire_n_at(&client, 1, t)
    }
    fn keys(&self) -> usize {
        self.len()
    }
}

/// The sliding log per client (it keeps a log per key, not one word).
struct Logs {
    quota: Quota,
    logs: HashMap<u32, SlidingLog<ManualClock>>,
}

impl Decide for Logs {
    fn decide(&mut self, client: u32, t: u64) -> Result<(), Denied> {
        let quota = self.quota;
        self.logs
            .entry(client)
            .or_insert_with(|| {
                SlidingLog::with_clock(quota, ManualClock::new()).expect("checked in `validate`")
            })
            .try_acquire_n_at(1, t)
    }
    fn keys(&self) -> usize {
        self.logs.len()
    }
}

/// A reference model of one client's limiter.
#[derive(Debug, Clone)]
enum Model {
    Gcra(GcraModel),
    Bucket(TokenBucketModel),
    Window(FixedWindowModel),
    Sliding(SlidingWindowModel),
    Log(SlidingLogModel),
    Pacer(LeakyBucketModel),
}

impl Model {
    fn new(algorithm: Algorithm, quota: Quota) -> Model {
        match algorithm {
            Algorithm::Gcra => Model::Gcra(GcraModel::new(quota)),
            Algorithm::TokenBucket => Model::Bucket(TokenBucketModel::new(quota)),
            Algorithm::FixedWindow => Model::Window(FixedWindowModel::new(quota)),
            Algorithm::SlidingWindow => Model::Sliding(SlidingWindowModel::new(quota)),
            Algorithm::SlidingLog => Model::Log(SlidingLogModel::new(quota)),
            Algorithm::LeakyBucket => Model::Pacer(LeakyBucketModel::new(quota)),
        }
    }

    fn acquire(&mut self, t: u64) -> Result<(), Denied> {
        match self {
            Model::Gcra(m) => m.acquire(1, t),
            Model::Bucket(m) => m.acquire(1, t),
            Model::Window(m) => m.acquire(1, t),
            Model::Sliding(m) => m.acquire(1, t),
            Model::Log(m) => m.acquire(1, t),
            Model::Pacer(m) => m.acquire(1, t),
        }
    }
}

/// Build the limiter of `algorithm` once, to report a quota it cannot take as an error
/// before a replay starts ([`replay`] calls it first).
///
/// # Errors
///
/// The algorithm's [`QuotaError`](limitcore::QuotaError) for the per-client quota, as text
/// starting with the algorithm's name; or, with a global quota, that the algorithm cannot be
/// refunded exactly (only gcra and leaky-bucket can run under `--global`).
///
/// # Examples
///
/// ```
/// use limitcore_cli::engine::{validate, Algorithm, Settings};
///
/// let settings = Settings { quota: "10/s".parse()?, global: Some("100/s".parse()?), threads: 1 };
/// assert!(validate(Algorithm::Gcra, &settings).is_ok());
/// assert!(validate(Algorithm::FixedWindow, &settings).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn validate(algorithm: Algorithm, settings: &Settings) -> Result<(), String> {
    let q = settings.quota;
    let clock = ManualClock::new();
    let built = match algorithm {
        Algorithm::Gcra | Algorithm::LeakyBucket => Ok(()),
        Algorithm::TokenBucket => TokenBucket::with_clock(q, clock).map(drop),
        Algorithm::FixedWindow => FixedWindow::with_clock(q, clock).map(drop),
        Algorithm::SlidingWindow => SlidingWindow::with_clock(q, clock).map(drop),
        Algorithm::SlidingLog => SlidingLog::with_clock(q, clock).map(drop),
    };
    built.map_err(|e| format!("{}: quota {q}: {e}", algorithm.name()))?;
    if settings.global.is_some() && !matches!(algorithm, Algorithm::Gcra | Algorithm::LeakyBucket) {
        return Err(format!(
            "{}: --global needs limits that can be refunded exactly (gcra, leaky-bucket; see \
             limitcore::Refund)",
            algorithm.name()
        ));
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
    let (decisions, decide_time, keys_held, threads, shards) = match settings.global {
        Some(global) => {
            let (d, time, keys) = decide_global(trace, algorithm, settings.quota, global);
            (d, time, keys, 1, vec![(0..n as u32).collect::<Vec<_>>()])
        }
        None => {
            // Several shards per thread, so that a heavy client does not idle a thread.
            let shards = shard(&trace.requests, settings.threads.max(1).saturating_mul(8));
            let q = settings.quota;
            let (d, time, keys) = match algorithm {
                Algorithm::Gcra => decide_sharded(trace, &shards, &pool, keyed::<Gcra>(q)),
                Algorithm::TokenBucket => {
                    decide_sharded(trace, &shards, &pool, keyed::<TokenBucket>(q))
                }
                Algorithm::FixedWindow => {
                    decide_sharded(trace, &shards, &pool, keyed::<FixedWindow>(q))
                }
                Algorithm::SlidingWindow => {
                    decide_sharded(trace, &shards, &pool, keyed::<SlidingWindow>(q))
                }
                Algorithm::LeakyBucket => {
                    decide_sharded(trace, &shards, &pool, keyed::<LeakyBucket>(q))
                }
                Algorithm::SlidingLog => decide_sharded(trace, &shards, &pool, || Logs {
                    quota: q,
                    logs: HashMap::new(),
                }),
            };
            (d, time, keys, pool.current_num_threads(), shards)
        }
    };
    let checked = pool.install(|| {
        shards
            .par_iter()
            .map(|indices| check_shard(trace, indices, &decisions, algorithm, settings))
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
        promise: algorithm.promise(&settings.quota),
        clients,
        admitted: decisions.iter().map(Result::is_ok).collect(),
        differing,
        first_difference: first_difference.map(|(_, text)| text),
        decide_time,
        threads,
        keys_held,
    })
}

/// A shard's keyed limiter for `quota`: sweeps idle keys every second of trace time.
fn keyed<L: limitcore::Algorithm>(quota: Quota) -> impl Fn() -> Keyed<u32, L, ManualClock> + Sync {
    move || {
        Keyed::with_clock(quota, ManualClock::new())
            .expect("checked in `validate`")
            .with_sweep_interval(Duration::from_secs(1))
    }
}

/// The decision phase, sharded: every shard's decisions, the wall time, the keys held.
fn decide_sharded<D: Decide>(
    trace: &Trace,
    shards: &[Vec<u32>],
    pool: &rayon::ThreadPool,
    make: impl Fn() -> D + Sync,
) -> (Vec<Result<(), Denied>>, Duration, usize) {
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
                    (out, decider.keys())
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
    let mut keys = 0;
    for (indices, (out, held)) in shards.iter().zip(per_shard) {
        keys += held;
        for (&i, d) in indices.iter().zip(out) {
            decisions[i as usize] = d;
        }
    }
    (decisions, time, keys)
}

/// The decision phase with a global limit: one thread, trace order, all or nothing.
fn decide_global(
    trace: &Trace,
    algorithm: Algorithm,
    quota: Quota,
    global: Quota,
) -> (Vec<Result<(), Denied>>, Duration, usize) {
    // `All` refunds at the later of the request's time and its clock's; the clock stays at 0.
    let clock = ManualClock::new();
    let start = Instant::now();
    let decisions = if algorithm == Algorithm::LeakyBucket {
        all_or_nothing(
            trace,
            &clock,
            LeakyBucket::with_clock(global, clock.clone()),
            || LeakyBucket::with_clock(quota, clock.clone()),
        )
    } else {
        all_or_nothing(
            trace,
            &clock,
            Gcra::with_clock(global, clock.clone()),
            || Gcra::with_clock(quota, clock.clone()),
        )
    };
    (decisions.0, start.elapsed(), decisions.1)
}

fn all_or_nothing<L: limitcore::Refund + Send + Sync>(
    trace: &Trace,
    clock: &ManualClock,
    global: L,
    make: impl Fn() -> L,
) -> (Vec<Result<(), Denied>>, usize) {
    let mut per_client: HashMap<u32, L> = HashMap::new();
    let decisions = trace
        .requests
        .iter()
        .map(|r| {
            let own = per_client.entry(r.client).or_insert_with(&make);
            All::new(vec![&*own, &global], clock.clone()).try_acquire_n_at(1, r.t)
        })
        .collect();
    (decisions, per_client.len())
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
    algorithm: Algorithm,
    settings: &Settings,
) -> Checked {
    let mut models: HashMap<u32, Model> = HashMap::new();
    let mut global = settings.global.map(|g| Model::new(algorithm, g));
    let mut admitted_at: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut stats: HashMap<u32, ClientStat> = HashMap::new();
    let mut differing = 0;
    let mut first_difference = None;
    for &i in indices {
        let r = trace.requests[i as usize];
        let model = models
            .entry(r.client)
            .or_insert_with(|| Model::new(algorithm, settings.quota));
        let expected = match &mut global {
            None => model.acquire(r.t),
            // All or nothing: charge both models only if both admit; the refusal reported
            // is the longest wait.
            Some(global) => {
                let (mut own, mut all) = (model.clone(), global.clone());
                match (own.acquire(r.t), all.acquire(r.t)) {
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
    let period = settings.quota.period_ns();
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
