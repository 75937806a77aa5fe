//! The pacer comparison behind `limitcore pace`: `W` worker threads send at `R` requests per
//! second for `D` seconds, paced by one shared [`LeakyBucket`] through
//! [`Reserve::reserve_n_at`] ([`run_limitcore`]), and the same run paced by governor's
//! `until_ready` ([`run_governor`]); then the figures of both runs ([`Summary`]) side by side
//! ([`Comparison`]).
//!
//! Both runs are on the real clock: they take `D` seconds each and keep `W` threads busy.
//!
//! ```
//! use limitcore_cli::pace::{Comparison, Config};
//!
//! // 1,000 sends per second on one worker for 20 ms: 20 sends.
//! let comparison = Comparison::run(Config::new(1_000, 1, 0.02))?;
//! assert_eq!(comparison.limitcore.sends, 20);
//! assert_eq!(comparison.interval_ns, 1_000_000);
//! assert!(comparison.text().starts_with("pace: 1000/s for 0.02 s, 1 workers"));
//! # Ok::<(), String>(())
//! ```
//!
//! # The limitcore run
//!
//! One `LeakyBucket` of `R` per second (emission interval `T = ⌈10⁹ / R⌉` ns, the quota's
//! rounding) on the default [`MonotonicClock`]. Every worker loops: reserve one permit, wait
//! until the reservation's start, record the clock reading at which it woke (the *actual
//! start*), "send" (a no-op, or `Config::work` of busy work), and reserve again. The run
//! starts at `t0`, a clock reading a few milliseconds after the workers were spawned, and a
//! worker stops at the first reservation whose start is `≥ t0 + D`.
//!
//! Two schedules ([`Schedule`]):
//!
//! - [`Schedule::Open`] (the default; open loop): every reservation is made at the explicit
//!   time `t0` (`reserve_n_at(1, t0, ..)`), as if all of the run's requests had entered the
//!   leaky bucket's queue at the start. The queue releases them one every `T`, so the k-th
//!   reservation (in the pacer's linearisation order) starts at exactly `t0 + k·T`, however
//!   late the workers are and however long a send takes: the schedule is fixed in advance,
//!   and a worker that falls behind is *late*, it does not move the schedule (no coordinated
//!   omission). The queue's capacity is the run's slot count `N = ⌈D / T⌉`, so the pacer
//!   itself refuses the `N + 1`-th reservation, which ends the run (a stale time is allowed
//!   by the crate's contract: it can only make a decision stricter).
//! - [`Schedule::Live`] (closed loop, `--live`): every reservation is made at the worker's
//!   current clock reading, the way `LeakyBucket::reserve` is used in a server. Starts are
//!   still exactly `T` apart while the workers keep up, but a leaky bucket never lets idle
//!   time be made up: when every worker is late past its next slot the schedule *slips*
//!   (reported as `slip`). Capacity `W + 1`: each worker holds at most one outstanding
//!   reservation, so the pacer never refuses.
//!
//! # Waiting precisely
//!
//! [`wait_until`] sleeps for all but the last `spin` (default 100 µs) of the wait, then
//! spins on the clock until it reads at least the target, and returns that reading. On
//! Linux a `nanosleep` returns 50–60 µs late on an idle machine (the default timer slack is
//! 50 µs) and later under load, so a plain sleep would make that the lateness; spinning the
//! last stretch brings a worker that is on a CPU to within a clock read (≈ 20 ns) of its
//! slot. The cost is CPU: while spinning a worker holds its core, so the figures are for
//! `W ≤ cores`; with more workers than cores the spin yields the CPU between clock reads.
//! By construction the actual start is never before the scheduled start.
//!
//! # The governor run
//!
//! One `governor::RateLimiter::direct` of `R` per second with burst `Config::governor_burst`
//! (default 1; governor's `Quota::per_second(R)` alone has a burst of `R`, which would send
//! `R` requests at `t0` and is not a pacer) shared by the same `W` threads. Each worker builds
//! a current-thread tokio runtime (`new_current_thread().enable_time()`) and loops:
//! `rt.block_on(limiter.until_ready())` (governor's own wait, which sleeps on a
//! `futures-timer` delay), record the clock reading (the *actual start*), send. A worker stops
//! at the first admission at or after `t0 + D`. Governor does not expose when a request was
//! scheduled, so it has no "lateness against its schedule"; see the ideal lateness below.
//!
//! # The figures ([`Summary`])
//!
//! - `sends`: the requests sent: for limitcore those whose scheduled start is in
//!   `[t0, t0 + D)`, for governor those admitted in `[t0, t0 + D)`.
//! - `rate = sends / D`. For the open-loop pacer the starts in `[t0, t0 + D)` are exactly
//!   `t0 + k·T` for `k < N`, so this is the paced rate (`N / D`, `R` when `T` divides `D`).
//! - `wall_rate = (sends − 1) / (last actual start − first actual start)`: intervals over the
//!   span of the real send times, so a perfect schedule gives exactly `1 / T`; lateness of the
//!   first or last send moves it.
//! - `schedule_lateness_us` (limitcore only): `actual start − scheduled start` of every send,
//!   percentiles p50, p99 and max (nearest rank), in µs. Never negative.
//! - `ideal_lateness_us` (both runs, the comparable column): sort all sends of a run by actual
//!   start; the k-th (from 0) should have started at `t0 + k / R` (exact, `k·10⁹ / R` ns,
//!   rounded down); the lateness is `actual − that`, signed (a governor send can be early by
//!   its own interval rounding), percentiles min, p50, p99 and max in µs. It counts both a
//!   worker's lateness and any slip of the schedule, and it is a rank measure: while one
//!   send is stalled, every send made meanwhile is one place earlier in the order than its
//!   slot and counts as `T` late (a worker preempted for half the run makes the p50 `T`).
//! - `slip_us` (limitcore only): `last start − first start − (sends − 1)·T`, the time the
//!   pacer's schedule lost to idle queues; 0 for the open loop by construction.
//!
//! # The pacer's own counters ([`PacerCounters`])
//!
//! The limitcore run's `LeakyBucket` is wrapped in the core's [`Counted`], so the report also
//! shows what the pacer itself counted, beside what the workers recorded: the reservations it
//! admitted and refused, how many of them were delayed (a start later than the time the
//! reservation was made at) and the wait it granted in all (the sum of those delays).
//!
//! - Open loop, `W` workers, `N` slots: exactly `N` reservations (the sends), `W` refused
//!   (each worker's first one after the last slot was given out, which ends it), `N − 1`
//!   delayed (slot `k` is made at `t0` and starts `k·T` later) and a wait of
//!   `T·N·(N − 1) / 2` in all, whatever the machine does.
//! - Live: the sends plus each worker's last reservation (the one that starts past the end
//!   and is not sent); a refusal is possible only when a worker is preempted between its
//!   clock reading and its reservation. The delays are the real waits the pacer imposed.

