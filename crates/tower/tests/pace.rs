//! The client-side pacer on the real clock: requests through a real HTTP client reach a
//! loopback server at their slots.

mod common;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Empty;
use limitcore::{LeakyBucket, Quota};
use limitcore_tower::PaceLayer;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tower::{Layer, ServiceExt};

/// Offsets in ms of `times` (sorted) from the first.
fn offsets(mut times: Vec<Instant>) -> Vec<i64> {
    times.sort();
    times
        .iter()
        .map(|t| (*t - times[0]).as_millis() as i64)
        .collect()
}

/// 8 requests at once through `PaceLayer` (20/s, so 50 ms apart) over hyper-util's client:
/// the server sees them arrive at their slots, 0, 50, …, 350 ms after the first. Tolerance:
/// at most 10 ms early (a request's trip may be slower than the next one's), 60 ms late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_client_requests_arrive_at_their_slots() {
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let recorded = arrivals.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            let recorded = recorded.clone();
            async move {
                recorded.lock().unwrap().push(Instant::now());
                "ok"
            }
        }),
    );
    let addr = common::serve(app).await;
    let paced = PaceLayer::new("20/s burst 8".parse().unwrap())
        .unwrap()
        .layer(common::client());
    let sent: Vec<_> = (0..8)
        .map(|_| {
            let req = http::Request::get(format!("http://{addr}/"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            tokio::spawn(paced.clone().oneshot(req))
        })
        .collect();
    for s in sent {
        assert_eq!(s.await.unwrap().unwrap().status(), http::StatusCode::OK);
    }
    let got = offsets(arrivals.lock().unwrap().clone());
    for (i, offset) in got.iter().enumerate() {
        let slot = 50 * i as i64;
        assert!(
            *offset >= slot - 10 && *offset <= slot + 60,
            "arrivals {got:?}"
        );
    }
}

/// When the pacer's queue is full (burst 2: two requests may wait), further calls wait for
/// room and then for their slot: 6 calls at once all go out, one every 50 ms.
#[tokio::test]
async fn a_full_queue_waits_for_room_then_for_its_slot() {
    let pacer = LeakyBucket::new(Quota::per_second(20).unwrap().with_burst(2).unwrap()).unwrap();
    let send = tower::service_fn(|()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
    let paced = PaceLayer::with_pacer(pacer).layer(send);
    let calls: Vec<_> = (0..6)
        .map(|_| tokio::spawn(paced.clone().oneshot(())))
        .collect();
    let mut times = Vec::new();
    for c in calls {
        times.push(c.await.unwrap().unwrap());
    }
    let got = offsets(times);
    assert!(got[5] >= 250 - 5, "{got:?}");
    for pair in got.windows(2) {
        assert!(pair[1] - pair[0] >= 45, "{got:?}");
    }
    assert!(got[5] <= 250 + 100, "{got:?}");
}
