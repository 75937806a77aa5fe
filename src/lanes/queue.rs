//! The slow path of [`Lanes`] (with the queue's lock held): a request joins its lane's
//! queue, the queue is served (every piece that fits, in the lanes' order), the flags, the
//! counters and the timer are settled, and a waiter looks at or gives up its entry. The
//! module's "No lost wake-up" is the argument.

use super::schedule::Next;
use super::shared::{Inner, Lanes, Polled};
use crate::clock::{Clock, Nanos};
use crate::notify::wake::WakeList;
use crate::rules::Rule;
use crate::sync::{lock, Ordering};
use core::task::Waker;

impl<C: Clock> Lanes<C> {
    /// Submit `n` units for `lane` at `now`: what fits at once if nobody who goes first
    /// waits, the rest queued with `waker` kept to wake it. Returns the queue key, or
    /// `None` if granted in full.
    pub(crate) fn submit_key(
        &self,
        l: usize,
        n: u32,
        now: Nanos,
        waker: Option<&Waker>,
    ) -> Option<usize> {
        if n == 0 {
            return None;
        }
        self.tune_if_due(now);
        let taken = self.take_fast(l, n, now);
        if taken == n {
            self.counters.fast_grant(l, n);
            return None;
        }
        self.counters.request(l, taken);
        let mut wakes = WakeList::new();
        let key = {
            let mut inner = lock(&self.inner);
            let key = inner.schedule.push(l, n - taken, taken, now, false);
            // Registered before the serve: whatever resolves it from now on wakes it.
            inner.schedule.poll(key, waker);
            self.serve(&mut inner, now, Some(key), &mut wakes);
            match inner.schedule.entry_mut(key) {
                Some(e) => {
                    // Delayed: it was not granted in full when submitted.
                    e.payload = true;
                    self.counters.delayed(l);
                    Some(key)
                }
                None => {
                    inner.schedule.remove(key);
                    None
                }
            }
        };
        wakes.wake_all();
        key
    }

    /// Serve the queue at `now` on behalf of `me` (a waiting request's key, or nobody):
    /// grant every piece that fits, in order, then settle the flags, the counters and the
    /// timer. Wakers to wake once the lock is released go to `wakes`. With the lock held.
    pub(crate) fn serve(
        &self,
        inner: &mut Inner,
        now: Nanos,
        me: Option<usize>,
        wakes: &mut WakeList,
    ) {
        let budget = &self.budget;
        let rule = budget.rule();
        let counters = &self.counters;
        let next = inner.schedule.serve(
            |piece| budget.update(|word| rule.take(word, now, piece).map(|_| ())),
            |lane, units| counters.piece(lane, units),
            |_, entry, waker| {
                if entry.payload {
                    counters.waited(entry.lane, now.saturating_sub(entry.since));
                }
                wakes.extend(waker);
            },
        );
        self.settle(inner, now);
        inner.next = match next {
            Next::After(d) => Some(now.saturating_add(d)),
            Next::Idle | Next::Change => None,
        };
        let Some(at) = inner.next else {
            inner.timer = None;
            return;
        };
        let waits = |k: usize| inner.schedule.is_waiting(k);
        let me = me.filter(|&k| waits(k));
        match inner.timer {
            // The caller is the timer: it sleeps until `at` now (not until a time it has
            // already reached, which would have it look again at once, and again).
            Some((k, _)) if Some(k) == me => {
                inner.timer = Some((k, at));
                return;
            }
            // Another waiter wakes by then on its own, and serves.
            Some((k, t)) if t <= at && waits(k) => return,
            _ => {}
        }
        // A new timer: the caller if it waits (it sleeps until `at` on its own), else the
        // head, woken to learn it.
        let timer = match me.or_else(|| inner.schedule.head()) {
            Some(k) => k,
            None => return,
        };
        inner.timer = Some((timer, at));
        if Some(timer) != me {
            wakes.extend(inner.schedule.waker(timer));
        }
    }

    /// After the queue changed: the flags, the pending gauges and the tuner's measure.
    fn settle(&self, inner: &mut Inner, now: Nanos) {
        // Relaxed: stored only with the lock held; read by the fast path (see `fast`).
        self.waiting
            .store(inner.schedule.flags(), Ordering::Relaxed);
        for lane in 0..self.lanes {
            self.counters.pending(lane, inner.schedule.waiting_in(lane));
        }
        if let Some(tuner) = &mut inner.tuner {
            tuner.waiting(!inner.schedule.is_empty(), now);
        }
    }

    /// Look at the request of `key` at `now` (serving the queue first), replacing the waker
    /// kept for it by `waker`. Granted in full: the entry is removed.
    pub(crate) fn poll_key(&self, key: usize, now: Nanos, waker: Option<&Waker>) -> Polled {
        self.tune_if_due(now);
        let mut wakes = WakeList::new();
        let polled = {
            let mut inner = lock(&self.inner);
            // The waker first: a resolution by the serve below (or any later) wakes it.
            if inner.schedule.is_waiting(key) {
                inner.schedule.poll(key, waker);
            }
            // Every look serves the queue at its time, whether or not this request waits.
            self.serve(&mut inner, now, Some(key), &mut wakes);
            let granted = inner.schedule.remove(key);
            Polled {
                granted,
                timer: inner.timer.and_then(|(k, t)| (k == key).then_some(t)),
                next: inner.next,
            }
        };
        wakes.wake_all();
        polled
    }

    /// Give up the request of `key` at `now`: `Err(granted)` with the units it had been
    /// granted (passed on to its lane's next requests, or kept), or `Ok(())` if it had been
    /// granted in full already (then it is only removed).
    pub(crate) fn cancel_key(&self, key: usize, now: Nanos) -> Result<(), u32> {
        let mut wakes = WakeList::new();
        let result = {
            let mut inner = lock(&self.inner);
            let lane = inner.schedule.entry(key).map(|e| e.lane);
            let counters = &self.counters;
            let cancelled = inner.schedule.cancel(key, |_, entry, waker| {
                if entry.payload {
                    counters.waited(entry.lane, now.saturating_sub(entry.since));
                }
                wakes.extend(waker);
            });
            match (cancelled, lane) {
                (Some(c), Some(lane)) => {
                    counters.cancelled(lane);
                    if inner.timer.is_some_and(|(k, _)| k == key) {
                        inner.timer = None;
                    }
                    self.serve(&mut inner, now, None, &mut wakes);
                    Err(c.granted)
                }
                _ => Ok(()),
            }
        };
        wakes.wake_all();
        result
    }
}
