//! A key's costs known after the work: charges past its limit, settling a reservation to
//! its actual cost, credits, and the answer to a request for no permits (the key's debt).
//!
//! Each is the rule's own transition ([`Rule::charge`], [`Rule::split`] with
//! [`Rule::refund`], [`Rule::credit`], [`Rule::debt`]) applied to the key's state through
//! the same paths as every decision: the main map, a key's own state under its own rule,
//! or the shared overflow state at the key bound. A key in debt is not fresh
//! ([`Rule::fresh_since`]), so eviction never forgives a charge.

use super::{Keyed, Store, OVERFLOW};
use crate::cell::sealed::Cells;
use crate::cell::{Attempt, Gone};
use crate::clock::{Clock, Nanos};
use crate::decision::{Charged, Denied, Receipt};
use crate::rules::Rule;
use core::borrow::Borrow;
use core::hash::Hash;

impl<K: Hash + Eq + Send + Sync + 'static, R: Rule, C: Clock, S: Store<K>> Keyed<K, R, C, S> {
    /// The answer to a request for no permits for `key` at `now` ([`Rule::debt`]): admitted
    /// unless a charge left the key's state in debt (an unknown key is fresh; at the key
    /// bound, its decisions are the overflow state's, and so is its debt).
    ///
    /// # Errors
    ///
    /// [`Denied::RateLimited`] with the wait until the debt is paid back.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, Quota};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::GcraRule;
    ///
    /// let per_tenant: Keyed<String, GcraRule, ManualClock> =
    ///     Keyed::with_clock("10/s".parse()?, ManualClock::new())?;
    /// per_tenant.charge_at("acme", 15, 0);             // 5 past the burst: 500 ms of debt
    /// assert!(per_tenant.debt_at("acme", 499_999_999).is_err());
    /// assert!(per_tenant.debt_at("acme", 500_000_000).is_ok());
    /// assert!(per_tenant.debt_at("other", 0).is_ok());  // an unknown key is fresh
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn debt_at<Q>(&self, key: &Q, now: Nanos) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.read_key(key, |rule, s| rule.debt(s, now))
    }

    /// Charge `n` permits to `key` at `now`, never refused (see
    /// [`Refund::charge_at`](crate::Refund::charge_at)): a new key gets a state first (at
    /// the key bound, the charge goes to the overflow state its decisions use).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, Quota};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::FixedWindowRule;
    ///
    /// let tokens: Keyed<String, FixedWindowRule, ManualClock> =
    ///     Keyed::with_clock("1000/min".parse()?, ManualClock::new())?;
    /// let charged = tokens.charge_at("acme", 900, 0);      // a response's tokens
    /// assert_eq!((charged.charged, charged.shortfall), (900, 0));
    /// // A window's count field holds up to 1023 for a count of 1000: past it the count is
    /// // saturated (closed to the window's end, whatever the rest), and the rest reported.
    /// let charged = tokens.charge_at("acme", 200, 0);
    /// assert_eq!((charged.charged, charged.shortfall), (123, 77));
    /// assert!(tokens.try_acquire_n_at("acme", 0, 59_999_999_999).is_err());
    /// assert!(tokens.try_acquire_n_at("acme", 0, 60_000_000_000).is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    pub fn charge_at<Q>(&self, key: &Q, n: u32, now: Nanos) -> Charged
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let after = core::cell::Cell::new((n, Ok(())));
        // The size check of one permit passes any state (a capacity is at least 1): a
        // charge of any size is applied.
        let applied = self.with_state(key, 1, now, |rule, s| {
            let short = rule.charge(s, now, n);
            after.set((short, rule.check(s, now, 1)));
            Ok::<_, Denied>(Receipt::NOTHING)
        });
        match applied {
            Ok(_) => {
                let (short, next) = after.get();
                Charged::after(n - short, short, next)
            }
            // Only a state that would become a reserved word (the last nanoseconds of the
            // clock's range) is refused: nothing was charged, and it is all reported.
            Err(denied) => Charged::after(0, n, Err(denied)),
        }
    }

    /// Settle `key`'s reservation on `receipt` to `actual` at `at` (see
    /// [`Refund::settle`](crate::Refund::settle)): the permits past `actual` refunded under
    /// the rule the key decides by, or the excess charged.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, KeyedRefund, Quota};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::GcraRule;
    ///
    /// let tokens: Keyed<String, GcraRule, ManualClock> =
    ///     Keyed::with_clock("100/s".parse()?, ManualClock::new())?;
    /// let estimate = tokens.acquire_refundable_at("acme", 80, 0)?;
    /// tokens.settle("acme", estimate, 20, 0);            // 60 given back
    /// assert_eq!(tokens.snapshot_at("acme", 0).remaining, 80);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle<Q>(&self, key: &Q, receipt: Receipt, actual: u32, at: Nanos) -> Charged
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let estimate = receipt.n();
        if actual > estimate {
            return self.charge_at(key, actual - estimate, at);
        }
        if actual < estimate {
            self.update_receipt_state(key, &receipt, |rule, s| {
                rule.refund(s, &rule.split(&receipt, actual), at)
            });
        }
        let next = self.read_key(key, |rule, s| rule.check(s, at, 1));
        Charged::after(0, 0, next)
    }

    /// Give back up to `n` of `key`'s permits at `at` that no receipt names (see
    /// [`Refund::credit`](crate::Refund::credit)): from the key's own state only (an
    /// unknown key is full already, and a key at the bound shares the overflow state with
    /// others, which is not credited: stricter, never more permissive).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Keyed, Quota};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::rules::GcraRule;
    ///
    /// let per_user: Keyed<String, GcraRule, ManualClock> =
    ///     Keyed::with_clock("10/s".parse()?, ManualClock::new())?;
    /// per_user.try_acquire_n_at("ann", 5, 0)?;
    /// per_user.credit("ann", 2, 0);                      // Envoy's negative hits
    /// assert_eq!(per_user.snapshot_at("ann", 0).remaining, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn credit<Q>(&self, key: &Q, n: u32, at: Nanos)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if n == 0 {
            return;
        }
        self.update_key_state(key, |rule, s| rule.credit(s, n, at));
    }

    /// Give back a receipt's permits to the state they were taken from (the overflow
    /// state for a receipt so marked, else the key's): the refund's path, with `give`
    /// deciding what to write (`true`: write; `false`: nothing).
    pub(super) fn update_receipt_state<Q>(
        &self,
        key: &Q,
        receipt: &Receipt,
        give: impl Fn(&R, &mut R::State) -> bool,
    ) where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if receipt.tag & OVERFLOW != 0 {
            let _ = R::State::update_slot(&self.overflow, |s| written(give(&self.default, s)));
            return;
        }
        self.update_key_state(key, give);
    }

    /// Apply `give` to `key`'s own state, under the rule it decides by, if the key has one
    /// (a key no longer in the map was evicted: its state is fresh already).
    fn update_key_state<Q>(&self, key: &Q, give: impl Fn(&R, &mut R::State) -> bool)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let main = S::with_slot(&self.map, key, |cell| {
            R::State::update_slot(cell, |s| written(give(&self.default, s)))
        });
        if let Some(Err(Attempt::Redirect)) = main {
            S::with_slot(&self.side().own, key, |own| {
                let _ = R::State::update_slot(&own.state, |s| written(give(&own.rule, s)));
            });
        }
    }

    /// `read` of the state `key`'s next decision would see, under its rule: the key's own
    /// state, or a fresh one for an unknown key (the overflow state at the key bound).
    fn read_key<Q, T>(&self, key: &Q, read: impl Fn(&R, &R::State) -> T) -> T
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let seen = S::with_slot(&self.map, key, |cell| {
            R::State::read_slot(cell, |s| read(&self.default, s))
        });
        match seen {
            Some(Ok(answer)) => answer,
            Some(Err(Gone::Redirect)) => {
                let own = S::with_slot(&self.side().own, key, |own| {
                    R::State::read_slot(&own.state, |s| read(&own.rule, s))
                });
                match own {
                    Some(Ok(answer)) => answer,
                    _ => {
                        let rule = self.redirected_rule(key);
                        read(&rule, &rule.fresh())
                    }
                }
            }
            Some(Err(Gone::Retired)) | None => {
                if self.max_keys != usize::MAX && self.len() >= self.max_keys {
                    if let Ok(answer) =
                        R::State::read_slot(&self.overflow, |s| read(&self.default, s))
                    {
                        return answer;
                    }
                }
                let rule = self.rule_for_new(key);
                read(&rule, &rule.fresh())
            }
        }
    }
}

/// A transition's "write it" as the cells' update result: `Err` writes nothing.
fn written(changed: bool) -> Result<(), ()> {
    if changed {
        Ok(())
    } else {
        Err(())
    }
}
