//! [`SlidingWindow`]: the sliding-window counter (Cloudflare 2017), with its counts leased
//! to per-CPU shards. The per-CPU leases follow the batching of Linux's `percpu_counter`.
//!
//! # Orderings
//!
//! The global word and each shard word are independent single-word states, each updated by
//! the crate's CAS loop ([`cas`](crate::cas)). The only cross-word invariant is "a permit is
//! admitted only out of a lease already counted in the global word": a thread first wins
//! the global CAS (which counts the whole lease), and only then adds the remainder to its
//! shard. Anything that reads the shard sees a lease that the global word has counted in
//! its modification order already, whatever the ordering, because it is the same thread's
//! program order that put it there *after* its own successful RMW, and the shard word
//! itself is only changed by RMWs. So `Relaxed` suffices everywhere, as in `cas`.

use crate::cas;
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::decision::{Charged, Decision, Denied, Receipt, Snapshot};
use crate::limiter::{RateLimiter, Refund};
use crate::quota::{Quota, QuotaError};
use crate::rules::{precheck, window_quota, Counter};
use crate::sync::{self, AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;
use crossbeam_utils::CachePadded;

/// The sliding-window counter: about `count` permits per sliding window of length
/// `period`, with its counts spread over per-CPU shards so that it scales with cores.
///
/// A request for `n` at time `e` into window `k` is admitted iff
/// `prev · (period − e) / period + curr + n ≤ count`, where `prev` and `curr` are the
/// counts of windows `k − 1` and `k` (Cloudflare, 2017).
///
/// # How a decision reads the shards: leases
///
/// Shards do not hold counts to be summed (summing would let two CPUs each see room for the
/// last permit, and admit both). Instead, one global word holds `prev` and `curr`, and a
/// shard (one per CPU, `CachePadded`, chosen by `sched_getcpu` on Linux) holds a *lease*:
/// permits of the current window that the global word has already counted as used. A
/// request is served from its CPU's lease with one uncontended CAS on that CPU's cache line;
/// only when the lease runs short does it go to the global word, where it takes its `n`
/// plus up to `batch` extra for the shard, if the formula allows them *now*. So:
///
/// - **Over-admission: none.** Every admitted permit was counted in the global word when the
///   formula allowed it, and the formula only loosens as the window ages. In each aligned
///   window at most `count` permits are admitted, with a frozen clock or not, under any
///   interleaving, and every admission satisfies the formula on the true counts.
/// - **Under-admission: at most `shards × (batch + n_max − 1)` per window**, where `n_max`
///   is the largest request: leases counted in the global word but not (yet) used, stranded
///   on other CPUs' shards or still on their way to a shard (a request that runs between
///   another thread's global CAS and its hand-off to the shard can be refused though some
///   order of the two would admit both; so with `batch > 0` decisions are not linearizable,
///   only ever stricter). Such leases also count in the next window's `prev`. The default batch is
///   `count / (16 × shards)`, so with `n = 1` at most `count / 16` (6.25 %) is stranded;
///   [`SlidingWindow::with_batch`] sets it (0: every request goes to the global word, no
///   stranding, no scaling).
/// - **The formula's own error:** it assumes the previous window's requests were spread
///   evenly, so in a sliding (unaligned) window of length `period` it can admit up to
///   `2·count − 1`, when the previous window's requests all came at its end. Use
///   [`SlidingLog`][crate::SlidingLog] when that must not happen.
///
/// A window has no burst: its capacity is `count`, and a quota whose burst differs from its
/// count is refused ([`QuotaError::BurstNotSupported`]) rather than silently ignored.
///
/// # Word layouts
///
/// ```text
/// global:  | window k mod 2^(64−2b) | prev (b bits) | curr (b bits) |
/// shard:   | window k (64−b bits)   | lease (b bits)                |
/// ```
///
/// `b` is the bit length of `count`, at most 24 ([`SlidingWindowRule::MAX_COUNT`](crate::rules::SlidingWindowRule::MAX_COUNT)), so the
/// global window number has at least 16 bits and is compared modulo its width. A reading
/// from an earlier window than the stored one, by up to [`SlidingWindowRule::MAX_CLOCK_LAG_NS`](crate::rules::SlidingWindowRule::MAX_CLOCK_LAG_NS) (8.59 s; at
/// least 4 windows, at most a quarter of the field's range), is stale and counts against the
/// stored window at its start (stricter); so a thread preempted between reading the clock
/// and deciding can never reset the counts. A limiter left idle for about a multiple of
/// `2^(64−2b)` windows (18 hours at 1 s with 16-bit numbers) may read its old counts as
/// current or stale: stricter for at most the tolerance plus one window, never more
/// permissive. The shard's window number is exact: the period
/// must be at least `2^b` ns ([`QuotaError::WindowTooShort`]).
///
/// # Contract
///
/// `retry_after` is exact for the global formula (the request conforms then if nothing else
/// consumes; it may conform earlier out of a lease). `n == 0` succeeds without change;
/// `n > count` is [`Denied::ExceedsCapacity`]; a denial writes nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Quota, RateLimiter, SlidingWindow};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = SlidingWindow::with_clock(Quota::per_second(10)?, clock.clone())?;
/// limiter.try_acquire_n(10).unwrap();               // window 0 is full
/// clock.advance(Duration::from_millis(1_500));      // halfway through window 1
/// // 10 × (1 − 0.5) = 5 still count from window 0: 5 are left.
/// assert_eq!(limiter.snapshot().remaining, 5);
/// limiter.try_acquire_n(5).unwrap();
/// assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Some(Duration::from_millis(100)));
/// // A burst a window cannot honour is refused, not ignored.
/// assert!(SlidingWindow::with_clock("10/s burst 3".parse()?, clock).is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct SlidingWindow<C = DefaultClock> {
    global: CachePadded<AtomicU64>,
    shards: Box<[CachePadded<AtomicU64>]>,
    counter: Counter,
    quota: Quota,
    clock: C,
}

