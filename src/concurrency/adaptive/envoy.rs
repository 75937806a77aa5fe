//! [`EnvoyGradient`]: Envoy's adaptive-concurrency gradient controller.

use super::{fraction, next_random, AdaptiveRule, Bounds};
use crate::clock::{duration_to_nanos, Nanos};
use crate::concurrency::error::LimitError;
use crate::concurrency::window::{Aggregate, Sample, Window};
use core::time::Duration;

/// Envoy's gradient controller: every sample window the limit becomes
/// `L · gradient + √(L · gradient)`, with `gradient = clamp((minRTT + B) / sampleRTT, 0.5, 2)`
/// and `B = buffer · minRTT`; the minRTT is measured periodically with the limit pinned at
/// a low concurrency.
///
/// Source: Envoy's adaptive concurrency filter documentation (gradient controller:
/// "Calculating the minRTT", "Sample window", "Limit calculation") and its
/// `GradientControllerConfig` defaults: sample aggregate p50, maximum limit 1000, minRTT
/// measured over 50 requests (`request_count`) at a concurrency of 3 (`min_concurrency`, also
/// the lowest limit and the first), buffer 25 %, jitter 15 % of the minRTT interval. The
/// interval between minRTT measurements and the sample window (`concurrency_update_interval`)
/// have no default in Envoy; here 60 s and 100 ms, the values of Envoy's documented example.
///
/// # Rule
///
/// - **minRTT phase** (the first, and again every `interval + jitter`): the limit is pinned
///   at `min_concurrency`; the window closes after `request_count` requests granted since
///   the phase began, and their p50 becomes the minRTT; the limit goes back to what it was
///   before the phase.
/// - **Normal phase**: windows of `update_interval`; a window's p50 latency is the
///   sampleRTT, and `L ← clamp(⌊L·g + √(L·g)⌋, min_concurrency, max)`. A limit set to
///   `min_concurrency` for the 5th window in a row starts a minRTT phase at once (the
///   minRTT is probably stale).
/// - Envoy's minRTT timer runs by itself; here the phase starts with the first window that
///   closes after it is due (rules are driven by samples), and that window's sample is
///   discarded, as Envoy clears its histogram on entering the phase.
///
/// With [`EnvoyGradient::with_fixed_min_rtt`] the minRTT is never measured (Envoy's
/// `fixed_value`, with an interval of 0).
///
/// # Examples
///
/// With a minRTT of 10 ms, a sampleRTT of 10 ms gives `gradient = 12.5 / 10 = 1.25`:
/// from 100, `125 + √125 = 136`.
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, EnvoyGradient, Sample};
/// use std::time::Duration;
///
/// let envoy = EnvoyGradient::new().with_fixed_min_rtt(Duration::from_millis(10));
/// let mut state = envoy.initial();
/// state.limit = 100;
/// assert_eq!(envoy.update(&mut state, &Sample::new(10_000_000, 100, false)), 136);
/// // Twice the minRTT plus its buffer: gradient 0.5, 136 → 68 + √68 = 76.
/// assert_eq!(envoy.update(&mut state, &Sample::new(25_000_000, 100, false)), 76);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnvoyGradient {
    bounds: Bounds,
    interval: Nanos,
    fixed_min_rtt: Option<Nanos>,
    request_count: u32,
    jitter: f64,
    buffer: f64,
    percentile: f64,
    update_interval: Nanos,
    seed: u64,
}

/// [`EnvoyGradient`]'s state.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, EnvoyGradient};
///
/// let state = EnvoyGradient::new().initial();
/// // Envoy starts by measuring the minRTT, pinned at its minimum concurrency.
/// assert_eq!((state.limit, state.deferred), (3, Some(3)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoyState {
    /// The current limit.
    pub limit: u32,
    /// The measured (or fixed) minRTT, ns; 0 before the first measurement.
    pub min_rtt: Nanos,
    /// In a minRTT phase: the limit to go back to after it.
    pub deferred: Option<u32>,
    /// When the current minRTT phase began (requests granted before it are not counted), ns.
    pub epoch: Nanos,
    /// When the next minRTT phase is due, ns.
    pub next_min_rtt: Nanos,
    /// Windows in a row that set the limit to its minimum.
    pub at_minimum: u32,
    /// The jitter generator's state.
    pub random: u64,
}

