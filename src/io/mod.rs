//! Paced I/O: readers and writers whose bytes go through a limiter, one permit a byte
//! (feature `std`; the async forms with feature `tokio`).
//!
//! - [`Paced`]: a [`std::io::Read`] and [`std::io::Write`] wrapper.
//! - [`AsyncPaced`] (feature `tokio`): a [`tokio::io::AsyncRead`] and
//!   [`tokio::io::AsyncWrite`] wrapper.
//! - [`Pace`]: the limiters they pace through (every limiter of the crate; a
//!   [`Budget`](crate::Budget) waits first come, first served; [`InLane`], a lane of a
//!   shared [`Lanes`](crate::Lanes) budget, in the lanes' order), and [`Charge`], those that
//!   take forced charges (budgets).
//!
//! Each operation moves at most the limiter's burst `B` bytes (the *chunk*: a larger buffer
//! takes several calls, each a short read or write as [`std::io::Read`] and
//! [`std::io::Write`] allow), by one of two strategies ([`Strategy`]). Below, `T` is the
//! limiter's emission interval (ns a byte: 1 / rate) and `w` a window of time; GCRA and the
//! budget take at most `B + ⌈w / T⌉ − 1` permits in any window of length `w`.
//!
//! # Acquire before ([`Strategy::AcquireBefore`], [`Paced::new`])
//!
//! An operation first takes the permits of the bytes it may move, `min(len, B)`, sleeping
//! until they conform, then does the I/O, then gives back what it did not use: a short
//! read or write (a read cannot know beforehand how many bytes will arrive) keeps the
//! permits of the bytes it moved, and one that moved nothing, or failed, keeps none.
//!
//! - **Bound.** Every byte's permit is taken before the operation that moves it starts, so
//!   the bytes of the operations that start in any window obey the limiter's bound
//!   (`B + ⌈w / T⌉ − 1`). Counted by when operations *complete*, one more may count (the one
//!   that started before the window and ends in it): at most `2B + ⌈w / T⌉ − 1` bytes for
//!   one adapter alone on its limiter. When every operation moves a whole chunk (a copy
//!   whose buffer is a multiple of `B`), such an operation conforms only from a full
//!   limiter, so operations start at least `B·T` apart and at most `⌈w / (B·T)⌉ + 1` of
//!   them complete in any window: `w / T + B` bytes, the rate over the window plus one
//!   burst, when `B·T` divides `w` (1 MiB at 64 MiB/s, `w` = 1 s), less than `w / T + 2B`
//!   otherwise.
//! - **Give-back.** For the [`Limiter`](crate::Limiter) shells (a budget included) the grant
//!   is refunded and the bytes moved taken again in one update: at the grant's own reading
//!   the state is exactly as if the operation had asked for what it moved; later, the
//!   rule's refund returns only what no reading can have absorbed, so the state is never
//!   more permissive than that (and if the bytes moved cannot be taken again, the whole
//!   grant stays charged). Through a [`SlidingWindow`](crate::SlidingWindow) or a [`Retry`]
//!   only an operation that moved nothing is refunded; a short one keeps its grant.
//!
//! # Charge after ([`Strategy::ChargeAfter`], [`Paced::charge_after`]; budgets only)
//!
//! As async-speed-limit's `Resource` and TiKV's quota limiter: the operation moves up to `B`
//! bytes at once and what it moved is charged afterwards with
//! [`Budget::charge`](crate::Budget::charge), which is never refused (the budget runs into
//! debt); the next operation waits until the debt is repaid far enough for one byte.
//! Concretely, an operation first takes one permit, waiting first come, first served (for an
//! adapter alone on its budget this is exactly the wait the previous charge returned,
//! [`Charged::wait`](crate::Charged::wait); other users, changes of configuration and a
//! pause re-time it), does the I/O, and charges the rest of what it moved; one that moved
//! nothing gives its permit back.
//!
//! - **Bound.** For an adapter alone on its budget, at most `2B + ⌈w / T⌉ − 1` bytes in the
//!   operations that complete in any window: every byte is charged as its operation
//!   completes, and an operation starts only when one byte conforms, so beyond the rate and
//!   the burst only the last operation's overdraft (`< B`) counts.
//! - **Debt.** This needs [`max_debt`](crate::BudgetConfig::max_debt) of at least
//!   `(B − 1)·T`, so that every charge fits. A charge that does not (less debt, or other
//!   charges on a shared budget) falls short
//!   ([`Charged::shortfall`](crate::Charged::shortfall)): the adapter owes the shortfall and
//!   takes it, waiting, before it goes on (so every byte is charged once), and the bound
//!   grows by it.
//! - The wait comes after the I/O: the first operation on a budget with one byte free goes
//!   at once whatever its size, and the last leaves its debt to whoever comes next.
//!
//! # Waits and cancellation
//!
//! Every operation waits through the limiter's own wait (a budget's place in the schedule, a
//! lane's request, a retrying limiter's next try), run by the waiting layer's driver: the
//! blocking adapter parks its thread, the async adapter returns `Pending`; both sleep as
//! the limiter's clock says (the OS timer, tokio's for the async adapter, or until a
//! [`ManualClock`](crate::clock::ManualClock) moves), never spinning. The blocking
//! adapter's wait ends within its call (a panic drops it, which gives its place back).
//! Each direction of the async adapter owns its wait, on the pacer it shares with the
//! other in an `Arc` (tokio-util's `PollSemaphore` shape). A poll-based reader or writer
//! cannot tell a caller that gave up from one that will poll again, so an async
//! operation's wait and the permits of an operation whose inner I/O was not ready stay with
//! the direction when the operation's future is dropped: the next operation in that
//! direction takes them over (nothing is charged twice). Dropping the adapter (or a future
//! that owns it) drops both waits, which gives back everything they hold and charges any
//! bytes owed; [`AsyncPaced::release`] does the same without dropping it.
//!
//! # Errors
//!
//! The inner reader's or writer's errors pass through unchanged (the operation's permits are
//! given back). A refusal that no wait can cure ([`Denied::is_final`]: a request past the
//! clock's range) is an [`std::io::Error`] of kind [`Other`](std::io::ErrorKind::Other)
//! whose inner error is [`Refused`]; a limiter whose capacity shrank below the chunk (a
//! reconfigured budget) is asked for its capacity instead. Nothing panics.
//!
//! # Examples
//!
//! ```
//! use limitcore::io::Paced;
//! use limitcore::Budget;
//! use std::io::{Read, Write};
//!
//! let budget = Budget::new("64MiB/s burst 64KiB".parse()?)?;
//! let mut out = Paced::new(Vec::new(), &budget);
//! out.write_all(&[7; 100_000])?; // 64 KiB at once, the rest about 0.5 ms later
//! assert_eq!(out.get_ref().len(), 100_000);
//!
//! let mut input = Paced::new(&b"read through the same budget"[..], &budget);
//! let mut text = String::new();
//! input.read_to_string(&mut text)?;
//! assert_eq!(text, "read through the same budget");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "tokio")]
mod async_paced;
mod blocking;
#[cfg(feature = "lanes")]
mod lane;
mod pace;

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use async_paced::AsyncPaced;
pub use blocking::Paced;
#[cfg(feature = "lanes")]
#[cfg_attr(docsrs, doc(cfg(feature = "lanes")))]
pub use lane::InLane;
pub use pace::{Charge, Pace, Retry};

