//! Decoding shared by the drivers: biased integers, quotas, request sizes, distances and
//! times, each drawn from an [`Unstructured`] in a fixed order of choices.
//!
//! Every choice here is part of what the committed regression inputs mean: changing a
//! selector's range or the order of the choices changes every input (see `fuzz/README.md`).

use super::ArbResult;
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::{Quota, QuotaError};

/// A `u64` biased toward the values that break arithmetic: tiny, 16/32-bit, near
/// `u64::MAX`, powers of two and their neighbours, or anything.
pub(crate) fn biased_u64(u: &mut Unstructured<'_>) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => u.int_in_range(0..=16)?,
        1 => u64::from(u.arbitrary::<u16>()?),
        2 => u64::from(u.arbitrary::<u32>()?),
        3 => u64::MAX - u.int_in_range(0..=4096)?,
        4 => {
            let shift = u.int_in_range(0..=63)?;
            (1u64 << shift)
                .wrapping_add(u.int_in_range(0..=2)?)
                .wrapping_sub(1)
        }
        _ => u.arbitrary()?,
    })
}

/// A `u32` biased like [`biased_u64`].
pub(crate) fn biased_u32(u: &mut Unstructured<'_>) -> ArbResult<u32> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => u.int_in_range(1..=4)?,
        1 => u.int_in_range(0..=64)?,
        2 => u32::from(u.arbitrary::<u16>()?),
        3 => u32::MAX - u.int_in_range(0..=16)?,
        4 => {
            let shift = u.int_in_range(0..=31)?;
            (1u32 << shift)
                .wrapping_add(u.int_in_range(0..=2)?)
                .wrapping_sub(1)
        }
        _ => u.arbitrary()?,
    })
}

/// Whole-unit periods, as the text form names them.
pub(crate) const UNIT_NS: [u64; 7] = [
    1,
    1_000,
    1_000_000,
    1_000_000_000,
    60_000_000_000,
    3_600_000_000_000,
    86_400_000_000_000,
];

/// A period in ns for `count` permits: `count × T` minus a little (so `T` rounds up), a
/// [`biased_u64`], or a whole number of one of the text form's units.
pub(crate) fn arbitrary_period(u: &mut Unstructured<'_>, count: u32) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        // Driven by the interval: `count × T` minus a little, so `T` rounds up.
        0 => {
            let interval = match u.int_in_range(0u8..=3)? {
                0 => 1,
                1 => u.int_in_range(1..=8)?,
                2 => u.int_in_range(1..=1_000_000)?,
                _ => biased_u64(u)?.max(1),
            };
            let less = u.int_in_range(0..=interval.min(3) - 1)?;
            u64::from(count)
                .saturating_mul(interval)
                .saturating_sub(less)
        }
        1 => biased_u64(u)?,
        // A whole number of one of the text form's units.
        _ => {
            let unit = UNIT_NS[u.choose_index(UNIT_NS.len())?];
            unit.saturating_mul(u.int_in_range(1..=1_000)?)
        }
    })
}

/// `(count, period_ns, burst)` and the quota the public constructors make of them.
pub(crate) fn arbitrary_quota(
    u: &mut Unstructured<'_>,
) -> ArbResult<(u32, u64, u32, Result<Quota, QuotaError>)> {
    let count = biased_u32(u)?;
    let period_ns = arbitrary_period(u, count)?;
    // The interval the quota will have, if it is valid at all.
    let interval = period_ns.div_ceil(u64::from(count.max(1))).max(1);
    let burst = match u.int_in_range(0u8..=4)? {
        0 => count,
        1 => u.int_in_range(1..=16)?,
        2 => biased_u32(u)?,
        // At (or just under) the largest burst `Quota` allows for this interval.
        3 => {
            let most = (Quota::MAX_BURST_SPAN_NS / interval).min(u64::from(u32::MAX));
            (most.saturating_sub(u.int_in_range(0..=2)?).max(1)) as u32
        }
        // At (or just under) the largest burst `TokenBucket` accepts for this interval:
        // up to a burst of 2^31 with a 32-bit time field when the interval is 1 ns.
        _ => token_bucket_largest_burst(interval)
            .saturating_sub(u.int_in_range(0..=2)?)
            .max(1),
    };
    let quota =
        Quota::new(count, Duration::from_nanos(period_ns)).and_then(|q| q.with_burst(burst));
    Ok((count, period_ns, burst, quota))
}

