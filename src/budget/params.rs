//! One configuration of a budget in the numbers its decisions need ([`Params`]), and the pure
//! transitions of a budget word under it: take, charge, take up to, reserve, snapshot,
//! refund, and the conversion of a word from one configuration to the next.

use super::scale::{Scale, Units};
use super::word::{self, IDLE, TAT_MASK};
use super::{Charged, Mode};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

/// The most a reading may lag the state it is decided against and still count as a stale
/// reading (decided stricter), in ns: 2^33 ns (8.59 s), as the token bucket's
/// [`MAX_CLOCK_LAG_NS`](crate::rules::TokenBucketRule::MAX_CLOCK_LAG_NS).
pub(crate) const MAX_LAG_NS: Nanos = 1 << 33;

/// The bit of a receipt's tag a budget sets when the admission started from an idle state
/// at the reading rounded up to a whole unit: it added one unit more than its cost, which a
/// refund at its own time gives back too. One of a rule's bits (`Receipt::RULE_TAG`).
pub(crate) const ROUNDED: u8 = 1 << 0;
const _: () = assert!(ROUNDED & Receipt::RULE_TAG == ROUNDED);

/// The most a budget queues in reservations beyond its span and debt, in ns of its rate:
/// 2^40 ns (18.3 minutes). A reservation that would queue more is refused until it fits.
pub(crate) const MAX_QUEUE_NS: Nanos = 1 << 40;

/// The numbers a decision reads (the "hot" part of a configuration, read on every
/// decision): what [`Hot::take`] and the other per-request transitions need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hot {
    /// The generation tag its words carry (`0..GENERATIONS`).
    pub(crate) gen: u64,
    pub(crate) scale: Scale,
    /// `S = burst·K`: the most the TAT may run ahead of a reading for a request to conform.
    pub(crate) span: u64,
    /// `A`: the most a TAT may lie ahead of a reading and be read as a backlog (see
    /// [`word`]); above it, the TAT is read as behind the reading (idle).
    pub(crate) ahead: u64,
    /// The most permits one request may take: the burst, or `⌊(S + D) / K⌋` under debt.
    pub(crate) capacity: u32,
    pub(crate) mode: Mode,
    /// `D`: how far past `S` an oversized request or a charge may push the backlog.
    pub(crate) debt: u64,
}

/// A configuration's numbers, in the units of its [`Scale`]: the [`Hot`] part (reached
/// through `Deref`) and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) hot: Hot,
    /// The most a reservation may leave queued, in units (`A − lag`).
    pub(crate) queue: u64,
    /// When this configuration took effect, ns (the time words are converted at).
    pub(crate) since: Nanos,
    pub(crate) quota: Quota,
    pub(crate) max_debt: Nanos,
}

impl core::ops::Deref for Params {
    type Target = Hot;

    #[inline]
    fn deref(&self) -> &Hot {
        &self.hot
    }
}

/// The result of a budget transition that admits: the new word and the receipt.
pub(crate) type Admitted = (u64, Receipt);

