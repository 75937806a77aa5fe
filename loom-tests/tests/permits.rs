//! Loom models of the concurrency limits' permits (`limitcore::concurrency::Permits`;
//! README, model 13).
//!
//! Under `--cfg limitcore_loom` the permits' word is a loom `AtomicU64` (changed only by
//! `cas::apply`), their queue's lock is a loom `Mutex`, and a blocked waiter parks with loom's
//! `park`/`unpark`, so loom explores the grant, release, resize, enqueue, serve and cancel
//! protocol of the module's "No lost wake-up". A waiter that is never woken is a deadlock,
//! which loom reports: the no-lost-wake-up models need no assertion of their own for it.
//!
//! Preemption bound 3 (`loom_tests::PREEMPTION_BOUND`): every operation here is one CAS
//! loop on the word or one critical section (which loom switches at without a preemption
//! when it blocks), so 2–3 threads' windows are all covered, as for the rate limiters.
//!
//! Invariants checked in every execution:
//! - every grant was decided on the word it replaced: `in_flight_at_grant ≤ limit_at_grant`
//!   (in flight is above the limit only after a cut, never by a grant);
//! - a refusal of a request that does not wait saw the limit full (`in_flight ≥ limit`) or a
//!   waiter queued: no permit is lost;
//! - at the end, nothing is held, nobody waits, the waiting bit is clear, and the limit is
//!   the last one set.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test permits`.
#![cfg(limitcore_loom)]

use limitcore::concurrency::{AcquireError, Order, Permit, Permits, Release};
use loom_tests::{model, Outcomes};
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The grant's own word satisfied the rule.
fn check_grant<P>(permit: &Permit<P>)
where
    P: Deref,
    P::Target: Release,
{
    assert!(
        permit.in_flight_at_grant() <= permit.limit_at_grant(),
        "granted over the limit: {} of {}",
        permit.in_flight_at_grant(),
        permit.limit_at_grant()
    );
}

/// A refusal of `try_acquire(1)` saw the limit full.
fn check_refusal(e: AcquireError) {
    match e {
        AcquireError::Full { limit, in_flight } => {
            assert!(
                in_flight >= limit,
                "refused with {in_flight} of {limit} in flight"
            )
        }
        other => panic!("unexpected refusal {other:?}"),
    }
}

/// Nothing held, nobody waiting, the limit as expected.
fn check_quiet(permits: &Permits, limit: u32) {
    let snapshot = permits.snapshot();
    assert_eq!(snapshot.in_flight, 0, "{snapshot:?}");
    assert_eq!(snapshot.limit, limit, "{snapshot:?}");
    assert_eq!(snapshot.waiting, 0, "{snapshot:?}");
    // The waiting bit clear: `available` is 0 while it is set.
    assert_eq!(permits.available(), limit, "{snapshot:?}");
}

/// `try_acquire(1)`, checked, released at once; whether it was granted.
fn try_one(permits: &Permits) -> Result<(), AcquireError> {
    permits
        .try_acquire(1)
        .map(|p| check_grant(&p))
        .map_err(|e| {
            check_refusal(e);
            e
        })
}

/// A waker that does nothing: the models that poll by hand look again themselves.
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Poll `future` once.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Noop));
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

#[test]
fn three_threads_never_exceed_the_limit() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model("permits: 3 × try_acquire(1) on a limit of 2", move || {
        let permits = Arc::new(Permits::new(2).unwrap());
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let permits = permits.clone();
                loom::thread::spawn(move || try_one(&permits))
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        seen.record_pattern(results.iter().map(Result::is_ok).collect());
        check_quiet(&permits, 2);
    });
    // A refusal needs two permits held at that moment: at most one of three is refused.
    outcomes.assert_exactly(&["YYY", "YYN", "YNY", "NYY"]);
}

#[test]
fn resize_races_acquire_and_release() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "permits: reconfigure(1) vs release vs try_acquire(1)",
        move || {
            // Limit 2, one permit held by the main thread and released by a thread of its own.
            let permits = Arc::new(Permits::new(2).unwrap());
            let held = permits.try_acquire_owned(1).unwrap();
            let acquirer = {
                let permits = permits.clone();
                loom::thread::spawn(move || try_one(&permits))
            };
            let releaser = loom::thread::spawn(move || drop(held));
            let resizer = {
                let permits = permits.clone();
                loom::thread::spawn(move || permits.reconfigure(1).unwrap())
            };
            let result = acquirer.join().unwrap();
            releaser.join().unwrap();
            resizer.join().unwrap();
            seen.record_pattern(vec![result.is_ok()]);
            check_quiet(&permits, 1);
        },
    );
    // Refused only when the cut came first and the held permit was not back yet.
    outcomes.assert_exactly(&["Y", "N"]);
}

