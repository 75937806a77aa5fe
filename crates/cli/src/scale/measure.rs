//! One point of `limitcore bench`: a contender's limiter built fresh, shared by `threads`
//! threads pinned to cores, each repeating the contender's call for the point's duration.
//!
//! How a point is timed: every thread (and the coordinating thread) waits on a barrier; once
//! released, the threads run the call for the warm-up while the coordinator sleeps, then
//! leave the warm-up loop when the coordinator says so and gather on a second barrier, past
//! which they spin on a start flag. The coordinator, once every thread has reached that
//! barrier, reads the clock and then raises the start flag, which releases them all at once;
//! it raises the stop flag `seconds` later and reads the clock again. No counted call can
//! come before the first reading (a thread's wake-up delay counts against it, never for it).
//! The threads count their calls (and the admitted ones) in local variables, checking the
//! stop flag every [`BATCH`] calls, and return their counts when they see it. Every call is
//! made through one function that is never inlined into the loop (the contender's own code
//! is compiled into it, as into a caller's function), the same for every contender and the
//! floor, and its result goes through [`std::hint::black_box`].
//!
//! On Linux each thread also reads its own time on a CPU (`CLOCK_THREAD_CPUTIME_ID`) when
//! the clock starts and when it stops, so that a point can say how much of the wall
//! time its threads actually ran: on a machine shared with other work, a point whose threads
//! were off their cores part of the time is a point of the other work too.

use super::contender::{Contender, QuotaKind, SPREAD_KEYS};
use crossbeam_utils::CachePadded;
use governor::{clock::DefaultClock as GovClock, state::keyed::DefaultKeyedStateStore};
use governor::{state::InMemoryState, state::NotKeyed};
use limitcore::clock::DefaultClock;
use limitcore::concurrency::Permits;
use limitcore::rules::GcraRule;
use limitcore::{
    Budget, Counted, DashMapStore, FixedWindow, Gcra, Keyed, PapayaStore, Quota, RateLimiter,
    SlidingWindow, Store, TokenBucket,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Calls a thread makes between two looks at the stop flag.
pub(super) const BATCH: u64 = 16;

/// The key every thread of a hot-key point asks for.
const HOT_KEY: u64 = 7;

/// Permits of the admitting `Permits` and `Semaphore`: far more than threads hold at once.
const MANY_PERMITS: u32 = 1 << 20;

/// How long a point runs and how its threads are placed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Timing {
    /// The measured stretch, in seconds.
    pub(super) seconds: f64,
    /// The warm-up before it, in seconds (not counted).
    pub warmup: f64,
    /// Pin each thread to a core (where the OS allows it).
    pub pin: bool,
}

/// What one point measured, before the report turns it into rates.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    /// Calls counted by each thread, in thread order.
    pub per_thread: Vec<u64>,
    /// Of those, the calls the limiter admitted (every call, for the floor).
    pub admitted: u64,
    /// The wall time between the start flag's release of the threads and the stop flag.
    pub wall: Duration,
    /// Whether every thread was pinned to its core.
    pub pinned: bool,
    /// The threads' time on a CPU during the measured stretch, summed, where the OS says
    /// (Linux).
    pub cpu: Option<Duration>,
}

/// The cores the threads are pinned to, in order: thread `t` goes to `cores[t % len]`.
/// Empty where the OS does not say (then no thread is pinned).
pub(super) fn cores() -> Vec<core_affinity::CoreId> {
    core_affinity::get_core_ids().unwrap_or_default()
}

