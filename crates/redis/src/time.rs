//! Times on Redis's clock ([`RedisMicros`]), kept apart by type from the core's local times.
//!
//! Two clocks meet in this crate. The core's times ([`Nanos`](limitcore::clock::Nanos), a
//! `u64`) are **nanoseconds on the node's local monotonic clock**; they are what the
//! leased path decides on ([`LeasedLimiter::decide_verdict_at`](crate::LeasedLimiter::decide_verdict_at),
//! [`LeaseRule`](crate::LeaseRule)). The scripts' times are **microseconds since the Unix
//! epoch on Redis's clock** (`TIME`), or an explicit time given to a script in its place.
//! Both used to be a bare `u64` under the same `_at` suffix; every time on Redis's clock is
//! now a [`RedisMicros`], so a local nanosecond can no longer be passed where a Redis
//! microsecond is read, nor the other way round.

use std::fmt;
use std::time::Duration;

/// An instant on Redis's clock: whole microseconds since the Unix epoch, as the scripts read
/// `TIME` (the server's clock, rounded down to the µs), or an explicit time given to a script
/// in its place (tests, replays: every `try_…_at` method).
///
/// The scripts accept explicit times up to [`RedisMicros::MAX`] (2^52 µs, the Unix epoch plus
/// 142 years), so that every sum they form stays exact in Lua's doubles.
///
/// # Examples
///
/// ```
/// use limitcore_redis::RedisMicros;
/// use std::time::Duration;
///
/// let t = RedisMicros::new(1_750_000_000_000_000);
/// let later = t.saturating_add(Duration::from_millis(3));
/// assert_eq!(later.as_micros(), 1_750_000_000_003_000);
/// assert_eq!(later.saturating_duration_since(t), Duration::from_millis(3));
/// assert!(later <= RedisMicros::MAX);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RedisMicros(u64);

impl RedisMicros {
    /// The Unix epoch.
    pub const ZERO: RedisMicros = RedisMicros(0);

    /// The largest explicit time the scripts accept: 2^52 µs. A later one is refused by the
    /// script (an [`Error::Redis`](crate::Error::Redis)).
    pub const MAX: RedisMicros = RedisMicros(1 << 52);

    /// The instant `us` microseconds after the Unix epoch on Redis's clock.
    #[inline]
    pub const fn new(us: u64) -> Self {
        RedisMicros(us)
    }

    /// Microseconds since the Unix epoch.
    #[inline]
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// This instant plus `d`, rounded down to the µs, saturating at `u64::MAX` µs.
    #[inline]
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Self {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        RedisMicros(self.0.saturating_add(us))
    }

    /// The time from `earlier` to this instant, zero if `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(self, earlier: RedisMicros) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for RedisMicros {
    /// `<µs> µs` (since the Unix epoch, on Redis's clock).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} µs", self.0)
    }
}
