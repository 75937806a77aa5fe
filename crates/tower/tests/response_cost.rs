//! Costs known at the response (issue 37): a `Metered` layer on real servers on loopback,
//! driven by a real HTTP client, every limiter on a `ManualClock` (the verdicts never depend
//! on the machine's speed); the edges (errors, drops, dry run) service by service.

mod common;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use common::{client, get as fetch, serve};
use http::{HeaderMap, HeaderName, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use limitcore::clock::{Clock, ManualClock, Nanos};
use limitcore::rules::GcraRule;
use limitcore::{
    Charged, Decision, Denied, Gcra, Global, Keyed, KeyedRateLimiter, KeyedRefund, Quota, Receipt,
    Snapshot,
};
use limitcore_tower::{
    GlobalKey, Metered, MissingKey, Outcome, PeerIp, RateLimitHeaders, RateLimitLayer, ResponseCost,
};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tower::{Layer, Service, ServiceExt, service_fn};

// ---------------------------------------------------------------------------------------
// A limiter that records what the layer asks of it.
// ---------------------------------------------------------------------------------------

/// What the layer recorded at a response's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    /// A reservation of `reserved` settled to `actual`.
    Settle { reserved: u32, actual: u32 },
    /// A charge of `n` with nothing reserved.
    Charge(u32),
}

/// `L`, with every call that decides or records counted: the proof that a response's cost
/// is recorded once, and of what.
struct Recorded<L> {
    inner: L,
    decisions: AtomicUsize,
    reserved: AtomicUsize,
    records: Mutex<Vec<Record>>,
}

impl<L> Recorded<L> {
    fn new(inner: L) -> Self {
        Recorded {
            inner,
            decisions: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            records: Mutex::new(Vec::new()),
        }
    }

    fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap().clone()
    }

    fn decisions(&self) -> usize {
        self.decisions.load(Ordering::SeqCst)
    }

    fn reserved(&self) -> usize {
        self.reserved.load(Ordering::SeqCst)
    }

    fn push(&self, record: Record) {
        self.records.lock().unwrap().push(record);
    }
}

impl<K: ?Sized, L: KeyedRateLimiter<K>> KeyedRateLimiter<K> for Recorded<L> {
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.decisions.fetch_add(1, Ordering::SeqCst);
        self.inner.try_acquire_n_at(key, n, now)
    }

    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
        self.decisions.fetch_add(1, Ordering::SeqCst);
        self.inner.decide_n_at(key, n, now)
    }

    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
        self.inner.snapshot_at(key, now)
    }

    fn quota_for(&self, key: &K) -> Quota {
        self.inner.quota_for(key)
    }

    fn now(&self) -> Nanos {
        self.inner.now()
    }
}

impl<K: ?Sized, L: KeyedRefund<K>> KeyedRefund<K> for Recorded<L> {
    fn acquire_refundable_at(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        let result = self.inner.acquire_refundable_at(key, n, now);
        if result.is_ok() {
            self.reserved.fetch_add(1, Ordering::SeqCst);
        }
        self.decisions.fetch_add(1, Ordering::SeqCst);
        result
    }

    fn decide_refundable_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot) {
        let decided = self.inner.decide_refundable_at(key, n, now);
        if decided.0.is_ok() {
            self.reserved.fetch_add(1, Ordering::SeqCst);
        }
        self.decisions.fetch_add(1, Ordering::SeqCst);
        decided
    }

    fn refund(&self, key: &K, receipt: Receipt, at: Nanos) {
        self.inner.refund(key, receipt, at);
    }

    fn check_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
        self.inner.check_at(key, n, now)
    }

    fn charge_at(&self, key: &K, n: u32, now: Nanos) -> Charged {
        self.push(Record::Charge(n));
        self.inner.charge_at(key, n, now)
    }

    fn settle(&self, key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        self.push(Record::Settle {
            reserved: receipt.n(),
            actual,
        });
        self.inner.settle(key, receipt, actual, at)
    }

    fn credit(&self, key: &K, n: u32, at: Nanos) {
        self.inner.credit(key, n, at);
    }
}

