//! [`Changes`]: how a budget's waiters learn that its configuration changed (a new rate,
//! burst or debt, a pause or its end), so that they decide again at once instead of
//! sleeping out a wait computed under the old configuration.
//!
//! # No lost wake-up
//!
//! The change count is only increased with `list` locked, and a waiter checks it with
//! `list` locked before it sleeps (on the condition variable, which releases the lock
//! atomically, or by leaving its waker in `list`). So a change either happened before the
//! waiter's check (which sees the new count and does not sleep) or after it, and then finds
//! the waiter asleep or its waker in `list` and wakes it: the classic monitor argument.

use crate::sync::{lock, AtomicU64, Condvar, Mutex, Ordering};
#[cfg(feature = "tokio")]
use core::task::Waker;
use core::time::Duration;

/// A budget's change count and its waiters (see the module).
#[derive(Debug)]
pub(crate) struct Changes {
    /// Changes so far. Written with `list` locked.
    count: AtomicU64,
    /// The wakers of async waiters, taken by the next change.
    list: Mutex<Vec<core::task::Waker>>,
    /// Blocking waiters sleep on it with `list` locked.
    asleep: Condvar,
}

impl Changes {
    pub(crate) fn new() -> Changes {
        Changes {
            count: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
            asleep: Condvar::new(),
        }
    }

    /// Changes so far: what a waiter remembers before it decides, to wait for the next.
    #[inline]
    pub(crate) fn count(&self) -> u64 {
        // Acquire: partner of the release increment in `notify`; a waiter that sees a change
        // sees the configuration it published (which was stored before it).
        self.count.load(Ordering::Acquire)
    }

    /// A change happened: wake every waiter.
    pub(crate) fn notify(&self) {
        let wakers = {
            let mut list = lock(&self.list);
            // Release: see `count`. With `list` locked: see the module.
            self.count.fetch_add(1, Ordering::Release);
            core::mem::take(&mut *list)
        };
        self.asleep.notify_all();
        // Outside the lock: a waker may take the waiter's own locks, or register again.
        for waker in wakers {
            waker.wake();
        }
    }

    /// Sleep until the change count moves past `seen`, or `timeout` passes (`None`: no
    /// timeout); whether it moved.
    pub(crate) fn wait_blocking(&self, seen: u64, timeout: Option<Duration>) -> bool {
        let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
        let mut list = lock(&self.list);
        loop {
            // Relaxed: read with `list` locked, which orders it against every increment.
            if self.count.load(Ordering::Relaxed) != seen {
                return true;
            }
            list = match deadline {
                None => self.asleep.wait(list).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let Some(left) = deadline.checked_duration_since(std::time::Instant::now())
                    else {
                        return false;
                    };
                    if left.is_zero() {
                        return false;
                    }
                    self.asleep
                        .wait_timeout(list, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Register `waker` for the next change unless the count has moved past `seen`
    /// already; whether it has (then nothing is registered and the caller goes on).
    #[cfg(feature = "tokio")]
    pub(crate) fn register(&self, seen: u64, waker: &Waker) -> bool {
        let mut list = lock(&self.list);
        // Relaxed: read with `list` locked (see `wait_blocking`).
        if self.count.load(Ordering::Relaxed) != seen {
            return true;
        }
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
        }
        false
    }
}
