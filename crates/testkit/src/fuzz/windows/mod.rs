//! The window targets: `fixed_window_differential`, `sliding_log_differential` and
//! `sliding_window_differential`, on explicit times (no clock), each against its reference
//! model through [`WindowDiff`](diff::WindowDiff).

mod diff;
mod readings;
mod sliding_window;

pub(crate) use readings::{Readings, SlidingReadings};
pub use sliding_window::sliding_window_differential;

use super::decode::{arbitrary_quota, biased_u64, bounded_quota, fold, window_quota};
use super::timed::Trace;
use super::{ArbResult, NoClock, Reference};
use arbitrary::Unstructured;
use diff::{window_ops, WindowDiff};
use limitcore::{Algorithm, FixedWindow, Quota, SlidingLog};

/// The time scales a window run draws its distances around.
#[derive(Debug, Clone, Copy)]
struct Shape {
    period: u64,
    interval: u64,
    /// Most permits at once (the count, for a window).
    capacity: u32,
}

impl Shape {
    fn window(quota: &Quota) -> Shape {
        Shape {
            period: quota.period_ns(),
            interval: quota.emission_interval_ns(),
            capacity: quota.count(),
        }
    }
}

/// A distance in ns for a window run: tiny, `k·T` (± 1) for `k ≤ count + 1` (the
/// formula's steps inside a window), `k` whole windows (± 1), within two windows, or a
/// [`biased_u64`].
fn window_delta(u: &mut Unstructured<'_>, s: &Shape) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => u.int_in_range(0..=3)?,
        1 => {
            let k = u.int_in_range(0..=u64::from(s.capacity) + 1)?;
            s.interval
                .saturating_mul(k)
                .saturating_add(u.int_in_range(0..=2)?)
                .saturating_sub(1)
        }
        2 => {
            let k = u.int_in_range(0..=6)?;
            s.period
                .saturating_mul(k)
                .saturating_add(u.int_in_range(0..=2)?)
                .saturating_sub(1)
        }
        3 => u.int_in_range(0..=s.period.saturating_mul(2))?,
        _ => biased_u64(u)?,
    })
}

/// A time for a window run: ahead of or behind `now`, from the start of `now`'s window
/// (its edges and the formula's steps), or before `u64::MAX`, by a [`window_delta`]
/// (clamped to `[lo, hi]`), or absolute (folded into `[lo, hi]`).
fn window_time(
    u: &mut Unstructured<'_>,
    now: u64,
    (lo, hi): (u64, u64),
    s: &Shape,
) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => now.saturating_add(window_delta(u, s)?).clamp(lo, hi),
        1 => now.saturating_sub(window_delta(u, s)?).clamp(lo, hi),
        2 => (now - now % s.period)
            .saturating_add(window_delta(u, s)?)
            .clamp(lo, hi),
        3 => (u64::MAX - window_delta(u, s)?).clamp(lo, hi),
        _ => fold(biased_u64(u)?, (lo, hi)),
    })
}

/// Where a window run starts: a [`biased_u64`], or a few windows before the end of the
/// clock (where the last window ends past `u64::MAX`).
fn window_start(u: &mut Unstructured<'_>, s: &Shape) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 | 1 => biased_u64(u)?,
        _ => u64::MAX - window_delta(u, s)?.saturating_add(window_delta(u, s)?),
    })
}

/// `FixedWindow` against `FixedWindowModel`: a quota from arbitrary `(count, period,
/// burst)` (skipped if the quota or the limiter refuses it; the limiter gets the count as
/// its burst, see the [module](crate::fuzz)'s "Keeping inputs meaningful"), an explicit
/// `now` starting anywhere (near `u64::MAX` included), then up to 400 operations at any
/// time in any order (a reading before the stored window counts against it, on both
/// sides), with identical decisions and `remaining` at every step, exact `retry_after`
/// (probed at its inclusive boundary), and `full_after` exact.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn fixed_window_differential(data: &[u8]) {
    let _ = run_fixed_window(&mut Unstructured::new(data));
}

fn run_fixed_window(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    let Ok(quota) = window_quota(&quota) else {
        return Ok(());
    };
    let Ok(limiter) = FixedWindow::with_clock(quota, NoClock) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let start = window_start(u, &shape)?;
    let mut d = WindowDiff {
        trace: Trace::new(
            "fixed_window_differential",
            "FixedWindow",
            "FixedWindowModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: Reference::new(Algorithm::FixedWindow, quota),
        shape,
        readings: Readings::Anywhere,
        now: start,
        last_denied: None,
    };
    window_ops(u, &mut d, false)
}

/// The largest count the sliding-log run uses: the model scans its whole log per decision.
const SLIDING_LOG_MAX_COUNT: u32 = 64;

/// `SlidingLog` against `SlidingLogModel`: a quota of at most 64 per arbitrary period, an
/// explicit `now` starting anywhere, then up to 400 operations at any time in any order (a
/// reading behind the newest entry is recorded at it, on both sides), with identical
/// decisions and `remaining`, exact `retry_after` (probed at its inclusive boundary) and
/// `full_after` exact.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn sliding_log_differential(data: &[u8]) {
    let _ = run_sliding_log(&mut Unstructured::new(data));
}

fn run_sliding_log(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let Ok(quota) = bounded_quota(u, SLIDING_LOG_MAX_COUNT)? else {
        return Ok(());
    };
    let Ok(limiter) = SlidingLog::with_clock(quota, NoClock) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let start = window_start(u, &shape)?;
    let mut d = WindowDiff {
        trace: Trace::new(
            "sliding_log_differential",
            "SlidingLog",
            "SlidingLogModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: Reference::new(Algorithm::SlidingLog, quota),
        shape,
        readings: Readings::Anywhere,
        now: start,
        last_denied: None,
    };
    window_ops(u, &mut d, false)
}
