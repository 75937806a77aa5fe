//! The throttler's worker: one thread that begins each submitted task at its start, in
//! queue order, and the queue it shares with the throttler.

use super::task::Task;
use crate::clock::{poll_clock, Clock, Nanos};
use crate::notify::driver::{block_on, block_until, Nap, Wait};
use crate::notify::{Event, Listener};
use crate::sync::{current_thread_id, lock, Mutex, MutexGuard, ThreadId};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::VecDeque;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Starts the worker: runs the closure it is given, on some thread, or fails.
pub(super) type Spawner = fn(Box<dyn FnOnce() + Send + 'static>) -> io::Result<()>;

/// The default [`Spawner`]: a new OS thread named `limitcore-throttler`.
pub(super) fn spawn_thread(worker: Box<dyn FnOnce() + Send + 'static>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("limitcore-throttler".into())
        .spawn(worker)
        .map(drop)
}

/// What the throttler and its worker share.
pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    /// Notified at every event the worker may be sleeping through (a task for an idle
    /// worker, a shutdown); it listens before it looks at the queue, so none is lost.
    pub(super) changed: Event,
    /// Notified when the worker has stopped ([`Throttler::shutdown`] waits on it).
    pub(super) stopped: Event,
}

/// The worker's queue and its flags.
#[derive(Default)]
pub(super) struct Queue {
    /// The tasks not begun, in start order (which is submission order). The worker leaves
    /// the next one here while it waits for its start, so a shutdown finds it.
    pub(super) jobs: VecDeque<Job>,
    /// Set by a shutdown (or drop): the worker begins nothing more and stops.
    pub(super) closing: bool,
    /// Set when the worker has stopped (or its closure was dropped unrun): nothing here will
    /// ever begin.
    pub(super) exited: bool,
    /// The worker's thread, once it runs: a shutdown from inside a task must not wait for it.
    pub(super) worker: Option<ThreadId>,
}

/// A queued task: its start and its state. Dropping it cancels the task if it has not begun,
/// so a task that leaves the queue in any way other than through `begin` (shutdown, the
/// worker stopping, its queue dropped) is cancelled: every handle resolves.
pub(super) struct Job {
    pub(super) start: Nanos,
    pub(super) task: Arc<dyn Task>,
}

impl Drop for Job {
    fn drop(&mut self) {
        self.task.cancel();
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    /// Shut down: from now on the worker begins nothing (it checks `closing` under the lock
    /// it begins a task with), and every task not begun is cancelled, here. Returns how many
    /// this cancelled.
    pub(super) fn close(&self) -> usize {
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
    pub(super) fn wait_stopped(&self, deadline: Option<Instant>) -> bool {
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
pub(super) struct Exit(pub(super) Arc<Shared>);

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
pub(super) fn work<C: Clock>(exit: Exit, clock: &C) {
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
