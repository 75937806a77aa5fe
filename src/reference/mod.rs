//! Plain reference models: single-threaded, obviously correct, in `u128`/`i128` arithmetic
//! with no packing and no atomics.
//!
//! They exist to be compared against: the crate's property tests, its fuzz targets and the
//! replay tool run the lock-free limiters and these models on the same input and require
//! identical decisions. Each is written in a *different* formulation from the limiter it
//! checks, so that a shared mistake is unlikely. They are public so that users can check
//! their own integrations the same way.

#[cfg(feature = "budget")]
mod budget;
#[cfg(feature = "lanes")]
mod lanes;

#[cfg(feature = "budget")]
#[cfg_attr(docsrs, doc(cfg(feature = "budget")))]
pub use budget::BudgetModel;
#[cfg(feature = "lanes")]
#[cfg_attr(docsrs, doc(cfg(feature = "lanes")))]
pub use lanes::LanesModel;

use crate::algorithm::Algorithm;
use crate::clock::Nanos;
use crate::decision::{Denied, Snapshot};
use crate::quota::Quota;
use core::fmt;
use core::time::Duration;

/// A reference model: a plain, single-threaded decision procedure that a limiter of the
/// crate must agree with exactly (every decision, every `retry_after`, every state).
///
/// # Examples
///
/// A differential check written once for every algorithm:
///
/// ```
/// use limitcore::reference::{self, Model};
/// use limitcore::{Algorithm, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
///
/// let quota: Quota = "5/s".parse()?;
/// for algorithm in Algorithm::ALL {
///     let limiter = algorithm.limiter(quota, ManualClock::new())?;
///     let mut model = reference::model(algorithm, quota);
///     for (i, n) in [2, 3, 1, 4, 0, 5].into_iter().enumerate() {
///         let now = i as u64 * 150_000_000;
///         assert_eq!(limiter.try_acquire_n_at(n, now), model.acquire(n, now), "{algorithm}");
///         assert_eq!(limiter.snapshot_at(now), model.snapshot(now), "{algorithm}");
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Model: fmt::Debug + Send {
    /// Decide `n` permits at `now` (ns); on admission the model is updated.
    ///
    /// # Errors
    ///
    /// The [`Denied`] the crate's limiters must return for the same history.
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied>;

    /// The state at `now`: permits available, and time until full.
    fn snapshot(&self, now: Nanos) -> Snapshot;
}

/// The reference model of `algorithm` for `quota`: [`GcraModel`], [`TokenBucketModel`],
/// [`FixedWindowModel`], [`SlidingWindowModel`] (the formula on exact counts, as
/// `Keyed<_, SlidingWindowRule>` and a `SlidingWindow` with batch 0 run it),
/// [`SlidingLogModel`], [`LeakyBucketModel`]; as an [`AnyModel`], which can be copied (to
/// try a decision on a copy, as an all-or-nothing check of several models does).
pub fn model(algorithm: Algorithm, quota: Quota) -> AnyModel {
    match algorithm {
        Algorithm::Gcra => AnyModel::Gcra(GcraModel::new(quota)),
        Algorithm::TokenBucket => AnyModel::TokenBucket(TokenBucketModel::new(quota)),
        Algorithm::FixedWindow => AnyModel::FixedWindow(FixedWindowModel::new(quota)),
        Algorithm::SlidingWindow => AnyModel::SlidingWindow(SlidingWindowModel::new(quota)),
        Algorithm::SlidingLog => AnyModel::SlidingLog(SlidingLogModel::new(quota)),
        Algorithm::LeakyBucket => AnyModel::LeakyBucket(LeakyBucketModel::new(quota)),
    }
}

/// The model of any algorithm ([`model`]): one [`Model`] type that can be cloned and
/// stored, whatever the algorithm.
///
/// # Examples
///
/// ```
/// use limitcore::reference::{self, Model};
/// use limitcore::{Algorithm, Quota};
///
/// let mut m = reference::model(Algorithm::Gcra, Quota::per_second(1)?);
/// let mut copy = m.clone();
/// assert!(copy.acquire(1, 0).is_ok());     // tried on the copy...
/// assert_eq!(m.snapshot(0).remaining, 1); // ...the original is untouched
/// assert!(m.acquire(1, 0).is_ok());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyModel {
    /// [`GcraModel`].
    Gcra(GcraModel),
    /// [`TokenBucketModel`].
    TokenBucket(TokenBucketModel),
    /// [`FixedWindowModel`].
    FixedWindow(FixedWindowModel),
    /// [`SlidingWindowModel`].
    SlidingWindow(SlidingWindowModel),
    /// [`SlidingLogModel`].
    SlidingLog(SlidingLogModel),
    /// [`LeakyBucketModel`].
    LeakyBucket(LeakyBucketModel),
}

