//! The concurrency layer's permit through a response's life, service by service (no
//! server): held by the body, completed at its end with the classified outcome, released on
//! drop, on an error, at a 101, and by a cancelled wait; adaptive limits on a `ManualClock`.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use limitcore::clock::ManualClock;
use limitcore::concurrency::{Adaptive, Aimd, Completion, Permits};
use limitcore_tower::ConcurrencyLimitLayer;
use limitcore_tower::concurrency::{Classify, Latency, PermitBody};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tower::{Layer, Service, ServiceExt, service_fn};

type TestBody = UnsyncBoxBody<Bytes, &'static str>;

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

/// A response with `status` whose body the returned sender feeds.
fn open(status: StatusCode) -> (Response<TestBody>, Sender) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut response = Response::new(ChannelBody(rx).boxed_unsync());
    *response.status_mut() = status;
    (response, tx)
}

/// An adaptive limit on a manual clock: AIMD from `initial` (1 to 100), a latency above 10 ms
/// counted as a drop.
fn aimd(initial: u32, clock: &ManualClock) -> Permits<Adaptive<Aimd, ManualClock>> {
    let rule = Aimd::new()
        .with_limits(1, 100)
        .unwrap()
        .with_initial(initial)
        .unwrap()
        .with_timeout(Duration::from_millis(10))
        .unwrap();
    Permits::adaptive_with_clock(rule, clock.clone()).unwrap()
}

/// Sends one request through `layer` to a service answering `response` (taken once).
async fn through<F, C>(
    layer: &ConcurrencyLimitLayer<F, C>,
    response: Response<TestBody>,
) -> Response<PermitBody<TestBody, F>>
where
    F: limitcore::concurrency::Feedback,
    C: Classify,
{
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(response)));
    let svc = layer.layer(service_fn(move |_: Request<()>| {
        let response = slot.lock().unwrap().take().unwrap();
        async move { Ok::<_, std::convert::Infallible>(response) }
    }));
    svc.oneshot(Request::new(())).await.unwrap()
}

#[tokio::test]
async fn the_body_holds_the_permit_until_its_end() {
    let layer = ConcurrencyLimitLayer::new(1).unwrap();
    let (response, tx) = open(StatusCode::OK);
    let mut response = through(&layer, response).await;
    assert_eq!(layer.permits().in_flight(), 1);
    tx.send(Ok(Bytes::from_static(b"a"))).unwrap();
    let frame = response.body_mut().frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "a");
    assert!(response.body().holds_permit());
    assert_eq!(layer.permits().in_flight(), 1);
    drop(tx);
    assert!(response.body_mut().frame().await.is_none());
    assert!(!response.body().holds_permit());
    assert_eq!(layer.permits().in_flight(), 0);
}

#[tokio::test]
async fn latency_runs_to_the_body_end_by_default_or_to_the_head() {
    for (latency, expected) in [(Latency::BodyEnd, 1), (Latency::Head, 3)] {
        let clock = ManualClock::new();
        let layer = ConcurrencyLimitLayer::builder(aimd(2, &clock))
            .latency(latency)
            .build();
        let (response, tx) = open(StatusCode::OK);
        let mut response = through(&layer, response).await;
        clock.advance(Duration::from_millis(20)); // the body takes 20 ms, past the timeout
        drop(tx);
        assert!(response.body_mut().frame().await.is_none());
        // To the body's end: 20 ms > 10 ms, a drop (2 × 0.9 → 1). To the head: 0 ms, a
        // success with 1 in flight, half the limit of 2 (→ 3).
        assert_eq!(layer.permits().limit(), expected, "{latency:?}");
    }
}

