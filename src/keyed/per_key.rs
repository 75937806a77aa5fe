//! One key's configuration: [`Keyed::reconfigure_key`], the one per-key verb for every rule,
//! and what it takes ([`KeyConfig`]).
//!
//! | rule | `reconfigure_key(key, quota)` | `reconfigure_key(key, config)` | when it applies |
//! |---|---|---|---|
//! | a [`QuotaRule`] (GCRA, leaky bucket, token bucket, the windows, the sliding log, a rule of your own) | the key's rule for this quota | — (a quota is the whole configuration) | the key's next fresh state: at once if it is idle, else once it goes idle |
//! | [`BudgetRule`](crate::budget::BudgetRule) | this quota, the key's debt and mode kept | this [`BudgetConfig`](crate::budget::BudgetConfig) | at once, the key's state converted (busy keys included) |

use super::{Keyed, Store};
use crate::clock::{Clock, Nanos};
use crate::quota::{Quota, QuotaError};
use crate::rules::{QuotaRule, Rule};
use core::hash::Hash;

/// A configuration [`Keyed::reconfigure_key`] can give one key of a `Keyed<K, R>`, and how
/// it applies (the module's table):
///
/// - [`Quota`], for every [`QuotaRule`] (the key's next fresh state gets it) and for a
///   budget ([`BudgetRule`](crate::budget::BudgetRule): the quota replaced, the key's debt
///   and mode kept, at once);
/// - [`BudgetConfig`](crate::budget::BudgetConfig) (by value or by reference), for a budget:
///   every setting, at once.
///
/// Sealed: the ways a configuration reaches a key's state are the crate's own.
pub trait KeyConfig<R: Rule>: sealed::Apply<R> {}

impl<R: Rule, T: sealed::Apply<R>> KeyConfig<R> for T {}

pub(crate) mod sealed {
    use super::{Clock, Hash, Keyed, Nanos, QuotaError, Rule, Store};

    /// How a configuration reaches one key (see [`KeyConfig`](super::KeyConfig)).
    pub trait Apply<R: Rule> {
        /// Give `key` of `keyed` this configuration, taking effect at `now`.
        fn apply<K, C, S>(
            self,
            keyed: &Keyed<K, R, C, S>,
            key: K,
            now: Nanos,
        ) -> Result<(), QuotaError>
        where
            K: Hash + Eq + Clone + Send + Sync + 'static,
            C: Clock,
            S: Store<K>;
    }
}

impl<R: QuotaRule> sealed::Apply<R> for Quota {
    fn apply<K, C, S>(self, keyed: &Keyed<K, R, C, S>, key: K, now: Nanos) -> Result<(), QuotaError>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        C: Clock,
        S: Store<K>,
    {
        keyed.replace_rule_when_idle(key, R::new(&self)?, now);
        Ok(())
    }
}

impl<K, R, C, S> Keyed<K, R, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    R: Rule,
    C: Clock,
    S: Store<K>,
{
    /// Give `key` a configuration of its own, as of the clock's current time (see
    /// [`Keyed::reconfigure_key_at`]).
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of the rule for this configuration; nothing changes then.
    pub fn reconfigure_key(&self, key: K, config: impl KeyConfig<R>) -> Result<(), QuotaError> {
        self.reconfigure_key_at(key, config, self.clock.now())
    }

    /// Give `key` a configuration of its own ([`KeyConfig`]: a [`Quota`]; for a budget, a
    /// [`BudgetConfig`](crate::budget::BudgetConfig) too), taking effect at `now` (ns of the
    /// clock). The key keeps it for good; a later call changes it. Every setting the
    /// configuration does not give is kept: a budget key given a quota keeps its debt and
    /// its mode.
    ///
    /// When it applies depends on the rule ([`KeyConfig`]): a
    /// [`QuotaRule`]'s key gets it with its next fresh state (at once if the key is new or
    /// idle at `now`, else once its state goes idle and is evicted, so a limited key is
    /// never reset); a budget's key gets it at once, its state kept in permits and re-timed,
    /// busy keys included.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] of the rule for this configuration; nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, Quota};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::GcraRule;
    ///
    /// let tenants: Keyed<String, GcraRule, ManualClock> =
    ///     Keyed::with_clock(Quota::per_second(10)?.with_burst(10)?, ManualClock::new())?;
    /// tenants.try_acquire_n_at("busy", 10, 0)?;                 // limited until 1 s
    /// tenants.reconfigure_key_at("busy".to_owned(), Quota::per_second(100)?.with_burst(100)?, 0)?;
    /// assert!(tenants.try_acquire_n_at("busy", 1, 0).is_err()); // still its old state
    /// let idle = 3_000_000_000;                                 // idle, evictable
    /// tenants.evict_idle_at(idle);
    /// assert!(tenants.try_acquire_n_at("busy", 100, idle).is_ok()); // the new quota
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure_key_at(
        &self,
        key: K,
        config: impl KeyConfig<R>,
        now: Nanos,
    ) -> Result<(), QuotaError> {
        config.apply(self, key, now)
    }
}
