//! Windowed sampling: how an adaptive limit turns the outcomes of single requests
//! ([`Observation`]) into the [`Sample`]s its rule decides on ([`Window`]), after Netflix
//! concurrency-limits' `WindowedLimit` and its sample windows, and Envoy's
//! adaptive-concurrency sample and minRTT windows.

use super::error::LimitError;
use crate::clock::{duration_to_nanos, Nanos};
use alloc::vec::Vec;
use core::time::Duration;

/// One request's outcome, as an adaptive limit records it.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::Observation;
///
/// // Granted at 1 ms with 3 in flight, succeeded at 13 ms: a latency of 12 ms.
/// let o = Observation { start: 1_000_000, end: 13_000_000, in_flight: 3, dropped: false };
/// assert_eq!(o.end - o.start, 12_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// When its permits were granted (ns, the limit's clock).
    pub start: Nanos,
    /// When it ended (ns, the limit's clock; its latency is `end − start`).
    pub end: Nanos,
    /// Permits in flight just after the grant, its own included.
    pub in_flight: u32,
    /// Whether it was dropped ([`Completion::Dropped`](super::Completion::Dropped)).
    pub dropped: bool,
}

/// What a closed window hands an adaptive rule: Netflix's `onSample(startTime, rtt,
/// inflight, didDrop)` with the window's aggregates.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::Sample;
///
/// // One request of 10 ms, 12 in flight, not dropped: what a per-request window delivers.
/// let s = Sample::new(10_000_000, 12, false);
/// assert_eq!((s.rtt, s.min_rtt, s.count), (10_000_000, 10_000_000, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The window's RTT, ns: the average or the percentile of its requests' latencies
    /// ([`Aggregate`]).
    pub rtt: Nanos,
    /// The window's smallest latency, ns.
    pub min_rtt: Nanos,
    /// The most permits in flight any of its requests started under.
    pub in_flight: u32,
    /// Whether any of its requests was dropped.
    pub dropped: bool,
    /// How many requests it holds.
    pub count: u32,
    /// When it closed (ns, the limit's clock).
    pub at: Nanos,
}

impl Sample {
    /// The sample of one request: `rtt` ns, `in_flight` permits at its start, `dropped`;
    /// closed at time 0.
    pub const fn new(rtt: Nanos, in_flight: u32, dropped: bool) -> Self {
        Sample {
            rtt,
            min_rtt: rtt,
            in_flight,
            dropped,
            count: 1,
            at: 0,
        }
    }

    /// The same sample, closed at `at` ns.
    pub const fn at(mut self, at: Nanos) -> Self {
        self.at = at;
        self
    }
}

/// How a window summarises its requests' latencies into [`Sample::rtt`].
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Aggregate, Window};
///
/// // Netflix's windows, summarised by their 90th percentile.
/// let window = Window::netflix().with_aggregate(Aggregate::Percentile(0.9))?;
/// assert_eq!(window.aggregate(), Aggregate::Percentile(0.9));
/// assert!(Window::netflix().with_aggregate(Aggregate::Percentile(0.0)).is_err());
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Aggregate {
    /// The mean (Netflix's `AverageSampleWindow`, its default).
    Average,
    /// The `p`-th percentile, `0 < p ≤ 1`, of the first [`Window::PERCENTILE_CAPACITY`]
    /// latencies: the `round(count·p)`-th smallest (Netflix's `PercentileSampleWindow`;
    /// Envoy aggregates its windows at p50).
    Percentile(f64),
}

