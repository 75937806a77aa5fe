//! [`WaitList`]: waiters in order, resolved by the list's owner and collected by their
//! waiters.
//!
//! The list is a plain value, always used under its owner's lock. An entry holds the
//! waiter's request (`T`) and its waker while it waits; the owner serves the list in order
//! (from the head: FIFO when waiters are pushed at the back, LIFO at the front) and
//! *resolves* an entry with the outcome (`R`): the entry leaves the order, keeps the
//! outcome for its waiter, and its waker is handed back to be woken once the lock is
//! released ([`WakeList`](super::wake::WakeList)). The waiter *polls* its entry (collecting
//! the outcome, or refreshing its waker) or *cancels* it (leaving the order, or collecting an
//! outcome that came first: a cancellation never loses a resolution, so whatever the outcome
//! granted can be given back).
//!
//! An entry is created by its waiter and removed only by its waiter (when it collects the
//! outcome or cancels), so the key it holds always names its own entry.
//!
//! # No lost wake-up
//!
//! Every step runs under the owner's lock. A waiter that finds its entry still waiting
//! leaves its current waker in it before the lock is released; a resolution after that
//! takes that waker. A resolution before it is seen by the poll. Modelled with its owner's
//! lock in `notify/loom.rs` (resolve vs poll, resolve vs cancel, and a deadline's cancel vs
//! resolve).

use core::task::{Poll, Waker};
use slab::Slab;

/// An entry: waiting (linked into the order) or resolved (left for its waiter to collect).
#[derive(Debug)]
enum Slot<T, R> {
    Waiting {
        value: T,
        waker: Option<Waker>,
        prev: Option<usize>,
        next: Option<usize>,
    },
    Resolved(R),
}

/// Waiters with requests `T`, resolved with outcomes `R` (see the module).
#[derive(Debug)]
pub(crate) struct WaitList<T, R> {
    slots: Slab<Slot<T, R>>,
    head: Option<usize>,
    tail: Option<usize>,
    /// Entries still waiting (linked), not counting resolved ones left to collect.
    waiting: usize,
}

impl<T, R> Default for WaitList<T, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, R> WaitList<T, R> {
    pub(crate) const fn new() -> Self {
        WaitList {
            slots: Slab::new(),
            head: None,
            tail: None,
            waiting: 0,
        }
    }

