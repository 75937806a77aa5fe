//! Waiting for permits: blocking ([`Permits::acquire_blocking`], with a timeout
//! [`Permits::acquire_blocking_within`]) and async ([`Permits::acquire`], the futures
//! [`Acquire`] and [`AcquireOwned`]; with a timeout on tokio's timer, feature `tokio`).
//!
//! Both first try the one-CAS grant, then queue (see the module's "No lost wake-up"). A
//! blocking waiter parks its thread; an async one leaves its waker. The futures are
//! runtime-agnostic (they use only `core::task`): any executor can drive them; only the
//! timed variants need tokio.

use super::error::{AcquireError, Refusal};
use super::feedback::{Feedback, Fixed};
use super::handoff::Enqueued;
use super::permit::{sealed::Release as _, Completion, Permit, Token};
use super::permits::{OwnedPermit, Permits};
use super::queue::Polled;
use crate::notify::driver::{block_on, Nap, Wait};
use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

impl<F: Feedback> Permits<F> {
    /// Take `n` permits, blocking the thread until they are granted. `n = 0` succeeds at
    /// once.
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
    /// use std::time::Duration;
    ///
    /// let permits = Arc::new(Permits::new(1)?);
    /// let held = permits.try_acquire_owned(1)?;
    /// let waiter = {
    ///     let permits = permits.clone();
    ///     std::thread::spawn(move || permits.acquire_blocking(1).map(|p| p.n()))
    /// };
    /// std::thread::sleep(Duration::from_millis(20));
    /// drop(held);                                 // the waiter is granted and woken
    /// assert_eq!(waiter.join().unwrap()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking(&self, n: u32) -> Result<Permit<&Self>, AcquireError> {
        self.acquire_blocking_until(n, None)
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
        self.acquire_blocking_until(n, deadline(max_wait))
    }

    /// As [`Permits::acquire_blocking`], giving up at `deadline` (`None`: no deadline).
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_blocking_within`].
    pub fn acquire_blocking_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Permit<&Self>, AcquireError> {
        match self.wait_blocking(n, deadline) {
            Ok(token) => Ok(Permit::new(self, token)),
            Err(refusal) => Err(refusal.into_error()),
        }
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
        self.acquire_owned_blocking_until(n, None)
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
        self.acquire_owned_blocking_until(n, deadline(max_wait))
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
        match self.wait_blocking(n, deadline) {
            Ok(token) => Ok(Permit::new(self.clone(), token)),
            Err(refusal) => Err(refusal.into_error()),
        }
    }

    /// The blocking wait: the one-CAS grant, else queue and park until granted, refused, or
    /// past the deadline (the wait's one poll, [`poll_wait`], on the waiting layer's
    /// blocking driver). At the deadline the entry is cancelled, unless it was granted
    /// meanwhile, in which case the grant is kept.
    pub(crate) fn wait_blocking(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Token, Refusal> {
        block_on(Blocked {
            permits: self,
            n,
            deadline,
            state: State::Start,
        })
    }

    /// A future that resolves to `n` permits once they are granted (`n = 0`: at once).
    /// Dropping it before it resolves takes nothing: a queued request leaves the queue, and
    /// permits granted to it meanwhile are given back.
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
        Acquire {
            permits: self,
            n,
            state: State::Start,
        }
    }

    /// As [`Permits::acquire`], resolving to a permit that owns a reference to the limit.
    pub fn acquire_owned(self: &Arc<Self>, n: u32) -> AcquireOwned<F> {
        AcquireOwned {
            permits: Some(self.clone()),
            n,
            state: State::Start,
        }
    }
}

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<F: Feedback> Permits<F> {
    /// [`Permits::acquire`] bounded by `max_wait` on tokio's timer (feature `tokio`).
    ///
    /// # Errors
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
    pub async fn acquire_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<Permit<&Self>, AcquireError> {
        tokio::time::timeout(max_wait, self.acquire(n))
            .await
            .unwrap_or(Err(AcquireError::TimedOut))
    }

    /// [`Permits::acquire_owned`] bounded by `max_wait` on tokio's timer.
    ///
    /// # Errors
    ///
    /// As [`Permits::acquire_within`].
    pub async fn acquire_owned_within(
        self: &Arc<Self>,
        n: u32,
        max_wait: Duration,
    ) -> Result<OwnedPermit<F>, AcquireError> {
        tokio::time::timeout(max_wait, self.acquire_owned(n))
            .await
            .unwrap_or(Err(AcquireError::TimedOut))
    }
}

/// The deadline `max_wait` from now (`None` past the clock's range: no bound).
pub(crate) fn deadline(max_wait: Duration) -> Option<Instant> {
    Instant::now().checked_add(max_wait)
}

/// Where an async wait is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not polled yet.
    Start,
    /// In the queue under this key.
    Queued(usize),
    /// Resolved.
    Done,
}

/// The one poll of every wait for permits, blocking or async: the one-CAS grant on the
/// first poll, else the queue; later polls look at the entry (refreshing the waker). With a
/// `deadline` (the OS clock's: a concurrency limit has no clock of its own) the wait naps
/// until it at most, and at it cancels its entry, unless it was granted meanwhile (then the
/// grant is kept).
fn poll_wait<F: Feedback>(
    permits: &Permits<F>,
    n: u32,
    state: &mut State,
    deadline: Option<Instant>,
    cx: &mut Context<'_>,
    nap: &mut Nap,
) -> Poll<Result<Token, Refusal>> {
    let polled = match *state {
        State::Start if n == 0 => return finish(state, Ok(Token::EMPTY)),
        State::Start => match permits.take(n) {
            Err(Refusal::Denied(AcquireError::Full { .. })) => {
                match permits.enqueue(n, cx.waker()) {
                    Ok(Enqueued::Took(token)) => return finish(state, Ok(token)),
                    Ok(Enqueued::Queued(key)) => {
                        *state = State::Queued(key);
                        Polled::Waiting
                    }
                    Err(e) => return finish(state, Err(e)),
                }
            }
            done => return finish(state, done),
        },
        State::Queued(key) => permits.poll_waiter(key, Some(cx.waker())),
        State::Done => panic!("a wait for permits was polled after it completed"),
    };
    let polled = match (polled, *state, deadline) {
        (Polled::Waiting, State::Queued(key), Some(deadline)) => {
            let now = Instant::now();
            if now < deadline {
                nap.at_most(deadline - now);
                return Poll::Pending;
            }
            match permits.cancel_waiter(key) {
                Polled::Waiting => return finish(state, Err(AcquireError::TimedOut.into())),
                resolved => resolved,
            }
        }
        (polled, _, _) => polled,
    };
    match polled {
        Polled::Granted { word } => finish(state, Ok(permits.token(n, word))),
        Polled::Failed(e) => finish(state, Err(e.into())),
        Polled::Waiting => Poll::Pending,
    }
}

/// The wait ends with `result`.
fn finish(state: &mut State, result: Result<Token, Refusal>) -> Poll<Result<Token, Refusal>> {
    *state = State::Done;
    Poll::Ready(result)
}

/// A blocking wait (the waiting layer's blocking driver runs it); dropped before it ends
/// (a panic), it leaves the queue as an async wait does.
struct Blocked<'a, F: Feedback> {
    permits: &'a Permits<F>,
    n: u32,
    deadline: Option<Instant>,
    state: State,
}

impl<F: Feedback> Wait for Blocked<'_, F> {
    type Output = Result<Token, Refusal>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        poll_wait(
            self.permits,
            self.n,
            &mut self.state,
            self.deadline,
            cx,
            nap,
        )
    }
}

impl<F: Feedback> Drop for Blocked<'_, F> {
    fn drop(&mut self) {
        abandon(self.permits, self.n, self.state);
    }
}

/// An async wait dropped before it resolved: leave the queue; give back a grant it had not
/// collected.
fn abandon<F: Feedback>(permits: &Permits<F>, n: u32, state: State) {
    if let State::Queued(key) = state {
        if let Polled::Granted { word } = permits.cancel_waiter(key) {
            permits.release(&permits.token(n, word), Completion::Ignored);
        }
    }
}

/// The future of [`Permits::acquire`]: resolves to a permit borrowed from the limit.
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
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, F: Feedback = Fixed> {
    permits: &'a Permits<F>,
    n: u32,
    state: State,
}

impl<'a, F: Feedback> Future for Acquire<'a, F> {
    type Output = Result<Permit<&'a Permits<F>>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let nap = &mut Nap::default(); // no deadline: no nap
        poll_wait(this.permits, this.n, &mut this.state, None, cx, nap).map(|result| match result {
            Ok(token) => Ok(Permit::new(this.permits, token)),
            Err(refusal) => Err(refusal.into_error()),
        })
    }
}

impl<F: Feedback> Drop for Acquire<'_, F> {
    fn drop(&mut self) {
        abandon(self.permits, self.n, self.state);
    }
}

impl<F: Feedback> fmt::Debug for Acquire<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("n", &self.n)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// The future of [`Permits::acquire_owned`]: resolves to an [`OwnedPermit`].
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
#[must_use = "futures do nothing unless polled"]
pub struct AcquireOwned<F: Feedback = Fixed> {
    /// `None` once resolved (moved into the permit).
    permits: Option<Arc<Permits<F>>>,
    n: u32,
    state: State,
}

impl<F: Feedback> AcquireOwned<F> {
    /// One poll, with the crate's refusal (a keyed caller retries a retired state).
    pub(crate) fn poll_raw(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<OwnedPermit<F>, Refusal>> {
        let Some(permits) = self.permits.as_ref() else {
            panic!("an `AcquireOwned` future was polled after it completed");
        };
        let nap = &mut Nap::default(); // no deadline: no nap
        let result = match poll_wait(permits, self.n, &mut self.state, None, cx, nap) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(result) => result,
        };
        let permits = self.permits.take();
        Poll::Ready(result.and_then(|token| match permits {
            Some(permits) => Ok(Permit::new(permits, token)),
            None => Err(Refusal::Gone),
        }))
    }
}

impl<F: Feedback> Future for AcquireOwned<F> {
    type Output = Result<OwnedPermit<F>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .poll_raw(cx)
            .map(|result| result.map_err(Refusal::into_error))
    }
}

impl<F: Feedback> Drop for AcquireOwned<F> {
    fn drop(&mut self) {
        if let Some(permits) = &self.permits {
            abandon(permits, self.n, self.state);
        }
    }
}

impl<F: Feedback> fmt::Debug for AcquireOwned<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireOwned")
            .field("n", &self.n)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
