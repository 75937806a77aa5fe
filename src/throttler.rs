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

use crate::clock::poll_clock;
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::decision::Denied;
use crate::notify::driver::{block_on, block_until, Nap, Wait};
use crate::notify::{Event, Listener};
use crate::quota::{Quota, QuotaError};
use crate::rules::{window_quota, Log, Rule, SlidingLogRule};
use crate::sync::{current_thread_id, lock, Mutex, MutexGuard, ThreadId};
use core::pin::Pin;
use core::task::{Context, Poll};
use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The instant `timeout` from now; `None` (no deadline) past the range of `Instant`.
fn deadline_in(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// The schedule: exact logs of the start times, per channel and in total.
struct Schedule<K> {
    total: Log,
    channels: HashMap<K, Log>,
    last_start: Nanos,
}

/// Starts the worker: runs the closure it is given, on some thread, or fails.
type Spawner = fn(Box<dyn FnOnce() + Send + 'static>) -> io::Result<()>;

/// The default [`Spawner`]: a new OS thread named `limitcore-throttler`.
fn spawn_thread(worker: Box<dyn FnOnce() + Send + 'static>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("limitcore-throttler".into())
        .spawn(worker)
        .map(drop)
}

/// Starts calls in submission order, each at the earliest time that keeps every limit.
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
///   [`Throttler::shutdown_timeout`] waits at most a given time.
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
/// assert_eq!(first.wait()?, "now");
/// clock.advance(Duration::from_secs(1)); // wakes the worker: the second task is due
/// assert_eq!(second.wait()?, "in a second");
///
/// let third = t.submit(None, || unreachable!("never started"))?;
/// drop(t); // starts nothing: the pending task is cancelled
/// assert!(matches!(third.wait(), Err(TaskError::Cancelled)));
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
    /// let results: Vec<i32> = handles.into_iter().map(|h| h.wait()).collect::<Result<_, _>>()?;
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
            return Ok(TaskHandle { cell, start });
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
    /// does. See [`Throttler::shutdown_timeout`] for a bounded wait.
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
    /// assert_eq!(running.wait()?, "finished");
    /// assert!(matches!(pending.wait(), Err(TaskError::Cancelled)));
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

    /// Shut down and wait at most `timeout`: as [`Throttler::shutdown`], but gives up waiting
    /// for a task that is still running after `timeout` (it finishes on its own, and the
    /// worker stops after it). `Ok(cancelled)` if the worker stopped in time, `Err(cancelled)`
    /// if not; `cancelled` counts the tasks this cancelled, as for `shutdown`.
    ///
    /// Called from inside one of this throttler's own tasks, it returns `Err` at once.
    ///
    /// # Errors
    ///
    /// `Err(cancelled)` if the worker had not stopped after `timeout` (a task still
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
    /// let slow = t.submit(None, move || {
    ///     started_tx.send(()).unwrap();
    ///     std::thread::sleep(Duration::from_millis(300));
    /// })?;
    /// let _pending = t.submit(None, || ())?;
    /// started.recv()?;
    /// assert_eq!(t.shutdown_timeout(Duration::from_millis(10)), Err(1)); // still running
    /// assert!(slow.wait().is_ok()); // it finished on its own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Result<usize, usize> {
        let Some(shared) = self.take_worker() else {
            return Ok(0);
        };
        let cancelled = shared.close();
        if shared.wait_stopped(deadline_in(timeout)) {
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

/// What the throttler and its worker share.
struct Shared {
    queue: Mutex<Queue>,
    /// Notified at every event the worker may be sleeping through (a task for an idle
    /// worker, a shutdown); it listens before it looks at the queue, so none is lost.
    changed: Event,
    /// Notified when the worker has stopped ([`Throttler::shutdown`] waits on it).
    stopped: Event,
}

/// The worker's queue and its flags.
#[derive(Default)]
struct Queue {
    /// The tasks not begun, in start order (which is submission order). The worker leaves
    /// the next one here while it waits for its start, so a shutdown finds it.
    jobs: VecDeque<Job>,
    /// Set by a shutdown (or drop): the worker begins nothing more and stops.
    closing: bool,
    /// Set when the worker has stopped (or its closure was dropped unrun): nothing here will
    /// ever begin.
    exited: bool,
    /// The worker's thread, once it runs: a shutdown from inside a task must not wait for it.
    worker: Option<ThreadId>,
}

/// A queued task: its start and its state. Dropping it cancels the task if it has not begun,
/// so a task that leaves the queue in any way other than through `begin` (shutdown, the
/// worker stopping, its queue dropped) is cancelled: every handle resolves.
struct Job {
    start: Nanos,
    task: Arc<dyn Task>,
}

impl Drop for Job {
    fn drop(&mut self) {
        self.task.cancel();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    /// Shut down: from now on the worker begins nothing (it checks `closing` under the lock
    /// it begins a task with), and every task not begun is cancelled, here. Returns how many
    /// this cancelled.
    fn close(&self) -> usize {
        let jobs = {
            let mut queue = self.lock();
            queue.closing = true;
            std::mem::take(&mut queue.jobs)
        };
        self.changed.notify();
        // Outside the lock: cancelling drops each task's closure (the caller's code).
        jobs.iter().filter(|job| job.task.cancel()).count()
    }

    /// Wait until the worker has stopped, or until `deadline` (`None`: no deadline). Whether
    /// it has stopped; false at once when called on the worker's own thread (from a task),
    /// which would otherwise wait for itself.
    fn wait_stopped(&self, deadline: Option<Instant>) -> bool {
        {
            let queue = self.lock();
            if !queue.exited && queue.worker == Some(current_thread_id()) {
                return false;
            }
        }
        block_until(&self.stopped, deadline, || self.lock().exited)
    }
}

/// Owned by the worker's closure: when the worker stops, however it stops (shut down, a
/// panic of its clock, a spawner that drops the closure unrun), every task still queued is
/// cancelled, and [`Throttler::shutdown`] and `submit` learn that it has stopped.
struct Exit(Arc<Shared>);

impl Drop for Exit {
    fn drop(&mut self) {
        let jobs = {
            let mut queue = self.0.lock();
            queue.exited = true;
            std::mem::take(&mut queue.jobs)
        };
        // Each `Job` cancels its task as it drops, outside the lock.
        drop(jobs);
        self.0.stopped.notify();
    }
}

/// The worker's wait for its next task: until the queue's first task is due on the clock
/// (or a shutdown), sleeping on the queue's [`Event`] and the clock at once. `Ready(None)`
/// when shutting down; `Ready(Some(job))` with the task begun (under the queue lock: a
/// shutdown either took it first, and cancelled it, or finds it begun; never both).
struct NextJob<'a, C> {
    shared: &'a Shared,
    clock: &'a C,
    /// Kept between polls: dropping it would take its waker out of the event.
    listener: Option<Listener<'a>>,
}

impl<C: Clock> Wait for NextJob<'_, C> {
    type Output = Option<Job>;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Option<Job>> {
        loop {
            // Listen, then look: a task or a shutdown after the look wakes the listener.
            let listener = self.listener.insert(self.shared.changed.listen());
            let start = {
                let mut queue = self.shared.lock();
                if queue.closing {
                    return Poll::Ready(None);
                }
                // Tasks cancelled through their handle: their closures are gone already.
                while queue.jobs.front().is_some_and(|job| !job.task.is_pending()) {
                    queue.jobs.pop_front();
                }
                queue.jobs.front().map(|job| job.start)
            };
            if let Some(start) = start {
                // The clock is the caller's code: asked without the queue lock.
                if poll_clock(self.clock, start, cx, nap).is_ready() {
                    let mut queue = self.shared.lock();
                    if queue.closing {
                        return Poll::Ready(None);
                    }
                    // Still the task looked at above, unless cancelled through its handle
                    // meanwhile: only this thread removes tasks, but for `close`.
                    match queue.jobs.pop_front() {
                        Some(job) if job.task.begin() => return Poll::Ready(Some(job)),
                        _ => continue,
                    }
                }
            }
            if Pin::new(listener).poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// The worker: begin each task at its start, in queue order, until shut down.
fn work<C: Clock>(exit: Exit, clock: &C) {
    let shared = &*exit.0;
    shared.lock().worker = Some(current_thread_id());
    while let Some(job) = block_on(NextJob {
        shared,
        clock,
        listener: None,
    }) {
        job.task.run();
        // If the handle is gone, the task's value (or panic payload) is dropped here with
        // the last reference: a panic in its `Drop` must not stop the worker.
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(job)));
    }
}

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
struct TaskCell<T> {
    stage: Mutex<Stage<T>>,
    /// Notified when the task reaches an outcome.
    settled: Event,
}

impl<T> TaskCell<T> {
    fn new(closure: Closure<T>) -> Self {
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
trait Task: Send + Sync {
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

/// A task submitted to a [`Throttler`]: wait for its outcome, or cancel it before it starts.
///
/// Every handle resolves: whatever happens to the throttler or its worker, [`wait`] returns
/// the task's value, [`TaskError::Panicked`] or [`TaskError::Cancelled`]; it blocks only
/// while the task waits for its start or runs. Dropping the handle does not cancel the task.
///
/// [`wait`]: TaskHandle::wait
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
    /// assert_eq!(first.wait()?, 1);
    /// assert!(matches!(second.wait(), Err(TaskError::Cancelled)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self) -> bool {
        self.cell.cancel()
    }

    /// Whether the task has an outcome (it returned, panicked or was cancelled), so that
    /// [`wait`](TaskHandle::wait) would not block.
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

    /// Block until the task has an outcome, and return it.
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
    /// assert_eq!(fine.wait()?, 42);
    /// match broken.wait() {
    ///     Err(TaskError::Panicked(panic)) => assert_eq!(panic.message(), Some("out of cheese")),
    ///     other => panic!("expected the panic, got {other:?}"),
    /// }
    /// assert_eq!(after.wait()?, 43); // the worker went on
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(self) -> Result<T, TaskError> {
        let mut outcome = None;
        block_until(&self.cell.settled, None, || {
            outcome = self.cell.lock().take_outcome();
            outcome.is_some()
        });
        outcome.unwrap_or(Err(TaskError::Cancelled))
    }

    /// Wait at most `timeout` for the task's outcome: `Ok(outcome)` as for
    /// [`wait`](TaskHandle::wait), or `Err(self)` if the task has none yet after `timeout`
    /// (the handle, to wait again or cancel).
    ///
    /// # Errors
    ///
    /// `Err(self)` if the task has no outcome after `timeout`.
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
    /// let second = second.wait_timeout(Duration::from_millis(10)).unwrap_err(); // not yet
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(second.wait_timeout(Duration::from_secs(10)).unwrap()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<Result<T, TaskError>, Self> {
        let mut outcome = None;
        block_until(&self.cell.settled, deadline_in(timeout), || {
            outcome = self.cell.lock().take_outcome();
            outcome.is_some()
        });
        outcome.ok_or(self)
    }
}

/// Why a submitted task did not return a value: see [`TaskHandle::wait`].
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
    /// let error = t.submit(None, || panic!("no"))?.wait().unwrap_err();
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
    /// match t.submit(None, move || panic!("code {code}"))?.wait() {
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
    /// let Err(TaskError::Panicked(panic)) = handle.wait() else { unreachable!() };
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
    /// if let Err(TaskError::Panicked(panic)) = t.submit(None, || panic!("boom"))?.wait() {
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
