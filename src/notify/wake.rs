//! [`WakeList`]: the wakers a critical section resolved, woken after its lock is released,
//! with no allocation for up to [`WAKE_BATCH`] of them.

use alloc::vec::Vec;
use core::task::Waker;

/// Wake-ups kept inline: a resolution that wakes more (a reconfiguration that wakes every
/// waiter of a long queue) spills the rest into a vector.
pub(crate) const WAKE_BATCH: usize = 32;

/// Wakers to wake once the lock under which they were taken is released (a waker may run
/// code that takes the same lock: a task woken inline, a thread that re-polls).
#[derive(Debug)]
pub(crate) struct WakeList {
    inline: [Option<Waker>; WAKE_BATCH],
    len: usize,
    spill: Vec<Waker>,
}

impl Default for WakeList {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeList {
    pub(crate) const fn new() -> Self {
        const NONE: Option<Waker> = None;
        WakeList {
            inline: [NONE; WAKE_BATCH],
            len: 0,
            spill: Vec::new(),
        }
    }

    /// Keep `waker` to wake later.
    #[inline]
    pub(crate) fn push(&mut self, waker: Waker) {
        if self.len < WAKE_BATCH {
            self.inline[self.len] = Some(waker);
            self.len += 1;
        } else {
            self.spill.push(waker);
        }
    }

    /// Wake everything kept, in the order kept.
    pub(crate) fn wake_all(mut self) {
        for waker in self.inline[..self.len].iter_mut().filter_map(Option::take) {
            waker.wake();
        }
        for waker in core::mem::take(&mut self.spill) {
            waker.wake();
        }
    }
}

impl Extend<Waker> for WakeList {
    fn extend<I: IntoIterator<Item = Waker>>(&mut self, iter: I) {
        for waker in iter {
            self.push(waker);
        }
    }
}
