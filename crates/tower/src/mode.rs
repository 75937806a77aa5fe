//! How the rate-limit layer decides: [`Local`] (in `call`, by a synchronous
//! `KeyedRateLimiter`), [`Remote`] (awaited, from any `AsyncKeyedRateLimiter`; its service
//! in `remote`) or [`Metered`] (local, each request charged what its response cost; its
//! service in `metered`), and what a [`Remote`] layer answers when its limiter fails
//! ([`OnLimiterError`]).

use http::StatusCode;

/// The decision mode of a [`RateLimitLayer`](crate::RateLimitLayer) over a synchronous
/// [`KeyedRateLimiter`](limitcore::KeyedRateLimiter) (the default): each request is decided
/// in the service's `call`, in a few atomic operations, and a refusal is answered without
/// calling the inner service. Every mode of the layer (reject, delay, dry run).
///
/// A marker type: it only selects the service's implementation.
///
/// # Examples
///
/// ```
/// use limitcore_tower::{GlobalKey, Local, RateLimitLayer};
///
/// // `RateLimitLayer<X, L>` is `RateLimitLayer<X, L, Local>`.
/// let layer: RateLimitLayer<GlobalKey, limitcore::Global<limitcore::Gcra>, Local> =
///     RateLimitLayer::global("10/s".parse()?)?.build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Local;

/// The decision mode of a [`RateLimitLayer`](crate::RateLimitLayer) over an
/// [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter), made by
/// [`RateLimitLayer::remote`](crate::RateLimitLayer::remote): a limit kept on a server (one
/// round trip per decision, such as `limitcore-redis`'s `RedisGcra`, `RedisSlidingLog` and
/// `RedisAll`), or any limiter whose decision is a future that may fail.
///
/// # Behaviour
///
/// - **Where the request waits.** `call` reads the key and the cost, as the synchronous
///   layer does, and returns a [`RemoteFuture`](crate::RemoteFuture) at once: the decision is awaited in it (the
///   task yields; no thread is held), then the inner service — ready, taken from the
///   service with a fresh clone left in its place, as tower's middleware that decide
///   asynchronously do — is called, or the refusal is answered. The layer thus needs
///   `S: Clone`, and each request allocates its decision future (a `Box`; one round trip
///   dwarfs it). A request with no usable key and a [`MissingKey::Reject`](crate::MissingKey)
///   answer is refused without a decision.
/// - **The same answers.** A decision is one `decide_async(key, cost)`, which carries its
///   state: statuses, `Retry-After`, `RateLimit-Policy` / `RateLimit` (for the key's quota,
///   `quota_for_key`), the legacy fields, problem details, the cost function, dry run and
///   the [`Outcome`](crate::Outcome)s are those of the synchronous layer on the same
///   decisions.
/// - **No delay mode.** Delay mode reserves the next slot after a refusal (`KeyedReserve`,
///   a second, conditional operation on the key's state); an awaited limiter offers one
///   decision per round trip, so [`Builder::delay`](crate::Builder::delay) exists for
///   [`Local`] layers only.
/// - **Errors.** A decision that fails (`Err`) is answered by the layer's
///   [`OnLimiterError`] policy, with [`Outcome::LimiterError`](crate::Outcome::LimiterError).
/// - **Cancellation.** Dropping the [`RemoteFuture`](crate::RemoteFuture) (the client went away) drops the
///   decision's future: whether the limiter charged the request then is the limiter's
///   business (a Redis script that ran, ran).
///
/// A marker type: it only selects the service's implementation.
///
/// # Examples
///
/// See [`RateLimitLayer::remote`](crate::RateLimitLayer::remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Remote;

