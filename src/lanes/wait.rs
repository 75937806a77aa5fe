//! Waiting for a lane's grant: [`Ticket`] at explicit times, and the waits [`Acquire`] and
//! [`AcquireOwned`] (the waiting layer's [`Queued`] around the lanes' poll: futures with
//! feature `tokio`; [`Lanes::acquire_blocking`] runs the same wait on the blocking driver).
//!
//! Every wait is the same poll (`Lanes::poll_entry`): submit (the fast path, then the
//! queue), then look at the request until it is granted in full; a wait dropped before it
//! ends takes its request out of the queue. A look serves the queue at the clock's time. The waiter that is
//! the queue's *timer* sleeps until the next piece fits (on the clock's
//! [`sleep_hint`](crate::clock::Clock::sleep_hint): the OS timer, or a
//! [`ManualClock`](crate::clock::ManualClock)'s change of time); every other waiter sleeps
//! until it is woken (granted, made the timer, or the configuration changed).

use super::config::{Lane, LaneError};
use super::shared::Lanes;
use crate::clock::{deadline_until, deadline_within, poll_clock, Clock, DefaultClock, Nanos};
use crate::notify::driver::{block_on, Nap};
use crate::notify::queued::{sealed, Queued};
use alloc::sync::Arc;
use core::fmt;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

/// A request's place in a [`Lanes`] limiter, for a caller that drives time itself (an event
/// loop, a simulation, a test): made by [`Lanes::submit_at`], looked at with
/// [`Ticket::poll_at`].
///
/// # Cancellation
///
/// Dropping a ticket that is still waiting takes it out of its lane's queue, and the units
/// it was granted in pieces pass on to the next waiting requests of its lane, in order;
/// those that no waiting request of the lane can take stay charged to the budget (never
/// refunded: a cancellation never makes the budget more permissive than its rate). A ticket
/// granted in full keeps its units.
///
/// # Examples
///
/// ```
/// use limitcore::{Lane, Lanes, LanesConfig, Progress};
/// use limitcore::clock::ManualClock;
///
/// // 1000 units a second, 100 at once, pieces of 10.
/// let config = LanesConfig::new("1000/s burst 100".parse()?).with_piece(10);
/// let lanes = Lanes::with_clock(config, ManualClock::new())?;
/// let mut low = lanes.submit_at(Lane::LOW, 130, 0)?;      // 100 now, 30 in pieces
/// assert_eq!(low.poll_at(0), Progress::Waiting { next: Some(10_000_000) });
/// let mut user = lanes.submit_at(Lane::USER, 20, 0)?;     // the top lane goes first
/// assert_eq!(user.poll_at(10_000_000), Progress::Waiting { next: Some(20_000_000) });
/// assert_eq!(user.poll_at(20_000_000), Progress::Granted);
/// assert_eq!(low.poll_at(50_000_000), Progress::Granted); // its 3 pieces fit by 50 ms
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Ticket<'a, C: Clock = DefaultClock> {
    lanes: &'a Lanes<C>,
    lane: Lane,
    n: u32,
    /// The queue's key while it waits.
    key: Option<usize>,
}

impl<C: Clock> fmt::Debug for Ticket<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("lane", &self.lane)
            .field("n", &self.n)
            .field("waiting", &self.key.is_some())
            .finish()
    }
}

/// Where a [`Ticket`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Granted in full.
    Granted,
    /// Still waiting; the queue's next piece fits at `next` (ns of the clock; `None` until
    /// the configuration changes: paused). Look again then.
    Waiting {
        /// When the queue's next piece fits.
        next: Option<Nanos>,
    },
}

impl<C: Clock> Ticket<'_, C> {
    /// The lane.
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Units asked for.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// Whether it has been collected as granted in full.
    pub fn is_granted(&self) -> bool {
        self.key.is_none()
    }

    /// Serve the queue at `now` (ns) and say where this request stands.
    pub fn poll_at(&mut self, now: Nanos) -> Progress {
        let Some(key) = self.key else {
            return Progress::Granted;
        };
        let polled = self.lanes.poll_key(key, now, None);
        if polled.granted {
            self.key = None;
            Progress::Granted
        } else {
            Progress::Waiting { next: polled.next }
        }
    }

    /// Give up at `now`: `Err(granted)` with the units it had been given (see the type's
    /// "Cancellation"), or `Ok(())` if it was granted in full meanwhile (it keeps them).
    ///
    /// # Errors
    ///
    /// `Err` is the cancellation's report, not a failure.
    pub fn cancel_at(mut self, now: Nanos) -> Result<(), u32> {
        match self.key.take() {
            None => Ok(()),
            Some(key) => self.lanes.cancel_key(key, now),
        }
    }
}

