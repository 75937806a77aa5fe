//! One state of the keyed run's shadow map: its reference model, its twin (the single
//! limiter fed the same requests), and what the run must know about its word.

use crate::fuzz::token_bucket::{stored_time_lower_bound, token_bucket_window};
use crate::fuzz::windows::{Readings, SlidingReadings};
use crate::fuzz::{saturating_nanos, NoClock, Reference};
use core::time::Duration;
use limitcore::rules::{
    FixedWindowRule, GcraRule, LeakyBucketRule, Rule, SlidingWindowRule, TokenBucketRule,
};
use limitcore::{Algorithm, Denied, Quota, QuotaError, Refund, SlidingWindow, Snapshot};

/// The first of the words `Keyed` reserves (`u64::MAX − 1`, a redirect; `u64::MAX`, a
/// retired state): a transition to either is refused.
const RESERVED: u64 = u64::MAX - 1;

/// The rule's own word for one state, run beside the model: what `Keyed` holds, so that the
/// harness knows when an admission would leave a reserved word. (The rule's decisions are
/// checked through the twin and the model; this only tells the word.)
enum Word {
    Gcra(GcraRule, u64),
    Bucket(TokenBucketRule, u64),
    Fixed(FixedWindowRule, u64),
    Sliding(SlidingWindowRule, u64),
    Leaky(LeakyBucketRule, u64),
}

impl Word {
    fn new(algorithm: Algorithm, quota: Quota) -> Word {
        fn fresh<R: Rule<State = u64>>(quota: Quota, wrap: fn(R, u64) -> Word) -> Word {
            let rule = R::new(&quota).expect("harness bug: a state for a quota its rule refuses");
            let word = rule.fresh();
            wrap(rule, word)
        }
        match algorithm {
            Algorithm::Gcra => fresh(quota, Word::Gcra),
            Algorithm::TokenBucket => fresh(quota, Word::Bucket),
            Algorithm::FixedWindow => fresh(quota, Word::Fixed),
            Algorithm::SlidingWindow => fresh(quota, Word::Sliding),
            Algorithm::LeakyBucket => fresh(quota, Word::Leaky),
            other => unreachable!("{other} does not run keyed here"),
        }
    }

    /// `n` permits at `now` on the word (the model admitted them): the new word.
    fn take(&mut self, n: u32, now: u64) -> u64 {
        fn on<R: Rule<State = u64>>(rule: &R, word: &mut u64, n: u32, now: u64) -> u64 {
            let _ = rule.take(word, now, n);
            *word
        }
        match self {
            Word::Gcra(r, w) => on(r, w, n, now),
            Word::Bucket(r, w) => on(r, w, n, now),
            Word::Fixed(r, w) => on(r, w, n, now),
            Word::Sliding(r, w) => on(r, w, n, now),
            Word::Leaky(r, w) => on(r, w, n, now),
        }
    }
}

/// The single limiter one key must behave exactly like (its "twin": for the sliding window
/// a `SlidingWindow` with batch 0, which is the formula on exact counts), or the error
/// `Keyed` must give for this quota.
pub(super) fn twin(algorithm: Algorithm, quota: Quota) -> Result<Box<dyn Refund>, QuotaError> {
    match algorithm {
        Algorithm::SlidingWindow => Ok(Box::new(SlidingWindow::with_batch(quota, NoClock, 0)?)),
        _ => algorithm.limiter(quota, NoClock),
    }
}

/// One state of the shadow map (a key's, or the shared overflow state): its quota, its
/// model, its twin, and what the harness needs to know about its word.
pub(super) struct KeyState {
    algorithm: Algorithm,
    pub(super) quota: Quota,
    /// The state's reference model, driven through `reference::Model`.
    model: Reference,
    twin: Box<dyn Refund>,
    /// The state's word, as `Keyed` holds it.
    word: Word,
    /// After the first admission: the token bucket's lower bound of the stored refill time
    /// (see `stored_time_lower_bound`), the latest window admitted in (the windows), the
    /// end of the pacer's queue; `None` before (and always for GCRA).
    mark: Option<u64>,
}

impl KeyState {
    pub(super) fn new(algorithm: Algorithm, quota: Quota) -> KeyState {
        KeyState {
            algorithm,
            quota,
            model: Reference::new(algorithm, quota),
            twin: twin(algorithm, quota)
                .expect("harness bug: a state for a quota the algorithm refuses"),
            word: Word::new(algorithm, quota),
            mark: None,
        }
    }

    /// `n` permits at `now` on the model and on the twin: `(model, twin, reserved)`, with
    /// `reserved` true if the admission leaves one of the words `Keyed` reserves
    /// (`u64::MAX − 1` or `u64::MAX`): `Keyed` refuses such a transition with
    /// [`Denied::BeyondHorizon`] (its contract's "The clock's last nanoseconds"), where
    /// the single limiter admits.
    pub(super) fn decide(
        &mut self,
        n: u32,
        now: u64,
    ) -> (Result<(), Denied>, Result<(), Denied>, bool) {
        let want = self.model.acquire(n, now);
        let twin = self.twin.try_acquire_n_at(n, now);
        if want.is_ok() && n >= 1 {
            let (t, p) = (self.quota.emission_interval_ns(), self.quota.period_ns());
            let word = self.word.take(n, now);
            let mark = match self.algorithm {
                Algorithm::Gcra => None,
                Algorithm::TokenBucket => Some(stored_time_lower_bound(
                    now,
                    self.model.snapshot(now).full_after,
                    t,
                )),
                Algorithm::FixedWindow | Algorithm::SlidingWindow => Some(now / p),
                // `try_acquire` admits only into a drained queue: the slots start now, and
                // the model refused an end past `u64::MAX`.
                Algorithm::LeakyBucket => Some(now + u64::from(n) * t),
                other => unreachable!("{other} does not run keyed here"),
            };
            if let Some(mark) = mark {
                self.mark = Some(self.mark.map_or(mark, |old| old.max(mark)));
            }
            // The harness's own derivation of the word `u64::MAX` must agree with the rule's.
            let retired = self.retired(now);
            assert_eq!(
                retired,
                word == u64::MAX,
                "harness bug: the model says the word is u64::MAX: {retired}, the rule's word is \
                 {word:#x}"
            );
            return (want, twin, word >= RESERVED);
        }
        (want, twin, false)
    }

