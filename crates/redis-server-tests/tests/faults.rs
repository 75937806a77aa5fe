//! Faults on a real server: frozen (SIGSTOP), killed (SIGKILL) and restarted mid-run, and
//! a loopback proxy that adds latency and drops connections. No panic, every call decided
//! within its deadline, the policy applied during the outage, the bound holding again
//! after recovery, nothing beyond the stated bound admitted.

use redis_server_tests as common;

use common::proxy::Proxy;
use limitcore::{KeyedRateLimiter, Quota};
use limitcore_redis::{
    LeaseConfig, LeasedLimiter, Policy, RedisAll, RedisConfig, RedisGcra, Source,
};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_millis(50);
/// Scheduling slack on a loaded 2-core machine, on top of the deadline.
const SLACK: Duration = Duration::from_millis(150);

fn config() -> RedisConfig {
    RedisConfig::default()
        .deadline(DEADLINE)
        .breaker(2, Duration::from_millis(100))
        .heartbeat(Duration::from_millis(100))
}

#[derive(Debug, Clone, Copy)]
struct Call {
    at_us: u64,
    source: Source,
    admitted: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_mode_survives_sigstop_sigkill_and_restart() {
    let mut server = common::server();
    let redis = common::connect_with(&server.url(), config()).await;
    let q: Quota = "200/s burst 20".parse().unwrap();
    let limit = RedisGcra::new(redis.clone(), q, Policy::FailLocal).unwrap();
    let start = Instant::now();
    let mut calls = Vec::new();
    let (mut stopped, mut killed, mut restarted) = (false, false, false);
    while start.elapsed() < Duration::from_millis(3_000) {
        let t = start.elapsed();
        if !stopped && t > Duration::from_millis(600) {
            server.pause().unwrap();
            stopped = true;
        }
        if !killed && t > Duration::from_millis(1_200) {
            server.kill();
            killed = true;
        }
        if !restarted && t > Duration::from_millis(1_500) {
            server.restart().unwrap();
            restarted = true;
        }
        let began = Instant::now();
        let v = limit.decide("k", 1).await;
        let took = began.elapsed();
        assert!(took <= DEADLINE + SLACK, "a call took {took:?}");
        let at_us = match v.source {
            Source::Redis { server_time_us } => server_time_us,
            _ => common::wall_us(),
        };
        calls.push(Call {
            at_us,
            source: v.source,
            admitted: v.is_admitted(),
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let fallback: Vec<&Call> = calls
        .iter()
        .filter(|c| {
            c.source
                == Source::Fallback {
                    policy: Policy::FailLocal,
                }
        })
        .collect();
    assert!(
        fallback.len() > 50,
        "the policy decided during the outage: {}",
        fallback.len()
    );
    // Recovery: Redis decides again after the restart (scripts reloaded on NOSCRIPT).
    let last = calls.last().unwrap();
    assert!(
        matches!(last.source, Source::Redis { .. }),
        "recovered: {last:?}"
    );
    // One node announced: the local limit is the whole quota, so its GCRA bound.
    let bound = common::gcra_bound(20, 5_000, 1_000_000);
    let mut local: Vec<u64> = fallback
        .iter()
        .filter(|c| c.admitted)
        .map(|c| c.at_us)
        .collect();
    assert!(common::max_in_window(&mut local, 1_000_000).0 as u64 <= bound);
    // After recovery, Redis's admissions keep the GCRA bound again.
    let mut exact: Vec<u64> = calls
        .iter()
        .filter(|c| c.admitted && matches!(c.source, Source::Redis { .. }))
        .map(|c| c.at_us)
        .collect();
    assert!(common::max_in_window(&mut exact, 1_000_000).0 as u64 <= bound);
}

#[tokio::test]
async fn open_breaker_costs_no_latency_and_applies_each_policy() {
    let mut server = common::server();
    let redis = common::connect_with(&server.url(), config()).await;
    let q: Quota = "10/s burst 2".parse().unwrap();
    let open = RedisGcra::new(redis.clone(), q, Policy::FailOpen).unwrap();
    let closed = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
    let local = RedisGcra::new(redis.clone(), q, Policy::FailLocal).unwrap();
    assert!(closed.decide("k", 1).await.is_admitted());
    server.kill();
    // The first failures pay the deadline at most; then the breaker is open.
    for _ in 0..3 {
        let began = Instant::now();
        let _ = closed.decide("k", 1).await;
        assert!(began.elapsed() <= DEADLINE + SLACK);
    }
    assert!(redis.is_open());
    let began = Instant::now();
    for _ in 0..100 {
        let v = open.decide("k", 1).await;
        assert!(v.is_admitted());
        assert_eq!(
            v.source,
            Source::Fallback {
                policy: Policy::FailOpen
            }
        );
        let v = closed.decide("k", 1).await;
        assert!(!v.is_admitted());
        assert_eq!(v.decision.retry_after(), Some(Duration::from_millis(100)));
    }
    assert!(
        began.elapsed() < Duration::from_millis(100),
        "fail fast: {:?}",
        began.elapsed()
    );
    // FailLocal: the rate divided by the nodes last seen (one): the burst, then refusals.
    let mut n = 0;
    for _ in 0..10 {
        if local.decide("k", 1).await.is_admitted() {
            n += 1;
        }
    }
    assert_eq!(n, 2, "the local GCRA's burst");
    // The server comes back: the background probe closes the breaker.
    server.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while redis.is_open() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!redis.is_open(), "reconnected in the background");
    assert!(matches!(
        closed.decide("k", 1).await.source,
        Source::Redis { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_dropped_connections_through_a_proxy() {
    let server = common::server();
    let proxy = Proxy::start(server.port()).await;
    let redis = common::connect_with(&proxy.url(), config()).await;
    let q: Quota = "500/s burst 20".parse().unwrap();
    let l = 8;
    let leased =
        LeasedLimiter::new(redis.clone(), q, LeaseConfig::new(l), Policy::FailClosed).unwrap();
    let exact = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
    assert!(leased.acquire("k", 1).await.is_admitted());

    // Phase 1: Redis slower than the deadline. Exact calls end at the deadline; the leased
    // node spends what it holds, then the policy (closed) refuses; decisions stay local.
    proxy.set_latency(Duration::from_millis(200));
    let slow_since = Instant::now();
    let mut outage_admitted = 0;
    let mut worst = Duration::ZERO;
    while slow_since.elapsed() < Duration::from_millis(800) {
        let began = Instant::now();
        let v = exact.decide("e", 1).await;
        assert!(began.elapsed() <= DEADLINE + SLACK, "{:?}", began.elapsed());
        if slow_since.elapsed() > Duration::from_millis(100) {
            assert!(matches!(v.source, Source::Fallback { .. }), "{v:?}");
        }
        for _ in 0..50 {
            let began = Instant::now();
            if leased.try_acquire("k").is_ok() {
                outage_admitted += 1;
            }
            worst = worst.max(began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(redis.is_open());
    // Nothing beyond the stated bound: fail closed admits only cells already leased (L),
    // plus at most the leases whose replies beat the deadline before it opened.
    assert!(
        outage_admitted <= l as usize,
        "{outage_admitted} admitted while Redis was slow"
    );
    assert!(
        worst < Duration::from_millis(20),
        "a leased decision waited {worst:?}"
    );

    // Phase 2: the connections drop and the latency goes: reconnection in the background.
    proxy.drop_connections();
    proxy.set_latency(Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(5);
    while redis.is_open() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!redis.is_open(), "recovered after the drop");
    // Phase 3: after recovery the bound holds again (one node: GCRA + L).
    let mut times = Vec::new();
    let since = Instant::now();
    while since.elapsed() < Duration::from_millis(1_200) {
        for _ in 0..50 {
            if leased.try_acquire("k").is_ok() {
                times.push(common::wall_us());
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(times.len() > 100, "admitting again: {}", times.len());
    let bound = common::gcra_bound(20, 2_000, 1_000_000) + u64::from(l);
    assert!(common::max_in_window(&mut times, 1_000_000).0 as u64 <= bound);
}

/// Several limits of one tenant during an outage (`FailLocal`): still all or nothing. A
/// refusal by the tight limit gives the loose limit its charge back, so refusals do not
/// drain the loose limit (measured by what it admits once the tight one has refilled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_holds_on_the_local_fallback() {
    let mut server = common::server();
    let redis = common::connect_with(&server.url(), config()).await;
    // Listed loose first, so that it is charged before the tight one refuses.
    let loose: Quota = "1/min burst 3".parse().unwrap();
    let tight: Quota = "60/min burst 1".parse().unwrap();
    let all = RedisAll::new(
        redis.clone(),
        &[("loose", loose), ("tight", tight)],
        Policy::FailLocal,
    )
    .unwrap();
    server.kill();
    for _ in 0..3 {
        let _ = all.decide("t", 1).await;
    }
    assert!(redis.is_open(), "the breaker is open: the fallback decides");
    let fallback = Source::Fallback {
        policy: Policy::FailLocal,
    };
    // Both admit once (loose: 2 left, tight: 0 left) — unless the calls above already did.
    let first = all.decide("t", 1).await.unwrap();
    assert_eq!(first.source, fallback);
    // The tight limit refuses these; the loose one keeps what it had.
    for _ in 0..10 {
        let v = all.decide("t", 1).await.unwrap();
        assert!(!v.is_admitted());
        assert_eq!(v.source, fallback);
    }
    // One second later the tight limit admits one again, and the loose one still can: had
    // the ten refusals kept their charges on it, it would be empty for a minute.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let after = all.decide("t", 1).await.unwrap();
    assert!(after.is_admitted(), "{after:?}");
    assert_eq!(after.source, fallback);
}
