//! Property and thread tests for the window limiters and the pacer, against the plain
//! reference models (proptest).

use limitcore::clock::ManualClock;
use limitcore::reference::{
    FixedWindowModel, LeakyBucketModel, SlidingLogModel, SlidingWindowModel,
};
use limitcore::{FixedWindow, LeakyBucket, Quota, RateLimiter, Reserve, SlidingLog, SlidingWindow};
use limitcore_testkit::strategies::{start_time, steps};
use limitcore_testkit::{cases, run, AsModel, Step};
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Quotas of 1..=64 per 1 µs..10 s (small counts keep the naive models fast), with no burst
/// of their own (a window has none: its capacity is the count).
fn window_quota() -> impl Strategy<Value = Quota> {
    (1u32..=64, 1_000u64..=10_000_000_000).prop_filter_map("valid", |(c, p)| {
        Quota::new(c, Duration::from_nanos(p)).ok()
    })
}

/// As [`window_quota`], with a burst of 1..=16 (the pacer's capacity).
fn pacer_quota() -> impl Strategy<Value = Quota> {
    (window_quota(), 1u32..=16).prop_filter_map("valid", |(q, b)| q.with_burst(b).ok())
}

fn clock() -> ManualClock {
    ManualClock::new()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fixed_window_equals_model((q, s) in window_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 1 << 36, 1 << 36))), start in start_time()) {
        let limiter = FixedWindow::with_clock(q, clock()).unwrap();
        let mut model = FixedWindowModel::new(q);
        let admitted = run(&mut [&mut AsModel(&limiter), &mut model], start, u64::MAX, &s)?;
        // The bound: at most `count` in each aligned window (by the recorded window).
        let mut per_window = std::collections::BTreeMap::new();
        let mut latest = 0;
        for (t, n) in admitted.into_iter().filter(|&(_, n)| n > 0) {
            latest = std::cmp::max(latest, t / q.period_ns());
            *per_window.entry(latest).or_insert(0u64) += u64::from(n);
        }
        prop_assert!(per_window.values().all(|&v| v <= u64::from(q.count())));
    }

    #[test]
    fn sliding_log_equals_model((q, s) in window_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 1 << 36, 1 << 34))), start in start_time()) {
        let limiter = SlidingLog::with_clock(q, clock()).unwrap();
        let mut model = SlidingLogModel::new(q);
        let admitted = run(&mut [&mut AsModel(&limiter), &mut model], start, u64::MAX, &s)?;
        // The bound, checked directly: at most `count` recorded times in any half-open
        // window of length `period`. Recorded times are the running maximum.
        let mut recorded = Vec::new();
        let mut last = 0;
        for (t, n) in admitted.into_iter().filter(|&(_, n)| n > 0) {
            last = std::cmp::max(last, t);
            recorded.extend(std::iter::repeat(last).take(n as usize));
        }
        for (i, &t) in recorded.iter().enumerate() {
            let inside = recorded[i..].iter().take_while(|&&u| u128::from(u) < u128::from(t) + u128::from(q.period_ns())).count();
            prop_assert!(inside <= q.count() as usize, "{inside} in [{t}, {t} + period)");
        }
    }

    /// With batch 0 (no leases kept on shards), the sliding window is exactly the formula.
    #[test]
    fn sliding_window_equals_formula((q, s) in window_quota().prop_flat_map(|q| (Just(q), steps(q.count(), q.period_ns() as i64, 1 << 36))), start in start_time()) {
        // Stay within the stale tolerance (at least 4 windows): a retry probe may admit up
        // to 2 windows ahead of `now`, so step back at most 1 window, and never jump back.
        let s: Vec<_> = s.into_iter().map(|st| match st {
            Step::Jump(t) => Step::Shift((t % (1 << 36)) as i64),
            other => other,
        }).collect();
        let limiter = SlidingWindow::with_batch(q, clock(), 0).unwrap();
        let mut model = SlidingWindowModel::new(q);
        run(&mut [&mut AsModel(&limiter), &mut model], start, u64::MAX, &s)?;
    }

    /// With leases (the default batch), every admission still satisfies the formula on the
    /// true admitted counts, and no aligned window exceeds `count`.
    #[test]
    fn sliding_window_with_leases_never_over_admits((q, s) in window_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 0, 1 << 34))), batch in 0u32..=8) {
        let limiter = SlidingWindow::with_batch(q, clock(), batch).unwrap();
        let mut truth = SlidingWindowModel::new(q);
        let mut now = 0u64;
        for step in s {
            match step {
                Step::Shift(d) => now = now.saturating_add_signed(d),
                Step::Jump(t) => now = now.max(t),
                Step::Acquire(n) => {
                    if limiter.try_acquire_n_at(n, now).is_ok() && n > 0 {
                        // The model is the formula on true counts: it must admit too.
                        prop_assert_eq!(truth.acquire(n, now), Ok(()), "over-admitted n={} at {}", n, now);
                    }
                }
            }
        }
    }

    #[test]
    fn leaky_bucket_equals_queue((q, s) in pacer_quota().prop_flat_map(|q| (Just(q), steps(q.burst(), 1 << 36, 1 << 36))), start in start_time(), waits in prop::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), 0u64..=1 << 34], 1..50)) {
        // try_acquire (start now) against the queue model.
        let limiter = LeakyBucket::with_clock(q, clock()).unwrap();
        let mut model = LeakyBucketModel::new(q);
        run(&mut [&mut AsModel(&limiter), &mut model], start, u64::MAX, &s)?;
        // reserve with a maximum wait against the queue model.
        let pacer = LeakyBucket::with_clock(q, clock()).unwrap();
        let mut queue = LeakyBucketModel::new(q);
        let mut now = start;
        for (i, &max_wait) in waits.iter().enumerate() {
            let n = (i as u32 % q.burst()) + 1;
            let got = pacer.reserve_n_at(n, now, Duration::from_nanos(max_wait)).map(|r| r.delay().as_nanos() as u64);
            prop_assert_eq!(got, queue.reserve(n, now, max_wait));
            now = now.saturating_add(q.emission_interval_ns() / 3);
        }
    }
}

