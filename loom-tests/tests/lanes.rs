//! Loom models of priority lanes (`src/lanes/`): the lock-free fast path against the queue
//! (no unit granted twice), waiters woken by time (no lost wake-up, the timer handed over
//! from one waiter to the next), a reconfiguration during a wait, and a queued wait dropped
//! while a reconfiguration grants it (it leaves its lane once).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test lanes`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::notify::{Nap, Wait};
use limitcore::{Lane, LaneError, Lanes, LanesConfig, Mode, Progress};
use loom::sync::Arc;
use loom_tests::{model, NOW};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

fn lanes(text: &str, clock: &ManualClock) -> Arc<Lanes<ManualClock>> {
    let config = LanesConfig::new(text.parse().unwrap()).with_piece(1);
    Arc::new(Lanes::with_clock(config, clock.clone()).unwrap())
}

/// Units granted to every lane so far.
fn granted(lanes: &Lanes<ManualClock>) -> u64 {
    (0..4)
        .map(|l| lanes.counts(Lane::new(l)).unwrap().granted)
        .sum()
}

/// A top-lane request on the fast path, a low-lane request that takes what fits and queues
/// the rest, and a middle-lane partial take, racing on a budget of 3 with the clock
/// stopped: the units granted (fast path, pieces) are exactly the units the budget lost,
/// never more than 3, and the queued request holds what it was given.
#[test]
fn the_fast_path_and_the_queue_never_grant_a_unit_twice() {
    model("lanes fast path vs queue", || {
        let clock = ManualClock::starting_at(NOW);
        let lanes = lanes("1/h burst 3", &clock);
        let top = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || {
                u32::from(lanes.try_acquire_at(Lane::USER, 2, NOW).is_ok()) * 2
            })
        };
        let low = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || {
                let mut ticket = lanes.submit_at(Lane::LOW, 2, NOW).unwrap();
                let done = ticket.poll_at(NOW) == Progress::Granted;
                // Cancelled on drop: what it got stays charged (nobody else in its lane).
                (done, ticket.cancel_at(NOW))
            })
        };
        let mid = lanes.take_up_to_at(Lane::MID, 2, NOW).unwrap();
        let top = top.join().unwrap();
        let (done, cancelled) = low.join().unwrap();
        let low_units = match cancelled {
            Ok(()) => 2,
            Err(granted) => granted,
        };
        assert!(done == (low_units == 2));
        let total = granted(&lanes);
        assert_eq!(total, u64::from(top + mid + low_units));
        assert_eq!(u64::from(lanes.snapshot_at(NOW).remaining) + total, 3);
        let pending: u64 = (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap().pending)
            .sum();
        assert_eq!(pending, 0);
    });
}

/// A blocked low-lane waiter (the queue's timer, asleep on the manual clock) and a
/// top-lane request racing it on the fast path while the clock moves on: the waiter is
/// woken and granted, whichever side of its sleep the time moved on (a lost wake-up is a
/// deadlock loom reports).
#[test]
fn a_waiter_is_woken_by_time_racing_the_fast_path() {
    model("lanes waiter vs clock and fast path", || {
        let clock = ManualClock::starting_at(NOW);
        let lanes = lanes("1/s burst 1", &clock);
        lanes.try_acquire_at(Lane::LOW, 1, NOW).unwrap();
        let waiter = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || lanes.acquire_blocking(Lane::LOW, 1))
        };
        // One second later one unit fits: the top lane's fast path may take it first (then
        // the waiter needs the next second).
        clock.advance(Duration::from_secs(1));
        let top = lanes.try_acquire(Lane::USER, 1).is_ok();
        if top {
            clock.advance(Duration::from_secs(1));
        }
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(granted(&lanes), 2 + u64::from(top));
    });
}

