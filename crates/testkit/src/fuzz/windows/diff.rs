//! A window run: a window limiter and its reference model on one history of explicit-time
//! operations, with identical decisions and `remaining`, exact `retry_after` and
//! `full_after` required at every step.

use super::readings::Readings;
use super::{window_delta, window_time, Shape};
use crate::fuzz::decode::arbitrary_n;
use crate::fuzz::timed::{TimedOp, TimedOutcome, Trace};
use crate::fuzz::{probe_retry_after, saturating_nanos, ArbResult, Reference, MAX_OPS};
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::{Denied, RateLimiter, Snapshot};

/// A window limiter and its model, the run's `now`, and the history so far.
pub(super) struct WindowDiff<'a, L: RateLimiter> {
    pub(super) trace: Trace,
    pub(super) limiter: &'a L,
    /// The reference model, driven through `reference::Model`.
    pub(super) model: Reference,
    pub(super) shape: Shape,
    pub(super) readings: Readings,
    pub(super) now: u64,
    /// The last denial with a finite wait: `(n, retry_after in ns)`.
    pub(super) last_denied: Option<(u32, u64)>,
}

impl<'a, L: RateLimiter> WindowDiff<'a, L> {
    pub(super) fn move_to(&mut self, op: TimedOp, to: u64) {
        self.now = self.readings.allowed(to);
        self.trace.record(op, self.now, TimedOutcome::Time);
    }

    /// `n` permits at `now`, on both; they must agree.
    pub(super) fn acquire(&mut self, op: TimedOp, n: u32) {
        let now = self.now;
        let got = self.limiter.try_acquire_n_at(n, now);
        let want = self.model.acquire(n, now);
        if got != want {
            self.trace.fail(
                "decision",
                op,
                now,
                &format!(
                    "  {}: {got:?}\n  {}: {want:?}",
                    self.trace.name, self.trace.model
                ),
            );
        }
        self.trace.record(op, now, TimedOutcome::Decision(got));
        if got.is_ok() && n >= 1 {
            self.readings.admitted(now);
            self.trace.readings = Some(self.readings);
        }
        self.check_retry_after(op, n, now, got);
    }

    /// A finite `retry_after` is exact (on copies of the model, which the limiter has just
    /// been shown to equal: asking again exactly that much later is admitted, one ns earlier
    /// is refused by 1 ns), and the limiter's own snapshots agree at both probe times (where
    /// the run may read); `BeyondHorizon` means never (still refused at the end of the
    /// clock).
    fn check_retry_after(&mut self, op: TimedOp, n: u32, now: u64, got: Result<(), Denied>) {
        let Err(denied @ Denied::RateLimited { .. }) = got else {
            return;
        };
        let t = &self.trace;
        let then = match probe_retry_after(denied, now, |at| self.model.clone().acquire(n, at)) {
            Ok(then) => then,
            Err((what, detail)) => t.fail(what, op, now, &detail),
        };
        // `None`: `Denied::BeyondHorizon`.
        let Some(then) = then else {
            if self.readings.allows(u64::MAX) {
                let s = self.limiter.snapshot_at(u64::MAX);
                if s.remaining >= n {
                    t.fail(
                        "BeyondHorizon but the limiter has room later",
                        op,
                        now,
                        &format!("  denied {got:?}, but snapshot_at(u64::MAX) = {s:?}"),
                    );
                }
            }
            return;
        };
        for (at, room) in [(then, true), (then - 1, false)] {
            if !self.readings.allows(at) {
                continue;
            }
            let s = self.limiter.snapshot_at(at);
            // A request for no permits has room when the limiter admits it (it writes
            // nothing); one for more, when the snapshot has `n` left.
            let has_room = if n == 0 {
                self.limiter.try_acquire_n_at(0, at).is_ok()
            } else {
                s.remaining >= n
            };
            if has_room != room {
                t.fail(
                    "the limiter's snapshot disagrees with its retry_after",
                    op,
                    now,
                    &format!(
                        "  denied {got:?} (n = {n}), but snapshot_at(now + {}) = {s:?}",
                        at - now
                    ),
                );
            }
        }
        self.last_denied = Some((n, then - now));
    }

    /// Is the model full (nothing counted against the next request) at `at`?
    fn model_full(&self, at: u64) -> bool {
        self.model.is_full(at, self.shape.capacity)
    }