// ---------------------------------------------------------------------------------------
// Limiters, bodies, waits.
// ---------------------------------------------------------------------------------------

type PerIp = Recorded<Keyed<IpAddr, GcraRule, ManualClock>>;
type Everyone = Recorded<Global<Gcra<ManualClock>>>;

fn per_ip(quota: &str, clock: &ManualClock) -> PerIp {
    Recorded::new(Keyed::with_clock(quota.parse().unwrap(), clock.clone()).unwrap())
}

fn everyone(quota: &str, clock: &ManualClock) -> Everyone {
    Recorded::new(Global::new(
        Gcra::with_clock(quota.parse().unwrap(), clock.clone()).unwrap(),
    ))
}

fn loopback() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn tokens() -> ResponseCost {
    ResponseCost::header(HeaderName::from_static("x-tokens"))
}

/// A body fed by the test: chunks or an error through the sender; it ends when the sender
/// is dropped.
struct ChannelBody(mpsc::UnboundedReceiver<Result<Bytes, &'static str>>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = &'static str;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|r| r.map(Frame::data)))
    }
}

type Sender = mpsc::UnboundedSender<Result<Bytes, &'static str>>;

/// A streamed body and the sender that feeds it.
fn channel() -> (Sender, ChannelBody) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, ChannelBody(rx))
}

/// Yields until `done` holds: for what a server task does after the client has its answer
/// (a connection closed by the client is noticed by the server's own task). A safety net of
/// 10 s turns a hang into a failure; no verdict depends on it.
async fn until(mut done: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the server task got there");
}

fn seconds(reply: &common::Reply) -> u64 {
    reply.header("retry-after").unwrap().parse().unwrap()
}

// ---------------------------------------------------------------------------------------
// On a server.
// ---------------------------------------------------------------------------------------

/// The Envoy Gateway pattern: 1000 tokens a minute, an upstream answering `x-tokens: 600`.
/// Requests 1 and 2 pass (each admitted while the key is not in debt), 1,200 are recorded,
/// and request 3 is refused with `Retry-After` the debt's exact wait rounded up; the
/// `RateLimit` fields of an admission are the state before its own charge.
#[tokio::test]
async fn an_upstream_reporting_600_tokens_a_request_is_refused_at_the_third() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("1000/min", &clock), PeerIp::new())
        .response_cost(tokens())
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    let upstream = || async { ([("x-tokens", "600")], "an answer") };
    let addr = serve(Router::new().route("/", get(upstream)).layer(layer.clone())).await;
    let c = client();

    let first = fetch(&c, addr, "/", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("x-tokens"), Some("600"));
    // Sent before its cost was known: the state before it.
    assert_eq!(first.header("ratelimit"), Some("\"default\";r=1000;t=0"));
    let second = fetch(&c, addr, "/", &[]).await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.header("ratelimit"), Some("\"default\";r=400;t=36"));
    assert_eq!(
        layer.limiter().records(),
        [Record::Charge(600), Record::Charge(600)]
    );

    // 1,200 of 1000: in debt by 200 tokens, 12 s at 60 ms a token; 30 ms later, 11.97 s.
    clock.advance(Duration::from_millis(30));
    let limiter = layer.limiter();
    assert_eq!(
        limiter.try_acquire_n_at(&loopback(), 0, clock.now()),
        Err(Denied::RateLimited {
            retry_after: Duration::from_millis(11_970)
        })
    );
    let third = fetch(&c, addr, "/", &[]).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(seconds(&third), 12, "11.97 s, rounded up");
    assert_eq!(third.header("ratelimit"), Some("\"default\";r=0;t=72"));
    // Refusals record nothing.
    assert_eq!(layer.limiter().records().len(), 2);

    // Exact: a second early is refused; at Retry-After, admitted.
    clock.advance(Duration::from_secs(11));
    assert_eq!(
        fetch(&c, addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance(Duration::from_secs(1));
    let paid = fetch(&c, addr, "/", &[]).await;
    assert_eq!(paid.status, StatusCode::OK);
    assert_eq!(layer.limiter().records().len(), 3);
}

/// A streamed body of N bytes is charged N, once, at its end.
#[tokio::test]
async fn a_streamed_body_is_charged_its_bytes() {
    const CHUNKS: [usize; 4] = [1000, 1, 4096, 2345];
    const N: u32 = 1000 + 1 + 4096 + 2345;
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("100000/min", &clock), PeerIp::new())
        .response_cost(ResponseCost::body_bytes())
        .build()
        .unwrap();
    let stream = || async {
        let (tx, body) = channel();
        tokio::spawn(async move {
            for (i, len) in CHUNKS.into_iter().enumerate() {
                tokio::task::yield_now().await;
                let byte = b'a' + u8::try_from(i).unwrap();
                tx.send(Ok(Bytes::from(vec![byte; len]))).unwrap();
            }
        });
        Body::new(body)
    };
    let addr = serve(Router::new().route("/", get(stream)).layer(layer.clone())).await;
    let c = client();
    let remaining = || layer.limiter().snapshot_at(&loopback(), 0).remaining;

    let reply = fetch(&c, addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body.len(), N as usize);
    assert_eq!(layer.limiter().records(), [Record::Charge(N)]);
    assert_eq!(remaining(), 100_000 - N);
    let again = fetch(&c, addr, "/", &[]).await;
    assert_eq!(again.body.len(), N as usize);
    assert_eq!(remaining(), 100_000 - 2 * N);
    assert_eq!(layer.limiter().records().len(), 2);
}

