//! Adaptive rules: pure functions from [`Sample`]s to a new concurrency limit, with no
//! atomics, no clock and no lock (layer 1 of the adaptive limits; the shell that feeds them
//! permit outcomes is [`Adaptive`](super::Adaptive)).
//!
//! | rule | signal | source |
//! |---|---|---|
//! | [`Aimd`] | drops (and latency past a timeout) | Netflix concurrency-limits, `AIMDLimit` |
//! | [`Vegas`] | queue estimated from latency against the no-load latency | Netflix concurrency-limits, `VegasLimit` (after TCP Vegas) |
//! | [`Gradient2`] | short-term latency against a long-term average | Netflix concurrency-limits, `Gradient2Limit` |
//! | [`EnvoyGradient`] | sampled latency against a periodically measured minRTT | Envoy's adaptive concurrency filter, gradient controller |
//!
//! Each rule has its source's parameters with its source's defaults, a minimum and a maximum
//! limit, and a [`Window`] (how observations become samples). A rule is tested on its own:
//!
//! ```
//! use limitcore::concurrency::{AdaptiveRule, Aimd, Sample};
//!
//! let aimd = Aimd::new();                               // Netflix's defaults: 20 ≤ limit ≤ 200
//! let mut limit = aimd.initial();                       // 20
//! assert_eq!(aimd.update(&mut limit, &Sample::new(1_000_000, 10, false)), 21);
//! assert_eq!(aimd.update(&mut limit, &Sample::new(1_000_000, 10, true)), 20); // ×0.9, floored at the minimum
//! ```

/// The setters every rule with `bounds: Bounds`, `initial: u32` and `initial_set: bool`
/// fields shares, written once: `with_limits` and `with_initial` (used inside each rule's
/// `impl`). Each validates the value it is given, so that a rule they return is one
/// [`Permits::adaptive`](crate::concurrency::Permits::adaptive) accepts.
macro_rules! limit_setters {
    () => {
        /// The minimum and maximum limits. An initial limit set with `with_initial` must lie
        /// within them; the rule's default initial limit is moved within them (to the nearer
        /// bound) if it does not.
        ///
        /// # Errors
        ///
        /// [`LimitError`] for a zero or too large bound, or `min > max`;
        /// [`LimitError::InitialOutsideLimits`] if the initial limit set before falls
        /// outside (set the limits first, then the initial limit).
        pub fn with_limits(mut self, min: u32, max: u32) -> Result<Self, LimitError> {
            let bounds = super::Bounds::new(min, max)?;
            if self.initial_set {
                bounds.check_initial(self.initial)?;
            } else {
                self.initial = self.initial.clamp(min, max);
            }
            self.bounds = bounds;
            Ok(self)
        }

        /// The limit to start from, within the minimum and maximum (the defaults, or those
        /// set with `with_limits` before).
        ///
        /// # Errors
        ///
        /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above
        /// [`MAX_LIMIT`](crate::concurrency::MAX_LIMIT);
        /// [`LimitError::InitialOutsideLimits`] outside the minimum and maximum.
        pub fn with_initial(mut self, initial: u32) -> Result<Self, LimitError> {
            let initial = crate::concurrency::word::check_limit(initial)?;
            self.initial = self.bounds.check_initial(initial)?;
            self.initial_set = true;
            Ok(self)
        }
    };
}

mod aimd;
mod envoy;
mod gradient2;
mod vegas;

pub use aimd::Aimd;
pub use envoy::{EnvoyGradient, EnvoyState};
pub use gradient2::{Gradient2, Gradient2State};
pub use vegas::{Vegas, VegasState};

use super::error::LimitError;
use super::window::{Sample, Window};
use super::word::check_limit;
use core::fmt;

/// An adaptive concurrency rule: from the current state and a window's [`Sample`], the new
/// limit. Pure: every time it needs is in the sample, and any randomness comes from a seeded
/// generator in its state, so a rule replays exactly.
///
/// # Contract (for every implementation)
///
/// - [`AdaptiveRule::limit`] and the value [`AdaptiveRule::update`] returns are within the
///   rule's minimum and maximum, both in `1..=MAX_LIMIT`
///   ([`MAX_LIMIT`](super::MAX_LIMIT)).
/// - `update` returns the new limit, which `limit` reads back from the state.
///
/// # Examples
///
/// A rule of your own: halve on a drop, else one more.
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Sample, Window};
///
/// #[derive(Debug, Clone)]
/// struct Halve;
///
/// impl AdaptiveRule for Halve {
///     type State = u32;
///     fn initial(&self) -> u32 { 8 }
///     fn limit(&self, state: &u32) -> u32 { *state }
///     fn window(&self, _: &u32) -> Window { Window::per_request() }
///     fn update(&self, state: &mut u32, s: &Sample) -> u32 {
///         *state = if s.dropped { (*state / 2).max(1) } else { (*state + 1).min(64) };
///         *state
///     }
/// }
///
/// let mut limit = Halve.initial();
/// assert_eq!(Halve.update(&mut limit, &Sample::new(5, 8, true)), 4);
/// ```
pub trait AdaptiveRule: Clone + fmt::Debug + Send + Sync + 'static {
    /// What the rule remembers between samples (its estimate, averages, phase).
    type State: Clone + fmt::Debug + Send + 'static;

    /// The state of a fresh limit.
    fn initial(&self) -> Self::State;

    /// The limit `state` stands for.
    fn limit(&self, state: &Self::State) -> u32;

    /// How the next observations are to be windowed into samples.
    fn window(&self, state: &Self::State) -> Window;

    /// Learn from `sample`; returns the new limit.
    fn update(&self, state: &mut Self::State, sample: &Sample) -> u32;

    /// Whether the rule's settings fit together (its initial limit within its minimum and
    /// maximum, say), so that the contract holds from the first state on. Called when a
    /// limit is built from the rule ([`Permits::adaptive`](crate::concurrency::Permits::adaptive));
    /// the provided version accepts every rule.
    ///
    /// # Errors
    ///
    /// The [`LimitError`] of the first setting that does not fit.
    fn check(&self) -> Result<(), LimitError> {
        Ok(())
    }
}

