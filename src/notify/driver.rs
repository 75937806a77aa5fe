//! The driver: a wait written once as a poll ([`Wait`]), run on a thread ([`block_on`]) or
//! as a future ([`WaitFuture`]).
//!
//! A wait's [`poll_wait`](Wait::poll_wait) either finishes (`Ready`) or, before it returns
//! `Pending`, registers the context's waker with whatever will end the wait (an
//! [`Event`](super::Event) listener, a `WaitList` entry, a clock's
//! [`sleep_hint`](crate::clock::Clock::sleep_hint)) and lowers the [`Nap`]: the longest it
//! may sleep on the OS timer before it must be polled again (a time to wait for on an OS
//! clock, a deadline). The blocking driver parks the thread (woken by the waker: an unpark)
//! for at most the nap; the async driver returns `Pending` with a tokio timer armed for the
//! nap (feature `tokio`). A wake-up that comes between the poll and the park is kept by the
//! thread's park token, so the park returns at once: none is lost.
//!
//! A wait that holds something it must give back when it is abandoned before it finishes (a
//! queue entry, a reserved place) gives it back in its own `Drop`, so the blocking and async
//! faces are cancellation-safe the same way: `Drop` is the only way out of a queue.

#[cfg(feature = "throttler")]
use super::event::{Event, Listener};
use crate::sync::{current_thread, park, park_timeout, Thread};
use alloc::sync::Arc;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::task::Wake;
#[cfg(feature = "throttler")]
use std::time::Instant;

/// A wait written once, as a poll, for the crate's drivers to run: blocking a thread
/// ([`block_on`]) or as a future ([`WaitFuture`]).
///
/// Every wait of the crate is one of these (a budget's, a lane's, the permits', the
/// sleep-and-retry waits of [`wait`](crate::wait), a [`Reservation`](crate::Reservation)'s,
/// an [`Event`](super::Event)'s listener); implement it to write a wait of your own that
/// runs the same two ways.
///
/// The contract of [`poll_wait`](Wait::poll_wait): return `Ready` when the wait ends.
/// Before returning `Pending`, either register `cx`'s waker with whatever will end the wait
/// (an event, a queue, a clock that wakes its waiters itself: see
/// [`SleepHint::follow`](crate::clock::SleepHint::follow)), or lower `nap` to the longest
/// the driver may sleep on the OS timer before polling again (an OS clock has no waker to
/// call); a wait may do both. A `Pending` poll that does neither is never polled again. A
/// wait that holds something it must give back if it is abandoned (a place in a queue)
/// gives it back in its `Drop`: the drivers drop an unfinished wait when their caller gives
/// up.
///
/// # Examples
///
/// A wait for a [`ManualClock`](crate::clock::ManualClock) to reach a time, run on a
/// thread:
///
/// ```
/// use limitcore::clock::{Clock, ManualClock};
/// use limitcore::notify::{block_on, Nap, Wait};
/// use std::task::{Context, Poll};
/// use std::time::Duration;
///
/// struct Until<'a> {
///     clock: &'a ManualClock,
///     at: u64,
/// }
///
/// impl Wait for Until<'_> {
///     type Output = u64;
///
///     fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<u64> {
///         // The clock's own answer: reached, a nap on the OS timer, or its waker.
///         let reached = self.clock.sleep_hint(self.at, cx.waker()).follow(nap);
///         reached.map(|()| self.clock.now())
///     }
/// }
///
/// let clock = ManualClock::new();
/// let mover = {
///     let clock = clock.clone();
///     std::thread::spawn(move || {
///         for _ in 0..10 {
///             clock.advance(Duration::from_millis(1));
///         }
///     })
/// };
/// // Woken by the moves; ends at the one that reaches 5 ms, or later.
/// assert!(block_on(Until { clock: &clock, at: 5_000_000 }) >= 5_000_000);
/// mover.join().unwrap();
/// ```
pub trait Wait {
    /// What the wait ends with.
    type Output;

    /// Advance the wait: `Ready` when it ends; otherwise `cx`'s waker is registered with
    /// what ends it, or `nap` is lowered to the longest it may sleep before the next poll
    /// (see the trait).
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output>;
}

impl<W: Wait + ?Sized> Wait for &mut W {
    type Output = W::Output;

    #[inline]
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<W::Output> {
        (**self).poll_wait(cx, nap)
    }
}

/// The longest a pending poll may sleep on the OS timer before it is polled again
/// (`None`, the default: until its waker is woken).
///
/// A [`Wait`] for a time of an OS clock (which has no waker to call) lowers the nap to the
/// time left and returns `Pending`; its driver (a thread that parks, a future that arms a
/// timer) sleeps at most that long and polls again. A wait on a
/// [`ManualClock`](crate::clock::ManualClock) never naps: the clock wakes it when moved.
/// The drivers start every poll with a fresh `Nap`.
///
/// # Examples
///
/// ```
/// use limitcore::notify::Nap;
/// use std::time::Duration;
///
/// let mut nap = Nap::default();
/// assert_eq!(nap.get(), None); // until woken
/// nap.at_most(Duration::from_millis(5));
/// nap.at_most(Duration::from_millis(9)); // a nap only shortens
/// assert_eq!(nap.get(), Some(Duration::from_millis(5)));
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Nap(Option<Duration>);