impl Params {
    /// The parameters of `quota` with `max_debt` ns of debt, in `mode`, as generation `gen`,
    /// taking effect at `since`; `before` is the configuration it replaces (its threshold
    /// `A`, converted, is kept as a floor so that no converted backlog is ever read as idle).
    ///
    /// # Errors
    ///
    /// [`QuotaError::PeriodTooLarge`] for a period of 2^63 ns or more, and
    /// [`QuotaError::BurstTooLarge`] if the burst or the debt is more than 2^56 units.
    pub(crate) fn new(
        quota: &Quota,
        max_debt: Nanos,
        mode: Mode,
        gen: u64,
        since: Nanos,
        before: Option<&Params>,
    ) -> Result<Params, QuotaError> {
        let scale = Scale::new(quota)?;
        let k = scale.per_permit;
        let too_large = || QuotaError::BurstTooLarge {
            burst: quota.burst(),
            span_ns: u128::from(scale.units_to_ns_ceil(u64::from(quota.burst()))) * u128::from(k),
            max_span_ns: Quota::MAX_BURST_SPAN_NS,
        };
        // Each part within a quarter of the limit (the lag an eighth), so that the threshold
        // is within it: `A = S + D + queue + lag ≤ 2^58`.
        let quarter = LIMIT / 4;
        let span = u64::from(quota.burst())
            .checked_mul(k)
            .filter(|&s| s <= quarter)
            .ok_or_else(too_large)?;
        let debt = Some(scale.ns_to_units_ceil(max_debt))
            .filter(|&d| d <= quarter)
            .ok_or_else(too_large)?;
        let lag = scale.ns_to_units_ceil(MAX_LAG_NS).min(LIMIT / 8);
        let queue = span + debt + scale.ns_to_units_ceil(MAX_QUEUE_NS).min(quarter);
        let mut ahead = queue;
        if let Some(before) = before {
            // A backlog of at most `before.ahead` old units, converted (permits kept), one more
            // for the reading rounded up at the conversion; past `CUT` it is cut to it (see
            // `convert`).
            let kept = (u128::from(before.ahead) * u128::from(k))
                .div_ceil(u128::from(before.scale.per_permit));
            let kept = u64::try_from(kept).unwrap_or(CUT).min(CUT) + 1;
            ahead = ahead.max(kept);
        }
        // And a stale reading's lag on top of any of them: ≤ CUT + 1 + LIMIT / 8 ≤ LIMIT.
        let ahead = ahead + lag;
        let capacity = u32::try_from((span + debt) / k)
            .unwrap_or(u32::MAX)
            .max(quota.burst());
        Ok(Params {
            hot: Hot {
                gen,
                scale,
                span,
                ahead,
                capacity,
                mode,
                debt,
            },
            queue,
            since,
            quota: *quota,
            max_debt,
        })
    }
}

/// How many of `n` permits of `per_permit` units fit in `room` units (a division, out of
/// the line of the requests that fit whole).
#[cold]
#[inline(never)]
fn fit_in(room: u64, per_permit: u64, n: u32) -> u32 {
    u32::try_from(room / per_permit).map_or(n, |fit| fit.min(n))
}

/// [`Hot::wait`] for a scale whose unit is not 1 ns: an exact division, inlined so that a
/// caller that only asks whether it was admitted (and drops the refusal) never makes it.
#[inline]
fn wait_units(scale: Scale, at: Units, d: u64) -> Denied {
    scale
        .wait_ns(&at, d)
        .map_or(Denied::NEVER, Denied::rate_limited)
}

impl Hot {
    /// The backlog of `word` at the reading `at`, in units: how far its TAT lies ahead of the
    /// reading's floor, or 0 if it lies behind (idle). `word` is `IDLE` or of this
    /// generation.
    #[inline(always)]
    pub(crate) fn backlog(&self, word: u64, at: &Units) -> u64 {
        if word == IDLE {
            return 0;
        }
        debug_assert_eq!(word::gen(word), self.gen);
        let d = word::tat(word).wrapping_sub(at.floor) & TAT_MASK;
        if d <= self.ahead {
            d
        } else {
            0
        }
    }

    /// The refusal that waits `d` more units past the reading `at`: for units of 1 ns the
    /// wait is `d` ns (inline), otherwise an exact division, out of the decision's line.
    #[inline(always)]
    fn wait(&self, at: &Units, d: u64) -> Denied {
        if self.scale.is_ns() {
            return Denied::rate_limited(d);
        }
        wait_units(self.scale, *at, d)
    }

    /// The word after `n` permits (`cost` units) are charged from `word` at the reading `at`
    /// (with backlog `backlog`): the schedule resumes from its TAT, or from the reading
    /// (rounded up to a whole unit) if idle. Returns the new word and the charge's receipt
    /// (where it started, and whether the start was rounded up).
    #[inline(always)]
    fn advance(&self, word: u64, at: &Units, backlog: u64, n: u32, cost: u64) -> (u64, Receipt) {
        let (base, rounded) = if backlog > 0 {
            (word::tat(word), false)
        } else {
            (at.ceil() & TAT_MASK, at.between)
        };
        let mut receipt = Receipt::new(n, word::pack(self.gen, base));
        if rounded {
            receipt.tag |= ROUNDED;
        }
        (word::pack(self.gen, base.wrapping_add(cost)), receipt)
    }

