//! [`Counts`]: a snapshot of a [`Counted`](super::Counted) limiter's counters.

use crate::clock::Nanos;
use core::fmt;
use core::iter::Sum;
use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// What a [`Counted`](super::Counted) limiter has decided since it was made: a snapshot of
/// its counters, read by [`Counted::counts`](super::Counted::counts).
///
/// Every field is a running total (modulo 2^64, which no count of decisions reaches; the
/// nanosecond sums reach it after 584 years of summed time) except
/// [`Counts::exhausted_since`]. The difference of two snapshots of one limiter
/// ([`Counts::since`], or `later - earlier`) is what happened in between, exact across a
/// wrap of a total; the sum of several limiters' snapshots (`a + b`, or
/// [`Iterator::sum`]) is their counts together.
///
/// What is counted, per call on the wrapper (decisions are counted after the wrapped limiter
/// has made them, whatever their outcome):
///
/// | call | counts |
/// |---|---|
/// | an admitted `try_acquire*`, `decide*`, `acquire_refundable*` of `n` | `admitted` +1, `permits` +n |
/// | an admitted reservation of `n` with delay `d` | the same; if `d > 0`, `delayed` +1, `wait_ns` +d |
/// | a refusal [`Denied::RateLimited`](crate::Denied::RateLimited) | `rate_limited` +1 |
/// | a final refusal ([`Denied::is_final`](crate::Denied::is_final)) | `final_refusals` +1 |
/// | `refund` of a receipt of `n > 0` permits | `refunds` +1, `permits_refunded` +n |
/// | `charge_at` of `n` (never refused) | `permits_charged` + the permits charged |
/// | `settle` of `e` permits to `a` | `a > e`: `permits_charged` + the excess; `a < e`: `refunds` +1, `permits_refunded` + (e − a) |
/// | `credit` of `n` | `permits_credited` +n |
/// | `check_at`, `snapshot*`, `quota*`, `now` | nothing (they decide nothing) |
///
/// A request for `n = 0` permits is an admitted decision of 0 permits. A wait through the
/// wrapper (`wait::Blocking`, `wait::Async`) counts each attempt it makes: every refusal it
/// sleeps on, then its admission.
///
/// # Time exhausted
///
/// `exhausted_ns` sums the *exhausted episodes* the wrapper saw: an episode opens at a
/// [`Denied::RateLimited`](crate::Denied::RateLimited) refusal when none is open, and closes
/// at the next admission of at least one permit (a reservation included); its length is the
/// closing admission's time minus the opening refusal's, in ns of the limiter's clock (0 if
/// the closing time is the older). While an episode is open, its start is
/// [`Counts::exhausted_since`], and [`Counts::exhausted_ns_at`] includes it up to a given
/// time. So the measure is the time during which the latest decision was a refusal, and its
/// limits are those of what a wrapper sees:
///
/// - **Only decision times.** An episode starts at the first refusal, not when the last
///   permit was taken (it misses the time from the exhausting admission to the first
///   refusal), and ends at the next admission, not when a permit became available again (it
///   includes the time from then to the next request that asked). With steady traffic both
///   gaps are about one inter-arrival time; an idle limiter's episode stays open until the
///   next request.
/// - **One episode per wrapper.** For a keyed limiter it is not per key: a refusal of one key
///   opens it and an admission of any key closes it. A refusal of a request larger than
///   what is left (while smaller ones would pass) opens one too.
/// - **Threads.** Concurrent decisions are recorded in the order their counter updates land,
///   which can differ from the order the limiter decided them in by the width of a race: an
///   admission and a refusal racing may leave an episode open that the limiter has already
///   ended (until the next admission) or close one it is still in (until the next refusal).
///   No episode is counted twice.
/// - Final refusals neither open nor close an episode (no wait would cure them).
///
/// # Gauges
///
/// The fields are flows: totals that only grow. A gauge, a level of the limiter's state when
/// the snapshot is taken (the debt that the budgets work adds: a signed backlog beyond the
/// burst), will be a field of its own here, read from the wrapped limiter by
/// [`Counted::counts`](super::Counted::counts) beside the totals; the struct is
/// `#[non_exhaustive]` so that adding it breaks no caller.
///
/// # Examples
///
/// ```
/// use limitcore::{Counted, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
///
/// let limiter = Counted::new(Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?);
/// limiter.try_acquire_n_at(2, 0).unwrap();
/// let before = limiter.counts();
/// assert!(limiter.try_acquire_n_at(1, 100).is_err());   // opens an episode at 100 ns
/// assert!(limiter.try_acquire_n_at(3, 200).is_err());   // more than the burst: final
/// limiter.try_acquire_n_at(1, 500_000_000).unwrap();    // closes it
/// let delta = limiter.counts().since(&before);
/// assert_eq!((delta.admitted, delta.rate_limited, delta.final_refusals), (1, 1, 1));
/// assert_eq!(delta.exhausted_ns, 500_000_000 - 100);
/// assert_eq!(
///     delta.to_string(),
///     "admitted 1 (1 permit), refused 2 (1 rate-limited, 1 final), delayed 0 (wait 0ns), \
///      refunded 0 (0 permits), exhausted 499.9999ms"
/// );
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Counts {
    /// Decisions admitted (reservations included).
    pub admitted: u64,
    /// Permits charged by the admitted decisions: the sum of their `n`. Refunds do not
    /// lower it: the net charge is `permits − permits_refunded`.
    pub permits: u64,
    /// Refusals with [`Denied::RateLimited`](crate::Denied::RateLimited): not now, later.
    pub rate_limited: u64,
    /// Final refusals ([`Denied::ExceedsCapacity`](crate::Denied::ExceedsCapacity),
    /// [`Denied::BeyondHorizon`](crate::Denied::BeyondHorizon)): no wait would cure them.
    pub final_refusals: u64,
    /// Admitted reservations whose start was later than their time (a non-zero delay).
    pub delayed: u64,
    /// The wait granted: the sum of the admitted reservations' delays, ns.
    pub wait_ns: u64,
    /// Receipts given back through `refund` (those with at least one permit).
    pub refunds: u64,
    /// The permits of those receipts. What the limiter restores is its rule's business
    /// ([`Refund::refund`](crate::Refund::refund): exact at the admission's own time,
    /// never more permissive); this is what was given back.
    pub permits_refunded: u64,
    /// Permits charged after the work: forced charges (`charge_at`) and the excess of
    /// reservations settled above their estimate (`settle`), as recorded (a shortfall the
    /// limiter could not hold is not counted). Not part of `permits`, which counts
    /// admissions.
    pub permits_charged: u64,
    /// Permits given back without a receipt (`credit`), as asked.
    pub permits_credited: u64,
    /// The closed exhausted episodes' total length, ns (see "Time exhausted" above).
    pub exhausted_ns: u64,
    /// When the open exhausted episode started (the opening refusal's time, ns of the
    /// limiter's clock), or `None` if none is open.
    pub exhausted_since: Option<Nanos>,
}