    /// Read both at `at`; `remaining` must agree, and both fields must mean what they say.
    pub(super) fn snapshot(&mut self, op: TimedOp, at: u64) -> Snapshot {
        let got = self.limiter.snapshot_at(at);
        let cap = self.shape.capacity;
        let want = self.model.remaining(at, cap);
        let t = &self.trace;
        if got.remaining != want {
            t.fail(
                "snapshot.remaining",
                op,
                at,
                &format!("  {}: {got:?}\n  {}: remaining {want}", t.name, t.model),
            );
        }
        // `remaining` permits are admitted now, one more is not (on copies of the model).
        let take = self.model.clone().acquire(got.remaining, at);
        // (`remaining = 0`: nothing to take; a request for no permits is checked as every
        // decision, against the model.)
        if got.remaining > 0 && take.is_err() {
            t.fail(
                "snapshot.remaining too high",
                op,
                at,
                &format!("  {got:?}, but acquiring {} gives {take:?}", got.remaining),
            );
        }
        let one_more = (got.remaining < cap).then(|| got.remaining + 1);
        if let Some(one_more) = one_more {
            let more = self.model.clone().acquire(one_more, at);
            if more.is_ok() {
                t.fail(
                    "snapshot.remaining too low",
                    op,
                    at,
                    &format!("  {got:?}, but acquiring {} is admitted", got.remaining + 1),
                );
            }
        }
        if got.remaining > cap {
            t.fail(
                "snapshot.remaining above the count",
                op,
                at,
                &format!("  {got:?}"),
            );
        }
        // Full again exactly `full_after` from `at` (`MAX`: never, within the clock).
        if got.full_after == Duration::MAX {
            if self.model_full(u64::MAX) {
                t.fail(
                    "snapshot.full_after = MAX but full later",
                    op,
                    at,
                    &format!("  {got:?}, but the model is full at u64::MAX"),
                );
            }
        } else {
            let full_after = saturating_nanos(got.full_after);
            let Some(full_at) = at.checked_add(full_after) else {
                t.fail(
                    "snapshot.full_after",
                    op,
                    at,
                    &format!("  {got:?} is full after the end of the clock (should be MAX)"),
                );
            };
            if !self.model_full(full_at) {
                t.fail(
                    "snapshot.full_after too short",
                    op,
                    at,
                    &format!("  {got:?}, but the model is not full at at + full_after"),
                );
            }
            if full_after > 0 && self.model_full(full_at - 1) {
                t.fail(
                    "snapshot.full_after too long",
                    op,
                    at,
                    &format!("  {got:?}, but the model is full 1 ns before at + full_after"),
                );
            }
        }
        self.trace.record(op, at, TimedOutcome::Snapshot(got));
        got
    }
}

/// Up to [`MAX_OPS`] (400) operations on a window run: advance, set the time (inside the run's
/// [`Readings`]), acquire, ask again after the last `retry_after` (or 1 ns before it), and
/// snapshot at any allowed time or at `now`. With `can_end`, a selector ends the phase.
pub(super) fn window_ops<L: RateLimiter>(
    u: &mut Unstructured<'_>,
    d: &mut WindowDiff<'_, L>,
    can_end: bool,
) -> ArbResult<()> {
    let s = d.shape;
    let last = if can_end { 7 } else { 6 };
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.now;
        match u.int_in_range(0u8..=last)? {
            0 => {
                let by = window_delta(u, &s)?;
                d.move_to(TimedOp::Advance(by), now.saturating_add(by));
            }
            1 => {
                let to = window_time(u, now, d.readings.bounds(), &s)?;
                d.move_to(TimedOp::SetTime(to), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, s.capacity)?;
                d.acquire(TimedOp::Acquire(n), n);
            }
            4 => {
                let Some((n, wait)) = d.last_denied else {
                    continue;
                };
                let by = wait - u64::from(u.arbitrary::<bool>()?);
                d.move_to(TimedOp::WaitRetry(by), now.saturating_add(by));
                d.acquire(TimedOp::Acquire(n), n);
            }
            5 => {
                let at = d
                    .readings
                    .allowed(window_time(u, now, d.readings.bounds(), &s)?);
                d.snapshot(TimedOp::SnapshotAt(at), at);
            }
            6 => {
                d.snapshot(TimedOp::SnapshotAt(now), now);
            }
            _ => break,
        }
    }
    Ok(())
}
