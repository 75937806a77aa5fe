//! Loom models of `ManualClock` (README, model 4).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! `advance` is one read-modify-write (`fetch_update`: a load and a CAS per attempt); two
//! advancing threads need at most 2 preemptions to both load before either commits, and
//! the reader's loads one more, so a bound of 3 covers every interleaving of their
//! attempts. These models are tiny; an unbounded run is in the README.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{Clock, ManualClock};
use loom::thread;
use loom_tests::model;
use std::time::Duration;

#[test]
fn advance_from_two_threads_sums_exactly() {
    model("manual clock, two advances + reader", || {
        const START: u64 = 1_000;
        let clock = ManualClock::starting_at(START);
        let a = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance_nanos(3))
        };
        let b = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_nanos(40)))
        };
        // A concurrent reader sees only sums of whole advances, never going back.
        let first = clock.now();
        let second = clock.now();
        for t in [first, second] {
            assert!(
                [START, START + 3, START + 40, START + 43].contains(&t),
                "read {t}"
            );
        }
        assert!(second >= first, "clock went back: {first} -> {second}");
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(clock.now(), START + 43);
    });
}

#[test]
fn advance_from_two_threads_saturates() {
    model("manual clock, two advances saturating", || {
        let clock = ManualClock::starting_at(u64::MAX - 10);
        let handles: Vec<_> = [7, 8]
            .into_iter()
            .map(|by| {
                let clock = clock.clone();
                thread::spawn(move || clock.advance_nanos(by))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(clock.now(), u64::MAX, "saturates, never wraps");
    });
}
