//! The layers' metrics (feature `metrics`), each test with a Prometheus recorder of its own
//! (`metrics::with_local_recorder` around the layer's build, which registers its handles):
//! every outcome counted under the names the user gave, the delays in the wait histogram,
//! the concurrency gauges following the permits, and a flood of a million distinct keys
//! adding no series.

mod common;

use common::far::{Far, Held};
use http::{HeaderName, Request, Response, StatusCode};
use limitcore::clock::ManualClock;
use limitcore::concurrency::Aimd;
use limitcore::rules::GcraRule;
use limitcore::{Keyed, Quota};
use limitcore_tower::{
    ConcurrencyLimitLayer, FnKey, HeaderKey, MissingKey, OnLimiterError, RateLimitLayer,
    RequestHead,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;
use tower::{Layer, Service, ServiceExt, service_fn};

/// Every series of a rendered page (`name{labels}` → value).
fn series(recorder: &PrometheusRecorder) -> BTreeMap<String, f64> {
    recorder
        .handle()
        .render()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').unwrap();
            (name.to_owned(), value.parse().unwrap())
        })
        .collect()
}

/// The value of `name{labels}`; 0 if absent.
fn value(page: &BTreeMap<String, f64>, name: &str, labels: &str) -> f64 {
    page.get(&format!("{name}{{{labels}}}"))
        .copied()
        .unwrap_or(0.0)
}

/// `limitcore_requests_total` of `limit` by outcome (the non-zero ones).
fn requests(page: &BTreeMap<String, f64>, limit: &str) -> BTreeMap<String, u64> {
    let prefix = format!("limitcore_requests_total{{limit=\"{limit}\",outcome=\"");
    page.iter()
        .filter_map(|(name, v)| {
            let outcome = name.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            (*v > 0.0).then(|| (outcome.to_owned(), *v as u64))
        })
        .collect()
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// A handler that answers "ok" at once.
fn inner() -> impl Service<
    Request<()>,
    Response = Response<String>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<String>, Infallible>> + Send,
> + Clone
+ Send {
    service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("ok".to_owned())) })
}

const KEY: HeaderName = HeaderName::from_static("x-client");

fn request(client: Option<&str>, cost: u32) -> Request<()> {
    let mut req = Request::builder().header("x-cost", cost);
    if let Some(client) = client {
        req = req.header(KEY, client);
    }
    req.body(()).unwrap()
}

fn cost(head: &RequestHead<'_>) -> u32 {
    head.headers()
        .get("x-cost")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

/// Sends `script` (client, cost) through `svc`, returns the statuses.
async fn run<S>(svc: &S, script: &[(Option<&str>, u32)]) -> Vec<u16>
where
    S: Service<Request<()>, Response = Response<String>, Error = Infallible> + Clone,
{
    let mut statuses = Vec::new();
    for (client, n) in script {
        let response = svc.clone().oneshot(request(*client, *n)).await.unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

#[tokio::test]
async fn every_outcome_is_counted_under_the_given_name() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let per_client: Held =
        Keyed::with_clock("1/min burst 2".parse().unwrap(), clock.clone()).unwrap();
    let builder = RateLimitLayer::builder(per_client, HeaderKey::new(KEY))
        .cost(cost)
        .policy_name("api")
        .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED));
    let enforced = metrics::with_local_recorder(&recorder, || builder.build()).unwrap();
    // Every series exists from the build on, at 0.
    let page = series(&recorder);
    for outcome in [
        "admitted",
        "limited",
        "delayed",
        "dry_run",
        "too_large",
        "missing_key",
        "error",
    ] {
        let name = format!("limitcore_requests_total{{limit=\"api\",outcome=\"{outcome}\"}}");
        assert_eq!(page.get(&name), Some(&0.0), "{name}");
    }
    let svc = enforced.layer(inner());
    let a = Some("a");
    let statuses = run(
        &svc,
        &[(a, 1), (a, 1), (a, 1), (a, 3), (None, 1), (Some("b"), 2)],
    )
    .await;
    assert_eq!(statuses, [200, 200, 429, 413, 401, 200]);
    assert_eq!(
        requests(&series(&recorder), "api"),
        counts(&[
            ("admitted", 3),
            ("limited", 1),
            ("too_large", 1),
            ("missing_key", 1)
        ])
    );

    // A dry run under another name: its would-be refusals apart, its admissions admitted.
    let shadow: Held = Keyed::with_clock("1/min burst 2".parse().unwrap(), clock.clone()).unwrap();
    let builder = RateLimitLayer::builder(shadow, HeaderKey::new(KEY))
        .cost(cost)
        .dry_run(true)
        .metrics_name("api-shadow");
    let dry = metrics::with_local_recorder(&recorder, || builder.build()).unwrap();
    let statuses = run(&dry.layer(inner()), &[(a, 1), (a, 1), (a, 1), (a, 3)]).await;
    assert_eq!(statuses, [200; 4]);
    let page = series(&recorder);
    assert_eq!(
        requests(&page, "api-shadow"),
        counts(&[("admitted", 2), ("dry_run", 2)])
    );
    assert_eq!(
        requests(&page, "api").values().sum::<u64>(),
        6,
        "the other limit's untouched"
    );
}

