//! The traits every limiter implements ([`RateLimiter`], [`KeyedRateLimiter`], and their
//! refundable forms [`Refund`], [`KeyedRefund`]), in the decision vocabulary of
//! [`decision`](crate::decision) ([`Denied`], [`Snapshot`], [`Decision`], [`Receipt`]).

use crate::clock::Nanos;
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::quota::Quota;
use alloc::boxed::Box;
use alloc::sync::Arc;

/// A rate limiter: every algorithm in this crate implements it.
///
/// The trait is dyn-compatible, so `Box<dyn RateLimiter>` can pick the algorithm at run
/// time ([`Algorithm::limiter`][crate::Algorithm::limiter] builds one from its name).
/// `try_acquire_n_at` and `decide_n_at` are the decisions; the other methods read the
/// limiter's own clock and call them.
///
/// # Contract (for every implementation)
///
/// - `n == 0` changes nothing, and succeeds unless a charge ([`Refund::charge_at`]) left
///   the limiter in debt: then it is refused with the wait until the debt is paid back (a
///   check with no cost: Envoy's `hits_addend: 0`). A limiter that was never charged past
///   its limit always admits it.
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
    // Always inlined, as the shells' `try_acquire_n_at` it forwards to: a caller that
    // decides from several places would otherwise get a call and a refusal returned
    // through memory (measured: 9 instructions of a GCRA decision, BENCHMARKS.md issue 28).
    #[inline(always)]
    fn try_acquire_n(&self, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(n, self.now())
    }

    /// Decide a request for one permit now.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] when no permit is available yet.
    // Always inlined: see `try_acquire_n`.
    #[inline(always)]
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
    fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
        let _ = waker; // the OS timer wakes the sleeper
        match deadline.checked_sub(self.now()) {
            Some(left) if left > 0 => {
                crate::clock::SleepHint::Sleep(core::time::Duration::from_nanos(left))
            }
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

    /// Charge `n` permits at `now`, never refused: usage measured after the work (an LLM
    /// response's tokens, the bytes a read took), recorded even past the limit, so that the
    /// limiter is in debt and every later request, one for no permits included, is refused
    /// until the debt is paid back at the rate (a window: until it ends). What the
    /// limiter's state cannot hold is reported as [`Charged::shortfall`], never dropped
    /// silently; each limiter documents what it holds.
    ///
    /// Never more permissive than admitting the same permits: a charge decides every later
    /// request at least as strictly as an admission of `n` would have.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Algorithm, Quota, Refund, RateLimiter};
    /// use limitcore::clock::ManualClock;
    ///
    /// let quota: Quota = "1000/min".parse()?;
    /// let limiter = Algorithm::SlidingLog.limiter(quota, ManualClock::new())?;
    /// limiter.charge_at(900, 0);                         // tokens of finished responses
    /// assert!(limiter.try_acquire_n_at(0, 0).is_ok());   // 900 of 1000: the check passes
    /// limiter.charge_at(200, 0);                         // 1,100: past the limit
    /// assert!(limiter.try_acquire_n_at(0, 0).is_err()); // refused until they leave
    /// assert!(limiter.try_acquire_n_at(0, 60_000_000_000).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn charge_at(&self, n: u32, now: Nanos) -> Charged;

    /// Settle the reservation on `receipt` (an admission of an estimate) to its actual
    /// cost `actual` at `at` (ns, at or after the admission), exactly once (the receipt is
    /// consumed): `actual` below the estimate gives the difference back as a refund of the
    /// unused permits (at most what was reserved, never more permissive than having
    /// charged `actual` up front), above it charges the excess at `at`
    /// ([`Refund::charge_at`], into debt). Reserve-then-settle never overshoots a limit
    /// the way check-then-report does: the estimate is held while the work runs.
    ///
    /// Returns the excess charge's report ([`Charged::charged`] 0 when `actual` was at most
    /// the estimate), with the wait a request for one permit now faces.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Gcra, Quota, RateLimiter, Refund};
    /// use limitcore::clock::ManualClock;
    ///
    /// let tokens = Gcra::with_clock("1000/min".parse()?, ManualClock::new())?;
    /// let estimate = tokens.acquire_refundable_at(100, 0)?;   // reserve 100 tokens
    /// let settled = tokens.settle(estimate, 30, 0);            // the response used 30
    /// assert_eq!(settled.charged, 0);
    /// assert_eq!(tokens.snapshot_at(0).remaining, 970);
    /// let estimate = tokens.acquire_refundable_at(100, 0)?;
    /// let settled = tokens.settle(estimate, 1_200, 0);         // and this one 1,200: debt
    /// assert_eq!(settled.charged, 1_100);
    /// assert!(tokens.try_acquire_n_at(0, 0).is_err());         // refused until paid back
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged;

    /// Give back up to `n` permits at `at` that no receipt names, never past a full state:
    /// a caller's own accounting (Envoy's negative hits). Unlike [`Refund::refund`] it can
    /// make the limiter more permissive than its admissions alone, by at most `n` permits:
    /// the caller asserts they were over-counted. Each limiter documents what it gives back
    /// (a window, nothing from a saturated count; a sliding log over its limit, nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Gcra, Quota, RateLimiter, Refund};
    /// use limitcore::clock::ManualClock;
    ///
    /// let limiter = Gcra::with_clock("10/s".parse()?, ManualClock::new())?;
    /// limiter.try_acquire_n_at(4, 0)?;
    /// limiter.credit(3, 0);                              // 3 of them were not used
    /// assert_eq!(limiter.snapshot_at(0).remaining, 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn credit(&self, n: u32, at: Nanos);
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
    // Always inlined, as `RateLimiter::try_acquire_n`.
    #[inline(always)]
    fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), Denied> {
        self.try_acquire_n_at(key, n, self.now())
    }

    /// Decide one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::try_acquire_n_at`].
    #[inline(always)]
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

    /// Charge `n` permits to `key` at `now`, never refused (see [`Refund::charge_at`]). A key
    /// in debt is not idle, so eviction never forgives it.
    fn charge_at(&self, key: &K, n: u32, now: Nanos) -> Charged;

    /// Settle `key`'s reservation on `receipt` to its actual cost (see [`Refund::settle`]).
    fn settle(&self, key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged;

    /// Give back up to `n` of `key`'s permits that no receipt names (see
    /// [`Refund::credit`]).
    fn credit(&self, key: &K, n: u32, at: Nanos);
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
            fn charge_at(&self, n: u32, now: Nanos) -> Charged {
                (**self).charge_at(n, now)
            }
            fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
                (**self).settle(receipt, actual, at)
            }
            fn credit(&self, n: u32, at: Nanos) {
                (**self).credit(n, at)
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
            fn charge_at(&self, key: &K, n: u32, now: Nanos) -> Charged {
                (**self).charge_at(key, n, now)
            }
            fn settle(&self, key: &K, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
                (**self).settle(key, receipt, actual, at)
            }
            fn credit(&self, key: &K, n: u32, at: Nanos) {
                (**self).credit(key, n, at)
            }
        }
    )*};
}
forward!(&L, Box<L>, Arc<L>);
