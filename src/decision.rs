//! The decision vocabulary every layer speaks: what an admission took ([`Receipt`]), why a
//! request was refused ([`Denied`]), a read of a limiter's state ([`Snapshot`]), and a
//! decision with the state it left ([`Decision`]).
//!
//! It sits below the rules ([`rules`](crate::rules)) and the limiters' traits
//! ([`RateLimiter`](crate::RateLimiter)), which both speak it, and imports nothing of the
//! crate.

use core::fmt;
use core::time::Duration;

/// What an admission took, so that it can be given back ([`Refund::refund`](crate::Refund::refund),
/// and for a rule on a state of your own [`Rule::refund`](crate::rules::Rule::refund)).
///
/// `n` is the permits admitted; `mark` is the rule's own record of where they went (for the
/// TAT rules the schedule position the admission started from, in ns; for the window rules
/// the window number; for the sliding log the time the entries were recorded at, in ns).
///
/// A receipt refunds at most once: it is neither `Copy` nor `Clone`, and every limiter's
/// `refund` ([`Refund::refund`](crate::Refund::refund),
/// [`KeyedRefund::refund`](crate::KeyedRefund::refund)) takes it by value. A second refund
/// of the same admission, which would give back permits another caller may have taken
/// since, does not compile.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{FixedWindowRule, Rule};
/// use limitcore::Quota;
///
/// let rule = FixedWindowRule::new(&Quota::per_second(3)?)?;
/// let mut word = rule.fresh();
/// let receipt = rule.take(&mut word, 1_500_000_000, 2).unwrap();
/// assert_eq!((receipt.n(), receipt.mark()), (2, 1)); // 2 permits in window 1
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
///
/// Refunded once, a receipt is gone:
///
/// ```compile_fail,E0382
/// use limitcore::{Gcra, Quota, Refund};
/// use limitcore::clock::ManualClock;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?;
/// let receipt = limiter.acquire_refundable_at(1, 0)?;
/// limiter.refund(receipt, 0);
/// limiter.refund(receipt, 0); // error[E0382]: use of moved value: `receipt`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// and it cannot be copied to refund twice:
///
/// ```compile_fail,E0599
/// use limitcore::{Gcra, Quota, Refund};
/// use limitcore::clock::ManualClock;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?;
/// let receipt = limiter.acquire_refundable_at(1, 0)?;
/// limiter.refund(receipt.clone(), 0); // error[E0599]: no method named `clone`
/// limiter.refund(receipt, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Receipt {
    n: u32,
    mark: u64,
    /// Bits the limiter that issued the receipt keeps for itself; the decision layer never
    /// reads them. A rule's own bits are the low four ([`Receipt::RULE_TAG`]); a limiter
    /// that hands a rule's receipt on (a keyed limiter over any rule) keeps its own in the
    /// high four, so that both fit on one receipt. Each owner names its bits in its own
    /// module.
    pub(crate) tag: u8,
}

impl Receipt {
    /// The receipt of `n` permits recorded at `mark` (the rule's own meaning; see the type).
    #[inline]
    pub const fn new(n: u32, mark: u64) -> Self {
        Receipt { n, mark, tag: 0 }
    }

    /// The bits of [`Receipt::tag`](Receipt#structfield.tag) a rule may use; the others
    /// belong to the limiter that hands the rule's receipt on.
    #[cfg(any(feature = "keyed", feature = "budget"))]
    pub(crate) const RULE_TAG: u8 = 0x0f;

    /// The receipt of a request that took nothing (`n = 0`): its refund is a no-op.
    pub const NOTHING: Receipt = Receipt::new(0, 0);

    /// Permits admitted.
    #[inline]
    pub const fn n(&self) -> u32 {
        self.n
    }

    /// Where the rule recorded them (see the type).
    #[inline]
    pub const fn mark(&self) -> u64 {
        self.mark
    }

