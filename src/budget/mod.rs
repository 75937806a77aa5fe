//! Budgets: a limiter for storage engines and anything else that spends units (bytes, CPU
//! time, I/O operations) it cannot always split or refuse: [`Budget`], on the rule
//! [`BudgetRule`].
//!
//! A budget is GCRA (ATM Forum TM 4.0) with what the storage engines that left governor
//! needed from it:
//!
//! - **Byte rates, exactly.** Any [`Quota`] whose rate has a 32-bit numerator in lowest
//!   terms, `64GiB/s` included: time is counted in units of the budget's own clock
//!   ([`Budget`]'s "Clock"), so every permit costs a whole number of units and the long-run
//!   rate is exact; each idle restart rounds the reading up to the next unit (under 1 ns),
//!   against the caller.
//! - **Debt** ([`BudgetConfig::max_debt`]): a request above the burst is admitted as soon as
//!   the budget is full (at once if it is) and leaves it in debt; later requests wait until
//!   the debt is repaid at the rate (CockroachDB's `quotapool.TokenBucket`; Neon's pageserver
//!   lets such a request wait upfront instead, for the same schedule). Without debt, the
//!   default, such a request is refused as [`ExceedsCapacity`](crate::Denied::ExceedsCapacity).
//! - **Forced charges** ([`Budget::charge`]): usage measured after the work (TiKV's
//!   `consume_sample`), never refused, saturating at the burst plus the debt with the
//!   shortfall reported.
//! - **Partial grants** ([`Budget::take_up_to`]): as many permits as conform now (RocksDB's
//!   and TiKV's `min(available, n)`).
//! - **Live reconfiguration** ([`Budget::reconfigure`]): a new rate, burst, debt or mode
//!   applies to the next decision; the state is kept in permits and re-timed at the new rate,
//!   so neither a rise nor a cut creates or forgives a permit. [`Mode::Disabled`] admits
//!   everything and charges nothing (TiKV's limit of 0); [`Mode::Paused`] admits nothing and
//!   its waiters wake when it ends (RisingWave's `Pause`; the refusal is
//!   [`Paused`](crate::Denied::Paused)).
//! - **Waits in order** (`Budget::acquire`, `Budget::acquire_blocking`): a
//!   waiter takes its place in the schedule first and then sleeps until it, so a large
//!   request is never overtaken by small ones, and waiters that arrive during a pause keep
//!   their order when it ends; a change of configuration re-times every place (and fails a
//!   waiter that no longer fits with `ExceedsCapacity`, or releases every waiter uncharged
//!   when the budget is disabled); a wait dropped before it ends gives its place back at
//!   once. The waits sleep on the budget's clock.
//!
//! # Decisions
//!
//! With burst `B`, emission interval `T` and debt `D` (ns): `n` permits at `now` are
//! admitted iff `max(TAT, now) + n·T ≤ now + B·T` when `n ≤ B`, or, when `B < n ≤ (B·T +
//! D) / T`, iff `TAT ≤ now` (full); the TAT then becomes `max(TAT, now) + n·T`, with `now`
//! rounded up to the budget's unit when the budget was idle. `retry_after` is exact and
//! inclusive. In any window of length `w` a budget without debt admits (and charges) at
//! most `B + ⌈w / T⌉ − 1` permits, as GCRA; with debt, at most `B + ⌈(w + D) / T⌉ − 1`:
//! every admission or charge moves the TAT by its cost from at least the window's start,
//! and none leaves it more than `B·T + D` past its own time.
//!
//! # Examples
//!
//! ```
//! use limitcore::{Budget, BudgetConfig, Mode, Quota, RateLimiter};
//! use limitcore::clock::ManualClock;
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! // 64 MiB/s, 1 MiB at once, up to 1 s of debt.
//! let config = BudgetConfig::new("64MiB/s burst 1MiB".parse()?).max_debt(Duration::from_secs(1));
//! let budget = Budget::with_config(&config, clock.clone())?;
//! budget.try_acquire_n(4 << 20)?;                         // 4 MiB from a full budget: debt
//! let wait = budget.try_acquire_n(1).unwrap_err().retry_after().unwrap();
//! assert_eq!(wait, Duration::from_nanos(46_875_015));    // (3 MiB + 1 byte) at 64 MiB/s
//! let charged = budget.charge(1 << 20);                   // 1 MiB read, charged after the fact
//! assert_eq!(charged.shortfall, 0);
//! budget.reconfigure(&config.quota("128MiB/s burst 1MiB".parse()?))?; // twice as fast
//! assert_eq!(budget.snapshot().full_after, Duration::from_nanos(39_062_500));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod live;
mod params;
mod rule;
mod scale;
mod seqlock;
mod word;

#[cfg(feature = "std")]
mod wait;

pub use rule::BudgetRule;
#[cfg(feature = "io")]
pub(crate) use wait::Entry;
#[cfg(feature = "std")]
#[allow(deprecated)]
pub use wait::Waiter;
#[cfg(feature = "std")]
pub use wait::{Acquire, AcquireOwned};

