//! The protocol through a real gRPC client (tonic, envoy-types' generated client) against
//! the service on loopback, in process, on a manual clock set to Unix times.

mod common;

use common::*;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use limitcore::clock::ManualClock;
use std::sync::Arc;
use std::time::Duration;

const CONFIG: &str = "
domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: team
    value: ops
    rate_limit: {unit: week, requests_per_unit: 5}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: meta
    metadata: {tier: gold, weight: 3}
    rate_limit: {unit: hour, requests_per_unit: 9}
";

struct Fixture {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    running: limitcore_rls::Running,
}

async fn fixture(flags: &[&str]) -> Fixture {
    let dir = config_dir(&[("shop.yaml", CONFIG)]);
    let clock = ManualClock::starting_at(unix(10.0));
    let running = serve(dir.path(), Arc::new(clock.clone()), flags).await;
    Fixture {
        _dir: dir,
        clock,
        running,
    }
}

fn remaining(r: &RateLimitResponse) -> Vec<u32> {
    r.statuses.iter().map(|s| s.limit_remaining).collect()
}

fn reset_ms(r: &RateLimitResponse, i: usize) -> Option<i64> {
    r.statuses[i]
        .duration_until_reset
        .as_ref()
        .map(|d| d.seconds * 1000 + i64::from(d.nanos) / 1_000_000)
}

#[tokio::test]
async fn statuses_are_in_order_with_limit_remaining_and_reset() {
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    let r = ask(
        &mut c,
        req(
            "shop",
            vec![
                desc(&[("user", "a")]),
                desc(&[("nothing", "x")]),
                desc(&[("ip", "1.2.3.4")]),
            ],
            0,
        ),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK, OK, OK]));
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit, limit.unit),
        ("per-user", 3, 2)
    );
    assert!(r.statuses[1].current_limit.is_none());
    assert_eq!(r.statuses[2].current_limit.as_ref().unwrap().unit, 1);
    assert_eq!(remaining(&r), vec![2, 0, 1]);
    // Fixed windows aligned to the Unix epoch: at :10 of a minute, 50 s left in it.
    assert_eq!(reset_ms(&r, 0), Some(50_000));
    assert_eq!(reset_ms(&r, 1), None);
    assert_eq!(reset_ms(&r, 2), Some(1_000));
}

#[tokio::test]
async fn all_or_nothing_charges_no_descriptor_on_a_refusal() {
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    // ip allows 2 per second; user 3 per minute.
    let both = || {
        req(
            "shop",
            vec![desc(&[("user", "a")]), desc(&[("ip", "9")])],
            0,
        )
    };
    assert_eq!(ask(&mut c, both()).await.overall_code, OK);
    assert_eq!(ask(&mut c, both()).await.overall_code, OK);
    let refused = ask(&mut c, both()).await;
    assert_eq!(codes(&refused), (OVER, vec![OK, OVER]));
    // The user's limit kept no charge: one left, not zero.
    assert_eq!(refused.statuses[0].limit_remaining, 1);
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(ask(&mut c, both()).await.overall_code, OK);
    assert_eq!(ask(&mut c, both()).await.overall_code, OVER); // the user's 3 are used
}

#[tokio::test]
async fn charge_each_charges_the_descriptors_that_admit() {
    let f = fixture(&["--mode", "charge-each"]).await;
    let mut c = client(&f.running).await;
    let both = || {
        req(
            "shop",
            vec![desc(&[("user", "a")]), desc(&[("ip", "9")])],
            0,
        )
    };
    ask(&mut c, both()).await;
    ask(&mut c, both()).await;
    let refused = ask(&mut c, both()).await;
    assert_eq!(codes(&refused), (OVER, vec![OK, OVER]));
    assert_eq!(
        refused.statuses[0].limit_remaining, 0,
        "the refused request charged the user"
    );
}

