//! [`RateLimitLayer`](crate::RateLimitLayer): the tower layer, its constructors, and the state it shares with
//! every service it makes.

use crate::builder::Builder;
use crate::headers::RateLimitHeaders;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Shared;
use crate::remote::{Local, OnLimiterError, Remote};
use crate::service::RateLimit;
use crate::telemetry::Naming;
use http::StatusCode;
use limitcore::rules::GcraRule;
use limitcore::{AsyncKeyedRateLimiter, Gcra, Global, Keyed, KeyedRateLimiter, Quota, QuotaError};
use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::sync::Arc;
use tower::Layer;

/// A tower [`Layer`] that rate-limits HTTP requests with any keyed limiter of `limitcore`.
///
/// `X` reads each request's key ([`KeyExtractor`]); `L` is the limiter, any
/// [`KeyedRateLimiter<X::Key>`](KeyedRateLimiter): [`Keyed`] (any algorithm per key, GCRA by
/// default, per-key quotas with `Keyed::reconfigure_key`, bounded memory with
/// `Keyed::with_max_keys`), `KeyedSketch`, [`Global`], [`All`](limitcore::All) of several (per
/// client and global, all or nothing), `Box<dyn KeyedRefund<K>>` from
/// [`Algorithm::keyed`](limitcore::Algorithm::keyed), or a limiter of another crate.
///
/// `M` is how the decision is made: [`Local`] (the default: in `call`, synchronously, by a
/// [`KeyedRateLimiter`]) or [`Remote`] (awaited in the response future, from any
/// [`AsyncKeyedRateLimiter`]: a limit kept on a server, such as `limitcore-redis`'s exact
/// modes; made by [`RateLimitLayer::remote`]; see [`Remote`] for what differs).
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
        Builder::defaults(limiter, extractor)
    }
}

impl<X: KeyExtractor, L: AsyncKeyedRateLimiter<X::Key>> RateLimitLayer<X, L, Remote> {
    /// A [`Builder`](crate::Builder) for a limiter whose decisions are **awaited**: any
    /// [`AsyncKeyedRateLimiter<X::Key>`](AsyncKeyedRateLimiter) (a limit kept on a server,
    /// one round trip per decision: `limitcore-redis`'s `RedisGcra`, `RedisSlidingLog`,
    /// `RedisAll`; or one of your own), keyed by `extractor`, with the defaults of
    /// [`RateLimitLayer::new`](crate::RateLimitLayer::new) and
    /// [`OnLimiterError::Admit`]. The same headers, dry run, cost, statuses and
    /// [`Outcome`](crate::Outcome)s as the synchronous layer; no delay mode; a failed
    /// decision answered by [`Builder::on_limiter_error`](crate::Builder::on_limiter_error).
    /// See [`Remote`] for how the request waits.
    ///
    /// A synchronous limiter is an `AsyncKeyedRateLimiter` too (its future is ready at once)
    /// and works here, but [`RateLimitLayer::builder`] decides it without the boxed future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response, StatusCode};
    /// use limitcore::{AsyncKeyedRateLimiter, Decision, Keyed, KeyedRateLimiter, Quota};
    /// use limitcore_tower::{GlobalKey, OnLimiterError, Outcome, RateLimitLayer};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// /// A limit that answers after a (simulated) round trip, or fails while `down`.
    /// struct Far { limit: Keyed<()>, down: AtomicBool }
    ///
    /// impl AsyncKeyedRateLimiter<()> for Far {
    ///     type Error = &'static str;
    ///     async fn decide_async(&self, key: &(), n: u32) -> Result<Decision, &'static str> {
    ///         tokio::time::sleep(std::time::Duration::from_millis(1)).await; // the round trip
    ///         if self.down.load(Ordering::Relaxed) { return Err("server down"); }
    ///         Ok(self.limit.decide_n(key, n))
    ///     }
    ///     fn quota_for_key(&self, key: &()) -> Quota { self.limit.quota_for(key) }
    /// }
    ///
    /// let far = Far { limit: Keyed::new(Quota::per_minute(1)?)?, down: AtomicBool::new(false) };
    /// let layer = RateLimitLayer::remote(far, GlobalKey)
    ///     .on_limiter_error(OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE))
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// }));
    /// assert_eq!(svc.clone().oneshot(Request::new(())).await?.status(), StatusCode::OK);
    /// let second = svc.clone().oneshot(Request::new(())).await?;
    /// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(second.headers()["retry-after"], "60");
    ///
    /// layer.limiter().down.store(true, Ordering::Relaxed);
    /// let failed = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// assert!(failed.headers().get("retry-after").is_none());
    /// assert_eq!(failed.extensions().get::<Outcome>(), Some(&Outcome::LimiterError { admitted: false }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn remote(limiter: L, extractor: X) -> Builder<X, L, Remote> {
        Builder::defaults(limiter, extractor)
    }
}

impl<X: KeyExtractor, L, M> Builder<X, L, M> {
    /// The defaults of every constructor.
    fn defaults(limiter: L, extractor: X) -> Self {
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
            on_error: OnLimiterError::Admit,
            naming: Naming::default(),
            mode: PhantomData,
        }
    }
}

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

impl<S, X: KeyExtractor, L, M> Layer<S> for RateLimitLayer<X, L, M> {
    type Service = RateLimit<S, X, L, M>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_shared(inner, Arc::clone(&self.shared))
    }
}
