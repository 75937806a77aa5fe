//! Clocks: where a limiter's "now" comes from, in nanoseconds since the clock's own epoch.
//!
//! Every limiter reads time through the [`Clock`] trait, and every decision can also be made
//! at an explicit time (`try_acquire_n_at`), so the clock is only on the path of callers that
//! do not already hold a timestamp. Its cost matters: on this project's 2-core reference
//! machine a limiter decision costs a few nanoseconds and the clock read is most of a check.
//!
//! | clock | cost per read (2-core reference VM) | resolution | never goes backwards |
//! |---|---|---|---|
//! | [`MonotonicClock`] (default) | ≈ 19 ns from the TSC (read and scaled by `quanta`), where the kernel trusts it; ≈ 38 ns from the OS clock elsewhere ([`ClockSource`]) | ≈ 1 ns | yes: the TSC only where the kernel verified the cores agree, clamped per thread; the OS clock by the OS's guarantee |
//! | [`StdClock`] | ≈ 38 ns (`std::time::Instant`, `clock_gettime`) | 1 ns | yes, across threads (the OS guarantees it) |
//! | [`CoarseClock`] | ≈ 1 ns (one atomic load) | 1 ms (the refresh interval) | yes |
//! | [`ManualClock`] | ≈ 1 ns (one atomic load) | 1 ns | only if you never `set` it backwards |
//!
//! (Measured with the scratch program described in `BENCHMARKS.md`, "Clocks".)
//!
//! A limiter never moves its state backwards, so a clock reading that is stale or behind
//! another thread's can only make a decision stricter, never admit more.

/// Nanoseconds since a clock's epoch.
///
/// `u64` nanoseconds cover about 584 years from the epoch; arithmetic near `u64::MAX`
/// is checked everywhere in this crate (a state that would pass it is refused, not wrapped).
pub type Nanos = u64;

#[cfg(feature = "std")]
use core::task::Waker;

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

    /// How a thread or task that waits for this clock to reach `deadline` (ns since its
    /// epoch) should sleep before it asks again.
    ///
    /// The provided version is for clocks that follow the OS timer (every clock of this
    /// crate but [`ManualClock`]): [`SleepHint::Reached`] if `now() >= deadline`, else
    /// [`SleepHint::Sleep`] for the rest of the wait, `deadline − now()` ns, on the OS timer;
    /// `waker` is not used. A clock that does not follow the OS timer (a manual or replayed
    /// one) should override it to answer [`SleepHint::UntilWoken`] and wake `waker` when its
    /// time changes, as [`ManualClock`] does; then nothing that waits for it polls.
    ///
    /// Whatever the answer, a waiter asks again after sleeping, so an early wake-up (a
    /// spurious one, or an OS timer that runs ahead of the clock) only costs one more call.
    /// Every wait of the crate that waits for a time waits this way
    /// ([`SleepHint::follow`] turns the answer into a poll of the waiting layer's driver).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, SleepHint, StdClock};
    /// use std::sync::Arc;
    /// use std::task::{Wake, Waker};
    ///
    /// struct Unused;
    /// impl Wake for Unused {
    ///     fn wake(self: Arc<Self>) {}
    /// }
    /// let waker = Waker::from(Arc::new(Unused));
    ///
    /// let clock = StdClock::new();
    /// let deadline = clock.now() + 5_000_000; // 5 ms from now
    /// match clock.sleep_hint(deadline, &waker) {
    ///     SleepHint::Sleep(d) => assert!(d.as_nanos() <= 5_000_000),
    ///     other => panic!("an OS clock says how long to sleep, not {other:?}"),
    /// }
    /// assert_eq!(clock.sleep_hint(0, &waker), SleepHint::Reached);
    /// ```
    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &Waker) -> SleepHint {
        let _ = waker; // the OS timer wakes the sleeper
        match deadline.checked_sub(self.now()) {
            Some(left) if left > 0 => SleepHint::Sleep(core::time::Duration::from_nanos(left)),
            _ => SleepHint::Reached,
        }
    }
}