#[tokio::test]
async fn request_and_descriptor_hits() {
    // Requests only: a refused request's hits dropped (`tests/charges.rs` records them).
    let f = fixture(&["--refused-hits", "drop"]).await;
    let mut c = client(&f.running).await;
    // The request's hits_addend applies to descriptors without their own.
    let r = ask(&mut c, req("shop", vec![desc(&[("user", "h")])], 2)).await;
    assert_eq!(remaining(&r), vec![1]);
    // A descriptor's own hits win (0 is a check: nothing consumed).
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "h")]), 0)], 3),
    )
    .await;
    assert_eq!((codes(&r), remaining(&r)), ((OK, vec![OK]), vec![1]));
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "h")]), 2)], 1),
    )
    .await;
    assert_eq!(codes(&r), (OVER, vec![OVER]));
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "h")]), 1)], 9),
    )
    .await;
    assert_eq!((codes(&r), remaining(&r)), ((OK, vec![OK]), vec![0]));
    // More than the limit at once: refused, and no wait admits it.
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "big")]), 4)], 0),
    )
    .await;
    assert_eq!(codes(&r), (OVER, vec![OVER]));
    // Costs above 10^9 count as 10^9 (Envoy's cap): refused, not an error.
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "huge")]), u64::MAX)], 0),
    )
    .await;
    assert_eq!(r.overall_code, OVER);
}

#[tokio::test]
async fn negative_hits_refund_never_below_empty() {
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("user", "r")]), 3)], 0),
    )
    .await;
    assert_eq!(remaining(&r), vec![0]);
    let r = ask(
        &mut c,
        req("shop", vec![refund(desc(&[("user", "r")]), 2)], 0),
    )
    .await;
    assert_eq!((codes(&r), remaining(&r)), ((OK, vec![OK]), vec![2]));
    let r = ask(
        &mut c,
        req("shop", vec![refund(desc(&[("user", "r")]), 50)], 0),
    )
    .await;
    assert_eq!(remaining(&r), vec![3], "never past empty");
    // GCRA: a refund gives the cells back.
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("gcra", "g")]), 2)], 0),
    )
    .await;
    assert_eq!(remaining(&r), vec![0]);
    let r = ask(
        &mut c,
        req("shop", vec![refund(desc(&[("gcra", "g")]), 1)], 0),
    )
    .await;
    assert_eq!(remaining(&r), vec![1]);
    let r = ask(
        &mut c,
        req("shop", vec![refund(desc(&[("gcra", "g")]), 9)], 0),
    )
    .await;
    assert_eq!(remaining(&r), vec![2]);
    let r = ask(
        &mut c,
        req("shop", vec![hits(desc(&[("gcra", "g")]), 3)], 0),
    )
    .await;
    assert_eq!(r.overall_code, OVER, "still no more than the burst");
}

#[tokio::test]
async fn gcra_reports_exact_waits() {
    let f = fixture(&["--refused-hits", "drop"]).await;
    let mut c = client(&f.running).await;
    let g = || req("shop", vec![desc(&[("gcra", "x")])], 0);
    let r = ask(&mut c, g()).await;
    assert_eq!((r.overall_code, reset_ms(&r, 0)), (OK, Some(100)));
    ask(&mut c, g()).await;
    let r = ask(&mut c, g()).await;
    // 10/s burst 2: the third waits exactly 100 ms.
    assert_eq!((r.overall_code, reset_ms(&r, 0)), (OVER, Some(100)));
    f.clock.advance(Duration::from_millis(99));
    assert_eq!(ask(&mut c, g()).await.overall_code, OVER);
    f.clock.advance(Duration::from_millis(1));
    assert_eq!(ask(&mut c, g()).await.overall_code, OK);
}

#[tokio::test]
async fn gcra_refused_hits_recorded_extend_the_wait_by_their_cost() {
    // The default: a refused request's hit is recorded (it may be a charge after the
    // response), so a client that keeps sending waits for its refused requests too.
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    let g = || req("shop", vec![desc(&[("gcra", "y")])], 0);
    ask(&mut c, g()).await;
    ask(&mut c, g()).await;
    let r = ask(&mut c, g()).await;
    // 10/s burst 2: refused, and its permit recorded: the same request now waits 200 ms.
    assert_eq!((r.overall_code, reset_ms(&r, 0)), (OVER, Some(200)));
    f.clock.advance(Duration::from_millis(199));
    let r = ask(&mut c, g()).await;
    assert_eq!((r.overall_code, reset_ms(&r, 0)), (OVER, Some(101)));
    f.clock.advance(Duration::from_millis(101));
    assert_eq!(ask(&mut c, g()).await.overall_code, OK);
}

