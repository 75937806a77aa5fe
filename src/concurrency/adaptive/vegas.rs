//! [`Vegas`]: the limit from a queue size estimated against the no-load latency (Netflix
//! concurrency-limits' `VegasLimit`, after TCP Vegas).

use super::{fraction, log10_root, uniform, AdaptiveRule, Bounds, Level};
use crate::clock::Nanos;
use crate::concurrency::error::LimitError;
use crate::concurrency::window::{Sample, Window};
use crate::concurrency::word::MAX_LIMIT;

/// Delay-based limit after TCP Vegas: the queue is estimated as
/// `⌈L · (1 − rtt_noload / rtt)⌉`, and the limit grows while it is small and shrinks once it
/// passes `β`.
///
/// Source: Netflix concurrency-limits, `VegasLimit`, with its parameters and defaults:
/// initial 20, maximum 1000 (`maxConcurrency`; the minimum is 1), smoothing 1.0,
/// `α = 3·log10(L)`, `β = 6·log10(L)`, threshold `log10(L)`, increase `L + log10(L)`,
/// decrease `L − log10(L)` (`log10 L`: `⌊log10 L⌋`, at least 1, Netflix's `Log10RootIntFunction`), a probe
/// of the no-load latency every `probe multiplier (30) × L × jitter` samples, jitter uniform
/// in `[0.5, 1)`; samples per request unless given a [`Window`]. Netflix draws the jitter
/// from `ThreadLocalRandom`; here it comes from a generator seeded by
/// [`Vegas::with_seed`], so the rule is pure.
///
/// # Rule
///
/// For a sample with latency `rtt > 0` (a zero latency is not a sample), `in_flight` at its
/// start, dropped or not:
///
/// 1. Every `probe` samples the sample's latency becomes the no-load latency and nothing
///    else changes; so does any latency below the no-load latency (or the first one).
/// 2. `queue = ⌈L · (1 − rtt_noload / rtt)⌉`. A drop: `L' = decrease(L)`. Else if
///    `2 · in_flight < L`, no change (the load does not reach the limit). Else with `α`,
///    `β`, threshold at `⌊L⌋`: `queue ≤ threshold` → `L' = L + β`; `queue < α` →
///    `L' = increase(L)`; `queue > β` → `L' = decrease(L)`; otherwise no change.
/// 3. `L ← (1 − smoothing) · L + smoothing · clamp(L', min, max)`; the limit is `⌊L⌋`.
///
/// # Examples
///
/// Netflix's `VegasLimitTest` (α 3, β 6, smoothing 1, initial 10, maximum 20): the first
/// sample (10 ms) sets the no-load latency; 10 ms again with 11 in flight is no queue, so
/// `10 + β = 16`.
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Sample, Vegas};
///
/// let vegas = Vegas::new().with_limits(1, 20)?.with_initial(10)?.with_alpha(3).with_beta(6).with_smoothing(1.0)?;
/// let mut state = vegas.initial();
/// assert_eq!(vegas.update(&mut state, &Sample::new(10_000_000, 10, false)), 10);
/// assert_eq!(vegas.update(&mut state, &Sample::new(10_000_000, 11, false)), 16);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Vegas {
    bounds: Bounds,
    initial: u32,
    /// Whether `initial` was set (`with_initial`), rather than the default.
    initial_set: bool,
    smoothing: f64,
    alpha: Level,
    beta: Level,
    threshold: Level,
    increase: fn(f64) -> f64,
    decrease: fn(f64) -> f64,
    probe_multiplier: u32,
    seed: u64,
    window: Window,
}

/// [`Vegas`]'s state: its estimate and what it knows of the no-load latency.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Sample, Vegas};
///
/// let vegas = Vegas::new();
/// let mut state = vegas.initial();
/// vegas.update(&mut state, &Sample::new(7_000_000, 20, false));
/// assert_eq!(state.rtt_noload, 7_000_000); // the first latency is the no-load one
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct VegasState {
    /// The estimated limit (the limit is its integer part).
    pub estimate: f64,
    /// The no-load latency, ns (0 before the first sample).
    pub rtt_noload: Nanos,
    /// Samples since the last probe.
    pub probe_count: u32,
    /// This probe period's jitter, in `[0.5, 1)`.
    pub probe_jitter: f64,
    /// The jitter generator's state.
    pub random: u64,
}

fn alpha_default(limit: u32) -> u32 {
    3 * log10_root(limit)
}

fn beta_default(limit: u32) -> u32 {
    6 * log10_root(limit)
}

fn increase_default(limit: f64) -> f64 {
    limit + f64::from(log10_root(limit as u32))
}

fn decrease_default(limit: f64) -> f64 {
    limit - f64::from(log10_root(limit as u32))
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas::new()
    }
}

