//! The one place the lease protocol's shared state comes from: its atomics, the lease word's
//! cell and the waiters' `Notify`.
//!
//! Under `--cfg limitcore_loom` they are [loom](https://docs.rs/loom)'s, so that the models
//! of the lease protocol (`leased/loom.rs`) explore every interleaving of the entry's
//! protocol (the fetch slot, the pins, the retirement, the waiters' wake-ups); otherwise they
//! are std's, the core's and tokio's. The cfg is scoped to this workspace: `--cfg loom`
//! would also switch tokio (and every other crate that reads it) to its own loom build, which
//! this crate's models do not need and its dependencies do not all support.
//!
//! The lease word's cell is the core's [`limitcore::cell::WordCell`] in both builds: the core
//! reads the same cfg (its `sync` module), so under the model its word is loom's too and the
//! models check the core's own compare-and-swap loop. One stand-in replaces what loom cannot
//! see:
//!
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

pub(crate) use limitcore::cell::WordCell;

#[cfg(not(limitcore_loom))]
pub(crate) use tokio::sync::Notify;

#[cfg(limitcore_loom)]
pub(crate) use model::Notify;

/// The stand-in under the model (see the module).
#[cfg(limitcore_loom)]
mod model {
    use loom::sync::Mutex;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

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
