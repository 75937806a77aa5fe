//! A budget's waits: first come, first served, across every change of configuration.
//!
//! Each waiter is an entry of the budget's ordered waiter list (the waiting layer's
//! `WaitList`, behind the lock that also serialises reconfigurations). On arrival a waiter
//! takes its place in the schedule, a reservation after everyone who took one before it, and
//! sleeps until its permits conform. A waiter that cannot take a place (the budget is
//! paused, the schedule is full, or a waiter ahead of it could not) waits *unplaced* in
//! arrival order; the unplaced are placed in that order as soon as they can be (when the
//! pause ends, inside the reconfiguration that ends it), so arrival order is kept across a
//! pause.
//!
//! A reconfiguration settles every waiter under the same lock: each keeps its place,
//! re-timed at the new rate (a rise lets it go earlier, a cut later), except that when the
//! budget becomes disabled every waiter goes at once and gives its place back (charged
//! nothing), and a waiter whose request no longer fits the new capacity (no debt, or beyond
//! the debt) gives its place back and fails with
//! [`ExceedsCapacity`](Denied::ExceedsCapacity) at once. A waiter that gives up (its
//! deadline, or a dropped wait) gives its place back too.
//!
//! The wait is written once, as a poll (`Budget::poll_entry`); the public waits [`Acquire`]
//! and [`AcquireOwned`] are the waiting layer's [`Queued`] around it (which keeps the place
//! and gives it back when dropped), and the blocking waits run the same wait on the
//! blocking driver. It sleeps on the budget's clock ([`Clock::sleep_hint`]): on a
//! [`ManualClock`](crate::clock::ManualClock) until the clock moves, never on the OS timer.

use super::{waitable, Budget, BudgetRule, Mode};
use crate::clock::{deadline_until, deadline_within, duration_to_nanos, poll_clock};
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::decision::{Denied, Receipt};
use crate::limiter::{RateLimiter, Refund};
use crate::notify::driver::{block_on, Nap};
use crate::notify::list::WaitList;
use crate::notify::queued::{sealed, Queued};
use crate::notify::wake::WakeList;
use crate::rules::Rule;
use crate::sync::{lock, Ordering};
use alloc::sync::Arc;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::time::Instant;

/// A waiter's entry: its request, its deadline (ns of the clock), and its place once taken.
#[derive(Debug)]
pub(crate) struct Place {
    n: u32,
    deadline: Option<Nanos>,
    /// The reservation (in the configuration of the last look); `None` while unplaced.
    receipt: Option<Receipt>,
    /// When an unplaced waiter may try again (a schedule that was full), ns.
    retry_at: Option<Nanos>,
}

/// What a waiter's entry is resolved with: the receipt of the permits taken
/// ([`Receipt::NOTHING`] when disabled) or a refusal.
type Outcome = Result<Receipt, Denied>;

/// A budget's waiters, in arrival order (the waiting layer's list), and how many of them
/// are unplaced: a newcomer queues behind them, and only then do the placements walk the
/// list.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    list: WaitList<Place, Outcome>,
    unplaced: usize,
}

impl core::ops::Deref for Waiters {
    type Target = WaitList<Place, Outcome>;

    fn deref(&self) -> &Self::Target {
        &self.list
    }
}

impl Waiters {
    pub(crate) const fn new() -> Self {
        Waiters {
            list: WaitList::new(),
            unplaced: 0,
        }
    }

    fn push(&mut self, place: Place) -> usize {
        self.unplaced += usize::from(place.receipt.is_none());
        self.list.push_back(place, None)
    }

    /// Resolve a waiting entry (see `WaitList::resolve`).
    fn resolve(&mut self, key: usize, outcome: Outcome) -> Option<(Place, Option<Waker>)> {
        let resolved = self.list.resolve(key, outcome);
        if let Some((place, _)) = &resolved {
            self.unplaced -= usize::from(place.receipt.is_none());
        }
        resolved
    }

