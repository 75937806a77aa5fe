//! Budgets in the peers' own scenarios (described and re-derived, not copied), and under
//! real threads.

use limitcore::clock::{Clock, ManualClock};
use limitcore::{Budget, BudgetConfig, BudgetRule, Denied, Keyed, Mode, Quota, RateLimiter};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// How long an outcome that is already due may take to arrive: generous, for a loaded
/// machine (it takes microseconds).
const PROMPT: Duration = Duration::from_secs(10);

/// Wait (real time, at most [`PROMPT`]) until `cond` holds.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < PROMPT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn config(quota: &str, debt: Duration) -> BudgetConfig {
    BudgetConfig::new(quota.parse().unwrap()).max_debt(debt)
}

/// CockroachDB's `quotapool.TokenBucket`: a request larger than the bucket waits until the
/// bucket is full, then goes and leaves it in debt; the next request waits out the debt.
#[test]
fn cockroach_large_request_goes_into_debt() {
    // 10 tokens a second, 10 at most, 20 s of debt.
    let b = Budget::with_config(
        &config("10/s burst 10", Duration::from_secs(20)),
        ManualClock::new(),
    )
    .unwrap();
    b.try_acquire_n_at(4, 0).unwrap();
    // 150 tokens: not full yet (0.4 s to go), so it waits exactly that.
    let wait = b
        .try_acquire_n_at(150, 0)
        .unwrap_err()
        .retry_after()
        .unwrap();
    assert_eq!(wait, Duration::from_millis(400));
    b.try_acquire_n_at(150, 400_000_000).unwrap();
    // −140 tokens: one more token waits 14.1 s.
    let wait = b
        .try_acquire_n_at(1, 400_000_000)
        .unwrap_err()
        .retry_after()
        .unwrap();
    assert_eq!(wait, Duration::from_millis(14_100));
}

/// RocksDB's `LimitChangeTest`: a request of one full refill is pending when the rate
/// doubles, or halves; it still completes, at the new rate's time.
///
/// On a manual clock: the waiter sleeps until the clock moves, so the change comes at 20 ms
/// exactly, however slowly the threads run, and the waiter's return is read on the same
/// clock (on the real clock a change delayed by a loaded machine came after the waiter had
/// finished at the old rate).
#[test]
fn rocksdb_limit_change_completes_the_pending_request() {
    let ms = |m: u64| m * 1_000_000;
    for factor in [2u32, 0] {
        // 200 permits a second, 20 at most: the pending request needs 100 ms.
        let clock = ManualClock::new();
        let b = Arc::new(
            Budget::with_config(&config("200/s burst 20", Duration::ZERO), clock.clone()).unwrap(),
        );
        b.try_acquire_n(20).unwrap();
        let waiter = {
            let (b, clock) = (Arc::clone(&b), clock.clone());
            std::thread::spawn(move || {
                b.acquire_blocking(20).unwrap();
                clock.now()
            })
        };
        until("the waiter to take its place", || b.waiting() == 1);
        clock.set_nanos(ms(20));
        let rate = if factor == 2 {
            "400/s burst 20"
        } else {
            "100/s burst 20"
        };
        b.reconfigure(&b.config().quota(rate.parse().unwrap()))
            .unwrap();
        // At 200/s it would take 100 ms; the 16 permits left after 20 ms go at the new rate.
        let expected = if factor == 2 {
            ms(20 + 40)
        } else {
            ms(20 + 160)
        };
        // One nanosecond before, it still waits. The waiter is given 20 ms to look at the
        // clock again; a slower machine can only hide an early admission from this check,
        // and then the time the waiter returns with shows it.
        clock.set_nanos(expected - 1);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(b.waiting(), 1, "{rate}: admitted before {expected} ns");
        clock.set_nanos(expected);
        assert_eq!(waiter.join().unwrap(), expected, "{rate}");
    }
}

/// RocksDB's `AvailableByteSizeExhaustTest`: a partial grant takes exactly what is there.
#[test]
fn rocksdb_partial_consumption_takes_what_is_available() {
    let b = Budget::with_config(
        &config("1MiB/s burst 1MiB", Duration::ZERO),
        ManualClock::new(),
    )
    .unwrap();
    assert_eq!(b.take_up_to_at(700 << 10, 0), 700 << 10);
    assert_eq!(b.take_up_to_at(700 << 10, 0), 324 << 10); // the rest of the MiB
    assert_eq!(b.take_up_to_at(1, 0), 0);
    // 1/4 s later, a quarter of a MiB.
    assert_eq!(b.take_up_to_at(1 << 20, 250_000_000), 256 << 10);
}

/// RocksDB's runtime burst change (`SetSingleBurstBytes`): a larger burst admits larger
/// requests at once; the state is kept.
#[test]
fn rocksdb_runtime_burst_change() {
    let b = Budget::with_config(
        &config("1000/s burst 10", Duration::ZERO),
        ManualClock::new(),
    )
    .unwrap();
    assert_eq!(
        b.try_acquire_n_at(50, 0),
        Err(Denied::ExceedsCapacity { capacity: 10 })
    );
    b.reconfigure_at(&b.config().quota("1000/s burst 100".parse().unwrap()), 0)
        .unwrap();
    // Full at once: the ceiling moved, nothing was charged.
    assert_eq!(b.try_acquire_n_at(50, 0), Ok(()));
    assert_eq!(b.snapshot_at(0).remaining, 50);
}

