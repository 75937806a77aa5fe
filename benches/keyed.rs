//! Keyed limiters against governor's keyed limiter (dashmap, SipHash), in the same run, and
//! the two maps `Keyed` can use against each other.
//!
//! ```text
//! cargo bench --bench keyed --features dashmap   # (the feature is an alias of `keyed` now)
//! python3 benches/report.py                      # the tables of BENCHMARKS.md
//! cargo run --release --example keyed_memory     # bytes per key at 10^6 keys
//! ```
//!
//! Groups (time per check per thread; this machine has 2 cores):
//! - `keyed/hot`: every check on one key; `keyed/spread`: keys drawn uniformly from 100 000
//!   (all present after warm-up), 1 and 2 threads; `Keyed<u64, GcraRule>` on its default
//!   store (`DashMapStore` with `KeyHasher`), on `DashMapStore` with SipHash-1-3 (std's
//!   `RandomState`, governor's hash), on `PapayaStore` (with `KeyHasher`), the fixed-memory
//!   `KeyedSketch` (2^16 x 4 cells) and governor (dashmap, SipHash: it has no hasher
//!   setting).
//! - `keyed/insert`: every check for a key never seen before (the insert path), 1 thread.
//! - `map/hot`, `map/spread`: the map operation alone (get-or-insert, then a CAS on the
//!   value's `AtomicU64`), papaya against dashmap.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use limitcore::rules::GcraRule;
use limitcore::{DashMapStore, DefaultClock, Keyed, KeyedSketch, PapayaStore, Quota};
use std::collections::hash_map::RandomState;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;

/// One contender's check of one key: admitted?
type Check<'a> = Box<dyn Fn(&u64) -> bool + Sync + 'a>;

/// A cheap per-thread key sequence (xorshift), the same for every contender.
fn keys(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % KEYS
    }
}

