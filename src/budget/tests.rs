//! Unit tests of the budget's arithmetic at explicit times.

use super::*;
use crate::clock::ManualClock;
use crate::limiter::{RateLimiter, Refund};
use crate::limiters::{Gcra, Reserve};

fn budget(quota: &str, debt_ms: u64) -> Budget<ManualClock> {
    let config = BudgetConfig::new(quota.parse().unwrap()).max_debt(Duration::from_millis(debt_ms));
    Budget::with_config(&config, ManualClock::new()).unwrap()
}

#[test]
fn whole_ns_budget_decides_as_gcra() {
    for quota in [
        "10/s burst 3",
        "1/min",
        "7/70ns burst 5",
        "1000000000/s burst 9",
    ] {
        let q: Quota = quota.parse().unwrap();
        let b = budget(quota, 0);
        let g = Gcra::with_clock(q, ManualClock::new()).unwrap();
        let t = q.emission_interval_ns();
        let mut now = 5 * t;
        for step in 0..200u64 {
            now += (step * 7919) % (3 * t + 1);
            let n = (step % 4) as u32 + 1;
            assert_eq!(
                b.try_acquire_n_at(n, now),
                g.try_acquire_n_at(n, now),
                "{quota} step {step} now {now}"
            );
            assert_eq!(b.snapshot_at(now), g.snapshot_at(now), "{quota} {step}");
        }
    }
}

#[test]
fn oversized_requests_run_into_debt_only_from_full() {
    // Neon's pageserver case: 100 tokens, 10 ms a token, a 200-token request.
    let b = budget("100/s burst 100", 1_000);
    assert_eq!(b.capacity(), 200);
    assert_eq!(b.try_acquire_n_at(200, 0), Ok(()));
    // Full again at 2 s: one more token waits until 1.01 s (one token under the burst).
    let wait = b.try_acquire_n_at(1, 0).unwrap_err().retry_after().unwrap();
    assert_eq!(wait, Duration::from_millis(1_010));
    assert!(b.try_acquire_n_at(1, 1_009_999_999).is_err());
    assert_eq!(b.try_acquire_n_at(1, 1_010_000_000), Ok(()));
    // An oversized request waits for a full budget: 2 s + 10 ms.
    let wait = b.try_acquire_n_at(150, 1_010_000_000).unwrap_err();
    assert_eq!(wait.retry_after(), Some(Duration::from_millis(1_000)));
    assert_eq!(b.try_acquire_n_at(150, 2_010_000_000), Ok(()));
    // Beyond burst + debt: never.
    assert_eq!(
        b.try_acquire_n_at(201, 10_000_000_000),
        Err(Denied::ExceedsCapacity { capacity: 200 })
    );
    // Without debt the burst is the capacity, as for GCRA.
    assert_eq!(
        budget("100/s burst 100", 0).try_acquire_n_at(101, 0),
        Err(Denied::ExceedsCapacity { capacity: 100 })
    );
}

#[test]
fn charges_are_never_refused_and_saturate_at_the_debt() {
    let b = budget("10/s burst 10", 500); // 100 ms a permit; 5 permits of debt
    let c = b.charge_at(12, 0);
    assert_eq!((c.charged, c.shortfall), (12, 0));
    assert_eq!(c.wait, Duration::from_millis(300)); // 12 − 10 + 1 permits
    let c = b.charge_at(10, 0);
    assert_eq!((c.charged, c.shortfall), (3, 7)); // 15 = burst + debt
    assert_eq!(c.wait, Duration::from_millis(600));
    // In debt (1.5 s of backlog on a 1 s burst), even a request for no permits waits until
    // the debt is paid back, and is admitted then; nothing was written.
    assert_eq!(
        b.acquire_refundable_at(0, 0),
        Err(Denied::rate_limited(500_000_000))
    );
    assert_eq!(
        b.try_acquire_n_at(0, 499_999_999),
        Err(Denied::rate_limited(1))
    );
    assert_eq!(b.try_acquire_n_at(0, 500_000_000), Ok(()));
    assert_eq!(b.snapshot_at(0).full_after, Duration::from_millis(1_500));
}

