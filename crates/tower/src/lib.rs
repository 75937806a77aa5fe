//! # limitcore-tower
//!
//! Rate limiting at the HTTP boundary for [tower] services (axum, hyper, tonic, proxies),
//! on the lock-free limiters of [`limitcore`].
//!
//! - [`RateLimitLayer`] / [`RateLimit`]: decides each request against any
//!   [`KeyedRateLimiter`](limitcore::KeyedRateLimiter) — `Keyed` (GCRA or any algorithm per
//!   key), `KeyedSketch`, `Global`, `All` of per-client and global limits — **one state
//!   shared by every clone and connection**; or, awaited ([`RateLimitLayer::remote`],
//!   [`Remote`]), any [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter) (a limit
//!   kept on a server: `limitcore-redis`'s exact modes), a failed decision answered by
//!   [`OnLimiterError`]; refusals are ordinary responses (429 by
//!   default) with `Retry-After` (seconds, rounded up) and the IETF `RateLimit-Policy` /
//!   `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers); modes reject, delay and
//!   dry run, as nginx's `limit_req` ([`LimitReq`] for its `burst`, `delay=`, `nodelay`);
//!   an [`Outcome`] in every response's extensions (unless
//!   [`Builder::outcome_extension`] turns it off). Responses keep the inner service's
//!   body type ([`RefusalBody`]: axum's `Body` passes through untouched).
//! - Costs known at the response ([`Builder::response_cost`], [`Metered`]): a request
//!   admitted while its key is not in debt (or its estimate reserved), then charged what its
//!   response says it cost ([`ResponseCost`]: a header such as an LLM answer's tokens, the
//!   body's bytes, a closure over the head such as "only 5xx"), recorded once when the body
//!   ends ([`MeteredBody`]), also when the client goes away.
//! - Keys ([`key`]), read from the request's head as it is ([`RequestHead`]): global, the
//!   peer address ([`PeerIp`]), the client behind trusted proxies from `X-Forwarded-For` or
//!   `Forwarded` (RFC 7239) read from the right ([`ForwardedIp`]), IPv6 by /64
//!   ([`IpPrefix`]), a header ([`HeaderKey`]), a closure ([`FnKey`]); a documented answer
//!   for requests with no usable key ([`MissingKey`]).
//! - [`PaceLayer`]: the client side, each outgoing request started at its own slot.
//! - [`ConcurrencyLimitLayer`] / [`ConcurrencyLimit`] ([`concurrency`]): at most `limit`
//!   requests in flight, fixed or adaptive (AIMD, Vegas, Gradient2, Envoy's gradient from
//!   `limitcore::concurrency`), each request holding its permit **until its response body
//!   ends**; shed requests answered with 503 at once or after a bounded queue wait; responses
//!   classified for the adaptive rule (5xx and inner errors are drops).
//!
//! # Layers
//!
//! Each layer uses only the ones below it, without a cycle; no module imports through
//! this file, which only re-exports (`tests/layers.rs` of the workspace checks it, with
//! the layers, on the source: `cargo test -p limitcore --test layers`):
//!
//! 0. the vocabulary: the refusal bodies (`body`), `Forwarded` parsing (`forwarded`), the
//!    rate-limit fields (`headers`), the decision modes (`mode`: [`Local`], [`Remote`],
//!    [`Metered`], [`OnLimiterError`]), what a response cost ([`ResponseCost`]),
//!    [`Outcome`];
//! 1. the keys ([`key`]) and the metrics (`telemetry`);
//! 2. the decision a layer shares with its services (`policy`), the response future
//!    (`future`);
//! 3. the services (`service`, `remote`, `metered`);
//! 4. the layers and their builders (`layer`, `builder`, [`concurrency`], `pace`,
//!    `limit_req`).
//!
//! # Quick start (axum)
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use limitcore_tower::RateLimitLayer;
//! use std::net::SocketAddr;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let app = Router::new()
//!     .route("/", get(|| async { "ok" }))
//!     .layer(RateLimitLayer::per_ip("5/s".parse()?)?.build()?); // per client IP, GCRA
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! The peer address comes from axum's `ConnectInfo` with the feature `axum`; a hyper server
//! inserts the peer's [`SocketAddr`](std::net::SocketAddr) into each request's extensions
//! itself (see [`PeerIp`]).
//!
//! # Per client and global, all or nothing
//!
//! ```
//! use limitcore::{All, Gcra, Global, Keyed, KeyedRefund, Quota};
//! use limitcore_tower::{PeerIp, RateLimitLayer};
//! use std::net::IpAddr;
//!
//! let per_client: Keyed<IpAddr> = Keyed::new(Quota::per_second(10)?)?.with_max_keys(100_000);
//! let everyone = Global::new(Gcra::new(Quota::per_second(1_000)?)?);
//! let both: All<Box<dyn KeyedRefund<IpAddr>>> = All::new(vec![Box::new(per_client), Box::new(everyone)]);
//! let layer = RateLimitLayer::new(both, PeerIp::new());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Metrics (feature `metrics`)
//!
//! With the feature `metrics`, both layers report through the [`metrics`](https://docs.rs/metrics/0.24)
//! facade (0.24; the crate links only to the facade: the application installs a recorder,
//! such as `metrics-exporter-prometheus`'s, which the `server` example serves on `/metrics`).
//!
//! | name | type | labels | unit | what |
//! |---|---|---|---|---|
//! | `limitcore_requests_total` | counter | `limit`, `outcome` | requests | requests the rate-limit layer decided; `outcome` is one of `admitted` ([`Outcome::Passed`]), `limited` ([`Outcome::Rejected`]), `delayed` ([`Outcome::Delayed`]), `dry_run` ([`Outcome::DryRunRejected`], [`Outcome::DryRunDelayed`]: a dry run's would-be refusals and delays, counted apart from the enforced ones; what a dry run admits is `admitted`), `too_large` ([`Outcome::TooLarge`]), `missing_key` ([`Outcome::MissingKey`]), `error` ([`Outcome::LimiterError`], whichever [`OnLimiterError`] policy answered it) |
//! | `limitcore_wait_seconds` | histogram | `limit` | seconds | the delays the rate-limit layer granted in delay mode (enforced [`Outcome::Delayed`] only) |
//! | `limitcore_concurrency_requests_total` | counter | `limit`, `outcome` | requests | requests the concurrency layer `admitted` (a permit granted, at once or after a queue wait) or `shed` |
//! | `limitcore_concurrency_in_flight` | gauge | `limit` | requests | requests holding a permit of the concurrency layer: from the grant to the end of the response body (or the permit's release on an error, an upgrade, a drop) |
//! | `limitcore_concurrency_limit` | gauge | `limit` | requests | the concurrency layer's limit, as of its latest grant or shed (an adaptive limit moves between requests; set at build too) |
//!
//! - **Labels are names you give, never request data.** `limit` is
//!   [`Builder::metrics_name`][rate_name] (default: the policy name, [`Builder::policy_name`], itself
//!   `"default"` by default) or [`concurrency::Builder::metrics_name`][concurrency_name] (default
//!   `"default"`); [`Builder::metrics_label`][rate_label] and
//!   [`concurrency::Builder::metrics_label`][concurrency_label] add
//!   fixed labels such as a route template (`route="/users/{id}"`). No label ever holds a
//!   client key, an address or a path as requested: a flood of new keys adds no series.
//! - **Registered once.** Each layer registers its handles when it is built
//!   ([`Builder::build`], [`concurrency::Builder::build`]) with the recorder in force then —
//!   install the recorder first (or build inside `metrics::with_local_recorder`) — and keeps
//!   them in the state its clones share: a request costs an atomic add or two (an admission
//!   through the concurrency layer: the counter and the in-flight gauge up, the limit gauge
//!   set; the gauge down when the permit goes back). With no recorder installed the handles
//!   are empty and the calls return at once; without the feature the layers hold nothing and
//!   call nothing.
//! - Series of all outcomes exist from the build on (at 0), so a rate and its ratio are
//!   defined before the first refusal.
//!
//! # Sources
//!
//! RFC 7239 (`Forwarded`); draft-ietf-httpapi-ratelimit-headers-10/-11 (`RateLimit`,
//! `RateLimit-Policy`, the `quota-exceeded` problem type); RFC 9457 (problem details);
//! RFC 9110 §10.2.3 (`Retry-After`); RFC 9651 (structured field values); nginx's
//! `ngx_http_limit_req_module` (burst, delay, nodelay, dry run).
// The Metrics section's links: the methods exist with the feature `metrics` only.
#![doc = ""]
#![cfg_attr(feature = "metrics", doc = "[rate_name]: Builder::metrics_name")]
#![cfg_attr(feature = "metrics", doc = "[rate_label]: Builder::metrics_label")]
#![cfg_attr(
    feature = "metrics",
    doc = "[concurrency_name]: concurrency::Builder::metrics_name"
)]
#![cfg_attr(
    feature = "metrics",
    doc = "[concurrency_label]: concurrency::Builder::metrics_label"
)]
#![cfg_attr(not(feature = "metrics"), doc = "[rate_name]: Builder")]
#![cfg_attr(not(feature = "metrics"), doc = "[rate_label]: Builder")]
#![cfg_attr(
    not(feature = "metrics"),
    doc = "[concurrency_name]: concurrency::Builder"
)]
#![cfg_attr(
    not(feature = "metrics"),
    doc = "[concurrency_label]: concurrency::Builder"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod body;
