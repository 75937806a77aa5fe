//! [`UnixClock`]: the core's fast monotonic clock, counted from the Unix epoch, so that
//! fixed windows align with envoyproxy/ratelimit's (`now / unit × unit` in Unix seconds).

use limitcore::clock::{Clock, MonotonicClock, Nanos};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The clock every limiter of one service reads: shared, so that tests can drive a
/// [`ManualClock`](limitcore::clock::ManualClock) set to a Unix time.
pub type SharedClock = Arc<dyn Clock>;

/// Nanoseconds since the Unix epoch, read as the core's [`MonotonicClock`] (the CPU's
/// time-stamp counter where the kernel trusts it) plus the system time at construction: as
/// fast as the default clock, never going backwards, and aligned to the Unix epoch at
/// construction (a later step of the system clock is not followed: windows stay aligned to
/// the time the service started with, to within its drift).
///
/// # Examples
///
/// ```
/// use limitcore::clock::Clock;
/// use limitcore_rls::UnixClock;
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// let clock = UnixClock::new();
/// let system = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
/// assert!(clock.now().abs_diff(system) < 1_000_000_000);
/// ```
#[derive(Debug, Clone)]
pub struct UnixClock {
    start: Nanos,
    mono: MonotonicClock,
}

impl UnixClock {
    /// A clock reading the system's Unix time now, then counting on the monotonic clock.
    pub fn new() -> Self {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        UnixClock {
            start,
            mono: MonotonicClock::new(),
        }
    }

    /// As a [`SharedClock`].
    pub fn shared() -> SharedClock {
        Arc::new(UnixClock::new())
    }
}

impl Default for UnixClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for UnixClock {
    #[inline]
    fn now(&self) -> Nanos {
        self.start.saturating_add(self.mono.now())
    }
}