    /// Remove an entry: `Err(place)` if it waited, `Ok(outcome)` if it was resolved.
    fn remove(&mut self, key: usize) -> Result<Outcome, Place> {
        let removed = self.list.cancel(key);
        if let Err(place) = &removed {
            self.unplaced -= usize::from(place.receipt.is_none());
        }
        removed
    }
}

/// What a look at a waiter's entry decided.
enum Look {
    Done(Result<Receipt, Denied>),
    /// Sleep until the clock reaches this time (ns) or the entry is woken.
    Until(Nanos),
    /// Sleep until the entry is woken.
    Woken,
}

/// `deadline` (ns) less `now`: the most a reservation may wait (`u64::MAX`: no deadline).
fn max_wait(deadline: Option<Nanos>, now: Nanos) -> Nanos {
    deadline.map_or(u64::MAX, |d| d.saturating_sub(now))
}

impl<C: Clock> Budget<C> {
    /// Reserve `n` permits at `now` to conform within `max_wait` ns: the receipt of the
    /// place taken.
    fn reserve_place(&self, n: u32, now: Nanos, max_wait: Nanos) -> Result<Receipt, Denied> {
        let rule: &BudgetRule = self.rule();
        self.update(|word| rule.reserve_with_receipt(word, now, n, max_wait))
            .map(|(_, receipt)| receipt)
    }

    /// Give back the place on `receipt` (of any configuration: it is re-timed first) at
    /// `now`.
    fn give_back(&self, receipt: Receipt, now: Nanos) {
        let (_, current) = self.rule().wait_for(receipt, now);
        if current.n() > 0 {
            self.refund(current, now);
        }
    }

    /// Try to place `place` at `now`: `Ok` once placed (or nothing to place), `Err` with the
    /// outcome that ends the wait, or `Ok` with `retry_at` set / left unplaced to wait.
    fn try_place(&self, place: &mut Place, now: Nanos) -> Result<(), Denied> {
        if place.receipt.is_some() || place.retry_at.is_some_and(|t| now < t) {
            return Ok(());
        }
        match self.reserve_place(place.n, now, max_wait(place.deadline, now)) {
            Ok(receipt) => {
                place.receipt = Some(receipt);
                place.retry_at = None;
                Ok(())
            }
            // Unplaced until the pause ends.
            Err(Denied::Paused) => Ok(()),
            Err(denied) => {
                let wait = waitable(denied).ok_or(denied)?;
                let at = now.saturating_add(duration_to_nanos(wait));
                // A retry at the deadline or later cannot meet it: give up now.
                if place.deadline.is_some_and(|d| at >= d) {
                    return Err(denied);
                }
                place.retry_at = Some(at);
                Ok(())
            }
        }
    }

    /// Place the unplaced waiters at `now` in arrival order, stopping at the first that
    /// cannot be (those behind it keep their order). Those placed, and those that fail, are
    /// woken (`me`, the caller's own entry, is not: it is looking already).
    fn place_unplaced(
        &self,
        waiters: &mut Waiters,
        now: Nanos,
        me: Option<usize>,
        wakes: &mut WakeList,
    ) {
        if waiters.unplaced == 0 {
            return;
        }
        let mut at = waiters.head();
        while let Some(key) = at {
            at = waiters.next(key);
            let Some(place) = waiters.list.get_mut(key) else {
                continue;
            };
            if place.receipt.is_some() {
                continue;
            }
            match self.try_place(place, now) {
                Ok(()) if place.receipt.is_none() => return,
                Ok(()) => {
                    waiters.unplaced -= 1;
                    if me != Some(key) {
                        wakes.extend(waiters.list.take_waker(key));
                    }
                }
                Err(denied) => {
                    if let Some((_, waker)) = waiters.resolve(key, Err(denied)) {
                        wakes.extend(waker.filter(|_| me != Some(key)));
                    }
                }
            }
        }
    }

