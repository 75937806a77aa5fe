//! [`Aimd`]: additive increase, multiplicative decrease (Netflix concurrency-limits'
//! `AIMDLimit`).

use super::{fraction, AdaptiveRule, Bounds};
use crate::clock::{duration_to_nanos, Nanos};
use crate::concurrency::error::LimitError;
use crate::concurrency::window::{Sample, Window};
use core::time::Duration;

/// Additive increase, multiplicative decrease: one more permit after a sample that used at
/// least half the limit, `× backoff` after a drop or a latency past the timeout.
///
/// Source: Netflix concurrency-limits, `AIMDLimit` (`_update`), with its parameters and
/// defaults: minimum 20, maximum 200, initial 20, backoff ratio 0.9 (in `[0.5, 1)`),
/// timeout 5 s; samples per request unless given a [`Window`].
///
/// # Rule
///
/// With `L` the current limit and a sample of latency `rtt`, `in_flight` permits at its
/// start, dropped or not:
///
/// - dropped, or `rtt > timeout`: `L ← ⌊L · backoff⌋`;
/// - else if `2 · in_flight ≥ L`: `L ← L + 1` (a limit the load does not reach is not
///   raised);
/// - then `L ← clamp(L, min, max)`.
///
/// # Examples
///
/// Netflix's own cases: a success with 10 in flight raises 20 to 21; a drop cuts 30 to 27;
/// at the maximum a success changes nothing.
///
/// ```
/// use limitcore::concurrency::{AdaptiveRule, Aimd, Sample};
///
/// let ok = Sample::new(1_000_000, 10, false);
/// let aimd = Aimd::new();
/// let mut limit = aimd.initial();
/// assert_eq!(aimd.update(&mut limit, &ok), 21);
///
/// let aimd = Aimd::new().with_initial(30)?;
/// let mut limit = aimd.initial();
/// assert_eq!(aimd.update(&mut limit, &Sample::new(0, 0, true)), 27);
///
/// let aimd = Aimd::new().with_limits(1, 21)?.with_initial(21)?;
/// let mut limit = aimd.initial();
/// assert_eq!(aimd.update(&mut limit, &ok), 21);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aimd {
    bounds: Bounds,
    initial: u32,
    /// Whether `initial` was set (`with_initial`), rather than the default.
    initial_set: bool,
    backoff: f64,
    timeout: Nanos,
    window: Window,
}

impl Default for Aimd {
    fn default() -> Self {
        Aimd::new()
    }
}

impl Aimd {
    /// The rule with Netflix's defaults (see the type).
    pub const fn new() -> Self {
        Aimd {
            bounds: Bounds { min: 20, max: 200 },
            initial: 20,
            initial_set: false,
            backoff: 0.9,
            timeout: 5_000_000_000,
            window: Window::per_request(),
        }
    }

    limit_setters!();

    /// The factor a drop multiplies the limit by, in `[0.5, 1)` (Netflix's check).
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] outside `[0.5, 1)`.
    pub fn with_backoff(mut self, ratio: f64) -> Result<Self, LimitError> {
        let ok = (0.5..1.0).contains(&ratio);
        self.backoff = fraction("backoff ratio", ratio, ok, "0.5 ≤ ratio < 1")?;
        Ok(self)
    }

    /// The latency past which a success counts as a drop.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] for a zero timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, LimitError> {
        if timeout.is_zero() {
            return Err(LimitError::Parameter {
                name: "timeout",
                value: 0.0,
                expected: "a positive duration",
            });
        }
        self.timeout = duration_to_nanos(timeout);
        Ok(self)
    }

    /// How observations become samples (default: every request is one).
    pub const fn with_window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }
}

impl AdaptiveRule for Aimd {
    /// The current limit.
    type State = u32;

    /// The initial limit lies within the minimum and maximum.
    fn check(&self) -> Result<(), LimitError> {
        self.bounds.check_initial(self.initial).map(|_| ())
    }

    fn initial(&self) -> u32 {
        self.initial
    }

    fn limit(&self, state: &u32) -> u32 {
        *state
    }

    fn window(&self, _: &u32) -> Window {
        self.window
    }

