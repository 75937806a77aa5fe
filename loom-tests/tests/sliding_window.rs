//! Loom models of `SlidingWindow`: the global word, the window rotation, and the per-CPU
//! lease protocol (`take_leased` / `take_global` / `give_lease`) (README, model 6).
//!
//! Under loom `sync::cpus()` is 2 and `sync::shard_hint()` is 0, so every limiter here has 2
//! shards and every thread uses shard 0: the models explore the lease hand-off between
//! threads on one shard (the contended case), not the choice of shard.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! Every step of the protocol is a single-word CAS loop (the shard word in `take_leased` and
//! `give_lease`, the global word in `take_global`), each attempt one load (or the value a
//! failed CAS returned) and one CAS. A thread's decision is at most three such loops, and
//! what can break one is another thread's commit landing inside its load→CAS window, one
//! preemption each. With batch 0 only the global loop writes and the argument of the `Gcra`
//! models holds as is (3 threads loading the same word: 3 preemptions). With leases, the
//! interesting interleavings are one thread's commit between another's global CAS and its
//! `give_lease` (1 preemption) or inside a shard CAS window (1 more), which 3 covers; but 3
//! is not every interleaving of 3 threads × 3 loops, so these models were also run with
//! `LOOM_MAX_PREEMPTIONS=4`, and the 2-thread ones unbounded (README).
//!
//! The quota is `count` per `P` = 100 ns: [`NOW`] = 1 000 ns starts window 10 and 1 100 ns
//! window 11. The words are private; the state is compared through `snapshot_at` at
//! [`PROBES`], against a sequential `SlidingWindow` and `reference::SlidingWindowModel`.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::{Algorithm, Denied, RateLimiter, SlidingWindow};
use loom_tests::{
    admitted, assert_admitted_in_time_order, assert_linearizable_at, linearization, model, race_at,
    window_quota, Ask, Outcomes, NOW,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The window length, ns.
const P: Nanos = 100;
/// Where the state is compared: windows 10, 11, 12 (start, middle, last ns) and 13, where
/// both counts have aged out.
const PROBES: [Nanos; 9] = [
    NOW,
    NOW + P / 2,
    NOW + P - 1,
    NOW + P,
    NOW + P + P / 2,
    NOW + 2 * P - 1,
    NOW + 2 * P,
    NOW + 2 * P + P / 2,
    NOW + 3 * P,
];

type L = SlidingWindow<ManualClock>;

fn build(count: u32, batch: u32) -> L {
    let limiter =
        SlidingWindow::with_batch(window_quota(count, P), ManualClock::starting_at(NOW), batch)
            .unwrap();
    // What the lease arithmetic below assumes: loom's 2 "CPUs", the batch as given.
    assert_eq!((limiter.shards(), limiter.batch()), (2, batch));
    limiter
}

fn only_rate_limited(results: &[Result<(), Denied>]) {
    for r in results {
        if let Err(denied) = r {
            assert!(
                matches!(denied, Denied::RateLimited { .. }),
                "unexpected denial {denied:?}"
            );
        }
    }
}

fn sum(asks: &[Ask]) -> u32 {
    asks.iter().map(|&(n, _)| n).sum()
}

// ---- (a) Frozen clock. ----

/// Batch 0: every decision is the formula on the global word. At a frozen time the
/// admitted total is exactly `expect_total`; a request is denied only if it does not fit
/// what is left at the end; the execution is linearizable (results, retry-after included,
/// and snapshots at every probe) against a sequential `SlidingWindow` and the model.
fn check_exact(name: &str, count: u32, asks: &'static [Ask], expect_total: u32) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let quota = window_quota(count, P);
        let (limiter, results) = race_at(build(count, 0), &[], asks);
        seen.record(&results);
        only_rate_limited(&results);
        let total = admitted(asks, &results);
        assert_eq!(total, expect_total, "results {results:?}");
        for (&(n, _), r) in asks.iter().zip(&results) {
            if r.is_err() {
                assert!(n > count - total, "{n} denied with {} left", count - total);
            }
        }
        assert_eq!(limiter.snapshot_at(NOW).remaining, count - total);
        assert_linearizable_at(
            Algorithm::SlidingWindow,
            quota,
            || build(count, 0),
            &[],
            asks,
            &results,
            &*limiter,
            &PROBES,
        );
    });
    outcomes
}

