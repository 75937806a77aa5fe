//! Loom models of `FixedWindow`'s one-word CAS loop (README, model 5).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! The fixed window is a pure transition on one `AtomicU64` applied by `cas::apply`, the same
//! loop as `Gcra`'s: each attempt is one load (or the value a failed CAS returned) and one
//! CAS, so 3 threads all loading the same word before any commits takes A→B, B→C, C→A = 3
//! preemptions, and everything after that switches at thread ends, joins and the retry's
//! back-off (a yield under loom). A bound of 3 covers every interleaving of the attempts.
//!
//! The quota is `count` per `P` = 100 ns, so [`NOW`] = 1 000 ns is the start of window 10
//! and 1 150 ns lies in window 11. The word is private; the state is compared through
//! `snapshot_at` at [`PROBES`] (both windows and the next), against a sequential
//! `FixedWindow` and `reference::FixedWindowModel`.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::{Algorithm, Denied, FixedWindow, RateLimiter};
use loom_tests::{
    admitted, assert_linearizable_at, counted_windows, model, per_window, race_at_observing,
    window_quota, Ask, Outcomes, NOW,
};

/// The window length, ns.
const P: Nanos = 100;
/// A reading in window 10 (the one [`NOW`] starts).
const IN_K: Nanos = NOW + 50;
/// A reading in window 11, the next one.
const IN_K1: Nanos = NOW + P + 50;
/// Where the state is compared: window 10 (start, middle, last ns), window 11 (start,
/// middle) and window 12.
const PROBES: [Nanos; 6] = [NOW, IN_K, NOW + P - 1, NOW + P, IN_K1, NOW + 2 * P];

/// Race `asks` after `prefix` on a fresh `FixedWindow` of `count` per `P` and check, in
/// every interleaving:
///
/// - denials are only `RateLimited`, and the execution is linearizable: some order of the
///   asks gives the same results (retry-after included) and the same snapshots at every
///   probe on a sequential `FixedWindow` and on `FixedWindowModel`;
/// - in that order, each admission is counted in its reading's window or the latest window
///   counted before it (a reading behind the word's window is decided against that later
///   window), and no window gets more than `count`;
/// - the window never moves back: the final word is in the latest window any admission was
///   counted in, with exactly the permits counted there (`snapshot_at` inside it, and at
///   every earlier probe, which is counted against it); and a thread admitted in that
///   latest window, reading the state right after, never sees its own permits gone;
/// - `expect_total`, if given, is the admitted total (prefix included) of every
///   interleaving.
///
/// Returns the admitted/denied patterns explored.
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
        let build = || FixedWindow::with_clock(quota, ManualClock::starting_at(NOW)).unwrap();
        let (limiter, observed) = race_at_observing(build(), prefix, asks);
        let results: Vec<Result<(), Denied>> = observed.iter().map(|(r, _)| *r).collect();
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
            Algorithm::FixedWindow,
            quota,
            build,
            prefix,
            asks,
            &results,
            &*limiter,
            &PROBES,
        );
        let counted = counted_windows(P, prefix, asks, &results, &order);
        let windows = per_window(&counted);
        for (&k, &used) in &windows {
            assert!(
                used <= count,
                "window {k} admitted {used} > {count}: order {order:?}, results {results:?}"
            );
        }

        // The word is in the latest counted window, holding exactly what was counted there.
        if let Some((&last, &used)) = windows.iter().next_back() {
            let inside = last * P + P / 2;
            assert_eq!(
                limiter.snapshot_at(inside).remaining,
                count - used,
                "window {last}: results {results:?}"
            );
            for &t in PROBES.iter().filter(|&&t| t < last * P) {
                assert_eq!(
                    limiter.snapshot_at(t).remaining,
                    count - used,
                    "a reading at {t} behind window {last} must count against it"
                );
            }
            // An admission in that window, seen by its own thread right after: still there.
            for (&(n, now), (r, seen)) in asks.iter().zip(&observed) {
                if r.is_ok() && now / P == last {
                    assert!(
                        seen.remaining <= count - n,
                        "admitted {n} at {now} but then saw {seen:?}"
                    );
                }
            }
        }
    });
    outcomes
}

// ---- Frozen clock: exactly `count` when demand exceeds it; final state = sequential. ----

#[test]
fn frozen_three_threads_count_2_each_ask_1() {
    check(
        "fixed window frozen, 3 threads, count 2, asks [1,1,1]",
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
        "fixed window frozen, 2 threads, count 3, asks [2,1]",
        3,
        &[],
        &[(2, NOW), (1, NOW)],
        Some(3),
    )
    .assert_exactly(&["YY"]);
}

#[test]
fn frozen_two_threads_count_3_each_ask_2() {
    // Only one fits, whichever goes first; the other is denied and writes nothing.
    check(
        "fixed window frozen, 2 threads, count 3, asks [2,2]",
        3,
        &[],
        &[(2, NOW), (2, NOW)],
        Some(2),
    )
    .assert_exactly(&["YN", "NY"]);
}

#[test]
fn frozen_three_threads_after_a_prefix() {
    // The "same window, add to used" path under contention (the word is not fresh).
    check(
        "fixed window frozen, 3 threads, count 3 with 1 used, asks [1,1,1]",
        3,
        &[(1, NOW)],
        &[(1, NOW), (1, NOW), (1, NOW)],
        Some(3),
    )
    .assert_exactly(&["YYN", "YNY", "NYY"]);
}

// ---- A reading in the next window races readings in the current one. ----

#[test]
fn next_window_races_two_in_current_window() {
    // Window 10 has 1 of 2 used. If the window-11 thread commits first, the window-10
    // readings are stale and count against window 11 (1 more fits there: YYN, YNY); if one
    // window-10 reading fills window 10 first, the window-11 thread starts window 11 and the
    // other window-10 reading, now stale, takes window 11's second permit (YYY: 2 + 2).
    check(
        "fixed window, next window vs 2 in current, count 2",
        2,
        &[(1, IN_K)],
        &[(1, IN_K1), (1, IN_K), (1, NOW + P - 1)],
        None,
    )
    .assert_exactly(&["YYN", "YNY", "YYY"]);
}

#[test]
fn next_window_races_full_current_window() {
    // Window 10 is full. The window-11 thread asks for all of window 11; a window-10 reading
    // is refused either way (window 10 full, or window 11 full after the other commits).
    check(
        "fixed window, next window vs full current, count 2",
        2,
        &[(2, IN_K)],
        &[(2, IN_K1), (1, IN_K)],
        Some(4),
    )
    .assert_exactly(&["YN"]);
}

#[test]
fn next_window_resets_while_current_window_adds() {
    // Two threads in window 11 race one in window 10: the reset (`Later`) transition races
    // both the add-to-used one and a second reset attempt planned from the same old word.
    check(
        "fixed window, 2 in next window vs 1 in current, count 2",
        2,
        &[(1, IN_K)],
        &[(1, IN_K1), (1, IN_K1 + 10), (1, IN_K)],
        None,
    )
    .assert_exactly(&["YYY", "YNY", "YYN", "NYY"]);
}
