//! [`Quota`]: how many permits per period, and how many at once.

use crate::clock::Nanos;
use alloc::string::{String, ToString};
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

/// A rate limit: `count` permits per `period`, of which up to `burst` may be taken at once.
///
/// The *emission interval* (GCRA's *T*) is `period / count`, rounded **up** to whole
/// nanoseconds, so a limiter never admits more than `count` per `period` in the long run
/// (for example `3/500ms` has an interval of 166 666 667 ns). The *burst* (default `count`)
/// is how many permits a full limiter admits at once; GCRA's tolerance *τ* is
/// `(burst − 1) × interval`.
///
/// # Limits
///
/// Every constructor checks them and returns [`QuotaError`] instead of rounding silently:
/// - `count ≥ 1`, `burst ≥ 1`, `period > 0`;
/// - `period ≤ u64::MAX` ns (about 584 years);
/// - the interval must be at least 1 ns: `period ≥ count` ns (`1_000_000_000/s` is the
///   fastest whole rate; `2_000_000_000/s` is refused);
/// - a full burst must refill within [`Quota::MAX_BURST_SPAN_NS`]: `burst × interval ≤ 2^62` ns
///   (for example `1/d` allows a burst of up to 53 375).
///
/// # Text form
///
/// `COUNT/[N]UNIT[ burst B]`, where `UNIT` is one of `ns`, `us` (or `µs`), `ms`, `s`,
/// `min`, `h`, `d`, `N` is an optional whole multiplier, and the optional suffix sets the
/// burst. Spaces around the parts are allowed. [`Display`](fmt::Display) prints this form
/// with the largest unit that is exact, and it parses back to an equal `Quota`.
///
/// # Examples
///
/// ```
/// use limitcore::Quota;
/// use std::time::Duration;
///
/// let q: Quota = "3/500ms".parse()?;
/// assert_eq!(q, Quota::new(3, Duration::from_millis(500))?);
/// assert_eq!(q.emission_interval(), Duration::from_nanos(166_666_667));
///
/// let api = Quota::per_second(100)?.with_burst(20)?;
/// assert_eq!(api.to_string(), "100/s burst 20");
/// assert_eq!(api.to_string().parse::<Quota>()?, api);
///
/// assert!("0/s".parse::<Quota>().is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u32,
    burst: u32,
    period: Nanos,
    interval: Nanos,
}

impl Quota {
    /// The largest time a full burst may take to refill: `burst × emission interval ≤ 2^62
    /// ns` (about 146 years). It keeps every sum of a time and a burst's worth of intervals
    /// inside `u64` for the first 438 years of a clock, and beyond that the sums are checked.
    pub const MAX_BURST_SPAN_NS: Nanos = 1 << 62;

