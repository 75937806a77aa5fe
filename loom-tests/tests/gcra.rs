//! Loom models of `Gcra`'s CAS loop (README, model 1).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! Each attempt of the CAS loop is one load (or the value a failed CAS returned) and one
//! CAS, and another thread's commit enters a thread's load→CAS window by one preemption.
//! The worst case, 3 threads all loading the same state before any commits, is A→B, B→C,
//! C→A = 3 preemptions; the commits and retries after that switch at thread ends and at the
//! retry's back-off (a yield under loom), which are not preemptions. So a bound of 3 covers
//! every interleaving of the 2–3 threads' attempts in these models.
//!
//! The moving-clock model has more schedule points (the clock thread, two attempts per
//! thread) than a bound of 3 places everywhere; it was also run with
//! `LOOM_MAX_PREEMPTIONS=4` and `=6` (see the README).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::Gcra;
use loom_tests::{check_frozen, model, race_moving, NOW, T};

type L = Gcra<ManualClock>;

// ---- Frozen clock: exactly the burst, final TAT = sequential TAT, linearizable. ----

#[test]
fn two_threads_burst_1_each_ask_1() {
    check_frozen::<L>(
        "gcra 2 threads burst 1 asks [1,1]",
        1,
        &[],
        &[1, 1],
        Some(1),
    );
}

#[test]
fn two_threads_burst_3_ask_2_and_1() {
    check_frozen::<L>(
        "gcra 2 threads burst 3 asks [2,1]",
        3,
        &[],
        &[2, 1],
        Some(3),
    );
}

#[test]
fn two_threads_burst_3_each_ask_2() {
    // Only one fits, whichever runs first; the other is denied and writes nothing.
    check_frozen::<L>(
        "gcra 2 threads burst 3 asks [2,2]",
        3,
        &[],
        &[2, 2],
        Some(2),
    );
}

#[test]
fn three_threads_burst_2_each_ask_1() {
    check_frozen::<L>(
        "gcra 3 threads burst 2 asks [1,1,1]",
        2,
        &[],
        &[1, 1, 1],
        Some(2),
    );
}

#[test]
fn three_threads_burst_3_ask_2_1_1() {
    // 2+1 fills it (the other 1 is denied), 1+1 leaves 1 (the 2 is denied): the total
    // depends on the order; no permit is created or lost in either.
    check_frozen::<L>(
        "gcra 3 threads burst 3 asks [2,1,1]",
        3,
        &[],
        &[2, 1, 1],
        None,
    );
}

// ---- Time moving: one thread advances the clock while two acquire. ----

#[test]
fn clock_advancing_while_two_threads_acquire() {
    const BURST: u32 = 1;
    const ADVANCE: u64 = T; // earns exactly one permit
    model("gcra clock advancing, 2 threads x 2 acquires", || {
        // race_moving checks: the TAT never moves back as seen by any thread, the final TAT
        // is at least every TAT seen, and NOW + admitted·T ≤ TAT ≤ max time + burst·T.
        let (admitted, max_time, _tat) = race_moving::<L>(BURST, ADVANCE, 2);
        let earned = u32::try_from((max_time - NOW) / T).unwrap();
        assert!(
            admitted <= BURST + earned,
            "admitted {admitted} > burst {BURST} + earned {earned} (max time {max_time})"
        );
    });
}
