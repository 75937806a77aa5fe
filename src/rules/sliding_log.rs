//! [`SlidingLogRule`]: exact "at most N calls in any interval T", on a ring of admission
//! times.

use super::{window_quota, Rule};
use crate::cell::locked::{self, Held};
use crate::cell::{Attempt, Gone};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use crate::sync::Mutex;
use alloc::boxed::Box;
use alloc::vec;
use core::time::Duration;

/// The state of a [`SlidingLogRule`]: the times of the last `count` admitted permits,
/// oldest first, in a ring of `count` entries (8 bytes each, allocated up front).
///
/// Entries are kept non-decreasing (a reading earlier than the newest entry is recorded at
/// the newest entry's time), which is what makes checking one entry exact.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{Rule, SlidingLogRule};
/// use limitcore::Quota;
///
/// let rule = SlidingLogRule::new(&Quota::per_second(3)?)?;
/// let mut log = rule.fresh();
/// rule.take(&mut log, 5, 2).unwrap();
/// assert_eq!((log.len(), log.newest()), (2, Some(5)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    /// `ring[(head + i) % count]` is the i-th oldest of the `len` entries.
    ring: Box<[Nanos]>,
    head: usize,
    len: usize,
    period: Nanos,
    /// Until when the log is over its limit: the newest entry a charge pushed out of the
    /// ring, plus `period` (0: never). While a reading lies before it, more than `count`
    /// entries are in its window (those pushed out, and the ring's), so nothing is admitted.
    over_until: Nanos,
}

impl Log {
    pub(crate) fn new(count: u32, period: Nanos) -> Log {
        Log {
            ring: vec![0; count as usize].into_boxed_slice(),
            head: 0,
            len: 0,
            period,
            over_until: 0,
        }
    }

    fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// The i-th oldest entry.
    fn get(&self, i: usize) -> Nanos {
        self.ring[(self.head + i) % self.capacity()]
    }

    /// How many entries the ring holds (at most `count`; entries that left the window are
    /// kept until a new admission needs their place).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the ring holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The time of the newest entry, ns.
    pub fn newest(&self) -> Option<Nanos> {
        self.len.checked_sub(1).map(|i| self.get(i))
    }

    /// The entry that must have left the window before `n` more permits fit, if any: with
    /// `len` entries kept and `count` allowed, the `(len + n − count)`-th oldest.
    fn blocking_entry(&self, n: usize) -> Option<Nanos> {
        (self.len + n)
            .checked_sub(self.capacity() + 1)
            .map(|i| self.get(i))
    }

    /// The earliest time at or after `t` at which `n` more entries fit (the blocking entry's
    /// time plus `period`), or `None` past the clock's range. Requires `t ≥` the newest entry.
    #[cfg(feature = "throttler")]
    pub(crate) fn earliest(&self, t: Nanos, n: u32) -> Option<Nanos> {
        self.free(n as usize).map(|free| free.max(t))
    }

    /// When `n` more entries fit: after the blocking entry has left the window and the log
    /// is no longer over its limit (0 if both already hold); `None` past the clock's range.
    #[inline]
    fn free(&self, n: usize) -> Option<Nanos> {
        match self.blocking_entry(n) {
            Some(e) => e
                .checked_add(self.period)
                .map(|free| free.max(self.over_until)),
            None => Some(self.over_until),
        }
    }

    /// Append `n` entries at `t` (requires `t ≥` the newest entry and room by [`Log::earliest`]).
    pub(crate) fn record(&mut self, t: Nanos, n: u32) {
        let n = n as usize;
        let overflow = (self.len + n).saturating_sub(self.capacity());
        self.head = (self.head + overflow) % self.capacity();
        self.len -= overflow;
        for i in 0..n {
            let slot = (self.head + self.len + i) % self.capacity();
            self.ring[slot] = t;
        }
        self.len += n;
    }

