//! The gRPC service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` on
//! tonic, with envoy-types' generated messages, converted to and from [`Request`] and
//! [`Response`].

use crate::protocol::{Code, Descriptor, LimitOverride, Request, RequestError, Response};
use crate::service::Service;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf;
use std::sync::Arc;

/// The proto request as a [`Request`].
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use limitcore_rls::grpc::from_proto;
///
/// let r = from_proto(RateLimitRequest { domain: "d".into(), hits_addend: 3, ..Default::default() });
/// assert_eq!((r.domain.as_str(), r.hits_addend), ("d", 3));
/// ```
pub fn from_proto(request: RateLimitRequest) -> Request {
    Request {
        domain: request.domain,
        hits_addend: request.hits_addend,
        descriptors: request
            .descriptors
            .into_iter()
            .map(|d| Descriptor {
                entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
                limit: d.limit.map(|l| LimitOverride {
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit,
                }),
                hits_addend: d.hits_addend.map(|h| h.value),
                is_negative_hits: d.is_negative_hits,
            })
            .collect(),
    }
}

/// A JSON value as a protobuf `Value`.
fn value(v: &serde_json::Value) -> protobuf::Value {
    use protobuf::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(a) => Kind::ListValue(protobuf::ListValue {
            values: a.iter().map(value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(to_struct(o)),
    };
    protobuf::Value { kind: Some(kind) }
}

/// A JSON object as a protobuf `Struct`.
fn to_struct(o: &serde_json::Map<String, serde_json::Value>) -> protobuf::Struct {
    protobuf::Struct {
        fields: o.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

/// The proto code of a [`Code`].
fn code(c: Code) -> i32 {
    match c {
        Code::Ok => PbCode::Ok as i32,
        Code::OverLimit => PbCode::OverLimit as i32,
    }
}

/// A [`Response`] as the proto response.
pub fn to_proto(response: &Response) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code(response.overall_code),
        statuses: response
            .statuses
            .iter()
            .map(|s| DescriptorStatus {
                code: code(s.code),
                current_limit: s.current_limit.as_ref().map(|l| RateLimit {
                    name: l.name.clone(),
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit.proto(),
                }),
                limit_remaining: s.limit_remaining,
                duration_until_reset: s.duration_until_reset.map(|d| protobuf::Duration {
                    seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    nanos: d.subsec_nanos() as i32,
                }),
                quota: None,
            })
            .collect(),
        response_headers_to_add: response
            .response_headers_to_add
            .iter()
            .map(|(k, v)| HeaderValue {
                key: k.clone(),
                value: v.clone(),
                ..Default::default()
            })
            .collect(),
        request_headers_to_add: Vec::new(),
        raw_body: response.raw_body.clone(),
        dynamic_metadata: response.dynamic_metadata.as_ref().map(to_struct),
        quota: None,
    }
}

/// A [`RequestError`] as a gRPC status.
fn status(e: RequestError) -> tonic::Status {
    match e {
        RequestError::InvalidArgument(m) => tonic::Status::invalid_argument(m),
        RequestError::Unavailable(m) => tonic::Status::unavailable(m),
    }
}

/// The tonic service around a [`Service`].
#[derive(Debug, Clone)]
pub struct Grpc {
    service: Arc<Service>,
}

impl Grpc {
    /// The gRPC face of `service`.
    pub fn new(service: Arc<Service>) -> Self {
        Grpc { service }
    }

    /// The tonic server of it.
    pub fn server(self) -> RateLimitServiceServer<Grpc> {
        RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl RateLimitService for Grpc {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let request = from_proto(request.into_inner());
        let response = self
            .service
            .should_rate_limit(&request)
            .await
            .map_err(status)?;
        Ok(tonic::Response::new(to_proto(&response)))
    }
}