    /// The receipt of the permits past the first `keep` (`n() − keep` of them, saturating
    /// at 0) recorded at `mark`, with this receipt's own bits (so that the limiter that
    /// issued it still finds where they went): a rule's [`Rule::split`](crate::rules::Rule::split).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Receipt;
    ///
    /// let estimate = Receipt::new(100, 7);
    /// let unused = estimate.tail(30, 7);   // 30 used: the other 70 to give back
    /// assert_eq!((unused.n(), unused.mark()), (70, 7));
    /// ```
    #[inline]
    #[must_use]
    pub const fn tail(&self, keep: u32, mark: u64) -> Receipt {
        Receipt {
            n: self.n.saturating_sub(keep),
            mark,
            tag: self.tag,
        }
    }
}

/// Why a request was not admitted. A denial never changes the limiter's state.
///
/// # Examples
///
/// ```
/// use limitcore::{Denied, Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(2)?, ManualClock::new())?;
/// assert!(limiter.try_acquire_n(2).is_ok());
/// let denied = limiter.try_acquire().unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(limiter.try_acquire_n(3), Err(Denied::ExceedsCapacity { capacity: 2 }));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
// `repr(u8)`: an explicit tag. Without it `Result<(), Denied>` keeps its discriminant in the
// niche of `Duration`'s nanoseconds, so even `is_ok()` had to compute `retry_after` (a
// division by 10^9); with the tag the compiler drops that work when the caller does not
// look. Measured: GCRA's single-thread deny path went from 1.15x to 0.89x governor's time
// (BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum Denied {
    /// Not now. The same request conforms once `retry_after` has passed, if nothing else
    /// consumes in between; asking any earlier is denied again. Exact to the nanosecond,
    /// never rounded down, and always a wait that ends within the clock's range (a request
    /// that could only conform past it is [`Denied::BeyondHorizon`]).
    RateLimited {
        /// How long to wait before the same request conforms.
        retry_after: Duration,
    },
    /// Never: more permits were asked for at once than the limiter's burst (its capacity).
    /// Nothing was consumed.
    ExceedsCapacity {
        /// The most permits one request can ever take.
        capacity: u32,
    },
    /// Never within the clock's range: the state this request would leave (or the time it
    /// would have to wait for) lies past `u64::MAX` ns, 584 years from the clock's epoch.
    /// Like [`Denied::ExceedsCapacity`], no wait can cure it and nothing was consumed.
    /// A limiter can only answer it in the last burst span of its clock's range.
    BeyondHorizon,
    /// Not now, and no wait can be said: the limiter is paused (a
    /// [`Budget`](crate::Budget) in [`Mode::Paused`](crate::Mode::Paused)). Its waiters
    /// wake when the pause ends; nothing was consumed.
    Paused,
}

