//! Loom models of `Counted`'s counters (README, model 13): no increment is lost when threads
//! share a stripe (under loom every thread is on stripe 0), and an exhausted episode is
//! opened once and closed once, its time added once.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`). A counter is one `fetch_add`, an
//! RMW that no preemption can split; the episode word is a load followed by one
//! `compare_exchange` (open) or `swap` (close), a window like the CAS loop's, so the
//! argument of the `Gcra` models holds: 3 threads all loading before any commits is 3
//! preemptions.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::{Counted, Gcra, RateLimiter};
use loom_tests::{in_threads, model, quota, Outcomes, NOW, T};
use std::sync::Arc;

type L = Counted<Gcra<ManualClock>>;

fn counted(burst: u32) -> Arc<L> {
    Arc::new(Counted::new(
        Gcra::with_clock(quota(burst), ManualClock::starting_at(NOW)).unwrap(),
    ))
}

/// Three threads, burst 2, one request each at the frozen time: the counts are exactly the
/// results the threads saw, whatever the interleaving.
#[test]
fn three_threads_count_what_they_were_told() {
    model("counted gcra 3 threads burst 2", || {
        let limiter = counted(2);
        let results = in_threads(&limiter, &[NOW; 3], |l: &L, now| l.try_acquire_n_at(1, now));
        let admitted = results.iter().filter(|r| r.is_ok()).count() as u64;
        assert_eq!(admitted, 2);
        let c = limiter.counts();
        assert_eq!(
            (c.admitted, c.permits, c.rate_limited),
            (2, 2, 1),
            "{results:?}"
        );
        // Every time is NOW: whatever episodes opened and closed lasted 0 ns.
        assert_eq!(c.exhausted_ns, 0);
    });
}

/// A refusal at `NOW` and an admission at `NOW + T` (when a permit is free again) race:
/// either the admission is recorded first (the refusal then opens an episode that stays
/// open) or the refusal is (the admission closes it after exactly `T`).
#[test]
fn a_refusal_and_a_later_admission_race() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "counted gcra refusal at NOW, admission at NOW + T",
        move || {
            let limiter = counted(1);
            limiter.try_acquire_n_at(1, NOW).unwrap();
            // Each thread decides at its own time; the limiter admits at NOW + T whatever the
            // order (a refusal writes nothing).
            let results = in_threads(&limiter, &[NOW, NOW + T], |l: &L, now| {
                l.try_acquire_n_at(1, now)
            });
            assert!(results[0].is_err() && results[1].is_ok(), "{results:?}");
            let c = limiter.counts();
            assert_eq!((c.admitted, c.rate_limited), (2, 1));
            match c.exhausted_since {
                Some(since) => assert_eq!((since, c.exhausted_ns), (NOW, 0)),
                None => assert_eq!(c.exhausted_ns, T),
            }
            seen.record_pattern(vec![c.exhausted_since.is_some()]);
        },
    );
    // Both orders of the two records were explored.
    outcomes.assert_exactly(&["N", "Y"]);
}

/// An episode opened before the threads start, two admissions racing to close it: exactly
/// one of them adds its length.
#[test]
fn two_admissions_close_one_episode_once() {
    model("counted gcra 2 admissions close one episode", || {
        let limiter = counted(2);
        limiter.try_acquire_n_at(2, NOW).unwrap();
        assert!(limiter.try_acquire_n_at(1, NOW).is_err());
        let later: Nanos = NOW + 2 * T;
        let results = in_threads(&limiter, &[later, later], |l: &L, now| {
            l.try_acquire_n_at(1, now)
        });
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let c = limiter.counts();
        assert_eq!((c.admitted, c.permits, c.rate_limited), (3, 4, 1));
        assert_eq!((c.exhausted_ns, c.exhausted_since), (2 * T, None));
    });
}