/// A rule's minimum and maximum limits, checked once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) min: u32,
    pub(crate) max: u32,
}

impl Bounds {
    pub(crate) fn new(min: u32, max: u32) -> Result<Self, LimitError> {
        check_limit(min)?;
        check_limit(max)?;
        if min > max {
            return Err(LimitError::MinAboveMax { min, max });
        }
        Ok(Bounds { min, max })
    }

    /// `initial` if it is within the bounds, else the error that says so.
    pub(crate) fn check_initial(&self, initial: u32) -> Result<u32, LimitError> {
        if (self.min..=self.max).contains(&initial) {
            Ok(initial)
        } else {
            Err(LimitError::InitialOutsideLimits {
                initial,
                min: self.min,
                max: self.max,
            })
        }
    }

    /// `x` clamped into the bounds (a rule's arithmetic, never the caller's input).
    pub(crate) fn clamp(&self, x: f64) -> f64 {
        x.max(f64::from(self.min)).min(f64::from(self.max))
    }
}

/// A parameter that is a constant or a function of the current limit (Netflix's
/// `IntUnaryOperator` parameters).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Level {
    Fixed(u32),
    Of(fn(u32) -> u32),
}

impl Level {
    pub(crate) fn at(self, limit: u32) -> u32 {
        match self {
            Level::Fixed(x) => x,
            Level::Of(f) => f(limit),
        }
    }
}

/// `⌊log10 n⌋`, at least 1: Netflix's `Log10RootIntFunction` (its table for `n < 1000`
/// takes the same values); [`Vegas`]' default α, β, threshold, increase and decrease are
/// built on it.
fn log10_root(n: u32) -> u32 {
    n.checked_ilog10().unwrap_or(0).max(1)
}

/// A fraction checked to lie in `range` (a rule's parameter).
pub(crate) fn fraction(
    name: &'static str,
    value: f64,
    ok: bool,
    expected: &'static str,
) -> Result<f64, LimitError> {
    if ok && value.is_finite() {
        Ok(value)
    } else {
        Err(LimitError::Parameter {
            name,
            value,
            expected,
        })
    }
}

/// A small deterministic generator (xorshift64*) for the rules' jitter: seeded, so a rule
/// is a pure function of its inputs.
pub(crate) fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    if x == 0 {
        x = 0x9E37_79B9_7F4A_7C15;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// A uniform `f64` in `[lo, hi)` from the generator.
pub(crate) fn uniform(state: &mut u64, lo: f64, hi: f64) -> f64 {
    let unit = (next_random(state) >> 11) as f64 / (1u64 << 53) as f64;
    lo + (hi - lo) * unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log10_root_matches_netflix_table() {
        assert_eq!(
            [0, 1, 9, 10, 99, 100, 999, 1_000, 10_000, 20_000].map(log10_root),
            [1, 1, 1, 1, 1, 2, 2, 3, 4, 4]
        );
    }

    #[test]
    fn bounds_refuse_bad_input() {
        assert_eq!(Bounds::new(0, 5), Err(LimitError::ZeroLimit));
        assert_eq!(
            Bounds::new(6, 5),
            Err(LimitError::MinAboveMax { min: 6, max: 5 })
        );
        let b = Bounds::new(2, 5).unwrap();
        assert!(b.check_initial(6).is_err() && b.check_initial(5).is_ok());
        assert_eq!(b.clamp(0.5), 2.0);
        assert_eq!(b.clamp(9.0), 5.0);
    }

    #[test]
    fn the_generator_is_seeded_and_uniform_in_range() {
        let (mut a, mut b) = (7, 7);
        let xs: Vec<f64> = (0..1000).map(|_| uniform(&mut a, 0.5, 1.0)).collect();
        let ys: Vec<f64> = (0..1000).map(|_| uniform(&mut b, 0.5, 1.0)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| (0.5..1.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / 1000.0;
        assert!((0.72..0.78).contains(&mean), "mean {mean}");
    }
}