    /// `count` permits per `period`, burst `count`.
    ///
    /// # Errors
    ///
    /// [`QuotaError`] if `count` or `period` is zero, `period` exceeds `u64::MAX` ns, the
    /// rate is faster than one permit per nanosecond, or the burst would take longer than
    /// [`Quota::MAX_BURST_SPAN_NS`] to refill.
    pub fn new(count: u32, period: Duration) -> Result<Quota, QuotaError> {
        let period = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLarge)?;
        Quota::from_parts(count, period, count)
    }

    /// `count` permits per `period` with `burst` at once, in one step: the way to build a
    /// quota whose default burst (`count`) would be too large for the 64-bit state but whose
    /// own burst is not (for example 4 per 200 000 days with burst 1).
    ///
    /// # Errors
    ///
    /// As [`Quota::new`] and [`Quota::with_burst`].
    pub fn new_with_burst(count: u32, period: Duration, burst: u32) -> Result<Quota, QuotaError> {
        let period = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLarge)?;
        Quota::from_parts(count, period, burst)
    }

    /// `count` permits per second (burst `count`).
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_second(count: u32) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(1))
    }

    /// `count` permits per minute (burst `count`).
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_minute(count: u32) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(60))
    }

    /// `count` permits per hour (burst `count`).
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_hour(count: u32) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// `count` permits per day of 86 400 s (burst `count`).
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_day(count: u32) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(86_400))
    }

    /// The same rate with `burst` permits available at once.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroBurst`] for 0; [`QuotaError::BurstTooLarge`] if the burst would
    /// take longer than [`Quota::MAX_BURST_SPAN_NS`] to refill.
    pub fn with_burst(self, burst: u32) -> Result<Quota, QuotaError> {
        Quota::from_parts(self.count, self.period, burst)
    }

    /// The one validating constructor every other one goes through.
    fn from_parts(count: u32, period: Nanos, burst: u32) -> Result<Quota, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        if period == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        if period < u64::from(count) {
            return Err(QuotaError::RateTooFast {
                count,
                period_ns: period,
            });
        }
        let interval = period.div_ceil(u64::from(count));
        let span = u128::from(interval) * u128::from(burst);
        if span > u128::from(Quota::MAX_BURST_SPAN_NS) {
            return Err(QuotaError::BurstTooLarge {
                burst,
                span_ns: span,
                max_span_ns: Quota::MAX_BURST_SPAN_NS,
            });
        }
        Ok(Quota {
            count,
            burst,
            period,
            interval,
        })
    }

    /// Permits per period.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The burst: permits a full limiter admits at once.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The emission interval `period / count`, rounded up to whole nanoseconds.
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// GCRA's tolerance τ = `(burst − 1) × emission interval`: how far ahead of schedule a
    /// conforming request may be.
    pub fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.burst_span_ns() - self.interval)
    }

    /// The period in nanoseconds.
    pub fn period_ns(&self) -> Nanos {
        self.period
    }

    /// The emission interval in nanoseconds (≥ 1).
    pub fn emission_interval_ns(&self) -> Nanos {
        self.interval
    }

    /// `burst × emission interval` in nanoseconds: how long an empty limiter takes to fill
    /// (≤ [`Quota::MAX_BURST_SPAN_NS`]).
    pub fn burst_span_ns(&self) -> Nanos {
        // Cannot overflow: checked against Quota::MAX_BURST_SPAN_NS at construction.
        self.interval * u64::from(self.burst)
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("count", &self.count)
            .field("period", &self.period())
            .field("burst", &self.burst)
            .field("emission_interval", &self.emission_interval())
            .finish()
    }
}

