//! [`GcraRule`] and [`LeakyBucketRule`]: the schedule arithmetic of the Generic Cell Rate
//! Algorithm on one word, the theoretical arrival time (TAT).
//!
//! Source: ATM Forum Traffic Management Specification 4.0 (af-tm-0056.000, 1996), section
//! 4.4.2 and Annex C, "virtual scheduling" form. The specification's equivalent
//! "continuous-state leaky bucket" form is implemented independently in
//! [`reference::GcraModel`](crate::reference::GcraModel), and the two are tested against
//! each other. The leaky bucket as a queue (Tanenbaum, *Computer Networks*, 3rd ed., 1996,
//! §5.3.4) reads the same word as the time the queue drains.

use super::{ReserveRule, Rule};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

/// The numbers a GCRA-family decision needs, precomputed from a [`Quota`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// Emission interval T, ns (≥ 1).
    pub(crate) interval: Nanos,
    /// `burst × T`, ns (≤ [`Quota::MAX_BURST_SPAN_NS`]): the most a request may run ahead
    /// of now, its own cost included. GCRA's tolerance τ is `span − T`.
    pub(crate) span: Nanos,
    /// Most permits at once.
    pub(crate) burst: u32,
}

impl Schedule {
    pub(crate) fn new(quota: &Quota) -> Self {
        Schedule {
            interval: quota.emission_interval_ns(),
            span: quota.burst_span_ns(),
            burst: quota.burst(),
        }
    }

    /// The GCRA transition: from theoretical arrival time `tat`, decide `n` permits at `now`
    /// and return the new TAT, or the denial.
    ///
    /// Requires `1 ≤ n ≤ burst`. Admits iff `max(tat, now) + n·T ≤ now + burst·T`, computed
    /// as `backlog ≤ span − n·T` with `backlog = tat − now` (0 if `tat ≤ now`): no sum, so
    /// nothing near `u64::MAX` can wrap into an admission. The new TAT is
    /// `next = now + backlog + n·T = max(tat, now) + n·T ≥ tat`: the state never moves back,
    /// and a `now` behind the state only enlarges the backlog (stricter).
    ///
    /// The TAT a request would leave (`now + backlog + n·T`, whether it conforms now or after
    /// waiting) must fit in `u64`; within one burst span of the clock's 584-year horizon it
    /// may not, and such a request can never conform: it is refused with
    /// [`Denied::BeyondHorizon`].
    #[inline]
    pub(crate) fn gcra(&self, tat: Nanos, now: Nanos, n: u32) -> Result<Nanos, Denied> {
        // ≤ span ≤ 2^62 because n ≤ burst: no overflow, and `allowance ≥ 0`.
        let cost = self.interval * u64::from(n);
        let allowance = self.span - cost;
        // The verdict is one subtraction and one comparison after the clock's reading
        // (`backlog > allowance`), off the chain of the new TAT's sum: a refusal's path from
        // `now` to its branch is as short as it can be (issue 36: the refusal measured
        // 0.91-0.94x governor's through a real call with the sum and its overflow check on
        // that chain).
        let backlog = tat.saturating_sub(now);
        if backlog > allowance {
            // Refused: `tat > now`, so `max(tat, now) = tat`, and waiting never lowers the
            // TAT the request would leave: past u64::MAX it can never conform.
            return Err(match tat.checked_add(cost) {
                Some(_) => Denied::rate_limited(backlog - allowance),
                None => Denied::NEVER,
            });
        }
        // Admitted: `max(tat, now) + n·T = now + backlog + n·T`, with `backlog + n·T ≤ span`
        // (no overflow); past u64::MAX near the clock's horizon, it never conforms.
        match now.checked_add(backlog + cost) {
            Some(next) => Ok(next),
            None => Err(Denied::NEVER),
        }
    }

