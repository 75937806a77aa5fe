//! [`Quota`]: how many permits per period, and how many at once.

use crate::clock::Nanos;
use alloc::string::{String, ToString};
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

/// A rate limit: `count` permits per `period`, of which up to `burst` may be taken at once.
///
/// The *emission interval* (GCRA's *T*) is `period / count`. The limiters with a
/// nanosecond schedule ([`Gcra`](crate::Gcra), [`TokenBucket`](crate::TokenBucket),
/// [`LeakyBucket`](crate::LeakyBucket)) round it **up** to whole nanoseconds, so they never
/// admit more than `count` per `period` in the long run (for example `3/500ms` has an
/// interval of 166 666 667 ns), and refuse a quota faster than one permit per nanosecond
/// ([`QuotaError::RateTooFast`]); a [`Budget`](crate::Budget) keeps the exact rational
/// rate, for byte rates of up to [`Quota::MAX_COUNT`] units in any period. The *burst*
/// (default `count`) is how many permits a full limiter admits at once; GCRA's tolerance
/// *τ* is `(burst − 1) × interval`.
///
/// # Limits
///
/// Every constructor checks them and returns [`QuotaError`] instead of rounding silently:
/// - `count ≥ 1`, `burst ≥ 1`, `period > 0`;
/// - `period ≤ u64::MAX` ns (about 584 years);
/// - the rate `count / period`, in lowest terms, must have a numerator of at most
///   `u32::MAX` (so any count up to `u32::MAX`, and larger counts whose fraction reduces,
///   as `64GiB/s` = 2^27 per 1 953 125 ns does); RocksDB's `i64::MAX` bytes a second does
///   not reduce, and is refused ([`QuotaError::RateNotRepresentable`]);
/// - a burst is at most `u32::MAX` permits, so a count above it needs an explicit burst
///   ([`QuotaError::DefaultBurstTooLarge`]);
/// - a full burst must refill within [`Quota::MAX_BURST_SPAN_NS`]: `burst × interval ≤ 2^62` ns
///   (for example `1/d` allows a burst of up to 53 375).
///
/// # Text form
///
/// `COUNT/[N]UNIT[ burst B]`, where `UNIT` is one of `ns`, `us` (or `µs`), `ms`, `s`,
/// `min`, `h`, `d`, `N` is an optional whole multiplier, and the optional suffix sets the
/// burst. `COUNT` and `B` may carry a byte unit: `k`, `M`, `G`, `T` (10^3, 10^6, 10^9,
/// 10^12), `Ki`, `Mi`, `Gi`, `Ti` (2^10, 2^20, 2^30, 2^40), each with an optional `B`, or
/// a bare `B` (`"64MiB/s burst 1MiB"`, `"2GB/s burst 4MB"`). Spaces around the parts are
/// allowed. [`Display`](fmt::Display) prints the count and period as written, with the
/// largest time unit that is exact and no byte unit, and it parses back to an equal
/// `Quota`.
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
///
/// // Byte rates: 64 GiB/s is 2^36 bytes a second, kept exactly.
/// let disk: Quota = "64GiB/s burst 1MiB".parse()?;
/// assert_eq!(disk.count_as_written(), 64 << 30);
/// assert_eq!((disk.count(), disk.period_ns()), (1 << 27, 1_953_125)); // in lowest terms
/// assert_eq!(disk.to_string(), "68719476736/s burst 1048576");
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// The rate's numerator: the count as written, or in lowest terms if that is above
    /// `u32::MAX` (then `scale > 1`).
    count: u32,
    burst: u32,
    /// The rate's denominator, ns: the period as written divided by `scale`.
    period: Nanos,
    /// `ceil(period / count)`, at least 1 ns.
    interval: Nanos,
    /// The factor the written count and period were divided by (1: as written).
    scale: u64,
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
        Quota::from_parts(u64::from(count), period, Some(count))
    }

    /// The most units one quota's rate may have in lowest terms, and the largest burst:
    /// `u32::MAX`.
    pub const MAX_COUNT: u32 = u32::MAX;

    /// `count` units per `period` with `burst` at once, for counts above `u32::MAX` (byte
    /// rates: `Quota::new_u64(64 << 30, Duration::from_secs(1), 1 << 20)` is 64 GiB/s with a
    /// burst of 1 MiB). The rate is kept exactly, in lowest terms.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`], and [`QuotaError::RateNotRepresentable`] if `count / period` in
    /// lowest terms has a numerator above `u32::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, QuotaError};
    /// use std::time::Duration;
    ///
    /// let q = Quota::new_u64(64 << 30, Duration::from_secs(1), 1 << 20)?;
    /// assert_eq!(q.to_string(), "68719476736/s burst 1048576");
    /// // RocksDB's overflow case, i64::MAX bytes a second, has no such form: refused.
    /// assert!(matches!(
    ///     Quota::new_u64(i64::MAX as u64, Duration::from_secs(1), 1),
    ///     Err(QuotaError::RateNotRepresentable { .. })
    /// ));
    /// # Ok::<(), QuotaError>(())
    /// ```
    pub fn new_u64(count: u64, period: Duration, burst: u32) -> Result<Quota, QuotaError> {
        let period = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLarge)?;
        Quota::from_parts(count, period, Some(burst))
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
        Quota::from_parts(u64::from(count), period, Some(burst))
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
        Quota { burst, ..self }.checked()
    }

    /// The one validating constructor every other one goes through: `count` per `period`
    /// ns (as written), with `burst` (default: the count).
    fn from_parts(count: u64, period: Nanos, burst: Option<u32>) -> Result<Quota, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        if period == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        // As written when the count fits, so that `count()` and `period()` are what the
        // caller said; in lowest terms otherwise.
        let scale = if count > u64::from(u32::MAX) {
            gcd(count, period)
        } else {
            1
        };
        let Ok(reduced) = u32::try_from(count / scale) else {
            return Err(QuotaError::RateNotRepresentable {
                count,
                period_ns: period,
            });
        };
        let burst = match burst {
            Some(burst) => burst,
            None => u32::try_from(count).map_err(|_| QuotaError::DefaultBurstTooLarge { count })?,
        };
        Quota {
            count: reduced,
            burst,
            period: period / scale,
            interval: 0,
            scale,
        }
        .checked()
    }

    /// The checks of the burst against the rate, and the interval, for a quota whose rate is
    /// already valid.
    fn checked(self) -> Result<Quota, QuotaError> {
        let Quota {
            count,
            burst,
            period,
            ..
        } = self;
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
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
        Ok(Quota { interval, ..self })
    }

    /// Permits per period: the count as written, or, for a count above `u32::MAX`, the
    /// numerator of the rate in lowest terms (with [`Quota::period`] its denominator: the
    /// rate is always `count() / period()`).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The quota as four words (for a budget's configuration slots, which keep everything
    /// in atomics): count and burst, period, interval, scale.
    #[cfg(feature = "budget")]
    pub(crate) fn to_words(self) -> [u64; 4] {
        [
            u64::from(self.count) | u64::from(self.burst) << 32,
            self.period,
            self.interval,
            self.scale,
        ]
    }

    /// The quota of [`Quota::to_words`].
    #[cfg(feature = "budget")]
    pub(crate) fn from_words(words: [u64; 4]) -> Quota {
        Quota {
            count: words[0] as u32,
            burst: (words[0] >> 32) as u32,
            period: words[1],
            interval: words[2],
            scale: words[3],
        }
    }

    /// The count as written (above `u32::MAX` for a large byte rate).
    pub fn count_as_written(&self) -> u64 {
        u64::from(self.count) * self.scale
    }

    /// The period as written, in nanoseconds (with [`Quota::count_as_written`]).
    pub fn period_as_written_ns(&self) -> Nanos {
        self.period * self.scale
    }

    /// The period (the denominator of the rate with [`Quota::count`]; shorter than written
    /// for a count above `u32::MAX`, see [`Quota::count`]).
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// Whether the rate is faster than one permit per nanosecond (`period < count`): only a
    /// [`Budget`](crate::Budget) keeps such a rate; the limiters with a nanosecond
    /// schedule refuse it ([`Quota::whole_interval_ns`]).
    pub fn is_sub_nanosecond(&self) -> bool {
        self.period < u64::from(self.count)
    }

    /// Whether the count as written was above `u32::MAX`, so that the rate is kept in lowest
    /// terms ([`Quota::count`]): a window limiter, which counts the written count per
    /// written period, cannot take it.
    pub fn is_scaled(&self) -> bool {
        self.scale > 1
    }

    /// The emission interval in whole nanoseconds, for a limiter with a nanosecond schedule.
    ///
    /// # Errors
    ///
    /// [`QuotaError::RateTooFast`] if the rate is faster than one permit per nanosecond.
    pub fn whole_interval_ns(&self) -> Result<Nanos, QuotaError> {
        if self.is_sub_nanosecond() {
            Err(QuotaError::RateTooFast {
                count: self.count_as_written(),
                period_ns: self.period.saturating_mul(self.scale),
            })
        } else {
            Ok(self.interval)
        }
    }

    /// The burst: permits a full limiter admits at once (at least 1).
    #[inline]
    pub fn burst(&self) -> u32 {
        // Never 0 (the constructors refuse it), said to the compiler: the size check of a
        // request for one permit (`1 > capacity`) then folds away, and a refusal never
        // loads the burst (issue 36).
        self.burst.max(1)
    }

    /// The emission interval `period / count`, rounded up to whole nanoseconds (at least
    /// 1 ns: see [`Quota::whole_interval_ns`] for a rate faster than that).
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

    /// The emission interval in nanoseconds, rounded up (≥ 1; see
    /// [`Quota::whole_interval_ns`]).
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
        let mut d = f.debug_struct("Quota");
        d.field("count", &self.count)
            .field("period", &self.period())
            .field("burst", &self.burst)
            .field("emission_interval", &self.emission_interval());
        if self.scale > 1 {
            d.field("scale", &self.scale);
        }
        d.finish()
    }
}