use self::params::Charge;
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
#[cfg(feature = "std")]
use crate::decision::Denied;
use crate::limiter::RateLimiter;
use crate::limiters::Limiter;
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

/// A budget: GCRA on an exact unit clock with debt, forced charges, partial grants, live
/// reconfiguration and ordered waits; [`BudgetRule`] in the [`Limiter`] shell. Each is
/// described where it is set or called: [`BudgetConfig::max_debt`], [`Budget::charge`],
/// [`Budget::take_up_to`], [`Budget::reconfigure`], [`Mode`], and (feature `std`) the
/// `acquire` waits.
///
/// # Clock
///
/// A budget counts time in units of `u = T / K` ns, `K` units a permit: `u = 1 ns` when
/// the emission interval `T` is a whole number of ns, else `T / 2^F` for the least `F` that
/// makes a unit at most 1 ns (`F = 0` above 10^9 permits a second: a unit is a permit). So
/// `3/500ms` (T = 166 666 666.67 ns) and `64GiB/s` (T = 0.0146 ns) are kept exactly, where
/// the nanosecond limiters round the first up by 2 ppb and refuse the second.
///
/// # Word
///
/// One `AtomicU64`: a 4-bit generation (which configuration's units the rest is in) and the
/// TAT modulo 2^60 units, read against each reading (so the budget has no horizon; the
/// price is in "Limits"). A fresh budget's word is the generation-free `IDLE`.
///
/// # Limits
///
/// - A reading more than 8.59 s (2^33 ns) behind the state beyond its span, debt and queue
///   is read as a jump forward (as [`TokenBucket`](crate::TokenBucket)'s).
/// - A budget idle for at least `2^60` units less its threshold (13 years or more for units
///   near 1 ns; 194 days at 64 GiB/s) may for that long read as holding up to its
///   threshold of backlog: stricter, never more permissive.
/// - Reservations queue at most 2^40 ns (18.3 min) of the rate beyond the burst and debt
///   (or 2^56 units, if fewer: above 2^16 permits a ns).
/// - A change of configuration keeps a backlog of up to 2^58 units of the new rate (9
///   years for units near 1 ns); one longer (a fast rate's queue, cut to a very slow rate) is
///   cut to that.
/// - A receipt taken before a change of configuration refunds nothing.
pub type Budget<C = DefaultClock> = Limiter<BudgetRule, C>;

/// What a budget decides by: its [`Quota`] (rate and burst), the debt it may run into, and
/// its [`Mode`].
///
/// # Examples
///
/// ```
/// use limitcore::{BudgetConfig, Mode};
/// use std::time::Duration;
///
/// let config = BudgetConfig::new("2GB/s burst 4MB".parse()?)
///     .max_debt(Duration::from_millis(500))
///     .mode(Mode::Enabled);
/// assert_eq!(config.get_max_debt(), Duration::from_millis(500));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// The rate and the burst.
    pub quota: Quota,
    max_debt: Duration,
    /// Enabled, disabled or paused.
    pub mode: Mode,
}

impl BudgetConfig {
    /// `quota`, no debt, enabled.
    pub fn new(quota: Quota) -> Self {
        BudgetConfig {
            quota,
            max_debt: Duration::ZERO,
            mode: Mode::Enabled,
        }
    }

    /// The same with `quota`.
    #[must_use]
    pub fn quota(self, quota: Quota) -> Self {
        BudgetConfig { quota, ..self }
    }

    /// The same with up to `max_debt` of debt: a backlog that long beyond the burst
    /// (rounded up to the budget's unit; at most 2^58 units with the burst). Zero: a request
    /// above the burst is refused, and a charge saturates at an empty budget.
    #[must_use]
    pub fn max_debt(self, max_debt: Duration) -> Self {
        BudgetConfig { max_debt, ..self }
    }

    /// The same in `mode`.
    #[must_use]
    pub fn mode(self, mode: Mode) -> Self {
        BudgetConfig { mode, ..self }
    }

    /// The debt allowed.
    pub fn get_max_debt(&self) -> Duration {
        self.max_debt
    }

    pub(crate) fn max_debt_ns(&self) -> Nanos {
        duration_to_nanos(self.max_debt)
    }

    fn from_params(p: &params::Params) -> Self {
        BudgetConfig {
            quota: p.quota,
            max_debt: Duration::from_nanos(p.max_debt),
            mode: p.mode,
        }
    }
}

/// Whether a budget limits, admits everything, or admits nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Decide by the quota (the default).
    #[default]
    Enabled,
    /// Admit everything and charge nothing (forced charges are not recorded either); the
    /// state resumes as it was when the budget is enabled again.
    Disabled,
    /// Admit nothing ([`Paused`](crate::Denied::Paused)); forced charges are still recorded. Waiters sleep
    /// until the mode changes, then decide again.
    Paused,
}

impl Mode {
    pub(crate) fn from_word(word: u64) -> Mode {
        match word {
            1 => Mode::Disabled,
            2 => Mode::Paused,
            _ => Mode::Enabled,
        }
    }
}

/// What a forced charge ([`Budget::charge`]) did: the crate's [`Charged`](crate::Charged),
/// named here too for the budgets' users.
pub use crate::decision::Charged;

