//! # limitcore-rls
//!
//! Envoy's rate-limit service — `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
//! over gRPC, the protocol behind the HTTP and network rate-limit filters of Envoy, Istio,
//! Envoy Gateway, Contour, Emissary and Gloo — on [limitcore]'s limiters, configured by
//! envoyproxy/ratelimit's YAML files, unchanged.
//!
//! - **Protocol**: all of RLS v3 ([`protocol`], decided by [`Service`]): the domain, ordered descriptors, the
//!   request's and each descriptor's `hits_addend` (0: a check that consumes nothing,
//!   refused while the key is in debt), `is_negative_hits` (permits given back), a cost
//!   charged after the response (Envoy's `apply_on_stream_done`) never lost: a refused
//!   descriptor records its hits ([`RefusedHits`]), request-side limit overrides, every unit including
//!   `WEEK`; statuses one per descriptor with `current_limit`, `limit_remaining` and an
//!   exact `duration_until_reset`, so Envoy's `X-RateLimit-*` headers work; optional IETF
//!   `RateLimit-*` headers, a refusal body, dynamic metadata; `INVALID_ARGUMENT` and
//!   `UNAVAILABLE` for what cannot be decided, so the proxy's `failure_mode_deny` applies.
//! - **Configuration** ([`config`]): envoyproxy/ratelimit's format and matching rules
//!   ([`matching`]), validated strictly with the file, line and key of each error,
//!   domains merged across files on request, reloaded when a file changes ([`Reloader`]):
//!   a bad file keeps the configuration in force; a changed limit keeps its counters. Or
//!   over xDS ([`xds`]), as envoyproxy/ratelimit's `GRPC_XDS_SOTW` provider and Envoy
//!   Gateway serve it: the same resources in the same model, each version applied whole
//!   or refused with a NACK. Two
//!   keys of this service: `algorithm` (`fixed-window`, the default, aligned to the Unix
//!   epoch as envoyproxy/ratelimit's; `gcra`, `token-bucket`, `sliding-window`,
//!   `sliding-log`) and `burst`.
//! - **All or nothing** by default ([`Mode`]): a request is admitted only if every matched
//!   descriptor admits it, and a refusal charges none that admitted it (`charge-each` is
//!   envoyproxy/ratelimit's counters); per-rule and global shadow mode; quota mode.
//! - **Backends** ([`Backend`], one interface): in process ([`Memory`]: the core's keyed
//!   limiters, bounded memory, the core's all-or-nothing [`Batch`]); Redis exact
//!   ([`RedisExact`]: one script call decides every descriptor of a request, atomically,
//!   every algorithm as in process; a hash tag per domain for Redis Cluster); Redis leased ([`RedisLeased`]: limitcore-redis's
//!   [`LeasedLimiter`]). Each keeps its rules' states in a type of its own.
//!   Redis calls have a deadline (10 ms by default) and a circuit breaker, and an outage
//!   policy answers while Redis cannot.
//! - **Operations** ([`server`]): gRPC health checking, the gRPC port over TLS or mutual
//!   TLS (envoyproxy/ratelimit's `GRPC_SERVER_USE_TLS` and its files), `/healthcheck`, `/json`,
//!   `/metrics` ([`metrics`](mod@metrics): envoyproxy/ratelimit's counters by domain and
//!   rule), graceful shutdown, flags and environment variables.
//!
//! Sources: Envoy's RLS v3 API (`envoy/service/ratelimit/v3/rls.proto`,
//! `envoy/extensions/common/ratelimit/v3/ratelimit.proto`); envoyproxy/ratelimit's README
//! for the configuration format, its matching rules, `/json` and its statistics;
//! draft-ietf-httpapi-ratelimit-headers for the `RateLimit-*` headers.
//!
//! [`LeasedLimiter`]: limitcore_redis::LeasedLimiter
//! [`Batch`]: limitcore::Batch
//!
//! # Layers
//!
//! The modules are built in layers, each using only the ones below it (within a layer,
//! without a cycle); no module imports through this file, which only re-exports. The
//! workspace's `tests/layers.rs` checks both on the source (`cargo test -p limitcore --test
//! layers`).
//!
//! 0. **Vocabulary**: the clock (`clock`), the configuration ([`config`]), the metrics
//!    ([`metrics`](mod@metrics)), the xDS configuration resource's generated types
//!    ([`pb`]), the RLS v3 messages as plain types ([`protocol`]), the TLS files read
//!    (`tls`: PEM certificates, CAs and key pairs, for the xDS client and the gRPC port).
//! 1. **Matching and backends**: a descriptor matched to its rule ([`matching`]); where
//!    decisions are made (`backend`: the [`Backend`] interface and its three places).
//! 2. **The service** (`service`): a request planned, decided on the backend, answered.
//! 3. **Faces**: gRPC ([`grpc`]), `/json` ([`json`]), the HTTP endpoints ([`http`]), the
//!    configuration directory watched (`reload`), the configuration over xDS ([`xds`]).
//! 4. **The server** ([`server`]): the flags, the listeners, the backend chosen.
//!
//! # Examples
//!
//! ```
//! use limitcore_rls::{Code, Config, Descriptor, Memory, Options, Request, Service, Settings, UnixClock};
//!
//! let config = Config::from_str_named("api.yaml", "
//! domain: api
//! descriptors:
//!   - key: user
//!     rate_limit: {unit: minute, requests_per_unit: 2}
//! ", &Settings::default())?;
//! let service = Service::new(Memory::new(UnixClock::shared(), 1000), Options::default());
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

// Layer 0: the vocabulary.
mod clock;
pub mod config;
pub mod metrics;
pub mod pb;
pub mod protocol;
mod tls;

// Layer 1: matching and the backends.
mod backend;
pub mod matching;

// Layer 2: the service.
mod service;

// Layer 3: the faces.
pub mod grpc;
pub mod http;
pub mod json;
mod reload;
pub mod xds;

// Layer 4: the server.
pub mod server;

pub use backend::memory::rule::RuleLimiter;
pub use backend::memory::Memory;
pub use backend::redis_exact::{RedisExact, RuleParams};
pub use backend::redis_leased::{RedisLeased, RuleLease};
pub use backend::{Backend, BackendError, Item, Mode, Op, Outcome, RefusedHits};
pub use clock::{SharedClock, UnixClock};
pub use config::{Config, ConfigError, Limit, Rule, Settings, Unit};
pub use config::{ConfigStatus, SourceKind, StatusReport};
pub use protocol::{
    Code, CurrentLimit, Descriptor, LimitOverride, Request, RequestError, Response, Status,
    MAX_HITS,
};
pub use reload::Reloader;
pub use server::{start, BackendKind, OutagePolicy, Running, ServerConfig};
pub use service::{ApplyError, HeaderNames, Options, Service};
pub use xds::{Subscription, XdsConfig};
