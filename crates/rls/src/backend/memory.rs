//! The in-process backend: one of the core's keyed limiters per rule (bounded memory), the
//! all-or-nothing protocol over the core's decision and refund seams, and a changed
//! limit's usage carried over on reload.

use super::{Item, Mode, Op, Outcome};
use crate::clock::SharedClock;
use crate::config::Limit;
use crate::BackendError;
use dashmap::DashMap;
use limitcore::clock::Nanos;
use limitcore::{Algorithm, Denied, KeyedRefund, Receipt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// One rule's limiter: a keyed limiter of the rule's algorithm (`token-bucket` runs on
/// GCRA's rule: the core's token bucket makes exactly GCRA's decisions), and, for a while
/// after a reload that changed the rule's limit, the limiter it replaced.
pub(crate) struct RuleLimiter {
    pub(crate) limit: Limit,
    limiter: Box<dyn KeyedRefund<str>>,
    period_ns: Nanos,
    /// The replaced limiter whose usage is carried over key by key, while `carrying`.
    carry: RwLock<Option<Arc<Carry>>>,
    carrying: AtomicBool,
}

impl std::fmt::Debug for RuleLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleLimiter")
            .field("limit", &self.limit)
            .finish()
    }
}

/// A replaced limiter, and the keys whose usage was carried from it already.
struct Carry {
    old: Arc<RuleLimiter>,
    /// Carry-over ends at this time (ns of the clock): by then every state of the old
    /// limiter is fresh (two of its periods, plus the core's eviction grace).
    until: Nanos,
    done: DashMap<String, ()>,
}

impl RuleLimiter {
    /// A fresh limiter for `limit` (nonzero count), carrying over from `previous` if given.
    pub(crate) fn new(
        limit: Limit,
        clock: &SharedClock,
        max_keys: usize,
        previous: Option<Arc<RuleLimiter>>,
    ) -> Result<Arc<Self>, BackendError> {
        let quota = limit
            .quota()
            .map_err(|e| BackendError(format!("limit {limit:?}: {e}")))?;
        let algorithm = match limit.algorithm {
            Algorithm::TokenBucket => Algorithm::Gcra,
            a => a,
        };
        let limiter = algorithm
            .keyed::<str, SharedClock>(quota, Arc::clone(clock), Some(max_keys))
            .map_err(|e| BackendError(format!("limit {limit:?}: {e}")))?;
        let now = clock.now();
        let period_ns = quota.period_ns();
        let carry = previous.map(|old| {
            let grace = 1 << 30;
            Arc::new(Carry {
                until: now
                    .saturating_add(old.period_ns.saturating_mul(2))
                    .saturating_add(grace),
                old,
                done: DashMap::new(),
            })
        });
        Ok(Arc::new(RuleLimiter {
            limit,
            limiter,
            period_ns,
            carrying: AtomicBool::new(carry.is_some()),
            carry: RwLock::new(carry),
        }))
    }

    /// The most permits one request can take for `key`.
    fn capacity(&self, key: &str) -> u32 {
        self.limiter.quota_for(key).burst()
    }

    /// Before `key`'s first decision after a reload that changed this rule's limit: charge
    /// the usage the replaced limiter holds for the key (capacity minus remaining, at most
    /// this limit's capacity), once, under the key's entry lock, so that no decision for the
    /// key runs before it lands. Usage is counted in permits and re-timed at the new limit
    /// (as the core's live reconfiguration keeps a budget's state): never more permissive
    /// than the old state, to within one permit.
    fn carry_over(&self, key: &str, now: Nanos) {
        // Relaxed: a hint; the lock below decides.
        if !self.carrying.load(Ordering::Relaxed) {
            return;
        }
        let carry = match self.carry.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let Some(carry) = carry else {
            return;
        };
        if now >= carry.until {
            self.carrying.store(false, Ordering::Relaxed);
            if let Ok(mut guard) = self.carry.write() {
                *guard = None;
            }
            return;
        }
        if carry.done.contains_key(key) {
            return;
        }
        carry.done.entry(key.to_owned()).or_insert_with(|| {
            let old = &carry.old;
            let used = old
                .capacity(key)
                .saturating_sub(old.limiter.snapshot_at(key, now).remaining);
            let take = used.min(self.capacity(key));
            if take > 0 {
                let _ = self.limiter.try_acquire_n_at(key, take, now);
            }
        });
    }

