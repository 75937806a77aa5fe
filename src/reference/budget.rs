//! [`BudgetModel`]: the plain model of a [`Budget`](crate::Budget).

use super::Model;
use crate::budget::{BudgetConfig, Charged, Mode};
use crate::clock::Nanos;
use crate::decision::{Denied, Snapshot};
use core::time::Duration;

/// A [`Budget`](crate::Budget) in plain arithmetic: the TAT as an absolute count of the
/// budget's units in `u128` (no generation tag, no wrap), every reading converted by `u128`
/// division, and a change of configuration applied at once to the one state.
///
/// The budget's rule (its "Decisions"): GCRA on a clock of units of `T / K` ns (`K` units
/// a permit); a request of at most the burst is admitted iff its cost fits the span
/// `S = burst·K` on top of the backlog; a larger one (up to `S + D`, the debt) iff the
/// budget is full; an idle budget resumes from the reading rounded up to a whole unit.
///
/// It departs from the budget only where the budget's word does (its "Limits"): it keeps
/// any backlog however far a reading lags, and it has no horizon. It keeps the budget's one
/// cut: a backlog converted to a new configuration is at most 2^58 − 2^55 − 1 of its units.
///
/// # Examples
///
/// ```
/// use limitcore::reference::BudgetModel;
/// use limitcore::{Budget, BudgetConfig, RateLimiter};
/// use limitcore::clock::ManualClock;
///
/// let config = BudgetConfig::new("3/500ms burst 2".parse()?);
/// let budget = Budget::with_config(&config, ManualClock::new())?;
/// let mut model = BudgetModel::new(config);
/// for (i, n) in [2, 1, 1, 2, 1].into_iter().enumerate() {
///     let now = i as u64 * 100_000_000;
///     assert_eq!(budget.try_acquire_n_at(n, now), model.acquire(n, now));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct BudgetModel {
    config: BudgetConfig,
    /// Units per `p` ns, the period in lowest terms (ns), units per permit.
    m: u128,
    p: u128,
    k: u128,
    span: u128,
    debt: u128,
    queue: u128,
    capacity: u32,
    /// The TAT in units since the clock's epoch; `None`: fresh.
    tat: Option<u128>,
    /// When the configuration took effect.
    since: Nanos,
}

impl BudgetModel {
    /// The model of a fresh budget of `config`.
    ///
    /// # Panics
    ///
    /// For a configuration [`Budget::with_config`](crate::Budget::with_config) refuses.
    pub fn new(config: BudgetConfig) -> Self {
        let mut model = BudgetModel {
            config,
            m: 1,
            p: 1,
            k: 1,
            span: 0,
            debt: 0,
            queue: 0,
            capacity: 0,
            tat: None,
            since: 0,
        };
        model.apply(config);
        model
    }

    /// Take `config`'s numbers (the unit: `T` when it is whole ns, else `T / 2^F` for the
    /// least `F` that makes it at most 1 ns).
    fn apply(&mut self, config: BudgetConfig) {
        let q = config.quota;
        let (c, p) = (u128::from(q.count()), u128::from(q.period_ns()));
        let k = if p % c == 0 {
            p / c
        } else {
            let mut k = 1u128;
            while c * k < p {
                k *= 2;
            }
            k
        };
        self.config = config;
        self.m = c * k;
        self.p = p;
        self.k = k;
        self.span = u128::from(q.burst()) * k;
        self.debt = self.units_ceil(config.get_max_debt().as_nanos());
        self.queue = self.span + self.debt + self.units_ceil(1 << 40);
        let most = (self.span + self.debt) / k;
        self.capacity = u32::try_from(most).unwrap_or(u32::MAX).max(q.burst());
    }

    fn units_ceil(&self, ns: u128) -> u128 {
        (ns * self.m).div_ceil(self.p)
    }

    fn floor(&self, t: Nanos) -> u128 {
        u128::from(t) * self.m / self.p
    }

    fn ceil(&self, t: Nanos) -> u128 {
        (u128::from(t) * self.m).div_ceil(self.p)
    }

    /// The least wait from `t` after which the floor of the reading is at least `target`.
    fn until(&self, t: Nanos, target: u128) -> Duration {
        let need = (target * self.p).saturating_sub(u128::from(t) * self.m);
        let ns = need.div_ceil(self.m);
        u64::try_from(ns).map_or(Duration::MAX, Duration::from_nanos)
    }

    fn backlog(&self, t: Nanos) -> u128 {
        self.tat.map_or(0, |tat| tat.saturating_sub(self.floor(t)))
    }