/// A client that drops the connection mid-body: the server notices, drops the body, and
/// the response is charged the bytes it yielded until then, once.
#[tokio::test]
async fn a_client_gone_mid_body_is_charged_the_bytes_sent_once() {
    const SENT: usize = 1500;
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("100000/min", &clock), PeerIp::new())
        .response_cost(ResponseCost::body_bytes())
        .build()
        .unwrap();
    // The handler sends SENT bytes, then nothing, its sender kept open: the body is pending
    // when the client leaves.
    let senders: Arc<Mutex<Vec<Sender>>> = Arc::default();
    let kept = Arc::clone(&senders);
    let stream = move || {
        let kept = Arc::clone(&kept);
        async move {
            let (tx, body) = channel();
            tx.send(Ok(Bytes::from(vec![b'x'; SENT]))).unwrap();
            kept.lock().unwrap().push(tx);
            Body::new(body)
        }
    };
    let addr = serve(Router::new().route("/", get(stream)).layer(layer.clone())).await;

    // A connection of its own, closed by the client after the first SENT bytes.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let req = Request::get("/")
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = 0;
    while received < SENT {
        let frame = body.frame().await.unwrap().unwrap();
        received += frame.into_data().unwrap().len();
    }
    assert_eq!(received, SENT);
    assert!(layer.limiter().records().is_empty(), "not yet: mid-body");
    drop(body);
    drop(sender);
    conn.abort();
    let _ = conn.await;

    until(|| !layer.limiter().records().is_empty()).await;
    // The body is gone (its receiver with it), and was charged once, what it yielded.
    until(|| senders.lock().unwrap()[0].is_closed()).await;
    assert_eq!(layer.limiter().records(), [Record::Charge(SENT as u32)]);
    assert_eq!(
        layer.limiter().snapshot_at(&loopback(), 0).remaining,
        100_000 - SENT as u32
    );
}

