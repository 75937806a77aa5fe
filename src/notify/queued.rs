//! [`Queued`]: a wait that holds a place in its limiter's queue, written once for every
//! limiter whose waits are served in order (a budget's, a lane's, a concurrency limit's).
//!
//! The limiter writes the wait's poll and its give-up ([`Queue`]); this type is the rest:
//! it keeps the request and the wait's entry between polls, runs as a [`Wait`] (the
//! blocking driver) and as a future (the async driver), and gives the place back in its
//! `Drop`, so that a wait dropped while queued leaves at once. `L` reaches the limiter: a
//! reference for a borrowed wait, an `Arc` for an owned one (tokio's `Semaphore::acquire`
//! and `acquire_owned`); what the wait resolves to may hold it (a permit does).

#[cfg(any(feature = "tokio", feature = "concurrency"))]
use super::driver::Naps;
use super::driver::{Nap, Wait};
use core::fmt;
#[cfg(feature = "tokio")]
use core::future::Future;
use core::ops::Deref;
#[cfg(feature = "tokio")]
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use sealed::{Hand as _, Queue as _};

/// A limiter whose waits through the handle `L` (a reference or an `Arc`) hold a place in
/// its queue (see [`Queued`]): the crate's budgets, lanes and concurrency limits. Sealed: its
/// methods are the limiter's own.
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
///     L::Target: Queue<L>,
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
pub trait Queue<L>: sealed::Hand<L> {}

impl<L, Q: sealed::Hand<L> + ?Sized> Queue<L> for Q {}

pub(crate) mod sealed {
    use super::*;

    /// The limiter's side of an ordered wait.
    pub trait Queue {
        /// What a wait asks for (fixed when it is made).
        type Request: Copy + fmt::Debug;
        /// What the wait keeps between polls: its place in the queue, once taken.
        type Entry: Default + fmt::Debug;
        /// What the limiter's side of the wait ends with.
        type Outcome;

        /// One poll of the wait whose place is `entry` (see [`Wait::poll_wait`]); `Ready`
        /// leaves `entry` holding nothing.
        fn poll_entry(
            &self,
            entry: &mut Self::Entry,
            request: Self::Request,
            cx: &mut Context<'_>,
            nap: &mut Nap,
        ) -> Poll<Self::Outcome>;

        /// Give back the place `entry` holds, if any (what the wait's `Drop` runs).
        fn abandon_entry(&self, entry: &mut Self::Entry);
    }

    /// What a wait through the handle `L` resolves to: the outcome itself (a budget's, a
    /// lane's), or a grant that holds the handle (a permit).
    pub trait Hand<L>: Queue {
        /// The wait's output.
        type Output;

        /// The output of a wait through `limiter` that ended with `outcome`.
        fn hand(limiter: &L, outcome: Self::Outcome) -> Self::Output;
    }
}

/// The limiter side's outcome type of `L`'s waits.
#[cfg(any(feature = "tokio", feature = "concurrency"))]
type Outcome<L> = <<L as Deref>::Target as sealed::Queue>::Outcome;

/// A wait for `request` that holds a place in the queue of the limiter `L` reaches: the
/// type of the budgets', the lanes' and the concurrency limits' waits
/// ([`budget::Acquire`](crate::budget::Acquire), [`lanes::Acquire`](crate::lanes::Acquire),
/// [`concurrency::Acquire`](crate::concurrency::Acquire) and their owned forms).
///
/// A [`Wait`] (run it with [`block_on`](super::block_on), or poll it from a driver of your
/// own) and a future: with feature `tokio` any of them, its naps sleeping on tokio's timer;
/// without it, a concurrency limit's wait with no deadline (the only wait that never naps on
/// the OS timer). Dropped before it ends, it gives its place back at once: a place in a
/// queue is never left behind.
///
/// # Examples
///
/// See [`budget::Acquire`](crate::budget::Acquire).
#[must_use = "a wait does nothing unless awaited or run"]
pub struct Queued<L: Deref>
where
    L::Target: Queue<L>,
{
    limiter: L,
    request: <L::Target as sealed::Queue>::Request,
    entry: <L::Target as sealed::Queue>::Entry,
    /// The async driver's timer (a wait that is a future: see the type's docs).
    #[cfg(any(feature = "tokio", feature = "concurrency"))]
    naps: Naps,
}