/// Batch `batch` > 0: leases. At a frozen time (one window, nothing in the previous one),
/// in every interleaving:
///
/// - no permit is created or used twice: the admitted total (prefix included) is at most
///   `count`;
/// - no lease is lost: `snapshot_at(NOW).remaining`, which is what the global formula still
///   allows plus the shards' unused leases, is exactly `count − admitted`: the global word's
///   count equals the permits admitted plus the leases still on the shard;
/// - the under-admission is within the documented bound `shards × (batch + n_max − 1)`.
///
/// Returns the outcomes, and how many executions had results that no sequential order of
/// the same requests on a sequential `SlidingWindow` with the same batch produces.
fn check_leased(
    name: &str,
    count: u32,
    batch: u32,
    prefix: &'static [Ask],
    asks: &'static [Ask],
) -> (Outcomes, usize) {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    let unexplained = Arc::new(AtomicUsize::new(0));
    let counter = unexplained.clone();
    model(name, move || {
        let (limiter, results) = race_at(build(count, batch), prefix, asks);
        seen.record(&results);
        only_rate_limited(&results);
        let total = sum(prefix) + admitted(asks, &results);
        assert!(total <= count, "admitted {total} > {count}: {results:?}");
        assert_eq!(
            limiter.snapshot_at(NOW).remaining,
            count - total,
            "leases lost or used twice: admitted {total}, results {results:?}"
        );
        let n_max = asks.iter().map(|&(n, _)| n).max().unwrap_or(0);
        let bound = limiter.shards() as u32 * (batch + n_max - 1);
        let demand = sum(prefix) + sum(asks);
        assert!(
            count.min(demand) - total <= bound,
            "under-admitted {} > {bound}: {results:?}",
            count.min(demand) - total
        );
        let order = linearization(
            || build(count, batch),
            prefix,
            asks,
            &results,
            &*limiter,
            &PROBES,
        );
        if order.is_none() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    let unexplained = unexplained.load(Ordering::Relaxed);
    (outcomes, unexplained)
}

#[test]
fn frozen_batch_0_three_threads_count_2() {
    check_exact(
        "sliding window frozen, batch 0, 3 threads, count 2, asks [1,1,1]",
        2,
        &[(1, NOW), (1, NOW), (1, NOW)],
        2,
    )
    .assert_exactly(&["YYN", "YNY", "NYY"]);
}

#[test]
fn frozen_batch_0_two_threads_count_3_ask_2_and_1() {
    check_exact(
        "sliding window frozen, batch 0, 2 threads, count 3, asks [2,1]",
        3,
        &[(2, NOW), (1, NOW)],
        3,
    )
    .assert_exactly(&["YY"]);
}

#[test]
fn frozen_batch_0_two_threads_demand_below_count() {
    // min(count, demand) = demand: both admitted, whatever the order.
    check_exact(
        "sliding window frozen, batch 0, 2 threads, count 4, asks [1,1]",
        4,
        &[(1, NOW), (1, NOW)],
        2,
    )
    .assert_exactly(&["YY"]);
}

#[test]
fn frozen_batch_2_three_threads_count_3() {
    // The first global take leases 1 extra (min(batch 2, (3 − 1) / 2 shards)); the others
    // race for that lease and the last global permit. All three fit in every sequential
    // order; a thread that comes between another's global CAS and its `give_lease` finds
    // neither and is refused while the lease is in flight (see the README).
    let (outcomes, unexplained) = check_leased(
        "sliding window frozen, batch 2, 3 threads, count 3, asks [1,1,1]",
        3,
        2,
        &[],
        &[(1, NOW), (1, NOW), (1, NOW)],
    );
    outcomes.assert_exactly(&["YYY", "YYN", "YNY", "NYY"]);
    assert!(unexplained > 0, "the in-flight refusal was not explored");
}

#[test]
fn frozen_batch_2_two_threads_count_8() {
    // Each ask of 3 takes its 3 and leases up to 2 more; demand 6 ≤ 8.
    let (outcomes, _) = check_leased(
        "sliding window frozen, batch 2, 2 threads, count 8, asks [3,3]",
        8,
        2,
        &[],
        &[(3, NOW), (3, NOW)],
    );
    outcomes.assert_exactly(&["YY"]);
}

// ---- (c) The lease hand-off. ----

#[test]
fn lease_handoff_leaser_vs_consumer() {
    // Prefix: the first ask of 1 leases 2 (global count 3), the second takes 1 of them: the
    // shard holds 1. The ask of 3 cannot use it: it leases 3 + 1 from the global word and
    // gives the 1 to the shard, while the ask of 1 takes the shard's 1. The two shard CASes
    // (`give_lease` adding, `take_leased` subtracting) race; neither may be lost.
    let (outcomes, unexplained) = check_leased(
        "sliding window lease hand-off, leaser 3 vs consumer 1, count 8, batch 2",
        8,
        2,
        &[(1, NOW), (1, NOW)],
        &[(3, NOW), (1, NOW)],
    );
    outcomes.assert_exactly(&["YY"]);
    assert_eq!(unexplained, 0, "every outcome is a sequential one");
}

#[test]
fn lease_handoff_leaser_vs_two_consumers() {
    // As above with a second consumer asking 2: demand 2 + 6 = count.
    let (outcomes, _) = check_leased(
        "sliding window lease hand-off, leaser 3 vs consumers 1 and 2, count 8, batch 2",
        8,
        2,
        &[(1, NOW), (1, NOW)],
        &[(3, NOW), (1, NOW), (2, NOW)],
    );
    // YYY in every sequential order; YYN and NYY when a thread is refused while a lease is
    // in flight (see the next model).
    outcomes.assert_exactly(&["YYY", "YYN", "NYY"]);
}

#[test]
fn lease_in_flight_refusal_is_not_linearizable_but_within_bound() {
    // Shard holds 1 (as above), global has 5 left. Sequentially: 3 then 2 → the 3 leases
    // 3 + 1 and the 2 takes the shard's 2 (YY); 2 then 3 → the 2 leases 2 + 1, the 3 finds
    // 2 on the shard and 2 globally, and is refused (NY). Concurrently, the 2 can also run
    // between the 3's global CAS and its `give_lease`: the shard has 1, the global word 1,
    // and the 2 is refused (YN), an outcome no sequential order gives. No permit is lost:
    // the lease lands on the shard afterwards, `count − admitted` stays exact, and the
    // shortfall is within `shards × (batch + n_max − 1)`.
    let (outcomes, unexplained) = check_leased(
        "sliding window lease in flight, asks [3,2], count 8, batch 2",
        8,
        2,
        &[(1, NOW), (1, NOW)],
        &[(3, NOW), (2, NOW)],
    );
    outcomes.assert_exactly(&["YY", "NY", "YN"]);
    assert!(unexplained > 0, "the in-flight refusal was not explored");
}

// ---- (b) Window rotation: readings in window 10 race readings in window 11. ----

/// Count the admissions by the window of their reading: none exceeds `count`.
fn per_reading_window(
    prefix: &[Ask],
    asks: &[Ask],
    results: &[Result<(), Denied>],
) -> std::collections::BTreeMap<u64, u32> {
    let mut totals = std::collections::BTreeMap::new();
    let admitted = prefix.iter().chain(
        asks.iter()
            .zip(results)
            .filter(|(_, r)| r.is_ok())
            .map(|(a, _)| a),
    );
    for &(n, now) in admitted {
        *totals.entry(now / P).or_insert(0) += n;
    }
    totals
}

/// `prefix` (in window 10), then `asks` in windows 10 and 11 race. In every interleaving:
///
/// - every window, counting admissions by their own reading's window, admits at most
///   `count` (a window-10 reading decided after the word moved to window 11 is stale and
///   is decided at window 11's start, where all of window 10's count weighs: so it is
///   still bounded with window 10's);
/// - everything admitted with a reading in window 11 was counted in window 11's global
///   count: at the start of window 12, where that count weighs fully and no lease is
///   current, `remaining ≤ count − (admitted in window 11)`; in window 13 all is free;
/// - window 11's leases are exact: no window-11 lease is lost or invented. At its last
///   nanosecond (1 199) the prefix's window-10 count weighs `⌈curr₁₀ / 100⌉ = 1`, and
///   `remaining = count − curr₁₁ − 1 + (window-11 leases on the shard)`. No window-11 lease
///   can be legitimately stranded here (nothing reads past window 11, so none is replaced
///   or dropped), so `curr₁₁ − leases` is exactly what window 11 admitted: its own
///   readings plus the window-10 readings that went stale and were counted there (some
///   subset of the admitted window-10 asks). So `count − 1 − remaining − (admitted with
///   a window-11 reading)` must be the sum of some subset of the admitted window-10 asks.
///   (No saturation: every window-11 commit kept `curr₁₁ + ⌈curr₁₀ · w⌉ ≤ count` at a
///   time ≤ 1 199, where the weight is no larger.) A late window-10 lease added to the
///   shard's window-11 one, or replacing it, breaks this;
/// - with batch 0, the execution is linearizable against a sequential `SlidingWindow` and
///   the model (results, retry-after included, and snapshots at every probe), and the
///   admitted requests replayed alone in time order are all admitted by the model: the
///   formula holds at every admission's own time. (Both reading-time properties rely on
///   the readings being at most one window apart with nothing before window 10, asserted
///   below: a reading two windows behind the word is decided against a window whose
///   `prev` is not its own window's count, as the crate documents.)
fn check_rotation(
    name: &str,
    count: u32,
    batch: u32,
    prefix: &'static [Ask],
    asks: &'static [Ask],
) -> Outcomes {
    assert!(!prefix.is_empty() && prefix.iter().all(|&(_, t)| t / P == NOW / P));
    assert!(asks
        .iter()
        .all(|&(_, t)| t / P == NOW / P || t / P == NOW / P + 1));
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let quota = window_quota(count, P);
        let (limiter, results) = race_at(build(count, batch), prefix, asks);
        seen.record(&results);
        only_rate_limited(&results);
        let windows = per_reading_window(prefix, asks, &results);
        for (&k, &n) in &windows {
            assert!(n <= count, "window {k} admitted {n} > {count}: {results:?}");
        }
        let in_next = windows.get(&(NOW / P + 1)).copied().unwrap_or(0);
        let at_12 = limiter.snapshot_at(NOW + 2 * P).remaining;
        assert!(
            at_12 <= count - in_next,
            "window 11 admitted {in_next} but {at_12} remain at its end: {results:?}"
        );
        assert_eq!(limiter.snapshot_at(NOW + 3 * P).remaining, count);

        let last_ns = limiter.snapshot_at(NOW + 2 * P - 1).remaining;
        let stale = i64::from(count) - 1 - i64::from(last_ns) - i64::from(in_next);
        let window_10_asks: Vec<u32> = asks
            .iter()
            .zip(&results)
            .filter(|((_, t), r)| r.is_ok() && t / P == NOW / P)
            .map(|(&(n, _), _)| n)
            .collect();
        let subset_sums: Vec<i64> = (0..1u32 << window_10_asks.len())
            .map(|mask| {
                (0..window_10_asks.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| i64::from(window_10_asks[i]))
                    .sum()
            })
            .collect();
        assert!(
            subset_sums.contains(&stale),
            "window 11 leases off: {last_ns} remain at its last ns with {in_next} admitted \
             there (window-10 admissions {window_10_asks:?}): results {results:?}"
        );
        if batch == 0 {
            assert_linearizable_at(
                Algorithm::SlidingWindow,
                quota,
                || build(count, 0),
                prefix,
                asks,
                &results,
                &*limiter,
                &PROBES,
            );
            assert_admitted_in_time_order(Algorithm::SlidingWindow, quota, prefix, asks, &results);
        }
    });
    outcomes
}

