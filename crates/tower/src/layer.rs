//! [`RateLimitLayer`] and its service [`RateLimit`].

use crate::body::RefusalBody;
use crate::headers::{Fields, InvalidPolicyName, RateLimitHeaders, quote_policy};
use crate::key::{KeyExtractor, MissingKey, PeerIp, RequestHead};
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use limitcore::clock::Nanos;
use limitcore::rules::GcraRule;
use limitcore::{
    Decision, Denied, Gcra, Global, Keyed, KeyedRateLimiter, KeyedReserve, Quota, QuotaError,
    Reservation, Snapshot,
};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Sleep;
use tower::{Layer, Service};

/// What the layer did with a request, put into the response's extensions for logging and
/// metrics (as nginx's `$limit_req_status`: `PASSED`, `DELAYED`, `REJECTED`,
/// `DELAYED_DRY_RUN`, `REJECTED_DRY_RUN`).
///
/// # Examples
///
/// ```
/// use limitcore_tower::Outcome;
/// use std::time::Duration;
///
/// let o = Outcome::Rejected { retry_after: Some(Duration::from_millis(200)) };
/// assert!(o.is_refused());
/// assert_eq!(o.as_str(), "REJECTED");
/// assert!(!Outcome::DryRunRejected { retry_after: None }.is_refused());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// Admitted at once.
    Passed,
    /// Admitted after waiting `wait` for its slot (delay mode).
    Delayed {
        /// How long the request was held before the inner service was called.
        wait: Duration,
    },
    /// Refused: over the limit. `retry_after` is the exact wait after which the same
    /// request would be admitted (`None`: never within the limiter's clock, and the
    /// response carries no `Retry-After`).
    Rejected {
        /// The exact wait (the `Retry-After` field carries it rounded up to seconds).
        retry_after: Option<Duration>,
    },
    /// Refused: the request's cost ([`Builder::cost`]) is more than the key's limit can ever
    /// admit at once (its capacity, the quota's burst); no wait helps, so the answer is
    /// 413 Content Too Large by default ([`Builder::too_large_status`]) with no
    /// `Retry-After`.
    TooLarge {
        /// The request's cost, in permits.
        cost: u32,
        /// The most one request may cost, in permits.
        capacity: u32,
    },
    /// Refused: the request had no usable key and the layer's [`MissingKey`] answer is a
    /// refusal.
    MissingKey,
    /// Dry run: would have waited `wait`; passed at once (its slot is taken all the same).
    DryRunDelayed {
        /// The wait the request would have had.
        wait: Duration,
    },
    /// Dry run: would have been refused; passed (and charged nothing, as a refusal).
    DryRunRejected {
        /// The wait a refusal would have reported (`None`: none would help, as for
        /// [`Outcome::TooLarge`]).
        retry_after: Option<Duration>,
    },
}

