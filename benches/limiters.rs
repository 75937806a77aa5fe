//! limitcore against governor, in the same run, on the same quotas.
//!
//! ```text
//! cargo bench --bench limiters            # everything
//! cargo bench --bench limiters -- single  # one group
//! python3 benches/report.py               # the BENCHMARKS.md table from the results
//! ```
//!
//! Groups (each limiter on the same quota, default clocks unless named):
//! - `single/allow`, `single/deny`: one thread, ns per `try_acquire` (`check` for governor).
//! - `contended/allow`, `contended/deny`: every core on one shared limiter; the time is per
//!   check *per thread*, and criterion's throughput line gives total checks per second.
//! - `clock`: one reading of each clock.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{clock::DefaultClock as GovClock, state::InMemoryState, state::NotKeyed};
use limitcore::clock::{Clock, CoarseClock, MonotonicClock, StdClock};
use limitcore::{Gcra, Quota, RateLimiter, TokenBucket};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

type Governor = governor::RateLimiter<NotKeyed, InMemoryState, GovClock>;

/// A quota that always admits at benchmark speed: 10^9/s (one permit per ns), burst 10^6.
const ALLOW: (u32, u32) = (1_000_000_000, 1_000_000);
/// A quota that is exhausted after one permit: 1/h, burst 1.
const DENY_PERIOD: Duration = Duration::from_secs(3600);

fn governor(per_second: u32, burst: u32, period: Option<Duration>) -> Governor {
    let q = match period {
        Some(p) => governor::Quota::with_period(p).unwrap(),
        None => governor::Quota::per_second(NonZeroU32::new(per_second).unwrap()),
    };
    governor::RateLimiter::direct(q.allow_burst(NonZeroU32::new(burst).unwrap()))
}

/// The three limiters on one quota: (name, check).
fn contenders(deny: bool) -> Vec<(&'static str, Box<dyn Fn() -> bool + Send + Sync>)> {
    let quota = if deny {
        Quota::new(1, DENY_PERIOD).unwrap()
    } else {
        Quota::per_second(ALLOW.0)
            .unwrap()
            .with_burst(ALLOW.1)
            .unwrap()
    };
    let gcra = Gcra::new(quota);
    let bucket = TokenBucket::new(quota).unwrap();
    let gov = if deny {
        governor(1, 1, Some(DENY_PERIOD))
    } else {
        governor(ALLOW.0, ALLOW.1, None)
    };
    if deny {
        assert!(gcra.try_acquire().is_ok() && gcra.try_acquire().is_err());
        assert!(bucket.try_acquire().is_ok() && bucket.try_acquire().is_err());
        assert!(gov.check().is_ok() && gov.check().is_err());
    }
    vec![
        (
            "limitcore-gcra",
            Box::new(move || gcra.try_acquire().is_ok()),
        ),
        (
            "limitcore-token-bucket",
            Box::new(move || bucket.try_acquire().is_ok()),
        ),
        ("governor", Box::new(move || gov.check().is_ok())),
    ]
}

fn single(c: &mut Criterion) {
    for (path, deny) in [("allow", false), ("deny", true)] {
        let mut g = c.benchmark_group(format!("single/{path}"));
        g.throughput(Throughput::Elements(1));
        for (name, check) in contenders(deny) {
            g.bench_function(name, |b| b.iter(|| black_box(check())));
        }
        g.finish();
    }
}

/// `threads` threads each run `iters` checks on the shared limiter; the sample's time is the
/// wall time of the slowest, so time/iter is per check per thread.
fn contended(c: &mut Criterion) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    for (path, deny) in [("allow", false), ("deny", true)] {
        let mut g = c.benchmark_group(format!("contended/{path}"));
        g.throughput(Throughput::Elements(threads as u64));
        for (name, check) in contenders(deny) {
            g.bench_with_input(
                BenchmarkId::new(name, format!("{threads}-threads")),
                &threads,
                |b, &threads| {
                    b.iter_custom(|iters| {
                        let start = std::sync::Barrier::new(threads);
                        std::thread::scope(|s| {
                            let handles: Vec<_> = (0..threads)
                                .map(|_| {
                                    s.spawn(|| {
                                        start.wait();
                                        let t0 = Instant::now();
                                        for _ in 0..iters {
                                            black_box(check());
                                        }
                                        t0.elapsed()
                                    })
                                })
                                .collect();
                            handles
                                .into_iter()
                                .map(|h| h.join().unwrap())
                                .max()
                                .unwrap()
                        })
                    })
                },
            );
        }
        g.finish();
    }
}

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    let mono = MonotonicClock::new();
    g.bench_function("limitcore-monotonic", |b| b.iter(|| black_box(mono.now())));
    let std_clock = StdClock::new();
    g.bench_function("limitcore-std", |b| b.iter(|| black_box(std_clock.now())));
    let coarse = CoarseClock::new().unwrap();
    g.bench_function("limitcore-coarse", |b| b.iter(|| black_box(coarse.now())));
    let quanta = quanta::Clock::new();
    g.bench_function("governor-default-quanta", |b| {
        b.iter(|| black_box(quanta.now()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = single, contended, clocks
}
criterion_main!(benches);