impl Default for EnvoyGradient {
    fn default() -> Self {
        EnvoyGradient::new()
    }
}

impl EnvoyGradient {
    /// Windows that set the limit to its minimum before the minRTT is measured again.
    const STALE_AFTER: u32 = 5;

    /// The controller with Envoy's defaults (see the type).
    pub const fn new() -> Self {
        EnvoyGradient {
            bounds: Bounds { min: 3, max: 1000 },
            interval: 60_000_000_000,
            fixed_min_rtt: None,
            request_count: 50,
            jitter: 0.15,
            buffer: 0.25,
            percentile: 0.5,
            update_interval: 100_000_000,
            seed: 0xE70D_5EED,
        }
    }

    /// The lowest limit, also the concurrency of the minRTT phase (`min_concurrency`), and
    /// the highest (`max_concurrency_limit`).
    ///
    /// # Errors
    ///
    /// [`LimitError`] for a zero or too large bound, or `min > max`.
    pub fn with_limits(mut self, min_concurrency: u32, max: u32) -> Result<Self, LimitError> {
        self.bounds = Bounds::new(min_concurrency, max)?;
        Ok(self)
    }

    /// The time between minRTT measurements (before jitter).
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] for an interval under 1 ms (Envoy's bound).
    pub fn with_interval(mut self, interval: Duration) -> Result<Self, LimitError> {
        let ok = interval >= Duration::from_millis(1);
        fraction("minRTT interval", interval.as_secs_f64(), ok, "≥ 1 ms")?;
        self.interval = duration_to_nanos(interval);
        Ok(self)
    }

    /// A fixed minRTT, never measured.
    pub fn with_fixed_min_rtt(mut self, min_rtt: Duration) -> Self {
        self.fixed_min_rtt = Some(duration_to_nanos(min_rtt).max(1));
        self
    }

    /// Requests a minRTT measurement aggregates (0 is taken as 1).
    pub fn with_request_count(mut self, count: u32) -> Self {
        self.request_count = count.max(1);
        self
    }

    /// The random delay added to each interval, as a fraction of it, in `[0, 1]`.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] outside `[0, 1]`.
    pub fn with_jitter(mut self, jitter: f64) -> Result<Self, LimitError> {
        let ok = (0.0..=1.0).contains(&jitter);
        self.jitter = fraction("jitter", jitter, ok, "0 ≤ jitter ≤ 1")?;
        Ok(self)
    }

    /// The buffer added to the minRTT, as a fraction of it (≥ 0).
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] below 0.
    pub fn with_buffer(mut self, buffer: f64) -> Result<Self, LimitError> {
        self.buffer = fraction("buffer", buffer, buffer >= 0.0, "≥ 0")?;
        Ok(self)
    }

    /// The percentile windows are summarised by, in `(0, 1]`.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] outside `(0, 1]`.
    pub fn with_percentile(mut self, p: f64) -> Result<Self, LimitError> {
        self.percentile = fraction("percentile", p, p > 0.0 && p <= 1.0, "0 < p ≤ 1")?;
        Ok(self)
    }

    /// The sample window's length (`concurrency_update_interval`).
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] for a zero interval.
    pub fn with_update_interval(mut self, every: Duration) -> Result<Self, LimitError> {
        fraction(
            "update interval",
            every.as_secs_f64(),
            !every.is_zero(),
            "> 0",
        )?;
        self.update_interval = duration_to_nanos(every);
        Ok(self)
    }

    /// The seed of the jitter's generator.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The limit after a window whose aggregated latency is `sample_rtt`.
    fn next_limit(&self, limit: u32, min_rtt: Nanos, sample_rtt: Nanos) -> u32 {
        let buffered = min_rtt as f64 * (1.0 + self.buffer);
        let gradient = (buffered / sample_rtt.max(1) as f64).clamp(0.5, 2.0);
        let scaled = f64::from(limit) * gradient;
        self.bounds.clamp((scaled + scaled.sqrt()).floor()) as u32
    }

    /// Start a minRTT phase at `at`: pin the limit, remember the one to go back to.
    fn enter_min_rtt(&self, state: &mut EnvoyState, at: Nanos, back_to: u32) -> u32 {
        state.deferred = Some(back_to);
        state.epoch = at;
        state.at_minimum = 0;
        state.limit = self.bounds.min;
        state.limit
    }

    /// When the minRTT is due again after a measurement at `at`: the interval plus a jitter
    /// of up to `jitter · interval`.
    fn next_due(&self, state: &mut EnvoyState, at: Nanos) -> Nanos {
        let range = (self.interval as f64 * self.jitter).ceil() as u64;
        let jitter = if range == 0 {
            0
        } else {
            next_random(&mut state.random) % range
        };
        at.saturating_add(self.interval).saturating_add(jitter)
    }
}

