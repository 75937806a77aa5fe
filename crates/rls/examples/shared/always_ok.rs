//! The always-OK handler, the floor of BENCHMARKS.md's "cost of deciding": `ok_server.rs`
//! serves it over gRPC, `decide.rs` calls it in process beside the service's.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

/// Answers every `ShouldRateLimit` with `OK` and one `OK` status per descriptor, deciding
/// nothing.
#[derive(Debug)]
pub(crate) struct AlwaysOk;

#[tonic::async_trait]
impl RateLimitService for AlwaysOk {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let r = request.into_inner();
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: 1,
            statuses: r
                .descriptors
                .iter()
                .map(|_| DescriptorStatus {
                    code: 1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }))
    }
}
