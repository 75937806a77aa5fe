//! Waiting for a lane's grant (layer 3): [`Ticket`] at explicit times, blocking waits
//! ([`Lanes::acquire_blocking`]), and async waits on tokio's timer
//! ([`Lanes::acquire`], feature `tokio`).
//!
//! Every wait is the same poll ([`Lanes::poll_acquire`]), run blocking or async by the waiting
//! layer's driver: submit (the fast path, then the queue), then look at the request until
//! it is granted in full. A look serves the queue at the clock's time. The waiter that is
//! the queue's *timer* sleeps until the next piece fits (on the clock's
//! [`sleep_hint`](crate::clock::Clock::sleep_hint): the OS timer, or a
//! [`ManualClock`](crate::clock::ManualClock)'s change of time); every other waiter sleeps
//! until it is woken (granted, made the timer, or the configuration changed).

use super::config::{Lane, LaneError};
use super::shared::Lanes;
use crate::clock::poll_clock;
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
#[cfg(feature = "tokio")]
use crate::notify::driver::WaitFuture;
use crate::notify::driver::{block_on, Nap, Wait};
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

/// One wait's progress on a [`Lanes`] limiter, kept by the caller between polls of
/// [`Lanes::poll_acquire`]: whether its request was submitted, and its place in its lane's
/// queue while it waits. It borrows nothing, so an adapter that owns both the limiter and
/// the wait (the crate's [`InLane`](crate::io::InLane) pacer does) can keep it beside the
/// limiter.
///
/// # Abandoning
///
/// A waiter that holds a place (a poll returned `Pending`) must be finished (polled until
/// `Ready`) or handed to [`Lanes::abandon_acquire`] of the same limiter before it is
/// dropped: only the limiter can take a request out of its lane's queue and pass the units
/// it was granted in pieces on (see [`Ticket`]'s "Cancellation"). Dropped instead, the
/// request stays at its place and the requests of its lane behind it wait for it. The
/// crate's own waits ([`Lanes::acquire_blocking`], [`Ticket`], and with feature `tokio`
/// [`Lanes::acquire`](Lanes::acquire)) do this in their `Drop`; use them unless you write a
/// driver of your own.
///
/// # Examples
///
/// See [`Lanes::poll_acquire`].
#[derive(Debug, Default)]
pub struct Waiter {
    submitted: bool,
    key: Option<usize>,
}