impl<L: Deref> Queued<L>
where
    L::Target: Queue<L>,
{
    /// The wait for `request` on `limiter`, not polled yet (it holds no place).
    #[inline]
    pub(crate) fn new(limiter: L, request: <L::Target as sealed::Queue>::Request) -> Self {
        Queued {
            limiter,
            request,
            entry: Default::default(),
            #[cfg(any(feature = "tokio", feature = "concurrency"))]
            naps: Naps::default(),
        }
    }

    /// The handle the wait reaches its limiter through.
    #[cfg(all(feature = "concurrency", feature = "keyed"))]
    pub(crate) fn limiter(&self) -> &L {
        &self.limiter
    }

    /// The limiter side's outcome, as a future's poll (its naps on the async driver): the
    /// future's poll before the handle makes it the output, and for a caller that looks at
    /// it first (a keyed limit retries a retired state).
    #[cfg(any(feature = "tokio", feature = "concurrency"))]
    pub(crate) fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome<L>> {
        let Queued {
            limiter,
            request,
            entry,
            naps,
        } = self;
        naps.poll(cx, |cx, nap| limiter.poll_entry(entry, *request, cx, nap))
    }

    /// As [`Queued::poll_outcome`], on the blocking driver.
    #[cfg(all(feature = "concurrency", feature = "keyed"))]
    pub(crate) fn outcome_blocking(&mut self) -> Outcome<L> {
        let (limiter, request, entry) = (&self.limiter, self.request, &mut self.entry);
        super::driver::block_on(super::driver::poll_fn(|cx, nap| {
            limiter.poll_entry(entry, request, cx, nap)
        }))
    }
}

impl<L: Deref> Wait for Queued<L>
where
    L::Target: Queue<L>,
{
    type Output = <L::Target as sealed::Hand<L>>::Output;

    #[inline]
    fn poll_wait(&mut self, cx: &mut Context<'_>, nap: &mut Nap) -> Poll<Self::Output> {
        let request = self.request;
        let outcome = ready!(self.limiter.poll_entry(&mut self.entry, request, cx, nap));
        Poll::Ready(L::Target::hand(&self.limiter, outcome))
    }
}

/// The future of every wait (feature `tokio`); without it, see [`Queued`].
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<L: Deref> Future for Queued<L>
where
    L::Target: Queue<L>,
    Self: Unpin,
{
    type Output = <L::Target as sealed::Hand<L>>::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        poll_future(self.get_mut(), cx)
    }
}

/// [`Queued`]'s future poll: its poll on the async driver, whose naps sleep on tokio's timer
/// (without feature `tokio` only waits that never nap are futures).
#[inline]
#[cfg(any(feature = "tokio", feature = "concurrency"))]
pub(crate) fn poll_future<L: Deref>(
    queued: &mut Queued<L>,
    cx: &mut Context<'_>,
) -> Poll<<L::Target as sealed::Hand<L>>::Output>
where
    L::Target: Queue<L>,
{
    let outcome = ready!(queued.poll_outcome(cx));
    Poll::Ready(L::Target::hand(&queued.limiter, outcome))
}

impl<L: Deref> Drop for Queued<L>
where
    L::Target: Queue<L>,
{
    fn drop(&mut self) {
        self.limiter.abandon_entry(&mut self.entry);
    }
}

impl<L: Deref> fmt::Debug for Queued<L>
where
    L::Target: Queue<L>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queued")
            .field("request", &self.request)
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}
