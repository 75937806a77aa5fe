//! Loom models of `TokenBucket`'s CAS loop (README, model 2).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! Each attempt of the CAS loop is one load (or the value a failed CAS returned) and one
//! CAS, and another thread's commit enters a thread's load→CAS window by one preemption.
//! The worst case, 3 threads all loading the same word before any commits, is A→B, B→C,
//! C→A = 3 preemptions; the commits and retries after that switch at thread ends and at the
//! retry's back-off (a yield under loom), which are not preemptions. So a bound of 3 covers
//! every interleaving of the 2–3 threads' attempts in these models.
//!
//! The moving-clock model has more schedule points (the clock thread, two attempts per
//! thread) than a bound of 3 places everywhere; it was also run with
//! `LOOM_MAX_PREEMPTIONS=4` and `=6` (see the README).
//!
//! The bucket's word is not public, so its state is compared through `snapshot_at` at
//! several times (`loom_tests::PROBES`), against a sequential `TokenBucket` and against
//! `limitcore::reference::TokenBucketModel`.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::{Algorithm, TokenBucket};
use loom_tests::{check_frozen, model, model_allowance, race_moving, T};

type L = TokenBucket<ManualClock>;

// ---- Frozen clock: exactly the burst, final state = sequential state, linearizable. ----

#[test]
fn two_threads_burst_1_each_ask_1() {
    check_frozen::<L>(
        "bucket 2 threads burst 1 asks [1,1]",
        1,
        &[],
        &[1, 1],
        Some(1),
    );
}

#[test]
fn two_threads_burst_3_ask_2_and_1() {
    check_frozen::<L>(
        "bucket 2 threads burst 3 asks [2,1]",
        3,
        &[],
        &[2, 1],
        Some(3),
    );
}

#[test]
fn two_threads_burst_3_each_ask_2() {
    check_frozen::<L>(
        "bucket 2 threads burst 3 asks [2,2]",
        3,
        &[],
        &[2, 2],
        Some(2),
    );
}

#[test]
fn three_threads_burst_2_each_ask_1() {
    check_frozen::<L>(
        "bucket 3 threads burst 2 asks [1,1,1]",
        2,
        &[],
        &[1, 1, 1],
        Some(2),
    );
}

#[test]
fn three_threads_burst_3_ask_2_1_1() {
    check_frozen::<L>(
        "bucket 3 threads burst 3 asks [2,1,1]",
        3,
        &[],
        &[2, 1, 1],
        None,
    );
}

#[test]
fn three_threads_after_a_refill_from_stored_time() {
    // The first take stores (NOW, burst-1): the racing threads then all take the
    // "stored time, no refill" path rather than the fresh-bucket one.
    check_frozen::<L>(
        "bucket 3 threads burst 3 prefix [1] asks [1,1,1]",
        3,
        &[1],
        &[1, 1, 1],
        Some(2),
    );
}

// ---- Time moving: one thread advances the clock while two acquire. ----

#[test]
fn clock_advancing_while_two_threads_acquire() {
    const BURST: u32 = 1;
    const ADVANCE: u64 = T; // earns exactly one token
    model("bucket clock advancing, 2 threads x 2 acquires", || {
        // race_moving checks: the GCRA-equivalent state never moves back as seen by any
        // thread, and NOW + admitted·T ≤ state ≤ max time + burst·T.
        let (admitted, max_time, _tat) = race_moving::<L>(BURST, ADVANCE, 2);
        let allowed = model_allowance(Algorithm::TokenBucket, BURST, max_time);
        assert!(
            admitted <= allowed,
            "admitted {admitted} > {allowed}, the reference model's most by time {max_time}"
        );
    });
}