/// TiKV's quota limiter switched off and on (a limit of 0 means unlimited there).
#[test]
fn tikv_toggle_off_and_on() {
    let b =
        Budget::with_config(&config("10/s burst 1", Duration::ZERO), ManualClock::new()).unwrap();
    b.try_acquire_n_at(1, 0).unwrap();
    b.set_mode(Mode::Disabled).unwrap();
    assert!((0..1_000).all(|_| b.try_acquire_n_at(1, 0).is_ok()));
    b.set_mode(Mode::Enabled).unwrap();
    // Resumes from the state it had: one permit owed until 100 ms.
    assert_eq!(
        b.try_acquire_n_at(1, 50_000_000),
        Err(Denied::RateLimited {
            retry_after: Duration::from_millis(50)
        })
    );
}

/// RisingWave's `Pause`: waiters park until the policy changes, then decide again.
///
/// On a frozen manual clock nothing but the change of mode can wake the waiters (no time
/// passes for them), so their prompt return shows that the change woke them; a lost
/// wake-up leaves them asleep for good, and the 10 s bound (for a wake-up that takes
/// microseconds) fails it whatever the machine's load.
#[test]
fn risingwave_pause_parks_waiters_until_resumed() {
    let clock = ManualClock::new();
    let b =
        Arc::new(Budget::with_clock("1000/s burst 10".parse().unwrap(), clock.clone()).unwrap());
    b.set_mode(Mode::Paused).unwrap();
    let (done_tx, done) = mpsc::channel();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (b, done_tx) = (Arc::clone(&b), done_tx.clone());
            std::thread::spawn(move || {
                b.acquire_blocking(1).unwrap();
                done_tx.send(()).unwrap();
            })
        })
        .collect();
    until("the three waiters to queue", || b.waiting() == 3);
    assert_eq!(
        done.try_recv(),
        Err(TryRecvError::Empty),
        "admitted while paused"
    );
    b.set_mode(Mode::Enabled).unwrap();
    for i in 0..3 {
        done.recv_timeout(PROMPT)
            .unwrap_or_else(|e| panic!("waiter {i} not woken by the resume: {e}"));
    }
    waiters.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(b.waiting(), 0);
    // A waiter with a deadline gives up while still paused (its deadline is on the
    // budget's clock: 20 ms of it).
    b.set_mode(Mode::Paused).unwrap();
    let deadline = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || b.acquire_blocking_within(1, Duration::from_millis(20)))
    };
    until("the waiter with a deadline to queue", || b.waiting() == 1);
    clock.advance(Duration::from_millis(20));
    assert_eq!(deadline.join().unwrap(), Err(Denied::Paused));
}

/// async-speed-limit's speed change: what was consumed stays consumed, re-timed at the
/// new speed.
#[test]
fn speed_change_keeps_what_was_consumed() {
    let b = Budget::with_config(
        &config("1MiB/s burst 64KiB", Duration::from_secs(4)),
        ManualClock::new(),
    )
    .unwrap();
    let charged = b.charge_at(2 << 20, 0); // 2 MiB consumed after the fact
    assert_eq!(charged.shortfall, 0);
    // 2 MiB − 64 KiB + 1 byte to go at 1 MiB/s.
    assert_eq!(charged.wait, Duration::from_nanos(1_937_500_954));
    b.reconfigure_at(&b.config().quota("2MiB/s burst 64KiB".parse().unwrap()), 0)
        .unwrap();
    assert_eq!(b.snapshot_at(0).full_after, Duration::from_secs(1));
}

/// First come, first served: a large waiter is not overtaken by small ones that come later.
///
/// On a manual clock, so that the order is read from the budget's own state rather than
/// from which thread got to record its return first: at the time the large waiter goes
/// the small ones must all still wait (their places come after its own).
#[test]
fn a_large_waiter_is_not_overtaken() {
    let clock = ManualClock::new();
    let b = Arc::new(
        Budget::with_config(
            &config("1000/s burst 10", Duration::from_millis(200)),
            clock.clone(),
        )
        .unwrap(),
    );
    b.try_acquire_n(10).unwrap();
    // The large request goes once the budget is full again (10 ms), into debt.
    let full = b.snapshot().full_after;
    let large = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || b.acquire_blocking(100))
    };
    // Once the large waiter has taken its place, the small ones come.
    until("the large waiter to queue", || b.waiting() == 1);
    let small: Vec<_> = (0..5)
        .map(|_| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || b.acquire_blocking(1))
        })
        .collect();
    until("the small waiters to queue", || b.waiting() == 6);
    // A small one needs 1 ms of refill: had it overtaken, it would have gone by now, and
    // the large one would still wait for a full budget.
    clock.advance(full);
    assert!(large.join().unwrap().is_ok());
    assert_eq!(b.waiting(), 5, "a small waiter went before the large one");
    // The small ones go after the large one's debt: 90 ms, then 1 ms each.
    clock.advance(Duration::from_secs(1));
    for s in small {
        assert!(s.join().unwrap().is_ok());
    }
}

