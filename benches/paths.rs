//! Every path beside its reference, interleaved in one process (issue 28): the ratios the
//! targets are stated in, robust to a machine whose speed drifts during the run.
//!
//! ```text
//! cargo bench --bench paths                          # every group, 7 rounds
//! cargo bench --bench paths -- budget counted 5      # some groups, 5 rounds
//! ```
//!
//! A round times each contender of a group in turn (the reference first), `ITERS` calls per
//! thread on one shared limiter, on 1 and 2 threads started together; the time per call per
//! thread is the slowest thread's. Each contender's ratio to its reference is taken in the
//! same round, and the report gives, per contender and thread count, the median time, the
//! median ratio and the ratios' spread (min–max) over the rounds.
//!
//! Groups (reference first):
//! - `budget`: `Gcra::try_acquire`; `Budget::try_acquire_n(1)`, with debt, `charge(1)`,
//!   `take_up_to(1)`, `try_acquire_n(4096)` at 64 GiB/s (on this machine most of those
//!   calls refuse: 4 KiB at 64 GiB/s is 60 ns of budget), at 1 TiB/s (every call
//!   admitted) and at 3 MiB/s (nearly every call refused); leaky-bucket and
//!   async-speed-limit (every call admitted);
//! - `counted`: `Gcra::try_acquire` and `Counted<Gcra>`, admitting and refusing;
//! - `permits`: a bare compare-and-swap grant and `fetch_sub` release on one word, and
//!   `Permits::try_acquire(1)` with the permit dropped; tokio's `Semaphore`;
//! - `lanes`: `Gcra::try_acquire_n(1)`, `Budget::try_acquire_n(1)` (the budget the lanes
//!   share, alone), and `Lanes::try_acquire(Lane::TOP, 1)` and
//!   `Lanes::try_acquire(Lane::LOW, 1)` with nobody waiting;
//! - `settle`: `Gcra::try_acquire`; a reservation of 2 settled to 1
//!   (`acquire_refundable_at` + `settle`) and a forced `charge_at(1)` (issue 37: at most 2×
//!   and 1.15× the decision);
//! - `governor`: governor's `check` and `Gcra`, `TokenBucket`, admitting and refusing.

#![allow(missing_docs)]

mod common;

use governor::{clock::DefaultClock as GovClock, state::InMemoryState, state::NotKeyed};
use limitcore::concurrency::Permits;
use limitcore::{
    Budget, BudgetConfig, Counted, Gcra, Lane, Lanes, LanesConfig, Quota, RateLimiter, Refund,
    TokenBucket,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

type Governor = governor::RateLimiter<NotKeyed, InMemoryState, GovClock>;
type Op = Box<dyn Fn() -> bool + Send + Sync>;

/// Calls per thread per measurement.
const ITERS: u64 = 2_000_000;

/// 10^9 a second, a burst of 10^6: every call admitted.
fn allow() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap()
}

/// One permit an hour, taken at set-up: every call refused.
fn deny() -> Quota {
    Quota::per_hour(1).unwrap()
}

fn governor(deny: bool) -> Governor {
    let gov = if deny {
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
    gov
}

/// A limiter's `try_acquire`, its only permit taken first when `deny`.
fn limiter<L: RateLimiter + 'static>(l: L, deny: bool) -> Op {
    if deny {
        assert!(l.try_acquire().is_ok() && l.try_acquire().is_err());
    }
    Box::new(move || l.try_acquire().is_ok())
}