#[test]
fn rotation_batch_0_next_window_vs_current() {
    // Window 10 has 2 of 4. The window-11 ask of 2 (50 ns in: ⌈2 × ½⌉ = 1 weighs) rotates
    // the word; the window-10 ask of 1 either comes first (window 10: 3, then window 11
    // sees ⌈3 × ½⌉ = 2 weigh and 2 free: YY) or after, stale: decided at window 11's
    // start, where all of window 10's 2 weigh, plus the 2 just taken: refused (YN).
    check_rotation(
        "sliding window rotation, batch 0, [2 @ w11, 1 @ w10], count 4",
        4,
        0,
        &[(2, NOW + 20)],
        &[(2, NOW + P + 50), (1, NOW + 80)],
    )
    .assert_exactly(&["YY", "YN"]);
}

#[test]
fn rotation_batch_0_three_threads() {
    // Two readings in window 11 (50 and 90 ns in) and one in window 10 race.
    check_rotation(
        "sliding window rotation, batch 0, [2 @ w11, 1 @ w10, 1 @ w11], count 4",
        4,
        0,
        &[(2, NOW + 20)],
        &[(2, NOW + P + 50), (1, NOW + 80), (1, NOW + P + 90)],
    )
    .assert_exactly(&["YYY", "YNY", "NYY"]);
}

