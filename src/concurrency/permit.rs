//! [`Permit`]: permits held, given back when dropped or completed with a [`Completion`].

use super::word::PermitWord;
use crate::clock::Nanos;
use core::fmt;
use core::ops::Deref;
use core::time::Duration;
#[allow(unused_imports)] // the supertrait's methods, through `Release`
use sealed::Release as _;

/// How the work a permit covered ended: the feedback an adaptive limit learns from
/// (Netflix concurrency-limits' `Listener`: `onSuccess`, `onDropped`, `onIgnore`). A fixed
/// limit only gives the permits back.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Completion, Permits};
/// use std::time::Duration;
///
/// let permits = Permits::new(4)?;
/// let permit = permits.try_acquire(1)?;
/// permit.complete(Completion::SuccessAfter(Duration::from_millis(12)));
/// assert_eq!(permits.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Completion {
    /// The work succeeded; its latency is the time since the permit was granted, on the
    /// limit's clock.
    Success,
    /// The work succeeded after this latency, measured by the caller.
    SuccessAfter(Duration),
    /// The work was dropped: it timed out, was refused downstream for overload, or failed in
    /// a way the caller counts as overload (a 5xx, say). Adaptive rules back off on it; its
    /// latency is the time since the grant.
    Dropped,
    /// Not a sample (a client error, a cancellation, a request the caller cannot judge):
    /// the permits come back and nothing is learnt. What dropping a permit does.
    Ignored,
}

/// What a holder of permits gave out: how many, and what an adaptive limit needs to learn
/// from their outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Permits held.
    pub(crate) n: u32,
    /// The partition they were charged to ([`Partitioned`](super::Partitioned)), and
    /// whether the partition's own share took them; 0 elsewhere.
    pub(crate) class: u32,
    /// The word the grant left (its in-flight count, these included, and the limit it was
    /// decided under); also the release's first guess of the word.
    pub(crate) word: PermitWord,
    /// When they were granted, on the limit's clock (0 if the limit reads no clock).
    pub(crate) start: Nanos,
}

impl Token {
    /// The token of a request for 0 permits: nothing to give back, nothing to learn.
    pub(crate) const EMPTY: Token = Token {
        n: 0,
        class: 0,
        word: PermitWord::from_bits(0),
        start: 0,
    };
}

/// A limit that gives out permits and takes them back: [`Permits`](super::Permits) and
/// [`Partitioned`](super::Partitioned). Sealed: a [`Permit`] holds one of these.
///
/// # Examples
///
/// Code that takes any permit, borrowed or owned, of any limit:
///
/// ```
/// use limitcore::concurrency::{Partitioned, Permit, Permits, Release};
/// use std::ops::Deref;
///
/// fn finish<P: Deref>(permit: Permit<P>, failed: bool)
/// where
///     P::Target: Release,
/// {
///     if failed { permit.dropped() } else { permit.success() }
/// }
///
/// let permits = Permits::new(2)?;
/// finish(permits.try_acquire(1)?, false);
/// let shared = Partitioned::new(2, &[0.5, 0.5])?;
/// finish(shared.try_acquire(1, 1)?, true);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Release: sealed::Release {}

impl<T: sealed::Release + ?Sized> Release for T {}

pub(crate) mod sealed {
    use super::{Completion, Token};
    use crate::clock::Nanos;

    /// The crate's side of [`Release`](super::Release); not callable outside the crate.
    pub trait Release: Send + Sync {
        /// Take back what `token` gave out, and learn from `outcome`.
        fn release(&self, token: &Token, outcome: Completion);
        /// The time on the limit's clock (0 if it reads none).
        fn now(&self) -> Nanos;
    }
}

/// Permits held: given back when the permit is dropped, or completed with a [`Completion`]
/// that an adaptive limit learns from.
///
/// `P` is how the permit reaches its limit: `&Permits<F>` for a permit borrowed from a limit
/// ([`Permits::try_acquire`](super::Permits::try_acquire)), `Arc<Permits<F>>` for one that
/// owns a reference and can move anywhere, into a response body's future say
/// ([`OwnedPermit`](super::OwnedPermit)); `&Partitioned` and `Arc<Partitioned>` likewise.
///
/// Dropping a permit gives its permits back with [`Completion::Ignored`]: a permit is never
/// lost, not by a panic, not by a cancelled future. There is no way to forget one.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::Permits;
/// use std::sync::Arc;
///
/// let permits = Arc::new(Permits::new(2)?);
/// let owned = permits.try_acquire_owned(1)?;       // 'static: move it into a task
/// let handle = std::thread::spawn(move || {
///     assert_eq!(owned.n(), 1);
///     owned.success();                              // back, with a latency sample
/// });
/// handle.join().unwrap();
/// assert_eq!(permits.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "permits are given back as soon as the permit is dropped"]
pub struct Permit<P>
where
    P: Deref,
    P::Target: Release,
{
    holder: P,
    token: Token,
    /// Cleared when the permits are given back by a completion (then `drop` has nothing to do).
    live: bool,
}

impl<P> Permit<P>
where
    P: Deref,
    P::Target: Release,
{
    #[inline]
    pub(crate) fn new(holder: P, token: Token) -> Self {
        Permit {
            holder,
            token,
            live: true,
        }
    }

    /// Permits held.
    #[inline]
    pub fn n(&self) -> u32 {
        self.token.n
    }

    /// Permits in flight on the limit just after these were granted, these included (the
    /// load an adaptive rule relates this request's latency to).
    pub fn in_flight_at_grant(&self) -> u32 {
        self.token.word.in_flight()
    }

    /// The limit these permits were granted under (every grant checks `in flight + n ≤
    /// limit` on one word: `in_flight_at_grant() ≤ limit_at_grant()`, except for a
    /// partition's guaranteed share). 0 for a request of 0 permits.
    pub fn limit_at_grant(&self) -> u32 {
        self.token.word.limit()
    }

    /// The partition the permits were charged to ([`Partitioned`](super::Partitioned)); 0
    /// for other limits.
    pub fn partition(&self) -> usize {
        (self.token.class >> 1) as usize
    }

    /// Time since the permits were granted, on the limit's clock; zero for a fixed limit,
    /// which reads no clock.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.holder.now().saturating_sub(self.token.start))
    }

    /// Give the permits back, with `outcome` for an adaptive limit to learn from.
    pub fn complete(mut self, outcome: Completion) {
        self.live = false;
        self.holder.release(&self.token, outcome);
    }

    /// Give the permits back: the work succeeded, after the time since the grant.
    pub fn success(self) {
        self.complete(Completion::Success);
    }

    /// Give the permits back: the work succeeded after `latency` (measured by the caller).
    pub fn success_after(self, latency: Duration) {
        self.complete(Completion::SuccessAfter(latency));
    }

    /// Give the permits back: the work was dropped (timed out, shed downstream, a 5xx).
    pub fn dropped(self) {
        self.complete(Completion::Dropped);
    }

    /// Give the permits back without a sample (what dropping the permit does).
    pub fn ignore(self) {
        self.complete(Completion::Ignored);
    }
}

impl<P> Drop for Permit<P>
where
    P: Deref,
    P::Target: Release,
{
    fn drop(&mut self) {
        if self.live {
            self.live = false;
            self.holder.release(&self.token, Completion::Ignored);
        }
    }
}

impl<P> fmt::Debug for Permit<P>
where
    P: Deref,
    P::Target: Release,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("n", &self.token.n)
            .field("in_flight_at_grant", &self.token.word.in_flight())
            .finish_non_exhaustive()
    }
}
