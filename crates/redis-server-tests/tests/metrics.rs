//! `limitcore-redis`'s metrics (feature `metrics`) on a real server, read back the way an
//! operator reads them: through `metrics-exporter-prometheus`'s recorder, installed for the
//! process, and its Prometheus text.
//!
//! - An exact limit while Redis answers: no error, no fallback decision.
//! - The server killed mid-run: `limitcore_redis_errors_total` (over its kinds) and
//!   `limitcore_redis_fallback_decisions_total{limit, policy="fail_local"}` each rise by
//!   exactly the number of calls the node decided locally (`Source::Fallback`), and the
//!   breaker's fast failures are counted as `circuit_open`.
//! - A leased limit: `limitcore_lease_fetches_total` and `limitcore_lease_permits_total`
//!   agree with the limiter's own counters (`leases`, `granted`, `refusals`).
//!
//! One test function: the recorder and the error series are the process's.

use redis_server_tests as common;

use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, RedisConfig, RedisGcra, Source};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::time::Duration;

/// The process's recorder (installed before any handle or limiter is built).
fn recorder() -> PrometheusHandle {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
    handle
}

/// The sum of the samples of `name` whose labels include every pair of `labels` (0 if none).
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, sample) = line.rsplit_once(' ')?;
            let (series_name, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            all.then(|| sample.parse::<f64>().ok()).flatten()
        })
        .map(|v| v as u64)
        .sum()
}

fn errors(text: &str) -> u64 {
    value(text, "limitcore_redis_errors_total", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_fallbacks_and_leases_are_counted_as_decided() {
    let prometheus = recorder();
    let mut server = common::server();
    // A breaker that opens after 2 failures and stays open for the rest of the run (the
    // probes of the background task are not counted anyway). A generous deadline: while the
    // server answers, a call must not miss it (on a loaded machine, a slow round trip
    // would count as an error); it costs time only once the server is killed, where the
    // first calls wait it out before the breaker opens.
    let config = RedisConfig::default()
        .deadline(Duration::from_secs(1))
        .breaker(2, Duration::from_secs(30))
        .heartbeat(Duration::from_millis(100));
    let redis = common::connect_with(&server.url(), config).await;
    let prefix = "lc:metrics:";
    let limit = RedisGcra::new(
        redis.clone(),
        "100/s burst 10".parse().unwrap(),
        Policy::FailLocal,
    )
    .unwrap()
    .with_prefix(prefix);

    // Redis answers: nothing to count.
    for _ in 0..5 {
        let v = limit.decide("k", 1).await;
        assert!(matches!(v.source, Source::Redis { .. }), "{v:?}");
    }

    // A leased limit while Redis answers: its fetches as its own counters say.
    let lease_prefix = "lc:metrics-lease:";
    let leased = LeasedLimiter::new(
        redis.clone(),
        "200/s burst 20".parse().unwrap(),
        LeaseConfig::new(4).prefix(lease_prefix),
        Policy::FailClosed,
    )
    .unwrap();
    let mut admitted = 0;
    for _ in 0..60 {
        if leased.acquire("tenant", 1).await.is_admitted() {
            admitted += 1;
        }
    }
    // Both sides read at one moment: the limiter's counters, the series, the counters again,
    // until the counters held still across the rendering and the series agree with them (a
    // fetch still in flight lands on both; 10 s at most, for a loaded machine, after which
    // the assertions below say which side is short).
    let counters = || (leased.leases(), leased.refusals(), leased.granted());
    let fetched = |text: &str, outcome| {
        value(
            text,
            "limitcore_lease_fetches_total",
            &[("limit", lease_prefix), ("outcome", outcome)],
        )
    };
    let landed = std::time::Instant::now();
    let (text, (leases, refusals, granted)) = loop {
        let before = counters();
        let text = prometheus.render();
        let still = counters() == before;
        let (leases, refusals, _) = before;
        let agree = fetched(&text, "granted") == leases && fetched(&text, "blocked") == refusals;
        if (still && agree) || landed.elapsed() >= Duration::from_secs(10) {
            break (text, before);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(leases > 0 && admitted > 0);
    assert_eq!(fetched(&text, "granted"), leases, "{text}");
    assert_eq!(fetched(&text, "blocked"), refusals, "{text}");
    assert_eq!(fetched(&text, "error"), 0, "{text}");
    assert_eq!(
        value(
            &text,
            "limitcore_lease_permits_total",
            &[("limit", lease_prefix)]
        ),
        granted,
        "{text}"
    );
    assert!(granted >= admitted, "{admitted} admitted from {granted}");
    assert_eq!(errors(&text), 0, "{text}");
    let fallbacks = |text: &str| {
        value(
            text,
            "limitcore_redis_fallback_decisions_total",
            &[("limit", prefix), ("policy", "fail_local")],
        )
    };
    assert_eq!(fallbacks(&text), 0, "{text}");

    // The server dies: every call is then decided by the policy, after one error each.
    server.kill();
    let mut local = 0;
    for _ in 0..20 {
        let v = limit.decide("k", 1).await;
        match v.source {
            Source::Fallback { policy } => {
                assert_eq!(policy, Policy::FailLocal);
                local += 1;
            }
            other => panic!("a dead server decided {other:?}"),
        }
    }
    let text = prometheus.render();
    assert_eq!(local, 20);
    assert_eq!(errors(&text), local, "{text}");
    assert_eq!(fallbacks(&text), local, "{text}");
    // The breaker opened after two failures: the rest failed fast, not asked.
    let open = value(
        &text,
        "limitcore_redis_errors_total",
        &[("kind", "circuit_open")],
    );
    assert!(
        (local - 2..=local).contains(&open),
        "{open} of {local}: {text}"
    );
    // The other policies' series of this limit stayed at zero.
    for policy in ["fail_open", "fail_closed", "propagate"] {
        assert_eq!(
            value(
                &text,
                "limitcore_redis_fallback_decisions_total",
                &[("limit", prefix), ("policy", policy)],
            ),
            0,
            "{text}"
        );
    }
}
