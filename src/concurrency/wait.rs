//! Waiting for permits: the waits [`Acquire`] and [`AcquireOwned`] (futures on any
//! executor; with a deadline, feature `tokio`, for its timer), and the blocking waits, which
//! run the same waits on the waiting layer's blocking driver.
//!
//! Every wait is the waiting layer's [`Queued`] around one poll (`Permits::poll_entry`):
//! the one-CAS grant on the first poll, else the queue (see the module's "No lost
//! wake-up"); later polls look at the entry. Its `Drop` (`Permits::abandon_entry`) takes
//! an entry that did not finish out of the queue and gives back a grant it had not
//! collected.

use super::error::{AcquireError, Refusal};
use super::feedback::{Feedback, Fixed};
use super::handoff::Enqueued;
use super::permit::{sealed::Release as _, Completion, Permit, Token};
use super::permits::{OwnedPermit, Permits};
use super::queue::Polled;
use crate::clock::instant_within;
use crate::notify::driver::{block_on, Nap};
#[cfg(not(feature = "tokio"))]
use crate::notify::queued::poll_future;
use crate::notify::queued::{sealed, Queued};
use alloc::sync::Arc;
#[cfg(not(feature = "tokio"))]
use core::future::Future;
#[cfg(not(feature = "tokio"))]
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

