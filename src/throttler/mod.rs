//! [`Throttler`]: the ordered multi-channel throttler.
//!
//! Besides the schedule (exact sliding logs behind one lock), this module holds the worker
//! that runs submitted closures at their starts, and the state machine of a submitted task:
//!
//! ```text
//!                   begin                          the closure returns
//!  Pending ───────────────────────▶ Running ──┬───────────────────────▶ Done(value)
//!     │    (the worker, queue locked,          │  the closure panics (caught)
//!     │     unless shutting down)              └───────────────────────▶ Panicked(payload)
//!     │
//!     │ cancel: TaskHandle::cancel, shutdown or drop of the throttler, or the
//!     │ worker stopping with the task queued (its queue entry is dropped)
//!     ▼
//!  Cancelling ──── the closure is dropped ────▶ Cancelled
//! ```
//!
//! Each transition is one critical section of the task's lock, from the one state shown, so
//! exactly one of `begin` and `cancel` succeeds. The three outcomes are final (until the
//! handle takes its outcome out), and each one is published (the task's
//! [`Event`](crate::notify::Event)) only after the closure is gone, run or dropped. A queue entry cancels its task when it is dropped, so
//! a task cannot be left `Pending` with nobody to start it: every handle resolves.
//! `loom-tests/tests/throttler.rs` model-checks these races on the real throttler.

mod task;
mod worker;

pub use task::{TaskError, TaskHandle, TaskPanic, TaskWait};

use self::task::TaskCell;
use self::worker::{spawn_thread, work, Exit, Job, Queue, Shared, Spawner};
use crate::clock::{duration_to_nanos, instant_within, Clock, DefaultClock, Nanos};
use crate::decision::Denied;
use crate::notify::Event;
use crate::quota::{Quota, QuotaError};
use crate::rules::{window_quota, Log, Rule, SlidingLogRule};
use crate::sync::{lock, Mutex, MutexGuard};
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The schedule: exact logs of the start times, per channel and in total.
struct Schedule<K> {
    total: Log,
    channels: HashMap<K, Log>,
    last_start: Nanos,
}

