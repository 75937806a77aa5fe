//! Live reconfiguration of a keyed budget ([`Keyed`] over [`BudgetRule`]): the default
//! configuration for every key on it, and one key's own, busy keys included.
//!
//! # Orderings of a move
//!
//! [`Keyed::reconfigure_key`] (a quota, or a [`BudgetConfig`]) on a key whose state lives
//! in the main map under the default
//! configuration moves that state into the key's own entry, converted, with no window in
//! which a request could charge a state that is then lost, or find a fresh one:
//!
//! 1. the key's configuration is inserted in `quotas` (so a key absent from the map is
//!    redirected from now on);
//! 2. the key's live word `w` is read, converted to the new configuration, and the result
//!    is written into the key's own entry (inserted if absent), which no request can reach
//!    yet (only a redirect leads there);
//! 3. one compare-and-swap replaces exactly `w` by the redirect word, with release; if it
//!    fails (a request charged `w` meanwhile), the move goes back to 2 with the new word.
//!
//! A request that charged the word before step 3 is in `w`, hence in the converted state. A
//! request that reads the redirect word goes on to the key's own entry after an acquire
//! fence (`cell::reserved`) that pairs with step 3's release, so it sees step 2's write. The
//! map's invariant (a key never has two reachable live states) holds throughout: the own
//! entry becomes reachable at the instant the default state stops being so. Moves and
//! reconfigurations of one keyed budget are serialised by its default configuration's
//! writer.

use super::per_key::sealed;
use super::{Keyed, Own, Store};
use crate::budget::{BudgetConfig, BudgetRule};
use crate::cell::REDIRECT;
use crate::clock::{Clock, Nanos};
use crate::quota::{Quota, QuotaError};
use crate::sync::Ordering;
use core::hash::Hash;

/// Convert `word` (of `from`'s configuration) in place, if it is a live state of an older
/// generation: one compare-and-swap, retried by the caller's loop semantics (a decision
/// that changed the word meanwhile has converted it itself).
fn convert_slot(rule: &BudgetRule, slot: &crate::sync::AtomicU64) {
    // Release on success: as every state store (`cas`, "Release for the budgets").
    let _ = crate::cas::apply_ordered(slot, Ordering::Release, |word| {
        if word >= REDIRECT {
            return Err(());
        }
        let (_, current) = rule.resolve(word);
        if current == word {
            Err(())
        } else {
            Ok((current, ()))
        }
    });
}