#[tokio::test]
async fn week_unit_and_overrides() {
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    let r = ask(&mut c, req("shop", vec![desc(&[("team", "ops")])], 0)).await;
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().unit, 7);
    // 2026-01-01 is a Thursday; Unix weeks start on Thursdays: 7 days minus 10 s left.
    assert_eq!(reset_ms(&r, 0), Some((7 * 86_400 - 10) * 1000));
    // A request-side limit replaces the configured one (2 per hour here).
    let o = || req("shop", vec![with_limit(desc(&[("user", "o")]), 2, 3)], 0);
    let r = ask(&mut c, o()).await;
    let l = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!((l.requests_per_unit, l.unit), (2, 3));
    ask(&mut c, o()).await;
    assert_eq!(ask(&mut c, o()).await.overall_code, OVER);
    // Unknown unit in an override: INVALID_ARGUMENT.
    let e = c
        .should_rate_limit(req(
            "shop",
            vec![with_limit(desc(&[("user", "o")]), 2, 99)],
            0,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn unlimited_zero_shadow_quota_and_metadata() {
    let f = fixture(&["--dynamic-metadata"]).await;
    let mut c = client(&f.running).await;
    let r = ask(&mut c, req("shop", vec![desc(&[("free", "x")])], 0)).await;
    assert_eq!((codes(&r), remaining(&r)), ((OK, vec![OK]), vec![u32::MAX]));
    let r = ask(&mut c, req("shop", vec![desc(&[("zero", "x")])], 0)).await;
    assert_eq!(r.overall_code, OVER);
    for _ in 0..3 {
        let r = ask(&mut c, req("shop", vec![desc(&[("shadow", "x")])], 0)).await;
        assert_eq!(codes(&r), (OK, vec![OK]), "shadow mode never refuses");
    }
    ask(&mut c, req("shop", vec![desc(&[("quota", "x")])], 0)).await;
    let r = ask(
        &mut c,
        req(
            "shop",
            vec![
                desc(&[("user", "m")]),
                desc(&[("quota", "x")]),
                desc(&[("meta", "x")]),
            ],
            0,
        ),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK, OK, OK]), "quota mode admits");
    let md = r.dynamic_metadata.expect("dynamic metadata");
    let s = |k: &str| md.fields.get(k).and_then(|v| v.kind.clone());
    use envoy_types::pb::google::protobuf::value::Kind;
    assert_eq!(s("domain"), Some(Kind::StringValue("shop".into())));
    assert_eq!(s("quotaModeEnabled"), Some(Kind::BoolValue(true)));
    let Some(Kind::ListValue(v)) = s("quotaModeViolations") else {
        panic!("violations")
    };
    assert_eq!(v.values[0].kind, Some(Kind::NumberValue(1.0)));
    let Some(Kind::StructValue(meta)) = s("metadata") else {
        panic!("metadata")
    };
    assert!(meta.fields.contains_key("2"));
    let Some(Kind::ListValue(d)) = s("descriptors") else {
        panic!("descriptors")
    };
    assert_eq!(d.values.len(), 3);
}

