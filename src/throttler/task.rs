//! A submitted task: its state machine (see the module [`throttler`](super)), the handle
//! that waits for its outcome, and its errors.

use crate::clock::{instant_within, Nanos};
use crate::notify::driver::{block_on, Nap, Wait, WaitFuture};
use crate::notify::Event;
use crate::sync::{lock, Mutex, MutexGuard};
use core::future::{Future, IntoFuture};
use core::ops::Deref;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A submitted task's closure.
type Closure<T> = Box<dyn FnOnce() -> T + Send>;

/// Where a submitted task is (see the module documentation for the transitions).
enum Stage<T> {
    /// Queued: `cancel` may still take it.
    Pending(Closure<T>),
    /// Begun by the worker: it can no longer be cancelled. The closure, until `run` takes it.
    Running(Option<Closure<T>>),
    /// Cancelled; its closure is being dropped (not an outcome yet).
    Cancelling,
    /// It ran and returned this.
    Done(T),
    /// It ran and panicked with this payload.
    Panicked(Box<dyn Any + Send>),
    /// It was cancelled before it began; its closure is gone.
    Cancelled,
    /// The outcome was handed to the handle.
    Taken,
}

impl<T> Stage<T> {
    /// The outcome, taken out (leaving `Taken`), if there is one.
    fn take_outcome(&mut self) -> Option<Result<T, TaskError>> {
        match std::mem::replace(self, Stage::Taken) {
            Stage::Done(value) => Some(Ok(value)),
            Stage::Panicked(payload) => Some(Err(TaskError::Panicked(TaskPanic::new(payload)))),
            Stage::Cancelled => Some(Err(TaskError::Cancelled)),
            not_yet => {
                *self = not_yet;
                None
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Stage::Pending(_) => "Pending",
            Stage::Running(_) => "Running",
            Stage::Cancelling => "Cancelling",
            Stage::Done(_) => "Done",
            Stage::Panicked(_) => "Panicked",
            Stage::Cancelled => "Cancelled",
            Stage::Taken => "Taken",
        }
    }
}

/// The state of one task, shared by its handle and its queue entry.
pub(super) struct TaskCell<T> {
    stage: Mutex<Stage<T>>,
    /// Notified when the task reaches an outcome.
    settled: Event,
}

impl<T> TaskCell<T> {
    pub(super) fn new(closure: Closure<T>) -> Self {
        TaskCell {
            stage: Mutex::new(Stage::Pending(closure)),
            settled: Event::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Stage<T>> {
        lock(&self.stage)
    }

    /// Publish an outcome (from `Running` or `Cancelling`: nothing of the caller's is
    /// dropped under the lock).
    fn settle(&self, outcome: Stage<T>) {
        *self.lock() = outcome;
        self.settled.notify();
    }

    /// Pending → Cancelling → Cancelled; false (and no change) from any other stage. The
    /// closure is dropped between the two, outside the lock, so a handle that sees
    /// `Cancelled` knows the closure (and all it captured) is gone.
    fn cancel(&self) -> bool {
        let closure = {
            let mut stage = self.lock();
            match std::mem::replace(&mut *stage, Stage::Cancelling) {
                Stage::Pending(closure) => closure,
                other => {
                    *stage = other;
                    return false;
                }
            }
        };
        // Settles even if the closure's `Drop` panics.
        let _settle = SettleCancelled(self);
        drop(closure);
        true
    }

    fn is_settled(&self) -> bool {
        matches!(
            *self.lock(),
            Stage::Done(_) | Stage::Panicked(_) | Stage::Cancelled
        )
    }
}

/// Publishes `Cancelled` when dropped (see [`TaskCell::cancel`]).
struct SettleCancelled<'a, T>(&'a TaskCell<T>);

impl<T> Drop for SettleCancelled<'_, T> {
    fn drop(&mut self) {
        self.0.settle(Stage::Cancelled);
    }
}

/// A task as the queue and the worker see it, whatever its value type.
pub(super) trait Task: Send + Sync {
    /// Whether it still waits to begin.
    fn is_pending(&self) -> bool;
    /// Pending → Running; false if it was cancelled.
    fn begin(&self) -> bool;
    /// Run a begun task's closure, catching a panic, and publish the outcome.
    fn run(&self);
    /// See [`TaskCell::cancel`].
    fn cancel(&self) -> bool;
}

impl<T: Send> Task for TaskCell<T> {
    fn is_pending(&self) -> bool {
        matches!(*self.lock(), Stage::Pending(_))
    }

