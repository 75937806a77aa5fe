//! The proptest strategies of the core's property tests: quotas, request sizes, start times
//! and histories of time moves and requests ([`Step`]s), which
//! [`differential::run`](crate::differential::run) applies.

use limitcore::clock::Nanos;
use limitcore::Quota;
use proptest::prelude::*;
use std::time::Duration;

/// Cases per property: 512, or the `PROPTEST_CASES` environment variable for a longer
/// campaign.
///
/// # Examples
///
/// ```
/// use proptest::prelude::*;
/// use proptest::test_runner::{Config, TestRunner};
///
/// // In a test file: `#![proptest_config(ProptestConfig { cases: cases(), .. })]`.
/// let config = Config { cases: limitcore_testkit::cases(), ..Config::default() };
/// let mut runner = TestRunner::new(config);
/// runner.run(&(0u32..10), |n| {
///     prop_assert!(n < 10);
///     Ok(())
/// }).unwrap();
/// ```
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Valid quotas of 1..=1000 per 1 ns..10 s (the period raised to at least the count), with
/// a burst that is small (1..=8) or up to 2000.
pub fn quota() -> impl Strategy<Value = Quota> {
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

/// A request size biased to the interesting range `0..=cap + 1` (6 in 7), or any `u32`.
pub fn request(cap: u32) -> impl Strategy<Value = u32> {
    prop_oneof![6 => 0..=cap.saturating_add(1), 1 => any::<u32>()]
}

/// One step of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Move time by a signed amount, in ns (backwards allowed).
    Shift(i64),
    /// Jump to an absolute offset from the start, in ns.
    Jump(u64),
    /// Ask for this many permits.
    Acquire(u32),
}

/// Histories of 1..200 steps for a limiter of capacity `cap`: time moves back at most
/// `max_back` ns and forward at most `max_forward` ns at a time (3 in 10), jumps to an
/// offset up to `max_forward` from the start (1 in 10), and requests of [`request`]`(cap)`
/// (6 in 10).
pub fn steps(cap: u32, max_back: i64, max_forward: i64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            3 => (-max_back..=max_forward).prop_map(Step::Shift),
            1 => (0..=max_forward.unsigned_abs()).prop_map(Step::Jump),
            6 => request(cap).prop_map(Step::Acquire),
        ],
        1..200,
    )
}

/// Where a history starts: 0, anywhere, or within 2^40 ns of the end of the clock.
pub fn start_time() -> impl Strategy<Value = Nanos> {
    prop_oneof![Just(0u64), any::<u64>(), (u64::MAX - (1 << 40))..=u64::MAX]
}