use crate::decision::Denied;
use core::fmt;
use pace::sealed::{Grant, Pacing};

/// How an adapter paces (see the [module](self)).
///
/// # Examples
///
/// ```
/// use limitcore::io::{Paced, Strategy};
/// use limitcore::Budget;
///
/// let budget = Budget::new("1MB/s burst 64kB".parse()?)?;
/// assert_eq!(Paced::new(Vec::<u8>::new(), &budget).strategy(), Strategy::AcquireBefore);
/// assert_eq!(Paced::charge_after(Vec::<u8>::new(), &budget).strategy(), Strategy::ChargeAfter);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// Take the permits of up to a burst of bytes, do the I/O, give back what it did not
    /// move.
    AcquireBefore,
    /// Take one permit, do the I/O (up to a burst of bytes), charge the rest of what it
    /// moved, into debt (budgets only).
    ChargeAfter,
}

/// The inner error of the [`std::io::Error`] an adapter returns when its limiter refuses
/// for good ([`Denied::is_final`]): no wait would let the bytes through.
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::io::{Paced, Refused};
/// use limitcore::{Denied, Gcra};
/// use std::io::Write;
///
/// // A clock at the end of its range: every request would conform past it.
/// let limiter = Gcra::with_clock("1kB/s".parse()?, ManualClock::starting_at(u64::MAX - 5))?;
/// let mut out = Paced::new(Vec::new(), &limiter);
/// let error = out.write(b"never").unwrap_err();
/// let refused = error.get_ref().and_then(|e| e.downcast_ref::<Refused>()).unwrap();
/// assert_eq!(refused.denied(), Denied::BeyondHorizon);
/// assert_eq!(refused.bytes(), 5);
/// assert!(out.get_ref().is_empty());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    denied: Denied,
    bytes: u32,
}

impl Refused {
    /// The limiter's refusal.
    pub fn denied(&self) -> Denied {
        self.denied
    }

    /// The bytes (permits) the operation asked for.
    pub fn bytes(&self) -> u32 {
        self.bytes
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "paced I/O: the limiter refused {} bytes for good ({})",
            self.bytes, self.denied
        )
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.denied)
    }
}

/// The I/O error of a refusal of `bytes` permits that no wait cures.
fn refused(denied: Denied, bytes: u32) -> std::io::Error {
    std::io::Error::other(Refused { denied, bytes })
}

/// For an operation over a buffer of `len > 0` bytes: the most bytes it may move,
/// `min(len, chunk)`, and the permits it takes first (all of them acquiring before, one
/// charging after).
fn first_ask(strategy: Strategy, len: usize, chunk: u32) -> (u32, u32) {
    let most = u32::try_from(len)
        .map_or(chunk, |len| len.min(chunk))
        .max(1);
    match strategy {
        Strategy::AcquireBefore => (most, most),
        Strategy::ChargeAfter => (most, 1),
    }
}

/// After an operation on `grant` that moved `moved` bytes: keep the permits it used (acquire
/// before), or charge the bytes beyond the grant's one (charge after). Returns the bytes
/// owed (a charge that fell short, or a limiter that cannot charge), to be taken before the
/// next operation.
fn settle<P: Pacing + ?Sized>(pacer: &P, strategy: Strategy, grant: Grant, moved: usize) -> u32 {
    let moved = u32::try_from(moved).unwrap_or(u32::MAX);
    match strategy {
        Strategy::AcquireBefore => {
            let used = moved.min(grant.n);
            pacer.keep(grant, used);
            0
        }
        Strategy::ChargeAfter => {
            if moved == 0 {
                pacer.keep(grant, 0);
                return 0;
            }
            // The first byte is the grant's permit.
            let rest = moved - 1;
            if rest == 0 {
                return 0;
            }
            pacer.charge(rest).unwrap_or(rest)
        }
    }
}

#[cfg(all(test, feature = "budget"))]
mod tests;
#[cfg(all(test, feature = "budget", feature = "tokio"))]
mod tests_async;