/// tower_governor #34: count only failed responses. With an estimate of 1 (reserved, then
/// settled to 0 for a success, 1 for a server error), 3 failures a minute and never a
/// fourth; with no estimate, the check with no cost lets the request that goes into debt
/// through (one more failure), then refuses.
#[tokio::test]
async fn a_closure_charges_only_server_errors() {
    for (estimate, failures_through) in [(1, 3), (0, 4)] {
        let clock = ManualClock::new();
        let layer = RateLimitLayer::builder(per_ip("3/min", &clock), PeerIp::new())
            .response_cost(ResponseCost::from_fn(|head| {
                u32::from(head.status.is_server_error())
            }))
            .cost(move |_| estimate)
            .build()
            .unwrap();
        let app = Router::new()
            .route("/ok", get(|| async { "fine" }))
            .route(
                "/fail",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "down") }),
            )
            .layer(layer.clone());
        let addr = serve(app).await;
        let c = client();
        for _ in 0..10 {
            assert_eq!(fetch(&c, addr, "/ok", &[]).await.status, StatusCode::OK);
        }
        let mut through = 0;
        let refused = loop {
            let reply = fetch(&c, addr, "/fail", &[]).await;
            if reply.status != StatusCode::SERVICE_UNAVAILABLE {
                break reply;
            }
            through += 1;
        };
        assert_eq!(through, failures_through, "estimate {estimate}");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        // One permit back (estimate 1), or the debt of 1 paid back: 20 s either way.
        assert_eq!(seconds(&refused), 20, "estimate {estimate}");
        // Successes were free: their reservations given back in full (estimate 1), or
        // nothing to charge at all (estimate 0).
        let expected: Vec<Record> = if estimate == 1 {
            let success = Record::Settle {
                reserved: 1,
                actual: 0,
            };
            let failure = Record::Settle {
                reserved: 1,
                actual: 1,
            };
            [[success; 10].as_slice(), &[failure; 3]].concat()
        } else {
            vec![Record::Charge(1); 4]
        };
        assert_eq!(layer.limiter().records(), expected);
        assert_eq!(
            fetch(&c, addr, "/ok", &[]).await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}

/// Reserve-then-settle: each request reserves its estimate (`x-estimate`) while its body is
/// out, and is settled to the upstream's `x-tokens` at the body's end: below the estimate
/// the rest is given back, above it the excess is charged as debt.
#[tokio::test]
async fn a_reservation_is_settled_below_and_above_its_estimate() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(everyone("1000/min", &clock), GlobalKey)
        .response_cost(tokens())
        .cost(|head| {
            head.headers()
                .get("x-estimate")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0)
        })
        .headers(RateLimitHeaders::Always)
        .build()
        .unwrap();
    // The upstream uses what the request's `x-actual` says, and sends its body when the
    // test releases it.
    let held: Arc<Mutex<Vec<Sender>>> = Arc::default();
    let kept = Arc::clone(&held);
    let upstream = move |headers: HeaderMap| {
        let kept = Arc::clone(&kept);
        async move {
            let (tx, body) = channel();
            tx.send(Ok(Bytes::from_static(b"an answer"))).unwrap();
            kept.lock().unwrap().push(tx);
            Response::builder()
                .header("x-tokens", headers["x-actual"].clone())
                .body(Body::new(body))
                .unwrap()
        }
    };
    let addr = serve(Router::new().route("/", get(upstream)).layer(layer.clone())).await;
    let remaining = || layer.limiter().snapshot_at(&(), 0).remaining;

    // A raw connection: the head arrives while the body is held open.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut ask = async |estimate: &str, actual: &str| {
        let req = Request::get("/")
            .header("host", addr.to_string())
            .header("x-estimate", estimate)
            .header("x-actual", actual)
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.ready().await.unwrap();
        sender.send_request(req).await.unwrap()
    };

    let fields = |response: &Response<hyper::body::Incoming>| {
        response.headers()["ratelimit"].to_str().unwrap().to_owned()
    };
    // Estimate 300, used 100: 300 held while the body is out, then 200 given back. The
    // fields are the state after the reservation (300 taken: 18 s until full).
    let response = ask("300", "100").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(fields(&response), "\"default\";r=700;t=18");
    assert_eq!(remaining(), 700);
    held.lock().unwrap().clear(); // the upstream finishes its body
    response.into_body().collect().await.unwrap();
    assert_eq!(remaining(), 900);

    // Estimate 300, used 700: the excess of 400 charged.
    let response = ask("300", "700").await;
    assert_eq!(fields(&response), "\"default\";r=600;t=24");
    assert_eq!(remaining(), 600);
    held.lock().unwrap().clear();
    response.into_body().collect().await.unwrap();
    assert_eq!(remaining(), 200);

    // Estimate 100, used 500: 400 past the 200 left: in debt by 300, 18 s at 60 ms a token.
    let response = ask("100", "500").await;
    assert_eq!(fields(&response), "\"default\";r=100;t=54");
    held.lock().unwrap().clear();
    response.into_body().collect().await.unwrap();
    assert_eq!(remaining(), 0);
    assert_eq!(
        layer.limiter().records(),
        [
            Record::Settle {
                reserved: 300,
                actual: 100
            },
            Record::Settle {
                reserved: 300,
                actual: 700
            },
            Record::Settle {
                reserved: 100,
                actual: 500
            },
        ]
    );
    assert_eq!(
        layer.limiter().try_acquire_n_at(&(), 0, 0),
        Err(Denied::RateLimited {
            retry_after: Duration::from_secs(18)
        })
    );
    let refused = ask("0", "0").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "18");
    assert_eq!(fields(&refused), "\"default\";r=0;t=78"); // 1,300 taken: 78 s
    refused.into_body().collect().await.unwrap();
    clock.advance(Duration::from_secs(18));
    let paid = ask("0", "0").await;
    assert_eq!(paid.status(), StatusCode::OK);
    held.lock().unwrap().clear();
    paid.into_body().collect().await.unwrap();
}