    /// Decide `n ≥ 1` permits at `now`: GCRA on the unit clock; a request above the burst
    /// (under debt) is admitted only when the budget is full. Disabled: admitted, charging
    /// nothing; otherwise `n` above the capacity is refused (before a pause: no wait cures
    /// it), so that the shells need not check the size first
    /// (`Rule::TAKE_CHECKS_CAPACITY`).
    #[inline(always)]
    pub(crate) fn take(&self, word: u64, now: Nanos, n: u32) -> Result<Admitted, Denied> {
        if self.mode == Mode::Disabled {
            return Ok((word, Receipt::NOTHING));
        }
        if n > self.capacity {
            return Err(Denied::ExceedsCapacity {
                capacity: self.capacity,
            });
        }
        if self.mode == Mode::Paused {
            return Err(Denied::Paused);
        }
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        // n ≤ capacity: cost ≤ S + D ≤ 2^58.
        let cost = u64::from(n) * self.scale.per_permit;
        if cost <= self.span {
            if b + cost > self.span {
                return Err(self.wait(&at, b + cost - self.span));
            }
        } else if b > 0 {
            // Oversized: only from a full budget, which it leaves in debt.
            return Err(self.wait(&at, b));
        }
        Ok(self.advance(word, &at, b, n, cost))
    }

    /// Take as many of `n` permits as conform now (0 when none), exact.
    // Always inlined: see `Hot::charge`.
    #[inline(always)]
    pub(crate) fn take_up_to(&self, word: u64, now: Nanos, n: u32) -> (u64, u32, Receipt) {
        match self.mode {
            Mode::Enabled => {}
            Mode::Disabled => return (word, n, Receipt::NOTHING),
            Mode::Paused => return (word, 0, Receipt::NOTHING),
        }
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        let room = self.span.saturating_sub(b);
        let k = match u64::from(n).checked_mul(self.scale.per_permit) {
            // The whole request fits (the common case): no division.
            Some(cost) if cost <= room => n,
            _ => fit_in(room, self.scale.per_permit, n),
        };
        if k == 0 {
            return (word, 0, Receipt::NOTHING);
        }
        let (next, receipt) = self.advance(word, &at, b, k, u64::from(k) * self.scale.per_permit);
        (next, k, receipt)
    }

    /// The state as seen at `now`: whole permits a request could take, and the time until
    /// full.
    pub(crate) fn snapshot(&self, word: u64, now: Nanos) -> Snapshot {
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        let remaining = match self.mode {
            Mode::Paused => 0,
            Mode::Disabled | Mode::Enabled => {
                let fit = self.span.saturating_sub(b) / self.scale.per_permit;
                u32::try_from(fit).unwrap_or(u32::MAX)
            }
        };
        let full_after = self
            .scale
            .wait_ns(&at, b)
            .map_or(Duration::MAX, Duration::from_nanos);
        Snapshot::new(remaining, full_after)
    }

    /// How long from `now` until the permits on `receipt` (a reservation of this
    /// generation) conform: 0 if they do now.
    #[cfg(feature = "std")]
    pub(crate) fn wait_for(&self, receipt: &Receipt, now: Nanos) -> Nanos {
        let base = word::tat(receipt.mark());
        let cost = u64::from(receipt.n()) * self.scale.per_permit;
        // They conform once ⌊reading⌋ ≥ base + cost − S (≥ base when oversized).
        let target = if cost <= self.span {
            base.wrapping_add(cost).wrapping_sub(self.span) & TAT_MASK
        } else {
            base
        };
        let at = self.scale.units(now);
        let ahead = target.wrapping_sub(at.floor) & TAT_MASK;
        if ahead == 0 || ahead > self.ahead {
            return 0;
        }
        self.scale.wait_ns(&at, ahead).unwrap_or(u64::MAX)
    }