#[tokio::test]
async fn an_empty_body_completes_its_permit_at_the_head() {
    let clock = ManualClock::new();
    let layer = ConcurrencyLimitLayer::builder(aimd(2, &clock)).build();
    let empty = Response::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    let response = through(&layer, empty).await;
    // A server need not poll a body that is already at its end: the success counts now.
    assert!(!response.body().holds_permit());
    assert_eq!(layer.permits().in_flight(), 0);
    assert_eq!(layer.permits().limit(), 3);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_is_no_sample_unless_it_was_a_drop() {
    for (status, expected) in [(StatusCode::OK, 10), (StatusCode::SERVICE_UNAVAILABLE, 9)] {
        let clock = ManualClock::new();
        let layer = ConcurrencyLimitLayer::builder(aimd(10, &clock)).build();
        let (response, _tx) = open(status);
        let response = through(&layer, response).await;
        assert_eq!(layer.permits().in_flight(), 1);
        drop(response); // the client went away
        assert_eq!(layer.permits().in_flight(), 0);
        assert_eq!(layer.permits().limit(), expected, "{status}");
    }
}

#[tokio::test]
async fn a_body_error_is_a_drop() {
    let clock = ManualClock::new();
    let layer = ConcurrencyLimitLayer::builder(aimd(10, &clock)).build();
    let (response, tx) = open(StatusCode::OK);
    let mut response = through(&layer, response).await;
    tx.send(Err("upstream reset")).unwrap();
    assert_eq!(
        response.body_mut().frame().await.unwrap().unwrap_err(),
        "upstream reset"
    );
    assert_eq!(layer.permits().in_flight(), 0);
    assert_eq!(layer.permits().limit(), 9);
}

#[tokio::test]
async fn an_upgrade_releases_its_permit_at_the_101() {
    let layer = ConcurrencyLimitLayer::new(1).unwrap();
    let (response, _tx) = open(StatusCode::SWITCHING_PROTOCOLS);
    let response = through(&layer, response).await;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert!(!response.body().holds_permit());
    assert_eq!(layer.permits().in_flight(), 0);
    let (next, _tx) = open(StatusCode::OK);
    assert_eq!(through(&layer, next).await.status(), StatusCode::OK);
}

/// Inner errors are not the backend's load here (say, a client-side decoding error).
#[derive(Clone)]
struct ErrorsIgnored;

impl Classify for ErrorsIgnored {
    fn classify_response<B>(&self, _: &Response<B>) -> Completion {
        Completion::Success
    }

    fn classify_error<E>(&self, _: &E) -> Completion {
        Completion::Ignored
    }
}

#[tokio::test]
async fn an_inner_error_completes_the_permit_with_the_classifiers_outcome() {
    let failing =
        || service_fn(|_: Request<()>| async { Err::<Response<TestBody>, _>("backend down") });
    let clock = ManualClock::new();
    let default = ConcurrencyLimitLayer::builder(aimd(10, &clock)).build();
    assert!(
        default
            .layer(failing())
            .oneshot(Request::new(()))
            .await
            .is_err()
    );
    assert_eq!(
        (default.permits().in_flight(), default.permits().limit()),
        (0, 9)
    );
    let ignored = ConcurrencyLimitLayer::builder(aimd(10, &clock))
        .classifier(ErrorsIgnored)
        .build();
    assert!(
        ignored
            .layer(failing())
            .oneshot(Request::new(()))
            .await
            .is_err()
    );
    assert_eq!(
        (ignored.permits().in_flight(), ignored.permits().limit()),
        (0, 10)
    );
}

#[tokio::test]
async fn a_cancelled_queued_request_takes_nothing() {
    let layer = ConcurrencyLimitLayer::fixed(1)
        .unwrap()
        .queue(4, Duration::from_secs(30))
        .unwrap()
        .build();
    let (response, _tx) = open(StatusCode::OK);
    let held = through(&layer, response).await;
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = calls.clone();
    let mut svc = layer.layer(service_fn(move |_: Request<()>| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { Ok::<_, std::convert::Infallible>(open(StatusCode::OK).0) }
    }));
    let queued = svc.ready().await.unwrap().call(Request::new(()));
    // The client gives up while the request waits.
    assert!(
        tokio::time::timeout(Duration::from_millis(20), queued)
            .await
            .is_err()
    );
    assert_eq!(layer.permits().waiters(), 0);
    assert_eq!(layer.permits().in_flight(), 1);
    drop(held);
    assert_eq!(layer.permits().in_flight(), 0);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "never called"
    );
}
