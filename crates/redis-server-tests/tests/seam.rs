//! The exact limits behind the core's asynchronous decision seam
//! (`limitcore::AsyncKeyedRateLimiter`), on a real server: a decision through the seam is
//! the direct call's (`decide`), for the GCRA, the sliding log and several limits all or
//! nothing; with Redis stopped, the outage policy decides and the seam returns `Ok` with
//! its decision, except under `Policy::Propagate`, which returns Redis's error.

use redis_server_tests as common;

use limitcore::{AsyncKeyedRateLimiter, Decision, Denied, Quota};
use limitcore_redis::{Error, Policy, RedisAll, RedisConfig, RedisGcra, RedisSlidingLog};
use std::time::Duration;

/// Two decisions made a moment apart on two keys with the same history: the same result and
/// state, the waits within `slack` of each other (time passed between the two calls).
fn same(seam: &Decision, direct: &Decision, slack: Duration, what: &str) {
    let close = |a: Duration, b: Duration| a.abs_diff(b) <= slack;
    match (seam.result, direct.result) {
        (Ok(()), Ok(())) => {}
        (
            Err(Denied::RateLimited { retry_after: a }),
            Err(Denied::RateLimited { retry_after: b }),
        ) => {
            assert!(close(a, b), "{what}: waits {a:?} and {b:?}")
        }
        (a, b) => assert_eq!(a, b, "{what}"),
    }
    assert_eq!(seam.state.remaining, direct.state.remaining, "{what}");
    assert!(
        close(seam.state.full_after, direct.state.full_after),
        "{what}: {:?} and {:?}",
        seam.state,
        direct.state
    );
}

#[tokio::test]
async fn a_decision_through_the_seam_is_the_direct_calls() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // Slow limits, so that the time between the two calls moves no decision.
    let slack = Duration::from_millis(200);
    let ns = [1, 2, 0, 1, 9, 1, 1];

    let gcra = RedisGcra::new(
        redis.clone(),
        "6/min burst 4".parse().unwrap(),
        Policy::FailClosed,
    )
    .unwrap();
    let log =
        RedisSlidingLog::new(redis.clone(), "4/min".parse().unwrap(), Policy::FailClosed).unwrap();
    let all = RedisAll::new(
        redis.clone(),
        &[
            ("m", "6/min burst 4".parse().unwrap()),
            ("h", "20/h burst 3".parse().unwrap()),
        ],
        Policy::FailClosed,
    )
    .unwrap();
    let (mut admitted, mut refused) = (0, 0);
    for (i, &n) in ns.iter().enumerate() {
        let owned = String::from("seam-gcra");
        let seam = gcra.decide_async(&owned, n).await.unwrap();
        let direct = gcra.decide("direct-gcra", n).await.decision;
        same(&seam, &direct, slack, &format!("gcra #{i} n {n}"));
        admitted += usize::from(seam.is_admitted() && n > 0);
        refused += usize::from(!seam.is_admitted());

        let seam = log.decide_async("seam-log", n).await.unwrap();
        let direct = log.decide("direct-log", n).await.decision;
        same(&seam, &direct, slack, &format!("log #{i} n {n}"));

        let seam = all.decide_async("seam", n).await.unwrap();
        let direct = all.decide("direct", n).await.unwrap().decision;
        same(&seam, &direct, slack, &format!("all #{i} n {n}"));
    }
    assert!(
        admitted >= 3 && refused >= 2,
        "{admitted} admitted, {refused} refused"
    );
    // The quota reported for the headers: the limit's; for several, the smallest burst.
    assert_eq!(
        AsyncKeyedRateLimiter::<str>::quota_for_key(&gcra, "k"),
        "6/min burst 4".parse::<Quota>().unwrap()
    );
    assert_eq!(
        AsyncKeyedRateLimiter::<str>::quota_for_key(&all, "k"),
        "20/h burst 3".parse::<Quota>().unwrap()
    );
    // A tenant no policy can decide is an error whatever the policy.
    assert!(matches!(
        all.decide_async("bad{tenant}", 1).await,
        Err(Error::Quota(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_the_policy_decides_or_propagates() {
    let mut server = common::server();
    let config = RedisConfig::default()
        .deadline(Duration::from_millis(50))
        .breaker(2, Duration::from_millis(100))
        .heartbeat(Duration::from_millis(100));
    let redis = common::connect_with(&server.url(), config).await;
    let q: Quota = "10/s burst 2".parse().unwrap();
    let closed = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
    // A slow limit for the local budget, so that the outage's timeouts refill nothing.
    let local = RedisGcra::new(
        redis.clone(),
        "2/min burst 2".parse().unwrap(),
        Policy::FailLocal,
    )
    .unwrap();
    let propagate = RedisGcra::new(redis.clone(), q, Policy::Propagate).unwrap();
    let log =
        RedisSlidingLog::new(redis.clone(), "2/s".parse().unwrap(), Policy::Propagate).unwrap();
    let all = RedisAll::new(redis.clone(), &[("s", q)], Policy::Propagate).unwrap();
    // Redis up: all decide on Redis, `Ok` through the seam whatever the policy.
    assert!(propagate.decide_async("k", 1).await.unwrap().is_admitted());
    assert!(log.decide_async("k", 1).await.unwrap().is_admitted());
    assert!(all.decide_async("k", 1).await.unwrap().is_admitted());

    server.kill();
    // Through the timeouts that open the breaker, and after: the same answers.
    for round in 0..6 {
        // FailClosed: `Ok`, a refusal for the breaker's cooldown, as the direct call's.
        let seam = closed.decide_async("k", 1).await.unwrap();
        assert_eq!(
            seam.result,
            Err(Denied::RateLimited {
                retry_after: Duration::from_millis(100)
            }),
            "round {round}"
        );
        assert_eq!(closed.decide("k", 1).await.decision.result, seam.result);
        // FailLocal: `Ok`, the local budget's decision (a burst of 2, then refusals).
        let seam = local.decide_async("k", 1).await.unwrap();
        assert_eq!(seam.is_admitted(), round < 2, "round {round}: {seam:?}");
        // Propagate: Redis's error itself (a timeout, a refused connection, or the open
        // breaker), for every exact limit.
        for err in [
            propagate.decide_async("k", 1).await.unwrap_err(),
            log.decide_async("k", 1).await.unwrap_err(),
            all.decide_async("k", 1).await.unwrap_err(),
        ] {
            assert!(
                matches!(
                    err,
                    Error::Timeout(_) | Error::CircuitOpen | Error::Redis(_)
                ),
                "round {round}: {err}"
            );
        }
        // The direct call, which must decide, fails closed under Propagate.
        let direct = propagate.decide("k", 1).await;
        assert!(!direct.is_admitted());
    }
    assert!(redis.is_open());
    assert!(matches!(
        propagate.decide_async("k", 1).await,
        Err(Error::CircuitOpen)
    ));
}
