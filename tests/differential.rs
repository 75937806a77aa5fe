//! Property tests: the lock-free limiters against the plain reference models, and
//! `TokenBucket` against `Gcra`, on random histories (proptest).

use limitcore::clock::Nanos;
use limitcore::reference::{GcraModel, TokenBucketModel};
use limitcore::{Denied, Gcra, Quota, RateLimiter, TokenBucket, MAX_BACKWARD_TOLERANCE_NS};
use proptest::prelude::*;
use std::time::Duration;

fn quota() -> impl Strategy<Value = Quota> {
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

/// A request size biased to the interesting range `0..=burst + 1`.
fn request(burst: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 0..=burst.saturating_add(1),
        1 => any::<u32>(),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// Move time by a signed amount (backwards allowed).
    Shift(i64),
    /// Jump to an absolute offset from the start.
    Jump(u64),
    Acquire(u32),
}

fn steps(burst: u32, max_shift: i64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            3 => (-max_shift..=max_shift).prop_map(Step::Shift),
            1 => (0..=max_shift.unsigned_abs()).prop_map(Step::Jump),
            6 => request(burst).prop_map(Step::Acquire),
        ],
        1..200,
    )
}

/// Everything one decision must agree on, from one limiter or model.
trait Subject {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied>;
    fn remaining(&self, now: Nanos) -> (u32, Duration);
}

impl<L: RateLimiter> Subject for L {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.try_acquire_n_at(n, now)
    }
    fn remaining(&self, now: Nanos) -> (u32, Duration) {
        let s = self.snapshot_at(now);
        (s.remaining, s.full_after)
    }
}

struct Model<M>(M);
impl Subject for Model<GcraModel> {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.acquire(n, now)
    }
    fn remaining(&self, now: Nanos) -> (u32, Duration) {
        let s = self.0.snapshot(now);
        (s.remaining, s.full_after)
    }
}
impl Subject for Model<TokenBucketModel> {
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.0.acquire(n, now)
    }
    fn remaining(&self, now: Nanos) -> (u32, Duration) {
        let s = self.0.snapshot(now);
        (s.remaining, s.full_after)
    }
}

/// Run `steps` from `start` on every subject, asserting identical decisions and snapshots,
/// and probing every finite `retry_after` at its boundary (one ns early: denied; exactly:
/// admitted). `window` bounds every time to `[start, start + window]`.
fn run(
    subjects: &mut [&mut dyn Subject],
    start: Nanos,
    window: u64,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let lo = start;
    let hi = start.saturating_add(window);
    let mut now = start;
    let mut admitted = 0u64;
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
                    Ok(()) => admitted += u64::from(n),
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
                            admitted += u64::from(n);
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        let snaps: Vec<_> = subjects.iter().map(|s| s.remaining(now)).collect();
        prop_assert!(
            snaps.windows(2).all(|w| w[0] == w[1]),
            "now={now}: {snaps:?}"
        );
    }
    let _ = admitted;
    Ok(())
}

fn start_time() -> impl Strategy<Value = Nanos> {
    prop_oneof![Just(0u64), any::<u64>(), (u64::MAX - (1 << 40))..=u64::MAX]
}

/// 512 cases per property, or `PROPTEST_CASES` for a longer campaign.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// GCRA (virtual scheduling) equals both reference formulations everywhere on the
    /// clock, including backwards steps and times near u64::MAX.
    #[test]
    fn gcra_equals_reference_models((q, s) in quota().prop_flat_map(|q| (Just(q), steps(q.burst(), 1 << 40))), start in start_time()) {
        let mut gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new());
        let mut m1 = Model(GcraModel::new(q));
        let mut m2 = Model(TokenBucketModel::new(q));
        run(&mut [&mut gcra, &mut m1, &mut m2], start, u64::MAX, &s)?;
    }

    /// Inside its window (readings within R ns of each other), the token bucket equals GCRA
    /// and both models exactly: same admissions, same retry_after, same snapshots.
    #[test]
    fn token_bucket_equals_gcra_in_window((q, s) in quota().prop_flat_map(|q| (Just(q), steps(q.burst(), 1 << 34))), start in start_time()) {
        let Ok(mut tb) = TokenBucket::with_clock(q, limitcore::clock::ManualClock::new()) else {
            return Ok(());
        };
        let mut gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new());
        let mut m1 = Model(GcraModel::new(q));
        let mut m2 = Model(TokenBucketModel::new(q));
        let token_bits = 32 - q.burst().leading_zeros();
        let window = MAX_BACKWARD_TOLERANCE_NS.min(1 << (62 - token_bits));
        run(&mut [&mut tb, &mut gcra, &mut m1, &mut m2], start, window, &s)?;
    }

    /// With a clock that only moves forward, the token bucket equals GCRA over spans much
    /// longer than the backward tolerance (steps up to a quarter of the wrap period).
    #[test]
    fn token_bucket_equals_gcra_forward(q in quota(), start in start_time(), s in prop::collection::vec((0u64..=1 << 40, 0u32..=40), 1..100)) {
        let Ok(tb) = TokenBucket::with_clock(q, limitcore::clock::ManualClock::new()) else {
            return Ok(());
        };
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new());
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
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new());
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
    let gcra = Gcra::with_clock(q, clock.clone());
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
        let gcra = Gcra::with_clock(q, limitcore::clock::ManualClock::new());
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
