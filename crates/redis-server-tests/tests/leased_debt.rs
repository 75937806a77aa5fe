//! The leased limiter's debt policy and forced charges on one node, on a real server: a
//! charge spends the held cells first (no command) and charges the rest on Redis (one
//! command), then blocks the key locally until Redis's wait; a request above the largest
//! lease is decided on Redis by the exact script; the synchronous calls keep `L` as their
//! capacity.

use redis_server_tests as common;

use limitcore::{Denied, KeyedRateLimiter, Quota, RateLimiter};
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, RedisGcra, Source};
use std::time::{Duration, Instant};

/// Wait until the handle's key holds at least `cells` cells (the refill has landed), for at
/// most 10 s (a round trip, on a loaded machine); the cells held then.
async fn held_at_least(key: &limitcore_redis::LeasedKey, cells: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let held = key.snapshot().remaining;
        if held >= cells || Instant::now() > deadline {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_charge_spends_held_cells_first_then_charges_redis_and_blocks_until_its_wait() {
    let server = common::server();
    // Heartbeats an hour apart: the commands counted below are the calls' alone.
    let redis = common::connect_counted(&server).await;
    // T = 10 ms, burst 10, 100 ms of debt; leases of at most 4 cells.
    let q: Quota = "100/s burst 10".parse().unwrap();
    let config = LeaseConfig::new(4)
        .max_debt(Duration::from_millis(100))
        .ttl(Duration::from_secs(5));
    let limiter = LeasedLimiter::new(redis.clone(), q, config, Policy::FailClosed).unwrap();
    assert_eq!(limiter.max_debt(), Duration::from_millis(100));
    // The GCRA script loaded once (a first call is EVALSHA, NOSCRIPT, EVAL): the leases use
    // the fair lease script, so the charge below is the first call of the GCRA script.
    assert!(common::admits(&common::gcra(&redis, "100/s burst 10"), "warm", 1).await);
    let key = limiter.key("k");
    assert!(key.acquire(1).await.is_admitted());
    let held = held_at_least(&key, 2).await;
    assert!(held >= 1, "a lease arrived: {held}");

    // Covered by the held cells: no command, all from the lease (the refill it starts is
    // spawned, and a current-thread runtime runs it only at the next await).
    let before = redis.commands();
    let c = key.charge(held).await;
    assert_eq!(
        redis.commands(),
        before,
        "a charge the cells cover sends nothing"
    );
    assert_eq!(c.source, Source::Lease);
    assert_eq!(
        (c.from_lease, c.charged.charged, c.charged.shortfall),
        (held, held, 0)
    );
    assert_eq!(key.snapshot().remaining, 0);

    // Beyond the held cells: the rest is one script call, into debt, the rest short.
    let held = held_at_least(&key, 1).await;
    let before = redis.commands();
    let sent = Instant::now();
    let c = key.charge(held + 25).await;
    let arrived = Instant::now();
    assert_eq!(redis.commands() - before, 1, "one script call for the rest");
    let Source::Redis { .. } = c.source else {
        panic!("Redis charged the rest: {c:?}");
    };
    assert_eq!(c.from_lease, held);
    assert_eq!(c.charged.charged + c.charged.shortfall, held + 25);
    assert!(c.charged.shortfall > 0, "past burst + debt: {c:?}");
    let wait = c.charged.wait;
    // At most burst + debt of backlog: one permit waits at most the debt plus T.
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(110),
        "{wait:?}"
    );

    // Blocked locally until Redis's wait has passed: refused with what is left of it,
    // nothing sent meanwhile. The block began when the reply arrived, after `sent`; a call
    // that returns within `wait` of `sent` was decided in it. A loaded machine may hold the
    // test past that before the 200 calls are made: the rest are not the block's.
    let before = redis.commands();
    let mut blocked = 0;
    for _ in 0..200 {
        let d = limiter.try_acquire("k");
        if sent.elapsed() >= wait {
            break;
        }
        let left = d.unwrap_err().retry_after().expect("a local block");
        assert!(
            left <= wait + Duration::from_millis(1),
            "{left:?} > {wait:?}"
        );
        blocked += 1;
    }
    assert!(redis.commands() - before <= 1, "{blocked} blocked calls");
    // Never early: at the block's end Redis itself admits one permit.
    tokio::time::sleep_until((arrived + wait).into()).await;
    let exact = RedisGcra::new(redis, q, Policy::FailClosed)
        .unwrap()
        .with_max_debt(Duration::from_millis(100))
        .unwrap();
    let charge_zero = exact.try_charge("k", 0).await.unwrap();
    assert_eq!(charge_zero.charged.charged, 0);
    assert!(common::admits(&exact, "k", 1).await);
}

#[tokio::test]
async fn a_request_above_the_lease_is_decided_on_redis_and_the_sync_calls_keep_l() {
    let server = common::server();
    // Heartbeats an hour apart: the commands counted below are the calls' alone.
    let redis = common::connect_counted(&server).await;
    let q: Quota = "100/s burst 10".parse().unwrap();
    let config = LeaseConfig::new(4).max_debt(Duration::from_millis(100));
    let limiter = LeasedLimiter::new(redis.clone(), q, config, Policy::FailClosed).unwrap();
    // Capacity ⌊(100 + 100) / 10⌋ = 20 through `acquire`; `L` = 4 through the sync calls.
    assert_eq!((limiter.capacity(), limiter.max_lease()), (20, 4));

    // The script loaded once (a first call is EVALSHA, NOSCRIPT, EVAL).
    assert!(common::admits(&common::gcra(&redis, "100/s burst 10"), "warm", 1).await);
    // A full key admits 15 at once, one script call, into debt.
    let before = redis.commands();
    let asked = Instant::now();
    let v = limiter.acquire("big", 15).await;
    assert!(v.is_admitted(), "{v:?}");
    assert!(matches!(v.source, Source::Redis { .. }), "{v:?}");
    assert_eq!(redis.commands() - before, 1);
    assert_eq!(v.decision.state.full_after, Duration::from_millis(150));
    // Not full any more: refused with Redis's exact wait until it is, 150 ms less the time
    // between the two decisions (at most what the test measured). Only a loaded machine
    // that held the test for the whole 150 ms finds the key full again, and admitted.
    let v = limiter.acquire("big", 15).await;
    let since = asked.elapsed();
    assert!(matches!(v.source, Source::Redis { .. }));
    match v.decision.retry_after() {
        Some(wait) => assert!(
            wait + since >= Duration::from_millis(150) && wait <= Duration::from_millis(150),
            "{wait:?}, {since:?} after the first"
        ),
        None => assert!(
            since >= Duration::from_millis(150),
            "admitted {since:?} after the first: {v:?}"
        ),
    }
    // Until the key is full again.
    let wait = v.decision.state.full_after;
    // The synchronous calls never wait for Redis: above L they refuse, as before.
    assert_eq!(
        limiter.try_acquire_n("big", 15),
        Err(Denied::ExceedsCapacity { capacity: 4 })
    );
    // Above the capacity: refused here, no command.
    let before = redis.commands();
    let v = limiter.acquire("big", 21).await;
    assert_eq!(
        v.decision.result,
        Err(Denied::ExceedsCapacity { capacity: 20 })
    );
    assert_eq!(v.source, Source::Lease);
    assert_eq!(redis.commands(), before);
    // After the wait, a handle's acquire takes the same route.
    tokio::time::sleep(wait).await;
    let handle = limiter.key("big");
    assert_eq!(handle.capacity(), 4);
    let v = handle.acquire(15).await;
    assert!(v.is_admitted(), "{v:?}");

    // Without debt, a request between L and the burst is Redis's too; above the burst it
    // is refused with the burst as the capacity.
    let plain = LeasedLimiter::new(redis, q, LeaseConfig::new(4), Policy::FailClosed).unwrap();
    assert_eq!(plain.capacity(), 10);
    let v = plain.acquire("plain", 8).await;
    assert!(
        v.is_admitted() && matches!(v.source, Source::Redis { .. }),
        "{v:?}"
    );
    assert_eq!(
        plain.acquire("plain", 11).await.decision.result,
        Err(Denied::ExceedsCapacity { capacity: 10 })
    );
}