#[cfg(feature = "std")]
impl SlidingWindow<DefaultClock> {
    /// A fresh limiter for `quota` on the default clock, one shard per CPU.
    ///
    /// # Errors
    ///
    /// As [`SlidingWindow::with_clock`].
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        SlidingWindow::with_clock(quota, DefaultClock::new())
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// A fresh limiter for `quota` reading time from `clock`, one shard per CPU (rounded up
    /// to a power of two) and the default batch, `count / (16 × shards)`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::BurstNotSupported`] for a quota whose burst is not its count (a window
    /// has none); [`QuotaError::CountTooLarge`] above
    /// [`SlidingWindowRule::MAX_COUNT`](crate::rules::SlidingWindowRule::MAX_COUNT);
    /// [`QuotaError::WindowTooShort`] for a period under `2^b` ns (`b` = bit length of count).
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Self::build(quota, clock, None)
    }

    /// As [`SlidingWindow::with_clock`], leasing at most `batch` extra permits to a shard at
    /// a time. `batch = 0` makes every decision exactly the formula on the true counts (no
    /// lease is ever stranded), at the price of one shared CAS per admission.
    ///
    /// # Errors
    ///
    /// As [`SlidingWindow::with_clock`].
    pub fn with_batch(quota: Quota, clock: C, batch: u32) -> Result<Self, QuotaError> {
        Self::build(quota, clock, Some(batch))
    }

    fn build(quota: Quota, clock: C, batch: Option<u32>) -> Result<Self, QuotaError> {
        window_quota(&quota, "sliding-window")?;
        let counter = Counter::new(&quota, sync::cpus(), batch)?;
        let shards = (0..counter.shards)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect::<Vec<_>>();
        Ok(SlidingWindow {
            global: CachePadded::new(AtomicU64::new(0)),
            shards: shards.into_boxed_slice(),
            counter,
            quota,
            clock,
        })
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The number of per-CPU shards.
    pub fn shards(&self) -> usize {
        self.counter.shards
    }

    /// The most extra permits leased to a shard at once.
    pub fn batch(&self) -> u32 {
        self.counter.batch
    }

    #[inline]
    fn shard(&self) -> &AtomicU64 {
        &self.shards[sync::shard_hint() & (self.counter.shards - 1)]
    }

    /// Take `n` from `shard`'s lease if it holds that many for `now`'s window; the lease's
    /// window on success.
    #[inline]
    fn take_leased(&self, shard: &AtomicU64, now: Nanos, n: u64) -> Option<u64> {
        let c = &self.counter;
        cas::apply(
            shard,
            #[inline(always)]
            |word| {
                let (k, lease) = c.unpack_shard(word);
                // k·period ≤ some earlier reading, so it fits; one multiply, no division.
                let start = k * c.period;
                if now < start || now - start >= c.period || lease < n {
                    return Err(());
                }
                Ok((word - n, k))
            },
        )
        .ok()
    }

    /// Lease `n` (and up to `batch` more for the shard) from the global word, or refuse;
    /// the window the permits were counted in goes to `window`. (An out-parameter, so that
    /// the result is `Result<(), Denied>` and reaches `try_acquire_n_at`'s caller as it is:
    /// copying a refusal between result layouts cost a store-forwarding stall, about 10 ns
    /// per refused check.)
    #[cold]
    #[inline(never)]
    fn take_global(
        &self,
        shard: &AtomicU64,
        now: Nanos,
        n: u64,
        window: &mut u64,
    ) -> Result<(), Denied> {
        let c = &self.counter;
        let (k, extra) = cas::apply(
            &self.global,
            #[inline(always)]
            |global| {
                c.lease(global, now, n)
                    .map(|(next, w, extra)| (next, (w.k, extra)))
            },
        )?;
        if extra > 0 {
            self.give_lease(shard, k, extra);
        }
        *window = k;
        Ok(())
    }

    /// Add `extra` permits of window `k`, already counted globally, to `shard`.
    fn give_lease(&self, shard: &AtomicU64, k: u64, extra: u64) {
        let c = &self.counter;
        // `Err`: the shard moved on to a later window, and these permits stay unused.
        let _ = cas::apply(
            shard,
            #[inline(always)]
            |word| {
                let (ks, lease) = c.unpack_shard(word);
                match ks.cmp(&k) {
                    // Fits: a window's leases total at most `count`.
                    core::cmp::Ordering::Equal => Ok((c.pack_shard(k, lease + extra), ())),
                    core::cmp::Ordering::Less => Ok((c.pack_shard(k, extra), ())),
                    core::cmp::Ordering::Greater => Err(()),
                }
            },
        );
    }

    /// Decide `n` permits at `now`; the window they were counted in goes to `window`.
    #[inline]
    fn take(&self, n: u32, now: Nanos, window: &mut u64) -> Result<(), Denied> {
        let shard = self.shard();
        match self.take_leased(shard, now, u64::from(n)) {
            Some(k) => {
                *window = k;
                Ok(())
            }
            None => self.take_global(shard, now, u64::from(n), window),
        }
    }
}

