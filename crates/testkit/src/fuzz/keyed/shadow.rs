//! The shadow of a `Keyed`: which keys have a state of their own, created and evicted
//! exactly when `Keyed` must, the overrides, the keys redirected to a state under their own
//! quota, the overflow state and the sweep schedule; and every operation of a keyed run
//! checked against it.

use super::state::{twin, KeyState};
use super::GRACE;
use crate::fuzz::{fail_with_history, saturating_nanos, NoClock, Reference};
use core::fmt::Write as _;
use limitcore::rules::{QuotaRule, Rule};
use limitcore::{Algorithm, Denied, Keyed, Quota, QuotaError, Snapshot, Store};
use std::collections::{BTreeMap, BTreeSet};

/// One operation of a keyed run, at the run's `now` unless it says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyedOp {
    /// Move `now` forward by this many ns (clamped to the readings the run allows).
    Advance(u64),
    /// Move `now` back by this many ns (at most the eviction grace behind the latest
    /// reading).
    Back(u64),
    /// Set `now` (inside the readings the run allows).
    SetTime(u64),
    /// Move `now` forward by the last finite `retry_after` (or 1 ns less), then ask again.
    WaitRetry(u64),
    /// Move `now` to where the key becomes evictable (idle for the grace), minus this many
    /// ns.
    ToEvictable(u8, u64),
    /// `try_acquire_n_at(key, n, now)`.
    Acquire(u8, u32),
    /// `evict_idle_at(now)`.
    EvictIdle,
    /// `reconfigure_key_at(key, quota, now)`.
    SetQuota(u8, Quota),
    /// `snapshot_at(key, t)`.
    SnapshotAt(u8, u64),
}

/// Which state the shadow decided a request on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// By size alone (`n == 0`, or above the capacity of a key without a state).
    Size,
    /// The key's own state.
    Own,
    /// A state created for this request.
    New,
    /// The shared overflow state (no room for the key).
    Overflow,
}

/// What the shadow says a request must give.
struct Expected {
    /// The model's decision.
    want: Result<(), Denied>,
    /// The single limiter's (none for a decision by size alone).
    twin: Option<Result<(), Denied>>,
    place: Place,
    /// The admission leaves a word `Keyed` reserves (`u64::MAX − 1` or `u64::MAX`: see
    /// [`KeyState::decide`]).
    retired: bool,
}

/// What a step gave (`Keyed`'s answer; the shadow agreed or the run failed). Its fields
/// are read by `Debug` only, in the failure message.
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub(super) enum KeyedOutcome {
    Time,
    Decision(Result<(), Denied>, Place),
    Evicted(usize),
    SetQuota(Result<(), QuotaError>),
    Snapshot(Snapshot),
}

/// A [`Keyed`] and its shadow: a map of [`KeyState`]s that mirrors `Keyed`'s map (which
/// keys have a state of their own, created and evicted exactly when `Keyed` must), the
/// overrides, the overflow state and the sweep schedule.
pub(super) struct KeyedDiff<'a, R: Rule, S: Store<u8>> {
    pub(super) keyed: &'a Keyed<u8, R, NoClock, S>,
    pub(super) alg: Algorithm,
    /// The default quota (for a window, with the count as its burst).
    pub(super) default: Quota,
    pub(super) setup: String,
    pub(super) max_keys: usize,
    /// The automatic sweep interval, ns (0: off).
    pub(super) sweep_every: u64,
    /// The time from which the next automatic sweep may run.
    pub(super) next_sweep: u64,
    /// The live states: a key's state under the default quota, or (for a key in
    /// `redirects`) its state under its own quota (`Keyed` never has both for one key).
    pub(super) slots: BTreeMap<u8, KeyState>,
    pub(super) overrides: BTreeMap<u8, Quota>,
    /// The keys whose entry in `Keyed`'s main map is the redirect word: every key that got a
    /// state while it had an override. Kept for good (counted by `len()` and against
    /// `max_keys`); a redirected key's next state is created under its override without a
    /// room check (its entry exists).
    pub(super) redirects: BTreeSet<u8>,
    pub(super) overflow: KeyState,
    /// Each key's model over its whole life, never evicted: every decision on the key's
    /// own state must equal it (eviction changes no decision). Restarted when the key gets
    /// a state under another quota; dropped when the key is decided on the overflow state.
    pub(super) forever: BTreeMap<u8, (Quota, Reference)>,
    pub(super) now: u64,
    /// The latest reading so far: no reading may be more than the grace behind it.
    pub(super) latest: u64,
    pub(super) start: u64,
    /// The last denial with a finite wait: `(key, n, retry_after in ns)`.
    pub(super) last_denied: Option<(u8, u32, u64)>,
    pub(super) history: Vec<(KeyedOp, u64, KeyedOutcome)>,
    /// The run cannot go on (see `KeyState::decide`).
    pub(super) stopped: bool,
}