///
/// Built from a total quota and per-channel quotas, each read as an exact "at most `count`
/// calls in any window of length `period`" (a sliding log; burst is not used). A call on a
/// channel must keep its channel's limit and the total one; a call on no channel, or on a
/// channel without a quota of its own, counts against the total only.
///
/// `K` is the channel key (any `Hash + Eq` type), `C` the clock, as in every other type of
/// the crate.
///
/// # Contract
///
/// - **FIFO.** Start times are non-decreasing in submission order, across all channels: a
///   call never starts before one submitted earlier, even on another channel.
/// - **Earliest.** Each start is the earliest time, not before the previous start (or now),
///   at which every applicable limit still holds: `max(now, previous start, for each
///   applicable log: its blocking entry + period)`.
/// - **Exact.** Every channel and the total keep "at most `count` in any window of length
///   `period`" over start times.
///
/// [`Throttler::reserve`] only schedules; [`Throttler::submit`] runs a closure at its time on
/// the throttler's worker thread; [`Throttler::run`] (feature `tokio`) awaits a future at its
/// time. Decisions take one short lock (the logs are several words that change together).
///
/// # Tasks
///
/// [`submit`](Throttler::submit) starts one worker thread on first use. The worker takes
/// the tasks in start order (which is submission order) and runs each one when the clock
/// reaches its start, never earlier, one at a time: a task that runs long delays the ones
/// after it, never the other way round. Between tasks it sleeps until the next start (on the
/// OS timer for an OS clock, until the clock wakes it for a
/// [`ManualClock`](crate::clock::ManualClock): see [`Clock::sleep_hint`]) or until a new task
/// or a shutdown wakes it; it never polls.
///
/// Each task ends in exactly one outcome, which its [`TaskHandle`] reports: it ran and
/// returned a value, it ran and panicked ([`TaskError::Panicked`]: the panic is caught on
/// the worker, which goes on with the next task at its unchanged start), or it was cancelled
/// before it began ([`TaskError::Cancelled`]: by [`TaskHandle::cancel`], by a shutdown, or
/// because the worker stopped). A cancelled task's closure is dropped, never run, and its
/// slot in the schedule stays taken, so no other start moves.
///
/// # Shutdown
///
/// Shutting down never starts a task. Every task that has not begun is cancelled at once, by
/// the thread that shuts down (its handle's `wait` returns [`TaskError::Cancelled`] without
/// waiting for the worker); a task already running finishes. Then:
///
/// - **`Drop`** does not wait: the worker stops by itself after the task it is running, if
///   any. So dropping a throttler never blocks, even from inside one of its own tasks.
/// - [`Throttler::shutdown`] waits for the running task to finish and the worker to stop;
///   [`Throttler::shutdown_within`] waits at most a given time.
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, Throttler};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// // At most 3 per second in total, at most 1 per second on channel "a".
/// let t = Throttler::with_clock(
///     "3/s".parse()?,
///     [("a", "1/s".parse()?)],
///     ManualClock::new(),
/// )?;
/// assert_eq!(t.reserve(Some(&"a"))?, Duration::ZERO);
/// assert_eq!(t.reserve(Some(&"a"))?, Duration::from_secs(1)); // channel a's limit
/// // FIFO: this call on another channel may not start before the one queued above.
/// assert_eq!(t.reserve(Some(&"b"))?, Duration::from_secs(1));
/// assert_eq!(t.reserve(None)?, Duration::from_secs(1)); // 3 starts in (0, 1 s]
/// assert_eq!(t.reserve(None)?, Duration::from_secs(2)); // the total: 3 in any second
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Tasks, on a clock the example moves:
///
/// ```
/// use limitcore::{TaskError, Throttler};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let t = Throttler::with_clock("1/s".parse()?, [("a", "1/s".parse()?)], clock.clone())?;
/// let first = t.submit(Some(&"a"), || "now")?;
/// let second = t.submit(None, || "in a second")?;
/// assert_eq!(second.start(), 1_000_000_000);
/// assert_eq!(first.wait_blocking()?, "now");
/// clock.advance(Duration::from_secs(1)); // wakes the worker: the second task is due
/// assert_eq!(second.wait_blocking()?, "in a second");
///
/// let third = t.submit(None, || unreachable!("never started"))?;
/// drop(t); // starts nothing: the pending task is cancelled
/// assert!(matches!(third.wait_blocking(), Err(TaskError::Cancelled)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct Throttler<K, C: Clock + Clone + 'static = DefaultClock> {
    schedule: Mutex<Schedule<K>>,
    clock: C,
    max_wait: Nanos,
    /// The worker's side of the throttler, once a task has been submitted.
    worker: Mutex<Option<Arc<Shared>>>,
    spawner: Spawner,
}

impl<K, C: Clock + Clone + fmt::Debug> fmt::Debug for Throttler<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttler")
            .field("clock", &self.clock)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq> Throttler<K, DefaultClock> {
    /// A throttler on the default clock, with a `total` limit and per-channel limits.
    ///
    /// # Errors
    ///
    /// As [`Throttler::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    ///
    /// // 100 per second in total; "search" at most 10 per second.
    /// let t = Throttler::new("100/s".parse()?, [("search", "10/s".parse()?)])?;
    /// assert!(t.reserve(Some(&"search"))?.as_millis() < 100);
    /// // No channels: the channel type still has to be named.
    /// let solo = Throttler::new("5/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// assert!(solo.reserve(None).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(
        total: Quota,
        channels: impl IntoIterator<Item = (K, Quota)>,
    ) -> Result<Self, QuotaError> {
        Throttler::with_clock(total, channels, DefaultClock::new())
    }
}

/// The empty exact log of `quota`: the sliding log's own checks, with the throttler's name
/// in a burst error.
fn log_for(quota: &Quota) -> Result<Log, QuotaError> {
    window_quota(quota, "throttler")?;
    Ok(SlidingLogRule::new(quota)?.fresh())
}

