//! `FailLocal`'s per-node limit ([`LocalBudgets`]): one core budget word per key, so that a
//! node's outage decisions, forced charges and refunds on a key share one state.
//!
//! The core's [`Keyed`](limitcore::Keyed) decides and refunds but has no forced charge,
//! so the words live here, in a papaya map, each changed only through the core's
//! compare-and-swap loop ([`WordCell::update`]) with the [`BudgetRule`]'s pure transitions.
//!
//! # Idle keys
//!
//! A key whose budget has been full for [`GRACE_NS`] is swept, at most once per
//! [`SWEEP_EVERY_NS`], by the request that inserts a new key (so the sweep's cost is paid
//! only while the map grows). As in the core's keyed maps, the sweep first *retires* the
//! word: one compare-and-swap from the idle word to [`RETIRED`], a value no budget word
//! takes (and that a transition would be refused to make), then removes the entry if it is
//! still the one it retired. A decision or charge that meets `RETIRED` writes nothing,
//! helps remove the entry, and looks the key up again (a fresh budget, which decides as
//! the retired one would for every reading from `now − GRACE_NS` on). Every operation's
//! compare-and-swap expects the exact word it decided on, so either it or the retirement
//! wins: no charge is ever applied to a removed word.

use limitcore::cell::WordCell;
use limitcore::clock::{Clock, MonotonicClock, Nanos};
use limitcore::rules::{Receipt, Rule};
use limitcore::{BudgetConfig, BudgetRule, Charged, Denied, KeyHasher, QuotaError, Snapshot};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The word of a retired entry. A budget word's top four bits are its configuration's
/// generation (below 12) or 14 (idle), never 15, so no budget state is this word; a
/// transition that would write it is refused all the same.
pub(crate) const RETIRED: u64 = u64::MAX;

/// How long a key's budget must have been full before the sweep drops it: 2^30 ns
/// (1.07 s), the core's [`Keyed::EVICTION_GRACE_NS`](limitcore::Keyed::EVICTION_GRACE_NS).
pub(crate) const GRACE_NS: Nanos = 1 << 30;

/// The least time between two sweeps: 1 s.
pub(crate) const SWEEP_EVERY_NS: Nanos = 1_000_000_000;

type Words = papaya::HashMap<String, Arc<WordCell>, KeyHasher>;

/// Why an operation on a word did not apply.
enum Miss<E> {
    /// The word is retired: look the key up again.
    Retired,
    /// The operation's own refusal.
    Refused(E),
}

/// One budget per key for the outage policy `FailLocal`: decisions with debt, forced
/// charges and refunds on the same word.
pub(crate) struct LocalBudgets {
    rule: BudgetRule,
    clock: MonotonicClock,
    words: Words,
    /// When the next sweep may run (ns of `clock`).
    next_sweep: AtomicU64,
}

impl std::fmt::Debug for LocalBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBudgets")
            .field("config", &self.rule.config())
            .field("keys", &self.words.len())
            .finish()
    }
}

/// What gives an admission of [`LocalBudgets::decide`] back: the word it charged.
pub(crate) struct Admitted {
    word: Arc<WordCell>,
    receipt: Receipt,
    at: Nanos,
}

impl LocalBudgets {
    /// A budget of `config` per key.
    ///
    /// # Errors
    ///
    /// As [`BudgetRule::with_config`].
    pub(crate) fn new(config: &BudgetConfig) -> Result<Self, QuotaError> {
        Ok(LocalBudgets {
            rule: BudgetRule::with_config(config)?,
            clock: MonotonicClock::new(),
            words: Words::with_hasher(KeyHasher::new()),
            next_sweep: AtomicU64::new(0),
        })
    }

    /// The local clock's reading, ns.
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// The most permits one request may take: the burst, or more under debt.
    pub(crate) fn capacity(&self) -> u32 {
        self.rule.capacity()
    }