    /// After an admission at `now`: is the new word `u64::MAX`, the word `Keyed` reserves
    /// for a state retired by eviction? Derived from the model, independently of the rule's
    /// word, and checked against it at every admission. It happens only in the last
    /// nanoseconds of the clock: a
    /// GCRA TAT or the end of the pacer's queue at `u64::MAX`, or a full fixed window
    /// numbered `u64::MAX >> b` with `count = 2^b − 1` (a token bucket's word never has all
    /// its token bits set after a take; a sliding window's never has both counts at
    /// `count`).
    fn retired(&self, now: u64) -> bool {
        match (self.algorithm, self.mark) {
            (Algorithm::Gcra, _) => {
                now.checked_add(saturating_nanos(self.model.snapshot(now).full_after))
                    == Some(u64::MAX)
            }
            (Algorithm::LeakyBucket, Some(end)) => end == u64::MAX,
            (Algorithm::FixedWindow, Some(k)) => {
                let count = self.quota.count();
                let bits = u32::BITS - count.leading_zeros();
                let used = count - self.model.snapshot(now).remaining;
                k == u64::MAX >> bits && u64::from(used) == (1u64 << bits) - 1
            }
            _ => false,
        }
    }

    /// Is the state indistinguishable from a fresh one for every reading at or after `at`
    /// (what `Keyed` may evict, one grace later)? From the model, not from the word.
    pub(super) fn idle(&self, at: u64) -> bool {
        let p = self.quota.period_ns();
        match (self.algorithm, self.mark) {
            (Algorithm::Gcra | Algorithm::TokenBucket, _) => {
                self.model.snapshot(at).full_after.is_zero()
            }
            (_, None) => true,
            (Algorithm::FixedWindow, Some(k)) => at / p > k,
            // Window k's counts weigh on the formula until the end of window k + 1.
            (Algorithm::SlidingWindow, Some(k)) => at / p >= k.saturating_add(2),
            (Algorithm::LeakyBucket, Some(end)) => end <= at,
            (other, _) => unreachable!("{other} does not run keyed here"),
        }
    }

    /// The earliest time at or after `now` from which [`KeyState::idle`] holds (saturated
    /// at `u64::MAX`).
    pub(super) fn idle_from(&self, now: u64) -> u64 {
        let p = self.quota.period_ns();
        let at = match (self.algorithm, self.mark) {
            (Algorithm::Gcra | Algorithm::TokenBucket, _) => {
                now.saturating_add(saturating_nanos(self.model.snapshot(now).full_after))
            }
            (_, None) => now,
            (Algorithm::FixedWindow, Some(k)) => k.saturating_add(1).saturating_mul(p),
            (Algorithm::SlidingWindow, Some(k)) => k.saturating_add(2).saturating_mul(p),
            (Algorithm::LeakyBucket, Some(end)) => end,
            (other, _) => unreachable!("{other} does not run keyed here"),
        };
        at.max(now)
    }

    /// The latest reading at which this state's word is still read exactly, as the
    /// algorithm's documentation gives it: for the token bucket, less than `2^W − R` ns
    /// after the stored refill time (see `token_bucket_differential`); for the sliding
    /// window, a window less than `2^F − tolerance` after the stored one (see
    /// [`SlidingReadings`]); no limit for the others, or before the first admission (a
    /// fresh word is fresh at any time).
    pub(super) fn latest_reading(&self) -> u64 {
        match (self.algorithm, self.mark) {
            (Algorithm::TokenBucket, Some(lb)) => {
                let (w, r) = token_bucket_window(self.quota.burst());
                lb.saturating_add((1u64 << w) - r - 1)
            }
            (Algorithm::SlidingWindow, Some(k)) => {
                let mut r = SlidingReadings::new(&self.quota);
                r.stored = Some(k);
                Readings::Sliding(r).bounds().1
            }
            _ => u64::MAX,
        }
    }

    /// The twin's snapshot at `at`, checked against the model first (`Err`: they differ).
    pub(super) fn snapshot(&self, at: u64) -> Result<Snapshot, String> {
        let got = self.twin.snapshot_at(at);
        let (remaining, full_after) = match self.algorithm {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                let s = self.model.snapshot(at);
                (s.remaining, Some(s.full_after))
            }
            Algorithm::FixedWindow => (self.model.snapshot(at).remaining, None),
            Algorithm::SlidingWindow => (self.model.remaining(at, self.quota.count()), None),
            Algorithm::LeakyBucket => {
                // The queue drains at its end; `remaining` slots fit in what is left.
                let backlog = self.mark.map_or(0, |end| end.saturating_sub(at));
                let free = self.quota.burst_span_ns().saturating_sub(backlog);
                (
                    (free / self.quota.emission_interval_ns()) as u32,
                    Some(Duration::from_nanos(backlog)),
                )
            }
            other => unreachable!("{other} does not run keyed here"),
        };
        if got.remaining != remaining || full_after.is_some_and(|f| f != got.full_after) {
            return Err(format!(
                "  the single limiter: {got:?}\n  its model: remaining {remaining}, full_after \
                 {full_after:?}"
            ));
        }
        Ok(got)
    }
}
