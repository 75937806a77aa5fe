//! Costs known after the work on a real redis-server (issue 37), the two patterns side by
//! side:
//!
//! - **1,000 concurrent requests**, each estimated at 100 tokens and using a uniform 0–100
//!   (seeded), on a limit of 10,000 tokens a minute (`RedisGcra`, exact), all in flight at
//!   one instant of Redis's clock (explicit times: the verdict does not depend on the
//!   machine's speed or the interleaving). Reserve-then-settle admits at most 10,000 tokens,
//!   exactly what Redis's TAT holds; check-then-report (a check of no cost, then the usage
//!   recorded) admits every request, and its overshoot is measured and printed.
//! - **The Envoy Gateway pattern** on Redis (the GCRA and the sliding log): a check of no
//!   permits passes, a charge of 900 passes, a charge of 200 takes the key past 1,000, and
//!   the next check of no permits is refused, with the exact wait, until it is paid back.

use redis_server_tests as common;

use limitcore::Denied;
use limitcore_redis::{Policy, RedisGcra, RedisMicros, RedisSlidingLog};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;

/// Around now, in µs since the epoch: the instant every request is decided at.
const T0: u64 = 1_750_000_000_000_000;

const REQUESTS: usize = 1_000;
const ESTIMATE: u32 = 100;
const LIMIT: u64 = 10_000;

/// Each request's actual cost: uniform in 0..=100, seeded.
fn actual_costs() -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(0x70c3);
    (0..REQUESTS).map(|_| rng.gen_range(0..=ESTIMATE)).collect()
}

/// Redis's stored TAT of `key`, µs.
async fn tat(limit: &RedisGcra, key: &str) -> u64 {
    let value = limit
        .redis()
        .command(redis::cmd("GET").arg(limit.redis_key(key)))
        .await
        .unwrap();
    match value {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        redis::Value::Nil => 0,
        other => panic!("a TAT: {other:?}"),
    }
}

/// Reserve-then-settle: in rounds, every request still waiting reserves its estimate
/// concurrently; the admitted ones run and settle to their actual cost concurrently; the
/// next round's requests see what the settles gave back. All at `T0`. Returns (requests
/// served, tokens they used).
async fn reserve_then_settle(limit: &Arc<RedisGcra>, costs: &[u32]) -> (usize, u64) {
    let at = RedisMicros::new(T0);
    let mut waiting: Vec<usize> = (0..costs.len()).collect();
    let (mut served, mut tokens) = (0, 0u64);
    loop {
        let mut reservations = tokio::task::JoinSet::new();
        for &i in &waiting {
            let limit = Arc::clone(limit);
            reservations.spawn(async move {
                (
                    i,
                    limit.try_reserve_at("reserve", ESTIMATE, at).await.unwrap(),
                )
            });
        }
        // Every reservation of the round is decided before any of its work ends: the
        // requests are all in flight at once.
        let mut admitted = Vec::new();
        let mut still = Vec::new();
        while let Some(r) = reservations.join_next().await {
            let (i, reservation) = r.unwrap();
            match reservation.receipt {
                Some(receipt) => admitted.push((i, receipt)),
                None => still.push(i),
            }
        }
        if admitted.is_empty() {
            break;
        }
        let mut settles = tokio::task::JoinSet::new();
        for (i, receipt) in admitted {
            let (limit, actual) = (Arc::clone(limit), costs[i]);
            settles.spawn(async move {
                let settled = limit
                    .try_settle_at("reserve", receipt, actual, at)
                    .await
                    .unwrap();
                assert_eq!(settled.charged.charged, 0, "actual ≤ the estimate");
                actual
            });
        }
        while let Some(actual) = settles.join_next().await {
            served += 1;
            tokens += u64::from(actual.unwrap());
        }
        waiting = still;
    }
    (served, tokens)
}