/// How to wait for a clock to reach a deadline: the answer of [`Clock::sleep_hint`].
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepHint {
    /// The clock has reached the deadline: do not sleep.
    Reached,
    /// Sleep on the OS timer for at most this long (the rest of the wait, as the OS measures
    /// it), or until woken for another reason, then ask again.
    Sleep(core::time::Duration),
    /// The clock does not follow the OS timer: sleep until the waker passed to
    /// [`Clock::sleep_hint`] is woken (the clock wakes it at its next change of time), or
    /// until woken for another reason, then ask again.
    UntilWoken,
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }

    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &Waker) -> SleepHint {
        (**self).sleep_hint(deadline, waker)
    }
}

impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }

    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &Waker) -> SleepHint {
        (**self).sleep_hint(deadline, waker)
    }
}

#[cfg(feature = "std")]
use crate::notify::driver::{Nap, Wait};
#[cfg(feature = "std")]
use core::task::{Context, Poll};

#[cfg(feature = "std")]
impl SleepHint {
    /// This answer as one poll of a wait for the clock's time (see
    /// [`Wait`]): `Ready` once [`Reached`](SleepHint::Reached); for
    /// [`Sleep`](SleepHint::Sleep), `nap` lowered to the time left and `Pending`; for
    /// [`UntilWoken`](SleepHint::UntilWoken), `Pending` (the clock wakes the waker it was
    /// given). The one place the crate turns a clock's answer into a driver's nap.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::SleepHint;
    /// use limitcore::notify::Nap;
    /// use std::time::Duration;
    ///
    /// let mut nap = Nap::default();
    /// assert!(SleepHint::Sleep(Duration::from_millis(3)).follow(&mut nap).is_pending());
    /// assert_eq!(nap.get(), Some(Duration::from_millis(3)));
    /// assert!(SleepHint::Reached.follow(&mut nap).is_ready());
    /// ```
    #[inline]
    pub fn follow(self, nap: &mut Nap) -> Poll<()> {
        match self {
            SleepHint::Reached => Poll::Ready(()),
            SleepHint::Sleep(d) => {
                nap.at_most(d);
                Poll::Pending
            }
            SleepHint::UntilWoken => Poll::Pending,
        }
    }
}

/// One poll of a wait for `clock` to reach `at` (ns): the clock's
/// [`sleep_hint`](Clock::sleep_hint), followed ([`SleepHint::follow`]).
#[cfg(feature = "std")]
#[inline]
pub(crate) fn poll_clock<C: Clock + ?Sized>(
    clock: &C,
    at: Nanos,
    cx: &mut Context<'_>,
    nap: &mut Nap,
) -> Poll<()> {
    clock.sleep_hint(at, cx.waker()).follow(nap)
}

/// A wait for `clock` to reach `at` (ns): a reservation's start, the throttler's `run`.
#[cfg(feature = "std")]
#[derive(Debug)]
pub(crate) struct Until<'a, C: ?Sized> {
    pub(crate) clock: &'a C,
    pub(crate) at: Nanos,
}

#[cfg(feature = "std")]
impl<C: Clock + ?Sized> Wait for Until<'_, C> {
    type Output = ();

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<()> {
        poll_clock(self.clock, self.at, cx, nap)
    }
}

/// The deadline `max_wait` after `now` (ns of a clock): a `_within(max_wait)` wait's
/// deadline (`None` past the clock's range: no deadline).
#[cfg(feature = "std")]
#[inline]
pub(crate) fn deadline_within(now: Nanos, max_wait: core::time::Duration) -> Option<Nanos> {
    now.checked_add(duration_to_nanos(max_wait))
}

/// An `_until(deadline)` wait's OS deadline as a time of a clock that reads `now`: the time
/// left until it (on the OS clock) added to `now`, so that the wait ends by the clock's
/// time (`None` without a deadline, or past the clock's range).
#[cfg(feature = "std")]
#[inline]
pub(crate) fn deadline_until(now: Nanos, deadline: Option<std::time::Instant>) -> Option<Nanos> {
    let left = deadline?.saturating_duration_since(std::time::Instant::now());
    deadline_within(now, left)
}

