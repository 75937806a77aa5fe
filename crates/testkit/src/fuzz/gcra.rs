//! `gcra_differential`, and the clocked differential run it shares with
//! `token_bucket_differential`: a limiter on a [`ManualClock`] against `GcraModel` and
//! `TokenBucketModel`.

use super::decode::{
    arbitrary_delta, arbitrary_n, arbitrary_quota, arbitrary_start, arbitrary_time,
};
use super::{fail_with_history, probe_retry_after, ArbResult, Reference, MAX_OPS};
use arbitrary::Unstructured;
use core::fmt::Write as _;
use core::time::Duration;
use limitcore::clock::{Clock, ManualClock};
use limitcore::{Algorithm, Denied, Gcra, Quota, RateLimiter, Snapshot};

/// One operation of a clocked differential run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Move the clock forward by this many ns (saturating).
    Advance(u64),
    /// Set the clock (may move it backwards).
    SetTime(u64),
    /// `try_acquire_n(n)` on the limiter's clock.
    Acquire(u32),
    /// `try_acquire_n_at(n, now)` at an explicit time.
    AcquireAt(u32, u64),
    /// `snapshot()` on the limiter's clock.
    Snapshot,
    /// `snapshot_at(now)` at an explicit time.
    SnapshotAt(u64),
}

/// What a step gave (the limiter's answer; the models agreed or the run failed). Its
/// fields are read by `Debug` only, in the failure message.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
enum Outcome {
    Clock,
    Decision(Result<(), Denied>),
    Snapshot(Snapshot),
}

#[derive(Debug, Clone, Copy)]
struct Step {
    phase: u8,
    op: Op,
    /// The time the step was decided at (the clock after a clock move).
    now: u64,
    outcome: Outcome,
}