    /// Decide `1 ≤ n ≤ count` permits at `now`, recording them on admission.
    ///
    /// Entries are kept non-decreasing: a reading earlier than the newest entry is recorded
    /// at the newest entry's time (stricter for the caller, and it keeps the log sorted,
    /// which is what makes checking one entry exact). The request is admitted iff the
    /// blocking entry `e` satisfies `e + period ≤ t` (`t` the recorded time), i.e. at most
    /// `count` entries lie in `(t − period, t]`, the half-open window of length `period`
    /// ending at `t`.
    pub(crate) fn take(&mut self, now: Nanos, n: u32) -> Result<Nanos, Denied> {
        let t = self.newest().map_or(now, |newest| newest.max(now));
        match self.free(n as usize) {
            Some(free) if free <= t => {}
            // `free > t ≥ now`: exact wait, inclusive at `free`.
            Some(free) => return Err(Denied::rate_limited(free - now)),
            None => return Err(Denied::NEVER),
        }
        self.record(t, n);
        Ok(t)
    }

    /// Record `n` entries at `now` whatever the log holds (a charge): the oldest entries
    /// leave the ring to make room (all of them, and all but `count` of the new ones, for
    /// `n ≥ count`), and the newest that left sets [`Log::over_until`].
    pub(crate) fn charge(&mut self, now: Nanos, n: u32) {
        if n == 0 {
            return;
        }
        let t = self.newest().map_or(now, |newest| newest.max(now));
        let n = n as usize;
        let overflow = (self.len + n).saturating_sub(self.capacity());
        if overflow > 0 {
            // The newest entry to leave: an old one, or (past the ring) one of the new ones.
            let left = if overflow <= self.len {
                self.get(overflow - 1)
            } else {
                t
            };
            self.over_until = self.over_until.max(left.saturating_add(self.period));
        }
        // At most `count` of them fit; `record` drops the oldest entries for them.
        self.record(t, n.min(self.capacity()) as u32);
    }

    /// The answer to a request for no permits at `now`: refused while the log is over its
    /// limit (entries a charge pushed out are still in the window).
    pub(crate) fn debt(&self, now: Nanos) -> Result<(), Denied> {
        let t = self.newest().map_or(now, |newest| newest.max(now));
        if self.over_until > t {
            Err(Denied::rate_limited(self.over_until - now))
        } else {
            Ok(())
        }
    }

    /// Remove up to `n` of the newest entries still in the window at `at` (a credit): none
    /// while the log is over its limit (the entries pushed out of the ring are unknown, so
    /// nothing is given back from them: never more permissive). Returns how many left.
    pub(crate) fn credit(&mut self, n: u32, at: Nanos) -> usize {
        let t = self.newest().map_or(at, |newest| newest.max(at));
        if self.over_until > t {
            return 0;
        }
        let inside = (0..self.len)
            .rev()
            .take_while(|&i| u128::from(self.get(i)) + u128::from(self.period) > u128::from(t))
            .count();
        let gone = inside.min(n as usize);
        self.len -= gone;
        gone
    }

    /// What [`Log::take`] would answer, recording nothing.
    pub(crate) fn check(&self, now: Nanos, n: u32) -> Result<(), Denied> {
        let t = self.newest().map_or(now, |newest| newest.max(now));
        match self.free(n as usize) {
            Some(free) if free <= t => Ok(()),
            Some(free) => Err(Denied::rate_limited(free - now)),
            None => Err(Denied::NEVER),
        }
    }

    /// Remove up to `n` entries recorded at `t` (a refund); how many were removed. Entries
    /// at `t` form one run of the sorted ring; the entries after it move back.
    pub(crate) fn remove(&mut self, t: Nanos, n: u32) -> usize {
        let Some(end) = (0..self.len)
            .rev()
            .find(|&i| self.get(i) == t)
            .map(|i| i + 1)
        else {
            return 0;
        };
        let run = (0..end).rev().take_while(|&i| self.get(i) == t).count();
        let gone = run.min(n as usize);
        for i in end..self.len {
            let v = self.get(i);
            let slot = (self.head + i - gone) % self.capacity();
            self.ring[slot] = v;
        }
        self.len -= gone;
        gone
    }

