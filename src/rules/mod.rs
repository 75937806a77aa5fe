//! Layer 1, the rules: each algorithm's arithmetic as a pure function from (old state, now,
//! request) to (new state, receipt) or a denial, with no atomics, no clock and no locks.
//!
//! Every limiter in the crate is one of these rules inside a shell of layer 2
//! ([`Limiter`](crate::Limiter), which applies a rule to its state with one compare-and-swap
//! loop, or under a lock for the sliding log's ring), and the composites of layer 3
//! ([`Keyed`][crate::Keyed], [`All`](crate::All)) are written once over [`Rule`]. A rule can
//! be tested on its own, by hand, against the plain models in
//! [`reference`](crate::reference).
//!
//! | rule | state | source |
//! |---|---|---|
//! | [`GcraRule`] | one `u64`: the theoretical arrival time (TAT) | ATM Forum TM 4.0, §4.4.2 and Annex C |
//! | [`LeakyBucketRule`] | one `u64`: when the queue drains (the same TAT) | Tanenbaum, *Computer Networks*, 3rd ed., §5.3.4 |
//! | [`TokenBucketRule`] | one `u64`: tokens and last refill time | Turner 1986; GCRA's dual |
//! | [`FixedWindowRule`] | one `u64`: window number and permits used | — |
//! | [`SlidingWindowRule`] | one `u64`: window number and two counts | Cloudflare 2017 |
//! | [`SlidingLogRule`] | a ring of the last `count` admission times ([`Log`]) | — |
//!
//! # Examples
//!
//! A rule decides on a state it is handed, and changes it only when it admits:
//!
//! ```
//! use limitcore::rules::{GcraRule, Rule};
//! use limitcore::Quota;
//!
//! let rule = GcraRule::new(&Quota::per_second(10)?.with_burst(2)?)?;
//! let mut tat = rule.fresh();
//! rule.take(&mut tat, 0, 2).unwrap();             // the whole burst at t = 0
//! assert_eq!(tat, 200_000_000);                   // TAT: two emission intervals ahead
//! let denied = rule.take(&mut tat, 0, 1).unwrap_err();
//! assert_eq!(denied.retry_after().unwrap().as_millis(), 100);
//! assert_eq!(tat, 200_000_000);                   // a denial writes nothing
//! # Ok::<(), limitcore::QuotaError>(())
//! ```

mod fixed_window;
mod gcra;
#[cfg(feature = "std")]
mod sliding_log;
mod sliding_window;
mod token_bucket;

pub use fixed_window::FixedWindowRule;
pub use gcra::{GcraRule, LeakyBucketRule, TatRule};
#[cfg(feature = "std")]
pub use sliding_log::{Log, SlidingLogRule};
pub use sliding_window::SlidingWindowRule;
pub use token_bucket::TokenBucketRule;

pub(crate) use gcra::Schedule;
pub(crate) use sliding_window::Counter;
#[cfg(feature = "keyed")]
pub(crate) use sliding_window::Window;

pub use crate::decision::Receipt;

