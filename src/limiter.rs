//! The traits every limiter implements ([`RateLimiter`], [`KeyedRateLimiter`], and their
//! refundable forms [`Refund`], [`KeyedRefund`]) and the decision types ([`Denied`],
//! [`Snapshot`], [`Decision`]).

use crate::clock::Nanos;
use crate::rules::Receipt;
use crate::Quota;
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

/// Why a request was not admitted. A denial never changes the limiter's state.
///
/// # Examples
///
/// ```
/// use limitcore::{Denied, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?;
/// assert!(limiter.try_acquire_n(2).is_ok());
/// let denied = limiter.try_acquire().unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(limiter.try_acquire_n(3), Err(Denied::ExceedsCapacity { capacity: 2 }));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
// `repr(u8)`: an explicit tag. Without it `Result<(), Denied>` keeps its discriminant in the
// niche of `Duration`'s nanoseconds, so even `is_ok()` had to compute `retry_after` (a
// division by 10^9); with the tag the compiler drops that work when the caller does not
// look. Measured: GCRA's single-thread deny path went from 1.15x to 0.89x governor's time
// (BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum Denied {
    /// Not now. The same request conforms once `retry_after` has passed, if nothing else
    /// consumes in between; asking any earlier is denied again. Exact to the nanosecond,
    /// never rounded down, and always a wait that ends within the clock's range (a request
    /// that could only conform past it is [`Denied::BeyondHorizon`]).
    RateLimited {
        /// How long to wait before the same request conforms.
        retry_after: Duration,
    },
    /// Never: more permits were asked for at once than the limiter's burst (its capacity).
    /// Nothing was consumed.
    ExceedsCapacity {
        /// The most permits one request can ever take.
        capacity: u32,
    },
    /// Never within the clock's range: the state this request would leave (or the time it
    /// would have to wait for) lies past `u64::MAX` ns, 584 years from the clock's epoch.
    /// Like [`Denied::ExceedsCapacity`], no wait can cure it and nothing was consumed.
    /// A limiter can only answer it in the last burst span of its clock's range.
    BeyondHorizon,
    /// Not now, and no wait can be said: the limiter is paused (a
    /// [`Budget`](crate::Budget) in [`Mode::Paused`](crate::Mode::Paused)). Its waiters
    /// wake when the pause ends; nothing was consumed.
    Paused,
}