    fn begin(&self) -> bool {
        let mut stage = self.lock();
        match std::mem::replace(&mut *stage, Stage::Taken) {
            Stage::Pending(closure) => {
                *stage = Stage::Running(Some(closure));
                true
            }
            other => {
                *stage = other;
                false
            }
        }
    }

    fn run(&self) {
        let closure = match &mut *self.lock() {
            Stage::Running(closure) => closure.take(),
            _ => None,
        };
        if let Some(closure) = closure {
            let outcome = match panic::catch_unwind(AssertUnwindSafe(closure)) {
                Ok(value) => Stage::Done(value),
                Err(payload) => Stage::Panicked(payload),
            };
            self.settle(outcome);
        }
    }

    fn cancel(&self) -> bool {
        TaskCell::cancel(self)
    }
}

/// A task submitted to a [`Throttler`](super::Throttler): wait for its outcome (blocking with
/// [`wait_blocking`](TaskHandle::wait_blocking), or `.await` it: [`TaskWait`]), or cancel it
/// before it starts.
///
/// Every handle resolves: whatever happens to the throttler or its worker, its wait ends
/// with the task's value, [`TaskError::Panicked`] or [`TaskError::Cancelled`]; it waits
/// only while the task waits for its start or runs. Dropping the handle (or its awaited
/// future) does not cancel the task.
pub struct TaskHandle<T> {
    cell: Arc<TaskCell<T>>,
    start: Nanos,
}

impl<T> fmt::Debug for TaskHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("start", &self.start)
            .field("stage", &self.cell.lock().name())
            .finish()
    }
}

impl<T> TaskHandle<T> {
    pub(super) fn new(cell: Arc<TaskCell<T>>, start: Nanos) -> Self {
        TaskHandle { cell, start }
    }