fn group(name: &str) -> Vec<(String, Op)> {
    let mut v: Vec<(String, Op)> = Vec::new();
    match name {
        "budget" => {
            v.push(("gcra".into(), limiter(Gcra::new(allow()).unwrap(), false)));
            let b = Budget::new(allow()).unwrap();
            v.push((
                "budget".into(),
                Box::new(move || b.try_acquire_n(1).is_ok()),
            ));
            let config = BudgetConfig::new(allow()).max_debt(Duration::from_millis(10));
            let b = Budget::with_config(&config, limitcore::clock::DefaultClock::new()).unwrap();
            v.push((
                "budget-debt".into(),
                Box::new(move || b.try_acquire_n(1).is_ok()),
            ));
            let b = Budget::new(allow()).unwrap();
            v.push((
                "budget-charge".into(),
                Box::new(move || b.charge(1).shortfall == 0),
            ));
            let b = Budget::new(allow()).unwrap();
            v.push((
                "budget-take-up-to".into(),
                Box::new(move || b.take_up_to(1) == 1),
            ));
            let b = Budget::new("64GiB/s burst 64MiB".parse().unwrap()).unwrap();
            v.push((
                "budget-bytes".into(),
                Box::new(move || b.try_acquire_n(4096).is_ok()),
            ));
            let b = Budget::new("1TiB/s burst 64MiB".parse().unwrap()).unwrap();
            v.push((
                "budget-bytes-1tib".into(),
                Box::new(move || b.try_acquire_n(4096).is_ok()),
            ));
            // A refusal flood on a byte budget (3 MiB/s: a unit is not 1 ns): the exact
            // wait it carries, dropped here, is never divided out.
            let b = Budget::new("3MiB/s burst 4KiB".parse().unwrap()).unwrap();
            assert!(b.try_acquire_n(4096).is_ok() && b.try_acquire_n(4096).is_err());
            v.push((
                "budget-bytes-refused".into(),
                Box::new(move || b.try_acquire_n(4096).is_ok()),
            ));
            let leaky = leaky_bucket::RateLimiter::builder()
                .max(1_000_000)
                .initial(1_000_000)
                .refill(1_000_000)
                .interval(Duration::from_millis(1))
                .build();
            v.push((
                "leaky-bucket".into(),
                Box::new(move || leaky.try_acquire(1)),
            ));
            let speed =
                async_speed_limit::Limiter::<async_speed_limit::clock::StandardClock>::new(1e9);
            v.push((
                "async-speed-limit".into(),
                Box::new(move || speed.consume_duration(1).is_zero()),
            ));
        }
        "counted" => {
            for (path, deny) in [("allow", false), ("deny", true)] {
                let q = if deny { self::deny() } else { allow() };
                v.push((format!("gcra/{path}"), limiter(Gcra::new(q).unwrap(), deny)));
                v.push((
                    format!("counted-gcra/{path}"),
                    limiter(Counted::new(Gcra::new(q).unwrap()), deny),
                ));
            }
        }
        "permits" => {
            let bare = std::sync::atomic::AtomicU64::new(0);
            v.push((
                "bare-cas".into(),
                Box::new(move || {
                    use std::sync::atomic::Ordering::Relaxed;
                    let mut count = bare.load(Relaxed);
                    loop {
                        if count >= 1 << 20 {
                            return false;
                        }
                        match bare.compare_exchange_weak(count, count + 1, Relaxed, Relaxed) {
                            Ok(_) => break,
                            Err(actual) => count = actual,
                        }
                    }
                    bare.fetch_sub(1, Relaxed);
                    true
                }),
            ));
            let p = Permits::new(1 << 20).unwrap();
            v.push(("permits".into(), Box::new(move || p.try_acquire(1).is_ok())));
            let s = tokio::sync::Semaphore::new(1 << 20);
            v.push(("tokio".into(), Box::new(move || s.try_acquire().is_ok())));
        }
        "lanes" => {
            let g = Gcra::new(allow()).unwrap();
            v.push((
                "gcra-n".into(),
                Box::new(move || g.try_acquire_n(1).is_ok()),
            ));
            // The budget the lanes share, alone: what the lanes add is the rest.
            let b = Budget::new(allow()).unwrap();
            v.push((
                "budget-n".into(),
                Box::new(move || b.try_acquire_n(1).is_ok()),
            ));
            let l = Lanes::new(LanesConfig::new(allow())).unwrap();
            v.push((
                "lanes-top".into(),
                Box::new(move || l.try_acquire(Lane::TOP, 1).is_ok()),
            ));
            let l = Lanes::new(LanesConfig::new(allow())).unwrap();
            v.push((
                "lanes-low".into(),
                Box::new(move || l.try_acquire(Lane::LOW, 1).is_ok()),
            ));
        }
        "settle" => {
            // Costs known after the work (issue 37), every call admitted: a reservation of
            // 2 settled to 1 (the unused one given back) and a forced charge of 1, beside the
            // decision they cost against.
            v.push(("gcra".into(), limiter(Gcra::new(allow()).unwrap(), false)));
            let g = Gcra::new(allow()).unwrap();
            v.push((
                "reserve-settle".into(),
                Box::new(move || {
                    let now = g.now();
                    match g.acquire_refundable_at(2, now) {
                        Ok(receipt) => g.settle(receipt, 1, now).charged == 0,
                        Err(_) => false,
                    }
                }),
            ));
            let g = Gcra::new(allow()).unwrap();
            v.push((
                "gcra-charge".into(),
                Box::new(move || g.charge_at(1, g.now()).shortfall == 0),
            ));
        }
        "governor" => {
            for (path, deny) in [("allow", false), ("deny", true)] {
                let q = if deny { self::deny() } else { allow() };
                let gov = governor(deny);
                v.push((
                    format!("governor/{path}"),
                    Box::new(move || gov.check().is_ok()),
                ));
                v.push((format!("gcra/{path}"), limiter(Gcra::new(q).unwrap(), deny)));
                v.push((
                    format!("token-bucket/{path}"),
                    limiter(TokenBucket::new(q).unwrap(), deny),
                ));
            }
        }
        other => panic!("no group {other:?}: budget, counted, permits, lanes, settle, governor"),
    }
    v
}

