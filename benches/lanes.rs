//! Priority lanes (`Lanes`): the fast path against `Budget` and `Gcra`, throughput at 2
//! threads against a port of RocksDB's `GenericRateLimiter` (a mutex, a 100 ms refill, four
//! priority queues; written here for the benchmark, in this file only), and, after the timed
//! groups, two figures measured once on the real clock: the achieved rate over 2 s, and the
//! top lane's wait under a saturating lowest lane at 64 MiB/s (beside the port's); and the
//! fast path again, interleaved with `Budget` and `Gcra` so that a shared machine's load
//! slows them alike (the ratio the issue bounds).
//!
//! ```text
//! cargo bench --bench lanes                 # everything (about 2 minutes on 2 cores)
//! cargo bench --bench lanes -- lanes/fast   # one group (the figures print after any run)
//! ```
//!
//! Groups:
//! - `lanes/fast`: one thread, time per grant, never refused: `Gcra::try_acquire_n(1)` and
//!   `Budget::try_acquire_n(1)` at 10^9/s; `Budget` and `Lanes::try_acquire` (top lane and
//!   lowest lane, nobody waiting) at 10^9/s and at 64 GiB/s with 64-byte requests.
//! - `lanes/threads2`: 2 threads on one limiter, time per request per thread, never
//!   waiting (64-byte requests at 64 GiB/s, far below the rate): `Lanes::acquire_blocking`
//!   (`lanes`: one thread in the top lane, one in the lowest) against the port's `request`
//!   (the same priorities), and `Lanes::try_acquire` (`lanes-try`) beside
//!   `Budget::try_acquire_n` for the budget word's own cost under contention (a decision
//!   whose clock reading went stale while its thread was descheduled may be refused there:
//!   stricter, never more permissive).

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

mod common;

use criterion::{criterion_group, Criterion, Throughput};
use limitcore::{Budget, Gcra, Lane, Lanes, LanesConfig, Quota, RateLimiter};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A port of RocksDB's `GenericRateLimiter` (`util/rate_limiter.cc`): one mutex, a refill of
/// `rate × period` bytes every `period` (100 ms by default), four FIFO queues (0 = `IO_LOW`
/// … 3 = `IO_USER`), `IO_USER` served first and the other three in an order chosen at each
/// refill by two coin flips of 1/`fairness`; the front request may be granted in part; the
/// first waiter to find no refill pending sleeps until the next refill, the others until
/// signalled, and a request granted in full signals a front request for the next duty.
struct RocksDbPort {
    state: Mutex<PortState>,
    period: Duration,
    refill: i64,
    fairness: u64,
}

struct PortRequest {
    remaining: i64,
    cv: Arc<Condvar>,
}

struct PortState {
    available: i64,
    next_refill: Instant,
    queues: [VecDeque<usize>; 4],
    requests: slab::Slab<PortRequest>,
    refill_pending: bool,
    rng: u64,
}

impl RocksDbPort {
    fn new(bytes_per_sec: i64, period: Duration) -> Self {
        let refill = bytes_per_sec * period.as_micros() as i64 / 1_000_000;
        RocksDbPort {
            state: Mutex::new(PortState {
                available: 0,
                next_refill: Instant::now(),
                queues: Default::default(),
                requests: slab::Slab::new(),
                refill_pending: false,
                rng: 0x2545_f491_4f6c_dd1d,
            }),
            period,
            refill,
            fairness: 10,
        }
    }

    /// RocksDB's `Request(bytes, pri)` (`bytes` at most a refill).
    fn request(&self, bytes: i64, pri: usize) {
        let mut st = self.state.lock().unwrap();
        let mut bytes = bytes;
        if st.available > 0 {
            let through = st.available.min(bytes);
            st.available -= through;
            bytes -= through;
        }
        if bytes == 0 {
            return;
        }
        let cv = Arc::new(Condvar::new());
        let key = st.requests.insert(PortRequest {
            remaining: bytes,
            cv: cv.clone(),
        });
        st.queues[pri].push_back(key);
        loop {
            let now = Instant::now();
            if st.next_refill > now {
                if st.refill_pending {
                    st = cv.wait(st).unwrap();
                } else {
                    st.refill_pending = true;
                    let wait = st.next_refill - now;
                    st = cv.wait_timeout(st, wait).unwrap().0;
                    st.refill_pending = false;
                }
            } else {
                self.refill_and_grant(&mut st);
            }
            if st.requests[key].remaining == 0 {
                for q in st.queues.iter().rev() {
                    if let Some(&front) = q.front() {
                        st.requests[front].cv.notify_one();
                        break;
                    }
                }
                break;
            }
        }
        st.requests.remove(key);
    }

    fn one_in(st: &mut PortState, n: u64) -> bool {
        st.rng ^= st.rng << 13;
        st.rng ^= st.rng >> 7;
        st.rng ^= st.rng << 17;
        st.rng % n == 0
    }

