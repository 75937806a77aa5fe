//! The layer on real servers on loopback (axum and plain hyper), driven by a real HTTP
//! client, the limiter on a `ManualClock` (except where a test says otherwise).

mod common;

use axum::Router;
use axum::routing::get;
use common::{client, count, get as fetch, get_on_new_connection, ok, serve, serve_hyper};
use http::StatusCode;
use limitcore::clock::ManualClock;
use limitcore::rules::GcraRule;
use limitcore::{All, Gcra, Global, Keyed, KeyedRateLimiter, KeyedRefund, Quota};
use limitcore_tower::{
    ForwardHeader, ForwardedIp, GlobalKey, HeaderKey, LimitReq, MissingKey, PeerIp,
    RateLimitHeaders, RateLimitLayer, Trust,
};
use std::net::IpAddr;
use std::time::{Duration, Instant};

type PerIp = Keyed<IpAddr, GcraRule, ManualClock>;

fn per_ip(quota: &str, clock: &ManualClock) -> PerIp {
    Keyed::with_clock(quota.parse().unwrap(), clock.clone()).unwrap()
}

fn loopback() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn app(layer: RateLimitLayer<PeerIp, PerIp>) -> Router {
    Router::new().route("/", get(ok)).layer(layer)
}

/// Sends `n` requests one after the other; their statuses.
async fn burst(addr: std::net::SocketAddr, n: usize) -> Vec<StatusCode> {
    let c = client();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(fetch(&c, addr, "/", &[]).await.status);
    }
    out
}

#[tokio::test]
async fn scripted_sequence_gives_exact_counts() {
    let clock = ManualClock::new();
    let addr = serve(app(RateLimitLayer::new(
        per_ip("3/s", &clock),
        PeerIp::new(),
    )))
    .await;
    let ok_of = |s: &[StatusCode]| count(s, StatusCode::OK);
    let refused_of = |s: &[StatusCode]| count(s, StatusCode::TOO_MANY_REQUESTS);

    let s = burst(addr, 5).await; // t = 0: the burst of 3
    assert_eq!((ok_of(&s), refused_of(&s)), (3, 2));
    clock.advance(Duration::from_millis(333)); // one interval is 333.33 ms: not yet
    let s = burst(addr, 1).await;
    assert_eq!((ok_of(&s), refused_of(&s)), (0, 1));
    clock.advance(Duration::from_millis(1)); // now one permit
    let s = burst(addr, 2).await;
    assert_eq!((ok_of(&s), refused_of(&s)), (1, 1));
    clock.advance(Duration::from_secs(10)); // full again: 3, never more
    let s = burst(addr, 4).await;
    assert_eq!((ok_of(&s), refused_of(&s)), (3, 1));
}

/// The axum #3682 scenario: tower's `RateLimit` kept one state per connection's service;
/// here 200 connections at once against 5/s, on a frozen clock, get exactly 5 admissions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_connections_with_a_frozen_clock_get_exactly_five() {
    let clock = ManualClock::new();
    let addr = serve(app(RateLimitLayer::new(
        per_ip("5/s", &clock),
        PeerIp::new(),
    )))
    .await;
    let tasks: Vec<_> = (0..200)
        .map(|_| tokio::spawn(get_on_new_connection(addr)))
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(count(&statuses, StatusCode::OK), 5);
    assert_eq!(count(&statuses, StatusCode::TOO_MANY_REQUESTS), 195);
}

#[tokio::test]
async fn clones_of_the_layer_and_service_share_one_limit() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(per_ip("4/s", &clock), PeerIp::new());
    // Two servers, two routers, one layer (cloned): one limit.
    let a = serve(app(layer.clone())).await;
    let b = serve(Router::new().route("/", get(ok)).layer(layer.clone())).await;
    let mut statuses = burst(a, 3).await;
    statuses.extend(burst(b, 3).await);
    assert_eq!(count(&statuses, StatusCode::OK), 4);
    assert_eq!(statuses[3], StatusCode::OK);
    assert_eq!(statuses[4], StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(layer.limiter().snapshot_at(&loopback(), 0).remaining, 0);
}