impl Denied {
    /// `Some(wait)` for [`Denied::RateLimited`] (a finite wait, exact and inclusive), `None`
    /// when waiting cannot help ([`Denied::ExceedsCapacity`], [`Denied::BeyondHorizon`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Denied;
    /// use std::time::Duration;
    ///
    /// let later = Denied::RateLimited { retry_after: Duration::from_millis(5) };
    /// assert_eq!(later.retry_after(), Some(Duration::from_millis(5)));
    /// assert_eq!(Denied::ExceedsCapacity { capacity: 3 }.retry_after(), None);
    /// assert!(Denied::BeyondHorizon.is_final());
    /// ```
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Denied::RateLimited { retry_after } => Some(*retry_after),
            Denied::ExceedsCapacity { .. } | Denied::BeyondHorizon | Denied::Paused => None,
        }
    }

    /// Whether no wait can cure this refusal ([`Denied::ExceedsCapacity`],
    /// [`Denied::BeyondHorizon`]): waits fail at once on it, and an HTTP layer answers it
    /// without a `Retry-After`. [`Denied::Paused`] is not final (the pause can end) but
    /// names no wait either.
    #[inline]
    pub fn is_final(&self) -> bool {
        matches!(self, Denied::ExceedsCapacity { .. } | Denied::BeyondHorizon)
    }

    /// The stricter of two refusals of the same request: a final one ([`Denied::is_final`]:
    /// waiting cannot help) over any wait, else the longer `retry_after`; of two final
    /// refusals, `self`. This is how [`All`](crate::All) reports a request that several limits refuse:
    /// waiting `retry_after` satisfies every one of them.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Denied;
    /// use std::time::Duration;
    ///
    /// let a = Denied::RateLimited { retry_after: Duration::from_millis(5) };
    /// let b = Denied::RateLimited { retry_after: Duration::from_millis(9) };
    /// assert_eq!(a.stricter(b), b);
    /// assert_eq!(a.stricter(Denied::ExceedsCapacity { capacity: 3 }), Denied::ExceedsCapacity { capacity: 3 });
    /// ```
    #[must_use]
    pub fn stricter(self, other: Denied) -> Denied {
        match (self, other) {
            (Denied::RateLimited { retry_after: a }, Denied::RateLimited { retry_after: b }) => {
                Denied::RateLimited {
                    retry_after: a.max(b),
                }
            }
            // A final refusal over anything; a pause over a wait.
            (Denied::RateLimited { .. } | Denied::Paused, worst) if worst.is_final() => worst,
            (Denied::RateLimited { .. }, Denied::Paused) => Denied::Paused,
            (worst, _) => worst,
        }
    }

    /// The refusal of a request that can never conform because the state it would leave
    /// lies past the clock's range (`u64::MAX` ns, 584 years).
    pub(crate) const NEVER: Denied = Denied::BeyondHorizon;

    /// A [`Denied::RateLimited`] of `nanos` nanoseconds.
    #[inline]
    pub(crate) fn rate_limited(nanos: u64) -> Denied {
        Denied::RateLimited {
            retry_after: Duration::from_nanos(nanos),
        }
    }
}

/// What a charge did: a forced charge (`charge_at`: usage measured after the work), or the
/// excess of a reservation settled above its estimate (`settle`).
///
/// A charge is never refused: the permits are recorded even past the limit, as debt (a
/// TAT beyond the burst for the GCRA family and a [`Budget`](crate::Budget), a count above
/// the limit for the window limiters), and every request after it, a request for no
/// permits included, is refused until the debt is paid back at the rate (or, for a
/// window, until the window ends). What a state cannot hold is never dropped silently: it
/// is [`Charged::shortfall`] (each limiter documents what it holds: a budget its configured
/// maximum debt, a token bucket `MAX_CLOCK_LAG_NS` of its rate; a window keeps its count
/// closed to the end of the window and gives nothing back from it).
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter, Refund};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock("10/s".parse()?, ManualClock::new())?;
/// let charged = limiter.charge_at(12, 0);      // 12 tokens used where 10 were allowed
/// assert_eq!((charged.charged, charged.shortfall), (12, 0));
/// // In debt by 2: even a request for no permits waits until it is paid back.
/// assert_eq!(charged.wait, Duration::from_millis(300));
/// assert!(limiter.try_acquire_n_at(0, 0).is_err());
/// assert!(limiter.try_acquire_n_at(0, 200_000_000).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Charged {
    /// Permits charged.
    pub charged: u32,
    /// Permits not charged because the state cannot hold them (past a budget's burst plus
    /// its maximum debt, or past what the limiter documents it can hold), or because a
    /// budget is disabled (then 0 is charged and nothing is short).
    pub shortfall: u32,
    /// How long a request for one permit now waits (zero if it would be admitted).
    pub wait: Duration,
}