    /// One look at the wait whose entry is `key` (`None`: it has none yet) for `n` permits
    /// by `deadline`, with the waiters locked.
    #[allow(clippy::too_many_arguments)] // the wait's state, borrowed apart under the lock
    fn look(
        &self,
        waiters: &mut Waiters,
        entry: &mut Option<usize>,
        n: u32,
        deadline: Option<Nanos>,
        now: Nanos,
        cx: &Context<'_>,
        wakes: &mut WakeList,
    ) -> Look {
        let rule = self.rule();
        let key = match *entry {
            Some(key) => key,
            None => {
                if n == 0 || rule.mode() == Mode::Disabled {
                    return Look::Done(Ok(Receipt::NOTHING));
                }
                let capacity = Rule::capacity(rule);
                if n > capacity {
                    return Look::Done(Err(Denied::ExceedsCapacity { capacity }));
                }
                let mut place = Place {
                    n,
                    deadline,
                    receipt: None,
                    retry_at: None,
                };
                // Behind an unplaced waiter, a newcomer queues unplaced too.
                if waiters.unplaced == 0 {
                    if let Err(denied) = self.try_place(&mut place, now) {
                        return Look::Done(Err(denied));
                    }
                }
                let key = waiters.push(place);
                *entry = Some(key);
                key
            }
        };
        if !waiters.is_waiting(key) {
            // Resolved by a reconfiguration (or a placement that failed).
            *entry = None;
            return Look::Done(collect(waiters, key));
        }
        self.place_unplaced(waiters, now, Some(key), wakes);
        if !waiters.is_waiting(key) {
            *entry = None;
            return Look::Done(collect(waiters, key));
        }
        let paused = rule.mode() == Mode::Paused;
        let place = waiters.list.get_mut(key).expect("waiting");
        let deadline_passed = place.deadline.is_some_and(|d| now >= d);
        // The outcome, if the wait ends now (`Ok`: the place's permits conform).
        let (end, look): (Option<Result<(), Denied>>, Look) = match place.receipt.take() {
            None if deadline_passed => {
                // Still unplaced at its deadline: paused, or behind a full schedule.
                let denied = if paused {
                    Denied::Paused
                } else {
                    let retry = place.retry_at.map_or(1, |t| t.saturating_sub(now));
                    Denied::rate_limited(retry.max(1))
                };
                (Some(Err(denied)), Look::Woken)
            }
            None => match (paused, place.retry_at) {
                (false, Some(at)) => (None, Look::Until(at)),
                _ => (None, Look::Woken),
            },
            Some(receipt) => {
                // Re-timed into the configuration in force (a change since it was made).
                let (wait, current) = rule.wait_for(receipt, now);
                place.receipt = Some(current);
                let left = max_wait(place.deadline, now);
                if paused {
                    (deadline_passed.then_some(Err(Denied::Paused)), Look::Woken)
                } else if wait == 0 {
                    (Some(Ok(())), Look::Woken)
                } else if wait > left {
                    (Some(Err(Denied::rate_limited(wait - left))), Look::Woken)
                } else {
                    (None, Look::Until(now.saturating_add(wait)))
                }
            }
        };
        if let Some(end) = end {
            *entry = None;
            let place = waiters.remove(key).expect_err("waiting");
            return Look::Done(match end {
                Ok(()) => Ok(place.receipt.unwrap_or(Receipt::NOTHING)),
                Err(denied) => {
                    if let Some(receipt) = place.receipt {
                        self.give_back(receipt, now);
                    }
                    // A place given back may let the unplaced go.
                    self.place_unplaced(waiters, now, None, wakes);
                    Err(denied)
                }
            });
        }
        let _ = waiters.list.poll(key, Some(cx.waker()));
        match (look, deadline) {
            (Look::Until(at), Some(d)) => Look::Until(at.min(d)),
            (Look::Woken, Some(d)) => Look::Until(d),
            (look, _) => look,
        }
    }