impl AnyModel {
    /// The model, as a `Model` trait object.
    fn inner(&self) -> &dyn Model {
        match self {
            AnyModel::Gcra(m) => m,
            AnyModel::TokenBucket(m) => m,
            AnyModel::FixedWindow(m) => m,
            AnyModel::SlidingWindow(m) => m,
            AnyModel::SlidingLog(m) => m,
            AnyModel::LeakyBucket(m) => m,
        }
    }

    /// The model, as a mutable `Model` trait object.
    fn inner_mut(&mut self) -> &mut dyn Model {
        match self {
            AnyModel::Gcra(m) => m,
            AnyModel::TokenBucket(m) => m,
            AnyModel::FixedWindow(m) => m,
            AnyModel::SlidingWindow(m) => m,
            AnyModel::SlidingLog(m) => m,
            AnyModel::LeakyBucket(m) => m,
        }
    }
}

impl Model for AnyModel {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.inner_mut().acquire(n, now)
    }

    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.inner().snapshot(now)
    }
}

/// A time as a wait from `now`: `Duration::MAX` past the clock's range, 0 if passed.
fn until(at: u128, now: Nanos) -> Duration {
    u64::try_from(at).map_or(Duration::MAX, |at| {
        Duration::from_nanos(at.saturating_sub(now))
    })
}

/// [`Model`] for models with inherent `acquire` and `snapshot`.
macro_rules! model {
    ($($m:ty),*) => {$(
        impl Model for $m {
            fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
                <$m>::acquire(self, n, now)
            }
            fn snapshot(&self, now: Nanos) -> Snapshot {
                <$m>::snapshot(self, now)
            }
        }
    )*};
}
model!(
    GcraModel,
    TokenBucketModel,
    FixedWindowModel,
    SlidingLogModel,
    SlidingWindowModel,
    LeakyBucketModel
);

/// The two answers that do not depend on the state: `n > capacity` never conforms (and
/// consumes nothing), `n == 0` always does (and changes nothing): the window models', which
/// no charge puts in debt.
fn by_size(n: u32, capacity: u32) -> Option<Result<(), Denied>> {
    if n == 0 {
        Some(Ok(()))
    } else {
        too_large(n, capacity)
    }
}

/// `n > capacity` never conforms (and consumes nothing). The GCRA family's models answer
/// `n == 0` by their formula: admitted unless the state lies past its limit at `now` (a
/// reading behind the state's own time can see it so: stricter, as the limiters).
fn too_large(n: u32, capacity: u32) -> Option<Result<(), Denied>> {
    (n > capacity).then_some(Err(Denied::ExceedsCapacity { capacity }))
}