use limitcore::clock::{Clock, MonotonicClock, Nanos};
use limitcore::{Counted, Counts, LeakyBucket, Quota, Reserve};
use serde::Serialize;
use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

/// How long after the workers are spawned the run starts: every worker is parked in
/// [`wait_until`] before `t0`, so thread start-up is not counted as lateness.
const LEAD: Duration = Duration::from_millis(5);

/// The most sends one run may record (`N = ⌈D / T⌉`); 32 bytes each, so about 3 GB.
const MAX_SENDS: u64 = 100_000_000;

/// The most worker threads a run may start ([`Config::validate`]).
pub const MAX_WORKERS: usize = 1_024;

/// Nanoseconds per second.
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// How the limitcore run makes its reservations (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// Every reservation at the explicit time `t0`: slot `k` starts at `t0 + k·T`, fixed in
    /// advance (open loop).
    Open,
    /// Every reservation at the worker's current clock reading: the schedule slips when every
    /// worker is late (closed loop).
    Live,
}

/// One run's parameters: the command line's options.
///
/// # Examples
///
/// ```
/// use limitcore_cli::pace::{Config, Schedule};
/// use std::time::Duration;
///
/// let config = Config {
///     schedule: Schedule::Live,
///     work: Duration::from_micros(5),
///     ..Config::new(50_000, 2, 3.0)
/// };
/// assert_eq!(config.interval_ns(), Ok(20_000));
/// assert_eq!(config.slots(), Ok(150_000));
/// assert!(config.validate().is_ok());
/// assert!(Config::new(0, 2, 3.0).validate().is_err());
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// `R`: requests per second.
    pub rate: u32,
    /// `W`: worker threads sharing the pacer.
    pub workers: usize,
    /// `D`: seconds of scheduled sends.
    pub seconds: f64,
    /// The limitcore run's reservations.
    pub schedule: Schedule,
    /// How much of each wait is spun instead of slept (`spin_us` in JSON).
    #[serde(rename = "spin_us", serialize_with = "as_micros")]
    pub spin: Duration,
    /// The busy work of one send, zero for a no-op (`work_us` in JSON).
    #[serde(rename = "work_us", serialize_with = "as_micros")]
    pub work: Duration,
    /// The governor run's burst.
    pub governor_burst: u32,
}