    /// The task's scheduled start, in nanoseconds of the throttler's clock. It never moves:
    /// the task begins at this time or, if the worker is busy with an earlier task then,
    /// as soon as that one returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// assert_eq!(t.submit(None, || ())?.start(), 0);
    /// assert_eq!(t.submit(None, || ())?.start(), 1_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Cancel the task if it has not begun; returns whether this call cancelled it. The
    /// closure is dropped (on this thread) before the task's outcome becomes
    /// [`TaskError::Cancelled`]. Its slot in the schedule stays taken: later calls keep
    /// their start times.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, TaskError, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// let first = t.submit(None, || 1)?;
    /// let second = t.submit(None, || 2)?; // starts at 1 s: the clock is frozen
    /// assert!(second.cancel());
    /// assert!(!second.cancel()); // already cancelled
    /// assert_eq!(first.wait_blocking()?, 1);
    /// assert!(matches!(second.wait_blocking(), Err(TaskError::Cancelled)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self) -> bool {
        self.cell.cancel()
    }

    /// Whether the task has an outcome (it returned, panicked or was cancelled), so that
    /// [`wait_blocking`](TaskHandle::wait_blocking) would not block.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// let _first = t.submit(None, || ())?;
    /// let second = t.submit(None, || ())?; // starts at 1 s: the clock is frozen
    /// assert!(!second.is_finished());
    /// second.cancel();
    /// assert!(second.is_finished());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.cell.is_settled()
    }

    /// Block the thread until the task has an outcome, and return it (the handle's wait on
    /// the blocking driver; `.await` the handle for the async form).
    ///
    /// # Errors
    ///
    /// [`TaskError::Cancelled`] if it was cancelled before it began (through
    /// [`cancel`](TaskHandle::cancel), by a shutdown or drop of the throttler, or because its
    /// worker stopped); [`TaskError::Panicked`] if it panicked, with the panic's payload.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, TaskError, Throttler};
    ///
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let fine = t.submit(None, || 42)?;
    /// let broken = t.submit(None, || -> i32 { panic!("out of cheese") })?;
    /// let after = t.submit(None, || 43)?;
    /// assert_eq!(fine.wait_blocking()?, 42);
    /// match broken.wait_blocking() {
    ///     Err(TaskError::Panicked(panic)) => assert_eq!(panic.message(), Some("out of cheese")),
    ///     other => panic!("expected the panic, got {other:?}"),
    /// }
    /// assert_eq!(after.wait_blocking()?, 43); // the worker went on
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking(self) -> Result<T, TaskError> {
        let outcome = block_on(Settled {
            cell: &*self.cell,
            deadline: None,
        });
        outcome.unwrap_or(Err(TaskError::Cancelled))
    }

    /// Wait at most `max_wait` for the task's outcome, blocking the thread: `Ok(outcome)` as
    /// for [`wait_blocking`](TaskHandle::wait_blocking), or `Err(self)` if the task has none
    /// yet after `max_wait` (the handle, to wait again or cancel). `max_wait` is counted on
    /// the OS clock (a task runs in real time, whatever the throttler's clock).
    ///
    /// # Errors
    ///
    /// `Err(self)` if the task has no outcome after `max_wait`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), clock.clone())?;
    /// let _first = t.submit(None, || 1)?;
    /// let second = t.submit(None, || 2)?; // starts at 1 s
    /// let second = second.wait_blocking_within(Duration::from_millis(10)).unwrap_err(); // not yet
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(second.wait_blocking_within(Duration::from_secs(10)).unwrap()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking_within(self, max_wait: Duration) -> Result<Result<T, TaskError>, Self> {
        self.wait_blocking_until(instant_within(max_wait))
    }

    /// Wait until `deadline` (`None`: none; the OS clock's) at most for the task's outcome,
    /// blocking the thread: as [`wait_blocking_within`](TaskHandle::wait_blocking_within).
    ///
    /// # Errors
    ///
    /// `Err(self)` if the task has no outcome at `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    /// use std::time::{Duration, Instant};
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// let first = t.submit(None, || 1)?;
    /// assert_eq!(first.wait_blocking_until(None).unwrap()?, 1); // no deadline
    /// let second = t.submit(None, || 2)?; // at 1 s, on a clock that does not move
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert!(second.wait_blocking_until(Some(soon)).is_err()); // the handle, back
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking_until(
        self,
        deadline: Option<Instant>,
    ) -> Result<Result<T, TaskError>, Self> {
        let outcome = block_on(Settled {
            cell: &*self.cell,
            deadline,
        });
        outcome.ok_or(self)
    }
}

/// The wait for a task's outcome (its cell reached through `H`), or for `deadline` (the OS
/// clock's) to pass: `None` then. Registers with the cell's event without keeping a
/// listener (the clock's way, `Event::register`), so an owned wait borrows nothing.
struct Settled<H> {
    cell: H,
    deadline: Option<Instant>,
}

impl<T, H: Deref<Target = TaskCell<T>>> Wait for Settled<H> {
    type Output = Option<Result<T, TaskError>>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        loop {
            // Listen (the version), look, then sleep only if no outcome was published since
            // the version was read: the event's protocol (no lost wake-up).
            let seen = self.cell.settled.version();
            if let Some(outcome) = self.cell.lock().take_outcome() {
                return Poll::Ready(Some(outcome));
            }
            if nap.passed(self.deadline) {
                return Poll::Ready(None);
            }
            if self.cell.settled.register(seen, cx.waker()) {
                return Poll::Pending;
            }
        }
    }
}

impl<T> IntoFuture for TaskHandle<T> {
    type Output = Result<T, TaskError>;
    type IntoFuture = TaskWait<T>;

    /// The handle's wait as a future (as tokio's `JoinHandle`): resolves to the task's
    /// outcome, as [`TaskHandle::wait_blocking`]. It never naps, so it runs on any executor;
    /// dropping it (like dropping the handle) does not cancel the task.
    fn into_future(self) -> TaskWait<T> {
        TaskWait(WaitFuture::new(Settled {
            cell: self.cell,
            deadline: None,
        }))
    }
}

