//! # limitcore-rls
//!
//! Envoy's rate-limit service — `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
//! over gRPC, the protocol behind the HTTP and network rate-limit filters of Envoy, Istio,
//! Envoy Gateway, Contour, Emissary and Gloo — on [limitcore]'s limiters, configured by
//! envoyproxy/ratelimit's YAML files, unchanged.
//!
//! - **Protocol**: all of RLS v3 ([`decide`]): the domain, ordered descriptors, the
//!   request's and each descriptor's `hits_addend` (0: a check that consumes nothing),
//!   `is_negative_hits` (a refund), request-side limit overrides, every unit including
//!   `WEEK`; statuses one per descriptor with `current_limit`, `limit_remaining` and an
//!   exact `duration_until_reset`, so Envoy's `X-RateLimit-*` headers work; optional IETF
//!   `RateLimit-*` headers, a refusal body, dynamic metadata; `INVALID_ARGUMENT` and
//!   `UNAVAILABLE` for what cannot be decided, so the proxy's `failure_mode_deny` applies.
//! - **Configuration** ([`config`]): envoyproxy/ratelimit's format and matching rules
//!   ([`matching`]), validated strictly with the file, line and key of each error,
//!   domains merged across files on request, reloaded when a file changes ([`Reloader`]):
//!   a bad file keeps the configuration in force; a changed limit keeps its counters. Two
//!   keys of this service: `algorithm` (`fixed-window`, the default, aligned to the Unix
//!   epoch as envoyproxy/ratelimit's; `gcra`, `token-bucket`, `sliding-window`,
//!   `sliding-log`) and `burst`.
//! - **All or nothing** by default ([`Mode`]): a request is admitted only if every matched
//!   descriptor admits it, and a refusal charges none (`charge-each` restores
//!   envoyproxy/ratelimit's counters); per-rule and global shadow mode; quota mode.
//! - **Backends** ([`Backend`]): in process (the core's keyed limiters, bounded memory);
//!   Redis exact (one script call decides every descriptor of a request, atomically; a hash
//!   tag per domain for Redis Cluster); Redis leased (limitcore-redis's [`LeasedLimiter`]).
//!   Redis calls have a deadline (10 ms by default) and a circuit breaker, and an outage
//!   policy answers while Redis cannot.
//! - **Operations** ([`server`]): gRPC health checking, `/healthcheck`, `/json`,
//!   `/metrics` ([`metrics`](mod@metrics): envoyproxy/ratelimit's counters by domain and
//!   rule), graceful shutdown, flags and environment variables.
//!
//! Sources: Envoy's RLS v3 API (`envoy/service/ratelimit/v3/rls.proto`,
//! `envoy/extensions/common/ratelimit/v3/ratelimit.proto`); envoyproxy/ratelimit's README
//! for the configuration format, its matching rules, `/json` and its statistics;
//! draft-ietf-httpapi-ratelimit-headers for the `RateLimit-*` headers.
//!
//! [`LeasedLimiter`]: limitcore_redis::LeasedLimiter
//!
//! # Examples
//!
//! ```
//! use limitcore_rls::{Backend, Code, Config, Descriptor, Options, Request, Service, Settings, UnixClock};
//!
//! let config = Config::from_str_named("api.yaml", "
//! domain: api
//! descriptors:
//!   - key: user
//!     rate_limit: {unit: minute, requests_per_unit: 2}
//! ", &Settings::default())?;
//! let service = Service::new(Backend::memory(UnixClock::shared(), 1000), Options::default());
//! service.apply(config)?;
//! let request = Request {
//!     domain: "api".into(),
//!     descriptors: vec![Descriptor { entries: vec![("user".into(), "alice".into())], ..Default::default() }],
//!     hits_addend: 2,
//! };
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! assert_eq!(rt.block_on(service.should_rate_limit(&request))?.overall_code, Code::Ok);
//! let refused = rt.block_on(service.should_rate_limit(&request))?;
//! assert_eq!(refused.overall_code, Code::OverLimit);
//! assert_eq!(refused.statuses[0].limit_remaining, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
mod clock;
pub mod config;
pub mod decide;
pub mod grpc;
pub mod http;
pub mod json;
pub mod matching;
pub mod metrics;
mod reload;
pub mod server;

pub use backend::{Backend, BackendError, Mode, RedisExact, RedisLeased};
pub use clock::{SharedClock, UnixClock};
pub use config::{Config, ConfigError, Limit, Rule, Settings, Unit};
pub use decide::{
    ApplyError, Code, CurrentLimit, Descriptor, HeaderNames, LimitOverride, Options, Request,
    RequestError, Response, Service, Status,
};
pub use reload::Reloader;
pub use server::{start, BackendKind, OutagePolicy, Running, ServerConfig};