/// `Retry-After` is the exact wait rounded up to whole seconds: advancing by it admits the
/// same request, advancing by one second less does not.
#[tokio::test]
async fn retry_after_is_honoured_exactly() {
    for quota in ["1/min", "5/s", "3/2s", "100/min burst 20", "7/10s burst 2"] {
        let clock = ManualClock::starting_at(1_234_567);
        let addr = serve(app(RateLimitLayer::new(
            per_ip(quota, &clock),
            PeerIp::new(),
        )))
        .await;
        let c = client();
        for _ in 0..3 {
            // Exhaust what is left; the first refusal is the one to honour.
            let refused = loop {
                let reply = fetch(&c, addr, "/", &[]).await;
                if reply.status != StatusCode::OK {
                    break reply;
                }
            };
            assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "{quota}");
            let secs: u64 = refused.header("retry-after").unwrap().parse().unwrap();
            assert!(secs >= 1, "{quota}");
            clock.advance(Duration::from_secs(secs - 1));
            let early = fetch(&c, addr, "/", &[]).await;
            assert_eq!(
                early.status,
                StatusCode::TOO_MANY_REQUESTS,
                "{quota}: early by 1 s"
            );
            clock.advance(Duration::from_secs(1));
            let on_time = fetch(&c, addr, "/", &[]).await;
            assert_eq!(on_time.status, StatusCode::OK, "{quota}: after Retry-After");
        }
    }
}

/// Parses `RateLimit-Policy` and `RateLimit` as structured-field Lists with `sfv`, and
/// returns (name, q, w) and (name, r, t).
fn parse_fields(reply: &common::Reply) -> ((String, i64, i64), (String, i64, i64)) {
    fn item(list: &str, a: &str, b: &str) -> (String, i64, i64) {
        let list = sfv::Parser::new(list)
            .parse::<sfv::List>()
            .expect("a structured-field List");
        assert_eq!(list.len(), 1);
        let sfv::ListEntry::Item(item) = &list[0] else {
            panic!("an Item, not an Inner List")
        };
        let name = item
            .bare_item
            .as_string()
            .expect("a String")
            .as_str()
            .to_owned();
        let int = |k: &str| {
            let key = sfv::KeyRef::from_str(k).unwrap();
            item.params
                .get(key)
                .and_then(|v| v.as_integer())
                .map(i64::from)
                .expect(k)
        };
        (name, int(a), int(b))
    }
    (
        item(reply.header("ratelimit-policy").unwrap(), "q", "w"),
        item(reply.header("ratelimit").unwrap(), "r", "t"),
    )
}

#[tokio::test]
async fn ratelimit_fields_parse_and_agree_with_the_limiter() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("10/min burst 4", &clock), PeerIp::new())
        .headers(RateLimitHeaders::Always)
        .legacy_headers(true)
        .policy_name("per-ip \"v1\"")
        .build()
        .unwrap();
    let addr = serve(app(layer.clone())).await;
    let c = client();
    for step in 0..12 {
        if step % 3 == 0 {
            clock.advance(Duration::from_millis(2_500));
        }
        let reply = fetch(&c, addr, "/", &[]).await;
        let ((name, q, w), (name2, r, t)) = parse_fields(&reply);
        assert_eq!(name, "per-ip \"v1\"");
        assert_eq!(name2, name);
        assert_eq!((q, w), (10, 60));
        // The state the decision left is the limiter's state now (the clock is frozen).
        let state = layer.limiter().snapshot_at(&loopback(), clock_now(&clock));
        assert_eq!(r, i64::from(state.remaining), "step {step}");
        assert_eq!(
            t as u64,
            limitcore_tower::delay_seconds(state.full_after),
            "step {step}"
        );
        assert_eq!(reply.header("x-ratelimit-limit"), Some("10"));
        assert_eq!(
            reply.header("x-ratelimit-remaining").unwrap(),
            r.to_string()
        );
        assert_eq!(reply.header("x-ratelimit-reset").unwrap(), t.to_string());
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(r, 0);
            assert!(reply.header("retry-after").is_some());
        }
    }
}

fn clock_now(clock: &ManualClock) -> u64 {
    use limitcore::clock::Clock;
    clock.now()
}

