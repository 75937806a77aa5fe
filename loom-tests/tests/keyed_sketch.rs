//! Loom models of `KeyedSketch`'s multi-cell protocol (README, model 11): add `n` to every
//! row (an `AcqRel` CAS loop per row), read the other rows back (`fetch_add(0, AcqRel)`),
//! admit iff some row admits, otherwise subtract `n` again from every row (`Relaxed` CAS
//! loops), from the window it was added to.
//!
//! Every sketch here has width 1, so the cells are the same in every execution whatever
//! the random hash keys (loom needs the same objects touched in every execution), and every
//! key shares every cell: two keys always collide. The quota is `count` per `P` = 100 ns, so
//! [`NOW`] = 1 000 ns starts window 10 and 1 100 ns window 11.
//!
//! In every execution: the admitted requests, in some order, are all admitted by one exact
//! `reference::SlidingWindowModel` per key (never looser than per-key limits); every denial
//! is `RateLimited` with the wait the test states; and every refund lands exactly once, in
//! the right window: the final snapshots are those of the admitted requests alone. Each test
//! also asserts the exact set of outcomes loom explored.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`). A decision here is up to 2 add
//! loops, 1 read and 2 refund loops; the interleavings the protocol is about (another
//! thread's add between a thread's adds and its read, a refund inside another thread's
//! add→read span, an add inside a CAS window) take 1–2 preemptions each.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test keyed_sketch`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::reference::SlidingWindowModel;
use limitcore::{Denied, KeyedSketch};
use loom_tests::{in_threads, model, permutations, window_quota, Outcomes, NOW};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The window length, ns.
const P: Nanos = 100;

type S = KeyedSketch<u8, ManualClock>;

/// A request: `(key, permits, reading time)`.
type KeyAsk = (u8, u32, Nanos);

/// A sketch of width 1 and `depth` rows for `count` per [`P`].
fn build(count: u32, depth: usize) -> S {
    let s = KeyedSketch::with_clock(
        window_quota(count, P),
        1,
        depth,
        ManualClock::starting_at(NOW),
    )
    .expect("valid sketch");
    assert_eq!((s.width(), s.depth()), (1, depth));
    s
}

/// `prefix` admitted by the main thread, then one loom thread per ask. The sketch is shared
/// through a `std::sync::Arc`: its reference counts are no loom operations, so loom does
/// not spend executions moving them around (as in the `All` models).
fn race(
    sketch: S,
    prefix: &[KeyAsk],
    asks: &'static [KeyAsk],
) -> (Arc<S>, Vec<Result<(), Denied>>) {
    for &(k, n, t) in prefix {
        sketch
            .try_acquire_n_at(&k, n, t)
            .expect("prefix is admitted");
    }
    let sketch = Arc::new(sketch);
    let results = in_threads(&sketch, asks, |s: &S, (k, n, t)| {
        s.try_acquire_n_at(&k, n, t)
    });
    (sketch, results)
}

/// The prefix and the admitted asks, in some order (the prefix first), are all admitted by
/// one exact sliding-window model per key.
fn assert_admissible_per_key(
    count: u32,
    prefix: &[KeyAsk],
    asks: &[KeyAsk],
    results: &[Result<(), Denied>],
) {
    let admitted: Vec<KeyAsk> = asks
        .iter()
        .zip(results)
        .filter(|(_, r)| r.is_ok())
        .map(|(&a, _)| a)
        .collect();
    let fits = permutations(admitted.len()).into_iter().any(|order| {
        let mut models: HashMap<u8, SlidingWindowModel> = HashMap::new();
        prefix
            .iter()
            .chain(order.iter().map(|&i| &admitted[i]))
            .all(|&(k, n, t)| {
                models
                    .entry(k)
                    .or_insert_with(|| SlidingWindowModel::new(window_quota(count, P)))
                    .acquire(n, t)
                    .is_ok()
            })
    });
    assert!(
        fits,
        "no order of the admitted {admitted:?} (after {prefix:?}) fits per-key limits: {results:?}"
    );
}

