//! [`Partitioned`]: shares of one concurrency limit by class, each guaranteed its share and
//! free to borrow what the others leave unused (Netflix concurrency-limits'
//! `AbstractPartitionedLimiter`).

use super::error::{AcquireError, LimitError, Refusal};
use super::feedback::{Adaptive, Feedback, Fixed};
use super::permit::{sealed, Completion, Permit, Token};
use super::permits::Permits;
use super::AdaptiveRule;
use crate::cas;
use crate::clock::{Clock, Nanos};
use crate::sync::{AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::convert::Infallible;
use core::fmt;

/// One concurrency limit shared by classes of requests (partitions), after Netflix
/// concurrency-limits' partitioned limiter: each partition has a share of the limit, a
/// fraction `p`, and is guaranteed `max(1, ⌈limit · p⌉)` permits in flight; below the limit
/// any partition may take more (borrowing what the others leave unused).
///
/// # Rule
///
/// A request of partition `i` for `n` permits is granted iff
///
/// - the total in flight plus `n` is within the limit (the *shared* path: any partition,
///   over its share or not), or
/// - the partition's own in flight plus `n` is within its share (the *guaranteed* path,
///   even when the total is at or over the limit).
///
/// A partition index past the last (Netflix's "unknown" partition) has a share of 0: it
/// only ever borrows.
///
/// # Bound
///
/// As in Netflix's limiter, the total is a soft limit: guaranteed shares are honoured even
/// while borrowers hold the rest. In flight is at most `limit + Σ shares` (with shares
/// summing to at most 1, about twice the limit), and more precisely: the permits taken
/// by the shared path never exceed the limit (each was checked against a total that counts
/// them all), and those taken by the guaranteed path of partition `i` never exceed its
/// share (each was checked against the partition's count, which counts them all). A
/// partition's count of its shared-path permits lands just after the total's, so in the
/// meantime the guaranteed path can only see fewer permits than there are, never more:
/// the bound is per path and holds at every instant.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::Partitioned;
///
/// // 10 permits: "live" traffic is guaranteed 7, "batch" 3.
/// let limit = Partitioned::new(10, &[0.7, 0.3])?;
/// let batch: Vec<_> = (0..10).map(|_| limit.try_acquire(1, 1).unwrap()).collect();
/// assert!(limit.try_acquire(1, 1).is_err());   // batch borrowed everything: no more
/// // ... but live still gets its guaranteed 7, over the total.
/// let live: Vec<_> = (0..7).map(|_| limit.try_acquire(0, 1).unwrap()).collect();
/// assert!(limit.try_acquire(0, 1).is_err());
/// assert_eq!(limit.in_flight(), 17);
/// drop(batch);
/// assert_eq!(limit.partition_in_flight(0), 7);
/// # drop(live);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
pub struct Partitioned<F: Feedback = Fixed> {
    /// The total: its word counts every permit of every partition.
    total: Permits<F>,
    /// Each partition's share of the limit, a fraction in `[0, 1]`.
    shares: Box<[f64]>,
    /// Each partition's permits in flight (a count; its only partner is this same word's
    /// RMWs), then the unknown partition's.
    busy: Box<[AtomicU64]>,
}

impl<F: Feedback> fmt::Debug for Partitioned<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitioned")
            .field("total", &self.total)
            .field("shares", &self.shares)
            .finish_non_exhaustive()
    }
}

impl Partitioned<Fixed> {
    /// A limit of `limit` permits shared by partitions with these `shares` (fractions of the
    /// limit, each in `[0, 1]`, summing to at most 1), indexed from 0.
    ///
    /// # Errors
    ///
    /// The [`LimitError`] of [`Permits::new`]; [`LimitError::Parameter`] for a share outside
    /// `[0, 1]` or shares summing to more than 1.
    pub fn new(limit: u32, shares: &[f64]) -> Result<Self, LimitError> {
        Partitioned::build(Permits::new(limit)?, shares)
    }

    /// Change the limit (every share follows it), with [`Permits::reconfigure`]'s
    /// semantics.
    ///
    /// # Errors
    ///
    /// As [`Permits::reconfigure`].
    pub fn reconfigure(&self, limit: u32) -> Result<(), LimitError> {
        self.total.reconfigure(limit)
    }
}

