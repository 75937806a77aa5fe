//! What the I/O adapters pace bytes through: [`Pace`] (any limiter of the crate, a byte a
//! permit), [`Charge`] (budgets, which also take forced charges) and [`Retry`] (any other
//! refundable limiter).

#[cfg(feature = "budget")]
use crate::budget::Budget;
use crate::clock::{Clock, Nanos};
use crate::decision::{Denied, Receipt};
use crate::limiter::{RateLimiter, Refund};
use crate::limiters::{Limiter, SlidingWindow};
use crate::notify::driver::Nap;
use crate::rules::{
    FixedWindowRule, Rule, SlidingLogRule, SlidingWindowRule, TatRule, TokenBucketRule,
};
use crate::wait::poll_retry;
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::ops::Deref;
use core::task::{ready, Context, Poll};

/// A limiter the I/O adapters ([`Paced`](super::Paced), and with feature `tokio`
/// [`AsyncPaced`]) can pace bytes through, one permit a byte.
///
/// Implemented for every limiter of the crate that can give permits back:
///
/// - [`Budget`] waits first come, first served (as [`Budget::acquire_blocking`]): an
///   operation reserves its place in the schedule and sleeps until it; changes of
///   configuration re-time it and a pause holds it. A budget is also [`Charge`].
/// - [`Gcra`](crate::Gcra), [`TokenBucket`](crate::TokenBucket),
///   [`LeakyBucket`](crate::LeakyBucket), [`FixedWindow`](crate::FixedWindow),
///   [`SlidingLog`](crate::SlidingLog), [`SlidingWindow`] and any other [`Limiter`] of the
///   crate's rules wait as [`wait::Blocking`](crate::wait::Blocking) does: sleep the
///   `retry_after` the limiter reports (on its clock), then ask again (not first come, first
///   served).
/// - [`Retry`] of any [`Refund`] limiter (your own, `Box<dyn Refund>`, ...), waiting as
///   above.
/// - [`InLane`](super::InLane): one lane of a [`Lanes`](crate::Lanes) limiter, waiting in
///   the lanes' order.
/// - `&P`, `Arc<P>` and `Box<P>` of any of them, so that several adapters (or an adapter and
///   the rest of the program) can share one limiter.
///
/// What an operation did not use is given back exactly for the [`Limiter`] shells (a
/// [`Budget`] included: the unused permits are refunded and the used ones taken again in
/// one step, as if only those had been asked for); through a [`SlidingWindow`] or a
/// [`Retry`] an operation that moved nothing is refunded, and a short one keeps what it
/// asked for charged (stricter, never more permissive); through an
/// [`InLane`](super::InLane) nothing is given back (the lanes never refund).
///
/// The trait is sealed: its methods are the adapters' own.
///
/// # Examples
///
/// ```
/// use limitcore::io::{Pace, Retry};
/// use limitcore::{Budget, Gcra, Refund};
/// use std::sync::Arc;
///
/// fn pacer<P: Pace>(_: P) {}
/// pacer(Budget::new("64MiB/s burst 1MiB".parse()?)?);
/// pacer(Arc::new(Gcra::new("1MB/s burst 64kB".parse()?)?));
/// let boxed: Box<dyn Refund> = Box::new(Gcra::new("1MB/s burst 64kB".parse()?)?);
/// pacer(Retry(boxed));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
///
/// [`AsyncPaced`]: super::AsyncPaced
pub trait Pace: sealed::Pacing {}

impl<P: sealed::Pacing + ?Sized> Pace for P {}

/// A [`Pace`] limiter that takes forced charges: a [`Budget`] (or a pointer to one), the
/// only limiter [`Strategy::ChargeAfter`](super::Strategy::ChargeAfter) runs on.
///
/// # Examples
///
/// ```
/// use limitcore::io::Charge;
/// use limitcore::Budget;
/// use std::sync::Arc;
///
/// fn charged<P: Charge>(_: P) {}
/// charged(Arc::new(Budget::new("64MiB/s burst 1MiB".parse()?)?));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait Charge: Pace + sealed::Charging {}

impl<P: sealed::Charging + ?Sized> Charge for P {}

/// Any [`Refund`] limiter as a [`Pace`]: waits by sleeping the `retry_after` it reports and
/// asking again (as [`wait::Blocking`](crate::wait::Blocking), not first come, first
/// served); an operation that moved nothing is refunded, a short one keeps its permits.
///
/// # Examples
///
/// ```
/// use limitcore::io::{Paced, Retry};
/// use limitcore::{Gcra, Refund};
/// use std::io::Write;
///
/// let limiter: Box<dyn Refund> = Box::new(Gcra::new("1MB/s burst 64kB".parse()?)?);
/// let mut out = Paced::new(Vec::new(), Retry(limiter));
/// out.write_all(b"paced")?;
/// assert_eq!(out.get_ref(), b"paced");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Retry<L>(pub L);

pub(crate) mod sealed {
    use super::*;

