//! [`SlidingLog`]: exact "at most N calls in any interval T".

use crate::clock::{Clock, Nanos};
use crate::limiter::{precheck, Denied, RateLimiter, Snapshot};
use crate::sync::Mutex;
use crate::{DefaultClock, Quota, QuotaError};
use alloc::boxed::Box;
use alloc::vec;
use core::time::Duration;

/// The largest count a [`SlidingLog`] accepts: 2^24 (16 777 216) entries, 128 MiB of log.
pub const MAX_LOG_ENTRIES: u32 = 1 << 24;

/// The timestamps of the last `count` admitted permits, oldest first, in a ring.
#[derive(Debug)]
pub(crate) struct Log {
    /// `ring[(head + i) % count]` is the i-th oldest of the `len` entries.
    ring: Box<[Nanos]>,
    head: usize,
    len: usize,
    period: Nanos,
}

impl Log {
    pub(crate) fn new(count: u32, period: Nanos) -> Log {
        Log {
            ring: vec![0; count as usize].into_boxed_slice(),
            head: 0,
            len: 0,
            period,
        }
    }

    fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// The i-th oldest entry.
    fn get(&self, i: usize) -> Nanos {
        self.ring[(self.head + i) % self.capacity()]
    }

    fn newest(&self) -> Option<Nanos> {
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
    pub(crate) fn earliest(&self, t: Nanos, n: u32) -> Option<Nanos> {
        match self.blocking_entry(n as usize) {
            Some(e) => e.checked_add(self.period).map(|free| free.max(t)),
            None => Some(t),
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
    pub(crate) fn take(&mut self, now: Nanos, n: u32) -> Result<(), Denied> {
        let n = n as usize;
        let t = self.newest().map_or(now, |newest| newest.max(now));
        if let Some(e) = self.blocking_entry(n) {
            match e.checked_add(self.period) {
                Some(free) if free <= t => {}
                // `free > t ≥ now`: exact wait, inclusive at `free`.
                Some(free) => return Err(Denied::rate_limited(free - now)),
                None => return Err(Denied::NEVER),
            }
        }
        self.record(t, n as u32);
        Ok(())
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
        Snapshot {
            remaining: (self.capacity() - inside) as u32,
            full_after,
        }
    }
}

/// The exact sliding log: at most `count` permits in **any** half-open window of length
/// `period`, under any interleaving of threads.
///
/// It records the time of each of the last `count` admitted permits in a ring (8 bytes
/// each, so memory is `8·count` bytes, allocated up front); a request for `n` is admitted
/// iff the `(count − n + 1)`-th newest entry is at least `period` old. One entry is checked
/// per decision, and `n` are written on admission.
///
/// # When to use GCRA instead
///
/// [`Gcra`](crate::Gcra) needs 8 bytes whatever the count and never takes a lock, but with
/// burst `b` it admits up to `2·b − 1` permits in one window of length `period`. Use the
/// sliding log when the contract you must keep is literally "at most N in any interval T"
/// (an upstream API's documented limit, say), and GCRA otherwise.
///
/// # Concurrency
///
/// This is the crate's one limiter with a lock: an exact log is several words that must
/// change together, so the ring sits behind a mutex (`std::sync::Mutex`; loom's under
/// `--cfg loom`). The critical section is a few comparisons and `n` stores. A reading
/// earlier than the newest entry is recorded at the newest entry's time (stricter), so the
/// log stays sorted.
///
/// The quota's burst is not used: the log's capacity is `count`.
///
/// # Contract
///
/// `retry_after` is exact and inclusive (the blocking entry's time plus `period`, minus
/// now). `n == 0` succeeds without change; `n > count` is [`Denied::ExceedsCapacity`];
/// denials record nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, RateLimiter, SlidingLog};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let log = SlidingLog::with_clock("2/s".parse()?, clock.clone())?;
/// log.try_acquire().unwrap();                       // t = 0
/// clock.advance(Duration::from_millis(900));
/// log.try_acquire().unwrap();                       // t = 0.9 s
/// clock.advance(Duration::from_millis(200));        // t = 1.1 s: the first left the window
/// log.try_acquire().unwrap();
/// // The one at 0.9 s leaves at 1.9 s.
/// assert_eq!(log.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(800)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct SlidingLog<C = DefaultClock> {
    log: Mutex<Log>,
    count: u32,
    quota: Quota,
    clock: C,
}

impl SlidingLog<DefaultClock> {
    /// An empty log for `quota` on the default clock.
    ///
    /// # Errors
    ///
    /// As [`SlidingLog::with_clock`].
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        SlidingLog::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> SlidingLog<C> {
    /// An empty log for `quota` reading time from `clock`; allocates `8·count` bytes.
    ///
    /// # Errors
    ///
    /// [`QuotaError::CountTooLarge`] if the count exceeds [`MAX_LOG_ENTRIES`].
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        if quota.count() > MAX_LOG_ENTRIES {
            return Err(QuotaError::CountTooLarge {
                count: quota.count(),
                max: MAX_LOG_ENTRIES,
            });
        }
        Ok(SlidingLog {
            log: Mutex::new(Log::new(quota.count(), quota.period_ns())),
            count: quota.count(),
            quota,
            clock,
        })
    }

    /// The clock this log reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    fn with_log<T>(&self, f: impl FnOnce(&mut Log) -> T) -> T {
        // A panic while holding the lock cannot leave the ring inconsistent for our
        // purposes (an entry is only ever a past admission time), so use it regardless.
        let mut guard = self
            .log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

impl<C: Clock> RateLimiter for SlidingLog<C> {
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.count)? {
            return Ok(());
        }
        self.with_log(|log| log.take(now, n))
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.with_log(|log| log.snapshot(now))
    }

    fn quota(&self) -> Quota {
        self.quota
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
}