/// The OS clock's instant `max_wait` from now: a `_within(max_wait)` wait's deadline where
/// the wait is timed on the OS clock (permits, a task's handle); `None` past the range of
/// `Instant` (no deadline).
#[cfg(any(feature = "concurrency", feature = "throttler"))]
#[inline]
pub(crate) fn instant_within(max_wait: core::time::Duration) -> Option<std::time::Instant> {
    std::time::Instant::now().checked_add(max_wait)
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
    #[cfg(feature = "std")]
    use {super::SleepHint, crate::notify::Event, core::task::Waker};

    /// A clock that only moves when told to: for tests, simulations and replays.
    ///
    /// `new()` starts at 0. Clones share one time source, so a test can keep a handle and
    /// move the time under a limiter that owns another. Thread-safe; times saturate at
    /// `u64::MAX` nanoseconds instead of wrapping.
    ///
    /// With `std`, whoever waits for it to reach a time through `Clock::sleep_hint` is told
    /// `SleepHint::UntilWoken` and woken by the next [`advance`](ManualClock::advance) or
    /// [`set`](ManualClock::set): a test moves the time and the waiter reacts, with no
    /// polling. Every wait of the crate (budgets, lanes, the throttler, the generic waits,
    /// reservations, the I/O adapters) sleeps this way on a `ManualClock`, blocking or
    /// async, so waits can be tested at explicit times without real sleeping. Reading the
    /// time (`now`) is one atomic load; a change of time costs two read-modify-writes (the
    /// time, and the waiters' [`Event`](crate::notify::Event)), and a lock only while
    /// someone waits.
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
    ///
    /// Waiting for it (with `std`):
    ///
    /// ```
    /// use limitcore::clock::{Clock, ManualClock, SleepHint};
    /// use std::sync::{Arc, Mutex};
    /// use std::task::{Wake, Waker};
    ///
    /// /// Counts its wake-ups.
    /// struct Count(Mutex<u32>);
    /// impl Wake for Count {
    ///     fn wake(self: Arc<Self>) {
    ///         *self.0.lock().unwrap() += 1;
    ///     }
    /// }
    /// let count = Arc::new(Count(Mutex::new(0)));
    /// let waker = Waker::from(count.clone());
    ///
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.sleep_hint(1_000, &waker), SleepHint::UntilWoken);
    /// clock.advance_nanos(400); // wakes the waiter once; it asks again
    /// assert_eq!(*count.0.lock().unwrap(), 1);
    /// assert_eq!(clock.sleep_hint(1_000, &waker), SleepHint::UntilWoken);
    /// clock.advance_nanos(600);
    /// assert_eq!(*count.0.lock().unwrap(), 2);
    /// assert_eq!(clock.sleep_hint(1_000, &waker), SleepHint::Reached);
    /// clock.advance_nanos(1); // nobody waits any more
    /// assert_eq!(*count.0.lock().unwrap(), 2);
    /// ```
    #[derive(Debug, Clone)]
    pub struct ManualClock {
        nanos: Arc<AtomicU64>,
        /// Notified at every change of time: whoever waits for a time sleeps on it.
        #[cfg(feature = "std")]
        changed: Arc<Event>,
    }

    impl Default for ManualClock {
        fn default() -> Self {
            Self::new()
        }
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
                #[cfg(feature = "std")]
                changed: Arc::new(Event::new()),
            }
        }

        /// Move the time forward by `by` (saturating at `u64::MAX` ns), and wake whoever
        /// waits for it (see [`Clock::sleep_hint`]).
        pub fn advance(&self, by: Duration) {
            self.advance_nanos(duration_to_nanos(by));
        }

        /// Move the time forward by `by` nanoseconds (saturating at `u64::MAX`), and wake
        /// whoever waits for it.
        pub fn advance_nanos(&self, by: Nanos) {
            // Relaxed: the time is a single independent location, and coherence makes any
            // read that happens after this update (through whatever the caller used to
            // synchronise) see it or a later value. The waiters are told through the event
            // (`notify`'s release, after this update, is the partner of their acquire).
            let added = crate::cas::apply(&self.nanos, |t| {
                Ok::<_, core::convert::Infallible>((t.saturating_add(by), ()))
            });
            match added {
                Ok(()) => {}
                Err(never) => match never {},
            }
            #[cfg(feature = "std")]
            self.changed.notify();
        }

        /// Set the time to `to` since the epoch (saturating at `u64::MAX` ns), and wake
        /// whoever waits for it. It may move backwards: limiters then become stricter, never
        /// more permissive.
        pub fn set(&self, to: Duration) {
            self.set_nanos(duration_to_nanos(to));
        }

        /// Set the time to `to` nanoseconds since the epoch, and wake whoever waits for it;
        /// it may move backwards.
        pub fn set_nanos(&self, to: Nanos) {
            // Relaxed: see `advance_nanos`.
            self.nanos.store(to, Ordering::Relaxed);
            #[cfg(feature = "std")]
            self.changed.notify();
        }
    }

    impl Clock for ManualClock {
        #[inline]
        fn now(&self) -> Nanos {
            // Relaxed: see `advance_nanos`.
            self.nanos.load(Ordering::Relaxed)
        }

        /// [`SleepHint::Reached`] if the time is at `deadline` or later; otherwise
        /// [`SleepHint::UntilWoken`], having registered `waker` to be woken at the next
        /// [`advance`](ManualClock::advance) or [`set`](ManualClock::set) (once: a waiter
        /// that is still early asks again). A waker that
        /// [`will_wake`](core::task::Waker::will_wake) the same task as one already
        /// registered replaces nothing and is not added twice.
        #[cfg(feature = "std")]
        fn sleep_hint(&self, deadline: Nanos, waker: &Waker) -> SleepHint {
            loop {
                // Listen (the version), check, then sleep only if nothing changed since the
                // version was read: the event's protocol (no lost wake-up).
                let seen = self.changed.version();
                if self.now() >= deadline {
                    return SleepHint::Reached;
                }
                if self.changed.register(seen, waker) {
                    return SleepHint::UntilWoken;
                }
            }
        }
    }
}
pub use manual::ManualClock;