#[test]
fn partial_grants_are_exact() {
    let b = budget("64MiB/s burst 1MiB", 0);
    assert_eq!(b.take_up_to_at(3 << 20, 0), 1 << 20);
    assert_eq!(b.take_up_to_at(1, 0), 0);
    // 1 ms later: 64 MiB/s × 1 ms = 67 108.864 bytes; whole bytes only.
    assert_eq!(b.take_up_to_at(1 << 20, 1_000_000), 67_108);
    assert_eq!(b.take_up_to_at(1, 1_000_000), 0);
}

#[test]
fn byte_rates_are_exact_in_the_long_run() {
    // 64 GiB/s: a byte is 1/68.72 ns. Saturated with 1 MiB requests for 1 s of clock.
    let b = budget("64GiB/s burst 1MiB", 0);
    let mut now = 0u64;
    let mut bytes = 0u64;
    while now <= 1_000_000_000 {
        match b.try_acquire_n_at(1 << 20, now) {
            Ok(()) => bytes += 1 << 20,
            Err(d) => now += d.retry_after().unwrap().as_nanos() as u64,
        }
    }
    // At most rate × time + burst, and within 1 ppm of the rate's long-run total.
    let exact = 64u64 << 30;
    assert!(bytes <= exact + (1 << 20), "{bytes}");
    assert!(exact - bytes < exact / 1_000_000 + (1 << 20), "{bytes}");
}

#[test]
fn reconfiguration_keeps_the_backlog_in_permits() {
    let b = budget("10/s burst 10", 0);
    b.try_acquire_n_at(10, 0).unwrap(); // full again at 1 s
                                        // Twice as fast at 0.5 s: 5 permits still owed, now 50 ms each.
    b.reconfigure_at(
        &b.config().quota("20/s burst 10".parse().unwrap()),
        500_000_000,
    )
    .unwrap();
    assert_eq!(
        b.snapshot_at(500_000_000).full_after,
        Duration::from_millis(250)
    );
    // Half as fast: the same 5 permits take 500 ms at 10/s... from 0.5 s, 2.5 remain at
    // 0.625 s: 250 ms at 10/s.
    b.reconfigure_at(
        &b.config().quota("10/s burst 10".parse().unwrap()),
        625_000_000,
    )
    .unwrap();
    assert_eq!(
        b.snapshot_at(625_000_000).full_after,
        Duration::from_millis(250)
    );
    // A burst cut moves the ceiling, not the charge.
    b.reconfigure_at(
        &b.config().quota("10/s burst 2".parse().unwrap()),
        625_000_000,
    )
    .unwrap();
    assert_eq!(
        b.snapshot_at(625_000_000).full_after,
        Duration::from_millis(250)
    );
    assert_eq!(b.snapshot_at(875_000_000).remaining, 2);
    assert_eq!(
        b.try_acquire_n_at(3, 875_000_000),
        Err(Denied::ExceedsCapacity { capacity: 2 })
    );
}

#[test]
fn disabled_and_paused() {
    let b = budget("1/s burst 1", 0);
    b.try_acquire_n_at(1, 0).unwrap();
    b.reconfigure_at(&b.config().mode(Mode::Disabled), 0)
        .unwrap();
    for _ in 0..5 {
        assert_eq!(b.try_acquire_n_at(1_000, 0), Ok(()));
    }
    assert_eq!(b.charge_at(10, 0).charged, 0);
    b.reconfigure_at(&b.config().mode(Mode::Enabled), 0)
        .unwrap();
    // The state as it was: one permit owed until 1 s.
    assert_eq!(b.snapshot_at(0).full_after, Duration::from_secs(1));
    b.reconfigure_at(&b.config().mode(Mode::Paused), 0).unwrap();
    assert_eq!(b.try_acquire_n_at(1, 5_000_000_000), Err(Denied::Paused));
    assert_eq!(
        b.reserve_n_at(1, 5_000_000_000, Duration::MAX).unwrap_err(),
        Denied::Paused
    );
    b.reconfigure_at(&b.config().mode(Mode::Enabled), 5_000_000_000)
        .unwrap();
    assert_eq!(b.try_acquire_n_at(1, 5_000_000_000), Ok(()));
}

#[test]
fn many_reconfigurations_cycle_the_generations() {
    let b = budget("10/s burst 10", 0);
    let mut now = 0;
    for i in 0..40u32 {
        b.try_acquire_n_at(5, now).unwrap_or(());
        let quota = format!("{}/s burst 10", 10 + i % 3);
        b.reconfigure_at(&b.config().quota(quota.parse().unwrap()), now)
            .unwrap();
        now += 50_000_000;
    }
    assert!(b.snapshot_at(now).full_after <= Duration::from_secs(1));
}

