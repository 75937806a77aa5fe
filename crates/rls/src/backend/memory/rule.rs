//! [`RuleLimiter`]: one rule of the in-process backend: the core's keyed limiter of the
//! rule's algorithm (bounded memory), a changed limit's usage carried over on reload, and
//! negative hits given back (the core's credit).

use crate::backend::BackendError;
use crate::clock::SharedClock;
use crate::config::Limit;
use dashmap::DashMap;
use limitcore::clock::Nanos;
use limitcore::{Algorithm, KeyedRefund};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// One rule's state in the in-process backend ([`Memory`](super::Memory)'s
/// [`Backend::Rule`](crate::Backend::Rule)): a keyed limiter of the rule's algorithm
/// (`token-bucket` runs on GCRA's rule: the core's token bucket makes exactly GCRA's
/// decisions), and, for a while after a reload that changed the rule's limit, the limiter
/// it replaced.
///
/// # Examples
///
/// ```
/// use limitcore::Algorithm;
/// use limitcore_rls::{Backend, Limit, Memory, Unit, UnixClock};
///
/// let memory = Memory::new(UnixClock::shared(), 1000);
/// let limit = Limit::new(10, Unit::Second, Algorithm::Gcra, None);
/// let rule = memory.rule("api user", limit, None)?;
/// let changed = memory.rule("api user", Limit { requests_per_unit: 5, ..limit }, Some(&rule))?;
/// # let _ = changed;
/// # Ok::<(), limitcore_rls::BackendError>(())
/// ```
pub struct RuleLimiter {
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

    /// The keyed limiter the rule decides on.
    pub(crate) fn limiter(&self) -> &dyn KeyedRefund<str> {
        &*self.limiter
    }

    /// The most permits one request can take for `key`.
    fn capacity(&self, key: &str) -> u32 {
        self.limiter.quota_for(key).burst()
    }

    /// The permits `key` was charged past this limit and has not paid back at `now`: for
    /// GCRA and the token bucket, exactly (the wait a request for no permits gets, in
    /// emission intervals, rounded up); for the windows and the log, whose states keep a
    /// count past the limit in no form another limit can read, one (at least one permit
    /// past it, never more than was charged: the rest of such a debt is forgiven by a
    /// reload that changes the limit).
    fn debt(&self, key: &str, now: Nanos) -> u32 {
        let Err(denied) = self.limiter.check_at(key, 0, now) else {
            return 0;
        };
        if !matches!(
            self.limit.algorithm,
            Algorithm::Gcra | Algorithm::TokenBucket
        ) {
            return 1;
        }
        let Some(wait) = denied.retry_after() else {
            return 1;
        };
        let interval = self.limiter.quota_for(key).emission_interval_ns().max(1);
        let wait = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        u32::try_from(wait.div_ceil(interval))
            .unwrap_or(u32::MAX)
            .max(1)
    }

    /// Before `key`'s first decision after a reload that changed this rule's limit: charge
    /// the usage the replaced limiter holds for the key (capacity minus remaining, at most
    /// this limit's capacity), once, under the key's entry lock, so that no decision for the
    /// key runs before it lands; a key in debt (charged past the old limit) carries its
    /// usage and its debt ([`RuleLimiter::debt`]) as a charge. Usage is counted in permits
    /// and re-timed at the new limit (as the core's live reconfiguration keeps a budget's
    /// state).
    pub(crate) fn carry_over(&self, key: &str, now: Nanos) {
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
            let over = old.debt(key, now);
            if over > 0 {
                // Charged past the old limit (a cost recorded after the response) and not
                // paid back: carried as a charge, so the new limit refuses until the debt is
                // paid back at its own rate.
                self.limiter.charge_at(key, used.saturating_add(over), now);
                return;
            }
            let take = used.min(self.capacity(key));
            if take > 0 {
                let _ = self.limiter.try_acquire_n_at(key, take, now);
            }
        });
    }

    /// Negative hits (`is_negative_hits`): give back up to `n` of `key`'s permits at `now`,
    /// never past a full state, with no receipt (the core's
    /// [`credit`](KeyedRefund::credit), on every algorithm: GCRA and token bucket move the
    /// TAT back, the windows lower the current window's count, the sliding log drops its
    /// newest entries still in the window; a saturated window count, a log over its limit
    /// and a key at the key bound give nothing back, never more permissive).
    pub(crate) fn credit(&self, key: &str, n: u32, now: Nanos) {
        self.limiter.credit(key, n, now);
    }
}