    /// One poll of the ordered wait whose entry is `entry` for `n` permits by `deadline`
    /// (ns of the budget's clock; `None`: none): the wait of every form of
    /// [`Budget::acquire`]. The first poll takes the one-CAS path when nobody waits;
    /// otherwise the entry joins the queue (see the module). `Pending` has registered `cx`'s
    /// waker with what ends the wait and lowered `nap` on an OS clock; `Ready` leaves
    /// `entry` empty.
    #[inline]
    pub(crate) fn poll_entry(
        &self,
        entry: &mut Entry,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Receipt, Denied>> {
        // Acquire: partner of the release in `count_queued`; a waiter queued before this
        // load is seen (it stops the one-CAS path), one queued after it arrived later.
        if entry.key.is_none() && n > 0 && self.rule().live.queued.load(Ordering::Acquire) == 0 {
            if let Ok(receipt) = self.acquire_refundable_at(n, self.now()) {
                return Poll::Ready(Ok(receipt));
            }
        }
        self.poll_queued(entry, n, deadline, cx, nap)
    }

    /// The rest of [`Budget::poll_entry`]: look at the entry under the waiters' lock, then
    /// sleep on the clock until its time or until woken.
    #[cold]
    fn poll_queued(
        &self,
        entry: &mut Entry,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Receipt, Denied>> {
        let live = &self.rule().live;
        loop {
            let now = self.now();
            let mut wakes = WakeList::new();
            let look = {
                let mut waiters = lock(&live.waiters);
                let look = self.look(
                    &mut waiters,
                    &mut entry.key,
                    n,
                    deadline,
                    now,
                    cx,
                    &mut wakes,
                );
                self.count_queued(&waiters);
                look
            };
            // Outside the lock: a waker may run code that takes it.
            wakes.wake_all();
            match look {
                Look::Done(outcome) => return Poll::Ready(outcome),
                Look::Woken => return Poll::Pending,
                Look::Until(at) => {
                    if poll_clock(self.clock(), at, cx, nap).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
        }
    }

    /// Give up the wait in `entry`: it leaves the queue, its reservation is refunded
    /// (re-timed into the configuration in force), and so are permits a resolution granted
    /// that it had not collected; the unplaced waiters behind it may take the place. Nothing
    /// for an entry that holds no place. What every wait's `Drop` runs.
    pub(crate) fn abandon_entry(&self, entry: &mut Entry) {
        let Some(key) = entry.key.take() else {
            return;
        };
        let now = self.now();
        let mut wakes = WakeList::new();
        {
            let mut waiters = lock(&self.rule().live.waiters);
            let receipt = match waiters.remove(key) {
                Ok(outcome) => outcome.ok(),
                Err(place) => place.receipt,
            };
            if let Some(receipt) = receipt {
                self.give_back(receipt, now);
            }
            self.place_unplaced(&mut waiters, now, None, &mut wakes);
            self.count_queued(&waiters);
        }
        wakes.wake_all();
    }

    /// With the waiters locked, after a change: publish how many wait.
    fn count_queued(&self, waiters: &Waiters) {
        // Release: partner of the first poll's acquire (`poll_entry`).
        self.rule()
            .live
            .queued
            .store(waiters.len() as u64, Ordering::Release);
    }

    /// Settle the waiters after a change of configuration was published (the waiters
    /// locked: the writer's lock): see the module.
    pub(crate) fn settle_waiters(&self, waiters: &mut Waiters, now: Nanos, wakes: &mut WakeList) {
        let rule = self.rule();
        let mode = rule.mode();
        let capacity = Rule::capacity(rule);
        let mut at = waiters.head();
        while let Some(key) = at {
            at = waiters.next(key);
            let Some(place) = waiters.get(key) else {
                continue;
            };
            let outcome = if mode == Mode::Disabled {
                Some(Ok(Receipt::NOTHING))
            } else if place.n > capacity {
                Some(Err(Denied::ExceedsCapacity { capacity }))
            } else {
                None
            };
            match outcome {
                Some(outcome) => {
                    if let Some((place, waker)) = waiters.resolve(key, outcome) {
                        if let Some(receipt) = place.receipt {
                            self.give_back(receipt, now);
                        }
                        wakes.extend(waker);
                    }
                }
                // Look again: re-time the place (or learn that the pause ended).
                None => wakes.extend(waiters.list.take_waker(key)),
            }
        }
        if mode == Mode::Enabled {
            self.place_unplaced(waiters, now, None, wakes);
        }
        self.count_queued(waiters);
    }

    /// How many wait in the budget's queue (with a place in the schedule or not yet): the
    /// waits ([`Budget::acquire`] and its forms, blocking or async) that have queued and
    /// neither finished nor been dropped. A wait dropped while queued leaves at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Budget, RateLimiter};
    /// use std::sync::Arc;
    ///
    /// let clock = ManualClock::new();
    /// let budget = Arc::new(Budget::with_clock("10/s burst 1".parse()?, clock.clone())?);
    /// budget.try_acquire()?;
    /// let waiter = {
    ///     let budget = budget.clone();
    ///     std::thread::spawn(move || budget.acquire_blocking(1))
    /// };
    /// while budget.waiting() == 0 {
    ///     std::thread::yield_now(); // until the waiter has taken its place
    /// }
    /// clock.advance(std::time::Duration::from_millis(100)); // its turn, on the budget's clock
    /// waiter.join().unwrap()?;
    /// assert_eq!(budget.waiting(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn waiting(&self) -> usize {
        lock(&self.rule().live.waiters).len()
    }

    /// The wait for `n` permits, first come, first served (see the module): a future with
    /// feature `tokio`, and a [`Wait`](crate::notify::Wait) for [`block_on`] or a driver of your own. What
    /// [`Budget::acquire_blocking`] runs. See [`Budget::acquire_until`].
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::Budget;
    ///
    /// let budget = Budget::new("1000/s burst 10".parse()?)?;
    /// let receipt = budget.acquire(4).await?; // 4 of the 10 at once
    /// assert_eq!(receipt.n(), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire(&self, n: u32) -> Acquire<'_, C> {
        Queued::new(self, (n, None))
    }

    /// The wait for `n` permits that gives up unless they conform within `max_wait` (of the
    /// budget's clock, counted from this call). See [`Budget::acquire_until`].
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Budget, Denied, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let budget = Budget::with_clock("10/s burst 1".parse()?, ManualClock::new())?;
    /// budget.try_acquire()?;
    /// // Its place would be 100 ms away: refused at once, nothing queued.
    /// let late = budget.acquire_within(1, Duration::from_millis(50)).await;
    /// assert!(matches!(late, Err(Denied::RateLimited { .. })));
    /// assert_eq!(budget.waiting(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_within(&self, n: u32, max_wait: Duration) -> Acquire<'_, C> {
        Queued::new(self, (n, deadline_within(self.now(), max_wait)))
    }

    /// The wait for `n` permits by `deadline` (`None`: no deadline; the time left until it
    /// is counted on the budget's clock from this call): it takes a place in the schedule,
    /// after every earlier waiter, then sleeps until it, re-timed by every change of
    /// configuration (see the module). A request above the burst (under debt) waits until
    /// the budget is full, then goes, leaving it in debt. The first poll takes the permits
    /// with one compare-and-swap when nobody waits. Sleeps follow the budget's clock
    /// ([`Clock::sleep_hint`]).
    ///
    /// The wait is a future with feature `tokio` (on an OS clock it sleeps on tokio's
    /// timer) and a [`Wait`](crate::notify::Wait); dropped before it ends, it gives its place back at once (the
    /// permits it reserved, or was granted and had not collected, are refunded), and the
    /// next wait on an uncontended budget takes the one-CAS path again. It ends with the
    /// [`Receipt`] of the permits taken ([`Receipt::NOTHING`] when the budget is, or
    /// became, disabled: nothing was charged), which [`Refund::refund`] can give back.
    ///
    /// # Errors (of the wait)
    ///
    /// [`Denied::ExceedsCapacity`] at once for `n` above the capacity, or when a change of
    /// configuration makes it so while it waits (its place is given back);
    /// [`Denied::RateLimited`] with the wait left over if the permits cannot conform by the
    /// deadline (at once when known at the start, else when a change makes it so; the place
    /// is given back); [`Denied::Paused`] if the budget is still paused at the deadline.
    ///
    /// # Examples
    ///
    /// On a [`ManualClock`](crate::clock::ManualClock), a wait sleeps until the clock moves;
    /// one given up leaves the queue at once:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Budget, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let budget = Budget::with_clock("10/s burst 1".parse()?, clock.clone())?;
    /// budget.try_acquire()?;
    /// let late = budget.acquire_until(1, None);
    /// // Its place is 100 ms away on a clock that does not move: give up after 1 ms.
    /// assert!(tokio::time::timeout(Duration::from_millis(1), late).await.is_err());
    /// assert_eq!(budget.waiting(), 0); // its place given back
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(budget.acquire(1).await?.n(), 1); // one CAS: nobody waits
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_until(&self, n: u32, deadline: Option<Instant>) -> Acquire<'_, C> {
        Queued::new(self, (n, deadline_until(self.now(), deadline)))
    }