/// The future of an awaited [`TaskHandle`]: resolves to the task's outcome.
///
/// # Errors (of the future)
///
/// As [`TaskHandle::wait_blocking`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use limitcore::{Quota, Throttler};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), clock.clone())?;
/// let first = t.submit(None, || "now")?;
/// let second = t.submit(None, || "in a second")?;
/// assert_eq!(first.await?, "now");
/// clock.advance(Duration::from_secs(1)); // the second task is due
/// assert_eq!(second.await?, "in a second");
/// # Ok(())
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct TaskWait<T>(WaitFuture<Settled<Arc<TaskCell<T>>>>);

impl<T> Future for TaskWait<T> {
    type Output = Result<T, TaskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().0)
            .poll(cx)
            .map(|outcome| outcome.unwrap_or(Err(TaskError::Cancelled)))
    }
}

impl<T> fmt::Debug for TaskWait<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskWait")
            .field("stage", &self.0.get_ref().cell.lock().name())
            .finish()
    }
}

/// Why a submitted task did not return a value: see [`TaskHandle::wait_blocking`].
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskError {
    /// It was cancelled before it began: by [`TaskHandle::cancel`], by a shutdown or drop of
    /// the throttler, or because the worker stopped. Its closure was dropped, never run.
    Cancelled,
    /// It began and panicked; the panic was caught on the worker, which went on with the
    /// next task. [`TaskPanic::resume`] continues the panic on the caller's thread.
    Panicked(TaskPanic),
}

impl TaskError {
    /// Whether the task was cancelled before it began.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::TaskError;
    /// assert!(TaskError::Cancelled.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
    }

    /// Whether the task panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    ///
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let error = t.submit(None, || panic!("no"))?.wait_blocking().unwrap_err();
    /// assert!(error.is_panic() && !error.is_cancelled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Cancelled => f.write_str("the task was cancelled before it started"),
            TaskError::Panicked(panic) => match panic.message() {
                Some(message) => write!(f, "the task panicked: {message}"),
                None => f.write_str("the task panicked"),
            },
        }
    }
}

impl std::error::Error for TaskError {}

/// The panic of a task, caught on the throttler's worker ([`TaskError::Panicked`]).
///
/// `Send + Sync`, so a [`TaskError`] fits `Box<dyn Error + Send + Sync>`.
pub struct TaskPanic {
    /// The payload's text, if it is a `&str` or a `String` (what `panic!` makes).
    message: Option<String>,
    /// The payload. Behind a lock only to be `Sync` (a payload is only `Send`); never
    /// contended, and not a synchronisation between threads, so std's even under loom.
    payload: std::sync::Mutex<Box<dyn Any + Send>>,
}

impl TaskPanic {
    fn new(payload: Box<dyn Any + Send>) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        TaskPanic {
            message,
            payload: std::sync::Mutex::new(payload),
        }
    }

    /// The panic's message, if its payload is text (as with `panic!("...")`).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, TaskError, Throttler};
    ///
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let code = 7;
    /// match t.submit(None, move || panic!("code {code}"))?.wait_blocking() {
    ///     Err(TaskError::Panicked(panic)) => assert_eq!(panic.message(), Some("code 7")),
    ///     other => panic!("expected a panic, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The panic's payload, as `std::panic::catch_unwind` would return it.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, TaskError, Throttler};
    ///
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let handle = t.submit(None, || std::panic::panic_any(404u16))?;
    /// let Err(TaskError::Panicked(panic)) = handle.wait_blocking() else { unreachable!() };
    /// assert_eq!(panic.message(), None); // not text
    /// assert_eq!(panic.into_payload().downcast_ref::<u16>(), Some(&404));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_payload(self) -> Box<dyn Any + Send> {
        self.payload.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// Continue the panic on this thread, with its payload (`std::panic::resume_unwind`).
    ///
    /// # Panics
    ///
    /// Always: that is what it is for.
    ///
    /// # Examples
    ///
    /// ```should_panic
    /// use limitcore::{Quota, TaskError, Throttler};
    ///
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// if let Err(TaskError::Panicked(panic)) = t.submit(None, || panic!("boom"))?.wait_blocking() {
    ///     panic.resume(); // the caller now panics with "boom"
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(self) -> ! {
        panic::resume_unwind(self.into_payload())
    }
}

impl fmt::Debug for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(message) => f.debug_tuple("TaskPanic").field(message).finish(),
            None => f.write_str("TaskPanic(<non-text payload>)"),
        }
    }
}