    /// A reservation of `n` permits at `now` from `tat`: `(new TAT, delay)`, where the
    /// permits conform at `now + delay` and the TAT advances as if they had been admitted
    /// then (`max(tat, now) + n·T`, the same new TAT as [`Schedule::gcra`]).
    ///
    /// With `pace == false` (GCRA) the delay is the wait until the request conforms,
    /// `backlog − (span − n·T)` or 0, and there is no bound but `max_wait`. With `pace ==
    /// true` (the leaky bucket as a queue) every request starts when the previous one's
    /// slots end, so the delay is the whole backlog, and a request whose slots would end
    /// more than `burst` slots from now is refused as [`Schedule::gcra`] refuses it.
    /// A delay above `max_wait` is refused without any write; `retry_after` is the exact
    /// wait after which both bounds (capacity and `max_wait`) hold.
    #[inline]
    pub(crate) fn reserve(
        &self,
        tat: Nanos,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
        pace: bool,
    ) -> Result<(Nanos, Nanos), Denied> {
        let cost = self.interval * u64::from(n);
        let backlog = tat.saturating_sub(now);
        let Some(next) = backlog.checked_add(cost).and_then(|b| now.checked_add(b)) else {
            return Err(Denied::NEVER);
        };
        let allowance = self.span - cost;
        // Both constraints are bounds on the backlog, which shrinks 1 ns per ns, so one
        // combined bound gives the exact `retry_after`: pacing needs the backlog within the
        // capacity *and* within the wait; GCRA waits for conformance, then up to max_wait.
        let limit = if pace {
            allowance.min(max_wait)
        } else {
            allowance.saturating_add(max_wait)
        };
        if backlog > limit {
            return Err(Denied::rate_limited(backlog - limit));
        }
        let delay = if pace {
            backlog
        } else {
            backlog.saturating_sub(allowance)
        };
        Ok((next, delay))
    }

    /// The most a TAT word may hold: below the two words a keyed slot reserves (see
    /// `cell::RETIRED` and `cell::REDIRECT`), so that a charge never has to be refused there.
    const MAX_TAT: Nanos = u64::MAX - 2;

    /// A forced charge of `n` permits at `now` from `tat`: the new TAT `max(tat, now) + k·T`
    /// for the most `k ≤ n` that keep it within [`Schedule::MAX_TAT`] (all of them short of
    /// the clock's 584-year range), and the `n − k` not charged.
    #[inline]
    pub(crate) fn charge(&self, tat: Nanos, now: Nanos, n: u32) -> (Nanos, u32) {
        let base = tat.max(now);
        // Every charge short of the clock's last span: no division.
        if let Some(next) = self
            .interval
            .checked_mul(u64::from(n))
            .and_then(|cost| base.checked_add(cost))
            .filter(|&next| next <= Self::MAX_TAT)
        {
            return (next, 0);
        }
        self.charge_near_the_end(base, n)
    }

    /// [`Schedule::charge`] past the end of the clock's range: the whole intervals that fit.
    #[cold]
    #[inline(never)]
    fn charge_near_the_end(&self, base: Nanos, n: u32) -> (Nanos, u32) {
        let room = Self::MAX_TAT.saturating_sub(base) / self.interval;
        // `room` counts whole intervals before the end: k·T ≤ MAX_TAT − base, no overflow.
        let k = u64::from(n).min(room) as u32;
        (base + self.interval * u64::from(k), n - k)
    }

    /// The answer to a request for no permits: refused while the TAT lies more than the
    /// burst's span ahead of `now` (a charge left it in debt), until it is back within it.
    #[inline]
    pub(crate) fn debt(&self, tat: Nanos, now: Nanos) -> Result<(), Denied> {
        match tat.saturating_sub(now).checked_sub(self.span) {
            Some(over) if over > 0 => Err(Denied::rate_limited(over)),
            _ => Ok(()),
        }
    }

    /// Give back up to `n` permits at `at` that no receipt names: the TAT `n·T` earlier, but
    /// never before `at` (a full state stays full; an idle reading is not moved back).
    #[inline]
    pub(crate) fn credit(&self, tat: &mut Nanos, n: u32, at: Nanos) -> bool {
        if *tat <= at {
            return false;
        }
        let give = u128::from(self.interval) * u128::from(n);
        let next = u64::try_from(u128::from(*tat).saturating_sub(give))
            .unwrap_or(0)
            .max(at);
        let changed = next != *tat;
        *tat = next;
        changed
    }

    /// What [`Schedule::gcra`] would allow at `now` from `tat`, consuming nothing.
    #[inline]
    pub(crate) fn snapshot(&self, tat: Nanos, now: Nanos) -> Snapshot {
        let backlog = tat.saturating_sub(now);
        let remaining = self.span.saturating_sub(backlog) / self.interval;
        Snapshot {
            // ≤ span / interval = burst.
            remaining: remaining as u32,
            full_after: Duration::from_nanos(backlog),
        }
    }

