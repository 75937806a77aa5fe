//! [`RateLimitLayer`](crate::RateLimitLayer): the tower layer, its constructors, and the state it shares with
//! every service it makes.

use crate::builder::Builder;
use crate::headers::RateLimitHeaders;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Shared;
use crate::service::RateLimit;
use http::StatusCode;
use limitcore::rules::GcraRule;
use limitcore::{Gcra, Global, Keyed, KeyedRateLimiter, Quota, QuotaError};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use tower::Layer;

/// A tower [`Layer`] that rate-limits HTTP requests with any keyed limiter of `limitcore`.
///
/// `X` reads each request's key ([`KeyExtractor`]); `L` is the limiter, any
/// [`KeyedRateLimiter<X::Key>`](KeyedRateLimiter): [`Keyed`] (any algorithm per key, GCRA by
/// default, per-key quotas with `Keyed::set_quota`, bounded memory with
/// `Keyed::with_max_keys`), `KeyedSketch`, [`Global`], [`All`](limitcore::All) of several (per
/// client and global, all or nothing), `Box<dyn KeyedRefund<K>>` from
/// [`Algorithm::keyed`](limitcore::Algorithm::keyed), or a limiter of another crate.
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
///   (draft-ietf-httpapi-ratelimit-headers, see [`RateLimitHeaders`]), optionally the legacy
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
///   interval`), rounded up to seconds.
/// - **Outcome.** Every response the layer decided on carries an [`Outcome`](crate::Outcome) extension
///   (unless turned off with [`Builder::outcome_extension`](crate::Builder::outcome_extension)).
/// - **Body.** The response type is the inner service's, `Response<B>`: a passed response
///   goes out as the inner service made it. The layer writes its own responses in `B`
///   ([`RefusalBody`](crate::RefusalBody): axum's `Body`, `Full<Bytes>`, `String`, the boxed bodies; any other
///   body mapped to `Either::Left`).
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
pub struct RateLimitLayer<X: KeyExtractor, L> {
    pub(crate) shared: Arc<Shared<X, L>>,
}

impl<X: KeyExtractor, L> Clone for RateLimitLayer<X, L> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<X: KeyExtractor, L> fmt::Debug for RateLimitLayer<X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("RateLimitLayer")
            .field("delay", &s.delay.as_ref().map(|d| d.max_wait))
            .field("dry_run", &s.dry_run)
            .field("status", &s.status)
            .field("fields", &s.fields)
            .finish_non_exhaustive()
    }
}

/// Keys at most the convenience constructors keep state for: 100 000 (see
/// `Keyed::with_max_keys`; beyond it new keys share one overflow state, and no limited key
/// is evicted).
pub const DEFAULT_MAX_KEYS: usize = 100_000;

impl<X: KeyExtractor, L: KeyedRateLimiter<X::Key>> RateLimitLayer<X, L> {
    /// The layer with every default: reject mode, status 429, `RateLimit` fields on
    /// refusals, the extractor's own answer for requests with no key.
    ///
    /// # Panics
    ///
    /// Never (the default policy name is valid).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Gcra, Global, Quota};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::new(Global::new(Gcra::new(Quota::per_second(100)?)?), GlobalKey);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn new(limiter: L, extractor: X) -> Self {
        // The default policy name is valid.
        match RateLimitLayer::builder(limiter, extractor).build() {
            Ok(layer) => layer,
            Err(_) => unreachable!("the default policy name is valid"),
        }
    }

    /// A [`Builder`](crate::Builder) for `limiter` keyed by `extractor`, with the defaults of
    /// [`RateLimitLayer::new`](crate::RateLimitLayer::new).
    pub fn builder(limiter: L, extractor: X) -> Builder<X, L> {
        Builder {
            limiter,
            extractor,
            missing: None,
            delay: None,
            cost: None,
            dry_run: false,
            status: StatusCode::TOO_MANY_REQUESTS,
            too_large: StatusCode::PAYLOAD_TOO_LARGE,
            headers: RateLimitHeaders::OnRefusal,
            legacy: false,
            problem: false,
            policy: "default".to_owned(),
            outcome: true,
        }
    }

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
    /// layer.limiter().set_quota("192.0.2.7".parse()?, Quota::per_second(100)?)?;
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

impl RateLimitLayer<PeerIp, Keyed<IpAddr>> {
    /// A builder limiting each client IP address (the peer's, [`PeerIp`]: IPv6 by /64) to
    /// `quota` with GCRA, keeping at most [`DEFAULT_MAX_KEYS`] keys.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of GCRA for `quota`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::per_ip("100/min burst 20".parse()?)?.legacy_headers(true).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_ip(quota: Quota) -> Result<Builder<PeerIp, Keyed<IpAddr>>, QuotaError> {
        let limiter = Keyed::<IpAddr, GcraRule>::new(quota)?.with_max_keys(DEFAULT_MAX_KEYS);
        Ok(RateLimitLayer::builder(limiter, PeerIp::new()))
    }
}

impl RateLimitLayer<crate::GlobalKey, Global<Gcra>> {
    /// A builder limiting all requests together to `quota` with GCRA.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of GCRA for `quota`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::global("1000/s".parse()?)?.build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn global(quota: Quota) -> Result<Builder<crate::GlobalKey, Global<Gcra>>, QuotaError> {
        Ok(RateLimitLayer::builder(
            Global::new(Gcra::new(quota)?),
            crate::GlobalKey,
        ))
    }
}

impl<S, X: KeyExtractor, L> Layer<S> for RateLimitLayer<X, L> {
    type Service = RateLimit<S, X, L>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_shared(inner, Arc::clone(&self.shared))
    }
}