impl Denied {
    /// `Some(wait)` for [`Denied::RateLimited`] (a finite wait, exact and inclusive), `None`
    /// when waiting cannot help ([`Denied::ExceedsCapacity`], [`Denied::BeyondHorizon`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Denied;
    /// use std::time::Duration;
    ///
    /// let later = Denied::RateLimited { retry_after: Duration::from_millis(5) };
    /// assert_eq!(later.retry_after(), Some(Duration::from_millis(5)));
    /// assert_eq!(Denied::ExceedsCapacity { capacity: 3 }.retry_after(), None);
    /// assert!(Denied::BeyondHorizon.is_final());
    /// ```
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Denied::RateLimited { retry_after } => Some(*retry_after),
            Denied::ExceedsCapacity { .. } | Denied::BeyondHorizon | Denied::Paused => None,
        }
    }

    /// Whether no wait can cure this refusal ([`Denied::ExceedsCapacity`],
    /// [`Denied::BeyondHorizon`]): waits fail at once on it, and an HTTP layer answers it
    /// without a `Retry-After`. [`Denied::Paused`] is not final (the pause can end) but
    /// names no wait either.
    #[inline]
    pub fn is_final(&self) -> bool {
        matches!(self, Denied::ExceedsCapacity { .. } | Denied::BeyondHorizon)
    }

    /// The stricter of two refusals of the same request: a final one ([`Denied::is_final`]:
    /// waiting cannot help) over any wait, else the longer `retry_after`; of two final
    /// refusals, `self`. This is how [`All`](crate::All) reports a request that several limits refuse:
    /// waiting `retry_after` satisfies every one of them.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Denied;
    /// use std::time::Duration;
    ///
    /// let a = Denied::RateLimited { retry_after: Duration::from_millis(5) };
    /// let b = Denied::RateLimited { retry_after: Duration::from_millis(9) };
    /// assert_eq!(a.stricter(b), b);
    /// assert_eq!(a.stricter(Denied::ExceedsCapacity { capacity: 3 }), Denied::ExceedsCapacity { capacity: 3 });
    /// ```
    #[must_use]
    pub fn stricter(self, other: Denied) -> Denied {
        match (self, other) {
            (Denied::RateLimited { retry_after: a }, Denied::RateLimited { retry_after: b }) => {
                Denied::RateLimited {
                    retry_after: a.max(b),
                }
            }
            // A final refusal over anything; a pause over a wait.
            (Denied::RateLimited { .. } | Denied::Paused, worst) if worst.is_final() => worst,
            (Denied::RateLimited { .. }, Denied::Paused) => Denied::Paused,
            (worst, _) => worst,
        }
    }

    /// The refusal of a request that can never conform because the state it would leave
    /// lies past the clock's range (`u64::MAX` ns, 584 years).
    pub(crate) const NEVER: Denied = Denied::BeyondHorizon;

    /// A [`Denied::RateLimited`] of `nanos` nanoseconds.
    #[inline]
    pub(crate) fn rate_limited(nanos: u64) -> Denied {
        Denied::RateLimited {
            retry_after: Duration::from_nanos(nanos),
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::RateLimited { retry_after } => {
                write!(f, "rate limited: retry after {retry_after:?}")
            }
            Denied::ExceedsCapacity { capacity } => write!(
                f,
                "request exceeds the limiter's capacity of {capacity} permits and can never conform"
            ),
            Denied::BeyondHorizon => f.write_str(
                "request could only conform past the end of the clock's range and never will",
            ),
            Denied::Paused => f.write_str("the limiter is paused"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Denied {}

/// A read of a limiter's state that consumes nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
/// limiter.try_acquire_n(4).unwrap();
/// let s = limiter.snapshot();
/// assert_eq!(s.remaining, 6);
/// assert_eq!(s.full_after, Duration::from_millis(400));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Snapshot {
    /// Permits a request could take right now (`0..=burst`).
    pub remaining: u32,
    /// How long until the limiter is full again (`burst` permits); zero if it is full.
    pub full_after: Duration,
}

impl Snapshot {
    /// A snapshot of `remaining` permits, full again after `full_after`: for limiters
    /// outside this crate (a remote limiter reporting the state its server decided on), since
    /// the struct is `#[non_exhaustive]` and cannot be built with a literal there.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Snapshot;
    /// use std::time::Duration;
    ///
    /// let s = Snapshot::new(3, Duration::from_millis(20));
    /// assert_eq!((s.remaining, s.full_after), (3, Duration::from_millis(20)));
    /// ```
    #[inline]
    pub const fn new(remaining: u32, full_after: Duration) -> Self {
        Snapshot {
            remaining,
            full_after,
        }
    }
}

/// A decision together with the state it left, read in the same step (so that an HTTP
/// layer can write `RateLimit` headers without a second, racy read of the limiter).
///
/// `state` is the limiter's state at the decision's time just after the decision: after an
/// admission, with its permits taken; after a refusal, the unchanged state the refusal saw.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
/// let d = limiter.decide_n(4);
/// assert!(d.is_admitted());
/// assert_eq!(d.state.remaining, 6);                          // what the 4 left
/// assert_eq!(d.state.full_after, Duration::from_millis(400));
/// let d = limiter.decide_n(7);
/// assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
/// assert_eq!(d.state.remaining, 6);                          // a refusal takes nothing
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Decision {
    /// `Ok(())` if the request was admitted, the refusal otherwise.
    pub result: Result<(), Denied>,
    /// The state this decision left, at its own time.
    pub state: Snapshot,
}

impl Decision {
    /// Whether the request was admitted.
    #[inline]
    pub fn is_admitted(&self) -> bool {
        self.result.is_ok()
    }

    /// The wait a refusal reports ([`Denied::retry_after`]); `None` when admitted or when
    /// waiting cannot help.
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        self.result.err().and_then(|d| d.retry_after())
    }
}

/// A rate limiter: every algorithm in this crate implements it.
///
/// The trait is dyn-compatible, so `Box<dyn RateLimiter>` can pick the algorithm at run
/// time ([`Algorithm::limiter`][crate::Algorithm::limiter] builds one from its name).
/// `try_acquire_n_at` and `decide_n_at` are the decisions; the other methods read the
/// limiter's own clock and call them.
///
/// # Contract (for every implementation)
///
/// - `n == 0` succeeds and changes nothing.
/// - `n > capacity()` is [`Denied::ExceedsCapacity`] and consumes nothing. The capacity is
///   the quota's burst for every limiter in this crate (the window limiters refuse a quota
///   whose burst is not its count, so nothing of a quota is ever ignored).
/// - A denial never changes the state.
/// - [`Denied::RateLimited`]'s `retry_after` is exact: waiting exactly that long and asking
///   again succeeds (if nothing else consumed meanwhile); asking any earlier fails.
/// - No permit is created by a race: with a frozen clock, any number of threads share
///   exactly the limiter's capacity.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter, TokenBucket};
///
/// let quota = Quota::per_second(100)?;
/// let limiter: Box<dyn RateLimiter> = if std::env::args().count() > 99 {
///     Box::new(TokenBucket::new(quota)?)
/// } else {
///     Box::new(Gcra::new(quota)?)
/// };
/// assert!(limiter.try_acquire().is_ok());
/// assert_eq!(limiter.capacity(), 100);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "[crate::Algorithm::limiter]: https://docs.rs/limitcore/latest/limitcore/enum.Algorithm.html#method.limiter"
)]
pub trait RateLimiter: Send + Sync {
    /// Decide a request for `n` permits at the explicit time `now`, in nanoseconds of the
    /// limiter's clock (for a caller that already holds the request's arrival time, or a
    /// replay driving trace time).
    ///
    /// # Errors
    ///
    /// [`Denied`] as described in the trait's contract.
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied>;

