//! [`Memory`]: the in-process backend: one of the core's keyed limiters per rule
//! ([`rule`]: bounded memory, a changed limit's usage carried over on reload), a request's
//! descriptors decided all or nothing by the core's protocol ([`Batch`]), or each on its
//! own; negative hits given back by the core's `credit`, a check (no permits) refused while
//! the key is in debt, and a refused descriptor's hits recorded by the core's `charge_at`.

pub(crate) mod rule;

use super::{Backend, BackendError, Item, Mode, Op, Outcome, RefusedHits};
use crate::clock::SharedClock;
use crate::config::Limit;
use limitcore::clock::Nanos;
use limitcore::{Ask, Batch, Decision, KeyedRefund, WithKey};
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

    /// Decide `items` on `rules` (one each, in order) by `mode`, the refused descriptors'
    /// hits recorded or dropped by `refused`: every carried-over usage charged and every
    /// negative hit given back first, then the decision.
    pub(crate) fn decide_on<R>(
        &self,
        items: &[Item<R>],
        rules: &[&RuleLimiter],
        mode: Mode,
        refused: RefusedHits,
    ) -> Result<Vec<Outcome>, BackendError> {
        let now = self.clock.now();
        for (item, rule) in items.iter().zip(rules) {
            rule.carry_over(&item.key, now);
        }
        // A negative hit is never refused, and stays whatever the decision.
        for (item, rule) in items.iter().zip(rules) {
            if let Op::Refund(n) = item.op {
                rule.credit(&item.key, n, now);
            }
        }
        let mut out = match mode {
            Mode::AllOrNothing => all_or_nothing(items, rules, now),
            Mode::ChargeEach => charge_each(items, rules, now),
        };
        for (i, (item, rule)) in items.iter().zip(rules).enumerate() {
            match item.op {
                Op::Take(n) if !out[i].admitted && refused == RefusedHits::Record => {
                    out[i] = record(rule.limiter(), &item.key, n, now);
                }
                _ => {}
            }
        }
        // A negative hit's status: the state after everything else, never a refusal.
        for (i, (item, rule)) in items.iter().zip(rules).enumerate() {
            if let Op::Refund(_) = item.op {
                let state = rule.limiter().snapshot_at(&item.key, now);
                out[i] = Outcome::admitted(state.remaining, state.full_after);
            }
        }
        Ok(out)
    }
}

/// The permits an item asks of its rule's decision: a check's and a negative hit's none
/// (a request for no permits: refused only while the key is in debt).
fn permits(op: Op) -> u32 {
    match op {
        Op::Take(n) => n,
        Op::Check | Op::Refund(_) => 0,
    }
}

/// Every item's permits in one batch of the core's all-or-nothing protocol: each item's
/// outcome alone, with its rule's state after the decision (after the refunds, on a
/// refusal). A negative hit is asked softly: it never refuses the request.
fn all_or_nothing<R>(items: &[Item<R>], rules: &[&RuleLimiter], now: Nanos) -> Vec<Outcome> {
    let ask = |i: usize| {
        let item = items.get(i)?;
        let part: WithKey<'_, dyn KeyedRefund<str>, str> = WithKey(rules[i].limiter(), &item.key);
        Some(Ask {
            part,
            n: permits(item.op),
            soft: item.soft || matches!(item.op, Op::Refund(_)),
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
        let (result, state) = rule
            .limiter()
            .decide_refundable_at(&item.key, permits(item.op), now);
        Decision {
            result: result.map(drop),
            state,
        }
        .into()
    };
    items.iter().zip(rules).map(each).collect()
}

/// A refused take of `n` for `key` recorded past the limit (the core's `charge_at`:
/// never refused; a window's count saturates at the top of its field, never more
/// permissive), and its outcome on the state it left: refused, with the wait until the
/// same request would be admitted (the time until the state is full again when none
/// would: `n` above the capacity).
///
/// A separate step from the decision that refused it: a request decided in between does
/// not see this charge, as if it had come first.
fn record(limiter: &dyn KeyedRefund<str>, key: &str, n: u32, now: Nanos) -> Outcome {
    let _ = limiter.charge_at(key, n, now);
    let state = limiter.snapshot_at(key, now);
    let wait = limiter
        .check_at(key, n, now)
        .err()
        .and_then(|denied| denied.retry_after());
    Outcome::refused(state.remaining, wait.unwrap_or(state.full_after))
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
        refused: RefusedHits,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        let rules: Vec<&RuleLimiter> = items.iter().map(|i| &*i.rule).collect();
        std::future::ready(self.decide_on(items, &rules, mode, refused))
    }
}