impl AdaptiveRule for EnvoyGradient {
    type State = EnvoyState;

    fn initial(&self) -> EnvoyState {
        let min = self.bounds.min;
        EnvoyState {
            limit: min,
            min_rtt: self.fixed_min_rtt.unwrap_or(0),
            // Envoy starts by measuring the minRTT, at the minimum concurrency.
            deferred: self.fixed_min_rtt.is_none().then_some(min),
            epoch: 0,
            next_min_rtt: Nanos::MAX,
            at_minimum: 0,
            random: self.seed,
        }
    }

    fn limit(&self, state: &EnvoyState) -> u32 {
        state.limit
    }

    fn window(&self, state: &EnvoyState) -> Window {
        let aggregate = Aggregate::Percentile(self.percentile);
        let window = match state.deferred {
            // The minRTT window: `request_count` requests, however long it takes.
            Some(_) => Window::per_request()
                .with_duration(Duration::MAX, Duration::MAX)
                .map(|w| w.with_close_after(self.request_count)),
            None => Window::every(Duration::from_nanos(self.update_interval), aggregate),
        };
        // Both constructions are valid by the checks of the setters.
        window
            .and_then(|w| w.with_aggregate(aggregate))
            .unwrap_or_else(|_| Window::per_request())
            .since(state.epoch)
    }