#[test]
fn rotation_batch_2_leases_across_the_boundary() {
    // Count 4, batch 2. The prefix's ask of 1 leases 1 extra for window 10 (global count 2,
    // shard (10, 1)). The window-10 ask of 2 cannot use the 1 and goes global; the
    // window-11 ask of 2 rotates the word and may lease for window 11, replacing the shard's
    // window-10 lease (`give_lease`, `Less`) or being dropped if the shard has moved on
    // (`Greater`); the window-11 ask of 1 may take that new lease.
    check_rotation(
        "sliding window rotation, batch 2, [2 @ w11, 2 @ w10, 1 @ w11], count 4",
        4,
        2,
        &[(1, NOW + 20)],
        &[(2, NOW + P + 50), (2, NOW + 80), (1, NOW + P + 60)],
    )
    // YYN: w10, w11, then the w11 ask of 1 finds ⌈4 × 0.4⌉ + 2 = 4 counted. YNY: w11
    // first, the stale w10 ask sees 2 + 2. NYY: w10 (window 10 full), then the 1 (window
    // 11: 4 × 0.4 → 2 weigh, 2 free, no extra: (2 − 1) / 2 = 0), then the 2 finds 1 free.
    // NNY: the 1 first leases 1 extra for window 11 (replacing the shard's window-10
    // lease); the 2 in window 11 finds 1 leased and 1 free, neither enough (documented
    // under-admission), and the stale w10 ask sees 2 + 2.
    .assert_exactly(&["YYN", "YNY", "NYY", "NNY"]);
}

