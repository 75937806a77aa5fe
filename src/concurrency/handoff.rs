//! How permits pass between the word and the queue of waiters (the slow path of
//! [`Permits`]): a request joins the queue, a release or a resize serves it, a cancellation
//! or a refusal settles it. Every step here runs under the queue's lock and changes the
//! word only through `cas::apply`; the module's "No lost wake-up" is the argument.

use super::error::Refusal;
use super::feedback::Feedback;
use super::permit::Token;
use super::permits::{infallible, Order, Permits};
use super::queue::{Polled, Queue};
use super::word::{PermitWord, RETIRED};
use crate::cas;
use crate::notify::wake::WakeList;
use crate::sync::{lock, Ordering};
use core::task::Waker;

/// A request that found no permit and joins the queue, or took them on its way in.
pub(crate) enum Enqueued {
    Took(Token),
    Queued(usize),
}

impl<F: Feedback> Permits<F> {
    /// Serve the queue after a release or a growth that saw the waiting bit.
    #[cold]
    #[inline(never)]
    pub(super) fn serve(&self) {
        let mut wakes = WakeList::new();
        self.grant(&mut lock(&self.waiters), &mut wakes);
        wakes.wake_all();
    }

    /// Under the queue's lock: grant the first waiters while their requests fit (each grant
    /// one CAS; the last one clears the waiting bit in the same step).
    fn grant(&self, queue: &mut Queue, wakes: &mut WakeList) {
        while let Some((_, n)) = queue.first() {
            let last = queue.len() == 1;
            let granted = cas::apply(&self.word, |w| {
                let next = PermitWord::from_bits(w).grant(n, last).ok_or(())?;
                Ok((next.bits(), next))
            });
            match granted {
                Ok(word) => wakes.extend(queue.grant_first(word)),
                Err(()) => break,
            }
        }
    }

    /// Under the queue's lock, after waiters left other than by a grant: clear the waiting
    /// bit if nobody is left, else serve the (possibly new) first waiter.
    fn settle(&self, queue: &mut Queue, wakes: &mut WakeList) {
        if queue.is_empty() {
            infallible(cas::apply(&self.word, |w| {
                Ok((PermitWord::from_bits(w).with_waiting(false).bits(), ()))
            }));
        } else {
            self.grant(queue, wakes);
        }
    }

    /// A request that will wait: under the lock, take the permits if it may and they fit,
    /// else set the waiting bit and join the queue, woken by `waker` (in one critical
    /// section).
    pub(crate) fn enqueue(&self, n: u32, waker: &Waker) -> Result<Enqueued, Refusal> {
        let mut queue = lock(&self.waiters);
        let lifo = self.order == Order::Lifo;
        let may_take = lifo || queue.is_empty();
        let full = self.backlog.filter(|&b| queue.len() >= b);
        let (word, took) = cas::apply(&self.word, |w| {
            if w == RETIRED {
                return Err(Refusal::Gone);
            }
            let (next, took) = PermitWord::from_bits(w).enqueue(n, may_take, full)?;
            Ok((next.bits(), (next, took)))
        })?;
        if took {
            drop(queue);
            return Ok(Enqueued::Took(self.token(n, word)));
        }
        Ok(Enqueued::Queued(queue.push(n, Some(waker.clone()), lifo)))
    }

    /// A waiter's look at its entry (a task's waker is refreshed).
    pub(crate) fn poll_waiter(&self, key: usize, waker: Option<&core::task::Waker>) -> Polled {
        lock(&self.waiters).poll(key, waker)
    }

    /// A waiter gives up: removed if still queued (then the queue is settled); a grant or
    /// refusal it had not collected yet is returned.
    pub(crate) fn cancel_waiter(&self, key: usize) -> Polled {
        let mut wakes = WakeList::new();
        let polled = {
            let mut queue = lock(&self.waiters);
            let polled = queue.cancel(key);
            if polled == Polled::Waiting {
                self.settle(&mut queue, &mut wakes);
            }
            polled
        };
        wakes.wake_all();
        polled
    }

    /// Set the limit (and, for a keyed state, the pinned bit); serve or refuse waiters if
    /// the queue is not empty.
    pub(crate) fn set_limit(&self, limit: u32, pin: Option<bool>) -> Result<(), Refusal> {
        let mut wakes = WakeList::new();
        let set = self.set_limit_then(limit, pin, &mut wakes);
        wakes.wake_all();
        set
    }

    /// [`Permits::set_limit`], leaving the waiters it served or refused in `wakes` for the
    /// caller to wake once it holds no lock (an adaptive limit resizes under its
    /// controller's lock).
    pub(crate) fn set_limit_then(
        &self,
        limit: u32,
        pin: Option<bool>,
        wakes: &mut WakeList,
    ) -> Result<(), Refusal> {
        let word = cas::apply(&self.word, |w| {
            if w == RETIRED {
                return Err(Refusal::Gone);
            }
            let mut next = PermitWord::from_bits(w).with_limit(limit);
            if let Some(pinned) = pin {
                next = next.with_pinned(pinned);
            }
            Ok((next.bits(), next))
        })?;
        if word.waiting() {
            self.after_resize(wakes);
        }
        Ok(())
    }

    /// Under the lock: refuse the waiters above the limit, serve the others.
    #[cold]
    fn after_resize(&self, wakes: &mut WakeList) {
        let mut queue = lock(&self.waiters);
        // Relaxed: read under the lock after our resize CAS; its partners are the other
        // resizes' CASes. One whose critical section came before ours happens-before this
        // load (its CAS, then its unlock, then our lock), so coherence shows us its limit
        // or a later one; one we do not see saw the waiting bit (the queue is not empty
        // unless we empty it, and then there is nothing left to check) and runs this same
        // step after us. So the queue ends up checked against the last limit.
        let limit = PermitWord::from_bits(self.word.load(Ordering::Relaxed)).limit();
        queue.fail_above(limit, wakes);
        self.settle(&mut queue, wakes);
    }
}
