//! [`InLane`]: one lane of a [`Lanes`] limiter as the I/O adapters' pacer, so that a storage
//! engine's user reads, flushes and compactions pace their bytes through one budget in the
//! lanes' order.

use super::pace::sealed::{Grant, Pacing};
use crate::clock::{Clock, DefaultClock};
use crate::decision::{Denied, Receipt};
use crate::lanes::{Lane, LaneError, Lanes};
use crate::notify::driver::Nap;
use alloc::sync::Arc;
use core::task::{ready, Context, Poll};

/// One lane of a shared [`Lanes`] limiter, as a [`Pace`](super::Pace): the bytes of a
/// [`Paced`](super::Paced) or `AsyncPaced` (feature `tokio`) reader or writer are
/// granted in that lane, one unit a byte, in the lanes' order (the top lane strictly first,
/// the others by weight; the module [`lanes`](crate::lanes) states each lane's bound).
///
/// - **Chunk.** An operation asks for at most the budget's burst `B` (its
///   [`Quota::burst`](crate::Quota::burst) when the operation starts), as with every pacer.
/// - **Waits.** A blocking operation waits as [`Lanes::acquire_blocking`], an async one as
///   [`Lanes::acquire`] (on tokio's timer on an OS clock); neither spins.
/// - **Give-back.** None: the lanes never refund, so a short read or write keeps the units
///   it asked for charged (stricter than the bytes moved, never more permissive), as does
///   one that failed. Size the buffers to what the operations move (a file read into a
///   buffer it fills) where the difference matters.
/// - **Cancellation.** An async operation's request stays with the adapter's wait for its
///   direction when the operation's future is dropped, and the next operation in that
///   direction takes it over; `AsyncPaced::release` (or dropping the adapter, which drops
///   its waits) takes it out of its lane's queue, and the units it had been given in pieces
///   pass on to the next requests of its lane ([`Ticket`](crate::Ticket)'s
///   "Cancellation").
///
/// Cloning an `InLane` shares the limiter (an [`Arc`]); a clone may name another lane
/// ([`InLane::in_lane`]).
///
/// # Examples
///
/// ```
/// use limitcore::io::{InLane, Paced};
/// use limitcore::{Lane, Lanes, LanesConfig};
/// use std::io::{Read, Write};
/// use std::sync::Arc;
///
/// let disk = Arc::new(Lanes::new(LanesConfig::new("64MiB/s burst 64KiB".parse()?))?);
/// let mut compaction = Paced::new(Vec::new(), InLane::new(Arc::clone(&disk), Lane::LOW)?);
/// compaction.write_all(&[0; 100_000])?;
/// let mut user = Paced::new(&b"a user read goes first"[..], InLane::new(Arc::clone(&disk), Lane::USER)?);
/// let mut text = String::new();
/// user.read_to_string(&mut text)?;
/// assert_eq!(text, "a user read goes first");
/// assert_eq!(disk.counts(Lane::LOW).unwrap().granted, 100_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct InLane<C: Clock = DefaultClock> {
    lanes: Arc<Lanes<C>>,
    /// A lane of `lanes`, checked when made.
    lane: Lane,
}

impl<C: Clock> Clone for InLane<C> {
    fn clone(&self) -> Self {
        InLane {
            lanes: Arc::clone(&self.lanes),
            lane: self.lane,
        }
    }
}

impl<C: Clock> InLane<C> {
    /// The lane `lane` of `lanes`.
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`] if `lanes` has no such lane (the number of lanes is fixed
    /// when the limiter is made, so a lane checked here stays valid).
    pub fn new(lanes: Arc<Lanes<C>>, lane: Lane) -> Result<Self, LaneError> {
        if lane.index() < lanes.lanes() {
            Ok(InLane { lanes, lane })
        } else {
            Err(LaneError::NoSuchLane {
                lane,
                lanes: lanes.lanes(),
            })
        }
    }

    /// Another lane of the same limiter.
    ///
    /// # Errors
    ///
    /// As [`InLane::new`].
    pub fn in_lane(&self, lane: Lane) -> Result<Self, LaneError> {
        InLane::new(Arc::clone(&self.lanes), lane)
    }

    /// The lane.
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// The shared limiter.
    pub fn lanes(&self) -> &Arc<Lanes<C>> {
        &self.lanes
    }
}

/// A grant of `n` units: nothing to give back ([`Receipt::NOTHING`]).
fn grant(n: u32) -> Grant {
    Grant {
        n,
        receipt: Receipt::NOTHING,
    }
}

/// A lane wait's error as the adapters' refusal. A lane checked by [`InLane::new`] and no
/// deadline leave none ([`Lanes::acquire`] grants any size in the end); were one to come,
/// it is a refusal no wait cures, which the adapters report as an I/O error.
fn refused(_: LaneError) -> Denied {
    Denied::ExceedsCapacity { capacity: 0 }
}

impl<C: Clock> Pacing for InLane<C> {
    type Place = crate::lanes::Entry;

    fn chunk(&self) -> u32 {
        self.lanes.quota().burst().max(1)
    }

    fn poll_take(
        &self,
        place: &mut Self::Place,
        n: &mut u32,
        cx: &mut Context<'_>,
        nap: &mut Nap,
    ) -> Poll<Result<Grant, Denied>> {
        // The size is fixed when the request is submitted (a resumed wait keeps it).
        let granted = ready!(self.lanes.poll_entry(place, self.lane, *n, None, cx, nap));
        Poll::Ready(granted.map(|()| grant(*n)).map_err(refused))
    }

    fn abandon(&self, place: &mut Self::Place) {
        let _ = self.lanes.abandon_entry(place);
    }

    fn keep(&self, _grant: Grant, _used: u32) {
        // The lanes never refund: the grant stays charged (see the type's "Give-back").
    }
}