    /// As [`RateLimiter::try_acquire_n_at`], returning the state the decision left with it
    /// (read in the same step, not by a second look).
    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision;

    /// The current time of the limiter's clock, in nanoseconds since its epoch.
    fn now(&self) -> Nanos;

    /// The state at `now`, consuming nothing.
    fn snapshot_at(&self, now: Nanos) -> Snapshot;

    /// The quota the limiter enforces.
    fn quota(&self) -> Quota;

    /// The most permits one request can take; more is [`Denied::ExceedsCapacity`]. The
    /// quota's burst.
    #[inline]
    fn capacity(&self) -> u32 {
        self.quota().burst()
    }

    /// Decide a request for `n` permits now.
    ///
    /// # Errors
    ///
    /// [`Denied`] as described in the trait's contract.
    #[inline]
    fn try_acquire_n(&self, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(n, self.now())
    }

    /// Decide a request for one permit now.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] when no permit is available yet.
    #[inline]
    fn try_acquire(&self) -> Result<(), Denied> {
        self.try_acquire_n(1)
    }

    /// Decide a request for `n` permits now, with the state it left.
    #[inline]
    fn decide_n(&self, n: u32) -> Decision {
        self.decide_n_at(n, self.now())
    }

    /// The state now, consuming nothing.
    #[inline]
    fn snapshot(&self) -> Snapshot {
        self.snapshot_at(self.now())
    }

    /// How a waiter for this limiter's clock to reach `deadline` (ns) should sleep: the
    /// clock's own answer ([`Clock::sleep_hint`](crate::clock::Clock::sleep_hint)), so that
    /// the waits built on any limiter ([`wait`](crate::wait), the I/O adapters) follow its
    /// clock: on a [`ManualClock`](crate::clock::ManualClock) they sleep until it is moved.
    /// The provided version is for limiters on an OS clock (the rest of the wait on the OS
    /// timer, from [`RateLimiter::now`]); the crate's limiters answer with their clock's.
    #[cfg(feature = "std")]
    fn sleep_hint(
        &self,
        deadline: Nanos,
        waker: &core::task::Waker,
    ) -> crate::clock::SleepHint {
        let _ = waker; // the OS timer wakes the sleeper
        match deadline.checked_sub(self.now()) {
            Some(left) if left > 0 => crate::clock::SleepHint::Sleep(Duration::from_nanos(left)),
            _ => crate::clock::SleepHint::Reached,
        }
    }
}

