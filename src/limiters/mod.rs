//! Layer 2, the shells: a rule's state shared between threads.
//!
//! [`Limiter<R, C>`](Limiter) is the one shell every single-state limiter is: a
//! [`Rule`](crate::rules::Rule) `R`, its state in a cell (one `AtomicU64` updated by the
//! crate's one compare-and-swap loop, or the sliding log's ring behind a mutex), and a
//! clock `C`. The limiters are its aliases, in the way `parking_lot`'s `Mutex<T>` is
//! `lock_api::Mutex<RawMutex, T>`:
//!
//! | alias | rule |
//! |---|---|
//! | [`Gcra`] | [`GcraRule`] |
//! | [`TokenBucket`] | [`TokenBucketRule`] |
//! | [`FixedWindow`] | [`FixedWindowRule`] |
//! | [`LeakyBucket`] | [`LeakyBucketRule`] |
//! | [`SlidingLog`] | [`SlidingLogRule`] |
//!
//! [`SlidingWindow`] is the one shell of its own: its counts are leased to per-CPU shards.

mod reservation;
mod rule_cell;
mod sliding_window;

pub use reservation::{KeyedReserve, Reservation, Reserve};
pub use rule_cell::RuleCell;
pub use sliding_window::SlidingWindow;

use crate::clock::{Clock, DefaultClock, Nanos};
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::limiter::{RateLimiter, Refund};
use crate::quota::{Quota, QuotaError};
#[cfg(feature = "std")]
use crate::rules::SlidingLogRule;
use crate::rules::{
    FixedWindowRule, GcraRule, LeakyBucketRule, ReserveRule, Rule, TokenBucketRule,
};
use core::fmt;
use core::time::Duration;

/// A rate limiter: the rule `R` applied to one shared state, reading time from the clock
/// `C`. Every single-state limiter of the crate is this type under a name ([`Gcra`],
/// [`TokenBucket`], [`FixedWindow`], [`LeakyBucket`], [`SlidingLog`]); a rule of your own
/// with a `u64` state gets the same lock-free shell.
///
/// # Contract
///
/// [`RateLimiter`]'s, with the rule's decisions: a fresh limiter admits the quota's burst at
/// once and idle time never yields more; `retry_after` is exact and inclusive; `n == 0`
/// succeeds without change; `n > capacity` is [`Denied::ExceedsCapacity`]; a denial never
/// writes; no permit is created by a race (every update is one compare-and-swap loop over
/// the whole state, or one critical section for the sliding log), so with a frozen clock
/// any number of threads are admitted exactly the capacity in total; a stale or backwards
/// clock reading only makes a decision stricter.
///
/// # Examples
///
/// ```
/// use limitcore::{Limiter, Quota, RateLimiter};
/// use limitcore::rules::GcraRule;
/// use limitcore::clock::ManualClock;
///
/// // `Gcra<ManualClock>` is this type.
/// let limiter: Limiter<GcraRule, ManualClock> =
///     Limiter::with_clock(Quota::per_second(5)?, ManualClock::new())?;
/// assert!(limiter.try_acquire_n(5).is_ok());
/// assert!(limiter.try_acquire().is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct Limiter<R: Rule, C = DefaultClock> {
    cell: RuleCell<R>,
    clock: C,
}

impl<R: Rule, C: fmt::Debug> fmt::Debug for Limiter<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("cell", &self.cell)
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(feature = "std")]
impl<R: Rule> Limiter<R, DefaultClock> {
    /// A fresh limiter for `quota` on the default clock,
    /// [`MonotonicClock`](crate::clock::MonotonicClock).
    ///
    /// # Errors
    ///
    /// The rule's [`QuotaError`] for this quota ([`Rule::new`]; each rule lists its limits).
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Limiter::with_clock(quota, DefaultClock::new())
    }
}

