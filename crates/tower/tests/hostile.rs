//! Hostile input: forged, malformed, oversized and repeated forwarding headers, address
//! variants, and a flood of fresh client addresses.

use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode};
use limitcore::clock::ManualClock;
use limitcore::rules::GcraRule;
use limitcore::{Keyed, KeyedRateLimiter, Quota};
use limitcore_tower::{
    ForwardHeader, ForwardedIp, HeaderKey, IpPrefix, KeyExtractor, PeerIp, RateLimitLayer,
    RequestHead, SHARED_IP_KEY, Trust,
};
use proptest::prelude::*;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tower::{Layer, Service, ServiceExt};

fn parts(header: &str, lines: &[HeaderValue], peer: Option<&str>) -> Parts {
    let mut req = Request::new(());
    for line in lines {
        req.headers_mut().append(
            http::HeaderName::from_bytes(header.as_bytes()).unwrap(),
            line.clone(),
        );
    }
    if let Some(peer) = peer {
        req.extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
    }
    req.into_parts().0
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Every extractor that reads headers, over both headers and several trust settings.
fn extractors() -> Vec<(&'static str, ForwardedIp)> {
    let nets = Trust::networks(["127.0.0.0/8", "10.0.0.0/8", "2001:db8::/32"]).unwrap();
    let mut out = Vec::new();
    for (name, header) in [
        ("x-forwarded-for", ForwardHeader::XForwardedFor),
        ("forwarded", ForwardHeader::Forwarded),
    ] {
        for trust in [
            Trust::Hops(0),
            Trust::Hops(1),
            Trust::Hops(2),
            Trust::Hops(7),
            nets.clone(),
        ] {
            out.push((name, ForwardedIp::new(header, trust)));
        }
    }
    out
}

/// Arbitrary field-line bytes that `http` accepts as a value (visible ASCII, spaces, tabs,
/// obs-text), biased towards the characters that matter to the parsers.
fn field_line() -> impl Strategy<Value = HeaderValue> {
    let byte = prop_oneof![
        4 => prop::sample::select(b",;=\"\\[]:. \tforFOR0123456789abcdef_unknown".to_vec()),
        1 => 0x20u8..=0x7e,
        1 => 0x80u8..=0xff,
    ];
    prop::collection::vec(byte, 0..200)
        .prop_filter_map("a valid field value", |b| HeaderValue::from_bytes(&b).ok())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    /// Whatever the client writes (any bytes, any number of lines), every extractor answers
    /// without panicking, and never with the missing-key bucket's key (`0.0.0.0`): a client
    /// can be charged there only by having no usable key.
    #[test]
    fn forwarding_headers_never_panic(lines in prop::collection::vec(field_line(), 0..6)) {
        for (name, extractor) in extractors() {
            let p = parts(name, &lines, Some("127.0.0.1:9"));
            if let Some(key) = extractor.extract(RequestHead::from(&p)) {
                prop_assert_ne!(key, SHARED_IP_KEY);
            }
            let _ = extractor.client_ip(RequestHead::from(&p));
        }
        let by_header = HeaderKey::new(http::HeaderName::from_static("x-forwarded-for"));
        let _ = by_header.extract(RequestHead::from(&parts("x-forwarded-for", &lines, None)));
    }

    /// Whatever the client wrote to the left, the key is the entry the trusted proxy
    /// appended: to the client's last line (as nginx's `$proxy_add_x_forwarded_for` does)
    /// or as a line of its own.
    #[test]
    fn the_client_never_chooses_its_key(
        lines in prop::collection::vec(field_line(), 0..4),
        same_line in any::<bool>(),
        last in 0u8..=255,
    ) {
        let proxy_saw = format!("198.51.100.{last}");
        let cases = [
            ("x-forwarded-for", ForwardHeader::XForwardedFor, proxy_saw.clone()),
            ("forwarded", ForwardHeader::Forwarded, format!("for=\"{proxy_saw}:4711\";proto=https")),
        ];
        for (name, header, appended) in cases {
            let mut lines = lines.clone();
            match lines.last_mut() {
                Some(line) if same_line => {
                    let mut joined = line.as_bytes().to_vec();
                    joined.extend_from_slice(b", ");
                    joined.extend_from_slice(appended.as_bytes());
                    *line = HeaderValue::from_bytes(&joined).unwrap();
                }
                _ => lines.push(HeaderValue::from_str(&appended).unwrap()),
            }
            let p = parts(name, &lines, Some("10.0.0.1:443"));
            let one_proxy = ForwardedIp::new(header, Trust::Hops(1));
            prop_assert_eq!(one_proxy.extract(RequestHead::from(&p)), Some(ip(&proxy_saw)));
            let trusted = ForwardedIp::new(header, Trust::networks(["10.0.0.0/8"]).unwrap());
            prop_assert_eq!(trusted.extract(RequestHead::from(&p)), Some(ip(&proxy_saw)));
        }
    }
}

proptest! {
    /// An address's key is its canonical form's network at the prefix length, as `ipnet`
    /// computes it, for every length (the layer masks the bits itself).
    #[test]
    fn prefix_keys_are_the_networks(bits in any::<u128>(), v4 in 0u8..=32, v6 in 0u8..=128) {
        let prefix = IpPrefix::new(v4, v6).unwrap();
        let v6_addr = std::net::Ipv6Addr::from(bits);
        let v4_addr = std::net::Ipv4Addr::from(bits as u32);
        let mapped = v4_addr.to_ipv6_mapped();
        let net4 = ipnet::Ipv4Net::new(v4_addr, v4).unwrap().network();
        prop_assert_eq!(prefix.key(IpAddr::V4(v4_addr)), IpAddr::V4(net4));
        prop_assert_eq!(prefix.key(IpAddr::V6(mapped)), IpAddr::V4(net4));
        let expected = match v6_addr.to_ipv4_mapped() {
            Some(inner) => IpAddr::V4(ipnet::Ipv4Net::new(inner, v4).unwrap().network()),
            None => IpAddr::V6(ipnet::Ipv6Net::new(v6_addr, v6).unwrap().network()),
        };
        prop_assert_eq!(prefix.key(IpAddr::V6(v6_addr)), expected);
    }
}

#[test]
fn address_variants_have_documented_keys() {
    let one = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(1));
    let key = |entry: &str| {
        one.extract(RequestHead::from(&parts(
            "x-forwarded-for",
            &[HeaderValue::from_str(entry).unwrap()],
            None,
        )))
    };
    // IPv4-mapped IPv6 is IPv4; IPv6 by /64; ports and brackets are accepted.
    assert_eq!(key("::ffff:192.0.2.1"), Some(ip("192.0.2.1")));
    assert_eq!(key("[::ffff:192.0.2.1]:8080"), Some(ip("192.0.2.1")));
    assert_eq!(key("2001:db8:a:b:1:2:3:4"), Some(ip("2001:db8:a:b::")));
    assert_eq!(key("[2001:db8:a:b::ff]"), Some(ip("2001:db8:a:b::")));
    assert_eq!(key("[2001:db8:a:b::ff]:443"), Some(ip("2001:db8:a:b::")));
    assert_eq!(key("fe80::1"), Some(ip("fe80::")));
    assert_eq!(key("::1"), Some(ip("::")));
    assert_eq!(key("192.0.2.1:65535"), Some(ip("192.0.2.1")));
    // Not an address: no usable key (the layer's missing-key answer).
    for bad in [
        "",
        "unknown",
        "_hidden",
        "0.0.0.0",
        "::",
        "::ffff:0.0.0.0",
        "fe80::1%eth0",
        "192.0.2.1:99999",
        "192.0.2",
        "192.0.2.256",
        "[192.0.2.1]",
        "[2001:db8::1",
        "2001:db8::1]:80",
        "\"192.0.2.1\"",
        "192.0.2.1 192.0.2.2",
        "x".repeat(10_000).as_str(),
    ] {
        assert_eq!(key(bad), None, "{bad:?}");
    }
    // Oversized and repeated: 1 000 lines of 100 entries each; only the rightmost is read.
    let junk = HeaderValue::from_str(&vec!["6.6.6.6"; 100].join(", ")).unwrap();
    let mut lines = vec![junk; 1_000];
    lines.push(HeaderValue::from_static("203.0.113.9"));
    assert_eq!(
        one.extract(RequestHead::from(&parts("x-forwarded-for", &lines, None))),
        Some(ip("203.0.113.9"))
    );
    // Fewer entries than trusted hops: no usable key, never a client entry.
    let two = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(2));
    assert_eq!(
        two.extract(RequestHead::from(&parts(
            "x-forwarded-for",
            &[HeaderValue::from_static("203.0.113.9")],
            None
        ))),
        None
    );
    // Other prefixes.
    let coarse = PeerIp::new().with_prefix(IpPrefix::new(24, 48).unwrap());
    assert_eq!(
        coarse.extract(RequestHead::from(&parts("x", &[], Some("192.0.2.77:1")))),
        Some(ip("192.0.2.0"))
    );
    assert_eq!(
        coarse.extract(RequestHead::from(&parts(
            "x",
            &[],
            Some("[2001:db8:1:2:3::1]:1")
        ))),
        Some(ip("2001:db8:1::"))
    );
    assert_eq!(
        coarse.extract(RequestHead::from(&parts(
            "x",
            &[],
            Some("[::ffff:192.0.2.77]:1")
        ))),
        Some(ip("192.0.2.0"))
    );
    assert_eq!(
        PeerIp::new().extract(RequestHead::from(&parts("x", &[], None))),
        None
    );
    assert!(IpPrefix::new(33, 64).is_err() && IpPrefix::new(32, 129).is_err());
    // Forwarded: a repeated `for` in one element, or a quoted value with escapes, is no address.
    let fwd = ForwardedIp::new(ForwardHeader::Forwarded, Trust::Hops(1));
    let fkey = |v: &str| {
        fwd.extract(RequestHead::from(&parts(
            "forwarded",
            &[HeaderValue::from_str(v).unwrap()],
            None,
        )))
    };
    assert_eq!(fkey("for=192.0.2.1;for=192.0.2.2"), None);
    assert_eq!(fkey("for=\"192.0.2\\.1\""), None);
    assert_eq!(
        fkey("For=\"[2001:db8::1]:80\";By=x"),
        Some(ip("2001:db8::"))
    );
    assert_eq!(fkey("for=\"1.2.3.4, 5.6.7.8\""), None);
}

