//! [`Gradient2`]: the limit from the ratio of a long-term latency average to the current
//! latency (Netflix concurrency-limits' `Gradient2Limit`).

use super::{fraction, AdaptiveRule, Bounds, Level};
use crate::concurrency::error::LimitError;
use crate::concurrency::window::{Sample, Window};
use crate::concurrency::word::MAX_LIMIT;

/// Gradient-based limit: `L' = L · gradient + queue`, with
/// `gradient = clamp(tolerance · long_rtt / rtt, 0.5, 1)`, where `long_rtt` is an
/// exponential average of latencies over a long window, smoothed into the estimate.
///
/// Source: Netflix concurrency-limits, `Gradient2Limit` (`_update`) and its
/// `ExpAvgMeasurement`, with its parameters and defaults: initial 20, minimum 20, maximum 200
/// (`maxConcurrency`), smoothing 0.2, queue size 4, long window 600 samples (with a warm-up
/// of 10, averaged plainly), RTT tolerance 1.5 (at least 1); samples per request unless given
/// a [`Window`]. As in Netflix's, a drop is a latency sample like any other: the rule reacts
/// to latency only.
///
/// # Rule
///
/// For a sample of latency `rtt > 0` (a zero latency is not a sample) with `in_flight` at
/// its start:
///
/// 1. `long = long_rtt.add(rtt)`: the plain mean of the first 10 latencies, then
///    `long ← long · (1 − f) + rtt · f` with `f = 2 / (600 + 1)`. If `long / rtt > 2` the
///    stored average decays by 5 % (latency came back down after a long overload).
/// 2. If `in_flight < L / 2`, no change (the load does not reach the limit).
/// 3. `gradient = clamp(tolerance · long / rtt, 0.5, 1)`; `L' = L · gradient + queue`;
///    `L ← clamp(L · (1 − smoothing) + L' · smoothing, min, max)`; the limit is `⌊L⌋`.
///
/// # Examples
///
/// At steady latency the gradient is 1 (capped), so each sample adds `queue · smoothing`
/// = 0.8: from 20, 20.8 and then 21.6.
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Gradient2, Sample};
///
/// let g2 = Gradient2::new();
/// let mut state = g2.initial();
/// assert_eq!(g2.update(&mut state, &Sample::new(10_000_000, 20, false)), 20);
/// assert_eq!(g2.update(&mut state, &Sample::new(10_000_000, 20, false)), 21);
/// assert!((state.estimate - 21.6).abs() < 1e-9);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Gradient2 {
    bounds: Bounds,
    initial: u32,
    /// Whether `initial` was set (`with_initial`), rather than the default.
    initial_set: bool,
    smoothing: f64,
    queue_size: Level,
    long_window: u32,
    tolerance: f64,
    window: Window,
}

/// [`Gradient2`]'s state.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Gradient2, Sample};
///
/// let g2 = Gradient2::new();
/// let mut state = g2.initial();
/// g2.update(&mut state, &Sample::new(8_000_000, 20, false));
/// assert_eq!((state.warm, state.long_rtt), (1, 8_000_000.0)); // the warm-up's plain mean
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient2State {
    /// The estimated limit (the limit is its integer part).
    pub estimate: f64,
    /// The long-term latency average, ns.
    pub long_rtt: f64,
    /// Latencies averaged so far, up to the warm-up's 10.
    pub warm: u32,
    /// Their sum, during the warm-up.
    pub warm_sum: f64,
}

/// Samples averaged plainly before the exponential average starts (Netflix's warm-up).
const WARMUP: u32 = 10;

impl Default for Gradient2 {
    fn default() -> Self {
        Gradient2::new()
    }
}

impl Gradient2 {
    /// The rule with Netflix's defaults (see the type).
    pub const fn new() -> Self {
        Gradient2 {
            bounds: Bounds { min: 20, max: 200 },
            initial: 20,
            initial_set: false,
            smoothing: 0.2,
            queue_size: Level::Fixed(4),
            long_window: 600,
            tolerance: 1.5,
            window: Window::per_request(),
        }
    }

    limit_setters!();

