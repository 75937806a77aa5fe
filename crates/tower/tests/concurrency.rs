//! The concurrency layer on real servers on loopback (axum), driven by a real HTTP client:
//! the permit held until the body ends, shedding at once and after a queue wait, the
//! classifier's outcomes reaching an adaptive rule, one limit for every clone.

mod common;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use common::{client, get as fetch, serve};
use http::{HeaderValue, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use limitcore::concurrency::{AcquireError, Aimd, Completion};
use limitcore_tower::ConcurrencyLimitLayer;
use limitcore_tower::concurrency::Shed;
use std::future::Future as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What the handler and the bodies count.
#[derive(Default)]
struct Counts {
    /// Requests from their handler's entry to their body's last chunk.
    in_flight: AtomicU32,
    /// The most of them at once.
    max: AtomicU32,
    /// Bodies that produced their last chunk.
    finished: AtomicU32,
    /// At each handler entry, in order: the bodies finished by then.
    finished_at_entry: Mutex<Vec<u32>>,
}

/// A streaming body of `chunks` chunks of 1 KiB, one every `every`; it stops counting
/// itself in flight as it produces its last chunk (or when dropped before).
struct SlowBody {
    counts: Option<Arc<Counts>>,
    left: u32,
    every: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl SlowBody {
    fn end(&mut self) {
        if let Some(counts) = self.counts.take() {
            counts.in_flight.fetch_sub(1, Ordering::SeqCst);
            counts.finished.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl http_body::Body for SlowBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            self.end();
            return Poll::Ready(None);
        }
        std::task::ready!(self.sleep.as_mut().poll(cx));
        let next = tokio::time::Instant::now() + self.every;
        self.sleep.as_mut().reset(next);
        self.left -= 1;
        if self.left == 0 {
            self.end();
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; 1024])))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

impl Drop for SlowBody {
    fn drop(&mut self) {
        self.end();
    }
}

async fn slow(State(counts): State<Arc<Counts>>) -> Response {
    counts
        .finished_at_entry
        .lock()
        .unwrap()
        .push(counts.finished.load(Ordering::SeqCst));
    let now = counts.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    counts.max.fetch_max(now, Ordering::SeqCst);
    let every = Duration::from_millis(2);
    Response::new(Body::new(SlowBody {
        counts: Some(counts),
        left: 4,
        every,
        sleep: Box::pin(tokio::time::sleep(every)),
    }))
}

/// GET `/` on `addr`, reading the body slowly (1 ms between frames); the status and the
/// body's length.
async fn read_slowly(addr: SocketAddr) -> (StatusCode, usize) {
    let c = client();
    let req = http::Request::get(format!("http://{addr}/"))
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let mut body = c.request(req).await.unwrap();
    let status = body.status();
    let mut len = 0;
    while let Some(frame) = body.body_mut().frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            len += data.len();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (status, len)
}

/// 200 requests at once through a limit of 8, each body streaming for ~8 ms after its
/// handler returned; the counts of the handler and the bodies.
async fn two_hundred_through(router: Router<Arc<Counts>>) -> Arc<Counts> {
    let counts = Arc::new(Counts::default());
    let addr = serve(router.with_state(counts.clone())).await;
    let tasks: Vec<_> = (0..200).map(|_| tokio::spawn(read_slowly(addr))).collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), (StatusCode::OK, 4 * 1024));
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_streaming_requests_never_exceed_eight_in_flight() {
    let layer = ConcurrencyLimitLayer::fixed(8)
        .unwrap()
        .queue(200, Duration::from_secs(60))
        .unwrap()
        .build();
    let counts =
        two_hundred_through(Router::new().route("/", get(slow)).layer(layer.clone())).await;
    // Counted from the handler's entry to the body's last chunk: never above the limit,
    // and the limit was reached.
    assert_eq!(counts.max.load(Ordering::SeqCst), 8);
    assert_eq!(counts.finished.load(Ordering::SeqCst), 200);
    // The k-th request to reach the handler did so after at least k − 7 bodies had ended:
    // a permit comes back at its body's end, not at the response's head.
    let entries = counts.finished_at_entry.lock().unwrap().clone();
    assert_eq!(entries.len(), 200);
    for (k, &finished) in entries.iter().enumerate() {
        assert!(
            finished as usize + 7 >= k,
            "request {k} entered with {finished} bodies ended"
        );
    }
    assert_eq!(layer.permits().in_flight(), 0);
    assert_eq!(layer.permits().waiters(), 0);
}

/// The measurement above can fail: tower's `ConcurrencyLimit` gives its permit back when
/// the response future resolves, so bodies still streaming are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn towers_concurrency_limit_lets_streaming_bodies_exceed_it() {
    let layer = tower::limit::ConcurrencyLimitLayer::new(8);
    let counts = two_hundred_through(Router::new().route("/", get(slow)).layer(layer)).await;
    assert!(counts.max.load(Ordering::SeqCst) > 8);
}