    /// The receipt of an admission that left TAT `next` for `n` permits: the schedule
    /// position it started from, `max(TAT, now) = next − n·T`.
    #[inline]
    fn receipt(&self, next: Nanos, n: u32) -> Receipt {
        Receipt::new(n, next - self.interval * u64::from(n))
    }

    /// The refund of a TAT word (see [`GcraRule`]'s "Refund"): the TAT without the part of
    /// the admission's cost that no later decision can have absorbed.
    #[inline]
    pub(crate) fn refund(&self, tat: &mut Nanos, receipt: &Receipt, at: Nanos) -> bool {
        let cost = self.interval * u64::from(receipt.n());
        let kept = cost.min(at.saturating_sub(receipt.mark()));
        let give = cost - kept;
        // Saturating: other refunds lower the TAT too, each by at most its own admission.
        let next = tat.saturating_sub(give);
        let changed = next != *tat;
        *tat = next;
        changed
    }
}

/// The rules on one theoretical-arrival-time word, written once: `PACE = false` is GCRA
/// ([`GcraRule`]), `PACE = true` the leaky bucket as a queue ([`LeakyBucketRule`]). They
/// share the word, the schedule arithmetic, the snapshot, the refund and the idle test; they
/// differ in what a request may wait for (GCRA admits while the schedule runs at most `τ`
/// ahead; the pacer admits with [`Rule::take`] only what can start now).
///
/// # Examples
///
/// ```
/// use limitcore::rules::{GcraRule, LeakyBucketRule, Rule, TatRule};
/// use limitcore::Quota;
///
/// let q = Quota::per_second(10)?;
/// let (gcra, pacer): (TatRule<false>, TatRule<true>) = (GcraRule::new(&q)?, LeakyBucketRule::new(&q)?);
/// let (mut a, mut b) = (gcra.fresh(), pacer.fresh());
/// assert!(gcra.take(&mut a, 0, 1).is_ok() && gcra.take(&mut a, 0, 1).is_ok()); // a burst
/// assert!(pacer.take(&mut b, 0, 1).is_ok() && pacer.take(&mut b, 0, 1).is_err()); // paced
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TatRule<const PACE: bool> {
    pub(crate) schedule: Schedule,
    quota: Quota,
}

/// The GCRA rule on one word, the theoretical arrival time (TAT), in ns since the clock's
/// epoch (0 when fresh). The rule of [`Gcra`](crate::Gcra).
///
/// # Word
///
/// ```text
///  63                                                    0
/// +-------------------------------------------------------+
/// | TAT: when the limiter is full again, ns (0 = fresh)    |
/// +-------------------------------------------------------+
/// ```
///
/// The whole 64 bits, no packing: a 584-year horizon, every sum checked.
///
/// # Rule
///
/// `n` permits at `now` are admitted iff `max(TAT, now) + n·T ≤ now + burst·T` (T = emission
/// interval; `burst·T − T` is GCRA's tolerance τ); the TAT then becomes
/// `max(TAT, now) + n·T`. `retry_after` is `max(TAT, now) + n·T − (now + burst·T)`.
///
/// # Refund
///
/// An admission of cost `c = n·T` moved the TAT from `base = max(TAT, t)` to `base + c`
/// (the receipt's mark is `base`). Requests decided since were decided against the larger
/// TAT; taking `c` back is exact unless one of them found the limiter idle past where the
/// TAT would have been without us, in which case part of `c` was already absorbed. Every
/// such request was decided before the refund time `r`, so at most `min(c, r − base)` can
/// have been absorbed; the refund gives back `c − min(c, max(0, r − base))`. So a refund
/// never makes the limiter more permissive than if the admission had not happened, and is
/// exact at the admission's own time.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{GcraRule, Rule};
/// use limitcore::Quota;
///
/// let rule = GcraRule::new(&Quota::per_second(10)?)?; // T = 100 ms, burst 10
/// let mut tat = rule.fresh();
/// let receipt = rule.take(&mut tat, 0, 10).unwrap();
/// assert!(rule.take(&mut tat, 0, 1).is_err());
/// assert!(rule.refund(&mut tat, &receipt, 0));          // exact at the admission's time
/// assert_eq!(tat, rule.fresh());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type GcraRule = TatRule<false>;

