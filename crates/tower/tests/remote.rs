//! The awaited decision seam behind the layer (`RateLimitLayer::remote`): a limiter that
//! really awaits (`common::far::Far`: a timer sleep, then a channel round trip to a task
//! holding a `Keyed` limiter) gives the same answers as the synchronous layer over the same
//! limit on the same script (statuses, bodies, every header, outcomes), waits without
//! holding the runtime, and its failures are answered by the layer's error policy. Real
//! servers on loopback, a real client.

mod common;

use axum::Router;
use axum::routing::get;
use common::far::{Far, Held};
use common::{Reply, client, get as fetch, ok, serve};
use http::{HeaderName, StatusCode};
use limitcore::Keyed;
use limitcore::clock::ManualClock;
use limitcore_tower::{
    Builder, HeaderKey, Local, MissingKey, OnLimiterError, RateLimitHeaders, RateLimitLayer,
    Remote, RequestHead,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const KEY: HeaderName = HeaderName::from_static("x-client");

fn cost_header(head: &RequestHead<'_>) -> u32 {
    head.headers()
        .get("x-cost")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

/// A small deterministic generator (xorshift64*), so that every run sends the same requests.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// A layer configuration, applied alike to both builders.
#[derive(Debug, Clone, Copy)]
struct Setup {
    headers: RateLimitHeaders,
    legacy: bool,
    problem: bool,
    dry_run: bool,
    reject_missing: bool,
}

fn configure<L, M>(b: Builder<HeaderKey, L, M>, s: Setup) -> Builder<HeaderKey, L, M> {
    let b = b
        .cost(cost_header)
        .headers(s.headers)
        .legacy_headers(s.legacy)
        .problem_details(s.problem)
        .dry_run(s.dry_run)
        .policy_name("per-client");
    if s.reject_missing {
        b.on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
    } else {
        b
    }
}

/// What must agree: status, body, every header but `date`.
fn comparable(reply: &Reply) -> (StatusCode, Vec<(String, String)>, Vec<u8>) {
    let mut headers: Vec<(String, String)> = reply
        .headers
        .iter()
        .filter(|(name, _)| *name != "date")
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    headers.sort();
    (reply.status, headers, reply.body.to_vec())
}

/// Runs the same script of 120 requests (three clients and requests with no key, costs
/// `0..=burst + 1`, the two limits' clocks moved alike by 0 to 2 emission intervals between
/// requests) against the synchronous layer and the awaited one, and compares every answer.
async fn same_answers(setup: Setup) {
    let quota: limitcore::Quota = "2/s burst 3".parse().unwrap();
    let (local_clock, far_clock) = (ManualClock::new(), ManualClock::new());
    let local: Held = Keyed::with_clock(quota, local_clock.clone()).unwrap();
    let far = Far::spawn(
        Keyed::with_clock(quota, far_clock.clone()).unwrap(),
        Duration::from_millis(1),
    );
    let sync_layer = configure(RateLimitLayer::builder(local, HeaderKey::new(KEY)), setup);
    let remote_layer = configure(RateLimitLayer::remote(far, HeaderKey::new(KEY)), setup);
    let sync_addr = serve(
        Router::new()
            .route("/", get(ok))
            .layer(sync_layer.build().unwrap()),
    )
    .await;
    let remote_addr = serve(
        Router::new()
            .route("/", get(ok))
            .layer(remote_layer.build().unwrap()),
    )
    .await;
    let c = client();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..120 {
        let step = quota.emission_interval_ns() / 4 * rng.below(9);
        local_clock.advance_nanos(step);
        far_clock.advance_nanos(step);
        let cost = rng.below(u64::from(quota.burst()) + 2).to_string();
        let client_id = ["a", "b", "c", ""][rng.below(4) as usize];
        let mut headers = vec![("x-cost", cost.as_str())];
        if !client_id.is_empty() {
            headers.push(("x-client", client_id));
        }
        let sync = fetch(&c, sync_addr, "/", &headers).await;
        let remote = fetch(&c, remote_addr, "/", &headers).await;
        assert_eq!(
            comparable(&sync),
            comparable(&remote),
            "{setup:?} request {i} ({headers:?})"
        );
        *statuses.entry(sync.status.as_u16()).or_insert(0) += 1;
    }
    // The script reaches every answer of the setup, so the comparison bit.
    let expected: &[u16] = match (setup.dry_run, setup.reject_missing) {
        (true, _) => &[200],
        (false, false) => &[200, 413, 429],
        (false, true) => &[200, 401, 413, 429],
    };
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        expected,
        "{statuses:?}"
    );
    assert!(statuses.values().all(|&n| n >= 5), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_answers_as_the_synchronous_layer() {
    let base = Setup {
        headers: RateLimitHeaders::OnRefusal,
        legacy: false,
        problem: false,
        dry_run: false,
        reject_missing: false,
    };
    same_answers(base).await;
    same_answers(Setup {
        headers: RateLimitHeaders::Always,
        legacy: true,
        problem: true,
        reject_missing: true,
        ..base
    })
    .await;
    same_answers(Setup {
        headers: RateLimitHeaders::Off,
        ..base
    })
    .await;
    same_answers(Setup {
        headers: RateLimitHeaders::Always,
        dry_run: true,
        ..base
    })
    .await;
}

/// A router whose handler counts its calls, behind `layer`.
async fn counted<M: Send + Sync + 'static>(
    layer: RateLimitLayer<HeaderKey, Far, M>,
) -> (SocketAddr, Arc<AtomicUsize>)
where
    RateLimitLayer<HeaderKey, Far, M>: tower::Layer<axum::routing::Route>,
    <RateLimitLayer<HeaderKey, Far, M> as tower::Layer<axum::routing::Route>>::Service:
        tower::Service<
                axum::extract::Request,
                Response = axum::response::Response,
                Error = std::convert::Infallible,
                Future: Send + 'static,
            > + Clone
            + Send
            + Sync
            + 'static,
{
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                seen.fetch_add(1, Ordering::SeqCst);
                ok()
            }),
        )
        .layer(layer);
    (serve(app).await, calls)
}

