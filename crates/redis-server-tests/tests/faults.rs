//! Faults on a real server: frozen (SIGSTOP), killed (SIGKILL) and restarted mid-run, busy
//! in a script (`BUSY`), and a loopback proxy that adds latency and drops connections; and
//! answers about the call (`NOSCRIPT`, `WRONGTYPE`, a script's error), which are no
//! outage. No panic, every call decided within its deadline, the policy applied during the
//! outage (to decisions and to forced charges), the bound holding again after recovery,
//! nothing beyond the stated bound admitted.

use redis_server_tests as common;

use common::proxy::Proxy;
use limitcore::{Charged, Denied, KeyedRateLimiter, Quota};
use limitcore_redis::{
    LeaseConfig, LeasedLimiter, Policy, RedisAll, RedisConfig, RedisGcra, Source,
};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_millis(50);
/// Scheduling slack on a loaded 2-core machine, on top of the deadline, for a call that
/// awaits Redis (its task may wait for a worker thread, which may wait for a CPU). A call
/// that did not keep to its deadline waits for the fault to end: the frozen server is
/// frozen for 600 ms, the slow proxy holds every reply [`SLOW`]; both longer than
/// `DEADLINE + SLACK`, so such a call still fails the bound.
const SLACK: Duration = Duration::from_millis(400);
/// The slow proxy's latency: every reply held this long, far past `DEADLINE + SLACK`.
const SLOW: Duration = Duration::from_secs(1);
/// How long the background probe may take to close the breaker once the server is back:
/// generous, for a loaded machine (it takes a heartbeat, 100 ms, and a restart); the waits
/// end as soon as it is closed.
const RECOVERY: Duration = Duration::from_secs(10);

fn config() -> RedisConfig {
    RedisConfig::default()
        .deadline(DEADLINE)
        .breaker(2, Duration::from_millis(100))
        .heartbeat(Duration::from_millis(100))
}

/// Wait until `redis`'s breaker is closed (its background probe reached the server), for
/// at most `within`, looking every 20 ms; the caller asserts the state.
async fn until_closed(redis: &limitcore_redis::Redis, within: Duration) {
    let deadline = Instant::now() + within;
    while redis.is_open() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug, Clone, Copy)]
struct Call {
    /// When it was decided, µs of the wall clock: Redis's time exactly, or a local
    /// decision's span (read before and after the call).
    at_us: (u64, u64),
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
        let (began, before_us) = (Instant::now(), common::wall_us());
        let v = limit.decide("k", 1).await;
        let took = began.elapsed();
        assert!(took <= DEADLINE + SLACK, "a call took {took:?}");
        let at_us = match v.source {
            Source::Redis { server_time } => (server_time.as_micros(), server_time.as_micros()),
            _ => (before_us, common::wall_us()),
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
    // Recovery: Redis decides again after the restart (scripts reloaded on NOSCRIPT), once
    // the probe has closed the breaker (within the run, unless a loaded machine slowed the
    // restart).
    until_closed(&redis, RECOVERY).await;
    let last = limit.decide("k", 1).await;
    assert!(
        matches!(last.source, Source::Redis { .. }),
        "recovered: {last:?}"
    );
    // One node announced: the local limit is the whole quota, so its GCRA bound, over the
    // local decisions' spans (each counted only in windows that surely hold it).
    let bound = common::gcra_bound(20, 5_000, 1_000_000);
    let mut local: Vec<(u64, u64)> = fallback
        .iter()
        .filter(|c| c.admitted)
        .map(|c| c.at_us)
        .collect();
    assert!(common::max_surely_in_window(&mut local, 1_000_000).0 as u64 <= bound);
    // After recovery, Redis's admissions keep the GCRA bound again.
    let mut exact: Vec<u64> = calls
        .iter()
        .filter(|c| c.admitted && matches!(c.source, Source::Redis { .. }))
        .map(|c| c.at_us.0)
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
    // 200 decisions, each well under a millisecond: a call that waited for Redis would
    // take the deadline, 50 ms, and 200 of them 10 s. The bound is a fifth of that, 2 s,
    // which leaves a loaded machine's preemptions nearly all of it.
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "fail fast: {:?}",
        began.elapsed()
    );
    // FailLocal: the rate divided by the nodes last seen (one): the burst, then refusals,
    // but for what the local budget (10/s) refilled while the calls ran: none in the
    // microseconds they take, one more for each 100 ms a loaded machine held them.
    let began = Instant::now();
    let mut n = 0;
    for _ in 0..10 {
        if local.decide("k", 1).await.is_admitted() {
            n += 1;
        }
    }
    let refilled = (began.elapsed().as_millis() / 100) as u32;
    assert!(
        (2..=2 + refilled).contains(&n),
        "{n} admitted: the local budget's burst (2), and {refilled} refilled"
    );
    // The server comes back: the background probe closes the breaker.
    server.restart().unwrap();
    until_closed(&redis, RECOVERY).await;
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
    proxy.set_latency(SLOW);
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
            // The call's own time: its wall-clock time less what this thread spent waiting
            // for a CPU meanwhile (a synchronous call stays on its thread).
            let (began, queued) = (Instant::now(), common::run_delay());
            if leased.try_acquire("k").is_ok() {
                outage_admitted += 1;
            }
            let held_off = common::run_delay()
                .zip(queued)
                .map_or(Duration::ZERO, |(after, before)| {
                    after.saturating_sub(before)
                });
            worst = worst.max(began.elapsed().saturating_sub(held_off));
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
    // A decision that waited for Redis would take the deadline at least (the proxy holds
    // every reply a second); a local one takes microseconds. The time a loaded machine held
    // the thread off its CPU is not the call's (Linux says how long; elsewhere nothing is
    // taken off).
    assert!(worst < DEADLINE, "a leased decision waited {worst:?}");

