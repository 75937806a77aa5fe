//! `Budget` against its plain model (`reference::BudgetModel`) on random histories of every
//! operation — decisions, charges, partial grants, reservations, refunds, reconfigurations,
//! pauses — at random times; and against `Gcra` where the two must agree exactly.

use limitcore::clock::ManualClock;
use limitcore::reference::BudgetModel;
use limitcore::{Budget, BudgetConfig, Gcra, Mode, Quota, RateLimiter, Refund, Reserve};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::time::Duration;

/// Quotas of every kind a budget takes: whole-ns and rational intervals, slow ones, and
/// byte rates above one permit per ns (with and without a count above `u32::MAX`).
fn quota() -> impl Strategy<Value = Quota> {
    prop_oneof![
        (1u32..=1_000, 1u64..=10_000_000_000, 1u32..=64).prop_filter_map("valid", |(c, p, b)| {
            Quota::new_with_burst(c, Duration::from_nanos(p), b).ok()
        }),
        (1u32..=u32::MAX, 1u64..=1 << 40, 1u32..=1 << 20).prop_filter_map("valid", |(c, p, b)| {
            Quota::new_with_burst(c, Duration::from_nanos(p), b).ok()
        }),
        // Whole MiB a second up to 2 TiB/s: above u32::MAX a second, reduced exactly.
        (1u64..=1 << 21, 1u32..=1 << 24).prop_filter_map("bytes", |(mib, b)| {
            Quota::new_u64(mib << 20, Duration::from_secs(1), b).ok()
        }),
    ]
}

fn config() -> impl Strategy<Value = BudgetConfig> {
    (
        quota(),
        prop_oneof![Just(0u64), 0u64..=2_000_000_000],
        prop_oneof![8 => Just(Mode::Enabled), 1 => Just(Mode::Disabled), 1 => Just(Mode::Paused)],
    )
        .prop_filter_map("a budget takes it", |(q, debt, mode)| {
            let config = BudgetConfig::new(q)
                .max_debt(Duration::from_nanos(debt))
                .mode(mode);
            Budget::with_config(&config, ManualClock::new())
                .ok()
                .map(|_| config)
        })
}

#[derive(Debug, Clone)]
enum Op {
    /// Forward by this many emission intervals (scaled by 1/8).
    Advance(u32),
    /// Back by up to 1 ms (a stale reading).
    Back(u32),
    Acquire(u32),
    TakeUpTo(u32),
    Charge(u32),
    Reserve(u32, u64),
    /// Acquire then refund at the same time.
    Refund(u32),
    Reconfigure(BudgetConfig),
}

fn op() -> impl Strategy<Value = Op> {
    let n = prop_oneof![0u32..=4, 0u32..=2_000, any::<u32>()];
    prop_oneof![
        4 => (0u32..=64).prop_map(Op::Advance),
        1 => (0u32..=1_000_000).prop_map(Op::Back),
        4 => n.clone().prop_map(Op::Acquire),
        2 => n.clone().prop_map(Op::TakeUpTo),
        2 => n.clone().prop_map(Op::Charge),
        2 => (n.clone(), prop_oneof![Just(0u64), 0u64..=1 << 36, Just(u64::MAX)]).prop_map(|(n, w)| Op::Reserve(n, w)),
        1 => n.prop_map(Op::Refund),
        1 => config().prop_map(Op::Reconfigure),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Every operation gives the model's answer, and the state (snapshot) after it is the
    /// model's, from any start on the clock (the TAT field wraps every 2^60 units).
    #[test]
    fn budget_equals_its_model(
        first in config(),
        start in prop_oneof![Just(0u64), 0u64..=1 << 62, (1u64 << 60) - (1 << 30)..=(1u64 << 60) + (1 << 30)],
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let budget = Budget::with_config(&first, ManualClock::new()).unwrap();
        let mut model = BudgetModel::new(first);
        let mut now = start;
        let mut floor = start; // the latest reading: stale ones stay within 1 ms of it
        // The latest refund: a refund is exact for readings from its own time on, and for
        // earlier (stale) ones at least as strict as the model, so they stay after it.
        let mut refunded = 0;
        for (i, op) in ops.into_iter().enumerate() {
            let ctx = format!("op {i} {op:?} at {now}");
            match op {
                Op::Advance(k) => {
                    let t = model.config().quota.emission_interval_ns();
                    now = now.saturating_add(t / 8 * u64::from(k) + u64::from(k));
                    floor = floor.max(now);
                }
                Op::Back(d) => now = now.saturating_sub(u64::from(d)).max(floor.saturating_sub(1_000_000)).max(refunded),
                Op::Acquire(n) => prop_assert_eq!(budget.try_acquire_n_at(n, now), model.acquire(n, now), "{}", ctx),
                Op::TakeUpTo(n) => prop_assert_eq!(budget.take_up_to_at(n, now), model.take_up_to(n, now), "{}", ctx),
                Op::Charge(n) => prop_assert_eq!(budget.charge_at(n, now), model.charge(n, now), "{}", ctx),
                Op::Reserve(n, w) => {
                    let w = Duration::from_nanos(w);
                    let got = budget.reserve_n_at(n, now, w).map(|r| r.delay());
                    prop_assert_eq!(got, model.reserve(n, now, w), "{}", ctx);
                }
                Op::Refund(n) => {
                    // Exact at the admission's own time: as if it had not happened.
                    let before = budget.snapshot_at(now);
                    if let Ok(receipt) = budget.acquire_refundable_at(n, now) {
                        budget.refund(receipt, now);
                    }
                    refunded = now;
                    prop_assert_eq!(budget.snapshot_at(now), before, "{}", ctx);
                }
                Op::Reconfigure(config) => {
                    budget.reconfigure_at(&config, now).unwrap();
                    model.reconfigure(config, now);
                    prop_assert_eq!(budget.config(), config);
                }
            }
            prop_assert_eq!(budget.snapshot_at(now), model.snapshot(now), "after {}", ctx);
        }
    }

    /// With a whole-ns interval and no debt, a budget is GCRA: same decisions, same waits,
    /// same snapshots, readings backwards included.
    #[test]
    fn whole_ns_budget_is_gcra(
        (count, t, burst) in (1u32..=1_000, 1u64..=1_000_000, 1u32..=64),
        start in prop_oneof![Just(0u64), 0u64..=1 << 62],
        steps in prop::collection::vec((-1_000_000i64..=10_000_000, 0u32..=70), 1..100),
    ) {
        let q = Quota::new_with_burst(count, Duration::from_nanos(t * u64::from(count)), burst).unwrap();
        let budget = Budget::with_clock(q, ManualClock::new()).unwrap();
        let gcra = Gcra::with_clock(q, ManualClock::new()).unwrap();
        let mut now = start;
        for (shift, n) in steps {
            now = now.saturating_add_signed(shift).max(start);
            prop_assert_eq!(budget.try_acquire_n_at(n, now), gcra.try_acquire_n_at(n, now), "n={} now={}", n, now);
            prop_assert_eq!(budget.snapshot_at(now), gcra.snapshot_at(now));
        }
    }
}
