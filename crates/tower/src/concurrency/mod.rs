//! Concurrency limits for HTTP services: at most `limit` requests in flight, a request
//! counting **until its response body ends**, the limit fixed or adaptive.
//!
//! - [`ConcurrencyLimitLayer`] / [`ConcurrencyLimit`]: the layer and its service, over
//!   `limitcore`'s [`Permits`](limitcore::concurrency::Permits) (a lock-free in-flight
//!   limit in one word; [`Aimd`](limitcore::concurrency::Aimd),
//!   [`Vegas`](limitcore::concurrency::Vegas), [`Gradient2`](limitcore::concurrency::Gradient2)
//!   or [`EnvoyGradient`](limitcore::concurrency::EnvoyGradient) for an adaptive one).
//! - [`PermitBody`]: the response body that holds the permit.
//! - [`Classify`]: what a response tells an adaptive limit ([`DefaultClassifier`]);
//!   [`Latency`]: the span a success's latency covers.
//! - [`Shed`]: why a request was refused, in its response's extensions.
//!
//! # Behaviour
//!
//! - **The permit is held until the body ends.** A permit is taken in `call` and moves
//!   into the response's body ([`PermitBody`]), which gives it back at its end, on its
//!   error, or when it is dropped (the client went away). tower's `ConcurrencyLimit` (and
//!   tower-http's attempt, PR #447) release it when the response future resolves, before a
//!   streaming body is sent, so the work in flight is undercounted by every body still
//!   streaming. Here an admitted request counts from its grant to its last byte.
//! - **Shed requests are answered**: with 503 Service Unavailable
//!   ([`Builder::status`]), a one-line `text/plain` body in the inner service's body type
//!   ([`RefusalBody`](crate::RefusalBody)), and the [`Shed`] extension; at once (the
//!   default), or after a bounded wait in the limit's queue ([`Builder::queue`]: at most
//!   `backlog` waiters, each at most `max_wait`; FIFO or LIFO, [`Builder::order`]).
//! - **Classification**: the response's head is classified when it arrives
//!   ([`Classify`]); the outcome is reported to the limit when the body ends. By default a
//!   5xx is a drop (an adaptive rule backs off), 2xx–4xx a success whose latency runs from
//!   the grant to the body's end ([`Latency::BodyEnd`]: the span the permit is held over,
//!   so in-flight count and latency describe the same work), or to the head
//!   ([`Latency::Head`]). A body that fails mid-stream is a drop; one dropped before its
//!   end is a cancellation (no sample), or still a drop if its response was one.
//! - **Inner-service errors**: the permit is completed at once with
//!   [`Classify::classify_error`] (by default a drop) and the error is returned as it is.
//! - **Upgrades** (`101 Switching Protocols`, WebSocket): the permit is completed when the
//!   101 response arrives (by default with no sample: [`DefaultClassifier`] ignores 101),
//!   not held for the upgraded connection. An upgraded connection lives outside the
//!   response body, for as long as the client keeps it (hours, for a WebSocket): holding
//!   the permit for it would turn the limit on requests into a limit on connections, and
//!   its lifetime would read as a huge latency to an adaptive rule. To bound upgraded
//!   connections, take a permit of your own in the upgrade handler (from
//!   [`ConcurrencyLimitLayer::permits`], or a separate limit) and hold it in the
//!   connection's task.
//! - **One limit**: the layer holds its state in an [`Arc`](std::sync::Arc); every clone of
//!   the layer and every service it makes (one per connection under hyper and axum) share
//!   one limit.
//! - **Readiness**: `poll_ready` is the inner service's; the limit is decided in `call`.
//!
//! # Body type
//!
//! The response type is `Response<PermitBody<B>>`, `B` the inner service's body: the
//! permit has to travel with the body. Behind `axum::Router::layer` this is converted to
//! axum's `Body` as any body is; around a whole router served by `axum::serve`, map it
//! with `.map_response(|r| r.map(axum::body::Body::new))` outside the layer.
//!
//! # Examples
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use limitcore::concurrency::Gradient2;
//! use limitcore_tower::ConcurrencyLimitLayer;
//! use std::time::Duration;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limit = ConcurrencyLimitLayer::adaptive(Gradient2::new())?
//!     .queue(256, Duration::from_millis(100))?
//!     .build();
//! let app = Router::new().route("/", get(|| async { "ok" })).layer(limit);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod body;
mod builder;
mod classify;
mod future;
mod layer;
mod service;
mod shed;
mod tracked;

pub use body::PermitBody;
pub use builder::Builder;
pub use classify::{Classify, DefaultClassifier, Latency};
pub use future::ResponseFuture;
pub use layer::ConcurrencyLimitLayer;
pub use limitcore::concurrency::Completion;
pub use service::ConcurrencyLimit;
pub use shed::Shed;
