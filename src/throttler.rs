//! [`Throttler`]: the ordered multi-channel throttler.

use crate::clock::{duration_to_nanos, Clock, Nanos};
use crate::limiter::Denied;
use crate::sliding_log::{Log, MAX_LOG_ENTRIES};
use crate::{DefaultClock, Quota, QuotaError};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The schedule: exact logs of the start times, per channel and in total.
struct Schedule<K> {
    total: Log,
    channels: HashMap<K, Log>,
    last_start: Nanos,
}

/// A pending task of the worker.
struct Job {
    start: Nanos,
    run: Box<dyn FnOnce() + Send>,
    state: Arc<TaskState>,
}

/// The worker's queue, in start order (which is submission order).
struct Queue {
    jobs: VecDeque<Job>,
    shutdown: bool,
}

type Shared = (Mutex<Queue>, Condvar);

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
pub struct Throttler<K, C: Clock + Clone + 'static = DefaultClock> {
    schedule: Mutex<Schedule<K>>,
    clock: C,
    max_wait: Nanos,
    worker: Mutex<Option<(Arc<Shared>, JoinHandle<()>)>>,
}

impl<K, C: Clock + Clone + fmt::Debug> fmt::Debug for Throttler<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttler")
            .field("clock", &self.clock)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl<K: Hash + Eq> Throttler<K, DefaultClock> {
    /// A throttler on the default clock.
    ///
    /// # Errors
    ///
    /// As [`Throttler::with_clock`].
    pub fn new(
        total: Quota,
        channels: impl IntoIterator<Item = (K, Quota)>,
    ) -> Result<Self, QuotaError> {
        Throttler::with_clock(total, channels, DefaultClock::new())
    }
}

fn log_for(quota: &Quota) -> Result<Log, QuotaError> {
    if quota.count() > MAX_LOG_ENTRIES {
        return Err(QuotaError::CountTooLarge {
            count: quota.count(),
            max: MAX_LOG_ENTRIES,
        });
    }
    Ok(Log::new(quota.count(), quota.period_ns()))
}

impl<K: Hash + Eq, C: Clock + Clone + 'static> Throttler<K, C> {
    /// A throttler with a `total` limit and per-channel limits, reading time from `clock`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] for a count above
    /// [`MAX_LOG_ENTRIES`](crate::MAX_LOG_ENTRIES) (each limit keeps an exact log).
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
        })
    }

    /// Refuse calls that would start more than `max_wait` from now (default: no bound, the
    /// queue grows as needed).
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = duration_to_nanos(max_wait);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Schedule<K>> {
        // The schedule holds only past decisions; a panic elsewhere cannot corrupt it.
        self.schedule.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Schedule one call on `channel` (`None`: the total only) at the explicit time `now`;
    /// returns its start time, in nanoseconds of the clock.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] if the start would be more than the maximum wait away (with
    /// the wait after which it would not; nothing is scheduled), or past the clock's range
    /// (`Duration::MAX`).
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
    pub fn reserve(&self, channel: Option<&K>) -> Result<Duration, Denied> {
        let now = self.clock.now();
        self.reserve_at(channel, now)
            .map(|start| Duration::from_nanos(start - now))
    }

    /// Run `task` at its scheduled time on the throttler's worker thread (started on first
    /// use; tasks run one after another in start order). Returns a handle to wait for the
    /// result or cancel the task before it starts.
    ///
    /// # Errors
    ///
    /// As [`Throttler::reserve_at`] (the task is dropped, nothing is scheduled).
    pub fn submit<T, F>(&self, channel: Option<&K>, task: F) -> Result<TaskHandle<T>, Denied>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let state = Arc::new(TaskState {
            inner: Mutex::new(Stage::Waiting),
            done: Condvar::new(),
        });
        let result: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
        let (state2, result2) = (state.clone(), result.clone());
        let run: Box<dyn FnOnce() + Send> = Box::new(move || {
            let value = task();
            *result2.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            state2.set(Stage::Done);
        });
        // Reserve and enqueue under the worker lock, so queue order is start order.
        let mut worker = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let shared = match &*worker {
            Some((shared, _)) => shared.clone(),
            None => {
                let shared: Arc<Shared> = Arc::new((
                    Mutex::new(Queue {
                        jobs: VecDeque::new(),
                        shutdown: false,
                    }),
                    Condvar::new(),
                ));
                let (s, clock) = (shared.clone(), self.clock.clone());
                let handle = std::thread::Builder::new()
                    .name("limitcore-throttler".into())
                    .spawn(move || work(&s, &clock))
                    .expect("spawning the throttler's worker thread");
                *worker = Some((shared.clone(), handle));
                shared
            }
        };
        let start = self.reserve_at(channel, self.clock.now())?;
        let (queue, wake) = &*shared;
        queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .jobs
            .push_back(Job {
                start,
                run,
                state: state.clone(),
            });
        wake.notify_one();
        Ok(TaskHandle {
            state,
            result,
            start,
        })
    }

    /// Await `future` at its scheduled time (feature `tokio`): schedules like
    /// [`Throttler::reserve`], sleeps on tokio's timer, then runs it.
    ///
    /// # Errors
    ///
    /// As [`Throttler::reserve_at`] (the future is not polled).
    #[cfg(feature = "tokio")]
    pub async fn run<F: core::future::Future>(
        &self,
        channel: Option<&K>,
        future: F,
    ) -> Result<F::Output, Denied> {
        let delay = self.reserve(channel)?;
        tokio::time::sleep(delay).await;
        Ok(future.await)
    }
}