/// This thread's time on a CPU so far: Linux's `CLOCK_THREAD_CPUTIME_ID`, which counts the
/// running stretch up to the call (`/proc/thread-self/schedstat` does not: it lags by up to
/// one scheduler tick, 4 ms at 250 Hz, 8 % of a 0.05 s point); `None` elsewhere.
#[cfg(target_os = "linux")]
fn thread_cpu() -> Option<Duration> {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu() -> Option<Duration> {
    None
}

/// A cheap per-thread key sequence (xorshift64), the same for every keyed contender.
fn next_key(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % SPREAD_KEYS
}

/// One call of `op`, never inlined into the measuring loop: every contender's call is
/// compiled as a function of its own (as in a caller's code) and called the same way, so
/// that no contender gains or loses by how the compiler fits its code into the loop (inlined
/// there, governor's refusal measured 0.6–0.7× of the same call made through a function
/// pointer, as the criterion benches make it).
#[inline(never)]
fn call<F: Fn(usize, &mut u64) -> bool>(op: &F, thread: usize, key: &mut u64) -> bool {
    op(thread, key)
}

/// Run `op` (given the thread's index and its key generator's state; true when admitted) on
/// `threads` threads as the module describes.
fn run_point<F>(op: &F, threads: usize, timing: Timing, cores: &[core_affinity::CoreId]) -> Sample
where
    F: Fn(usize, &mut u64) -> bool + Sync,
{
    let ready = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let warming = AtomicBool::new(true);
    let start = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (ready, go, warming, start, stop) = (&ready, &go, &warming, &start, &stop);
                s.spawn(move || {
                    let pinned = timing.pin
                        && !cores.is_empty()
                        && core_affinity::set_for_current(cores[t % cores.len()]);
                    let mut key = 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1);
                    ready.wait();
                    while warming.load(Ordering::Relaxed) {
                        for _ in 0..BATCH {
                            black_box(call(op, t, &mut key));
                        }
                    }
                    go.wait();
                    while !start.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    let cpu_start = thread_cpu();
                    let (mut calls, mut admitted) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..BATCH {
                            admitted += u64::from(black_box(call(op, t, &mut key)));
                        }
                        calls += BATCH;
                    }
                    let cpu = cpu_start.and_then(|a| Some(thread_cpu()?.saturating_sub(a)));
                    (calls, admitted, pinned, cpu)
                })
            })
            .collect();
        ready.wait();
        std::thread::sleep(Duration::from_secs_f64(timing.warmup));
        warming.store(false, Ordering::Relaxed);
        go.wait();
        let t0 = Instant::now();
        start.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_secs_f64(timing.seconds));
        stop.store(true, Ordering::Relaxed);
        let wall = t0.elapsed();
        let mut sample = Sample {
            per_thread: Vec::with_capacity(threads),
            admitted: 0,
            wall,
            pinned: true,
            cpu: Some(Duration::ZERO),
        };
        for h in handles {
            // A contender's call that panicked is a bug of this program; pass it on.
            let (calls, admitted, pinned, cpu) =
                h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            sample.per_thread.push(calls);
            sample.admitted += admitted;
            sample.pinned &= pinned;
            sample.cpu = sample.cpu.zip(cpu).map(|(sum, cpu)| sum + cpu);
        }
        sample
    })
}

/// 10^9 a second, a burst of 10^6.
fn allow() -> Result<Quota, String> {
    Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(1_000_000))
        .map_err(|e| e.to_string())
}

/// One permit an hour.
fn deny() -> Result<Quota, String> {
    Quota::per_hour(1).map_err(|e| e.to_string())
}

/// The quota of `kind` for a limitcore limiter named `name` (the window limiters' admitting
/// quotas are their nearest valid ones).
fn quota(name: Contender, kind: QuotaKind) -> Result<Quota, String> {
    match (kind, name) {
        (QuotaKind::Admitting, Contender::FixedWindow) => {
            // A period of at least 2^(bit length of the count) ns.
            Quota::per_second(500_000_000).map_err(|e| e.to_string())
        }
        (QuotaKind::Admitting, Contender::SlidingWindow) => {
            // A count below 2^24 and a period of at least 2^24 ns.
            Quota::new(16_000_000, Duration::from_millis(20)).map_err(|e| e.to_string())
        }
        (QuotaKind::Admitting, _) => allow(),
        _ => deny(),
    }
}

/// Take what a refusing quota holds (a few permits at most) so that every later call is
/// refused; an error if it still admits.
fn exhaust(mut admit: impl FnMut() -> bool, what: Contender) -> Result<(), String> {
    for _ in 0..1_000 {
        if !admit() {
            return Ok(());
        }
    }
    Err(format!(
        "{what}: its refusing quota still admits after 1000 calls"
    ))
}

/// `n`, which is not 0 (checked when compiling).
const fn nonzero(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("a zero constant"),
    }
}