/// A route whose body stays open until the test sends on `release`, and a route that
/// counts the requests that reached it.
#[derive(Clone, Default)]
struct Hold {
    release: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
    entered: Arc<AtomicU32>,
}

/// A body that ends (with one chunk) when its receiver fires.
struct HeldBody(Option<oneshot::Receiver<()>>);

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(rx) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        let _ = std::task::ready!(Pin::new(rx).poll(cx));
        self.0 = None;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"end")))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }
}

impl Hold {
    /// The router, with `layer` around both routes and the `Shed` reason in `x-shed`.
    fn router<F, C>(&self, layer: ConcurrencyLimitLayer<F, C>) -> Router
    where
        F: limitcore::concurrency::Feedback,
        C: limitcore_tower::concurrency::Classify,
    {
        let hold = self.clone();
        let held = move || {
            let rx = hold
                .release
                .lock()
                .unwrap()
                .take()
                .expect("one held request at a time");
            async move { Response::new(Body::new(HeldBody(Some(rx)))) }
        };
        let entered = self.entered.clone();
        let counted = move || {
            entered.fetch_add(1, Ordering::SeqCst);
            async { "ok" }
        };
        Router::new()
            .route("/hold", get(held))
            .route("/", get(counted))
            .layer(layer)
            .layer(axum::middleware::map_response(shed_header))
    }

