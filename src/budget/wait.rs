//! A budget's waits: first come, first served, re-timed by every change of configuration.
//!
//! A waiter reserves its permits first (its place in the schedule, after everyone who
//! reserved before it), then sleeps until they conform. A change of configuration wakes it
//! (no lost wake-up: [`Changes`](super::changes::Changes)), and it re-times its place: the
//! permits ahead of it are kept and re-timed at the new rate, so a rise lets it go earlier
//! and a cut later. While the budget is paused it keeps its place and waits for the pause
//! to end; when the budget is disabled it goes at once and gives its place back. A waiter
//! that gives up (its deadline, or an async waiter dropped) gives its place back too.

use super::{waitable, Budget, BudgetRule, Mode};
use crate::clock::{duration_to_nanos, Clock, Nanos};
use crate::decision::{Denied, Receipt};
use crate::limiter::{RateLimiter, Refund};
use core::time::Duration;
use std::time::Instant;

/// What to do next while waiting for a turn.
enum Turn {
    /// The permits conform (or the budget was disabled): go.
    Go,
    /// Sleep at most this long (`None`: until the next change), then look again.
    Sleep(Option<Duration>),
    /// The deadline cannot be met: give up with this refusal (the place is given back).
    GiveUp(Denied),
}

/// The time left until `deadline` (`None`: no deadline), zero once passed.
fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

impl<C: Clock> Budget<C> {
    /// Reserve `n` permits at `now` to conform within `max_wait` ns: the receipt of the
    /// place taken.
    fn reserve_place(&self, n: u32, now: Nanos, max_wait: Nanos) -> Result<Receipt, Denied> {
        if n == 0 {
            return Ok(Receipt::NOTHING);
        }
        let rule: &BudgetRule = self.rule();
        let capacity = crate::rules::Rule::capacity(rule);
        if n > capacity {
            return Err(Denied::ExceedsCapacity { capacity });
        }
        self.update(|word| rule.reserve_with_receipt(word, now, n, max_wait))
            .map(|(_, receipt)| receipt)
    }

    /// After a refusal of a reservation: how long to sleep before asking again, or the
    /// refusal to return (no wait helps, or the deadline is too close).
    fn after_refusal(
        denied: Denied,
        deadline: Option<Instant>,
    ) -> Result<Option<Duration>, Denied> {
        if denied == Denied::Paused {
            // Until the pause ends (or the deadline).
            return match left(deadline) {
                Some(left) if left.is_zero() => Err(denied),
                left => Ok(left),
            };
        }
        let wait = waitable(denied).ok_or(denied)?;
        match left(deadline) {
            Some(left) if wait > left => Err(denied),
            _ => Ok(Some(wait)),
        }
    }

    /// The next step for the waiter holding `receipt` (re-timed into the current
    /// configuration, in place).
    fn turn(&self, receipt: &mut Receipt, deadline: Option<Instant>) -> Turn {
        let rule = self.rule();
        match rule.mode() {
            Mode::Disabled => return Turn::Go,
            Mode::Paused => {
                return match left(deadline) {
                    Some(left) if left.is_zero() => Turn::GiveUp(Denied::Paused),
                    left => Turn::Sleep(left),
                }
            }
            Mode::Enabled => {}
        }
        let (wait, current) =
            rule.wait_for(core::mem::replace(receipt, Receipt::NOTHING), self.now());
        *receipt = current;
        if wait == 0 {
            return Turn::Go;
        }
        let wait = Duration::from_nanos(wait);
        match left(deadline) {
            Some(left) if wait > left => Turn::GiveUp(Denied::RateLimited {
                retry_after: wait - left,
            }),
            _ => Turn::Sleep(Some(wait)),
        }
    }

    /// Give the place on `receipt` back.
    fn give_back(&self, receipt: Receipt) {
        if receipt.n() > 0 {
            self.refund(receipt, self.now());
        }
    }