    pub(crate) fn snapshot(&self, now: Nanos) -> Snapshot {
        let t = self.newest().map_or(now, |newest| newest.max(now));
        // Entries still inside (t − period, t]. The log is sorted, so those that left form a
        // prefix: binary-search its end.
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if u128::from(self.get(mid)) + u128::from(self.period) > u128::from(t) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let inside = self.len - lo;
        // Full when the newest entry leaves; past the clock's range, never.
        let full_after = match self.newest() {
            Some(newest) if inside > 0 => newest
                .checked_add(self.period)
                .map_or(Duration::MAX, |free| {
                    Duration::from_nanos(free.saturating_sub(now))
                }),
            _ => Duration::ZERO,
        };
        // Over its limit (a charge's debt): nothing left until the entries it pushed out of
        // the ring have left the window.
        let remaining = if self.over_until > t {
            0
        } else {
            (self.capacity() - inside) as u32
        };
        Snapshot {
            remaining,
            full_after,
        }
    }
}

/// The exact sliding log: at most `count` permits in **any** half-open window of length
/// `period`. The rule of [`SlidingLog`](crate::SlidingLog).
///
/// Its state is a [`Log`] of the last `count` admission times (`8·count` bytes); a request
/// for `n` is admitted iff the `(count − n + 1)`-th newest entry is at least `period` old,
/// i.e. at most `count` entries lie in `(t − period, t]`, the window of length `period`
/// ending at the recorded time `t`. One entry is checked per decision, and `n` are written
/// on admission. A reading earlier than the newest entry is recorded at the newest entry's
/// time (stricter for the caller, and it keeps the log sorted). A window has no burst of
/// its own: its capacity is `count`, and a quota whose burst differs is refused
/// ([`QuotaError::BurstNotSupported`]).
///
/// `retry_after` is exact and inclusive (the blocking entry's time plus `period`, minus now).
///
/// # Refund
///
/// The receipt's mark is the time the entries were recorded at; a refund removes up to `n`
/// entries with that time (any of them: entries with one time are indistinguishable). The
/// log then holds exactly the other admissions, so it still admits at most `count` in any
/// window; entries already dropped from the ring had left every window a later decision
/// can see.
///
/// # Charges
///
/// A charge ([`Rule::charge`]) records its entries whatever the window holds, so the log
/// can be over its limit: exact, with no shortfall. The ring keeps the newest `count`
/// entries (all a decision for one permit or more needs), and the newest entry a charge
/// pushed out of it, plus `period`, is when the log is back within its limit: until then
/// every request is refused, one for no permits included ([`Rule::debt`]), and a credit
/// gives nothing back (the entries pushed out are unknown; never more permissive).
///
/// # Examples
///
/// ```
/// use limitcore::rules::{Rule, SlidingLogRule};
/// use limitcore::Quota;
///
/// let rule = SlidingLogRule::new(&"2/s".parse()?)?;
/// let mut log = rule.fresh();
/// rule.take(&mut log, 0, 1).unwrap();
/// rule.take(&mut log, 900_000_000, 1).unwrap();
/// rule.take(&mut log, 1_100_000_000, 1).unwrap();   // the first left the window
/// // The one at 0.9 s leaves at 1.9 s.
/// let wait = rule.take(&mut log, 1_100_000_000, 1).unwrap_err().retry_after().unwrap();
/// assert_eq!(wait.as_millis(), 800);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLogRule {
    count: u32,
    period: Nanos,
    quota: Quota,
}

impl SlidingLogRule {
    /// The largest count the rule accepts: 2^24 (16 777 216) entries, 128 MiB of log.
    pub const MAX_ENTRIES: u32 = 1 << 24;
}

