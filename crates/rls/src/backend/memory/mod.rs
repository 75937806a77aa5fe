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

    /// Decide `items` on their limiters (`rule(i)`: item `i`'s) by `mode`, the refused
    /// descriptors' hits recorded or dropped by `refused`: every carried-over usage charged
    /// and every negative hit given back first, then the decision. The limiters are found
    /// by a function, not gathered in a list: this backend's own decision needs no
    /// allocation for them.
    pub(crate) fn decide_on<'r, R>(
        &self,
        items: &[Item<'_, R>],
        rule: impl Fn(usize) -> &'r RuleLimiter + Copy,
        mode: Mode,
        refused: RefusedHits,
    ) -> Result<Vec<Outcome>, BackendError> {
        let now = self.clock.now();
        for (i, item) in items.iter().enumerate() {
            rule(i).carry_over(&item.key, now);
        }
        // A negative hit is never refused, and stays whatever the decision.
        for (i, item) in items.iter().enumerate() {
            if let Op::Refund(n) = item.op {
                rule(i).credit(&item.key, n, now);
            }
        }
        let mut out = match mode {
            Mode::AllOrNothing => all_or_nothing(items, rule, now),
            Mode::ChargeEach => charge_each(items, rule, now),
        };
        for (i, item) in items.iter().enumerate() {
            match item.op {
                Op::Take(n) if !out[i].admitted && refused == RefusedHits::Record => {
                    out[i] = record(rule(i).limiter(), &item.key, n, now);
                }
                _ => {}
            }
        }
        // A negative hit's status: the state after everything else, never a refusal.
        for (i, item) in items.iter().enumerate() {
            if let Op::Refund(_) = item.op {
                let state = rule(i).limiter().snapshot_at(&item.key, now);
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
fn all_or_nothing<'r, R>(
    items: &[Item<'_, R>],
    rule: impl Fn(usize) -> &'r RuleLimiter,
    now: Nanos,
) -> Vec<Outcome> {
    if let [item] = items {
        // One item (the common request): the batch's protocol is its one decision, with
        // nothing to give back; made directly, without the batch's machinery (callgrind:
        // 546 instructions a request through the batch, 376 in the decision itself).
        let limiter = rule(0).limiter();
        let (result, state) = limiter.decide_refundable_at(&item.key, permits(item.op), now);
        let soft = item.soft || matches!(item.op, Op::Refund(_));
        // The batch reports a hard refusal with the state read after it: so does this.
        let state = match result {
            Err(_) if !soft => limiter.snapshot_at(&item.key, now),
            _ => state,
        };
        return vec![Decision {
            result: result.map(drop),
            state,
        }
        .into()];
    }
    let ask = |i: usize| {
        let item = items.get(i)?;
        let part: WithKey<'_, dyn KeyedRefund<str>, str> = WithKey(rule(i).limiter(), &item.key);
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
fn charge_each<'r, R>(
    items: &[Item<'_, R>],
    rule: impl Fn(usize) -> &'r RuleLimiter,
    now: Nanos,
) -> Vec<Outcome> {
    let each = |(i, item): (usize, &Item<'_, R>)| {
        let (result, state) =
            rule(i)
                .limiter()
                .decide_refundable_at(&item.key, permits(item.op), now);
        Decision {
            result: result.map(drop),
            state,
        }
        .into()
    };
    items.iter().enumerate().map(each).collect()
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
        items: &[Item<'_, RuleLimiter>],
        mode: Mode,
        refused: RefusedHits,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        std::future::ready(self.decide_on(items, |i| items[i].rule, mode, refused))
    }
}
