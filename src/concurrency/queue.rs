//! The queue of waiters of one [`Permits`](super::Permits): a list of entries in a slab,
//! in FIFO or LIFO order, always used under the limit's mutex (see the module's "No lost
//! wake-up" for what the lock and the word's waiting bit promise each other).
//!
//! An entry is created by its waiter and removed only by its waiter (when it collects its
//! grant, its failure, or cancels), so the key it holds always names its own entry: a key
//! is never reused while its waiter can still use it.

use super::error::AcquireError;
use super::word::PermitWord;
use crate::sync::Thread;
use core::task::Waker;
use slab::Slab;

/// How to wake a waiter: a task's waker, or a parked thread.
#[derive(Debug)]
pub(crate) enum Wake {
    Task(Waker),
    Thread(Thread),
}

impl Wake {
    /// Wake it. Called after the queue's lock is released (a waker may run code of its own;
    /// it must never find our lock held by its own thread).
    pub(crate) fn wake(self) {
        match self {
            Wake::Task(waker) => waker.wake(),
            Wake::Thread(thread) => thread.unpark(),
        }
    }
}

/// An entry: still waiting (linked into the list), or resolved and left for its waiter to
/// collect.
#[derive(Debug)]
enum Slot {
    Waiting {
        n: u32,
        /// `None` only between a wake-up's removal and the slot's resolution.
        wake: Option<Wake>,
        prev: Option<usize>,
        next: Option<usize>,
    },
    /// Granted: the permits are counted in the word already; `word` is what the grant left
    /// (the load the waiter starts under).
    Granted { word: PermitWord },
    /// Refused while waiting (the limit shrank below the request).
    Failed(AcquireError),
}

/// What a waiter finds when it looks at (or cancels) its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Its permits are granted (and now its own: the entry is gone).
    Granted { word: PermitWord },
    /// Refused (the entry is gone).
    Failed(AcquireError),
    /// Still queued (after a cancel: removed from the queue, nothing taken).
    Waiting,
}

/// The waiters, first to serve at the head.
#[derive(Debug)]
pub(crate) struct Queue {
    slots: Slab<Slot>,
    head: Option<usize>,
    tail: Option<usize>,
    /// Entries still waiting (linked), not counting resolved ones left to collect.
    waiting: u32,
}

impl Queue {
    pub(crate) const fn new() -> Self {
        Queue {
            slots: Slab::new(),
            head: None,
            tail: None,
            waiting: 0,
        }
    }

    /// How many wait.
    pub(crate) fn len(&self) -> u32 {
        self.waiting
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.waiting == 0
    }

    /// Queue a request for `n` permits: at the tail (FIFO, served last) or at the head
    /// (LIFO, served first). Returns its key.
    pub(crate) fn push(&mut self, n: u32, wake: Wake, lifo: bool) -> usize {
        let (prev, next) = if lifo {
            (None, self.head)
        } else {
            (self.tail, None)
        };
        let key = self.slots.insert(Slot::Waiting {
            n,
            wake: Some(wake),
            prev,
            next,
        });
        match prev {
            Some(p) => self.set_next(p, Some(key)),
            None => self.head = Some(key),
        }
        match next {
            Some(q) => self.set_prev(q, Some(key)),
            None => self.tail = Some(key),
        }
        self.waiting += 1;
        key
    }

    /// The first waiter to serve: its key and request.
    pub(crate) fn first(&self) -> Option<(usize, u32)> {
        let key = self.head?;
        match self.slots.get(key) {
            Some(Slot::Waiting { n, .. }) => Some((key, *n)),
            _ => None,
        }
    }

    /// Mark the first waiter granted (its permits are in the word already) and take its
    /// wake-up.
    pub(crate) fn grant_first(&mut self, word: PermitWord) -> Option<Wake> {
        let key = self.head?;
        self.resolve(key, Slot::Granted { word })
    }

    /// Refuse every waiter asking for more than `limit` (the limit shrank below them); their
    /// wake-ups are pushed to `wakes`.
    pub(crate) fn fail_above(&mut self, limit: u32, wakes: &mut Vec<Wake>) {
        let mut at = self.head;
        while let Some(key) = at {
            let (n, next) = match self.slots.get(key) {
                Some(Slot::Waiting { n, next, .. }) => (*n, *next),
                _ => break,
            };
            if n > limit {
                let failed = Slot::Failed(AcquireError::ExceedsLimit {
                    requested: n,
                    limit,
                });
                wakes.extend(self.resolve(key, failed));
            }
            at = next;
        }
    }

    /// The waiter's look at its entry: a resolution is collected (the entry removed); while
    /// it waits, a task's new waker replaces the old one.
    pub(crate) fn poll(&mut self, key: usize, waker: Option<&Waker>) -> Polled {
        match self.slots.get_mut(key) {
            Some(Slot::Waiting { wake, .. }) => {
                if let Some(waker) = waker {
                    match wake {
                        Some(Wake::Task(old)) if old.will_wake(waker) => {}
                        _ => *wake = Some(Wake::Task(waker.clone())),
                    }
                }
                Polled::Waiting
            }
            Some(_) => self.collect(key),
            // Not reachable: only the waiter removes its entry, and then it stops looking.
            None => Polled::Failed(AcquireError::TimedOut),
        }
    }

