//! The cost of one decision without the network (BENCHMARKS.md, "limitcore-rls", "The cost
//! per decision"): the gRPC handler of the service and of the always-OK server
//! (`ok_server.rs`) called in process, `N` times, on the requests `load.rs` sends (domain
//! `bench`, one descriptor `user=v0..v99`, against `bench/bench.yaml`), each decoded from
//! its bytes and its response encoded, as tonic does around the handler. Run under
//! valgrind, it counts what the service adds to the floor per request, whatever the
//! machine's load: instructions (`--tool=callgrind`) and allocations (`--tool=dhat`);
//! two runs with different `N` cancel the start-up.
//!
//! ```text
//! cargo build --profile dist -p limitcore-rls --example decide
//! valgrind --tool=dhat target/dist/examples/decide service 20000
//! valgrind --tool=callgrind target/dist/examples/decide ok 20000
//! ```
//!
//! Without valgrind it prints the wall time per request (a rough figure: the machine's).

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use limitcore_rls::grpc::Grpc;
use limitcore_rls::{Config, Memory, Options, Service, Settings, UnixClock};
use prost::Message;
use std::sync::Arc;
use std::time::Instant;

#[path = "shared/always_ok.rs"]
mod always_ok;
use always_ok::AlwaysOk;

/// One request per value, encoded, as `load.rs` sends them.
fn requests(values: usize) -> Vec<Vec<u8>> {
    (0..values)
        .map(|v| {
            RateLimitRequest {
                domain: "bench".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "user".into(),
                        value: format!("v{v}"),
                    }],
                    ..Default::default()
                }],
                hits_addend: 0,
            }
            .encode_to_vec()
        })
        .collect()
}

/// `n` requests through `handler`: decoded, handled, the response encoded; the admitted
/// count.
async fn run<H: RateLimitService>(handler: &H, requests: &[Vec<u8>], n: usize) -> usize {
    let mut out = Vec::with_capacity(256);
    let mut admitted = 0;
    for i in 0..n {
        let bytes = &requests[i.wrapping_mul(7919) % requests.len()];
        let request = RateLimitRequest::decode(bytes.as_slice()).expect("a valid request");
        let response = handler
            .should_rate_limit(tonic::Request::new(request))
            .await
            .expect("a decision")
            .into_inner();
        admitted += usize::from(response.overall_code == 1);
        out.clear();
        response.encode(&mut out).expect("room");
    }
    admitted
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "service".into());
    let n: usize = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let requests = requests(100);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // bench.yaml with the user limit raised, so that every decision admits (as in the
    // load runs) however fast this loop runs.
    let yaml = include_str!("../bench/bench.yaml")
        .replace("requests_per_unit: 1000\n", "requests_per_unit: 10000000\n");
    let config = Config::from_str_named("bench.yaml", &yaml, &Settings::default())?;
    let service = Service::new(Memory::new(UnixClock::shared(), 10_000), Options::default());
    service.apply(config)?;
    let grpc = Grpc::new(Arc::new(service));
    let start = Instant::now();
    let admitted = match mode.as_str() {
        "ok" => rt.block_on(run(&AlwaysOk, &requests, n)),
        "service" => rt.block_on(run(&grpc, &requests, n)),
        other => return Err(format!("unknown mode {other}: ok or service").into()),
    };
    let took = start.elapsed();
    println!(
        "{mode}: {n} requests, {admitted} admitted, {:.0} ns per request",
        took.as_nanos() as f64 / n.max(1) as f64
    );
    Ok(())
}