impl<C: Clock> Limiter<BudgetRule, C> {
    /// A budget of `config` reading time from `clock`.
    ///
    /// # Errors
    ///
    /// As [`BudgetRule::with_config`].
    pub fn with_config(config: &BudgetConfig, clock: C) -> Result<Self, QuotaError> {
        Ok(Limiter::from_rule(BudgetRule::with_config(config)?, clock))
    }

    /// The configuration in force.
    pub fn config(&self) -> BudgetConfig {
        self.rule().config()
    }

    /// Apply `config` from now on: the next decision uses it, and the state is kept (its
    /// backlog in permits, re-timed at the new rate: a cut delays what is already charged, a
    /// rise hurries it, neither creates nor forgives a permit; a burst change moves the
    /// ceiling, not the charge). Waiters are woken to decide again.
    ///
    /// # Errors
    ///
    /// As [`BudgetRule::with_config`]; the configuration in force is then unchanged.
    pub fn reconfigure(&self, config: &BudgetConfig) -> Result<(), QuotaError> {
        self.reconfigure_at(config, self.now())
    }

    /// As [`Budget::reconfigure`], taking effect at the explicit time `now` (ns of the
    /// clock; a time before the previous change counts as that change's).
    ///
    /// # Errors
    ///
    /// As [`Budget::reconfigure`].
    pub fn reconfigure_at(&self, config: &BudgetConfig, now: Nanos) -> Result<(), QuotaError> {
        let rule = self.rule();
        #[cfg(feature = "std")]
        let mut wakes = crate::notify::wake::WakeList::new();
        rule.live.write(|writer| {
            let params = writer.publish(&config.quota, config.max_debt_ns(), config.mode, now)?;
            // The one word, converted before the next writer may publish again.
            let _ = self.update(|word| {
                let (_, current) = rule.resolve(*word);
                if current == *word {
                    Err(())
                } else {
                    *word = current;
                    Ok(())
                }
            });
            // The waiters, settled under the same lock (re-timed, released, refused), at
            // the time the change took effect.
            #[cfg(feature = "std")]
            self.settle_waiters(writer.waiters(), params.since, &mut wakes);
            #[cfg(not(feature = "std"))]
            let _ = params;
            Ok::<_, QuotaError>(())
        })?;
        #[cfg(feature = "std")]
        wakes.wake_all();
        Ok(())
    }

    /// Change the mode alone (see [`Budget::reconfigure`]).
    ///
    /// # Errors
    ///
    /// None in practice (the rest of the configuration is the one in force).
    pub fn set_mode(&self, mode: Mode) -> Result<(), QuotaError> {
        self.reconfigure(&self.config().mode(mode))
    }

    /// Charge `n` permits now, never refused (see [`Budget::charge_at`]).
    #[inline]
    pub fn charge(&self, n: u32) -> Charged {
        self.charge_at(n, self.now())
    }

    /// Charge `n` permits at `now` (ns), never refused: usage measured after the work. The
    /// backlog grows by `n` permits up to the burst plus the maximum debt; what would pass
    /// it is not charged and is reported as [`Charged::shortfall`]. Returns the wait a
    /// request for one permit now faces. Disabled, nothing is charged.
    #[inline]
    pub fn charge_at(&self, n: u32, now: Nanos) -> Charged {
        let rule = self.rule();
        // The closure carries three scalars across the CAS (in registers); the report is
        // built after it (a 24-byte `Charged` carried across was spilled and reloaded).
        let charged = self.update(
            #[inline(always)]
            move |word| {
                let charge = rule.charge_compact(word, now, n);
                Ok::<_, core::convert::Infallible>((charge.taken, charge.shortfall, charge.wait_ns))
            },
        );
        match charged {
            Ok((taken, shortfall, wait_ns)) => Charge::report(taken, shortfall, wait_ns),
            Err(never) => match never {},
        }
    }

    /// Take up to `n` permits now: as many as conform (0 when none). See
    /// [`Budget::take_up_to_at`].
    #[inline]
    pub fn take_up_to(&self, n: u32) -> u32 {
        self.take_up_to_at(n, self.now())
    }

    /// Take as many of `n` permits as conform at `now` (0 when none), exactly: `k` is taken
    /// iff `k` permits would be admitted and `k + 1` would not (or `k = n`). Disabled: all
    /// `n`; paused: none.
    #[inline]
    pub fn take_up_to_at(&self, n: u32, now: Nanos) -> u32 {
        let rule = self.rule();
        self.update(
            #[inline(always)]
            |word| {
                let (taken, _) = rule.take_up_to(word, now, n);
                if taken == 0 {
                    Err(0)
                } else {
                    Ok(taken)
                }
            },
        )
        .unwrap_or_else(|none| none)
    }
}

#[cfg(test)]
mod tests;

/// A refusal's wait, for a budget's waits: `None` when no wait helps.
#[cfg(feature = "std")]
fn waitable(denied: Denied) -> Option<Duration> {
    match denied {
        Denied::RateLimited { retry_after } => Some(retry_after),
        _ => None,
    }
}