    /// How many wait (resolved entries not counted).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.waiting
    }

    #[inline]
    #[cfg(any(feature = "concurrency", test))]
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting == 0
    }

    /// Queue `value` last (served after everyone queued before it); its key.
    pub(crate) fn push_back(&mut self, value: T, waker: Option<Waker>) -> usize {
        self.link(value, waker, self.tail, None)
    }

    /// Queue `value` first (served before everyone queued before it); its key.
    #[cfg(any(feature = "concurrency", all(test, not(limitcore_loom))))]
    pub(crate) fn push_front(&mut self, value: T, waker: Option<Waker>) -> usize {
        self.link(value, waker, None, self.head)
    }

    fn link(
        &mut self,
        value: T,
        waker: Option<Waker>,
        prev: Option<usize>,
        next: Option<usize>,
    ) -> usize {
        let key = self.slots.insert(Slot::Waiting {
            value,
            waker,
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

    /// The first waiting entry.
    #[inline]
    pub(crate) fn head(&self) -> Option<usize> {
        self.head
    }

    /// The waiting entry after `key` (`None` at the end, or if `key` does not wait).
    pub(crate) fn next(&self, key: usize) -> Option<usize> {
        match self.slots.get(key) {
            Some(Slot::Waiting { next, .. }) => *next,
            _ => None,
        }
    }

    /// The waiting entries' keys, in order.
    #[cfg(all(test, not(limitcore_loom)))]
    pub(crate) fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        core::iter::successors(self.head, move |&k| self.next(k))
    }

    /// The request of a waiting entry.
    #[inline]
    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        match self.slots.get(key) {
            Some(Slot::Waiting { value, .. }) => Some(value),
            _ => None,
        }
    }

    /// The request of a waiting entry, mutably.
    #[inline]
    #[cfg(feature = "budget")]
    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        match self.slots.get_mut(key) {
            Some(Slot::Waiting { value, .. }) => Some(value),
            _ => None,
        }
    }

    /// Whether the entry of `key` waits (false once resolved, or if there is none).
    #[inline]
    pub(crate) fn is_waiting(&self, key: usize) -> bool {
        matches!(self.slots.get(key), Some(Slot::Waiting { .. }))
    }

    /// Resolve a waiting entry with `outcome`: it leaves the order and keeps the outcome for
    /// its waiter; its request is returned with its waker (to wake once the lock is
    /// released). `None` if the entry does not wait.
    pub(crate) fn resolve(&mut self, key: usize, outcome: R) -> Option<(T, Option<Waker>)> {
        if !self.is_waiting(key) {
            return None;
        }
        self.unlink(key);
        match core::mem::replace(&mut self.slots[key], Slot::Resolved(outcome)) {
            Slot::Waiting { value, waker, .. } => Some((value, waker)),
            Slot::Resolved(_) => None,
        }
    }

    /// Take a waiting entry's waker without resolving it (the waiter should look again:
    /// its request was changed in place, or the conditions it waits on).
    #[cfg(any(feature = "budget", all(test, not(limitcore_loom))))]
    pub(crate) fn take_waker(&mut self, key: usize) -> Option<Waker> {
        match self.slots.get_mut(key) {
            Some(Slot::Waiting { waker, .. }) => waker.take(),
            _ => None,
        }
    }

    /// The waiter looks at its entry: a resolution is collected (the entry is removed,
    /// `Ready`); while it waits, `waker` (if given) is kept to be woken, replacing one that
    /// would not wake the same task, `Pending`.
    ///
    /// # Panics
    ///
    /// If there is no entry under `key` (the waiter collected or cancelled it already).
    pub(crate) fn poll(&mut self, key: usize, waker: Option<&Waker>) -> Poll<R> {
        match &mut self.slots[key] {
            Slot::Waiting { waker: kept, .. } => {
                if let Some(waker) = waker {
                    if !kept.as_ref().is_some_and(|k| k.will_wake(waker)) {
                        *kept = Some(waker.clone());
                    }
                }
                Poll::Pending
            }
            Slot::Resolved(_) => Poll::Ready(self.collect(key)),
        }
    }

    /// The waker kept for a waiting entry.
    #[cfg(feature = "lanes")]
    pub(crate) fn waker(&self, key: usize) -> Option<&Waker> {
        match self.slots.get(key) {
            Some(Slot::Waiting { waker, .. }) => waker.as_ref(),
            _ => None,
        }
    }

    /// The waiter gives up: a waiting entry leaves the order and is removed (`Err` with its
    /// request: nothing was resolved); a resolved one is collected (`Ok`) as `poll` would.
    ///
    /// # Panics
    ///
    /// If there is no entry under `key`.
    pub(crate) fn cancel(&mut self, key: usize) -> Result<R, T> {
        match &self.slots[key] {
            Slot::Waiting { .. } => {
                self.unlink(key);
                match self.slots.remove(key) {
                    Slot::Waiting { value, .. } => Err(value),
                    Slot::Resolved(_) => unreachable!("checked above"),
                }
            }
            Slot::Resolved(_) => Ok(self.collect(key)),
        }
    }

    fn collect(&mut self, key: usize) -> R {
        match self.slots.remove(key) {
            Slot::Resolved(outcome) => outcome,
            Slot::Waiting { .. } => unreachable!("collect is called on resolved entries"),
        }
    }

    /// Take a waiting entry out of the order (it stays in the slab).
    fn unlink(&mut self, key: usize) {
        let (prev, next) = match &self.slots[key] {
            Slot::Waiting { prev, next, .. } => (*prev, *next),
            Slot::Resolved(_) => return,
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

#[cfg(all(test, not(limitcore_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// Counts its wake-ups.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn fifo_and_lifo_orders() {
        for lifo in [false, true] {
            let mut list: WaitList<u32, u32> = WaitList::new();
            for n in 1..=3 {
                if lifo {
                    list.push_front(n, None);
                } else {
                    list.push_back(n, None);
                }
            }
            let order: Vec<u32> = list.keys().map(|k| *list.get(k).unwrap()).collect();
            assert_eq!(order, if lifo { [3, 2, 1] } else { [1, 2, 3] });
        }
    }

    #[test]
    fn a_resolution_is_collected_once_by_poll_or_cancel() {
        let (count, w) = waker();
        let mut list: WaitList<u32, &str> = WaitList::new();
        let a = list.push_back(1, None);
        let b = list.push_back(2, None);
        assert_eq!(list.poll(a, Some(&w)), Poll::Pending);
        let (n, kept) = list.resolve(a, "granted").unwrap();
        assert_eq!(n, 1);
        kept.unwrap().wake();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(list.len(), 1);
        assert_eq!(list.head(), Some(b));
        assert!(list.resolve(a, "twice").is_none(), "resolved once");
        assert_eq!(list.poll(a, Some(&w)), Poll::Ready("granted"));
        // b: resolved, then cancelled: the cancel collects the outcome.
        list.resolve(b, "late");
        assert_eq!(list.cancel(b), Ok("late"));
        assert!(list.is_empty() && list.head().is_none());
    }

    #[test]
    fn cancel_unlinks_from_anywhere_and_keys_are_reused_safely() {
        let mut list: WaitList<u32, ()> = WaitList::new();
        let a = list.push_back(1, None);
        let b = list.push_back(2, None);
        let c = list.push_back(3, None);
        assert_eq!(list.cancel(b), Err(2));
        assert_eq!(list.keys().collect::<Vec<_>>(), [a, c]);
        assert_eq!(list.cancel(a), Err(1));
        assert_eq!(list.cancel(c), Err(3));
        assert!(list.is_empty());
        let d = list.push_front(4, None);
        assert_eq!(list.head(), Some(d));
        assert_eq!(list.get(d), Some(&4));
    }

    #[test]
    fn poll_keeps_one_waker_per_task_and_take_waker_leaves_the_entry_waiting() {
        let (count, w) = waker();
        let mut list: WaitList<u32, ()> = WaitList::new();
        let a = list.push_back(1, None);
        assert_eq!(list.poll(a, Some(&w)), Poll::Pending);
        assert_eq!(list.poll(a, Some(&w)), Poll::Pending);
        list.take_waker(a).unwrap().wake();
        assert!(list.take_waker(a).is_none(), "taken");
        assert!(list.is_waiting(a));
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }
}