/// Many concurrent requests, each reserving E = 100 and using at most E, on a frozen
/// clock: each wave admits exactly what is left in requests of E, every admission holds its
/// E until its body ends, and what is recorded in all never exceeds the limit's 1000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reservations_never_admit_more_than_the_limit() {
    const LIMIT: u32 = 1000;
    const E: u32 = 100;
    const WAVE: usize = 40;
    let clock = ManualClock::new();
    // No fields on refusals: a request is one decision, so the test can count them.
    let layer = RateLimitLayer::builder(everyone("1000/min", &clock), GlobalKey)
        .response_cost(tokens())
        .cost(|_| E)
        .headers(RateLimitHeaders::Off)
        .build()
        .unwrap();
    // Admitted requests wait at the gate until the test has counted the wave.
    let gate = Arc::new(Semaphore::new(0));
    let waiting = Arc::clone(&gate);
    let upstream = move |headers: HeaderMap| {
        let waiting = Arc::clone(&waiting);
        async move {
            waiting.acquire().await.unwrap().forget();
            ([("x-tokens", headers["x-actual"].clone())], "an answer")
        }
    };
    let addr = serve(Router::new().route("/", get(upstream)).layer(layer.clone())).await;
    let limiter = layer.limiter();
    let remaining = || limiter.snapshot_at(&(), 0).remaining;

    let mut recorded = 0; // what the admitted responses used, in all
    let mut left = LIMIT;
    for wave in 0.. {
        let before = (limiter.decisions(), limiter.reserved());
        // Each request uses a different amount, at most E.
        let actual = move |i: usize| (i * 37 + wave * 11) as u32 % (E + 1);
        let tasks: Vec<_> = (0..WAVE)
            .map(|i| {
                tokio::spawn(async move {
                    let c = client();
                    let used = actual(i).to_string();
                    let reply = fetch(&c, addr, "/", &[("x-actual", &used)]).await;
                    (reply.status, actual(i))
                })
            })
            .collect();
        until(|| limiter.decisions() - before.0 == WAVE).await;
        let admitted = limiter.reserved() - before.1;
        // Exactly what is left, in requests of E; all held at once.
        assert_eq!(admitted, (left / E) as usize, "wave {wave}");
        assert_eq!(remaining(), left - E * admitted as u32, "wave {wave}");
        gate.add_permits(admitted);
        let mut passed = 0;
        for task in tasks {
            let (status, used) = task.await.unwrap();
            match status {
                StatusCode::OK => {
                    passed += 1;
                    recorded += used;
                }
                StatusCode::TOO_MANY_REQUESTS => {}
                other => panic!("{other}"),
            }
        }
        assert_eq!(passed, admitted, "wave {wave}");
        assert!(recorded <= LIMIT, "wave {wave}: {recorded} recorded");
        // Settled exactly: what is left is what was not used.
        assert_eq!(limiter.records().len(), limiter.reserved());
        left = LIMIT - recorded;
        assert_eq!(remaining(), left, "wave {wave}");
        if admitted == 0 {
            break;
        }
    }
    assert!(left < E);
}

