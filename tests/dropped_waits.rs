//! A wait dropped while it is queued gives its place back at once, in every area (issue
//! 38): nothing stays queued (`waiting() == 0` the moment the wait is dropped), what it had
//! reserved is given back (the budget's place refunded; the lanes' and the permits' rules
//! say where a partial grant goes), and the next wait on an uncontended limiter takes the
//! one-compare-and-swap path again (its first poll decides; nothing waits in front of it).
//!
//! Every wait here is polled by hand through the public driver seam
//! ([`limitcore::notify::Wait`]) on a `ManualClock`: no real time passes, and no assertion
//! depends on how fast the machine is.

use limitcore::clock::ManualClock;
use limitcore::concurrency::Permits;
use limitcore::io::{AsyncPaced, InLane};
use limitcore::notify::{Nap, Wait};
use limitcore::{Budget, Lane, Lanes, LanesConfig, Quota, RateLimiter, Throttler};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::io::AsyncWrite;

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

fn noop() -> Waker {
    Waker::from(Arc::new(Noop))
}

/// One poll of `wait` through the driver seam, with a waker that does nothing (the test
/// looks again itself), and the nap it asked for.
fn poll<W: Wait>(wait: &mut W) -> (Poll<W::Output>, Option<Duration>) {
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    let mut nap = Nap::default();
    let polled = wait.poll_wait(&mut cx, &mut nap);
    (polled, nap.get())
}

fn budget(quota: &str) -> Arc<Budget<ManualClock>> {
    Arc::new(Budget::with_clock(quota.parse().unwrap(), ManualClock::new()).unwrap())
}

/// Budget: a borrowed and an owned wait, each dropped while queued: at once nothing waits,
/// the place it reserved is refunded (the budget's backlog is what it was before the wait),
/// and the next wait, once the permit conforms, is decided at its first poll. A manual
/// clock never naps: the waits sleep until the clock moves.
#[test]
fn a_budget_wait_dropped_while_queued_gives_its_place_back_at_once() {
    let b = budget("10/s burst 1");
    b.try_acquire().unwrap();
    let backlog = b.snapshot().full_after;
    assert_eq!(backlog, Duration::from_millis(100));
    for owned in [false, true] {
        let dropped = if owned {
            let mut wait = b.acquire_owned(1);
            let (polled, nap) = poll(&mut wait);
            assert!(polled.is_pending() && nap.is_none());
            assert_eq!(b.waiting(), 1);
            assert_eq!(
                b.snapshot().full_after,
                Duration::from_millis(200),
                "reserved"
            );
            drop(wait);
            b.waiting()
        } else {
            let mut wait = b.acquire_until(1, None);
            assert!(poll(&mut wait).0.is_pending());
            assert_eq!(b.waiting(), 1);
            drop(wait);
            b.waiting()
        };
        assert_eq!(dropped, 0, "left the queue at once (owned: {owned})");
        assert_eq!(b.snapshot().full_after, backlog, "its place refunded");
    }
    b.clock().advance(Duration::from_millis(100));
    let mut next = b.acquire(1);
    match poll(&mut next).0 {
        Poll::Ready(Ok(receipt)) => assert_eq!(receipt.n(), 1),
        other => panic!("the next wait waited: {other:?}"),
    }
    assert_eq!(b.waiting(), 0);
}

/// Budget: the place of a wait dropped in the middle of the queue is refunded at once, and
/// the waiter behind it keeps its own place (places are promises in arrival order: none
/// moves, none is overtaken).
#[test]
fn a_budget_wait_dropped_in_the_middle_of_the_queue_is_refunded_at_once() {
    let b = budget("10/s burst 1");
    b.try_acquire().unwrap();
    let mut first = b.acquire(1);
    let mut second = b.acquire(1);
    assert!(poll(&mut first).0.is_pending()); // at 100 ms
    assert!(poll(&mut second).0.is_pending()); // at 200 ms
    assert_eq!(b.snapshot().full_after, Duration::from_millis(300));
    drop(first);
    assert_eq!(b.waiting(), 1);
    assert_eq!(
        b.snapshot().full_after,
        Duration::from_millis(200),
        "refunded"
    );
    b.clock().advance(Duration::from_millis(100));
    assert!(poll(&mut second).0.is_pending(), "its own place: 200 ms");
    b.clock().advance(Duration::from_millis(100));
    assert!(matches!(poll(&mut second).0, Poll::Ready(Ok(_))));
    assert_eq!(b.waiting(), 0);
}