    /// How much of each new estimate is taken, in `(0, 1]`.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] outside `(0, 1]`.
    pub fn with_smoothing(mut self, smoothing: f64) -> Result<Self, LimitError> {
        let ok = smoothing > 0.0 && smoothing <= 1.0;
        self.smoothing = fraction("smoothing", smoothing, ok, "0 < smoothing ≤ 1")?;
        Ok(self)
    }

    /// A constant queue size (the headroom added to each new estimate).
    pub fn with_queue_size(mut self, queue: u32) -> Self {
        self.queue_size = Level::Fixed(queue);
        self
    }

    /// The queue size as a function of the integer limit (Netflix's `queueSizeFunction`;
    /// `SquareRootFunction` is a common choice).
    pub fn with_queue_size_fn(mut self, queue: fn(u32) -> u32) -> Self {
        self.queue_size = Level::Of(queue);
        self
    }

    /// The long-term average's window, in samples (0 is taken as 1).
    pub fn with_long_window(mut self, samples: u32) -> Self {
        self.long_window = samples.max(1);
        self
    }

    /// How much slower than the long-term average the latency may be before the limit
    /// shrinks, at least 1.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] below 1 (Netflix's check).
    pub fn with_rtt_tolerance(mut self, tolerance: f64) -> Result<Self, LimitError> {
        self.tolerance = fraction("rtt tolerance", tolerance, tolerance >= 1.0, "≥ 1")?;
        Ok(self)
    }

    /// How observations become samples (default: every request is one).
    pub const fn with_window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// Netflix's `ExpAvgMeasurement.add`: the average after `rtt`.
    fn add_long(&self, state: &mut Gradient2State, rtt: f64) -> f64 {
        if state.warm < WARMUP {
            state.warm += 1;
            state.warm_sum += rtt;
            state.long_rtt = state.warm_sum / f64::from(state.warm);
        } else {
            let factor = 2.0 / (f64::from(self.long_window) + 1.0);
            state.long_rtt = state.long_rtt * (1.0 - factor) + rtt * factor;
        }
        state.long_rtt
    }
}

impl AdaptiveRule for Gradient2 {
    type State = Gradient2State;

    /// The initial limit lies within the minimum and maximum.
    fn check(&self) -> Result<(), LimitError> {
        self.bounds.check_initial(self.initial).map(|_| ())
    }

    fn initial(&self) -> Gradient2State {
        Gradient2State {
            estimate: f64::from(self.initial),
            long_rtt: 0.0,
            warm: 0,
            warm_sum: 0.0,
        }
    }

    fn limit(&self, state: &Gradient2State) -> u32 {
        (self.bounds.clamp(state.estimate) as u32).clamp(1, MAX_LIMIT)
    }

    fn window(&self, _: &Gradient2State) -> Window {
        self.window
    }