#[tokio::test]
async fn errors_are_grpc_codes() {
    let f = fixture(&[]).await;
    let mut c = client(&f.running).await;
    let e = c
        .should_rate_limit(req("", vec![desc(&[("user", "a")])], 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = c
        .should_rate_limit(req("shop", vec![], 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = c
        .should_rate_limit(req("shop", vec![desc(&[])], 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // An unknown domain limits nothing (envoyproxy/ratelimit's answer).
    let r = ask(&mut c, req("elsewhere", vec![desc(&[("user", "a")])], 0)).await;
    assert_eq!(codes(&r), (OK, vec![OK]));
}

#[tokio::test]
async fn headers_and_refusal_body() {
    let f = fixture(&[
        "--headers",
        "--over-limit-body",
        "slow down",
        "--over-limit-content-type",
        "text/plain",
    ])
    .await;
    let mut c = client(&f.running).await;
    let r = ask(
        &mut c,
        req(
            "shop",
            vec![desc(&[("user", "hb")]), desc(&[("ip", "z")])],
            0,
        ),
    )
    .await;
    let h: Vec<(String, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert_eq!(
        h,
        vec![
            ("RateLimit-Limit".into(), "2, 2;w=1".into()),
            ("RateLimit-Remaining".into(), "1".into()),
            ("RateLimit-Reset".into(), "1".into()),
        ]
    );
    assert!(r.raw_body.is_empty());
    ask(&mut c, req("shop", vec![desc(&[("ip", "z")])], 0)).await;
    let r = ask(&mut c, req("shop", vec![desc(&[("ip", "z")])], 0)).await;
    assert_eq!(r.raw_body, b"slow down");
    assert!(r
        .response_headers_to_add
        .iter()
        .any(|h| h.key == "content-type" && h.value == "text/plain"));
}

/// envoyproxy/ratelimit's documented fixed-window rule, as a model: a counter per
/// descriptor per window `[k·unit, (k+1)·unit)` of Unix seconds; a request of `hits` is
/// over the limit iff `count + hits > limit`, and its hits are counted either way;
/// `limit_remaining` is `limit − count` after (0 when over), `duration_until_reset` is
/// `unit − now mod unit`.
struct Envoyproxy {
    limit: u64,
    unit: u64,
    counts: std::collections::HashMap<(String, u64), u64>,
}

impl Envoyproxy {
    fn decide(&mut self, key: &str, now_ns: u64, hits: u64) -> (bool, u64, u64) {
        let secs = now_ns / 1_000_000_000;
        let window = secs / self.unit;
        let count = self.counts.entry((key.to_owned(), window)).or_default();
        let over = *count + hits > self.limit;
        *count += hits;
        let remaining = if over { 0 } else { self.limit - *count };
        let reset_ns = (window + 1) * self.unit * 1_000_000_000 - now_ns;
        (!over, remaining, reset_ns)
    }
}

#[tokio::test]
async fn fixed_window_equals_envoyproxy_ratelimit_across_window_boundaries() {
    // charge-each: every descriptor counted on its own, as envoyproxy/ratelimit does.
    let f = fixture(&["--mode", "charge-each"]).await;
    let mut c = client(&f.running).await;
    let mut model = Envoyproxy {
        limit: 3,
        unit: 60,
        counts: Default::default(),
    };
    // A trace over four minutes, crossing three window boundaries, two users, costs 1–3.
    let mut t = unix(10.0);
    let mut seed = 7u64;
    for step in 0..400 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        t += (seed >> 33) % 1_300_000_000; // 0–1.3 s apart
        f.clock.set_nanos(t);
        let user = if step % 3 == 0 { "u1" } else { "u2" };
        let cost = 1 + (seed >> 13) % 3;
        let r = ask(
            &mut c,
            req("shop", vec![hits(desc(&[("user", user)]), cost)], 0),
        )
        .await;
        let (ok, rem, reset) = model.decide(user, t, cost);
        assert_eq!(r.overall_code == OK, ok, "step {step} at {t}: admitted");
        assert_eq!(
            u64::from(r.statuses[0].limit_remaining),
            rem,
            "step {step}: remaining"
        );
        let d = r.statuses[0].duration_until_reset.as_ref().unwrap();
        assert_eq!(
            d.seconds as u64 * 1_000_000_000 + d.nanos as u64,
            reset,
            "step {step}: reset"
        );
    }
    assert!(t > unix(10.0 + 180.0), "the trace crossed three windows");
}

#[tokio::test]
async fn grpc_health_serves() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let f = fixture(&[]).await;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", f.running.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut h = HealthClient::new(channel);
    let r = h
        .check(HealthCheckRequest {
            service: "envoy.service.ratelimit.v3.RateLimitService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 1, "SERVING");
    let r = h
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 1);
}