impl<R: Rule, C: Clock> Limiter<R, C> {
    /// A fresh limiter for `quota` reading time from `clock`.
    ///
    /// # Errors
    ///
    /// The rule's [`QuotaError`] for this quota ([`Rule::new`]; each rule lists its limits).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Ok(Limiter::from_rule(R::new(&quota)?, clock))
    }

    /// A fresh limiter applying `rule`, reading time from `clock`.
    pub fn from_rule(rule: R, clock: C) -> Self {
        Limiter {
            cell: RuleCell::new(rule),
            clock,
        }
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The rule this limiter applies.
    #[inline]
    pub fn rule(&self) -> &R {
        self.cell.rule()
    }

    /// The state cell: the rule and its state, decided at explicit times.
    pub fn cell(&self) -> &RuleCell<R> {
        &self.cell
    }

    /// A copy of the current state (for the sliding log, a copy of its ring).
    pub fn state(&self) -> R::State {
        self.cell.state()
    }

    /// Apply a transition of your own to the state, through the same compare-and-swap loop
    /// (or lock) as every decision (see [`RuleCell::update`]).
    ///
    /// # Errors
    ///
    /// The `E` of the attempt that was not applied.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Limiter, Quota, RateLimiter};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::GcraRule;
    ///
    /// let limiter: Limiter<GcraRule, ManualClock> = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new())?;
    /// // Push the TAT 5 s ahead, unless it is already further.
    /// let moved = limiter.update(|tat| if *tat < 5_000_000_000 { *tat = 5_000_000_000; Ok(()) } else { Err(()) });
    /// assert_eq!(moved, Ok(()));
    /// assert!(limiter.try_acquire().is_err());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[inline]
    pub fn update<T, E>(&self, f: impl Fn(&mut R::State) -> Result<T, E>) -> Result<T, E> {
        self.cell.update(f)
    }
}

impl<C: Clock> Limiter<GcraRule, C> {
    /// The current theoretical arrival time, ns since the clock's epoch (0 when fresh).
    pub fn tat(&self) -> Nanos {
        self.state()
    }
}

impl<R: Rule, C: Clock> RateLimiter for Limiter<R, C> {
    // Always inlined: the caller often looks only at `is_ok()`, and inlined, the refusal's
    // `retry_after` (a division) is never computed for it.
    #[inline(always)]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.cell.try_acquire_n_at(n, now)
    }

    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        self.cell.decide_at(n, now)
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.cell.snapshot_at(now)
    }

    fn quota(&self) -> Quota {
        self.rule().quota()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.rule().capacity()
    }

    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
        self.clock.sleep_hint(deadline, waker)
    }
}

impl<R: Rule, C: Clock> Refund for Limiter<R, C> {
    #[inline]
    fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.cell.acquire_refundable_at(n, now)
    }

    fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        self.cell.decide_refundable_at(n, now)
    }

    fn refund(&self, receipt: Receipt, at: Nanos) {
        self.cell.refund(receipt, at);
    }

    fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.cell.check_at(n, now)
    }

    #[inline(always)]
    fn charge_at(&self, n: u32, now: Nanos) -> Charged {
        self.cell.charge_at(n, now)
    }

    #[inline(always)]
    fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        self.cell.settle(receipt, actual, at)
    }

    fn credit(&self, n: u32, at: Nanos) {
        self.cell.credit(n, at);
    }
}

impl<R: ReserveRule, C: Clock> Reserve for Limiter<R, C> {
    #[inline]
    fn reserve_n_at(&self, n: u32, now: Nanos, max_wait: Duration) -> Result<Reservation, Denied> {
        self.cell.reserve_n_at(n, now, max_wait)
    }
}