/// The time per call per thread of `op` on `threads` threads started together (the slowest
/// thread's: `common::run_threads`).
fn time(op: &Op, threads: usize) -> f64 {
    common::run_threads(&|_| op(), threads, ITERS).as_nanos() as f64 / ITERS as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `--one GROUP LABEL CALLS`: only that contender, on one thread, `CALLS` times (to count
/// its instructions under `valgrind --tool=callgrind`, whatever the machine's load: the
/// difference of two counts, ÷ the difference of the calls, is the instructions per call).
fn one(args: &[String]) {
    let (group_name, label) = (args[0].as_str(), args[1].as_str());
    let calls: u64 = args[2].parse().expect("CALLS");
    let ops = group(group_name);
    let (_, op) = ops
        .iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no contender {label:?} in {group_name}"));
    for _ in 0..calls {
        black_box(op());
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--one") {
        return one(&args[1..]);
    }
    let rounds: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(7);
    let mut groups: Vec<&str> = args
        .iter()
        .filter(|a| a.parse::<usize>().is_err())
        .map(String::as_str)
        .collect();
    if groups.is_empty() {
        groups = vec![
            "budget", "counted", "permits", "lanes", "settle", "governor",
        ];
    }
    println!("{rounds} rounds, {ITERS} calls per thread per measurement; 2 cores on this machine");
    for name in groups {
        let ops = group(name);
        for threads in [1usize, 2] {
            // times[contender][round]
            let mut times = vec![Vec::new(); ops.len()];
            for _ in 0..rounds {
                for (i, (_, op)) in ops.iter().enumerate() {
                    times[i].push(time(op, threads));
                }
            }
            println!("\n{name}, {threads} thread(s): ns per call per thread (median), ratio to the first of its kind (median, min–max)");
            for (i, (label, _)) in ops.iter().enumerate() {
                // The reference: the first contender (of the same path, for groups with two).
                let path = label.split('/').nth(1);
                let r = ops
                    .iter()
                    .position(|(l, _)| l.split('/').nth(1) == path)
                    .unwrap_or(0);
                let mut ratios: Vec<f64> = (0..rounds).map(|k| times[i][k] / times[r][k]).collect();
                let (lo, hi) = ratios
                    .iter()
                    .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                let mut t = times[i].clone();
                println!(
                    "  {label:<24} {:>8.2} ns  {:>6.3}x  ({lo:.3}–{hi:.3})",
                    median(&mut t),
                    median(&mut ratios)
                );
            }
        }
    }
}
