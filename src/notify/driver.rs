//! The driver: a wait written once as a poll ([`Wait`]), run on a thread ([`block_on`]) or
//! as a future ([`WaitFuture`]).
//!
//! A wait's [`poll_wait`](Wait::poll_wait) either finishes (`Ready`) or, before it returns
//! `Pending`, registers the context's waker with whatever will end the wait (an
//! [`Event`](super::Event) listener, a [`WaitList`](super::list::WaitList) entry, a clock's
//! [`sleep_hint`](Clock::sleep_hint)) and lowers the [`Nap`]: the longest it may sleep on the
//! OS timer before it must be polled again (a time to wait for on an OS clock, a deadline).
//! The clock's side of a wait (`clock::poll_clock`, `clock::Until`) lives with the clocks,
//! above this layer.
//! The blocking driver parks the thread (woken by the waker: an unpark) for at most the nap;
//! the async driver returns `Pending` with a tokio timer armed for the nap (feature
//! `tokio`). A wake-up that comes between the poll and the park is kept by the thread's park
//! token, so the park returns at once: none is lost.
//!
//! A wait that holds something it must give back when it is abandoned before it finishes (a
//! queue entry, a reserved place) gives it back in its own `Drop`, so the blocking and async
//! faces are cancellation-safe the same way.

#[cfg(feature = "throttler")]
use super::event::{Event, Listener};
use crate::sync::{current_thread, park, park_timeout, Thread};
use alloc::sync::Arc;
#[cfg(any(feature = "throttler", feature = "tokio"))]
use core::future::Future;
#[cfg(any(feature = "throttler", feature = "tokio"))]
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::task::Wake;
#[cfg(feature = "throttler")]
use std::time::Instant;

/// A wait, written once (see the module).
pub(crate) trait Wait {
    /// What the wait ends with.
    type Output;

    /// Advance the wait: `Ready` when it ends; otherwise `cx`'s waker is registered with
    /// what ends it, and `nap` is lowered to the longest it may sleep before the next poll.
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
/// The public poll seams of the crate's ordered waits ([`Budget::poll_acquire`],
/// [`Lanes::poll_acquire`]) take one: when the wait is for a time of an OS clock (which has
/// no waker to call), the poll lowers the nap to the time left and returns `Pending`; the
/// driver of the poll (a thread that parks, a future that arms a timer) sleeps at most that
/// long and polls again. A wait on a [`ManualClock`](crate::clock::ManualClock) never naps:
/// the clock wakes it when moved. Start every poll with a fresh `Nap`.
///
/// [`Budget::poll_acquire`]: crate::Budget::poll_acquire
/// [`Lanes::poll_acquire`]: crate::lanes::Lanes::poll_acquire
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
            if let Some(deadline) = self.deadline {
                let now = Instant::now();
                if now >= deadline {
                    return Poll::Ready(false);
                }
                nap.at_most(deadline - now);
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
/// nap (the blocking driver).
pub(crate) fn block_on<W: Wait>(mut wait: W) -> W::Output {
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

/// `wait` as a future (the async driver, feature `tokio`): its naps sleep on tokio's timer.
/// (The permits' futures, which never nap, poll their wait directly and need no runtime.)
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub(crate) struct WaitFuture<W> {
    wait: W,
    timer: Timer,
}

#[cfg(feature = "tokio")]
impl<W> WaitFuture<W> {
    pub(crate) fn new(wait: W) -> Self {
        WaitFuture {
            wait,
            timer: Timer::default(),
        }
    }
}

#[cfg(feature = "tokio")]
impl<W: Wait + Unpin> Future for WaitFuture<W> {
    type Output = W::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<W::Output> {
        let this = self.get_mut();
        poll_napping(&mut this.timer, cx, |cx, nap| this.wait.poll_wait(cx, nap))
    }
}

/// The async driver's step, for a future (or an adapter) that keeps its own `timer`: poll
/// `poll` until it is `Ready`, or `Pending` with nothing to nap for, or with its nap armed
/// on the timer and not yet elapsed (feature `tokio`).
#[cfg(feature = "tokio")]
pub(crate) fn poll_napping<T>(
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
pub(crate) struct Timer {
    sleep: Option<Pin<alloc::boxed::Box<tokio::time::Sleep>>>,
    armed: bool,
}

#[cfg(feature = "tokio")]
impl Timer {
    /// Fire `after` from now (a wait too long for the OS clock to name: in 30 years, as
    /// tokio's own far future).
    pub(crate) fn arm(&mut self, after: Duration) {
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
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// `Ready` once an armed timer has fired (it is then disarmed); `Pending` while it has
    /// not, or when it is not armed.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
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