/// The Generic Cell Rate Algorithm (ATM Forum TM 4.0): a lock-free limiter whose whole
/// state is one `AtomicU64`, the *theoretical arrival time* (TAT); [`GcraRule`] in the
/// [`Limiter`] shell.
///
/// # Contract
///
/// - A fresh limiter admits `burst` permits at once; idle time never yields more than `burst`.
/// - A request for `n` permits at `now` is admitted iff `max(TAT, now) + n·T ≤ now + burst·T`
///   (T = emission interval); the TAT then becomes `max(TAT, now) + n·T`.
/// - Boundaries are inclusive: after a denial, waiting exactly `retry_after` and asking
///   again succeeds; asking one nanosecond earlier fails.
/// - `n == 0` succeeds and changes nothing; `n > burst` is [`Denied::ExceedsCapacity`].
/// - A denial never writes. The TAT never moves backwards, so a stale or backwards clock
///   reading can only make a decision stricter, never admit more.
/// - No permit is created by a race: the transition is applied by one CAS loop, so with a
///   frozen clock any number of threads are admitted exactly `burst` permits in total.
/// - In any half-open window of length `w` it admits at most `burst + ⌈w / T⌉ − 1` permits
///   (`2·burst − 1` for `w = period` with the default burst); where "at most N in any
///   window" is the contract, use a [`SlidingLog`] instead.
///
/// # Overflow
///
/// `n·T` cannot overflow (`n ≤ burst` and `burst·T ≤ 2^62` by [`Quota`]'s limits), so a
/// quota of 1 per day with burst 10 refuses `n = 213 505` with `ExceedsCapacity` instead of
/// wrapping into an admission. A request whose TAT would pass `u64::MAX` ns (possible only
/// within one burst span of the clock's 584-year horizon) can never conform and is refused
/// with [`Denied::BeyondHorizon`].
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = Gcra::with_clock(Quota::per_second(10)?.with_burst(2)?, clock.clone())?;
/// assert!(limiter.try_acquire().is_ok());
/// assert!(limiter.try_acquire().is_ok());
/// let wait = limiter.try_acquire().unwrap_err().retry_after().unwrap();
/// assert_eq!(wait, Duration::from_millis(100));
/// clock.advance(wait);
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type Gcra<C = DefaultClock> = Limiter<GcraRule, C>;

/// A token bucket whose tokens and last refill time share one `AtomicU64`, so that refill
/// and consumption are one compare-and-swap (never two atomics); [`TokenBucketRule`] in the
/// [`Limiter`] shell.
///
/// Its decisions are **exactly** [`Gcra`]'s on the same quota and input (checked
/// differentially) within the time window [`TokenBucketRule`] documents ("Time field");
/// prefer `Gcra` if you have no reason to think in tokens.
///
/// # Contract
///
/// As [`RateLimiter`]: a fresh bucket admits `burst` at once, idle time never yields more;
/// inclusive boundaries with exact `retry_after`; `n == 0` succeeds without change; `n >
/// burst` is [`Denied::ExceedsCapacity`]; denials never write; no permit is created by a
/// race (one CAS loop applies the transition).
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, RateLimiter, TokenBucket};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let bucket = TokenBucket::with_clock(Quota::per_second(4)?, clock.clone())?;
/// bucket.try_acquire_n(4).unwrap();
/// clock.advance(Duration::from_millis(375)); // 1.5 tokens' worth
/// assert_eq!(bucket.snapshot().remaining, 1);
/// bucket.try_acquire().unwrap();
/// // The half token already accrued is not lost: only 125 ms more for the next one.
/// assert_eq!(bucket.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(125)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type TokenBucket<C = DefaultClock> = Limiter<TokenBucketRule, C>;

/// A fixed-window counter: at most `count` permits in each window
/// `[k·period, (k+1)·period)` of the clock's timeline, window number and count in one
/// `AtomicU64`; [`FixedWindowRule`] in the [`Limiter`] shell.
///
/// **Known weakness:** the windows are aligned, so a client can take `count` at the end of
/// one window and `count` again at the start of the next: up to `2·count` within one period.
/// Use [`Gcra`] for a smooth rate or a [`SlidingLog`] where "at most N in any window" is the
/// contract. A window has no burst: a quota whose burst is not its count is refused
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Contract
///
/// `retry_after` is the exact time until the window ends (inclusive). `n == 0` succeeds
/// without change; `n > count` is [`Denied::ExceedsCapacity`]; denials never write; no race
/// creates a permit.
///
/// # Examples
///
/// ```
/// use limitcore::{FixedWindow, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = FixedWindow::with_clock(Quota::per_second(3)?, clock.clone())?;
/// clock.advance(Duration::from_millis(900));
/// limiter.try_acquire_n(3).unwrap();
/// assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// clock.advance(Duration::from_millis(100)); // the next window: 3 more at once
/// limiter.try_acquire_n(3).unwrap();
/// // "100/s burst 10" has a burst a window cannot honour: refused, not ignored.
/// assert!(FixedWindow::with_clock("100/s burst 10".parse()?, clock).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type FixedWindow<C = DefaultClock> = Limiter<FixedWindowRule, C>;