impl Charged {
    /// The report of a charge of `charged` permits, `shortfall` not held, with the wait of
    /// a request for one permit now (`Err` of a check of one permit: its `retry_after`, or
    /// [`Duration::MAX`] when no wait helps).
    pub(crate) fn after(charged: u32, shortfall: u32, next: Result<(), Denied>) -> Charged {
        Charged {
            charged,
            shortfall,
            wait: match next {
                Ok(()) => Duration::ZERO,
                Err(denied) => denied.retry_after().unwrap_or(Duration::MAX),
            },
        }
    }
}

/// A [`Denied`] in two words, carried out of a compare-and-swap loop (crate-private): a
/// result of at most two words comes back from the loop's out-of-line path in registers, so
/// the fast path never writes a refusal to memory, and a caller that looks only at
/// `is_ok()` (or at the refusal's kind: [`Counted`](crate::Counted)) lets the optimiser
/// drop the `retry_after` it never reads. Made and unmade by `pack` / `unpack`, exactly
/// (a wait past 2^64 ns, which only a rule of the caller's can say, in whole seconds rounded
/// up; the most seconds stand for `Duration::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    /// The refusal's wait (ns) or capacity (permits); 0 for the others.
    value: u64,
    kind: Kind,
}

/// [`Packed`]'s kind: one per variant of [`Denied`] (its values leave a niche, so that a
/// `Result<(), Packed>` stays two words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    RateLimited,
    /// A wait too long for `u64` ns, in seconds (`u64::MAX`: `Duration::MAX`).
    RateLimitedSecs,
    ExceedsCapacity,
    BeyondHorizon,
    Paused,
}

impl Denied {
    /// This refusal in two words.
    #[inline(always)]
    pub(crate) fn pack(self) -> Packed {
        match self {
            Denied::RateLimited { retry_after } => match u64::try_from(retry_after.as_nanos()) {
                // The crate's rules' waits are ns of a clock: always this.
                Ok(nanos) => Packed {
                    value: nanos,
                    kind: Kind::RateLimited,
                },
                // A rule of the caller's may say more than 2^64 ns (584 years): whole
                // seconds, rounded up (a wait is never rounded down).
                Err(_) => Packed {
                    value: retry_after
                        .as_secs()
                        .saturating_add(u64::from(retry_after.subsec_nanos() > 0)),
                    kind: Kind::RateLimitedSecs,
                },
            },
            Denied::ExceedsCapacity { capacity } => Packed {
                value: u64::from(capacity),
                kind: Kind::ExceedsCapacity,
            },
            Denied::BeyondHorizon => Packed {
                value: 0,
                kind: Kind::BeyondHorizon,
            },
            Denied::Paused => Packed {
                value: 0,
                kind: Kind::Paused,
            },
        }
    }
}

impl From<Denied> for Packed {
    /// [`Denied::pack`], for the `?` of a packed decision's size checks.
    #[inline(always)]
    fn from(denied: Denied) -> Packed {
        denied.pack()
    }
}