impl Nap {
    /// Sleep at most `d`: the nap becomes the shorter of what it was and `d`.
    #[inline]
    pub fn at_most(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |n| n.min(d)));
    }

    /// The nap asked for: the longest sleep before the next poll (`None`: until woken).
    #[inline]
    pub fn get(self) -> Option<Duration> {
        self.0
    }

    /// Whether `deadline` (the OS clock's; `None`: none) has passed; if it has not, the nap
    /// becomes at most the time left (the deadline wait of the waits that have no clock of
    /// their own: a concurrency limit's, a task's, a condition's).
    #[cfg(any(feature = "throttler", feature = "concurrency"))]
    #[inline]
    pub(crate) fn passed(&mut self, deadline: Option<std::time::Instant>) -> bool {
        let Some(deadline) = deadline else {
            return false;
        };
        let now = std::time::Instant::now();
        if now >= deadline {
            return true;
        }
        self.at_most(deadline - now);
        false
    }
}

/// A wait for `ready` to hold, looked at again at every notification of `event`, or for
/// `deadline` (the OS clock's) to pass: whether it held.
#[cfg(feature = "throttler")]
struct Condition<'a, F> {
    event: &'a Event,
    listener: Option<Listener<'a>>,
    deadline: Option<Instant>,
    ready: F,
}

#[cfg(feature = "throttler")]
impl<F: FnMut() -> bool> Wait for Condition<'_, F> {
    type Output = bool;

    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<bool> {
        loop {
            // Listen, then check: a notification after the check wakes the listener.
            let listener = self.listener.insert(self.event.listen());
            if (self.ready)() {
                return Poll::Ready(true);
            }
            if nap.passed(self.deadline) {
                return Poll::Ready(false);
            }
            if Pin::new(listener).poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// Block the thread until `ready` holds (looked at again at every notification of
/// `event`) or `deadline` passes (`None`: none); whether it held.
#[cfg(feature = "throttler")]
pub(crate) fn block_until(
    event: &Event,
    deadline: Option<Instant>,
    ready: impl FnMut() -> bool,
) -> bool {
    block_on(Condition {
        event,
        listener: None,
        deadline,
        ready,
    })
}

/// A wait that is `poll`'s calls (for a caller that keeps the wait's state itself: the
/// blocking I/O adapter).
#[cfg(any(feature = "io", all(feature = "concurrency", feature = "keyed")))]
pub(crate) fn poll_fn<T, F>(poll: F) -> PollFn<F>
where
    F: FnMut(&mut Context<'_>, &mut Nap) -> Poll<T>,
{
    PollFn(poll)
}

/// See [`poll_fn`].
#[cfg(any(feature = "io", all(feature = "concurrency", feature = "keyed")))]
pub(crate) struct PollFn<F>(F);

#[cfg(any(feature = "io", all(feature = "concurrency", feature = "keyed")))]
impl<T, F: FnMut(&mut Context<'_>, &mut Nap) -> Poll<T>> Wait for PollFn<F> {
    type Output = T;

    #[inline]
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<T> {
        (self.0)(cx, nap)
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the current thread (made once per thread outside loom).
#[cfg(not(limitcore_loom))]
fn thread_waker() -> Waker {
    std::thread_local! {
        static WAKER: Waker = Waker::from(Arc::new(Unpark(current_thread())));
    }
    WAKER.with(Waker::clone)
}

/// Under loom every model thread runs on one OS thread: a waker per wait.
#[cfg(limitcore_loom)]
fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(current_thread())))
}

/// Run `wait` on this thread until it ends, parked between polls for at most each poll's
/// nap (the blocking driver): what every blocking wait of the crate (`…_blocking`) does.
///
/// A wake-up that comes between a poll and the park is kept by the thread's park token, so
/// the park returns at once; a spurious return costs one more poll. The wait is dropped when
/// it ends (or if it panics), so what it holds goes back through its `Drop`.
///
/// # Examples
///
/// A budget's wait, the one [`Budget::acquire_blocking`](crate::Budget::acquire_blocking)
/// runs:
///
/// ```
/// use limitcore::notify::block_on;
/// use limitcore::Budget;
///
/// let budget = Budget::new("1000/s burst 10".parse()?)?;
/// let receipt = block_on(budget.acquire(4))?;
/// assert_eq!(receipt.n(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn block_on<W: Wait>(mut wait: W) -> W::Output {
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        let mut nap = Nap::default();
        if let Poll::Ready(out) = wait.poll_wait(&mut cx, &mut nap) {
            return out;
        }
        // An unpark since the poll (a wake-up that raced it) leaves the thread's token set:
        // the park returns at once. A spurious return only costs a poll.
        match nap.get() {
            None => park(),
            Some(d) => park_timeout(d),
        }
    }
}

