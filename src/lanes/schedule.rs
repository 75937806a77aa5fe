//! The scheduling rules (layer 1: pure, no atomics, no lock, testable at explicit times):
//! which waiting request gets the next piece of the budget, and how big it is.
//!
//! [`Schedule`] holds the waiting requests in one FIFO queue per lane and serves them
//! against a grant function (the budget at one explicit time): the top lane first, then the
//! weighted lane with the least *tag*, one piece at a time, each piece granted only when it
//! fits the budget whole. The module of [`Lanes`](super::Lanes) states and proves the
//! bounds this gives.
//!
//! # Tags
//!
//! Each weighted lane `i` has a tag `v_i`, a virtual count of the units it was served
//! divided by its weight, in units of 2^-64: a piece of `p` units adds `⌈p·2^64 / w_i⌉`.
//! `V`, the virtual time, is the tag the last piece to a weighted lane was served at. A lane
//! that starts waiting (its queue was empty) takes the tag `max(v_i, V)`, so time it spent
//! idle is not credit it can spend later (start-time fair queuing, Goyal, Vin and Cheng,
//! SIGCOMM 1996). Ties go to the lower lane number.

use crate::clock::Nanos;
use crate::decision::Denied;
use crate::notify::list::WaitList;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::task::Waker;

/// One waiting request.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) lane: usize,
    /// Units still to grant.
    pub(crate) remaining: u32,
    /// Units granted so far (on the fast path before it queued, in pieces, or passed on).
    pub(crate) granted: u32,
    /// When it was submitted.
    pub(crate) since: Nanos,
    /// The shell's data.
    pub(crate) payload: T,
}

/// One lane's queue.
#[derive(Debug, Clone)]
struct Queue {
    waiting: VecDeque<usize>,
    /// 0 for the top lane.
    weight: u32,
    tag: u128,
}

/// What a [`Schedule::serve`] leaves to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nobody waits.
    Idle,
    /// The next piece fits this many ns after the serve's time.
    After(Nanos),
    /// Nothing fits until the configuration changes (paused, or no wait helps).
    Change,
}

/// What a cancellation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cancelled {
    /// Units the request had been granted.
    pub(crate) granted: u32,
    /// Of those, units no waiting request of its lane could take (they stay charged).
    pub(crate) kept: u32,
}

/// The waiting requests of every lane (see the module).
///
/// The entries live in one waiting layer's list (`WaitList`): a request granted in full is
/// resolved there (its waker handed back to be woken after the lock), and kept until its
/// waiter collects it; each lane's order is its own queue of keys.
#[derive(Debug)]
pub(crate) struct Schedule<T> {
    lanes: Vec<Queue>,
    entries: WaitList<Entry<T>, ()>,
    /// `V`.
    vnow: u128,
    piece: u32,
}

/// The tag a piece of `p` units adds to a lane of weight `w`: `⌈p·2^64 / w⌉`.
#[inline]
pub(crate) fn tag_step(p: u32, w: u32) -> u128 {
    (u128::from(p) << 64).div_ceil(u128::from(w.max(1)))
}

impl<T> Schedule<T> {
    /// An empty schedule: the top lane and one weighted lane per weight, pieces of `piece`.
    pub(crate) fn new(weights: &[u32], piece: u32) -> Self {
        let mut lanes = Vec::with_capacity(weights.len() + 1);
        lanes.push(Queue {
            waiting: VecDeque::new(),
            weight: 0,
            tag: 0,
        });
        lanes.extend(weights.iter().map(|&weight| Queue {
            waiting: VecDeque::new(),
            weight,
            tag: 0,
        }));
        Schedule {
            lanes,
            entries: WaitList::new(),
            vnow: 0,
            piece: piece.max(1),
        }
    }

    /// New weights (as many as before) and piece size; tags and queues are kept.
    pub(crate) fn set(&mut self, weights: &[u32], piece: u32) {
        for (queue, &w) in self.lanes.iter_mut().skip(1).zip(weights) {
            queue.weight = w;
        }
        self.piece = piece.max(1);
    }