#[tokio::test]
async fn refusals_carry_fields_and_problem_details() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("1/s", &clock), PeerIp::new())
        .problem_details(true)
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .build()
        .unwrap();
    let addr = serve(app(layer)).await;
    let c = client();
    let first = fetch(&c, addr, "/", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.header("ratelimit"),
        None,
        "fields only on refusals by default"
    );
    assert_eq!(first.outcome(), "PASSED");
    let refused = fetch(&c, addr, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.outcome(), "REJECTED");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.header("ratelimit"), Some("\"default\";r=0;t=1"));
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"default\";q=1;w=1")
    );
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    let body = std::str::from_utf8(&refused.body).unwrap();
    assert!(
        body.contains(
            "\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\""
        )
    );
    assert!(body.contains("\"status\":503"));
    assert!(body.contains("\"violated-policies\":[\"default\"]"));
}

#[tokio::test]
async fn dry_run_never_refuses_but_reports() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("2/s", &clock), PeerIp::new())
        .dry_run(true)
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let addr = serve(app(layer.clone())).await;
    let c = client();
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        let reply = fetch(&c, addr, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(&reply.body[..], b"ok");
        assert_eq!(reply.header("retry-after"), None);
        outcomes.push(reply.outcome().to_owned());
    }
    assert_eq!(
        outcomes,
        [
            "PASSED",
            "PASSED",
            "REJECTED_DRY_RUN",
            "REJECTED_DRY_RUN",
            "REJECTED_DRY_RUN"
        ]
    );
    // Admissions were charged as usual; dry-run refusals charged nothing.
    assert_eq!(
        layer.limiter().snapshot_at(&loopback(), 0).full_after,
        Duration::from_secs(1)
    );
}

/// Delay mode: nginx's `burst=5 delay=2` at 5 r/s. From an idle key, 7 requests at once: 3
/// start at once, 3 are held for their slots 200, 400 and 600 ms after the first arrival,
/// and the 7th (excess 6 > burst 5) is refused.
///
/// The limiter is on a manual clock, so the 7 decisions all come at its time 0 however the
/// requests are spread in real time (on the real clock they had to arrive within 200 ms of
/// each other), and the waits the layer reports are exact. The holds themselves are tokio
/// sleeps on the real clock, measured from before the layer to the handler: never shorter
/// than the wait, and at most 60 ms longer. A loaded machine can make one run's wake-up
/// later than that, so a run that misses only that ceiling is tried again, up to 3 times; a
/// layer that holds a request past its wait misses it on every try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_mode_starts_requests_at_their_slots() {
    let mut late = Vec::new();
    for _ in 0..3 {
        match delay_mode_run().await {
            Ok(()) => return,
            Err(e) => late.push(e),
        }
    }
    panic!("held too long on every try: {late:?}");
}

