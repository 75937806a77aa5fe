//! Clocks: where a limiter's "now" comes from, in nanoseconds since the clock's own epoch.
//!
//! Every limiter reads time through the [`Clock`] trait, and every decision can also be made
//! at an explicit time (`try_acquire_n_at`), so the clock is only on the path of callers that
//! do not already hold a timestamp. Its cost matters: on this project's 2-core reference
//! machine a limiter decision costs a few nanoseconds and the clock read is most of a check.
//!
//! | clock | cost per read (2-core reference VM) | resolution | never goes backwards |
//! |---|---|---|---|
//! | [`MonotonicClock`] (default) | ≈ 19 ns (TSC read and scaling, by `quanta`) | ≈ 1 ns | on each thread (clamped); across threads within the TSC synchronisation the kernel already requires |
//! | [`StdClock`] | ≈ 38 ns (`std::time::Instant`, `clock_gettime`) | 1 ns | yes, across threads (the OS guarantees it) |
//! | [`CoarseClock`] | ≈ 1 ns (one atomic load) | 1 ms (the refresh interval) | yes |
//! | [`ManualClock`] | ≈ 1 ns (one atomic load) | 1 ns | only if you never `set` it backwards |
//!
//! (Measured with the scratch program described in `BENCHMARKS.md`, "Clocks".)
//!
//! A limiter never moves its state backwards, so a clock reading that is stale or behind
//! another thread's can only make a decision stricter, never admit more.
#![cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "[`CoarseClock`]: https://docs.rs/limitcore/latest/limitcore/clock/struct.CoarseClock.html"
)]
#![cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "[`StdClock`]: https://docs.rs/limitcore/latest/limitcore/clock/struct.StdClock.html"
)]

/// Nanoseconds since a clock's epoch.
///
/// `u64` nanoseconds cover about 584 years from the epoch; arithmetic near `u64::MAX`
/// is checked everywhere in this crate (a state that would pass it is refused, not wrapped).
pub type Nanos = u64;

/// A source of time for limiters.
///
/// `now()` returns nanoseconds since the clock's own epoch. Implementations must be cheap,
/// thread-safe and should not go backwards (a limiter tolerates it, but only by becoming
/// stricter).
///
/// # Examples
///
/// ```
/// use limitcore::clock::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// clock.advance(std::time::Duration::from_millis(3));
/// assert_eq!(clock.now(), 3_000_000);
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's epoch.
    fn now(&self) -> Nanos;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
}

/// Saturating conversion of a [`Duration`](core::time::Duration) to nanoseconds.
#[inline]
pub(crate) fn duration_to_nanos(d: core::time::Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

mod manual {
    use super::{duration_to_nanos, Clock, Nanos};
    use crate::sync::{AtomicU64, Ordering};
    use alloc::sync::Arc;
    use core::time::Duration;

    /// A clock that only moves when told to: for tests, simulations and replays.
    ///
    /// `new()` starts at 0. Clones share one time source, so a test can keep a handle and
    /// move the time under a limiter that owns another. Thread-safe; times saturate at
    /// `u64::MAX` nanoseconds instead of wrapping.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let handle = clock.clone();
    /// handle.advance(Duration::from_secs(2));
    /// assert_eq!(clock.now(), 2_000_000_000);
    /// handle.set(Duration::from_secs(1)); // may move backwards
    /// assert_eq!(clock.now(), 1_000_000_000);
    /// ```
    #[derive(Debug, Clone, Default)]
    pub struct ManualClock {
        nanos: Arc<AtomicU64>,
    }

    impl ManualClock {
        /// A clock at time 0.
        pub fn new() -> Self {
            Self::starting_at(0)
        }

        /// A clock at `nanos` nanoseconds.
        pub fn starting_at(nanos: Nanos) -> Self {
            ManualClock {
                nanos: Arc::new(AtomicU64::new(nanos)),
            }
        }

        /// Move the time forward by `by` (saturating at `u64::MAX` ns).
        pub fn advance(&self, by: Duration) {
            self.advance_nanos(duration_to_nanos(by));
        }

        /// Move the time forward by `by` nanoseconds (saturating at `u64::MAX`).
        pub fn advance_nanos(&self, by: Nanos) {
            // Relaxed: the clock value is a single independent location; coherence makes any
            // read that happens after this update (through whatever the caller used to
            // synchronise) see it or a later value.
            let _ = self
                .nanos
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some(t.saturating_add(by))
                });
        }

        /// Set the time to `to` since the epoch (saturating at `u64::MAX` ns). It may move
        /// backwards: limiters then become stricter, never more permissive.
        pub fn set(&self, to: Duration) {
            self.set_nanos(duration_to_nanos(to));
        }

        /// Set the time to `to` nanoseconds since the epoch; it may move backwards.
        pub fn set_nanos(&self, to: Nanos) {
            // Relaxed: see `advance_nanos`.
            self.nanos.store(to, Ordering::Relaxed);
        }
    }

    impl Clock for ManualClock {
        #[inline]
        fn now(&self) -> Nanos {
            // Relaxed: see `advance_nanos`.
            self.nanos.load(Ordering::Relaxed)
        }
    }
}
pub use manual::ManualClock;