    /// Take `n` permits, sleeping until they conform (first come, first served; see the
    /// module). See [`Budget::acquire_n_blocking_until`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    pub fn acquire_n_blocking(&self, n: u32) -> Result<(), Denied> {
        self.acquire_n_blocking_until(n, None)
    }

    /// Take `n` permits if they can conform within `max_wait`. See
    /// [`Budget::acquire_n_blocking_until`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    pub fn acquire_n_blocking_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        self.acquire_n_blocking_until(n, Instant::now().checked_add(max_wait))
    }

    /// Take `n` permits by `deadline` (`None`: no deadline): reserve a place in the schedule,
    /// then sleep until it, woken by every change of configuration to re-time it. A request
    /// above the burst (under debt) waits until the budget is full, then goes, leaving it in
    /// debt. Sleeps are on the OS timer; the budget's clock is read after each.
    ///
    /// # Errors
    ///
    /// [`Denied::ExceedsCapacity`] at once for `n` above the capacity;
    /// [`Denied::RateLimited`] with the wait left over if the permits cannot conform by the
    /// deadline (at once when known at the start, else when a change makes it so; the place
    /// is given back); [`Denied::Paused`] if the budget is still paused at the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Budget, BudgetConfig};
    /// use std::time::{Duration, Instant};
    ///
    /// // 1000 a second, 10 at once, 100 ms of debt: 100 permits wait for a full budget, go,
    /// // and leave 90 ms of debt behind them.
    /// let config = BudgetConfig::new("1000/s burst 10".parse()?).max_debt(Duration::from_millis(100));
    /// let budget = Budget::with_config(&config, limitcore::DefaultClock::new())?;
    /// let t0 = Instant::now();
    /// budget.acquire_n_blocking(100)?;
    /// budget.acquire_n_blocking(1)?; // waits out the debt
    /// assert!(t0.elapsed() >= Duration::from_millis(90));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_n_blocking_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), Denied> {
        self.take_place_blocking(n, deadline).map(drop)
    }

    /// [`Budget::acquire_n_blocking_until`], returning the receipt of the permits taken
    /// ([`Receipt::NOTHING`] when the budget was disabled: nothing was charged), so that a
    /// caller can give back what it did not use (the I/O adapters).
    pub(crate) fn take_place_blocking(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Receipt, Denied> {
        let changes = &self.rule().live.changes;
        let mut receipt = loop {
            let seen = changes.count();
            let max_wait = left(deadline).map_or(u64::MAX, duration_to_nanos);
            match self.reserve_place(n, self.now(), max_wait) {
                Ok(receipt) => break receipt,
                Err(denied) => {
                    let sleep = Self::after_refusal(denied, deadline)?;
                    changes.wait_blocking(seen, sleep);
                }
            }
        };
        loop {
            let seen = changes.count();
            match self.turn(&mut receipt, deadline) {
                Turn::Go => return Ok(self.keep_unless_disabled(receipt)),
                Turn::Sleep(sleep) => {
                    changes.wait_blocking(seen, sleep);
                }
                Turn::GiveUp(denied) => {
                    self.give_back(receipt);
                    return Err(denied);
                }
            }
        }
    }

    /// The receipt of a place whose turn came: kept, unless the budget is disabled (then it
    /// is given back, and the caller goes without charge).
    fn keep_unless_disabled(&self, receipt: Receipt) -> Receipt {
        if self.rule().mode() == Mode::Disabled {
            self.give_back(receipt);
            Receipt::NOTHING
        } else {
            receipt
        }
    }
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;
    use crate::wait::Timer;
    use core::future::poll_fn;
    use core::task::{Context, Poll};

    /// An async waiter's progress, kept between polls: the place it took (none yet before
    /// its reservation), the change count it sleeps on, and its timer. Whoever holds one
    /// gives the place back with [`Budget::abandon_place`] if it stops polling before the
    /// turn came.
    #[derive(Debug, Default)]
    pub(crate) struct AsyncPlace {
        place: Option<Receipt>,
        /// Asleep until the change count moves past this (or the timer fires).
        asleep: Option<u64>,
        pub(crate) timer: Timer,
    }

    /// Gives a dropped waiter's place back (the guard of [`Budget::acquire_n_async_until`]).
    struct Guard<'a, C: Clock> {
        budget: &'a Budget<C>,
        wait: AsyncPlace,
    }

    impl<C: Clock> Drop for Guard<'_, C> {
        fn drop(&mut self) {
            self.budget.abandon_place(&mut self.wait);
        }
    }

    impl<C: Clock> Budget<C> {
        /// One poll of an ordered async wait for `n` permits by `deadline`: the steps of
        /// [`Budget::take_place_blocking`], sleeping on tokio's timer and on the change count
        /// (registered before the timer is polled: no lost wake-up). `Ready(Ok(receipt))`
        /// once the turn came ([`Receipt::NOTHING`] when disabled); the refusals of
        /// [`Budget::acquire_n_blocking_until`] otherwise (the place is then given back).
        pub(crate) fn poll_place(
            &self,
            wait: &mut AsyncPlace,
            n: u32,
            deadline: Option<Instant>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<Receipt, Denied>> {
            let changes = &self.rule().live.changes;
            loop {
                if let Some(seen) = wait.asleep {
                    if !changes.register(seen, cx.waker()) {
                        // No change yet: only the timer (if armed) ends the sleep.
                        core::task::ready!(wait.timer.poll(cx));
                    }
                    wait.asleep = None;
                    wait.timer.disarm();
                }
                let seen = changes.count();
                let sleep = match &mut wait.place {
                    None => {
                        let max_wait = left(deadline).map_or(u64::MAX, duration_to_nanos);
                        match self.reserve_place(n, self.now(), max_wait) {
                            Ok(receipt) => {
                                wait.place = Some(receipt);
                                continue;
                            }
                            Err(denied) => Self::after_refusal(denied, deadline)?,
                        }
                    }
                    Some(receipt) => match self.turn(receipt, deadline) {
                        Turn::Go => {
                            let receipt = wait.place.take().unwrap_or(Receipt::NOTHING);
                            return Poll::Ready(Ok(self.keep_unless_disabled(receipt)));
                        }
                        Turn::Sleep(sleep) => sleep,
                        Turn::GiveUp(denied) => {
                            self.abandon_place(wait);
                            return Poll::Ready(Err(denied));
                        }
                    },
                };
                wait.asleep = Some(seen);
                match sleep {
                    Some(sleep) => wait.timer.arm(sleep),
                    None => wait.timer.disarm(),
                }
            }
        }

        /// Give back the place `wait` holds, if any (a waiter that stops before its turn).
        pub(crate) fn abandon_place(&self, wait: &mut AsyncPlace) {
            if let Some(receipt) = wait.place.take() {
                self.give_back(receipt);
            }
            wait.asleep = None;
            wait.timer.disarm();
        }

        /// As [`Budget::acquire_n_blocking`], asynchronously on tokio's timer (feature
        /// `tokio`).
        ///
        /// # Errors
        ///
        /// As [`Budget::acquire_n_blocking_until`].
        pub async fn acquire_n_async(&self, n: u32) -> Result<(), Denied> {
            self.acquire_n_async_until(n, None).await
        }

        /// As [`Budget::acquire_n_blocking_until`], asynchronously on tokio's timer (feature
        /// `tokio`). Cancellation-safe: a future dropped before it completes gives its place
        /// back (the permits it reserved are refunded), and one that completed took them.
        ///
        /// # Errors
        ///
        /// As [`Budget::acquire_n_blocking_until`].
        ///
        /// # Examples
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
        /// use limitcore::{Budget, RateLimiter};
        /// use std::time::Duration;
        ///
        /// let budget = Budget::new("100/s burst 1".parse()?)?;
        /// budget.acquire_n_async(1).await?;
        /// // A waiter dropped before its turn gives its place back:
        /// let waiting = budget.acquire_n_async(1);
        /// assert!(tokio::time::timeout(Duration::from_millis(1), waiting).await.is_err());
        /// assert!(budget.snapshot().full_after <= Duration::from_millis(10));
        /// # Ok(())
        /// # }
        /// ```
        pub async fn acquire_n_async_until(
            &self,
            n: u32,
            deadline: Option<Instant>,
        ) -> Result<(), Denied> {
            let mut guard = Guard {
                budget: self,
                wait: AsyncPlace::default(),
            };
            poll_fn(|cx| self.poll_place(&mut guard.wait, n, deadline, cx))
                .await
                .map(drop)
        }
    }
}

#[cfg(feature = "tokio")]
pub(crate) use asynchronous::AsyncPlace;
