//! The layer's own cost per request, without a network: a `tower::service_fn` called
//! directly, bare and behind `RateLimitLayer::per_ip` (a quota that admits everything, the
//! peer address in the request's extensions), on one thread.
//!
//! ```text
//! cargo run --release -p limitcore-tower --example overhead
//! ```

use http::{Request, Response};
use limitcore_tower::RateLimitLayer;
use std::net::SocketAddr;
use std::time::Instant;
use tower::{Layer, Service, ServiceExt};

const REQUESTS: u32 = 2_000_000;

/// Mean nanoseconds per request through `svc`.
async fn per_request<S>(mut svc: S, peer: SocketAddr) -> f64
where
    S: Service<Request<()>, Response = Response<()>> + Clone,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    for _ in 0..REQUESTS {
        let mut req = Request::new(());
        req.extensions_mut().insert(peer);
        let response = svc.ready().await.unwrap().call(req).await.unwrap();
        std::hint::black_box(response);
    }
    start.elapsed().as_nanos() as f64 / f64::from(REQUESTS)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let inner = tower::service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(()))
    });
    let peer: SocketAddr = "127.0.0.1:5555".parse()?;
    let layer = RateLimitLayer::per_ip("1000000000/s".parse()?)?.build()?;
    for round in 1..=3 {
        let bare = per_request(inner, peer).await;
        let layered = per_request(layer.layer(inner).map_response(|r| r.map(|_| ())), peer).await;
        println!(
            "round {round}: bare {bare:.0} ns/request, layered {layered:.0} ns/request, the layer {:.0} ns",
            layered - bare
        );
    }
    Ok(())
}