/// A flood of 10^6 fresh client addresses (one request each, as an attacker rotating
/// through an address block would send) against a key bound of 1 000, while one limited
/// client keeps asking. The test calls the layer's service directly (`tower::Service::call`
/// on `RateLimit` over a `service_fn`, through the same key extraction from
/// `X-Forwarded-For` and the same decision as on a socket), without sockets, to stay fast.
/// The clock advances 2 µs per request (2 s over the flood), so idle flood keys are evicted
/// along the way.
#[tokio::test]
async fn a_flood_of_fresh_addresses_stays_within_the_key_bound() {
    const FLOOD: u32 = 1_000_000;
    const MAX_KEYS: usize = 1_000;
    let clock = ManualClock::new();
    let limiter: Keyed<IpAddr, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(10).unwrap(), clock.clone())
            .unwrap()
            .with_max_keys(MAX_KEYS);
    let victim = ip("192.0.2.1");
    limiter
        .reconfigure_key(victim, Quota::per_hour(5).unwrap())
        .unwrap();
    let layer = RateLimitLayer::builder(
        limiter,
        ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(1)),
    )
    .headers(limitcore_tower::RateLimitHeaders::Off)
    .build()
    .unwrap();
    let inner = tower::service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    });
    let mut svc = layer.layer(inner);
    let xff = http::HeaderName::from_static("x-forwarded-for");
    let request = |ip: &str| {
        let mut req = Request::new(());
        req.headers_mut()
            .insert(&xff, HeaderValue::from_str(ip).unwrap());
        req
    };
    let mut victim_admitted = 0;
    for _ in 0..10 {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(request("192.0.2.1"))
            .await
            .unwrap();
        victim_admitted += usize::from(res.status() == StatusCode::OK);
    }
    assert_eq!(victim_admitted, 5);
    let mut most_keys = 0;
    let mut text = String::new();
    for i in 0..FLOOD {
        clock.advance_nanos(2_000);
        // 10.0.0.0/8 and up: a fresh address each time.
        let a = 0x0a00_0000u32 + i;
        text.clear();
        use std::fmt::Write;
        write!(text, "{}", std::net::Ipv4Addr::from(a)).unwrap();
        let _ = svc
            .ready()
            .await
            .unwrap()
            .call(request(&text))
            .await
            .unwrap();
        if i % 1_000 == 0 {
            most_keys = most_keys.max(layer.limiter().len());
            // The limited client is still limited, with its exact remaining wait.
            if i % 100_000 == 0 {
                let res = svc
                    .ready()
                    .await
                    .unwrap()
                    .call(request("192.0.2.1"))
                    .await
                    .unwrap();
                assert_eq!(
                    res.status(),
                    StatusCode::TOO_MANY_REQUESTS,
                    "after {i} fresh keys"
                );
            }
        }
    }
    most_keys = most_keys.max(layer.limiter().len());
    assert!(most_keys <= MAX_KEYS, "{most_keys} keys");
    // Never reset: the victim still waits out its own quota (5/h: 12 min per permit).
    let now = layer.limiter().now();
    let refused = layer.limiter().decide_n_at(&victim, 1, now);
    let wait = refused.retry_after().expect("still limited");
    assert_eq!(
        wait,
        Duration::from_secs(12 * 60) - Duration::from_nanos(now)
    );
}

/// With the feature `axum`, the peer address is read from axum's `ConnectInfo` (first) as
/// well as from a plain `SocketAddr` extension.
#[cfg(feature = "axum")]
#[test]
fn peer_ip_reads_axum_connect_info() {
    let mut req = Request::new(());
    req.extensions_mut().insert(axum::extract::ConnectInfo(
        "[::ffff:192.0.2.5]:80".parse::<SocketAddr>().unwrap(),
    ));
    req.extensions_mut()
        .insert("198.51.100.1:80".parse::<SocketAddr>().unwrap());
    assert_eq!(
        PeerIp::new().extract(RequestHead::from(&req)),
        Some(ip("192.0.2.5"))
    );
}