    /// As [`Budget::acquire`], owning a reference to the budget (`'static` when the budget
    /// is): a wait to move into a task, or to keep beside the budget in a struct of your
    /// own (tokio's `Semaphore::acquire_owned`).
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::Budget;
    /// use std::sync::Arc;
    ///
    /// let budget = Arc::new(Budget::new("1000/s burst 10".parse()?)?);
    /// let task = tokio::spawn(budget.acquire_owned(10)); // 'static
    /// assert_eq!(task.await??.n(), 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned(self: &Arc<Self>, n: u32) -> AcquireOwned<C> {
        Queued::new(Arc::clone(self), (n, None))
    }

    /// As [`Budget::acquire_within`], owning a reference to the budget.
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::Budget;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let budget = Arc::new(Budget::new("1000/s burst 10".parse()?)?);
    /// let task = tokio::spawn(budget.acquire_owned_within(10, Duration::from_secs(1)));
    /// assert_eq!(task.await??.n(), 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_within(self: &Arc<Self>, n: u32, max_wait: Duration) -> AcquireOwned<C> {
        Queued::new(Arc::clone(self), (n, deadline_within(self.now(), max_wait)))
    }

    /// As [`Budget::acquire_until`], owning a reference to the budget.
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::Budget;
    /// use std::sync::Arc;
    ///
    /// let budget = Arc::new(Budget::new("1000/s burst 10".parse()?)?);
    /// assert_eq!(budget.acquire_owned_until(1, None).await?.n(), 1); // no deadline
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_until(
        self: &Arc<Self>,
        n: u32,
        deadline: Option<Instant>,
    ) -> AcquireOwned<C> {
        Queued::new(Arc::clone(self), (n, deadline_until(self.now(), deadline)))
    }

    /// Take `n` permits, blocking the thread until they conform: [`Budget::acquire`] run
    /// on the blocking driver ([`block_on`]).
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Budget, BudgetConfig};
    /// use limitcore::clock::ManualClock;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// // 1000 a second, 10 at once, 100 ms of debt: 100 permits wait for a full budget, go,
    /// // and leave 90 ms of debt behind them.
    /// let config = BudgetConfig::new("1000/s burst 10".parse()?).max_debt(Duration::from_millis(100));
    /// let clock = ManualClock::new();
    /// let budget = Arc::new(Budget::with_config(&config, clock.clone())?);
    /// budget.acquire_blocking(100)?;
    /// let next = {
    ///     let budget = budget.clone();
    ///     std::thread::spawn(move || budget.acquire_blocking(1)) // waits out the debt
    /// };
    /// while budget.waiting() == 0 {
    ///     std::thread::yield_now();
    /// }
    /// clock.advance(Duration::from_millis(91)); // on the budget's clock
    /// assert_eq!(next.join().unwrap()?.n(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking(&self, n: u32) -> Result<Receipt, Denied> {
        block_on(self.acquire(n))
    }

    /// As [`Budget::acquire_within`], blocking the thread.
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Budget, Denied, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let budget = Budget::with_clock("10/s burst 1".parse()?, ManualClock::new())?;
    /// budget.try_acquire()?;
    /// // 100 ms away, more than allowed: refused at once, without sleeping.
    /// let late = budget.acquire_blocking_within(1, Duration::from_millis(50));
    /// assert_eq!(late.unwrap_err().retry_after(), Some(Duration::from_millis(50)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_within(&self, n: u32, max_wait: Duration) -> Result<Receipt, Denied> {
        block_on(self.acquire_within(n, max_wait))
    }

    /// As [`Budget::acquire_until`], blocking the thread.
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Budget;
    /// use std::time::{Duration, Instant};
    ///
    /// let budget = Budget::new("1000/s burst 10".parse()?)?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(budget.acquire_blocking_until(10, Some(deadline))?.n(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Receipt, Denied> {
        block_on(self.acquire_until(n, deadline))
    }

    /// One poll of a wait for `n` permits by `deadline` (ns of the budget's clock), its
    /// progress kept in `waiter`: the poll [`Budget::acquire`]'s wait runs, for a driver of
    /// your own. A wait stopped before it is `Ready` must be handed to
    /// [`Budget::abandon_acquire`], or it stays queued.
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// use limitcore::budget::Waiter;
    /// use limitcore::clock::ManualClock;
    /// use limitcore::notify::Nap;
    /// use limitcore::{Budget, RateLimiter};
    /// use std::task::{Context, Waker};
    ///
    /// let budget = Budget::with_clock("10/s burst 1".parse()?, ManualClock::new())?;
    /// budget.try_acquire()?;
    /// let mut waiter = Waiter::default();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let polled = budget.poll_acquire(&mut waiter, 1, None, &mut cx, &mut Nap::default());
    /// assert!(polled.is_pending());
    /// budget.abandon_acquire(&mut waiter); // by hand: a `Waiter` has no `Drop`
    /// assert_eq!(budget.waiting(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[deprecated(
        since = "0.3.0",
        note = "a `Waiter` dropped mid-wait stays queued: use `Budget::acquire` or `acquire_owned` (a `notify::Wait` for a driver of your own), which give their place back when dropped"
    )]
    #[allow(deprecated)]
    pub fn poll_acquire(
        &self,
        waiter: &mut Waiter,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Receipt, Denied>> {
        self.poll_entry(&mut waiter.entry, n, deadline, cx, nap)
    }

    /// Give up the wait in `waiter` (see [`Budget::poll_acquire`]): its entry leaves the
    /// queue and its reservation is refunded. Nothing for a waiter without an entry.
    ///
    /// # Examples
    ///
    /// See [`Budget::poll_acquire`].
    #[deprecated(
        since = "0.3.0",
        note = "drop the wait instead: `Budget::acquire` and `acquire_owned` give their place back when dropped"
    )]
    #[allow(deprecated)]
    pub fn abandon_acquire(&self, waiter: &mut Waiter) {
        self.abandon_entry(&mut waiter.entry);
    }
}