fn as_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

impl Config {
    /// `rate` per second on `workers` threads for `seconds`, open loop, spinning the last
    /// 100 µs, no-op sends, governor burst 1.
    pub fn new(rate: u32, workers: usize, seconds: f64) -> Config {
        Config {
            rate,
            workers,
            seconds,
            schedule: Schedule::Open,
            spin: Duration::from_micros(100),
            work: Duration::ZERO,
            governor_burst: 1,
        }
    }

    /// `D` in nanoseconds, rounded (0 for a negative or NaN `D`).
    pub fn duration_ns(&self) -> Nanos {
        (self.seconds * 1e9).round() as Nanos
    }

    /// The pacer's quota before its capacity is set: `R` per second.
    fn quota(&self) -> Result<Quota, String> {
        Quota::per_second(self.rate).map_err(|e| format!("--rate {}: {e}", self.rate))
    }

    /// `T`: the limitcore pacer's emission interval, `⌈10⁹ / R⌉` ns.
    ///
    /// # Errors
    ///
    /// `R` is not a valid quota (0).
    pub fn interval_ns(&self) -> Result<Nanos, String> {
        Ok(self.quota()?.emission_interval_ns())
    }

    /// `N = ⌈D / T⌉`: the open-loop slots whose start is in `[t0, t0 + D)`.
    ///
    /// # Errors
    ///
    /// As [`Config::interval_ns`].
    pub fn slots(&self) -> Result<u64, String> {
        Ok(self.duration_ns().div_ceil(self.interval_ns()?))
    }

    /// Check every parameter.
    ///
    /// # Errors
    ///
    /// Why a parameter is out of range, naming its command-line option: `W` not in
    /// `1..=`[`MAX_WORKERS`], `D` not in `(0, 86400]` seconds, a governor burst of 0, an `R`
    /// that is not a valid quota (0), or more than 10⁸ sends to record.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if self.workers > MAX_WORKERS {
            return Err(format!("--workers must be at most {MAX_WORKERS}"));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 86_400.0) {
            return Err(format!("--seconds {} is not in (0, 86400]", self.seconds));
        }
        if self.governor_burst == 0 {
            return Err("--governor-burst must be at least 1".into());
        }
        let slots = self.slots()?;
        if slots > MAX_SENDS {
            return Err(format!(
                "{slots} sends would be recorded; at most {MAX_SENDS} (lower --rate or --seconds)"
            ));
        }
        Ok(())
    }
}

/// One send of the limitcore run, all times in ns of the pacer's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Clock reading just before `reserve_n_at` was called.
    pub called: Nanos,
    /// Clock reading just after it returned.
    pub returned: Nanos,
    /// The reservation's start: the scheduled start of the send.
    pub start: Nanos,
    /// The clock reading at which the worker saw `start` pass: the actual start.
    pub actual: Nanos,
}

/// The record of a limitcore run, made by [`run_limitcore`].
#[derive(Debug, Clone)]
pub struct PacerRun {
    /// The run's start, ns of the pacer's clock.
    pub t0: Nanos,
    /// `D` in ns.
    pub duration: Nanos,
    /// `R`.
    pub rate: u32,
    /// `T`, the pacer's emission interval in ns.
    pub interval: Nanos,
    /// Each worker's sends, in the order it made them.
    pub workers: Vec<Vec<Slot>>,
    /// The pacer's own counts ([`Counted`] around it) after the run.
    pub counts: Counts,
}

/// The record of a governor run, made by [`run_governor`].
#[derive(Debug, Clone)]
pub struct GovernorRun {
    /// The run's start, ns of a [`MonotonicClock`].
    pub t0: Nanos,
    /// `D` in ns.
    pub duration: Nanos,
    /// `R`.
    pub rate: u32,
    /// Each worker's actual starts, in order.
    pub workers: Vec<Vec<Nanos>>,
}