impl Outcome {
    /// Whether the layer answered the request itself instead of the inner service.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Outcome::Rejected { .. } | Outcome::TooLarge { .. } | Outcome::MissingKey
        )
    }

    /// nginx's name for it (`$limit_req_status`); `TOO_LARGE` for [`Outcome::TooLarge`] and
    /// `MISSING_KEY` for [`Outcome::MissingKey`], which nginx does not have.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Passed => "PASSED",
            Outcome::Delayed { .. } => "DELAYED",
            Outcome::Rejected { .. } => "REJECTED",
            Outcome::TooLarge { .. } => "TOO_LARGE",
            Outcome::MissingKey => "MISSING_KEY",
            Outcome::DryRunDelayed { .. } => "DELAYED_DRY_RUN",
            Outcome::DryRunRejected { .. } => "REJECTED_DRY_RUN",
        }
    }

    fn dry(self) -> Outcome {
        match self {
            Outcome::Delayed { wait } => Outcome::DryRunDelayed { wait },
            Outcome::Rejected { retry_after } => Outcome::DryRunRejected { retry_after },
            Outcome::TooLarge { .. } => Outcome::DryRunRejected { retry_after: None },
            other => other,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reservation of a request's cost for a key: `KeyedReserve::reserve_n_at`, captured when
/// the delay mode is chosen (only then must the limiter reserve).
type ReserveFn<L, K> = fn(&L, &K, u32, Nanos, Duration) -> Result<Reservation, Denied>;

fn reserve<L: KeyedReserve<K>, K>(
    limiter: &L,
    key: &K,
    cost: u32,
    now: Nanos,
    max_wait: Duration,
) -> Result<Reservation, Denied> {
    limiter.reserve_n_at(key, cost, now, max_wait)
}

/// A request's cost in permits ([`Builder::cost`]).
type CostFn = dyn Fn(&RequestHead<'_>) -> u32 + Send + Sync;

/// The outcome of a refusal that stands: [`Outcome::TooLarge`] for a cost above the
/// capacity, else [`Outcome::Rejected`] with the wait when one helps.
fn rejected(cost: u32, denied: Denied) -> Outcome {
    match denied {
        Denied::ExceedsCapacity { capacity } => Outcome::TooLarge { cost, capacity },
        _ => Outcome::Rejected {
            retry_after: denied.retry_after(),
        },
    }
}

/// Delay mode: how long a request may wait for its slot, and how to reserve it.
struct DelayMode<L, K> {
    max_wait: Duration,
    reserve: ReserveFn<L, K>,
}

/// The state every clone of the layer and of its services shares.
struct Shared<X: KeyExtractor, L> {
    limiter: L,
    extractor: X,
    missing: MissingKey<X::Key>,
    delay: Option<DelayMode<L, X::Key>>,
    /// Each request's cost; `None`: 1.
    cost: Option<Box<CostFn>>,
    dry_run: bool,
    status: StatusCode,
    too_large: StatusCode,
    fields: Fields,
    /// Admissions carry the state fields ([`RateLimitHeaders::Always`]).
    state_on_pass: bool,
    /// Refusals carry the state fields (not [`RateLimitHeaders::Off`], not a dry run).
    state_on_refusal: bool,
    /// Responses carry the [`Outcome`] extension ([`Builder::outcome_extension`]).
    outcome: bool,
}

/// A verdict and the state the decision left, when a response will carry it.
struct Verdict {
    outcome: Outcome,
    /// The state of the decision that made `outcome`: present whenever the response carries
    /// state fields.
    state: Option<Snapshot>,
}

impl<X: KeyExtractor, L: KeyedRateLimiter<X::Key>> Shared<X, L> {
    /// The decision for `key`, now; in delay mode, a refusal is followed by a reservation at
    /// the same instant.
    ///
    /// When the response to an admission carries no state fields (the default), the
    /// decision is a `try_acquire_n_at`, which computes no state. Its refusal took nothing
    /// (the limiter's contract), so when a refusal's response carries the fields, the
    /// request is decided again at the same instant by `decide_n_at`, and that decision is
    /// the request's: its result (an admission if the key's state moved in between) and its
    /// own state make the response. Every response with fields thus reports the state of
    /// the decision that made it, never a second read. In delay mode the reservation comes
    /// before that second decision, which only a request the reservation also refuses needs.
    #[inline]
    fn decide(&self, key: &X::Key, cost: u32) -> Verdict {
        let now = self.limiter.now();
        if self.state_on_pass {
            return self.decide_with_state(key, cost, now);
        }
        let denied = match self.limiter.try_acquire_n_at(key, cost, now) {
            Ok(()) => {
                return Verdict {
                    outcome: Outcome::Passed,
                    state: None,
                };
            }
            Err(denied) => denied,
        };
        // In delay mode the reservation (usually the answer, and a delayed response carries
        // no state here); else the rejection.
        let outcome = self.refused(key, cost, now, denied);
        if !self.state_on_refusal || !outcome.is_refused() {
            return Verdict {
                outcome: self.report(outcome),
                state: None,
            };
        }
        // A rejection whose response carries the state: decided again, with it.
        let Decision { result, state } = self.limiter.decide_n_at(key, cost, now);
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(denied) if self.delay.is_none() => rejected(cost, denied),
            // The reservation's refusal stands.
            Err(_) => outcome,
        };
        Verdict {
            outcome: self.report(outcome),
            state: Some(state),
        }
    }

    /// One `decide_n_at` (the state comes with it), then as [`Shared::decide`].
    #[inline]
    fn decide_with_state(&self, key: &X::Key, cost: u32, now: Nanos) -> Verdict {
        let Decision { result, state } = self.limiter.decide_n_at(key, cost, now);
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(denied) => self.refused(key, cost, now, denied),
        };
        Verdict {
            outcome: self.report(outcome),
            state: Some(state),
        }
    }

    /// What a refusal of the limiter becomes: in delay mode, a reservation of the next slot
    /// when waiting helps, at the same instant; else a rejection.
    fn refused(&self, key: &X::Key, cost: u32, now: Nanos, denied: Denied) -> Outcome {
        match &self.delay {
            Some(delay) if !denied.is_final() => {
                match (delay.reserve)(&self.limiter, key, cost, now, delay.max_wait) {
                    Ok(r) if r.delay().is_zero() => Outcome::Passed,
                    Ok(r) => Outcome::Delayed { wait: r.delay() },
                    Err(denied) => rejected(cost, denied),
                }
            }
            _ => rejected(cost, denied),
        }
    }

    /// `outcome` as reported: its dry-run form in a dry run.
    #[inline]
    fn report(&self, outcome: Outcome) -> Outcome {
        if self.dry_run { outcome.dry() } else { outcome }
    }

    /// The response to a refused `verdict`: the refusal status with `Retry-After` when
    /// waiting helps ([`Outcome::Rejected`]), the too-large status without one
    /// ([`Outcome::TooLarge`]); the state fields when the verdict carries a state.
    #[cold]
    fn refusal(&self, key: &X::Key, verdict: &Verdict) -> Response<Bytes> {
        let (status, retry_after) = match verdict.outcome {
            Outcome::TooLarge { .. } => (self.too_large, None),
            Outcome::Rejected { retry_after } => (self.status, retry_after),
            _ => (self.status, None),
        };
        let mut headers = HeaderMap::new();
        let fields = verdict
            .state
            .as_ref()
            .map(|state| (self.limiter.quota_for(key), state));
        let body = self.fields.refusal(
            &mut headers,
            status,
            retry_after,
            fields.as_ref().map(|(quota, state)| (quota, *state)),
        );
        answer(
            status,
            headers,
            body,
            self.outcome.then_some(verdict.outcome),
        )
    }

    /// The state fields of an admission, when it carries them.
    fn pass_fields(&self, key: &X::Key, state: &Snapshot) -> Box<HeaderMap> {
        let mut headers = HeaderMap::new();
        self.fields
            .write_state(&mut headers, &self.limiter.quota_for(key), state);
        Box::new(headers)
    }
}

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
/// - **Modes** (as nginx's `limit_req`): reject (default); delay ([`Builder::delay`]: a
///   request over the rate is held, asynchronously, until its slot, if that is at most
///   `max_wait` away, else refused; see [`LimitReq`](crate::LimitReq) for nginx's `burst`,
///   `delay=` and `nodelay`); dry run ([`Builder::dry_run`]: decide, report, never refuse
///   or delay).
/// - **Never.** A refusal that no wait can cure carries no `Retry-After`: a request whose
///   cost ([`Builder::cost`]) is above the limit's capacity is answered 413 Content Too Large
///   ([`Outcome::TooLarge`]), and one that could only conform past the limiter's clock
///   (`Denied::BeyondHorizon`) gets the refusal status alone. Every `Retry-After` the layer
///   writes is at most the longest wait the key's quota can produce (`burst × emission
///   interval`), rounded up to seconds.
/// - **Outcome.** Every response the layer decided on carries an [`Outcome`] extension
///   (unless turned off with [`Builder::outcome_extension`]).
/// - **Body.** The response type is the inner service's, `Response<B>`: a passed response
///   goes out as the inner service made it. The layer writes its own responses in `B`
///   ([`RefusalBody`]: axum's `Body`, `Full<Bytes>`, `String`, the boxed bodies; any other
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
    shared: Arc<Shared<X, L>>,
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

    /// A [`Builder`] for `limiter` keyed by `extractor`, with the defaults of
    /// [`RateLimitLayer::new`].
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

/// Configures a [`RateLimitLayer`]; made by [`RateLimitLayer::builder`] and the
/// convenience constructors.
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use limitcore::{Keyed, Quota};
/// use limitcore_tower::{HeaderKey, MissingKey, RateLimitHeaders, RateLimitLayer};
///
/// let per_api_key: Keyed<http::HeaderValue> = Keyed::new(Quota::per_minute(600)?)?;
/// let layer = RateLimitLayer::builder(per_api_key, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
///     .status(StatusCode::SERVICE_UNAVAILABLE)
///     .headers(RateLimitHeaders::Always)
///     .problem_details(true)
///     .policy_name("per-key")
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder<X: KeyExtractor, L> {
    limiter: L,
    extractor: X,
    missing: Option<MissingKey<X::Key>>,
    delay: Option<DelayMode<L, X::Key>>,
    cost: Option<Box<CostFn>>,
    dry_run: bool,
    status: StatusCode,
    too_large: StatusCode,
    headers: RateLimitHeaders,
    legacy: bool,
    problem: bool,
    policy: String,
    outcome: bool,
}

impl<X: KeyExtractor, L> fmt::Debug for Builder<X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("delay", &self.delay.as_ref().map(|d| d.max_wait))
            .field("dry_run", &self.dry_run)
            .field("cost", &self.cost.is_some())
            .field("status", &self.status)
            .field("too_large", &self.too_large)
            .field("headers", &self.headers)
            .field("legacy", &self.legacy)
            .field("problem", &self.problem)
            .field("policy", &self.policy)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl<X: KeyExtractor, L: KeyedRateLimiter<X::Key>> Builder<X, L> {
    /// What to do with requests that have no usable key (default: the extractor's
    /// [`shared_key`](KeyExtractor::shared_key) bucket if it has one, else a refusal with
    /// 400 Bad Request).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore::{Keyed, Quota};
    /// use limitcore_tower::{MissingKey, PeerIp, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let per_ip: Keyed<std::net::IpAddr> = Keyed::new(Quota::per_second(5)?)?;
    /// let layer = RateLimitLayer::builder(per_ip, PeerIp::new())
    ///     .on_missing_key(MissingKey::Reject(StatusCode::FORBIDDEN))
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// // No peer address in the request's extensions: no key.
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(response.status(), StatusCode::FORBIDDEN);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_missing_key(mut self, answer: MissingKey<X::Key>) -> Self {
        self.missing = Some(answer);
        self
    }

    /// Delay mode: a request the limiter refuses is given the next slot (a reservation,
    /// `KeyedReserve::reserve_n_at`) if it is at most `max_wait` away, and the inner service
    /// is called when the slot comes (an async sleep on tokio's timer: the task yields, no
    /// thread is held); a request whose slot is further away is refused, with `Retry-After`
    /// the wait after which it would not be. `Duration::ZERO` is reject mode.
    ///
    /// Needs a limiter that reserves: `Keyed` with GCRA or the leaky bucket, `Global` over
    /// one of them.
    ///
    /// # Panics
    ///
    /// A delayed request is held by `tokio::time::sleep`: the service's `call` panics for it
    /// outside a tokio runtime with the time driver enabled (as `sleep` does); hyper and axum
    /// servers run on one.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, Quota};
    /// use limitcore_tower::{GlobalKey, Outcome, RateLimitLayer};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, Service, ServiceExt};
    ///
    /// // 20/s, one at a time: a slot every 50 ms; wait at most 120 ms (a frozen clock).
    /// let limiter = Global::new(Gcra::with_clock("20/s burst 1".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(limiter, GlobalKey)
    ///     .delay(Duration::from_millis(120))
    ///     .build()?;
    /// let mut svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let mut pending = Vec::new();
    /// for _ in 0..4 {
    ///     pending.push(svc.ready().await?.call(Request::new(()))); // decided in `call`
    /// }
    /// let mut outcomes = Vec::new();
    /// for response in pending {
    ///     outcomes.push(*response.await?.extensions().get::<Outcome>().unwrap());
    /// }
    /// let ms = Duration::from_millis;
    /// assert_eq!(outcomes, [
    ///     Outcome::Passed,
    ///     Outcome::Delayed { wait: ms(50) },
    ///     Outcome::Delayed { wait: ms(100) },
    ///     Outcome::Rejected { retry_after: Some(ms(30)) }, // 150 ms away: 30 ms too far
    /// ]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delay(mut self, max_wait: Duration) -> Self
    where
        L: KeyedReserve<X::Key>,
    {
        self.delay = (!max_wait.is_zero()).then_some(DelayMode {
            max_wait,
            reserve: reserve::<L, X::Key>,
        });
        self
    }

    /// Dry run: decisions are made and charged as usual (admissions take their permits,
    /// delays their slots) and reported ([`Outcome::DryRunRejected`],
    /// [`Outcome::DryRunDelayed`], the `RateLimit` fields if [`RateLimitHeaders::Always`]),
    /// but every request is passed at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("1/min".parse()?)?.dry_run(true).build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let _ = svc.clone().oneshot(Request::new(())).await?;
    /// let second = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(second.status(), StatusCode::OK);
    /// assert!(matches!(second.extensions().get::<Outcome>(), Some(Outcome::DryRunRejected { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dry_run(mut self, on: bool) -> Self {
        self.dry_run = on;
        self
    }

    /// The status of refusals (default 429 Too Many Requests; nginx's default is 503).
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Each request's cost in permits, read from its head (default: 1): for quotas in units
    /// other than requests (an API's query cost, a declared `Content-Length`). A cost of 0
    /// passes and charges nothing. A cost above what the key's limit admits at once (its
    /// capacity, the quota's burst) can never be admitted: it is answered at once with
    /// [`Builder::too_large_status`] (413 by default), no `Retry-After`, and
    /// [`Outcome::TooLarge`]; in a dry run it passes as [`Outcome::DryRunRejected`] with no
    /// wait.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, StatusCode};
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// // 100 units a second; a request costs its `x-cost` header (1 if absent).
    /// let layer = RateLimitLayer::global("100/s".parse()?)?
    ///     .cost(|head| {
    ///         head.headers().get("x-cost")
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(1)
    ///     })
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let heavy = Request::builder().header("x-cost", "500").body(())?;
    /// let response = svc.oneshot(heavy).await?;
    /// assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    /// assert!(response.headers().get("retry-after").is_none());
    /// assert_eq!(
    ///     response.extensions().get::<Outcome>(),
    ///     Some(&Outcome::TooLarge { cost: 500, capacity: 100 })
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn cost(mut self, cost: impl Fn(&RequestHead<'_>) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// The status of a request whose cost is above the limit's capacity ([`Builder::cost`],
    /// [`Outcome::TooLarge`]; default 413 Content Too Large).
    pub fn too_large_status(mut self, status: StatusCode) -> Self {
        self.too_large = status;
        self
    }

    /// When to write `RateLimit-Policy` and `RateLimit` (default: on refusals).
    pub fn headers(mut self, when: RateLimitHeaders) -> Self {
        self.headers = when;
        self
    }

    /// Also write `X-RateLimit-Limit` (the quota's count), `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds, rounded up, until the limit is full), wherever the
    /// `RateLimit` fields go (default: off).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::{RateLimitHeaders, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("100/min burst 10".parse()?)?
    ///     .headers(RateLimitHeaders::Always)
    ///     .legacy_headers(true)
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// let h = response.headers();
    /// assert_eq!(h["ratelimit-policy"], "\"default\";q=100;w=60");
    /// assert_eq!(h["ratelimit"], "\"default\";r=9;t=1"); // full again in 0.6 s: 1 s
    /// assert_eq!(h["x-ratelimit-limit"], "100");
    /// assert_eq!(h["x-ratelimit-remaining"], "9");
    /// assert_eq!(h["x-ratelimit-reset"], "1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn legacy_headers(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

    /// Refusals get an `application/problem+json` body (RFC 9457) of the draft's
    /// `quota-exceeded` problem type, naming the policy in `violated-policies` (default: a
    /// one-line `text/plain` body).
    pub fn problem_details(mut self, on: bool) -> Self {
        self.problem = on;
        self
    }

    /// Whether responses carry the [`Outcome`] extension (default `true`). Turned off, the
    /// layer writes none, on any response: a passed response then costs no allocation of
    /// the response's extension map (measured in BENCHMARKS.md, "HTTP layer"), for services
    /// that do not log or count outcomes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::Request;
    /// use limitcore_tower::{Outcome, RateLimitLayer};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let layer = RateLimitLayer::global("1/min".parse()?)?.outcome_extension(false).build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// let passed = svc.clone().oneshot(Request::new(())).await?;
    /// assert!(passed.extensions().get::<Outcome>().is_none());
    /// let refused = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    /// assert!(refused.extensions().get::<Outcome>().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn outcome_extension(mut self, on: bool) -> Self {
        self.outcome = on;
        self
    }

    /// The policy name in the `RateLimit` fields and the problem body (default
    /// `"default"`).
    pub fn policy_name(mut self, name: impl Into<String>) -> Self {
        self.policy = name.into();
        self
    }

    /// The layer.
    ///
    /// # Errors
    ///
    /// [`InvalidPolicyName`] if the policy name is empty or not printable ASCII.
    pub fn build(self) -> Result<RateLimitLayer<X, L>, InvalidPolicyName> {
        let (policy_sf, policy_json) = quote_policy(&self.policy)?;
        let state_on_pass = self.headers == RateLimitHeaders::Always;
        let state_on_refusal = self.headers != RateLimitHeaders::Off && !self.dry_run;
        let missing = match self.missing {
            Some(answer) => answer,
            None => match self.extractor.shared_key() {
                Some(key) => MissingKey::Shared(key),
                None => MissingKey::Reject(StatusCode::BAD_REQUEST),
            },
        };
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                limiter: self.limiter,
                extractor: self.extractor,
                missing,
                delay: self.delay,
                cost: self.cost,
                dry_run: self.dry_run,
                status: self.status,
                too_large: self.too_large,
                fields: Fields {
                    policy_sf,
                    policy_json,
                    legacy: self.legacy,
                    problem: self.problem,
                },
                state_on_pass,
                state_on_refusal,
                outcome: self.outcome,
            }),
        })
    }
}