    fn update(&self, state: &mut Gradient2State, sample: &Sample) -> u32 {
        if sample.rtt == 0 {
            return self.limit(state);
        }
        let estimate = state.estimate;
        let queue = f64::from(self.queue_size.at(estimate as u32));
        let short = sample.rtt as f64;
        let long = self.add_long(state, short);
        if long / short > 2.0 {
            state.long_rtt *= 0.95;
        }
        if f64::from(sample.in_flight) < estimate / 2.0 {
            return self.limit(state);
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        let next = estimate * gradient + queue;
        let next = estimate * (1.0 - self.smoothing) + next * self.smoothing;
        state.estimate = self.bounds.clamp(next);
        self.limit(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Nanos;

    const MS: Nanos = 1_000_000;

    /// Netflix's `ExpAvgMeasurementTest.testWarmup`, through the rule's long average
    /// (window 100, warm-up 10): 10, 10.5, …, 14.5 over the warm-up, then about 16.2 after
    /// a sample of 100.
    #[test]
    fn the_long_average_warms_up_as_netflix_measures() {
        let g2 = Gradient2::new().with_long_window(100);
        let mut state = g2.initial();
        for i in 0..10 {
            let avg = g2.add_long(&mut state, f64::from(i + 10));
            assert!(
                (avg - (10.0 + f64::from(i) * 0.5)).abs() < 0.01,
                "{i}: {avg}"
            );
        }
        let avg = g2.add_long(&mut state, 100.0);
        assert!((avg - 16.2).abs() < 0.1, "{avg}");
    }

    #[test]
    fn latency_above_tolerance_cuts_by_the_gradient() {
        // Warm the long average at 10 ms (gradient capped at 1: each sample adds 0.8).
        let g2 = Gradient2::new().with_limits(1, 200).unwrap();
        let mut state = g2.initial();
        for _ in 0..10 {
            g2.update(&mut state, &Sample::new(10 * MS, 100, false));
        }
        assert!((state.estimate - 28.0).abs() < 1e-9, "{state:?}");
        // 30 ms against a long average of ~10 ms: long ≈ (10·1 + …) the exponential step
        // moves it to 10 + 20·2/601; gradient = 1.5·long/30 ≈ 0.5017.
        let long = 10.0 * MS as f64 * (1.0 - 2.0 / 601.0) + 30.0 * MS as f64 * (2.0 / 601.0);
        let gradient = 1.5 * long / (30.0 * MS as f64);
        let expected = 28.0 * 0.8 + (28.0 * gradient + 4.0) * 0.2;
        let limit = g2.update(&mut state, &Sample::new(30 * MS, 100, false));
        assert!(
            (state.estimate - expected).abs() < 1e-9,
            "{state:?} vs {expected}"
        );
        assert_eq!(limit, expected as u32);
        // At 100 ms the gradient floors at 0.5 (never more than halves per step).
        let before = state.estimate;
        g2.update(&mut state, &Sample::new(100 * MS, 100, false));
        assert!((state.estimate - (before * 0.8 + (before * 0.5 + 4.0) * 0.2)).abs() < 1e-9);
    }

    #[test]
    fn app_limited_samples_hold_and_bounds_apply() {
        let g2 = Gradient2::new();
        let mut state = g2.initial();
        // 9 in flight < 20 / 2: held (but the long average still learns).
        assert_eq!(g2.update(&mut state, &Sample::new(10 * MS, 9, false)), 20);
        assert_eq!(state.warm, 1);
        // Warm the long average at 10 ms (the estimate grows to 27.2), then latency jumps
        // a hundredfold: the gradient floors at 0.5 and the minimum (20) floors the cut.
        for _ in 0..9 {
            g2.update(&mut state, &Sample::new(10 * MS, 20, false));
        }
        assert_eq!(g2.limit(&state), 27);
        let mut limits = Vec::new();
        for _ in 0..10 {
            limits.push(g2.update(&mut state, &Sample::new(1_000 * MS, 20, false)));
        }
        // Each step: L·0.8 + (L·0.5 + 4)·0.2 = 0.9·L + 0.8: 25.28, 23.55, 21.997, 20.60, (19.34→) 20.
        assert_eq!(limits[..5], [25, 23, 21, 20, 20]);
        assert!(limits.iter().skip(4).all(|&l| l == 20), "{limits:?}");
        // The maximum caps the growth.
        let g2 = Gradient2::new().with_limits(20, 22).unwrap();
        let mut state = g2.initial();
        for _ in 0..20 {
            g2.update(&mut state, &Sample::new(10 * MS, 50, false));
        }
        assert_eq!(g2.limit(&state), 22);
        assert!(Gradient2::new().with_rtt_tolerance(0.9).is_err());
        assert!(Gradient2::new().with_smoothing(0.0).is_err());
    }

    #[test]
    fn a_recovered_latency_decays_the_long_average() {
        let g2 = Gradient2::new();
        let mut state = g2.initial();
        for _ in 0..10 {
            g2.update(&mut state, &Sample::new(100 * MS, 20, false));
        }
        let long = state.long_rtt;
        g2.update(&mut state, &Sample::new(10 * MS, 20, false));
        let stepped = long * (1.0 - 2.0 / 601.0) + 10.0 * MS as f64 * 2.0 / 601.0;
        assert!((state.long_rtt - stepped * 0.95).abs() < 1.0, "{state:?}");
    }
}