/// The denial that waits from `now` until the absolute time `at` (ns, may lie past the
/// clock's range: then it can never conform, [`Denied::BeyondHorizon`]).
fn wait_until(at: u128, now: Nanos) -> Denied {
    u64::try_from(at).map_or(Denied::BeyondHorizon, |at| Denied::RateLimited {
        retry_after: Duration::from_nanos(at - now),
    })
}

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
        if let Some(answer) = too_large(n, self.burst) {
            return answer;
        }
        let now_i = i128::from(now);
        let x = self.content_at(now_i);
        let limit = i128::from(self.burst) * self.t;
        if n == 0 {
            // No permits: refused only while the content lies past the limit; nothing moves.
            return match x - limit {
                over if over > 0 => Err(Denied::RateLimited {
                    retry_after: Duration::from_nanos(over as u64),
                }),
                _ => Ok(()),
            };
        }
        let after = x + i128::from(n) * self.t;
        // The TAT this request would leave, now or after waiting, must fit the u64 clock.
        if now_i + after > i128::from(u64::MAX) {
            return Err(Denied::BeyondHorizon);
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
        if let Some(answer) = too_large(n, self.burst) {
            return answer;
        }
        let now_i = i128::from(now);
        let credit = self.credit_at(now_i);
        if n == 0 {
            // No permits: refused only while the credit lies below empty; nothing moves.
            return if credit < 0 {
                Err(Denied::RateLimited {
                    retry_after: Duration::from_nanos((-credit) as u64),
                })
            } else {
                Ok(())
            };
        }
        let cost = i128::from(n) * self.t;
        let cap = i128::from(self.burst) * self.t;
        // The time this request would leave the bucket full again, now or after waiting,
        // must fit the u64 clock.
        if now_i + (cap - credit + cost) > i128::from(u64::MAX) {
            return Err(Denied::BeyondHorizon);
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

/// A fixed window as a map from window number to permits used. A reading from a window
/// before the latest one seen counts against the latest one (the limiter's rule for stale
/// readings).
///
/// # Examples
///
/// ```
/// use limitcore::reference::FixedWindowModel;
/// use limitcore::Quota;
/// let mut m = FixedWindowModel::new(Quota::per_second(1)?);
/// assert!(m.acquire(1, 0).is_ok());
/// assert_eq!(m.acquire(1, 400_000_000).unwrap_err().retry_after().unwrap().as_millis(), 600);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FixedWindowModel {
    used: alloc::collections::BTreeMap<u64, u64>,
    period: u64,
    count: u32,
}

impl FixedWindowModel {
    /// A fresh model of `quota` (capacity `count` per window).
    pub fn new(quota: Quota) -> Self {
        FixedWindowModel {
            used: alloc::collections::BTreeMap::new(),
            period: quota.period_ns(),
            count: quota.count(),
        }
    }

    /// The window a request at `now` is counted in.
    fn window(&self, now: Nanos) -> u64 {
        let k = now / self.period;
        self.used
            .keys()
            .next_back()
            .map_or(k, |&latest| latest.max(k))
    }

    /// Decide `n` permits at `now`.
    ///
    /// # Errors
    ///
    /// As the limiter.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if let Some(answer) = by_size(n, self.count) {
            return answer;
        }
        let k = self.window(now);
        let used = self.used.get(&k).copied().unwrap_or(0);
        if used + u64::from(n) <= u64::from(self.count) {
            self.used.insert(k, used + u64::from(n));
            return Ok(());
        }
        Err(wait_until(u128::from(k + 1) * u128::from(self.period), now))
    }

    /// Permits left in the window of `now`.
    pub fn remaining(&self, now: Nanos) -> u32 {
        let k = self.window(now);
        (u64::from(self.count) - self.used.get(&k).copied().unwrap_or(0)) as u32
    }

    /// Permits left in the window of `now`, and the time until that window ends if any of
    /// it is used.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let k = self.window(now);
        let used = self.used.get(&k).copied().unwrap_or(0);
        Snapshot {
            remaining: (u64::from(self.count) - used) as u32,
            full_after: if used == 0 {
                Duration::ZERO
            } else {
                until(u128::from(k + 1) * u128::from(self.period), now)
            },
        }
    }
}

/// The sliding log as a plain list of every admission time, scanned in full for each
/// decision; `retry_after` found by trying every time at which an entry leaves.
///
/// # Examples
///
/// ```
/// use limitcore::reference::SlidingLogModel;
/// use limitcore::Quota;
/// let mut m = SlidingLogModel::new(Quota::per_second(1)?);
/// assert!(m.acquire(1, 5).is_ok());
/// assert_eq!(m.acquire(1, 6).unwrap_err().retry_after().unwrap().as_nanos(), 999_999_999);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SlidingLogModel {
    times: alloc::collections::VecDeque<u64>,
    period: u64,
    count: u32,
}

impl SlidingLogModel {
    /// An empty model of `quota`.
    pub fn new(quota: Quota) -> Self {
        SlidingLogModel {
            times: alloc::collections::VecDeque::new(),
            period: quota.period_ns(),
            count: quota.count(),
        }
    }

    /// The time a request at `now` is recorded at: never before the latest entry.
    fn recorded(&self, now: Nanos) -> Nanos {
        self.times.back().map_or(now, |&last| last.max(now))
    }

    /// Entries in the half-open window of length `period` ending at `t` inclusive.
    fn inside(&self, t: Nanos) -> usize {
        self.times
            .iter()
            .filter(|&&e| u128::from(e) + u128::from(self.period) > u128::from(t))
            .count()
    }