impl<C: Clock> RateLimiter for SlidingWindow<C> {
    #[inline]
    fn try_acquire_n_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.counter.count)? {
            return self.debt_at(now);
        }
        self.take(n, now, &mut 0)
    }

    /// The decision, then the state read at once after it: the counts of all per-CPU
    /// shards cannot be read in one step, so under concurrent requests `state` may already
    /// include some of theirs.
    fn decide_n_at(&self, n: u32, now: Nanos) -> Decision {
        Decision {
            result: self.try_acquire_n_at(n, now),
            state: self.snapshot_at(now),
        }
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// `remaining`: what the formula still allows plus every shard's unused lease for the
    /// current window (all of it usable by some CPU); `full_after`: until both counts have
    /// aged out of the formula.
    fn snapshot_at(&self, now: Nanos) -> Snapshot {
        let c = &self.counter;
        // Relaxed: a read-only observation (module "Orderings").
        let w = c.window(self.global.load(Ordering::Relaxed), now);
        let leased: u64 = self
            .shards
            .iter()
            // Relaxed: as above, an observation.
            .map(|s| c.unpack_shard(s.load(Ordering::Relaxed)))
            .filter(|&(k, _)| k == w.k)
            .map(|(_, lease)| lease)
            .sum();
        let remaining = (c.room(&w) + leased).min(u64::from(c.count)) as u32;
        let full_after = c.full_after(&w, now);
        Snapshot {
            remaining,
            full_after,
        }
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    #[cfg(feature = "std")]
    fn sleep_hint(&self, deadline: Nanos, waker: &core::task::Waker) -> crate::clock::SleepHint {
        self.clock.sleep_hint(deadline, waker)
    }
}

impl<C: Clock> Refund for SlidingWindow<C> {
    fn acquire_refundable_at(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        if !precheck(n, self.counter.count)? {
            return self.debt_at(now).map(|()| Receipt::NOTHING);
        }
        let mut window = 0;
        self.take(n, now, &mut window)?;
        Ok(Receipt::new(n, window))
    }

    fn decide_refundable_at(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        let result = self.acquire_refundable_at(n, now);
        (result, self.snapshot_at(now))
    }

    /// The permits go back to this CPU's lease for their window, if that window is still
    /// running at `at`: they stay counted in the global word, so the formula's bound is
    /// unchanged, and any request on this CPU may use them again.
    fn refund(&self, receipt: Receipt, at: Nanos) {
        let k = receipt.mark();
        if receipt.n() > 0 && at / self.counter.period <= k {
            self.give_lease(self.shard(), k, u64::from(receipt.n()));
        }
    }

    fn check_at(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        if !precheck(n, self.counter.count)? {
            return self.debt_at(now);
        }
        let c = &self.counter;
        // Relaxed: read-only observations (module "Orderings").
        let (k, lease) = c.unpack_shard(self.shard().load(Ordering::Relaxed));
        if k == now / c.period && lease >= u64::from(n) {
            return Ok(());
        }
        // Relaxed: as above.
        c.lease(self.global.load(Ordering::Relaxed), now, u64::from(n))
            .map(|_| ())
    }

    /// The permits this CPU holds leased for the window of `now` first (they are counted
    /// in the global word already, unused), the rest added to the global word's window of
    /// `now`, up to its field's ceiling: see
    /// [`SlidingWindowRule`](crate::rules::SlidingWindowRule)'s "Charges". The other CPUs'
    /// leases, counted within the limit before the charge, stay theirs (at most the batch
    /// each).
    fn charge_at(&self, n: u32, now: Nanos) -> Charged {
        let c = &self.counter;
        let shard = self.shard();
        // Relaxed: an observation; `take_leased` decides on the word it swaps.
        let (_, lease) = c.unpack_shard(shard.load(Ordering::Relaxed));
        let from_lease = lease.min(u64::from(n));
        let from_lease = if from_lease > 0 && self.take_leased(shard, now, from_lease).is_some() {
            from_lease as u32
        } else {
            0
        };
        let rest = n - from_lease;
        let short = match cas::apply(&self.global, |global| {
            Ok::<_, core::convert::Infallible>(c.charge(global, now, rest))
        }) {
            Ok(short) => short,
            Err(never) => match never {},
        };
        Charged::after(n - short, short, self.check_at(1, now))
    }

    /// The unused permits go back to this CPU's lease (see [`Refund::refund`]), the
    /// excess is charged.
    fn settle(&self, receipt: Receipt, actual: u32, at: Nanos) -> Charged {
        let estimate = receipt.n();
        if actual > estimate {
            return self.charge_at(actual - estimate, at);
        }
        if actual < estimate {
            self.refund(receipt.tail(actual, receipt.mark()), at);
        }
        Charged::after(0, 0, self.check_at(1, at))
    }

    /// Up to `n` off the global word's count for the window of `at`.
    fn credit(&self, n: u32, at: Nanos) {
        let c = &self.counter;
        // `Err`: nothing to give back, nothing written.
        let _ = cas::apply(&self.global, |global| {
            c.credit(global, n, at).map(|g| (g, ())).ok_or(())
        });
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// The answer to a request for no permits at `now`: admitted unless a charge left the
    /// global word's estimate past the limit.
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the wait until the estimate is back within the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Quota, Refund, SlidingWindow};
    /// use limitcore::clock::ManualClock;
    ///
    /// let window = SlidingWindow::with_clock("10/s".parse()?, ManualClock::new())?;
    /// window.charge_at(12, 0);                           // 12 in a window of 10
    /// assert!(window.debt_at(0).is_err());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[cold]
    pub fn debt_at(&self, now: Nanos) -> Result<(), Denied> {
        // Relaxed: a read-only observation (module "Orderings").
        self.counter.debt(self.global.load(Ordering::Relaxed), now)
    }
}