/// Check-then-report: every request checks with no cost (Envoy's `hits_addend: 0`)
/// concurrently, all are in flight (their work outlasts every check), then each records
/// its actual cost. All at `T0`. Returns (requests served, tokens they used).
async fn check_then_report(limit: &Arc<RedisGcra>, costs: &[u32]) -> (usize, u64) {
    let at = RedisMicros::new(T0);
    let mut checks = tokio::task::JoinSet::new();
    for i in 0..costs.len() {
        let limit = Arc::clone(limit);
        checks.spawn(async move {
            let answer = limit.try_decide_at("report", 0, at).await.unwrap();
            (i, answer.decision.is_admitted())
        });
    }
    let mut passed = Vec::new();
    while let Some(r) = checks.join_next().await {
        let (i, ok) = r.unwrap();
        if ok {
            passed.push(i);
        }
    }
    let mut reports = tokio::task::JoinSet::new();
    for &i in &passed {
        let (limit, actual) = (Arc::clone(limit), costs[i]);
        reports.spawn(async move {
            let c = limit.try_record_at("report", actual, at).await.unwrap();
            assert_eq!((c.charged.charged, c.charged.shortfall), (actual, 0));
            actual
        });
    }
    let mut tokens = 0u64;
    while let Some(actual) = reports.join_next().await {
        tokens += u64::from(actual.unwrap());
    }
    (passed.len(), tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_then_settle_never_overshoots_where_check_then_report_does() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // 10,000 tokens a minute, all of it at once: T = 6 ms, S = 60 s.
    let limit = Arc::new(common::gcra(&redis, "10000/min"));
    let t = limit.interval_us();
    assert_eq!((t, limit.quota().burst()), (6_000, 10_000));
    let costs = actual_costs();
    let demand: u64 = costs.iter().map(|&c| u64::from(c)).sum();

    let (served, tokens) = reserve_then_settle(&limit, &costs).await;
    // At one instant the bound is the burst: at most 10,000 tokens, and Redis holds
    // exactly the tokens used (every unused tail given back whole, nothing lost).
    assert!(
        tokens <= LIMIT,
        "reserve-then-settle admitted {tokens} tokens"
    );
    assert_eq!(tat(&limit, "reserve").await - T0, tokens * t);
    // It serves requests while an estimate fits: less than one estimate is left over.
    assert!(
        tokens + u64::from(ESTIMATE) > LIMIT,
        "{tokens} tokens used of {LIMIT}"
    );

    let (passed, reported) = check_then_report(&limit, &costs).await;
    assert_eq!(
        passed, REQUESTS,
        "every check of no cost passes before any report"
    );
    assert_eq!(reported, demand);
    // Every report was recorded, as debt past the limit: Redis holds all of it.
    assert_eq!(tat(&limit, "report").await - T0, reported * t);
    let overshoot = reported.saturating_sub(LIMIT);
    println!(
        "1,000 concurrent requests, estimate 100 tokens, actual uniform 0-100 (demand \
         {demand} tokens), limit {LIMIT} a minute, all in flight at once:\n  \
         reserve-then-settle: {served} requests served, {tokens} tokens admitted (≤ {LIMIT}), \
         overshoot 0\n  check-then-report:   {passed} requests served, {reported} tokens \
         admitted, overshoot {overshoot} tokens ({:.2}× the limit)",
        reported as f64 / LIMIT as f64
    );
    assert!(
        overshoot > 0,
        "check-then-report overshoots when all are in flight"
    );
    // The debt it left refuses every later request, one of no cost included, for the time
    // the overshoot takes to be paid back at the rate.
    let after = limit
        .try_decide_at("report", 0, RedisMicros::new(T0))
        .await
        .unwrap();
    assert_eq!(
        after.decision.result,
        Err(Denied::RateLimited {
            retry_after: Duration::from_micros(overshoot * t)
        })
    );
}

/// The Envoy Gateway pattern (a check of `hits_addend: 0`, then the response's cost
/// reported) on an exact GCRA of 1,000 a minute: check 0 passes, charge 900 passes, charge
/// 200 passes and leaves 100 of debt, and the next check of 0 is refused, with the exact
/// wait, until the debt is paid back: refused 1 µs before, admitted at it.
#[tokio::test]
async fn envoy_pattern_on_the_gcra_refuses_the_check_until_the_debt_is_paid() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let limit = RedisGcra::new(redis, "1000/min".parse().unwrap(), Policy::FailClosed).unwrap();
    let t = limit.interval_us(); // 60 ms
    let at = |us: u64| RedisMicros::new(T0 + us);
    let check = |now: RedisMicros| {
        let limit = &limit;
        async move { limit.try_decide_at("envoy", 0, now).await.unwrap() }
    };
    assert!(check(at(0)).await.decision.is_admitted());
    let c = limit.try_record_at("envoy", 900, at(0)).await.unwrap();
    assert_eq!((c.charged.charged, c.charged.shortfall), (900, 0));
    assert!(
        check(at(0)).await.decision.is_admitted(),
        "900 of 1,000: not in debt"
    );
    let c = limit.try_record_at("envoy", 200, at(0)).await.unwrap();
    assert_eq!(
        (c.charged.charged, c.charged.shortfall),
        (200, 0),
        "never cut"
    );
    // 1,100 of 1,000: a request for one permit waits for 101 of them, a check of none for 100.
    assert_eq!(c.charged.wait, Duration::from_micros(101 * t));
    let refused = check(at(0)).await;
    assert_eq!(
        refused.decision.result,
        Err(Denied::RateLimited {
            retry_after: Duration::from_micros(100 * t)
        })
    );
    assert_eq!(refused.decision.state.remaining, 0);
    let just_before = check(at(100 * t - 1)).await;
    assert_eq!(
        just_before.decision.result,
        Err(Denied::RateLimited {
            retry_after: Duration::from_micros(1)
        }),
        "never early"
    );
    assert!(check(at(100 * t)).await.decision.is_admitted(), "paid back");
    assert!(!limit
        .try_decide_at("envoy", 1, at(100 * t))
        .await
        .unwrap()
        .decision
        .is_admitted());
    assert!(limit
        .try_decide_at("envoy", 1, at(101 * t))
        .await
        .unwrap()
        .decision
        .is_admitted());
    // A budget's charge (the existing `charge`, no debt configured) saturates instead, and
    // says so: the check of no cost then passes, which is why costs known after the work
    // are recorded.
    let c = limit.try_charge_at("budget", 1_100, at(0)).await.unwrap();
    assert_eq!((c.charged.charged, c.charged.shortfall), (1_000, 100));
}