/// The wait of a denial, ns.
fn wait(r: &Result<(), Denied>) -> u64 {
    match r {
        Err(Denied::RateLimited { retry_after }) => {
            u64::try_from(retry_after.as_nanos()).expect("finite wait")
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
}

#[test]
fn same_key_count_1_depth_2_two_threads() {
    // Both add to row 0 then row 1; whoever adds to row 1 first sees only itself there and
    // is admitted; the other sees it in every row and is refused, with the exact wait: the
    // admitted 1 weighs ⌈1·(P − e)/P⌉ = 1 until the end of window 11.
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sketch, count 1, depth 2, same key [1, 1]",
        move || {
            const ASKS: &[KeyAsk] = &[(1, 1, NOW), (1, 1, NOW)];
            let (s, results) = race(build(1, 2), &[], ASKS);
            seen.record(&results);
            for r in results.iter().filter(|r| r.is_err()) {
                assert_eq!(wait(r), 2 * P, "{results:?}");
            }
            assert_admissible_per_key(1, &[], ASKS, &results);
            assert_eq!(
                s.estimate_at(&1, NOW),
                1,
                "a refund lost or doubled: {results:?}"
            );
            assert_eq!(s.snapshot_at(&1, NOW + 2 * P).remaining, 1);
        },
    );
    outcomes.assert_exactly(&["YN", "NY"]);
}

#[test]
fn same_key_count_1_depth_2_three_threads() {
    // Exactly one of three: the first to add to the last row is admitted.
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sketch, count 1, depth 2, same key [1, 1, 1]",
        move || {
            const ASKS: &[KeyAsk] = &[(1, 1, NOW), (1, 1, NOW), (1, 1, NOW)];
            let (s, results) = race(build(1, 2), &[], ASKS);
            seen.record(&results);
            assert_admissible_per_key(1, &[], ASKS, &results);
            assert_eq!(s.estimate_at(&1, NOW), 1, "{results:?}");
        },
    );
    outcomes.assert_exactly(&["YNN", "NYN", "NNY"]);
}

/// Count 2, `prefix` 1 permit of key 1 at [`NOW`]; a request for 2 of `refused_key` (never
/// fits: 1 + 2 > 2 in every row, the cells being shared) races a request for 1 of key 1.
fn refund_races_admission(name: &str, asks: &'static [KeyAsk]) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        const PREFIX: &[KeyAsk] = &[(1, 1, NOW)];
        let (s, results) = race(build(2, 2), PREFIX, asks);
        seen.record(&results);
        // The 2 waits until the cells' 1 + 1 (or 1) weigh 0 in window 12: 200 ns either way.
        assert_eq!(wait(&results[0]), 2 * P, "{results:?}");
        if results[1].is_err() {
            // Refused only by the other's add in flight, seen in every row read: 1 + 2
            // weigh ⌈3·(P − e)/P⌉ ≤ 1 from e = 67 into window 11: longer than the 100 ns
            // the prefix alone needs (never too short).
            assert_eq!(wait(&results[1]), P + P - P / 3, "{results:?}");
        }
        assert_admissible_per_key(2, PREFIX, asks, &results);
        let admitted = 1 + u64::from(results[1].is_ok());
        assert_eq!(
            s.estimate_at(&1, NOW),
            admitted,
            "the refund of 2 lost or doubled: {results:?}"
        );
        assert_eq!(s.estimate_at(&2, NOW), admitted, "{results:?}");
    });
    outcomes
}

#[test]
fn refund_races_admission_same_key() {
    refund_races_admission(
        "keyed sketch, count 2, refund of [2] races [1], same key",
        &[(1, 2, NOW), (1, 1, NOW)],
    )
    // NN: the 1 read the rows while the 2 was in them (a refusal in flight, stricter).
    .assert_exactly(&["NY", "NN"]);
}

#[test]
fn refund_of_a_colliding_key_races_admission() {
    refund_races_admission(
        "keyed sketch, count 2, refund of key 2's [2] races key 1's [1]",
        &[(2, 2, NOW), (1, 1, NOW)],
    )
    .assert_exactly(&["NY", "NN"]);
}

#[test]
fn refund_across_a_window_rotation() {
    // Count 2. Prefix: 1 at window 10. A window-10 request for 2 (refused: 1 + 2 > 2, or,
    // once the cells are in window 11, refused as a reading from before their window) races
    // a window-11 request for 1 that rotates the cells. The refund of the 2 must land in the
    // window it was added to: `curr` of window 10 (now `prev`, if the rotation came between)
    // or of window 11 (if its add came after the rotation).
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model("keyed sketch, count 2, refund across rotation", move || {
        const PREFIX: &[KeyAsk] = &[(1, 1, NOW + 20)];
        const ASKS: &[KeyAsk] = &[(1, 2, NOW + 80), (1, 1, NOW + P + 50)];
        let (s, results) = race(build(2, 2), PREFIX, ASKS);
        seen.record(&results);
        assert!(results[0].is_err(), "{results:?}");
        assert_admissible_per_key(2, PREFIX, ASKS, &results);
        let in_11 = u64::from(results[1].is_ok());
        // Window 11's last ns: window 10's 1 weighs ⌈1/100⌉ = 1, window 11 holds exactly
        // what was admitted there.
        assert_eq!(s.estimate_at(&1, NOW + 2 * P - 1), 1 + in_11, "{results:?}");
        // Window 12's start: window 11 weighs fully.
        assert_eq!(s.estimate_at(&1, NOW + 2 * P), in_11, "{results:?}");
        assert_eq!(s.estimate_at(&1, NOW + 3 * P), 0);
        // Window 11, 50 ns in, with the 1 admitted: ⌈1·½⌉ + 1 = 2, full.
        if in_11 == 1 {
            assert_eq!(s.snapshot_at(&1, NOW + P + 50).remaining, 0);
        }
    });
    outcomes.assert_exactly(&["NY", "NN"]);
}