impl<S, X: KeyExtractor, L> Layer<S> for RateLimitLayer<X, L> {
    type Service = RateLimit<S, X, L>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of a [`RateLimitLayer`]: decides each request, then calls the inner service
/// (at once, or at the request's slot in delay mode) or answers with the refusal.
///
/// Clones share the layer's limiter.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use http::{Request, Response, StatusCode};
/// use limitcore_tower::RateLimitLayer;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let inner = service_fn(|_req: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new("ok".to_owned())) });
/// let svc = RateLimitLayer::global("1/min".parse()?)?.build()?.layer(inner);
/// let first = svc.clone().oneshot(Request::new(())).await?;
/// let second = svc.oneshot(Request::new(())).await?;     // another clone, the same limit
/// assert_eq!(first.status(), StatusCode::OK);
/// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(second.headers()["retry-after"], "60");
/// # Ok(())
/// # }
/// ```
pub struct RateLimit<S, X: KeyExtractor, L> {
    inner: S,
    shared: Arc<Shared<X, L>>,
}

impl<S: Clone, X: KeyExtractor, L> Clone for RateLimit<S, X, L> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, X: KeyExtractor, L> fmt::Debug for RateLimit<S, X, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, X, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, X, L>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: RefusalBody,
    X: KeyExtractor,
    L: KeyedRateLimiter<X::Key>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, S, Request<ReqBody>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        // The key (and cost) are read from the request as it is (no split and rebuild).
        let head = RequestHead::from(&req);
        let extracted = shared.extractor.extract(head);
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&head));
        let key = match (&extracted, &shared.missing) {
            (Some(key), _) | (None, MissingKey::Shared(key)) => key,
            (None, MissingKey::Reject(status)) => {
                return ResponseFuture::done(missing_key(*status, shared.outcome));
            }
        };
        let verdict = shared.decide(key, cost);
        if verdict.outcome.is_refused() {
            return ResponseFuture::done(shared.refusal(key, &verdict));
        }
        let post = Post {
            outcome: shared.outcome.then_some(verdict.outcome),
            fields: match &verdict.state {
                Some(state) if shared.state_on_pass => Some(shared.pass_fields(key, state)),
                _ => None,
            },
        };
        match verdict.outcome {
            Outcome::Delayed { wait } => {
                // The ready service goes with the request; this one keeps a fresh clone.
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                ResponseFuture {
                    state: State::Wait {
                        sleep: Box::pin(tokio::time::sleep(wait)),
                        call: Some(Box::new((ready, req))),
                    },
                    post,
                }
            }
            _ => ResponseFuture {
                state: State::Call {
                    fut: self.inner.call(req),
                },
                post,
            },
        }
    }
}

