//! Loom models of a budget's live configuration (`src/budget/live.rs`): reconfiguration
//! racing decisions (a decision applies one configuration to a state of that
//! configuration, never a mix), a pause racing a waiter (no lost wake-up), and a keyed
//! budget's move of a busy key into its own configuration racing requests on the key (no
//! charge lost, none created).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test budget`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::reference::BudgetModel;
use limitcore::{Budget, BudgetConfig, BudgetRule, Keyed, LoomStore, Mode, RateLimiter, Snapshot};
use loom::sync::Arc;
use loom_tests::{model, NOW};

/// Two configurations whose units differ (ns, and 2^29 units of 0.62 ns a permit): a
/// decision that mixed them would misstate a backlog by 60 %.
fn configs() -> (BudgetConfig, BudgetConfig) {
    (
        BudgetConfig::new("1/s burst 3".parse().unwrap()),
        BudgetConfig::new("3/1s burst 3".parse().unwrap()),
    )
}

/// Every state a sequential execution can leave: the two decisions of one permit each,
/// with the change at each of the three places among them; the snapshots at `NOW` and 1 s
/// later.
fn sequential_outcomes() -> Vec<(Vec<bool>, Snapshot, Snapshot)> {
    let (first, second) = configs();
    (0..3)
        .map(|at| {
            let mut m = BudgetModel::new(first);
            let mut admitted = Vec::new();
            for i in 0..3 {
                if i == at {
                    m.reconfigure(second, NOW);
                }
                if i < 2 {
                    admitted.push(m.acquire(1, NOW).is_ok());
                }
            }
            (admitted, m.snapshot(NOW), m.snapshot(NOW + 1_000_000_000))
        })
        .collect()
}

#[test]
fn reconfiguration_racing_decisions_never_mixes() {
    let outcomes = sequential_outcomes();
    model("budget reconfiguration vs decisions", move || {
        let (first, second) = configs();
        let budget = Arc::new(Budget::with_config(&first, ManualClock::starting_at(NOW)).unwrap());
        let decider = {
            let budget = Arc::clone(&budget);
            loom::thread::spawn(move || {
                (0..2)
                    .map(|_| budget.try_acquire_n_at(1, NOW).is_ok())
                    .collect::<Vec<_>>()
            })
        };
        budget.reconfigure_at(&second, NOW).unwrap();
        let admitted = decider.join().unwrap();
        let got = (
            admitted,
            budget.snapshot_at(NOW),
            budget.snapshot_at(NOW + 1_000_000_000),
        );
        assert!(
            outcomes.contains(&got),
            "{got:?} is no sequential outcome of {outcomes:?}"
        );
    });
}

#[test]
fn a_pause_ending_wakes_its_waiter() {
    model("budget pause vs waiter", || {
        let config = BudgetConfig::new("1/s burst 1".parse().unwrap()).mode(Mode::Paused);
        let budget = Arc::new(Budget::with_config(&config, ManualClock::starting_at(NOW)).unwrap());
        let waiter = {
            let budget = Arc::clone(&budget);
            loom::thread::spawn(move || budget.acquire_blocking(1))
        };
        budget.set_mode(Mode::Enabled).unwrap();
        // A lost wake-up leaves the waiter asleep for good: loom reports the deadlock.
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(budget.snapshot_at(NOW).remaining, 0);
    });
}

#[test]
fn moving_a_busy_key_loses_and_creates_nothing() {
    model("keyed budget move vs requests", || {
        let q = "1/h burst 2".parse().unwrap();
        let keyed: Arc<Keyed<u8, BudgetRule, ManualClock, LoomStore<u8>>> = Arc::new(
            Keyed::with_store(q, ManualClock::starting_at(NOW), LoomStore::new()).unwrap(),
        );
        // Busy: one permit taken before the threads.
        keyed.try_acquire_n_at(&7, 1, NOW).unwrap();
        let decider = {
            let keyed = Arc::clone(&keyed);
            loom::thread::spawn(move || {
                (0..2)
                    .filter(|_| keyed.try_acquire_n_at(&7, 1, NOW).is_ok())
                    .count()
            })
        };
        keyed
            .reconfigure_key_at(7, BudgetConfig::new(q), NOW)
            .unwrap();
        let admitted = decider.join().unwrap();
        // Exactly the one permit left, whichever side of the move each request fell on, and
        // none after: the key's state is the one the move carried.
        assert_eq!(admitted, 1);
        assert_eq!(keyed.snapshot_at(&7, NOW).remaining, 0);
        assert!(keyed.try_acquire_n_at(&7, 1, NOW).is_err());
    });
}
