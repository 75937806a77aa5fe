//! Edge cases at the ends of the clock and of the counters, found by the window fuzz
//! targets; each was a bug (see fuzz/README.md, "Issues these targets found").

use limitcore::clock::ManualClock;
use limitcore::reference::FixedWindowModel;
use limitcore::{FixedWindow, Quota, RateLimiter, SlidingLog, SlidingWindow};
use std::time::Duration;

/// FixedWindowModel::acquire computes `used + n` in u32: with a count above u32::MAX / 2 a
/// request that must simply be denied panics (overflow checks on).
#[test]
fn fixed_window_model_overflows_on_large_count() {
    let q = Quota::new(u32::MAX, Duration::from_secs(5)).unwrap();
    let limiter = FixedWindow::with_clock(q, ManualClock::new()).unwrap();
    let mut model = FixedWindowModel::new(q);
    assert_eq!(limiter.try_acquire_n_at(u32::MAX, 0), Ok(()));
    assert_eq!(model.acquire(u32::MAX, 0), Ok(()));
    let want = limiter.try_acquire_n_at(1, 0); // Err(RateLimited { 5 s })
    assert!(want.is_err());
    assert_eq!(model.acquire(1, 0), want); // panics: attempt to add with overflow
}

/// SlidingLog::snapshot_at saturated `newest + period`: near the end of the clock it says
/// "full again in 0 ns" while nothing remains (and the log never empties within the clock);
/// FixedWindow and SlidingWindow answer Duration::MAX there.
#[test]
fn sliding_log_full_after_saturates_at_end_of_clock() {
    let q = Quota::new(1, Duration::from_secs(1)).unwrap();
    let log = SlidingLog::with_clock(q, ManualClock::new()).unwrap();
    let t = u64::MAX - 10;
    log.try_acquire_n_at(1, t).unwrap();
    let s = log.snapshot_at(u64::MAX);
    assert_eq!(s.remaining, 0);
    // Snapshot::full_after: "zero if it is full". It is not full, and never will be.
    assert_eq!(s.full_after, Duration::MAX, "{s:?}"); // fails: 0 ns
}

/// A reading in one of the last `tolerance` windows of the clock, whose window number
/// (mod 2^F) lies just below a multiple of 2^F, is taken as stale against a later window
/// whose start is past u64::MAX: `Counter::window` computes `k * period` and overflows
/// (panic with overflow checks, wrapped start without). Here on a fresh limiter.
#[test]
fn sliding_window_stale_shift_overflows_at_end_of_clock() {
    // count 2^24 - 1: b = 24, F = 16; period 2^24 ns: tolerance 512 windows.
    let q = Quota::new((1 << 24) - 1, Duration::from_nanos(1 << 24)).unwrap();
    let limiter = SlidingWindow::with_batch(q, ManualClock::new(), 0).unwrap();
    // Window u64::MAX >> 24 = 2^40 - 1 ≡ 2^16 - 1 (mod 2^16): "stale" against window 2^40,
    // which starts at 2^64.
    let _ = limiter.snapshot_at(u64::MAX); // panics: attempt to multiply with overflow
    let _ = limiter.try_acquire_n_at(1, u64::MAX);
}

/// A fresh SlidingWindow (word 0 = window 0) whose first admission is at a window number
/// within the stale tolerance below a multiple of 2^F takes it as a stale reading of window
/// 0 (mod 2^F) and records it up to `tolerance` windows in the future: until then every
/// request is decided against that future window, so at most `count` are admitted over
/// the whole stretch (here 1 per 17 ms quota: 1 admission in ~8.6 s).
#[test]
fn fresh_sliding_window_records_first_admission_in_the_future() {
    let period = 1u64 << 24; // 16.8 ms
    let q = Quota::new((1 << 24) - 1, Duration::from_nanos(period)).unwrap();
    let limiter = SlidingWindow::with_batch(q, ManualClock::new(), 0).unwrap();
    // Window 2^16 - 512 (mod 2^16 in the band [2^16 - 512, 2^16)); 65024 windows ≈ 18 min
    // after the clock's epoch, e.g. a MonotonicClock's process-wide epoch.
    let t0 = ((1u64 << 16) - 512) * period;
    limiter.try_acquire_n_at((1 << 24) - 1, t0).unwrap();
    // 3 windows later, the previous window is long gone: a full window's worth is due.
    let t1 = t0 + 3 * period;
    assert_eq!(
        limiter.snapshot_at(t1).remaining,
        (1 << 24) - 1,
        "at t1 = t0 + 3 windows"
    );
}