/// Collect the outcome of the resolved entry `key`.
fn collect(waiters: &mut Waiters, key: usize) -> Result<Receipt, Denied> {
    match waiters.remove(key) {
        Ok(outcome) => outcome,
        Err(_) => unreachable!("collected only once resolved"),
    }
}

/// A wait's entry in its budget's queue: the key while it holds one. Given back only by
/// [`Budget::abandon_entry`], which every wait's `Drop` runs.
#[derive(Debug, Default)]
// `pub` (never reachable from outside the crate): the sealed traits of the waits and of the
// I/O adapters name it as an associated type, which must be `pub` (E0446).
#[allow(unreachable_pub)]
pub struct Entry {
    key: Option<usize>,
}

impl<C: Clock> sealed::Queue for Budget<C> {
    /// `n` permits by a deadline (ns of the budget's clock).
    type Request = (u32, Option<Nanos>);
    type Entry = Entry;
    type Outcome = Result<Receipt, Denied>;

    #[inline]
    fn poll_entry(
        &self,
        entry: &mut Entry,
        (n, deadline): (u32, Option<Nanos>),
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Self::Outcome> {
        Budget::poll_entry(self, entry, n, deadline, cx, nap)
    }

    fn abandon_entry(&self, entry: &mut Entry) {
        Budget::abandon_entry(self, entry);
    }
}

/// A wait through any handle ends with the outcome itself.
impl<C: Clock, L> sealed::Hand<L> for Budget<C> {
    type Output = Result<Receipt, Denied>;