/// Two waiters and time moving on twice: a request of the main thread (the queue's timer
/// when it queues first) is granted in its own serve and must hand the timer to the blocked
/// waiter, waking it, so that the waiter is asleep on the clock when time moves on again
/// (RocksDB's #11742 hang: a request queued while the waiter on refill duty was away never
/// woke). Removing that wake-up makes this model deadlock.
#[test]
fn the_timer_passes_from_waiter_to_waiter() {
    model("lanes timer handover", || {
        let clock = ManualClock::starting_at(NOW);
        let lanes = lanes("1/s burst 1", &clock);
        lanes.try_acquire_at(Lane::LOW, 1, NOW).unwrap();
        let mut first = lanes.submit_at(Lane::HIGH, 1, NOW).unwrap();
        let waiter = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || lanes.acquire_blocking(Lane::LOW, 1))
        };
        // One unit fits: the higher lane's.
        clock.advance(Duration::from_secs(1));
        assert_eq!(first.poll_at(NOW + 1_000_000_000), Progress::Granted);
        clock.advance(Duration::from_secs(1));
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(granted(&lanes), 3);
    });
}

/// A waiter on a paused budget, resumed while it goes to sleep: the reconfiguration serves
/// the queue and wakes it, never lost.
#[test]
fn a_pause_ending_during_a_wait_wakes_the_waiter() {
    model("lanes pause ending vs waiter", || {
        let clock = ManualClock::starting_at(NOW);
        let config = LanesConfig::new("1/h burst 1".parse().unwrap());
        let lanes = Arc::new(Lanes::with_clock(config.clone().mode(Mode::Paused), clock).unwrap());
        let waiter = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || lanes.acquire_blocking(Lane::MID, 1))
        };
        lanes.reconfigure_at(&config, NOW).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(lanes.snapshot_at(NOW).remaining, 0);
    });
}

/// A waiter on an empty budget (the queue's timer, asleep for an hour on the manual clock),
/// the budget disabled under it: decided again at once, granted, never left asleep.
#[test]
fn disabling_during_a_wait_grants_the_waiter() {
    model("lanes disabling vs waiter", || {
        let clock = ManualClock::starting_at(NOW);
        let config = LanesConfig::new("1/h burst 1".parse().unwrap());
        let lanes = Arc::new(Lanes::with_clock(config.clone(), clock).unwrap());
        lanes.try_acquire_at(Lane::LOW, 1, NOW).unwrap();
        let waiter = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || lanes.acquire_blocking(Lane::LOW, 1))
        };
        lanes
            .reconfigure_at(&config.mode(Mode::Disabled), NOW)
            .unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(lanes.counts(Lane::LOW).unwrap().granted, 2);
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

/// A queued wait dropped while a reconfiguration grants it (issue 38): the budget disabled
/// grants every waiting request, and the wait's `Drop` takes a request that still waits out
/// of its lane's queue. Whichever comes first, nothing waits after both (the request was
/// granted or cancelled, never both, never neither), and the lanes' fast path, which yields
/// to any waiting request, is open again: a request of another lane is refused only because
/// its unit does not fit (`retry_after: Some`), not because someone waits.
#[test]
fn a_dropped_wait_racing_a_grant_leaves_its_lane_once() {
    model("lanes wait drop vs disable", || {
        let clock = ManualClock::starting_at(NOW);
        let config = LanesConfig::new("1/h burst 1".parse().unwrap()).with_piece(1);
        let lanes = Arc::new(Lanes::with_clock(config.clone(), clock).unwrap());
        lanes.try_acquire_at(Lane::LOW, 1, NOW).unwrap();
        let waiter = {
            let lanes = Arc::clone(&lanes);
            loom::thread::spawn(move || {
                let mut wait = lanes.acquire(Lane::LOW, 1);
                let polled = poll_once(&mut wait);
                drop(wait);
                polled
            })
        };
        lanes
            .reconfigure_at(&config.clone().mode(Mode::Disabled), NOW)
            .unwrap();
        let polled = waiter.join().unwrap();
        assert!(
            matches!(polled, Poll::Pending | Poll::Ready(Ok(()))),
            "{polled:?}"
        );
        let counts = lanes.counts(Lane::LOW).unwrap();
        assert_eq!(counts.pending, 0);
        assert_eq!(
            counts.granted + u64::from(counts.cancelled == 1),
            2,
            "granted or cancelled, once: {counts:?}"
        );
        lanes.reconfigure_at(&config, NOW).unwrap();
        assert!(matches!(
            lanes.try_acquire_at(Lane::MID, 1, NOW + 1),
            Err(LaneError::WouldWait {
                retry_after: Some(_)
            })
        ));
    });
}
