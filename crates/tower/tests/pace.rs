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
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt};

/// Offsets of `times` (sorted) from `t0`.
fn offsets(t0: Instant, mut times: Vec<Instant>) -> Vec<Duration> {
    times.sort();
    times.iter().map(|t| *t - t0).collect()
}

/// Runs `attempt` up to 3 times until it returns `Ok`, failing with every try's offsets if
/// none did. For the ceilings on real-clock arrivals (a request at most so long after its
/// slot): tokio's timer fires late by milliseconds on a loaded machine, and one run can be
/// held off its CPU longer than the ceiling allows, but a pacer that sends late does so on
/// every try. The floors (never before a slot) are asserted inside each try: they hold
/// whatever the machine does.
async fn within_tries<F: std::future::Future<Output = Result<(), Vec<Duration>>>>(
    mut attempt: impl FnMut() -> F,
) {
    let mut late = Vec::new();
    for _ in 0..3 {
        match attempt().await {
            Ok(()) => return,
            Err(offsets) => late.push(offsets),
        }
    }
    panic!("late on every try: {late:?}");
}

/// 8 requests at once through `PaceLayer` (20/s, so 50 ms apart) over hyper-util's client:
/// the server sees them arrive at their slots, 0, 50, …, 350 ms after the first decision.
/// Every slot is at least its offset after `t0`, read before the requests are made (the
/// first decision comes after it), so no arrival is ever before `t0` plus its slot; and each
/// arrives at most 60 ms after that (a loaded machine may take longer in one run: see
/// [`within_tries`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_client_requests_arrive_at_their_slots() {
    within_tries(paced_client_run).await;
}

/// One run of [`paced_client_requests_arrive_at_their_slots`]: `Err` with the arrivals'
/// offsets if one came more than 60 ms after its slot.
async fn paced_client_run() -> Result<(), Vec<Duration>> {
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
    let t0 = Instant::now();
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
    let got = offsets(t0, arrivals.lock().unwrap().clone());
    let slots: Vec<Duration> = (0..8).map(|i| Duration::from_millis(50 * i)).collect();
    // 1 ms for the pacer's clock (the TSC's) against `Instant`'s.
    for (offset, slot) in got.iter().zip(&slots) {
        assert!(
            *offset + Duration::from_millis(1) >= *slot,
            "arrivals {got:?}"
        );
    }
    let first = got[0];
    let on_time = got
        .iter()
        .zip(&slots)
        .all(|(offset, slot)| *offset <= first + *slot + Duration::from_millis(60));
    if on_time { Ok(()) } else { Err(got) }
}

/// When the pacer's queue is full (burst 2: two requests may wait), further calls wait for
/// room and then for their slot: 6 calls at once all go out, one every 50 ms. No call is
/// sent before its slot after `t0` (read before the calls are made), and the last by
/// 350 ms after `t0` (a loaded machine may take longer in one run: see [`within_tries`]).
#[tokio::test]
async fn a_full_queue_waits_for_room_then_for_its_slot() {
    within_tries(full_queue_run).await;
}

/// One run of [`a_full_queue_waits_for_room_then_for_its_slot`]: `Err` with the calls'
/// offsets if the last went out more than 350 ms after `t0`.
async fn full_queue_run() -> Result<(), Vec<Duration>> {
    let pacer = LeakyBucket::new(Quota::per_second(20).unwrap().with_burst(2).unwrap()).unwrap();
    let send = tower::service_fn(|()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
    let paced = PaceLayer::with_pacer(pacer).layer(send);
    let t0 = Instant::now();
    let calls: Vec<_> = (0..6)
        .map(|_| tokio::spawn(paced.clone().oneshot(())))
        .collect();
    let mut times = Vec::new();
    for c in calls {
        times.push(c.await.unwrap().unwrap());
    }
    let got = offsets(t0, times);
    // 1 ms for the pacer's clock (the TSC's) against `Instant`'s.
    for (k, offset) in got.iter().enumerate() {
        let slot = Duration::from_millis(50 * k as u64);
        assert!(*offset + Duration::from_millis(1) >= slot, "{got:?}");
    }
    if got[5] <= Duration::from_millis(250 + 100) {
        Ok(())
    } else {
        Err(got)
    }
}