    /// Opens a held request on `addr`: its response head arrived, its body is open until
    /// the returned sender fires.
    async fn open(
        &self,
        addr: SocketAddr,
    ) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Bytes>) {
        let (tx, rx) = oneshot::channel();
        *self.release.lock().unwrap() = Some(rx);
        let c = client();
        let req = http::Request::get(format!("http://{addr}/hold"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let response = c.request(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body =
            tokio::spawn(async move { response.into_body().collect().await.unwrap().to_bytes() });
        (tx, body)
    }
}

/// Copies the layer's `Shed` reason into an `x-shed` header, for the client to see.
async fn shed_header(mut response: Response) -> Response {
    if let Some(shed) = response.extensions().get::<Shed>().copied() {
        let reason = match shed.error() {
            AcquireError::Full { .. } => "full",
            AcquireError::BacklogFull { .. } => "backlog",
            AcquireError::TimedOut => "timeout",
            _ => "other",
        };
        response
            .headers_mut()
            .insert("x-shed", HeaderValue::from_static(reason));
    }
    response
}

#[tokio::test]
async fn a_queued_request_is_admitted_only_after_the_held_body_ends() {
    let hold = Hold::default();
    let layer = ConcurrencyLimitLayer::fixed(1)
        .unwrap()
        .queue(4, Duration::from_secs(30))
        .unwrap()
        .build();
    let addr = serve(hold.router(layer.clone())).await;
    let (release, body) = hold.open(addr).await;
    // The head is out; the body is open: the permit is still held.
    assert_eq!(layer.permits().in_flight(), 1);
    let waiting = tokio::spawn(async move { fetch(&client(), addr, "/", &[]).await });
    // Until the request has queued (or, wrongly, been admitted): a loaded machine may take
    // a while to carry it to the layer; 10 s for what takes milliseconds.
    let since = Instant::now();
    while layer.permits().waiters() == 0 && hold.entered.load(Ordering::SeqCst) == 0 {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the request never queued"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        hold.entered.load(Ordering::SeqCst),
        0,
        "admitted while the body was open"
    );
    assert_eq!(layer.permits().waiters(), 1);
    release.send(()).unwrap();
    assert_eq!(body.await.unwrap(), "end");
    let reply = waiting.await.unwrap();
    assert_eq!(
        (reply.status, &reply.body[..]),
        (StatusCode::OK, &b"ok"[..])
    );
    assert_eq!(hold.entered.load(Ordering::SeqCst), 1);
    assert_eq!(layer.permits().in_flight(), 0);
}

#[tokio::test]
async fn shed_at_once_with_503_or_the_configured_status() {
    for (layer, status) in [
        (
            ConcurrencyLimitLayer::new(1).unwrap(),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            ConcurrencyLimitLayer::fixed(1)
                .unwrap()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .build(),
            StatusCode::TOO_MANY_REQUESTS,
        ),
    ] {
        let hold = Hold::default();
        let addr = serve(hold.router(layer.clone())).await;
        let (release, body) = hold.open(addr).await;
        // At once: a request that waited would wait for the held body, which ends only after
        // this answer (so never); the 10 s bound is for a loaded machine's round trip.
        let shed = tokio::time::timeout(Duration::from_secs(10), fetch(&client(), addr, "/", &[]))
            .await
            .expect("shed at once");
        assert_eq!(shed.status, status);
        assert_eq!(shed.header("x-shed"), Some("full"));
        assert_eq!(&shed.body[..], b"overloaded: too many requests in flight\n");
        assert_eq!(hold.entered.load(Ordering::SeqCst), 0);
        release.send(()).unwrap();
        body.await.unwrap();
        assert_eq!(
            fetch(&client(), addr, "/", &[]).await.status,
            StatusCode::OK
        );
        assert_eq!(layer.permits().in_flight(), 0);
    }
}

#[tokio::test]
async fn shed_when_the_queue_is_full() {
    let hold = Hold::default();
    let layer = ConcurrencyLimitLayer::fixed(1)
        .unwrap()
        .queue(1, Duration::from_secs(30))
        .unwrap()
        .build();
    let addr = serve(hold.router(layer.clone())).await;
    let (release, body) = hold.open(addr).await;
    let queued = tokio::spawn(async move { fetch(&client(), addr, "/", &[]).await });
    while layer.permits().waiters() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The one place in the queue is taken: shed at once, not queued behind the held body
    // (which ends only after this answer); 10 s for a loaded machine's round trip.
    let shed = tokio::time::timeout(Duration::from_secs(10), fetch(&client(), addr, "/", &[]))
        .await
        .expect("shed at once");
    assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.header("x-shed"), Some("backlog"));
    release.send(()).unwrap();
    body.await.unwrap();
    assert_eq!(queued.await.unwrap().status, StatusCode::OK);
    assert_eq!(hold.entered.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn shed_when_the_queue_wait_passes() {
    let hold = Hold::default();
    let max_wait = Duration::from_millis(150);
    let layer = ConcurrencyLimitLayer::fixed(1)
        .unwrap()
        .queue(8, max_wait)
        .unwrap()
        .build();
    let addr = serve(hold.router(layer.clone())).await;
    let (release, body) = hold.open(addr).await;
    let started = Instant::now();
    let shed = fetch(&client(), addr, "/", &[]).await;
    let waited = started.elapsed();
    // Its wait, and not much more: 5 s is a sanity bound (a request left in the queue would
    // wait for the held body, which ends only after this answer), with room for a loaded
    // machine's late timer.
    assert!(waited >= max_wait, "shed after {waited:?}");
    assert!(waited < Duration::from_secs(5), "shed after {waited:?}");
    assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.header("x-shed"), Some("timeout"));
    assert_eq!(
        layer.permits().waiters(),
        0,
        "the timed-out waiter left the queue"
    );
    assert_eq!(layer.permits().in_flight(), 1, "it took nothing");
    release.send(()).unwrap();
    body.await.unwrap();
    assert_eq!(layer.permits().in_flight(), 0);
}

/// `/fail` answers 500, `/missing` 404, `/` 200; one request at a time.
fn statuses<C: limitcore_tower::concurrency::Classify>(
    layer: ConcurrencyLimitLayer<limitcore::concurrency::Adaptive<Aimd>, C>,
) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .layer(layer)
}

fn aimd() -> Aimd {
    Aimd::new()
        .with_limits(1, 100)
        .unwrap()
        .with_initial(10)
        .unwrap()
}

#[tokio::test]
async fn default_classifier_outcomes_reach_aimd() {
    let layer = ConcurrencyLimitLayer::adaptive(aimd()).unwrap().build();
    let addr = serve(statuses(layer.clone())).await;
    let c = client();
    let mut limits = Vec::new();
    for path in ["/fail", "/fail", "/fail", "/missing", "/"] {
        fetch(&c, addr, path, &[]).await;
        limits.push(layer.permits().limit());
    }
    // Each 5xx a drop: 10 → 9 → 8 → 7 (× 0.9, truncated); 404 and 200 are successes with
    // 1 in flight, under half the limit: no increase.
    assert_eq!(limits, [9, 8, 7, 7, 7]);
    assert_eq!(layer.permits().in_flight(), 0);
}

#[tokio::test]
async fn a_custom_classifier_decides_what_is_a_drop() {
    let classify = |status: StatusCode| match status {
        StatusCode::NOT_FOUND => Completion::Dropped,
        s if s.is_server_error() => Completion::Ignored,
        _ => Completion::Success,
    };
    let layer = ConcurrencyLimitLayer::adaptive(aimd())
        .unwrap()
        .classifier(classify)
        .build();
    let addr = serve(statuses(layer.clone())).await;
    let c = client();
    let mut limits = Vec::new();
    for path in ["/fail", "/fail", "/missing", "/"] {
        fetch(&c, addr, path, &[]).await;
        limits.push(layer.permits().limit());
    }
    assert_eq!(limits, [10, 10, 9, 9]);
}

#[tokio::test]
async fn clones_on_two_servers_share_one_limit() {
    let layer = ConcurrencyLimitLayer::new(1).unwrap();
    let (one, two) = (Hold::default(), Hold::default());
    let addr_one = serve(one.router(layer.clone())).await;
    let addr_two = serve(two.router(layer.clone())).await;
    let (release, body) = one.open(addr_one).await;
    let shed = fetch(&client(), addr_two, "/", &[]).await;
    assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.header("x-shed"), Some("full"));
    release.send(()).unwrap();
    body.await.unwrap();
    assert_eq!(
        fetch(&client(), addr_two, "/", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(two.entered.load(Ordering::SeqCst), 1);
}