/// governor's quota for `kind`: 10^9 a second with a burst of 10^6, or one an hour.
fn governor_quota(kind: QuotaKind) -> governor::Quota {
    const BILLION: NonZeroU32 = nonzero(1_000_000_000);
    const MILLION: NonZeroU32 = nonzero(1_000_000);
    match kind {
        QuotaKind::Admitting => governor::Quota::per_second(BILLION).allow_burst(MILLION),
        _ => governor::Quota::per_hour(NonZeroU32::MIN),
    }
}

/// One point of a keyed contender under `kind` on `threads` threads, its limiter keeping the
/// keys' states in `store` (`keyed-hot` and `keyed-spread` on the default store,
/// `keyed-hot-papaya` and `keyed-spread-papaya` on papaya's): the contenders on two stores
/// differ in the store alone.
///
/// # Errors
///
/// As [`measure`].
fn keyed<S: Store<u64>>(
    contender: Contender,
    store: S,
    kind: QuotaKind,
    threads: usize,
    timing: Timing,
    cores: &[core_affinity::CoreId],
) -> Result<Sample, String> {
    let keyed: Keyed<u64, GcraRule, DefaultClock, S> =
        Keyed::with_store(quota(contender, kind)?, DefaultClock::new(), store)
            .map_err(|e| format!("{contender}: {e}"))?;
    let hot = matches!(contender, Contender::KeyedHot | Contender::KeyedHotPapaya);
    let check = |key: &u64| keyed.try_acquire(key).is_ok();
    keyed_point(contender, hot, kind, check, threads, timing, cores)
}

/// One point of a keyed contender, limitcore's or governor's, whose decision for a key is
/// `check`: every thread on [`HOT_KEY`] (`hot`; refusing, its permit taken before the
/// point), or on keys drawn by [`next_key`] from [`SPREAD_KEYS`], each present (and,
/// refusing, its one permit taken) before the point. One code path for both libraries:
/// they differ in `check` alone (a closure, so each call is inlined into the point's loop
/// as the library's own call would be).
///
/// # Errors
///
/// As [`measure`]; a spread key that refused its first permit, or admitted a second under
/// the refusing quota.
fn keyed_point<F: Fn(&u64) -> bool + Sync>(
    contender: Contender,
    hot: bool,
    kind: QuotaKind,
    check: F,
    threads: usize,
    timing: Timing,
    cores: &[core_affinity::CoreId],
) -> Result<Sample, String> {
    let refusing = kind == QuotaKind::Refusing;
    if hot {
        if refusing {
            exhaust(|| check(&HOT_KEY), contender)?;
        }
        return Ok(run_point(
            &|_, _: &mut u64| check(&HOT_KEY),
            threads,
            timing,
            cores,
        ));
    }
    for k in 0..SPREAD_KEYS {
        let admitted = check(&k);
        if refusing && (!admitted || check(&k)) {
            return Err(format!(
                "{contender}: key {k} refused its first permit or admitted a second"
            ));
        }
    }
    Ok(run_point(
        &|_, key: &mut u64| check(&next_key(key)),
        threads,
        timing,
        cores,
    ))
}

