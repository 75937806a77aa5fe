//! The queue of waiters of one [`Permits`](super::Permits): the waiting layer's ordered
//! waiter list (`notify::list::WaitList`), in FIFO or LIFO order, always used under the
//! limit's mutex (see the module's "No lost wake-up" for what the lock and the word's
//! waiting bit promise each other). Entries are requests for `n` permits, resolved with the
//! word the grant left or the refusal.

use super::error::AcquireError;
use super::word::PermitWord;
use crate::notify::list::WaitList;
use crate::notify::wake::WakeList;
use core::task::{Poll, Waker};

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

impl From<Poll<Result<PermitWord, AcquireError>>> for Polled {
    fn from(polled: Poll<Result<PermitWord, AcquireError>>) -> Self {
        match polled {
            Poll::Ready(Ok(word)) => Polled::Granted { word },
            Poll::Ready(Err(e)) => Polled::Failed(e),
            Poll::Pending => Polled::Waiting,
        }
    }
}

/// The waiters, first to serve at the head.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    list: WaitList<u32, Result<PermitWord, AcquireError>>,
}

impl Queue {
    pub(crate) const fn new() -> Self {
        Queue {
            list: WaitList::new(),
        }
    }

    /// How many wait.
    pub(crate) fn len(&self) -> u32 {
        u32::try_from(self.list.len()).unwrap_or(u32::MAX)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Queue a request for `n` permits, woken by `waker`: at the tail (FIFO, served last)
    /// or at the head (LIFO, served first). Returns its key.
    pub(crate) fn push(&mut self, n: u32, waker: Option<Waker>, lifo: bool) -> usize {
        if lifo {
            self.list.push_front(n, waker)
        } else {
            self.list.push_back(n, waker)
        }
    }

    /// The first waiter to serve: its key and request.
    pub(crate) fn first(&self) -> Option<(usize, u32)> {
        let key = self.list.head()?;
        self.list.get(key).map(|&n| (key, n))
    }

    /// Mark the first waiter granted (its permits are in the word already) and take its
    /// waker.
    pub(crate) fn grant_first(&mut self, word: PermitWord) -> Option<Waker> {
        let key = self.list.head()?;
        self.list
            .resolve(key, Ok(word))
            .and_then(|(_, waker)| waker)
    }

    /// Refuse every waiter asking for more than `limit` (the limit shrank below them); their
    /// wakers are kept in `wakes`.
    pub(crate) fn fail_above(&mut self, limit: u32, wakes: &mut WakeList) {
        let mut at = self.list.head();
        while let Some(key) = at {
            at = self.list.next(key);
            let Some(&n) = self.list.get(key) else {
                continue;
            };
            if n > limit {
                let failed = Err(AcquireError::ExceedsLimit {
                    requested: n,
                    limit,
                });
                if let Some((_, waker)) = self.list.resolve(key, failed) {
                    wakes.extend(waker);
                }
            }
        }
    }

    /// The waiter's look at its entry: a resolution is collected (the entry removed); while
    /// it waits, a new waker replaces the old one.
    pub(crate) fn poll(&mut self, key: usize, waker: Option<&Waker>) -> Polled {
        self.list.poll(key, waker).into()
    }

    /// The waiter gives up: a waiting entry is unlinked and removed (`Polled::Waiting`:
    /// nothing taken); a resolved one is collected as `poll` would.
    pub(crate) fn cancel(&mut self, key: usize) -> Polled {
        match self.list.cancel(key) {
            Ok(outcome) => Poll::Ready(outcome).into(),
            Err(_) => Polled::Waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its wake-ups.
    struct Count(AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A waiter with no waker (these tests look at the entries, not the wake-ups).
    fn thread() -> Option<Waker> {
        None
    }

    #[test]
    fn fifo_serves_in_arrival_order_and_lifo_in_reverse() {
        for lifo in [false, true] {
            let mut q = Queue::new();
            let keys: Vec<usize> = (1..=3).map(|n| q.push(n, thread(), lifo)).collect();
            let mut served = Vec::new();
            let word = PermitWord::new(10).unwrap();
            while let Some((key, n)) = q.first() {
                q.grant_first(word);
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
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = || Some(Waker::from(count.clone()));
        let mut q = Queue::new();
        let a = q.push(5, waker(), false);
        let b = q.push(1, waker(), false);
        let c = q.push(4, waker(), false);
        let mut wakes = WakeList::new();
        q.fail_above(3, &mut wakes);
        wakes.wake_all();
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            2,
            "the two refused are woken"
        );
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