    /// Give back up to `n` permits of `key` at `now`, never past an empty state.
    fn give_back(&self, key: &str, n: u32, now: Nanos) -> Result<(), BackendError> {
        let used = self
            .capacity(key)
            .saturating_sub(self.limiter.snapshot_at(key, now).remaining);
        let receipt = match self.limit.algorithm {
            // The TAT rules' receipt marks where the admission started: marking it now
            // gives the whole cost back, the TAT saturating at an empty state.
            Algorithm::Gcra | Algorithm::TokenBucket => Receipt::new(n, now),
            // The window rules' receipt marks the window: this one, at most its usage.
            Algorithm::FixedWindow | Algorithm::SlidingWindow => {
                Receipt::new(n.min(used), now / self.period_ns.max(1))
            }
            _ => {
                return Err(BackendError(format!(
                    "is_negative_hits is not supported by {} rules",
                    self.limit.algorithm
                )))
            }
        };
        if receipt.n() > 0 {
            self.limiter.refund(key, receipt, now);
        }
        Ok(())
    }

    /// The outcome of reading `key`'s state, consuming nothing.
    fn look(&self, key: &str, now: Nanos, n: u32) -> Outcome {
        let state = self.limiter.snapshot_at(key, now);
        match self.limiter.check_at(key, n, now) {
            Ok(()) => Outcome::admitted(state.remaining, state.full_after),
            Err(denied) => Outcome::refused(state.remaining, reset(denied, state.full_after)),
        }
    }
}

/// The time until a refused request could be admitted in full, or, when no wait can
/// (above the capacity), the time until the state is full again.
fn reset(denied: Denied, full_after: Duration) -> Duration {
    denied.retry_after().unwrap_or(full_after)
}

/// The in-process backend: limiters built on one clock, with a bound on keys per rule.
#[derive(Clone)]
pub struct Memory {
    pub(crate) clock: SharedClock,
    pub(crate) max_keys: usize,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

impl Memory {
    /// Decide `items` (each with a memory handle) all or nothing, or each on its own.
    pub(crate) fn decide(
        &self,
        items: &[Item],
        limiters: &[&RuleLimiter],
        mode: Mode,
    ) -> Result<Vec<Outcome>, BackendError> {
        let now = self.clock.now();
        let mut out: Vec<Outcome> = Vec::with_capacity(items.len());
        let mut receipts: Vec<(usize, Receipt)> = Vec::new();
        let mut refused = false;
        for (i, (item, rl)) in items.iter().zip(limiters).enumerate() {
            rl.carry_over(&item.key, now);
            let outcome = match item.op {
                Op::Check => rl.look(&item.key, now, 0),
                Op::Refund(n) => {
                    rl.give_back(&item.key, n, now)?;
                    rl.look(&item.key, now, 0)
                }
                Op::Take(n) if refused => rl.look(&item.key, now, n),
                Op::Take(n) => {
                    let (result, state) = rl.limiter.decide_refundable_at(&item.key, n, now);
                    match result {
                        Ok(receipt) => {
                            if mode == Mode::AllOrNothing {
                                receipts.push((i, receipt));
                            }
                            Outcome::admitted(state.remaining, state.full_after)
                        }
                        Err(denied) => {
                            if !item.soft && mode == Mode::AllOrNothing {
                                refused = true;
                                // Every earlier admission given back, the latest first, at
                                // the request's time (or the clock's, if later).
                                let at = now.max(self.clock.now());
                                for (j, receipt) in receipts.drain(..).rev() {
                                    limiters[j].limiter.refund(&items[j].key, receipt, at);
                                    let state = limiters[j].limiter.snapshot_at(&items[j].key, now);
                                    out[j].remaining = state.remaining;
                                    out[j].reset = Some(state.full_after);
                                }
                            } else if mode == Mode::ChargeEach
                                && rl.limit.algorithm == Algorithm::FixedWindow
                                && state.remaining > 0
                            {
                                // envoyproxy/ratelimit counts a refused request too: its
                                // window stays closed for the rest of the window. Closing
                                // it here keeps every later decision identical.
                                let _ =
                                    rl.limiter.try_acquire_n_at(&item.key, state.remaining, now);
                                return_refused(&mut out, 0, reset(denied, state.full_after));
                                continue;
                            }
                            Outcome::refused(state.remaining, reset(denied, state.full_after))
                        }
                    }
                }
            };
            out.push(outcome);
        }
        Ok(out)
    }
}

/// Push a refusal with `remaining` left.
fn return_refused(out: &mut Vec<Outcome>, remaining: u32, reset: Duration) {
    out.push(Outcome::refused(remaining, reset));
}
