//! limitcore against governor, in the same run, on equivalent quotas.
//!
//! ```text
//! cargo bench --bench limiters              # everything (about 8 minutes on 2 cores)
//! cargo bench --bench limiters -- single    # one group
//! python3 benches/report.py                 # the BENCHMARKS.md tables from the results
//! ```
//!
//! Groups (default clocks everywhere):
//! - `single/allow`, `single/deny`: one thread, time per `try_acquire` (`check` for governor).
//! - `threads/allow`, `threads/deny`: 1, 2 and 8 threads on one shared limiter; the time is
//!   per check *per thread*, and `report.py` turns it into total checks per second. This
//!   machine has 2 cores, so 8 threads shows oversubscription.
//! - `clock`: one reading of each clock (the default `MonotonicClock`, and each of its
//!   sources forced).
//! - `counters/allow`, `counters/deny`: `Gcra::try_acquire` with and without `Counted` (the
//!   core's counters), on 1 and 2 threads sharing the limiter, time per check per thread as
//!   in `threads/*` (`cargo bench --bench limiters -- counters`).

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{clock::DefaultClock as GovClock, state::InMemoryState, state::NotKeyed};
use limitcore::clock::{Clock, ClockSource, CoarseClock, MonotonicClock, StdClock};
use limitcore::{
    Counted, FixedWindow, Gcra, LeakyBucket, Quota, RateLimiter, SlidingLog, SlidingWindow,
    TokenBucket,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

type Governor = governor::RateLimiter<NotKeyed, InMemoryState, GovClock>;
type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// Quotas that always admit at benchmark speed (≥ 8·10^8 per second, far above what 2 cores
/// can ask), within each limiter's limits.
fn allow_quota(name: &str) -> Quota {
    match name {
        // count ≤ 2^24 − 1 and period ≥ 2^24 ns.
        "sliding-window" => Quota::new(16_000_000, Duration::from_millis(20)).unwrap(),
        // period ≥ 2^(bit length of count) ns: 5·10^8 per second fits.
        "fixed-window" => Quota::per_second(500_000_000).unwrap(),
        // 8 bytes per entry: 10^6 entries, 8 MB.
        "sliding-log" => Quota::new(1_000_000, Duration::from_millis(1)).unwrap(),
        _ => Quota::per_second(1_000_000_000)
            .unwrap()
            .with_burst(1_000_000)
            .unwrap(),
    }
}

/// One permit per hour, taken at set-up, so every check is refused.
fn deny_quota() -> Quota {
    Quota::per_hour(1).unwrap()
}

/// Every contender as a check closure, each calling its concrete type (no dynamic dispatch
/// on the limiter: the `dyn Fn` costs all of them the same one indirect call).
fn contenders(deny: bool) -> Vec<(&'static str, Check)> {
    macro_rules! concrete {
        ($t:expr) => {{
            let l = $t;
            if deny {
                assert!(l.try_acquire().is_ok() && l.try_acquire().is_err());
            }
            Box::new(move || l.try_acquire().is_ok()) as Check
        }};
    }
    let q = |name: &str| {
        if deny {
            deny_quota()
        } else {
            allow_quota(name)
        }
    };
    let gov: Governor = if deny {
        governor::RateLimiter::direct(governor::Quota::per_hour(NonZeroU32::new(1).unwrap()))
    } else {
        governor::RateLimiter::direct(
            governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
                .allow_burst(NonZeroU32::new(1_000_000).unwrap()),
        )
    };
    if deny {
        assert!(gov.check().is_ok() && gov.check().is_err());
    }
    vec![
        ("gcra", concrete!(Gcra::new(q("gcra")).unwrap())),
        (
            "token-bucket",
            concrete!(TokenBucket::new(q("token-bucket")).unwrap()),
        ),
        (
            "fixed-window",
            concrete!(FixedWindow::new(q("fixed-window")).unwrap()),
        ),
        (
            "sliding-window",
            concrete!(SlidingWindow::new(q("sliding-window")).unwrap()),
        ),
        (
            "sliding-log",
            concrete!(SlidingLog::new(q("sliding-log")).unwrap()),
        ),
        (
            "leaky-bucket",
            concrete!(LeakyBucket::new(q("leaky-bucket")).unwrap()),
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

fn threads(c: &mut Criterion) {
    for (path, deny) in [("allow", false), ("deny", true)] {
        let mut g = c.benchmark_group(format!("threads/{path}"));
        for (name, check) in contenders(deny) {
            for threads in [1usize, 2, 8] {
                g.throughput(Throughput::Elements(threads as u64));
                g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
                    b.iter_custom(|iters| common::run_threads(&|_| check(), threads, iters))
                });
            }
        }
        g.finish();
    }
}

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    // The default (the process's choice, `MonotonicClock::source()`), then each source.
    let mono = MonotonicClock::new();
    g.bench_function("limitcore-monotonic", |b| b.iter(|| black_box(mono.now())));
    for source in [ClockSource::Tsc, ClockSource::Os] {
        let clock = MonotonicClock::with_source(source);
        let name = format!("limitcore-monotonic-{source:?}").to_lowercase();
        g.bench_function(name, |b| b.iter(|| black_box(clock.now())));
    }
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

/// The counters' cost: the same GCRA check bare (`gcra`) and wrapped in `Counted`
/// (`counted-gcra`), each on a limiter of its own, on 1 and 2 threads; allow and deny quotas
/// as in `threads/*`. The 1-thread difference is the cost per decision; the 2-thread ratio
/// shows whether the stripes keep the threads off each other's lines.
fn counters(c: &mut Criterion) {
    for (path, deny) in [("allow", false), ("deny", true)] {
        let mut g = c.benchmark_group(format!("counters/{path}"));
        let quota = if deny {
            deny_quota()
        } else {
            allow_quota("gcra")
        };
        let plain = Gcra::new(quota).unwrap();
        let counted = Counted::new(Gcra::new(quota).unwrap());
        if deny {
            assert!(plain.try_acquire().is_ok() && plain.try_acquire().is_err());
            assert!(counted.try_acquire().is_ok() && counted.try_acquire().is_err());
        }
        let checks: [(&str, Check); 2] = [
            ("gcra", Box::new(move || plain.try_acquire().is_ok())),
            (
                "counted-gcra",
                Box::new(move || counted.try_acquire().is_ok()),
            ),
        ];
        for (name, check) in checks {
            for threads in [1usize, 2] {
                g.throughput(Throughput::Elements(threads as u64));
                g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
                    b.iter_custom(|iters| common::run_threads(&|_| check(), threads, iters))
                });
            }
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = single, threads, clocks, counters
}
criterion_main!(benches);
