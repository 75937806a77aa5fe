//! Loom models of "a denial writes nothing" (README, model 3), for `Gcra` and `TokenBucket`.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! Each attempt of the CAS loop is one load (or the value a failed CAS returned) and one
//! CAS, and another thread's commit enters a thread's load→CAS window by one preemption.
//! The two threads here need at most 2 preemptions to load the same state before either
//! commits; the rest switches at thread ends and at the retry's back-off (a yield under
//! loom), which are not preemptions. So a bound of 3 covers every interleaving of their
//! attempts; an unbounded run (README) passes too.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::{Denied, Gcra, TokenBucket};
use loom_tests::{
    assert_linearizable, model, probe, probe_model, quota, race_frozen, sequential,
    sequential_model, Limiter,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Two threads ask `asks` at a frozen time after `prefix`; exactly one is admitted. The
/// final state must equal the sequential execution of `prefix` and the admitted request
/// alone, as if the denied one had never run. Returns a bit per admitted thread seen
/// across all executions, so the test can check both outcomes were explored.
fn check_denial_writes_nothing<L: Limiter + Send + Sync>(
    name: &str,
    burst: u32,
    prefix: &'static [u32],
    asks: &'static [u32; 2],
) -> usize {
    let outcomes = Arc::new(AtomicUsize::new(0));
    let seen = outcomes.clone();
    model(name, move || {
        let quota = quota(burst);
        let (limiter, results) = race_frozen::<L>(quota, prefix, asks);
        let admitted: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(admitted.len(), 1, "exactly one fits: {results:?}");
        let (winner, loser) = (admitted[0], 1 - admitted[0]);
        assert!(matches!(results[loser], Err(Denied::RateLimited { .. })));
        seen.fetch_or(1 << winner, Ordering::Relaxed);

        // The admitted-only sequential execution: prefix, then the winner's request.
        let mut admitted_only = prefix.to_vec();
        admitted_only.push(asks[winner]);
        let (expected, _) = sequential::<L>(quota, &admitted_only, &[], &[]);
        let (expected_model, _) = sequential_model(L::ALGORITHM, quota, &admitted_only, &[], &[]);
        assert_eq!(limiter.tat(), expected.tat(), "results {results:?}");
        assert_eq!(probe(&*limiter), probe(&expected), "results {results:?}");
        assert_eq!(
            probe(&*limiter),
            probe_model(&expected_model),
            "results {results:?}"
        );
        // And the denial's retry-after is the one the loser gets after the winner.
        assert_linearizable(quota, prefix, asks, &results, &*limiter);
    });
    outcomes.load(Ordering::Relaxed)
}

// Burst 3 with 2 taken leaves 1: the ask of 2 is denied on its first attempt, whatever the
// other thread does; the ask of 1 is always admitted.
#[test]
fn gcra_denied_on_first_attempt() {
    let won = check_denial_writes_nothing::<Gcra<ManualClock>>(
        "gcra denial, first attempt",
        3,
        &[2],
        &[1, 2],
    );
    assert_eq!(won, 0b01, "only the ask of 1 can be admitted");
}

#[test]
fn bucket_denied_on_first_attempt() {
    let won = check_denial_writes_nothing::<TokenBucket<ManualClock>>(
        "bucket denial, first attempt",
        3,
        &[2],
        &[1, 2],
    );
    assert_eq!(won, 0b01, "only the ask of 1 can be admitted");
}

// Burst 3 with 1 taken leaves 2: either request fits alone but not both. When the ask of 2
// loads the state, plans an admission, and loses the CAS to the ask of 1, it is denied on
// the retry; when it wins, the ask of 1 is denied. Both winners must be explored.
#[test]
fn gcra_denied_on_retry() {
    let won =
        check_denial_writes_nothing::<Gcra<ManualClock>>("gcra denial, on retry", 3, &[1], &[1, 2]);
    assert_eq!(won, 0b11, "both outcomes explored");
}

#[test]
fn bucket_denied_on_retry() {
    let won = check_denial_writes_nothing::<TokenBucket<ManualClock>>(
        "bucket denial, on retry",
        3,
        &[1],
        &[1, 2],
    );
    assert_eq!(won, 0b11, "both outcomes explored");
}