    #[inline]
    fn hand(_: &L, outcome: Self::Outcome) -> Self::Output {
        outcome
    }
}

/// The wait of [`Budget::acquire`] (and `_within`, `_until`): `n` permits, first come,
/// first served, borrowed from the budget; a [`Wait`](crate::notify::Wait) always, a future with feature `tokio`,
/// ending with the permits' [`Receipt`] or a [`Denied`]. Cancellation-safe: dropped before
/// it ends, it gives its place back at once (see [`Budget::acquire_until`]).
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::notify::{Nap, Wait};
/// use limitcore::{Budget, RateLimiter};
/// use std::task::{Context, Waker};
///
/// // A driver of one's own: poll the wait as the crate's drivers do.
/// let budget = Budget::with_clock("10/s burst 1".parse()?, ManualClock::new())?;
/// budget.try_acquire()?;
/// let mut wait = budget.acquire(1);
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(wait.poll_wait(&mut cx, &mut Nap::default()).is_pending());
/// assert_eq!(budget.waiting(), 1);
/// drop(wait); // gives its place back
/// assert_eq!(budget.waiting(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Acquire<'a, C = DefaultClock> = Queued<&'a Budget<C>>;

/// The wait of [`Budget::acquire_owned`] (and `_within`, `_until`): as [`Acquire`], owning
/// a reference to the budget (`'static` when the budget is).
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::{Budget, RateLimiter};
/// use limitcore::budget::AcquireOwned;
/// use std::sync::Arc;
///
/// // A struct that keeps its pending wait beside the budget (tokio-util's `PollSemaphore`
/// // shape): dropping it gives the place back.
/// struct Writer {
///     budget: Arc<Budget<ManualClock>>,
///     pending: Option<AcquireOwned<ManualClock>>,
/// }
/// let budget = Arc::new(Budget::with_clock("10/s burst 1".parse()?, ManualClock::new())?);
/// let writer = Writer { budget: budget.clone(), pending: Some(budget.acquire_owned(1)) };
/// drop(writer);
/// assert!(budget.try_acquire().is_ok()); // nothing was held
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type AcquireOwned<C = DefaultClock> = Queued<Arc<Budget<C>>>;

/// One ordered wait's progress on a [`Budget`], kept by the caller between polls of the
/// deprecated [`Budget::poll_acquire`]. It has no `Drop`: dropped mid-wait it stays queued
/// and its reservation stays charged. Use the budget's waits ([`Budget::acquire`],
/// [`Budget::acquire_owned`]; a [`Wait`](crate::notify::Wait) for a driver of your own) instead.
///
/// # Examples
///
/// See [`Budget::poll_acquire`].
#[deprecated(
    since = "0.3.0",
    note = "a `Waiter` dropped mid-wait stays queued: use `Budget::acquire` or `acquire_owned`, which give their place back when dropped"
)]
#[derive(Debug, Default)]
pub struct Waiter {
    entry: Entry,
}