impl Counts {
    /// Refusals of every kind: `rate_limited + final_refusals`.
    pub fn refused(&self) -> u64 {
        self.rate_limited.wrapping_add(self.final_refusals)
    }

    /// Decisions of every kind: `admitted + refused()`.
    pub fn decisions(&self) -> u64 {
        self.admitted.wrapping_add(self.refused())
    }

    /// [`Counts::wait_ns`] as a `Duration`.
    pub fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait_ns)
    }

    /// [`Counts::exhausted_ns`] (closed episodes only) as a `Duration`.
    pub fn exhausted(&self) -> Duration {
        Duration::from_nanos(self.exhausted_ns)
    }

    /// The time exhausted up to `now` (ns of the limiter's clock): the closed episodes, plus
    /// the open one from its start to `now` (nothing if `now` is before its start).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Counted, Gcra, Quota, RateLimiter};
    /// use limitcore::clock::ManualClock;
    ///
    /// let limiter = Counted::new(Gcra::with_clock(Quota::per_second(1)?, ManualClock::new())?);
    /// limiter.try_acquire_n_at(1, 0).unwrap();
    /// assert!(limiter.try_acquire_n_at(1, 1_000).is_err());
    /// let counts = limiter.counts();
    /// assert_eq!((counts.exhausted_ns, counts.exhausted_since), (0, Some(1_000)));
    /// assert_eq!(counts.exhausted_ns_at(5_000), 4_000);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn exhausted_ns_at(&self, now: Nanos) -> u64 {
        let open = self.exhausted_since.map_or(0, |s| now.saturating_sub(s));
        self.exhausted_ns.wrapping_add(open)
    }

    /// What happened between the snapshot `earlier` and this one, of the same limiter:
    /// every total's difference (wrapping, so exact across a wrap of the total), and this
    /// snapshot's [`Counts::exhausted_since`]. Also `self - earlier`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Counted, Gcra, Quota, RateLimiter};
    /// use limitcore::clock::ManualClock;
    ///
    /// let limiter = Counted::new(Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?);
    /// limiter.try_acquire_n_at(4, 0).unwrap();
    /// let earlier = limiter.counts();
    /// limiter.try_acquire_n_at(2, 0).unwrap();
    /// let delta = limiter.counts().since(&earlier);
    /// assert_eq!((delta.admitted, delta.permits), (1, 2));
    /// assert_eq!(delta, limiter.counts() - earlier);
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[must_use]
    pub fn since(&self, earlier: &Counts) -> Counts {
        self.zip(earlier, u64::wrapping_sub, self.exhausted_since)
    }

    /// Field by field, `f(self.x, other.x)` for every total, with `since` as the open
    /// episode's start.
    fn zip(&self, other: &Counts, f: fn(u64, u64) -> u64, since: Option<Nanos>) -> Counts {
        Counts {
            admitted: f(self.admitted, other.admitted),
            permits: f(self.permits, other.permits),
            rate_limited: f(self.rate_limited, other.rate_limited),
            final_refusals: f(self.final_refusals, other.final_refusals),
            delayed: f(self.delayed, other.delayed),
            wait_ns: f(self.wait_ns, other.wait_ns),
            refunds: f(self.refunds, other.refunds),
            permits_refunded: f(self.permits_refunded, other.permits_refunded),
            permits_charged: f(self.permits_charged, other.permits_charged),
            permits_credited: f(self.permits_credited, other.permits_credited),
            exhausted_ns: f(self.exhausted_ns, other.exhausted_ns),
            exhausted_since: since,
        }
    }
}

