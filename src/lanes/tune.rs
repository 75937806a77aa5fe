//! Auto-tuning (layer 1: pure, at explicit times): [`AutoTune`], RocksDB's rule on an exact
//! measure of how busy the budget was, and [`Tuner`], which measures it.
//!
//! RocksDB's `GenericRateLimiter` with `auto_tuned` starts at half its maximum rate and every
//! 100 refill periods (10 s by default) looks at the share of periods that found the budget
//! drained: above 90 % it multiplies the rate by 1.05 (at most the maximum), below 50 % it
//! divides it by 1.05 (at least a twentieth of the maximum), and at 0 % it drops to that
//! floor at once. A lanes limiter has no refill periods, so the measure here is the exact
//! share of the tuning period during which some request waited (the *busy* share): the
//! time from a request joining an empty queue to the queue emptying again, summed. The
//! thresholds, step, bounds and start are RocksDB's by default.

use super::config::LanesConfigError;
use crate::clock::{duration_to_nanos, Nanos};
use core::time::Duration;

/// An auto-tuning rule (see the module): every `period`, the rate `r` (bytes a second,
/// or units) becomes
///
/// - `max / divisor` if no request waited at all in the period,
/// - `max(max / divisor, r · 100 / (100 + step_pct))` if the busy share is below `low_pct`,
/// - `min(max, r · (100 + step_pct) / 100)` if it is above `high_pct`,
/// - `r` otherwise,
///
/// where `max` is the configured quota's rate. Defaults: RocksDB's (`period` 10 s, `low_pct`
/// 50, `high_pct` 90, `step_pct` 5, `divisor` 20); the limiter starts at `max / 2`.
///
/// # Examples
///
/// ```
/// use limitcore::AutoTune;
/// use std::time::Duration;
///
/// let tune = AutoTune::default();
/// let max = 100 << 20; // 100 MiB/s
/// // Busy 95 % of a period: 5 % faster; busy 30 %: 5 % slower; idle: a twentieth of max.
/// assert_eq!(tune.next_rate(50 << 20, max, Duration::from_millis(9_500), Duration::from_secs(10)), 55_050_240);
/// assert_eq!(tune.next_rate(50 << 20, max, Duration::from_secs(3), Duration::from_secs(10)), 49_932_190);
/// assert_eq!(tune.next_rate(50 << 20, max, Duration::ZERO, Duration::from_secs(10)), max / 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AutoTune {
    /// How often the rate is retuned.
    pub period: Duration,
    /// Below this busy share (percent) the rate falls a step.
    pub low_pct: u32,
    /// Above this busy share (percent) the rate rises a step.
    pub high_pct: u32,
    /// One step, percent.
    pub step_pct: u32,
    /// The floor is `max / divisor`.
    pub divisor: u32,
}

impl Default for AutoTune {
    /// RocksDB's: 10 s, 50 %, 90 %, 5 %, a twentieth.
    fn default() -> Self {
        AutoTune {
            period: Duration::from_secs(10),
            low_pct: 50,
            high_pct: 90,
            step_pct: 5,
            divisor: 20,
        }
    }
}

impl AutoTune {
    /// Check the rule: a non-zero period, a divisor of at least 1, `low ≤ high ≤ 100`.
    pub(crate) fn check(&self) -> Result<(), LanesConfigError> {
        if self.period.is_zero()
            || self.divisor == 0
            || self.low_pct > self.high_pct
            || self.high_pct > 100
        {
            return Err(LanesConfigError::AutoTune);
        }
        Ok(())
    }

    /// The floor of the tuned rate: `max / divisor`, at least 1.
    pub fn floor(&self, max: u64) -> u64 {
        (max / u64::from(self.divisor.max(1))).max(1)
    }