#[test]
fn a_cut_holds_until_permits_come_back() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "permits: 2 of 2 held, reconfigure(1) vs one release vs try_acquire(1)",
        move || {
            let permits = Arc::new(Permits::new(2).unwrap());
            let kept = permits.try_acquire_owned(1).unwrap();
            let returned = permits.try_acquire_owned(1).unwrap();
            let acquirer = {
                let permits = permits.clone();
                loom::thread::spawn(move || try_one(&permits))
            };
            let releaser = loom::thread::spawn(move || drop(returned));
            let resizer = {
                let permits = permits.clone();
                loom::thread::spawn(move || permits.reconfigure(1).unwrap())
            };
            let result = acquirer.join().unwrap();
            releaser.join().unwrap();
            resizer.join().unwrap();
            // With the cut made, one permit still held fills the new limit.
            assert!(permits.try_acquire(1).is_err());
            seen.record_pattern(vec![result.is_ok()]);
            drop(kept);
            check_quiet(&permits, 1);
        },
    );
    // Granted only if the release came before the cut (then 2 ≤ 2 when it was decided).
    outcomes.assert_exactly(&["Y", "N"]);
}

#[test]
fn a_release_wakes_a_blocked_waiter() {
    model(
        "permits: acquire_blocking(1) vs the release of the one permit",
        || {
            let permits = Arc::new(Permits::new(1).unwrap());
            let held = permits.try_acquire_owned(1).unwrap();
            let waiter = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let permit = permits.acquire_blocking(1).unwrap();
                    check_grant(&permit);
                })
            };
            let releaser = loom::thread::spawn(move || drop(held));
            waiter.join().unwrap();
            releaser.join().unwrap();
            check_quiet(&permits, 1);
        },
    );
}

#[test]
fn a_release_wakes_an_async_waiter() {
    model(
        "permits: acquire(1).await vs the release of the one permit",
        || {
            let permits = Arc::new(Permits::new(1).unwrap());
            let held = permits.try_acquire_owned(1).unwrap();
            let waiter = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let permit = loom::future::block_on(permits.acquire(1)).unwrap();
                    check_grant(&permit);
                })
            };
            let releaser = loom::thread::spawn(move || drop(held));
            waiter.join().unwrap();
            releaser.join().unwrap();
            check_quiet(&permits, 1);
        },
    );
}

#[test]
fn a_growth_wakes_a_blocked_waiter() {
    model("permits: acquire_blocking(1) vs reconfigure(2)", || {
        let permits = Arc::new(Permits::new(1).unwrap());
        let held = permits.try_acquire(1).unwrap();
        let waiter = {
            let permits = permits.clone();
            loom::thread::spawn(move || {
                let permit = permits.acquire_blocking(1).unwrap();
                check_grant(&permit);
                assert_eq!(permit.limit_at_grant(), 2);
            })
        };
        let resizer = {
            let permits = permits.clone();
            loom::thread::spawn(move || permits.reconfigure(2).unwrap())
        };
        waiter.join().unwrap();
        resizer.join().unwrap();
        drop(held);
        check_quiet(&permits, 2);
    });
}

#[test]
fn a_cut_refuses_a_waiter_asking_for_more() {
    model("permits: acquire_blocking(2) vs reconfigure(1)", || {
        let permits = Arc::new(Permits::new(2).unwrap());
        let held = permits.try_acquire(1).unwrap();
        let waiter = {
            let permits = permits.clone();
            loom::thread::spawn(move || permits.acquire_blocking(2).map(|p| p.n()))
        };
        let resizer = {
            let permits = permits.clone();
            loom::thread::spawn(move || permits.reconfigure(1).unwrap())
        };
        let refused = AcquireError::ExceedsLimit {
            requested: 2,
            limit: 1,
        };
        assert_eq!(waiter.join().unwrap(), Err(refused));
        resizer.join().unwrap();
        drop(held);
        check_quiet(&permits, 1);
    });
}