/// One run of [`delay_mode_starts_requests_at_their_slots`]: `Err` with the holds if one
/// passed its wait by more than 60 ms; every other check fails the test at once.
async fn delay_mode_run() -> Result<(), Vec<(Duration, Duration)>> {
    let nginx = LimitReq::new("5/s".parse().unwrap(), 5).delay(2);
    assert_eq!(nginx.max_wait(), Duration::from_millis(600));
    let limiter: PerIp = nginx.keyed(ManualClock::new()).unwrap();
    let layer = RateLimitLayer::builder(limiter, PeerIp::new())
        .delay(nginx.max_wait())
        .build()
        .unwrap();
    // Outside the layer: each request's arrival, stamped on the way in, and the wait the
    // layer reports (its `Outcome`), as a header on the way out. The handler answers with
    // how long the request was held since its arrival (ns).
    let app = Router::new()
        .route(
            "/",
            get(
                |axum::Extension(arrived): axum::Extension<Instant>| async move {
                    arrived.elapsed().as_nanos().to_string()
                },
            ),
        )
        .layer(layer)
        .layer(axum::middleware::map_request(
            |mut req: axum::extract::Request| async move {
                req.extensions_mut().insert(Instant::now());
                req
            },
        ))
        .layer(axum::middleware::map_response(
            |mut response: axum::response::Response| async move {
                if let Some(limitcore_tower::Outcome::Delayed { wait }) = response
                    .extensions()
                    .get::<limitcore_tower::Outcome>()
                    .copied()
                {
                    let wait = http::HeaderValue::from_str(&wait.as_nanos().to_string());
                    response.headers_mut().insert("x-wait-ns", wait.unwrap());
                }
                response
            },
        ));
    let addr = serve(app).await;
    let c = client();
    let replies: Vec<_> = (0..7)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { fetch(&c, addr, "/", &[]).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    let mut holds = Vec::new();
    for r in replies {
        let reply = r.await.unwrap();
        outcomes.push((reply.status.as_u16(), reply.outcome().to_owned()));
        if reply.status == StatusCode::OK {
            let nanos = |text: &str| Duration::from_nanos(text.parse().unwrap());
            let wait = reply.header("x-wait-ns").map_or(Duration::ZERO, nanos);
            let held = nanos(std::str::from_utf8(&reply.body).unwrap());
            holds.push((wait, held));
        }
    }
    outcomes.sort();
    let expected = [
        (200, "DELAYED"),
        (200, "DELAYED"),
        (200, "DELAYED"),
        (200, "PASSED"),
        (200, "PASSED"),
        (200, "PASSED"),
        (429, "REJECTED"),
    ];
    assert_eq!(outcomes, expected.map(|(s, o)| (s, o.to_owned())));
    holds.sort();
    let waits: Vec<u64> = holds.iter().map(|(w, _)| w.as_millis() as u64).collect();
    assert_eq!(waits, [0, 0, 0, 200, 400, 600], "the slots, exactly");
    for &(wait, held) in &holds {
        assert!(held >= wait, "held {held:?}, less than its wait {wait:?}");
    }
    if holds
        .iter()
        .all(|&(wait, held)| held <= wait + Duration::from_millis(60))
    {
        Ok(())
    } else {
        Err(holds)
    }
}

/// nodelay is reject mode with a burst of B + 1, as nginx's `burst=B nodelay`.
#[tokio::test]
async fn limit_req_nodelay_admits_burst_plus_one_at_once() {
    let clock = ManualClock::new();
    let nginx = LimitReq::new("2/s".parse().unwrap(), 3).nodelay();
    assert_eq!(nginx.max_wait(), Duration::ZERO);
    let layer = RateLimitLayer::builder(nginx.keyed(clock.clone()).unwrap(), PeerIp::new())
        .delay(nginx.max_wait())
        .build()
        .unwrap();
    let addr = serve(Router::new().route("/", get(ok)).layer(layer)).await;
    let s = burst(addr, 6).await;
    assert_eq!(count(&s, StatusCode::OK), 4);
}

#[tokio::test]
async fn route_layer_limits_only_its_route() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(per_ip("1/s", &clock), PeerIp::new());
    let app = Router::new()
        .route("/limited", get(ok))
        .route_layer(layer)
        .route("/free", get(ok));
    let addr = serve(app).await;
    let c = client();
    assert_eq!(
        fetch(&c, addr, "/limited", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        fetch(&c, addr, "/limited", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    for _ in 0..3 {
        assert_eq!(fetch(&c, addr, "/free", &[]).await.status, StatusCode::OK);
    }
    // No route, no limit: route_layer answers 404 without charging.
    assert_eq!(
        fetch(&c, addr, "/none", &[]).await.status,
        StatusCode::NOT_FOUND
    );
}

/// A plain tower stack on hyper (no axum): the peer `SocketAddr` extension is the key.
#[tokio::test]
async fn plain_hyper_stack_keys_by_the_peer_extension() {
    let clock = ManualClock::new();
    let inner = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
            bytes::Bytes::from_static(b"ok"),
        )))
    });
    let layer = RateLimitLayer::builder(per_ip("2/s", &clock), PeerIp::new())
        .on_missing_key(MissingKey::Reject(StatusCode::INTERNAL_SERVER_ERROR))
        .build()
        .unwrap();
    let svc = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(inner);
    let addr = serve_hyper(svc).await;
    let s = burst(addr, 4).await;
    assert_eq!(
        s,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    assert_eq!(layer.limiter().len(), 1);
}

