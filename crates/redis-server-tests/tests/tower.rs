//! The leased limiter as the HTTP layer's limiter, end to end: a real redis-server, an axum
//! server on loopback behind `limitcore-tower`'s layer keyed by a tenant header, and a real
//! HTTP client. One node's admissions stay within the GCRA bound plus one lease, and a
//! refusal carries a `Retry-After` that is never early.

use redis_server_tests as common;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limitcore::Quota;
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy};
use limitcore_tower::{FnKey, RateLimitLayer, RequestHead};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leased_limiter_plugs_into_the_http_layer() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let quota: Quota = "20/s burst 5".parse().unwrap();
    let max_lease = 4;
    let leased = LeasedLimiter::new(
        redis,
        quota,
        LeaseConfig::new(max_lease),
        Policy::FailClosed,
    )
    .unwrap();
    // Every admission below happens after `start` (the bound is over [start, end]).
    let start = Instant::now();
    // Fetch the first lease for tenant "a" (the synchronous trait refuses a key's first
    // request until its lease arrives, about one round trip).
    let first = leased.acquire("a", 1).await;
    assert!(first.is_admitted(), "{first:?}");
    let tenant = FnKey::new(|head: RequestHead<'_>| {
        head.headers()
            .get("x-tenant")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    });
    let layer = RateLimitLayer::new(leased, tenant);
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let get = |tenant: &'static str| {
        let request = Request::get(format!("http://{addr}/"))
            .header("x-tenant", tenant)
            .body(Empty::new())
            .unwrap();
        client.request(request)
    };
    let (mut admitted, mut refused) = (1u64, 0u64);
    let mut retry_after = None;
    while start.elapsed() < Duration::from_millis(600) {
        let response = get("a").await.unwrap();
        match response.status() {
            StatusCode::OK => admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                let wait: u64 = response.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                retry_after.get_or_insert(wait);
            }
            other => panic!("unexpected status {other}"),
        }
    }
    let elapsed = start.elapsed();
    // One node: at most the GCRA bound over the run plus one lease (N·L with N = 1).
    let bound = common::gcra_bound(
        quota.burst(),
        quota.emission_interval_ns(),
        elapsed.as_nanos() as u64,
    ) + u64::from(max_lease);
    assert!(
        admitted <= bound,
        "{admitted} admitted in {elapsed:?}, bound {bound}"
    );
    assert!(
        admitted >= u64::from(quota.burst()),
        "{admitted} admitted: the leases flowed"
    );
    assert!(refused > 0, "a hammered tenant is refused");
    // `Retry-After` is whole seconds rounded up: at least 1 for a sub-second wait.
    assert!(retry_after.unwrap() >= 1);
    // Another tenant has its own limit on Redis.
    let other = get("b").await.unwrap();
    assert!(matches!(
        other.status(),
        StatusCode::OK | StatusCode::TOO_MANY_REQUESTS
    ));
}