impl<K: Hash + Eq, C: Clock + Clone + 'static> Throttler<K, C> {
    /// A throttler with a `total` limit and per-channel limits, reading time from `clock`.
    /// No thread is started until the first [`submit`](Throttler::submit).
    ///
    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] for a count above
    /// [`SlidingLogRule::MAX_ENTRIES`](crate::rules::SlidingLogRule::MAX_ENTRIES) (each limit
    /// keeps an exact log); [`QuotaError::BurstNotSupported`] for a quota with a burst other
    /// than its count (each limit is "at most `count` in any window", with no burst).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, QuotaError, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("2/s".parse()?, [(1u8, "1/s".parse()?)], ManualClock::new());
    /// assert!(t.is_ok());
    /// let too_big = Quota::new(100_000_000, std::time::Duration::from_secs(1))?;
    /// let refused = Throttler::with_clock(too_big, Vec::<(u8, Quota)>::new(), ManualClock::new());
    /// assert!(matches!(refused, Err(QuotaError::CountTooLarge { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        total: Quota,
        channels: impl IntoIterator<Item = (K, Quota)>,
        clock: C,
    ) -> Result<Self, QuotaError> {
        let channels = channels
            .into_iter()
            .map(|(c, q)| Ok((c, log_for(&q)?)))
            .collect::<Result<HashMap<_, _>, QuotaError>>()?;
        Ok(Throttler {
            schedule: Mutex::new(Schedule {
                total: log_for(&total)?,
                channels,
                last_start: 0,
            }),
            clock,
            max_wait: u64::MAX,
            worker: Mutex::new(None),
            spawner: spawn_thread,
        })
    }

    /// Refuse calls that would start more than `max_wait` from now (default: no bound, the
    /// queue grows as needed). Saturates at `u64::MAX` ns.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?
    ///     .with_max_wait(Duration::from_millis(1_500));
    /// assert_eq!(t.reserve(None)?, Duration::ZERO);
    /// assert_eq!(t.reserve(None)?, Duration::from_secs(1));
    /// // The next start would be 2 s away: refused, with the wait that would let it in.
    /// assert_eq!(t.reserve(None).unwrap_err().retry_after(), Some(Duration::from_millis(500)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = duration_to_nanos(max_wait);
        self
    }

    /// Start the worker with `spawn` instead of on a new OS thread named
    /// `limitcore-throttler`: `spawn` must run the closure it is given (on any thread) or
    /// return an error. A test hook (spawn failures, loom models), not a stable API.
    ///
    /// If `spawn` returns an error, [`submit`](Throttler::submit) returns
    /// [`SubmitError::Spawn`] and schedules nothing; the next `submit` calls `spawn` again.
    /// If it drops the closure without running it, the tasks queued meanwhile are cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, SubmitError, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?
    ///     .with_spawner(|_worker| Err(std::io::Error::other("no threads today")));
    /// assert!(matches!(t.submit(None, || ()), Err(SubmitError::Spawn(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[doc(hidden)]
    pub fn with_spawner(
        mut self,
        spawn: fn(Box<dyn FnOnce() + Send + 'static>) -> io::Result<()>,
    ) -> Self {
        self.spawner = spawn;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Schedule<K>> {
        // The schedule holds only past decisions; a panic elsewhere cannot corrupt it.
        lock(&self.schedule)
    }

    /// Schedule one call on `channel` (`None`: the total only) at the explicit time `now`;
    /// returns its start time, in nanoseconds of the clock.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] if the start would be more than the maximum wait away (with
    /// the wait after which it would not; nothing is scheduled); [`Denied::BeyondHorizon`]
    /// if the start would lie past the clock's range.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    ///
    /// let t = Throttler::with_clock("2/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// assert_eq!(t.reserve_at(None, 100)?, 100);
    /// assert_eq!(t.reserve_at(None, 200)?, 200);
    /// assert_eq!(t.reserve_at(None, 300)?, 1_000_000_100); // the third waits for the first
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_at(&self, channel: Option<&K>, now: Nanos) -> Result<Nanos, Denied> {
        let mut s = self.lock();
        let Schedule {
            total,
            channels,
            last_start,
        } = &mut *s;
        let from = now.max(*last_start);
        let log = channel.and_then(|c| channels.get_mut(c));
        let start = match &log {
            Some(log) => total
                .earliest(from, 1)
                .zip(log.earliest(from, 1))
                .map(|(a, b)| a.max(b)),
            None => total.earliest(from, 1),
        }
        .ok_or(Denied::NEVER)?;
        let delay = start - now;
        if delay > self.max_wait {
            return Err(Denied::rate_limited(delay - self.max_wait));
        }
        total.record(start, 1);
        if let Some(log) = log {
            log.record(start, 1);
        }
        *last_start = start;
        Ok(start)
    }

    /// Schedule one call on `channel` now; returns how long from now it may start.
    ///
    /// # Errors
    ///
    /// As [`Throttler::reserve_at`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), ManualClock::new())?;
    /// assert_eq!(t.reserve(None)?, Duration::ZERO);
    /// assert_eq!(t.reserve(None)?, Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&self, channel: Option<&K>) -> Result<Duration, Denied> {
        let now = self.clock.now();
        self.reserve_at(channel, now)
            .map(|start| Duration::from_nanos(start - now))
    }

    /// Run `task` at its scheduled time on the throttler's worker thread (started on first
    /// use; tasks run one after another in start order). Returns a handle to wait for the
    /// outcome (with or without a timeout) or to cancel the task before it starts; dropping
    /// the handle does not cancel the task.
    ///
    /// A panic in `task` is caught on the worker and reported by the handle
    /// ([`TaskError::Panicked`]); later tasks still run at their starts.
    ///
    /// # Errors
    ///
    /// Nothing is scheduled and `task` is dropped:
    ///
    /// - [`SubmitError::Denied`]: as [`Throttler::reserve_at`] (beyond the maximum wait, or
    ///   past the clock's range).
    /// - [`SubmitError::Spawn`]: the worker thread could not be started (on first use, or
    ///   after the worker stopped because the clock panicked); the next `submit` tries again.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, SubmitError, Throttler};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// // At most one start per millisecond: these run at 0, 1 and 2 ms.
    /// let t = Throttler::new("1/ms".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let handles: Vec<_> = (0..3).map(|i| t.submit(None, move || i * 10)).collect::<Result<_, _>>()?;
    /// let results: Vec<i32> = handles.into_iter().map(|h| h.wait_blocking()).collect::<Result<_, _>>()?;
    /// assert_eq!(results, [0, 10, 20]);
    ///
    /// // With a maximum wait, a task that would start too late is refused.
    /// let clock = ManualClock::new();
    /// let t = Throttler::with_clock("1/s".parse()?, Vec::<(u8, Quota)>::new(), clock)?
    ///     .with_max_wait(Duration::from_millis(500));
    /// let _now = t.submit(None, || ())?;
    /// match t.submit(None, || ()) {
    ///     Err(SubmitError::Denied(denied)) => {
    ///         assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)))
    ///     }
    ///     other => panic!("expected a refusal, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn submit<T, F>(&self, channel: Option<&K>, task: F) -> Result<TaskHandle<T>, SubmitError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let cell = Arc::new(TaskCell::new(Box::new(task)));
        let now = self.clock.now();
        let mut worker = lock(&self.worker);
        let mut fresh = false;
        loop {
            let shared = match &*worker {
                Some(shared) => shared.clone(),
                None => {
                    let shared = self.spawn_worker().map_err(SubmitError::Spawn)?;
                    *worker = Some(shared.clone());
                    fresh = true;
                    shared
                }
            };
            let mut queue = shared.lock();
            if queue.exited {
                // The worker stopped without a shutdown (its clock panicked, or the spawner
                // dropped it): its tasks were cancelled. Start another one, once.
                drop(queue);
                *worker = None;
                if fresh {
                    return Err(SubmitError::Spawn(io::Error::other(
                        "the throttler's worker stopped before taking a task",
                    )));
                }
                continue;
            }
            // Reserve and enqueue under the queue lock, so queue order is start order.
            let start = self.reserve_at(channel, now)?;
            let was_idle = queue.jobs.is_empty();
            queue.jobs.push_back(Job {
                start,
                task: cell.clone(),
            });
            // A task behind others never starts before them: only an idle worker needs
            // waking.
            drop(queue);
            if was_idle {
                shared.changed.notify();
            }
            return Ok(TaskHandle::new(cell, start));
        }
    }

    /// A new worker, started with the spawner.
    fn spawn_worker(&self) -> io::Result<Arc<Shared>> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            changed: Event::new(),
            stopped: Event::new(),
        });
        // Created before the spawn: if the spawner drops the closure unrun, the queue is
        // marked stopped all the same.
        let exit = Exit(shared.clone());
        let clock = self.clock.clone();
        (self.spawner)(Box::new(move || work(exit, &clock)))?;
        Ok(shared)
    }

    /// Await `future` at its scheduled time (feature `tokio`): schedules like
    /// [`Throttler::reserve`], waits until the throttler's clock reaches the start (on tokio's
    /// timer for an OS clock; until the clock wakes the task for a
    /// [`ManualClock`](crate::clock::ManualClock), see [`Clock::sleep_hint`]), then awaits it.
    ///
    /// The same contract as [`submit`](Throttler::submit), in a future's terms:
    ///
    /// - The future starts at its start, never earlier, and in the same FIFO order.
    /// - Dropping the returned future before its start cancels the call: `future` is dropped
    ///   unpolled, and its slot stays taken (no other start moves), as with
    ///   [`TaskHandle::cancel`].
    /// - `future` runs in the caller's task, not on the worker: a panic in it unwinds to
    ///   the caller, like any `.await`. The throttler holds no lock while it waits or runs,
    ///   so it stays usable and no other start moves.
    /// - The throttler cannot be dropped or shut down while a `run` is pending: the future
    ///   borrows it.
    ///
    /// # Errors
    ///
    /// As [`Throttler::reserve_at`] (the future is dropped unpolled).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let t = Throttler::new("1000/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// for i in 0..3 {
    ///     assert_eq!(t.run(None, async move { i }).await?, i);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn run<F: core::future::Future>(
        &self,
        channel: Option<&K>,
        future: F,
    ) -> Result<F::Output, Denied> {
        let start = self.reserve_at(channel, self.clock.now())?;
        self.until(start).await;
        Ok(future.await)
    }

    /// Wait, in an async task, until the clock reaches `start` (the waiting layer's clock
    /// wait, on its async driver).
    #[cfg(feature = "tokio")]
    async fn until(&self, start: Nanos) {
        use crate::clock::Until;
        use crate::notify::driver::WaitFuture;
        WaitFuture::new(Until {
            clock: &self.clock,
            at: start,
        })
        .await;
    }
}