    // Phase 2: the connections drop and the latency goes: reconnection in the background.
    proxy.drop_connections();
    proxy.set_latency(Duration::ZERO);
    until_closed(&redis, RECOVERY).await;
    assert!(!redis.is_open(), "recovered after the drop");
    // Phase 3: after recovery the bound holds again (one node: GCRA + L), over each
    // admission's span (read before and after the call).
    let mut spans = Vec::new();
    let since = Instant::now();
    while since.elapsed() < Duration::from_millis(1_200) {
        for _ in 0..50 {
            let before = common::wall_us();
            if leased.try_acquire("k").is_ok() {
                spans.push((before, common::wall_us()));
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(spans.len() > 100, "admitting again: {}", spans.len());
    let bound = common::gcra_bound(20, 2_000, 1_000_000) + u64::from(l);
    assert!(common::max_surely_in_window(&mut spans, 1_000_000).0 as u64 <= bound);
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
    // Every admission of the fallback below comes after this.
    let asked = Instant::now();
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
    // The tight limit refuses these until it refills, a second after its admission (after
    // `asked`); the loose one keeps what it had. A call that returns within a second of
    // `asked` was decided before the refill; past it (a loaded machine held the test that
    // long) the tight limit may admit again, so the calls stop there.
    for _ in 0..10 {
        let v = all.decide("t", 1).await.unwrap();
        if asked.elapsed() >= Duration::from_secs(1) {
            break;
        }
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

/// Forced charges while Redis is down, under each policy (the table in `Policy`'s docs,
/// "Charges"): `FailOpen` records nothing and reports nothing short; `FailClosed` records
/// nothing and reports it all short, with the cooldown as the wait; `FailLocal` charges the
/// node's local budget (the rate and burst divided by the nodes last seen, the same debt),
/// whose later decisions feel it. A leased charge spends the held cells first under every
/// policy; only the rest meets the policy. After recovery Redis records charges again.
#[tokio::test]
async fn charges_while_redis_is_down_follow_each_policy() {
    let mut server = common::server();
    let redis = common::connect_with(&server.url(), config()).await;
    // T = 100 ms, burst 2, 300 ms of debt: capacity 5.
    let q: Quota = "10/s burst 2".parse().unwrap();
    let debt = Duration::from_millis(300);
    let exact = |policy| {
        RedisGcra::new(redis.clone(), q, policy)
            .unwrap()
            .with_max_debt(debt)
            .unwrap()
    };
    let (open, closed, local) = (
        exact(Policy::FailOpen),
        exact(Policy::FailClosed),
        exact(Policy::FailLocal),
    );
    // The leased nodes on a roomier limit of their own keys, so that no lease is refused
    // (a block would end the held cells with it).
    let leased = |policy| {
        let config = LeaseConfig::new(4)
            .max_debt(debt)
            .ttl(Duration::from_secs(10));
        let roomy: Quota = "100/s burst 20".parse().unwrap();
        LeasedLimiter::new(redis.clone(), roomy, config, policy).unwrap()
    };
    let (leased_closed, leased_local) = (leased(Policy::FailClosed), leased(Policy::FailLocal));
    // Before the outage: Redis records the charge; each leased node takes a lease.
    let c = closed.charge("warm", 1).await;
    assert!(matches!(c.source, Source::Redis { .. }), "{c:?}");
    assert!(leased_closed.acquire("lc", 1).await.is_admitted());
    assert!(leased_local.acquire("ll", 1).await.is_admitted());
    tokio::time::sleep(Duration::from_millis(50)).await; // the refills land

    server.kill();
    for _ in 0..3 {
        let _ = closed.decide("k", 1).await;
    }
    assert!(redis.is_open(), "the breaker is open: the policies decide");
    let fallback = |policy| Source::Fallback { policy };

    // FailOpen: forgiven, as a disabled budget's charge.
    let c = open.charge("k", 5).await;
    assert_eq!(c.source, fallback(Policy::FailOpen));
    assert_eq!(
        c.charged,
        Charged {
            charged: 0,
            shortfall: 0,
            wait: Duration::ZERO
        }
    );
    // FailClosed: not recorded, all of it short, the cooldown as the wait.
    let c = closed.charge("k", 5).await;
    assert_eq!(c.source, fallback(Policy::FailClosed));
    let cooldown = Duration::from_millis(100);
    assert_eq!(
        c.charged,
        Charged {
            charged: 0,
            shortfall: 5,
            wait: cooldown
        }
    );
    // FailLocal: the local budget (one node: the whole quota) records it, into debt.
    let charged = Instant::now();
    let c = local.charge("k", 4).await;
    assert_eq!(c.source, fallback(Policy::FailLocal));
    assert_eq!(
        c.charged,
        Charged {
            charged: 4,
            shortfall: 0,
            wait: Duration::from_millis(300)
        }
    );
    let v = local.decide("k", 1).await;
    assert_eq!(v.source, fallback(Policy::FailLocal));
    let wait = v
        .decision
        .retry_after()
        .expect("the local budget felt the charge");
    // 300 ms from the charge, less the time since (at most what the test measured: the
    // microseconds of two local calls, or a loaded machine's delay).
    let since = charged.elapsed();
    assert!(
        wait + since >= Duration::from_millis(300) && wait <= Duration::from_millis(300),
        "{wait:?}, {since:?} after the charge"
    );
    // Saturating at burst + debt (500 ms of backlog): one more fits, the rest is short; and
    // one more for each 100 ms that passed since the charge.
    let c = local.charge("k", 10).await;
    let repaid = (charged.elapsed().as_millis() / 100) as u32;
    assert!(
        (1..=1 + repaid).contains(&c.charged.charged),
        "{c:?}, {repaid} repaid"
    );
    assert_eq!(c.charged.charged + c.charged.shortfall, 10);
    // The local budget has the debt policy too: 5 from a full key, 6 never.
    assert!(local.decide("k2", 5).await.is_admitted());
    assert_eq!(
        local.decide("k3", 6).await.decision.result,
        Err(Denied::ExceedsCapacity { capacity: 5 })
    );

    // Leased: the held cells first, then the policy for the rest.
    let held = leased_closed.snapshot("lc").remaining;
    assert!(held >= 1, "a lease held: {held}");
    let c = leased_closed.charge("lc", held + 3).await;
    assert_eq!(c.source, fallback(Policy::FailClosed));
    assert_eq!(
        (c.from_lease, c.charged.charged, c.charged.shortfall),
        (held, held, 3)
    );
    let now = KeyedRateLimiter::<str>::now(&leased_closed);
    let refused = leased_closed.decide_verdict_at("lc", 1, now);
    assert_eq!(refused.source, fallback(Policy::FailClosed));
    let held = leased_local.snapshot("ll").remaining;
    assert!(held >= 1, "a lease held: {held}");
    let c = leased_local.charge("ll", held + 3).await;
    assert_eq!(c.source, fallback(Policy::FailLocal));
    assert_eq!(
        (c.from_lease, c.charged.charged, c.charged.shortfall),
        (held, held + 3, 0)
    );

    // Recovery: Redis records charges again (its state is the one it kept: a restarted
    // server without persistence starts fresh).
    server.restart().unwrap();
    until_closed(&redis, RECOVERY).await;
    assert!(!redis.is_open(), "reconnected in the background");
    let c = closed.charge("k", 3).await;
    assert!(matches!(c.source, Source::Redis { .. }), "{c:?}");
    assert_eq!(c.charged.charged, 3);
}

/// The breaker counts outages, not answers about the call: on a live server, `NOSCRIPT` (as
/// every node meets after a restart or a `SCRIPT FLUSH`, several callers at once before the
/// first has loaded the script again), `WRONGTYPE` and a script's error leave it closed
/// however many come in a row; a server busy in a script (`BUSY`) opens it, and the probe
/// closes it again once the script is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_counts_outages_not_answers_about_the_call() {
    use limitcore_redis::Error;
    let server = common::server();
    let redis = common::connect_with(&server.url(), config()).await; // opens after 2
    let code = |answer: Result<redis::Value, Error>| match answer {
        Err(Error::Redis(e)) => e.code().map(str::to_owned),
        other => panic!("expected a server error, got {other:?}"),
    };
    let unknown_sha = "0".repeat(40);
    redis
        .command(redis::cmd("SET").arg("text").arg("not a list"))
        .await
        .unwrap();
    for _ in 0..5 {
        let answer = redis
            .command(redis::cmd("EVALSHA").arg(&unknown_sha).arg(0))
            .await;
        assert_eq!(code(answer).as_deref(), Some("NOSCRIPT"));
        let answer = redis
            .command(redis::cmd("LPUSH").arg("text").arg("x"))
            .await;
        assert_eq!(code(answer).as_deref(), Some("WRONGTYPE"));
        let answer = redis
            .command(
                redis::cmd("EVAL")
                    .arg("return redis.call('INCR', KEYS[1])")
                    .arg(1)
                    .arg("text"),
            )
            .await;
        assert!(code(answer).is_some());
        assert!(
            !redis.is_open(),
            "an answer about the call opened the breaker"
        );
    }
    assert!(redis.command(&redis::cmd("PING")).await.is_ok());

    // A script that never ends: past `lua-time-limit` the server answers BUSY to others.
    let raw = redis::Client::open(server.url()).unwrap();
    let mut admin = raw.get_connection().unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("lua-time-limit")
        .arg(10)
        .query::<()>(&mut admin)
        .unwrap();
    let busy = {
        let mut con = raw.get_connection().unwrap();
        std::thread::spawn(move || {
            redis::cmd("EVAL")
                .arg("while true do end")
                .arg(0)
                .query::<redis::Value>(&mut con)
        })
    };
    // Running, and past the limit: the server answers BUSY.
    let running = Instant::now() + RECOVERY;
    while redis::cmd("PING").query::<()>(&mut admin).is_ok() {
        assert!(Instant::now() < running, "the script never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The calls (and the handle's heartbeats) meet BUSY until the breaker opens.
    let deadline = Instant::now() + RECOVERY;
    while !redis.is_open() && Instant::now() < deadline {
        match redis.command(&redis::cmd("PING")).await {
            Err(Error::Redis(e)) => assert_eq!(e.code(), Some("BUSY"), "{e:?}"),
            Err(Error::CircuitOpen) => {}
            other => panic!("a busy server answered {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(redis.is_open(), "a busy server opens the breaker");
    redis::cmd("SCRIPT")
        .arg("KILL")
        .query::<()>(&mut admin)
        .unwrap();
    assert!(busy.join().unwrap().is_err(), "the script was killed");
    until_closed(&redis, RECOVERY).await;
    assert!(!redis.is_open(), "the probe closed the breaker");
    assert!(redis.command(&redis::cmd("PING")).await.is_ok());
}