impl<C: Clock> Lanes<C> {
    /// One poll of a wait for `n` units of `lane` by `deadline` (ns of the clock; `None`:
    /// none), its progress kept in `waiter`: the wait of [`Lanes::acquire_blocking_until`],
    /// written once as a poll, for a driver of your own (the crate's blocking and async
    /// waits and its [`InLane`](crate::io::InLane) pacer run this same poll).
    ///
    /// The first poll submits the request, as [`Lanes::submit_at`] does (`lane` and `n`
    /// are read then; later polls of the same wait keep them): what fits at once if no
    /// request that goes first waits, the rest in the lane's queue. Later polls look at it
    /// until it is granted in full. A `Pending` poll has registered `cx`'s waker with what
    /// ends the wait (the queue, or a [`ManualClock`](crate::clock::ManualClock) reaching
    /// the queue's next piece) and lowered `nap` to the longest it may sleep before the next
    /// poll (the time left on an OS clock, which has no waker to call); poll again when
    /// woken or when the nap is over. `Ready` ends the wait, and `waiter` is fresh again. A
    /// wait stopped before it is `Ready` must be handed to [`Lanes::abandon_acquire`] (see
    /// [`Waiter`]'s "Abandoning").
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`] at the first poll; [`LaneError::TimedOut`] when `deadline`
    /// passes first (the request is given up: the units granted by then pass on, see
    /// [`Ticket`]'s "Cancellation").
    ///
    /// # Examples
    ///
    /// A driver of one's own, on a [`ManualClock`](crate::clock::ManualClock) (its waits
    /// never nap: moving the clock wakes them):
    ///
    /// ```
    /// use limitcore::clock::ManualClock;
    /// use limitcore::lanes::Waiter;
    /// use limitcore::notify::Nap;
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use std::task::{Context, Poll, Waker};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 100".parse()?), clock.clone())?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut poll = |waiter: &mut Waiter, n| {
    ///     let mut nap = Nap::default();
    ///     lanes.poll_acquire(waiter, Lane::LOW, n, None, &mut cx, &mut nap)
    /// };
    /// let mut waiter = Waiter::default();
    /// assert!(poll(&mut waiter, 150).is_pending()); // 100 at once, 50 to come
    /// clock.advance(Duration::from_millis(50));
    /// assert!(matches!(poll(&mut waiter, 150), Poll::Ready(Ok(()))));
    ///
    /// // A wait given up leaves its lane's queue.
    /// assert!(poll(&mut waiter, 10).is_pending());
    /// assert_eq!(lanes.abandon_acquire(&mut waiter), Err(0)); // it had been given nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_acquire(
        &self,
        waiter: &mut Waiter,
        lane: Lane,
        n: u32,
        deadline: Option<Nanos>,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<(), LaneError>> {
        if !waiter.submitted {
            let l = match self.index(lane) {
                Ok(l) => l,
                Err(error) => return Poll::Ready(Err(error)),
            };
            waiter.submitted = true;
            waiter.key = self.submit_key(l, n, self.now(), Some(cx.waker()));
        }
        loop {
            let Some(key) = waiter.key else {
                waiter.submitted = false;
                return Poll::Ready(Ok(()));
            };
            let now = self.now();
            let polled = self.poll_key(key, now, Some(cx.waker()));
            if polled.granted {
                waiter.key = None;
                waiter.submitted = false;
                return Poll::Ready(Ok(()));
            }
            if deadline.is_some_and(|d| now >= d) {
                return Poll::Ready(
                    self.abandon_acquire(waiter)
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

    /// Give up the wait in `waiter` (see [`Lanes::poll_acquire`]): its request leaves its
    /// lane's queue and the units it was granted in pieces pass on (see [`Ticket`]'s
    /// "Cancellation"). `waiter` is fresh again.
    ///
    /// # Errors
    ///
    /// `Err(granted)` with the units the request had been given when it held a place in
    /// the queue (the cancellation's report, not a failure); `Ok(())` if it held none.
    ///
    /// # Examples
    ///
    /// See [`Lanes::poll_acquire`].
    pub fn abandon_acquire(&self, waiter: &mut Waiter) -> Result<(), u32> {
        waiter.submitted = false;
        match waiter.key.take() {
            None => Ok(()),
            Some(key) => self.cancel_key(key, self.now()),
        }
    }

    /// The wait for `n` units of `lane` by `deadline`, to run blocking or async (a lane the
    /// limiter does not have ends it at its first poll, [`LaneError::NoSuchLane`]).
    fn acquire_wait(&self, lane: Lane, n: u32, deadline: Option<Nanos>) -> Acquire<'_, C> {
        Acquire {
            lanes: self,
            lane,
            n,
            deadline,
            waiter: Waiter::default(),
        }
    }

    /// The deadline `max_wait` from now on the clock (`None` past its range).
    fn deadline_within(&self, max_wait: Duration) -> Option<Nanos> {
        self.now().checked_add(duration_to_nanos(max_wait))
    }

    /// The OS deadline `deadline` as a time of the clock.
    fn deadline_at(&self, deadline: Option<Instant>) -> Option<Nanos> {
        deadline.and_then(|d| self.deadline_within(d.saturating_duration_since(Instant::now())))
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

    /// Take `n` units for `lane`, blocking the thread until they are granted. See
    /// [`Lanes::acquire_blocking_until`].
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`].
    pub fn acquire_blocking(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
        block_on(self.acquire_wait(lane, n, None))
    }

    /// Take `n` units for `lane` if they are granted within `max_wait` (of the clock). See
    /// [`Lanes::acquire_blocking_until`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    pub fn acquire_blocking_within(
        &self,
        lane: Lane,
        n: u32,
        max_wait: Duration,
    ) -> Result<(), LaneError> {
        block_on(self.acquire_wait(lane, n, self.deadline_within(max_wait)))
    }

    /// Take `n` units for `lane` by `deadline` (`None`: none; the time left until it is
    /// counted on the clock from the call), blocking the thread: what fits at once if
    /// nobody who goes first waits, the rest in pieces as they fit, in the lanes' order. Any
    /// `n` is granted in the end (in pieces of at most the burst), at the budget's rate. A
    /// top-lane request waits at most the bound of the [module](crate::lanes)'s "Top lane".
    /// Sleeps follow the clock ([`Clock::sleep_hint`]).
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`]; [`LaneError::TimedOut`] when the deadline passes first
    /// (the units granted by then pass on, see [`Ticket`]'s "Cancellation").
    pub fn acquire_blocking_until(
        &self,
        lane: Lane,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), LaneError> {
        block_on(self.acquire_wait(lane, n, self.deadline_at(deadline)))
    }
}

/// A wait for a lane's units (see [`Lanes::poll_acquire`]), run by the waiting layer's
/// driver; dropped before it ends, it gives up its request.
#[derive(Debug)]
struct Acquire<'a, C: Clock> {
    lanes: &'a Lanes<C>,
    lane: Lane,
    n: u32,
    deadline: Option<Nanos>,
    waiter: Waiter,
}

impl<C: Clock> Wait for Acquire<'_, C> {
    type Output = Result<(), LaneError>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        self.lanes
            .poll_acquire(&mut self.waiter, self.lane, self.n, self.deadline, cx, nap)
    }
}