    /// Decide `n` permits for `key` at `now`: the admission (with what gives it back) or the
    /// refusal, and the state the decision left.
    pub(crate) fn decide(
        &self,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> (Result<Option<Admitted>, Denied>, Snapshot) {
        if n == 0 {
            return (Ok(None), self.snapshot(key, now));
        }
        let capacity = self.capacity();
        if n > capacity {
            let denied = Denied::ExceedsCapacity { capacity };
            return (Err(denied), self.snapshot(key, now));
        }
        let rule = &self.rule;
        let outcome = self.apply(key, now, |word| {
            let mut next = *word;
            match rule.take(&mut next, now, n) {
                Ok(receipt) if next != RETIRED => {
                    *word = next;
                    Ok((receipt, rule.snapshot(word, now)))
                }
                Ok(_) => Err((Denied::BeyondHorizon, rule.snapshot(word, now))),
                Err(denied) => Err((denied, rule.snapshot(word, now))),
            }
        });
        match outcome {
            Ok((cell, (receipt, state))) => {
                let admitted = Admitted {
                    word: cell,
                    receipt,
                    at: now,
                };
                (Ok(Some(admitted)), state)
            }
            Err((denied, state)) => (Err(denied), state),
        }
    }

    /// Charge `n` permits to `key` at `now`, never refused: as many as fit below the
    /// burst plus the debt, the rest reported as the shortfall ([`BudgetRule::charge`]).
    pub(crate) fn charge(&self, key: &str, n: u32, now: Nanos) -> Charged {
        let rule = &self.rule;
        let outcome = self.apply(key, now, |word| {
            let mut next = *word;
            let (charged, _) = rule.charge(&mut next, now, n);
            if next == RETIRED {
                // Never for a budget word (see `RETIRED`); written as nothing charged.
                return Err(Charged {
                    charged: 0,
                    shortfall: n,
                    wait: charged.wait,
                });
            }
            *word = next;
            Ok::<_, Charged>(charged)
        });
        match outcome {
            Ok((_, charged)) | Err(charged) => charged,
        }
    }

    /// `key`'s state at `now` (a fresh budget's for a key it holds no word for).
    pub(crate) fn snapshot(&self, key: &str, now: Nanos) -> Snapshot {
        let guard = self.words.pin();
        let word = guard
            .get(key)
            .map(|cell| cell.load())
            .filter(|&w| w != RETIRED)
            .unwrap_or_else(|| self.rule.fresh());
        self.rule.snapshot(&word, now)
    }

    /// `f` on `key`'s word in the core's compare-and-swap loop, looking the key up again
    /// after a retirement; the word it applied to, with `f`'s value, or `f`'s refusal.
    fn apply<T, E>(
        &self,
        key: &str,
        now: Nanos,
        f: impl Fn(&mut u64) -> Result<T, E>,
    ) -> Result<(Arc<WordCell>, T), E> {
        loop {
            let cell = self.word(key, now);
            let outcome = cell.update(|word| {
                if *word == RETIRED {
                    return Err(Miss::Retired);
                }
                f(word).map_err(Miss::Refused)
            });
            match outcome {
                Ok(value) => return Ok((cell, value)),
                Err(Miss::Refused(e)) => return Err(e),
                Err(Miss::Retired) => {
                    let _ = self
                        .words
                        .pin()
                        .remove_if(key, |_, c| Arc::ptr_eq(c, &cell));
                }
            }
        }
    }

    /// `key`'s word, inserted fresh if absent (after a sweep, if one is due).
    fn word(&self, key: &str, now: Nanos) -> Arc<WordCell> {
        let guard = self.words.pin();
        if let Some(cell) = guard.get(key) {
            return Arc::clone(cell);
        }
        self.sweep(now);
        let fresh = || Arc::new(WordCell::new(self.rule.fresh()));
        Arc::clone(guard.get_or_insert_with(key.to_owned(), fresh))
    }

    /// Drop the keys whose budget has been full since `now − GRACE_NS`, if a sweep is due
    /// (see the module's "Idle keys").
    fn sweep(&self, now: Nanos) {
        // Relaxed (both): `next_sweep` only elects one sweeper at a time (the
        // compare-and-swap decides who); the sweep itself acts on each word through its own
        // compare-and-swap loop and publishes nothing through this one.
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now < due
            || self
                .next_sweep
                .compare_exchange(
                    due,
                    now.saturating_add(SWEEP_EVERY_NS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let since = now.saturating_sub(GRACE_NS);
        let guard = self.words.pin();
        let retired: Vec<(String, Arc<WordCell>)> = guard
            .iter()
            .filter(|(_, cell)| {
                cell.update(|word| {
                    if *word != RETIRED && self.rule.fresh_since(word, since, now) {
                        *word = RETIRED;
                        Ok(())
                    } else {
                        Err(())
                    }
                })
                .is_ok()
            })
            .map(|(k, c)| (k.clone(), Arc::clone(c)))
            .collect();
        for (key, cell) in retired {
            let _ = guard.remove_if(&key, |_, c| Arc::ptr_eq(c, &cell));
        }
    }

    /// The number of keys held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.words.len()
    }
}

impl Admitted {
    /// Give the admission back (the budget's refund never creates a permit; a word retired
    /// since is left alone: it was full, nothing is owed).
    pub(crate) fn refund(self, local: &LocalBudgets) {
        let rule = &local.rule;
        let _ = self.word.update(|word| {
            if *word == RETIRED {
                return Err(());
            }
            let mut next = *word;
            if rule.refund(&mut next, &self.receipt, self.at) && next != RETIRED {
                *word = next;
                Ok(())
            } else {
                Err(())
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn budgets(quota: &str, debt_ms: u64) -> LocalBudgets {
        let config =
            BudgetConfig::new(quota.parse().unwrap()).max_debt(Duration::from_millis(debt_ms));
        LocalBudgets::new(&config).unwrap()
    }

    const MS: Nanos = 1_000_000;

    #[test]
    fn decisions_charges_and_refunds_share_one_word_per_key() {
        // 10/s burst 2, 300 ms of debt: capacity ⌊(200 + 300) / 100⌋ = 5.
        let local = budgets("10/s burst 2", 300);
        let t = 10_000 * MS;
        assert_eq!(local.capacity(), 5);
        // An oversized request from a full budget is admitted and leaves it in debt.
        let (admitted, state) = local.decide("k", 4, t);
        let admitted = admitted.unwrap().unwrap();
        assert_eq!(state, Snapshot::new(0, Duration::from_millis(400)));
        // Refused until repaid, with the exact wait; another key is untouched.
        let (refused, _) = local.decide("k", 1, t);
        assert_eq!(
            refused.err().unwrap().retry_after(),
            Some(Duration::from_millis(300))
        );
        assert!(local.decide("other", 2, t).0.is_ok());
        assert_eq!(
            local.decide("k", 6, t).0.err(),
            Some(Denied::ExceedsCapacity { capacity: 5 })
        );
        // A charge saturates at burst + debt (500 ms of backlog): one more permit fits.
        let charged = local.charge("k", 3, t);
        assert_eq!((charged.charged, charged.shortfall), (1, 2));
        assert_eq!(charged.wait, Duration::from_millis(400));
        // The refund of the oversized admission gives back what no reading absorbed.
        admitted.refund(&local);
        assert_eq!(
            local.snapshot("k", t).full_after,
            Duration::from_millis(100)
        );
    }

    #[test]
    fn the_sweep_retires_idle_keys_and_a_retired_word_is_looked_up_again() {
        let local = budgets("10/s burst 2", 0);
        let t = 10_000 * MS;
        assert!(local.decide("idle", 1, t).0.is_ok());
        assert!(local.decide("busy", 1, t).0.is_ok());
        // Two seconds later "idle" has been full for more than the grace; "busy" is charged
        // again just before the sweep, which a new key triggers.
        let later = t + 2_000 * MS;
        assert!(local.decide("busy", 2, later).0.is_ok());
        local.charge("new", 1, later);
        assert_eq!(local.len(), 2, "idle swept, busy and new kept");
        assert_eq!(local.snapshot("busy", later).remaining, 0);
        // A handle on a word that was retired meanwhile is never charged: the operation
        // looks the key up again and charges the fresh word.
        let cell = local.word("busy", later);
        cell.update(|w| {
            *w = RETIRED;
            Ok::<_, ()>(())
        })
        .unwrap();
        let charged = local.charge("busy", 1, later);
        assert_eq!(charged.charged, 1);
        assert_eq!(cell.load(), RETIRED);
        assert_eq!(local.snapshot("busy", later).remaining, 1);
    }
}
