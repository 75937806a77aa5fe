//! How the rate-limit layer decides: [`Local`] (in `call`, by a synchronous
//! `KeyedRateLimiter`) or [`Remote`] (awaited, from any `AsyncKeyedRateLimiter`; its service
//! in `remote`), and what a [`Remote`] layer answers when its limiter fails
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
