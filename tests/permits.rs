//! The concurrency limits on real threads and tasks: in flight never above the limit (a
//! shadow count kept by the holders), waiters woken, served in order, timed out and
//! cancelled with nothing taken, resizes under load.

use limitcore::concurrency::{AcquireError, LimitError, Order, Permits, MAX_LIMIT};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A count of permits held, kept by the holders themselves: raised after a grant, lowered
/// before the release, its peak recorded.
#[derive(Default)]
struct Shadow {
    held: AtomicU32,
    peak: AtomicU32,
}

impl Shadow {
    fn enter(&self, n: u32) -> u32 {
        let now = self.held.fetch_add(n, Ordering::SeqCst) + n;
        self.peak.fetch_max(now, Ordering::SeqCst);
        now
    }
    fn leave(&self, n: u32) {
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
    fn peak(&self) -> u32 {
        self.peak.load(Ordering::SeqCst)
    }
}

#[test]
fn racing_threads_never_hold_more_than_the_limit() {
    const THREADS: usize = 8;
    let permits = Arc::new(Permits::new(3).unwrap());
    let shadow = Arc::new(Shadow::default());
    let start = Arc::new(Barrier::new(THREADS));
    let granted = Arc::new(AtomicU32::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (permits, shadow, start, granted) = (
                permits.clone(),
                shadow.clone(),
                start.clone(),
                granted.clone(),
            );
            thread::spawn(move || {
                start.wait();
                for i in 0..20_000u32 {
                    let n = 1 + (i + t as u32) % 2;
                    if let Ok(permit) = permits.try_acquire(n) {
                        assert!(permit.in_flight_at_grant() <= permit.limit_at_grant());
                        assert!(shadow.enter(n) <= 3, "more than 3 held");
                        granted.fetch_add(1, Ordering::Relaxed);
                        shadow.leave(n);
                        drop(permit);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(permits.in_flight(), 0);
    assert!(
        shadow.peak() >= 2,
        "the race never overlapped: {}",
        shadow.peak()
    );
    assert!(granted.load(Ordering::Relaxed) > 1_000);
}

#[test]
fn resizes_under_load_cap_every_grant() {
    const THREADS: usize = 6;
    let permits = Arc::new(Permits::new(4).unwrap());
    let shadow = Arc::new(Shadow::default());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (permits, shadow, stop) = (permits.clone(), shadow.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(permit) = permits.try_acquire(1) {
                        // The word the grant replaced had room under the limit it held.
                        assert!(permit.in_flight_at_grant() <= permit.limit_at_grant());
                        assert!(shadow.enter(1) <= 6, "above the largest limit ever set");
                        thread::yield_now();
                        shadow.leave(1);
                    }
                }
            })
        })
        .collect();
    for round in 0..2_000 {
        permits.reconfigure([1, 6, 2, 4][round % 4]).unwrap();
    }
    // A cut to 1: once the holders that were in are out, at most 1 at a time. Each holder
    // leaves after one `yield_now`; the 10 s bound is for a loaded machine that keeps one
    // off its CPU (the loop ends as soon as they are out).
    permits.reconfigure(1).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while permits.in_flight() > 1 && Instant::now() < until {
        thread::yield_now();
    }
    for _ in 0..2_000 {
        assert!(permits.in_flight() <= 1, "{:?}", permits.snapshot());
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(permits.in_flight(), 0);
    assert_eq!(permits.limit(), 1);
}

#[test]
fn blocked_threads_are_all_served_without_exceeding_the_limit() {
    const THREADS: usize = 8;
    let permits = Arc::new(Permits::new(2).unwrap());
    let shadow = Arc::new(Shadow::default());
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (permits, shadow) = (permits.clone(), shadow.clone());
            thread::spawn(move || {
                for _ in 0..200 {
                    let permit = permits.acquire_blocking(1).unwrap();
                    assert!(shadow.enter(1) <= 2);
                    thread::yield_now();
                    shadow.leave(1);
                    permit.success();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(permits.in_flight(), 0);
    // Nobody queued and the waiting bit clear: every permit is available to a request that
    // does not wait (`available` is 0 while the bit is set).
    assert_eq!(permits.snapshot().waiting, 0);
    assert_eq!(permits.available(), permits.limit());
    assert_eq!(shadow.peak(), 2);
}

/// Spawn a thread that waits for 1 permit and reports its label when granted.
fn waiter(
    permits: &Arc<Permits>,
    label: u32,
    log: &Arc<Mutex<Vec<u32>>>,
) -> thread::JoinHandle<()> {
    let (shared, log) = (permits.clone(), log.clone());
    let handle = thread::spawn(move || {
        let permit = shared.acquire_blocking(1).unwrap();
        log.lock().unwrap().push(label);
        drop(permit);
    });
    // Until it is queued.
    while permits.waiters() < label {
        thread::yield_now();
    }
    handle
}

#[test]
fn waiters_are_served_in_order_fifo_and_lifo() {
    for (order, expected) in [(Order::Fifo, [1, 2, 3]), (Order::Lifo, [3, 2, 1])] {
        let permits = Arc::new(Permits::new(1).unwrap().with_order(order));
        let log = Arc::new(Mutex::new(Vec::new()));
        let held = permits.try_acquire(1).unwrap();
        let handles: Vec<_> = (1..=3).map(|label| waiter(&permits, label, &log)).collect();
        // A request that does not wait never overtakes them.
        assert!(matches!(
            permits.try_acquire(1),
            Err(AcquireError::Full { .. })
        ));
        drop(held);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*log.lock().unwrap(), expected, "{order:?}");
        assert_eq!(permits.in_flight(), 0);
    }
}

#[test]
fn a_full_backlog_refuses_and_a_timeout_takes_nothing() {
    let permits = Arc::new(Permits::new(1).unwrap().with_backlog(1).unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = permits.try_acquire(1).unwrap();
    let queued = waiter(&permits, 1, &log);
    assert_eq!(
        permits.acquire_blocking(1).unwrap_err(),
        AcquireError::BacklogFull { backlog: 1 }
    );
    drop(held);
    queued.join().unwrap();

    let held = permits.try_acquire(1).unwrap();
    let t0 = Instant::now();
    let timed_out = permits.acquire_blocking_within(1, Duration::from_millis(30));
    assert_eq!(timed_out.unwrap_err(), AcquireError::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!((permits.waiters(), permits.in_flight()), (0, 1));
    assert_eq!(permits.snapshot().waiting, 0);
    drop(held);
    // Refused if the last waiter's exit had left the waiting bit set.
    assert!(permits.try_acquire(1).is_ok());
}

#[test]
fn a_growth_serves_waiters_and_a_cut_refuses_the_too_large() {
    let permits = Arc::new(Permits::new(2).unwrap());
    let held = permits.try_acquire(2).unwrap();
    let big = {
        let permits = permits.clone();
        thread::spawn(move || permits.acquire_blocking(2).map(|p| p.n()))
    };
    while permits.waiters() < 1 {
        thread::yield_now();
    }
    // The cut refuses the request for 2 at once: it could never be granted under 1.
    permits.reconfigure(1).unwrap();
    assert_eq!(
        big.join().unwrap(),
        Err(AcquireError::ExceedsLimit {
            requested: 2,
            limit: 1
        })
    );
    let small = {
        let permits = permits.clone();
        thread::spawn(move || permits.acquire_blocking(1).map(|p| p.limit_at_grant()))
    };
    while permits.waiters() < 1 {
        thread::yield_now();
    }
    // 2 in flight under 1, then 3: one free, granted by the resize itself.
    permits.reconfigure(3).unwrap();
    assert_eq!(small.join().unwrap(), Ok(3));
    drop(held);
    assert_eq!(permits.in_flight(), 0);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert_eq!(Permits::new(0).unwrap_err(), LimitError::ZeroLimit);
    assert!(matches!(
        Permits::new(MAX_LIMIT + 1),
        Err(LimitError::LimitTooLarge { .. })
    ));
    let permits = Permits::new(4).unwrap();
    assert_eq!(permits.reconfigure(0), Err(LimitError::ZeroLimit));
    assert_eq!(permits.limit(), 4, "a refused resize changes nothing");
    assert_eq!(
        Permits::new(4).unwrap().with_backlog(0).unwrap_err(),
        LimitError::ZeroBacklog
    );
    assert_eq!(
        permits.try_acquire(5).unwrap_err(),
        AcquireError::ExceedsLimit {
            requested: 5,
            limit: 4
        }
    );
    assert_eq!(
        permits.acquire_blocking(u32::MAX).unwrap_err(),
        AcquireError::ExceedsLimit {
            requested: u32::MAX,
            limit: 4
        }
    );
    // Zero permits: granted at once, nothing held.
    let none = permits.try_acquire(0).unwrap();
    assert_eq!((none.n(), permits.in_flight()), (0, 0));
    assert!(Permits::new(MAX_LIMIT)
        .unwrap()
        .try_acquire(MAX_LIMIT)
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_never_hold_more_than_the_limit() {
    let permits = Arc::new(Permits::new(8).unwrap());
    let shadow = Arc::new(Shadow::default());
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (permits, shadow) = (permits.clone(), shadow.clone());
            tokio::spawn(async move {
                let permit = permits.acquire_owned(1).await.unwrap();
                assert!(shadow.enter(1) <= 8);
                // The first eight holders stay until all eight are in, so that the limit is
                // reached however the tasks are scheduled (with a fixed hold, a loaded
                // machine could let one go before the eighth arrived); a limit that grants
                // fewer than eight leaves them waiting, and the peak below fails.
                let until = Instant::now() + Duration::from_secs(10);
                while shadow.peak() < 8 && Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                shadow.leave(1);
                permit.success();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(shadow.peak(), 8);
    assert_eq!((permits.in_flight(), permits.waiters()), (0, 0));
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_and_timed_out_waits_take_nothing() {
    let permits = Arc::new(Permits::new(2).unwrap());
    let held = permits.acquire_owned(2).await.unwrap();
    // Waiters that will be aborted, timed out, or dropped after their first poll.
    let aborted: Vec<_> = (0..20)
        .map(|_| {
            let permits = permits.clone();
            tokio::spawn(async move { permits.acquire_owned(1).await.map(|p| p.n()) })
        })
        .collect();
    let timed = permits.acquire_owned_within(1, Duration::from_millis(20));
    assert_eq!(timed.await.unwrap_err(), AcquireError::TimedOut);
    while permits.waiters() < 20 {
        tokio::task::yield_now().await;
    }
    // Half aborted while queued; then the permits come back while the others are queued
    // and those are aborted too, some after their grant: each gives its grant back.
    for t in &aborted[..10] {
        t.abort();
    }
    drop(held);
    for t in &aborted[10..] {
        t.abort();
    }
    for t in aborted {
        let _ = t.await;
    }
    let until = Instant::now() + Duration::from_secs(5);
    while permits.in_flight() != 0 && Instant::now() < until {
        tokio::task::yield_now().await;
    }
    assert_eq!((permits.in_flight(), permits.waiters()), (0, 0));
    // The waiting bit clear: `available` is 0 while it is set.
    assert_eq!(permits.available(), permits.limit());
    assert_eq!(permits.acquire(2).await.unwrap().n(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn a_select_that_loses_gives_the_grant_back() {
    let permits = Permits::new(1).unwrap();
    let held = permits.try_acquire(1).unwrap();
    // `Acquire` is `Unpin`: polled through `&mut`, dropped by `drop`.
    let mut wait = permits.acquire(1);
    // First poll: queued.
    tokio::select! {
        biased;
        _ = &mut wait => panic!("granted while held"),
        _ = tokio::task::yield_now() => {}
    }
    drop(held); // grants the queued future, which is then dropped without being polled
    drop(wait);
    assert_eq!(
        permits.in_flight(),
        0,
        "the uncollected grant was given back"
    );
    assert!(permits.try_acquire(1).is_ok());
}

#[test]
fn an_adaptive_limit_learns_from_outcomes_on_its_clock() {
    use limitcore::clock::ManualClock;
    use limitcore::concurrency::{Aimd, Completion};

    let clock = ManualClock::new();
    let rule = Aimd::new()
        .with_limits(1, 10)
        .unwrap()
        .with_initial(4)
        .unwrap();
    let permits = Permits::adaptive_with_clock(rule, clock.clone()).unwrap();
    let held: Vec<_> = (0..4).map(|_| permits.try_acquire(1).unwrap()).collect();
    clock.advance(Duration::from_millis(40));
    assert_eq!(held[0].elapsed(), Duration::from_millis(40));
    // An ignored outcome teaches nothing; a drop cuts ⌊4 · 0.9⌋ = 3 while 3 are still held.
    let mut held = held.into_iter();
    held.next().unwrap().ignore();
    assert_eq!(permits.limit(), 4);
    held.next().unwrap().dropped();
    assert_eq!((permits.limit(), permits.in_flight()), (3, 2));
    // A success measured on the clock past AIMD's 5 s timeout counts as a drop: 3 → 2.
    clock.advance(Duration::from_secs(6));
    held.next().unwrap().success();
    assert_eq!(permits.limit(), 2);
    // A latency the caller measured: a plain success, granted at 3 in flight (≥ 2 / 2): + 1.
    held.next()
        .unwrap()
        .complete(Completion::SuccessAfter(Duration::from_millis(5)));
    assert_eq!((permits.limit(), permits.in_flight()), (3, 0));
    assert_eq!(permits.feedback().state(), 3);
}

#[test]
fn the_types_move_between_threads() {
    use limitcore::concurrency::{
        Acquire, AcquireOwned, Adaptive, Aimd, EnvoyGradient, OwnedPermit, Partitioned, Permit,
        Vegas,
    };
    fn send_sync<T: Send + Sync>() {}
    fn send_static<T: Send + 'static>() {}
    send_sync::<Permits>();
    send_sync::<Permits<Adaptive<Aimd>>>();
    send_sync::<Permits<Adaptive<Vegas>>>();
    send_sync::<Permits<Adaptive<EnvoyGradient>>>();
    send_sync::<Partitioned>();
    // What a response body holds, and the futures a task awaits.
    send_static::<OwnedPermit>();
    send_static::<OwnedPermit<Adaptive<Aimd>>>();
    send_static::<AcquireOwned<Adaptive<Aimd>>>();
    send_sync::<Permit<&'static Permits>>();
    send_sync::<Acquire<'static>>();
}