/// An inner service whose body the layer cannot write in (here `Empty`, as hyper's
/// `Incoming` in a proxy) is mapped to `Either::Left`: passed
/// responses keep the inner body, the layer's refusals are the `Either::Right` side.
#[tokio::test]
async fn any_inner_body_through_either() {
    use http_body_util::{Either, Empty};
    let clock = ManualClock::new();
    let inner = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
        let mut response = http::Response::new(Empty::<bytes::Bytes>::new());
        response
            .headers_mut()
            .insert("x-inner", "1".parse().unwrap());
        Ok::<_, std::convert::Infallible>(response)
    });
    let layer = RateLimitLayer::builder(per_ip("1/s", &clock), PeerIp::new())
        .build()
        .unwrap();
    let svc = tower::ServiceBuilder::new()
        .layer(layer)
        .map_response(|r: http::Response<Empty<bytes::Bytes>>| r.map(Either::Left))
        .service(inner);
    let addr = serve_hyper(svc).await;
    let c = client();
    let passed = fetch(&c, addr, "/", &[]).await;
    assert_eq!(passed.status, StatusCode::OK);
    assert_eq!(passed.header("x-inner"), Some("1"));
    assert!(passed.body.is_empty());
    let refused = fetch(&c, addr, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("x-inner"), None);
    assert!(!refused.body.is_empty(), "the layer's refusal body");
}

/// Per client and global at once, all or nothing (`All` over `Keyed` and `Global`), keyed
/// by the client address behind one trusted proxy.
#[tokio::test]
async fn per_client_and_global_limits_all_or_nothing() {
    let clock = ManualClock::new();
    let per_client: Keyed<IpAddr, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(2).unwrap(), clock.clone()).unwrap();
    let global =
        Global::new(Gcra::with_clock(Quota::per_second(3).unwrap(), clock.clone()).unwrap());
    let both: All<Box<dyn KeyedRefund<IpAddr>>> =
        All::new(vec![Box::new(per_client), Box::new(global)]);
    let layer = RateLimitLayer::new(
        both,
        ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(1)),
    );
    let addr = serve(Router::new().route("/", get(ok)).layer(layer.clone())).await;
    let c = client();
    let from = |ip: &'static str| [("x-forwarded-for", ip)];
    let mut got = Vec::new();
    for ip in [
        "192.0.2.1",
        "192.0.2.1",
        "192.0.2.1",
        "192.0.2.2",
        "192.0.2.3",
    ] {
        got.push(fetch(&c, addr, "/", &from(ip)).await.status.as_u16());
    }
    // a, a, (a refused by its own limit: the global limit keeps no charge), b, (c: global).
    assert_eq!(got, [200, 200, 429, 200, 429]);
    let b: IpAddr = "192.0.2.2".parse().unwrap();
    assert_eq!(layer.limiter().snapshot_at(&b, 0).remaining, 0); // min of b's 1 and global's 0
}

/// Per-key quota overrides (tenants) through `Keyed::set_quota`, keyed by a header.
#[tokio::test]
async fn tenant_quota_overrides_by_header() {
    let clock = ManualClock::new();
    let per_tenant: Keyed<http::HeaderValue, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(1).unwrap(), clock.clone()).unwrap();
    per_tenant
        .reconfigure_key(
            http::HeaderValue::from_static("gold"),
            Quota::per_second(5).unwrap(),
        )
        .unwrap();
    let layer = RateLimitLayer::new(
        per_tenant,
        HeaderKey::new(http::HeaderName::from_static("x-tenant")),
    );
    let addr = serve(Router::new().route("/", get(ok)).layer(layer)).await;
    let c = client();
    let admitted = |tenant: &'static str| {
        let c = c.clone();
        async move {
            let mut n = 0;
            for _ in 0..8 {
                let headers: &[(&str, &str)] = if tenant.is_empty() {
                    &[]
                } else {
                    &[("x-tenant", tenant)]
                };
                n += usize::from(fetch(&c, addr, "/", headers).await.status == StatusCode::OK);
            }
            n
        }
    };
    assert_eq!(admitted("gold").await, 5);
    assert_eq!(admitted("free").await, 1);
    // No header: the shared bucket of the empty key, with the default quota.
    assert_eq!(admitted("").await, 1);
}

