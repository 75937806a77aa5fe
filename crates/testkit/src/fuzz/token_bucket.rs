//! `token_bucket_differential`: the token bucket against both GCRA-equivalent models,
//! inside the window its "Time field" documentation promises exactness in.

use super::decode::{
    arbitrary_delta, arbitrary_n, arbitrary_quota, arbitrary_start, arbitrary_time, biased_u64,
};
use super::gcra::{Differential, Op};
use super::{ArbResult, MAX_OPS};
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::clock::{Clock, ManualClock};
use limitcore::rules::TokenBucketRule;
use limitcore::{Denied, TokenBucket};

/// `TokenBucket` against `GcraModel` and `TokenBucketModel`, exactly, inside the window
/// its "Time field" documentation gives: every reading at most `R` ns behind the stored
/// refill time and less than `2^W − R` ns ahead of it (`W = 64 −` bit length of the burst,
/// `R = min(TokenBucketRule::MAX_CLOCK_LAG_NS, 2^(W−2))`).
///
/// - Phase 1: a base time (anywhere, near `u64::MAX` included) and every time the run uses
///   in `[base, base + R]` (cut at `u64::MAX`), in any order: no reading is more than `R`
///   behind or ahead of the stored refill time.
/// - Phase 2 (same limiter and models, after an "end phase" operation): only forward moves,
///   each up to `2^(W−2)` ns, clamped so that no reading passes `2^W − R − 1` ns after a
///   lower bound of the stored refill time.
///
/// Every decision, `retry_after` and snapshot is checked as in
/// [`gcra_differential`](super::gcra_differential).
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn token_bucket_differential(data: &[u8]) {
    let _ = run_token_bucket(&mut Unstructured::new(data));
}

/// The token bucket's window for `burst`: `(W, R)`.
pub(super) fn token_bucket_window(burst: u32) -> (u32, u64) {
    let token_bits = (u32::BITS - burst.leading_zeros()).max(1);
    let time_bits = 64 - token_bits;
    let r = TokenBucketRule::MAX_CLOCK_LAG_NS.min(1u64 << (time_bits - 2));
    (time_bits, r)
}

/// A lower bound of the bucket's stored refill time after an admission (`n ≥ 1`) at
/// reading `a` that left the GCRA backlog `full_after` (`TAT − a`).
///
/// From the documented duality (`TAT = last + (burst − tokens)·T`, the fraction of a token
/// kept in the time field): the stored time is `≡ TAT (mod T)`, and an admission at or
/// ahead of the stored time leaves it in `(a − T, a]`, so it is exactly
/// `a − ((a − TAT) mod T)`. An admission behind the stored time leaves the stored time
/// where it was, after `a`, so the same value is still a lower bound.
pub(super) fn stored_time_lower_bound(a: u64, full_after: Duration, interval: u64) -> u64 {
    let backlog = u64::try_from(full_after.as_nanos()).unwrap_or(u64::MAX);
    a.saturating_sub((interval - backlog % interval) % interval)
}

/// After `acquire(n)` at reading `a` gave `got`: raise the lower bound of the bucket's
/// stored refill time if it was an admission (the only thing that writes the word).
fn note_admission(
    d: &Differential<'_, TokenBucket<ManualClock>>,
    stored_lb: &mut Option<u64>,
    n: u32,
    a: u64,
    got: Result<(), Denied>,
) {
    if got.is_ok() && n >= 1 {
        let lb = stored_time_lower_bound(
            a,
            d.gcra().snapshot(a).full_after,
            d.quota.emission_interval_ns(),
        );
        *stored_lb = Some(stored_lb.map_or(lb, |old| old.max(lb)));
    }
}

fn run_token_bucket(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    let base = arbitrary_start(u, &quota)?;
    let clock = ManualClock::starting_at(base);
    let Ok(limiter) = TokenBucket::with_clock(quota, clock.clone()) else {
        return Ok(());
    };
    let mut d = Differential::new(
        "token_bucket_differential",
        "TokenBucket",
        quota,
        &limiter,
        clock,
    );
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let (w, r) = token_bucket_window(burst);
    // A lower bound of the stored refill time; none until the first admission (a fresh
    // bucket is full at any time).
    let mut stored_lb: Option<u64> = None;

    // Phase 1: every time in [base, base + R] (cut at u64::MAX), in any order. The bound
    // is inclusive on purpose: a reading exactly R behind the stored time is still inside
    // the documented window, and the edge is where an off-by-one would hide.
    let window = (base, base.saturating_add(r));
    let mut latest = base;
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            return Ok(());
        }
        let now = d.clock.now();
        match u.int_in_range(0u8..=7)? {
            0 => {
                // Forward, clamped at the end of the window.
                let to = now
                    .saturating_add(arbitrary_delta(u, t, burst)?)
                    .min(window.1);
                d.set_time(Op::Advance(to - now), to);
            }
            1 => {
                let to = arbitrary_time(u, now, window, t, burst)?;
                d.set_time(Op::SetTime(to), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, burst)?;
                let got = d.acquire(Op::Acquire(n), n, None);
                note_admission(&d, &mut stored_lb, n, now, got);
            }
            4 => {
                let n = arbitrary_n(u, burst)?;
                let at = arbitrary_time(u, now, window, t, burst)?;
                latest = latest.max(at);
                let got = d.acquire(Op::AcquireAt(n, at), n, Some(at));
                note_admission(&d, &mut stored_lb, n, at, got);
            }
            5 => {
                d.snapshot(Op::Snapshot, None);
            }
            6 => {
                let at = arbitrary_time(u, now, window, t, burst)?;
                latest = latest.max(at);
                d.snapshot(Op::SnapshotAt(at), Some(at));
            }
            _ => break,
        }
        latest = latest.max(d.clock.now());
    }

    // Phase 2: monotone time from the latest reading so far, steps of up to 2^(W-2) ns,
    // every reading at most 2^W - R - 1 ns after the lower bound of the stored refill time
    // (so less than 2^W - R after the stored time itself).
    d.phase = 2;
    let quarter = 1u64 << (w - 2);
    let wrap_margin = (1u64 << w) - r - 1;
    let mut now = latest;
    d.set_time(Op::SetTime(now), now);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let limit = stored_lb.map_or(u64::MAX, |lb| lb.saturating_add(wrap_margin));
        assert!(
            now <= limit,
            "harness bug: phase 2 reading {now} is past its limit {limit}"
        );
        let step_to = |u: &mut Unstructured<'_>, now: u64| -> ArbResult<u64> {
            let step = match u.int_in_range(0u8..=3)? {
                0 => arbitrary_delta(u, t, burst)?.min(quarter),
                1 => quarter,
                2 => u.int_in_range(0..=quarter)?,
                _ => biased_u64(u)? % (quarter + 1),
            };
            Ok(now.saturating_add(step).min(limit))
        };
        match u.int_in_range(0u8..=5)? {
            0 | 1 => {
                let to = step_to(u, now)?;
                d.set_time(Op::Advance(to - now), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, burst)?;
                let got = d.acquire(Op::Acquire(n), n, None);
                note_admission(&d, &mut stored_lb, n, now, got);
            }
            4 => {
                // At an explicit time ahead; the clock follows, so time stays monotone.
                let n = arbitrary_n(u, burst)?;
                let at = step_to(u, now)?;
                d.clock.set_nanos(at);
                let got = d.acquire(Op::AcquireAt(n, at), n, Some(at));
                note_admission(&d, &mut stored_lb, n, at, got);
            }
            _ => {
                d.snapshot(Op::Snapshot, None);
            }
        }
        now = d.clock.now();
    }
    Ok(())
}