/// When a window of observations closes and whether it becomes a [`Sample`].
///
/// A window opens at its first observation and lasts `clamp(2 × the previous window's
/// smallest latency, min_time, max_time)` (Netflix's `WindowedLimit`: with its defaults,
/// 1 s); it also closes as soon as it holds `close_after` observations (Envoy's minRTT
/// window). A closed window becomes a sample only if it holds at least `min_samples`.
/// Observations faster than `min_rtt` or of requests granted before `since` are not
/// counted.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Aggregate, Window};
/// use std::time::Duration;
///
/// let w = Window::per_request();            // every outcome is a sample (the default)
/// assert_eq!(w.close_after(), 1);
/// let w = Window::netflix()                  // Netflix's WindowedLimit defaults
///     .with_duration(Duration::from_millis(500), Duration::from_secs(2))?
///     .with_aggregate(Aggregate::Percentile(0.9))?;
/// assert_eq!((w.min_samples(), w.min_time(), w.max_time()), (10, 500_000_000, 2_000_000_000));
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    min_time: Nanos,
    max_time: Nanos,
    min_samples: u32,
    close_after: u32,
    aggregate: Aggregate,
    min_rtt: Nanos,
    since: Nanos,
}

impl Window {
    /// How many latencies a percentile window keeps (the rest of a window's requests still
    /// count toward its count, minimum, in-flight and drop flag).
    pub const PERCENTILE_CAPACITY: usize = 1024;

    /// Every observation is a sample of its own: a rule updates on each request (Netflix's
    /// limits without `WindowedLimit`, the default of the Netflix rules here).
    pub const fn per_request() -> Self {
        Window {
            min_time: 0,
            max_time: 0,
            min_samples: 1,
            close_after: 1,
            aggregate: Aggregate::Average,
            min_rtt: 0,
            since: 0,
        }
    }

    /// Netflix's `WindowedLimit` defaults: windows of 1 s, delivered with at least 10
    /// observations, averaged, ignoring latencies under 100 µs.
    pub const fn netflix() -> Self {
        Window {
            min_time: 1_000_000_000,
            max_time: 1_000_000_000,
            min_samples: 10,
            close_after: u32::MAX,
            aggregate: Aggregate::Average,
            min_rtt: 100_000,
            since: 0,
        }
    }

    /// Windows of exactly `every` (Envoy's `concurrency_update_interval`), delivered with at
    /// least one observation, aggregated by `aggregate`.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] for a percentile outside `(0, 1]` (as
    /// [`Window::with_aggregate`]).
    pub fn every(every: Duration, aggregate: Aggregate) -> Result<Self, LimitError> {
        Window::per_request()
            .with_duration(every, every)
            .map(|w| w.with_min_samples(1).with_close_after(u32::MAX))?
            .with_aggregate(aggregate)
    }

    /// Windows last `clamp(2 × the previous window's smallest latency, min, max)`.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] if `min > max`.
    pub fn with_duration(mut self, min: Duration, max: Duration) -> Result<Self, LimitError> {
        if min > max {
            return Err(LimitError::Parameter {
                name: "window duration",
                value: min.as_secs_f64(),
                expected: "a minimum at most the maximum",
            });
        }
        self.min_time = duration_to_nanos(min);
        self.max_time = duration_to_nanos(max);
        Ok(self)
    }

    /// A window becomes a sample only with at least `n` observations (0 is taken as 1).
    pub const fn with_min_samples(mut self, n: u32) -> Self {
        self.min_samples = if n == 0 { 1 } else { n };
        self
    }

    /// A window closes as soon as it holds `n` observations (`u32::MAX`: only by time; 0 is
    /// taken as 1).
    pub const fn with_close_after(mut self, n: u32) -> Self {
        self.close_after = if n == 0 { 1 } else { n };
        self
    }

    /// How the latencies are summarised.
    ///
    /// # Errors
    ///
    /// [`LimitError::Parameter`] for a percentile outside `(0, 1]`.
    pub fn with_aggregate(mut self, aggregate: Aggregate) -> Result<Self, LimitError> {
        if let Aggregate::Percentile(p) = aggregate {
            if !(p > 0.0 && p <= 1.0) {
                return Err(LimitError::Parameter {
                    name: "percentile",
                    value: p,
                    expected: "0 < p ≤ 1",
                });
            }
        }
        self.aggregate = aggregate;
        Ok(self)
    }

