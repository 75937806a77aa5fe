//! [`RuleCell`]: a rule and its state, shared between threads, with no clock: every decision
//! at an explicit time. The layer between the pure rules and the shells.

use crate::cell::sealed::Cells;
use crate::clock::{duration_to_nanos, Nanos};
use crate::decision::{Charged, Decision, Denied, Packed, Receipt, Snapshot};
use crate::limiters::Reservation;
use crate::rules::{precheck, precheck_take, ReserveRule, Rule};
use core::fmt;
use core::time::Duration;

/// A [`Rule`] and one state of it, shared between threads: the state cell every limiter of
/// the crate is built on. [`Limiter`](crate::Limiter) is a `RuleCell` and a clock; a
/// protocol of your own on a rule (a remote limiter's local word, a scheduler's budget)
/// uses the cell directly and passes every time itself.
///
/// Every change of the state goes through the crate's one compare-and-swap loop (or, for
/// the sliding log's ring, one critical section), so the decisions keep the rule's
/// contract under any interleaving: a denial never writes, no permit is created by a race.
/// The size checks come first ([`precheck`](crate::rules::precheck)): `n = 0` writes
/// nothing and is answered by [`Rule::debt`] (admitted unless a charge left the state in
/// debt), `n > capacity` is [`Denied::ExceedsCapacity`].
///
/// # Examples
///
/// ```
/// use limitcore::rules::{GcraRule, Rule};
/// use limitcore::{Quota, RuleCell};
///
/// let cell = RuleCell::new(GcraRule::new(&Quota::per_second(2)?)?);
/// assert!(cell.try_acquire_n_at(2, 0).is_ok());          // times are arguments, in ns
/// let d = cell.decide_at(1, 0);
/// assert_eq!(d.retry_after().unwrap().as_millis(), 500);
/// assert!(cell.try_acquire_n_at(1, 500_000_000).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub struct RuleCell<R: Rule> {
    /// The rule's state (see each rule's "Word" or "Word layout").
    state: <R::State as Cells>::Cell,
    rule: R,
}

impl<R: Rule> fmt::Debug for RuleCell<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleCell")
            .field("rule", &self.rule)
            .field("state", &self.state)
            .finish()
    }
}

impl<R: Rule> RuleCell<R> {
    /// A cell holding a fresh state of `rule`.
    pub fn new(rule: R) -> Self {
        RuleCell {
            state: rule.fresh().cell(),
            rule,
        }
    }

    /// The rule.
    #[inline]
    pub fn rule(&self) -> &R {
        &self.rule
    }

    /// A copy of the current state (for the sliding log, a copy of its ring).
    pub fn state(&self) -> R::State {
        R::State::read(&self.state, R::State::clone)
    }

    /// Apply a transition of your own to the state, through the same compare-and-swap loop
    /// (or lock) as every decision: for a protocol built on a rule of your own that has
    /// transitions besides [`Rule::take`]. `f` must be pure: it may run once per attempt,
    /// on the freshest state, and on `Err` nothing is written. The rule's guarantees hold
    /// only for transitions that keep its state meaningful.
    ///
    /// # Errors
    ///
    /// The `E` of the attempt that was not applied.
    #[inline]
    pub fn update<T, E>(&self, f: impl Fn(&mut R::State) -> Result<T, E>) -> Result<T, E> {
        R::State::update(&self.state, f)
    }

