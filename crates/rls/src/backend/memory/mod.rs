//! [`Memory`]: the in-process backend: one of the core's keyed limiters per rule
//! ([`rule`]: bounded memory, a changed limit's usage carried over on reload), a request's
//! descriptors decided all or nothing by the core's protocol ([`Batch`]), or each on its
//! own.

pub(crate) mod rule;

use super::{Backend, BackendError, Item, Mode, Op, Outcome};
use crate::clock::SharedClock;
use crate::config::Limit;
use limitcore::clock::Nanos;
use limitcore::{Algorithm, Ask, Batch, Decision, KeyedRefund, Snapshot, WithKey};
use rule::RuleLimiter;
use std::future::Future;
use std::sync::Arc;

/// The in-process backend: each rule a keyed limiter on one clock, with at most `max_keys`
/// keys (beyond it, new keys share one state).
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Memory, Options, Service, UnixClock};
///
/// let service = Service::new(Memory::new(UnixClock::shared(), 10_000), Options::default());
/// # let _ = service;
/// ```
#[derive(Clone)]
pub struct Memory {
    clock: SharedClock,
    max_keys: usize,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

impl Memory {
    /// Limiters on `clock` (ns since the Unix epoch, for fixed windows aligned as
    /// envoyproxy/ratelimit's), at most `max_keys` keys per rule.
    pub fn new(clock: SharedClock, max_keys: usize) -> Self {
        Memory { clock, max_keys }
    }

    /// Decide `items` on `rules` (one each, in order) by `mode`: every carried-over usage
    /// charged and every negative hit given back first, then the decision.
    pub(crate) fn decide_on<R>(
        &self,
        items: &[Item<R>],
        rules: &[&RuleLimiter],
        mode: Mode,
    ) -> Result<Vec<Outcome>, BackendError> {
        let now = self.clock.now();
        for (item, rule) in items.iter().zip(rules) {
            rule.carry_over(&item.key, now);
        }
        // A refund is never refused, and stays whatever the decision.
        for (item, rule) in items.iter().zip(rules) {
            if let Op::Refund(n) = item.op {
                rule.give_back(&item.key, n, now)?;
            }
        }
        Ok(match mode {
            Mode::AllOrNothing => all_or_nothing(items, rules, now),
            Mode::ChargeEach => charge_each(items, rules, now),
        })
    }
}

/// Every item's permits in one batch of the core's all-or-nothing protocol: each item's
/// outcome alone, with its rule's state after the decision (after the refunds, on a
/// refusal).
fn all_or_nothing<R>(items: &[Item<R>], rules: &[&RuleLimiter], now: Nanos) -> Vec<Outcome> {
    let ask = |i: usize| {
        let item = items.get(i)?;
        let part: WithKey<'_, dyn KeyedRefund<str>, str> = WithKey(rules[i].limiter(), &item.key);
        Some(Ask {
            part,
            n: item.op.permits(),
            soft: item.soft,
        })
    };
    let mut out = vec![Outcome::admitted(0, std::time::Duration::ZERO); items.len()];
    // The batch's own refusal is its items' to report, each in its outcome.
    let _ = Batch::new(ask).decide_at(now, |i, decision| out[i] = decision.into());
    out
}

/// Every item decided on its own, as envoyproxy/ratelimit charges descriptors.
fn charge_each<R>(items: &[Item<R>], rules: &[&RuleLimiter], now: Nanos) -> Vec<Outcome> {
    let each = |(item, rule): (&Item<R>, &&RuleLimiter)| {
        let limiter = rule.limiter();
        let (result, state) = limiter.decide_refundable_at(&item.key, item.op.permits(), now);
        let result = result.map(drop);
        if result.is_err() && rule.limit.algorithm == Algorithm::FixedWindow && state.remaining > 0
        {
            // envoyproxy/ratelimit counts a refused request too: its window stays closed
            // for the rest of the window. Closing it here keeps every later decision
            // identical.
            let _ = limiter.try_acquire_n_at(&item.key, state.remaining, now);
            let state = Snapshot::new(0, state.full_after);
            return Decision { result, state }.into();
        }
        Decision { result, state }.into()
    };
    items.iter().zip(rules).map(each).collect()
}

impl Backend for Memory {
    type Rule = RuleLimiter;

    fn rule(
        &self,
        _scope: &str,
        limit: Limit,
        previous: Option<&Arc<RuleLimiter>>,
    ) -> Result<Arc<RuleLimiter>, BackendError> {
        RuleLimiter::new(limit, &self.clock, self.max_keys, previous.cloned())
    }

    fn decide(
        &self,
        _domain: &str,
        items: &[Item<RuleLimiter>],
        mode: Mode,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        let rules: Vec<&RuleLimiter> = items.iter().map(|i| &*i.rule).collect();
        std::future::ready(self.decide_on(items, &rules, mode))
    }
}