use crate::cell::Shared;
use crate::clock::Nanos;
use crate::decision::{Denied, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::fmt;

/// A rate rule: the pure transitions of one algorithm for one [`Quota`].
///
/// The state is a plain value ([`Rule::State`]): one `u64` word for every rule but the
/// sliding log, whose state is its ring of admission times. A shell shares the state
/// between threads and applies these functions to it atomically; the rule itself knows
/// nothing of threads or clocks, and every time is an argument, in nanoseconds on the
/// caller's clock.
///
/// # Contract (for every implementation)
///
/// - [`Rule::take`] is called only with `1 ≤ n ≤ capacity()` (the shells answer `n = 0` and
///   `n > capacity()` themselves). It changes `state` only when it admits; a denial leaves
///   it exactly as it was. It may be called several times on different states for one
///   request (once per compare-and-swap attempt), so it must not have side effects.
/// - `retry_after` is exact and inclusive: from `state`, the same request at
///   `now + retry_after` is admitted and at any earlier time refused; a request that can
///   never be admitted within the clock's 584-year range is [`Denied::BeyondHorizon`].
/// - A reading `now` behind the state's own time (a stale or backwards clock) is decided at
///   least as strictly as a reading at the state's time: it never admits more.
/// - [`Rule::refund`] never makes the state more permissive than if the admission on the
///   receipt had not happened (see each rule's "Refund").
///
/// # Examples
///
/// Code generic over the rule, here a differential check of two rules on one history:
///
/// ```
/// use limitcore::rules::{GcraRule, Rule, TokenBucketRule};
/// use limitcore::Quota;
///
/// fn admitted<R: Rule>(quota: &Quota, times: &[u64]) -> Vec<bool> {
///     let rule = R::new(quota).unwrap();
///     let mut state = rule.fresh();
///     times.iter().map(|&t| rule.take(&mut state, t, 1).is_ok()).collect()
/// }
///
/// let q = Quota::per_second(2)?;
/// let times = [0, 1, 2, 500_000_000, 600_000_000, 1_000_000_000];
/// assert_eq!(admitted::<GcraRule>(&q, &times), admitted::<TokenBucketRule>(&q, &times));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait Rule: Clone + fmt::Debug + Send + Sync + 'static {
    /// The state one limiter (or one key) keeps: a `u64` word for the lock-free rules (the
    /// shells share it through one compare-and-swap loop), [`Log`] for the sliding log
    /// (shared behind a mutex). See [`Shared`].
    type State: Shared;

    /// The rule for `quota`.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the state cannot represent the quota (each rule lists its
    /// limits), or if the quota sets a burst the algorithm has no use for
    /// ([`QuotaError::BurstNotSupported`]: the window rules admit `count` per window and
    /// nothing else).
    fn new(quota: &Quota) -> Result<Self, QuotaError>
    where
        Self: Sized;

    /// The quota this rule enforces.
    fn quota(&self) -> Quota;

    /// The most permits one request can take; `n > capacity()` is
    /// [`Denied::ExceedsCapacity`]. The quota's burst for every rule in this crate.
    #[inline]
    fn capacity(&self) -> u32 {
        self.quota().burst()
    }

    /// The state of a fresh limiter: it admits `capacity()` at once, at any time.
    fn fresh(&self) -> Self::State;

    /// Whether [`Rule::take`] itself refuses `n > capacity()` (with
    /// [`Denied::ExceedsCapacity`], from the configuration it decides under), so that the
    /// shells leave that check to it and only skip `n = 0`: a rule whose capacity can change
    /// between a check and the decision (a live [`Budget`](crate::Budget)'s) reads its
    /// configuration once, not twice. `false` by default: the shells check the size first
    /// and call `take` with `1 ≤ n ≤ capacity()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::rules::{GcraRule, Rule};
    ///
    /// // The plain rules leave the size check to their shells.
    /// assert!(!GcraRule::TAKE_CHECKS_CAPACITY);
    /// ```
    const TAKE_CHECKS_CAPACITY: bool = false;

    /// Decide `1 ≤ n ≤ capacity()` permits at `now` (ns) (any `n ≥ 1` if
    /// [`Rule::TAKE_CHECKS_CAPACITY`]): on admission update `state` and return the receipt;
    /// on denial leave `state` unchanged.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the exact wait (see the trait's contract);
    /// [`Denied::ExceedsCapacity`] for `n > capacity()` if [`Rule::TAKE_CHECKS_CAPACITY`].
    fn take(&self, state: &mut Self::State, now: Nanos, n: u32) -> Result<Receipt, Denied>;

    /// What [`Rule::take`] would answer, without changing anything.
    ///
    /// # Errors
    ///
    /// As [`Rule::take`].
    #[inline]
    fn check(&self, state: &Self::State, now: Nanos, n: u32) -> Result<(), Denied> {
        self.take(&mut state.clone(), now, n).map(|_| ())
    }

    /// The state as seen at `now`: permits a request could take, and time until full.
    fn snapshot(&self, state: &Self::State, now: Nanos) -> Snapshot;

    /// Give back the admission on `receipt`, at time `at` (ns, at or after the admission's
    /// own time); returns whether `state` changed. Never more permissive than if the
    /// admission had not happened; exact when `at` is the admission's own time.
    ///
    /// Like [`Rule::take`], a pure transition a shell may evaluate once per compare-and-swap
    /// attempt of one refund, so it borrows the receipt; the limiters' `refund`
    /// ([`Refund::refund`](crate::Refund::refund)), which apply it to a shared state once,
    /// consume it.
    fn refund(&self, state: &mut Self::State, receipt: &Receipt, at: Nanos) -> bool;

    /// Whether `state` has decided exactly as a fresh state for every reading at or after
    /// `since`, up to `now` (`since ≤ now`), so that replacing it by a fresh one changes no
    /// decision for such readings. Eviction ([`Keyed`][crate::Keyed]) asks this.
    fn fresh_since(&self, state: &Self::State, since: Nanos, now: Nanos) -> bool;

    /// Charge `n` permits at `now` whatever the state (usage measured after the work):
    /// never refused, recorded even past the limit, so that the state is *in debt* and
    /// [`Rule::debt`] refuses until it is paid back; returns the permits the state could not
    /// hold (each rule says what it holds; 0 for the GCRA family short of the clock's
    /// range). Like [`Rule::take`], a pure transition a shell may evaluate once per attempt.
    ///
    /// Never more permissive than a [`Rule::take`] of the same permits that had been
    /// admitted: the state after a charge decides every later request at least as strictly.
    fn charge(&self, state: &mut Self::State, now: Nanos, n: u32) -> u32;

    /// The answer to a request for no permits at `now`: admitted unless a charge left the
    /// state past its limit (in debt), then [`Denied::RateLimited`] with the exact wait
    /// until it is back within it. A state that no charge touched is never in debt.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] while in debt ([`Denied::BeyondHorizon`] if the debt ends past
    /// the clock's range).
    fn debt(&self, state: &Self::State, now: Nanos) -> Result<(), Denied>;

    /// Give back up to `n` permits at `at` that no receipt names (a caller's own
    /// accounting: Envoy's negative hits), never past a full state; returns whether `state`
    /// changed. Unlike [`Rule::refund`] it can make the state more permissive than the
    /// history of its admissions, by at most `n` permits: the caller asserts they were
    /// over-counted. Each rule says what it gives back.
    fn credit(&self, state: &mut Self::State, n: u32, at: Nanos) -> bool;

    /// The receipt of the permits of `receipt` past its first `keep` (`keep < receipt.n()`),
    /// for giving back the part of a reservation that its actual cost did not use
    /// ([`RuleCell::settle`](crate::RuleCell::settle)). The provided version keeps the
    /// receipt's mark: right for the window rules (the mark is the window) and the sliding
    /// log (the time the entries were recorded at), and for a rule whose mark is a position
    /// in a schedule it gives back at most what the exact split would (stricter, never more
    /// permissive); the TAT rules and the budget place the tail at its own position.
    #[inline]
    fn split(&self, receipt: &Receipt, keep: u32) -> Receipt {
        receipt.tail(keep, receipt.mark())
    }
}