    /// Bit `l` set iff lane `l` has a waiting request.
    pub(crate) fn flags(&self) -> u64 {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.waiting.is_empty())
            .fold(0, |f, (l, _)| f | 1 << l)
    }

    /// Whether any request waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.iter().all(|q| q.waiting.is_empty())
    }

    /// Requests waiting in `lane`.
    pub(crate) fn waiting_in(&self, lane: usize) -> usize {
        self.lanes[lane].waiting.len()
    }

    /// The entry of `key`, while it waits.
    pub(crate) fn entry(&self, key: usize) -> Option<&Entry<T>> {
        self.entries.get(key)
    }

    /// The entry of `key`, mutably, while it waits.
    pub(crate) fn entry_mut(&mut self, key: usize) -> Option<&mut Entry<T>> {
        self.entries.get_mut(key)
    }

    /// Whether the request of `key` still waits.
    pub(crate) fn is_waiting(&self, key: usize) -> bool {
        self.entries.is_waiting(key)
    }

    /// A copy of the waker kept for a waiting request (to wake it without resolving it).
    pub(crate) fn waker(&self, key: usize) -> Option<Waker> {
        self.entries.waker(key).cloned()
    }

    /// The waiter looks at its request: `true` if it was granted in full (the entry is then
    /// collected and gone); while it waits, `waker` (if any) is kept to wake it.
    pub(crate) fn poll(&mut self, key: usize, waker: Option<&Waker>) -> bool {
        self.entries.poll(key, waker).is_ready()
    }

    /// Queue a request of `lane` for `remaining` more units, `granted` already given, at the
    /// tail of its lane; returns its key.
    pub(crate) fn push(
        &mut self,
        lane: usize,
        remaining: u32,
        granted: u32,
        since: Nanos,
        payload: T,
    ) -> usize {
        let key = self.entries.push_back(
            Entry {
                lane,
                remaining,
                granted,
                since,
                payload,
            },
            None,
        );
        let vnow = self.vnow;
        let queue = &mut self.lanes[lane];
        if queue.waiting.is_empty() && lane > 0 {
            // Starts waiting: no credit for the idle time (see the module).
            queue.tag = queue.tag.max(vnow);
        }
        queue.waiting.push_back(key);
        key
    }

    /// The lane served next: the top lane if it has a waiting request, else the weighted
    /// lane with the least tag (the lower number on a tie).
    pub(crate) fn pick(&self) -> Option<usize> {
        if !self.lanes[0].waiting.is_empty() {
            return Some(0);
        }
        let mut best: Option<(usize, u128)> = None;
        for (l, q) in self.lanes.iter().enumerate().skip(1) {
            if !q.waiting.is_empty() && best.map_or(true, |(_, t)| q.tag < t) {
                best = Some((l, q.tag));
            }
        }
        best.map(|(l, _)| l)
    }

    /// The request served next, if any.
    pub(crate) fn head(&self) -> Option<usize> {
        self.pick()
            .and_then(|l| self.lanes[l].waiting.front().copied())
    }

    /// Serve: while the next piece (`min(remaining, piece)` of the head of [`Schedule::pick`]'s
    /// lane) is granted by `grant`, count it and go on; `finished` gets every request granted
    /// in full (resolved, kept until its waiter collects it) with its key, its entry and its
    /// waker, and `piece` every piece. `grant` refusing with [`Denied::RateLimited`] ends the
    /// serve with [`Next::After`] its wait; any other refusal with [`Next::Change`].
    pub(crate) fn serve(
        &mut self,
        mut grant: impl FnMut(u32) -> Result<(), Denied>,
        mut piece_granted: impl FnMut(usize, u32),
        mut finished: impl FnMut(usize, Entry<T>, Option<Waker>),
    ) -> Next {
        loop {
            let Some(lane) = self.pick() else {
                return Next::Idle;
            };
            let key = self.lanes[lane].waiting[0];
            let Some(entry) = self.entries.get_mut(key) else {
                unreachable!("a queued key waits");
            };
            let piece = entry.remaining.min(self.piece);
            match grant(piece) {
                Ok(()) => {}
                Err(Denied::RateLimited { retry_after }) => {
                    return Next::After(crate::clock::duration_to_nanos(retry_after).max(1));
                }
                Err(_) => return Next::Change,
            }
            entry.remaining -= piece;
            entry.granted += piece;
            let done = entry.remaining == 0;
            piece_granted(lane, piece);
            if lane > 0 {
                let queue = &mut self.lanes[lane];
                self.vnow = queue.tag;
                queue.tag += tag_step(piece, queue.weight);
            }
            if done {
                self.lanes[lane].waiting.pop_front();
                if let Some((entry, waker)) = self.entries.resolve(key, ()) {
                    finished(key, entry, waker);
                }
            }
        }
    }

    /// Take back a request: if it still waits it leaves its queue and what it was granted
    /// passes to the next requests of its lane in order (completing any it covers, reported
    /// to `finished`); what none of them takes is kept charged. Returns what it had been
    /// granted, or `None` if it was finished already (then it is only collected).
    pub(crate) fn cancel(
        &mut self,
        key: usize,
        mut finished: impl FnMut(usize, Entry<T>, Option<Waker>),
    ) -> Option<Cancelled> {
        let entry = match self.entries.cancel(key) {
            Ok(()) => return None,
            Err(entry) => entry,
        };
        let (lane, granted) = (entry.lane, entry.granted);
        let queue = &mut self.lanes[lane].waiting;
        let at = queue.iter().position(|&k| k == key).unwrap_or(queue.len());
        queue.remove(at);
        let mut left = granted;
        while left > 0 && at < self.lanes[lane].waiting.len() {
            let next = self.lanes[lane].waiting[at];
            let Some(e) = self.entries.get_mut(next) else {
                unreachable!("a queued key waits");
            };
            let take = left.min(e.remaining);
            e.remaining -= take;
            e.granted += take;
            left -= take;
            if e.remaining == 0 {
                self.lanes[lane].waiting.remove(at);
                if let Some((e, waker)) = self.entries.resolve(next, ()) {
                    finished(next, e, waker);
                }
            }
        }
        Some(Cancelled {
            granted,
            kept: left,
        })
    }

    /// Collect a finished request (its waiter saw it granted): whether it was one.
    pub(crate) fn remove(&mut self, key: usize) -> bool {
        !self.entries.is_waiting(key) && self.entries.cancel(key).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget of `room` units that grants a piece iff it fits, else says how long to wait
    /// at one unit per ns.
    fn grant(room: &mut u32) -> impl FnMut(u32) -> Result<(), Denied> + '_ {
        move |p| {
            if p <= *room {
                *room -= p;
                Ok(())
            } else {
                Err(Denied::rate_limited(u64::from(p - *room)))
            }
        }
    }

    fn serve(s: &mut Schedule<()>, room: &mut u32) -> (Vec<usize>, Next) {
        let mut done = Vec::new();
        let next = s.serve(grant(room), |_, _| {}, |k, _, _| done.push(k));
        (done, next)
    }

    #[test]
    fn the_top_lane_goes_first_and_pieces_must_fit_whole() {
        let mut s = Schedule::new(&[1, 1], 4);
        let low = s.push(2, 6, 0, 0, ());
        let top = s.push(0, 3, 0, 0, ());
        let mut room = 5;
        // Top's 3 first; then low's first piece of 4 does not fit the 2 left.
        assert_eq!(serve(&mut s, &mut room), (vec![top], Next::After(2)));
        assert_eq!(s.flags(), 0b100);
        let mut room = 4;
        assert_eq!(serve(&mut s, &mut room), (vec![], Next::After(2)));
        assert_eq!(s.entry(low).map(|e| (e.granted, e.remaining)), Some((4, 2)));
        let mut room = 2;
        assert_eq!(serve(&mut s, &mut room), (vec![low], Next::Idle));
        assert!(s.is_empty() && s.remove(low) && s.remove(top));
    }

    #[test]
    fn weighted_lanes_alternate_by_tag() {
        // Lane 1 weight 3, lane 2 weight 1, pieces of 1: lane 1 gets 3 of every 4.
        let mut s = Schedule::new(&[3, 1], 1);
        let a = s.push(1, 30, 0, 0, ());
        let b = s.push(2, 10, 0, 0, ());
        let mut served = Vec::new();
        let mut room = 8;
        s.serve(grant(&mut room), |l, _| served.push(l), |_, _, _| {});
        assert_eq!(served, [1, 2, 1, 1, 2, 1, 1, 1]);
        let _ = (a, b);
    }

    #[test]
    fn a_lane_that_was_idle_gets_no_credit() {
        let mut s = Schedule::new(&[1, 1], 1);
        s.push(1, 100, 0, 0, ());
        let mut room = 50;
        serve(&mut s, &mut room);
        // Lane 2 arrives after lane 1 was served 50: it starts at V (the tag lane 1's last
        // piece was served at), not at 0, so the two alternate rather than lane 2 taking the
        // next 50.
        s.push(2, 100, 0, 0, ());
        let mut served = Vec::new();
        let mut room = 6;
        s.serve(grant(&mut room), |l, _| served.push(l), |_, _, _| {});
        assert_eq!(served, [2, 1, 2, 1, 2, 1]);
    }

    #[test]
    fn a_cancelled_partial_grant_passes_to_the_next_of_its_lane() {
        let mut s = Schedule::new(&[1], 4);
        let a = s.push(1, 10, 0, 0, ());
        let b = s.push(1, 3, 0, 0, ());
        let c = s.push(1, 5, 0, 0, ());
        let mut room = 8;
        serve(&mut s, &mut room); // a: two pieces of 4
        let mut done = Vec::new();
        let cancelled = s.cancel(a, |k, _, _| done.push(k));
        // 8 granted: 3 complete b, 5 complete c.
        assert_eq!(
            cancelled,
            Some(Cancelled {
                granted: 8,
                kept: 0
            })
        );
        assert_eq!(done, [b, c]);
        assert!(s.is_empty());
        // A lone waiter's grant is kept.
        let d = s.push(1, 10, 0, 0, ());
        let mut room = 4;
        serve(&mut s, &mut room);
        assert_eq!(
            s.cancel(d, |_, _, _| {}),
            Some(Cancelled {
                granted: 4,
                kept: 4
            })
        );
        // A finished entry is only removed.
        assert_eq!(s.cancel(b, |_, _, _| {}), None);
        assert!(s.entry(b).is_none());
    }

    #[test]
    fn a_refusal_other_than_a_wait_waits_for_a_change() {
        let mut s = Schedule::<()>::new(&[], 4);
        s.push(0, 1, 0, 0, ());
        assert_eq!(
            s.serve(|_| Err(Denied::Paused), |_, _| {}, |_, _, _| {}),
            Next::Change
        );
    }
}