    /// Permits granted to one operation: how many it may move, and what to give back.
    #[derive(Debug)]
    pub struct Grant {
        /// Bytes the operation may move (a disabled budget grants them without charge).
        pub(crate) n: u32,
        /// The permits charged for them ([`Receipt::NOTHING`] when none were).
        pub(crate) receipt: Receipt,
    }

    /// The adapters' view of a limiter (see [`Pace`]).
    pub trait Pacing: Send + Sync {
        /// What one operation's wait keeps between polls, borrowing nothing (a budget's or a
        /// lane's place, or when a retrying limiter is asked again): held by the adapters'
        /// owned wait, `Take`, which gives it back through [`Pacing::abandon`] when dropped.
        type Place: Default + Send + Sync + fmt::Debug;

        /// The most bytes one operation moves: the limiter's burst (at least 1).
        fn chunk(&self) -> u32;

        /// One poll of the wait for `n` permits (1 ≤ n), its progress in `place`: the
        /// waiting layer's one poll, run blocking by [`Paced`](crate::io::Paced) and async by
        /// `AsyncPaced`. A limiter whose capacity is now below `n` lowers `n` to it and
        /// waits for that. Errors: a refusal no wait cures.
        fn poll_take(
            &self,
            place: &mut Self::Place,
            n: &mut u32,
            cx: &mut Context<'_>,
            nap: &mut Nap,
        ) -> Poll<Result<Grant, Denied>>;

        /// Stop the wait in `place`, giving back any place it holds.
        fn abandon(&self, place: &mut Self::Place);

        /// Of the permits `grant` took, keep `used` and give the rest back.
        fn keep(&self, grant: Grant, used: u32);

        /// Charge `n` permits, never refused (a budget): the permits that did not fit
        /// (the charge's shortfall); `None` for a limiter without forced charges.
        fn charge(&self, n: u32) -> Option<u32> {
            let _ = n;
            None
        }
    }

    /// Limiters with forced charges (see [`Charge`]).
    pub trait Charging: Pacing {}
}

use sealed::{Charging, Grant, Pacing};

/// A refusal that leaves a smaller size to ask for: the capacity, after a change made it
/// smaller than `n` (a reconfigured budget).
fn rechunk(denied: Denied, n: u32) -> Option<u32> {
    match denied {
        Denied::ExceedsCapacity { capacity } if capacity > 0 && capacity < n => Some(capacity),
        _ => None,
    }
}

/// One poll of a retrying limiter's wait for `n` permits: the crate's one sleep-and-retry
/// loop ([`wait`](crate::wait)'s), on refundable takes; a limiter whose capacity shrank
/// below `n` is asked for its capacity at once.
fn poll_retrying<L: Refund + ?Sized>(
    limiter: &L,
    again_at: &mut Option<Nanos>,
    n: &mut u32,
    cx: &mut Context<'_>,
    nap: &mut Nap,
) -> Poll<Result<Grant, Denied>> {
    poll_retry(limiter, again_at, None, cx, nap, |now| loop {
        match limiter.acquire_refundable_at(*n, now) {
            Ok(receipt) => return Ok(Grant { n: *n, receipt }),
            Err(denied) => *n = rechunk(denied, *n).ok_or(denied)?,
        }
    })
}

/// Keep `used` of `grant` in a [`Limiter`] shell: the whole grant refunded and `used` taken
/// again at the same reading, in one update (so no other decision comes in between). If
/// that take is refused (the refund gave back less than it took: time passed and the rule
/// absorbed part of it), nothing changes and the whole grant stays charged.
fn keep_in_shell<R: Rule, C: Clock>(limiter: &Limiter<R, C>, grant: Grant, used: u32) {
    let Grant { n, receipt } = grant;
    if used >= n || receipt.n() == 0 {
        return;
    }
    let at = limiter.now();
    if used == 0 {
        limiter.refund(receipt, at);
        return;
    }
    let rule = limiter.rule();
    let _ = limiter.update(|state| {
        let mut next = state.clone();
        if rule.refund(&mut next, &receipt, at) && rule.take(&mut next, at, used).is_ok() {
            *state = next;
            Ok(())
        } else {
            Err(())
        }
    });
}

/// Keep `used` of `grant` through [`Refund`] alone: an operation that moved nothing is
/// refunded; a short one keeps the whole grant.
fn keep_refundable<L: Refund + ?Sized>(limiter: &L, grant: Grant, used: u32) {
    if used == 0 && grant.receipt.n() > 0 {
        limiter.refund(grant.receipt, limiter.now());
    }
}

#[cfg(feature = "budget")]
impl<C: Clock> Pacing for Budget<C> {
    type Place = crate::budget::Entry;

    fn chunk(&self) -> u32 {
        self.quota().burst()
    }