    /// Decide `n` permits at `now` (ns).
    ///
    /// # Errors
    ///
    /// [`Denied`] as the rule decides, after the size checks.
    // Always inlined: a caller that looks only at `is_ok()` then never computes the
    // refusal's `retry_after` (a division).
    #[inline(always)]
    pub fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck_take(&self.rule, n)? {
            return self.debt_at(now);
        }
        let rule = &self.rule;
        // The refusal leaves the loop packed in two words (see `Packed`).
        R::State::update(
            &self.state,
            #[inline(always)]
            move |s| rule.take(s, now, n).map(|_| ()).map_err(Denied::pack),
        )
        .map_err(Packed::unpack)
    }

    /// Decide `n` permits at `now`, with the state the decision left (read in the same
    /// update).
    pub fn decide_at(&self, n: u32, now: Nanos) -> Decision {
        let (result, state) = self.decide_refundable_at(n, now);
        Decision {
            result: result.map(|_| ()),
            state,
        }
    }

    /// Decide `n` permits at `now`, returning what to give back, with the state the
    /// decision left.
    pub fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        match precheck_take(&self.rule, n) {
            Ok(true) => {
                let rule = &self.rule;
                let outcome = R::State::update(&self.state, |s| match rule.take(s, now, n) {
                    Ok(receipt) => Ok((receipt, rule.snapshot(s, now))),
                    // The state the refusal saw: the freshest, unchanged.
                    Err(d) => Err((d, rule.snapshot(s, now))),
                });
                match outcome {
                    Ok((receipt, state)) => (Ok(receipt), state),
                    Err((d, state)) => (Err(d), state),
                }
            }
            Ok(false) => (
                self.debt_at(now).map(|()| Receipt::NOTHING),
                self.snapshot_at(now),
            ),
            Err(d) => (Err(d), self.snapshot_at(now)),
        }
    }

    /// The answer to a request for no permits at `now` ([`Rule::debt`]): admitted unless a
    /// charge left the state in debt.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the wait until the debt is paid back.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::rules::{GcraRule, Rule};
    /// use limitcore::{Quota, RuleCell};
    ///
    /// let cell = RuleCell::new(GcraRule::new(&Quota::per_second(10)?)?); // T = 100 ms
    /// cell.charge_at(11, 0);                                  // one past the burst
    /// assert_eq!(cell.debt_at(0).unwrap_err().retry_after().unwrap().as_millis(), 100);
    /// assert!(cell.debt_at(100_000_000).is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[cold]
    pub fn debt_at(&self, now: Nanos) -> Result<(), Denied> {
        R::State::read(&self.state, |s| self.rule.debt(s, now))
    }

    /// Charge `n` permits at `now`, never refused
    /// ([`Refund::charge_at`](crate::Refund::charge_at)): through the same compare-and-swap
    /// loop (or lock) as every decision.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::rules::{FixedWindowRule, Rule};
    /// use limitcore::{Quota, RuleCell};
    ///
    /// let cell = RuleCell::new(FixedWindowRule::new(&Quota::per_second(10)?)?);
    /// let charged = cell.charge_at(12, 0);                     // 12 used in a window of 10
    /// assert_eq!((charged.charged, charged.shortfall), (12, 0));
    /// assert!(cell.try_acquire_n_at(0, 999_999_999).is_err()); // until the window ends
    /// assert!(cell.try_acquire_n_at(10, 1_000_000_000).is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    // Always inlined, as the decisions: a caller that reads one field of the report (the
    // shortfall) lets the optimiser drop the rest (the wait's `Duration`).
    #[inline(always)]
    pub fn charge_at(&self, n: u32, now: Nanos) -> Charged {
        let rule = &self.rule;
        // The wait of one more permit is read in the same step as the charge, packed (no
        // division across the loop), and the report is built after it.
        let (short, next) = match R::State::update(
            &self.state,
            #[inline(always)]
            move |s| {
                let short = rule.charge(s, now, n);
                Ok::<_, core::convert::Infallible>((
                    short,
                    rule.check(s, now, 1).map_err(Denied::pack),
                ))
            },
        ) {
            Ok(done) => done,
            Err(never) => match never {},
        };
        Charged::after(n - short, short, next.map_err(Packed::unpack))
    }

    /// Settle the reservation on `receipt` to `actual` at `at`
    /// ([`Refund::settle`](crate::Refund::settle)): the permits past `actual` refunded (at
    /// their own position, [`Rule::split`]), or the excess charged.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::rules::{GcraRule, Rule};
    /// use limitcore::{Quota, RuleCell};
    ///
    /// let cell = RuleCell::new(GcraRule::new(&Quota::per_second(10)?)?);
    /// let estimate = cell.acquire_refundable_at(8, 0)?;
    /// cell.settle(estimate, 3, 0);                             // 5 given back
    /// assert_eq!(cell.snapshot_at(0).remaining, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    // Always inlined: see `charge_at`.
    #[inline(always)]
    pub fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        let estimate = receipt.n();
        if actual > estimate {
            return self.charge_at(actual - estimate, at);
        }
        if actual < estimate {
            self.refund(self.rule.split(&receipt, actual), at);
        }
        let next = R::State::read(&self.state, |s| self.rule.check(s, at, 1));
        Charged::after(0, 0, next)
    }

    /// Give back up to `n` permits at `at` that no receipt names
    /// ([`Refund::credit`](crate::Refund::credit)), never past full.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::rules::{GcraRule, Rule};
    /// use limitcore::{Quota, RuleCell};
    ///
    /// let cell = RuleCell::new(GcraRule::new(&Quota::per_second(10)?)?);
    /// cell.try_acquire_n_at(6, 0)?;
    /// cell.credit(2, 0);                                       // over-counted by 2
    /// assert_eq!(cell.snapshot_at(0).remaining, 6);
    /// cell.credit(100, 0);
    /// assert_eq!(cell.snapshot_at(0).remaining, 10);           // never past full
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn credit(&self, n: u32, at: Nanos) {
        if n == 0 {
            return;
        }
        let rule = &self.rule;
        // `Err` when the rule has nothing to give back: then nothing is written.
        let _ = R::State::update(&self.state, |s| {
            if rule.credit(s, n, at) {
                Ok(())
            } else {
                Err(())
            }
        });
    }

    /// Decide `n` permits at `now`, returning what to give back.
    ///
    /// # Errors
    ///
    /// As [`RuleCell::try_acquire_n_at`].
    #[inline]
    pub fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        if !precheck_take(&self.rule, n)? {
            return self.debt_at(now).map(|()| Receipt::NOTHING);
        }
        let rule = &self.rule;
        R::State::update(&self.state, move |s| rule.take(s, now, n))
    }

    /// Give back the admission on `receipt` at `at` (ns, at or after it): never more
    /// permissive than if it had not happened, exact at its own time.
    pub fn refund(&self, receipt: Receipt, at: Nanos) {
        if receipt.n() == 0 {
            return;
        }
        let rule = &self.rule;
        // `Err` when the rule has nothing to give back: then nothing is written.
        let _ = R::State::update(&self.state, |s| {
            if rule.refund(s, &receipt, at) {
                Ok(())
            } else {
                Err(())
            }
        });
    }

    /// The answer `n` permits would get at `now`, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`RuleCell::try_acquire_n_at`].
    pub fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.rule.capacity())? {
            return self.debt_at(now);
        }
        R::State::read(&self.state, |s| self.rule.check(s, now, n))
    }

    /// The state as seen at `now`, consuming nothing.
    pub fn snapshot_at(&self, now: Nanos) -> Snapshot {
        R::State::read(&self.state, |s| self.rule.snapshot(s, now))
    }
}

impl<R: ReserveRule> RuleCell<R> {
    /// Reserve `n` permits at `now` to start within `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`Reserve::reserve_n_at`](crate::Reserve::reserve_n_at).
    #[inline]
    pub fn reserve_n_at(
        &self,
        n: u32,
        now: Nanos,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        if !precheck(n, self.rule.capacity())? {
            return Ok(Reservation::new(now, 0));
        }
        let max_wait = duration_to_nanos(max_wait);
        let rule = &self.rule;
        let delay = R::State::update(&self.state, move |s| rule.reserve(s, now, n, max_wait))?;
        Ok(Reservation::new(now, delay))
    }
}