    /// Give back the admission on `receipt` (of this generation) at `at`: the part of its
    /// cost that no later reading can have absorbed, as the classic GCRA's refund.
    pub(crate) fn refund(&self, word: u64, receipt: &Receipt, at: Nanos) -> Option<u64> {
        if word == IDLE || receipt.n() == 0 {
            return None;
        }
        // The admission moved the TAT from `before` (its start, less the unit it was rounded
        // up by) by `added`.
        let rounded = u64::from(receipt.tag & ROUNDED != 0);
        let added = u64::from(receipt.n()) * self.scale.per_permit + rounded;
        let before = word::tat(receipt.mark()).wrapping_sub(rounded) & TAT_MASK;
        let now = self.scale.units(at);
        // How far the reading has passed the admission's start (0 if it lies before it).
        let passed = now.floor.wrapping_sub(before) & TAT_MASK;
        let passed = if passed <= self.ahead { passed } else { 0 };
        let give = added - added.min(passed);
        if give == 0 {
            return None;
        }
        // An idle start gives back down to the reading it started from, which is at least
        // the TAT it found: never more permissive, for a later reading or a stale one.
        Some(word::pack(self.gen, word::tat(word).wrapping_sub(give)))
    }

    /// The answer to a request for no permits at `now`: refused while the backlog passes
    /// the burst (a charge or an oversized request left the budget in debt), until it is
    /// back within it. Disabled or paused, admitted (a pause is not a debt).
    pub(crate) fn debt(&self, word: u64, now: Nanos) -> Result<(), Denied> {
        if self.mode != Mode::Enabled {
            return Ok(());
        }
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        if b > self.span {
            Err(self.wait(&at, b - self.span))
        } else {
            Ok(())
        }
    }

    /// `word` with up to `n` permits given back at `at` that no receipt names, never past
    /// full (`None` when it is full, or nothing changes).
    pub(crate) fn credit(&self, word: u64, n: u32, at: Nanos) -> Option<u64> {
        let b = self.backlog(word, &self.scale.units(at));
        let give = b.min(u64::from(n).saturating_mul(self.scale.per_permit));
        (give > 0).then(|| word::pack(self.gen, word::tat(word).wrapping_sub(give)))
    }

    /// The receipt of the permits of `receipt` (of this generation) past its first `keep`:
    /// they start `keep` permits' units after it, with no rounding of their own.
    pub(crate) fn split(&self, receipt: &Receipt, keep: u32) -> Receipt {
        // The mark is where the first permit started (after any rounding up of an idle
        // reading, which belongs to the first permits, kept).
        let start = word::tat(receipt.mark())
            .wrapping_add(u64::from(keep).wrapping_mul(self.scale.per_permit))
            & TAT_MASK;
        let mut tail = receipt.tail(keep, word::pack(self.gen, start));
        tail.tag &= !ROUNDED;
        tail
    }

    /// Whether `word` has been idle (full) at every reading from `since` on.
    pub(crate) fn idle_since(&self, word: u64, since: Nanos) -> bool {
        self.backlog(word, &self.scale.units(since)) == 0
    }
}

impl Hot {
    /// Charge `n` permits at `now` whatever the state (usage measured after the work): as
    /// many as fit below `S + D`, the rest reported as the shortfall. Disabled: nothing is
    /// charged.
    // Always inlined: the fast read inlines its decision once per scale (`live::read_hot`).
    #[inline(always)]
    pub(crate) fn charge(&self, word: u64, now: Nanos, n: u32) -> (u64, Charge) {
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        let k = self.scale.per_permit;
        if self.mode == Mode::Disabled {
            let charge = Charge {
                taken: 0,
                shortfall: 0,
                wait_ns: self.next_wait(b, &at),
                receipt: Receipt::NOTHING,
            };
            return (word, charge);
        }
        // Room below the ceiling, in units; the division only when `n` does not fit whole.
        let room = (self.span + self.debt).saturating_sub(b);
        let taken = match u64::from(n).checked_mul(k) {
            Some(need) if need <= room => n,
            _ => u32::try_from(room / k).map_or(n, |fits| fits.min(n)),
        };
        let (next, receipt, after) = if taken == 0 {
            (word, Receipt::NOTHING, b)
        } else {
            let (next, receipt) = self.advance(word, &at, b, taken, u64::from(taken) * k);
            (next, receipt, self.backlog(next, &at))
        };
        let charge = Charge {
            taken,
            shortfall: n - taken,
            wait_ns: self.next_wait(after, &at),
            receipt,
        };
        (next, charge)
    }