/// Wait until `clock` reads at least `target` and return that reading: sleep while more than
/// `spin` ns remain, then spin on the clock (yielding the CPU between reads if
/// `yield_in_spin`). Returns at once, with the current reading, if `target` has passed.
/// All times are ns of `clock`.
///
/// # Examples
///
/// ```
/// use limitcore::clock::{Clock, MonotonicClock};
/// use limitcore_cli::pace::wait_until;
///
/// let clock = MonotonicClock::new();
/// let target = clock.now() + 2_000_000; // 2 ms from now
/// let woke = wait_until(&clock, target, 100_000, false); // spin the last 100 µs
/// assert!(woke >= target);
/// ```
pub fn wait_until<C: Clock>(clock: &C, target: Nanos, spin: Nanos, yield_in_spin: bool) -> Nanos {
    loop {
        let now = clock.now();
        if now >= target {
            return now;
        }
        let left = target - now;
        if left > spin {
            std::thread::sleep(Duration::from_nanos(left - spin));
        } else if yield_in_spin {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One send: `work` of busy work from `from` (nothing when it is zero).
fn send<C: Clock>(clock: &C, from: Nanos, work: Nanos) {
    if work > 0 {
        let until = from.saturating_add(work);
        while clock.now() < until {
            std::hint::spin_loop();
        }
    }
}

/// Whether the spin in [`wait_until`] should give the CPU away: more workers than CPUs.
fn oversubscribed(workers: usize) -> bool {
    workers > std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn nanos(d: Duration) -> Nanos {
    Nanos::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}

/// Spawn `config.workers` threads running `worker(t0)` from a common start `t0` (a clock
/// reading [`LEAD`] after they were spawned) and collect their results.
fn run_workers<T: Send>(
    config: &Config,
    clock: &MonotonicClock,
    worker: impl Fn(Nanos) -> T + Sync,
) -> (Nanos, Vec<T>) {
    let start = AtomicU64::new(0);
    let barrier = Barrier::new(config.workers + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..config.workers)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    // Relaxed: the barrier orders the store before this load.
                    worker(start.load(Ordering::Relaxed))
                })
            })
            .collect();
        let t0 = clock.now() + nanos(LEAD);
        start.store(t0, Ordering::Relaxed);
        barrier.wait();
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("a pace worker panicked"))
            .collect();
        (t0, results)
    })
}

/// The limitcore run: `config.workers` threads paced by one shared [`LeakyBucket`] for
/// `config.seconds` of real time (see the [module documentation](self)).
///
/// # Errors
///
/// The parameters are out of range ([`Config::validate`]).
///
/// # Examples
///
/// ```
/// use limitcore_cli::pace::{run_limitcore, Config};
///
/// // 2,000 per second on two workers for 10 ms: slots 0.5 ms apart.
/// let run = run_limitcore(&Config::new(2_000, 2, 0.01))?;
/// let mut starts: Vec<u64> = run.sends().map(|s| s.start).collect();
/// starts.sort_unstable();
/// assert_eq!(starts.len(), 20);
/// assert!(starts.windows(2).all(|w| w[1] - w[0] == 500_000));
/// assert!(run.sends().all(|s| s.actual >= s.start)); // never early
/// # Ok::<(), String>(())
/// ```
pub fn run_limitcore(config: &Config) -> Result<PacerRun, String> {
    config.validate()?;
    let interval = config.interval_ns()?;
    let slots = config.slots()?;
    let capacity = match config.schedule {
        // Slots 0..N fit; the N+1-th reservation is refused, which ends the run.
        Schedule::Open => u32::try_from(slots).map_err(|_| "too many slots".to_string())?,
        Schedule::Live => u32::try_from(config.workers + 1).unwrap_or(u32::MAX),
    };
    let quota = config
        .quota()?
        .with_burst(capacity)
        .map_err(|e| format!("pacer capacity {capacity}: {e}"))?;
    let pacer =
        Counted::new(LeakyBucket::new(quota).map_err(|e| format!("pacer quota {quota}: {e}"))?);
    let clock = pacer.inner().clock();
    let duration = config.duration_ns();
    let (spin, work) = (nanos(config.spin), nanos(config.work));
    let yield_in_spin = oversubscribed(config.workers);
    let per_worker = usize::try_from(slots / config.workers as u64 + 2).unwrap_or(0);

    let (t0, workers) = run_workers(config, clock, |t0| {
        let end = t0 + duration;
        let mut sends = Vec::with_capacity(per_worker);
        wait_until(clock, t0, spin, yield_in_spin);
        loop {
            let called = clock.now();
            let at = match config.schedule {
                Schedule::Open => t0,
                Schedule::Live => called,
            };
            let reservation = match pacer.reserve_n_at(1, at, Duration::MAX) {
                Ok(r) => r,
                // Open loop: every slot of the run has been given out.
                Err(_) if config.schedule == Schedule::Open => break,
                // Live: cannot happen with capacity W + 1 (each worker holds at most one
                // reservation), but a refusal is exact: wait it out and ask again.
                Err(denied) => match denied.retry_after() {
                    Some(wait) => {
                        let target = clock.now().saturating_add(nanos(wait));
                        wait_until(clock, target, spin, yield_in_spin);
                        continue;
                    }
                    None => break,
                },
            };
            let returned = clock.now();
            let start = reservation.start();
            if start >= end {
                break;
            }
            let actual = wait_until(clock, start, spin, yield_in_spin);
            send(clock, actual, work);
            sends.push(Slot {
                called,
                returned,
                start,
                actual,
            });
        }
        sends
    });
    Ok(PacerRun {
        t0,
        duration,
        rate: config.rate,
        interval,
        workers,
        counts: pacer.counts(),
    })
}