    fn update(&self, limit: &mut u32, sample: &Sample) -> u32 {
        let mut next = *limit;
        if sample.dropped || sample.rtt > self.timeout {
            // Netflix's `(int) (currentLimit * backoffRatio)`: truncated.
            next = (f64::from(next) * self.backoff) as u32;
        } else if u64::from(sample.in_flight) * 2 >= u64::from(next) {
            next = next.saturating_add(1);
        }
        *limit = next.clamp(self.bounds.min, self.bounds.max);
        *limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::concurrency::Permits;

    #[test]
    fn netflix_anchor_cases() {
        // AIMDLimitTest: initial 10 is kept as is (with a minimum that allows it).
        let aimd = Aimd::new().with_limits(1, 200).unwrap();
        assert_eq!(aimd.with_initial(10).unwrap().initial(), 10);
        // increaseOnSuccess: 20, a success of 1 ms with 10 in flight → 21.
        let aimd = Aimd::new();
        let mut l = aimd.initial();
        assert_eq!(aimd.update(&mut l, &Sample::new(1_000_000, 10, false)), 21);
        // decreaseOnDrops: 30 and a drop → 27.
        let aimd = Aimd::new().with_initial(30).unwrap();
        let mut l = aimd.initial();
        assert_eq!(aimd.update(&mut l, &Sample::new(0, 0, true)), 27);
        // successOverflow: at the maximum (21) a success keeps 21.
        let aimd = Aimd::new()
            .with_limits(1, 21)
            .unwrap()
            .with_initial(21)
            .unwrap();
        let mut l = aimd.initial();
        assert_eq!(aimd.update(&mut l, &Sample::new(1_000_000, 10, false)), 21);
    }

    #[test]
    fn app_limited_samples_do_not_raise_and_timeouts_count_as_drops() {
        let aimd = Aimd::new().with_limits(1, 100).unwrap();
        let mut l = 40;
        assert_eq!(aimd.update(&mut l, &Sample::new(1, 19, false)), 40);
        assert_eq!(aimd.update(&mut l, &Sample::new(1, 20, false)), 41);
        // 5 s is not past the timeout; 5 s + 1 ns is.
        assert_eq!(
            aimd.update(&mut l, &Sample::new(5_000_000_000, 41, false)),
            42
        );
        assert_eq!(
            aimd.update(&mut l, &Sample::new(5_000_000_001, 41, false)),
            37
        );
        let aimd = aimd.with_timeout(Duration::from_millis(10)).unwrap();
        assert_eq!(aimd.update(&mut l, &Sample::new(10_000_001, 41, false)), 33);
        // The minimum floors the backoff.
        let mut l = 1;
        assert_eq!(aimd.update(&mut l, &Sample::new(1, 1, true)), 1);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Aimd::new().with_backoff(1.0).is_err());
        assert!(Aimd::new().with_backoff(0.49).is_err());
        assert!(Aimd::new().with_backoff(f64::NAN).is_err());
        assert!(Aimd::new().with_backoff(0.5).is_ok());
        assert!(Aimd::new().with_timeout(Duration::ZERO).is_err());
        assert!(Aimd::new().with_initial(0).is_err());
        // An initial limit outside the bounds is refused when it is given, never later by
        // the limit that is built from the rule.
        assert_eq!(
            Aimd::new().with_initial(19),
            Err(LimitError::InitialOutsideLimits {
                initial: 19,
                min: 20,
                max: 200
            }),
            "below the default minimum"
        );
        let set = Aimd::new().with_initial(30).unwrap();
        assert_eq!(
            set.with_limits(1, 10),
            Err(LimitError::InitialOutsideLimits {
                initial: 30,
                min: 1,
                max: 10
            }),
            "an initial limit set before must stay within"
        );
        // The default initial limit (20) follows the limits into their range.
        let narrow = Aimd::new().with_limits(30, 40).unwrap();
        assert_eq!((narrow.check(), narrow.initial()), (Ok(()), 30));
        let wide = Aimd::new().with_limits(1, 10).unwrap();
        assert_eq!(wide.initial(), 10);
        let fits = Aimd::new()
            .with_limits(1, 10)
            .unwrap()
            .with_initial(4)
            .unwrap();
        assert_eq!(fits.check(), Ok(()));
        assert_eq!(Permits::adaptive(fits).unwrap().limit(), 4);
        assert_eq!(Aimd::new().with_limits(0, 40), Err(LimitError::ZeroLimit));
    }
}