/// Limiters whose admissions can be given back without ever creating a permit, so that
/// several limits can be combined all or nothing ([`All`](crate::All)).
///
/// Every limiter of this crate implements it: the single-word ones and the sliding log
/// through their rule's refund (each [`rules`](crate::rules) type documents its own,
/// and why it never makes the state more permissive than if the admission had not
/// happened), and [`SlidingWindow`](crate::SlidingWindow) by returning the permits to a
/// per-CPU lease (they stay counted in its global word, so its bound is unchanged).
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter, Refund};
/// use limitcore::clock::ManualClock;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?;
/// let receipt = limiter.acquire_refundable_at(2, 0)?;
/// assert!(limiter.try_acquire_n_at(1, 0).is_err());
/// limiter.refund(receipt, 0);                     // exact at the admission's own time
/// assert!(limiter.try_acquire_n_at(2, 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Refund: RateLimiter {
    /// Decide `n` permits at `now` like `try_acquire_n_at`, returning what to give back.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n_at`].
    fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied>;

    /// As [`Refund::acquire_refundable_at`], with the state the decision left.
    fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot);

    /// Give back the admission on `receipt` at time `at` (ns, at or after the admission's
    /// time): never more permissive than if it had not happened, exact at its own time.
    fn refund(&self, receipt: Receipt, at: Nanos);

    /// The answer `n` permits would get at `now`, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n_at`].
    fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied>;
}

/// One limit per key (a client address, a tenant, an API key): the keyed form of
/// [`RateLimiter`], implemented by [`Keyed`][crate::Keyed] (one state per key),
/// [`KeyedSketch`][crate::KeyedSketch] (a count-min sketch in fixed memory) and
/// [`Global`][crate::Global] (one limiter applied to every key), so that code (an HTTP
/// layer, a combination in [`All`](crate::All)) can be written once over any of them.
///
/// `K` is the type a key is *looked up* by, so it may be unsized: a `Keyed<String>`
/// implements `KeyedRateLimiter<str>`, and is queried with a `&str`.
///
/// # Contract
///
/// Per key, [`RateLimiter`]'s contract (with `quota_for(key)`'s capacity); each
/// implementation documents what it adds (eviction, sketch collisions).
///
/// # Examples
///
/// ```
/// use limitcore::{Global, Gcra, Keyed, KeyedRateLimiter, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// fn admitted(limit: &dyn KeyedRateLimiter<str>, keys: &[&str]) -> usize {
///     keys.iter().filter(|k| limit.try_acquire(k).is_ok()).count()
/// }
///
/// let clock = ManualClock::new();
/// let per_client: Keyed<String, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(1)?, clock.clone())?;
/// let everyone = Global::new(Gcra::with_clock(Quota::per_second(2)?, clock)?);
/// assert_eq!(admitted(&per_client, &["a", "b", "a"]), 2);
/// assert_eq!(admitted(&everyone, &["a", "b", "a"]), 2);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(
    not(feature = "keyed"),
    doc = "",
    doc = "[crate::Global]: https://docs.rs/limitcore/latest/limitcore/struct.Global.html"
)]
#[cfg_attr(
    not(feature = "keyed"),
    doc = "",
    doc = "[crate::Keyed]: https://docs.rs/limitcore/latest/limitcore/struct.Keyed.html"
)]
#[cfg_attr(
    not(feature = "keyed"),
    doc = "",
    doc = "[crate::KeyedSketch]: https://docs.rs/limitcore/latest/limitcore/struct.KeyedSketch.html"
)]
pub trait KeyedRateLimiter<K: ?Sized>: Send + Sync {
    /// Decide `n` permits for `key` at the explicit time `now` (ns of the limiter's clock).
    ///
    /// # Errors
    ///
    /// [`Denied`] as for [`RateLimiter::try_acquire_n_at`], for this key.
    fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied>;

    /// As [`KeyedRateLimiter::try_acquire_n_at`], with the state the decision left for
    /// this key, read in the same step.
    fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision;

    /// The state of `key` at `now`, consuming nothing (a fresh state for a key never seen).
    fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot;

    /// The quota that applies to `key` (its own, or the default).
    fn quota_for(&self, key: &K) -> Quota;

    /// The current time of the limiter's clock, ns since its epoch.
    fn now(&self) -> Nanos;

    /// Decide `n` permits for `key` now.
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::try_acquire_n_at`].
    #[inline]
    fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(key, n, self.now())
    }

    /// Decide one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::try_acquire_n_at`].
    #[inline]
    fn try_acquire(&self, key: &K) -> Result<(), Denied> {
        self.try_acquire_n(key, 1)
    }

    /// Decide `n` permits for `key` now, with the state it left.
    #[inline]
    fn decide_n(&self, key: &K, n: u32) -> Decision {
        self.decide_n_at(key, n, self.now())
    }

    /// The state of `key` now, consuming nothing.
    #[inline]
    fn snapshot(&self, key: &K) -> Snapshot {
        self.snapshot_at(key, self.now())
    }
}