    fn update(&self, state: &mut EnvoyState, sample: &Sample) -> u32 {
        if let Some(back_to) = state.deferred.take() {
            state.min_rtt = sample.rtt.max(1);
            state.limit = back_to;
            state.next_min_rtt = self.next_due(state, sample.at);
            return state.limit;
        }
        if self.fixed_min_rtt.is_none() && sample.at >= state.next_min_rtt {
            return self.enter_min_rtt(state, sample.at, state.limit);
        }
        let old = state.limit;
        state.limit = self.next_limit(old, state.min_rtt, sample.rtt);
        if old == self.bounds.min && state.limit == self.bounds.min {
            state.at_minimum += 1;
        } else {
            state.at_minimum = 0;
        }
        if self.fixed_min_rtt.is_none() && state.at_minimum >= Self::STALE_AFTER {
            return self.enter_min_rtt(state, sample.at, state.limit);
        }
        state.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn the_gradient_formula_with_its_clamps() {
        let envoy = EnvoyGradient::new();
        // (10 + 2.5) / 10 = 1.25: 100 → 125 + √125 = 136.18 → 136.
        assert_eq!(envoy.next_limit(100, 10 * MS, 10 * MS), 136);
        // (10 + 2.5) / 5 = 2.5 → clamped to 2: 100 → 200 + √200 = 214.
        assert_eq!(envoy.next_limit(100, 10 * MS, 5 * MS), 214);
        // (10 + 2.5) / 100 → clamped to 0.5: 100 → 50 + √50 = 57.
        assert_eq!(envoy.next_limit(100, 10 * MS, 100 * MS), 57);
        // The bounds: never below min_concurrency (3), never above 1000.
        assert_eq!(envoy.next_limit(3, 10 * MS, 1_000 * MS), 3);
        assert_eq!(envoy.next_limit(900, 10 * MS, MS), 1000);
        // A buffer of 0: gradient = minRTT / sampleRTT.
        let plain = envoy.with_buffer(0.0).unwrap();
        assert_eq!(plain.next_limit(64, 10 * MS, 10 * MS), 72); // 64 + 8
    }

    #[test]
    fn starts_measuring_the_min_rtt_at_min_concurrency() {
        let envoy = EnvoyGradient::new().with_jitter(0.0).unwrap();
        let mut state = envoy.initial();
        assert_eq!(envoy.limit(&state), 3);
        let w = envoy.window(&state);
        assert_eq!(w.close_after(), 50);
        assert_eq!(w.max_time(), u64::MAX);
        // The p50 of the 50 requests becomes the minRTT; the limit goes back to 3 (the
        // first limit); the next measurement is due 60 s later.
        let closed = Sample::new(8 * MS, 3, false).at(1_000 * MS);
        assert_eq!(envoy.update(&mut state, &closed), 3);
        assert_eq!(state.min_rtt, 8 * MS);
        assert_eq!(state.next_min_rtt, 61_000 * MS);
        let w = envoy.window(&state);
        assert_eq!((w.min_time(), w.max_time()), (100 * MS, 100 * MS));
        // Normal windows: 3 → ⌊3·1.25 + √3.75⌋ = 5, …
        assert_eq!(
            envoy.update(&mut state, &Sample::new(8 * MS, 3, false).at(1_100 * MS)),
            5
        );
        // … until the minRTT is due: that window starts a new measurement, pinned at 3,
        // counting only requests granted from then on.
        let due = Sample::new(8 * MS, 5, false).at(61_000 * MS);
        assert_eq!(envoy.update(&mut state, &due), 3);
        assert_eq!(state.deferred, Some(5));
        assert_eq!(envoy.window(&state).close_after(), 50);
        let next = Sample::new(9 * MS, 3, false).at(61_500 * MS);
        assert_eq!(
            envoy.update(&mut state, &next),
            5,
            "back to the deferred limit"
        );
        assert_eq!(state.min_rtt, 9 * MS);
    }

    #[test]
    fn five_windows_at_the_minimum_measure_again() {
        let envoy = EnvoyGradient::new().with_jitter(0.0).unwrap();
        let mut state = envoy.initial();
        envoy.update(&mut state, &Sample::new(10 * MS, 3, false).at(0));
        for i in 1..=4 {
            envoy.update(
                &mut state,
                &Sample::new(100 * MS, 3, false).at(i * 100 * MS),
            );
            assert_eq!(state.deferred, None, "window {i}");
        }
        envoy.update(&mut state, &Sample::new(100 * MS, 3, false).at(500 * MS));
        assert_eq!(state.deferred, Some(3));
        assert_eq!(state.epoch, 500 * MS);
        assert_eq!(envoy.window(&state).close_after(), 50);
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_parameters_are_checked() {
        let envoy = EnvoyGradient::new();
        let mut state = envoy.initial();
        for _ in 0..100 {
            let due = envoy.next_due(&mut state, 0);
            assert!((60_000 * MS..=69_000 * MS).contains(&due), "{due}");
        }
        assert!(EnvoyGradient::new().with_jitter(1.5).is_err());
        assert!(EnvoyGradient::new().with_buffer(-0.1).is_err());
        assert!(EnvoyGradient::new().with_percentile(0.0).is_err());
        assert!(EnvoyGradient::new()
            .with_interval(Duration::from_micros(10))
            .is_err());
        assert!(EnvoyGradient::new()
            .with_update_interval(Duration::ZERO)
            .is_err());
        assert!(EnvoyGradient::new().with_limits(0, 10).is_err());
    }
}