impl Vegas {
    /// The rule with Netflix's defaults (see the type).
    pub fn new() -> Self {
        Vegas {
            bounds: Bounds { min: 1, max: 1000 },
            initial: 20,
            initial_set: false,
            smoothing: 1.0,
            alpha: Level::Of(alpha_default),
            beta: Level::Of(beta_default),
            threshold: Level::Of(log10_root),
            increase: increase_default,
            decrease: decrease_default,
            probe_multiplier: 30,
            seed: 0x05EE_D0F7_E6A5,
            window: Window::per_request(),
        }
    }

    limit_setters!();

    /// How much of each new estimate is taken, in `(0, 1]` (1: all of it).
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] outside `(0, 1]`.
    pub fn with_smoothing(mut self, smoothing: f64) -> Result<Self, LimitError> {
        let ok = smoothing > 0.0 && smoothing <= 1.0;
        self.smoothing = fraction("smoothing", smoothing, ok, "0 < smoothing ≤ 1")?;
        Ok(self)
    }

    /// A constant `α` (queue size below which the limit grows).
    pub fn with_alpha(mut self, alpha: u32) -> Self {
        self.alpha = Level::Fixed(alpha);
        self
    }

    /// A constant `β` (queue size above which the limit shrinks).
    pub fn with_beta(mut self, beta: u32) -> Self {
        self.beta = Level::Fixed(beta);
        self
    }

    /// `α` as a function of the integer limit.
    pub fn with_alpha_fn(mut self, alpha: fn(u32) -> u32) -> Self {
        self.alpha = Level::Of(alpha);
        self
    }

    /// `β` as a function of the integer limit.
    pub fn with_beta_fn(mut self, beta: fn(u32) -> u32) -> Self {
        self.beta = Level::Of(beta);
        self
    }

    /// The threshold (queue size at or below which the limit grows by `β`) as a function
    /// of the integer limit.
    pub fn with_threshold_fn(mut self, threshold: fn(u32) -> u32) -> Self {
        self.threshold = Level::Of(threshold);
        self
    }

    /// The increase, from the estimate to the new estimate.
    pub fn with_increase_fn(mut self, increase: fn(f64) -> f64) -> Self {
        self.increase = increase;
        self
    }

    /// The decrease, from the estimate to the new estimate.
    pub fn with_decrease_fn(mut self, decrease: fn(f64) -> f64) -> Self {
        self.decrease = decrease;
        self
    }

    /// Probe the no-load latency every `multiplier × L × jitter` samples (default 30; 0 is
    /// taken as 1).
    pub fn with_probe_multiplier(mut self, multiplier: u32) -> Self {
        self.probe_multiplier = multiplier.max(1);
        self
    }

    /// The seed of the probe jitter's generator.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How observations become samples (default: every request is one).
    pub const fn with_window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// The new estimate from a sample past the no-load latency (step 2 and 3).
    fn estimate(&self, state: &VegasState, rtt: Nanos, in_flight: u32, dropped: bool) -> f64 {
        let estimate = state.estimate;
        let noload = state.rtt_noload as f64;
        let queue = (estimate * (1.0 - noload / rtt as f64)).ceil();
        let next = if dropped {
            (self.decrease)(estimate)
        } else if f64::from(in_flight) * 2.0 < estimate {
            return estimate;
        } else {
            // Netflix's functions take the integer limit.
            let at = estimate as u32;
            let alpha = f64::from(self.alpha.at(at));
            let beta = f64::from(self.beta.at(at));
            let threshold = f64::from(self.threshold.at(at));
            if queue <= threshold {
                estimate + beta
            } else if queue < alpha {
                (self.increase)(estimate)
            } else if queue > beta {
                (self.decrease)(estimate)
            } else {
                return estimate;
            }
        };
        let next = self.bounds.clamp(next);
        (1.0 - self.smoothing) * estimate + self.smoothing * next
    }
}

impl AdaptiveRule for Vegas {
    type State = VegasState;

    /// The initial limit lies within the minimum and maximum.
    fn check(&self) -> Result<(), LimitError> {
        self.bounds.check_initial(self.initial).map(|_| ())
    }

    fn initial(&self) -> VegasState {
        let mut random = self.seed;
        VegasState {
            estimate: f64::from(self.initial),
            rtt_noload: 0,
            probe_count: 0,
            probe_jitter: uniform(&mut random, 0.5, 1.0),
            random,
        }
    }

    fn limit(&self, state: &VegasState) -> u32 {
        // Within the bounds by construction; the clamp keeps a custom function's NaN out.
        (self.bounds.clamp(state.estimate) as u32).clamp(1, MAX_LIMIT)
    }

    fn window(&self, _: &VegasState) -> Window {
        self.window
    }