    /// The wait in ns a request for one permit faces from backlog `b` at `at` (`u64::MAX`:
    /// never, or past 2^64 ns).
    #[inline(always)]
    fn next_wait(&self, b: u64, at: &Units) -> u64 {
        let k = self.scale.per_permit;
        match (b + k).checked_sub(self.span) {
            Some(d) if d > 0 && self.scale.is_ns() => d,
            Some(d) if d > 0 => self.scale.wait_ns(at, d).unwrap_or(u64::MAX),
            _ => 0,
        }
    }
}

/// What a forced charge did, in the compact form the compare-and-swap loop carries (three
/// scalars, held in registers across the CAS; [`Charged`] is built from them after it).
pub(crate) struct Charge {
    /// Permits charged.
    pub(crate) taken: u32,
    /// Permits not charged (past the ceiling; 0 when disabled).
    pub(crate) shortfall: u32,
    /// The wait a request for one permit now faces, ns (`u64::MAX`: never).
    pub(crate) wait_ns: u64,
    /// The charge's receipt.
    pub(crate) receipt: Receipt,
}

impl Charge {
    /// The public report of a charge.
    #[inline(always)]
    pub(crate) fn report(taken: u32, shortfall: u32, wait_ns: u64) -> Charged {
        Charged {
            charged: taken,
            shortfall,
            wait: if wait_ns == u64::MAX {
                Duration::MAX
            } else {
                Duration::from_nanos(wait_ns)
            },
        }
    }
}

impl Params {
    /// Reserve `1 ≤ n ≤ capacity` permits at `now` to start within `max_wait` ns: the delay
    /// until they conform (an oversized request: until the budget is full), with the TAT
    /// advanced as if they were admitted then.
    #[inline]
    pub(crate) fn reserve(
        &self,
        word: u64,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
    ) -> Result<(u64, Nanos, Receipt), Denied> {
        match self.mode {
            Mode::Enabled => {}
            Mode::Disabled => return Ok((word, 0, Receipt::NOTHING)),
            Mode::Paused => return Err(Denied::Paused),
        }
        let at = self.scale.units(now);
        let b = self.backlog(word, &at);
        let cost = u64::from(n) * self.scale.per_permit;
        let short = if cost <= self.span {
            (b + cost).saturating_sub(self.span)
        } else {
            b
        };
        let Some(delay) = self.scale.wait_ns(&at, short) else {
            return Err(Denied::NEVER);
        };
        if delay > max_wait {
            return Err(Denied::rate_limited(delay - max_wait));
        }
        // The queue's own bound: what it leaves ahead of the reading must stay readable.
        if b + cost > self.queue {
            return Err(self.wait(&at, b + cost - self.queue));
        }
        let (next, receipt) = self.advance(word, &at, b, n, cost);
        Ok((next, delay, receipt))
    }

    /// `word` (of generation `self`, or `IDLE`) converted to `to` at `to.since`: the backlog
    /// at that time, in permits, kept and re-timed at the new rate (rounded up: a conversion
    /// never forgives a fraction of a unit).
    pub(crate) fn convert(&self, word: u64, to: &Params) -> u64 {
        if word == IDLE {
            return IDLE;
        }
        let c = to.since;
        let b = self.backlog(word, &self.scale.units(c));
        if b == 0 {
            return IDLE;
        }
        let kept = (u128::from(b) * u128::from(to.scale.per_permit))
            .div_ceil(u128::from(self.scale.per_permit));
        // With the rounded-up start and a reading's lag, ≤ to.ahead by construction of `to`,
        // unless it passes `CUT`: a backlog that long at the new rate is cut to it (the one
        // case a conversion forgives).
        let kept = u64::try_from(kept).unwrap_or(CUT).min(CUT);
        let start = to.scale.units(c).ceil() & TAT_MASK;
        word::pack(to.gen, start.wrapping_add(kept))
    }
}

/// The largest threshold a configuration may have, in units: 2^58, a quarter of the TAT
/// field's range (each of the span, the debt and the queue at most a quarter of it, the lag
/// an eighth).
const LIMIT: u64 = 1 << 58;

/// The longest backlog a conversion keeps, in units of the new configuration: what leaves
/// room under [`LIMIT`] for the rounding of the conversion's reading and a reading's lag.
pub(crate) const CUT: u64 = LIMIT - LIMIT / 8 - 1;
