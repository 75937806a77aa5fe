//! The decision path of the leased limiter: a key's entry, the spend on its word, the refill
//! an admission starts, the refusal of a word that needs a lease (counted towards the
//! node's demand on the key), and the asynchronous entry point that waits for a lease.

use super::entry::{live_entry, Entry, KeysRef};
use super::{LeaseRule, LeasedLimiter, Spend};
use crate::policy::{Source, Verdict};
use crate::sync::Ordering;
use limitcore::clock::{Clock, Nanos};
use limitcore::rules::precheck;
use limitcore::{Decision, Denied};
use std::sync::Arc;
use std::time::Duration;

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// Decide `n` permits for `key` at `now` (ns of this limiter's clock), with where the
    /// decision came from: [`Source::Lease`] (held cells or a local block) or
    /// [`Source::Fallback`] (Redis unreachable and no cells held). A key with no valid
    /// cells is refused with the round-trip estimate as its wait, and its lease is fetched
    /// (see the type's "Refusals").
    pub fn decide_verdict_at(&self, key: &str, n: u32, now: Nanos) -> Verdict {
        let guard = self.inner.keys.pin();
        self.decide_entry(self.entry(&guard, key), key, n, now)
    }

    /// [`LeasedLimiter::decide_verdict_at`]'s result alone: the same decision, with no
    /// snapshot of the key's state computed (what [`KeyedRateLimiter::try_acquire_n_at`]
    /// returns).
    #[inline]
    pub(super) fn try_decide_at(&self, key: &str, n: u32, now: Nanos) -> Result<(), Denied> {
        let guard = self.inner.keys.pin();
        self.try_entry(self.entry(&guard, key), key, n, now)
    }

    /// The decision on `key`'s `entry` (looked up or pinned by a [`LeasedKey`]), with its
    /// state and source.
    pub(super) fn decide_entry(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Verdict {
        let rule = &self.inner.rule;
        let lease = |result, state| Verdict {
            decision: Decision { result, state },
            source: Source::Lease,
        };
        match self.spend(entry, n, now) {
            Ok(word) => {
                self.after_admission(entry, key, n, &word, now);
                lease(Ok(()), rule.snapshot(&word, now))
            }
            Err((Refusal::Stands(denied), word)) => lease(Err(denied), rule.snapshot(&word, now)),
            Err((Refusal::NeedsLease, word)) => match self.lease_needed(entry, key, n, now) {
                Ok(retry_after) => lease(
                    Err(Denied::RateLimited { retry_after }),
                    rule.snapshot(&word, now),
                ),
                Err(fallback) => fallback,
            },
        }
    }

    /// [`LeasedLimiter::decide_entry`]'s result alone, with no snapshot computed.
    #[inline]
    pub(super) fn try_entry(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Result<(), Denied> {
        match self.spend(entry, n, now) {
            Ok(word) => {
                self.after_admission(entry, key, n, &word, now);
                Ok(())
            }
            Err((Refusal::Stands(denied), _)) => Err(denied),
            Err((Refusal::NeedsLease, _)) => match self.lease_needed(entry, key, n, now) {
                Ok(retry_after) => Err(Denied::RateLimited { retry_after }),
                Err(fallback) => fallback.decision.result,
            },
        }
    }

    /// `key`'s live entry (see [`live_entry`]): created with no cells on its first
    /// request, and in place of an entry the sweep retired.
    #[inline]
    pub(super) fn entry<'g>(&self, guard: &'g KeysRef<'_>, key: &str) -> &'g Arc<Entry> {
        live_entry(guard, key, || self.inner.entry())
    }

    /// Take `n` cells from `entry`'s word at `now` ([`LeaseRule::spend`] in the core's
    /// compare-and-swap loop, [`WordCell::update`](limitcore::cell::WordCell::update)),
    /// after the size checks of every core shell ([`precheck`]: `n = 0` admits and writes
    /// nothing, `n` above the capacity is [`Denied::ExceedsCapacity`]): the word it left on
    /// admission, or the refusal with the word it saw. A refusal for want of cells is
    /// counted towards the node's demand ([`Entry::count_refused`]).
    #[inline]
    fn spend(&self, entry: &Entry, n: u32, now: Nanos) -> Result<u64, (Refusal, u64)> {
        let rule = &self.inner.rule;
        match precheck(n, rule.capacity()) {
            Ok(true) => {}
            Ok(false) => return Ok(entry.word.load()),
            Err(denied) => return Err((Refusal::Stands(denied), entry.word.load())),
        }
        let spent = entry.word.update(|word| {
            let seen = *word;
            match rule.spend(word, now, n) {
                Ok(()) => Ok(*word),
                Err(Spend::Blocked { retry_after }) => {
                    Err((Refusal::Stands(Denied::RateLimited { retry_after }), seen))
                }
                Err(Spend::NeedsLease) => Err((Refusal::NeedsLease, seen)),
            }
        });
        if spent.is_err() {
            // A refusal for want of cells (blocked, or needing a lease): part of the node's
            // offered load on the key, which its next lease request reports.
            entry.count_refused(n, now, self.inner.interval_ns);
        }
        spent
    }

    /// After an admission that left `word`: fetch the next lease in the background when at
    /// most half the lease size is left.
    #[inline]
    pub(super) fn after_admission(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        word: &u64,
        now: Nanos,
    ) {
        // The cells left: the admission succeeded at `now`, so the word's cells are valid.
        let (left, _, _) = LeaseRule::unpack(*word);
        // Relaxed: the lease size is a tuning hint; a stale one only moves the refill.
        if n > 0 && left <= entry.size.load(Ordering::Relaxed) / 2 {
            self.refill(entry, key, now, false);
        }
    }

    /// After [`Spend::NeedsLease`]: `Ok(retry_after)` once a lease is being fetched, the
    /// node's round-trip estimate (at least 1 µs; an estimate, not an exact wait), or the
    /// outage policy's verdict if the breaker is open.
    #[inline]
    fn lease_needed(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Result<Duration, Verdict> {
        let gcra = &self.inner.gcra;
        if gcra.redis().is_open() {
            return Err(gcra.fall_back(key, n));
        }
        self.refill(entry, key, now, true);
        Ok(self.rtt().max(Duration::from_micros(1)))
    }

    /// Decide `n` permits for `key` now, waiting (up to the Redis deadline) for a lease if
    /// the node holds none for this key: the asynchronous entry point, which never refuses
    /// a key's first request only because its lease has not arrived yet.
    ///
    /// A request above the largest lease `L` (which no lease can hold) is decided on Redis
    /// by the exact script, one call, as [`RedisGcra::decide`](crate::RedisGcra::decide) would (under a debt policy up
    /// to [`LeasedLimiter::capacity`], admitted only from a full key); see the type's
    /// "Capacity".
    pub async fn acquire(&self, key: &str, n: u32) -> Verdict {
        if n > self.max_lease() {
            return self.oversized(key, n).await;
        }
        self.acquire_by(|| {
            let guard = self.inner.keys.pin();
            let entry = self.entry(&guard, key);
            let now = self.inner.clock.now();
            (self.decide_entry(entry, key, n, now), Arc::clone(entry))
        })
        .await
    }

    /// Decide by `decide` (a decision and the entry it was made on) until it admits, or
    /// refuses for any reason but a lease not yet arrived (a Redis refusal's local block,
    /// `n` above the capacity, the outage policy), or the Redis deadline has passed; between
    /// decisions, wait for the entry's lease fetch.
    pub(super) async fn acquire_by(
        &self,
        mut decide: impl FnMut() -> (Verdict, Arc<Entry>),
    ) -> Verdict {
        let deadline = tokio::time::Instant::now() + self.redis().config().get_deadline();
        loop {
            let (verdict, entry) = decide();
            let waits = verdict.source == Source::Lease
                && matches!(verdict.decision.result, Err(Denied::RateLimited { .. }));
            if !waits || !self.await_lease(&entry, deadline).await {
                return verdict;
            }
        }
    }

    /// After a refusal of `entry`'s word: wait until its lease fetch in flight ends, if
    /// one is (the sweep's brief hold of the fetch slot counts as one), or until the sweep
    /// retires the entry; `true` to decide again at once (on a retired entry the caller's
    /// lookup then finds a new one). `false` if the key is blocked by a Redis refusal
    /// instead (the refusal, with its exact wait, is then the answer) or `deadline` has
    /// passed.
    async fn await_lease(&self, entry: &Entry, deadline: tokio::time::Instant) -> bool {
        let now = self.inner.clock.now();
        if self
            .inner
            .rule
            .blocked_until(&entry.word.load(), now)
            .is_some()
        {
            return false;
        }
        let arrived = entry.arrived.listen();
        // After the listener exists (see `Entry::awaits_fetch` for why that order wakes
        // the waiter whichever of the fetch's end, the sweep and this check comes first).
        if entry.awaits_fetch() {
            return tokio::time::timeout_at(deadline, arrived).await.is_ok();
        }
        tokio::time::Instant::now() < deadline
    }
}

/// Why [`LeasedLimiter::spend`] refused: a refusal that is the answer as it stands (the
/// local block's exact wait, the capacity), or a word that needs a lease.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    Stands(Denied),
    NeedsLease,
}