/// The leaky bucket as a queue (a pacer) on GCRA's word, read as the time the queue drains:
/// admitted requests start exactly one emission interval `T` apart, in the order they were
/// reserved, and a request is refused when it would end more than `burst` slots from now.
/// The rule of [`LeakyBucket`](crate::LeakyBucket).
///
/// # Word
///
/// As [`GcraRule`]'s: the drain time in ns since the clock's epoch (0 when fresh), never
/// moving backwards.
///
/// # Rule
///
/// [`ReserveRule::reserve`] gives `n` permits the `n` slots starting at
/// `start = max(drain, now)`, with delay `start − now`, if `start + n·T − now ≤ burst·T`
/// and the delay is within `max_wait`. [`Rule::take`] admits only a request that can start
/// *now* (delay 0): smooth output, no bursts; its `retry_after` is the exact time until the
/// queue drains.
///
/// # Refund
///
/// As [`GcraRule`]'s, on the drain time.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{LeakyBucketRule, Rule};
/// use limitcore::Quota;
///
/// let rule = LeakyBucketRule::new(&Quota::per_second(10)?)?;
/// let mut drain = rule.fresh();
/// rule.take(&mut drain, 0, 1).unwrap();
/// // The next slot starts at 100 ms: nothing else can start now.
/// assert_eq!(rule.take(&mut drain, 0, 1).unwrap_err().retry_after().unwrap().as_millis(), 100);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub type LeakyBucketRule = TatRule<true>;

impl<const PACE: bool> Rule for TatRule<PACE> {
    type State = u64;

    /// # Errors
    ///
    /// [`QuotaError::RateTooFast`] for a rate faster than one permit per nanosecond (the
    /// word counts whole nanoseconds; a [`Budget`](crate::Budget) takes it). Every other
    /// valid [`Quota`] fits the word.
    #[inline]
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        quota.whole_interval_ns()?;
        Ok(TatRule {
            schedule: Schedule::new(quota),
            quota: *quota,
        })
    }

    #[inline]
    fn quota(&self) -> Quota {
        self.quota
    }

    #[inline]
    fn fresh(&self) -> u64 {
        0
    }

    #[inline]
    fn take(&self, tat: &mut u64, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        let next = if PACE {
            let (next, delay) = self.schedule.reserve(*tat, now, n, 0, true)?;
            debug_assert_eq!(delay, 0);
            next
        } else {
            self.schedule.gcra(*tat, now, n)?
        };
        *tat = next;
        Ok(self.schedule.receipt(next, n))
    }

    #[inline]
    fn check(&self, tat: &u64, now: Nanos, n: u32) -> Result<(), Denied> {
        if PACE {
            self.schedule.reserve(*tat, now, n, 0, true).map(|_| ())
        } else {
            self.schedule.gcra(*tat, now, n).map(|_| ())
        }
    }

    #[inline]
    fn snapshot(&self, tat: &u64, now: Nanos) -> Snapshot {
        self.schedule.snapshot(*tat, now)
    }

    #[inline]
    fn refund(&self, tat: &mut u64, receipt: &Receipt, at: Nanos) -> bool {
        self.schedule.refund(tat, receipt, at)
    }

    /// A TAT at or before `since`: `max(TAT, t) = t` for every `t ≥ since`, as for TAT 0.
    #[inline]
    fn fresh_since(&self, tat: &u64, since: Nanos, _now: Nanos) -> bool {
        *tat <= since
    }

    /// `max(TAT, now) + n·T`, however far past the burst (the debt); short only of the
    /// clock's range (a TAT within 2 ns of `u64::MAX`).
    #[inline]
    fn charge(&self, tat: &mut u64, now: Nanos, n: u32) -> u32 {
        let (next, short) = self.schedule.charge(*tat, now, n);
        *tat = next;
        short
    }

    /// In debt while `TAT − now > burst·T`: for GCRA, a request for one permit more than the
    /// burst could carry; for the pacer, a queue longer than its capacity.
    #[inline]
    fn debt(&self, tat: &u64, now: Nanos) -> Result<(), Denied> {
        self.schedule.debt(*tat, now)
    }

    /// The TAT `n·T` earlier, never before `at`.
    #[inline]
    fn credit(&self, tat: &mut u64, n: u32, at: Nanos) -> bool {
        self.schedule.credit(tat, n, at)
    }

    /// The tail of an admission that started at `mark` is the schedule from `mark + keep·T`.
    #[inline]
    fn split(&self, receipt: &Receipt, keep: u32) -> Receipt {
        let at = receipt
            .mark()
            .saturating_add(self.schedule.interval.saturating_mul(u64::from(keep)));
        receipt.tail(keep, at)
    }
}

