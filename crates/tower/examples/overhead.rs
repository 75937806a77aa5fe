//! The layer's own cost per request, without a network: a `tower::service_fn` answering
//! `"ok"` called directly, bare, behind `RateLimitLayer::per_ip` (with its defaults, and
//! without the `Outcome` extension) and behind tower_governor's
//! `GovernorLayer` (its peer-IP key), all on a quota that admits everything, the peer
//! address in the request's extensions (as `SocketAddr` and as axum's `ConnectInfo`), on one
//! thread. Each layered service's response is made an axum response with `IntoResponse`,
//! as `Router::layer` does (axum's `Body`, which both layers answer in, passes as it is).
//!
//! ```text
//! cargo run --release -p limitcore-tower --example overhead
//! ```

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::IntoResponse;
use http::{Request, Response};
use limitcore_tower::RateLimitLayer;
use std::net::SocketAddr;
use std::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

const REQUESTS: u32 = 2_000_000;

/// Mean nanoseconds per request through `svc`.
async fn per_request<S>(mut svc: S, peer: SocketAddr) -> f64
where
    S: Service<Request<()>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    for _ in 0..REQUESTS {
        let mut req = Request::new(());
        req.extensions_mut().insert(peer);
        req.extensions_mut().insert(ConnectInfo(peer));
        let response = svc.ready().await.unwrap().call(req).await.unwrap();
        std::hint::black_box(response);
    }
    start.elapsed().as_nanos() as f64 / f64::from(REQUESTS)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let inner = tower::service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(Body::from("ok")))
    });
    let peer: SocketAddr = "127.0.0.1:5555".parse()?;
    let quota: limitcore::Quota = "1000000000/s".parse()?;
    let limitcore = RateLimitLayer::per_ip(quota)?.build()?;
    let no_outcome = RateLimitLayer::per_ip(quota)?
        .outcome_extension(false)
        .build()?;
    let governor = GovernorLayer::new(
        GovernorConfigBuilder::default()
            .period(quota.emission_interval())
            .burst_size(quota.burst())
            .finish()
            .ok_or("governor config")?,
    );
    for round in 1..=3 {
        let bare = per_request(inner, peer).await;
        let ours = limitcore
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let ours = per_request(ours, peer).await;
        let lean = no_outcome
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let lean = per_request(lean, peer).await;
        let theirs = governor
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let theirs = per_request(theirs, peer).await;
        println!(
            "round {round}: bare {bare:.0} ns/request; the layer: limitcore-tower {:.0} ns \
             ({:.0} ns without the Outcome extension), tower_governor {:.0} ns",
            ours - bare,
            lean - bare,
            theirs - bare
        );
    }
    Ok(())
}