/// Threads deciding on one busy key while its configuration is changed — to the same
/// quota, so that the count of admissions is exact: no permit is created or lost by the
/// move into the key's own entry, nor by the default's conversions.
#[test]
fn reconfiguring_keys_under_real_threads_loses_and_creates_nothing() {
    for round in 0..20 {
        let q: Quota = "1/h burst 1000".parse().unwrap();
        let keyed: Arc<Keyed<u32, BudgetRule, ManualClock>> =
            Arc::new(Keyed::with_clock(q, ManualClock::new()).unwrap());
        let admitted = Arc::new(AtomicU32::new(0));
        let start = Arc::new(Barrier::new(4));
        let deciders: Vec<_> = (0..3)
            .map(|_| {
                let (k, a, s) = (
                    Arc::clone(&keyed),
                    Arc::clone(&admitted),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    s.wait();
                    let mut mine = 0;
                    while mine < 2_000 {
                        if k.try_acquire_n_at(&7, 1, 0).is_ok() {
                            a.fetch_add(1, Ordering::SeqCst);
                        }
                        mine += 1;
                    }
                })
            })
            .collect();
        start.wait();
        let same = BudgetConfig::new(q);
        if round % 2 == 0 {
            keyed.reconfigure_key_at(7, same, 0).unwrap();
            keyed.reconfigure_key_at(7, same, 0).unwrap();
        } else {
            keyed.reconfigure_at(&same, 0).unwrap();
            keyed.reconfigure_at(&same, 0).unwrap();
        }
        for d in deciders {
            d.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::SeqCst), 1_000, "round {round}");
        assert!(keyed.try_acquire_n_at(&7, 1, 0).is_err());
    }
}

/// Issue 30: one per-key verb keeps every setting of the rule. A budget key given a quota
/// alone keeps its debt and its mode, takes the quota at once (busy or not), and a later
/// whole configuration reaches the rule its decisions read. With the old `set_quota`, the
/// quota built a fresh rule (no debt, enabled) that a busy key's state never read, and the
/// next `reconfigure_key` published to that rule while the key went on deciding under the
/// old one: every assertion below failed.
#[test]
fn a_budget_key_given_a_quota_keeps_its_debt_and_mode_and_later_changes_reach_it() {
    let ms = |m: u64| m * 1_000_000;
    let keyed: Keyed<u32, BudgetRule, ManualClock> =
        Keyed::with_clock("10/s burst 10".parse().unwrap(), ManualClock::new()).unwrap();
    // Key 7: 1 s of debt of its own; 15 permits at once (5 of them debt): busy until 1.5 s.
    keyed
        .reconfigure_key_at(7, config("10/s burst 10", Duration::from_secs(1)), 0)
        .unwrap();
    keyed.try_acquire_n_at(&7, 15, 0).unwrap();
    // A quota alone, on the busy key: at once, the 15 permits it owes re-timed at 20/s.
    let faster: Quota = "20/s burst 10".parse().unwrap();
    keyed.reconfigure_key_at(7, faster, 0).unwrap();
    assert_eq!(
        keyed.snapshot_at(&7, 0).full_after,
        Duration::from_millis(750),
        "the quota applies at once to the busy key"
    );
    // Its debt is kept: once full (750 ms), 15 permits above the burst of 10 go again.
    assert_eq!(keyed.try_acquire_n_at(&7, 15, ms(750)), Ok(()), "debt kept");
    // Key 8: paused on a configuration of its own; a quota alone keeps it paused.
    keyed
        .reconfigure_key_at(
            8,
            config("10/s burst 10", Duration::ZERO).mode(Mode::Paused),
            0,
        )
        .unwrap();
    keyed.reconfigure_key_at(8, faster, 0).unwrap();
    assert_eq!(
        keyed.try_acquire_n_at(&8, 1, 0),
        Err(Denied::Paused),
        "mode kept"
    );
    // A whole configuration on busy key 7 (15 permits owed at 20/s: busy until 1.5 s)
    // reaches its decisions at once: 15 permits at 1000/s owe 15 ms.
    keyed
        .reconfigure_key_at(7, config("1000/s burst 10", Duration::ZERO), ms(750))
        .unwrap();
    assert_eq!(
        keyed.snapshot_at(&7, ms(750)).full_after,
        Duration::from_millis(15),
        "a later reconfiguration reaches the rule the key's decisions read"
    );
    assert_eq!(keyed.try_acquire_n_at(&7, 10, ms(765)), Ok(()));
    // Every other key still decides by the default.
    assert_eq!(keyed.snapshot_at(&9, 0).remaining, 10);
    assert!(keyed.try_acquire_n_at(&9, 11, 0).is_err());
}