/// The greatest common divisor (Euclid).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
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
        // As written: a scaled quota's count and period were both divided by `scale`, and
        // their product with it fits (it is what the caller gave).
        let (count, period) = (self.count_as_written(), self.period_as_written_ns());
        // `ns` divides everything, so a unit is always found.
        let (unit, size) = UNITS
            .iter()
            .copied()
            .find(|&(_, size)| period % size == 0)
            .unwrap_or(("ns", 1));
        let n = period / size;
        if n == 1 {
            write!(f, "{count}/{unit}")?;
        } else {
            write!(f, "{count}/{n}{unit}")?;
        }
        if u64::from(self.burst) != count {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

/// The byte units of the text form, with their sizes.
const AMOUNT_UNITS: [(&str, u64); 16] = [
    ("", 1),
    ("B", 1),
    ("k", 1_000),
    ("K", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("kB", 1_000),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
];

/// An amount of the text form: a whole number with an optional byte unit (`64MiB`), or
/// `None` if it is not one or does not fit `u64`.
fn parse_amount(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = s.split_at(digits);
    let unit = unit.trim();
    // `KiB` is `Ki` with a `B`.
    let unit = match unit.strip_suffix('B') {
        Some(binary) if binary.ends_with('i') => binary,
        _ => unit,
    };
    let size = AMOUNT_UNITS
        .iter()
        .find(|&&(name, _)| name == unit)
        .map(|&(_, size)| size)?;
    parse_whole::<u64>(number)?.checked_mul(size)
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
        let count: u64 = parse_amount(count.trim()).ok_or_else(|| {
            syntax("the count must be a whole number, with an optional byte unit (64MiB), up to 2^64 - 1")
        })?;
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
            Some(b) => Some(
                parse_amount(b.trim_start_matches('=').trim())
                    .and_then(|b| u32::try_from(b).ok())
                    .ok_or_else(|| {
                        syntax("the burst must be a whole number, with an optional byte unit (1MiB), up to 4294967295")
                    })?,
            ),
            None => None,
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
    /// More than one permit per nanosecond for a limiter whose schedule counts whole
    /// nanoseconds ([`Gcra`](crate::Gcra), [`TokenBucket`](crate::TokenBucket),
    /// [`LeakyBucket`](crate::LeakyBucket), the Redis scripts): the emission interval would
    /// be below 1 ns. A [`Budget`](crate::Budget) takes such a rate.
    RateTooFast {
        /// The requested count.
        count: u64,
        /// The requested period in nanoseconds.
        period_ns: Nanos,
    },
    /// A rate whose numerator in lowest terms is above `u32::MAX` (for example RocksDB's
    /// `i64::MAX` bytes a second): no limiter of this crate represents it exactly, and none
    /// rounds it silently.
    RateNotRepresentable {
        /// The requested count.
        count: u64,
        /// The requested period in nanoseconds.
        period_ns: Nanos,
    },
    /// A count above `u32::MAX` with no burst: the default burst (the count) does not fit
    /// a burst's 32 bits. Give the burst (`"64GiB/s burst 1MiB"`).
    DefaultBurstTooLarge {
        /// The requested count.
        count: u64,
    },
    /// A window limiter (fixed window, sliding window, sliding log, sketch, throttler) was
    /// given a count above `u32::MAX` per window: it counts the written count per written
    /// period, in 32 bits.
    WindowCountTooLarge {
        /// The count as written.
        count: u64,
        /// The period as written, in nanoseconds.
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
                "invalid quota for this limiter: {count} per {period_ns} ns is faster than one \
                 permit per nanosecond, its schedule's resolution (a Budget takes it)"
            ),
            QuotaError::RateNotRepresentable { count, period_ns } => write!(
                f,
                "invalid quota: {count} per {period_ns} ns has no exact form with a numerator of \
                 at most 4294967295 in lowest terms"
            ),
            QuotaError::DefaultBurstTooLarge { count } => write!(
                f,
                "invalid quota: the count {count} is above the largest burst (4294967295); give \
                 the burst, for example \"64GiB/s burst 1MiB\""
            ),
            QuotaError::WindowCountTooLarge { count, period_ns } => write!(
                f,
                "invalid quota for a window limiter: {count} per {period_ns} ns is more than \
                 4294967295 per window"
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
        // Faster than one permit per ns: a valid quota, which only a Budget keeps.
        let fast = Quota::new(2_000_000_000, Duration::from_secs(1)).unwrap();
        assert!(fast.is_sub_nanosecond());
        assert!(matches!(
            fast.whole_interval_ns(),
            Err(QuotaError::RateTooFast {
                count: 2_000_000_000,
                ..
            })
        ));
        assert_eq!(
            Quota::new(1_000_000_000, Duration::from_secs(1))
                .unwrap()
                .whole_interval_ns(),
            Ok(1)
        );
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
            "99999999999999999999/s",
            "1/s burst 5GiB",
            "1XB/s",
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
    fn byte_units_and_large_counts() {
        let q: Quota = "64MiB/s burst 1MiB".parse().unwrap();
        assert_eq!(
            (q.count(), q.burst(), q.period_ns()),
            (64 << 20, 1 << 20, 1_000_000_000)
        );
        assert!(!q.is_scaled() && !q.is_sub_nanosecond());
        for (text, count) in [
            ("2GB/s burst 4MB", 2_000_000_000u64),
            ("2G/s burst 4M", 2_000_000_000),
            ("3kB/ms burst 1k", 3_000),
            ("5Ki/s", 5 << 10),
            ("7B/s", 7),
            ("1TiB/h burst 1GiB", 1 << 40),
        ] {
            let q: Quota = text.parse().unwrap();
            assert_eq!(q.count_as_written(), count, "{text}");
            assert_eq!(q.to_string().parse::<Quota>().unwrap(), q, "{text}");
        }
        // 64 GiB/s: 2^36 per 10^9 ns = 2^27 per 1 953 125 ns.
        let q: Quota = "64GiB/s burst 1MiB".parse().unwrap();
        assert_eq!((q.count(), q.period_ns()), (1 << 27, 1_953_125));
        assert!(q.is_scaled() && q.is_sub_nanosecond());
        assert_eq!(q.to_string(), "68719476736/s burst 1048576");
        assert_eq!(q.to_string().parse::<Quota>().unwrap(), q);
        assert_eq!(
            Quota::new_u64(64 << 30, Duration::from_secs(1), 1 << 20).unwrap(),
            q
        );
        // A large count needs a burst.
        assert_eq!(
            "64GiB/s".parse::<Quota>(),
            Err(QuotaError::DefaultBurstTooLarge { count: 64 << 30 })
        );
        // RocksDB's OverflowRate: i64::MAX bytes a second has no exact 32-bit form.
        assert!(matches!(
            Quota::new_u64(i64::MAX as u64, Duration::from_secs(1), 1 << 20),
            Err(QuotaError::RateNotRepresentable { .. })
        ));
        // The classic limiters refuse what they cannot keep; windows refuse a scaled count.
        assert!(matches!(
            <crate::rules::GcraRule as crate::rules::Rule>::new(&q),
            Err(QuotaError::RateTooFast { .. })
        ));
        assert!(matches!(
            <crate::rules::FixedWindowRule as crate::rules::Rule>::new(&q),
            Err(QuotaError::WindowCountTooLarge { .. })
        ));
    }

    #[test]
    fn interval_rounds_up_never_admitting_more() {
        let q = Quota::new(3, Duration::from_millis(500)).unwrap();
        assert_eq!(q.emission_interval_ns(), 166_666_667);
        assert!(q.emission_interval_ns() * 3 >= q.period_ns());
        assert_eq!(q.tolerance(), Duration::from_nanos(2 * 166_666_667));
    }
}