/// [`Counts::since`]: `later - earlier`.
impl Sub for Counts {
    type Output = Counts;

    fn sub(self, earlier: Counts) -> Counts {
        self.since(&earlier)
    }
}

/// The counts of two limiters together (shards of one replay, say): every total summed
/// (wrapping), and the earlier of their open episodes' starts.
///
/// # Examples
///
/// ```
/// use limitcore::{Counted, Counts, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
///
/// let shards: Vec<_> = (0..3)
///     .map(|_| Counted::new(Gcra::with_clock(Quota::per_second(1).unwrap(), ManualClock::new()).unwrap()))
///     .collect();
/// for (i, shard) in shards.iter().enumerate() {
///     for _ in 0..=i {
///         let _ = shard.try_acquire_n_at(1, 0);
///     }
/// }
/// let total: Counts = shards.iter().map(Counted::counts).sum();
/// assert_eq!((total.admitted, total.rate_limited), (3, 3));
/// ```
impl Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        let since = match (self.exhausted_since, other.exhausted_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.zip(&other, u64::wrapping_add, since)
    }
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        *self = *self + other;
    }
}

impl Sum for Counts {
    fn sum<I: Iterator<Item = Counts>>(iter: I) -> Counts {
        iter.fold(Counts::default(), Add::add)
    }
}

