//! The RLS v3 messages (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`) as
//! plain types: a [`Request`] in, a [`Response`] out, or a [`RequestError`]. The gRPC
//! service ([`grpc`](crate::grpc)) and the `/json` endpoint ([`json`](crate::json))
//! convert from and to them; the service ([`Service`](crate::Service)) decides on them.

use crate::config::Unit;
use std::time::Duration;

/// The most a descriptor or a request can ask for at once: Envoy caps `hits_addend` at
/// 10^9, and so does the service (a larger value counts as 10^9).
pub const MAX_HITS: u64 = 1_000_000_000;

/// A request-side limit (`RateLimitDescriptor.limit`): replaces the configured limit of
/// the descriptor, in a domain the configuration has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOverride {
    /// Permits per unit.
    pub requests_per_unit: u32,
    /// The proto unit number (`envoy.type.v3.RateLimitUnit`).
    pub unit: i32,
}

/// One descriptor of a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// The entries, `(key, value)`, in order.
    pub entries: Vec<(String, String)>,
    /// A request-side limit.
    pub limit: Option<LimitOverride>,
    /// This descriptor's own cost; present, it wins over the request's (0: a check that
    /// consumes nothing).
    pub hits_addend: Option<u64>,
    /// The cost is given back (a refund), never past an empty state.
    pub is_negative_hits: bool,
}

/// A `ShouldRateLimit` request.
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Descriptor, Request};
///
/// // Two hits of `user=alice`, and a check (0 hits) of the route's limit.
/// let request = Request {
///     domain: "api".into(),
///     descriptors: vec![
///         Descriptor { entries: vec![("user".into(), "alice".into())], ..Default::default() },
///         Descriptor { entries: vec![("route".into(), "/a".into())], hits_addend: Some(0), ..Default::default() },
///     ],
///     hits_addend: 2,
/// };
/// # let _ = request;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The domain; must not be empty.
    pub domain: String,
    /// The descriptors; at least one.
    pub descriptors: Vec<Descriptor>,
    /// The request's cost for descriptors without their own (0 counts 1).
    pub hits_addend: u32,
}

/// A descriptor's or the request's code (`RateLimitResponse.Code`; never `UNKNOWN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Within the limit (proto 1).
    Ok,
    /// Over the limit (proto 2).
    OverLimit,
}

/// `RateLimitResponse.RateLimit`: the limit a descriptor was decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// The rule's name (empty when it has none).
    pub name: String,
    /// Permits per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

/// `RateLimitResponse.DescriptorStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The descriptor's code.
    pub code: Code,
    /// The limit it was decided by (`None`: no rule, a whitelisting rule, or one replaced).
    pub current_limit: Option<CurrentLimit>,
    /// Permits left (`u32::MAX` for an unlimited rule, 0 without a rule).
    pub limit_remaining: u32,
    /// Admitted: the time until the limit is full again; refused: the time until this
    /// request would be admitted in full (for a request larger than the limit, which no wait
    /// admits, the time until the limit is full).
    pub duration_until_reset: Option<Duration>,
}

/// A `ShouldRateLimit` response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// `OVER_LIMIT` if any descriptor is (shadow and quota mode excepted), else `OK`.
    pub overall_code: Code,
    /// One per request descriptor, in order.
    pub statuses: Vec<Status>,
    /// Response headers for the client (`RateLimit-*`, the refusal's content type).
    pub response_headers_to_add: Vec<(String, String)>,
    /// The body of a refusal, if configured.
    pub raw_body: Vec<u8>,
    /// The dynamic metadata (a JSON object), if any.
    pub dynamic_metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Why a request got no decision: answered as a gRPC status, so the proxy applies its
/// `failure_mode_deny`.
///
/// # Examples
///
/// ```
/// use limitcore_rls::RequestError;
///
/// let e = RequestError::InvalidArgument("rate limit domain must not be empty".into());
/// assert_eq!(e.to_string(), "invalid argument: rate limit domain must not be empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The request is malformed (gRPC `INVALID_ARGUMENT`): an empty domain or descriptor
    /// list, a descriptor without entries, an unknown unit in a limit override.
    InvalidArgument(String),
    /// The backend could not decide (gRPC `UNAVAILABLE`).
    Unavailable(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            RequestError::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for RequestError {}