    /// Decide `n` permits at `now`.
    ///
    /// # Errors
    ///
    /// As the limiter.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if let Some(answer) = by_size(n, self.count) {
            return answer;
        }
        // Entries at or before `newest − period` can never be inside a window again (times
        // are recorded at or after the newest): forget them.
        if let Some(&newest) = self.times.back() {
            while self
                .times
                .front()
                .is_some_and(|&e| u128::from(e) + u128::from(self.period) <= u128::from(newest))
            {
                self.times.pop_front();
            }
        }
        let fits = |m: &Self, t: Nanos| m.inside(m.recorded(t)) + n as usize <= m.count as usize;
        if fits(self, now) {
            let t = self.recorded(now);
            self.times.extend(core::iter::repeat(t).take(n as usize));
            return Ok(());
        }
        // The earliest later time at which it fits is when some entry leaves.
        let mut candidates: alloc::vec::Vec<u128> = self
            .times
            .iter()
            .map(|&e| u128::from(e) + u128::from(self.period))
            .filter(|&c| c > u128::from(now))
            .collect();
        candidates.sort_unstable();
        for c in candidates {
            match u64::try_from(c) {
                Ok(c) if fits(self, c) => {
                    return Err(Denied::RateLimited {
                        retry_after: Duration::from_nanos(c - now),
                    })
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Err(Denied::BeyondHorizon)
    }

    /// Permits that would fit now.
    pub fn remaining(&self, now: Nanos) -> u32 {
        self.count - self.inside(self.recorded(now)) as u32
    }

    /// Permits that would fit now, and the time until the newest entry leaves the window
    /// (0 if no entry is inside it).
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let inside = self.inside(self.recorded(now));
        let full_after = match self.times.iter().max() {
            Some(&newest) if inside > 0 => until(u128::from(newest) + u128::from(self.period), now),
            _ => Duration::ZERO,
        };
        Snapshot {
            remaining: self.count - inside as u32,
            full_after,
        }
    }
}

/// The sliding-window counter's formula on exact per-window counts (no shards, no leases),
/// with `retry_after` found by binary search over time instead of solved in closed form.
/// A reading from a window before the latest one seen is decided at the latest window's
/// start (the limiter's rule for stale readings).
///
/// # Examples
///
/// ```
/// use limitcore::reference::SlidingWindowModel;
/// use limitcore::Quota;
/// let mut m = SlidingWindowModel::new(Quota::per_second(10)?);
/// assert!(m.acquire(10, 0).is_ok());
/// // Halfway into the next window, half of the previous 10 still count.
/// assert!(m.acquire(5, 1_500_000_000).is_ok());
/// assert!(m.acquire(1, 1_500_000_000).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SlidingWindowModel {
    counts: alloc::collections::BTreeMap<u64, u64>,
    period: u64,
    count: u32,
}

impl SlidingWindowModel {
    /// A fresh model of `quota`.
    pub fn new(quota: Quota) -> Self {
        SlidingWindowModel {
            counts: alloc::collections::BTreeMap::new(),
            period: quota.period_ns(),
            count: quota.count(),
        }
    }

    /// The time a decision at `now` is made at.
    fn effective(&self, now: Nanos) -> Nanos {
        match self.counts.keys().next_back() {
            Some(&latest) if now / self.period < latest => latest * self.period,
            _ => now,
        }
    }

    /// Does the formula admit `n` more at time `t` (already effective)?
    fn fits(&self, t: u128, n: u32) -> bool {
        let p = u128::from(self.period);
        let k = t / p;
        let e = t - k * p;
        let get = |w: u128| {
            u64::try_from(w)
                .ok()
                .and_then(|w| self.counts.get(&w))
                .copied()
                .unwrap_or(0)
        };
        let prev = if k == 0 { 0 } else { get(k - 1) };
        // prev·(P − e)/P + curr + n ≤ count, in integers.
        u128::from(prev) * (p - e) + (u128::from(get(k)) + u128::from(n)) * p
            <= u128::from(self.count) * p
    }

    /// Decide `n` permits at `now`.
    ///
    /// # Errors
    ///
    /// As the limiter.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        // `n == 0` by the formula: refused only while the estimate lies past the count at
        // the effective time (a stale reading, decided at the latest window's start, can
        // see that).
        if let Some(answer) = too_large(n, self.count) {
            return answer;
        }
        let t = self.effective(now);
        if self.fits(u128::from(t), n) {
            if n > 0 {
                *self.counts.entry(t / self.period).or_insert(0) += u64::from(n);
            }
            return Ok(());
        }
        // The estimate never rises as time passes, so "fits" is monotone: binary search
        // the first time it holds, within two windows.
        let (mut lo, mut hi) = (u128::from(t), u128::from(t) + 2 * u128::from(self.period));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.fits(mid, n) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Err(wait_until(lo, now))
    }

    /// Permits the formula admits now: the largest `n` that fits (a binary search: "fits" is
    /// monotone in `n`).
    pub fn remaining(&self, now: Nanos) -> u32 {
        let t = u128::from(self.effective(now));
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.fits(t, mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Permits the formula admits now, and the time until no count weighs any more: the end
    /// of the window after the current one if the current one has a count, else the end of
    /// the current one if the previous one has.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let k = u128::from(self.effective(now) / self.period);
        let count = |w: u128| {
            u64::try_from(w)
                .ok()
                .and_then(|w| self.counts.get(&w))
                .copied()
                .unwrap_or(0)
        };
        let windows_left = if count(k) > 0 {
            2
        } else if k > 0 && count(k - 1) > 0 {
            1
        } else {
            0
        };
        Snapshot {
            remaining: self.remaining(now),
            full_after: if windows_left == 0 {
                Duration::ZERO
            } else {
                until((k + windows_left) * u128::from(self.period), now)
            },
        }
    }
}

