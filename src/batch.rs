//! [`Batch`]: the all-or-nothing protocol over several limits, keyed or not, each with its
//! own request, some of them soft; [`All`](crate::All) decides on it, and so can a service
//! that reports each limit's part of a decision.

use crate::clock::Nanos;
use crate::decision::{Decision, Denied, Receipt, Snapshot};
use crate::limiter::{KeyedRefund, Refund};
use core::cell::Cell;
use core::fmt;
use core::time::Duration;

/// One limit of a [`Batch`], keyed or not: the operations the all-or-nothing protocol needs.
///
/// Every [`Refund`] is a part (and so `&L`, `Box<L>` and `Arc<L>` of one, `Box<dyn Refund>`
/// too), and so is every [`KeyedRefund<K>`] with its key ([`WithKey`]). Implement it for a
/// type of your own to put a limit of your own in a batch, or to change what one part
/// does. Every method works at an explicit time, in ns of the part's clock
/// ([`Nanos`]); the parts of one batch must share one time line.
///
/// # Examples
///
/// ```
/// use limitcore::{Gcra, Part, Quota};
/// use limitcore::clock::ManualClock;
///
/// let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
/// let (receipt, state) = limiter.decide(4, 0);
/// assert_eq!(state.remaining, 6);
/// limiter.refund(receipt.unwrap(), 0);
/// assert_eq!(Part::snapshot(&limiter, 0).remaining, 10);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub trait Part {
    /// Take `n` permits at `now`: the admission's receipt (its refund gives them back) or
    /// the refusal (which changes nothing), with the state the decision left.
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot);

    /// [`Part::decide`] without the state, for a batch that reads none.
    #[inline]
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.decide(n, now).0
    }

    /// Give back an admission of this part at `at` (ns).
    fn refund(&self, receipt: Receipt, at: Nanos);

    /// Whether `n` permits would be admitted at `now`, consuming nothing.
    ///
    /// # Errors
    ///
    /// The refusal the part would make.
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied>;

    /// The state at `now`, consuming nothing.
    fn snapshot(&self, now: Nanos) -> Snapshot;

    /// The part's clock (ns).
    fn now(&self) -> Nanos;
}

impl<L: Refund + ?Sized> Part for L {
    #[inline]
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        self.decide_refundable_at(n, now)
    }
    #[inline]
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.acquire_refundable_at(n, now)
    }
    fn refund(&self, receipt: Receipt, at: Nanos) {
        Refund::refund(self, receipt, at);
    }
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.check_at(n, now)
    }
    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.snapshot_at(now)
    }
    fn now(&self) -> Nanos {
        crate::limiter::RateLimiter::now(self)
    }
}

/// A keyed limit with one of its keys: a [`Part`] of a [`Batch`]. Two references, so a
/// batch over keyed limits allocates nothing.
///
/// # Examples
///
/// ```
/// use limitcore::{Keyed, Part, Quota, WithKey};
/// use limitcore::clock::ManualClock;
/// use limitcore::rules::GcraRule;
///
/// let per_client: Keyed<u32, GcraRule, ManualClock> = Keyed::with_clock(Quota::per_second(5)?, ManualClock::new())?;
/// let seven = WithKey(&per_client, &7);
/// assert!(seven.decide(5, 0).0.is_ok());
/// assert!(seven.check(1, 0).is_err());
/// assert!(WithKey(&per_client, &8).check(1, 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct WithKey<'a, L: ?Sized, K: ?Sized>(pub &'a L, pub &'a K);

impl<L: ?Sized, K: ?Sized> Clone for WithKey<'_, L, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L: ?Sized, K: ?Sized> Copy for WithKey<'_, L, K> {}

impl<L: ?Sized, K: ?Sized> fmt::Debug for WithKey<'_, L, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WithKey")
    }
}

impl<L: KeyedRefund<K> + ?Sized, K: ?Sized> Part for WithKey<'_, L, K> {
    #[inline]
    fn decide(&self, n: u32, now: Nanos) -> (Result<Receipt, Denied>, Snapshot) {
        self.0.decide_refundable_at(self.1, n, now)
    }
    #[inline]
    fn acquire(&self, n: u32, now: Nanos) -> Result<Receipt, Denied> {
        self.0.acquire_refundable_at(self.1, n, now)
    }
    fn refund(&self, receipt: Receipt, at: Nanos) {
        self.0.refund(self.1, receipt, at);
    }
    fn check(&self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.check_at(self.1, n, now)
    }
    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.0.snapshot_at(self.1, now)
    }
    fn now(&self) -> Nanos {
        self.0.now()
    }
}