impl<C: Clock> Drop for Ticket<'_, C> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = self.lanes.cancel_key(key, self.lanes.now());
        }
    }
}

/// A wait's request in its lane's queue: whether it was submitted, and its key while it
/// waits. Given back only by `Lanes::abandon_entry`, which every wait's `Drop` runs.
#[derive(Debug, Default)]
// `pub` (never reachable from outside the crate): the I/O adapters' sealed `Pacing` trait
// names it as an associated type, which must be `pub` (E0446).
#[allow(unreachable_pub)]
pub struct Entry {
    submitted: bool,
    key: Option<usize>,
}

impl<C: Clock> Lanes<C> {
    /// One poll of the wait whose request is `entry` for `n` units of `lane` by `deadline`
    /// (ns of the clock; `None`: none): the wait of every form of [`Lanes::acquire`]. The
    /// first poll submits the request, as [`Lanes::submit_at`] does (what fits at once with
    /// one compare-and-swap if no request that goes first waits, the rest in the lane's
    /// queue); later polls look at it until it is granted in full. `Pending` has registered
    /// `cx`'s waker with what ends the wait and lowered `nap` on an OS clock; `Ready` leaves
    /// `entry` fresh.
    pub(crate) fn poll_entry(
        &self,
        entry: &mut Entry,
        lane: Lane,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<(), LaneError>> {
        if !entry.submitted {
            let l = match self.index(lane) {
                Ok(l) => l,
                Err(error) => return Poll::Ready(Err(error)),
            };
            entry.submitted = true;
            entry.key = self.submit_key(l, n, self.now(), Some(cx.waker()));
        }
        loop {
            let Some(key) = entry.key else {
                entry.submitted = false;
                return Poll::Ready(Ok(()));
            };
            let now = self.now();
            let polled = self.poll_key(key, now, Some(cx.waker()));
            if polled.granted {
                *entry = Entry::default();
                return Poll::Ready(Ok(()));
            }
            if deadline.is_some_and(|d| now >= d) {
                return Poll::Ready(
                    self.abandon_entry(entry)
                        .map_err(|granted| LaneError::TimedOut { granted }),
                );
            }
            let at = match (polled.timer, deadline) {
                (Some(t), Some(d)) => t.min(d),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => return Poll::Pending,
            };
            if poll_clock(self.clock(), at, cx, nap).is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// Give up the wait in `entry`: its request leaves its lane's queue and the units it was
    /// granted in pieces pass on (see [`Ticket`]'s "Cancellation"); `entry` is fresh again.
    /// `Err(granted)` with the units it had been given when it held a place, `Ok(())` if it
    /// held none. What every wait's `Drop` runs.
    pub(crate) fn abandon_entry(&self, entry: &mut Entry) -> Result<(), u32> {
        entry.submitted = false;
        match entry.key.take() {
            None => Ok(()),
            Some(key) => self.cancel_key(key, self.now()),
        }
    }

    /// Submit `n` units for `lane` now. See [`Lanes::submit_at`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::submit_at`].
    pub fn submit(&self, lane: Lane, n: u32) -> Result<Ticket<'_, C>, LaneError> {
        self.submit_at(lane, n, self.now())
    }

    /// Submit `n` units for `lane` at `now` (ns): if no request that goes first waits, as
    /// many as fit are granted at once (one compare-and-swap; RocksDB's partial grant);
    /// the rest waits in the lane's queue and is granted in pieces when they fit. The
    /// ticket says whether it was granted in full.
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`].
    pub fn submit_at(&self, lane: Lane, n: u32, now: Nanos) -> Result<Ticket<'_, C>, LaneError> {
        let l = self.index(lane)?;
        let key = self.submit_key(l, n, now, None);
        Ok(Ticket {
            lanes: self,
            lane,
            n,
            key,
        })
    }

    /// The wait for `n` units of `lane`, in the lanes' order: a future with feature
    /// `tokio`, and a [`Wait`](crate::notify::Wait) for [`block_on`] or a driver of your own. What
    /// [`Lanes::acquire_blocking`] runs. See [`Lanes::acquire_until`].
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::time::Duration;
    ///
    /// let lanes = Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?;
    /// lanes.acquire(Lane::LOW, 64 << 10).await?;        // the whole burst
    /// let read = lanes.acquire(Lane::USER, 4 << 10);     // 4 ms at 1 MiB/s
    /// assert!(tokio::time::timeout(Duration::from_secs(10), read).await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire(&self, lane: Lane, n: u32) -> Acquire<'_, C> {
        Queued::new(self, (lane, n, None))
    }

    /// The wait for `n` units of `lane` that gives up unless they are granted within
    /// `max_wait` (of the clock, counted from this call). See [`Lanes::acquire_until`].
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Lane, LaneError, Lanes, LanesConfig};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let config = LanesConfig::new("1000/s burst 100".parse()?).with_piece(50);
    /// let lanes = Lanes::with_clock(config, clock.clone())?;
    /// let mut wait = Box::pin(lanes.acquire_within(Lane::LOW, 150, Duration::from_millis(10)));
    /// // 100 at once; the last 50 fit at 50 ms on the clock, which reaches the deadline first.
    /// assert!(futures_poll(wait.as_mut()).is_pending());
    /// clock.advance(Duration::from_millis(10));
    /// assert!(matches!(wait.await, Err(LaneError::TimedOut { granted: 100 })));
    /// # Ok(())
    /// # }
    /// # fn futures_poll<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    /// #     f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    /// # }
    /// ```
    pub fn acquire_within(&self, lane: Lane, n: u32, max_wait: Duration) -> Acquire<'_, C> {
        Queued::new(self, (lane, n, deadline_within(self.now(), max_wait)))
    }

    /// The wait for `n` units of `lane` by `deadline` (`None`: none; the time left until it
    /// is counted on the clock from this call): what fits at once if nobody who goes first
    /// waits (one compare-and-swap), the rest in pieces as they fit, in the lanes' order.
    /// Any `n` is granted in the end (in pieces of at most the burst), at the budget's rate.
    /// A top-lane request waits at most the bound of the [module](crate::lanes)'s "Top
    /// lane". Sleeps follow the clock ([`Clock::sleep_hint`]).
    ///
    /// A future with feature `tokio` (on an OS clock it sleeps on tokio's timer) and a
    /// [`Wait`](crate::notify::Wait). Cancellation-safe: dropped before it ends, its request leaves its lane's
    /// queue at once, and the units it was granted in pieces pass on to the next waiting
    /// requests of its lane (see [`Ticket`]'s "Cancellation"; the lanes never refund); one
    /// that ended has its units.
    ///
    /// # Errors (of the wait)
    ///
    /// [`LaneError::NoSuchLane`] at its first poll; [`LaneError::TimedOut`] when the
    /// deadline passes first (the units granted by then pass on, see [`Ticket`]'s
    /// "Cancellation").
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), clock.clone())?;
    /// lanes.acquire(Lane::LOW, 100).await?;
    /// let late = lanes.acquire_until(Lane::LOW, 10, None);
    /// // Due in 10 ms on a clock that does not move: give up after 1 ms.
    /// assert!(tokio::time::timeout(Duration::from_millis(1), late).await.is_err());
    /// assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 0); // left its queue
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_until(&self, lane: Lane, n: u32, deadline: Option<Instant>) -> Acquire<'_, C> {
        Queued::new(self, (lane, n, deadline_until(self.now(), deadline)))
    }

    /// As [`Lanes::acquire`], owning a reference to the limiter (`'static` when the limiter
    /// is): a wait to move into a task, or to keep beside the limiter in a struct of your
    /// own.
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::sync::Arc;
    ///
    /// let lanes = Arc::new(Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?);
    /// let flush = tokio::spawn(lanes.acquire_owned(Lane::HIGH, 4 << 10)); // 'static
    /// flush.await??;
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned(self: &Arc<Self>, lane: Lane, n: u32) -> AcquireOwned<C> {
        Queued::new(Arc::clone(self), (lane, n, None))
    }

    /// As [`Lanes::acquire_within`], owning a reference to the limiter.
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let lanes = Arc::new(Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?);
    /// let read = tokio::spawn(lanes.acquire_owned_within(Lane::USER, 4 << 10, Duration::from_secs(10)));
    /// read.await??;
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_within(
        self: &Arc<Self>,
        lane: Lane,
        n: u32,
        max_wait: Duration,
    ) -> AcquireOwned<C> {
        Queued::new(
            Arc::clone(self),
            (lane, n, deadline_within(self.now(), max_wait)),
        )
    }

    /// As [`Lanes::acquire_until`], owning a reference to the limiter.
    ///
    /// # Errors (of the wait)
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::sync::Arc;
    ///
    /// let lanes = Arc::new(Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?);
    /// lanes.acquire_owned_until(Lane::HIGH, 1 << 10, None).await?; // no deadline
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_until(
        self: &Arc<Self>,
        lane: Lane,
        n: u32,
        deadline: Option<Instant>,
    ) -> AcquireOwned<C> {
        Queued::new(
            Arc::clone(self),
            (lane, n, deadline_until(self.now(), deadline)),
        )
    }

    /// Take `n` units for `lane`, blocking the thread until they are granted:
    /// [`Lanes::acquire`] run on the blocking driver ([`block_on`]).
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_until`] ([`LaneError::NoSuchLane`]; no deadline).
    pub fn acquire_blocking(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
        block_on(self.acquire(lane, n))
    }

    /// As [`Lanes::acquire_within`], blocking the thread.
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Lane, LaneError, Lanes, LanesConfig};
    /// use std::time::Duration;
    ///
    /// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), ManualClock::new())?;
    /// lanes.acquire_blocking(Lane::LOW, 100)?;
    /// // The clock does not move: the deadline is reached at once, the request given up.
    /// let late = lanes.acquire_blocking_within(Lane::LOW, 10, Duration::ZERO);
    /// assert_eq!(late, Err(LaneError::TimedOut { granted: 0 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_within(
        &self,
        lane: Lane,
        n: u32,
        max_wait: Duration,
    ) -> Result<(), LaneError> {
        block_on(self.acquire_within(lane, n, max_wait))
    }

    /// As [`Lanes::acquire_until`], blocking the thread.
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Lane, Lanes, LanesConfig};
    ///
    /// let lanes = Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?;
    /// lanes.acquire_blocking_until(Lane::USER, 4 << 10, None)?; // within the burst: at once
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_until(
        &self,
        lane: Lane,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), LaneError> {
        block_on(self.acquire_until(lane, n, deadline))
    }

    /// One poll of a wait for `n` units of `lane` by `deadline` (ns of the clock), its
    /// progress kept in `waiter`: the poll [`Lanes::acquire`]'s wait runs, for a driver of
    /// your own. A wait stopped before it is `Ready` must be handed to
    /// [`Lanes::abandon_acquire`], or its request stays queued.
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_until`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// use limitcore::clock::ManualClock;
    /// use limitcore::lanes::Waiter;
    /// use limitcore::notify::Nap;
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::task::{Context, Waker};
    ///
    /// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), ManualClock::new())?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut waiter = Waiter::default();
    /// let polled = lanes.poll_acquire(&mut waiter, Lane::LOW, 150, None, &mut cx, &mut Nap::default());
    /// assert!(polled.is_pending()); // 100 at once, 50 to come
    /// assert_eq!(lanes.abandon_acquire(&mut waiter), Err(100)); // by hand: no `Drop`
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[deprecated(
        since = "0.3.0",
        note = "a `Waiter` dropped mid-wait stays queued: use `Lanes::acquire` or `acquire_owned` (a `notify::Wait` for a driver of your own), which leave the queue when dropped"
    )]
    #[allow(deprecated)]
    pub fn poll_acquire(
        &self,
        waiter: &mut Waiter,
        lane: Lane,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<(), LaneError>> {
        self.poll_entry(&mut waiter.entry, lane, n, deadline, cx, nap)
    }

    /// Give up the wait in `waiter` (see [`Lanes::poll_acquire`]): its request leaves its
    /// lane's queue and the units it was granted in pieces pass on.
    ///
    /// # Errors
    ///
    /// `Err(granted)` with the units the request had been given when it held a place in
    /// the queue (the cancellation's report, not a failure); `Ok(())` if it held none.
    ///
    /// # Examples
    ///
    /// See [`Lanes::poll_acquire`].
    #[deprecated(
        since = "0.3.0",
        note = "drop the wait instead: `Lanes::acquire` and `acquire_owned` leave the queue when dropped"
    )]
    #[allow(deprecated)]
    pub fn abandon_acquire(&self, waiter: &mut Waiter) -> Result<(), u32> {
        self.abandon_entry(&mut waiter.entry)
    }
}