impl<K, C: Clock + Clone + 'static> Throttler<K, C> {
    /// Shut down and wait: cancel every task that has not begun (at once, on this thread),
    /// then wait until the task running, if any, has finished and the worker has stopped.
    /// Returns how many tasks this cancelled (those already cancelled through their handle
    /// are not counted).
    ///
    /// Called from inside one of this throttler's own tasks (which can only happen when the
    /// task owns it), it cannot wait for that task: it returns after cancelling, as `Drop`
    /// does. See [`Throttler::shutdown_within`] for a bounded wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, TaskError, Throttler};
    /// use std::time::Duration;
    ///
    /// let t = Throttler::new("1/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let running = t.submit(None, move || {
    ///     started_tx.send(()).unwrap();
    ///     std::thread::sleep(Duration::from_millis(50));
    ///     "finished"
    /// })?;
    /// let pending = t.submit(None, || "starts 1 s later")?;
    /// started.recv()?;
    /// assert_eq!(t.shutdown(), 1); // cancelled the pending task, waited for the running one
    /// assert!(running.is_finished());
    /// assert_eq!(running.wait_blocking()?, "finished");
    /// assert!(matches!(pending.wait_blocking(), Err(TaskError::Cancelled)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(mut self) -> usize {
        let Some(shared) = self.take_worker() else {
            return 0;
        };
        let cancelled = shared.close();
        shared.wait_stopped(None);
        cancelled
    }

    /// Shut down and wait at most `max_wait` (on the OS clock): as [`Throttler::shutdown`],
    /// but gives up waiting for a task that is still running after `max_wait` (it finishes
    /// on its own, and the worker stops after it). `Ok(cancelled)` if the worker stopped in
    /// time, `Err(cancelled)` if not; `cancelled` counts the tasks this cancelled, as for
    /// `shutdown`.
    ///
    /// Called from inside one of this throttler's own tasks, it returns `Err` at once.
    ///
    /// # Errors
    ///
    /// `Err(cancelled)` if the worker had not stopped after `max_wait` (a task still
    /// running), or at once when called from one of the throttler's own tasks.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use std::time::Duration;
    ///
    /// let t = Throttler::new("1/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (finish, finished) = std::sync::mpsc::channel::<()>();
    /// let slow = t.submit(None, move || {
    ///     started_tx.send(()).unwrap();
    ///     finished.recv().unwrap(); // runs until told to finish
    /// })?;
    /// let _pending = t.submit(None, || ())?;
    /// started.recv()?;
    /// assert_eq!(t.shutdown_within(Duration::from_millis(10)), Err(1)); // still running
    /// finish.send(())?;
    /// assert!(slow.wait_blocking().is_ok()); // it finished on its own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown_within(self, max_wait: Duration) -> Result<usize, usize> {
        self.shutdown_until(instant_within(max_wait))
    }

    /// Shut down and wait until `deadline` (`None`: none; the OS clock's) at most: as
    /// [`Throttler::shutdown_within`].
    ///
    /// # Errors
    ///
    /// As [`Throttler::shutdown_within`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Throttler};
    /// use std::time::{Duration, Instant};
    ///
    /// let t = Throttler::new("1/s".parse()?, Vec::<(u8, Quota)>::new())?;
    /// let first = t.submit(None, || ())?;
    /// let _pending = t.submit(None, || ())?; // 1 s later
    /// first.wait_blocking()?;
    /// let deadline = Instant::now() + Duration::from_secs(10);
    /// assert_eq!(t.shutdown_until(Some(deadline)), Ok(1)); // the pending task cancelled
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown_until(mut self, deadline: Option<Instant>) -> Result<usize, usize> {
        let Some(shared) = self.take_worker() else {
            return Ok(0);
        };
        let cancelled = shared.close();
        if shared.wait_stopped(deadline) {
            Ok(cancelled)
        } else {
            Err(cancelled)
        }
    }

    fn take_worker(&mut self) -> Option<Arc<Shared>> {
        self.worker
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

impl<K, C: Clock + Clone + 'static> Drop for Throttler<K, C> {
    /// Shuts down without waiting: every task that has not begun is cancelled (at once, on
    /// this thread), and the worker stops by itself after the task it is running, if any.
    fn drop(&mut self) {
        if let Some(shared) = self.take_worker() {
            shared.close();
        }
    }
}

/// Why [`Throttler::submit`] refused a task. Nothing was scheduled and the task was dropped.
#[derive(Debug)]
#[non_exhaustive]
pub enum SubmitError {
    /// The schedule refused it, as [`Throttler::reserve_at`] does: its start would be beyond
    /// the maximum wait (`retry_after` says when it would not be) or past the clock's range.
    Denied(Denied),
    /// The worker thread could not be started; the next `submit` tries again.
    Spawn(io::Error),
}

impl From<Denied> for SubmitError {
    fn from(denied: Denied) -> Self {
        SubmitError::Denied(denied)
    }
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Denied(denied) => write!(f, "the throttler refused the task: {denied}"),
            SubmitError::Spawn(error) => {
                write!(f, "could not start the throttler's worker thread: {error}")
            }
        }
    }
}

impl std::error::Error for SubmitError {}