fn far(quota: &str, clock: &ManualClock) -> Far {
    Far::spawn(
        Keyed::with_clock(quota.parse().unwrap(), clock.clone()).unwrap(),
        Duration::from_millis(1),
    )
}

const A: [(&str, &str); 1] = [("x-client", "a")];

#[tokio::test]
async fn a_failed_decision_is_admitted_by_default() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::remote(far("1/min", &clock), HeaderKey::new(KEY))
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let (addr, calls) = counted(layer.clone()).await;
    let c = client();
    let first = fetch(&c, addr, "/", &A).await;
    assert_eq!((first.status, first.outcome()), (StatusCode::OK, "PASSED"));
    assert!(first.header("ratelimit").is_some());
    assert_eq!(
        fetch(&c, addr, "/", &A).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    layer.limiter().set_down(true);
    for _ in 0..3 {
        let reply = fetch(&c, addr, "/", &A).await;
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        assert_eq!(reply.outcome(), "LIMITER_ERROR");
        assert_eq!(reply.header("ratelimit"), None, "no decision, no state");
        assert_eq!(reply.header("retry-after"), None);
        assert_eq!(&reply.body[..], b"ok");
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the 3 failures reached the handler"
    );
    // Back up: the limit holds again (the failures charged nothing).
    layer.limiter().set_down(false);
    assert_eq!(
        fetch(&c, addr, "/", &A).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Gone for good: still admitted.
    layer.limiter().stop();
    let reply = fetch(&c, addr, "/", &A).await;
    assert_eq!(
        (reply.status, reply.outcome()),
        (StatusCode::OK, "LIMITER_ERROR")
    );
}

#[tokio::test]
async fn a_failed_decision_is_refused_when_so_configured() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::remote(far("1/min", &clock), HeaderKey::new(KEY))
        .on_limiter_error(OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE))
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let (addr, calls) = counted(layer.clone()).await;
    let c = client();
    assert_eq!(fetch(&c, addr, "/", &A).await.status, StatusCode::OK);
    layer.limiter().set_down(true);
    let answered = layer.limiter().answered.load(Ordering::SeqCst);
    for _ in 0..3 {
        let reply = fetch(&c, addr, "/", &A).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
        assert_eq!(reply.outcome(), "LIMITER_ERROR");
        assert_eq!(reply.header("retry-after"), None);
        assert_eq!(reply.header("ratelimit"), None);
        assert_eq!(&reply.body[..], b"rate limiter unavailable\n");
    }
    // Each was asked of the limiter (and failed there), none reached the handler.
    assert_eq!(
        layer.limiter().answered.load(Ordering::SeqCst),
        answered + 3
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    layer.limiter().stop();
    assert_eq!(
        fetch(&c, addr, "/", &A).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );

    // A dry run passes whatever the policy.
    let dry = RateLimitLayer::remote(far("1/min", &clock), HeaderKey::new(KEY))
        .on_limiter_error(OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE))
        .dry_run(true)
        .build()
        .unwrap();
    dry.limiter().set_down(true);
    let (addr, calls) = counted(dry).await;
    let reply = fetch(&c, addr, "/", &A).await;
    assert_eq!(
        (reply.status, reply.outcome()),
        (StatusCode::OK, "LIMITER_ERROR")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Decisions 150 ms away each: 16 requests at once are all answered in about one round trip
/// (serialized they would take 2.4 s at least: each decision sleeps 150 ms on tokio's timer,
/// which never fires early), and exactly the burst is admitted. The ceiling is that 2.4 s,
/// so a loaded machine has over 2 s beyond the one round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_for_their_decisions_concurrently() {
    let clock = ManualClock::new();
    let slow = Far::spawn(
        Keyed::with_clock("5/s".parse().unwrap(), clock.clone()).unwrap(),
        Duration::from_millis(150),
    );
    let layer = RateLimitLayer::remote(slow, HeaderKey::new(KEY))
        .build()
        .unwrap();
    let (addr, calls) = counted(layer).await;
    let c = client();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            fetch(&c, addr, "/", &A).await.status
        }));
    }
    let mut ok = 0;
    for task in tasks {
        match task.await.unwrap() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("status {other}"),
        }
    }
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(
        took < Duration::from_millis(16 * 150),
        "serialized? {took:?}"
    );
    assert_eq!((ok, calls.load(Ordering::SeqCst)), (5, 5));
}

/// The layer's types: the awaited service's future is `Send` (axum and hyper need it), and
/// the default mode is `Local`.
#[test]
fn types() {
    fn send<T: Send>() {}
    type Svc = limitcore_tower::RateLimit<axum::routing::Route, HeaderKey, Far, Remote>;
    send::<<Svc as tower::Service<axum::extract::Request>>::Future>();
    let _: Option<RateLimitLayer<HeaderKey, Held, Local>> = None::<RateLimitLayer<HeaderKey, Held>>;
}
