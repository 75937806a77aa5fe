//! The waiting layer (feature `std`): one event, one ordered waiter list, and one driver
//! that runs a wait written once as a poll, blocking a thread or as a future.
//!
//! Every wait of the crate is built on these three pieces, and nothing else in the crate
//! parks a thread, keeps a waker or owns a condition variable:
//!
//! - [`Event`]: "something changed, look again". A waiter listens, checks its condition,
//!   and sleeps on the listener only if the condition still fails; a change made before
//!   the notification is seen by the check after it. Used where every waiter must look
//!   again: a [`ManualClock`](crate::clock::ManualClock)'s change of time, the
//!   [`Throttler`](crate::Throttler)'s queue, and `limitcore-redis`'s lease arrivals.
//! - `WaitList` (crate-private): waiters in order, each an entry its waiter polls or
//!   cancels and the list's owner resolves under its lock, with the wakers woken after the
//!   lock is released and without allocating for up to 32 wake-ups at once. Used where
//!   waiters are served in order: [`Permits`](crate::concurrency::Permits) (FIFO or LIFO), a
//!   [`Budget`](crate::Budget)'s waiters (first come, first served, across changes of
//!   configuration and pauses), and each lane of [`Lanes`](crate::lanes::Lanes).
//! - The driver: a wait is one function, [`Wait::poll_wait`]`(cx, nap)`, that either
//!   finishes or registers `cx`'s waker with whatever will end it (an [`Event`], a
//!   `WaitList` entry, a clock that is not the OS timer) and says how long it may sleep on
//!   the OS timer at most ([`Nap`]). [`block_on`] runs it on a thread (parked, woken by the
//!   waker); [`WaitFuture`] runs it as a future, its naps on tokio's timer (feature
//!   `tokio`). A wait that must give something back when abandoned does it in its own
//!   `Drop`, so both faces are cancellation-safe the same way. Every public wait of the
//!   crate is such a wait: the budgets', the lanes' and the permits' futures (borrowed and
//!   owned, as tokio's `Semaphore::acquire` and `acquire_owned`), whose blocking forms run
//!   the same future on [`block_on`]; the trait is public so that a wait of your own runs
//!   the same two ways. The waits that hold a place in a limiter's queue (a budget's, a
//!   lane's) are one type, `Queued` (feature `budget`): the limiter writes their poll, the
//!   type keeps their place and gives it back when dropped.
//!
//! Waits follow the limiter's clock: a wait for a time asks the clock
//! ([`Clock::sleep_hint`](crate::clock::Clock::sleep_hint)) how to sleep, so on a
//! [`ManualClock`](crate::clock::ManualClock) every wait, blocking or async, sleeps until
//! the clock is moved and never on the OS timer: a test steps the clock and the waiters
//! react.
//!
//! # Checking
//!
//! The loom models of the event and of the list's resolve / poll / cancel protocol are in
//! `loom.rs` beside them (`RUSTFLAGS="--cfg limitcore_loom" cargo test -p limitcore --lib
//! --release notify::loom`): no lost wake-up under notify-vs-listen, cancel-vs-resolve and
//! deadline-vs-resolve races. The modules built on them keep only their own state
//! invariants in their models (`loom-tests/`).

pub(crate) mod driver;
mod event;
#[cfg(any(feature = "budget", feature = "concurrency", all(test, limitcore_loom)))]
pub(crate) mod list;
#[cfg(any(feature = "budget", feature = "concurrency"))]
pub(crate) mod queued;
pub(crate) mod wake;

#[cfg(all(test, limitcore_loom))]
mod loom;

pub use driver::{block_on, Nap, Wait, WaitFuture};
pub use event::{Event, Listener};
#[cfg(any(feature = "budget", feature = "concurrency"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "budget", feature = "concurrency"))))]
pub use queued::{Queue, Queued};