#[tokio::test]
async fn missing_keys_get_the_configured_answer() {
    let clock = ManualClock::new();
    let behind_proxy = || ForwardedIp::new(ForwardHeader::Forwarded, Trust::Hops(1));
    // Default: requests with no usable key share the bucket 0.0.0.0.
    let shared = RateLimitLayer::new(per_ip("2/s", &clock), behind_proxy());
    let addr = serve(Router::new().route("/", get(ok)).layer(shared.clone())).await;
    let c = client();
    let mut statuses = Vec::new();
    for forwarded in ["for=unknown", "for=_hidden", "proto=http", "for=\"[::]\""] {
        statuses.push(
            fetch(&c, addr, "/", &[("forwarded", forwarded)])
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 429, 429]);
    assert_eq!(shared.limiter().len(), 1);
    let good = fetch(
        &c,
        addr,
        "/",
        &[("forwarded", "for=\"[2001:db8::1]:4711\"")],
    )
    .await;
    assert_eq!(good.status, StatusCode::OK);

    // Or a refusal with a clear status, never a 500.
    let strict = RateLimitLayer::builder(per_ip("2/s", &clock), behind_proxy())
        .on_missing_key(MissingKey::Reject(StatusCode::BAD_REQUEST))
        .build()
        .unwrap();
    let addr = serve(Router::new().route("/", get(ok)).layer(strict)).await;
    let reply = fetch(&c, addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.outcome(), "MISSING_KEY");
    assert_eq!(reply.header("retry-after"), None);

    // A global limit never misses a key.
    let global = RateLimitLayer::new(
        Global::new(Gcra::with_clock(Quota::per_second(1).unwrap(), clock.clone()).unwrap()),
        GlobalKey,
    );
    let addr = serve(Router::new().route("/", get(ok)).layer(global)).await;
    assert_eq!(
        burst(addr, 2).await,
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );
}

/// A client that writes its own `X-Forwarded-For` or `Forwarded` entries gets no new
/// budget: only the entry the trusted proxy appended (here the test plays the proxy), or
/// the peer address when the peer is not a trusted proxy, is the key.
#[tokio::test]
async fn forged_forwarding_headers_get_no_new_budget() {
    let clock = ManualClock::new();
    type Forge = fn(usize) -> String;
    let cases: Vec<(ForwardedIp, Forge)> = vec![
        (
            ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(1)),
            |i| format!("10.9.{}.{}, 203.0.113.7", i / 250, i % 250),
        ),
        (
            ForwardedIp::new(ForwardHeader::Forwarded, Trust::Hops(1)),
            |i| format!("for=\"[2001:db8::{i:x}]\";proto=https, for=203.0.113.7"),
        ),
        (
            // The loopback peer is a trusted proxy; the client forged entries that look trusted.
            ForwardedIp::new(
                ForwardHeader::XForwardedFor,
                Trust::networks(["127.0.0.0/8", "10.0.0.0/8"]).unwrap(),
            ),
            |i| {
                format!(
                    "198.51.{}.{}, 10.0.0.{}, 203.0.113.7, 10.1.1.1",
                    i / 250,
                    i % 250,
                    i % 250
                )
            },
        ),
        (
            // The peer is not a trusted proxy: the header is ignored, the peer is the key.
            ForwardedIp::new(
                ForwardHeader::XForwardedFor,
                Trust::networks(["10.0.0.0/8"]).unwrap(),
            ),
            |i| format!("198.51.100.{}", i % 250),
        ),
    ];
    for (n, (extractor, forged)) in cases.into_iter().enumerate() {
        let layer = RateLimitLayer::new(per_ip("3/s", &clock), extractor);
        let addr = serve(Router::new().route("/", get(ok)).layer(layer.clone())).await;
        let c = client();
        let mut admitted = 0;
        for i in 0..20 {
            let xff = forged(i);
            let name = if n == 1 {
                "forwarded"
            } else {
                "x-forwarded-for"
            };
            admitted +=
                usize::from(fetch(&c, addr, "/", &[(name, &xff)]).await.status == StatusCode::OK);
        }
        assert_eq!(admitted, 3, "case {n}");
        assert_eq!(layer.limiter().len(), 1, "case {n}");
    }
}

