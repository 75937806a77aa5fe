//! The one place the lease protocol's shared state comes from: its atomics, the lease word's
//! cell and the waiters' [`Notify`].
//!
//! Under `--cfg limitcore_loom` they are [loom](https://docs.rs/loom)'s, so that the models
//! of the lease protocol (`leased/loom.rs`) explore every interleaving of the entry's
//! protocol (the fetch slot, the pins, the retirement, the waiters' wake-ups); otherwise they
//! are std's, the core's and tokio's. The cfg is scoped to this workspace: `--cfg loom`
//! would also switch tokio (and every other crate that reads it) to its own loom build, which
//! this crate's models do not need and its dependencies do not all support.
//!
//! Under the model two stand-ins replace what loom cannot see:
//!
//! - [`WordCell`]: the core's [`limitcore::cell::WordCell`] keeps its word in the core's own
//!   atomics, which switch only under the core's `--cfg loom`. The stand-in is the same loop
//!   on loom's `AtomicU64`, with the same orderings (a relaxed load, a weak
//!   compare-and-swap that is a release on success and relaxed on failure, retried on the
//!   word that beat it: the core's `cas::apply_ordered` with `Release`).
//! - [`Notify`]: tokio's `Notify` is built on std's atomics and lock. The stand-in keeps the
//!   part of its contract the protocol relies on: a `Notified` made before a
//!   `notify_waiters` completes when awaited, one made after it does not, and making a
//!   `Notified` that then reads what a `notify_waiters` call's thread wrote before the call
//!   is ordered after it (tokio's `notified` reads the notify count with `SeqCst`, which
//!   `notify_waiters` increments; here a lock gives the same order).
//!
//! Run the models (release, with a target directory of their own, since the cfg changes
//! every crate's fingerprint):
//!
//! ```text
//! RUSTFLAGS="--cfg limitcore_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p limitcore-redis --release --lib loom
//! ```

#[cfg(not(limitcore_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(limitcore_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(limitcore_loom))]
pub(crate) use limitcore::cell::WordCell;

#[cfg(not(limitcore_loom))]
pub(crate) use tokio::sync::Notify;

#[cfg(limitcore_loom)]
pub(crate) use model::{Notify, WordCell};

/// The stand-ins under the model (see the module).
#[cfg(limitcore_loom)]
mod model {
    use loom::sync::atomic::{AtomicU64, Ordering};
    use loom::sync::Mutex;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    /// The core's `WordCell` on loom's `AtomicU64`: the same loop, the same orderings.
    #[derive(Debug)]
    pub(crate) struct WordCell(AtomicU64);

    impl WordCell {
        pub(crate) fn new(word: u64) -> Self {
            WordCell(AtomicU64::new(word))
        }

        pub(crate) fn load(&self) -> u64 {
            // Relaxed: as the core's `WordCell::load`.
            self.0.load(Ordering::Relaxed)
        }

        pub(crate) fn update<T, E>(&self, f: impl Fn(&mut u64) -> Result<T, E>) -> Result<T, E> {
            // Relaxed: as the core's loop, a stale value only fails the CAS below.
            let mut current = self.0.load(Ordering::Relaxed);
            loop {
                let mut next = current;
                let value = f(&mut next)?;
                // Release on success, Relaxed on failure: as the core's state cells
                // (`cas::apply_ordered` with `Release`).
                match self.0.compare_exchange_weak(
                    current,
                    next,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(value),
                    Err(actual) => {
                        current = actual;
                        loom::hint::spin_loop();
                    }
                }
            }
        }
    }

    /// tokio's `Notify`, as far as the protocol uses it: `notified`, `enable`, awaiting, and
    /// `notify_waiters`. The lock holds the count of `notify_waiters` calls and the wakers
    /// of the `Notified`s that were polled.
    #[derive(Debug)]
    pub(crate) struct Notify {
        state: Mutex<(u64, Vec<Waker>)>,
    }

    impl Notify {
        pub(crate) fn new() -> Self {
            Notify {
                state: Mutex::new((0, Vec::new())),
            }
        }

        /// A future that completes at the first `notify_waiters` after this call.
        pub(crate) fn notified(&self) -> Notified<'_> {
            let calls = self.state.lock().unwrap().0;
            Notified {
                notify: self,
                calls,
            }
        }

        /// Complete every `Notified` made before this call.
        pub(crate) fn notify_waiters(&self) {
            let wakers = {
                let mut state = self.state.lock().unwrap();
                state.0 += 1;
                std::mem::take(&mut state.1)
            };
            for waker in wakers {
                waker.wake();
            }
        }
    }

    /// tokio's `Notified`, as far as the protocol uses it.
    #[derive(Debug)]
    pub(crate) struct Notified<'a> {
        notify: &'a Notify,
        calls: u64,
    }

    impl Notified<'_> {
        /// tokio's registration, whose answer is whether the future is ready; here the count
        /// taken by `notified` already registers it.
        pub(crate) fn enable(self: Pin<&mut Self>) -> bool {
            self.notify.state.lock().unwrap().0 != self.calls
        }
    }

    impl Future for Notified<'_> {
        type Output = ();

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let mut state = self.notify.state.lock().unwrap();
            if state.0 != self.calls {
                return Poll::Ready(());
            }
            state.1.push(cx.waker().clone());
            Poll::Pending
        }
    }
}
