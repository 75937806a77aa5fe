//! [`budget_differential`]: `Budget` against `BudgetModel`.

use super::decode::{biased_u32, biased_u64};
use super::{fail_with_history, ArbResult, MAX_OPS};
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::clock::ManualClock;
use limitcore::reference::BudgetModel;
use limitcore::{Budget, BudgetConfig, Mode, Quota, RateLimiter, Refund, Reserve};

/// `Budget` against [`BudgetModel`] on one decoded history: every decision, charge, partial
/// grant, reservation, refund and reconfiguration (rate, burst, debt, mode) at decoded
/// times, from a start anywhere in the clock's range (the budget's TAT field wraps every
/// 2^60 units), with readings at most 1 ms behind the latest one (and never behind the
/// latest refund, before which a refund is only at least as strict as the model). After
/// every step the two snapshots must agree.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn budget_differential(data: &[u8]) {
    let _ = run(&mut Unstructured::new(data));
}

/// A budget configuration: a quota (whole-ns, rational, slow, or a byte rate), a debt, a
/// mode; `None` if the budget refuses it.
fn config(u: &mut Unstructured<'_>) -> ArbResult<Option<BudgetConfig>> {
    let quota = match u.int_in_range(0u8..=3)? {
        0 => Quota::new_with_burst(
            biased_u32(u)?.max(1),
            Duration::from_nanos(biased_u64(u)? % (1 << 45) + 1),
            biased_u32(u)? % 4096 + 1,
        ),
        1 => Quota::new_with_burst(
            u.int_in_range(1..=1_000)?,
            Duration::from_nanos(u.int_in_range(1..=10_000_000_000)?),
            u.int_in_range(1..=64)?,
        ),
        // Whole MiB a second: above u32::MAX a second, reduced exactly.
        2 => Quota::new_u64(
            u64::from(u.int_in_range(1u32..=1 << 21)?) << 20,
            Duration::from_secs(1),
            biased_u32(u)? % (1 << 24) + 1,
        ),
        _ => Quota::new_with_burst(
            u.int_in_range(1..=u32::MAX)?,
            Duration::from_nanos(u.int_in_range(1..=1 << 20)?),
            u.int_in_range(1..=1 << 16)?,
        ),
    };
    let Ok(quota) = quota else { return Ok(None) };
    let debt = match u.int_in_range(0u8..=2)? {
        0 => 0,
        1 => u.int_in_range(0..=2_000_000_000)?,
        _ => biased_u64(u)? % (1 << 40),
    };
    let mode = match u.int_in_range(0u8..=9)? {
        0 => Mode::Disabled,
        1 => Mode::Paused,
        _ => Mode::Enabled,
    };
    let config = BudgetConfig::new(quota)
        .max_debt(Duration::from_nanos(debt))
        .mode(mode);
    Ok(Budget::with_config(&config, ManualClock::new())
        .ok()
        .map(|_| config))
}

fn run(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let Some(first) = config(u)? else {
        return Ok(());
    };
    let start = match u.int_in_range(0u8..=2)? {
        0 => 0,
        1 => biased_u64(u)? >> 1,
        _ => (1u64 << 60) - (1 << 30) + (biased_u64(u)? % (1 << 31)),
    };
    let budget = Budget::with_config(&first, ManualClock::new()).expect("checked");
    let mut model = BudgetModel::new(first);
    let (mut now, mut latest, mut refunded) = (start, start, 0u64);
    let mut history: Vec<String> = Vec::new();
    let fail = |what: &str, history: &[String]| -> ! {
        fail_with_history(
            format!("[budget_differential] {what}\n  first: {first:?}, start {start}\n"),
            history,
            String::clone,
        )
    };
    for _ in 0..MAX_OPS {
        let n = match u.int_in_range(0u8..=3)? {
            0 => u.int_in_range(0..=4)?,
            1 => u.int_in_range(0..=2_000)?,
            2 => biased_u32(u)?,
            _ => u.int_in_range(0..=1 << 20)?,
        };
        let op = u.int_in_range(0u8..=8)?;
        let step = match op {
            0 | 1 => {
                let t = model.config().quota.emission_interval_ns();
                now = now.saturating_add(t / 8 * u64::from(u.int_in_range(0u32..=64)?) + 1);
                latest = latest.max(now);
                format!("advance to {now}")
            }
            2 => {
                let back = u.int_in_range(0..=1_000_000)?;
                now = now
                    .saturating_sub(back)
                    .max(latest.saturating_sub(1_000_000))
                    .max(refunded);
                format!("back to {now}")
            }
            3 => {
                let (got, want) = (budget.try_acquire_n_at(n, now), model.acquire(n, now));
                let step = format!("acquire {n} at {now}: {got:?}");
                if got != want {
                    history.push(step);
                    fail(&format!("acquire: model {want:?}"), &history);
                }
                step
            }
            4 => {
                let (got, want) = (budget.take_up_to_at(n, now), model.take_up_to(n, now));
                let step = format!("take up to {n} at {now}: {got}");
                if got != want {
                    history.push(step);
                    fail(&format!("take_up_to: model {want}"), &history);
                }
                step
            }
            5 => {
                let (got, want) = (budget.charge_at(n, now), model.charge(n, now));
                let step = format!("charge {n} at {now}: {got:?}");
                if got != want {
                    history.push(step);
                    fail(&format!("charge: model {want:?}"), &history);
                }
                step
            }
            6 => {
                let wait = Duration::from_nanos(match u.int_in_range(0u8..=2)? {
                    0 => 0,
                    1 => biased_u64(u)? % (1 << 36),
                    _ => u64::MAX,
                });
                let got = budget.reserve_n_at(n, now, wait).map(|r| r.delay());
                let want = model.reserve(n, now, wait);
                let step = format!("reserve {n} within {wait:?} at {now}: {got:?}");
                if got != want {
                    history.push(step);
                    fail(&format!("reserve: model {want:?}"), &history);
                }
                step
            }
            7 => {
                let before = budget.snapshot_at(now);
                if let Ok(receipt) = budget.acquire_refundable_at(n, now) {
                    budget.refund(receipt, now);
                }
                refunded = now;
                let after = budget.snapshot_at(now);
                let step = format!("acquire and refund {n} at {now}");
                if after != before {
                    history.push(step);
                    fail(
                        &format!("refund at its own time: {before:?} then {after:?}"),
                        &history,
                    );
                }
                step
            }
            _ => {
                let Some(config) = config(u)? else { continue };
                budget.reconfigure_at(&config, now).expect("checked");
                model.reconfigure(config, now);
                format!("reconfigure at {now}: {config:?}")
            }
        };
        history.push(step);
        let (got, want) = (budget.snapshot_at(now), model.snapshot(now));
        if got != want {
            fail(
                &format!("snapshot at {now}: {got:?}, model {want:?}"),
                &history,
            );
        }
    }
    Ok(())
}