    /// Where a charge of `cost` from `t` starts: the TAT, or the reading rounded up.
    fn start(&self, t: Nanos) -> u128 {
        if self.backlog(t) > 0 {
            self.tat.unwrap_or(0)
        } else {
            self.ceil(t)
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> BudgetConfig {
        self.config
    }

    /// Apply `config` at `at` (not before the previous change): the backlog at that time,
    /// in permits, re-timed in the new units (rounded up).
    pub fn reconfigure(&mut self, config: BudgetConfig, at: Nanos) {
        let at = at.max(self.since);
        let (b, k) = (self.backlog(at), self.k);
        self.apply(config);
        self.since = at;
        // As the budget: a backlog of more than 2^58 − 2^55 − 1 units of the new rate is cut
        // to that.
        let kept = (b * self.k).div_ceil(k).min((1 << 58) - (1 << 55) - 1);
        self.tat = (b > 0).then(|| self.ceil(at) + kept);
    }

    /// Decide `n` permits at `now`.
    ///
    /// # Errors
    ///
    /// As [`Budget`](crate::Budget)'s decisions.
    pub fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        if self.config.mode == Mode::Disabled {
            return Ok(());
        }
        if n == 0 {
            // Refused only in debt (a backlog past the burst), until it is paid back; a
            // pause is not a debt.
            let (b, floor) = (self.backlog(now), self.floor(now));
            if self.config.mode == Mode::Enabled && b > self.span {
                return Err(wait(self.until(now, floor + b - self.span)));
            }
            return Ok(());
        }
        if n > self.capacity {
            return Err(Denied::ExceedsCapacity {
                capacity: self.capacity,
            });
        }
        if self.config.mode == Mode::Paused {
            return Err(Denied::Paused);
        }
        let (b, cost) = (self.backlog(now), u128::from(n) * self.k);
        let floor = self.floor(now);
        if cost <= self.span && b + cost > self.span {
            return Err(wait(self.until(now, floor + b + cost - self.span)));
        }
        if cost > self.span && b > 0 {
            return Err(wait(self.until(now, floor + b)));
        }
        self.tat = Some(self.start(now) + cost);
        Ok(())
    }

    /// Take up to `n` permits at `now`.
    pub fn take_up_to(&mut self, n: u32, now: Nanos) -> u32 {
        match self.config.mode {
            Mode::Disabled => return n,
            Mode::Paused => return 0,
            Mode::Enabled => {}
        }
        let fit = self.span.saturating_sub(self.backlog(now)) / self.k;
        let taken = u32::try_from(fit).map_or(n, |fit| fit.min(n));
        if taken > 0 {
            self.tat = Some(self.start(now) + u128::from(taken) * self.k);
        }
        taken
    }

    /// Charge `n` permits at `now`.
    pub fn charge(&mut self, n: u32, now: Nanos) -> Charged {
        if self.config.mode != Mode::Disabled {
            let room = (self.span + self.debt).saturating_sub(self.backlog(now)) / self.k;
            let taken = u32::try_from(room).map_or(n, |room| room.min(n));
            if taken > 0 {
                self.tat = Some(self.start(now) + u128::from(taken) * self.k);
            }
            let wait = self.next_wait(now);
            return Charged {
                charged: taken,
                shortfall: n - taken,
                wait,
            };
        }
        Charged {
            charged: 0,
            shortfall: 0,
            wait: self.next_wait(now),
        }
    }

    fn next_wait(&self, now: Nanos) -> Duration {
        let (b, floor) = (self.backlog(now), self.floor(now));
        if b + self.k > self.span {
            self.until(now, floor + b + self.k - self.span)
        } else {
            Duration::ZERO
        }
    }

    /// Reserve `n` permits at `now` to conform within `max_wait`: the delay.
    ///
    /// # Errors
    ///
    /// As [`Reserve::reserve_n_at`](crate::Reserve::reserve_n_at) on a budget.
    pub fn reserve(&mut self, n: u32, now: Nanos, max_wait: Duration) -> Result<Duration, Denied> {
        if n == 0 || self.config.mode == Mode::Disabled {
            return Ok(Duration::ZERO);
        }
        if n > self.capacity {
            return Err(Denied::ExceedsCapacity {
                capacity: self.capacity,
            });
        }
        if self.config.mode == Mode::Paused {
            return Err(Denied::Paused);
        }
        let (b, cost, floor) = (self.backlog(now), u128::from(n) * self.k, self.floor(now));
        let short = if cost <= self.span {
            (b + cost).saturating_sub(self.span)
        } else {
            b
        };
        let delay = self.until(now, floor + short);
        if delay > max_wait {
            return Err(wait(delay - max_wait));
        }
        if b + cost > self.queue {
            return Err(wait(self.until(now, floor + b + cost - self.queue)));
        }
        self.tat = Some(self.start(now) + cost);
        Ok(delay)
    }

    /// The state at `now`.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        let b = self.backlog(now);
        let remaining = match self.config.mode {
            Mode::Paused => 0,
            _ => u32::try_from(self.span.saturating_sub(b) / self.k).unwrap_or(u32::MAX),
        };
        Snapshot::new(remaining, self.until(now, self.floor(now) + b))
    }
}

/// A refusal that waits `d`.
fn wait(d: Duration) -> Denied {
    Denied::RateLimited { retry_after: d }
}

impl Model for BudgetModel {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        BudgetModel::acquire(self, n, now)
    }

    fn snapshot(&self, now: Nanos) -> Snapshot {
        BudgetModel::snapshot(self, now)
    }
}