impl<F: Feedback> Permits<F> {
    /// Take `n` permits, blocking the thread until they are granted: [`Permits::acquire`]
    /// run on the blocking driver. `n = 0` succeeds at once.
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsLimit`] at once if `n` is above the limit (or later, if the
    /// limit is cut below `n` while it waits); [`AcquireError::BacklogFull`] at once if the
    /// queue is full.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::Permits;
    /// use std::sync::Arc;
    ///
    /// let permits = Arc::new(Permits::new(1)?);
    /// let held = permits.try_acquire_owned(1)?;
    /// let waiter = {
    ///     let permits = permits.clone();
    ///     std::thread::spawn(move || permits.acquire_blocking(1).map(|p| p.n()))
    /// };
    /// while permits.waiters() == 0 {
    ///     std::thread::yield_now(); // until it has queued
    /// }
    /// drop(held);                                 // the waiter is granted and woken
    /// assert_eq!(waiter.join().unwrap()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking(&self, n: u32) -> Result<Permit<&Self>, AcquireError> {
        block_on(self.wait(n, None))
    }

    /// As [`Permits::acquire_blocking`], giving up once `max_wait` has passed.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking`], and [`AcquireError::TimedOut`] when `max_wait` has
    /// passed, with nothing taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::{AcquireError, Permits};
    /// use std::time::Duration;
    ///
    /// let permits = Permits::new(1)?;
    /// let _held = permits.try_acquire(1)?;
    /// let late = permits.acquire_blocking_within(1, Duration::from_millis(5));
    /// assert_eq!(late.unwrap_err(), AcquireError::TimedOut);
    /// assert_eq!(permits.waiters(), 0);           // the timed-out waiter left the queue
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<Permit<&Self>, AcquireError> {
        block_on(self.wait(n, instant_within(max_wait)))
    }

    /// As [`Permits::acquire_blocking`], giving up at `deadline` (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::Permits;
    /// use std::time::{Duration, Instant};
    ///
    /// let permits = Permits::new(1)?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(permits.acquire_blocking_until(1, Some(deadline))?.n(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Permit<&Self>, AcquireError> {
        block_on(self.wait(n, deadline))
    }

    /// As [`Permits::acquire_blocking`], with a permit that owns a reference to the limit.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking`].
    pub fn acquire_owned_blocking(
        self: &Arc<Self>,
        n: u32,
    ) -> Result<OwnedPermit<F>, AcquireError> {
        block_on(self.wait_owned(n, None))
    }

    /// As [`Permits::acquire_blocking_within`], with a permit that owns a reference to the
    /// limit.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`].
    pub fn acquire_owned_blocking_within(
        self: &Arc<Self>,
        n: u32,
        max_wait: Duration,
    ) -> Result<OwnedPermit<F>, AcquireError> {
        block_on(self.wait_owned(n, instant_within(max_wait)))
    }

    /// As [`Permits::acquire_blocking_until`], with a permit that owns a reference to the
    /// limit.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`].
    pub fn acquire_owned_blocking_until(
        self: &Arc<Self>,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<OwnedPermit<F>, AcquireError> {
        block_on(self.wait_owned(n, deadline))
    }

    /// The wait for `n` permits by `deadline` (the OS clock's: a concurrency limit has no
    /// clock of its own).
    fn wait(&self, n: u32, deadline: Option<Instant>) -> Acquire<'_, F> {
        Queued::new(self, (n, deadline))
    }

    /// The owned wait for `n` permits by `deadline`.
    pub(crate) fn wait_owned(
        self: &Arc<Self>,
        n: u32,
        deadline: Option<Instant>,
    ) -> AcquireOwned<F> {
        Queued::new(Arc::clone(self), (n, deadline))
    }

    /// A future that resolves to `n` permits once they are granted (`n = 0`: at once): the
    /// one-CAS grant on its first poll, else a place in the queue (FIFO or LIFO). Dropping
    /// it before it resolves takes nothing: a queued request leaves the queue at once, and
    /// permits granted to it meanwhile are given back. Runs on any executor (it never naps);
    /// it is a [`Wait`](crate::notify::Wait) too, which [`Permits::acquire_blocking`] runs
    /// on a thread.
    ///
    /// # Errors (of the future)
    ///
    /// [`AcquireError::ExceedsLimit`] if `n` is above the limit (at once, or when a cut
    /// makes it so); [`AcquireError::BacklogFull`] if the queue is full.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::Permits;
    ///
    /// let permits = Permits::new(1)?;
    /// let first = permits.acquire(1).await?;
    /// let second = permits.acquire(1);            // queued on its first poll
    /// drop(first);
    /// let second = second.await?;                 // granted by the release
    /// assert_eq!(second.n(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire(&self, n: u32) -> Acquire<'_, F> {
        self.wait(n, None)
    }

    /// As [`Permits::acquire`], resolving to a permit that owns a reference to the limit.
    ///
    /// # Errors (of the future)
    ///
    /// As [`Permits::acquire`].
    ///
    /// # Examples
    ///
    /// See [`AcquireOwned`].
    pub fn acquire_owned(self: &Arc<Self>, n: u32) -> AcquireOwned<F> {
        self.wait_owned(n, None)
    }
}

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<F: Feedback> Permits<F> {
    /// [`Permits::acquire`] that gives up once `max_wait` has passed (feature `tokio`: the
    /// future sleeps towards its deadline on tokio's timer).
    ///
    /// # Errors (of the future)
    ///
    /// As [`Permits::acquire`], and [`AcquireError::TimedOut`] after `max_wait`, with
    /// nothing taken.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::{AcquireError, Permits};
    /// use std::time::Duration;
    ///
    /// let permits = Permits::new(1)?;
    /// let _held = permits.acquire(1).await?;
    /// let late = permits.acquire_within(1, Duration::from_millis(5)).await;
    /// assert_eq!(late.unwrap_err(), AcquireError::TimedOut);
    /// assert_eq!(permits.waiters(), 0);           // the timed-out waiter left the queue
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_within(&self, n: u32, max_wait: Duration) -> Acquire<'_, F> {
        self.wait(n, instant_within(max_wait))
    }

    /// [`Permits::acquire`] that gives up at `deadline` (`None`: none; feature `tokio`).
    ///
    /// # Errors (of the future)
    ///
    /// As [`Permits::acquire_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::{AcquireError, Permits};
    /// use std::time::{Duration, Instant};
    ///
    /// let permits = Permits::new(1)?;
    /// let _held = permits.acquire(1).await?;
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(permits.acquire_until(1, Some(soon)).await.unwrap_err(), AcquireError::TimedOut);
    /// assert_eq!(permits.waiters(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_until(&self, n: u32, deadline: Option<Instant>) -> Acquire<'_, F> {
        self.wait(n, deadline)
    }

    /// [`Permits::acquire_owned`] that gives up once `max_wait` has passed (feature
    /// `tokio`).
    ///
    /// # Errors (of the future)
    ///
    /// As [`Permits::acquire_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::Permits;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let permits = Arc::new(Permits::new(2)?);
    /// let task = tokio::spawn(permits.acquire_owned_within(2, Duration::from_secs(1)));
    /// assert_eq!(task.await??.n(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_within(self: &Arc<Self>, n: u32, max_wait: Duration) -> AcquireOwned<F> {
        self.wait_owned(n, instant_within(max_wait))
    }

    /// [`Permits::acquire_owned`] that gives up at `deadline` (`None`: none; feature
    /// `tokio`).
    ///
    /// # Errors (of the future)
    ///
    /// As [`Permits::acquire_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::concurrency::Permits;
    /// use std::sync::Arc;
    ///
    /// let permits = Arc::new(Permits::new(2)?);
    /// assert_eq!(permits.acquire_owned_until(1, None).await?.n(), 1); // no deadline
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_until(
        self: &Arc<Self>,
        n: u32,
        deadline: Option<Instant>,
    ) -> AcquireOwned<F> {
        self.wait_owned(n, deadline)
    }
}