impl<C: Clock> sealed::Queue for Lanes<C> {
    /// `n` units of a lane by a deadline (ns of the clock).
    type Request = (Lane, u32, Option<Nanos>);
    type Entry = Entry;
    type Outcome = Result<(), LaneError>;

    #[inline]
    fn poll_entry(
        &self,
        entry: &mut Entry,
        (lane, n, deadline): (Lane, u32, Option<Nanos>),
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Self::Outcome> {
        Lanes::poll_entry(self, entry, lane, n, deadline, cx, nap)
    }

    fn abandon_entry(&self, entry: &mut Entry) {
        let _ = Lanes::abandon_entry(self, entry);
    }
}

/// A wait through any handle ends with the outcome itself.
impl<C: Clock, L> sealed::Hand<L> for Lanes<C> {
    type Output = Result<(), LaneError>;

    #[inline]
    fn hand(_: &L, outcome: Self::Outcome) -> Self::Output {
        outcome
    }
}

/// The wait of [`Lanes::acquire`] (and `_within`, `_until`): `n` units of a lane, in the
/// lanes' order, borrowed from the limiter; a [`Wait`](crate::notify::Wait) always, a
/// future with feature `tokio`. Cancellation-safe: dropped before it ends, its request
/// leaves its lane's queue at once (see [`Lanes::acquire_until`]).
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::notify::{Nap, Wait};
/// use limitcore::{Lane, Lanes, LanesConfig};
/// use std::task::{Context, Waker};
///
/// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), ManualClock::new())?;
/// let mut wait = lanes.acquire(Lane::LOW, 150);
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(wait.poll_wait(&mut cx, &mut Nap::default()).is_pending()); // 100 now, 50 to come
/// assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 1);
/// drop(wait); // leaves the queue
/// assert_eq!(lanes.counts(Lane::LOW).unwrap().pending, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Acquire<'a, C = DefaultClock> = Queued<&'a Lanes<C>>;

/// The wait of [`Lanes::acquire_owned`] (and `_within`, `_until`): as [`Acquire`], owning a
/// reference to the limiter (`'static` when the limiter is).
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::lanes::AcquireOwned;
/// use limitcore::{Lane, Lanes, LanesConfig};
/// use std::sync::Arc;
///
/// let lanes = Arc::new(Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), ManualClock::new())?);
/// let pending: AcquireOwned<ManualClock> = lanes.acquire_owned(Lane::LOW, 10);
/// drop(pending); // never polled: nothing submitted
/// assert!(lanes.try_acquire(Lane::LOW, 100).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type AcquireOwned<C = DefaultClock> = Queued<Arc<Lanes<C>>>;

/// One wait's progress on a [`Lanes`] limiter, kept by the caller between polls of the
/// deprecated [`Lanes::poll_acquire`]. It has no `Drop`: dropped mid-wait, its request stays
/// at its place and the requests of its lane behind it wait for it. Use the limiter's waits
/// ([`Lanes::acquire`], [`Lanes::acquire_owned`]; a [`Wait`](crate::notify::Wait) for a
/// driver of your own)
/// instead.
///
/// # Examples
///
/// See [`Lanes::poll_acquire`].
#[deprecated(
    since = "0.3.0",
    note = "a `Waiter` dropped mid-wait stays queued: use `Lanes::acquire` or `acquire_owned`, which leave the queue when dropped"
)]
#[derive(Debug, Default)]
pub struct Waiter {
    entry: Entry,
}
