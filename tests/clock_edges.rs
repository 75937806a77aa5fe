//! Edge cases at the ends of the clock and of the counters. Each was once a bug, found by
//! the window fuzz targets (fuzz/README.md, "Issues these targets found"); these tests hold
//! the fixed behaviour.

use limitcore::clock::ManualClock;
use limitcore::reference::FixedWindowModel;
use limitcore::{Denied, FixedWindow, Quota, RateLimiter, SlidingLog, SlidingWindow};
use std::time::Duration;

/// A count above `u32::MAX / 2`: the model adds `used + n` without overflow, and refuses a
/// request past the count exactly as the limiter does (the rest of the 10 s window; a count
/// of `u32::MAX` takes 33 bits in the word, one more than the count for a charge's debt, so
/// its window must be at least 2^33 ns).
#[test]
fn fixed_window_model_takes_a_count_near_u32_max() {
    let q = Quota::new(u32::MAX, Duration::from_secs(10)).unwrap();
    let limiter = FixedWindow::with_clock(q, ManualClock::new()).unwrap();
    let mut model = FixedWindowModel::new(q);
    assert_eq!(limiter.try_acquire_n_at(u32::MAX, 0), Ok(()));
    assert_eq!(model.acquire(u32::MAX, 0), Ok(()));
    let want = limiter.try_acquire_n_at(1, 0);
    assert_eq!(
        want,
        Err(Denied::RateLimited {
            retry_after: Duration::from_secs(10)
        })
    );
    assert_eq!(model.acquire(1, 0), want);
}

/// Near the end of the clock a sliding log that holds an admission is not full, and never
/// will be within the clock's range: its snapshot says `Duration::MAX`, as the fixed and
/// sliding windows' do (not "full again in 0 ns").
#[test]
fn sliding_log_full_after_is_max_at_end_of_clock() {
    let q = Quota::new(1, Duration::from_secs(1)).unwrap();
    let log = SlidingLog::with_clock(q, ManualClock::new()).unwrap();
    let t = u64::MAX - 10;
    log.try_acquire_n_at(1, t).unwrap();
    let s = log.snapshot_at(u64::MAX);
    assert_eq!(s.remaining, 0);
    assert_eq!(s.full_after, Duration::MAX, "{s:?}");
    assert_eq!(
        log.try_acquire_n_at(1, u64::MAX),
        Err(Denied::BeyondHorizon)
    );
}

/// A reading in one of the last windows of the clock, whose window number (mod 2^F) lies
/// just below a multiple of 2^F, is a fresh window (the next window would start past
/// `u64::MAX`): the snapshot shows the whole count, an admission takes it, and once it is
/// spent the refusal is `BeyondHorizon` (the next window never starts). This once overflowed
/// computing the later window's start.
#[test]
fn sliding_window_last_window_of_the_clock() {
    // count 2^24 - 1: b = 25 (the bit length of count + 1: a charge's debt), F = 14; period
    // 2^25 ns: tolerance 256 windows.
    let count = (1u32 << 24) - 1;
    let q = Quota::new(count, Duration::from_nanos(1 << 25)).unwrap();
    let limiter = SlidingWindow::with_batch(q, ManualClock::new(), 0).unwrap();
    // Window u64::MAX >> 25 = 2^39 - 1 ≡ 2^14 - 1 (mod 2^14): "stale" against window 2^39,
    // which starts at 2^64.
    let s = limiter.snapshot_at(u64::MAX);
    assert_eq!((s.remaining, s.full_after), (count, Duration::ZERO));
    assert_eq!(limiter.try_acquire_n_at(1, u64::MAX), Ok(()));
    assert_eq!(limiter.snapshot_at(u64::MAX).remaining, count - 1);
    assert_eq!(limiter.try_acquire_n_at(count - 1, u64::MAX), Ok(()));
    assert_eq!(
        limiter.try_acquire_n_at(1, u64::MAX),
        Err(Denied::BeyondHorizon)
    );
}

/// A fresh SlidingWindow (word 0 = window 0) whose first admission falls at a window number
/// within the stale tolerance below a multiple of 2^F (16 128 windows ≈ 9 min after the
/// clock's epoch, e.g. a MonotonicClock's process-wide epoch) records it in that window, not
/// up to `tolerance` windows in the future: 3 windows later the whole count is available.
#[test]
fn fresh_sliding_window_records_first_admission_in_its_own_window() {
    let period = 1u64 << 25; // 33.6 ms (b = 25, F = 14, tolerance 256 windows)
    let q = Quota::new((1 << 24) - 1, Duration::from_nanos(period)).unwrap();
    let limiter = SlidingWindow::with_batch(q, ManualClock::new(), 0).unwrap();
    let t0 = ((1u64 << 14) - 256) * period;
    limiter.try_acquire_n_at((1 << 24) - 1, t0).unwrap();
    let t1 = t0 + 3 * period;
    assert_eq!(
        limiter.snapshot_at(t1).remaining,
        (1 << 24) - 1,
        "at t1 = t0 + 3 windows"
    );
}