#[test]
fn a_cancelled_waiter_takes_nothing() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "permits: a polled acquire(1) dropped vs the release",
        move || {
            let permits = Arc::new(Permits::new(1).unwrap());
            let held = permits.try_acquire_owned(1).unwrap();
            let canceller = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let mut future = permits.acquire(1);
                    // Granted at once (the release came first), or queued and then dropped,
                    // whether or not the release granted it meanwhile.
                    let granted = matches!(poll_once(&mut future), Poll::Ready(Ok(_)));
                    drop(future);
                    granted
                })
            };
            let releaser = loom::thread::spawn(move || drop(held));
            let granted = canceller.join().unwrap();
            releaser.join().unwrap();
            seen.record_pattern(vec![granted]);
            check_quiet(&permits, 1);
            // Whatever happened, the permit is free again.
            assert!(permits.try_acquire(1).is_ok());
        },
    );
    outcomes.assert_exactly(&["Y", "N"]);
}

#[test]
fn a_cancellation_serves_the_waiter_behind() {
    model(
        "permits: a queued acquire(2) dropped vs acquire(1).await behind it",
        || {
            // Limit 2, one held: a request for 2 waits, and in FIFO order one for 1 waits behind
            // it although one permit is free; the first one's cancellation must serve it.
            let permits = Arc::new(Permits::new(2).unwrap());
            let held = permits.try_acquire(1).unwrap();
            let canceller = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let mut future = permits.acquire(2);
                    assert!(
                        poll_once(&mut future).is_pending(),
                        "2 never fit while 1 is held"
                    );
                    drop(future);
                })
            };
            let waiter = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let permit = loom::future::block_on(permits.acquire(1)).unwrap();
                    check_grant(&permit);
                })
            };
            canceller.join().unwrap();
            waiter.join().unwrap();
            drop(held);
            check_quiet(&permits, 2);
        },
    );
}

#[test]
fn a_serve_grants_only_what_fits() {
    model(
        "permits: acquire_blocking(2) vs the release of one of two held",
        || {
            // Limit 2, both held: a request for 2 waits; the first release makes one free, which
            // is not enough (the serve it triggers must leave the waiter queued); the second,
            // made by the main thread after the first, grants it.
            let permits = Arc::new(Permits::new(2).unwrap());
            let first = permits.try_acquire_owned(1).unwrap();
            let second = permits.try_acquire_owned(1).unwrap();
            let waiter = {
                let permits = permits.clone();
                loom::thread::spawn(move || {
                    let permit = permits.acquire_blocking(2).unwrap();
                    check_grant(&permit);
                    assert_eq!(permit.in_flight_at_grant(), 2);
                })
            };
            let releaser = loom::thread::spawn(move || drop(first));
            releaser.join().unwrap();
            drop(second);
            waiter.join().unwrap();
            check_quiet(&permits, 2);
        },
    );
}

#[test]
fn lifo_serves_the_newest_waiter() {
    model(
        "permits, LIFO: two queued acquire(1) vs the release of the one permit",
        || {
            // The release waits until both requests are queued (a flag), then races the
            // waiter's polls; the serve must pick the newer one, and the older stays queued
            // until it is cancelled.
            let permits = Arc::new(Permits::new(1).unwrap().with_order(Order::Lifo));
            let held = permits.try_acquire_owned(1).unwrap();
            let queued = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let waiter = {
                let (permits, queued) = (permits.clone(), queued.clone());
                loom::thread::spawn(move || {
                    let mut older = permits.acquire_owned(1);
                    let mut newer = permits.acquire_owned(1);
                    assert!(poll_once(&mut older).is_pending());
                    assert!(poll_once(&mut newer).is_pending());
                    // Release: the flag's partner is the releaser's Acquire load.
                    queued.store(true, loom::sync::atomic::Ordering::Release);
                    loop {
                        if let Poll::Ready(permit) = poll_once(&mut newer) {
                            check_grant(&permit.unwrap());
                            break;
                        }
                        assert!(poll_once(&mut older).is_pending(), "LIFO served the older");
                        loom::thread::yield_now();
                    }
                })
            };
            let releaser = loom::thread::spawn(move || {
                while !queued.load(loom::sync::atomic::Ordering::Acquire) {
                    loom::thread::yield_now();
                }
                drop(held)
            });
            waiter.join().unwrap();
            releaser.join().unwrap();
            check_quiet(&permits, 1);
        },
    );
}