/// A rule whose whole configuration is its [`Quota`]: every rule of this module (not a
/// budget's, which has a debt and a mode too). The algorithms by name
/// ([`Algorithm`](crate::Algorithm)) are these rules, and
/// [`Keyed::reconfigure_key`](crate::Keyed::reconfigure_key) gives a key of one a new rule
/// for a quota, from the key's next fresh state on (at once if the key is idle, else once
/// it goes idle: a live state is never read under another quota's rule).
///
/// Implement it for a rule of your own whose configuration is a quota, to reconfigure its
/// keys one by one.
///
/// # Examples
///
/// ```
/// use limitcore::{Keyed, Quota};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let per_ip: Keyed<String, GcraRule, ManualClock> =
///     Keyed::with_clock(Quota::per_second(1)?, ManualClock::new())?;
/// per_ip.reconfigure_key_at("10.0.0.1".to_owned(), Quota::per_second(100)?.with_burst(5)?, 0)?;
/// assert!(per_ip.try_acquire_n_at("10.0.0.1", 5, 0).is_ok()); // a new key: at once
/// assert!(per_ip.try_acquire_n_at("10.0.0.2", 2, 0).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait QuotaRule: Rule {}

impl<const PACE: bool> QuotaRule for TatRule<PACE> {}
impl QuotaRule for TokenBucketRule {}
impl QuotaRule for FixedWindowRule {}
impl QuotaRule for SlidingWindowRule {}
#[cfg(feature = "std")]
impl QuotaRule for SlidingLogRule {}