#[cfg(feature = "std")]
mod os {
    use super::{Clock, Nanos};
    use std::path::Path;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// Where [`MonotonicClock`] reads time from: chosen once per process
    /// ([`MonotonicClock::source`]).
    ///
    /// # Why not always the TSC
    ///
    /// The CPU's time-stamp counter is the cheapest clock there is (about 19 ns a read on the
    /// reference VM against about 38 ns for the OS clock), but on a machine whose cores'
    /// counters are not synchronised, two threads read different times: a thread behind
    /// another sees a limiter state ahead of its `now` and is refused before the burst is
    /// used (governor issue #299, 2026, open; iroh #4295). A per-thread clamp stops one
    /// thread's time from going back but not that skew. The Linux kernel checks the
    /// counters' synchronisation (and that they are invariant) before it makes the TSC its
    /// own clocksource, and falls back to another clocksource when they fail; this clock
    /// follows the kernel's verdict.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{ClockSource, MonotonicClock};
    ///
    /// // The kernel chose the TSC and the CPU has an invariant counter: the TSC.
    /// assert_eq!(ClockSource::choose(Some("tsc"), true), ClockSource::Tsc);
    /// // A virtual machine on kvm-clock, or a kernel that rejected the TSC: the OS clock.
    /// assert_eq!(ClockSource::choose(Some("kvm-clock"), true), ClockSource::Os);
    /// assert_eq!(ClockSource::choose(None, true), ClockSource::Os);
    /// // What this process uses:
    /// let source = MonotonicClock::source();
    /// assert!(source == ClockSource::Tsc || source == ClockSource::Os);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ClockSource {
        /// The CPU's time-stamp counter, read and scaled by the `quanta` crate; each thread
        /// clamps its readings so that they never go back. Chosen only where the kernel uses
        /// the TSC as its own clocksource (its synchronisation checks passed) and the CPU
        /// reports an invariant counter (quanta's own check).
        Tsc,
        /// The OS monotonic clock (`std::time::Instant`: `clock_gettime(CLOCK_MONOTONIC)` on
        /// Linux): monotonic across threads by the OS's guarantee.
        Os,
    }

    impl ClockSource {
        /// Where the kernel names its current clocksource on Linux.
        pub const LINUX_CLOCKSOURCE: &'static str =
            "/sys/devices/system/clocksource/clocksource0/current_clocksource";

        /// The choice for a kernel whose current clocksource is `kernel_clocksource` (`None`:
        /// unknown, such as an OS other than Linux) on a CPU with (`counter_support`) or
        /// without an invariant time-stamp counter: [`ClockSource::Tsc`] only for `tsc` (the
        /// name, surrounding whitespace ignored) with counter support, else
        /// [`ClockSource::Os`].
        pub fn choose(kernel_clocksource: Option<&str>, counter_support: bool) -> ClockSource {
            match kernel_clocksource {
                Some(name) if name.trim() == "tsc" && counter_support => ClockSource::Tsc,
                _ => ClockSource::Os,
            }
        }

        /// The choice read from the file `path` (the kernel's current clocksource; see
        /// [`ClockSource::LINUX_CLOCKSOURCE`]) and this CPU's counter: a file that cannot be
        /// read counts as "unknown" ([`ClockSource::Os`]).
        pub fn detect_from(path: &Path) -> ClockSource {
            let kernel = std::fs::read_to_string(path).ok();
            ClockSource::choose(kernel.as_deref(), counter_support())
        }
    }

    /// Whether the CPU has an invariant time-stamp counter that quanta reads (`rdtscp`):
    /// quanta's own condition for using the counter, asked of the CPU the same way.
    #[cfg(target_arch = "x86_64")]
    fn counter_support() -> bool {
        let cpuid = raw_cpuid::CpuId::new();
        let invariant = cpuid
            .get_advanced_power_mgmt_info()
            .is_some_and(|apm| apm.has_invariant_tsc());
        let rdtscp = cpuid
            .get_extended_processor_and_feature_identifiers()
            .is_some_and(|f| f.has_rdtscp());
        invariant && rdtscp
    }

    /// No time-stamp counter this crate trusts off x86_64.
    #[cfg(not(target_arch = "x86_64"))]
    fn counter_support() -> bool {
        false
    }

    /// The process-wide choice of source and the epoch every [`MonotonicClock`] (and
    /// [`CoarseClock`]) shares, so that readings from different clocks (and limiters) are
    /// comparable.
    struct Shared {
        source: ClockSource,
        /// The TSC clock (calibrated once) and its raw reading at the epoch.
        tsc: quanta::Clock,
        tsc_start: u64,
        /// The OS clock at the epoch.
        os_start: Instant,
    }

    fn shared() -> &'static Shared {
        static SHARED: OnceLock<Shared> = OnceLock::new();
        SHARED.get_or_init(|| {
            let source = if cfg!(target_os = "linux") {
                ClockSource::detect_from(Path::new(ClockSource::LINUX_CLOCKSOURCE))
            } else {
                ClockSource::Os
            };
            let tsc = quanta::Clock::new();
            let tsc_start = tsc.raw();
            Shared {
                source,
                tsc,
                tsc_start,
                os_start: Instant::now(),
            }
        })
    }

    /// The default clock: the CPU's time-stamp counter where the kernel trusts it, the OS
    /// monotonic clock elsewhere ([`ClockSource`]; the choice is made once per process and
    /// [`MonotonicClock::source`] tells it).
    ///
    /// Epoch: the first use of any `MonotonicClock` in the process; all of them share it, so
    /// a timestamp taken from one can be passed to another limiter's `try_acquire_n_at`.
    ///
    /// Cost per read on the 2-core reference VM (kernel clocksource `tsc`): about 19 ns from
    /// the TSC, about 38 ns from the OS clock (BENCHMARKS.md, "Clocks").
    ///
    /// Monotonicity: the OS source is monotonic across threads by the OS's guarantee. The
    /// TSC source is used only where the kernel itself keeps `CLOCK_MONOTONIC` on the
    /// counter (its clocksource is `tsc`: the kernel checked at boot, and its watchdog keeps
    /// checking, that the cores' counters run in step), so the readings are monotonic as
    /// far as the kernel's own clock is. Limiters never move their state backwards, so a
    /// residual skew between cores could only make a decision stricter.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::{Clock, ClockSource, MonotonicClock};
    /// let clock = MonotonicClock::new();
    /// let a = clock.now();
    /// let b = clock.now();
    /// assert!(b >= a);
    /// // Force the OS clock (for example to compare the two):
    /// let os = MonotonicClock::with_source(ClockSource::Os);
    /// assert_eq!(os.reads(), ClockSource::Os);
    /// assert!(os.now() <= os.now());
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    #[derive(Debug, Clone)]
    pub struct MonotonicClock {
        read: Read,
    }

    /// How a [`MonotonicClock`] reads: the TSC (quanta's clock and the epoch's raw reading)
    /// or the OS clock (the epoch).
    #[derive(Debug, Clone)]
    enum Read {
        Tsc { clock: quanta::Clock, start: u64 },
        Os { start: Instant },
    }

    impl MonotonicClock {
        /// A handle on the process-wide clock, reading the source [`MonotonicClock::source`]
        /// chose (cheap after the first call, which chooses it and calibrates the counter).
        pub fn new() -> Self {
            MonotonicClock::with_source(shared().source)
        }

        /// A handle reading `source`, whatever the process-wide choice, on the same epoch
        /// (for a comparison of the two, or a deployment that knows better than the kernel's
        /// verdict). The two sources' epochs are the same instant to within the
        /// microseconds between their first reads and the counter's calibration error:
        /// compare readings of one source, not across sources. [`ClockSource::Tsc`] on a machine without a usable counter reads the OS
        /// clock through quanta's own fallback.
        pub fn with_source(source: ClockSource) -> Self {
            let shared = shared();
            let read = match source {
                ClockSource::Tsc => Read::Tsc {
                    clock: shared.tsc.clone(),
                    start: shared.tsc_start,
                },
                ClockSource::Os => Read::Os {
                    start: shared.os_start,
                },
            };
            MonotonicClock { read }
        }

        /// The source this process's [`MonotonicClock::new`] reads, chosen once: the TSC
        /// where the kernel's current clocksource is `tsc` (Linux) and the CPU reports an
        /// invariant counter, the OS monotonic clock otherwise ([`ClockSource`]).
        pub fn source() -> ClockSource {
            shared().source
        }

        /// The source this handle reads.
        pub fn reads(&self) -> ClockSource {
            match self.read {
                Read::Tsc { .. } => ClockSource::Tsc,
                Read::Os { .. } => ClockSource::Os,
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
            match &self.read {
                Read::Tsc { clock, start } => {
                    // No per-thread floor: the counter is read only where the kernel
                    // keeps its own monotonic clock on it (its checks found the cores'
                    // counters in step), and a reading behind a state only makes a decision
                    // stricter. A floor kept in a thread-local cost every decision a load
                    // and a store on its path (issue 36: the refusals' gap to governor's).
                    clock.delta_as_nanos(*start, clock.raw())
                }
                Read::Os { start } => super::duration_to_nanos(start.elapsed()),
            }
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
    /// Epoch: as [`MonotonicClock`]. Never goes backwards, and every thread reads the same
    /// value: one background thread writes the shared reading, only forward, so no skew
    /// between cores' counters reaches the readers.
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
            let shared = shared();
            Ok(CoarseClock {
                clock: shared.tsc.clone(),
                start: shared.tsc.scaled(shared.tsc_start),
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
pub use os::{ClockSource, CoarseClock, MonotonicClock, StdClock};

/// Without `std` there is no OS clock: `MonotonicClock` still exists, so that the default
/// clock of every limiter ([`DefaultClock`]) means the same type with and without the
/// feature (features stay additive), but it has no values. Name a clock of your own (for
/// example [`ManualClock`]) where `std` is off.
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

/// The clock a limiter uses when none is given: [`MonotonicClock`], the CPU's time-stamp
/// counter. The same type with and without `std`; without it the type has no values, so
/// every limiter names its clock (features stay additive: turning `std` on never changes
/// what a type means).
pub type DefaultClock = MonotonicClock;
