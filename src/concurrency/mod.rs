//! Concurrency limits: at most `limit` units of work in flight, fixed or adaptive (feature
//! `std`).
//!
//! - [`Permits`]: the limit. Its in-flight count and its limit share one `AtomicU64`
//!   (the crate's `PermitWord`; read it with [`Permits::snapshot`]), changed only through the crate's compare-and-swap loop, so a grant is
//!   one CAS when nobody waits. [`Permits::try_acquire`] never waits;
//!   [`Permits::acquire_blocking`] and [`Permits::acquire`] (a runtime-agnostic future;
//!   [`Permits::acquire_within`] adds tokio's timer, feature `tokio`) wait in a bounded
//!   FIFO or LIFO queue ([`Order`]). [`Permits::reconfigure`] changes the limit at any time: a
//!   cut takes effect as permits come back, nothing is revoked.
//! - [`Permit`] / [`OwnedPermit`]: permits held, given back on drop or completed with an
//!   [`Completion`] (success with its latency, dropped, ignored). An [`OwnedPermit`] can move
//!   into a response body's future and be completed when the body ends.
//! - Adaptive limits: [`Permits::adaptive`] is a limit set by an [`AdaptiveRule`] fed by its
//!   permits' outcomes ([`Adaptive`]), windowed ([`Window`]): [`Aimd`], [`Vegas`] and
//!   [`Gradient2`] (Netflix concurrency-limits) and [`EnvoyGradient`] (Envoy's adaptive
//!   concurrency filter). The rules are pure functions from samples to a limit.
//! - [`KeyedPermits`] (feature `keyed`): one limit per key, in bounded memory, on
//!   [`Keyed`][crate::Keyed]'s maps. [`Partitioned`]: shares of one limit by class, each
//!   guaranteed its share and free to borrow what the others leave unused (Netflix's
//!   partitioned limiter).
//!
//! Bad input (a zero limit, a limit above [`MAX_LIMIT`], a zero backlog, a rule's parameter
//! outside its range) is a [`LimitError`] when it is set; a request that gets no permit gets
//! an [`AcquireError`]. Nothing here panics on input.
//!
//! # Layers
//!
//! As the rate limiters: the rule (`PermitWord`'s transitions: old word and request in,
//! new word or refusal out), then the shell ([`Permits`]: the word in one `AtomicU64`, the
//! queue behind a mutex), then the composites ([`KeyedPermits`], [`Partitioned`]). The
//! adaptive rules are pure too ([`AdaptiveRule`]), and [`Adaptive`] is their shell.
//!
//! # Orderings
//!
//! The word is the limit's whole state; every change of it is a read-modify-write through
//! `cas::apply`, and RMWs on one location are totally ordered (its modification order)
//! whatever their ordering argument, each reading the last value before it. So every grant
//! decides on the count every earlier grant and release left, and `Relaxed` is enough for
//! "no permit is created by a race" (as for the rate limiters, `src/cas.rs`). The queue's
//! contents (entries, wakers, a grant's result) are published by its mutex. What ties the
//! two together is argued below; it needs nothing beyond coherence of the word and the
//! mutex's own release/acquire. The limit publishes nothing else: a grant is not a memory
//! fence for the caller's data (use a lock for that, as with any semaphore used as a
//! counter).
//!
//! # No lost wake-up
//!
//! The waiting bit `W` of the word and the queue keep one invariant, **at every release
//! of the queue's lock, `W` is set iff the queue holds a waiter**: `W` is set and cleared
//! only under the lock, by the critical section that makes the queue non-empty or empty
//! (a waiter joining sets it in the same CAS that found its permits do not fit; the last
//! grant clears it in the grant's CAS; a cancellation or a refusal that empties the queue
//! clears it). The lock-free operations (a grant that does not wait, a release, a resize)
//! never change `W`.
//!
//! **Claim: a queued waiter whose permits fit is granted without having to poll.** Only two
//! things make a waiter's permits fit: a release or a growth of the limit (a change of the
//! word), or the waiter becoming the first (the ones before it left). Each is followed by
//! a *serve*: under the lock, grant the first waiters while they fit.
//!
//! - *A release or a growth*, RMW `R`, after a waiter joined with CAS `E` (in the word's
//!   modification order). The waiter is still queued, so `W` is still set (invariant) in
//!   the word `R` leaves. A growth's CAS reads that bit itself (an RMW reads the last value
//!   before it); a release reads it by a load `L` after its `fetch_sub` (issue 28: the
//!   subtraction's result goes unused), which by coherence reads the word `R` left or a
//!   later one. That later word has `W` clear only if a critical section after `R` emptied
//!   the queue (a last grant, which decided on a word with `R`'s permits, or a
//!   cancellation): then the waiter was granted or left, and there is nothing to serve.
//!   Otherwise the thread sees `W` and serves. Its serve's critical section comes after the
//!   waiter's: if it came before, the serve's unlock would synchronise with the waiter's
//!   lock, so `R` would happen before `E`, and coherence would order `R` before `E` in the
//!   modification order. So the serve finds the waiter queued, with the word `R` left or a
//!   later one.
//! - *If `R` came before `E`*, `E` read the word `R` left: the waiter's own CAS decided with
//!   the released permits (it took them if it could; else they are not enough for it or
//!   someone is ahead of it, and the claim is about the first waiter).
//! - *A waiter becomes the first* when the one before it is granted (the serve goes on to
//!   it), cancelled or refused (the cancelling or refusing critical section serves the
//!   queue before releasing the lock).
//!
//! A serve grants from the head and stops at the first waiter that does not fit, so the
//! queue is served in order. A request that does not wait is refused while `W` is set, so
//! it never takes permits a waiter is owed. The loom models in `loom-tests/tests/permits.rs`
//! check this (a waiter that is never granted is a deadlock loom reports), together with
//! "in flight never above the limit" under racing resizes, and cancellation.
//!
//! Wakers are woken after the lock is released, so a waker that runs code of its own never
//! finds the lock held by its own thread. A blocking waiter parks after looking at its
//! entry; an unpark that comes between the look and the park leaves the thread's token set,
//! so the park returns at once.
//!
//! # Cancellation
//!
//! A waiter that gives up (a blocking wait past its deadline, a dropped future) removes its
//! entry under the lock. If it was still waiting, it took nothing, and the queue is served
//! again (it may have been the first). If permits were granted to it in the meantime, a
//! blocking waiter keeps them and returns them; a dropped future gives them back (a release,
//! which serves the queue in turn).
//!
//! # Sources
//!
//! Netflix concurrency-limits (`AIMDLimit`, `VegasLimit`, `Gradient2Limit`,
//! `WindowedLimit`, `AbstractLimiter`, `AbstractPartitionedLimiter`, `LifoBlockingLimiter`);
//! Envoy's adaptive concurrency filter (gradient controller); the queue's protocol follows
//! the pattern of tokio's batch semaphore (a waiter list behind a mutex beside an atomic
//! count), with the count and the limit in one word so that the limit can shrink.

mod adaptive;
mod error;
mod feedback;
mod handoff;
#[cfg(feature = "keyed")]
mod keyed;
mod partition;
mod permit;
mod permits;
mod queue;
mod snapshot;
mod wait;
mod window;
mod word;

pub use adaptive::{
    AdaptiveRule, Aimd, EnvoyGradient, EnvoyState, Gradient2, Gradient2State, Vegas, VegasState,
};
pub use error::{AcquireError, LimitError};
pub use feedback::{Adaptive, Feedback, Fixed};
#[cfg(feature = "keyed")]
#[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
pub use keyed::KeyedPermits;
pub use partition::Partitioned;
pub use permit::{Completion, Permit, Release};
pub use permits::{Order, OwnedPermit, Permits};
pub use snapshot::PermitsSnapshot;
pub use wait::{Acquire, AcquireOwned};
pub use window::{Aggregate, Observation, Sample, Window};
pub use word::MAX_LIMIT;