    /// Observations faster than `min` are not counted (Netflix's `minRttThreshold`).
    pub fn with_min_rtt(mut self, min: Duration) -> Self {
        self.min_rtt = duration_to_nanos(min);
        self
    }

    /// Observations of requests granted before `since` ns are not counted (Envoy ignores
    /// requests that started before its current minRTT measurement).
    pub const fn since(mut self, since: Nanos) -> Self {
        self.since = since;
        self
    }

    /// The shortest window, ns.
    pub const fn min_time(&self) -> Nanos {
        self.min_time
    }

    /// The longest window, ns.
    pub const fn max_time(&self) -> Nanos {
        self.max_time
    }

    /// Observations a window needs to become a sample.
    pub const fn min_samples(&self) -> u32 {
        self.min_samples
    }

    /// Observations after which a window closes at once.
    pub const fn close_after(&self) -> u32 {
        self.close_after
    }

    /// How latencies are summarised.
    pub const fn aggregate(&self) -> Aggregate {
        self.aggregate
    }

    /// The window's length after one whose smallest latency was `candidate` ns.
    fn length(&self, candidate: Nanos) -> Nanos {
        candidate
            .saturating_mul(2)
            .clamp(self.min_time, self.max_time)
    }
}

/// A window that closed: its sample, and whether it had enough observations to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed {
    pub(crate) sample: Sample,
    pub(crate) ready: bool,
}

/// The open window's accumulators (a pure value: the adaptive shell keeps it under its lock).
#[derive(Debug, Clone, Default)]
pub(crate) struct Collector {
    /// When the open window closes; `None` until an observation opens it.
    due: Option<Nanos>,
    count: u32,
    sum: u128,
    min_rtt: Nanos,
    max_in_flight: u32,
    dropped: bool,
    rtts: Vec<Nanos>,
}

impl Collector {
    /// Count `o` in the open window (opening it if none is), and close the window if it is
    /// due. The caller then reopens it ([`Collector::reopen`]) under the window its rule
    /// asks for next.
    pub(crate) fn add(&mut self, window: &Window, o: Observation) -> Option<Closed> {
        let rtt = o.end.saturating_sub(o.start);
        if rtt < window.min_rtt || o.start < window.since {
            return None;
        }
        let due = *self
            .due
            .get_or_insert_with(|| o.end.saturating_add(window.length(rtt)));
        if self.count == 0 {
            self.min_rtt = rtt;
        }
        self.count = self.count.saturating_add(1);
        self.sum += u128::from(rtt);
        self.min_rtt = self.min_rtt.min(rtt);
        self.max_in_flight = self.max_in_flight.max(o.in_flight);
        self.dropped |= o.dropped;
        if matches!(window.aggregate, Aggregate::Percentile(_))
            && self.rtts.len() < Window::PERCENTILE_CAPACITY
        {
            self.rtts.push(rtt);
        }
        if self.count < window.close_after && o.end < due {
            return None;
        }
        let sample = Sample {
            rtt: self.tracked(window.aggregate),
            min_rtt: self.min_rtt,
            in_flight: self.max_in_flight,
            dropped: self.dropped,
            count: self.count,
            at: o.end,
        };
        let ready = self.count >= window.min_samples;
        *self = Collector {
            rtts: core::mem::take(&mut self.rtts),
            ..Collector::default()
        };
        self.rtts.clear();
        Some(Closed { sample, ready })
    }

    /// Open the next window at `at`, after one whose smallest latency was `candidate`.
    pub(crate) fn reopen(&mut self, window: &Window, at: Nanos, candidate: Nanos) {
        self.due = Some(at.saturating_add(window.length(candidate)));
    }

