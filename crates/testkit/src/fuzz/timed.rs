//! What the explicit-time runs (the window limiters and the pacer) share: their operations
//! and the story of a run, for the failure message.

use super::fail_with_history;
use super::windows::Readings;
use core::fmt::Write as _;
use core::time::Duration;
use limitcore::{Denied, Quota, Snapshot};

/// One operation of an explicit-time run. There is no clock: `now` is the run's own
/// variable, and every call gets its time explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimedOp {
    /// Move `now` forward by this many ns (saturating; then brought inside the run's
    /// readings, see [`Readings`]).
    Advance(u64),
    /// Set `now` (backwards too, where the run allows it).
    SetTime(u64),
    /// Move `now` forward by this much: the last finite `retry_after` (or 1 ns less), as a
    /// caller that waited; the denied request is then asked again.
    WaitRetry(u64),
    /// `try_acquire_n_at(n, now)`.
    Acquire(u32),
    /// `reserve_n_at(n, now, max_wait)` (the pacer).
    Reserve(u32, Duration),
    /// `snapshot_at(t)`.
    SnapshotAt(u64),
}

/// What a step gave (the limiter's answer; the model agreed or the run failed). Its
/// fields are read by `Debug` only, in the failure message.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum TimedOutcome {
    Time,
    Decision(Result<(), Denied>),
    /// A reservation's delay.
    Reserved(Result<Duration, Denied>),
    Snapshot(Snapshot),
}

#[derive(Debug, Clone, Copy)]
struct TimedStep {
    phase: u8,
    op: TimedOp,
    /// `now` after the step (for a snapshot: the time it was taken at).
    now: u64,
    outcome: TimedOutcome,
}

/// The story of an explicit-time run, for the failure message.
#[derive(Debug)]
pub(crate) struct Trace {
    target: &'static str,
    /// The limiter under test and what it is checked against.
    pub(crate) name: String,
    pub(crate) model: &'static str,
    quota: Quota,
    /// The readings allowed at the last admission (a window run's).
    pub(crate) readings: Option<Readings>,
    /// `now` when the run started.
    start: u64,
    pub(crate) phase: u8,
    history: Vec<TimedStep>,
}

impl Trace {
    pub(crate) fn new(
        target: &'static str,
        name: &str,
        model: &'static str,
        quota: Quota,
        start: u64,
    ) -> Trace {
        Trace {
            target,
            name: name.to_owned(),
            model,
            quota,
            readings: None,
            start,
            phase: 1,
            history: Vec::new(),
        }
    }

    pub(crate) fn record(&mut self, op: TimedOp, now: u64, outcome: TimedOutcome) {
        self.history.push(TimedStep {
            phase: self.phase,
            op,
            now,
            outcome,
        });
    }

    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    pub(crate) fn fail(&self, what: &str, op: TimedOp, now: u64, detail: &str) -> ! {
        let mut msg = String::new();
        let _ = writeln!(
            msg,
            "[{}] {} against {}: {what}",
            self.target, self.name, self.model
        );
        let q = &self.quota;
        let _ = writeln!(
            msg,
            "  quota: {q} = {q:?} (count {}, period {} ns, interval {} ns, burst {})",
            q.count(),
            q.period_ns(),
            q.emission_interval_ns(),
            q.burst()
        );
        if let Some(r) = self.readings {
            let _ = writeln!(msg, "  readings: {r:?}, allowed in {:?}", r.bounds());
        }
        let _ = writeln!(
            msg,
            "  at step {} (phase {}): {op:?} with now = {now} (u64::MAX - now = {}); the run \
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
}