impl<const PACE: bool> ReserveRule for TatRule<PACE> {
    /// For GCRA the delay is the wait [`Rule::take`] would report (0 if the permits
    /// conform now), and the TAT advances as if they were admitted then, so later requests
    /// queue behind them; for the pacer it is the time until the permits' slots start.
    #[inline]
    fn reserve(&self, tat: &mut u64, now: Nanos, n: u32, max_wait: Nanos) -> Result<Nanos, Denied> {
        let (next, delay) = self.schedule.reserve(*tat, now, n, max_wait, PACE)?;
        *tat = next;
        Ok(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(count: u32, period_ns: u64, burst: u32) -> Schedule {
        let q = Quota::new(count, Duration::from_nanos(period_ns))
            .unwrap()
            .with_burst(burst)
            .unwrap();
        Schedule::new(&q)
    }

    #[test]
    fn transition_is_pure_and_exact() {
        let s = schedule(1, 100, 3); // T = 100, span = 300
        assert_eq!(s.gcra(0, 1_000, 1), Ok(1_100));
        assert_eq!(s.gcra(1_100, 1_000, 2), Ok(1_300));
        assert_eq!(s.gcra(1_300, 1_000, 1), Err(Denied::rate_limited(100)));
        assert_eq!(s.gcra(1_300, 1_100, 1), Ok(1_400), "inclusive boundary");
        assert_eq!(s.gcra(1_300, 1_099, 1), Err(Denied::rate_limited(1)));
    }

    #[test]
    fn backwards_now_never_moves_state_back_and_is_stricter() {
        let s = schedule(1, 100, 3);
        // now far behind the TAT: refused, not admitted from a "fresh" reading.
        assert_eq!(s.gcra(10_000, 0, 1), Err(Denied::rate_limited(9_800)));
        // Admitted when behind but within tolerance: the TAT only grows.
        assert_eq!(s.gcra(1_000, 900, 1), Ok(1_100));
    }

    #[test]
    fn no_wrap_near_the_end_of_time() {
        let s = schedule(1, 100, 3);
        let end = u64::MAX;
        assert_eq!(s.gcra(0, end - 150, 1), Ok(end - 50));
        let denied = s.gcra(end - 50, end - 150, 1).unwrap_err();
        assert_eq!(denied, Denied::BeyondHorizon);
        // Not "wait 100 ns": at end - 50 the TAT would still have to pass u64::MAX.
        assert_eq!(s.gcra(end - 50, end - 250, 1), Err(Denied::NEVER));
        assert_eq!(
            s.gcra(end - 150, end - 400, 1),
            Err(Denied::rate_limited(50))
        );
        // The saturating bug this guards against: everything admitted at u64::MAX.
        assert!(s.gcra(end, end, 3).is_err());
    }

    #[test]
    fn snapshot_reads_without_consuming() {
        let s = schedule(1, 100, 3);
        assert_eq!(
            s.snapshot(0, 5),
            Snapshot {
                remaining: 3,
                full_after: Duration::ZERO
            }
        );
        assert_eq!(
            s.snapshot(1_250, 1_000),
            Snapshot {
                remaining: 0,
                full_after: Duration::from_nanos(250)
            }
        );
        assert_eq!(
            s.snapshot(1_150, 1_000),
            Snapshot {
                remaining: 1,
                full_after: Duration::from_nanos(150)
            }
        );
        assert_eq!(s.snapshot(u64::MAX, 0).remaining, 0);
    }

    #[test]
    fn refund_gives_back_only_what_no_decision_absorbed() {
        let q = Quota::new(1, Duration::from_nanos(100))
            .unwrap()
            .with_burst(3)
            .unwrap();
        let rule = GcraRule::new(&q).unwrap();
        let mut tat = 1_000;
        let r = rule.take(&mut tat, 1_000, 2).unwrap(); // base 1000, cost 200
        assert_eq!((tat, r.mark()), (1_200, 1_000));
        // 150 ns later, 150 ns of the cost may have been absorbed by an idle reading.
        let mut later = tat;
        assert!(rule.refund(&mut later, &r, 1_150));
        assert_eq!(later, 1_150);
        // At the admission's own time: exact.
        assert!(rule.refund(&mut tat, &r, 1_000));
        assert_eq!(tat, 1_000);
        // After the whole cost has passed: nothing to give.
        let mut t2 = 1_200;
        assert!(!rule.refund(&mut t2, &r, 1_300));
    }
}
