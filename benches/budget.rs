//! Budgets (issue 20) in one run beside their peers and the limiters they extend.
//!
//! ```text
//! cargo bench --bench budget                 # about 4 minutes; nothing else running
//! cargo bench --bench budget -- budget/1     # one group
//! ```
//!
//! Groups, each at 1 and 2 threads on one shared limiter (`budget/<threads>`), time per
//! call per thread, an allow quota (10^9/s, a burst of 10^6: every call admitted):
//! - `gcra`, `token-bucket`, `governor`: `try_acquire` (`check`), the limiters a budget
//!   extends and their peer;
//! - `budget`: `Budget::try_acquire_n(1)`; `budget-debt`: the same on a budget with debt
//!   allowed; `budget-charge`: `Budget::charge(1)`; `budget-take-up-to`:
//!   `Budget::take_up_to(1)`; `budget-bytes`: `try_acquire_n(4096)` at 64 GiB/s;
//! - `leaky-bucket` (1.1, udoprog): `RateLimiter::try_acquire(1)`;
//! - `async-speed-limit` (0.4, TiKV's): `Limiter::consume_duration(1)` (the accounting of
//!   one `consume`, without its sleep).

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{clock::DefaultClock as GovClock, state::InMemoryState, state::NotKeyed};
use limitcore::{Budget, BudgetConfig, Gcra, Quota, RateLimiter, TokenBucket};
use std::num::NonZeroU32;
use std::time::Duration;

type Governor = governor::RateLimiter<NotKeyed, InMemoryState, GovClock>;
type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// 10^9 a second with a burst of 10^6: every call in a benchmark is admitted.
fn allow() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap()
}

fn contenders() -> Vec<(&'static str, Check)> {
    let gcra = Gcra::new(allow()).unwrap();
    let tb = TokenBucket::new(allow()).unwrap();
    let gov: Governor = governor::RateLimiter::direct(
        governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
            .allow_burst(NonZeroU32::new(1_000_000).unwrap()),
    );
    let budget = Budget::new(allow()).unwrap();
    let debt = Budget::with_config(
        &BudgetConfig::new(allow()).max_debt(Duration::from_millis(10)),
        limitcore::DefaultClock::new(),
    )
    .unwrap();
    let charge = Budget::new(allow()).unwrap();
    let up_to = Budget::new(allow()).unwrap();
    let bytes = Budget::new("64GiB/s burst 64MiB".parse().unwrap()).unwrap();
    let leaky = leaky_bucket::RateLimiter::builder()
        .max(1_000_000)
        .initial(1_000_000)
        .refill(1_000_000)
        .interval(Duration::from_millis(1))
        .build();
    let speed = async_speed_limit::Limiter::<async_speed_limit::clock::StandardClock>::new(1e9);
    vec![
        ("gcra", Box::new(move || gcra.try_acquire().is_ok())),
        ("token-bucket", Box::new(move || tb.try_acquire().is_ok())),
        ("governor", Box::new(move || gov.check().is_ok())),
        ("budget", Box::new(move || budget.try_acquire_n(1).is_ok())),
        (
            "budget-debt",
            Box::new(move || debt.try_acquire_n(1).is_ok()),
        ),
        (
            "budget-charge",
            Box::new(move || charge.charge(1).shortfall == 0),
        ),
        (
            "budget-take-up-to",
            Box::new(move || up_to.take_up_to(1) == 1),
        ),
        (
            "budget-bytes",
            Box::new(move || bytes.try_acquire_n(4096).is_ok()),
        ),
        ("leaky-bucket", Box::new(move || leaky.try_acquire(1))),
        (
            "async-speed-limit",
            Box::new(move || speed.consume_duration(1).is_zero()),
        ),
    ]
}

fn budget(c: &mut Criterion) {
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("budget/{threads}"));
        g.throughput(Throughput::Elements(threads as u64));
        for (name, check) in contenders() {
            g.bench_with_input(
                BenchmarkId::from_parameter(name),
                &threads,
                |b, &threads| {
                    b.iter_custom(|iters| common::run_threads(&|_| check(), threads, iters))
                },
            );
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = budget
}
criterion_main!(benches);