    fn poll_take(
        &self,
        place: &mut Self::Place,
        n: &mut u32,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Grant, Denied>> {
        loop {
            match ready!(self.poll_entry(place, *n, None, cx, nap)) {
                Ok(receipt) => return Poll::Ready(Ok(Grant { n: *n, receipt })),
                Err(denied) => match rechunk(denied, *n) {
                    Some(smaller) => *n = smaller,
                    None => return Poll::Ready(Err(denied)),
                },
            }
        }
    }

    fn abandon(&self, place: &mut Self::Place) {
        self.abandon_entry(place);
    }

    fn keep(&self, grant: Grant, used: u32) {
        keep_in_shell(self, grant, used);
    }

    fn charge(&self, n: u32) -> Option<u32> {
        Some(Budget::charge(self, n).shortfall)
    }
}

#[cfg(feature = "budget")]
impl<C: Clock> Charging for Budget<C> {}

/// [`Pacing`] through `poll_retrying` and the given `keep`, on the limiter `$limiter` of
/// `self` (the shell itself, or the limiter a [`Retry`] wraps).
macro_rules! retrying {
    ($keep:ident $(, $limiter:tt)?) => {
        type Place = Option<Nanos>;

        fn chunk(&self) -> u32 {
            self$(.$limiter)?.capacity().max(1)
        }

        fn poll_take(
            &self,
            again_at: &mut Option<Nanos>,
            n: &mut u32,
            cx: &mut Context<'_>,
            nap: &mut Nap,
        ) -> Poll<Result<Grant, Denied>> {
            poll_retrying(&(*self)$(.$limiter)?, again_at, n, cx, nap)
        }

        fn abandon(&self, again_at: &mut Option<Nanos>) {
            *again_at = None;
        }

        fn keep(&self, grant: Grant, used: u32) {
            $keep(&(*self)$(.$limiter)?, grant, used);
        }
    };
}

/// The [`Limiter`] shells of the crate's rules other than the budget's.
macro_rules! shells {
    ($($(#[$attr:meta])* [$($generics:tt)*] $rule:ty),* $(,)?) => {$(
        $(#[$attr])*
        impl<$($generics)* C: Clock> Pacing for Limiter<$rule, C> {
            retrying!(keep_in_shell);
        }
    )*};
}

shells!(
    [const PACE: bool,] TatRule<PACE>,
    [] TokenBucketRule,
    [] FixedWindowRule,
    [] SlidingWindowRule,
    [] SlidingLogRule,
);

impl<C: Clock> Pacing for SlidingWindow<C> {
    retrying!(keep_refundable);
}

impl<L: Refund> Pacing for Retry<L> {
    retrying!(keep_refundable, 0);
}

/// [`Pacing`] and [`Charging`] for a pointer to a limiter that has them.
macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<P: Pacing + ?Sized> Pacing for $ptr {
            type Place = P::Place;

            fn chunk(&self) -> u32 {
                (**self).chunk()
            }

            fn poll_take(
                &self,
                place: &mut P::Place,
                n: &mut u32,
                cx: &mut Context<'_>,
                nap: &mut Nap,
            ) -> Poll<Result<Grant, Denied>> {
                (**self).poll_take(place, n, cx, nap)
            }

            fn abandon(&self, place: &mut P::Place) {
                (**self).abandon(place)
            }

            fn keep(&self, grant: Grant, used: u32) {
                (**self).keep(grant, used)
            }

            fn charge(&self, n: u32) -> Option<u32> {
                (**self).charge(n)
            }
        }

        impl<P: Charging + ?Sized> Charging for $ptr {}
    )*};
}

forward!(&P, Box<P>, Arc<P>);

/// One operation's wait for permits from the pacer `H` reaches (the async adapter's
/// `Arc<P>`, one per direction; a borrow for the blocking adapter), owned: dropped before it
/// ends, it gives back the place it holds. Reused from one operation to the next.
pub(crate) struct Take<H: Deref>
where
    H::Target: Pacing,
{
    pub(crate) pacer: H,
    place: <H::Target as Pacing>::Place,
    /// The size asked for, fixed when the wait starts (a resumed wait keeps it; a limiter
    /// whose capacity shrank lowers it); `None` between waits.
    n: Option<u32>,
}

impl<H: Deref> Take<H>
where
    H::Target: Pacing,
{
    pub(crate) fn new(pacer: H) -> Self {
        Take {
            pacer,
            place: Default::default(),
            n: None,
        }
    }

    /// One poll of the wait for `n` permits (or of the wait under way, at its own size).
    pub(crate) fn poll_take(
        &mut self,
        n: u32,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Grant, Denied>> {
        let Take {
            pacer,
            place,
            n: asked,
        } = self;
        let polled = ready!(pacer.poll_take(place, asked.get_or_insert(n), cx, nap));
        *asked = None;
        Poll::Ready(polled)
    }

    /// Stop the wait under way, giving back the place it holds.
    pub(crate) fn abandon(&mut self) {
        self.pacer.abandon(&mut self.place);
        self.n = None;
    }
}

impl<H: Deref> Drop for Take<H>
where
    H::Target: Pacing,
{
    fn drop(&mut self) {
        self.abandon();
    }
}

impl<H: Deref> fmt::Debug for Take<H>
where
    H::Target: Pacing,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Take")
            .field("place", &self.place)
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}