impl<K, C, S> Keyed<K, BudgetRule, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
    S: Store<K>,
{
    /// The default configuration: every key without one of its own decides by it. One key
    /// gets one of its own with [`Keyed::reconfigure_key`]: a whole [`BudgetConfig`], or a
    /// quota alone (the key's debt and mode kept), at once, busy keys included.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{BudgetConfig, BudgetRule, Keyed, Quota};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let tenants: Keyed<String, BudgetRule, ManualClock> =
    ///     Keyed::with_clock("10/s burst 10".parse()?, ManualClock::new())?;
    /// tenants.try_acquire_n_at("busy", 10, 0)?;             // never idle: 1 s of backlog
    /// let gold = BudgetConfig::new("100/s burst 10".parse()?).max_debt(Duration::from_secs(1));
    /// tenants.reconfigure_key_at("busy".to_owned(), gold, 0)?;
    /// // At once, with the 10 permits it owes re-timed: 100 ms.
    /// assert_eq!(tenants.snapshot_at("busy", 0).full_after, Duration::from_millis(100));
    /// assert_eq!(tenants.snapshot_at("other", 0).remaining, 10);
    /// // A quota alone: the key keeps its 1 s of debt (and its mode), at once.
    /// tenants.reconfigure_key_at("busy".to_owned(), "200/s burst 10".parse::<Quota>()?, 0)?;
    /// assert_eq!(tenants.snapshot_at("busy", 0).full_after, Duration::from_millis(50));
    /// // Full at 50 ms: 100 permits, ten times the burst, go into debt.
    /// assert!(tenants.try_acquire_n_at("busy", 100, 50_000_000).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(&self) -> BudgetConfig {
        self.default.config()
    }

    /// Apply `config` to every key without a configuration of its own, from now on: each
    /// key's state is kept, in permits, and re-timed (as [`Budget::reconfigure`]), busy
    /// keys included; the state shared by keys over the key bound too.
    ///
    /// # Errors
    ///
    /// As [`BudgetRule::with_config`]; nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{BudgetConfig, BudgetRule, Keyed};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let tenants: Keyed<String, BudgetRule, ManualClock> =
    ///     Keyed::with_clock("10/s burst 10".parse()?, ManualClock::new())?;
    /// tenants.try_acquire_n_at("a", 10, 0)?;               // busy until 1 s
    /// tenants.reconfigure_at(&tenants.config().quota("20/s burst 10".parse()?), 0)?;
    /// assert_eq!(tenants.snapshot_at("a", 0).full_after, Duration::from_millis(500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`Budget::reconfigure`]: crate::Budget::reconfigure
    pub fn reconfigure(&self, config: &BudgetConfig) -> Result<(), QuotaError> {
        self.reconfigure_at(config, self.clock.now())
    }

    /// As [`Keyed::reconfigure`], taking effect at `now` (ns of the clock).
    ///
    /// # Errors
    ///
    /// As [`Keyed::reconfigure`].
    pub fn reconfigure_at(&self, config: &BudgetConfig, now: Nanos) -> Result<(), QuotaError> {
        let rule = &self.default;
        rule.live.write(|writer| {
            writer.publish(&config.quota, config.max_debt_ns(), config.mode, now)?;
            // Every state of the default configuration, converted before the next change
            // may be published (so that no word lags more than the configurations kept).
            S::retire_each(
                &self.map,
                |slot| {
                    convert_slot(rule, slot);
                    false
                },
                |_| false,
            );
            convert_slot(rule, &self.overflow);
            Ok::<_, QuotaError>(())
        })?;
        Ok(())
    }

    /// Give `key` the configuration `change` makes of its current one (its own, else the
    /// default), taking effect at `now`: its next decision uses it, and its state is kept
    /// in permits and re-timed, whether the key was idle or busy, on the default
    /// configuration or on one of its own. The key keeps its own configuration for good; a
    /// later call changes it. [`Keyed::reconfigure_key`]'s path for a budget.
    fn reconfigure_budget_key_at(
        &self,
        key: K,
        change: impl FnOnce(BudgetConfig) -> BudgetConfig,
        now: Nanos,
    ) -> Result<(), QuotaError> {
        self.default.live.write(|_| {
            let side = self.side();
            if let Some(own_rule) = S::with_slot(&side.quotas, &key, BudgetRule::clone) {
                // A configuration of its own already: change it, and convert the key's own
                // state (it has at most one, in `own`, decided by this same rule).
                let config = change(own_rule.config());
                own_rule.live.write(|writer| {
                    writer.publish(&config.quota, config.max_debt_ns(), config.mode, now)?;
                    S::with_slot(&side.own, &key, |own| convert_slot(&own.rule, &own.state));
                    Ok::<_, QuotaError>(())
                })?;
                return Ok(());
            }
            let config = change(self.default.config());
            let rule = BudgetRule::with_config_at(&config, now)?;
            S::insert(&side.quotas, key.clone(), rule.clone());
            self.move_to_own(&key, &rule);
            Ok(())
        })
    }

    /// Move `key`'s live default state, if it has one, into its own entry under `rule`
    /// (see the module's "Orderings of a move").
    fn move_to_own(&self, key: &K, rule: &BudgetRule) {
        let side = self.side();
        loop {
            // Relaxed: the compare-and-swap below decides; a stale word only fails it.
            let seen = S::with_slot(&self.map, key, |slot| slot.load(Ordering::Relaxed));
            let word = match seen {
                Some(word) if word < REDIRECT => word,
                // No live default state (absent, retired: idle; or already redirected).
                _ => return,
            };
            let (_, current) = self.default.resolve(word);
            let moved = rule.adopt(current, &self.default);
            S::with_slot_or_insert(
                &side.own,
                key,
                || Own {
                    state: crate::sync::AtomicU64::new(moved),
                    rule: rule.clone(),
                },
                // Relaxed: published by the release compare-and-swap below.
                |own| own.state.store(moved, Ordering::Relaxed),
            );
            let swapped = S::with_slot(&self.map, key, |slot| {
                // Release on success: publishes the own state written above to a request
                // that reads the redirect word (partner: the acquire fence in
                // `cell::reserved`). Relaxed on failure: the move starts over.
                slot.compare_exchange(word, REDIRECT, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
            });
            if swapped != Some(false) {
                return;
            }
        }
    }
}

impl BudgetRule {
    /// `word`, a state of `from`'s current configuration, as a state of this rule's: its
    /// backlog in permits re-timed, at this rule's configuration's start.
    fn adopt(&self, word: u64, from: &BudgetRule) -> u64 {
        let (from, word) = from.resolve(word);
        let to = self.live.current();
        from.convert(word, &to)
    }
}

/// A quota for one budget key: the key's configuration with this quota, its debt and mode
/// kept (its own configuration's, else the default's).
impl sealed::Apply<BudgetRule> for Quota {
    fn apply<K, C, S>(
        self,
        keyed: &Keyed<K, BudgetRule, C, S>,
        key: K,
        now: Nanos,
    ) -> Result<(), QuotaError>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        C: Clock,
        S: Store<K>,
    {
        keyed.reconfigure_budget_key_at(key, |current| current.quota(self), now)
    }
}

/// A whole configuration for one budget key.
impl sealed::Apply<BudgetRule> for BudgetConfig {
    fn apply<K, C, S>(
        self,
        keyed: &Keyed<K, BudgetRule, C, S>,
        key: K,
        now: Nanos,
    ) -> Result<(), QuotaError>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        C: Clock,
        S: Store<K>,
    {
        keyed.reconfigure_budget_key_at(key, |_| self, now)
    }
}

/// A whole configuration for one budget key, by reference (as [`Keyed::reconfigure`] takes
/// the default).
impl sealed::Apply<BudgetRule> for &BudgetConfig {
    fn apply<K, C, S>(
        self,
        keyed: &Keyed<K, BudgetRule, C, S>,
        key: K,
        now: Nanos,
    ) -> Result<(), QuotaError>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        C: Clock,
        S: Store<K>,
    {
        keyed.reconfigure_budget_key_at(key, |_| *self, now)
    }
}