impl<R: QuotaRule, S: Store<u8>> KeyedDiff<'_, R, S> {
    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    fn fail(&self, what: &str, op: KeyedOp, detail: &str) -> ! {
        let mut msg = String::new();
        let q = &self.default;
        let _ = writeln!(
            msg,
            "[keyed_differential] Keyed<u8, {:?}> on {}: {what}",
            self.alg,
            core::any::type_name::<S>()
        );
        let _ = writeln!(
            msg,
            "  default quota: {q} = {q:?} (count {}, period {} ns, interval {} ns, burst {})",
            q.count(),
            q.period_ns(),
            q.emission_interval_ns(),
            q.burst()
        );
        let _ = writeln!(msg, "  setup: {}", self.setup);
        let _ = writeln!(
            msg,
            "  at step {}: {op:?} with now = {} (latest reading {}, u64::MAX - now = {}); the \
             run started at {}",
            self.history.len(),
            self.now,
            self.latest,
            u64::MAX - self.now,
            self.start
        );
        let _ = writeln!(msg, "{detail}");
        let _ = writeln!(
            msg,
            "  shadow map ({} keys): states {:?}, redirected {:?}; overrides: {:?}; next sweep \
             at {}",
            self.len(),
            self.slots.keys().collect::<Vec<_>>(),
            self.redirects,
            self.overrides,
            self.next_sweep
        );
        fail_with_history(msg, &self.history, |(op, now, outcome)| {
            format!("{op:?} now={now} -> {outcome:?}")
        })
    }

    pub(super) fn record(&mut self, op: KeyedOp, outcome: KeyedOutcome) {
        self.history.push((op, self.now, outcome));
    }

    /// The readings the run may use now: at most the grace behind the latest one (within
    /// it a stale reading is plausible, and eviction must not show), and no later than any
    /// state's
    /// [`KeyState::latest_reading`].
    pub(super) fn bounds(&self) -> (u64, u64) {
        let lo = self.latest.saturating_sub(GRACE);
        let hi = self
            .slots
            .values()
            .chain([&self.overflow])
            .map(KeyState::latest_reading)
            .min()
            .unwrap_or(u64::MAX);
        assert!(
            self.latest <= hi,
            "harness bug: the latest reading {} is past a state's limit {hi}",
            self.latest
        );
        (lo, hi)
    }

    pub(super) fn move_to(&mut self, op: KeyedOp, to: u64) {
        let (lo, hi) = self.bounds();
        self.now = to.clamp(lo, hi);
        self.latest = self.latest.max(self.now);
        self.record(op, KeyedOutcome::Time);
    }

    /// The quota a new state for `key` gets.
    fn quota_for_new(&self, key: u8) -> Quota {
        self.overrides.get(&key).copied().unwrap_or(self.default)
    }

    /// `Keyed::len()`: the keys with an entry in the main map (a default state, or the
    /// redirect word).
    fn len(&self) -> usize {
        self.slots
            .keys()
            .filter(|k| !self.redirects.contains(k))
            .count()
            + self.redirects.len()
    }

    /// Remove the states idle at `now − grace`, as `Keyed::evict_idle_at(now)` must.
    fn shadow_evict(&mut self, now: u64) -> Vec<u8> {
        let Some(at) = now.checked_sub(GRACE) else {
            return Vec::new();
        };
        let idle: Vec<u8> = self
            .slots
            .iter()
            .filter(|(_, s)| s.idle(at))
            .map(|(&k, _)| k)
            .collect();
        for k in &idle {
            self.slots.remove(k);
        }
        idle
    }

    /// `Keyed::room_for_new_key`, on the shadow: sweep first if one is due, then is there
    /// room for one more key?
    fn shadow_room(&mut self, now: u64) -> bool {
        let full = self.len() >= self.max_keys;
        if (self.sweep_every > 0 || full) && now >= self.next_sweep {
            self.next_sweep = now.saturating_add(self.sweep_every.max(1_000_000));
            self.shadow_evict(now);
        }
        self.len() < self.max_keys
    }

    /// What `try_acquire_n_at(key, n, now)` must give.
    fn shadow_acquire(&mut self, key: u8, n: u32, now: u64) -> Expected {
        let by_size = |want| Expected {
            want,
            twin: None,
            place: Place::Size,
            retired: false,
        };
        let on = |s: &mut KeyState, place| {
            let (want, twin, retired) = s.decide(n, now);
            Expected {
                want,
                twin: Some(twin),
                place,
                retired,
            }
        };
        if let Some(s) = self.slots.get_mut(&key) {
            // A request for no permits reads the key's state (refused in debt), writes none.
            return on(s, Place::Own);
        }
        if n == 0 {
            // An unknown key is fresh (never in debt) and gets no state; at the key bound its
            // decisions are the overflow state's, with no sweep (only a new state sweeps).
            if self.len() >= self.max_keys && !self.redirects.contains(&key) {
                return on(&mut self.overflow, Place::Overflow);
            }
            return by_size(Ok(()));
        }
        let quota = self.quota_for_new(key);
        let capacity = quota.burst();
        if n > capacity {
            return by_size(Err(Denied::ExceedsCapacity { capacity }));
        }
        // A redirected key has its entry already: no room check.
        if !self.redirects.contains(&key) {
            if !self.shadow_room(now) {
                return on(&mut self.overflow, Place::Overflow);
            }
            if self.overrides.contains_key(&key) {
                self.redirects.insert(key);
            }
        }
        let mut s = KeyState::new(self.alg, quota);
        let expected = on(&mut s, Place::New);
        self.slots.insert(key, s);
        expected
    }

    fn check_len(&self, op: KeyedOp) {
        let len = self.keyed.len();
        // Redirected keys count too: a key gets its redirect only through the room check.
        if len != self.len() || len > self.max_keys || self.keyed.is_empty() != (len == 0) {
            self.fail(
                "len",
                op,
                &format!(
                    "  Keyed::len() = {len} (is_empty {}), but the shadow map holds {} keys \
                     ({} states, {} redirected keys; max_keys {})",
                    self.keyed.is_empty(),
                    self.len(),
                    self.slots.len(),
                    self.redirects.len(),
                    self.max_keys
                ),
            );
        }
    }

    pub(super) fn acquire(&mut self, op: KeyedOp, key: u8, n: u32) {
        let now = self.now;
        let got = self.keyed.try_acquire_n_at(&key, n, now);
        let Expected {
            want,
            twin,
            place,
            retired,
        } = self.shadow_acquire(key, n, now);
        if retired {
            // Refused where the model and the single limiter admit: the states part here, so
            // the run ends (after checking that the refusal is the documented one).
            if got != Err(Denied::BeyondHorizon) || twin != Some(want) {
                self.fail(
                    "a transition to a reserved word (u64::MAX - 1 or u64::MAX)",
                    op,
                    &format!(
                        "  Keyed: {got:?} (expected never: BeyondHorizon)\n  model ({place:?}): \
                         {want:?}\n  the single limiter: {twin:?}"
                    ),
                );
            }
            self.record(op, KeyedOutcome::Decision(got, place));
            self.stopped = true;
            return;
        }
        if got != want || twin.is_some_and(|t| t != want) {
            self.fail(
                "decision",
                op,
                &format!(
                    "  Keyed: {got:?}\n  model ({place:?}): {want:?}\n  the single limiter: \
                     {twin:?}"
                ),
            );
        }
        match place {
            Place::Own | Place::New => {
                let quota = self.slots[&key].quota;
                let alg = self.alg;
                let ever = self
                    .forever
                    .entry(key)
                    .or_insert_with(|| (quota, Reference::new(alg, quota)));
                if ever.0 != quota {
                    *ever = (quota, Reference::new(alg, quota));
                }
                let ever = ever.1.acquire(n, now);
                if ever != want {
                    self.fail(
                        "eviction changed a decision",
                        op,
                        &format!(
                            "  Keyed and the key's current model: {want:?} ({place:?})\n  the \
                             key's model over its whole life (never evicted): {ever:?}"
                        ),
                    );
                }
            }
            Place::Overflow => {
                self.forever.remove(&key);
            }
            Place::Size => {}
        }
        self.record(op, KeyedOutcome::Decision(got, place));
        if let Err(Denied::RateLimited { retry_after }) = got {
            self.last_denied = Some((key, n, saturating_nanos(retry_after)));
        }
        self.check_len(op);
    }

    pub(super) fn evict(&mut self, op: KeyedOp) {
        let now = self.now;
        let got = self.keyed.evict_idle_at(now);
        let want = self.shadow_evict(now);
        if got != want.len() {
            self.fail(
                "evict_idle_at",
                op,
                &format!(
                    "  Keyed evicted {got} keys; the shadow evicts {} (keys {want:?})",
                    want.len()
                ),
            );
        }
        self.record(op, KeyedOutcome::Evicted(got));
        self.check_len(op);
    }

    pub(super) fn reconfigure_key(&mut self, op: KeyedOp, key: u8, quota: Quota) {
        let now = self.now;
        let got = self.keyed.reconfigure_key_at(key, quota, now);
        let want = twin(self.alg, quota).map(|_| ());
        if got != want {
            self.fail(
                "reconfigure_key_at",
                op,
                &format!("  Keyed: {got:?}\n  the single limiter's constructor: {want:?}"),
            );
        }
        if want.is_ok() {
            self.overrides.insert(key, quota);
            // An idle state is evicted at once, so the quota applies to the next request.
            if let Some(at) = now.checked_sub(GRACE) {
                if self.slots.get(&key).is_some_and(|s| s.idle(at)) {
                    self.slots.remove(&key);
                }
            }
        }
        self.record(op, KeyedOutcome::SetQuota(got));
        self.check_len(op);
    }

    pub(super) fn snapshot(&mut self, op: KeyedOp, key: u8, at: u64) {
        let got = self.keyed.snapshot_at(&key, at);
        let fresh;
        let state = match self.slots.get(&key) {
            Some(s) => s,
            None => {
                // A fresh state under the quota the key's next state would get.
                fresh = KeyState::new(self.alg, self.quota_for_new(key));
                &fresh
            }
        };
        let want = match state.snapshot(at) {
            Ok(s) => s,
            Err(detail) => self.fail("the single limiter against its model", op, &detail),
        };
        if got != want {
            self.fail(
                "snapshot",
                op,
                &format!(
                    "  Keyed: {got:?}\n  the single limiter ({}): {want:?}",
                    if self.slots.contains_key(&key) {
                        "the key's state"
                    } else {
                        "fresh"
                    }
                ),
            );
        }
        self.latest = self.latest.max(at);
        self.record(op, KeyedOutcome::Snapshot(got));
    }
}