/// The governor run: `config.workers` threads each awaiting `until_ready` on one shared
/// `governor::RateLimiter::direct`, on a current-thread tokio runtime per worker, for
/// `config.seconds` of real time (see the [module documentation](self)).
///
/// # Errors
///
/// The parameters are out of range ([`Config::validate`]), or a worker's tokio runtime could
/// not be built.
pub fn run_governor(config: &Config) -> Result<GovernorRun, String> {
    config.validate()?;
    let (rate, burst) = match (
        NonZeroU32::new(config.rate),
        NonZeroU32::new(config.governor_burst),
    ) {
        (Some(rate), Some(burst)) => (rate, burst),
        _ => return Err("--rate and --governor-burst must be at least 1".into()),
    };
    let limiter =
        governor::RateLimiter::direct(governor::Quota::per_second(rate).allow_burst(burst));
    let clock = MonotonicClock::new();
    let duration = config.duration_ns();
    let (spin, work) = (nanos(config.spin), nanos(config.work));
    let yield_in_spin = oversubscribed(config.workers);
    let per_worker = usize::try_from(config.slots()? / config.workers as u64 + 2).unwrap_or(0);

    let (t0, results) = run_workers(config, &clock, |t0| {
        // Built before the start, so the runtime's set-up is not lateness.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let end = t0 + duration;
        let mut sends = Vec::with_capacity(per_worker);
        wait_until(&clock, t0, spin, yield_in_spin);
        loop {
            rt.block_on(limiter.until_ready());
            let actual = clock.now();
            if actual >= end {
                break;
            }
            send(&clock, actual, work);
            sends.push(actual);
        }
        Ok::<_, String>(sends)
    });
    Ok(GovernorRun {
        t0,
        duration,
        rate: config.rate,
        workers: results.into_iter().collect::<Result<_, _>>()?,
    })
}

/// Percentiles of a set of times, in µs: nearest rank (the smallest value with at least that
/// fraction of the set at or below it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// The smallest.
    pub min: f64,
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest.
    pub max: f64,
}

impl Percentiles {
    /// Of `values` (ns, any order); `None` for an empty set.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::pace::Percentiles;
    ///
    /// let p = Percentiles::of_nanos(vec![3_000, -1_000, 2_000, 1_000]).unwrap();
    /// assert_eq!((p.min, p.p50, p.p99, p.max), (-1.0, 1.0, 3.0, 3.0));
    /// ```
    pub fn of_nanos(mut values: Vec<i64>) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let rank = |p: f64| {
            let k = (p * values.len() as f64).ceil() as usize;
            values[k.clamp(1, values.len()) - 1] as f64 / 1e3
        };
        Some(Percentiles {
            min: values[0] as f64 / 1e3,
            p50: rank(0.50),
            p99: rank(0.99),
            max: values[values.len() - 1] as f64 / 1e3,
        })
    }
}

/// One run's figures (see the [module documentation](self) for the definitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Requests sent.
    pub sends: u64,
    /// `sends / D`, per second.
    pub rate: f64,
    /// `(sends − 1) / (last actual start − first actual start)`, per second; `None` with
    /// fewer than two sends.
    pub wall_rate: Option<f64>,
    /// `actual start − scheduled start`, µs (limitcore only).
    pub schedule_lateness_us: Option<Percentiles>,
    /// `actual start of the k-th send − (t0 + k / R)`, µs.
    pub ideal_lateness_us: Option<Percentiles>,
    /// `last start − first start − (sends − 1)·T`, µs (limitcore only).
    pub slip_us: Option<f64>,
}

/// `actual_k − (t0 + k·10⁹ / rate)` for the actual starts sorted in place (a rate of 0 counts
/// as 1).
fn ideal_lateness(actuals: &mut [Nanos], t0: Nanos, rate: u32) -> Vec<i64> {
    actuals.sort_unstable();
    actuals
        .iter()
        .enumerate()
        .map(|(k, &actual)| {
            let ideal =
                u128::from(t0) + k as u128 * u128::from(NANOS_PER_SEC) / u128::from(rate.max(1));
            i64::try_from(i128::from(actual) - ideal as i128).unwrap_or(i64::MAX)
        })
        .collect()
}

