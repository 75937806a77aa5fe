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
//! deadline, or a dropped async waiter) gives its place back too.
//!
//! The wait is written once, as a poll ([`Budget::poll_acquire`]), and run blocking or
//! async by the waiting layer's driver; it sleeps on the budget's clock
//! ([`Clock::sleep_hint`]): on a [`ManualClock`](crate::clock::ManualClock) until the
//! clock moves, never on the OS timer.

use super::{waitable, Budget, BudgetRule, Mode};
use crate::clock::poll_clock;
use crate::clock::{duration_to_nanos, Clock, Nanos};
use crate::decision::{Denied, Receipt};
use crate::limiter::{RateLimiter, Refund};
#[cfg(feature = "tokio")]
use crate::notify::driver::WaitFuture;
use crate::notify::driver::{block_on, Nap, Wait};
use crate::notify::list::WaitList;
use crate::notify::wake::WakeList;
use crate::rules::Rule;
use crate::sync::{lock, Ordering};
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

/// One ordered wait's progress on a [`Budget`], kept by the caller between polls of
/// [`Budget::poll_acquire`]: its entry in the budget's queue while it waits (its place in
/// the schedule, or its turn to take one), nothing otherwise. It borrows nothing, so an
/// adapter that owns both the budget and the wait (the crate's [`io`](crate::io) adapters
/// do) can keep it beside the budget.
///
/// # Abandoning
///
/// A waiter that holds an entry (a poll returned `Pending`) must be finished (polled until
/// `Ready`) or handed to [`Budget::abandon_acquire`] of the same budget before it is
/// dropped: the entry holds a reservation and a place in the first-come order, and only
/// the budget can give them back. Dropping it instead leaves the reservation charged (the
/// budget stricter, never more permissive) and the entry in the queue. The crate's own
/// waits ([`Budget::acquire_n_blocking`], [`Budget::acquire_n`](Budget::acquire_n) with
/// feature `tokio`) do this in their `Drop`; use them unless you write a driver of your own.
///
/// # Examples
///
/// See [`Budget::poll_acquire`].
#[derive(Debug, Default)]
pub struct Waiter {
    key: Option<usize>,
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

