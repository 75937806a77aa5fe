//! [`LimitReq`]: nginx's `limit_req` parameters as a limiter and a delay bound.

use limitcore::clock::Clock;
use limitcore::rules::GcraRule;
use limitcore::{Keyed, Quota, QuotaError};
use std::hash::Hash;
use std::time::Duration;

/// nginx's `limit_req zone=… burst=B [nodelay | delay=M]` over a `rate`, as the layer's
/// delay mode runs it.
///
/// # What nginx does
///
/// `ngx_http_limit_req_module` keeps, per key, an *excess* `E`: each request sets
/// `E = max(0, E + 1 − rate·Δt)` (a fresh key starts at `E = 0`). A request with `E > B`
/// is refused; one with `E ≤ M` passes at once; one with `M < E ≤ B` is delayed by
/// `(E − M)/rate`. Without `delay=` or `nodelay`, `M = 0` (every excess request waits);
/// `nodelay` is `M = B`. So from an idle key, a burst of simultaneous requests gets
/// `M + 1` passed at once, `B − M` delayed by 1, 2, … emission intervals, and the rest
/// refused.
///
/// # What this implements
///
/// GCRA with the rate's emission interval `T` and a burst of `M + 1`, and reservations
/// bounded by `max_wait = (B − M)·T`. In GCRA's terms a request's backlog after it is
/// `X = E + 1`: it conforms at once iff `E ≤ M`, its reservation's delay is `(E − M)·T`,
/// and the delay exceeds `max_wait` iff `E > B`: the same three answers, at nanosecond
/// rather than nginx's millisecond granularity, with exact `Retry-After`s on refusals.
/// `nodelay` (`M = B`) is plain reject mode with a burst of `B + 1`. A `delay=` above the
/// burst is taken as the burst (`nodelay`).
///
/// The rate's own burst is ignored: `rate` is only `count` per `period`.
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::KeyedReserve;
/// use limitcore_tower::LimitReq;
/// use std::time::Duration;
///
/// // limit_req zone=one burst=5 delay=2; rate=10r/s
/// let nginx = LimitReq::new("10/s".parse()?, 5).delay(2);
/// assert_eq!(nginx.quota()?.burst(), 3);
/// assert_eq!(nginx.max_wait(), Duration::from_millis(300));
///
/// let per_ip = nginx.keyed::<u32, _>(ManualClock::new())?;
/// let delays: Vec<_> = (0..7)
///     .map(|_| per_ip.reserve_n_at(&1, 1, 0, nginx.max_wait()).map(|r| r.delay().as_millis()))
///     .collect();
/// // 3 at once (E = 0, 1, 2), 3 delayed (E = 3, 4, 5), the 7th refused (E = 6 > 5).
/// assert_eq!(delays[..6], [Ok(0), Ok(0), Ok(0), Ok(100), Ok(200), Ok(300)]);
/// assert!(delays[6].is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitReq {
    rate: Quota,
    burst: u32,
    delay: u32,
}

impl LimitReq {
    /// `rate=` and `burst=B`, every excess request delayed (nginx's default, `delay=0`).
    pub fn new(rate: Quota, burst: u32) -> Self {
        LimitReq {
            rate,
            burst,
            delay: 0,
        }
    }

    /// `nodelay`: excess requests up to the burst pass at once (`M = B`).
    pub fn nodelay(mut self) -> Self {
        self.delay = self.burst;
        self
    }

    /// `delay=M`: the first `M` excess requests pass at once, the next `B − M` wait for
    /// their slots (`M` above the burst is the burst).
    pub fn delay(mut self, m: u32) -> Self {
        self.delay = m.min(self.burst);
        self
    }

    /// nginx's `burst`.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The `M` of `delay=M` (the burst for `nodelay`).
    pub fn delay_threshold(&self) -> u32 {
        self.delay
    }

    /// The GCRA quota: the rate with a burst of `M + 1`.
    ///
    /// # Errors
    ///
    /// [`QuotaError`] if that burst is too large for the rate
    /// ([`QuotaError::BurstTooLarge`]).
    pub fn quota(&self) -> Result<Quota, QuotaError> {
        Quota::new_with_burst(
            self.rate.count(),
            self.rate.period(),
            self.delay.saturating_add(1),
        )
    }

    /// The delay bound, `(B − M)·T` with `T` the rate's emission interval (zero for
    /// `nodelay`: reject mode).
    pub fn max_wait(&self) -> Duration {
        let ns = u128::from(self.rate.emission_interval_ns()) * u128::from(self.burst - self.delay);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The per-key limiter on `clock`: [`Keyed`] GCRA with [`LimitReq::quota`].
    ///
    /// # Errors
    ///
    /// As [`LimitReq::quota`].
    pub fn keyed<K, C>(&self, clock: C) -> Result<Keyed<K, GcraRule, C>, QuotaError>
    where
        K: Hash + Eq + Send + Sync + 'static,
        C: Clock,
    {
        Keyed::with_clock(self.quota()?, clock)
    }
}