/// One point: `contender` under `kind` on `threads` threads.
///
/// # Errors
///
/// A limiter that refuses its quota, or a refusing quota that still admits (both would be
/// bugs of this program or of the contender).
pub(super) fn measure(
    contender: Contender,
    kind: QuotaKind,
    threads: usize,
    timing: Timing,
    cores: &[core_affinity::CoreId],
) -> Result<Sample, String> {
    let refusing = kind == QuotaKind::Refusing;
    let bad = |e: limitcore::QuotaError| format!("{contender}: {e}");
    macro_rules! limiter {
        ($l:expr) => {{
            let l = $l;
            if refusing {
                exhaust(|| l.try_acquire().is_ok(), contender)?;
            }
            Ok(run_point(
                &|_, _: &mut u64| l.try_acquire().is_ok(),
                threads,
                timing,
                cores,
            ))
        }};
    }
    match contender {
        Contender::Gcra => limiter!(Gcra::new(quota(contender, kind)?).map_err(bad)?),
        Contender::TokenBucket => limiter!(TokenBucket::new(quota(contender, kind)?).map_err(bad)?),
        Contender::FixedWindow => limiter!(FixedWindow::new(quota(contender, kind)?).map_err(bad)?),
        Contender::SlidingWindow => {
            limiter!(SlidingWindow::new(quota(contender, kind)?).map_err(bad)?)
        }
        Contender::CountedGcra => limiter!(Counted::new(
            Gcra::new(quota(contender, kind)?).map_err(bad)?
        )),
        Contender::Budget => {
            let budget = Budget::new(quota(contender, kind)?).map_err(bad)?;
            if refusing {
                exhaust(|| budget.try_acquire_n(1).is_ok(), contender)?;
            }
            Ok(run_point(
                &|_, _: &mut u64| budget.try_acquire_n(1).is_ok(),
                threads,
                timing,
                cores,
            ))
        }
        Contender::KeyedHot | Contender::KeyedSpread => {
            keyed(contender, DashMapStore::new(), kind, threads, timing, cores)
        }
        Contender::KeyedHotPapaya | Contender::KeyedSpreadPapaya => {
            keyed(contender, PapayaStore::new(), kind, threads, timing, cores)
        }
        Contender::Permits => {
            let limit = if refusing { 1 } else { MANY_PERMITS };
            let permits = Permits::new(limit).map_err(|e| format!("{contender}: {e}"))?;
            let held = if refusing {
                Some(
                    permits
                        .try_acquire(1)
                        .map_err(|e| format!("{contender}: {e}"))?,
                )
            } else {
                None
            };
            let sample = run_point(
                &|_, _: &mut u64| permits.try_acquire(1).is_ok(),
                threads,
                timing,
                cores,
            );
            drop(held);
            Ok(sample)
        }
        Contender::Governor => {
            let gov: governor::RateLimiter<NotKeyed, InMemoryState, GovClock> =
                governor::RateLimiter::direct(governor_quota(kind));
            if refusing {
                exhaust(|| gov.check().is_ok(), contender)?;
            }
            Ok(run_point(
                &|_, _: &mut u64| gov.check().is_ok(),
                threads,
                timing,
                cores,
            ))
        }
        Contender::GovernorKeyedHot | Contender::GovernorKeyedSpread => {
            let gov: governor::RateLimiter<u64, DefaultKeyedStateStore<u64>, GovClock> =
                governor::RateLimiter::keyed(governor_quota(kind));
            let hot = contender == Contender::GovernorKeyedHot;
            let check = |key: &u64| gov.check_key(key).is_ok();
            keyed_point(contender, hot, kind, check, threads, timing, cores)
        }
        Contender::TokioSemaphore => {
            let semaphore = Semaphore::new(if refusing { 1 } else { MANY_PERMITS as usize });
            let held = if refusing {
                Some(
                    semaphore
                        .try_acquire()
                        .map_err(|e| format!("{contender}: {e}"))?,
                )
            } else {
                None
            };
            let sample = run_point(
                &|_, _: &mut u64| semaphore.try_acquire().is_ok(),
                threads,
                timing,
                cores,
            );
            drop(held);
            Ok(sample)
        }
        Contender::LeakyBucket => {
            let bucket = if refusing {
                leaky_bucket::RateLimiter::builder()
                    .max(1)
                    .initial(0)
                    .refill(1)
                    .interval(Duration::from_secs(3600))
                    .build()
            } else {
                leaky_bucket::RateLimiter::builder()
                    .max(1_000_000)
                    .initial(1_000_000)
                    .refill(1_000_000)
                    .interval(Duration::from_millis(1))
                    .build()
            };
            if refusing {
                exhaust(|| bucket.try_acquire(1), contender)?;
            }
            Ok(run_point(
                &|_, _: &mut u64| bucket.try_acquire(1),
                threads,
                timing,
                cores,
            ))
        }
        Contender::FetchAddShared => {
            let word = AtomicU64::new(0);
            Ok(run_point(
                &|_, _: &mut u64| word.fetch_add(1, Ordering::Relaxed) != u64::MAX,
                threads,
                timing,
                cores,
            ))
        }
        Contender::FetchAddPerThread => {
            let words: Vec<CachePadded<AtomicU64>> = (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect();
            Ok(run_point(
                &|t, _: &mut u64| words[t].fetch_add(1, Ordering::Relaxed) != u64::MAX,
                threads,
                timing,
                cores,
            ))
        }
    }
}