/// Lanes: a wait dropped with part of its request granted leaves its lane's queue at once;
/// the lanes never refund (what it was given stays charged, as the module documents), and
/// the lane's fast path, which yields to any waiting request, is open again.
#[test]
fn a_lanes_wait_dropped_while_queued_leaves_its_lane_at_once() {
    let clock = ManualClock::new();
    let config = LanesConfig::new("1000/s burst 100".parse().unwrap());
    let lanes = Arc::new(Lanes::with_clock(config, clock.clone()).unwrap());
    for owned in [false, true] {
        let pending = if owned {
            let mut wait = lanes.acquire_owned(Lane::LOW, 150);
            assert!(poll(&mut wait).0.is_pending());
            assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 1);
            // Its lane's waiting request closes the fast path to every other lane.
            assert!(lanes.try_acquire(Lane::MID, 1).is_err());
            drop(wait);
            lanes.counts(Lane::LOW).unwrap().pending
        } else {
            let mut wait = lanes.acquire(Lane::LOW, 150);
            assert!(poll(&mut wait).0.is_pending());
            drop(wait);
            lanes.counts(Lane::LOW).unwrap().pending
        };
        assert_eq!(pending, 0, "left the queue at once (owned: {owned})");
        clock.advance(Duration::from_millis(100)); // the burst back
    }
    let counts = lanes.counts(Lane::LOW).unwrap();
    assert_eq!(
        (counts.cancelled, counts.granted),
        (2, 200),
        "kept, not refunded"
    );
    assert!(
        lanes.try_acquire(Lane::MID, 1).is_ok(),
        "the fast path is open"
    );
    let mut next = lanes.acquire(Lane::LOW, 99);
    assert!(matches!(poll(&mut next).0, Poll::Ready(Ok(()))));
}

/// Permits: a borrowed and an owned wait dropped while queued leave the queue at once, the
/// waiting bit is cleared (the one-CAS grant is open: `available()` counts free permits
/// again), and a release after the drop goes to nobody.
#[test]
fn a_permits_wait_dropped_while_queued_leaves_the_queue_at_once() {
    let permits = Arc::new(Permits::new(1).unwrap());
    let held = permits.try_acquire(1).unwrap();
    {
        let mut borrowed = permits.acquire(1);
        let mut owned = permits.acquire_owned(1);
        assert!(poll(&mut borrowed).0.is_pending());
        assert!(poll(&mut owned).0.is_pending());
        assert_eq!(permits.snapshot().waiting, 2);
        drop(borrowed);
        assert_eq!(permits.snapshot().waiting, 1);
    }
    assert_eq!(permits.snapshot().waiting, 0, "left the queue at once");
    drop(held);
    assert_eq!(
        permits.snapshot().in_flight,
        0,
        "the release went to nobody"
    );
    assert_eq!(permits.available(), 1, "the waiting bit is clear: one CAS");
    let mut next = permits.acquire(1);
    assert!(matches!(poll(&mut next).0, Poll::Ready(Ok(_))));
}

/// Permits: a timed wait (on the driver, tokio's timer for its deadline) dropped while
/// queued leaves as the untimed one does.
#[tokio::test(flavor = "current_thread")]
async fn a_timed_permits_wait_dropped_while_queued_leaves_the_queue_at_once() {
    let permits = Arc::new(Permits::new(1).unwrap());
    let held = permits.acquire(1).await.unwrap();
    let mut timed = permits.acquire_until(1, None);
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut timed).poll(&mut cx).is_pending());
    let mut owned = permits.acquire_owned_within(1, Duration::from_secs(3600));
    assert!(Pin::new(&mut owned).poll(&mut cx).is_pending());
    assert_eq!(permits.snapshot().waiting, 2);
    drop((timed, owned));
    assert_eq!(permits.snapshot().waiting, 0);
    drop(held);
    assert_eq!(permits.available(), 1);
}