/// The budget's `take` checks the size itself (`Rule::TAKE_CHECKS_CAPACITY`): every
/// decision that takes refuses `n` above the capacity in force with `ExceedsCapacity` and
/// consumes nothing, on a fresh word and a used one (the general and the fast read), in
/// every mode but `Disabled` (which admits anything, charging nothing), and after a change
/// of capacity.
#[test]
fn takes_refuse_above_the_capacity_in_force() {
    fn exceeds<T>(capacity: u32) -> Result<T, Denied> {
        Err(Denied::ExceedsCapacity { capacity })
    }
    for used in [false, true] {
        for mode in [Mode::Enabled, Mode::Paused, Mode::Disabled] {
            let b = budget("100/s burst 10", 0);
            if used {
                b.try_acquire_n_at(1, 0).unwrap();
            }
            b.set_mode(mode).unwrap();
            let before = b.snapshot_at(0);
            if mode == Mode::Disabled {
                assert_eq!(b.try_acquire_n_at(11, 0), Ok(()));
                assert_eq!(b.acquire_refundable_at(11, 0).map(|r| r.n()), Ok(0));
            } else {
                assert_eq!(
                    b.try_acquire_n_at(11, 0),
                    exceeds(10),
                    "{mode:?} used {used}"
                );
                assert_eq!(b.decide_n_at(11, 0).result, exceeds(10));
                assert_eq!(b.acquire_refundable_at(11, 0).map(|r| r.n()), exceeds(10));
            }
            assert_eq!(
                b.snapshot_at(0),
                before,
                "nothing consumed: {mode:?} used {used}"
            );
            assert_eq!(b.try_acquire_n_at(0, 0), Ok(()));
        }
    }
    // A smaller capacity is the one refused against, at once.
    let b = budget("100/s burst 10", 0);
    b.try_acquire_n_at(1, 0).unwrap();
    let config = BudgetConfig::new("100/s burst 4".parse().unwrap());
    b.reconfigure_at(&config, 0).unwrap();
    assert_eq!(b.try_acquire_n_at(5, 1_000_000_000), exceeds(4));
    assert_eq!(b.try_acquire_n_at(4, 1_000_000_000), Ok(()));
}

/// A wait dropped while queued turns the one-compare-and-swap path back on at once: the
/// queue's count, which a wait's first poll reads to skip the queue, returns to 0 with the
/// drop (a `Waiter` dropped by hand used to leave it at 1 for good), the place is refunded,
/// and the next wait is decided at its first poll (issue 38).
#[cfg(feature = "std")]
#[test]
fn a_dropped_wait_turns_the_one_cas_path_back_on() {
    use crate::notify::driver::{Nap, Wait};
    use crate::sync::Ordering;
    use alloc::sync::Arc;
    use core::task::{Context, Poll, Waker};

    /// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let noop = || Waker::from(Arc::new(Noop));

    let b = budget("10/s burst 1", 0);
    let queued = || b.rule().live.queued.load(Ordering::Relaxed);
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    b.try_acquire_n_at(1, 0).unwrap();
    let mut wait = b.acquire(1);
    assert!(wait.poll_wait(&mut cx, &mut Nap::default()).is_pending());
    assert_eq!(queued(), 1);
    drop(wait);
    assert_eq!(queued(), 0);
    assert_eq!(b.snapshot_at(0).full_after, Duration::from_millis(100));
    b.clock().advance(Duration::from_millis(100));
    // With the waiters' lock held here, only the one-CAS path can decide the next wait (the
    // queue's path would block on the lock): it must finish while the lock is held.
    let waiters = crate::sync::lock(&b.rule().live.waiters);
    let (done, decided) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let waker = noop();
            let mut cx = Context::from_waker(&waker);
            let polled = b.acquire(1).poll_wait(&mut cx, &mut Nap::default());
            done.send(matches!(polled, Poll::Ready(Ok(_)))).unwrap();
        });
        // A bound only for a broken path (the right one takes microseconds).
        let decided = decided.recv_timeout(Duration::from_secs(10));
        drop(waiters);
        assert_eq!(decided, Ok(true), "the next wait took the queue's path");
    });
    assert_eq!(queued(), 0);
}