/// Where a wait is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not polled yet.
    #[default]
    Start,
    /// In the queue under `key`, for `n` permits.
    Queued { key: usize, n: u32 },
    /// Resolved.
    Done,
}

/// What a wait for permits keeps between polls (see [`Permits::acquire`]): where it is.
/// Given back only by the wait's `Drop`.
#[derive(Debug, Default)]
#[allow(unreachable_pub)]
pub struct Entry {
    state: State,
}

impl Entry {
    /// The wait ends with `result`.
    fn finish(&mut self, result: Result<Token, Refusal>) -> Poll<Result<Token, Refusal>> {
        self.state = State::Done;
        Poll::Ready(result)
    }
}

impl<F: Feedback> sealed::Queue for Permits<F> {
    /// `n` permits by a deadline of the OS clock (a concurrency limit has no clock of its
    /// own).
    type Request = (u32, Option<Instant>);
    type Entry = Entry;
    type Outcome = Result<Token, Refusal>;

    /// The one poll of every wait for permits: the one-CAS grant on the first poll, else
    /// the queue; later polls look at the entry (refreshing the waker). With a deadline the
    /// wait naps until it at most, and at it cancels its entry, unless it was granted
    /// meanwhile (then the grant is kept).
    ///
    /// # Panics
    ///
    /// If polled again after it ended.
    fn poll_entry(
        &self,
        entry: &mut Entry,
        (n, deadline): (u32, Option<Instant>),
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Self::Outcome> {
        let polled = match entry.state {
            State::Start if n == 0 => return entry.finish(Ok(Token::EMPTY)),
            State::Start => match self.take(n) {
                Err(Refusal::Denied(AcquireError::Full { .. })) => {
                    match self.enqueue(n, cx.waker()) {
                        Ok(Enqueued::Took(token)) => return entry.finish(Ok(token)),
                        Ok(Enqueued::Queued(key)) => {
                            entry.state = State::Queued { key, n };
                            Polled::Waiting
                        }
                        Err(e) => return entry.finish(Err(e)),
                    }
                }
                done => return entry.finish(done),
            },
            State::Queued { key, .. } => self.poll_waiter(key, Some(cx.waker())),
            State::Done => panic!("a wait for permits was polled after it completed"),
        };
        let polled = match (polled, entry.state) {
            (Polled::Waiting, State::Queued { key, .. }) if nap.passed(deadline) => {
                match self.cancel_waiter(key) {
                    Polled::Waiting => return entry.finish(Err(AcquireError::TimedOut.into())),
                    resolved => resolved,
                }
            }
            (polled, _) => polled,
        };
        match polled {
            Polled::Granted { word } => entry.finish(Ok(self.token(n, word))),
            Polled::Failed(e) => entry.finish(Err(e.into())),
            Polled::Waiting => Poll::Pending,
        }
    }

    /// A wait dropped before it ended: leave the queue; give back a grant it had not
    /// collected.
    fn abandon_entry(&self, entry: &mut Entry) {
        if let State::Queued { key, n } = entry.state {
            entry.state = State::Done;
            if let Polled::Granted { word } = self.cancel_waiter(key) {
                self.release(&self.token(n, word), Completion::Ignored);
            }
        }
    }
}

/// A borrowed wait ends with a permit borrowed from the limit.
impl<'a, F: Feedback> sealed::Hand<&'a Permits<F>> for Permits<F> {
    type Output = Result<Permit<&'a Permits<F>>, AcquireError>;