#[test]
fn refund_after_its_window_aged_out() {
    // Count 2. Prefix: 1 at window 10. A window-10 request for 2 (refused) races a
    // window-12 request for 1, which finds the cells two windows behind and starts them
    // afresh. A refund of an add to window 10 that lands after that must subtract nothing
    // (its permits aged out with the window); one to window 12 (an add that came after the
    // restart, recorded in the cells' window) must subtract exactly its own.
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sketch, count 2, refund after its window aged out",
        move || {
            const PREFIX: &[KeyAsk] = &[(1, 1, NOW + 20)];
            const ASKS: &[KeyAsk] = &[(1, 2, NOW + 80), (1, 1, NOW + 2 * P + 10)];
            let (s, results) = race(build(2, 2), PREFIX, ASKS);
            seen.record(&results);
            assert!(results[0].is_err(), "{results:?}");
            assert_admissible_per_key(2, PREFIX, ASKS, &results);
            let in_12 = u64::from(results[1].is_ok());
            assert_eq!(s.estimate_at(&1, NOW + 2 * P + 10), in_12, "{results:?}");
            assert_eq!(s.estimate_at(&1, NOW + 3 * P), in_12, "{results:?}");
            assert_eq!(s.estimate_at(&1, NOW + 4 * P), 0);
        },
    );
    // The 1 is always admitted: only its own add moves a row to window 12, so its add to
    // the last row (the row it checks first) finds that row in window 10 and restarts it.
    outcomes.assert_exactly(&["NY"]);
}

#[test]
fn depth_1_frozen_two_threads_ask_2_and_1_count_2() {
    // Depth 1: the add is the read (no second step), so the first to add sees only itself
    // and is admitted; the other sees it and is refused. Demand 3 > count 2.
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sketch, count 2, depth 1, same key [2, 1]",
        move || {
            const ASKS: &[KeyAsk] = &[(1, 2, NOW), (1, 1, NOW)];
            let (s, results) = race(build(2, 1), &[], ASKS);
            seen.record(&results);
            assert_admissible_per_key(2, &[], ASKS, &results);
            let admitted: u32 = ASKS
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(a, _)| a.1)
                .sum();
            assert_eq!(s.estimate_at(&1, NOW), u64::from(admitted), "{results:?}");
            assert_eq!(s.snapshot_at(&1, NOW + 2 * P).full_after, Duration::ZERO);
        },
    );
    outcomes.assert_exactly(&["YN", "NY"]);
}

#[test]
fn two_keys_three_threads_count_2_depth_2() {
    // Keys 1 and 2 share every cell (width 1): the cells hold the total of both. A request
    // for 2 of key 2 races two requests for 1 of key 1; refusals in flight may refuse
    // others (stricter), but the cells end holding exactly what was admitted.
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sketch, count 2, depth 2, keys [1, 2, 1] asking [1, 2, 1]",
        move || {
            const ASKS: &[KeyAsk] = &[(1, 1, NOW), (2, 2, NOW), (1, 1, NOW)];
            let (s, results) = race(build(2, 2), &[], ASKS);
            seen.record(&results);
            assert_admissible_per_key(2, &[], ASKS, &results);
            let admitted: u32 = ASKS
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(a, _)| a.1)
                .sum();
            assert!(
                admitted <= 2,
                "the shared cells admitted {admitted}: {results:?}"
            );
            assert_eq!(s.estimate_at(&1, NOW), u64::from(admitted), "{results:?}");
            for r in results.iter().filter(|r| r.is_err()) {
                assert!(wait(r) > 0, "{results:?}");
            }
        },
    );
    // Sequentially YNY (a 1 first) or NYN (the 2 first). YNN and NNY: a 1 refused by the
    // 2's add in flight, the 2 then refused by the other 1 (stricter, never looser). Never
    // NNN: the first request to add to the last row sees only itself there.
    outcomes.assert_exactly(&["YNY", "NYN", "YNN", "NNY"]);
}