impl<R: AdaptiveRule> Partitioned<Adaptive<R>> {
    /// An adaptive limit shared by partitions: `rule` sets the total limit from every
    /// partition's outcomes, timed on the default clock, and the shares follow it.
    ///
    /// # Errors
    ///
    /// As [`Permits::adaptive`] and [`Partitioned::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::{Gradient2, Partitioned};
    ///
    /// let limit = Partitioned::adaptive(Gradient2::new(), &[0.9, 0.1])?;
    /// assert_eq!((limit.limit(), limit.partition_limit(0), limit.partition_limit(1)), (20, 18, 2));
    /// limit.try_acquire(1, 1)?.success();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adaptive(rule: R, shares: &[f64]) -> Result<Self, LimitError> {
        Partitioned::build(Permits::adaptive(rule)?, shares)
    }
}

impl<R: AdaptiveRule, C: Clock + fmt::Debug + 'static> Partitioned<Adaptive<R, C>> {
    /// An adaptive limit shared by partitions: `rule` sets the total limit from every
    /// partition's outcomes, timed on `clock`, and the shares follow it.
    ///
    /// # Errors
    ///
    /// As [`Permits::adaptive`] and [`Partitioned::new`].
    pub fn adaptive_with_clock(rule: R, clock: C, shares: &[f64]) -> Result<Self, LimitError> {
        Partitioned::build(Permits::adaptive_with_clock(rule, clock)?, shares)
    }
}

impl<F: Feedback> Partitioned<F> {
    fn build(total: Permits<F>, shares: &[f64]) -> Result<Self, LimitError> {
        let mut sum = 0.0;
        for &share in shares {
            if !(0.0..=1.0).contains(&share) {
                return Err(LimitError::Parameter {
                    name: "partition share",
                    value: share,
                    expected: "a fraction in [0, 1]",
                });
            }
            sum += share;
        }
        // A little slack for fractions that do not add up exactly in binary (0.7 + 0.2 + 0.1).
        if sum > 1.0 + 1e-9 {
            return Err(LimitError::Parameter {
                name: "sum of partition shares",
                value: sum,
                expected: "at most 1",
            });
        }
        let busy: Vec<AtomicU64> = (0..=shares.len()).map(|_| AtomicU64::new(0)).collect();
        Ok(Partitioned {
            total,
            shares: shares.into(),
            busy: busy.into_boxed_slice(),
        })
    }

    /// The total limit.
    pub fn limit(&self) -> u32 {
        self.total.limit()
    }

    /// Permits in flight, every partition's.
    pub fn in_flight(&self) -> u32 {
        self.total.in_flight()
    }

    /// How many partitions there are (indices past the last are the unknown partition).
    pub fn partitions(&self) -> usize {
        self.shares.len()
    }

    /// Partition `i`'s guaranteed permits under the current limit: `max(1, ⌈limit · p⌉)`,
    /// 0 for the unknown partition (Netflix's rounding: the shares may add up to a little
    /// more than the limit).
    pub fn partition_limit(&self, i: usize) -> u32 {
        self.share(i, self.limit())
    }

    /// Permits partition `i` holds.
    pub fn partition_in_flight(&self, i: usize) -> u32 {
        // Relaxed: an observation of one count (its partners are its own RMWs).
        self.busy(i).load(Ordering::Relaxed) as u32
    }

    /// What the total learns from outcomes (for an adaptive limit, its controller).
    pub fn feedback(&self) -> &F {
        self.total.feedback()
    }

    /// Take `n` permits for partition `i` if the rule allows (see the type); `n = 0`
    /// succeeds with nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Full`] (the total's count) if the total is full and the partition
    /// has used its share; [`AcquireError::ExceedsLimit`] if `n` is above the limit.
    pub fn try_acquire(&self, i: usize, n: u32) -> Result<Permit<&Self>, AcquireError> {
        self.take(i, n).map(|token| Permit::new(self, token))
    }

    /// As [`Partitioned::try_acquire`], with a permit that owns a reference to the limit.
    ///
    /// # Errors
    ///
    /// As [`Partitioned::try_acquire`].
    pub fn try_acquire_owned(
        self: &Arc<Self>,
        i: usize,
        n: u32,
    ) -> Result<Permit<Arc<Self>>, AcquireError> {
        self.take(i, n)
            .map(|token| Permit::new(self.clone(), token))
    }

    /// The partition's count (the unknown partition's past the last index).
    fn busy(&self, i: usize) -> &AtomicU64 {
        &self.busy[i.min(self.shares.len())]
    }

    fn share(&self, i: usize, limit: u32) -> u32 {
        match self.shares.get(i) {
            // ≤ limit for a share ≤ 1: fits.
            Some(&p) => ((f64::from(limit) * p).ceil() as u32).max(1),
            None => 0,
        }
    }