/// The async I/O adapter: each direction owns its wait on the pacer, so dropping the
/// adapter while a write waits for its place gives the place back at once (nothing waits,
/// the reserved KiB refunded), and a new adapter's first write, once the clock reaches the
/// rate, is granted at its first poll.
#[test]
fn an_io_adapter_dropped_while_its_write_waits_gives_the_place_back_at_once() {
    let b = budget("1KiB/s burst 1KiB");
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    let mut out = AsyncPaced::new(Vec::new(), b.clone());
    let polled = Pin::new(&mut out).poll_write(&mut cx, &[1; 1024]);
    assert!(matches!(polled, Poll::Ready(Ok(1024))), "{polled:?}");
    assert_eq!(b.snapshot().full_after, Duration::from_secs(1));
    let polled = Pin::new(&mut out).poll_write(&mut cx, &[2; 1024]);
    assert!(polled.is_pending(), "{polled:?}");
    assert_eq!(b.waiting(), 1);
    assert_eq!(
        b.snapshot().full_after,
        Duration::from_secs(2),
        "its place reserved"
    );
    drop(out);
    assert_eq!(b.waiting(), 0, "left the queue at once");
    assert_eq!(
        b.snapshot().full_after,
        Duration::from_secs(1),
        "its place refunded"
    );
    b.clock().advance(Duration::from_secs(1));
    let mut next = AsyncPaced::new(Vec::new(), b.clone());
    let polled = Pin::new(&mut next).poll_write(&mut cx, &[3; 1024]);
    assert!(matches!(polled, Poll::Ready(Ok(1024))), "{polled:?}");
    assert_eq!(b.waiting(), 0);
}

/// The async I/O adapter on a lane: dropping it while its write waits takes its request out
/// of the lane's queue at once.
#[test]
fn an_io_adapter_on_a_lane_dropped_while_its_write_waits_leaves_the_lane() {
    let clock = ManualClock::new();
    let config = LanesConfig::new("1000/s burst 100".parse().unwrap());
    let lanes = Arc::new(Lanes::with_clock(config, clock).unwrap());
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    let mut out = AsyncPaced::new(Vec::new(), InLane::new(lanes.clone(), Lane::LOW).unwrap());
    assert!(matches!(
        Pin::new(&mut out).poll_write(&mut cx, &[0; 100]),
        Poll::Ready(Ok(100))
    ));
    assert!(Pin::new(&mut out)
        .poll_write(&mut cx, &[0; 10])
        .is_pending());
    assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 1);
    drop(out);
    assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 0);
    assert_eq!(lanes.counts(Lane::LOW).unwrap().cancelled, 1);
}

/// The throttler: an awaited task handle and a `run` dropped before the start leave nothing
/// behind that waits. The task of a dropped handle's wait still runs (a handle never
/// cancels by being dropped), and a dropped `run` keeps its slot, as `Throttler::run`
/// documents: the schedule promises start times in order, not a refundable reservation.
#[tokio::test(flavor = "current_thread")]
async fn throttler_waits_dropped_before_their_start_leave_nothing_waiting() {
    let clock = ManualClock::new();
    let none = Vec::<(u8, Quota)>::new();
    let t = Throttler::with_clock("1/s".parse().unwrap(), none, clock.clone()).unwrap();
    let first = t.submit(None, || 1).unwrap();
    assert_eq!(first.await.unwrap(), 1);
    let second = t.submit(None, || 2).unwrap(); // at 1 s
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    let mut awaited = std::future::IntoFuture::into_future(second);
    assert!(Pin::new(&mut awaited).poll(&mut cx).is_pending());
    drop(awaited); // the task is not cancelled
    let mut run = Box::pin(t.run(None, async { 3 }));
    assert!(run.as_mut().poll(&mut cx).is_pending()); // due at 2 s
    drop(run);
    let third = t.submit(None, || 4).unwrap();
    assert_eq!(
        third.start(),
        3_000_000_000,
        "the dropped run kept its slot (2 s)"
    );
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        third.await.unwrap(),
        4,
        "the task behind the dropped waits ran"
    );
}
