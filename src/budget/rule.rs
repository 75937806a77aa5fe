//! [`BudgetRule`]: the budget's transitions as a [`Rule`], over its live configuration.

use super::live::Live;
use super::params::{Charge, Hot, Params};
use super::word::{self, IDLE};
use super::{BudgetConfig, Charged, Mode};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use crate::rules::{ReserveRule, Rule};
use alloc::sync::Arc;
use core::fmt;

/// The rule of a [`Budget`](crate::Budget): GCRA on an exact unit clock, with debt, forced
/// charges, partial grants and a configuration that can change while it runs.
///
/// Its state is one `u64` ([`Budget`](crate::Budget)'s "Word"); its configuration is
/// shared by every clone of the rule (a keyed budget's keys share their default's), so a change through any handle applies to all of them.
///
/// # Examples
///
/// The rule by hand, at explicit times:
///
/// ```
/// use limitcore::rules::Rule;
/// use limitcore::{BudgetRule, Quota};
///
/// let rule = BudgetRule::new(&"10/s burst 2".parse()?)?;
/// let mut word = rule.fresh();
/// rule.take(&mut word, 0, 2).unwrap();
/// let wait = rule.take(&mut word, 0, 1).unwrap_err().retry_after().unwrap();
/// assert_eq!(wait.as_millis(), 100);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
///
/// [`Keyed`]: crate::Keyed
#[derive(Clone)]
pub struct BudgetRule {
    pub(crate) live: Arc<Live>,
}

impl fmt::Debug for BudgetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = self.live.current();
        f.debug_struct("BudgetRule")
            .field("quota", &now.quota)
            .field("max_debt_ns", &now.max_debt)
            .field("mode", &now.mode)
            .finish()
    }
}

impl BudgetRule {
    /// The rule of `config`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::PeriodTooLarge`] for a rate whose period in lowest terms is 2^63 ns or
    /// more; [`QuotaError::BurstTooLarge`] if the burst or the debt is more than 2^56 units
    /// of the budget's clock (about 2.3 years of a rate of one permit per ns or slower; 2^56
    /// permits faster).
    pub fn with_config(config: &BudgetConfig) -> Result<Self, QuotaError> {
        Self::with_config_at(config, 0)
    }

    /// As [`BudgetRule::with_config`], its configuration taking effect at `since` (ns): the
    /// time a state converted into it is re-timed at.
    pub(crate) fn with_config_at(config: &BudgetConfig, since: Nanos) -> Result<Self, QuotaError> {
        Ok(BudgetRule {
            live: Arc::new(Live::new(
                &config.quota,
                config.max_debt_ns(),
                config.mode,
                since,
            )?),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> BudgetConfig {
        BudgetConfig::from_params(&self.live.current())
    }

    /// `word` in the current configuration, with it.
    #[inline]
    pub(crate) fn resolve(&self, word: u64) -> (Params, u64) {
        self.live.resolve(word)
    }

    /// Take as many of `n` permits as conform at `now` (0 when none): updates `word` and
    /// returns how many, with their receipt.
    #[inline]
    pub fn take_up_to(&self, word: &mut u64, now: Nanos, n: u32) -> (u32, Receipt) {
        let (next, taken, receipt) = self.decide(
            *word,
            #[inline(always)]
            move |hot, current| hot.take_up_to(current, now, n),
        );
        if taken > 0 {
            *word = next;
        }
        (taken, receipt)
    }

    /// Charge `n` permits at `now`, never refused: as many as fit below the burst plus the
    /// debt, the rest reported as the shortfall.
    #[inline]
    pub fn charge(&self, word: &mut u64, now: Nanos, n: u32) -> (Charged, Receipt) {
        let charge = self.charge_compact(word, now, n);
        (
            Charge::report(charge.taken, charge.shortfall, charge.wait_ns),
            charge.receipt,
        )
    }

    /// [`BudgetRule::charge`] in the compact form its shell carries across the CAS.
    #[inline(always)]
    pub(crate) fn charge_compact(&self, word: &mut u64, now: Nanos, n: u32) -> Charge {
        let (next, charge) = self.decide(
            *word,
            #[inline(always)]
            move |hot, current| hot.charge(current, now, n),
        );
        *word = next;
        charge
    }

    /// `decide` on `word` (as the configuration it was written under has it, converted if
    /// need be) and the hot numbers it decides under: the fast read's, with the decision
    /// inline (see [`Live::fast`]), else the general read's ([`Live::resolve_hot`]: any
    /// word, any mode), out of line.
    #[inline(always)]
    fn decide<R>(&self, word: u64, decide: impl Fn(&Hot, u64) -> R + Copy) -> R {
        let fast = self.live.fast(
            word,
            #[inline(always)]
            move |hot| decide(&hot, word),
        );
        match fast {
            Some(decided) => decided,
            None => self.decide_slow(word, decide),
        }
    }

    /// [`BudgetRule::decide`] off the fast read.
    #[cold]
    #[inline(never)]
    fn decide_slow<R>(&self, word: u64, decide: impl FnOnce(&Hot, u64) -> R) -> R {
        let (params, current) = self.live.resolve_hot(word);
        decide(&params, current)
    }

    /// How long from `now` until the reservation on `receipt` conforms, in the current
    /// configuration (a change since it was made re-times it), and the receipt in the
    /// current configuration's terms, which replaces it.
    #[cfg(feature = "std")]
    pub(crate) fn wait_for(&self, receipt: Receipt, now: Nanos) -> (Nanos, Receipt) {
        if receipt.n() == 0 {
            return (0, receipt);
        }
        let (params, mark) = self.resolve(receipt.mark());
        if mark == IDLE {
            return (0, Receipt::NOTHING);
        }
        let current = Receipt::new(receipt.n(), mark);
        (params.wait_for(&current, now), current)
    }

    /// The mode in force.
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        self.live.capacity().1
    }
}

impl Rule for BudgetRule {
    type State = u64;

    /// `take` refuses `n` above the capacity of the configuration it decides under (the
    /// fast read's, or the general read's), so the shells do not read the configuration a
    /// second time for their size check (issue 28: 9 instructions of `try_acquire_n`).
    const TAKE_CHECKS_CAPACITY: bool = true;

    /// A budget for `quota`, with no debt (a request above the burst is refused), enabled.
    ///
    /// # Errors
    ///
    /// As [`BudgetRule::with_config`].
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        BudgetRule::with_config(&BudgetConfig::new(*quota))
    }

    fn quota(&self) -> Quota {
        self.live.current().quota
    }

    /// The burst, or `⌊(burst + debt) / T⌋` permits under debt; `u32::MAX` while disabled
    /// (everything is admitted).
    #[inline(always)]
    fn capacity(&self) -> u32 {
        match self.live.capacity() {
            (_, Mode::Disabled) => u32::MAX,
            (capacity, Mode::Enabled | Mode::Paused) => capacity,
        }
    }

    #[inline]
    fn fresh(&self) -> u64 {
        IDLE
    }

    /// The fast read of the configuration (the word's own, current and enabled) and the
    /// decision inline; anything else out of line.
    #[inline(always)]
    fn take(&self, word: &mut u64, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        // Not `decide`: each branch returns its own refusal (a `?` after the merge carries
        // the fast path's refusal through the slow path's result in memory; issue 28: 5
        // more instructions a budget's take, 14 a byte budget's, 28 its refusal, 15 the
        // lanes').
        let current = *word;
        let fast = self.live.fast(
            current,
            #[inline(always)]
            |hot| hot.take(current, now, n),
        );
        let (next, receipt) = match fast {
            Some(decided) => decided?,
            None => self.decide_slow(current, move |hot, w| hot.take(w, now, n))?,
        };
        *word = next;
        Ok(receipt)
    }

    fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let (params, current) = self.live.resolve_hot(*word);
        params.snapshot(current, now)
    }