/// A [`Wait`] as a future (the async driver): each poll polls the wait, and a nap it asks
/// for sleeps on tokio's timer (feature `tokio`; one timer per future, allocated at the
/// first nap and reset for the next). Dropping the future drops the wait, which gives back
/// what it holds.
///
/// The crate's own futures ([`budget::Acquire`](crate::budget::Acquire),
/// [`lanes::Acquire`](crate::lanes::Acquire),
/// [`concurrency::Acquire`](crate::concurrency::Acquire) and their owned forms) poll the
/// same way, with the wait kept inline. A `WaitFuture` is a [`Wait`] too (its wait's), so a
/// blocking caller can run it with [`block_on`].
///
/// # Panics
///
/// Without feature `tokio` there is no timer: a poll whose wait asks for a nap panics (run
/// such a wait with [`block_on`], or turn the feature on). A wait that never naps (one
/// woken by its waker alone, such as a wait on a
/// [`ManualClock`](crate::clock::ManualClock)) runs on any executor.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use limitcore::notify::{Event, WaitFuture};
///
/// let event = Event::new();
/// let listener = event.listen(); // a `Wait` (and a future of its own)
/// event.notify();
/// WaitFuture::new(listener).await;
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct WaitFuture<W> {
    wait: W,
    naps: Naps,
}

impl<W> WaitFuture<W> {
    /// `wait` as a future.
    pub fn new(wait: W) -> Self {
        WaitFuture {
            wait,
            naps: Naps::default(),
        }
    }

    /// The wait.
    pub fn get_ref(&self) -> &W {
        &self.wait
    }
}

impl<W: Wait> Wait for WaitFuture<W> {
    type Output = W::Output;

    #[inline]
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<W::Output> {
        self.wait.poll_wait(cx, nap)
    }
}

impl<W: Wait + Unpin> Future for WaitFuture<W> {
    type Output = W::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<W::Output> {
        let WaitFuture { wait, naps } = self.get_mut();
        naps.poll(cx, |cx, nap| wait.poll_wait(cx, nap))
    }
}

/// The async driver's naps, for a future that keeps its wait apart: with feature `tokio` a
/// reusable timer; without, nothing (and a wait that asks for a nap is a caller's error,
/// see [`WaitFuture`]'s "Panics").
#[derive(Debug, Default)]
pub(crate) struct Naps {
    #[cfg(feature = "tokio")]
    timer: Timer,
}

impl Naps {
    /// Poll `poll` until it is `Ready`, or `Pending` with nothing to nap for, or with its
    /// nap armed on the timer and not yet elapsed.
    #[inline]
    pub(crate) fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnMut(&mut Context<'_>, &mut Nap) -> Poll<T>,
    ) -> Poll<T> {
        #[cfg(feature = "tokio")]
        return poll_napping(&mut self.timer, cx, poll);
        #[cfg(not(feature = "tokio"))]
        {
            let mut poll = poll;
            let mut nap = Nap::default();
            let polled = poll(cx, &mut nap);
            assert!(
                polled.is_ready() || nap.get().is_none(),
                "a wait that naps on the OS timer runs as a future only with feature `tokio`"
            );
            polled
        }
    }

    /// Stop a nap under way (the timer stays allocated for the next).
    #[cfg(all(feature = "io", feature = "tokio"))]
    pub(crate) fn cancel(&mut self) {
        #[cfg(feature = "tokio")]
        self.timer.disarm();
    }
}

/// [`Naps::poll`] with feature `tokio`.
#[cfg(feature = "tokio")]
fn poll_napping<T>(
    timer: &mut Timer,
    cx: &mut Context<'_>,
    mut poll: impl FnMut(&mut Context<'_>, &mut Nap) -> Poll<T>,
) -> Poll<T> {
    loop {
        let mut nap = Nap::default();
        if let Poll::Ready(out) = poll(cx, &mut nap) {
            timer.disarm();
            return Poll::Ready(out);
        }
        let Some(d) = nap.get() else {
            timer.disarm();
            return Poll::Pending;
        };
        timer.arm(d);
        if timer.poll(cx).is_pending() {
            return Poll::Pending;
        }
    }
}

/// A reusable tokio timer: armed for a duration, polled until it fires. The sleep is boxed
/// once and reset for every later nap.
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
struct Timer {
    sleep: Option<Pin<alloc::boxed::Box<tokio::time::Sleep>>>,
    armed: bool,
}

#[cfg(feature = "tokio")]
impl Timer {
    /// Fire `after` from now (a wait too long for the OS clock to name: in 30 years, as
    /// tokio's own far future).
    fn arm(&mut self, after: Duration) {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(after)
            .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 86_400)))
            .unwrap_or(now);
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.sleep = Some(alloc::boxed::Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.armed = true;
    }

    /// Stop waiting (the timer stays allocated for the next nap).
    fn disarm(&mut self) {
        self.armed = false;
    }

    /// `Ready` once an armed timer has fired (it is then disarmed); `Pending` while it has
    /// not, or when it is not armed.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match (&mut self.sleep, self.armed) {
            (Some(sleep), true) => {
                core::task::ready!(sleep.as_mut().poll(cx));
                self.armed = false;
                Poll::Ready(())
            }
            _ => Poll::Pending,
        }
    }
}
