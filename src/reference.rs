//! Plain reference models: single-threaded, obviously correct, in `u128`/`i128` arithmetic
//! with no packing and no atomics.
//!
//! They exist to be compared against: the crate's property tests, its fuzz targets and the
//! replay tool run the lock-free limiters and these models on the same input and require
//! identical decisions. Each is written in a *different* formulation from the limiter it
//! checks, so that a shared mistake is unlikely. They are public so that users can check
//! their own integrations the same way.

use crate::clock::Nanos;
use crate::{Denied, Quota, Snapshot};
use core::time::Duration;

/// GCRA in the "continuous-state leaky bucket" form of ATM Forum TM 4.0 (Annex C): a bucket
/// content `x` (ns of work queued) that drains at 1 ns per ns, and the last conformance
/// time `lct`. Equivalent to [`Gcra`](crate::Gcra)'s virtual scheduling with
/// `TAT = lct + x`.
///
/// # Examples
///
/// ```
/// use limitcore::reference::GcraModel;
/// use limitcore::Quota;
/// let mut m = GcraModel::new(Quota::per_second(1)?);
/// assert!(m.acquire(1, 0).is_ok());
/// assert!(m.acquire(1, 999_999_999).is_err());
/// assert!(m.acquire(1, 1_000_000_000).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GcraModel {
    /// Bucket content at `lct`, ns.
    x: i128,
    /// Last conformance time, ns.
    lct: i128,
    t: i128,
    burst: u32,
}

impl GcraModel {
    /// A full (empty-bucket) model of `quota`.
    pub fn new(quota: Quota) -> Self {
        GcraModel {
            x: 0,
            lct: 0,
            t: i128::from(quota.emission_interval_ns()),
            burst: quota.burst(),
        }
    }

    /// Bucket content as seen at `now`: drained since `lct`, never below 0; a `now` before
    /// `lct` adds the difference (the bucket cannot un-drain, so the request is early).
    fn content_at(&self, now: i128) -> i128 {
        (self.x - (now - self.lct)).max(0)
    }

    /// Decide `n` permits at `now` (nanoseconds); on admission the model is updated.
    ///
    /// # Errors
    ///
    /// The [`Denied`] the crate's limiters must return for the same history.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if n > self.burst {
            return Err(Denied::ExceedsCapacity {
                capacity: self.burst,
            });
        }
        if n == 0 {
            return Ok(());
        }
        let now_i = i128::from(now);
        let x = self.content_at(now_i);
        let limit = i128::from(self.burst) * self.t;
        let after = x + i128::from(n) * self.t;
        // The TAT this request would leave, now or after waiting, must fit the u64 clock.
        if now_i + after > i128::from(u64::MAX) {
            return Err(Denied::RateLimited {
                retry_after: Duration::MAX,
            });
        }
        if after > limit {
            return Err(Denied::RateLimited {
                retry_after: Duration::from_nanos((after - limit) as u64),
            });
        }
        // Never move the last conformance time backwards: keep TAT = lct + x monotone.
        let tat = (self.lct + self.x).max(now_i) + i128::from(n) * self.t;
        self.lct = self.lct.max(now_i);
        self.x = tat - self.lct;
        Ok(())
    }

    /// Permits available and time until full at `now`.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let now = i128::from(now);
        let backlog = (self.lct + self.x - now).max(0);
        let free = (i128::from(self.burst) * self.t - backlog).max(0);
        Snapshot {
            remaining: (free / self.t) as u32,
            full_after: Duration::from_nanos(backlog as u64),
        }
    }
}

/// A token bucket in exact rational arithmetic: `credit` is tokens × T (so fractions of a
/// token are whole nanoseconds), refilled by elapsed time and capped at `burst × T`.
/// A reading behind the last one spends the lag from the credit, as GCRA does.
///
/// # Examples
///
/// ```
/// use limitcore::reference::TokenBucketModel;
/// use limitcore::Quota;
/// let mut m = TokenBucketModel::new(Quota::per_second(2)?);
/// assert!(m.acquire(2, 0).is_ok());
/// assert_eq!(m.acquire(1, 0).unwrap_err().retry_after().unwrap().as_millis(), 500);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TokenBucketModel {
    /// Tokens × T at time `at`; may be read negative for a reading behind `at`.
    credit: i128,
    at: i128,
    t: i128,
    burst: u32,
}

impl TokenBucketModel {
    /// A full bucket for `quota`.
    pub fn new(quota: Quota) -> Self {
        let t = i128::from(quota.emission_interval_ns());
        TokenBucketModel {
            credit: i128::from(quota.burst()) * t,
            at: i128::MIN / 2,
            t,
            burst: quota.burst(),
        }
    }

    fn credit_at(&self, now: i128) -> i128 {
        let cap = i128::from(self.burst) * self.t;
        (self.credit + (now - self.at)).min(cap)
    }

    /// Decide `n` permits at `now` (nanoseconds); on admission the model is updated.
    ///
    /// # Errors
    ///
    /// The [`Denied`] the crate's limiters must return for the same history.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if n > self.burst {
            return Err(Denied::ExceedsCapacity {
                capacity: self.burst,
            });
        }
        if n == 0 {
            return Ok(());
        }
        let now_i = i128::from(now);
        let credit = self.credit_at(now_i);
        let cost = i128::from(n) * self.t;
        let cap = i128::from(self.burst) * self.t;
        // The time this request would leave the bucket full again, now or after waiting,
        // must fit the u64 clock.
        if now_i + (cap - credit + cost) > i128::from(u64::MAX) {
            return Err(Denied::RateLimited {
                retry_after: Duration::MAX,
            });
        }
        if credit < cost {
            return Err(Denied::RateLimited {
                retry_after: Duration::from_nanos((cost - credit) as u64),
            });
        }
        // Never move `at` backwards: re-express the new credit at the later of the two times.
        if now_i >= self.at {
            self.credit = credit - cost;
            self.at = now_i;
        } else {
            self.credit -= cost;
        }
        Ok(())
    }

    /// Permits available and time until full at `now`.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let cap = i128::from(self.burst) * self.t;
        let credit = self.credit_at(i128::from(now));
        Snapshot {
            remaining: (credit.max(0) / self.t) as u32,
            full_after: Duration::from_nanos((cap - credit) as u64),
        }
    }
}