/// A pacer (the leaky bucket as a queue): admitted requests start exactly one emission
/// interval `T = period / count` apart, in the order they were reserved, and a request is
/// refused when it would end more than `capacity` (the quota's burst) slots from now;
/// [`LeakyBucketRule`] in the [`Limiter`] shell.
///
/// # Contract
///
/// - [`Reserve::reserve_n`] gives `n` permits the `n` slots starting at
///   `start = max(drain time, now)`, with `delay = start − now`, if
///   `start + n·T − now ≤ capacity·T`; otherwise it refuses with the exact `retry_after`
///   after which it would fit. A refusal writes nothing.
/// - [`RateLimiter::try_acquire_n`] admits only a request that can start *now*
///   (delay 0): smooth output, no bursts. `retry_after` is the exact time until the queue
///   drains.
/// - `n == 0` succeeds without change; `n > capacity` is [`Denied::ExceedsCapacity`].
///
/// # Examples
///
/// ```
/// use limitcore::{LeakyBucket, Quota, RateLimiter, Reserve};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// // 10 per second, at most 3 queued.
/// let pacer = LeakyBucket::with_clock(Quota::per_second(10)?.with_burst(3)?, clock.clone())?;
/// for expected in [0, 100, 200] {
///     assert_eq!(pacer.reserve_n(1).unwrap().delay(), Duration::from_millis(expected));
/// }
/// assert_eq!(pacer.reserve_n(1).unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// // Nothing can start now: the queue drains at 300 ms.
/// assert_eq!(pacer.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(300)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type LeakyBucket<C = DefaultClock> = Limiter<LeakyBucketRule, C>;

/// The exact sliding log: at most `count` permits in **any** half-open window of length
/// `period`, under any interleaving of threads; [`SlidingLogRule`] in the [`Limiter`]
/// shell (feature `std`).
///
/// It records the time of each of the last `count` admitted permits in a ring (8 bytes
/// each, so memory is `8·count` bytes, allocated up front).
///
/// # When to use GCRA instead
///
/// [`Gcra`] needs 8 bytes whatever the count and never takes a lock, but with burst `b` it
/// admits up to `2·b − 1` permits in one window of length `period`. Use the sliding log
/// when the contract you must keep is literally "at most N in any interval T" (an upstream
/// API's documented limit, say), and GCRA otherwise.
///
/// # Concurrency
///
/// This is the crate's one limiter with a lock: an exact log is several words that must
/// change together, so the ring sits behind a mutex (`std::sync::Mutex`; loom's under
/// `--cfg limitcore_loom`). The critical section is a few comparisons and `n` stores.
///
/// # Contract
///
/// `retry_after` is exact and inclusive. `n == 0` succeeds without change; `n > count` is
/// [`Denied::ExceedsCapacity`]; denials record nothing. A window has no burst: a quota
/// whose burst is not its count is refused ([`QuotaError::BurstNotSupported`]).
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, RateLimiter, SlidingLog};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let log = SlidingLog::with_clock("2/s".parse()?, clock.clone())?;
/// log.try_acquire().unwrap();                       // t = 0
/// clock.advance(Duration::from_millis(900));
/// log.try_acquire().unwrap();                       // t = 0.9 s
/// clock.advance(Duration::from_millis(200));        // t = 1.1 s: the first left the window
/// log.try_acquire().unwrap();
/// // The one at 0.9 s leaves at 1.9 s.
/// assert_eq!(log.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(800)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub type SlidingLog<C = DefaultClock> = Limiter<SlidingLogRule, C>;
