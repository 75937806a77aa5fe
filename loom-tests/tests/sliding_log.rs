//! Loom models of `SlidingLog`, the crate's one limiter behind a lock (README, model 7).
//!
//! Under `--cfg limitcore_loom` the log's `Mutex` is `loom::sync::Mutex` (`src/sync.rs`), so loom
//! explores every order in which the threads take the lock, and checks that no two hold it
//! at once.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! Each decision is one critical section; the orders of 3 threads' critical sections need
//! at most 2 preemptions (a thread blocked on the lock switches without one), so a bound of
//! 3 covers every order in which they take the lock.
//!
//! The quota is `count` per `P` = 100 ns. The ring is private; the state is compared through
//! `snapshot_at` at [`PROBES`], against a sequential `SlidingLog` and
//! `reference::SlidingLogModel`.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::{Algorithm, Denied, SlidingLog};
use loom_tests::{
    admitted, assert_linearizable_at, model, race_at, window_quota, Ask, Outcomes, NOW,
};

/// The window length, ns.
const P: Nanos = 100;
/// Where the state is compared: from [`NOW`] to past the time every entry has left.
const PROBES: [Nanos; 9] = [
    NOW,
    NOW + 50,
    NOW + 99,
    NOW + P,
    NOW + P + 10,
    NOW + P + 50,
    NOW + 2 * P,
    NOW + 2 * P + 50,
    NOW + 4 * P,
];

/// The times the log records for `prefix` then `asks[order[..]]`: an admission at `now`
/// records its `n` permits at `max(now, newest entry)` (the log's rule, which keeps it
/// sorted); denials record nothing.
fn recorded(
    prefix: &[Ask],
    asks: &[Ask],
    results: &[Result<(), Denied>],
    order: &[usize],
) -> Vec<Nanos> {
    let admitted = prefix.iter().copied().chain(
        order
            .iter()
            .filter(|&&i| results[i].is_ok())
            .map(|&i| asks[i]),
    );
    let mut log = Vec::new();
    for (n, now) in admitted {
        let t = log.last().map_or(now, |&newest: &Nanos| newest.max(now));
        log.resize(log.len() + n as usize, t);
    }
    log
}

/// Race `asks` after `prefix` on a fresh `SlidingLog` of `count` per `P` and check, in
/// every interleaving:
///
/// - denials are only `RateLimited`;
/// - the execution is linearizable: some order of the asks gives the same results
///   (retry-after included) and snapshots at every probe on a sequential `SlidingLog`, and
///   the same results and `remaining` on `SlidingLogModel`;
/// - the log recorded in that order holds at most `count` entries in any half-open window
///   `(t − P, t]` (checked directly, at every entry: a fullest window ends at one);
/// - `expect_total`, if given, is the admitted total (prefix included).
fn check(
    name: &str,
    count: u32,
    prefix: &'static [Ask],
    asks: &'static [Ask],
    expect_total: Option<u32>,
) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let quota = window_quota(count, P);
        let build = || SlidingLog::with_clock(quota, ManualClock::starting_at(NOW)).unwrap();
        let (limiter, results) = race_at(build(), prefix, asks);
        seen.record(&results);
        for r in &results {
            if let Err(denied) = r {
                assert!(
                    matches!(denied, Denied::RateLimited { .. }),
                    "unexpected denial {denied:?}"
                );
            }
        }
        let total = prefix.iter().map(|&(n, _)| n).sum::<u32>() + admitted(asks, &results);
        if let Some(expected) = expect_total {
            assert_eq!(total, expected, "results {results:?}");
        }
        let order = assert_linearizable_at(
            Algorithm::SlidingLog,
            quota,
            build,
            prefix,
            asks,
            &results,
            &*limiter,
            &PROBES,
        );
        let log = recorded(prefix, asks, &results, &order);
        assert_eq!(log.len() as u32, total);
        for &t in &log {
            let inside = log.iter().filter(|&&e| e + P > t && e <= t).count();
            assert!(
                inside <= count as usize,
                "{inside} entries in ({}, {t}]: log {log:?}, results {results:?}",
                t.saturating_sub(P)
            );
        }
    });
    outcomes
}

// ---- Frozen time: exactly `count` admitted when demand exceeds it. ----

#[test]
fn frozen_three_threads_count_2_each_ask_1() {
    check(
        "sliding log frozen, 3 threads, count 2, asks [1,1,1]",
        2,
        &[],
        &[(1, NOW), (1, NOW), (1, NOW)],
        Some(2),
    )
    .assert_exactly(&["YYN", "YNY", "NYY"]);
}

#[test]
fn frozen_two_threads_count_3_ask_2_and_1() {
    check(
        "sliding log frozen, 2 threads, count 3, asks [2,1]",
        3,
        &[],
        &[(2, NOW), (1, NOW)],
        Some(3),
    )
    .assert_exactly(&["YY"]);
}

#[test]
fn frozen_two_threads_count_3_each_ask_2() {
    check(
        "sliding log frozen, 2 threads, count 3, asks [2,2]",
        3,
        &[],
        &[(2, NOW), (2, NOW)],
        Some(2),
    )
    .assert_exactly(&["YN", "NY"]);
}

// ---- Distinct explicit times. ----

#[test]
fn distinct_times_three_threads_count_2() {
    // An entry at NOW, which leaves the window at NOW + 100; readings 50, 90 and 120 ns
    // later. The 120 reading is always admitted. Before it, the 50 and the 90 cannot both
    // fit (with NOW's entry that is 3 in 100 ns); after it, a reading behind the newest
    // entry is recorded at that entry's time (stricter), where NOW's entry has left, so one
    // of them fits: YYN or NYY, never both.
    check(
        "sliding log distinct times, 3 threads, count 2",
        2,
        &[(1, NOW)],
        &[(1, NOW + 50), (1, NOW + P + 20), (1, NOW + 90)],
        None,
    )
    .assert_exactly(&["YYN", "NYY"]);
}

#[test]
fn distinct_times_mixed_sizes_count_3() {
    // Two entries at NOW; a request for 2 after they leave races two requests for 1, one
    // before they leave and one after. Exactly two of the three requests get in, any two.
    check(
        "sliding log distinct times, asks [2 @ +110, 1 @ +60, 1 @ +105], count 3",
        3,
        &[(2, NOW)],
        &[(2, NOW + P + 10), (1, NOW + 60), (1, NOW + P + 5)],
        None,
    )
    .assert_exactly(&["YYN", "YNY", "NYY"]);
}

#[test]
fn distinct_times_stale_reading_is_recorded_late() {
    // Two entries at NOW (count 2). The reading at NOW + 150 is admitted (both have left).
    // The reading at NOW + 60, decided first, is refused; decided after the other one, it
    // is behind the newest entry and is recorded at NOW + 150, where it fits. By reading
    // times that would be 3 permits in (NOW − 40, NOW + 60]; by recorded times (what the
    // log keeps, and what this model checks) never more than 2 in any 100 ns.
    check(
        "sliding log stale reading, asks [1 @ +150, 1 @ +60], count 2",
        2,
        &[(2, NOW)],
        &[(1, NOW + P + 50), (1, NOW + 60)],
        None,
    )
    .assert_exactly(&["YY", "YN"]);
}