// ---------------------------------------------------------------------------------------
// Service by service: the edges.
// ---------------------------------------------------------------------------------------

/// A layer over a global 1000/min on a frozen clock, charging `cost`, estimating `estimate`.
fn metered(cost: ResponseCost, estimate: u32) -> RateLimitLayer<GlobalKey, Everyone, Metered> {
    RateLimitLayer::builder(everyone("1000/min", &ManualClock::new()), GlobalKey)
        .response_cost(cost)
        .cost(move |_| estimate)
        .build()
        .unwrap()
}

type TestBody = http_body_util::combinators::UnsyncBoxBody<Bytes, &'static str>;

/// A service answering `response` (taken once).
fn answering(
    response: Response<TestBody>,
) -> impl Service<Request<()>, Response = Response<TestBody>, Error = &'static str> + Clone {
    let slot = Arc::new(Mutex::new(Some(response)));
    service_fn(move |_: Request<()>| {
        let response = slot.lock().unwrap().take().unwrap();
        async move { Ok(response) }
    })
}

fn streamed() -> (Sender, Response<TestBody>) {
    let (tx, body) = channel();
    (tx, Response::new(body.boxed_unsync()))
}

fn full(bytes: &'static [u8]) -> Response<TestBody> {
    Response::new(
        Full::new(Bytes::from_static(bytes))
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

#[tokio::test]
async fn a_missing_or_malformed_header_costs_the_estimate() {
    for (value, expected) in [
        (None, 40),
        (Some("lots"), 40),
        (Some("-3"), 40),
        (Some("250"), 250),
    ] {
        let layer = metered(tokens(), 40);
        let mut answer = full(b"...");
        if let Some(value) = value {
            answer
                .headers_mut()
                .insert("x-tokens", value.parse().unwrap());
        }
        let response = layer
            .layer(answering(answer))
            .oneshot(Request::new(()))
            .await
            .unwrap();
        response.into_body().collect().await.unwrap();
        assert_eq!(
            layer.limiter().records(),
            [Record::Settle {
                reserved: 40,
                actual: expected
            }],
            "{value:?}"
        );
    }
}

#[tokio::test]
async fn an_inner_error_or_a_cancelled_call_settles_to_the_estimate() {
    // An error of the inner service: the reservation stands.
    let layer = metered(ResponseCost::body_bytes(), 40);
    let failing = service_fn(|_: Request<()>| async { Err::<Response<TestBody>, _>("reset") });
    assert!(
        layer
            .layer(failing)
            .oneshot(Request::new(()))
            .await
            .is_err()
    );
    let settled = [Record::Settle {
        reserved: 40,
        actual: 40,
    }];
    assert_eq!(layer.limiter().records(), settled);
    assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 960);

    // The response future dropped before the head (the client went away while the handler
    // ran): the same.
    let layer = metered(ResponseCost::body_bytes(), 40);
    let never =
        service_fn(|_: Request<()>| std::future::pending::<Result<Response<TestBody>, &str>>());
    let mut svc = layer.layer(never);
    let future = svc.ready().await.unwrap().call(Request::new(()));
    assert!(layer.limiter().records().is_empty());
    drop(future);
    assert_eq!(layer.limiter().records(), settled);

    // With no estimate, nothing.
    let layer = metered(ResponseCost::body_bytes(), 0);
    let failing = service_fn(|_: Request<()>| async { Err::<Response<TestBody>, _>("reset") });
    assert!(
        layer
            .layer(failing)
            .oneshot(Request::new(()))
            .await
            .is_err()
    );
    assert!(layer.limiter().records().is_empty());
}

#[tokio::test]
async fn a_body_is_recorded_once_at_its_end_at_an_error_or_at_its_drop() {
    // At its end, then dropped: once.
    let layer = metered(ResponseCost::body_bytes(), 0);
    let (tx, answer) = streamed();
    let mut response = layer
        .layer(answering(answer))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    tx.send(Ok(Bytes::from_static(b"abc"))).unwrap();
    response.body_mut().frame().await.unwrap().unwrap();
    assert!(!response.body().is_settled());
    drop(tx);
    assert!(response.body_mut().frame().await.is_none());
    assert!(response.body().is_settled());
    drop(response);
    assert_eq!(layer.limiter().records(), [Record::Charge(3)]);

    // An error of the body: what it yielded until then.
    let layer = metered(ResponseCost::body_bytes(), 10);
    let (tx, answer) = streamed();
    let mut response = layer
        .layer(answering(answer))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    tx.send(Ok(Bytes::from_static(b"abcd"))).unwrap();
    tx.send(Err("upstream reset")).unwrap();
    response.body_mut().frame().await.unwrap().unwrap();
    assert!(response.body_mut().frame().await.unwrap().is_err());
    assert!(response.body().is_settled());
    drop(response);
    assert_eq!(
        layer.limiter().records(),
        [Record::Settle {
            reserved: 10,
            actual: 4
        }]
    );

    // Dropped mid-body with a cost from the head: the head's value.
    let layer = metered(tokens(), 0);
    let (_tx, mut answer) = streamed();
    answer
        .headers_mut()
        .insert("x-tokens", "77".parse().unwrap());
    let response = layer
        .layer(answering(answer))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    drop(response);
    assert_eq!(layer.limiter().records(), [Record::Charge(77)]);

    // An empty body: recorded at the head.
    let layer = metered(tokens(), 0);
    let mut answer = Response::new(
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    answer
        .headers_mut()
        .insert("x-tokens", "5".parse().unwrap());
    let response = layer
        .layer(answering(answer))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert!(response.body().is_settled());
    assert_eq!(layer.limiter().records(), [Record::Charge(5)]);
}

#[tokio::test]
async fn refusals_record_nothing_and_a_dry_run_charges_the_whole_cost() {
    let layer = metered(tokens(), 600);
    let answer = || {
        let mut answer = full(b"...");
        answer
            .headers_mut()
            .insert("x-tokens", "600".parse().unwrap());
        answer
    };
    let first = layer
        .layer(answering(answer()))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    first.into_body().collect().await.unwrap();
    let refused = layer
        .layer(answering(answer()))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.body().is_settled());
    refused.into_body().collect().await.unwrap();
    assert_eq!(layer.limiter().records().len(), 1);

    // A dry run: the would-be refusal passes, reserved nothing, and is charged its cost.
    let layer = RateLimitLayer::builder(everyone("1000/min", &ManualClock::new()), GlobalKey)
        .response_cost(tokens())
        .cost(|_| 600)
        .dry_run(true)
        .build()
        .unwrap();
    for _ in 0..2 {
        let response = layer
            .layer(answering(answer()))
            .oneshot(Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.into_body().collect().await.unwrap();
    }
    assert_eq!(
        layer.limiter().records(),
        [
            Record::Settle {
                reserved: 600,
                actual: 600
            },
            Record::Charge(600)
        ]
    );
    assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 0);
}

/// A request with no key of its own is charged to the shared key, as it was admitted.
#[tokio::test]
async fn a_request_without_a_key_is_charged_to_the_shared_one() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(per_ip("1000/min", &clock), PeerIp::new())
        .on_missing_key(MissingKey::Shared("0.0.0.0".parse().unwrap()))
        .response_cost(tokens())
        .build()
        .unwrap();
    let mut answer = full(b"...");
    answer
        .headers_mut()
        .insert("x-tokens", "250".parse().unwrap());
    // No peer address in the request's extensions: the shared key.
    let response = layer
        .layer(answering(answer))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(
        response.extensions().get::<Outcome>(),
        Some(&Outcome::Passed)
    );
    response.into_body().collect().await.unwrap();
    let shared: IpAddr = "0.0.0.0".parse().unwrap();
    assert_eq!(layer.limiter().snapshot_at(&shared, 0).remaining, 750);
}

#[test]
#[should_panic(expected = "does not combine with delay mode")]
fn a_response_cost_refuses_delay_mode() {
    let limiter =
        Global::new(Gcra::with_clock("10/s".parse().unwrap(), ManualClock::new()).unwrap());
    let _ = RateLimitLayer::builder(limiter, GlobalKey)
        .delay(Duration::from_millis(100))
        .response_cost(ResponseCost::body_bytes());
}
