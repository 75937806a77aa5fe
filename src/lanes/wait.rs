//! Waiting for a lane's grant (layer 3): [`Ticket`] at explicit times, blocking waits
//! ([`Lanes::acquire_blocking`]), and async waits on tokio's timer
//! ([`Lanes::acquire_async`], feature `tokio`).
//!
//! Every wait is the same loop: submit (the fast path, then the queue), then look at the
//! request until it is granted in full. A look serves the queue at the clock's time. The
//! waiter that is the queue's *timer* sleeps until the next piece fits (on the clock's
//! [`sleep_hint`](crate::clock::Clock::sleep_hint): the OS timer, or a
//! [`ManualClock`](crate::clock::ManualClock)'s change of time); every other waiter sleeps
//! until it is woken (granted, made the timer, or the configuration changed).

use super::config::{Lane, LaneError};
use super::shared::Lanes;
use crate::clock::{Clock, DefaultClock, Nanos, SleepHint};
use crate::sync::{lock, Condvar, Mutex};
use alloc::sync::Arc;
use core::fmt;
use core::task::Waker;
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

/// How a blocked thread sleeps and is woken: a token behind a mutex and a condition
/// variable (the semantics of a thread's park token, in primitives loom models whole: a
/// wake-up that comes before the sleep leaves the token set, and the sleep returns at once).
#[derive(Debug, Default)]
struct Parker {
    token: Mutex<bool>,
    woken: Condvar,
}

impl Parker {
    /// Sleep until woken (or `timeout` passes), consuming the token.
    fn park(&self, timeout: Option<Duration>) {
        let mut token = lock(&self.token);
        if !*token {
            token = match timeout {
                None => self.woken.wait(token).unwrap_or_else(|p| p.into_inner()),
                Some(t) => {
                    self.woken
                        .wait_timeout(token, t)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
        *token = false;
    }
}

impl alloc::task::Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *lock(&self.token) = true;
        self.woken.notify_one();
    }
}

impl<C: Clock> Lanes<C> {
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
        let key = self.submit_key(l, n, now, || None);
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
        self.acquire_blocking_until(lane, n, None)
    }