#[tokio::test]
async fn delays_granted_go_to_the_wait_histogram() {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("limitcore_wait_seconds".into()),
            &[0.05, 0.1, 0.2],
        )
        .unwrap()
        .build_recorder();
    let clock = ManualClock::new();
    // A slot every 50 ms; wait at most 120 ms.
    let limiter: Keyed<(), GcraRule, ManualClock> =
        Keyed::with_clock("20/s burst 1".parse().unwrap(), clock).unwrap();
    let builder = RateLimitLayer::builder(limiter, FnKey::new(|_: RequestHead<'_>| Some(())))
        .delay(Duration::from_millis(120))
        .metrics_name("paced")
        .metrics_label("route", "/upload");
    let layer = metrics::with_local_recorder(&recorder, || builder.build()).unwrap();
    let mut svc = layer.layer(inner());
    let mut pending = Vec::new();
    for _ in 0..4 {
        pending.push(svc.ready().await.unwrap().call(request(None, 1)));
    }
    let mut statuses = Vec::new();
    for response in pending {
        statuses.push(response.await.unwrap().status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    let page = series(&recorder);
    let labels = "limit=\"paced\",route=\"/upload\"";
    let outcome = |o: &str| {
        value(
            &page,
            "limitcore_requests_total",
            &format!("{labels},outcome=\"{o}\""),
        )
    };
    assert_eq!(
        (outcome("admitted"), outcome("delayed"), outcome("limited")),
        (1.0, 2.0, 1.0)
    );
    // Waits of 50 and 100 ms.
    assert_eq!(value(&page, "limitcore_wait_seconds_count", labels), 2.0);
    assert!((value(&page, "limitcore_wait_seconds_sum", labels) - 0.15).abs() < 1e-9);
    assert_eq!(
        value(
            &page,
            "limitcore_wait_seconds_bucket",
            &format!("{labels},le=\"0.05\"")
        ),
        1.0
    );
    assert_eq!(
        value(
            &page,
            "limitcore_wait_seconds_bucket",
            &format!("{labels},le=\"0.1\"")
        ),
        2.0
    );
}

#[tokio::test]
async fn limiter_errors_are_counted_under_either_policy() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    for (name, policy, status) in [
        ("open", OnLimiterError::Admit, 200),
        (
            "closed",
            OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE),
            503,
        ),
    ] {
        let far = Far::spawn(
            Keyed::with_clock("1/min".parse().unwrap(), clock.clone()).unwrap(),
            Duration::from_millis(1),
        );
        let builder = RateLimitLayer::remote(far, HeaderKey::new(KEY))
            .on_limiter_error(policy)
            .metrics_name(name);
        let layer = metrics::with_local_recorder(&recorder, || builder.build()).unwrap();
        let svc = layer.layer(inner());
        let a = Some("a");
        assert_eq!(run(&svc, &[(a, 1), (a, 1)]).await, [200, 429]);
        layer.limiter().set_down(true);
        assert_eq!(run(&svc, &[(a, 1), (a, 1), (a, 1)]).await, [status; 3]);
        assert_eq!(
            requests(&series(&recorder), name),
            counts(&[("admitted", 1), ("limited", 1), ("error", 3)]),
            "{name}"
        );
    }
}

#[tokio::test]
async fn concurrency_gauges_follow_the_permits() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let layer = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimitLayer::fixed(2)
            .unwrap()
            .metrics_name("backend")
            .build()
    });
    let gauge = |name: &str| value(&series(&recorder), name, "limit=\"backend\"");
    let outcome = |o: &str| {
        value(
            &series(&recorder),
            "limitcore_concurrency_requests_total",
            &format!("limit=\"backend\",outcome=\"{o}\""),
        )
    };
    assert_eq!(gauge("limitcore_concurrency_limit"), 2.0, "set at build");
    let svc = layer.layer(inner());
    let first = svc.clone().oneshot(Request::new(())).await.unwrap();
    let second = svc.clone().oneshot(Request::new(())).await.unwrap();
    assert_eq!(
        gauge("limitcore_concurrency_in_flight"),
        2.0,
        "two bodies hold permits"
    );
    let third = svc.clone().oneshot(Request::new(())).await.unwrap();
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!((outcome("admitted"), outcome("shed")), (2.0, 1.0));
    drop(first);
    assert_eq!(gauge("limitcore_concurrency_in_flight"), 1.0);
    drop((second, third));
    assert_eq!(gauge("limitcore_concurrency_in_flight"), 0.0);

    // An inner error releases at once (the gauge too); an adaptive limit's gauge follows it.
    let recorder = PrometheusBuilder::new().build_recorder();
    let aimd = Aimd::new()
        .with_initial(30)
        .unwrap()
        .with_limits(1, 100)
        .unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimitLayer::adaptive(aimd).unwrap().build()
    });
    let page = || series(&recorder);
    assert_eq!(
        value(&page(), "limitcore_concurrency_limit", "limit=\"default\""),
        30.0
    );
    let failing = layer.layer(service_fn(|_: Request<()>| async {
        Err::<Response<String>, _>("backend down")
    }));
    assert!(failing.clone().oneshot(Request::new(())).await.is_err());
    assert_eq!(
        value(
            &page(),
            "limitcore_concurrency_in_flight",
            "limit=\"default\""
        ),
        0.0
    );
    assert_eq!(layer.permits().limit(), 27, "AIMD backed off");
    assert!(failing.oneshot(Request::new(())).await.is_err());
    assert_eq!(
        value(&page(), "limitcore_concurrency_limit", "limit=\"default\""),
        27.0,
        "as of the latest grant"
    );
}