    fn update(&self, state: &mut VegasState, sample: &Sample) -> u32 {
        let rtt = sample.rtt;
        if rtt == 0 {
            return self.limit(state);
        }
        state.probe_count = state.probe_count.saturating_add(1);
        let probe_at = state.probe_jitter * f64::from(self.probe_multiplier) * state.estimate;
        if probe_at <= f64::from(state.probe_count) {
            state.probe_jitter = uniform(&mut state.random, 0.5, 1.0);
            state.probe_count = 0;
            state.rtt_noload = rtt;
            return self.limit(state);
        }
        if state.rtt_noload == 0 || rtt < state.rtt_noload {
            state.rtt_noload = rtt;
            return self.limit(state);
        }
        state.estimate = self.estimate(state, rtt, sample.in_flight, sample.dropped);
        self.limit(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// Netflix's `VegasLimitTest.create()`: α 3, β 6, smoothing 1, initial 10, max 20.
    fn create() -> Vegas {
        Vegas::new()
            .with_limits(1, 20)
            .unwrap()
            .with_initial(10)
            .unwrap()
            .with_alpha(3)
            .with_beta(6)
            .with_smoothing(1.0)
            .unwrap()
    }

    fn run(vegas: &Vegas, samples: &[(Nanos, u32, bool)]) -> Vec<u32> {
        let mut state = vegas.initial();
        samples
            .iter()
            .map(|&(rtt, in_flight, dropped)| {
                vegas.update(&mut state, &Sample::new(rtt, in_flight, dropped))
            })
            .collect()
    }

    #[test]
    fn netflix_increase_decrease_and_hold() {
        // increaseLimit: no queue at 11 in flight → 10 + β.
        assert_eq!(
            run(&create(), &[(10 * MS, 10, false), (10 * MS, 11, false)]),
            [10, 16]
        );
        // decreaseLimit: 50 ms against 10 → queue ⌈10·0.8⌉ = 8 > β → 10 − log10(10) = 9.
        assert_eq!(
            run(&create(), &[(10 * MS, 10, false), (50 * MS, 11, false)]),
            [10, 9]
        );
        // noChangeIfWithinThresholds: 14 ms → queue ⌈10·(4/14)⌉ = 3, neither < α nor > β.
        assert_eq!(
            run(&create(), &[(10 * MS, 10, false), (14 * MS, 14, false)]),
            [10, 10]
        );
    }

    #[test]
    fn netflix_large_limit_and_smoothing() {
        // largeLimitIncrease: defaults at 10 000 (max 20 000); the second 10 s sample with
        // 6 000 in flight is no queue → + β = 6·4.
        let vegas = Vegas::new()
            .with_limits(1, 20_000)
            .unwrap()
            .with_initial(10_000)
            .unwrap();
        let s = 10_000 * MS;
        assert_eq!(
            run(&vegas, &[(s, 5_000, false), (s, 6_000, false)]),
            [10_000, 10_024]
        );
        // decreaseSmoothing: decrease halves, smoothing 0.5, initial 100 (max 200):
        // 100 → 75 → 56.
        let vegas = Vegas::new()
            .with_limits(1, 200)
            .unwrap()
            .with_initial(100)
            .unwrap()
            .with_decrease_fn(|l| l / 2.0)
            .with_smoothing(0.5)
            .unwrap();
        let samples = [
            (10 * MS, 100, false),
            (20 * MS, 100, false),
            (20 * MS, 100, false),
        ];
        assert_eq!(run(&vegas, &samples), [100, 75, 56]);
        // decreaseWithoutSmoothing: 100 → 50 → 25.
        let vegas = vegas.with_smoothing(1.0).unwrap();
        assert_eq!(run(&vegas, &samples), [100, 50, 25]);
    }

    #[test]
    fn drops_decrease_and_app_limited_samples_hold() {
        let vegas = create();
        // A drop decreases whatever the latency.
        assert_eq!(
            run(&vegas, &[(10 * MS, 10, false), (10 * MS, 1, true)]),
            [10, 9]
        );
        // 4 of 10 in flight: app-limited, held even with no queue.
        assert_eq!(
            run(&vegas, &[(10 * MS, 10, false), (10 * MS, 4, false)]),
            [10, 10]
        );
        // A zero latency is not a sample.
        assert_eq!(
            run(&vegas, &[(0, 10, false), (10 * MS, 10, false)]),
            [10, 10]
        );
        // A faster latency becomes the no-load latency without changing the limit.
        let out = run(
            &vegas,
            &[
                (10 * MS, 10, false),
                (5 * MS, 10, false),
                (10 * MS, 10, false),
            ],
        );
        // Against 5 ms, 10 ms is a queue of ⌈10·0.5⌉ = 5: between α and β, held.
        assert_eq!(out, [10, 10, 10]);
    }

    #[test]
    fn the_no_load_latency_is_probed_again() {
        // Multiplier 1: a probe after `jitter × L` samples (L ≤ 20 here, so within 20) resets
        // the no-load latency to the current (higher) latency.
        let vegas = create().with_probe_multiplier(1);
        let mut state = vegas.initial();
        vegas.update(&mut state, &Sample::new(10 * MS, 10, false));
        let mut probed = false;
        for _ in 0..40 {
            vegas.update(&mut state, &Sample::new(12 * MS, 10, false));
            probed |= state.rtt_noload == 12 * MS;
        }
        assert!(probed, "{state:?}");
        assert!(Vegas::new().with_smoothing(0.0).is_err());
        assert!(Vegas::new().with_smoothing(1.1).is_err());
    }
}