    /// The rate after a period of length `period` during which requests waited for `busy`
    /// of it, from `rate`, under the maximum `max` (see the type). Pure; never below the
    /// floor or above `max`.
    pub fn next_rate(&self, rate: u64, max: u64, busy: Duration, period: Duration) -> u64 {
        let floor = self.floor(max);
        let (busy, period) = (
            u128::from(duration_to_nanos(busy)),
            u128::from(duration_to_nanos(period)).max(1),
        );
        let rate = u128::from(rate);
        let step = 100 + u128::from(self.step_pct);
        let next = if busy == 0 {
            u128::from(floor)
        } else if busy * 100 < u128::from(self.low_pct) * period {
            rate * 100 / step
        } else if busy * 100 > u128::from(self.high_pct) * period {
            rate * step / 100
        } else {
            rate
        };
        u64::try_from(next)
            .unwrap_or(u64::MAX)
            .clamp(floor, max.max(floor))
    }
}

/// The busy-share measure of one limiter (see the module), at explicit times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tuner {
    pub(crate) rule: AutoTune,
    /// When the current period started.
    since: Nanos,
    /// Busy time of the current period before `busy_from`.
    busy: Nanos,
    /// When the queue last became non-empty, while it is.
    busy_from: Option<Nanos>,
}

impl Tuner {
    /// A measure starting at `now`.
    pub(crate) fn new(rule: AutoTune, now: Nanos) -> Tuner {
        Tuner {
            rule,
            since: now,
            busy: 0,
            busy_from: None,
        }
    }

    /// Whether requests wait, as of `now` (called at every change; repeats are no-ops).
    pub(crate) fn waiting(&mut self, waiting: bool, now: Nanos) {
        match (self.busy_from, waiting) {
            (None, true) => self.busy_from = Some(now.max(self.since)),
            (Some(from), false) => {
                self.busy += now.saturating_sub(from);
                self.busy_from = None;
            }
            _ => {}
        }
    }

    /// When the current period ends.
    pub(crate) fn due(&self) -> Nanos {
        self.since
            .saturating_add(duration_to_nanos(self.rule.period))
    }

    /// End the period at `now` (at or after [`Tuner::due`]): the rate it leads to from
    /// `rate` under `max`; the next period starts at `now`.
    pub(crate) fn retune(&mut self, rate: u64, max: u64, now: Nanos) -> u64 {
        let mut busy = self.busy;
        if let Some(from) = self.busy_from {
            busy += now.saturating_sub(from);
            self.busy_from = Some(now);
        }
        let period = now.saturating_sub(self.since);
        self.since = now;
        self.busy = 0;
        self.rule.next_rate(
            rate,
            max,
            Duration::from_nanos(busy.min(period)),
            Duration::from_nanos(period),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn rocksdb_rule_at_the_thresholds() {
        let t = AutoTune::default();
        let p = Duration::from_secs(10);
        let max = 1_000_000;
        let at = |pct: u64| t.next_rate(500_000, max, p * pct as u32 / 100, p);
        assert_eq!(at(90), 500_000); // not above 90 %: kept
        assert_eq!(at(91), 525_000);
        assert_eq!(at(50), 500_000); // not below 50 %: kept
        assert_eq!(at(49), 476_190);
        assert_eq!(at(0), 50_000); // nobody waited: the floor
                                   // Bounded both ways.
        assert_eq!(t.next_rate(990_000, max, p, p), max);
        assert_eq!(t.next_rate(51_000, max, p / 10, p), 50_000);
    }

    #[test]
    fn the_tuner_measures_waiting_time_exactly_across_periods() {
        let mut tuner = Tuner::new(AutoTune::default(), 0);
        assert_eq!(tuner.due(), 10 * S);
        // Waiting 2 s to 4 s, then from 7 s past the period's end.
        tuner.waiting(true, 2 * S);
        tuner.waiting(true, 3 * S); // a repeat changes nothing
        tuner.waiting(false, 4 * S);
        tuner.waiting(true, 7 * S);
        // Busy 2 + 3 = 5 s of 10: kept.
        assert_eq!(tuner.retune(1_000, 2_000, 10 * S), 1_000);
        // Still waiting through the whole next period: 100 % busy, a step up.
        assert_eq!(tuner.due(), 20 * S);
        assert_eq!(tuner.retune(1_000, 2_000, 20 * S), 1_050);
        // Then nobody waits: the floor.
        tuner.waiting(false, 20 * S);
        assert_eq!(tuner.retune(1_050, 2_000, 30 * S), 100);
    }
}