/// Per-route limits by layering: a route's own layer inside a server-wide one. Both
/// decide, and with the fields on every response both policies are listed (the fields are
/// structured-field Lists; each layer appends its item).
#[tokio::test]
async fn per_route_and_server_wide_layers_both_report() {
    let clock = ManualClock::new();
    let route = RateLimitLayer::builder(per_ip("2/s", &clock), PeerIp::new())
        .policy_name("search")
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let server = RateLimitLayer::builder(per_ip("10/s", &clock), PeerIp::new())
        .policy_name("server")
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/search", get(ok).layer(route))
        .route("/", get(ok))
        .layer(server);
    let addr = serve(app).await;
    let c = client();
    let names = |reply: &common::Reply, field: &str| -> Vec<(String, i64)> {
        let joined: Vec<&str> = reply
            .headers
            .get_all(field)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        let list = sfv::Parser::new(&joined.join(", "))
            .parse::<sfv::List>()
            .unwrap();
        list.iter()
            .map(|entry| {
                let sfv::ListEntry::Item(item) = entry else {
                    panic!("an Item")
                };
                let r = item
                    .params
                    .get(sfv::KeyRef::from_str("r").unwrap())
                    .and_then(|v| v.as_integer())
                    .map_or(-1, i64::from);
                (item.bare_item.as_string().unwrap().as_str().to_owned(), r)
            })
            .collect()
    };
    let first = fetch(&c, addr, "/search", &[]).await;
    assert_eq!(
        names(&first, "ratelimit"),
        [("search".to_owned(), 1), ("server".to_owned(), 9)]
    );
    assert_eq!(names(&first, "ratelimit-policy").len(), 2);
    let _ = fetch(&c, addr, "/search", &[]).await;
    let third = fetch(&c, addr, "/search", &[]).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS); // the route's limit
    assert_eq!(fetch(&c, addr, "/", &[]).await.status, StatusCode::OK); // the server's: 7 left
    assert_eq!(
        names(&fetch(&c, addr, "/", &[]).await, "ratelimit"),
        [("server".to_owned(), 5)]
    );
}

/// Any core algorithm per key (`Algorithm::keyed`, a `Box<dyn KeyedRefund<IpAddr>>`), and
/// the fixed-memory `KeyedSketch`, plug into the same layer.
#[tokio::test]
async fn any_core_algorithm_plugs_in() {
    for algorithm in limitcore::Algorithm::ALL {
        let clock = ManualClock::new();
        let limiter = algorithm
            .keyed::<IpAddr, _>("3/s".parse().unwrap(), clock.clone(), Some(1_000))
            .unwrap();
        let layer = RateLimitLayer::new(limiter, PeerIp::new());
        let addr = serve(Router::new().route("/", get(ok)).layer(layer)).await;
        let s = burst(addr, 5).await;
        // The leaky bucket admits a request only when its queue is empty: one per interval.
        let expected = if algorithm == limitcore::Algorithm::LeakyBucket {
            1
        } else {
            3
        };
        assert_eq!(count(&s, StatusCode::OK), expected, "{algorithm}");
        // Two periods later (the sliding window still weighs the previous one after one).
        clock.advance(Duration::from_secs(2));
        assert_eq!(burst(addr, 1).await, [StatusCode::OK], "{algorithm}");
    }
    let clock = ManualClock::new();
    let sketch: limitcore::KeyedSketch<IpAddr, ManualClock> =
        limitcore::KeyedSketch::with_clock("3/s".parse().unwrap(), 1 << 10, 4, clock).unwrap();
    let addr = serve(
        Router::new()
            .route("/", get(ok))
            .layer(RateLimitLayer::new(sketch, PeerIp::new())),
    )
    .await;
    assert_eq!(count(&burst(addr, 5).await, StatusCode::OK), 3);
}