/// `(n − 1) / (last − first)` per second for sorted times.
fn wall_rate(sorted: &[Nanos]) -> Option<f64> {
    let (first, last) = (sorted.first()?, sorted.last()?);
    (last > first).then(|| (sorted.len() - 1) as f64 * 1e9 / (last - first) as f64)
}

impl PacerRun {
    /// Every send, in no particular order.
    pub fn sends(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.workers.iter().flatten()
    }

    /// The run's figures.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::pace::{PacerRun, Slot};
    ///
    /// // Three sends 1 ms apart at 1,000/s over 3 ms, the last one 2 µs late.
    /// let slot = |start: u64, late: u64| Slot { called: 0, returned: 0, start, actual: start + late };
    /// let run = PacerRun {
    ///     t0: 0,
    ///     duration: 3_000_000,
    ///     rate: 1_000,
    ///     interval: 1_000_000,
    ///     workers: vec![vec![slot(0, 0), slot(1_000_000, 0), slot(2_000_000, 2_000)]],
    ///     counts: Default::default(),
    /// };
    /// let summary = run.summary();
    /// assert_eq!((summary.sends, summary.rate), (3, 1_000.0));
    /// assert_eq!(summary.schedule_lateness_us.unwrap().max, 2.0);
    /// assert_eq!(summary.slip_us, Some(0.0));
    /// ```
    pub fn summary(&self) -> Summary {
        let sends = self.sends().count() as u64;
        let mut actuals: Vec<Nanos> = self.sends().map(|s| s.actual).collect();
        let ideal = ideal_lateness(&mut actuals, self.t0, self.rate);
        let scheduled = self
            .sends()
            .map(|s| i64::try_from(i128::from(s.actual) - i128::from(s.start)).unwrap_or(i64::MAX))
            .collect();
        let (first, last) = (
            self.sends().map(|s| s.start).min(),
            self.sends().map(|s| s.start).max(),
        );
        let slip = first.zip(last).map(|(first, last)| {
            (last - first) as f64 - sends.saturating_sub(1).saturating_mul(self.interval) as f64
        });
        Summary {
            sends,
            rate: sends as f64 * 1e9 / self.duration as f64,
            wall_rate: wall_rate(&actuals),
            schedule_lateness_us: Percentiles::of_nanos(scheduled),
            ideal_lateness_us: Percentiles::of_nanos(ideal),
            slip_us: slip.map(|ns| ns / 1e3),
        }
    }
}

impl GovernorRun {
    /// The run's figures (governor exposes no schedule: no schedule lateness, no slip).
    pub fn summary(&self) -> Summary {
        let mut actuals: Vec<Nanos> = self.workers.iter().flatten().copied().collect();
        let sends = actuals.len() as u64;
        let ideal = ideal_lateness(&mut actuals, self.t0, self.rate);
        Summary {
            sends,
            rate: sends as f64 * 1e9 / self.duration as f64,
            wall_rate: wall_rate(&actuals),
            schedule_lateness_us: None,
            ideal_lateness_us: Percentiles::of_nanos(ideal),
            slip_us: None,
        }
    }
}

/// `governor / limitcore` for the figures where both are defined and the divisor is neither
/// 0 nor infinite; `None` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratio {
    /// Of [`Summary::sends`].
    pub sends: Option<f64>,
    /// Of [`Summary::rate`].
    pub rate: Option<f64>,
    /// Of [`Summary::wall_rate`].
    pub wall_rate: Option<f64>,
    /// Of the p50 of [`Summary::ideal_lateness_us`].
    pub ideal_lateness_p50: Option<f64>,
    /// Of the p99 of [`Summary::ideal_lateness_us`].
    pub ideal_lateness_p99: Option<f64>,
    /// Of the max of [`Summary::ideal_lateness_us`].
    pub ideal_lateness_max: Option<f64>,
}

/// `governor / limitcore`, where defined.
fn ratio(governor: Option<f64>, limitcore: Option<f64>) -> Option<f64> {
    match (governor, limitcore) {
        (Some(g), Some(l)) if l != 0.0 && l.is_finite() && g.is_finite() => Some(g / l),
        _ => None,
    }
}

/// One percentile of a summary's ideal lateness.
fn ideal(s: &Summary, f: fn(&Percentiles) -> f64) -> Option<f64> {
    s.ideal_lateness_us.as_ref().map(f)
}