impl<'a> Sum<&'a Counts> for Counts {
    fn sum<I: Iterator<Item = &'a Counts>>(iter: I) -> Counts {
        iter.copied().sum()
    }
}

/// One line: `admitted A (P permits), refused R (L rate-limited, F final), delayed D (wait
/// W), refunded N (M permits), exhausted E`, then `, exhausted since T ns` while an episode
/// is open; durations as `Duration`'s `Debug` prints them (`1.5s`, `250ms`).
impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        write!(
            f,
            "admitted {} ({} permit{}), refused {} ({} rate-limited, {} final), delayed {} \
             (wait {:?}), refunded {} ({} permit{}), exhausted {:?}",
            self.admitted,
            self.permits,
            plural(self.permits),
            self.refused(),
            self.rate_limited,
            self.final_refusals,
            self.delayed,
            self.wait(),
            self.refunds,
            self.permits_refunded,
            plural(self.permits_refunded),
            self.exhausted(),
        )?;
        if let Some(since) = self.exhausted_since {
            write!(f, ", exhausted since {since} ns")?;
        }
        if self.permits_charged != 0 || self.permits_credited != 0 {
            write!(
                f,
                ", charged {} permit{} after the work, credited {}",
                self.permits_charged,
                plural(self.permits_charged),
                self.permits_credited
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn counts(admitted: u64, permits: u64, since: Option<Nanos>) -> Counts {
        Counts {
            admitted,
            permits,
            rate_limited: 2,
            final_refusals: 1,
            delayed: 3,
            wait_ns: 1_500_000_000,
            refunds: 1,
            permits_refunded: 1,
            permits_charged: 0,
            permits_credited: 0,
            exhausted_ns: 250_000_000,
            exhausted_since: since,
        }
    }

    #[test]
    fn display_names_every_count() {
        assert_eq!(
            counts(4, 5, Some(7)).to_string(),
            "admitted 4 (5 permits), refused 3 (2 rate-limited, 1 final), delayed 3 (wait \
             1.5s), refunded 1 (1 permit), exhausted 250ms, exhausted since 7 ns"
        );
    }

    #[test]
    fn difference_and_sum_are_field_by_field() {
        let a = counts(4, 5, Some(7));
        let b = counts(10, 20, None);
        let d = b.since(&a);
        assert_eq!(
            (d.admitted, d.permits, d.rate_limited, d.wait_ns),
            (6, 15, 0, 0)
        );
        assert_eq!(d.exhausted_since, None);
        assert_eq!(
            a - a,
            Counts {
                exhausted_since: Some(7),
                ..Counts::default()
            }
        );
        let s = a + b;
        assert_eq!(
            (s.admitted, s.permits, s.delayed, s.exhausted_ns),
            (14, 25, 6, 500_000_000)
        );
        assert_eq!(s.exhausted_since, Some(7));
        assert_eq!((counts(0, 0, Some(9)) + a).exhausted_since, Some(7));
        assert_eq!([a, b].iter().sum::<Counts>(), s);
        let mut t = a;
        t += b;
        assert_eq!(t, s);
        // Across a wrap of a total, the difference is still exact.
        let before = Counts {
            wait_ns: u64::MAX - 1,
            ..Counts::default()
        };
        let after = Counts {
            wait_ns: 3,
            ..Counts::default()
        };
        assert_eq!(after.since(&before).wait_ns, 5);
    }

    #[test]
    fn derived_figures() {
        let c = counts(4, 5, Some(1_000));
        assert_eq!((c.refused(), c.decisions()), (3, 7));
        assert_eq!(c.wait(), Duration::from_millis(1_500));
        assert_eq!(c.exhausted(), Duration::from_millis(250));
        assert_eq!(c.exhausted_ns_at(1_500), 250_000_500);
        assert_eq!(c.exhausted_ns_at(10), 250_000_000);
        assert_eq!(counts(0, 0, None).exhausted_ns_at(u64::MAX), 250_000_000);
    }
}