/// Frozen clock, 8 threads: exactly `count` admitted (sliding log, fixed window) or never
/// more (sliding window, whose stranded leases may keep it below).
#[test]
fn frozen_clock_thread_bounds() {
    let q = Quota::per_second(5_000).unwrap();
    let cases: [(&str, Arc<dyn RateLimiter>, bool); 4] = [
        (
            "sliding-log",
            Arc::new(SlidingLog::with_clock(q, clock()).unwrap()),
            true,
        ),
        (
            "fixed-window",
            Arc::new(FixedWindow::with_clock(q, clock()).unwrap()),
            true,
        ),
        (
            "sliding-window",
            Arc::new(SlidingWindow::with_clock(q, clock()).unwrap()),
            false,
        ),
        (
            "leaky-bucket",
            Arc::new(LeakyBucket::with_clock(q.with_burst(1).unwrap(), clock()).unwrap()),
            true,
        ),
    ];
    for (name, limiter, exact) in cases {
        let admitted = Arc::new(AtomicU64::new(0));
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (l, a, b) = (limiter.clone(), admitted.clone(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    let mut refusals = 0;
                    while refusals < 500 {
                        match l.try_acquire() {
                            Ok(()) => {
                                a.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => refusals += 1,
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let got = admitted.load(Ordering::Relaxed);
        let bound = if name == "leaky-bucket" { 1 } else { 5_000 };
        if exact {
            assert_eq!(got, bound, "{name}");
        } else {
            assert!(
                got <= bound && got * 16 >= bound * 15,
                "{name}: {got} of {bound}"
            );
        }
    }
}

/// Reservations are served in order: many threads reserve on one pacer, and the set of
/// start times is exactly the slots 0, T, 2T, ... with no gaps or duplicates.
#[test]
fn pacer_gives_every_thread_its_own_slot() {
    let q = Quota::per_second(1_000)
        .unwrap()
        .with_burst(10_000)
        .unwrap();
    let pacer = Arc::new(LeakyBucket::with_clock(q, clock()).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let p = pacer.clone();
            std::thread::spawn(move || {
                (0..1_000)
                    .map(|_| p.reserve_n(1).unwrap().start())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut starts: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    starts.sort_unstable();
    let expected: Vec<u64> = (0..8_000).map(|i| i * 1_000_000).collect();
    assert_eq!(starts, expected);
    // 8 000 of the 10 000 slots are queued: the next goes after them, and 2 000 more fill it.
    assert_eq!(pacer.reserve_n(1).unwrap().start(), 8_000_000_000);
    for _ in 0..1_999 {
        pacer.reserve_n(1).unwrap();
    }
    assert_eq!(
        pacer.reserve_n(1).unwrap_err().retry_after(),
        Some(Duration::from_millis(1))
    );
}