    /// The waiter gives up: a waiting entry is unlinked and removed (`Polled::Waiting`:
    /// nothing taken); a resolved one is collected as `poll` would.
    pub(crate) fn cancel(&mut self, key: usize) -> Polled {
        match self.slots.get(key) {
            Some(Slot::Waiting { .. }) => {
                self.unlink(key);
                self.slots.remove(key);
                Polled::Waiting
            }
            Some(_) => self.collect(key),
            None => Polled::Failed(AcquireError::TimedOut),
        }
    }

    /// Remove a resolved entry and say how it was resolved.
    fn collect(&mut self, key: usize) -> Polled {
        match self.slots.remove(key) {
            Slot::Granted { word } => Polled::Granted { word },
            Slot::Failed(e) => Polled::Failed(e),
            Slot::Waiting { .. } => Polled::Waiting,
        }
    }

    /// Unlink a waiting entry, replace it by its resolution, and take its wake-up.
    fn resolve(&mut self, key: usize, resolution: Slot) -> Option<Wake> {
        self.unlink(key);
        match core::mem::replace(&mut self.slots[key], resolution) {
            Slot::Waiting { wake, .. } => wake,
            _ => None,
        }
    }

    /// Take a waiting entry out of the list (it stays in the slab).
    fn unlink(&mut self, key: usize) {
        let (prev, next) = match &self.slots[key] {
            Slot::Waiting { prev, next, .. } => (*prev, *next),
            _ => return,
        };
        match prev {
            Some(p) => self.set_next(p, next),
            None => self.head = next,
        }
        match next {
            Some(q) => self.set_prev(q, prev),
            None => self.tail = prev,
        }
        self.waiting -= 1;
    }

    fn set_next(&mut self, key: usize, to: Option<usize>) {
        if let Slot::Waiting { next, .. } = &mut self.slots[key] {
            *next = to;
        }
    }

    fn set_prev(&mut self, key: usize, to: Option<usize>) {
        if let Slot::Waiting { prev, .. } = &mut self.slots[key] {
            *prev = to;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> Wake {
        Wake::Thread(crate::sync::current_thread())
    }

    #[test]
    fn fifo_serves_in_arrival_order_and_lifo_in_reverse() {
        for lifo in [false, true] {
            let mut q = Queue::new();
            let keys: Vec<usize> = (1..=3).map(|n| q.push(n, thread(), lifo)).collect();
            let mut served = Vec::new();
            let word = PermitWord::new(10).unwrap();
            while let Some((key, n)) = q.first() {
                assert!(q.grant_first(word).is_some());
                served.push(n);
                assert_eq!(q.poll(key, None), Polled::Granted { word });
            }
            assert_eq!(served, if lifo { [3, 2, 1] } else { [1, 2, 3] });
            assert!(q.is_empty() && keys.len() == 3);
        }
    }

    #[test]
    fn cancel_unlinks_from_anywhere() {
        let mut q = Queue::new();
        let a = q.push(1, thread(), false);
        let b = q.push(2, thread(), false);
        let c = q.push(3, thread(), false);
        assert_eq!(q.cancel(b), Polled::Waiting);
        assert_eq!(q.len(), 2);
        assert_eq!(q.first(), Some((a, 1)));
        assert_eq!(q.cancel(a), Polled::Waiting);
        assert_eq!(q.first(), Some((c, 3)));
        assert_eq!(q.cancel(c), Polled::Waiting);
        assert!(q.is_empty() && q.first().is_none());
        // A cancelled key can be reused by a new waiter without confusion.
        let d = q.push(4, thread(), true);
        assert_eq!(q.first(), Some((d, 4)));
    }

    #[test]
    fn a_granted_entry_is_collected_by_cancel_too() {
        let mut q = Queue::new();
        let a = q.push(1, thread(), false);
        let word = PermitWord::new(1).unwrap().acquire(1).unwrap();
        q.grant_first(word);
        assert!(q.is_empty());
        assert_eq!(q.cancel(a), Polled::Granted { word });
    }

    #[test]
    fn fail_above_refuses_only_the_too_large() {
        let mut q = Queue::new();
        let a = q.push(5, thread(), false);
        let b = q.push(1, thread(), false);
        let c = q.push(4, thread(), false);
        let mut wakes = Vec::new();
        q.fail_above(3, &mut wakes);
        assert_eq!(wakes.len(), 2);
        assert_eq!(q.first(), Some((b, 1)));
        assert_eq!(q.len(), 1);
        let refused = AcquireError::ExceedsLimit {
            requested: 5,
            limit: 3,
        };
        assert_eq!(q.poll(a, None), Polled::Failed(refused));
        assert!(matches!(q.poll(c, None), Polled::Failed(_)));
    }
}
