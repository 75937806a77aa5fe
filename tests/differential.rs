//! Property tests: the lock-free limiters against the plain reference models, and
//! `TokenBucket` against `Gcra`, on random histories (proptest).

use limitcore::reference::{GcraModel, TokenBucketModel};
use limitcore::rules::TokenBucketRule;
use limitcore::{Denied, Gcra, Quota, RateLimiter, TokenBucket};
use limitcore_testkit::strategies::{quota, start_time, steps};
use limitcore_testkit::{cases, run, AsModel};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// GCRA (virtual scheduling) equals both reference formulations everywhere on the
    /// clock, including backwards steps and times near u64::MAX.
    #[test]
    fn gcra_equals_reference_models((q, s) in quota().prop_flat_map(|q| (Just(q), steps(q.burst(), 1 << 40, 1 << 40))), start in start_time()) {
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        let (mut m1, mut m2) = (GcraModel::new(q), TokenBucketModel::new(q));
        run(&mut [&mut AsModel(&gcra), &mut m1, &mut m2], start, u64::MAX, &s)?;
    }

    /// Inside its window (readings within R ns of each other), the token bucket equals GCRA
    /// and both models exactly: same admissions, same retry_after, same snapshots.
    #[test]
    fn token_bucket_equals_gcra_in_window((q, s) in quota().prop_flat_map(|q| (Just(q), steps(q.burst(), 1 << 34, 1 << 34))), start in start_time()) {
        let Ok(tb) = TokenBucket::with_clock(q, limitcore::clock::ManualClock::new()) else {
            return Ok(());
        };
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        let (mut m1, mut m2) = (GcraModel::new(q), TokenBucketModel::new(q));
        let token_bits = 32 - q.burst().leading_zeros();
        let window = TokenBucketRule::MAX_CLOCK_LAG_NS.min(1 << (62 - token_bits));
        run(&mut [&mut AsModel(&tb), &mut AsModel(&gcra), &mut m1, &mut m2], start, window, &s)?;
    }

    /// With a clock that only moves forward, the token bucket equals GCRA over spans much
    /// longer than the backward tolerance (steps up to a quarter of the wrap period).
    #[test]
    fn token_bucket_equals_gcra_forward(q in quota(), start in start_time(), s in prop::collection::vec((0u64..=1 << 40, 0u32..=40), 1..100)) {
        let Ok(tb) = TokenBucket::with_clock(q, limitcore::clock::ManualClock::new()) else {
            return Ok(());
        };
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        let mut now = start;
        for (step, n) in s {
            now = now.saturating_add(step);
            prop_assert_eq!(tb.try_acquire_n_at(n, now), gcra.try_acquire_n_at(n, now), "n={} now={}", n, now);
            prop_assert_eq!(tb.snapshot_at(now), gcra.snapshot_at(now));
        }
    }

    /// `n > burst` is always ExceedsCapacity and consumes nothing; `n == 0` always succeeds.
    #[test]
    fn capacity_and_zero(q in quota(), n in any::<u32>(), now in any::<u64>()) {
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        let before = gcra.snapshot_at(now);
        prop_assert_eq!(gcra.try_acquire_n_at(0, now), Ok(()));
        if n > q.burst() {
            prop_assert_eq!(gcra.try_acquire_n_at(n, now), Err(Denied::ExceedsCapacity { capacity: q.burst() }));
        }
        prop_assert_eq!(gcra.snapshot_at(now), before);
        prop_assert_eq!(before.remaining, q.burst());
    }
}

/// The peer bug: 1 per day with burst 10 must not admit n = 213 505 through `interval * (n-1)`
/// wrapping; both limiters and both models say ExceedsCapacity.
#[test]
fn one_per_day_burst_ten_huge_n() {
    let q = Quota::per_day(1).unwrap().with_burst(10).unwrap();
    let clock = limitcore::clock::ManualClock::new();
    let gcra = Gcra::with_clock(q, clock.clone()).unwrap();
    let tb = TokenBucket::with_clock(q, clock.clone()).unwrap();
    let want = Err(Denied::ExceedsCapacity { capacity: 10 });
    for n in [11, 213_505, u32::MAX / 2, u32::MAX] {
        assert_eq!(gcra.try_acquire_n(n), want);
        assert_eq!(tb.try_acquire_n(n), want);
        assert_eq!(GcraModel::new(q).acquire(n, 0), want);
        assert_eq!(TokenBucketModel::new(q).acquire(n, 0), want);
    }
    assert_eq!(gcra.snapshot().remaining, 10);
    assert_eq!(tb.snapshot().remaining, 10);
}

/// Idle time never yields more than burst, whatever the gap.
#[test]
fn idle_never_exceeds_burst() {
    let q = Quota::per_second(5).unwrap();
    for gap in [1u64, 1_000_000_000, 3_600_000_000_000, 1 << 50] {
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        let tb = TokenBucket::with_clock(q, limitcore::clock::ManualClock::new()).unwrap();
        for l in [&gcra as &dyn RateLimiter, &tb] {
            l.try_acquire_n_at(5, 0).unwrap();
            assert_eq!(
                l.snapshot_at(gap).remaining.min(5),
                l.snapshot_at(gap).remaining
            );
            assert!(l.try_acquire_n_at(5, gap.max(1_000_000_000)).is_ok());
            assert!(
                l.try_acquire_n_at(1, gap.max(1_000_000_000)).is_err(),
                "more than burst after a gap of {gap}"
            );
        }
    }
}