    #[inline]
    fn hand(permits: &&'a Permits<F>, outcome: Self::Outcome) -> Self::Output {
        match outcome {
            Ok(token) => Ok(Permit::new(*permits, token)),
            Err(refusal) => Err(refusal.into_error()),
        }
    }
}

/// An owned wait ends with a permit that owns a reference to the limit.
impl<F: Feedback> sealed::Hand<Arc<Permits<F>>> for Permits<F> {
    type Output = Result<OwnedPermit<F>, AcquireError>;

    #[inline]
    fn hand(permits: &Arc<Permits<F>>, outcome: Self::Outcome) -> Self::Output {
        match outcome {
            Ok(token) => Ok(Permit::new(Arc::clone(permits), token)),
            Err(refusal) => Err(refusal.into_error()),
        }
    }
}

/// The wait of [`Permits::acquire`] (and, feature `tokio`, `_within`, `_until`): resolves
/// to a permit borrowed from the limit. A future on any executor (one with a deadline
/// sleeps on tokio's timer), and a [`Wait`](crate::notify::Wait): the waiting layer's
/// [`Queued`], as the budgets' and the lanes' waits.
///
/// Cancellation-safe: dropping it before it resolves takes nothing (a queued request leaves
/// the queue at once, and permits granted to it meanwhile are given back).
///
/// # Panics
///
/// If polled again after it resolved.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use limitcore::concurrency::Permits;
/// use std::time::Duration;
///
/// let permits = Permits::new(1)?;
/// let held = permits.acquire(1).await?;
/// // A wait that loses a race (here to a timer) leaves the queue as it is dropped.
/// tokio::select! {
///     _ = permits.acquire(1) => unreachable!("the permit is held"),
///     _ = tokio::time::sleep(Duration::from_millis(1)) => {}
/// }
/// assert_eq!(permits.waiters(), 0);
/// # drop(held);
/// # Ok(())
/// # }
/// ```
pub type Acquire<'a, F = Fixed> = Queued<&'a Permits<F>>;

/// The wait of [`Permits::acquire_owned`] (and, feature `tokio`, `_within`, `_until`):
/// resolves to an [`OwnedPermit`]. A future on any executor (one with a deadline sleeps on
/// tokio's timer), and a [`Wait`](crate::notify::Wait): the waiting layer's [`Queued`].
///
/// Cancellation-safe: dropping it before it resolves takes nothing.
///
/// # Panics
///
/// If polled again after it resolved.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use limitcore::concurrency::Permits;
/// use std::sync::Arc;
///
/// let permits = Arc::new(Permits::new(4)?);
/// let task = tokio::spawn(permits.acquire_owned(2)); // 'static: a task of its own
/// let permit = task.await??;
/// assert_eq!((permit.n(), permits.in_flight()), (2, 2));
/// # Ok(())
/// # }
/// ```
pub type AcquireOwned<F = Fixed> = Queued<Arc<Permits<F>>>;

/// Without feature `tokio` the waits for permits are futures still: the waits with no
/// deadline never nap (the only ones a caller can make without it).
#[cfg(not(feature = "tokio"))]
impl<'a, F: Feedback> Future for Acquire<'a, F> {
    type Output = Result<Permit<&'a Permits<F>>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        poll_future(self.get_mut(), cx)
    }
}

/// As the borrowed wait's.
#[cfg(not(feature = "tokio"))]
impl<F: Feedback> Future for AcquireOwned<F> {
    type Output = Result<OwnedPermit<F>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        poll_future(self.get_mut(), cx)
    }
}