    fn take(&self, i: usize, n: u32) -> Result<Token, AcquireError> {
        if n == 0 {
            return Ok(Token::EMPTY);
        }
        let class = (i.min(self.shares.len()) as u32) << 1;
        let busy = self.busy(i);
        match self.total.take(n) {
            // The shared path: the total had room.
            Ok(mut token) => {
                add(busy, n);
                token.class = class;
                Ok(token)
            }
            Err(Refusal::Denied(full @ AcquireError::Full { limit, .. })) => {
                // The guaranteed path: within the partition's share, whatever the total.
                let share = self.share(i, limit);
                cas::apply(busy, |b| {
                    if b + u64::from(n) <= u64::from(share) {
                        Ok((b + u64::from(n), ()))
                    } else {
                        Err(full)
                    }
                })?;
                match self.total.force(n) {
                    Ok(mut token) => {
                        token.class = class | 1;
                        Ok(token)
                    }
                    Err(e) => {
                        sub(busy, n);
                        Err(e)
                    }
                }
            }
            Err(refusal) => Err(refusal.into_error()),
        }
    }
}

impl<F: Feedback> sealed::Release for Partitioned<F> {
    fn release(&self, token: &Token, outcome: Completion) {
        if token.n == 0 {
            return;
        }
        sealed::Release::release(&self.total, token, outcome);
        sub(self.busy((token.class >> 1) as usize), token.n);
    }

    fn now(&self) -> Nanos {
        sealed::Release::now(&self.total)
    }
}

/// Count `n` more permits on a partition (through the CAS loop; never refused).
fn add(busy: &AtomicU64, n: u32) {
    let _ = cas::apply(busy, |b| Ok::<_, Infallible>((b + u64::from(n), ())));
}

/// Count `n` fewer.
fn sub(busy: &AtomicU64, n: u32) {
    let _ = cas::apply(busy, |b| {
        Ok::<_, Infallible>((b.saturating_sub(u64::from(n)), ()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_up_as_netflix_does() {
        let p = Partitioned::new(10, &[0.75, 0.25, 0.0]).unwrap();
        assert_eq!(
            (0..4).map(|i| p.partition_limit(i)).collect::<Vec<_>>(),
            [8, 3, 1, 0]
        );
        p.reconfigure(3).unwrap();
        assert_eq!(p.partition_limit(0), 3);
        assert_eq!(p.partition_limit(1), 1);
    }

    #[test]
    fn bad_shares_are_refused() {
        assert!(Partitioned::new(10, &[0.7, 0.4]).is_err());
        assert!(Partitioned::new(10, &[-0.1]).is_err());
        assert!(Partitioned::new(10, &[f64::NAN]).is_err());
        assert!(Partitioned::new(10, &[0.7, 0.2, 0.1]).is_ok());
        assert!(Partitioned::new(0, &[1.0]).is_err());
    }

    #[test]
    fn the_unknown_partition_only_borrows() {
        let p = Partitioned::new(2, &[1.0]).unwrap();
        let a = p.try_acquire(7, 2).unwrap();
        assert_eq!(a.partition(), 1, "the unknown partition is index 1 here");
        assert!(p.try_acquire(7, 1).is_err());
        let b = p.try_acquire(0, 2).unwrap(); // the guaranteed path, over the total
        assert_eq!(p.in_flight(), 4);
        drop((a, b));
        assert_eq!(
            (
                p.in_flight(),
                p.partition_in_flight(0),
                p.partition_in_flight(9)
            ),
            (0, 0, 0)
        );
    }

    #[test]
    fn shared_path_permits_count_against_the_share_once_counted() {
        let p = Partitioned::new(4, &[0.5, 0.5]).unwrap();
        let borrowed: Vec<_> = (0..4).map(|_| p.try_acquire(0, 1).unwrap()).collect();
        // Partition 0 holds 4 > its share of 2: nothing more for it; partition 1 has its 2.
        assert!(p.try_acquire(0, 1).is_err());
        let guaranteed: Vec<_> = (0..2).map(|_| p.try_acquire(1, 1).unwrap()).collect();
        assert!(p.try_acquire(1, 1).is_err());
        assert_eq!(p.in_flight(), 6, "limit + partition 1's share");
        drop(borrowed);
        drop(guaranteed);
        assert_eq!(p.in_flight(), 0);
        assert!(p.try_acquire(0, 5).is_err(), "above the limit");
    }
}