/// One request of a [`Batch`]: `n` permits of `part`. A soft request's refusal does not
/// refuse the batch (a limit in shadow mode: decided and reported, never in the way), so
/// a batch of soft requests decides each on its own.
///
/// # Examples
///
/// ```
/// use limitcore::Ask;
///
/// let hard = Ask::new("a limit", 2);
/// assert!(!hard.soft && Ask::soft("a shadow limit", 2).soft);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<P> {
    /// The limit asked.
    pub part: P,
    /// Permits asked (0: a look at the state that takes nothing).
    pub n: u32,
    /// Its refusal does not refuse the batch.
    pub soft: bool,
}

impl<P> Ask<P> {
    /// `n` permits of `part`; a refusal refuses the batch.
    pub const fn new(part: P, n: u32) -> Self {
        Ask {
            part,
            n,
            soft: false,
        }
    }

    /// `n` permits of `part`; a refusal refuses only this request.
    pub const fn soft(part: P, n: u32) -> Self {
        Ask {
            part,
            n,
            soft: true,
        }
    }
}

/// The all-or-nothing protocol over the requests `asks(0)`, `asks(1)`, … (up to the first
/// `None`), each a [`Part`] with its own count, hard or soft ([`Ask`]): the batch is
/// admitted only if every hard request is, and when one refuses, every request already
/// admitted is refunded, so no limit keeps a charge.
///
/// The requests are taken in order at one time, `now`; on the first hard refusal the
/// earlier admissions are refunded, the latest first (at `now`, or the refusing part's
/// clock when that is later, so an explicit-time decision leaves no trace; with the clock,
/// at most the nanoseconds between the two steps stay charged, never a permit), and the
/// later requests are only checked: the batch's refusal is the strictest of the hard ones
/// ([`Denied::stricter`]). A soft request's refusal leaves its part uncharged and the
/// batch going. `asks` is called once for each index, in order, so the requests can be
/// built on the fly (two references for a keyed limit), and a decision allocates nothing:
/// its record lives on the stack, one frame per request (a batch's length is bounded by
/// the stack).
///
/// Between a charge and its refund, the charge is visible to other threads: a concurrent
/// request may be refused because of a request that is about to be refused itself. That
/// only ever makes a decision stricter; no interleaving admits more than every limit
/// allows.
///
/// # Examples
///
/// Each limit's part of a decision (a rate-limit service's per-descriptor statuses):
///
/// ```
/// use limitcore::{Ask, Batch, Gcra, Quota};
/// use limitcore::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let user = Gcra::with_clock(Quota::per_second(5)?, clock.clone())?;
/// let shadow = Gcra::with_clock(Quota::per_second(1)?, clock.clone())?;
/// let global = Gcra::with_clock(Quota::per_second(3)?, clock.clone())?;
/// let asks = [Ask::new(&user, 4), Ask::soft(&shadow, 4), Ask::new(&global, 4)];
///
/// let mut states = [None; 3];
/// let refused = Batch::new(|i| asks.get(i).copied())
///     .decide_at(0, |i, decision| states[i] = Some(decision));
/// assert!(refused.is_err());                                   // the global limit refuses 4
/// let [user_part, shadow_part, global_part] = states.map(Option::unwrap);
/// assert_eq!((user_part.result, user_part.state.remaining), (Ok(()), 5)); // admitted alone, refunded
/// assert!(!shadow_part.is_admitted() && !global_part.is_admitted());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Batch<A> {
    asks: A,
}

impl<A> fmt::Debug for Batch<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Batch")
    }
}

impl<A> Batch<A> {
    /// The batch of the requests `asks(0)`, `asks(1)`, … up to the first `None`.
    pub const fn new(asks: A) -> Self {
        Batch { asks }
    }
}

/// The state a batch that reads none gives its records.
const UNREAD: Snapshot = Snapshot {
    remaining: 0,
    full_after: Duration::ZERO,
};

/// A request the batch has decided, in the frame that decided it, linked to the one before:
/// the latest first is the order of the refunds.
struct Decided<'a, P> {
    index: usize,
    part: P,
    /// The admission's receipt, until a refusal of the batch gives it back (`None` for a
    /// soft request refused).
    receipt: Cell<Option<Receipt>>,
    decision: Decision,
    earlier: Option<&'a Decided<'a, P>>,
}