/// The answer to a request with no usable key, refused with `status`.
#[cold]
fn missing_key(status: StatusCode, outcome: bool) -> Response<Bytes> {
    answer(
        status,
        HeaderMap::new(),
        Bytes::from_static(b"no rate-limit key\n"),
        outcome.then_some(Outcome::MissingKey),
    )
}

/// A response the layer makes itself: `status`, `headers`, `body`, and the `Outcome`
/// extension unless the layer writes none.
#[cold]
fn answer(
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    outcome: Option<Outcome>,
) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    if let Some(outcome) = outcome {
        response.extensions_mut().insert(outcome);
    }
    response
}

/// What a passed response gets on its way out.
struct Post {
    /// The outcome, unless the layer writes none ([`Builder::outcome_extension`]).
    outcome: Option<Outcome>,
    fields: Option<Box<HeaderMap>>,
}

pin_project! {
    /// The future of [`RateLimit`]: the inner service's response (after the wait, in delay
    /// mode) with the layer's fields and [`Outcome`], or the layer's refusal.
    ///
    /// # Panics
    ///
    /// If polled again after it completed (as most futures).
    pub struct ResponseFuture<F, S, R> {
        #[pin]
        state: State<F, S, R>,
        post: Post,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, R> {
        Call { #[pin] fut: F },
        Wait { sleep: Pin<Box<Sleep>>, call: Option<Box<(S, R)>> },
        Done { response: Option<Response<Bytes>> },
    }
}

impl<F, S, R> ResponseFuture<F, S, R> {
    fn done(response: Response<Bytes>) -> Self {
        ResponseFuture {
            state: State::Done {
                response: Some(response),
            },
            post: Post {
                outcome: None,
                fields: None,
            },
        }
    }
}

impl<F, S, R> fmt::Debug for ResponseFuture<F, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("outcome", &self.post.outcome)
            .finish_non_exhaustive()
    }
}

impl<F, S, R, B, E> Future for ResponseFuture<F, S, R>
where
    F: Future<Output = Result<Response<B>, E>>,
    S: Service<R, Future = F, Response = Response<B>, Error = E>,
    B: RefusalBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let this = self.as_mut().project();
            match this.state.project() {
                StateProj::Call { fut } => {
                    let mut response = ready!(fut.poll(cx))?;
                    let post = this.post;
                    if let Some(fields) = post.fields.take() {
                        crate::headers::merge(response.headers_mut(), *fields);
                    }
                    if let Some(outcome) = post.outcome {
                        response.extensions_mut().insert(outcome);
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Wait { sleep, call } => {
                    ready!(sleep.as_mut().poll(cx));
                    let Some(pending) = call.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let (mut service, request) = *pending;
                    let fut = service.call(request);
                    self.as_mut().project().state.set(State::Call { fut });
                }
                StateProj::Done { response } => {
                    let Some(response) = response.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    return Poll::Ready(Ok(response.map(B::refusal)));
                }
            }
        }
    }
}
