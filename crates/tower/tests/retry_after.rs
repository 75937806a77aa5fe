//! `Retry-After` is never longer than the longest wait the key's quota can produce, in every
//! mode of the layer, and absent where no wait helps: a request whose cost is above the
//! limit's capacity (413), or one that could only conform past the limiter's clock. Real
//! servers on loopback, a real client, the limiters on a `ManualClock` moved at random
//! between requests.

mod common;

use axum::Router;
use axum::response::Response;
use axum::routing::get;
use common::{client, get as fetch, ok, serve};
use http::{HeaderValue, StatusCode};
use limitcore::clock::ManualClock;
use limitcore::rules::GcraRule;
use limitcore::{Keyed, Quota};
use limitcore_tower::{LimitReq, Outcome, PeerIp, RateLimitLayer};
use std::net::IpAddr;
use std::time::Duration;

type PerIp = Keyed<IpAddr, GcraRule, ManualClock>;

/// The exact wait of a refusal, in ns, copied from the `Outcome` extension into a header the
/// client can read (as a logging layer would read it).
async fn exact_wait_header(mut response: Response) -> Response {
    let exact = match response.extensions().get::<Outcome>() {
        Some(Outcome::Rejected {
            retry_after: Some(wait),
        }) => Some(wait.as_nanos()),
        _ => None,
    };
    if let Some(ns) = exact {
        response
            .headers_mut()
            .insert("x-exact-ns", HeaderValue::from(ns as u64));
    }
    response
}

/// A request's cost: its `x-cost` header.
fn cost_header(head: &limitcore_tower::RequestHead<'_>) -> u32 {
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Reject,
    Delay(Duration),
    DryRun,
}

/// Sends 150 requests of random cost `0..=capacity + 1` through the layer in `mode`, the
/// clock moving 0 to 2 emission intervals (in quarters) between them, and checks every
/// answer.
async fn check(quota: Quota, mode: Mode) {
    let clock = ManualClock::new();
    let limiter: PerIp = Keyed::with_clock(quota, clock.clone()).unwrap();
    let mut builder = RateLimitLayer::builder(limiter, PeerIp::new()).cost(cost_header);
    match mode {
        Mode::Reject => {}
        Mode::Delay(max_wait) => builder = builder.delay(max_wait),
        Mode::DryRun => builder = builder.dry_run(true),
    }
    let app = Router::new()
        .route("/", get(ok))
        .layer(builder.build().unwrap())
        .layer(axum::middleware::map_response(exact_wait_header));
    let addr = serve(app).await;
    let c = client();
    let capacity = quota.burst();
    let longest = u128::from(quota.burst_span_ns());
    let longest_s = longest.div_ceil(1_000_000_000) as u64;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut refused, mut too_large) = (0, 0);
    for i in 0..150 {
        clock.advance_nanos(quota.emission_interval_ns() / 4 * rng.below(9));
        let cost = rng.below(u64::from(capacity) + 2) as u32;
        let reply = fetch(&c, addr, "/", &[("x-cost", &cost.to_string())]).await;
        let context = format!("{mode:?} {quota} request {i} cost {cost}: {reply:?}");
        let retry = reply.header("retry-after");
        if mode == Mode::DryRun {
            assert_eq!(reply.status, StatusCode::OK, "{context}");
            if cost > capacity {
                assert_eq!(reply.outcome(), "REJECTED_DRY_RUN", "{context}");
            }
            continue;
        }
        if cost > capacity {
            too_large += 1;
            assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{context}");
            assert_eq!(reply.outcome(), "TOO_LARGE", "{context}");
            assert_eq!(retry, None, "{context}");
            continue;
        }
        match reply.status {
            StatusCode::OK => assert_eq!(retry, None, "{context}"),
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                let exact: u128 = reply.header("x-exact-ns").unwrap().parse().unwrap();
                let seconds: u64 = retry.expect(&context).parse().unwrap();
                assert!(
                    (1..=longest).contains(&exact),
                    "{context}: exact {exact} ns"
                );
                assert_eq!(
                    u128::from(seconds),
                    exact.div_ceil(1_000_000_000),
                    "{context}"
                );
                assert!(seconds <= longest_s, "{context}: longest {longest_s} s");
            }
            other => panic!("{context}: status {other}"),
        }
    }
    if mode != Mode::DryRun {
        // The script reaches both refusals, so the checks above bit.
        assert!(
            refused > 10 && too_large > 10,
            "{refused} refused, {too_large} too large"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_mode() {
    check("1/s burst 3".parse().unwrap(), Mode::Reject).await;
    check("2/min burst 2".parse().unwrap(), Mode::Reject).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_mode() {
    check(
        "1/s burst 3".parse().unwrap(),
        Mode::Delay(Duration::from_millis(40)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run() {
    check("1/s burst 3".parse().unwrap(), Mode::DryRun).await;
}

/// nginx's `limit_req`: `nodelay` is reject mode on its quota, `delay=M` the delay mode with
/// its `max_wait` (kept short here: the delays are slept on the real timer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_req_modes() {
    let nodelay = LimitReq::new("1/s".parse().unwrap(), 2).nodelay();
    check(nodelay.quota().unwrap(), Mode::Reject).await;
    let delayed = LimitReq::new("25/s".parse().unwrap(), 3).delay(2);
    assert_eq!(delayed.max_wait(), Duration::from_millis(40));
    check(delayed.quota().unwrap(), Mode::Delay(delayed.max_wait())).await;
}

/// At the end of the limiter's clock a request can only conform past it: refused without a
/// `Retry-After` (never "wait 584 years").
#[tokio::test]
async fn beyond_the_clock_has_no_retry_after() {
    let clock = ManualClock::starting_at(u64::MAX - 1_000);
    let limiter: PerIp = Keyed::with_clock("1/s".parse().unwrap(), clock).unwrap();
    let layer = RateLimitLayer::builder(limiter, PeerIp::new())
        .build()
        .unwrap();
    let addr = serve(Router::new().route("/", get(ok)).layer(layer)).await;
    let reply = fetch(&client(), addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.outcome(), "REJECTED");
    assert_eq!(reply.header("retry-after"), None, "{reply:?}");
}