impl Rule for SlidingLogRule {
    type State = Log;

    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] if the count exceeds [`SlidingLogRule::MAX_ENTRIES`];
    /// [`QuotaError::BurstNotSupported`] if the burst is not the count.
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        window_quota(quota, "sliding-log")?;
        if quota.count() > Self::MAX_ENTRIES {
            return Err(QuotaError::CountTooLarge {
                count: quota.count(),
                max: Self::MAX_ENTRIES,
            });
        }
        Ok(SlidingLogRule {
            count: quota.count(),
            period: quota.period_ns(),
            quota: *quota,
        })
    }

    #[inline]
    fn quota(&self) -> Quota {
        self.quota
    }

    /// An empty log; allocates `8·count` bytes.
    fn fresh(&self) -> Log {
        Log::new(self.count, self.period)
    }

    #[inline]
    fn take(&self, log: &mut Log, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        log.take(now, n).map(|t| Receipt::new(n, t))
    }

    #[inline]
    fn check(&self, log: &Log, now: Nanos, n: u32) -> Result<(), Denied> {
        log.check(now, n)
    }

    fn snapshot(&self, log: &Log, now: Nanos) -> Snapshot {
        log.snapshot(now)
    }

    fn refund(&self, log: &mut Log, receipt: &Receipt, _at: Nanos) -> bool {
        receipt.n() > 0 && log.remove(receipt.mark(), receipt.n()) > 0
    }

    fn fresh_since(&self, log: &Log, since: Nanos, _now: Nanos) -> bool {
        log.newest().map_or(true, |t| {
            t.checked_add(self.period).is_some_and(|free| free <= since)
        })
    }

    /// `n` entries at `max(newest, now)`, however many the window holds: exact, with no
    /// shortfall (the ring keeps the newest `count`; the newest of those a charge pushed out
    /// keeps the log over its limit while it is in the window).
    fn charge(&self, log: &mut Log, now: Nanos, n: u32) -> u32 {
        log.charge(now, n);
        0
    }

    /// In debt while more than `count` entries are in the window (some pushed out by a
    /// charge).
    fn debt(&self, log: &Log, now: Nanos) -> Result<(), Denied> {
        log.debt(now)
    }

    /// Up to `n` of the newest entries still in the window leave the log; none while it is
    /// over its limit.
    fn credit(&self, log: &mut Log, n: u32, at: Nanos) -> bool {
        log.credit(n, at) > 0
    }
}

impl crate::cell::sealed::Cells for Log {
    type Cell = Mutex<Log>;
    type Slot = Mutex<Held<Log>>;

    fn cell(self) -> Mutex<Log> {
        Mutex::new(self)
    }

    #[inline(always)]
    fn update<T, E>(cell: &Mutex<Log>, f: impl Fn(&mut Log) -> Result<T, E>) -> Result<T, E> {
        locked::update(cell, f)
    }

    #[inline]
    fn read<T>(cell: &Mutex<Log>, f: impl FnOnce(&Log) -> T) -> T {
        locked::read(cell, f)
    }

    fn slot(self) -> Mutex<Held<Log>> {
        Mutex::new(Held::Live(self))
    }

    fn redirect() -> Mutex<Held<Log>> {
        Mutex::new(Held::Redirect)
    }

    fn update_slot<T, E>(
        slot: &Mutex<Held<Log>>,
        f: impl Fn(&mut Log) -> Result<T, E>,
    ) -> Result<T, Attempt<E>> {
        locked::update_slot(slot, f)
    }

    fn read_slot<T>(slot: &Mutex<Held<Log>>, f: impl FnOnce(&Log) -> T) -> Result<T, Gone> {
        locked::read_slot(slot, f)
    }

    fn retire_if(slot: &Mutex<Held<Log>>, idle: impl FnOnce(&Log) -> bool) -> bool {
        locked::retire_if(slot, idle)
    }

    fn is_retired(slot: &Mutex<Held<Log>>) -> bool {
        locked::is_retired(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_by_hand() {
        let mut log = Log::new(3, 100);
        assert!(log.take(0, 2).is_ok());
        assert!(log.take(10, 1).is_ok());
        assert_eq!(log.take(50, 1), Err(Denied::rate_limited(50)));
        assert_eq!(log.take(99, 1), Err(Denied::rate_limited(1)));
        assert!(log.take(100, 2).is_ok(), "both entries at 0 left at 100");
        assert_eq!(log.take(100, 1), Err(Denied::rate_limited(10)));
        // A reading behind the newest entry is recorded at the newest time.
        assert_eq!(log.take(5, 1), Err(Denied::rate_limited(105)));
        assert_eq!(log.snapshot(110).remaining, 1);
    }

    #[test]
    fn refund_removes_the_receipts_entries() {
        let mut log = Log::new(3, 100);
        log.take(0, 1).unwrap();
        assert_eq!(log.take(10, 2), Ok(10));
        assert_eq!(log.remove(10, 1), 1);
        assert_eq!((log.len(), log.newest()), (2, Some(10)));
        assert!(
            log.take(20, 1).is_ok(),
            "the removed entry's place is free again"
        );
        assert_eq!(log.remove(10, 5), 1);
        assert_eq!(log.remove(99, 1), 0);
        assert_eq!(log.len(), 2);
        assert_eq!(log.snapshot(20).remaining, 1);
    }
}