/// `latest` and every request decided before it, the latest first.
fn latest_first<'a, P>(
    latest: Option<&'a Decided<'a, P>>,
) -> impl Iterator<Item = &'a Decided<'a, P>> {
    core::iter::successors(latest, |d| d.earlier)
}

impl<P: Part, A: Fn(usize) -> Option<Ask<P>>> Batch<A> {
    /// Take every request at `now` (ns), all or nothing.
    ///
    /// # Errors
    ///
    /// The strictest refusal of the first hard request refused and the hard requests after
    /// it (only checked); nothing is charged then.
    pub fn try_acquire_at(&self, now: Nanos) -> Result<(), Denied> {
        self.decide_from::<false, _>(0, now, None, &mut |_, _| {})
    }

    /// [`Batch::try_acquire_at`], with each request's part of the decision given to
    /// `each(index, decision)`, once for every request, after the batch is decided and
    /// refunded: admitted, each request's own decision and the state it left; refused, each
    /// request's result alone (an earlier request admitted, `Ok`, though refunded; a later
    /// one, only checked) and its part's state read after the refunds, at `now`.
    ///
    /// # Errors
    ///
    /// As [`Batch::try_acquire_at`]'s.
    pub fn decide_at(
        &self,
        now: Nanos,
        mut each: impl FnMut(usize, Decision),
    ) -> Result<(), Denied> {
        self.decide_from::<true, _>(0, now, None, &mut each)
    }

    /// Decide the requests from `i` on, `earlier` the ones before (with `STATES`, through
    /// their parts' decisions, reporting them to `each`).
    fn decide_from<const STATES: bool, F: FnMut(usize, Decision)>(
        &self,
        i: usize,
        now: Nanos,
        earlier: Option<&Decided<'_, P>>,
        each: &mut F,
    ) -> Result<(), Denied> {
        let Some(ask) = (self.asks)(i) else {
            // Every request decided and the batch admitted: each keeps its own decision.
            if STATES {
                for d in latest_first(earlier) {
                    each(d.index, d.decision);
                }
            }
            return Ok(());
        };
        let (result, state) = if STATES {
            ask.part.decide(ask.n, now)
        } else {
            (ask.part.acquire(ask.n, now), UNREAD)
        };
        let (receipt, result) = match result {
            Ok(receipt) => (Some(receipt), Ok(())),
            Err(denied) if ask.soft => (None, Err(denied)),
            Err(denied) => return Err(self.refuse::<STATES, F>(i, ask, denied, now, earlier, each)),
        };
        let decided = Decided {
            index: i,
            part: ask.part,
            receipt: Cell::new(receipt),
            decision: Decision { result, state },
            earlier,
        };
        self.decide_from::<STATES, F>(i + 1, now, Some(&decided), each)
    }

    /// Request `i`, `ask`, refused the batch with `denied`: every earlier admission given
    /// back, the latest first, then the later requests checked; the batch's refusal.
    fn refuse<const STATES: bool, F: FnMut(usize, Decision)>(
        &self,
        i: usize,
        ask: Ask<P>,
        denied: Denied,
        now: Nanos,
        earlier: Option<&Decided<'_, P>>,
        each: &mut F,
    ) -> Denied {
        // Refund at the later of the request's time and the clock's, so that every request
        // decided in between was decided before it.
        let at = now.max(ask.part.now());
        for d in latest_first(earlier) {
            if let Some(receipt) = d.receipt.take() {
                d.part.refund(receipt, at);
            }
        }
        if STATES {
            // Read only now, so that a part named twice reports every refund.
            for d in latest_first(earlier) {
                let state = d.part.snapshot(now);
                each(
                    d.index,
                    Decision {
                        state,
                        ..d.decision
                    },
                );
            }
            let state = ask.part.snapshot(now);
            each(
                i,
                Decision {
                    result: Err(denied),
                    state,
                },
            );
        }
        let mut refusal = denied;
        let mut j = i + 1;
        while let Some(later) = (self.asks)(j) {
            let result = later.part.check(later.n, now);
            if let (Err(d), false) = (result, later.soft) {
                refusal = refusal.stricter(d);
            }
            if STATES {
                let state = later.part.snapshot(now);
                each(j, Decision { result, state });
            }
            j += 1;
        }
        refusal
    }
}