/// A limiter under test, both reference models, the clock they share, and the history so
/// far (for the failure message).
pub(super) struct Differential<'a, L: RateLimiter> {
    target: &'static str,
    name: &'static str,
    pub(super) quota: Quota,
    limiter: &'a L,
    pub(super) clock: ManualClock,
    /// `GcraModel` and `TokenBucketModel`, by name. The first is the one the contract
    /// checks probe (on copies): the limiter has just been shown to equal both.
    models: [(&'static str, Reference); 2],
    history: Vec<Step>,
    pub(super) phase: u8,
    /// The clock's reading when the run started.
    start: u64,
}

impl<'a, L: RateLimiter> Differential<'a, L> {
    pub(super) fn new(
        target: &'static str,
        name: &'static str,
        quota: Quota,
        limiter: &'a L,
        clock: ManualClock,
    ) -> Self {
        let start = clock.now();
        Differential {
            target,
            name,
            quota,
            limiter,
            clock,
            models: [
                ("GcraModel", Reference::new(Algorithm::Gcra, quota)),
                (
                    "TokenBucketModel",
                    Reference::new(Algorithm::TokenBucket, quota),
                ),
            ],
            history: Vec::new(),
            phase: 1,
            start,
        }
    }

    /// The model the contract checks probe: `GcraModel`.
    pub(super) fn gcra(&self) -> &Reference {
        &self.models[0].1
    }

    fn record(&mut self, op: Op, now: u64, outcome: Outcome) {
        self.history.push(Step {
            phase: self.phase,
            op,
            now,
            outcome,
        });
    }

    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    fn fail(&self, what: &str, op: Op, now: u64, detail: &str) -> ! {
        let mut msg = String::new();
        let _ = writeln!(
            msg,
            "[{}] {} against the reference models: {what}",
            self.target, self.name
        );
        let _ = writeln!(
            msg,
            "  quota: {} = {:?} (interval {} ns, burst span {} ns)",
            self.quota,
            self.quota,
            self.quota.emission_interval_ns(),
            self.quota.burst_span_ns()
        );
        let _ = writeln!(
            msg,
            "  at step {} (phase {}): {op:?} with now = {now} (u64::MAX - now = {}); the clock \
             started at {}",
            self.history.len(),
            self.phase,
            u64::MAX - now,
            self.start
        );
        let _ = writeln!(msg, "{detail}");
        fail_with_history(msg, &self.history, |s| {
            format!("p{} {:?} now={} -> {:?}", s.phase, s.op, s.now, s.outcome)
        })
    }

    /// The limiter's answer and each model's, one line each, for a failure message.
    fn answers<T: core::fmt::Debug>(&self, got: &T, models: &[T]) -> String {
        let mut lines = format!("  {}: {got:?}", self.name);
        for ((name, _), want) in self.models.iter().zip(models) {
            let _ = write!(lines, "\n  {name}: {want:?}");
        }
        lines
    }

    /// Decide `n` permits at `at` (or on the clock) on all three; they must agree.
    pub(super) fn acquire(&mut self, op: Op, n: u32, at: Option<u64>) -> Result<(), Denied> {
        let now = at.unwrap_or_else(|| self.clock.now());
        let got = match at {
            None => self.limiter.try_acquire_n(n),
            Some(t) => self.limiter.try_acquire_n_at(n, t),
        };
        let wants: Vec<_> = self
            .models
            .iter_mut()
            .map(|(_, m)| m.acquire(n, now))
            .collect();
        if wants.iter().any(|want| *want != got) {
            self.fail("decision", op, now, &self.answers(&got, &wants));
        }
        self.record(op, now, Outcome::Decision(got));
        self.check_retry_after(op, n, now, got);
        got
    }

    /// The contract of [`Denied::RateLimited`], checked on copies of the GCRA model (which
    /// the limiter has just been shown to equal): a finite `retry_after` is exact (asking
    /// again exactly that much later conforms, one nanosecond earlier is refused by 1 ns);
    /// `BeyondHorizon` means never (still refused at the end of the clock).
    fn check_retry_after(&self, op: Op, n: u32, now: u64, got: Result<(), Denied>) {
        let Err(denied) = got else {
            return;
        };
        if let Err((what, detail)) =
            probe_retry_after(denied, now, |t| self.gcra().clone().acquire(n, t))
        {
            self.fail(what, op, now, &detail);
        }
    }

    /// Read the state at `at` (or on the clock) on all three; they must agree.
    pub(super) fn snapshot(&mut self, op: Op, at: Option<u64>) -> Snapshot {
        let now = at.unwrap_or_else(|| self.clock.now());
        let got = match at {
            None => self.limiter.snapshot(),
            Some(t) => self.limiter.snapshot_at(t),
        };
        let wants: Vec<_> = self.models.iter().map(|(_, m)| m.snapshot(now)).collect();
        if wants.iter().any(|want| *want != got) {
            self.fail("snapshot", op, now, &self.answers(&got, &wants));
        }
        if got.remaining > self.quota.burst() {
            self.fail(
                "snapshot",
                op,
                now,
                &format!("  {got:?} has more than burst remaining"),
            );
        }
        self.record(op, now, Outcome::Snapshot(got));
        self.check_snapshot_meaning(op, now, got);
        got
    }

    /// What a [`Snapshot`] means, checked on copies of the GCRA model (which the limiter has
    /// just been shown to equal): `remaining` permits could be taken now (unless the end of
    /// the clock refuses them) and one more could not; the limiter is full again exactly
    /// `full_after` from now.
    fn check_snapshot_meaning(&self, op: Op, now: u64, got: Snapshot) {
        let never = Err(Denied::BeyondHorizon);
        let take = self.gcra().clone().acquire(got.remaining, now);
        // `remaining = 0` says nothing about a request for no permits, which a state past its
        // limit at `now` (a reading behind the state's own time) refuses: checked above, as
        // every decision, against the models.
        if got.remaining > 0 && take.is_err() && take != never {
            self.fail(
                "snapshot.remaining too high",
                op,
                now,
                &format!(
                    "  {got:?}, but acquiring {} now gives {take:?}",
                    got.remaining
                ),
            );
        }
        if got.remaining < self.quota.burst() {
            let more = self.gcra().clone().acquire(got.remaining + 1, now);
            if more.is_ok() {
                self.fail(
                    "snapshot.remaining too low",
                    op,
                    now,
                    &format!(
                        "  {got:?}, but acquiring {} now conforms",
                        got.remaining + 1
                    ),
                );
            }
        }
        let full_after = u64::try_from(got.full_after.as_nanos()).unwrap_or(u64::MAX);
        let Some(full_at) = now.checked_add(full_after) else {
            self.fail(
                "snapshot.full_after",
                op,
                now,
                &format!("  {got:?} is full after the end of the clock"),
            );
        };
        let then = self.gcra().snapshot(full_at);
        if then.remaining != self.quota.burst() || !then.full_after.is_zero() {
            self.fail(
                "snapshot.full_after too short",
                op,
                now,
                &format!("  {got:?}, but full_after later the state is {then:?}"),
            );
        }
        if full_after > 0 {
            let before = self.gcra().snapshot(full_at - 1);
            if before.full_after != Duration::from_nanos(1) {
                self.fail(
                    "snapshot.full_after too long",
                    op,
                    now,
                    &format!("  {got:?}, but 1 ns before full_after the state is {before:?}"),
                );
            }
        }
    }

    pub(super) fn set_time(&mut self, op: Op, to: u64) {
        self.clock.set_nanos(to);
        self.record(op, to, Outcome::Clock);
    }

    pub(super) fn advance(&mut self, op: Op, by: u64) {
        self.clock.advance_nanos(by);
        let now = self.clock.now();
        self.record(op, now, Outcome::Clock);
    }
}

/// `Gcra` (through `RateLimiter`) against `GcraModel` and `TokenBucketModel`: a quota from
/// arbitrary `(count, period, burst)` (skipped if refused), a `ManualClock` starting
/// anywhere (near `u64::MAX` included), then up to 400 operations (advance, set the time,
/// backwards too, acquire on the clock or at an explicit time, snapshot) with identical
/// decisions and snapshots required at every step, every finite `retry_after` exact at its
/// inclusive boundary, and every snapshot meaning what it says.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn gcra_differential(data: &[u8]) {
    let _ = run_gcra(&mut Unstructured::new(data));
}