impl<C: Clock> Drop for Acquire<'_, C> {
    fn drop(&mut self) {
        let _ = self.lanes.abandon_acquire(&mut self.waiter);
    }
}

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<C: Clock> Lanes<C> {
    /// As [`Lanes::acquire_blocking`], as a future (feature `tokio`: it sleeps on tokio's
    /// timer when the clock is an OS clock).
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    pub async fn acquire(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
        WaitFuture::new(self.acquire_wait(lane, n, None)).await
    }

    /// As [`Lanes::acquire_blocking_within`], as a future (feature `tokio`).
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    pub async fn acquire_within(
        &self,
        lane: Lane,
        n: u32,
        max_wait: Duration,
    ) -> Result<(), LaneError> {
        let deadline = self.deadline_within(max_wait);
        WaitFuture::new(self.acquire_wait(lane, n, deadline)).await
    }

    /// As [`Lanes::acquire_blocking_until`], as a future (feature `tokio`).
    /// Cancellation-safe: a future dropped before it completes leaves its lane's queue, and
    /// the units it was granted in pieces pass on to the next waiting requests of its lane
    /// (see [`Ticket`]'s "Cancellation"); one that completed has its units.
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
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
    /// assert!(tokio::time::timeout(Duration::from_millis(100), read).await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_until(
        &self,
        lane: Lane,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), LaneError> {
        let deadline = self.deadline_at(deadline);
        WaitFuture::new(self.acquire_wait(lane, n, deadline)).await
    }

    /// Renamed [`Lanes::acquire`] (async waits take the plain name, blocking ones end in
    /// `_blocking`).
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    #[deprecated(since = "0.2.0", note = "renamed `acquire`")]
    pub async fn acquire_async(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
        self.acquire(lane, n).await
    }

    /// Renamed [`Lanes::acquire_within`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    #[deprecated(since = "0.2.0", note = "renamed `acquire_within`")]
    pub async fn acquire_async_within(
        &self,
        lane: Lane,
        n: u32,
        max_wait: Duration,
    ) -> Result<(), LaneError> {
        self.acquire_within(lane, n, max_wait).await
    }

    /// Renamed [`Lanes::acquire_until`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::acquire_blocking_until`].
    #[deprecated(since = "0.2.0", note = "renamed `acquire_until`")]
    pub async fn acquire_async_until(
        &self,
        lane: Lane,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<(), LaneError> {
        self.acquire_until(lane, n, deadline).await
    }
}