    /// One look at the wait in `waiter` for `n` permits by `deadline`, with the waiters
    /// locked.
    #[allow(clippy::too_many_arguments)] // the wait's state, borrowed apart under the lock
    fn look(
        &self,
        waiters: &mut Waiters,
        waiter: &mut Waiter,
        n: u32,
        deadline: Option<Nanos>,
        now: Nanos,
        cx: &Context<'_>,
        wakes: &mut WakeList,
    ) -> Look {
        let rule = self.rule();
        let key = match waiter.key {
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
                waiter.key = Some(key);
                key
            }
        };
        if !waiters.is_waiting(key) {
            // Resolved by a reconfiguration (or a placement that failed).
            waiter.key = None;
            return Look::Done(collect(waiters, key));
        }
        self.place_unplaced(waiters, now, Some(key), wakes);
        if !waiters.is_waiting(key) {
            waiter.key = None;
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
            waiter.key = None;
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

    /// One poll of an ordered wait (first come, first served) for `n` permits by
    /// `deadline` (ns of the budget's clock; `None`: none), its progress kept in `waiter`:
    /// the wait of [`Budget::acquire_n_blocking_until`], written once as a poll, for a
    /// driver of your own (the crate's blocking and async waits and its [`io`](crate::io)
    /// adapters run this same poll).
    ///
    /// The first poll decides at once when nobody waits (one compare-and-swap), or takes
    /// the waiter's entry in the queue, kept in arrival order across changes of
    /// configuration and pauses. A `Pending` poll has
    /// registered `cx`'s waker with what ends the wait (the queue, or a
    /// [`ManualClock`](crate::clock::ManualClock) reaching the waiter's time) and lowered
    /// `nap` to the longest it may sleep before the next poll (the time left on an OS
    /// clock, which has no waker to call); poll again when woken or when the nap is over.
    /// `Ready` ends the wait, and `waiter` is fresh again. A wait stopped before it is
    /// `Ready` must be handed to [`Budget::abandon_acquire`] (see [`Waiter`]'s
    /// "Abandoning").
    ///
    /// `Ready(Ok)` carries the receipt of the permits taken ([`Receipt::NOTHING`] when the
    /// budget is, or became, disabled: nothing was charged); it can give them back through
    /// [`Refund::refund`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`]: [`Denied::ExceedsCapacity`] for `n` above
    /// the capacity (at once, or when a change of configuration makes it so while it
    /// waits), [`Denied::RateLimited`] if the permits cannot conform by `deadline`,
    /// [`Denied::Paused`] if the budget is still paused at `deadline`. Each gives the
    /// waiter's place back.
    ///
    /// # Examples
    ///
    /// A driver of one's own, on a [`ManualClock`](crate::clock::ManualClock) (its waits
    /// never nap: moving the clock wakes them):
    ///
    /// ```
    /// use limitcore::budget::Waiter;
    /// use limitcore::clock::ManualClock;
    /// use limitcore::notify::Nap;
    /// use limitcore::{Budget, RateLimiter};
    /// use std::task::{Context, Poll, Waker};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let budget = Budget::with_clock("10/s burst 1".parse()?, clock.clone())?;
    /// budget.try_acquire()?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut waiter = Waiter::default();
    /// let mut poll = |waiter: &mut Waiter| {
    ///     let mut nap = Nap::default();
    ///     let polled = budget.poll_acquire(waiter, 1, None, &mut cx, &mut nap);
    ///     assert_eq!(nap.get(), None); // a manual clock wakes its waiters itself
    ///     polled
    /// };
    /// assert!(poll(&mut waiter).is_pending()); // its place: 100 ms from now
    /// clock.advance(Duration::from_millis(100));
    /// assert!(matches!(poll(&mut waiter), Poll::Ready(Ok(receipt)) if receipt.n() == 1));
    ///
    /// // A wait given up gives its place back.
    /// assert!(poll(&mut waiter).is_pending());
    /// budget.abandon_acquire(&mut waiter);
    /// assert_eq!(budget.waiting(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_acquire(
        &self,
        waiter: &mut Waiter,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Receipt, Denied>> {
        let live = &self.rule().live;
        // Acquire: partner of the release in `queued`; nobody waits: the one-CAS path.
        if waiter.key.is_none() && n > 0 && live.queued.load(Ordering::Acquire) == 0 {
            if let Ok(receipt) = self.acquire_refundable_at(n, self.now()) {
                return Poll::Ready(Ok(receipt));
            }
        }
        loop {
            let now = self.now();
            let mut wakes = WakeList::new();
            let look = {
                let mut waiters = lock(&live.waiters);
                let look = self.look(&mut waiters, waiter, n, deadline, now, cx, &mut wakes);
                self.count_queued(&waiters);
                look
            };
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

    /// Give up the wait in `waiter` (see [`Budget::poll_acquire`]): its entry leaves the
    /// queue, its reservation is refunded (re-timed into the configuration in force), and
    /// so are permits a resolution granted that it had not collected; the waiters behind
    /// it may take the place. Nothing happens for a waiter without an entry (one that never
    /// waited or whose wait ended). `waiter` is fresh again.
    ///
    /// # Examples
    ///
    /// See [`Budget::poll_acquire`].
    pub fn abandon_acquire(&self, waiter: &mut Waiter) {
        let Some(key) = waiter.key.take() else {
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
        // Release: partner of the first look's acquire (`poll_acquire`).
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
    /// blocking and async waits that have not finished.
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
    ///     std::thread::spawn(move || budget.acquire_n_blocking(1))
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

    /// The deadline `max_wait` from now on the budget's clock (`None` past its range).
    fn deadline_within(&self, max_wait: Duration) -> Option<Nanos> {
        self.now().checked_add(duration_to_nanos(max_wait))
    }

    /// The OS deadline `deadline` as a time of the budget's clock (the time left, added to
    /// its reading; past the clock's range: none).
    fn deadline_at(&self, deadline: Option<Instant>) -> Option<Nanos> {
        deadline.and_then(|d| self.deadline_within(d.saturating_duration_since(Instant::now())))
    }

    /// The wait itself, to run blocking or async.
    pub(crate) fn acquire_wait(&self, n: u32, deadline: Option<Nanos>) -> Acquire<'_, C> {
        Acquire {
            budget: self,
            n,
            deadline,
            waiter: Waiter::default(),
        }
    }

    /// Take `n` permits, sleeping until they conform (first come, first served; see the
    /// module). See [`Budget::acquire_n_blocking_until`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    pub fn acquire_n_blocking(&self, n: u32) -> Result<(), Denied> {
        block_on(self.acquire_wait(n, None)).map(drop)
    }

    /// Take `n` permits if they can conform within `max_wait` (of the budget's clock). See
    /// [`Budget::acquire_n_blocking_until`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    pub fn acquire_n_blocking_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        block_on(self.acquire_wait(n, self.deadline_within(max_wait))).map(drop)
    }

    /// Take `n` permits by `deadline` (`None`: no deadline; the time left until it is
    /// counted on the budget's clock from the call): take a place in the schedule, after
    /// every earlier waiter, then sleep until it, re-timed by every change of configuration
    /// (see the module). A request above the burst (under debt) waits until the budget is
    /// full, then goes, leaving it in debt. Sleeps follow the budget's clock
    /// ([`Clock::sleep_hint`]).
    ///
    /// # Errors
    ///
    /// [`Denied::ExceedsCapacity`] at once for `n` above the capacity, or when a change of
    /// configuration makes it so while it waits (its place is given back);
    /// [`Denied::RateLimited`] with the wait left over if the permits cannot conform by the
    /// deadline (at once when known at the start, else when a change makes it so; the place
    /// is given back); [`Denied::Paused`] if the budget is still paused at the deadline.
    /// When the budget is disabled (or becomes so while it waits), `Ok` at once with
    /// nothing charged.
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
        block_on(self.acquire_wait(n, self.deadline_at(deadline))).map(drop)
    }

    /// As [`Budget::acquire_n_blocking`], as a future (feature `tokio`: it sleeps on tokio's
    /// timer when the budget's clock is an OS clock).
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire_n(&self, n: u32) -> Result<(), Denied> {
        WaitFuture::new(self.acquire_wait(n, None)).await.map(drop)
    }

    /// As [`Budget::acquire_n_blocking_within`], as a future (feature `tokio`).
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire_n_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        let deadline = self.deadline_within(max_wait);
        WaitFuture::new(self.acquire_wait(n, deadline))
            .await
            .map(drop)
    }