impl Ratio {
    /// `governor / limitcore` figure by figure.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_cli::pace::{Ratio, Summary};
    ///
    /// let summary = |sends: u64| Summary {
    ///     sends,
    ///     rate: sends as f64,
    ///     wall_rate: None,
    ///     schedule_lateness_us: None,
    ///     ideal_lateness_us: None,
    ///     slip_us: None,
    /// };
    /// let ratio = Ratio::of(&summary(1_000), &summary(600));
    /// assert_eq!(ratio.sends, Some(0.6));
    /// assert_eq!(ratio.wall_rate, None);
    /// assert_eq!(Ratio::of(&summary(0), &summary(600)).sends, None);
    /// ```
    pub fn of(limitcore: &Summary, governor: &Summary) -> Ratio {
        let (lc, gov) = (limitcore, governor);
        Ratio {
            sends: ratio(Some(gov.sends as f64), Some(lc.sends as f64)),
            rate: ratio(Some(gov.rate), Some(lc.rate)),
            wall_rate: ratio(gov.wall_rate, lc.wall_rate),
            ideal_lateness_p50: ratio(ideal(gov, |p| p.p50), ideal(lc, |p| p.p50)),
            ideal_lateness_p99: ratio(ideal(gov, |p| p.p99), ideal(lc, |p| p.p99)),
            ideal_lateness_max: ratio(ideal(gov, |p| p.max), ideal(lc, |p| p.max)),
        }
    }
}

/// The limitcore pacer's own counters after a run, from the core's [`Counts`] (see the
/// [module documentation](self), "The pacer's own counters", for what they are exactly in
/// each schedule).
///
/// # Examples
///
/// ```
/// use limitcore_cli::pace::{run_limitcore, Config, PacerCounters};
///
/// // 1,000 per second on one worker for 10 ms, open loop: 10 slots 1 ms apart.
/// let run = run_limitcore(&Config::new(1_000, 1, 0.01))?;
/// let counters = PacerCounters::from(&run.counts);
/// assert_eq!((counters.reservations, counters.refused, counters.delayed), (10, 1, 9));
/// assert_eq!(counters.wait_total_ns, 1_000_000 * 10 * 9 / 2);
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PacerCounters {
    /// Reservations admitted.
    pub reservations: u64,
    /// Reservations refused.
    pub refused: u64,
    /// Admitted reservations that start later than the time they were made at.
    pub delayed: u64,
    /// The wait granted: the sum of the admitted reservations' delays, ns (modulo 2^64, which
    /// an open loop of `N` slots passes when `T·N·(N − 1) / 2` does: a day at 1,000/s).
    pub wait_total_ns: u64,
}

impl From<&Counts> for PacerCounters {
    fn from(c: &Counts) -> PacerCounters {
        PacerCounters {
            reservations: c.admitted,
            refused: c.refused(),
            delayed: c.delayed,
            wait_total_ns: c.wait_ns,
        }
    }
}

/// Both runs of one [`Config`] side by side: the `limitcore pace` report.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The runs' parameters.
    pub config: Config,
    /// The machine's available parallelism when the runs were made.
    pub cores: usize,
    /// `T`, the limitcore pacer's emission interval, in ns.
    pub interval_ns: u64,
    /// The limitcore run's figures.
    pub limitcore: Summary,
    /// The governor run's figures.
    pub governor: Summary,
    /// `governor / limitcore`.
    pub ratio: Ratio,
    /// The limitcore pacer's own counters (governor has none).
    pub limitcore_counters: PacerCounters,
}

impl Comparison {
    /// Run `config` paced by limitcore ([`run_limitcore`]), then by governor
    /// ([`run_governor`]), one after the other, and gather both runs' figures.
    ///
    /// # Errors
    ///
    /// Parameters out of range ([`Config::validate`]), or a governor worker's tokio runtime
    /// could not be built.
    pub fn run(config: Config) -> Result<Comparison, String> {
        let interval_ns = config.interval_ns()?;
        let run = run_limitcore(&config)?;
        let limitcore = run.summary();
        let governor = run_governor(&config)?.summary();
        Ok(Comparison {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            interval_ns,
            ratio: Ratio::of(&limitcore, &governor),
            limitcore,
            governor,
            limitcore_counters: PacerCounters::from(&run.counts),
            config,
        })
    }