/// Units of the text form, largest first (the order `Display` tries them in).
const UNITS: [(&str, Nanos); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("min", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `ns` divides everything, so a unit is always found.
        let (unit, size) = UNITS
            .iter()
            .copied()
            .find(|&(_, size)| self.period % size == 0)
            .unwrap_or(("ns", 1));
        let n = self.period / size;
        if n == 1 {
            write!(f, "{}/{}", self.count, unit)?;
        } else {
            write!(f, "{}/{}{}", self.count, n, unit)?;
        }
        if self.burst != self.count {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

impl FromStr for Quota {
    type Err = QuotaError;

    /// Parse the text form described on [`Quota`].
    fn from_str(input: &str) -> Result<Quota, QuotaError> {
        let syntax = |reason: &'static str| QuotaError::Syntax {
            input: input.to_string(),
            reason,
        };
        let (rate, burst) = match input.find("burst") {
            Some(at) => (&input[..at], Some(input[at + "burst".len()..].trim())),
            None => (input, None),
        };
        let (count, period) = rate
            .split_once('/')
            .ok_or_else(|| syntax("expected COUNT/PERIOD, for example \"100/s\""))?;
        let count: u32 = parse_whole(count.trim())
            .ok_or_else(|| syntax("the count must be a whole number from 0 to 4294967295"))?;
        let period = period.trim();
        let digits = period.bytes().take_while(u8::is_ascii_digit).count();
        let (multiplier, unit) = period.split_at(digits);
        let multiplier: u64 = if multiplier.is_empty() {
            1
        } else {
            parse_whole(multiplier).ok_or_else(|| syntax("the period multiplier is too large"))?
        };
        let unit = match unit.trim() {
            "µs" => "us",
            other => other,
        };
        let size = UNITS
            .iter()
            .find(|&&(name, _)| name == unit)
            .map(|&(_, size)| size)
            .ok_or_else(|| syntax("unknown unit: use ns, us, µs, ms, s, min, h or d"))?;
        let period = multiplier
            .checked_mul(size)
            .ok_or(QuotaError::PeriodTooLarge)?;
        let burst = match burst {
            Some(b) => parse_whole(b.trim_start_matches('=').trim())
                .ok_or_else(|| syntax("the burst must be a whole number from 0 to 4294967295"))?,
            None => count,
        };
        Quota::from_parts(count, period, burst)
    }
}

/// A whole decimal number with no sign, or `None`.
fn parse_whole<T: FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Why a [`Quota`] (or a limiter built from one) was refused.
///
/// Each variant names one limit from the list on [`Quota`]; the message says which and
/// with what numbers.
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, QuotaError};
/// assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
/// let e = "10/fortnight".parse::<Quota>().unwrap_err();
/// assert!(e.to_string().contains("unknown unit"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The count was 0: a limiter that never admits is not a rate.
    ZeroCount,
    /// The period was 0.
    ZeroPeriod,
    /// The burst was 0: no request could ever be admitted.
    ZeroBurst,
    /// More than one permit per nanosecond: the emission interval would be below 1 ns.
    RateTooFast {
        /// The requested count.
        count: u32,
        /// The requested period in nanoseconds.
        period_ns: Nanos,
    },
    /// The period is longer than `u64::MAX` nanoseconds (about 584 years).
    PeriodTooLarge,
    /// A full burst would take longer to refill than the limiter's 64-bit state holds.
    BurstTooLarge {
        /// The requested burst.
        burst: u32,
        /// `burst × emission interval`, in nanoseconds.
        span_ns: u128,
        /// The most this limiter can hold, in nanoseconds.
        max_span_ns: Nanos,
    },
    /// A fixed window shorter than `2^(bit length of count)` ns: its window number and count
    /// share one 64-bit word, and the window number would not fit (only quotas faster than
    /// one permit per 2 ns are refused).
    WindowTooShort {
        /// The requested period in nanoseconds.
        period_ns: Nanos,
        /// The shortest window this count allows, in nanoseconds.
        min_period_ns: Nanos,
    },
    /// A count larger than the limiter can hold (a sliding log keeps one entry per permit).
    CountTooLarge {
        /// The requested count.
        count: u32,
        /// The largest count this limiter accepts.
        max: u32,
    },
    /// A `KeyedSketch` (count-min sketch) of unusable dimensions: a width outside
    /// `1..=MAX_SKETCH_WIDTH` (2^30), a depth outside `1..=MAX_SKETCH_DEPTH` (16), or cells
    /// (`width × depth × 8` bytes, the width rounded up to a power of two) that could not be
    /// allocated.
    SketchSize {
        /// The requested width (cells per row).
        width: usize,
        /// The requested depth (rows).
        depth: usize,
    },
    /// A burst on a quota for an algorithm that has none: the window limiters (fixed window,
    /// sliding window, sliding log, count-min sketch, throttler) admit `count` per window,
    /// so a burst other than the count would be silently ignored; it is refused instead.
    /// Give such a limiter the quota without a burst (`"100/s"`, not `"100/s burst 10"`).
    BurstNotSupported {
        /// The algorithm, by its name in [`Algorithm`](crate::Algorithm)'s text form.
        algorithm: &'static str,
        /// The quota's count.
        count: u32,
        /// The quota's burst.
        burst: u32,
    },
    /// The text form could not be parsed.
    Syntax {
        /// What was given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::ZeroCount => f.write_str("invalid quota: the count is 0"),
            QuotaError::ZeroPeriod => f.write_str("invalid quota: the period is 0"),
            QuotaError::ZeroBurst => f.write_str("invalid quota: the burst is 0"),
            QuotaError::RateTooFast { count, period_ns } => write!(
                f,
                "invalid quota: {count} per {period_ns} ns is faster than one permit per nanosecond"
            ),
            QuotaError::PeriodTooLarge => {
                f.write_str("invalid quota: the period is longer than 2^64 - 1 nanoseconds")
            }
            QuotaError::BurstTooLarge {
                burst,
                span_ns,
                max_span_ns,
            } => write!(
                f,
                "invalid quota: a burst of {burst} takes {span_ns} ns to refill, more than the \
                 {max_span_ns} ns the 64-bit state can hold"
            ),
            QuotaError::WindowTooShort {
                period_ns,
                min_period_ns,
            } => write!(
                f,
                "invalid quota: a window of {period_ns} ns is too short for this count; the \
                 window number and count share 64 bits, which needs at least {min_period_ns} ns"
            ),
            QuotaError::CountTooLarge { count, max } => write!(
                f,
                "invalid quota: a count of {count} is more than this limiter's maximum of {max}"
            ),
            QuotaError::SketchSize { width, depth } => write!(
                f,
                "invalid sketch size: width {width} x depth {depth}; the width must be 1 to \
                 2^30 and the depth 1 to 16, and width (rounded up to a power of two) x depth \
                 x 8 bytes must be allocatable"
            ),
            QuotaError::BurstNotSupported {
                algorithm,
                count,
                burst,
            } => write!(
                f,
                "invalid quota for {algorithm}: a burst of {burst} with a count of {count}; a \
                 window admits its count per window and has no burst of its own (leave the \
                 burst out, or use gcra, token-bucket or leaky-bucket)"
            ),
            QuotaError::Syntax { input, reason } => {
                write!(f, "invalid quota {input:?}: {reason}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for QuotaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_examples_parse() {
        let cases = [
            ("100/s", 100, 1_000_000_000),
            ("6/min", 6, 60_000_000_000),
            ("24/h", 24, 3_600_000_000_000),
            ("10000/d", 10_000, 86_400_000_000_000),
            ("3/500ms", 3, 500_000_000),
            ("5/µs", 5, 1_000),
            (" 7 / 2 s ", 7, 2_000_000_000),
        ];
        for (text, count, period) in cases {
            let q: Quota = text.parse().unwrap();
            assert_eq!(
                (q.count(), q.period_ns(), q.burst()),
                (count, period, count),
                "{text}"
            );
        }
        let q: Quota = "100/s burst 250".parse().unwrap();
        assert_eq!(q.burst(), 250);
        let q: Quota = "100/s burst=3".parse().unwrap();
        assert_eq!(q.burst(), 3);
    }

    #[test]
    fn display_round_trips_and_is_minimal() {
        assert_eq!(Quota::per_minute(6).unwrap().to_string(), "6/min");
        assert_eq!(
            Quota::per_day(1)
                .unwrap()
                .with_burst(10)
                .unwrap()
                .to_string(),
            "1/d burst 10"
        );
        assert_eq!(
            Quota::new(3, Duration::from_millis(1500))
                .unwrap()
                .to_string(),
            "3/1500ms"
        );
        assert_eq!(
            Quota::new(1, Duration::from_nanos(7)).unwrap().to_string(),
            "1/7ns"
        );
    }

    #[test]
    fn each_limit_has_its_error() {
        assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
        assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(0),
            Err(QuotaError::ZeroBurst)
        );
        assert!(matches!(
            Quota::new(2_000_000_000, Duration::from_secs(1)),
            Err(QuotaError::RateTooFast { .. })
        ));
        assert!(Quota::new(1_000_000_000, Duration::from_secs(1)).is_ok());
        assert_eq!(
            Quota::new(1, Duration::MAX),
            Err(QuotaError::PeriodTooLarge)
        );
        assert!(matches!(
            Quota::per_day(1).unwrap().with_burst(u32::MAX),
            Err(QuotaError::BurstTooLarge { .. })
        ));
        // The documented largest burst of 1/d.
        assert!(Quota::per_day(1).unwrap().with_burst(53_375).is_ok());
        assert!(Quota::per_day(1).unwrap().with_burst(53_376).is_err());
        for bad in [
            "",
            "/s",
            "1/",
            "1/x",
            "-1/s",
            "1.5/s",
            "1/s burst",
            "1/s burst x",
            "99999999999/s",
        ] {
            let err = bad.parse::<Quota>().unwrap_err();
            assert!(
                matches!(err, QuotaError::Syntax { .. }),
                "{bad:?} gave {err:?}"
            );
        }
        assert_eq!(
            "1/99999999999999999d".parse::<Quota>(),
            Err(QuotaError::PeriodTooLarge)
        );
    }

    #[test]
    fn a_small_burst_makes_a_slow_quota_possible() {
        let parsed: Quota = "4/200000d burst 1".parse().unwrap();
        let period = Duration::from_secs(200_000 * 86_400);
        assert!(matches!(
            Quota::new(4, period),
            Err(QuotaError::BurstTooLarge { .. })
        ));
        assert_eq!(Quota::new_with_burst(4, period, 1), Ok(parsed));
    }

    #[test]
    fn interval_rounds_up_never_admitting_more() {
        let q = Quota::new(3, Duration::from_millis(500)).unwrap();
        assert_eq!(q.emission_interval_ns(), 166_666_667);
        assert!(q.emission_interval_ns() * 3 >= q.period_ns());
        assert_eq!(q.tolerance(), Duration::from_nanos(2 * 166_666_667));
    }
}