mod builder;
pub mod concurrency;
mod forwarded;
mod future;
mod headers;
pub mod key;
mod layer;
mod limit_req;
mod metered;
mod mode;
mod outcome;
mod pace;
mod policy;
mod remote;
mod response_cost;
mod service;
mod telemetry;

pub use body::RefusalBody;
pub use builder::Builder;
pub use concurrency::{ConcurrencyLimit, ConcurrencyLimitLayer};
pub use future::ResponseFuture;
pub use headers::{InvalidPolicyName, RateLimitHeaders, delay_seconds};
pub use key::{
    FnKey, ForwardHeader, ForwardedIp, GlobalKey, HeaderKey, InvalidPrefix, IpPrefix, KeyExtractor,
    MissingKey, PeerIp, RequestHead, SHARED_IP_KEY, Trust, peer_addr,
};
pub use layer::{DEFAULT_MAX_KEYS, RateLimitLayer};
pub use limit_req::LimitReq;
pub use metered::{MeteredBody, MeteredFuture};
pub use mode::{Local, Metered, OnLimiterError, Remote};
pub use outcome::Outcome;
pub use pace::{Pace, PaceFuture, PaceLayer};
pub use remote::RemoteFuture;
pub use response_cost::ResponseCost;
pub use service::RateLimit;