    /// The window's RTT.
    fn tracked(&mut self, aggregate: Aggregate) -> Nanos {
        match aggregate {
            // ≤ the largest latency: fits.
            Aggregate::Average => (self.sum / u128::from(self.count.max(1))) as Nanos,
            Aggregate::Percentile(p) => {
                self.rtts.sort_unstable();
                let len = self.rtts.len();
                // Netflix's index: round(count·p), 1-based.
                let rank = ((len as f64 * p).round() as usize).clamp(1, len.max(1));
                self.rtts.get(rank - 1).copied().unwrap_or(self.min_rtt)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(start: Nanos, rtt: Nanos, in_flight: u32, dropped: bool) -> Observation {
        Observation {
            start,
            end: start + rtt,
            in_flight,
            dropped,
        }
    }

    #[test]
    fn per_request_windows_deliver_every_observation() {
        let w = Window::per_request();
        let mut c = Collector::default();
        let closed = c.add(&w, obs(0, 5, 3, false)).unwrap();
        assert!(closed.ready);
        assert_eq!(closed.sample, Sample::new(5, 3, false).at(5));
        c.reopen(&w, 5, 5);
        let closed = c.add(&w, obs(1, 7, 9, true)).unwrap();
        assert_eq!(closed.sample, Sample::new(7, 9, true).at(8));
    }

    #[test]
    fn a_timed_window_averages_and_needs_its_minimum() {
        let w = Window::netflix().with_min_rtt(Duration::ZERO);
        let mut c = Collector::default();
        // Opens at 10 ms with length clamp(2·10 ms, 1 s, 1 s) = 1 s: due at 1.01 s.
        for i in 0..9u64 {
            assert!(c.add(&w, obs(i, 10_000_000, i as u32, i == 4)).is_none());
        }
        // The tenth lands after the due time: closed, 10 observations, ready.
        let closed = c.add(&w, obs(1_000_000_000, 40_000_000, 2, false)).unwrap();
        assert!(closed.ready);
        assert_eq!(closed.sample.count, 10);
        assert_eq!(closed.sample.rtt, (9 * 10_000_000 + 40_000_000) / 10);
        assert_eq!(closed.sample.min_rtt, 10_000_000);
        assert_eq!(closed.sample.in_flight, 8);
        assert!(closed.sample.dropped);
        // A window with too few observations closes without counting.
        c.reopen(&w, closed.sample.at, closed.sample.min_rtt);
        let thin = c.add(&w, obs(3_000_000_000, 1_000_000, 1, false)).unwrap();
        assert!(!thin.ready);
    }

    #[test]
    fn percentiles_follow_netflix_rank() {
        let w = Window::every(Duration::from_secs(1), Aggregate::Percentile(0.5)).unwrap();
        let mut c = Collector::default();
        for rtt in [50, 10, 40, 20] {
            assert!(c.add(&w, obs(0, rtt, 1, false)).is_none());
        }
        // round(5·0.5) = 3rd smallest of 10, 20, 30, 40, 50.
        let closed = c.add(&w, obs(2_000_000_000, 30, 1, false)).unwrap();
        assert_eq!(closed.sample.rtt, 30);
    }

    #[test]
    fn filters_drop_fast_and_stale_observations() {
        let w = Window::per_request()
            .with_min_rtt(Duration::from_nanos(10))
            .since(100);
        let mut c = Collector::default();
        assert!(
            c.add(&w, obs(200, 9, 1, false)).is_none(),
            "faster than min_rtt"
        );
        assert!(
            c.add(&w, obs(99, 50, 1, false)).is_none(),
            "granted before since"
        );
        assert!(c.add(&w, obs(100, 10, 1, false)).is_some());
    }

    #[test]
    fn count_windows_close_at_their_count() {
        let w = Window::per_request()
            .with_duration(Duration::MAX, Duration::MAX)
            .unwrap()
            .with_close_after(3);
        let mut c = Collector::default();
        assert!(c.add(&w, obs(0, 1, 1, false)).is_none());
        assert!(c.add(&w, obs(0, 2, 1, false)).is_none());
        assert_eq!(c.add(&w, obs(0, 3, 1, false)).unwrap().sample.count, 3);
        assert!(Window::netflix()
            .with_aggregate(Aggregate::Percentile(1.5))
            .is_err());
        assert!(Window::netflix()
            .with_duration(Duration::from_secs(2), Duration::from_secs(1))
            .is_err());
    }
}
