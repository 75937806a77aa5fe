//! The differential harness shared by the property tests: random histories of time moves
//! and requests, applied to several limiters and models that must agree at every step.
#![allow(dead_code)] // each test file uses part of it

use limitcore::clock::Nanos;
use limitcore::{Denied, Quota, RateLimiter};
use proptest::prelude::*;
use std::time::Duration;

/// 512 cases per property, or `PROPTEST_CASES` for a longer campaign.
pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Quotas of 1..=1000 per 1 ns..10 s (valid ones), bursts small or up to 2000.
pub(crate) fn quota() -> impl Strategy<Value = Quota> {
    (
        1u32..=1_000,
        1u64..=10_000_000_000,
        prop_oneof![1u32..=8, 1u32..=2_000],
    )
        .prop_filter_map("valid quota", |(count, period, burst)| {
            Quota::new(count, Duration::from_nanos(period.max(u64::from(count))))
                .ok()?
                .with_burst(burst)
                .ok()
        })
}

/// A request size biased to the interesting range `0..=cap + 1`.
pub(crate) fn request(cap: u32) -> impl Strategy<Value = u32> {
    prop_oneof![6 => 0..=cap.saturating_add(1), 1 => any::<u32>()]
}

#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// Move time by a signed amount (backwards allowed).
    Shift(i64),
    /// Jump to an absolute offset from the start.
    Jump(u64),
    Acquire(u32),
}

/// Steps moving time back at most `max_back` and forward at most `max_forward` ns at a time.
pub(crate) fn steps(cap: u32, max_back: i64, max_forward: i64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            3 => (-max_back..=max_forward).prop_map(Step::Shift),
            1 => (0..=max_forward.unsigned_abs()).prop_map(Step::Jump),
            6 => request(cap).prop_map(Step::Acquire),
        ],
        1..200,
    )
}

pub(crate) fn start_time() -> impl Strategy<Value = Nanos> {
    prop_oneof![Just(0u64), any::<u64>(), (u64::MAX - (1 << 40))..=u64::MAX]
}

/// One limiter or model under test.
pub(crate) trait Subject {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied>;
    /// Permits available at `now`.
    fn remaining(&self, now: Nanos) -> u32;
    /// Time until full at `now`, where the subject models it.
    fn full_after(&self, _now: Nanos) -> Option<Duration> {
        None
    }
}

impl<L: RateLimiter> Subject for L {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.try_acquire_n_at(n, now)
    }
    fn remaining(&self, now: Nanos) -> u32 {
        self.snapshot_at(now).remaining
    }
    fn full_after(&self, now: Nanos) -> Option<Duration> {
        Some(self.snapshot_at(now).full_after)
    }
}

/// Wrap a reference model as a `Subject` with closures for its three operations.
pub(crate) struct Model<M> {
    pub(crate) model: M,
    pub(crate) acquire: fn(&mut M, u32, Nanos) -> Result<(), Denied>,
    pub(crate) remaining: fn(&M, Nanos) -> u32,
    pub(crate) full_after: Option<fn(&M, Nanos) -> Duration>,
}

impl<M> Subject for Model<M> {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        (self.acquire)(&mut self.model, n, now)
    }
    fn remaining(&self, now: Nanos) -> u32 {
        (self.remaining)(&self.model, now)
    }
    fn full_after(&self, now: Nanos) -> Option<Duration> {
        self.full_after.map(|f| f(&self.model, now))
    }
}

/// Run `steps` from `start` on every subject, asserting identical decisions and states, and
/// probing every finite `retry_after` at its boundary (one ns early: denied with 1 ns left;
/// exactly then: admitted). Every time stays within `[start, start + window]`.
/// Returns the admitted `(time, n)` pairs.
pub(crate) fn run(
    subjects: &mut [&mut dyn Subject],
    start: Nanos,
    window: u64,
    steps: &[Step],
) -> Result<Vec<(Nanos, u32)>, TestCaseError> {
    let (lo, hi) = (start, start.saturating_add(window));
    let mut now = start;
    let mut admitted = Vec::new();
    for step in steps {
        match *step {
            Step::Shift(d) => now = now.saturating_add_signed(d).clamp(lo, hi),
            Step::Jump(t) => now = start.saturating_add(t).clamp(lo, hi),
            Step::Acquire(n) => {
                let results: Vec<_> = subjects.iter_mut().map(|s| s.acquire(n, now)).collect();
                prop_assert!(
                    results.windows(2).all(|w| w[0] == w[1]),
                    "n={n} now={now}: {results:?}"
                );
                match results[0] {
                    Ok(()) => admitted.push((now, n)),
                    Err(Denied::RateLimited { retry_after }) if retry_after != Duration::MAX => {
                        let r = retry_after.as_nanos() as u64;
                        prop_assert!(r >= 1);
                        let at = now.saturating_add(r);
                        if at <= hi {
                            if r > 1 {
                                for s in subjects.iter_mut() {
                                    prop_assert_eq!(
                                        s.acquire(n, at - 1),
                                        Err(Denied::RateLimited {
                                            retry_after: Duration::from_nanos(1)
                                        })
                                    );
                                }
                            }
                            for s in subjects.iter_mut() {
                                prop_assert_eq!(
                                    s.acquire(n, at),
                                    Ok(()),
                                    "retry_after {} ns is not enough",
                                    r
                                );
                            }
                            admitted.push((at, n));
                            // The caller waited: time has moved on to the probe.
                            now = at;
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        let left: Vec<_> = subjects.iter().map(|s| s.remaining(now)).collect();
        prop_assert!(
            left.windows(2).all(|w| w[0] == w[1]),
            "remaining at now={now}: {left:?}"
        );
        let full: Vec<_> = subjects.iter().filter_map(|s| s.full_after(now)).collect();
        prop_assert!(
            full.windows(2).all(|w| w[0] == w[1]),
            "full_after at now={now}: {full:?}"
        );
    }
    Ok(admitted)
}
