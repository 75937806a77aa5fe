//! The layer's own cost per request, without a network: a `tower::service_fn` answering
//! `"ok"` called directly, bare, behind `RateLimitLayer::per_ip` (with its defaults, and
//! without the `Outcome` extension) and behind tower_governor's
//! `GovernorLayer` (its peer-IP key), all on a quota that admits everything, the peer
//! address in the request's extensions (as `SocketAddr` and as axum's `ConnectInfo`), on one
//! thread. Each layered service's response is made an axum response with `IntoResponse`,
//! as `Router::layer` does (axum's `Body`, which both layers answer in, passes as it is).
//!
//! Built with the feature `metrics`, the layer's figures are with the feature and no
//! recorder, and one more row is the layer with a Prometheus recorder
//! (`metrics-exporter-prometheus`) counting every request: the feature's cost is the
//! difference from a build without it, the recorder's from the row before.
//!
//! ```text
//! cargo run --release -p limitcore-tower --example overhead
//! cargo run --release -p limitcore-tower --features metrics --example overhead
//! # instructions per request, whatever the machine's load (valgrind; one contender at a
//! # time, the difference of two request counts):
//! for n in 0 100000; do OVERHEAD_ONLY=limitcore OVERHEAD_REQUESTS=$n OVERHEAD_ROUNDS=1 \
//!     valgrind --tool=cachegrind --cache-sim=no target/release/examples/overhead; done
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

/// Requests per contender and round (`OVERHEAD_REQUESTS`, default 2 000 000), and rounds
/// (`OVERHEAD_ROUNDS`, default 3): fewer of both to count instructions under valgrind.
fn setting(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether to run the contender `name` (`OVERHEAD_ONLY`: one of `bare`, `limitcore`,
/// `no-outcome`, `governor`, `recorder`; default all).
fn runs(name: &str) -> bool {
    std::env::var("OVERHEAD_ONLY").map_or(true, |only| only == name)
}

/// Mean nanoseconds per request through `svc` (NaN if the contender `name` is not run).
async fn per_request<S>(name: &str, mut svc: S, peer: SocketAddr) -> f64
where
    S: Service<Request<()>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    if !runs(name) {
        return f64::NAN;
    }
    let requests = setting("OVERHEAD_REQUESTS", 2_000_000);
    let start = Instant::now();
    for _ in 0..requests {
        let mut req = Request::new(());
        req.extensions_mut().insert(peer);
        req.extensions_mut().insert(ConnectInfo(peer));
        let response = svc.ready().await.unwrap().call(req).await.unwrap();
        std::hint::black_box(response);
    }
    start.elapsed().as_nanos() as f64 / f64::from(requests)
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
    // The layer counting into a recorder of its own (its handles registered at build).
    #[cfg(feature = "metrics")]
    let (recorder, counted) = {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let layer = metrics::with_local_recorder(&recorder, || {
            RateLimitLayer::per_ip(quota).map(|b| b.build())
        })??;
        (recorder, layer)
    };
    for round in 1..=setting("OVERHEAD_ROUNDS", 3) {
        let bare = per_request("bare", inner, peer).await;
        let ours = limitcore
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let ours = per_request("limitcore", ours, peer).await;
        let lean = no_outcome
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let lean = per_request("no-outcome", lean, peer).await;
        let theirs = governor
            .layer(inner)
            .map_response(IntoResponse::into_response);
        let theirs = per_request("governor", theirs, peer).await;
        println!(
            "round {round}: bare {bare:.0} ns/request; the layer: limitcore-tower {:.0} ns \
             ({:.0} ns without the Outcome extension), tower_governor {:.0} ns",
            ours - bare,
            lean - bare,
            theirs - bare
        );
        #[cfg(feature = "metrics")]
        {
            let svc = counted
                .layer(inner)
                .map_response(IntoResponse::into_response);
            let with_recorder = per_request("recorder", svc, peer).await;
            println!(
                "round {round}: limitcore-tower with a Prometheus recorder {:.0} ns \
                 (the feature with no recorder: {:.0} ns)",
                with_recorder - bare,
                ours - bare
            );
        }
    }
    #[cfg(feature = "metrics")]
    if runs("recorder") {
        let page = recorder.handle().render();
        let counted = page
            .lines()
            .find(|l| {
                l.starts_with("limitcore_requests_total{limit=\"default\",outcome=\"admitted\"}")
            })
            .ok_or("no admissions on the page")?;
        println!("the recorder: {counted}");
    }
    Ok(())
}