    /// A receipt of the current configuration is refunded as the classic GCRA refunds (the
    /// part of the cost no later reading can have absorbed); a receipt from before a change
    /// of configuration gets nothing back (never more permissive).
    fn refund(&self, word: &mut u64, receipt: &Receipt, at: Nanos) -> bool {
        let (params, current) = self.resolve(*word);
        if receipt.n() == 0 || word::gen(receipt.mark()) != params.gen || current == IDLE {
            return false;
        }
        match params.refund(current, receipt, at) {
            Some(next) => {
                *word = next;
                true
            }
            None => false,
        }
    }

    fn fresh_since(&self, word: &u64, since: Nanos, _now: Nanos) -> bool {
        let (params, current) = self.resolve(*word);
        current == IDLE || params.idle_since(current, since)
    }

    /// [`BudgetRule::charge`]: up to the burst plus the maximum debt, the rest the
    /// shortfall (a budget's debt is what its configuration allows); disabled, nothing.
    #[inline]
    fn charge(&self, word: &mut u64, now: Nanos, n: u32) -> u32 {
        self.charge_compact(word, now, n).shortfall
    }

    /// In debt while the backlog passes the burst; a disabled or paused budget admits a
    /// request for no permits.
    fn debt(&self, word: &u64, now: Nanos) -> Result<(), Denied> {
        let (params, current) = self.live.resolve_hot(*word);
        params.debt(current, now)
    }

    /// The TAT up to `n` permits earlier, never past full.
    fn credit(&self, word: &mut u64, n: u32, at: Nanos) -> bool {
        let (params, current) = self.resolve(*word);
        if current == IDLE {
            return false;
        }
        match params.credit(current, n, at) {
            Some(next) => {
                *word = next;
                true
            }
            None => false,
        }
    }

    /// The tail starts `keep` permits after the receipt's start, in the receipt's own
    /// configuration; a receipt from before a change of configuration keeps its mark (and
    /// a refund gives it nothing back, as any such receipt).
    fn split(&self, receipt: &Receipt, keep: u32) -> Receipt {
        let params = self.live.current();
        if word::gen(receipt.mark()) == params.gen {
            params.split(receipt, keep)
        } else {
            receipt.tail(keep, receipt.mark())
        }
    }
}

impl ReserveRule for BudgetRule {
    /// The delay until the permits conform (for a request above the burst, under debt:
    /// until the budget is full), with the TAT advanced as if they were admitted then; a
    /// reservation that would queue more than the budget's span, debt and 2^40 ns of its
    /// rate is refused until it fits.
    fn reserve(
        &self,
        word: &mut u64,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
    ) -> Result<Nanos, Denied> {
        self.reserve_with_receipt(word, now, n, max_wait)
            .map(|(delay, _)| delay)
    }
}

impl BudgetRule {
    /// [`ReserveRule::reserve`] with the reservation's receipt (to re-time or refund it).
    pub(crate) fn reserve_with_receipt(
        &self,
        word: &mut u64,
        now: Nanos,
        n: u32,
        max_wait: Nanos,
    ) -> Result<(Nanos, Receipt), Denied> {
        let (params, current) = self.resolve(*word);
        if n > params.capacity && params.mode != Mode::Disabled {
            return Err(Denied::ExceedsCapacity {
                capacity: params.capacity,
            });
        }
        let (next, delay, receipt) = params.reserve(current, now, n, max_wait)?;
        *word = next;
        Ok((delay, receipt))
    }
}
