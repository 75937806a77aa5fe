//! [`Queued`]: a wait that holds a place in its limiter's queue, written once for every
//! limiter whose waits are served in order (a budget's, a lane's).
//!
//! The limiter writes the wait's poll and its give-up ([`Queue`]); this type is the rest:
//! it keeps the request and the wait's entry between polls, runs as a [`Wait`] (the
//! blocking driver) and as a future (the async driver, feature `tokio`), and gives the
//! place back in its `Drop`, so that a wait dropped while queued leaves at once. `L`
//! reaches the limiter: a reference for a borrowed wait, an `Arc` for an owned one (tokio's
//! `Semaphore::acquire` and `acquire_owned`).

#[cfg(feature = "tokio")]
use super::driver::Naps;
use super::driver::{Nap, Wait};
use core::fmt;
#[cfg(feature = "tokio")]
use core::future::Future;
use core::ops::Deref;
#[cfg(feature = "tokio")]
use core::pin::Pin;
use core::task::{Context, Poll};
use sealed::Queue as _;

/// A limiter whose waits hold a place in its queue (see [`Queued`]): the crate's budgets and
/// lanes. Sealed: its methods are the limiter's own.
///
/// # Examples
///
/// Code that runs any ordered wait of any such limiter, borrowed or owned:
///
/// ```
/// use limitcore::notify::{block_on, Queue, Queued};
/// use limitcore::{Budget, Lane, Lanes, LanesConfig};
/// use std::ops::Deref;
///
/// fn run<L: Deref>(wait: Queued<L>) -> bool
/// where
///     L::Target: Queue,
/// {
///     block_on(wait);
///     true
/// }
///
/// let budget = Budget::new("1000/s burst 10".parse()?)?;
/// assert!(run(budget.acquire(1)));
/// let lanes = Lanes::new(LanesConfig::new("1MiB/s burst 64KiB".parse()?))?;
/// assert!(run(lanes.acquire(Lane::USER, 1)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Queue: sealed::Queue {}

impl<Q: sealed::Queue + ?Sized> Queue for Q {}

pub(crate) mod sealed {
    use super::*;

    /// The limiter's side of an ordered wait.
    pub trait Queue {
        /// What a wait asks for (fixed when it is made).
        type Request: Copy + fmt::Debug;
        /// What the wait keeps between polls: its place in the queue, once taken.
        type Entry: Default + fmt::Debug;
        /// What the wait ends with.
        type Output;

        /// One poll of the wait whose place is `entry` (see [`Wait::poll_wait`]); `Ready`
        /// leaves `entry` holding nothing.
        fn poll_entry(
            &self,
            entry: &mut Self::Entry,
            request: Self::Request,
            cx: &mut Context<'_>,
            nap: &mut Nap,
        ) -> Poll<Self::Output>;

        /// Give back the place `entry` holds, if any (what the wait's `Drop` runs).
        fn abandon_entry(&self, entry: &mut Self::Entry);
    }
}

/// A wait for `request` that holds a place in the queue of the limiter `L` reaches: the
/// type of the budgets' and the lanes' waits ([`budget::Acquire`](crate::budget::Acquire),
/// [`lanes::Acquire`](crate::lanes::Acquire) and their owned forms).
///
/// A [`Wait`] (run it with [`block_on`](super::block_on), or poll it from a driver of your
/// own) and, with feature `tokio`, a future whose naps sleep on tokio's timer. Dropped
/// before it ends, it gives its place back at once: a place in a queue is never left
/// behind.
///
/// # Examples
///
/// See [`budget::Acquire`](crate::budget::Acquire).
#[must_use = "a wait does nothing unless awaited or run"]
pub struct Queued<L: Deref>
where
    L::Target: Queue,
{
    limiter: L,
    request: <L::Target as sealed::Queue>::Request,
    entry: <L::Target as sealed::Queue>::Entry,
    #[cfg(feature = "tokio")]
    naps: Naps,
}

impl<L: Deref> Queued<L>
where
    L::Target: Queue,
{
    /// The wait for `request` on `limiter`, not polled yet (it holds no place).
    #[inline]
    pub(crate) fn new(limiter: L, request: <L::Target as sealed::Queue>::Request) -> Self {
        Queued {
            limiter,
            request,
            entry: Default::default(),
            #[cfg(feature = "tokio")]
            naps: Naps::default(),
        }
    }
}

impl<L: Deref> Wait for Queued<L>
where
    L::Target: Queue,
{
    type Output = <L::Target as sealed::Queue>::Output;

    #[inline]
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        let request = self.request;
        self.limiter.poll_entry(&mut self.entry, request, cx, nap)
    }
}

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<L: Deref> Future for Queued<L>
where
    L::Target: Queue,
    Self: Unpin,
{
    type Output = <L::Target as sealed::Queue>::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Queued {
            limiter,
            request,
            entry,
            naps,
        } = self.get_mut();
        naps.poll(cx, |cx, nap| limiter.poll_entry(entry, *request, cx, nap))
    }
}

impl<L: Deref> Drop for Queued<L>
where
    L::Target: Queue,
{
    fn drop(&mut self) {
        self.limiter.abandon_entry(&mut self.entry);
    }
}

impl<L: Deref> fmt::Debug for Queued<L>
where
    L::Target: Queue,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queued")
            .field("request", &self.request)
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}
