//! `sliding_window_differential`: the per-CPU sliding window against the formula on exact
//! counts, exactly with batch 0, and never above it with leases.

use super::diff::{window_ops, WindowDiff};
use super::readings::{Readings, SlidingReadings};
use super::{window_delta, window_start, window_time, Shape};
use crate::fuzz::decode::{arbitrary_n, bounded_quota};
use crate::fuzz::timed::{TimedOp, TimedOutcome, Trace};
use crate::fuzz::{ArbResult, NoClock, Reference, MAX_OPS};
use arbitrary::Unstructured;
use limitcore::rules::SlidingWindowRule;
use limitcore::{Algorithm, Denied, RateLimiter, SlidingWindow};

/// `SlidingWindow` against `SlidingWindowModel` (the formula on exact counts).
///
/// - Phase 1: `SlidingWindow::with_batch(q, _, 0)`, which is documented to be exactly the
///   formula: identical decisions and `remaining`, exact `retry_after` and `full_after`,
///   with every reading inside the window its documentation promises that in: its window
///   in `[S − tolerance, S + 2^F − tolerance − 1]`, with `S` the latest window admitted in,
///   `tolerance` = `SlidingWindowRule::MAX_CLOCK_LAG_NS` in windows (at least 4) and
///   `F = 64 − 2b` the global window field (in any order).
/// - Phase 2 (after an "end phase" operation): a fresh limiter with an arbitrary batch
///   `1..=16` (leases on per-CPU shards) and monotone time from phase 1's `now` (long jumps
///   included). It must never over-admit: every admission is fed to a fresh model, which
///   must admit it too (the formula on the true counts), and no snapshot may promise more
///   than that model allows.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn sliding_window_differential(data: &[u8]) {
    let _ = run_sliding_window(&mut Unstructured::new(data));
}

fn run_sliding_window(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let Ok(quota) = bounded_quota(u, SlidingWindowRule::MAX_COUNT)? else {
        return Ok(());
    };
    let Ok(limiter) = SlidingWindow::with_batch(quota, NoClock, 0) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let readings = Readings::Sliding(SlidingReadings::new(&quota));
    let start = readings.allowed(window_start(u, &shape)?);
    let mut d = WindowDiff {
        trace: Trace::new(
            "sliding_window_differential",
            "SlidingWindow (batch 0)",
            "SlidingWindowModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: Reference::new(Algorithm::SlidingWindow, quota),
        shape,
        readings,
        now: start,
        last_denied: None,
    };
    d.trace.readings = Some(readings);
    window_ops(u, &mut d, true)?;

    // Phase 2: leases, monotone time, never more than the formula on the true counts.
    let batch = u.int_in_range(1..=16)?;
    let Ok(leased) = SlidingWindow::with_batch(quota, NoClock, batch) else {
        return Ok(());
    };
    let mut truth = Reference::new(Algorithm::SlidingWindow, quota);
    let mut t = d.trace;
    t.phase = 2;
    t.name = format!("SlidingWindow (batch {batch}, {} shards)", leased.shards());
    t.model = "SlidingWindowModel fed the admitted requests";
    let mut now = d.now;
    t.record(TimedOp::SetTime(now), now, TimedOutcome::Time);
    let count = quota.count();
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        match u.int_in_range(0u8..=4)? {
            0 => {
                let by = window_delta(u, &shape)?;
                now = now.saturating_add(by);
                t.record(TimedOp::Advance(by), now, TimedOutcome::Time);
            }
            1 => {
                now = window_time(u, now, (now, u64::MAX), &shape)?;
                t.record(TimedOp::SetTime(now), now, TimedOutcome::Time);
            }
            2 | 3 => {
                let n = arbitrary_n(u, count)?;
                let op = TimedOp::Acquire(n);
                let got = leased.try_acquire_n_at(n, now);
                t.record(op, now, TimedOutcome::Decision(got));
                match got {
                    Ok(()) if n == 0 => {}
                    Ok(()) => {
                        let truth_says = truth.acquire(n, now);
                        if truth_says.is_err() {
                            t.fail(
                                "over-admission",
                                op,
                                now,
                                &format!(
                                    "  admitted n = {n}, but the formula on the true counts \
                                     gives {truth_says:?}"
                                ),
                            );
                        }
                    }
                    Err(e) if valid_denial(e, n, count) => {}
                    Err(e) => t.fail(
                        "denial",
                        op,
                        now,
                        &format!("  n = {n} (count {count}) denied with {e:?}"),
                    ),
                }
            }
            _ => {
                let got = leased.snapshot_at(now);
                let op = TimedOp::SnapshotAt(now);
                t.record(op, now, TimedOutcome::Snapshot(got));
                let most = truth.remaining(now, count);
                if got.remaining > most {
                    t.fail(
                        "snapshot promises more than the formula on the true counts",
                        op,
                        now,
                        &format!("  {got:?}, but the formula admits {most}"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// A denial a window limiter of capacity `count` may give a request for `n`:
/// `ExceedsCapacity` exactly above the capacity, otherwise a wait of at least 1 ns, or
/// `BeyondHorizon` (at the end of the clock).
fn valid_denial(e: Denied, n: u32, count: u32) -> bool {
    match e {
        Denied::ExceedsCapacity { capacity } => n > count && capacity == count,
        Denied::RateLimited { retry_after } => (1..=count).contains(&n) && !retry_after.is_zero(),
        Denied::BeyondHorizon => (1..=count).contains(&n),
        _ => false,
    }
}