#[cfg(feature = "std")]
mod os {
    use super::{Clock, Nanos};
    use std::cell::Cell;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// The process-wide TSC calibration and epoch shared by every [`MonotonicClock`], so that
    /// readings from different clocks (and limiters) are comparable.
    fn tsc() -> &'static (quanta::Clock, u64) {
        static TSC: OnceLock<(quanta::Clock, u64)> = OnceLock::new();
        TSC.get_or_init(|| {
            let clock = quanta::Clock::new();
            let start = clock.raw();
            (clock, start)
        })
    }

    std::thread_local! {
        /// The latest `MonotonicClock` reading on this thread: the floor for the next one.
        static LAST_READING: Cell<Nanos> = const { Cell::new(0) };
    }

    /// The default clock: the CPU's time-stamp counter (through the `quanta` crate),
    /// clamped so that it never goes backwards on a thread.
    ///
    /// Epoch: the first use of any `MonotonicClock` in the process; all of them share it, so
    /// a timestamp taken from one can be passed to another limiter's `try_acquire_n_at`.
    ///
    /// Cost: about 19 ns per read on the 2-core reference VM (the `rdtsc` instruction is
    /// most of it), against about 38 ns for [`StdClock`]. Resolution about 1 ns.
    ///
    /// Monotonicity: each thread keeps its latest reading and never returns less, so a
    /// thread that migrates to a core whose counter lags (the failure reported against
    /// governor's default clock, governor issue #299) sees time stand still instead of
    /// stepping back. Across threads, readings agree to within the counter synchronisation
    /// the kernel requires before it uses the TSC at all; where the TSC is unusable, quanta
    /// falls back to the OS monotonic clock. Limiters never move their state backwards, so
    /// any residual skew only makes a decision stricter.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, MonotonicClock};
    /// let clock = MonotonicClock::new();
    /// let a = clock.now();
    /// let b = clock.now();
    /// assert!(b >= a);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    #[derive(Debug, Clone)]
    pub struct MonotonicClock {
        clock: quanta::Clock,
        start: u64,
    }

    impl MonotonicClock {
        /// A handle on the process-wide TSC clock (cheap after the first call, which
        /// calibrates the counter).
        pub fn new() -> Self {
            let (clock, start) = tsc();
            MonotonicClock {
                clock: clock.clone(),
                start: *start,
            }
        }
    }

    impl Default for MonotonicClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for MonotonicClock {
        #[inline]
        fn now(&self) -> Nanos {
            let raw = self.clock.raw();
            let reading = self.clock.delta_as_nanos(self.start, raw);
            LAST_READING.with(|last| {
                let now = reading.max(last.get());
                last.set(now);
                now
            })
        }
    }

    /// `std::time::Instant`: the OS monotonic clock, monotonic across threads by the OS's
    /// guarantee, at about 38 ns per read on the 2-core reference VM.
    ///
    /// Epoch: when this clock (or the clock it was cloned from) was created.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, StdClock};
    /// let clock = StdClock::new();
    /// assert!(clock.now() < 1_000_000_000);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    #[derive(Debug, Clone, Copy)]
    pub struct StdClock {
        epoch: Instant,
    }

    impl StdClock {
        /// A clock whose epoch is now.
        pub fn new() -> Self {
            StdClock {
                epoch: Instant::now(),
            }
        }
    }

    impl Default for StdClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for StdClock {
        #[inline]
        fn now(&self) -> Nanos {
            super::duration_to_nanos(self.epoch.elapsed())
        }
    }

    /// A coarse clock: one atomic load (about 1 ns), refreshed every millisecond by a
    /// background thread (quanta's "upkeep" thread, started once per process and kept for
    /// its lifetime).
    ///
    /// Resolution is the refresh interval, [`CoarseClock::RESOLUTION`], so a limiter on this
    /// clock sees time advance in steps: the long-run rate is still exact (the limiter's
    /// arithmetic is in nanoseconds), but within one step at most `burst` permits can become
    /// available. Do not use it for a quota whose emission interval is shorter than the
    /// resolution and whose burst is small: such a limiter admits only about `burst` per step.
    ///
    /// Epoch: as [`MonotonicClock`]. Never goes backwards: the background thread only moves
    /// the shared reading forward.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, CoarseClock};
    /// use std::time::Duration;
    /// let clock = CoarseClock::new().unwrap();
    /// let t = clock.now();
    /// std::thread::sleep(Duration::from_millis(20));
    /// assert!(clock.now() > t);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    #[derive(Debug, Clone)]
    pub struct CoarseClock {
        clock: quanta::Clock,
        start: quanta::Instant,
    }

    impl CoarseClock {
        /// How often the background thread refreshes the reading: 1 ms.
        pub const RESOLUTION: Duration = Duration::from_millis(1);

        /// A handle on the coarse clock; the first call starts the refresher thread.
        ///
        /// # Errors
        ///
        /// The I/O error of spawning the refresher thread, if that fails. (If another part
        /// of the process already runs quanta's upkeep thread, that thread is used.)
        pub fn new() -> std::io::Result<Self> {
            static UPKEEP: OnceLock<Result<Option<quanta::Handle>, String>> = OnceLock::new();
            let started =
                UPKEEP.get_or_init(|| match quanta::Upkeep::new(Self::RESOLUTION).start() {
                    Ok(handle) => Ok(Some(handle)),
                    // Someone else keeps the shared reading fresh already.
                    Err(quanta::Error::UpkeepRunning) => Ok(None),
                    Err(e) => Err(e.to_string()),
                });
            if let Err(e) = started {
                return Err(std::io::Error::other(e.clone()));
            }
            let (clock, start) = tsc();
            Ok(CoarseClock {
                clock: clock.clone(),
                start: clock.scaled(*start),
            })
        }
    }

    impl Clock for CoarseClock {
        #[inline]
        fn now(&self) -> Nanos {
            let recent = self.clock.recent();
            super::duration_to_nanos(recent.saturating_duration_since(self.start))
        }
    }
}
#[cfg(feature = "std")]
pub use os::{CoarseClock, MonotonicClock, StdClock};

/// Without `std` there is no OS clock: `MonotonicClock` still exists, so that the default
/// clock of every limiter ([`DefaultClock`](crate::DefaultClock)) means the same type with
/// and without the feature (features stay additive), but it has no values. Name a clock of
/// your own (for example [`ManualClock`]) where `std` is off.
#[cfg(not(feature = "std"))]
mod no_os {
    use super::{Clock, Nanos};

    /// The default clock, the CPU's time-stamp counter; it needs the `std` feature. Without
    /// it this type has no values: build limiters with an explicit clock
    /// (`Gcra::with_clock(quota, ManualClock::new())`).
    #[derive(Debug, Clone, Copy)]
    pub enum MonotonicClock {}

    impl Clock for MonotonicClock {
        fn now(&self) -> Nanos {
            match *self {}
        }
    }
}
#[cfg(not(feature = "std"))]
pub use no_os::MonotonicClock;