/// A rule that can also take permits now for a start in the future (a reservation):
/// [`GcraRule`] (the start is when the request conforms) and [`LeakyBucketRule`] (its slot
/// in the queue).
///
/// # Examples
///
/// ```
/// use limitcore::rules::{LeakyBucketRule, ReserveRule, Rule};
/// use limitcore::Quota;
///
/// let rule = LeakyBucketRule::new(&Quota::per_second(10)?)?;
/// let mut drain = rule.fresh();
/// assert_eq!(rule.reserve(&mut drain, 0, 1, u64::MAX), Ok(0));
/// assert_eq!(rule.reserve(&mut drain, 0, 1, u64::MAX), Ok(100_000_000)); // the next slot
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait ReserveRule: Rule {
    /// Reserve `1 ≤ n ≤ capacity()` permits at `now` if they can start at most `max_wait`
    /// ns from now: update `state` and return the delay until they start, in ns.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the exact wait after which the delay would be within
    /// `max_wait` (and, for the leaky bucket, within its capacity); nothing is reserved.
    fn reserve(
        &self,
        state: &mut Self::State,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
    ) -> Result<Nanos, Denied>;
}

/// The size checks every shell makes before handing a request to a rule (a protocol of
/// your own on a [`Rule`] makes them too, so that its sizes mean what the crate's do):
/// [`Denied::ExceedsCapacity`] for `n > capacity` (never conforms, consumes nothing),
/// `Ok(false)` for `n == 0` (admitted, nothing to do), `Ok(true)` for a request to decide.
///
/// # Errors
///
/// [`Denied::ExceedsCapacity`] with `capacity` for `n > capacity`.
///
/// # Examples
///
/// ```
/// use limitcore::rules::precheck;
/// use limitcore::Denied;
///
/// assert_eq!(precheck(0, 5), Ok(false));
/// assert_eq!(precheck(5, 5), Ok(true));
/// assert_eq!(precheck(6, 5), Err(Denied::ExceedsCapacity { capacity: 5 }));
/// ```
#[inline]
pub fn precheck(n: u32, capacity: u32) -> Result<bool, Denied> {
    if n > capacity {
        Err(Denied::ExceedsCapacity { capacity })
    } else {
        Ok(n != 0)
    }
}

/// [`precheck`] for a request to `rule`'s [`Rule::take`]: only `n = 0` when the rule checks
/// the size itself ([`Rule::TAKE_CHECKS_CAPACITY`]).
#[inline(always)]
pub(crate) fn precheck_take<R: Rule>(rule: &R, n: u32) -> Result<bool, Denied> {
    if R::TAKE_CHECKS_CAPACITY {
        Ok(n != 0)
    } else {
        precheck(n, rule.capacity())
    }
}

/// The check of the window rules (fixed window, sliding window, sliding log, count-min
/// cells): a window admits `count` permits and has no burst of its own, so a quota whose
/// burst differs from its count would be silently ignored; it is refused instead. A window
/// counts the written count per written period in 32 bits: a count above `u32::MAX`
/// (a scaled quota) is refused too.
pub(crate) fn window_quota(quota: &Quota, algorithm: &'static str) -> Result<(), QuotaError> {
    if quota.is_scaled() {
        return Err(QuotaError::WindowCountTooLarge {
            count: quota.count_as_written(),
            period_ns: quota.period_as_written_ns(),
        });
    }
    if quota.burst() == quota.count() {
        Ok(())
    } else {
        Err(QuotaError::BurstNotSupported {
            algorithm,
            count: quota.count(),
            burst: quota.burst(),
        })
    }
}