impl Packed {
    /// The refusal packed.
    #[inline(always)]
    pub(crate) fn unpack(self) -> Denied {
        match self.kind {
            Kind::RateLimited => Denied::rate_limited(self.value),
            Kind::RateLimitedSecs => Denied::RateLimited {
                // The most seconds stand for the longest wait (never rounded down).
                retry_after: if self.value == u64::MAX {
                    Duration::MAX
                } else {
                    Duration::from_secs(self.value)
                },
            },
            Kind::ExceedsCapacity => Denied::ExceedsCapacity {
                capacity: self.value as u32,
            },
            Kind::BeyondHorizon => Denied::BeyondHorizon,
            Kind::Paused => Denied::Paused,
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::RateLimited { retry_after } => {
                write!(f, "rate limited: retry after {retry_after:?}")
            }
            Denied::ExceedsCapacity { capacity } => write!(
                f,
                "request exceeds the limiter's capacity of {capacity} permits and can never conform"
            ),
            Denied::BeyondHorizon => f.write_str(
                "request could only conform past the end of the clock's range and never will",
            ),
            Denied::Paused => f.write_str("the limiter is paused"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Denied {}

/// A read of a limiter's state that consumes nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
/// limiter.try_acquire_n(4).unwrap();
/// let s = limiter.snapshot();
/// assert_eq!(s.remaining, 6);
/// assert_eq!(s.full_after, Duration::from_millis(400));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Snapshot {
    /// Permits a request could take right now (`0..=burst`).
    pub remaining: u32,
    /// How long until the limiter is full again (`burst` permits); zero if it is full.
    pub full_after: Duration,
}

impl Snapshot {
    /// A snapshot of `remaining` permits, full again after `full_after`: for limiters
    /// outside this crate (a remote limiter reporting the state its server decided on), since
    /// the struct is `#[non_exhaustive]` and cannot be built with a literal there.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::Snapshot;
    /// use std::time::Duration;
    ///
    /// let s = Snapshot::new(3, Duration::from_millis(20));
    /// assert_eq!((s.remaining, s.full_after), (3, Duration::from_millis(20)));
    /// ```
    #[inline]
    pub const fn new(remaining: u32, full_after: Duration) -> Self {
        Snapshot {
            remaining,
            full_after,
        }
    }
}

/// A decision together with the state it left, read in the same step (so that an HTTP
/// layer can write `RateLimit` headers without a second, racy read of the limiter).
///
/// `state` is the limiter's state at the decision's time just after the decision: after an
/// admission, with its permits taken; after a refusal, the unchanged state the refusal saw.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
/// let d = limiter.decide_n(4);
/// assert!(d.is_admitted());
/// assert_eq!(d.state.remaining, 6);                          // what the 4 left
/// assert_eq!(d.state.full_after, Duration::from_millis(400));
/// let d = limiter.decide_n(7);
/// assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
/// assert_eq!(d.state.remaining, 6);                          // a refusal takes nothing
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Decision {
    /// `Ok(())` if the request was admitted, the refusal otherwise.
    pub result: Result<(), Denied>,
    /// The state this decision left, at its own time.
    pub state: Snapshot,
}

impl Decision {
    /// Whether the request was admitted.
    #[inline]
    pub fn is_admitted(&self) -> bool {
        self.result.is_ok()
    }

    /// The wait a refusal reports ([`Denied::retry_after`]); `None` when admitted or when
    /// waiting cannot help.
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        self.result.err().and_then(|d| d.retry_after())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal packed into two words comes back exactly (a wait past 2^64 ns, only a
    /// rule of the caller's, in whole seconds rounded up), and a result of it stays two
    /// words.
    #[test]
    fn packed_refusals_come_back_exactly() {
        let exact = [
            Denied::rate_limited(0),
            Denied::rate_limited(1),
            Denied::rate_limited(999_999_999),
            Denied::rate_limited(1_000_000_000),
            Denied::rate_limited(u64::MAX),
            Denied::RateLimited {
                retry_after: Duration::new(18_446_744_073, 709_551_615),
            },
            Denied::ExceedsCapacity { capacity: 0 },
            Denied::ExceedsCapacity { capacity: u32::MAX },
            Denied::BeyondHorizon,
            Denied::Paused,
        ];
        for denied in exact {
            assert_eq!(denied.pack().unpack(), denied);
        }
        // One ns past `u64::MAX` ns: whole seconds, up.
        let long = Denied::RateLimited {
            retry_after: Duration::new(18_446_744_073, 709_551_616),
        };
        assert_eq!(
            long.pack().unpack().retry_after(),
            Some(Duration::from_secs(18_446_744_074))
        );
        let longest = Denied::RateLimited {
            retry_after: Duration::MAX,
        };
        assert_eq!(longest.pack().unpack(), longest);
        let whole = Denied::RateLimited {
            retry_after: Duration::from_secs(u64::MAX),
        };
        assert_eq!(whole.pack().unpack(), longest, "up, never down");
        assert_eq!(core::mem::size_of::<Result<(), Packed>>(), 16);
    }
}