    /// As [`Budget::acquire_n_blocking_until`], as a future (feature `tokio`).
    /// Cancellation-safe: a future dropped before it completes gives its place back (the
    /// permits it reserved are refunded), and one that completed took them.
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
    /// budget.acquire_n(1).await?;
    /// // A waiter dropped before its turn gives its place back:
    /// let waiting = budget.acquire_n(1);
    /// assert!(tokio::time::timeout(Duration::from_millis(1), waiting).await.is_err());
    /// assert!(budget.snapshot().full_after <= Duration::from_millis(10));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire_n_until(&self, n: u32, deadline: Option<Instant>) -> Result<(), Denied> {
        let deadline = self.deadline_at(deadline);
        WaitFuture::new(self.acquire_wait(n, deadline))
            .await
            .map(drop)
    }

    /// Renamed [`Budget::acquire_n`] (async waits take the plain name, blocking ones end in
    /// `_blocking`).
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[deprecated(since = "0.2.0", note = "renamed `acquire_n`")]
    pub async fn acquire_n_async(&self, n: u32) -> Result<(), Denied> {
        self.acquire_n(n).await
    }

    /// Renamed [`Budget::acquire_n_within`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[deprecated(since = "0.2.0", note = "renamed `acquire_n_within`")]
    pub async fn acquire_n_async_within(&self, n: u32, max_wait: Duration) -> Result<(), Denied> {
        self.acquire_n_within(n, max_wait).await
    }

    /// Renamed [`Budget::acquire_n_until`].
    ///
    /// # Errors
    ///
    /// As [`Budget::acquire_n_blocking_until`].
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[deprecated(since = "0.2.0", note = "renamed `acquire_n_until`")]
    pub async fn acquire_n_async_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), Denied> {
        self.acquire_n_until(n, deadline).await
    }
}

/// Collect the outcome of the resolved entry `key`.
fn collect(waiters: &mut Waiters, key: usize) -> Result<Receipt, Denied> {
    match waiters.remove(key) {
        Ok(outcome) => outcome,
        Err(_) => unreachable!("collected only once resolved"),
    }
}

/// A budget's ordered wait for `n` permits (see the module), run by the waiting layer's
/// driver; dropped before it ends, it gives its place back.
#[derive(Debug)]
pub(crate) struct Acquire<'a, C: Clock> {
    budget: &'a Budget<C>,
    n: u32,
    deadline: Option<Nanos>,
    waiter: Waiter,
}

impl<C: Clock> Wait for Acquire<'_, C> {
    type Output = Result<Receipt, Denied>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        self.budget
            .poll_acquire(&mut self.waiter, self.n, self.deadline, cx, nap)
    }
}

impl<C: Clock> Drop for Acquire<'_, C> {
    fn drop(&mut self) {
        self.budget.abandon_acquire(&mut self.waiter);
    }
}