/// The quota a window limiter is built with for a decoded `quota`: the same count and
/// period, with the count as its burst.
///
/// The window targets decode a burst (their inputs were written when the window limiters
/// ignored it); the window limiters now refuse a burst other than the count
/// (`QuotaError::BurstNotSupported`), so the burst is dropped here and the limiter decides
/// exactly as it did. `Err` for a quota whose count alone spans more than
/// `Quota::MAX_BURST_SPAN_NS` (a period past about 2^62 ns): such a window cannot be built.
pub(crate) fn window_quota(quota: &Quota) -> Result<Quota, QuotaError> {
    Quota::new(quota.count(), quota.period())
}

/// The largest burst whose full refill (`burst × interval`) fits half the token bucket's
/// wrap period (`2^(W−1)`, `W = 64 −` bit length of the burst), or 1 if none does.
pub(crate) fn token_bucket_largest_burst(interval: u64) -> u32 {
    (1..=32u32)
        .rev()
        .find_map(|bits| {
            let fits = (1u64 << (63 - bits)) / interval;
            let most = fits.min((1u64 << bits) - 1);
            (most >= 1u64 << (bits - 1)).then_some(most as u32)
        })
        .unwrap_or(1)
}

/// Permits to ask for: mostly around `0..=burst + 1`, sometimes anything.
pub(crate) fn arbitrary_n(u: &mut Unstructured<'_>, burst: u32) -> ArbResult<u32> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => u.int_in_range(0..=3)?,
        1 => u.int_in_range(0..=burst.saturating_add(1))?,
        2 => burst.saturating_sub(u.int_in_range(0..=2)?),
        3 => burst.saturating_add(1),
        _ => u.arbitrary()?,
    })
}

/// A distance in ns: tiny, `k·T` (± 1) for `k ≤ burst + 1`, within two intervals, or a
/// [`biased_u64`].
pub(crate) fn arbitrary_delta(
    u: &mut Unstructured<'_>,
    interval: u64,
    burst: u32,
) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(0..=3)?,
        1 => {
            let k = u.int_in_range(0..=u64::from(burst) + 1)?;
            interval
                .saturating_mul(k)
                .saturating_add(u.int_in_range(0..=2)?)
                .saturating_sub(1)
        }
        2 => u.int_in_range(0..=interval.saturating_mul(2))?,
        _ => biased_u64(u)?,
    })
}

/// A time: ahead of or behind `now` or before `u64::MAX` by an [`arbitrary_delta`]
/// (clamped to `[lo, hi]`), or absolute (folded into `[lo, hi]`).
pub(crate) fn arbitrary_time(
    u: &mut Unstructured<'_>,
    now: u64,
    (lo, hi): (u64, u64),
    interval: u64,
    burst: u32,
) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => now
            .saturating_add(arbitrary_delta(u, interval, burst)?)
            .clamp(lo, hi),
        1 => now
            .saturating_sub(arbitrary_delta(u, interval, burst)?)
            .clamp(lo, hi),
        // Counted back from the end of the clock, where schedules stop fitting in u64.
        2 => (u64::MAX - arbitrary_delta(u, interval, burst)?).clamp(lo, hi),
        _ => fold(biased_u64(u)?, (lo, hi)),
    })
}

/// `t` folded into `[lo, hi]` (unchanged for the whole `u64` range).
pub(crate) fn fold(t: u64, (lo, hi): (u64, u64)) -> u64 {
    match (hi - lo).checked_add(1) {
        Some(len) => lo + t % len,
        None => t, // the whole u64 range
    }
}

/// Where a run's clock starts: a [`biased_u64`], or up to a few bursts' worth of intervals
/// before the end of the clock (where the end-of-clock refusals live).
pub(crate) fn arbitrary_start(u: &mut Unstructured<'_>, quota: &Quota) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 | 1 => biased_u64(u)?,
        _ => {
            let (t, burst) = (quota.emission_interval_ns(), quota.burst());
            u64::MAX - arbitrary_delta(u, t, burst)?.saturating_add(arbitrary_delta(u, t, burst)?)
        }
    })
}

/// A quota with `1 ≤ count ≤ max` (the default burst), from the public constructor: a few
/// permits, anything up to `max`, `max` itself (or just under), or a power of two ± 1.
pub(crate) fn bounded_quota(
    u: &mut Unstructured<'_>,
    max: u32,
) -> ArbResult<Result<Quota, QuotaError>> {
    let count = match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(1..=max.min(4))?,
        1 => u.int_in_range(1..=max)?,
        2 => max - u.int_in_range(0..=(max - 1).min(2))?,
        _ => {
            let shift = u.int_in_range(0..=31 - max.leading_zeros())?;
            ((1u32 << shift) + u.int_in_range(0..=2)?)
                .saturating_sub(1)
                .clamp(1, max)
        }
    };
    let period_ns = arbitrary_period(u, count)?;
    Ok(Quota::new(count, Duration::from_nanos(period_ns)))
}