fn run_threads(threads: usize, iters: u64, work: &(dyn Fn(u64, u64) + Sync)) -> Duration {
    let start = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    work(t as u64 + 1, iters);
                    t0.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn keyed(c: &mut Criterion) {
    // Always admits at benchmark speed, per key.
    let quota = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    // The default: `DashMapStore` hashing with `KeyHasher`.
    let ours: Keyed<u64, GcraRule> = Keyed::new(quota).unwrap();
    let gov = governor::RateLimiter::keyed(
        governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
            .allow_burst(NonZeroU32::new(1_000_000).unwrap()),
    );
    // The fixed-memory sketch: 2^16 x 4 cells (2 MiB), a sliding-window count that admits
    // everything at benchmark speed (16 M per 20 ms; its counts have 24 bits).
    let sketch: KeyedSketch<u64> = KeyedSketch::new(
        Quota::new(16_000_000, Duration::from_millis(20)).unwrap(),
        1 << 16,
        4,
    )
    .unwrap();
    for k in 0..KEYS {
        let _ = ours.try_acquire(&k);
        let _ = gov.check_key(&k);
        let _ = sketch.try_acquire(&k);
    }
    let warm = |keyed: &dyn Fn(&u64) -> bool| {
        for k in 0..KEYS {
            keyed(&k);
        }
    };
    // SipHash-1-3 (std's `RandomState`): governor's hash, on the default map.
    let on_dashmap_sip: Keyed<u64, GcraRule, DefaultClock, DashMapStore<u64, RandomState>> =
        Keyed::with_store(
            quota,
            DefaultClock::new(),
            DashMapStore::with_hasher(RandomState::new()),
        )
        .unwrap();
    warm(&|k| on_dashmap_sip.try_acquire(k).is_ok());
    let on_papaya: Keyed<u64, GcraRule, DefaultClock, PapayaStore<u64>> =
        Keyed::with_store(quota, DefaultClock::new(), PapayaStore::new()).unwrap();
    warm(&|k| on_papaya.try_acquire(k).is_ok());
    let contenders: Vec<(&str, Check<'_>)> = vec![
        (
            "limitcore-keyed-gcra",
            Box::new(|k| ours.try_acquire(k).is_ok()),
        ),
        (
            "limitcore-keyed-gcra-siphash",
            Box::new(|k| on_dashmap_sip.try_acquire(k).is_ok()),
        ),
        (
            "limitcore-keyed-gcra-papaya",
            Box::new(|k| on_papaya.try_acquire(k).is_ok()),
        ),
        (
            "limitcore-sketch",
            Box::new(|k| sketch.try_acquire(k).is_ok()),
        ),
        // The baseline last (benches/report.py compares every other contender with it).
        ("governor-keyed", Box::new(|k| gov.check_key(k).is_ok())),
    ];
    for (pattern, spread) in [("hot", false), ("spread", true)] {
        let mut g = c.benchmark_group(format!("keyed/{pattern}"));
        for threads in [1usize, 2] {
            for (name, check) in &contenders {
                g.bench_with_input(BenchmarkId::new(*name, threads), &threads, |b, &t| {
                    b.iter_custom(|iters| {
                        run_threads(t, iters, &|seed, iters| {
                            let mut next = keys(seed);
                            for _ in 0..iters {
                                let k = if spread { next() } else { 7 };
                                black_box(check(&k));
                            }
                        })
                    })
                });
            }
        }
        g.finish();
    }
}

fn maps(c: &mut Criterion) {
    let papaya: papaya::HashMap<u64, AtomicU64> = papaya::HashMap::new();
    let dash: dashmap::DashMap<u64, AtomicU64> = dashmap::DashMap::new();
    for k in 0..KEYS {
        papaya.pin().insert(k, AtomicU64::new(0));
        dash.insert(k, AtomicU64::new(0));
    }
    let bump = |a: &AtomicU64| {
        let v = a.load(Ordering::Relaxed);
        let _ = a.compare_exchange_weak(v, v + 1, Ordering::Relaxed, Ordering::Relaxed);
    };
    for (pattern, spread) in [("hot", false), ("spread", true)] {
        let mut g = c.benchmark_group(format!("map/{pattern}"));
        for threads in [1usize, 2] {
            g.bench_with_input(BenchmarkId::new("papaya", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    run_threads(t, iters, &|seed, iters| {
                        let mut next = keys(seed);
                        let map = papaya.pin();
                        for _ in 0..iters {
                            let k = if spread { next() } else { 7 };
                            bump(map.get_or_insert_with(k, || AtomicU64::new(0)));
                        }
                    })
                })
            });
            g.bench_with_input(BenchmarkId::new("dashmap", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    run_threads(t, iters, &|seed, iters| {
                        let mut next = keys(seed);
                        for _ in 0..iters {
                            let k = if spread { next() } else { 7 };
                            match dash.get(&k) {
                                Some(v) => bump(&v),
                                None => bump(&dash.entry(k).or_insert_with(|| AtomicU64::new(0))),
                            }
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

/// First requests: every check is for a key never seen before (the insert path), on one
/// thread, with the default unbounded key count and no automatic sweep (each contender keeps
/// every key, as governor does).
fn insert(c: &mut Criterion) {
    let quota = Quota::per_second(10).unwrap();
    let mut g = c.benchmark_group("keyed/insert");
    let fresh_keys = |b: &mut criterion::Bencher<'_>, check: &dyn Fn(&u64) -> bool| {
        let mut next = 0u64;
        b.iter(|| {
            next += 1;
            black_box(check(&next))
        })
    };
    g.bench_function("limitcore-keyed-gcra", |b| {
        let keyed: Keyed<u64, GcraRule> = Keyed::new(quota)
            .unwrap()
            .with_sweep_interval(Duration::ZERO);
        fresh_keys(b, &|k| keyed.try_acquire(k).is_ok());
    });
    g.bench_function("limitcore-keyed-gcra-siphash", |b| {
        let store = DashMapStore::with_hasher(RandomState::new());
        let keyed: Keyed<u64, GcraRule, DefaultClock, _> =
            Keyed::with_store(quota, DefaultClock::new(), store)
                .unwrap()
                .with_sweep_interval(Duration::ZERO);
        fresh_keys(b, &|k| keyed.try_acquire(k).is_ok());
    });
    g.bench_function("limitcore-keyed-gcra-papaya", |b| {
        let keyed: Keyed<u64, GcraRule, DefaultClock, _> =
            Keyed::with_store(quota, DefaultClock::new(), PapayaStore::new())
                .unwrap()
                .with_sweep_interval(Duration::ZERO);
        fresh_keys(b, &|k| keyed.try_acquire(k).is_ok());
    });
    g.bench_function("governor-keyed", |b| {
        let gov =
            governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(10).unwrap()));
        fresh_keys(b, &|k| gov.check_key(k).is_ok());
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = keyed, insert, maps
}
criterion_main!(benches);