/// The leaky bucket as an explicit queue of reserved slots `(start, end)`: a request starts
/// when the last queued one ends (or now), and is refused if the queue, with it, would reach
/// more than `capacity` slots past now.
///
/// # Examples
///
/// ```
/// use limitcore::reference::LeakyBucketModel;
/// use limitcore::Quota;
/// let mut m = LeakyBucketModel::new(Quota::per_second(2)?);
/// assert_eq!(m.reserve(1, 0, u64::MAX).unwrap(), 0);
/// assert_eq!(m.reserve(1, 0, u64::MAX).unwrap(), 500_000_000);
/// assert!(m.reserve(1, 0, u64::MAX).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LeakyBucketModel {
    queue: alloc::collections::VecDeque<(u128, u128)>,
    t: u128,
    capacity: u32,
}

impl LeakyBucketModel {
    /// An empty queue for `quota` (capacity = burst).
    pub fn new(quota: Quota) -> Self {
        LeakyBucketModel {
            queue: alloc::collections::VecDeque::new(),
            t: u128::from(quota.emission_interval_ns()),
            capacity: quota.burst(),
        }
    }

    /// Reserve `n` slots at `now` if they start within `max_wait` ns; returns the delay.
    ///
    /// # Errors
    ///
    /// As [`Reserve`](crate::Reserve) on the limiter.
    pub fn reserve(&mut self, n: u32, now: Nanos, max_wait: Nanos) -> Result<Nanos, Denied> {
        if let Some(answer) = by_size(n, self.capacity) {
            return answer.map(|()| 0);
        }
        let now_w = u128::from(now);
        let last_end = self.queue.back().map_or(0, |&(_, end)| end);
        let start = last_end.max(now_w);
        let end = start + u128::from(n) * self.t;
        if end > u128::from(u64::MAX) {
            return Err(Denied::BeyondHorizon);
        }
        // Slots queued past now, with this one, against the capacity; and the wait.
        let over_capacity = (end - now_w).saturating_sub(u128::from(self.capacity) * self.t);
        let over_wait = (start - now_w).saturating_sub(u128::from(max_wait));
        let wait = over_capacity.max(over_wait);
        if wait > 0 {
            return Err(Denied::RateLimited {
                retry_after: Duration::from_nanos(wait as u64),
            });
        }
        while self.queue.front().is_some_and(|&(_, e)| e <= now_w) && self.queue.len() > 1 {
            self.queue.pop_front();
        }
        self.queue.push_back((start, end));
        Ok((start - now_w) as u64)
    }

    /// A request that must start now: admitted only if the queue has drained.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n_at`](crate::RateLimiter::try_acquire_n_at) on the
    /// limiter.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if n == 0 {
            // Refused while the queue runs past its capacity (from a reading behind it).
            let backlog = self
                .queue
                .back()
                .map_or(0, |&(_, end)| end.saturating_sub(u128::from(now)));
            let over = backlog.saturating_sub(u128::from(self.capacity) * self.t);
            return if over > 0 {
                Err(Denied::RateLimited {
                    retry_after: Duration::from_nanos(over as u64),
                })
            } else {
                Ok(())
            };
        }
        self.reserve(n, now, 0).map(|_| ())
    }

    /// Whole slots free before the queue would exceed its capacity, and the time until it
    /// drains.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let backlog = self
            .queue
            .back()
            .map_or(0, |&(_, end)| end.saturating_sub(u128::from(now)));
        let free = (u128::from(self.capacity) * self.t).saturating_sub(backlog);
        Snapshot {
            remaining: (free / self.t) as u32,
            full_after: until(u128::from(now) + backlog, now),
        }
    }
}
