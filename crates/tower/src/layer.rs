//! [`RateLimitLayer`](crate::RateLimitLayer): the tower layer, and the state it shares with
//! every service it makes (its constructors are in `builder`).

use crate::key::KeyExtractor;
use crate::mode::Local;
use crate::policy::Shared;
use crate::service::RateLimit;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use tower::Layer;

/// A tower [`Layer`] that rate-limits HTTP requests with any keyed limiter of `limitcore`.
///
/// `X` reads each request's key ([`KeyExtractor`]); `L` is the limiter, any
/// [`KeyedRateLimiter<X::Key>`](limitcore::KeyedRateLimiter): [`Keyed`](limitcore::Keyed) (any algorithm per key, GCRA by
/// default, per-key quotas with `Keyed::reconfigure_key`, bounded memory with
/// `Keyed::with_max_keys`), `KeyedSketch`, [`Global`](limitcore::Global), [`All`](limitcore::All) of several (per
/// client and global, all or nothing), `Box<dyn KeyedRefund<K>>` from
/// [`Algorithm::keyed`](limitcore::Algorithm::keyed), or a limiter of another crate.
///
/// `M` is how the decision is made: [`Local`] (the default: in `call`, synchronously, by a
/// [`KeyedRateLimiter`](limitcore::KeyedRateLimiter)), [`Remote`](crate::Remote) (awaited in the response future, from any
/// [`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter): a limit kept on a server, such as `limitcore-redis`'s exact
/// modes; made by [`RateLimitLayer::remote`]; see [`Remote`](crate::Remote) for what differs) or
/// [`Metered`](crate::Metered) (local, each request charged what its response says it
/// cost when its body ends; made by [`Builder::response_cost`](crate::Builder::response_cost)).
///
/// # Behaviour
///
/// - **One limit.** The layer holds its limiter in an [`Arc`]: every clone of the layer and
///   of every service it makes (one per connection under hyper and axum) shares one state.
///   (tower's own `RateLimit` keeps one per service, so N connections got N times the
///   limit.)
/// - **Always ready.** `poll_ready` is the inner service's; the decision is made in `call`
///   and a refusal is an ordinary response (no `HandleErrorLayer`): status 429 by default,
///   `Retry-After` in seconds rounded up (waiting exactly that long and retrying is admitted
///   if nothing else consumed), `RateLimit-Policy` and `RateLimit`
///   (draft-ietf-httpapi-ratelimit-headers, see [`RateLimitHeaders`](crate::RateLimitHeaders)), optionally the legacy
///   `X-RateLimit-Limit/-Remaining/-Reset`, and a `text/plain` or an
///   `application/problem+json` body (RFC 9457, problem type `quota-exceeded`).
/// - **Modes** (as nginx's `limit_req`): reject (default); delay ([`Builder::delay`](crate::Builder::delay): a
///   request over the rate is held, asynchronously, until its slot, if that is at most
///   `max_wait` away, else refused; see [`LimitReq`](crate::LimitReq) for nginx's `burst`,
///   `delay=` and `nodelay`); dry run ([`Builder::dry_run`](crate::Builder::dry_run): decide, report, never refuse
///   or delay).
/// - **Never.** A refusal that no wait can cure carries no `Retry-After`: a request whose
///   cost ([`Builder::cost`](crate::Builder::cost)) is above the limit's capacity is answered 413 Content Too Large
///   ([`Outcome::TooLarge`](crate::Outcome::TooLarge)), and one that could only conform past the limiter's clock
///   (`Denied::BeyondHorizon`) gets the refusal status alone. Every `Retry-After` the layer
///   writes is at most the longest wait the key's quota can produce (`burst × emission
///   interval`), rounded up to seconds, unless the key is in debt after a charge (a
///   [`Metered`](crate::Metered) layer's, or one of your own with `KeyedRefund::charge_at`):
///   then it is the exact wait until the debt is paid back, rounded up.
/// - **Outcome.** Every response the layer decided on carries an [`Outcome`](crate::Outcome) extension
///   (unless turned off with [`Builder::outcome_extension`](crate::Builder::outcome_extension)).
/// - **Body.** The response type is the inner service's, `Response<B>`: a passed response
///   goes out as the inner service made it. The layer writes its own responses in `B`
///   ([`RefusalBody`](crate::RefusalBody): axum's `Body`, `Full<Bytes>`, `String`, the boxed bodies; any other
///   body mapped to `Either::Left`). A [`Metered`](crate::Metered) layer's body is
///   [`MeteredBody<B, X, L>`](crate::MeteredBody), which records the response's cost when it
///   ends (its frames are `B`'s).
///
/// # Fields
///
/// `RateLimit-Policy: "<name>";q=<count>;w=<seconds>` (the key's quota: `count` per period,
/// the period rounded up to whole seconds) and `RateLimit: "<name>";r=<remaining>;t=<seconds>`,
/// where `remaining` and `t` come from the decision's own state
/// ([`Decision::state`](limitcore::Decision)): the permits left, and the seconds (rounded up)
/// until the key's limit is full again. A delayed request carries the state its arrival saw
/// (`r=0`). The legacy fields carry the same three numbers.
///
/// # Examples
///
/// ```
/// use axum::{routing::get, Router};
/// use limitcore_tower::RateLimitLayer;
///
/// let app: Router = Router::new()
///     .route("/", get(|| async { "ok" }))
///     .layer(RateLimitLayer::per_ip("5/s".parse()?)?.build()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayer<X: KeyExtractor, L, M = Local> {
    pub(crate) shared: Arc<Shared<X, L>>,
    pub(crate) mode: PhantomData<fn() -> M>,
}

impl<X: KeyExtractor, L, M> Clone for RateLimitLayer<X, L, M> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
            mode: PhantomData,
        }
    }
}

impl<X: KeyExtractor, L, M> fmt::Debug for RateLimitLayer<X, L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("RateLimitLayer")
            .field("delay", &s.delay.as_ref().map(|d| d.max_wait))
            .field("dry_run", &s.dry_run)
            .field("response_cost", &s.response_cost)
            .field("status", &s.status)
            .field("fields", &s.fields)
            .field("on_error", &s.on_error)
            .finish_non_exhaustive()
    }
}

/// Keys at most the convenience constructors keep state for: 100 000 (see
/// `Keyed::with_max_keys`; beyond it new keys share one overflow state, and no limited key
/// is evicted).
pub const DEFAULT_MAX_KEYS: usize = 100_000;

impl<X: KeyExtractor, L, M> RateLimitLayer<X, L, M> {
    /// The limiter (to set per-key quotas, read a key's state, evict idle keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Quota;
    /// use limitcore_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::per_ip("10/s".parse()?)?.build()?;
    /// // A client with a quota of its own (applies from its next fresh state).
    /// layer.limiter().reconfigure_key("192.0.2.7".parse()?, Quota::per_second(100)?)?;
    /// assert_eq!(layer.limiter().len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &L {
        &self.shared.limiter
    }

    /// The extractor.
    pub fn extractor(&self) -> &X {
        &self.shared.extractor
    }
}

impl<S, X: KeyExtractor, L, M> Layer<S> for RateLimitLayer<X, L, M> {
    type Service = RateLimit<S, X, L, M>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_shared(inner, Arc::clone(&self.shared))
    }
}
