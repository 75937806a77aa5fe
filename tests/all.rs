//! All-or-nothing multi-limits: a refusal by one limit leaves every other exactly as it was,
//! sequentially, against reference models, and under concurrency.

use limitcore::clock::ManualClock;
use limitcore::reference::GcraModel;
use limitcore::{All, Denied, Gcra, LeakyBucket, Quota, RateLimiter, Refund};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_refusal_leaves_the_other_limits_unchanged() {
    let clock = ManualClock::starting_at(1_000_000_000);
    let fast: Arc<Gcra<ManualClock>> =
        Arc::new(Gcra::with_clock(Quota::per_second(100).unwrap(), clock.clone()).unwrap());
    let slow: Arc<Gcra<ManualClock>> =
        Arc::new(Gcra::with_clock(Quota::per_minute(3).unwrap(), clock.clone()).unwrap());
    let both = All::new(vec![fast.clone(), slow.clone()]);
    both.try_acquire_n(3).unwrap();
    let (before_fast, before_slow) = (fast.tat(), slow.tat());
    let denied = both.try_acquire().unwrap_err();
    assert_eq!(
        (fast.tat(), slow.tat()),
        (before_fast, before_slow),
        "no limit kept a charge"
    );
    // The slow limit's wait, 20 s, is the largest.
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(20)));
    // Order does not matter: with the refusing limit first, same result.
    let reversed = All::new(vec![slow.clone(), fast.clone()]);
    assert_eq!(reversed.try_acquire(), Err(denied));
    assert_eq!((fast.tat(), slow.tat()), (before_fast, before_slow));
    // Capacity beats waiting.
    assert_eq!(
        both.try_acquire_n(4),
        Err(Denied::ExceedsCapacity { capacity: 3 })
    );
}

#[test]
fn mixed_limiter_types() {
    let clock = ManualClock::new();
    let limits: Vec<Box<dyn Refund>> = vec![
        Box::new(
            LeakyBucket::with_clock(
                Quota::per_second(10).unwrap().with_burst(1).unwrap(),
                clock.clone(),
            )
            .unwrap(),
        ),
        Box::new(Gcra::with_clock(Quota::per_second(1).unwrap(), clock.clone()).unwrap()),
    ];
    let all = All::new(limits);
    all.try_acquire().unwrap();
    clock.advance(Duration::from_millis(100));
    // The pacer would admit now; the per-second GCRA refuses for 900 ms more.
    assert_eq!(
        all.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_millis(900))
    );
    assert!(
        all.limits()[0].try_acquire().is_ok(),
        "the pacer kept no charge"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Against models: admitted iff every model admits; then every model is charged,
    /// otherwise none is.
    #[test]
    fn all_equals_all_or_nothing_models(
        quotas in prop::collection::vec((1u32..=20, 1u32..=5), 1..4),
        ops in prop::collection::vec((0u64..=400_000_000, 0u32..=6), 1..100),
    ) {
        let clock = ManualClock::new();
        let qs: Vec<Quota> = quotas.iter().map(|&(c, b)| Quota::per_second(c).unwrap().with_burst(b).unwrap()).collect();
        let limiters: Vec<Arc<Gcra<ManualClock>>> = qs.iter().map(|&q| Arc::new(Gcra::with_clock(q, clock.clone()).unwrap())).collect();
        let all = All::new(limiters.clone());
        let mut models: Vec<GcraModel> = qs.iter().map(|&q| GcraModel::new(q)).collect();
        let mut now = 0u64;
        for (step, n) in ops {
            now += step;
            let got = all.try_acquire_n_at(n, now);
            let trial: Vec<_> = models.iter().map(|m| m.clone().acquire(n, now)).collect();
            if trial.iter().all(Result::is_ok) {
                prop_assert_eq!(got, Ok(()));
                for m in &mut models { m.acquire(n, now).unwrap(); }
            } else {
                prop_assert!(got.is_err());
                if let Some(cap) = trial.iter().find(|r| matches!(r, Err(Denied::ExceedsCapacity { .. }))) {
                    prop_assert_eq!(&got, cap);
                } else {
                    let worst = trial.iter().filter_map(|r| r.err().and_then(|d| d.retry_after())).max();
                    prop_assert_eq!(got.unwrap_err().retry_after(), worst);
                }
            }
            for (l, m) in limiters.iter().zip(&models) {
                prop_assert_eq!(l.snapshot_at(now), m.snapshot(now));
            }
        }
    }
}

/// Threads share a global limit, each with its own small channel limit, at a frozen time.
/// With the global limit first, every channel refusal refunds the global limit: it must end
/// charged with exactly what was admitted, no more (a refund missed) and no less (a refund
/// doubled). With a global limit smaller than the channels' total, its refusals refund the
/// channels, and the total admitted never exceeds the global burst.
#[test]
fn concurrent_refusals_leak_nothing() {
    for global_burst in [1_000u32, 200] {
        let clock = ManualClock::starting_at(1 << 40);
        let global = Arc::new(
            Gcra::with_clock(
                Quota::per_hour(1)
                    .unwrap()
                    .with_burst(global_burst)
                    .unwrap(),
                clock.clone(),
            )
            .unwrap(),
        );
        let admitted = Arc::new(AtomicU64::new(0));
        let channels: Vec<_> = (0..6u32)
            .map(|t| {
                Arc::new(
                    Gcra::with_clock(
                        Quota::per_hour(1).unwrap().with_burst(50 + t).unwrap(),
                        clock.clone(),
                    )
                    .unwrap(),
                )
            })
            .collect();
        let handles: Vec<_> = channels
            .iter()
            .map(|channel| {
                let (global, admitted) = (global.clone(), admitted.clone());
                let both = All::new(vec![global, channel.clone()]);
                std::thread::spawn(move || {
                    for _ in 0..5_000 {
                        if both.try_acquire().is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let admitted = admitted.load(Ordering::Relaxed);
        let channel_total: u64 = (0..6).map(|t| 50 + t).sum();
        // A charge about to be refunded is briefly visible to other threads, so near the end
        // a thread may be refused for it and stop asking: stricter, never more permissive.
        let most = channel_total.min(u64::from(global_burst));
        assert!(
            admitted <= most && admitted + 6 >= most,
            "admitted {admitted} of {most}"
        );
        assert_eq!(
            global.tat(),
            (1 << 40) + admitted * 3_600_000_000_000,
            "global burst {global_burst}"
        );
        let channel_charged: u64 = channels
            .iter()
            .map(|c| (c.tat().max(1 << 40) - (1 << 40)) / 3_600_000_000_000)
            .sum();
        assert_eq!(
            channel_charged, admitted,
            "channels charged exactly what was admitted"
        );
    }
}
