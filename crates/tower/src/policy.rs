//! The rate-limit layer's decision: [`Shared::decide`] (a verdict for a key and a cost,
//! with the state a response carries), what a refusal becomes (delay mode's reservation,
//! a rejection, too large), and the layer's own responses.

use crate::headers::Fields;
use crate::key::{KeyExtractor, MissingKey, RequestHead};
use crate::mode::OnLimiterError;
use crate::outcome::Outcome;
use crate::response_cost::ResponseCost;
use crate::telemetry::RateMetrics;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use limitcore::clock::Nanos;
use limitcore::{Decision, Denied, KeyedRateLimiter, KeyedReserve, Quota, Reservation, Snapshot};
use std::time::Duration;

/// A reservation of a request's cost for a key: `KeyedReserve::reserve_n_at`, captured when
/// the delay mode is chosen (only then must the limiter reserve).
pub(crate) type ReserveFn<L, K> = fn(&L, &K, u32, Nanos, Duration) -> Result<Reservation, Denied>;

pub(crate) fn reserve<L: KeyedReserve<K>, K>(
    limiter: &L,
    key: &K,
    cost: u32,
    now: Nanos,
    max_wait: Duration,
) -> Result<Reservation, Denied> {
    limiter.reserve_n_at(key, cost, now, max_wait)
}

/// A request's cost in permits ([`Builder::cost`]).
pub(crate) type CostFn = dyn Fn(&RequestHead<'_>) -> u32 + Send + Sync;

/// The outcome of a refusal that stands: [`Outcome::TooLarge`] for a cost above the
/// capacity, else [`Outcome::Rejected`] with the wait when one helps.
pub(crate) fn rejected(cost: u32, denied: Denied) -> Outcome {
    match denied {
        Denied::ExceedsCapacity { capacity } => Outcome::TooLarge { cost, capacity },
        _ => Outcome::Rejected {
            retry_after: denied.retry_after(),
        },
    }
}

/// Delay mode: how long a request may wait for its slot, and how to reserve it.
pub(crate) struct DelayMode<L, K> {
    pub(crate) max_wait: Duration,
    pub(crate) reserve: ReserveFn<L, K>,
}

/// The state every clone of the layer and of its services shares.
pub(crate) struct Shared<X: KeyExtractor, L> {
    pub(crate) limiter: L,
    pub(crate) extractor: X,
    pub(crate) missing: MissingKey<X::Key>,
    pub(crate) delay: Option<DelayMode<L, X::Key>>,
    /// Each request's cost; `None`: 1 (0, an estimate, in a [`Metered`](crate::Metered)
    /// layer).
    pub(crate) cost: Option<Box<CostFn>>,
    /// What a response cost: set in a [`Metered`](crate::Metered) layer, and only there.
    pub(crate) response_cost: Option<ResponseCost>,
    pub(crate) dry_run: bool,
    pub(crate) status: StatusCode,
    pub(crate) too_large: StatusCode,
    pub(crate) fields: Fields,
    /// Admissions carry the state fields ([`RateLimitHeaders::Always`]).
    pub(crate) state_on_pass: bool,
    /// Refusals carry the state fields (not [`RateLimitHeaders::Off`], not a dry run).
    pub(crate) state_on_refusal: bool,
    /// Responses carry the [`Outcome`] extension ([`Builder::outcome_extension`]).
    pub(crate) outcome: bool,
    /// The answer when an awaited limiter fails ([`crate::Remote`] layers only).
    pub(crate) on_error: OnLimiterError,
    /// The layer's metrics (feature `metrics`; empty without it).
    pub(crate) metrics: RateMetrics,
}

/// A verdict and the state the decision left, when a response will carry it.
pub(crate) struct Verdict {
    pub(crate) outcome: Outcome,
    /// The state of the decision that made `outcome`: present whenever the response carries
    /// state fields.
    pub(crate) state: Option<Snapshot>,
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
    pub(crate) fn decide(&self, key: &X::Key, cost: u32) -> Verdict {
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

    /// The response to a refused `verdict` for `key` ([`Shared::refusal_with`]).
    #[cold]
    pub(crate) fn refusal(&self, key: &X::Key, verdict: &Verdict) -> Response<Bytes> {
        self.refusal_with(verdict, || self.limiter.quota_for(key))
    }

    /// The state fields of an admission for `key`, when it carries them.
    pub(crate) fn pass_fields(&self, key: &X::Key, state: &Snapshot) -> Box<HeaderMap> {
        self.pass_fields_with(&self.limiter.quota_for(key), state)
    }
}

impl<X: KeyExtractor, L> Shared<X, L> {
    /// `outcome` as reported: its dry-run form in a dry run.
    #[inline]
    pub(crate) fn report(&self, outcome: Outcome) -> Outcome {
        if self.dry_run { outcome.dry() } else { outcome }
    }

    /// The response to a refused `verdict`: the refusal status with `Retry-After` when
    /// waiting helps ([`Outcome::Rejected`]), the too-large status without one
    /// ([`Outcome::TooLarge`]); the state fields, for the key's `quota`, when the verdict
    /// carries a state.
    #[cold]
    pub(crate) fn refusal_with(
        &self,
        verdict: &Verdict,
        quota: impl FnOnce() -> Quota,
    ) -> Response<Bytes> {
        let (status, retry_after) = match verdict.outcome {
            Outcome::TooLarge { .. } => (self.too_large, None),
            Outcome::Rejected { retry_after } => (self.status, retry_after),
            _ => (self.status, None),
        };
        let mut headers = HeaderMap::new();
        let fields = verdict.state.as_ref().map(|state| (quota(), state));
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

    /// The state fields of an admission under `quota`.
    pub(crate) fn pass_fields_with(&self, quota: &Quota, state: &Snapshot) -> Box<HeaderMap> {
        let mut headers = HeaderMap::new();
        self.fields.write_state(&mut headers, quota, state);
        Box::new(headers)
    }
}

/// The answer to a request with no usable key, refused with `status`.
#[cold]
pub(crate) fn missing_key(status: StatusCode, outcome: bool) -> Response<Bytes> {
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
pub(crate) fn answer(
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
