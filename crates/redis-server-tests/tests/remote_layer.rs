//! The exact Redis limit behind the HTTP layer's awaited seam (`RateLimitLayer::remote`),
//! end to end: a real redis-server, axum servers on loopback keyed by a tenant header, a real
//! HTTP client. Admissions are Redis's, exactly (the burst, then refusals whose
//! `Retry-After` is Redis's wait rounded up, never early; another tenant untouched), and with
//! the server killed the outage policy answers: `Policy::FailClosed` refuses with 429 (the
//! policy's decision), `Policy::Propagate` hands the error to the layer, which answers with
//! its `OnLimiterError` status. The leased limit behind the same seam (`AwaitLeases`) waits
//! for a key's lease where the synchronous layer refuses while it is fetched.

use redis_server_tests as common;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use limitcore_redis::{AwaitLeases, LeaseConfig, LeasedLimiter, Policy, RedisGcra};
use limitcore_tower::{FnKey, OnLimiterError, RateLimitLayer, RequestHead};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn tenant() -> FnKey<impl Fn(RequestHead<'_>) -> Option<String> + Clone + Send + Sync + 'static> {
    FnKey::new(|head: RequestHead<'_>| {
        head.headers()
            .get("x-tenant")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    })
}

/// An axum server on loopback with `gcra` behind the remote layer, answering "ok".
async fn serve(gcra: RedisGcra, on_error: OnLimiterError) -> SocketAddr {
    let layer = RateLimitLayer::remote(gcra, tenant())
        .on_limiter_error(on_error)
        .build()
        .unwrap();
    listen(app().layer(layer)).await
}

/// The routes every server here answers: `GET /` → "ok".
fn app() -> axum::Router {
    axum::Router::new().route("/", axum::routing::get(|| async { "ok" }))
}

/// `app` served on a free loopback port.
async fn listen(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

type Http = Client<HttpConnector, Empty<Bytes>>;

/// The status and `Retry-After` (seconds) of one GET as `tenant`.
async fn get(client: &Http, addr: SocketAddr, tenant: &str) -> (StatusCode, Option<u64>) {
    let request = Request::get(format!("http://{addr}/"))
        .header("x-tenant", tenant)
        .body(Empty::new())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (response.status(), retry)
}

/// The refusals' `Retry-After` (whole seconds, rounded up) against Redis's wait for the sixth
/// permit of "5/min burst 5": 12 s after the first admission, which came after the test read
/// its start, while every refusal came before it read `elapsed`. So each refusal's wait was
/// at least 12 s − `elapsed` and at most 12 s, and rounded up it still is: the bound moves
/// with the time the test measured, to the nanosecond, however long a loaded machine took.
/// A refusal whose wait was not Redis's (the outage policy's cooldown after a call that
/// missed its deadline, a lease's fetch estimate) says about a second and fails it; the
/// test configuration's deadline (1 s, [`common::config`]) keeps a slow round trip from
/// being one.
fn assert_retry_after_within_the_sixth_permits_wait(waits: &[u64], elapsed: Duration) {
    let least = 12.0 - elapsed.as_secs_f64();
    for &wait in waits {
        assert!(
            wait as f64 >= least && wait <= 12,
            "Retry-After {wait}: Redis's wait was at least {least} s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exact_limit_decides_behind_the_layer_and_its_outage_policy_answers() {
    let mut server = common::server();
    let redis = common::connect(&server).await;
    // 5 a minute, burst 5: one permit every 12 s, so nothing refills during the test.
    let quota = "5/min burst 5".parse().unwrap();
    let closed = RedisGcra::new(redis.clone(), quota, Policy::FailClosed)
        .unwrap()
        .with_prefix("lc:layer-closed:");
    let propagating = RedisGcra::new(redis.clone(), quota, Policy::Propagate)
        .unwrap()
        .with_prefix("lc:layer-propagate:");
    let closed = serve(closed, OnLimiterError::Admit).await;
    let propagating = serve(
        propagating,
        OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE),
    )
    .await;
    let client: Http = Client::builder(TokioExecutor::new()).build_http();

    // Redis decides: the burst of 5 for tenant "a", then refusals; tenant "b" untouched.
    let start = Instant::now();
    let mut statuses = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..8 {
        let (status, retry) = get(&client, closed, "a").await;
        statuses.push(status);
        if status == StatusCode::TOO_MANY_REQUESTS {
            waits.push(retry.expect("a refusal carries Retry-After"));
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(&statuses[..5], &[StatusCode::OK; 5]);
    assert_eq!(&statuses[5..], &[StatusCode::TOO_MANY_REQUESTS; 3]);
    // Redis's wait for the sixth permit is 12 s from the first admission: rounded up, it is
    // never below what is left of it.
    assert_retry_after_within_the_sixth_permits_wait(&waits, elapsed);
    assert_eq!(get(&client, closed, "b").await.0, StatusCode::OK);
    // The same limit under `Propagate`, while Redis answers: the same decisions.
    for i in 0..6 {
        let expected = if i < 5 {
            StatusCode::OK
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        assert_eq!(
            get(&client, propagating, "a").await.0,
            expected,
            "request {i}"
        );
    }

    // Redis is gone: the outage policy decides (fail closed: 429), or the error reaches the
    // layer (503, no Retry-After: nothing says when Redis is back).
    server.kill();
    for _ in 0..4 {
        let (status, _) = get(&client, closed, "c").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        let (status, retry) = get(&client, propagating, "c").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_limit_behind_the_awaited_seam_waits_for_its_lease() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // 5 a minute, burst 5, leases of at most 2 cells: nothing refills during the test, and
    // every cell Redis grants goes to this one node.
    let quota = "5/min burst 5".parse().unwrap();
    let leased = |prefix: &str| {
        LeasedLimiter::new(
            redis.clone(),
            quota,
            LeaseConfig::new(2).prefix(prefix),
            Policy::FailClosed,
        )
        .unwrap()
    };
    let synchronous =
        listen(app().layer(RateLimitLayer::new(leased("lc:layer-sync:"), tenant()))).await;
    let awaited = AwaitLeases::new(leased("lc:layer-awaited:"));
    let awaited =
        listen(app().layer(RateLimitLayer::remote(awaited, tenant()).build().unwrap())).await;
    let client: Http = Client::builder(TokioExecutor::new()).build_http();

    // The synchronous layer refuses a fresh key's first request: the node holds no cells
    // for it until the lease it starts fetching arrives.
    assert_eq!(
        get(&client, synchronous, "a").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );

    // Behind the awaited seam the same request waits for the lease: the whole burst of 5 is
    // admitted, one request at a time, then Redis refuses the next lease and the node
    // refuses locally with its wait (12 s a permit: never early).
    let start = Instant::now();
    let mut statuses = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..8 {
        let (status, retry) = get(&client, awaited, "a").await;
        statuses.push(status);
        if status == StatusCode::TOO_MANY_REQUESTS {
            waits.push(retry.expect("a refusal carries Retry-After"));
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(&statuses[..5], &[StatusCode::OK; 5], "{statuses:?}");
    assert_eq!(
        &statuses[5..],
        &[StatusCode::TOO_MANY_REQUESTS; 3],
        "{statuses:?}"
    );
    assert_retry_after_within_the_sixth_permits_wait(&waits, elapsed);
    // Another tenant's first request is admitted at once (after its own lease).
    assert_eq!(get(&client, awaited, "b").await.0, StatusCode::OK);
}