/// The decision mode of a [`RateLimitLayer`](crate::RateLimitLayer) whose requests cost what
/// their **responses** say (an LLM answer's tokens, the bytes sent, one permit per failure),
/// made by [`Builder::response_cost`](crate::Builder::response_cost) from a layer over a
/// local [`KeyedRefund`](limitcore::KeyedRefund) limiter.
///
/// # Behaviour
///
/// - **Admission.** A request's own cost ([`Builder::cost`](crate::Builder::cost)) is an
///   *estimate*, 0 unless set. An estimate of 0 is the check with no cost: the request is
///   admitted **while its key is not in debt**, and charged nothing yet. Any other estimate
///   is **reserved** (`KeyedRefund::acquire_refundable_at`): admitted only if it fits, held
///   while the response is made and sent. A refusal is the layer's usual one (429 and the
///   fields), its `Retry-After` the exact wait until the debt is paid back or the estimate
///   fits, rounded up to whole seconds (never down); an estimate above the limit's
///   capacity is 413.
/// - **The charge.** When the response's head arrives, its [`ResponseCost`](crate::ResponseCost) is read (a
///   header, a closure over the head) or a count of its body's bytes begins; when the body
///   ends, the cost is recorded **once**, at the limiter's time then: the reservation
///   **settled** to it
///   (`KeyedRefund::settle`: the unused part given back, the excess charged past the limit,
///   as debt), or, with nothing reserved, the cost **charged** (`KeyedRefund::charge_at`,
///   never refused). A charge past the limit is never lost: the key's next requests are
///   refused until it is paid back, at the limit's rate.
/// - **Exactly once.** The reservation is owned by the response future, then by the body
///   ([`MeteredBody`](crate::MeteredBody)), and recorded when it is dropped, wherever the request's life ends:
///   the body's end, a body error (at the cost so far), the body dropped before its end
///   (the client went away: the bytes counted until then, or the head's value), an inner
///   service error or the future dropped before the head (the estimate stands: see
///   [`MeteredFuture`](crate::MeteredFuture)). Never twice, never lost.
/// - **The bound.** While every response costs at most its estimate, what the layer
///   records for a key never exceeds what its limit allows (its burst, plus what its rate
///   restores): each admission holds its estimate until its body ends, so the requests in
///   flight can never together take more than is left (reserve-then-settle; the unused
///   part comes back at the settle). A response that costs more than its estimate goes past
///   the limit by the excess, once: that is debt, and the key's requests are refused until
///   it is paid back. With an estimate of 0 nothing is held: every request of a key admitted
///   before its earlier responses' charges land may go past the limit (check-then-charge,
///   Envoy's `hits_addend: 0`); reserve an estimate to bound it.
/// - **What a client sees.** The response's head is sent before its cost is known, so its
///   `RateLimit` fields (with [`RateLimitHeaders::Always`](crate::RateLimitHeaders)) are the
///   state **after the reservation and before the charge**: `r` counts the estimate as
///   taken and this response's cost as not yet. The decisions after its body has ended
///   include it (their fields, a refusal's `Retry-After`). Responses the layer refuses are
///   as in the other modes.
/// - **Dry run.** Decisions and charges are made as usual; a request the limit would refuse
///   passes, reserves nothing, and is charged its response's whole cost.
///
/// # What is not offered
///
/// - **Awaited limiters** ([`Remote`](crate::Remote)): an
///   [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter) decides one request per
///   round trip and has no charge or settle to call after the response, so a `Remote`
///   builder has no `response_cost` (a compile error, not a surprise at run time):
///
///   ```compile_fail,E0599
///   use limitcore::{Keyed, Quota};
///   use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
///
///   let limiter: Keyed<()> = Keyed::new(Quota::per_minute(10)?)?;
///   let layer = RateLimitLayer::remote(limiter, GlobalKey)
///       .response_cost(ResponseCost::body_bytes()) // no such method on a `Remote` builder
///       .build()?;
///   # Ok::<(), Box<dyn std::error::Error>>(())
///   ```
///
/// - **Delay mode**: a delayed request's slot is a reservation with no receipt to settle;
///   a `Metered` builder has no [`Builder::delay`](crate::Builder::delay) (and
///   [`Builder::response_cost`](crate::Builder::response_cost) panics on a builder already
///   in delay mode).
/// - **Upgrades**: a `101 Switching Protocols` response's body is empty, so it is recorded
///   at its head; what goes over the upgraded connection is not counted.
///
/// A marker type: it only selects the service's implementation.
///
/// # Examples
///
/// The Envoy Gateway pattern, 1000 tokens a minute per API key, each answer charged the
/// tokens its `x-tokens` header says:
///
/// ```
/// use http::HeaderName;
/// use limitcore::{Keyed, Quota};
/// use limitcore_tower::{HeaderKey, Metered, RateLimitLayer, ResponseCost};
///
/// let per_key: Keyed<http::HeaderValue> = Keyed::new(Quota::per_minute(1_000)?)?;
/// let layer: RateLimitLayer<HeaderKey, Keyed<http::HeaderValue>, Metered> =
///     RateLimitLayer::builder(per_key, HeaderKey::new(HeaderName::from_static("x-api-key")))
///         .response_cost(ResponseCost::header(HeaderName::from_static("x-tokens")))
///         .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Metered;

/// What a [`Remote`] layer answers when its limiter cannot decide (its future returns
/// `Err`); set with [`Builder::on_limiter_error`](crate::Builder::on_limiter_error).
///
/// Either way the response carries [`Outcome::LimiterError`](crate::Outcome::LimiterError),
/// and no `RateLimit` fields (there was no decision, hence no state); the metrics (feature
/// `metrics`) count it as `outcome="error"`. A dry run passes the request whatever the
/// policy.
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use limitcore_tower::OnLimiterError;
///
/// assert_eq!(OnLimiterError::default(), OnLimiterError::Admit);
/// let closed = OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE);
/// assert_ne!(closed, OnLimiterError::Admit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnLimiterError {
    /// Pass the request to the inner service (fail open: the limit is off while its
    /// limiter is down). The default.
    #[default]
    Admit,
    /// Answer with this status (503 Service Unavailable is the usual one), a one-line
    /// `text/plain` body and no `Retry-After` (nothing tells when the limiter will be back):
    /// fail closed.
    Refuse(StatusCode),
}