#[test]
fn rotation_batch_2_late_lease_for_the_old_window() {
    // Count 8, batch 2. Prefix: 1 + 2 leased in window 10 (shard (10, 2)). The window-10 ask
    // of 3 goes global and leases 1 extra for window 10; the window-11 ask of 2 rotates and
    // leases 1 for window 11. When the window-11 `give_lease` lands first, the window-10 one
    // must be dropped (`Greater`), not stored over it nor added to it; the window-11 ask of 1
    // consumes from whatever window-11 lease there is.
    check_rotation(
        "sliding window rotation, batch 2, [2 @ w11, 3 @ w10, 1 @ w11], count 8",
        8,
        2,
        &[(1, NOW + 20)],
        &[(2, NOW + P + 50), (3, NOW + 80), (1, NOW + P + 60)],
    )
    // Sequentially: YYY when the 3 goes first (window 10 counts 7, then window 11 still has
    // room for 3), YNY otherwise (a window-11 ask first leaves 1 for the stale 3). NYY
    // only concurrently: after the 3's global CAS, the 1 rotates the word and counts 1 + 2
    // extra, and the 2 runs before that lease reaches the shard: ⌈7 × ½⌉ + 3 = 7 counted,
    // 1 free, refused.
    .assert_exactly(&["YYY", "YNY", "NYY"]);
}