fn run_gcra(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    if quota.is_sub_nanosecond() {
        // A schedule of whole nanoseconds cannot keep it: refused, never rounded.
        assert!(Gcra::with_clock(quota, ManualClock::new()).is_err());
        return Ok(());
    }
    let start = arbitrary_start(u, &quota)?;
    let clock = ManualClock::starting_at(start);
    let limiter = Gcra::with_clock(quota, clock.clone()).expect("Gcra takes every valid quota");
    let mut d = Differential::new("gcra_differential", "Gcra", quota, &limiter, clock);
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let all = (0, u64::MAX);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.clock.now();
        match u.int_in_range(0u8..=6)? {
            0 => {
                let by = arbitrary_delta(u, t, burst)?;
                d.advance(Op::Advance(by), by);
            }
            1 => {
                let to = arbitrary_time(u, now, all, t, burst)?;
                d.set_time(Op::SetTime(to), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, burst)?;
                let _ = d.acquire(Op::Acquire(n), n, None);
            }
            4 => {
                let n = arbitrary_n(u, burst)?;
                let at = arbitrary_time(u, now, all, t, burst)?;
                let _ = d.acquire(Op::AcquireAt(n, at), n, Some(at));
            }
            5 => {
                d.snapshot(Op::Snapshot, None);
            }
            _ => {
                let at = arbitrary_time(u, now, all, t, burst)?;
                d.snapshot(Op::SnapshotAt(at), Some(at));
            }
        }
    }
    Ok(())
}