/// The keyed form of [`Refund`]: admissions for a key that can be given back, so that keyed
/// and global limits combine all or nothing in [`All`](crate::All).
///
/// # Examples
///
/// ```
/// use limitcore::{Keyed, KeyedRateLimiter, KeyedRefund, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let per_client: Keyed<u32, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(1)?, ManualClock::new())?;
/// let receipt = per_client.acquire_refundable_at(&7, 1, 0)?;
/// per_client.refund(&7, receipt, 0);
/// assert!(per_client.try_acquire_n_at(&7, 1, 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyedRefund<K: ?Sized>: KeyedRateLimiter<K> {
    /// Decide `n` permits for `key` at `now`, returning what to give back.
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::try_acquire_n_at`].
    fn acquire_refundable_at(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied>;

    /// As [`KeyedRefund::acquire_refundable_at`], with the state the decision left.
    fn decide_refundable_at(
        &self,
        key: &K,
        n: u32,
        now: Nanos,
    ) -> (Result<Receipt, Denied>, Snapshot);

    /// Give back `key`'s admission on `receipt` at time `at` (see [`Refund::refund`]).
    fn refund(&self, key: &K, receipt: Receipt, at: Nanos);

    /// The answer `n` permits for `key` would get at `now`, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::try_acquire_n_at`].
    fn check_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied>;
}

/// The four traits for a pointer to a limiter (`&L`, `Box<L>`, `Arc<L>`), so that shared
/// and boxed limiters (`Arc<Gcra>`, `Box<dyn Refund>`) combine like owned ones.
macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<L: RateLimiter + ?Sized> RateLimiter for $ptr {
            #[inline]
            fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
                (**self).try_acquire_n_at(n, now)
            }
            #[inline]
            fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
                (**self).decide_n_at(n, now)
            }
            #[inline]
            fn now(&self) -> Nanos {
                (**self).now()
            }
            fn snapshot_at(&self, now: Nanos) -> Snapshot {
                (**self).snapshot_at(now)
            }
            fn quota(&self) -> Quota {
                (**self).quota()
            }
            fn capacity(&self) -> u32 {
                (**self).capacity()
            }
            #[cfg(feature = "std")]
            fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
                (**self).sleep_hint(deadline, waker)
            }
        }

        impl<L: Refund + ?Sized> Refund for $ptr {
            #[inline]
            fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
                (**self).acquire_refundable_at(n, now)
            }
            fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
                (**self).decide_refundable_at(n, now)
            }
            fn refund(&self, receipt: Receipt, at: Nanos) {
                (**self).refund(receipt, at)
            }
            fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
                (**self).check_at(n, now)
            }
        }

        impl<K: ?Sized, L: KeyedRateLimiter<K> + ?Sized> KeyedRateLimiter<K> for $ptr {
            #[inline]
            fn try_acquire_n_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
                (**self).try_acquire_n_at(key, n, now)
            }
            #[inline]
            fn decide_n_at(&self, key: &K, n: u32, now: Nanos) -> Decision {
                (**self).decide_n_at(key, n, now)
            }
            fn snapshot_at(&self, key: &K, now: Nanos) -> Snapshot {
                (**self).snapshot_at(key, now)
            }
            fn quota_for(&self, key: &K) -> Quota {
                (**self).quota_for(key)
            }
            #[inline]
            fn now(&self) -> Nanos {
                (**self).now()
            }
        }

        impl<K: ?Sized, L: KeyedRefund<K> + ?Sized> KeyedRefund<K> for $ptr {
            #[inline]
            fn acquire_refundable_at(&self, key: &K, n: u32, now: Nanos) -> Result<Receipt, Denied> {
                (**self).acquire_refundable_at(key, n, now)
            }
            fn decide_refundable_at(&self, key: &K, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
                (**self).decide_refundable_at(key, n, now)
            }
            fn refund(&self, key: &K, receipt: Receipt, at: Nanos) {
                (**self).refund(key, receipt, at)
            }
            fn check_at(&self, key: &K, n: u32, now: Nanos) -> Result<(), Denied> {
                (**self).check_at(key, n, now)
            }
        }
    )*};
}
forward!(&L, Box<L>, Arc<L>);