    /// The comparison as pretty JSON: `config`, `cores`, `interval_ns`, `limitcore`,
    /// `governor` (lateness in µs), `ratio` (`null` where undefined) and
    /// `limitcore_counters`.
    ///
    /// # Errors
    ///
    /// serde_json's, if serialising failed.
    pub fn json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The comparison as a table, a line for each figure and a column for each run, with
    /// a header that names the two pacers and their settings, then the limitcore pacer's own
    /// counters.
    pub fn text(&self) -> String {
        let (config, lc, gov, r) = (&self.config, &self.limitcore, &self.governor, &self.ratio);
        let interval_ns = self.interval_ns;
        let mut s = String::new();
        let work = if config.work.is_zero() {
            "no-op".to_string()
        } else {
            format!("{} ns busy work", config.work.as_nanos())
        };
        let _ = writeln!(
            s,
            "pace: {}/s for {} s, {} workers on {} cores, send = {}",
            config.rate, config.seconds, config.workers, self.cores, work
        );
        let _ = match config.schedule {
            Schedule::Open => writeln!(
                s,
                "limitcore  LeakyBucket::reserve_n_at(1, t0): open loop, slot k at t0 + k·T, \
                 T = {interval_ns} ns"
            ),
            Schedule::Live => writeln!(
                s,
                "limitcore  LeakyBucket::reserve_n_at(1, now): live clock, closed loop, \
                 T = {interval_ns} ns"
            ),
        };
        let _ = writeln!(
            s,
            "           wait: sleep, then spin the last {} µs",
            config.spin.as_micros()
        );
        let _ = writeln!(
            s,
            "governor   RateLimiter::direct(per_second({}).allow_burst({})).until_ready(),",
            config.rate, config.governor_burst
        );
        let _ = writeln!(
            s,
            "           block_on on a current-thread tokio runtime per worker"
        );
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<34} {:>12} {:>12} {:>9}",
            "", "limitcore", "governor", "gov/lc"
        );
        row(
            &mut s,
            "sends",
            Some(lc.sends as f64),
            Some(gov.sends as f64),
            r.sends,
            0,
        );
        row(
            &mut s,
            "rate = sends / D (/s)",
            Some(lc.rate),
            Some(gov.rate),
            r.rate,
            1,
        );
        row(
            &mut s,
            "wall rate = (n−1) / span (/s)",
            lc.wall_rate,
            gov.wall_rate,
            r.wall_rate,
            1,
        );
        row(
            &mut s,
            "slip of the schedule (µs)",
            lc.slip_us,
            None,
            None,
            1,
        );
        let _ = writeln!(s, "lateness vs own schedule (µs)");
        let sched = |f: fn(&Percentiles) -> f64| lc.schedule_lateness_us.as_ref().map(f);
        row(&mut s, "  p50", sched(|p| p.p50), None, None, 2);
        row(&mut s, "  p99", sched(|p| p.p99), None, None, 2);
        row(&mut s, "  max", sched(|p| p.max), None, None, 2);
        let _ = writeln!(s, "lateness vs t0 + k/R, same for both (µs)");
        row(
            &mut s,
            "  min",
            ideal(lc, |p| p.min),
            ideal(gov, |p| p.min),
            None,
            2,
        );
        row(
            &mut s,
            "  p50",
            ideal(lc, |p| p.p50),
            ideal(gov, |p| p.p50),
            r.ideal_lateness_p50,
            2,
        );
        row(
            &mut s,
            "  p99",
            ideal(lc, |p| p.p99),
            ideal(gov, |p| p.p99),
            r.ideal_lateness_p99,
            2,
        );
        row(
            &mut s,
            "  max",
            ideal(lc, |p| p.max),
            ideal(gov, |p| p.max),
            r.ideal_lateness_max,
            2,
        );
        let c = &self.limitcore_counters;
        let _ = writeln!(
            s,
            "\nlimitcore pacer's counters (limitcore::Counted): {} reservations, {} refused, \
             {} delayed, wait granted {:.6} s in all ({:.2} µs a reservation)",
            c.reservations,
            c.refused,
            c.delayed,
            c.wait_total_ns as f64 / 1e9,
            c.wait_total_ns as f64 / 1e3 / c.reservations.max(1) as f64
        );
        s
    }
}

/// One line of the table: a figure's name, its limitcore and governor values with `decimals`
/// decimals, and their ratio.
fn row(
    s: &mut String,
    name: &str,
    limitcore: Option<f64>,
    governor: Option<f64>,
    ratio: Option<f64>,
    decimals: usize,
) {
    let _ = writeln!(
        s,
        "{name:<34} {:>12} {:>12} {:>9}",
        cell(limitcore, decimals),
        cell(governor, decimals),
        ratio_cell(ratio)
    );
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
