//! The baseline of BENCHMARKS.md's "cost of deciding": the same tonic server, envoy-types
//! service and runtime as `limitcore-rls`, answering every `ShouldRateLimit` with `OK` and
//! one `OK` status per descriptor, deciding nothing.
//!
//! ```text
//! cargo run --release -p limitcore-rls --example ok_server -- 127.0.0.1:8091
//! ```

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;

#[path = "shared/always_ok.rs"]
mod always_ok;
use always_ok::AlwaysOk;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: std::net::SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8091".into())
        .parse()?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let addr: std::net::SocketAddr = addr;
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            tonic::transport::Server::builder()
                .add_service(RateLimitServiceServer::new(AlwaysOk))
                .serve_with_incoming(incoming)
                .await?;
            Ok::<(), Box<dyn std::error::Error>>(())
        })
}