/// The same pattern on the exact sliding log of 1,000 a minute: the charge of 200, a
/// second later, takes the log to 1,100 entries in the window, and a check of no permits
/// is refused until the first 900 leave it, 59 s later (refused 1 µs before).
#[tokio::test]
async fn envoy_pattern_on_the_sliding_log_refuses_the_check_until_entries_leave() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let log = RedisSlidingLog::new(redis, "1000/min".parse().unwrap(), Policy::FailClosed).unwrap();
    let at = |us: u64| RedisMicros::new(T0 + us);
    let check = |now: RedisMicros| {
        let log = &log;
        async move { log.try_decide_at("envoy", 0, now).await.unwrap() }
    };
    assert!(check(at(0)).await.decision.is_admitted());
    let c = log.try_record_at("envoy", 900, at(0)).await.unwrap();
    assert_eq!((c.charged.charged, c.charged.shortfall), (900, 0));
    assert!(check(at(1_000_000)).await.decision.is_admitted());
    let c = log
        .try_record_at("envoy", 200, at(1_000_000))
        .await
        .unwrap();
    assert_eq!((c.charged.charged, c.charged.shortfall), (200, 0));
    let refused = check(at(1_000_000)).await;
    assert_eq!(
        refused.decision.result,
        Err(Denied::RateLimited {
            retry_after: Duration::from_secs(59)
        })
    );
    assert_eq!(
        check(at(60_000_000 - 1)).await.decision.retry_after(),
        Some(Duration::from_micros(1)),
        "never early"
    );
    let later = check(at(60_000_000)).await;
    assert!(later.decision.is_admitted());
    assert_eq!(
        later.decision.state.remaining, 800,
        "the 200 are still in the window"
    );
    // A reservation settled below its estimate gives the unused entries back at once.
    let r = log
        .try_reserve_at("envoy", 800, at(60_000_000))
        .await
        .unwrap();
    let receipt = r.receipt.expect("800 fit");
    assert_eq!(r.answer.decision.state.remaining, 0);
    log.try_settle_at("envoy", receipt, 300, at(60_000_000))
        .await
        .unwrap();
    let after = check(at(60_000_000)).await;
    assert_eq!(after.decision.state.remaining, 500);
}