    /// Take `n` units for `lane` if they are granted within `max_wait`. See
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
        self.acquire_blocking_until(lane, n, Instant::now().checked_add(max_wait))
    }

    /// Take `n` units for `lane` by `deadline` (`None`: none), blocking the thread: what
    /// fits at once if nobody who goes first waits, the rest in pieces as they fit, in the
    /// lanes' order. Any `n` is granted in the end (in pieces of at most the burst), at the
    /// budget's rate. A top-lane request waits at most the bound of the
    /// [module](crate::lanes)'s "Top lane".
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
        let l = self.index(lane)?;
        // The parker is made only if the request waits (the fast path allocates nothing).
        let mut made = None;
        let Some(key) = self.submit_key(l, n, self.now(), || {
            let parker = Arc::new(Parker::default());
            let waker = Waker::from(parker.clone());
            made = Some((parker, waker.clone()));
            Some(waker)
        }) else {
            return Ok(());
        };
        // (Made whenever the request queued; a fresh one otherwise, registered below.)
        let (parker, waker) = made.unwrap_or_else(|| {
            let parker = Arc::new(Parker::default());
            let waker = Waker::from(parker.clone());
            (parker, waker)
        });
        loop {
            let polled = self.poll_key(key, self.now(), Some(&waker));
            if polled.granted {
                return Ok(());
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return self
                    .cancel_key(key, self.now())
                    .map_err(|granted| LaneError::TimedOut { granted });
            }
            let nap = match polled.timer {
                Some(at) => match self.clock().sleep_hint(at, &waker) {
                    SleepHint::Reached => continue,
                    SleepHint::Sleep(d) => Some(d),
                    SleepHint::UntilWoken => None,
                },
                None => None,
            };
            // A wake-up between the look above and the sleep leaves the token set, so the
            // sleep returns at once: no wake-up is lost.
            parker.park(match (nap, left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (Some(d), None) | (None, Some(d)) => Some(d),
                (None, None) => None,
            });
        }
    }
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;
    use crate::wait::Timer;
    use core::future::{poll_fn, Future};
    use core::pin::pin;
    use core::task::{Context, Poll};

    impl<C: Clock> Lanes<C> {
        /// As [`Lanes::acquire_blocking`], asynchronously on tokio's timer (feature `tokio`).
        ///
        /// # Errors
        ///
        /// As [`Lanes::acquire_blocking_until`].
        pub async fn acquire_async(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
            self.acquire_async_until(lane, n, None).await
        }

        /// As [`Lanes::acquire_blocking_until`], asynchronously on tokio's timer (feature
        /// `tokio`). Cancellation-safe: a future dropped before it completes leaves its
        /// lane's queue, and the units it was granted in pieces pass on to the next waiting
        /// requests of its lane (see [`Ticket`]'s "Cancellation"); one that completed has
        /// its units.
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
        /// lanes.acquire_async(Lane::LOW, 64 << 10).await?;        // the whole burst
        /// let read = lanes.acquire_async(Lane::USER, 4 << 10);     // 4 ms at 1 MiB/s
        /// assert!(tokio::time::timeout(Duration::from_millis(100), read).await.is_ok());
        /// # Ok(())
        /// # }
        /// ```
        pub async fn acquire_async_until(
            &self,
            lane: Lane,
            n: u32,
            deadline: Option<Instant>,
        ) -> Result<(), LaneError> {
            let l = self.index(lane)?;
            /// Takes a dropped future's request out of its queue.
            struct Guard<'a, C: Clock> {
                lanes: &'a Lanes<C>,
                wait: AsyncTicket,
            }
            impl<C: Clock> Drop for Guard<'_, C> {
                fn drop(&mut self) {
                    let _ = self.lanes.abandon_ticket(&mut self.wait);
                }
            }
            let mut guard = Guard {
                lanes: self,
                wait: AsyncTicket::default(),
            };
            let mut limit = pin!(deadline.map(|d| tokio::time::sleep_until(d.into())));
            poll_fn(|cx| {
                if self.poll_ticket(&mut guard.wait, l, n, cx).is_ready() {
                    return Poll::Ready(Ok(()));
                }
                if let Some(limit) = limit.as_mut().as_pin_mut() {
                    if limit.poll(cx).is_ready() {
                        return Poll::Ready(
                            self.abandon_ticket(&mut guard.wait)
                                .map_err(|granted| LaneError::TimedOut { granted }),
                        );
                    }
                }
                Poll::Pending
            })
            .await
        }

        /// One poll of an async wait for `n` units of the lane at index `l`, its progress
        /// kept in `wait` between polls (the I/O adapters keep it across operations):
        /// submitted at the first poll (the fast path, then the queue), then served and
        /// looked at until granted in full, the queue's timer duty slept on tokio's timer.
        /// `Ready` once granted (`wait` is then fresh again).
        pub(crate) fn poll_ticket(
            &self,
            wait: &mut AsyncTicket,
            l: usize,
            n: u32,
            cx: &mut Context<'_>,
        ) -> Poll<()> {
            if !wait.submitted {
                wait.submitted = true;
                wait.key = self.submit_key(l, n, self.now(), || Some(cx.waker().clone()));
            }
            loop {
                let Some(key) = wait.key else {
                    wait.submitted = false;
                    return Poll::Ready(());
                };
                let polled = self.poll_key(key, self.now(), Some(cx.waker()));
                if polled.granted {
                    wait.key = None;
                    wait.submitted = false;
                    return Poll::Ready(());
                }
                let Some(at) = polled.timer else {
                    return Poll::Pending;
                };
                match self.clock().sleep_hint(at, cx.waker()) {
                    SleepHint::Reached => continue,
                    SleepHint::UntilWoken => return Poll::Pending,
                    SleepHint::Sleep(d) => {
                        wait.nap.arm(d);
                        if wait.nap.poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                    }
                }
            }
        }

        /// Give up the wait in `wait` (see [`Ticket`]'s "Cancellation"): `Err(granted)` with
        /// the units it had been given, `Ok(())` if it held no place.
        pub(crate) fn abandon_ticket(&self, wait: &mut AsyncTicket) -> Result<(), u32> {
            wait.submitted = false;
            wait.nap.disarm();
            match wait.key.take() {
                None => Ok(()),
                Some(key) => self.cancel_key(key, self.now()),
            }
        }
    }

    /// An async wait's progress between polls, borrowing nothing: whether its request was
    /// submitted, its queue key while it waits, and the timer of the queue's timer duty.
    #[derive(Debug, Default)]
    pub(crate) struct AsyncTicket {
        submitted: bool,
        key: Option<usize>,
        nap: Timer,
    }
}

#[cfg(feature = "tokio")]
pub(crate) use asynchronous::AsyncTicket;