    /// `GeneratePriorityIterationOrderLocked`.
    fn order(&self, st: &mut PortState) -> [usize; 4] {
        let (user, high, mid, low) = (3, 2, 1, 0);
        let high_last = Self::one_in(st, self.fairness);
        let mid_after_low = Self::one_in(st, self.fairness);
        let (first, second) = if mid_after_low {
            (low, mid)
        } else {
            (mid, low)
        };
        if high_last {
            [user, first, second, high]
        } else {
            [user, high, first, second]
        }
    }

    /// `RefillBytesAndGrantRequestsLocked`.
    fn refill_and_grant(&self, st: &mut PortState) {
        st.next_refill = Instant::now() + self.period;
        st.available = self.refill;
        for pri in self.order(st) {
            while let Some(&key) = st.queues[pri].front() {
                let request = &mut st.requests[key];
                if st.available < request.remaining {
                    request.remaining -= st.available;
                    st.available = 0;
                    break;
                }
                st.available -= request.remaining;
                request.remaining = 0;
                request.cv.notify_one();
                st.queues[pri].pop_front();
            }
        }
    }
}

fn fast(c: &mut Criterion) {
    let mut g = c.benchmark_group("lanes/fast");
    g.throughput(Throughput::Elements(1));
    let giga = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    let bytes: Quota = "64GiB/s burst 1GiB".parse().unwrap();
    let gcra = Gcra::new(giga).unwrap();
    g.bench_function("gcra/1e9", |b| {
        b.iter(|| black_box(gcra.try_acquire_n(1).is_ok()))
    });
    for (name, quota, n) in [("1e9", giga, 1u32), ("64GiB", bytes, 64)] {
        let budget = Budget::new(quota).unwrap();
        g.bench_function(format!("budget/{name}"), |b| {
            b.iter(|| black_box(budget.try_acquire_n(n).is_ok()))
        });
        let lanes = Lanes::new(LanesConfig::new(quota)).unwrap();
        for lane in [Lane::USER, Lane::LOW] {
            g.bench_function(format!("lanes-{}/{name}", lane.index()), |b| {
                b.iter(|| black_box(lanes.try_acquire(lane, n).is_ok()))
            });
        }
    }
    g.finish();
}

fn threads2(c: &mut Criterion) {
    let mut g = c.benchmark_group("lanes/threads2");
    g.throughput(Throughput::Elements(1));
    let bytes: Quota = "64GiB/s burst 1GiB".parse().unwrap();
    let lanes = Lanes::new(LanesConfig::new(bytes)).unwrap();
    let port = RocksDbPort::new(64 << 30, Duration::from_millis(100));
    let lane = |t: usize| if t == 0 { Lane::USER } else { Lane::LOW };
    g.bench_function("lanes-try", |b| {
        b.iter_custom(|iters| {
            common::run_threads(
                &|t| {
                    black_box(lanes.try_acquire(lane(t), 64).is_ok());
                },
                2,
                iters,
            )
        })
    });
    g.bench_function("lanes", |b| {
        b.iter_custom(|iters| {
            common::run_threads(&|t| lanes.acquire_blocking(lane(t), 64).unwrap(), 2, iters)
        })
    });
    let budget = Budget::new(bytes).unwrap();
    g.bench_function("budget", |b| {
        b.iter_custom(|iters| {
            common::run_threads(
                &|_| {
                    black_box(budget.try_acquire_n(64).is_ok());
                },
                2,
                iters,
            )
        })
    });
    g.bench_function("rocksdb-port", |b| {
        b.iter_custom(|iters| {
            common::run_threads(&|t| port.request(64, if t == 0 { 3 } else { 0 }), 2, iters)
        })
    });
    g.finish();
}

/// The fast path interleaved: 31 rounds of 2·10^5 calls of each contender in turn (so that
/// a machine shared with other work slows them alike), the median ns per call of each and
/// Lanes' ratio to `Budget::try_acquire_n` (the issue's bound: 1.2×) and to
/// `Gcra::try_acquire_n`.
fn fast_ratio_figure() {
    let giga = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    let bytes: Quota = "64GiB/s burst 1GiB".parse().unwrap();
    let gcra = Gcra::new(giga).unwrap();
    for (name, quota, n) in [("1e9/s, n = 1", giga, 1u32), ("64GiB/s, n = 64", bytes, 64)] {
        let budget = Budget::new(quota).unwrap();
        let lanes = Lanes::new(LanesConfig::new(quota)).unwrap();
        let calls: [(&str, &dyn Fn() -> bool); 4] = [
            ("gcra", &|| gcra.try_acquire_n(1).is_ok()),
            ("budget", &|| budget.try_acquire_n(n).is_ok()),
            ("lanes-top", &|| lanes.try_acquire(Lane::USER, n).is_ok()),
            ("lanes-low", &|| lanes.try_acquire(Lane::LOW, n).is_ok()),
        ];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); calls.len()];
        for _ in 0..31 {
            for (i, (_, call)) in calls.iter().enumerate() {
                let t0 = Instant::now();
                for _ in 0..200_000 {
                    black_box(call());
                }
                times[i].push(t0.elapsed().as_nanos() as f64 / 200_000.0);
            }
        }
        let median: Vec<f64> = times
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect();
        println!(
            "lanes/fast-interleaved {name}: gcra {:.1} ns, budget {:.1} ns, lanes top {:.1} ns ({:.2}× budget, {:.2}× gcra), lanes low {:.1} ns ({:.2}× budget)",
            median[0],
            median[1],
            median[2],
            median[2] / median[1],
            median[2] / median[0],
            median[3],
            median[3] / median[1],
        );
    }
}

