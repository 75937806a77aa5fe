//! Loom models of a budget's live configuration (`src/budget/live.rs`): reconfiguration
//! racing decisions (a decision applies one configuration to a state of that
//! configuration, never a mix), a pause racing a waiter (no lost wake-up), a keyed budget's
//! move of a busy key into its own configuration racing requests on the key (no charge
//! lost, none created), and a queued wait dropped while a change resolves it (its place
//! given back exactly once; `src/budget/wait.rs`).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test budget`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::notify::{Nap, Wait};
use limitcore::reference::BudgetModel;
use limitcore::{
    Budget, BudgetConfig, BudgetRule, Denied, Keyed, LoomStore, Mode, RateLimiter, Snapshot,
};
use loom::sync::Arc;
use loom_tests::{model, NOW};
use std::task::{Context, Poll, Wake, Waker};

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
        assert_eq!(waiter.join().unwrap().map(|receipt| receipt.n()), Ok(1));
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

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
struct Noop;

impl Wake for Noop {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// One poll of `wait` with a waker that does nothing (the model looks again itself).
fn poll_once<W: Wait>(wait: &mut W) -> Poll<W::Output> {
    let waker = Waker::from(std::sync::Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    wait.poll_wait(&mut cx, &mut Nap::default())
}

/// A queued wait dropped while a reconfiguration resolves it (issue 38): the budget
/// disabled releases every waiter (its place given back, charged nothing), and the wait's
/// `Drop` gives back a place it still holds. Whichever comes first, the other finds nothing
/// to give back twice: nothing waits after both, the budget's state is the one before the
/// wait (its place refunded exactly once), and the next wait is decided at its first poll.
#[test]
fn a_dropped_wait_racing_a_release_gives_its_place_back_once() {
    model("budget wait drop vs disable", || {
        let config = BudgetConfig::new("1/h burst 2".parse().unwrap());
        let clock = ManualClock::starting_at(NOW);
        let budget = Arc::new(Budget::with_config(&config, clock.clone()).unwrap());
        budget.try_acquire_n_at(2, NOW).unwrap();
        let before = budget.snapshot_at(NOW);
        let waiter = {
            let budget = Arc::clone(&budget);
            loom::thread::spawn(move || {
                let mut wait = budget.acquire(1);
                // Queued (its place an hour away), or, after the change, released at once.
                let polled = poll_once(&mut wait);
                drop(wait);
                polled.map(|outcome| outcome.map(|receipt| receipt.n()))
            })
        };
        budget
            .reconfigure_at(&config.mode(Mode::Disabled), NOW)
            .unwrap();
        let polled = waiter.join().unwrap();
        assert!(
            matches!(polled, Poll::Pending | Poll::Ready(Ok(0))),
            "{polled:?}"
        );
        assert_eq!(budget.waiting(), 0);
        budget.reconfigure_at(&config, NOW).unwrap();
        assert_eq!(budget.snapshot_at(NOW), before, "refunded exactly once");
        clock.advance(std::time::Duration::from_secs(3600));
        let mut next = budget.acquire(1);
        assert!(matches!(poll_once(&mut next), Poll::Ready(Ok(_))));
    });
}

/// A queued wait dropped while a cut of the capacity refuses it (its place given back by
/// the change, `ExceedsCapacity`): the place is refunded once, whichever side comes first.
#[test]
fn a_dropped_wait_racing_a_refusal_gives_its_place_back_once() {
    let (wide, narrow) = (
        BudgetConfig::new("1/h burst 2".parse().unwrap()),
        BudgetConfig::new("1/h burst 1".parse().unwrap()),
    );
    model("budget wait drop vs capacity cut", move || {
        // The sequential outcome: 2 taken, then the cut, and no place held by anyone.
        let expected = {
            let b = Budget::with_config(&wide, ManualClock::starting_at(NOW)).unwrap();
            b.try_acquire_n_at(2, NOW).unwrap();
            b.reconfigure_at(&narrow, NOW).unwrap();
            b.snapshot_at(NOW)
        };
        let budget = Arc::new(Budget::with_config(&wide, ManualClock::starting_at(NOW)).unwrap());
        budget.try_acquire_n_at(2, NOW).unwrap();
        let waiter = {
            let budget = Arc::clone(&budget);
            loom::thread::spawn(move || {
                let mut wait = budget.acquire(2);
                let polled = poll_once(&mut wait).map(|outcome| outcome.map(|r| r.n()));
                drop(wait);
                polled
            })
        };
        budget.reconfigure_at(&narrow, NOW).unwrap();
        let polled = waiter.join().unwrap();
        assert!(
            matches!(
                polled,
                Poll::Pending | Poll::Ready(Err(Denied::ExceedsCapacity { capacity: 1 }))
            ),
            "{polled:?}"
        );
        assert_eq!(budget.waiting(), 0);
        assert_eq!(budget.snapshot_at(NOW), expected, "refunded exactly once");
    });
}