impl<K, C: Clock + Clone + 'static> Drop for Throttler<K, C> {
    /// Stops the worker; tasks that have not started are cancelled.
    fn drop(&mut self) {
        let worker = self
            .worker
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((shared, handle)) = worker {
            let (queue, wake) = &*shared;
            queue.lock().unwrap_or_else(|p| p.into_inner()).shutdown = true;
            wake.notify_all();
            let _ = handle.join();
        }
    }
}

/// The worker: run each job at its start time, in queue order.
fn work<C: Clock>(shared: &Shared, clock: &C) {
    let (queue, wake) = shared;
    loop {
        let job = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if q.shutdown {
                    for job in q.jobs.drain(..) {
                        job.state.cancel();
                    }
                    return;
                }
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // Wait for the start on the throttler's clock, in slices of at most 1 ms so that a
        // clock that is not the OS's (a ManualClock) is followed too.
        loop {
            let now = clock.now();
            if now >= job.start || job.state.is_cancelled() {
                break;
            }
            let q = queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.shutdown {
                break;
            }
            let slice = Duration::from_nanos((job.start - now).min(1_000_000));
            drop(
                wake.wait_timeout(q, slice)
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
        if job.state.begin() {
            (job.run)();
        }
    }
}

/// Where a submitted task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Waiting,
    Running,
    Done,
    Cancelled,
}

#[derive(Debug)]
struct TaskState {
    inner: Mutex<Stage>,
    done: Condvar,
}

impl TaskState {
    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, stage: Stage) {
        *self.stage() = stage;
        self.done.notify_all();
    }

    /// Waiting → Running; false if it was cancelled.
    fn begin(&self) -> bool {
        let mut s = self.stage();
        if *s == Stage::Waiting {
            *s = Stage::Running;
            true
        } else {
            false
        }
    }

    /// Waiting → Cancelled; false if it already started.
    fn cancel(&self) -> bool {
        let mut s = self.stage();
        let cancelled = *s == Stage::Waiting;
        if cancelled {
            *s = Stage::Cancelled;
        }
        drop(s);
        self.done.notify_all();
        cancelled
    }

    fn is_cancelled(&self) -> bool {
        *self.stage() == Stage::Cancelled
    }
}

/// A task submitted to a [`Throttler`]: wait for its result, or cancel it before it starts.
pub struct TaskHandle<T> {
    state: Arc<TaskState>,
    result: Arc<Mutex<Option<T>>>,
    start: Nanos,
}

impl<T> fmt::Debug for TaskHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("start", &self.start)
            .field("stage", &*self.state.stage())
            .finish()
    }
}

/// The task was cancelled before it started (by [`TaskHandle::cancel`], or because the
/// throttler was dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the task was cancelled before it started")
    }
}

impl std::error::Error for Cancelled {}

impl<T> TaskHandle<T> {
    /// The task's scheduled start, in nanoseconds of the throttler's clock.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Cancel the task if it has not started; returns whether it was cancelled. Its slot in
    /// the schedule stays taken: later calls keep their start times.
    pub fn cancel(&self) -> bool {
        self.state.cancel()
    }

    /// Block until the task has run, and return its result.
    ///
    /// # Errors
    ///
    /// [`Cancelled`] if it was cancelled before it started.
    pub fn wait(self) -> Result<T, Cancelled> {
        let mut s = self.state.stage();
        loop {
            match *s {
                Stage::Done => break,
                Stage::Cancelled => return Err(Cancelled),
                Stage::Waiting | Stage::Running => {
                    s = self.state.done.wait(s).unwrap_or_else(|p| p.into_inner())
                }
            }
        }
        drop(s);
        let value = self.result.lock().unwrap_or_else(|p| p.into_inner()).take();
        value.ok_or(Cancelled)
    }
}