/// Percentile `p` (nearest rank) of sorted `v`.
fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

/// The achieved rate over 2 s at 64 MiB/s: 2 threads asking 4–64 KiB in random lanes.
fn rate_figure() {
    let rate = 64u64 << 20;
    let lanes = Lanes::new(LanesConfig::new("64MiB/s burst 1MiB".parse().unwrap())).unwrap();
    lanes.acquire_blocking(Lane::LOW, 1 << 20).unwrap(); // drain the initial burst
    let count = || {
        (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap().granted)
            .sum::<u64>()
    };
    let before = count();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let lanes = &lanes;
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                while t0.elapsed() < Duration::from_secs(2) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let n = (4 << 10) + (x % (60 << 10)) as u32;
                    lanes
                        .acquire_blocking(Lane::new((x >> 32) as u8 % 4), n)
                        .unwrap();
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let got = (count() - before) as f64 / secs;
    println!(
        "lanes/rate: {:.0} B/s over {secs:.3} s at 64 MiB/s: {:+.3} % (2 threads, 4-64 KiB, random lanes)",
        got,
        (got / rate as f64 - 1.0) * 100.0
    );
}

/// The top lane's wait under a saturating lowest lane at 64 MiB/s for 2 s: user reads of
/// 4–64 KiB with Poisson arrivals (mean 5 ms), each wait beside its bound `(Q + n)/r`.
fn top_wait_figure() {
    let rate = (64u64 << 20) as f64;
    let lanes = Lanes::new(LanesConfig::new("64MiB/s burst 1MiB".parse().unwrap())).unwrap();
    let port = RocksDbPort::new(64 << 20, Duration::from_millis(100));
    for which in ["lanes", "rocksdb-port"] {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (waits, over) = std::thread::scope(|s| {
            let (lanes, port, stop) = (&lanes, &port, &stop);
            s.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if which == "lanes" {
                        lanes.acquire_blocking(Lane::LOW, 1 << 20).unwrap();
                    } else {
                        port.request(1 << 20, 0);
                    }
                }
            });
            let reader = s.spawn(move || {
                std::thread::sleep(Duration::from_millis(200)); // the low lane saturates first
                let mut x = 0x2545_f491_4f6c_dd1du64;
                let mut uniform = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 11) as f64 / (1u64 << 53) as f64
                };
                let (mut waits, mut over) = (Vec::new(), Duration::ZERO);
                let t0 = Instant::now();
                let mut next = t0;
                while t0.elapsed() < Duration::from_secs(2) {
                    next += Duration::from_secs_f64(-0.005 * (1.0 - uniform()).ln());
                    if let Some(d) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                    let n = (4 << 10) + (uniform() * f64::from(60 << 10)) as u32;
                    let t = Instant::now();
                    if which == "lanes" {
                        lanes.acquire_blocking(Lane::USER, n).unwrap();
                    } else {
                        port.request(i64::from(n), 3);
                    }
                    let w = t.elapsed();
                    // Its bound: one request at a time, so Q = 0: n / r; by how much a wait
                    // passed it (the waker's own latency: the OS timer, the scheduler).
                    let bound = Duration::from_secs_f64(f64::from(n) / rate);
                    over = over.max(w.saturating_sub(bound));
                    waits.push(w);
                }
                (waits, over)
            });
            let out = reader.join().unwrap();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            out
        });
        let mut waits = waits;
        waits.sort_unstable();
        println!(
            "lanes/top-wait {which}: {} reads, wait p50 {:?} p99 {:?} max {:?}; bound n/r ≤ {:?} (64 KiB at 64 MiB/s); most past a read's own n/r: {:?}",
            waits.len(),
            pct(&waits, 0.5),
            pct(&waits, 0.99),
            waits[waits.len() - 1],
            Duration::from_secs_f64(f64::from(64 << 10) / rate),
            over
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = fast, threads2
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // The figures: once, after the timed groups (skipped by `cargo test --benches`).
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        fast_ratio_figure();
        rate_figure();
        top_wait_figure();
    }
}