#[tokio::test]
async fn queued_requests_are_counted_when_granted_or_shed() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let layer = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimitLayer::fixed(1)
            .unwrap()
            .queue(1, Duration::from_millis(500))
            .unwrap()
            .build()
    });
    let svc = layer.layer(inner());
    let held = svc.clone().oneshot(Request::new(())).await.unwrap();
    // Waits 500 ms in the queue, then is shed.
    let timed_out = svc.clone().oneshot(Request::new(())).await.unwrap();
    assert_eq!(timed_out.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Waits, and is granted when `held` goes: `held` goes as soon as the request has
    // queued, well within its 500 ms (the time a loaded machine may take to come back here).
    let waiting = tokio::spawn(svc.clone().oneshot(Request::new(())));
    let since = std::time::Instant::now();
    while layer.permits().waiters() == 0 {
        assert!(since.elapsed() < Duration::from_secs(10), "never queued");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(held);
    let granted = waiting.await.unwrap().unwrap();
    assert_eq!(granted.status(), StatusCode::OK);
    let page = series(&recorder);
    let outcome = |o: &str| {
        value(
            &page,
            "limitcore_concurrency_requests_total",
            &format!("limit=\"default\",outcome=\"{o}\""),
        )
    };
    assert_eq!((outcome("admitted"), outcome("shed")), (2.0, 1.0));
    assert_eq!(
        value(
            &page,
            "limitcore_concurrency_in_flight",
            "limit=\"default\""
        ),
        1.0
    );
    drop(granted);
    assert_eq!(
        value(
            &series(&recorder),
            "limitcore_concurrency_in_flight",
            "limit=\"default\""
        ),
        0.0
    );
}

/// A million requests, each of a key never seen before, through both layers (the rate limit
/// inside the concurrency limit): the series are
/// the same before and after (the layers' labels are names, never keys), and every request
/// was counted.
#[tokio::test]
async fn a_flood_of_new_keys_adds_no_series() {
    const FLOOD: u64 = 1_000_000;
    let recorder = PrometheusBuilder::new().build_recorder();
    let per_key: Keyed<u64> = Keyed::new(Quota::per_minute(1).unwrap())
        .unwrap()
        .with_max_keys(100_000);
    let by_id = FnKey::new(|head: RequestHead<'_>| head.extensions().get::<u64>().copied());
    let builder = RateLimitLayer::builder(per_key, by_id).metrics_name("flood");
    let (rate, concurrency) = metrics::with_local_recorder(&recorder, || {
        (
            builder.build().unwrap(),
            ConcurrencyLimitLayer::new(1_000).unwrap(),
        )
    });
    let mut svc = tower::ServiceBuilder::new()
        .layer(concurrency)
        .layer(rate)
        .service(inner());
    let request = |id: u64| {
        let mut req = Request::new(());
        req.extensions_mut().insert(id);
        req
    };
    // A first request, so that every series has been touched.
    svc.ready()
        .await
        .unwrap()
        .call(request(u64::MAX))
        .await
        .unwrap();
    let before = series(&recorder);
    for id in 0..FLOOD {
        let response = svc.ready().await.unwrap().call(request(id)).await.unwrap();
        assert!(matches!(response.status().as_u16(), 200 | 429));
    }
    let after = series(&recorder);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the flood added series"
    );
    // Each series is labelled by the layer's name and the outcome (or a summary quantile):
    // 7 outcomes, the wait summary's 9 lines, 4 series of the concurrency layer.
    for name in after.keys() {
        assert!(
            name.contains("{limit=\"flood\"") || name.contains("{limit=\"default\""),
            "{name}"
        );
        let labels = name.matches('=').count();
        assert!(labels <= 2, "{name}");
    }
    assert_eq!(after.len(), 7 + 9 + 4, "{after:#?}");
    let counted: u64 = requests(&after, "flood").values().sum();
    assert_eq!(counted, FLOOD + 1);
    let admitted = requests(&after, "flood")["admitted"];
    assert!(
        admitted >= 100_000,
        "{admitted}: each new key up to the cap got its one"
    );
    assert_eq!(
        value(
            &after,
            "limitcore_concurrency_requests_total",
            "limit=\"default\",outcome=\"admitted\""
        ),
        (FLOOD + 1) as f64,
        "every request passed the concurrency limit"
    );
}
