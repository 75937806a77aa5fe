//! Helpers of the integration tests: a configuration directory, the service on loopback
//! with a real tonic client, request builders; an xDS management server ([`ads`]).
#![allow(dead_code, unreachable_pub)]

pub mod ads;
pub mod pki;

use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use limitcore_rls::{start, Running, ServerConfig, SharedClock};
use std::path::Path;
use tonic::transport::Channel;

/// A directory with `files` (`(name, text)`).
pub fn config_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write a config file");
    }
    dir
}

/// The service on loopback (ports chosen by the system), with extra flags.
pub async fn serve(dir: &Path, clock: SharedClock, flags: &[&str]) -> Running {
    let mut args = vec![
        "limitcore-rls".to_owned(),
        "--grpc-addr".into(),
        "127.0.0.1:0".into(),
        "--http-addr".into(),
        "127.0.0.1:0".into(),
        "--config-dir".into(),
        dir.display().to_string(),
        "--reload-ms".into(),
        "50".into(),
    ];
    args.extend(flags.iter().map(|s| (*s).to_owned()));
    let config = ServerConfig::try_parse_from(args).expect("flags parse");
    start(&config, clock, None)
        .await
        .expect("the service starts")
}

/// A tonic client of the service at `running`.
pub async fn client(running: &Running) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(format!("http://{}", running.grpc_addr))
        .await
        .expect("the client connects")
}

/// A descriptor of `entries`.
pub fn desc(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        ..Default::default()
    }
}

/// `d` with its own hits.
pub fn hits(mut d: RateLimitDescriptor, n: u64) -> RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: n });
    d
}

/// `d` as a refund of `n`.
pub fn refund(mut d: RateLimitDescriptor, n: u64) -> RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: n });
    d.is_negative_hits = true;
    d
}

/// `d` with a request-side limit.
pub fn with_limit(mut d: RateLimitDescriptor, rpu: u32, unit: i32) -> RateLimitDescriptor {
    d.limit = Some(RateLimitOverride {
        requests_per_unit: rpu,
        unit,
    });
    d
}

/// A request.
pub fn req(
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
    hits_addend: u32,
) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend,
    }
}

/// Ask, expecting an answer.
pub async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    r: RateLimitRequest,
) -> RateLimitResponse {
    client
        .should_rate_limit(r)
        .await
        .expect("an answer")
        .into_inner()
}

/// The codes of a response: overall, then each status.
pub fn codes(r: &RateLimitResponse) -> (i32, Vec<i32>) {
    (r.overall_code, r.statuses.iter().map(|s| s.code).collect())
}

/// OK and OVER_LIMIT as proto numbers.
pub const OK: i32 = 1;
pub const OVER: i32 = 2;

/// A Unix time in ns: 2026-01-01T00:00:00Z plus `secs`.
pub fn unix(secs: f64) -> u64 {
    1_767_225_600_000_000_000 + (secs * 1e9) as u64
}
