//! The fuzz harness, as plain functions of `&[u8]`.
//!
//! This file is included with `#[path]` by the cargo-fuzz targets in `fuzz/fuzz_targets/`
//! (nightly, libFuzzer) **and** by the main crate's `tests/fuzz_regressions.rs` (stable,
//! `cargo test`), which replays the inputs committed under `fuzz/regressions/<target>/`.
//! It depends only on `limitcore` and `arbitrary`, and panics (with the whole story in the
//! message) on any disagreement.
//!
//! - [`gcra_differential`]: [`Gcra`] against both reference models, at any time in the
//!   clock's 64-bit range, including backwards steps and readings near `u64::MAX`.
//! - [`token_bucket_differential`]: [`TokenBucket`] against both reference models, with
//!   every reading kept inside the window its "Time field" documentation promises exact
//!   agreement in (phase 1: a window of `R` ns around a base time, any order; phase 2:
//!   monotone time with long forward steps).
//! - [`quota_parse`]: [`Quota`]'s parser, constructors and `Display`.
//! - [`fixed_window_differential`], [`sliding_log_differential`]: [`FixedWindow`] and
//!   [`SlidingLog`] against [`FixedWindowModel`] and [`SlidingLogModel`], at explicit times
//!   anywhere in the 64-bit range, in any order.
//! - [`sliding_window_differential`]: [`SlidingWindow`] with batch 0 against
//!   [`SlidingWindowModel`], exactly, with every reading inside the window its stale
//!   tolerance and window-number field promise exactness in; then with leases (batch
//!   `1..=16`) and monotone time, never admitting what the formula on the true counts
//!   refuses.
//! - [`leaky_bucket_differential`]: [`LeakyBucket`]'s `try_acquire_n_at` and
//!   `reserve_n_at` against [`LeakyBucketModel`], at any time.
//! - [`keyed_differential`]: [`Keyed`], for each algorithm it runs, against a shadow of its
//!   map (per key: the model and the single limiter; the overflow state, the overrides and
//!   the sweeps), with every reading inside what the algorithms and the eviction grace
//!   promise exactness in.
//!
//! The last five have no clock: every call gets its time explicitly (the limiters are built
//! on a clock that panics if read).
//!
//! Inputs are decoded with [`arbitrary::Unstructured`]; running out of bytes ends a run
//! (the runs never fail for lack of input). Changing any choice below (a selector's range,
//! the order of choices) changes what every committed regression input means: they still
//! run, but test something else, so re-pick them from a fresh corpus (see `fuzz/README.md`).
#![allow(dead_code)]

use arbitrary::Unstructured;
use core::fmt::Write as _;
use core::time::Duration;
use limitcore::clock::{Clock, ManualClock};
use limitcore::reference::{
    FixedWindowModel, GcraModel, LeakyBucketModel, SlidingLogModel, SlidingWindowModel,
    TokenBucketModel,
};
use limitcore::{
    Algorithm, Denied, FixedWindow, Gcra, Keyed, LeakyBucket, PapayaStore, Quota, QuotaError,
    RateLimiter, Reserve, SlidingLog, SlidingWindow, Snapshot, Store, TokenBucket,
    EVICTION_GRACE_NS, MAX_BACKWARD_TOLERANCE_NS, MAX_BURST_SPAN_NS, MAX_SLIDING_WINDOW_COUNT,
    STALE_TOLERANCE_NS,
};
use std::collections::BTreeMap;

type ArbResult<T> = arbitrary::Result<T>;

/// Most operations in one run (per phase for the token bucket).
const MAX_OPS: usize = 400;

/// How many of the latest steps a failure message prints.
const HISTORY_SHOWN: usize = 48;

/// Append the last [`HISTORY_SHOWN`] steps of `history` to a failure message (one `line`
/// each, numbered from the run's first step) and panic with it.
fn fail_with_history<S>(mut msg: String, history: &[S], line: impl Fn(&S) -> String) -> ! {
    let skip = history.len().saturating_sub(HISTORY_SHOWN);
    let _ = writeln!(
        msg,
        "  history ({} steps{}):",
        history.len(),
        if skip > 0 { ", oldest left out" } else { "" }
    );
    for (i, step) in history.iter().enumerate().skip(skip) {
        let _ = writeln!(msg, "    #{i} {}", line(step));
    }
    panic!("{msg}");
}

// ---------------------------------------------------------------------------------------
// Decoding helpers.
// ---------------------------------------------------------------------------------------

/// A `u64` biased toward the values that break arithmetic: tiny, 16/32-bit, near
/// `u64::MAX`, powers of two and their neighbours, or anything.
fn biased_u64(u: &mut Unstructured<'_>) -> ArbResult<u64> {
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
fn biased_u32(u: &mut Unstructured<'_>) -> ArbResult<u32> {
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
const UNIT_NS: [u64; 7] = [
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
fn arbitrary_period(u: &mut Unstructured<'_>, count: u32) -> ArbResult<u64> {
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
fn arbitrary_quota(
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
            let most = (MAX_BURST_SPAN_NS / interval).min(u64::from(u32::MAX));
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

/// The largest burst whose full refill (`burst × interval`) fits half the token bucket's
/// wrap period (`2^(W−1)`, `W = 64 −` bit length of the burst), or 1 if none does.
fn token_bucket_largest_burst(interval: u64) -> u32 {
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
fn arbitrary_n(u: &mut Unstructured<'_>, burst: u32) -> ArbResult<u32> {
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
fn arbitrary_delta(u: &mut Unstructured<'_>, interval: u64, burst: u32) -> ArbResult<u64> {
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
fn arbitrary_time(
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
        _ => {
            let t = biased_u64(u)?;
            match (hi - lo).checked_add(1) {
                Some(len) => lo + t % len,
                None => t, // the whole u64 range
            }
        }
    })
}

/// Where a run's clock starts: a [`biased_u64`], or up to a few bursts' worth of intervals
/// before the end of the clock (where the end-of-clock refusals live).
fn arbitrary_start(u: &mut Unstructured<'_>, quota: &Quota) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 | 1 => biased_u64(u)?,
        _ => {
            let (t, burst) = (quota.emission_interval_ns(), quota.burst());
            u64::MAX - arbitrary_delta(u, t, burst)?.saturating_add(arbitrary_delta(u, t, burst)?)
        }
    })
}

// ---------------------------------------------------------------------------------------
// The differential checker.
// ---------------------------------------------------------------------------------------

/// One operation of a differential run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Move the clock forward by this many ns (saturating).
    Advance(u64),
    /// Set the clock (may move it backwards).
    SetTime(u64),
    /// `try_acquire_n(n)` on the limiter's clock.
    Acquire(u32),
    /// `try_acquire_n_at(n, now)` at an explicit time.
    AcquireAt(u32, u64),
    /// `snapshot()` on the limiter's clock.
    Snapshot,
    /// `snapshot_at(now)` at an explicit time.
    SnapshotAt(u64),
}

/// What a step gave (the limiter's answer; the models agreed or the run failed).
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Clock,
    Decision(Result<(), Denied>),
    Snapshot(Snapshot),
}

#[derive(Debug, Clone, Copy)]
struct Step {
    phase: u8,
    op: Op,
    /// The time the step was decided at (the clock after a clock move).
    now: u64,
    outcome: Outcome,
}

/// A limiter under test, both reference models, the clock they share, and the history so
/// far (for the failure message).
struct Differential<'a, L: RateLimiter> {
    target: &'static str,
    name: &'static str,
    quota: Quota,
    limiter: &'a L,
    clock: ManualClock,
    gcra: GcraModel,
    bucket: TokenBucketModel,
    history: Vec<Step>,
    phase: u8,
    /// The clock's reading when the run started.
    start: u64,
}

impl<'a, L: RateLimiter> Differential<'a, L> {
    fn new(
        target: &'static str,
        name: &'static str,
        quota: Quota,
        limiter: &'a L,
        clock: ManualClock,
    ) -> Self {
        let start = clock.now();
        Differential {
            target,
            name,
            quota,
            limiter,
            clock,
            gcra: GcraModel::new(quota),
            bucket: TokenBucketModel::new(quota),
            history: Vec::new(),
            phase: 1,
            start,
        }
    }

    fn record(&mut self, op: Op, now: u64, outcome: Outcome) {
        self.history.push(Step {
            phase: self.phase,
            op,
            now,
            outcome,
        });
    }

    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    fn fail(&self, what: &str, op: Op, now: u64, detail: &str) -> ! {
        let mut msg = String::new();
        let _ = writeln!(
            msg,
            "[{}] {} against the reference models: {what}",
            self.target, self.name
        );
        let _ = writeln!(
            msg,
            "  quota: {} = {:?} (interval {} ns, burst span {} ns)",
            self.quota,
            self.quota,
            self.quota.emission_interval_ns(),
            self.quota.burst_span_ns()
        );
        let _ = writeln!(
            msg,
            "  at step {} (phase {}): {op:?} with now = {now} (u64::MAX - now = {}); the clock \
             started at {}",
            self.history.len(),
            self.phase,
            u64::MAX - now,
            self.start
        );
        let _ = writeln!(msg, "{detail}");
        fail_with_history(msg, &self.history, |s| {
            format!("p{} {:?} now={} -> {:?}", s.phase, s.op, s.now, s.outcome)
        })
    }

    /// Decide `n` permits at `at` (or on the clock) on all three; they must agree.
    fn acquire(&mut self, op: Op, n: u32, at: Option<u64>) -> Result<(), Denied> {
        let now = at.unwrap_or_else(|| self.clock.now());
        let got = match at {
            None => self.limiter.try_acquire_n(n),
            Some(t) => self.limiter.try_acquire_n_at(n, t),
        };
        let gcra = self.gcra.acquire(n, now);
        let bucket = self.bucket.acquire(n, now);
        if got != gcra || gcra != bucket {
            self.fail(
                "decision",
                op,
                now,
                &format!(
                    "  {}: {got:?}\n  GcraModel: {gcra:?}\n  TokenBucketModel: {bucket:?}",
                    self.name
                ),
            );
        }
        self.record(op, now, Outcome::Decision(got));
        self.check_retry_after(op, n, now, got);
        got
    }

    /// The contract of [`Denied::RateLimited`], checked on copies of the GCRA model (which
    /// the limiter has just been shown to equal): a finite `retry_after` is exact (asking
    /// again exactly that much later conforms, one nanosecond earlier is refused by 1 ns);
    /// `Duration::MAX` means never (still refused at the end of the clock).
    fn check_retry_after(&self, op: Op, n: u32, now: u64, got: Result<(), Denied>) {
        let Err(denied) = got else {
            return;
        };
        if let Err((what, detail)) =
            probe_retry_after(denied, now, |t| self.gcra.clone().acquire(n, t))
        {
            self.fail(what, op, now, &detail);
        }
    }

    /// Read the state at `at` (or on the clock) on all three; they must agree.
    fn snapshot(&mut self, op: Op, at: Option<u64>) -> Snapshot {
        let now = at.unwrap_or_else(|| self.clock.now());
        let got = match at {
            None => self.limiter.snapshot(),
            Some(t) => self.limiter.snapshot_at(t),
        };
        let gcra = self.gcra.snapshot(now);
        let bucket = self.bucket.snapshot(now);
        if got != gcra || gcra != bucket {
            self.fail(
                "snapshot",
                op,
                now,
                &format!(
                    "  {}: {got:?}\n  GcraModel: {gcra:?}\n  TokenBucketModel: {bucket:?}",
                    self.name
                ),
            );
        }
        if got.remaining > self.quota.burst() {
            self.fail(
                "snapshot",
                op,
                now,
                &format!("  {got:?} has more than burst remaining"),
            );
        }
        self.record(op, now, Outcome::Snapshot(got));
        self.check_snapshot_meaning(op, now, got);
        got
    }

    /// What a [`Snapshot`] means, checked on copies of the GCRA model (which the limiter has
    /// just been shown to equal): `remaining` permits could be taken now (unless the end of
    /// the clock refuses them) and one more could not; the limiter is full again exactly
    /// `full_after` from now.
    fn check_snapshot_meaning(&self, op: Op, now: u64, got: Snapshot) {
        let never = Err(Denied::RateLimited {
            retry_after: Duration::MAX,
        });
        let take = self.gcra.clone().acquire(got.remaining, now);
        if take.is_err() && take != never {
            self.fail(
                "snapshot.remaining too high",
                op,
                now,
                &format!(
                    "  {got:?}, but acquiring {} now gives {take:?}",
                    got.remaining
                ),
            );
        }
        if got.remaining < self.quota.burst() {
            let more = self.gcra.clone().acquire(got.remaining + 1, now);
            if more.is_ok() {
                self.fail(
                    "snapshot.remaining too low",
                    op,
                    now,
                    &format!(
                        "  {got:?}, but acquiring {} now conforms",
                        got.remaining + 1
                    ),
                );
            }
        }
        let full_after = u64::try_from(got.full_after.as_nanos()).unwrap_or(u64::MAX);
        let Some(full_at) = now.checked_add(full_after) else {
            self.fail(
                "snapshot.full_after",
                op,
                now,
                &format!("  {got:?} is full after the end of the clock"),
            );
        };
        let then = self.gcra.snapshot(full_at);
        if then.remaining != self.quota.burst() || !then.full_after.is_zero() {
            self.fail(
                "snapshot.full_after too short",
                op,
                now,
                &format!("  {got:?}, but full_after later the state is {then:?}"),
            );
        }
        if full_after > 0 {
            let before = self.gcra.snapshot(full_at - 1);
            if before.full_after != Duration::from_nanos(1) {
                self.fail(
                    "snapshot.full_after too long",
                    op,
                    now,
                    &format!("  {got:?}, but 1 ns before full_after the state is {before:?}"),
                );
            }
        }
    }

    fn set_time(&mut self, op: Op, to: u64) {
        self.clock.set_nanos(to);
        self.record(op, to, Outcome::Clock);
    }

    fn advance(&mut self, op: Op, by: u64) {
        self.clock.advance_nanos(by);
        let now = self.clock.now();
        self.record(op, now, Outcome::Clock);
    }
}

// ---------------------------------------------------------------------------------------
// gcra_differential
// ---------------------------------------------------------------------------------------

/// [`Gcra`] (through [`RateLimiter`]) against [`GcraModel`] and [`TokenBucketModel`]: a
/// quota from arbitrary `(count, period, burst)` (skipped if refused), a [`ManualClock`]
/// starting anywhere (near `u64::MAX` included), then up to [`MAX_OPS`] operations —
/// advance, set the time (backwards too), acquire on the clock or at an explicit time,
/// snapshot — with identical decisions and snapshots required at every step.
pub(crate) fn gcra_differential(data: &[u8]) {
    let _ = run_gcra(&mut Unstructured::new(data));
}

fn run_gcra(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    let start = arbitrary_start(u, &quota)?;
    let clock = ManualClock::starting_at(start);
    let limiter = Gcra::with_clock(quota, clock.clone());
    let mut d = Differential::new("gcra_differential", "Gcra", quota, &limiter, clock);
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let all = (0, u64::MAX);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.clock.now();
        match u.int_in_range(0u8..=6)? {
            0 => {
                let by = arbitrary_delta(u, t, burst)?;
                d.advance(Op::Advance(by), by);
            }
            1 => {
                let to = arbitrary_time(u, now, all, t, burst)?;
                d.set_time(Op::SetTime(to), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, burst)?;
                let _ = d.acquire(Op::Acquire(n), n, None);
            }
            4 => {
                let n = arbitrary_n(u, burst)?;
                let at = arbitrary_time(u, now, all, t, burst)?;
                let _ = d.acquire(Op::AcquireAt(n, at), n, Some(at));
            }
            5 => {
                d.snapshot(Op::Snapshot, None);
            }
            _ => {
                let at = arbitrary_time(u, now, all, t, burst)?;
                d.snapshot(Op::SnapshotAt(at), Some(at));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// token_bucket_differential
// ---------------------------------------------------------------------------------------

/// [`TokenBucket`] against [`GcraModel`] and [`TokenBucketModel`], exactly, inside the
/// window its "Time field" documentation gives: every reading at most `R` ns behind the
/// stored refill time and less than `2^W − R` ns ahead of it (`W = 64 −` bit length of the
/// burst, `R = min(MAX_BACKWARD_TOLERANCE_NS, 2^(W−2))`).
///
/// - Phase 1: a base time (anywhere, near `u64::MAX` included) and every time the run uses
///   in `[base, base + R]` (cut at `u64::MAX`), in any order: no reading is more than `R`
///   behind or ahead of the stored refill time.
/// - Phase 2 (same limiter and models, after an "end phase" operation): only forward moves,
///   each up to `2^(W−2)` ns, clamped so that no reading passes `2^W − R − 1` ns after a
///   lower bound of the stored refill time (see [`stored_time_lower_bound`]).
pub(crate) fn token_bucket_differential(data: &[u8]) {
    let _ = run_token_bucket(&mut Unstructured::new(data));
}

/// The token bucket's window for `burst`: `(W, R)`.
fn token_bucket_window(burst: u32) -> (u32, u64) {
    let token_bits = (u32::BITS - burst.leading_zeros()).max(1);
    let time_bits = 64 - token_bits;
    let r = MAX_BACKWARD_TOLERANCE_NS.min(1u64 << (time_bits - 2));
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
fn stored_time_lower_bound(a: u64, full_after: Duration, interval: u64) -> u64 {
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
            d.gcra.snapshot(a).full_after,
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

// ---------------------------------------------------------------------------------------
// quota_parse
// ---------------------------------------------------------------------------------------

/// [`Quota`]'s text form and constructors never panic, and every quota they make is
/// valid and round-trips through `Display`; every refusal has a message.
///
/// The first byte selects the mode (so regression inputs can be written by hand):
/// - even: the rest, as (lossy) UTF-8 text, is parsed;
/// - `1 mod 4`: the constructors (`new`, `per_second`, …, `with_burst`) get arbitrary
///   numbers;
/// - `3 mod 4`: text assembled from arbitrary pieces of the grammar (numbers, units,
///   spaces, `burst`/`burst=`), to reach the valid forms more often than raw bytes do, and
///   checked against what the documented text form says it must parse to.
pub(crate) fn quota_parse(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 | 2 => check_text(&String::from_utf8_lossy(rest)),
        1 => {
            let _ = quota_constructors(&mut Unstructured::new(rest));
        }
        _ => {
            if let Ok((text, expect)) = quota_text(&mut Unstructured::new(rest)) {
                check_text(&text);
                check_text_expectation(&text, expect);
            }
        }
    }
}

fn check_text(text: &str) {
    match text.parse::<Quota>() {
        Ok(q) => check_quota(&q, &format!("parsed from {text:?}")),
        Err(e) => check_error(&e, &format!("parsing {text:?}")),
    }
}

fn quota_constructors(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let count = biased_u32(u)?;
    let period = match u.int_in_range(0u8..=2)? {
        0 => Duration::from_nanos(biased_u64(u)?),
        // Periods past u64::MAX ns too.
        1 => Duration::new(biased_u64(u)?, u.int_in_range(0..=999_999_999)?),
        _ => Duration::from_nanos(
            UNIT_NS[u.choose_index(UNIT_NS.len())?] * u.int_in_range(1..=1_000)?,
        ),
    };
    let burst = biased_u32(u)?;
    // 0: `Quota::new(count, period)`; 1..=4: the named constructors, which must be `new`
    // with their fixed period.
    const NAMED: [(&str, u64); 4] = [
        ("per_second", 1),
        ("per_minute", 60),
        ("per_hour", 3_600),
        ("per_day", 86_400),
    ];
    let (what, result) = match u.int_in_range(0usize..=NAMED.len())? {
        0 => (
            format!("Quota::new({count}, {period:?})"),
            Quota::new(count, period),
        ),
        i => {
            let (name, secs) = NAMED[i - 1];
            let result = match i {
                1 => Quota::per_second(count),
                2 => Quota::per_minute(count),
                3 => Quota::per_hour(count),
                _ => Quota::per_day(count),
            };
            let what = format!("Quota::{name}({count})");
            assert_eq!(
                result,
                Quota::new(count, Duration::from_secs(secs)),
                "{what} differs from Quota::new({count}, {secs} s)"
            );
            (what, result)
        }
    };
    match result {
        Ok(q) => {
            check_quota(&q, &what);
            assert_eq!(q.count(), count, "{what}: count");
            assert_eq!(q.burst(), count, "{what}: default burst");
            let with = q.with_burst(burst);
            let what = format!("{what}.with_burst({burst})");
            match with {
                Ok(b) => {
                    check_quota(&b, &what);
                    assert_eq!(
                        (
                            b.count(),
                            b.period_ns(),
                            b.emission_interval_ns(),
                            b.burst()
                        ),
                        (q.count(), q.period_ns(), q.emission_interval_ns(), burst),
                        "{what}: with_burst changed more than the burst"
                    );
                }
                Err(e) => check_error(&e, &what),
            }
        }
        Err(e) => check_error(&e, &what),
    }
    Ok(())
}

/// What the documented text form says a [`quota_text`] string must parse to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Outside the documented grammar (a tab, `burst` glued to its neighbours, …): only
    /// the general properties are checked.
    Unspecified,
    /// In the grammar's shape but with an invalid piece (unknown unit, a number too large
    /// for its field, a period past `u64::MAX` ns): must be refused.
    Invalid,
    /// Well formed: must be what the constructors make of these parts.
    Valid {
        count: u32,
        period_ns: u64,
        burst: u32,
    },
}

/// Text assembled from the grammar `COUNT/[N]UNIT[ burst B]` with arbitrary numbers,
/// spacing and the occasional wrong piece, with what the documentation says it must give.
fn quota_text(u: &mut Unstructured<'_>) -> ArbResult<(String, Expect)> {
    // (text, ns); 0 = not a unit.
    const UNITS: [(&str, u64); 10] = [
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("min", 60_000_000_000),
        ("h", 3_600_000_000_000),
        ("d", 86_400_000_000_000),
        ("x", 0),
        ("", 0),
    ];
    // (text, documented: "spaces around the parts are allowed").
    const SPACES: [(&str, bool); 4] = [("", true), (" ", true), ("  ", true), ("\t", false)];
    // The forms after the unit; the first two are documented.
    const BURSTS: [&str; 4] = ["burst ", "burst=", "burst =", "burst"];
    let mut s = String::new();
    let mut documented = true;
    let space = |u: &mut Unstructured<'_>, s: &mut String, documented: &mut bool| {
        let (text, ok) = SPACES[u.choose_index(SPACES.len())?];
        s.push_str(text);
        *documented &= ok;
        ArbResult::Ok(text.len())
    };
    // A whole number as text and its value (which may not fit any field).
    let number = |u: &mut Unstructured<'_>, s: &mut String| -> ArbResult<u128> {
        Ok(match u.int_in_range(0u8..=3)? {
            0 => {
                let v = biased_u32(u)?;
                write!(s, "{v}").unwrap();
                v.into()
            }
            1 => {
                let v = biased_u64(u)?;
                write!(s, "{v}").unwrap();
                v.into()
            }
            2 => {
                let v = u.int_in_range(0u32..=999)?;
                write!(s, "{v:03}").unwrap(); // leading zeros
                v.into()
            }
            _ => {
                let (v, d) = (biased_u64(u)?, u.int_in_range(0u32..=9)?);
                write!(s, "{v}{d}").unwrap(); // may pass u64::MAX
                u128::from(v) * 10 + u128::from(d)
            }
        })
    };
    space(u, &mut s, &mut documented)?;
    let count = number(u, &mut s)?;
    space(u, &mut s, &mut documented)?;
    s.push('/');
    space(u, &mut s, &mut documented)?;
    let multiplier = if u.arbitrary()? {
        let m = number(u, &mut s)?;
        space(u, &mut s, &mut documented)?;
        m
    } else {
        1
    };
    let (unit, unit_ns) = UNITS[u.choose_index(UNITS.len())?];
    s.push_str(unit);
    let gap = space(u, &mut s, &mut documented)?;
    let burst = if u.arbitrary()? {
        let form = u.choose_index(BURSTS.len())?;
        // `UNIT burst B` and `burst=B` are the documented forms; the unit must be
        // separated from `burst`.
        documented &= gap > 0 && form <= 1;
        s.push_str(BURSTS[form]);
        space(u, &mut s, &mut documented)?;
        let b = number(u, &mut s)?;
        space(u, &mut s, &mut documented)?;
        Some(b)
    } else {
        None
    };
    let documented = documented && !unit.is_empty();
    let period = multiplier * u128::from(unit_ns);
    let expect = if !documented {
        Expect::Unspecified
    } else {
        match (
            u32::try_from(count),
            u64::try_from(multiplier),
            u64::try_from(period),
            burst.map(u32::try_from),
        ) {
            (Ok(count), Ok(_), Ok(period_ns), None) if unit_ns != 0 => Expect::Valid {
                count,
                period_ns,
                burst: count,
            },
            (Ok(count), Ok(_), Ok(period_ns), Some(Ok(burst))) if unit_ns != 0 => Expect::Valid {
                count,
                period_ns,
                burst,
            },
            _ => Expect::Invalid,
        }
    };
    Ok((s, expect))
}

/// A [`quota_text`] string against what the documentation says it must give.
fn check_text_expectation(text: &str, expect: Expect) {
    let got = text.parse::<Quota>();
    match expect {
        Expect::Unspecified => {}
        Expect::Invalid => assert!(
            got.is_err(),
            "{text:?} has an invalid piece but parses as {got:?}"
        ),
        Expect::Valid {
            count,
            period_ns,
            burst,
        } => {
            let built = Quota::new(count, Duration::from_nanos(period_ns))
                .and_then(|q| q.with_burst(burst));
            match (&got, &built) {
                (Ok(g), Ok(b)) => assert_eq!(g, b, "{text:?}: parsed differs from built"),
                (Err(_), Err(_)) => {}
                // The builder goes through burst = count first (see `check_quota`).
                (Ok(_), Err(QuotaError::BurstTooLarge { .. })) if count > burst => {}
                _ => panic!(
                    "{text:?} (count {count}, period {period_ns} ns, burst {burst}) parses as \
                     {got:?} but the constructors give {built:?}"
                ),
            }
        }
    }
}

/// Everything a valid quota promises.
fn check_quota(q: &Quota, what: &str) {
    let (count, burst, period, interval) = (
        q.count(),
        q.burst(),
        q.period_ns(),
        q.emission_interval_ns(),
    );
    assert!(
        count >= 1 && burst >= 1 && period >= 1,
        "{what}: {q:?} has a zero part"
    );
    assert!(interval >= 1, "{what}: {q:?}: emission interval < 1 ns");
    let (i, c, p) = (u128::from(interval), u128::from(count), u128::from(period));
    assert!(
        i * c >= p,
        "{what}: {q:?}: interval × count < period (admits too much)"
    );
    assert!(
        (i - 1) * c < p,
        "{what}: {q:?}: interval is not period / count rounded up"
    );
    let span = q.burst_span_ns();
    assert!(
        span <= MAX_BURST_SPAN_NS,
        "{what}: {q:?}: burst span {span} > MAX_BURST_SPAN_NS"
    );
    assert_eq!(
        u128::from(span),
        i * u128::from(burst),
        "{what}: {q:?}: burst span"
    );
    assert_eq!(
        q.period(),
        Duration::from_nanos(period),
        "{what}: {q:?}: period()"
    );
    assert_eq!(
        q.emission_interval(),
        Duration::from_nanos(interval),
        "{what}: {q:?}: emission_interval()"
    );
    assert_eq!(
        q.tolerance(),
        Duration::from_nanos(span - interval),
        "{what}: {q:?}: tolerance()"
    );
    let text = q.to_string();
    assert_eq!(
        text.parse::<Quota>().as_ref(),
        Ok(q),
        "{what}: {q:?} displays as {text:?}, which does not parse back"
    );
    // The builder goes through the default burst (= count) first, which may be refused when
    // `count > burst` even though this quota is valid (the text form can name such quotas;
    // the builder cannot: see the report). Otherwise it must make the same quota.
    match Quota::new(count, q.period()) {
        Ok(r) => assert_eq!(
            r.with_burst(burst).as_ref(),
            Ok(q),
            "{what}: {q:?} is not what the constructors make of its parts"
        ),
        Err(e) => assert!(
            count > burst && matches!(e, QuotaError::BurstTooLarge { .. }),
            "{what}: {q:?} is valid, but Quota::new({count}, {:?}) refuses it: {e:?}",
            q.period()
        ),
    }
    // The documented limit `burst × interval ≤ MAX_BURST_SPAN_NS`, exactly at its edge.
    let most = (MAX_BURST_SPAN_NS / interval).min(u64::from(u32::MAX)) as u32;
    assert!(
        q.with_burst(most).is_ok(),
        "{what}: {q:?}.with_burst({most}) refused, but {most} × {interval} ns fits"
    );
    if let Some(over) = most.checked_add(1) {
        assert!(
            matches!(q.with_burst(over), Err(QuotaError::BurstTooLarge { .. })),
            "{what}: {q:?}.with_burst({over}) accepted, but {over} × {interval} ns is too long"
        );
    }
    assert_eq!(
        q.with_burst(burst).as_ref(),
        Ok(q),
        "{what}: {q:?}.with_burst(its own burst)"
    );
    let _ = format!("{q:?}");
}

fn check_error(e: &QuotaError, what: &str) {
    assert!(
        !e.to_string().is_empty(),
        "{what}: {e:?} has an empty message"
    );
    let _ = format!("{e:?}");
}

// ---------------------------------------------------------------------------------------
// Explicit-time runs (the window limiters and the pacer): shared pieces.
// ---------------------------------------------------------------------------------------

/// The clock of an explicit-time run: every call is given its time, so nothing may read it.
#[derive(Debug, Clone, Copy)]
struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> u64 {
        panic!("harness bug: an explicit-time run read the limiter's clock")
    }
}

/// One operation of an explicit-time run. There is no clock: `now` is the run's own
/// variable, and every call gets its time explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimedOp {
    /// Move `now` forward by this many ns (saturating; then brought inside the run's
    /// readings, see [`Readings`]).
    Advance(u64),
    /// Set `now` (backwards too, where the run allows it).
    SetTime(u64),
    /// Move `now` forward by this much: the last finite `retry_after` (or 1 ns less), as a
    /// caller that waited; the denied request is then asked again.
    WaitRetry(u64),
    /// `try_acquire_n_at(n, now)`.
    Acquire(u32),
    /// `reserve_n_at(n, now, max_wait)` (the pacer).
    Reserve(u32, Duration),
    /// `snapshot_at(t)`.
    SnapshotAt(u64),
}

/// What a step gave (the limiter's answer; the model agreed or the run failed).
#[derive(Debug, Clone, Copy)]
enum TimedOutcome {
    Time,
    Decision(Result<(), Denied>),
    /// A reservation's delay.
    Reserved(Result<Duration, Denied>),
    Snapshot(Snapshot),
}

#[derive(Debug, Clone, Copy)]
struct TimedStep {
    phase: u8,
    op: TimedOp,
    /// `now` after the step (for a snapshot: the time it was taken at).
    now: u64,
    outcome: TimedOutcome,
}

/// The story of an explicit-time run, for the failure message.
struct Trace {
    target: &'static str,
    /// The limiter under test and what it is checked against.
    name: String,
    model: &'static str,
    quota: Quota,
    /// Anything else that identifies the run (batch, ...).
    setup: String,
    /// The readings allowed at the last admission (a window run's).
    readings: Option<Readings>,
    /// `now` when the run started.
    start: u64,
    phase: u8,
    history: Vec<TimedStep>,
}

impl Trace {
    fn new(
        target: &'static str,
        name: &str,
        model: &'static str,
        quota: Quota,
        start: u64,
    ) -> Trace {
        Trace {
            target,
            name: name.to_owned(),
            model,
            quota,
            setup: String::new(),
            readings: None,
            start,
            phase: 1,
            history: Vec::new(),
        }
    }

    fn record(&mut self, op: TimedOp, now: u64, outcome: TimedOutcome) {
        self.history.push(TimedStep {
            phase: self.phase,
            op,
            now,
            outcome,
        });
    }

    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    fn fail(&self, what: &str, op: TimedOp, now: u64, detail: &str) -> ! {
        let mut msg = String::new();
        let _ = writeln!(
            msg,
            "[{}] {} against {}: {what}",
            self.target, self.name, self.model
        );
        let q = &self.quota;
        let _ = writeln!(
            msg,
            "  quota: {q} = {q:?} (count {}, period {} ns, interval {} ns, burst {})",
            q.count(),
            q.period_ns(),
            q.emission_interval_ns(),
            q.burst()
        );
        if !self.setup.is_empty() {
            let _ = writeln!(msg, "  setup: {}", self.setup);
        }
        if let Some(r) = self.readings {
            let _ = writeln!(msg, "  readings: {r:?}, allowed in {:?}", r.bounds());
        }
        let _ = writeln!(
            msg,
            "  at step {} (phase {}): {op:?} with now = {now} (u64::MAX - now = {}); the run \
             started at {}",
            self.history.len(),
            self.phase,
            u64::MAX - now,
            self.start
        );
        let _ = writeln!(msg, "{detail}");
        fail_with_history(msg, &self.history, |s| {
            format!("p{} {:?} now={} -> {:?}", s.phase, s.op, s.now, s.outcome)
        })
    }
}

/// `Duration` → ns, saturating (as the crate converts a `max_wait`).
fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A broken contract: what (the failure's title) and the detail lines, for a `fail`.
type Broken = (&'static str, String);

/// The contract of a [`Denied::RateLimited`] `denied` at `now`, probed with `decide(t)`: the
/// model's decision on the same request at `t`, on a fresh copy of the model each call (the
/// model the limiter has just been shown to equal).
///
/// - `retry_after = Duration::MAX` means never: still refused at the end of the clock.
/// - A finite `retry_after` is exact: at least 1 ns, with `now + retry_after` on the clock,
///   admitted when asked again exactly that much later, and refused by exactly 1 ns one
///   nanosecond earlier.
///
/// Returns the instant `now + retry_after` (`None` for `Duration::MAX` or another denial).
fn probe_retry_after<T: core::fmt::Debug>(
    denied: Denied,
    now: u64,
    decide: impl Fn(u64) -> Result<T, Denied>,
) -> Result<Option<u64>, Broken> {
    let Denied::RateLimited { retry_after } = denied else {
        return Ok(None);
    };
    if retry_after == Duration::MAX {
        let at_end = decide(u64::MAX);
        if at_end.is_ok() {
            return Err((
                "retry_after = MAX but admitted later",
                format!("  denied {denied:?}, but asking again at u64::MAX gives {at_end:?}"),
            ));
        }
        return Ok(None);
    }
    let wait = saturating_nanos(retry_after);
    if wait == 0 {
        return Err((
            "zero retry_after",
            "  a denial must ask for a wait of at least 1 ns".to_string(),
        ));
    }
    let Some(then) = now.checked_add(wait) else {
        return Err((
            "finite retry_after past the end of the clock",
            format!(
                "  denied {denied:?}: now + retry_after passes u64::MAX (should be Duration::MAX)"
            ),
        ));
    };
    let at_then = decide(then);
    if at_then.is_err() {
        return Err((
            "retry_after too short",
            format!("  denied {denied:?}, but asking again at now + {wait} gives {at_then:?}"),
        ));
    }
    let just_before = decide(then - 1).map(drop);
    let by_one = Err(Denied::RateLimited {
        retry_after: Duration::from_nanos(1),
    });
    if just_before != by_one {
        return Err((
            "retry_after too long",
            format!(
                "  denied {denied:?}, but asking again at now + {wait} - 1 gives {just_before:?}"
            ),
        ));
    }
    Ok(Some(then))
}

/// The time scales a window run draws its distances around.
#[derive(Debug, Clone, Copy)]
struct Shape {
    period: u64,
    interval: u64,
    /// Most permits at once (the count, for a window).
    capacity: u32,
}

impl Shape {
    fn window(quota: &Quota) -> Shape {
        Shape {
            period: quota.period_ns(),
            interval: quota.emission_interval_ns(),
            capacity: quota.count(),
        }
    }
}

/// A quota with `1 ≤ count ≤ max` (the default burst), from the public constructor: a few
/// permits, anything up to `max`, `max` itself (or just under), or a power of two ± 1.
fn bounded_quota(u: &mut Unstructured<'_>, max: u32) -> ArbResult<Result<Quota, QuotaError>> {
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

/// A distance in ns for a window run: tiny, `k·T` (± 1) for `k ≤ count + 1` (the
/// formula's steps inside a window), `k` whole windows (± 1), within two windows, or a
/// [`biased_u64`].
fn window_delta(u: &mut Unstructured<'_>, s: &Shape) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => u.int_in_range(0..=3)?,
        1 => {
            let k = u.int_in_range(0..=u64::from(s.capacity) + 1)?;
            s.interval
                .saturating_mul(k)
                .saturating_add(u.int_in_range(0..=2)?)
                .saturating_sub(1)
        }
        2 => {
            let k = u.int_in_range(0..=6)?;
            s.period
                .saturating_mul(k)
                .saturating_add(u.int_in_range(0..=2)?)
                .saturating_sub(1)
        }
        3 => u.int_in_range(0..=s.period.saturating_mul(2))?,
        _ => biased_u64(u)?,
    })
}

/// A time for a window run: ahead of or behind `now`, from the start of `now`'s window
/// (its edges and the formula's steps), or before `u64::MAX`, by a [`window_delta`]
/// (clamped to `[lo, hi]`), or absolute (folded into `[lo, hi]`).
fn window_time(
    u: &mut Unstructured<'_>,
    now: u64,
    (lo, hi): (u64, u64),
    s: &Shape,
) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => now.saturating_add(window_delta(u, s)?).clamp(lo, hi),
        1 => now.saturating_sub(window_delta(u, s)?).clamp(lo, hi),
        2 => (now - now % s.period)
            .saturating_add(window_delta(u, s)?)
            .clamp(lo, hi),
        3 => (u64::MAX - window_delta(u, s)?).clamp(lo, hi),
        _ => {
            let t = biased_u64(u)?;
            match (hi - lo).checked_add(1) {
                Some(len) => lo + t % len,
                None => t,
            }
        }
    })
}

/// Where a window run starts: a [`biased_u64`], or a few windows before the end of the
/// clock (where the last window ends past `u64::MAX`).
fn window_start(u: &mut Unstructured<'_>, s: &Shape) -> ArbResult<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 | 1 => biased_u64(u)?,
        _ => u64::MAX - window_delta(u, s)?.saturating_add(window_delta(u, s)?),
    })
}

/// The readings a run may use and still expect exact agreement with its model.
#[derive(Debug, Clone, Copy)]
enum Readings {
    /// Any `u64` time, in any order (the fixed window, the sliding log, the pacer).
    Anywhere,
    /// The sliding window's: see [`SlidingReadings`].
    Sliding(SlidingReadings),
}

/// Where [`SlidingWindow`]'s documentation promises the formula exactly (batch 0).
///
/// The global word keeps the window number modulo `2^F` (`F = 64 − 2b`, `b` the bit length
/// of the count); a reading up to `tolerance` windows before the stored window is stale and
/// decided at the stored window's start ([`STALE_TOLERANCE_NS`]: "2^33 ns worth of
/// windows, at least 4, at most a quarter of the field's range"), and a reading `D` windows
/// after it is read modulo `2^F` ("a limiter left idle for about a multiple of `2^F`
/// windows may read its old counts as current or stale"). So, with `S` the stored window
/// (the latest window of an admission), every reading's window is kept in
/// `[S − tolerance, S + 2^F − tolerance − 1]`: both ends inclusive, on purpose.
///
/// Before the first admission the word is the fresh `0` (window 0, no counts): any reading
/// decides like the model, but an *admission* at a window within `tolerance` below a
/// multiple of `2^F` is taken as stale and recorded up to `tolerance` windows in the future
/// (see `fuzz/README.md`); such readings are moved out of that band.
#[derive(Debug, Clone, Copy)]
struct SlidingReadings {
    period: u64,
    /// `F`.
    field_bits: u32,
    /// In windows.
    tolerance: u64,
    /// `S`, once something was admitted.
    stored: Option<u64>,
}

impl SlidingReadings {
    fn new(quota: &Quota) -> SlidingReadings {
        let bits = u32::BITS - quota.count().leading_zeros();
        let field_bits = 64 - 2 * bits;
        let quarter = (1u64 << (field_bits - 2)) - 1;
        SlidingReadings {
            period: quota.period_ns(),
            field_bits,
            tolerance: STALE_TOLERANCE_NS
                .div_ceil(quota.period_ns())
                .max(4)
                .min(quarter.max(4)),
            stored: None,
        }
    }
}

impl Readings {
    /// The range every reading must be in.
    fn bounds(&self) -> (u64, u64) {
        match self {
            Readings::Anywhere => (0, u64::MAX),
            Readings::Sliding(r) => match r.stored {
                None => (0, u64::MAX),
                Some(s) => {
                    let lo = s.saturating_sub(r.tolerance) * r.period;
                    let end = (u128::from(s) + (1u128 << r.field_bits) - u128::from(r.tolerance))
                        * u128::from(r.period);
                    (lo, u64::try_from(end - 1).unwrap_or(u64::MAX))
                }
            },
        }
    }

    /// The nearest reading to `t` that the run may use.
    fn allowed(&self, t: u64) -> u64 {
        let (lo, hi) = self.bounds();
        let t = t.clamp(lo, hi);
        let Readings::Sliding(r) = self else {
            return t;
        };
        if r.stored.is_some() {
            return t;
        }
        // The fresh word's stale band: window residues [2^F − tolerance, 2^F).
        let field = 1u64 << r.field_bits;
        let residue = (t / r.period) & (field - 1);
        let band = field - r.tolerance;
        if residue < band {
            return t;
        }
        // Forward to the next multiple of 2^F windows, or back just below the band.
        u128::from(field - residue)
            .checked_mul(u128::from(r.period))
            .and_then(|d| u64::try_from(u128::from(t) + d).ok())
            .unwrap_or_else(|| t - (residue - band + 1) * r.period)
    }

    fn allows(&self, t: u64) -> bool {
        self.allowed(t) == t
    }

    /// `n ≥ 1` permits were admitted at `at`.
    fn admitted(&mut self, at: u64) {
        if let Readings::Sliding(r) = self {
            let k = at / r.period;
            r.stored = Some(r.stored.map_or(k, |s| s.max(k)));
        }
    }
}

/// A window model, as the window runs use it.
trait WindowModel: Clone {
    fn decide(&mut self, n: u32, now: u64) -> Result<(), Denied>;
    /// Permits the model admits at `now` (`capacity` is the count).
    fn left(&self, now: u64, capacity: u32) -> u32;
    /// Is nothing counted against the next request at `now`?
    fn full(&self, now: u64, capacity: u32) -> bool {
        self.left(now, capacity) == capacity
    }
}

impl WindowModel for FixedWindowModel {
    fn decide(&mut self, n: u32, now: u64) -> Result<(), Denied> {
        self.acquire(n, now)
    }
    fn left(&self, now: u64, _: u32) -> u32 {
        self.remaining(now)
    }
}

impl WindowModel for SlidingLogModel {
    fn decide(&mut self, n: u32, now: u64) -> Result<(), Denied> {
        self.acquire(n, now)
    }
    fn left(&self, now: u64, _: u32) -> u32 {
        self.remaining(now)
    }
}

impl WindowModel for SlidingWindowModel {
    fn decide(&mut self, n: u32, now: u64) -> Result<(), Denied> {
        self.acquire(n, now)
    }
    /// `remaining` tries every `n` from the count down: for large counts, binary search
    /// the largest `n` that `acquire` admits (on copies) instead.
    fn left(&self, now: u64, capacity: u32) -> u32 {
        if capacity <= 4_096 {
            return self.remaining(now);
        }
        let (mut lo, mut hi) = (0, capacity);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.clone().acquire(mid, now).is_ok() {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }
    fn full(&self, now: u64, capacity: u32) -> bool {
        self.clone().acquire(capacity, now).is_ok()
    }
}

/// A window limiter and its model, the run's `now`, and the history so far.
struct WindowDiff<'a, L: RateLimiter, M: WindowModel> {
    trace: Trace,
    limiter: &'a L,
    model: M,
    shape: Shape,
    readings: Readings,
    now: u64,
    /// The last denial with a finite wait: `(n, retry_after in ns)`.
    last_denied: Option<(u32, u64)>,
}

impl<'a, L: RateLimiter, M: WindowModel> WindowDiff<'a, L, M> {
    fn move_to(&mut self, op: TimedOp, to: u64) {
        self.now = self.readings.allowed(to);
        self.trace.record(op, self.now, TimedOutcome::Time);
    }

    /// `n` permits at `now`, on both; they must agree.
    fn acquire(&mut self, op: TimedOp, n: u32) {
        let now = self.now;
        let got = self.limiter.try_acquire_n_at(n, now);
        let want = self.model.decide(n, now);
        if got != want {
            self.trace.fail(
                "decision",
                op,
                now,
                &format!(
                    "  {}: {got:?}\n  {}: {want:?}",
                    self.trace.name, self.trace.model
                ),
            );
        }
        self.trace.record(op, now, TimedOutcome::Decision(got));
        if got.is_ok() && n >= 1 {
            self.readings.admitted(now);
            self.trace.readings = Some(self.readings);
        }
        self.check_retry_after(op, n, now, got);
    }

    /// A finite `retry_after` is exact (on copies of the model, which the limiter has just
    /// been shown to equal: asking again exactly that much later is admitted, one ns earlier
    /// is refused by 1 ns), and the limiter's own snapshots agree at both probe times (where
    /// the run may read); `Duration::MAX` means never (still refused at the end of the
    /// clock).
    fn check_retry_after(&mut self, op: TimedOp, n: u32, now: u64, got: Result<(), Denied>) {
        let Err(denied @ Denied::RateLimited { .. }) = got else {
            return;
        };
        let t = &self.trace;
        let then = match probe_retry_after(denied, now, |at| self.model.clone().decide(n, at)) {
            Ok(then) => then,
            Err((what, detail)) => t.fail(what, op, now, &detail),
        };
        // `None`: `retry_after = Duration::MAX`.
        let Some(then) = then else {
            if self.readings.allows(u64::MAX) {
                let s = self.limiter.snapshot_at(u64::MAX);
                if s.remaining >= n {
                    t.fail(
                        "retry_after = MAX but the limiter has room later",
                        op,
                        now,
                        &format!("  denied {got:?}, but snapshot_at(u64::MAX) = {s:?}"),
                    );
                }
            }
            return;
        };
        for (at, room) in [(then, true), (then - 1, false)] {
            if !self.readings.allows(at) {
                continue;
            }
            let s = self.limiter.snapshot_at(at);
            if (s.remaining >= n) != room {
                t.fail(
                    "the limiter's snapshot disagrees with its retry_after",
                    op,
                    now,
                    &format!(
                        "  denied {got:?} (n = {n}), but snapshot_at(now + {}) = {s:?}",
                        at - now
                    ),
                );
            }
        }
        self.last_denied = Some((n, then - now));
    }

    /// Is the model full (nothing counted against the next request) at `at`?
    fn model_full(&self, at: u64) -> bool {
        self.model.full(at, self.shape.capacity)
    }

    /// Read both at `at`; `remaining` must agree, and both fields must mean what they say.
    fn snapshot(&mut self, op: TimedOp, at: u64) -> Snapshot {
        let got = self.limiter.snapshot_at(at);
        let cap = self.shape.capacity;
        let want = self.model.left(at, cap);
        let t = &self.trace;
        if got.remaining != want {
            t.fail(
                "snapshot.remaining",
                op,
                at,
                &format!("  {}: {got:?}\n  {}: remaining {want}", t.name, t.model),
            );
        }
        // `remaining` permits are admitted now, one more is not (on copies of the model).
        let take = self.model.clone().decide(got.remaining, at);
        if take.is_err() {
            t.fail(
                "snapshot.remaining too high",
                op,
                at,
                &format!("  {got:?}, but acquiring {} gives {take:?}", got.remaining),
            );
        }
        let one_more = (got.remaining < cap).then(|| got.remaining + 1);
        if let Some(one_more) = one_more {
            let more = self.model.clone().decide(one_more, at);
            if more.is_ok() {
                t.fail(
                    "snapshot.remaining too low",
                    op,
                    at,
                    &format!("  {got:?}, but acquiring {} is admitted", got.remaining + 1),
                );
            }
        }
        if got.remaining > cap {
            t.fail(
                "snapshot.remaining above the count",
                op,
                at,
                &format!("  {got:?}"),
            );
        }
        // Full again exactly `full_after` from `at` (`MAX`: never, within the clock).
        if got.full_after == Duration::MAX {
            if self.model_full(u64::MAX) {
                t.fail(
                    "snapshot.full_after = MAX but full later",
                    op,
                    at,
                    &format!("  {got:?}, but the model is full at u64::MAX"),
                );
            }
        } else {
            let full_after = saturating_nanos(got.full_after);
            let Some(full_at) = at.checked_add(full_after) else {
                t.fail(
                    "snapshot.full_after",
                    op,
                    at,
                    &format!("  {got:?} is full after the end of the clock (should be MAX)"),
                );
            };
            if !self.model_full(full_at) {
                t.fail(
                    "snapshot.full_after too short",
                    op,
                    at,
                    &format!("  {got:?}, but the model is not full at at + full_after"),
                );
            }
            if full_after > 0 && self.model_full(full_at - 1) {
                t.fail(
                    "snapshot.full_after too long",
                    op,
                    at,
                    &format!("  {got:?}, but the model is full 1 ns before at + full_after"),
                );
            }
        }
        self.trace.record(op, at, TimedOutcome::Snapshot(got));
        got
    }
}

/// Up to [`MAX_OPS`] operations on a window run: advance, set the time (inside the run's
/// [`Readings`]), acquire, ask again after the last `retry_after` (or 1 ns before it), and
/// snapshot at any allowed time or at `now`. With `can_end`, a selector ends the phase.
fn window_ops<L: RateLimiter, M: WindowModel>(
    u: &mut Unstructured<'_>,
    d: &mut WindowDiff<'_, L, M>,
    can_end: bool,
) -> ArbResult<()> {
    let s = d.shape;
    let last = if can_end { 7 } else { 6 };
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.now;
        match u.int_in_range(0u8..=last)? {
            0 => {
                let by = window_delta(u, &s)?;
                d.move_to(TimedOp::Advance(by), now.saturating_add(by));
            }
            1 => {
                let to = window_time(u, now, d.readings.bounds(), &s)?;
                d.move_to(TimedOp::SetTime(to), to);
            }
            2 | 3 => {
                let n = arbitrary_n(u, s.capacity)?;
                d.acquire(TimedOp::Acquire(n), n);
            }
            4 => {
                let Some((n, wait)) = d.last_denied else {
                    continue;
                };
                let by = wait - u64::from(u.arbitrary::<bool>()?);
                d.move_to(TimedOp::WaitRetry(by), now.saturating_add(by));
                d.acquire(TimedOp::Acquire(n), n);
            }
            5 => {
                let at = d
                    .readings
                    .allowed(window_time(u, now, d.readings.bounds(), &s)?);
                d.snapshot(TimedOp::SnapshotAt(at), at);
            }
            6 => {
                d.snapshot(TimedOp::SnapshotAt(now), now);
            }
            _ => break,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fixed_window_differential
// ---------------------------------------------------------------------------------------

/// [`FixedWindow`] against [`FixedWindowModel`]: a quota from arbitrary `(count, period,
/// burst)` (skipped if the quota or the limiter refuses it), an explicit `now` starting
/// anywhere (near `u64::MAX` included), then up to [`MAX_OPS`] operations at any time in
/// any order (a reading before the stored window counts against it, on both sides), with
/// identical decisions and `remaining` at every step, exact `retry_after` (probed at its
/// inclusive boundary), and `full_after` exact.
pub(crate) fn fixed_window_differential(data: &[u8]) {
    let _ = run_fixed_window(&mut Unstructured::new(data));
}

fn run_fixed_window(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    let Ok(limiter) = FixedWindow::with_clock(quota, NoClock) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let start = window_start(u, &shape)?;
    let mut d = WindowDiff {
        trace: Trace::new(
            "fixed_window_differential",
            "FixedWindow",
            "FixedWindowModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: FixedWindowModel::new(quota),
        shape,
        readings: Readings::Anywhere,
        now: start,
        last_denied: None,
    };
    window_ops(u, &mut d, false)
}

// ---------------------------------------------------------------------------------------
// sliding_log_differential
// ---------------------------------------------------------------------------------------

/// The largest count the sliding-log run uses: the model scans its whole log per decision.
const SLIDING_LOG_MAX_COUNT: u32 = 64;

/// [`SlidingLog`] against [`SlidingLogModel`]: a quota of at most
/// [`SLIDING_LOG_MAX_COUNT`] per arbitrary period, an explicit `now` starting anywhere,
/// then up to [`MAX_OPS`] operations at any time in any order (a reading behind the newest
/// entry is recorded at it, on both sides), with identical decisions and `remaining`,
/// exact `retry_after` (probed at its inclusive boundary) and `full_after` exact.
pub(crate) fn sliding_log_differential(data: &[u8]) {
    let _ = run_sliding_log(&mut Unstructured::new(data));
}

fn run_sliding_log(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let Ok(quota) = bounded_quota(u, SLIDING_LOG_MAX_COUNT)? else {
        return Ok(());
    };
    let Ok(limiter) = SlidingLog::with_clock(quota, NoClock) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let start = window_start(u, &shape)?;
    let mut d = WindowDiff {
        trace: Trace::new(
            "sliding_log_differential",
            "SlidingLog",
            "SlidingLogModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: SlidingLogModel::new(quota),
        shape,
        readings: Readings::Anywhere,
        now: start,
        last_denied: None,
    };
    window_ops(u, &mut d, false)
}

// ---------------------------------------------------------------------------------------
// sliding_window_differential
// ---------------------------------------------------------------------------------------

/// [`SlidingWindow`] against [`SlidingWindowModel`] (the formula on exact counts).
///
/// - Phase 1: `SlidingWindow::with_batch(q, _, 0)`, which is documented to be exactly the
///   formula: identical decisions and `remaining`, exact `retry_after` and `full_after`,
///   with every reading inside the window [`SlidingReadings`] derives from the
///   documentation (down to the stale tolerance behind the stored window, in any order).
/// - Phase 2 (after an "end phase" operation): a fresh limiter with an arbitrary batch
///   `1..=16` (leases on per-CPU shards) and monotone time from phase 1's `now` (long jumps
///   included). It must never over-admit: every admission is fed to a fresh model, which
///   must admit it too (the formula on the true counts), and no snapshot may promise more
///   than that model allows.
pub(crate) fn sliding_window_differential(data: &[u8]) {
    let _ = run_sliding_window(&mut Unstructured::new(data));
}

fn run_sliding_window(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let Ok(quota) = bounded_quota(u, MAX_SLIDING_WINDOW_COUNT)? else {
        return Ok(());
    };
    let Ok(limiter) = SlidingWindow::with_batch(quota, NoClock, 0) else {
        return Ok(());
    };
    let shape = Shape::window(&quota);
    let readings = Readings::Sliding(SlidingReadings::new(&quota));
    let start = readings.allowed(window_start(u, &shape)?);
    let mut d = WindowDiff {
        trace: Trace::new(
            "sliding_window_differential",
            "SlidingWindow (batch 0)",
            "SlidingWindowModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: SlidingWindowModel::new(quota),
        shape,
        readings,
        now: start,
        last_denied: None,
    };
    d.trace.readings = Some(readings);
    window_ops(u, &mut d, true)?;

    // Phase 2: leases, monotone time, never more than the formula on the true counts.
    let batch = u.int_in_range(1..=16)?;
    let Ok(leased) = SlidingWindow::with_batch(quota, NoClock, batch) else {
        return Ok(());
    };
    let mut truth = SlidingWindowModel::new(quota);
    let mut t = d.trace;
    t.phase = 2;
    t.name = format!("SlidingWindow (batch {batch}, {} shards)", leased.shards());
    t.model = "SlidingWindowModel fed the admitted requests";
    let mut now = d.now;
    t.record(TimedOp::SetTime(now), now, TimedOutcome::Time);
    let count = quota.count();
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        match u.int_in_range(0u8..=4)? {
            0 => {
                let by = window_delta(u, &shape)?;
                now = now.saturating_add(by);
                t.record(TimedOp::Advance(by), now, TimedOutcome::Time);
            }
            1 => {
                now = window_time(u, now, (now, u64::MAX), &shape)?;
                t.record(TimedOp::SetTime(now), now, TimedOutcome::Time);
            }
            2 | 3 => {
                let n = arbitrary_n(u, count)?;
                let op = TimedOp::Acquire(n);
                let got = leased.try_acquire_n_at(n, now);
                t.record(op, now, TimedOutcome::Decision(got));
                match got {
                    Ok(()) if n == 0 => {}
                    Ok(()) => {
                        let truth_says = truth.acquire(n, now);
                        if truth_says.is_err() {
                            t.fail(
                                "over-admission",
                                op,
                                now,
                                &format!(
                                    "  admitted n = {n}, but the formula on the true counts \
                                     gives {truth_says:?}"
                                ),
                            );
                        }
                    }
                    Err(e) if valid_denial(e, n, count) => {}
                    Err(e) => t.fail(
                        "denial",
                        op,
                        now,
                        &format!("  n = {n} (count {count}) denied with {e:?}"),
                    ),
                }
            }
            _ => {
                let got = leased.snapshot_at(now);
                let op = TimedOp::SnapshotAt(now);
                t.record(op, now, TimedOutcome::Snapshot(got));
                let most = truth.left(now, count);
                if got.remaining > most {
                    t.fail(
                        "snapshot promises more than the formula on the true counts",
                        op,
                        now,
                        &format!("  {got:?}, but the formula admits {most}"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// A denial a window limiter of capacity `count` may give a request for `n`:
/// `ExceedsCapacity` exactly above the capacity, otherwise a wait of at least 1 ns.
fn valid_denial(e: Denied, n: u32, count: u32) -> bool {
    match e {
        Denied::ExceedsCapacity { capacity } => n > count && capacity == count,
        Denied::RateLimited { retry_after } => (1..=count).contains(&n) && !retry_after.is_zero(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// leaky_bucket_differential
// ---------------------------------------------------------------------------------------

/// [`LeakyBucket`] against [`LeakyBucketModel`] (the queue of reserved slots): a quota from
/// arbitrary `(count, period, burst)` (skipped if refused), an explicit `now` starting
/// anywhere (near `u64::MAX` included), then up to [`MAX_OPS`] operations at any time in
/// any order: `try_acquire_n_at` against the model's `acquire`, `reserve_n_at(n, now,
/// max_wait)` against its `reserve` (same delay, same denial, `start = now + delay`),
/// every finite `retry_after` exact at its inclusive boundary (for both, on copies of the
/// model), and snapshots that mean what they say in the queue reading: `full_after` is
/// when the queue drains, `remaining` how many more slots fit its capacity now.
pub(crate) fn leaky_bucket_differential(data: &[u8]) {
    let _ = run_leaky_bucket(&mut Unstructured::new(data));
}

struct PacerDiff<'a> {
    trace: Trace,
    limiter: &'a LeakyBucket<NoClock>,
    model: LeakyBucketModel,
    now: u64,
    interval: u64,
    burst: u32,
    /// The last denial with a finite wait: `(n, max_wait, retry_after in ns)`
    /// (`max_wait = None` for `try_acquire`).
    last_denied: Option<(u32, Option<Duration>, u64)>,
}

impl PacerDiff<'_> {
    fn move_to(&mut self, op: TimedOp, to: u64) {
        self.now = to;
        self.trace.record(op, to, TimedOutcome::Time);
    }

    fn acquire(&mut self, op: TimedOp, n: u32) {
        let now = self.now;
        let got = self.limiter.try_acquire_n_at(n, now);
        let want = self.model.acquire(n, now);
        if got != want {
            self.trace.fail(
                "try_acquire decision",
                op,
                now,
                &format!("  LeakyBucket: {got:?}\n  LeakyBucketModel::acquire: {want:?}"),
            );
        }
        self.trace.record(op, now, TimedOutcome::Decision(got));
        if let Err(denied) = got {
            self.check_retry_after(op, n, None, now, denied);
            // Denied now: the queue drains exactly `retry_after` from now, which the
            // limiter's own snapshot must say too.
            if let Denied::RateLimited { retry_after } = denied {
                let s = self.limiter.snapshot_at(now);
                if retry_after != Duration::MAX && s.full_after != retry_after {
                    self.trace.fail(
                        "snapshot disagrees with try_acquire's retry_after",
                        op,
                        now,
                        &format!("  denied {denied:?}, but snapshot_at(now) = {s:?}"),
                    );
                }
            }
        }
    }

    fn reserve(&mut self, op: TimedOp, n: u32, max_wait: Duration) {
        let now = self.now;
        let got = self.limiter.reserve_n_at(n, now, max_wait);
        let delay = got.map(|r| r.delay());
        let want = self
            .model
            .reserve(n, now, saturating_nanos(max_wait))
            .map(Duration::from_nanos);
        if delay != want {
            self.trace.fail(
                "reservation",
                op,
                now,
                &format!("  LeakyBucket: {got:?}\n  LeakyBucketModel::reserve: {want:?} (delay)"),
            );
        }
        self.trace.record(op, now, TimedOutcome::Reserved(delay));
        match got {
            Ok(r) => {
                let d = saturating_nanos(r.delay());
                if now.checked_add(d) != Some(r.start()) || r.delay() > max_wait {
                    self.trace.fail(
                        "reservation",
                        op,
                        now,
                        &format!("  {r:?}: start is not now + delay, or delay > max_wait"),
                    );
                }
            }
            Err(denied) => self.check_retry_after(op, n, Some(max_wait), now, denied),
        }
    }

    /// On copies of the model (which the limiter has just been shown to equal): asking
    /// again exactly `retry_after` later succeeds, 1 ns earlier is refused by 1 ns;
    /// `Duration::MAX` is still refused at the end of the clock.
    fn check_retry_after(
        &mut self,
        op: TimedOp,
        n: u32,
        max_wait: Option<Duration>,
        now: u64,
        denied: Denied,
    ) {
        let mw = max_wait.map_or(0, saturating_nanos);
        match probe_retry_after(denied, now, |t| self.model.clone().reserve(n, t, mw)) {
            Ok(Some(then)) => self.last_denied = Some((n, max_wait, then - now)),
            Ok(None) => {}
            Err((what, detail)) => self.trace.fail(what, op, now, &detail),
        }
    }

    /// The snapshot in the queue reading, on copies of the model: the queue has drained
    /// exactly `full_after` from `at`; `remaining` more slots fit the capacity now, one more
    /// does not (a reservation refused only by the end of the clock counts as fitting).
    fn snapshot(&mut self, op: TimedOp, at: u64) {
        let got = self.limiter.snapshot_at(at);
        let t = &self.trace;
        let never = Denied::RateLimited {
            retry_after: Duration::MAX,
        };
        if got.remaining > self.burst {
            t.fail(
                "snapshot.remaining above the capacity",
                op,
                at,
                &format!("  {got:?}"),
            );
        }
        let take = self.model.clone().reserve(got.remaining, at, u64::MAX);
        if take.is_err() && take != Err(never) {
            t.fail(
                "snapshot.remaining too high",
                op,
                at,
                &format!("  {got:?}, but reserving {} gives {take:?}", got.remaining),
            );
        }
        if got.remaining < self.burst {
            let more = self.model.clone().reserve(got.remaining + 1, at, u64::MAX);
            if more.is_ok() {
                t.fail(
                    "snapshot.remaining too low",
                    op,
                    at,
                    &format!("  {got:?}, but reserving {} fits", got.remaining + 1),
                );
            }
        }
        let full_after = saturating_nanos(got.full_after);
        let Some(drained) = at.checked_add(full_after) else {
            t.fail(
                "snapshot.full_after",
                op,
                at,
                &format!("  {got:?} drains after the end of the clock"),
            );
        };
        // One slot that must start at once: admitted at the drain time, refused by exactly
        // 1 ns just before it (either refused for ever if its slot would end past the clock).
        let end_of_clock = drained.checked_add(self.interval).is_none();
        let then = self.model.clone().acquire(1, drained);
        if then.is_err() && !(end_of_clock && then == Err(never)) {
            t.fail(
                "snapshot.full_after too short",
                op,
                at,
                &format!("  {got:?}, but acquiring 1 at at + full_after gives {then:?}"),
            );
        }
        if full_after > 0 {
            let before = self.model.clone().acquire(1, drained - 1);
            let by_one = Err(Denied::RateLimited {
                retry_after: Duration::from_nanos(1),
            });
            if before != by_one && !(end_of_clock && before == Err(never)) {
                t.fail(
                    "snapshot.full_after too long",
                    op,
                    at,
                    &format!(
                        "  {got:?}, but acquiring 1 at 1 ns before at + full_after gives {before:?}"
                    ),
                );
            }
        }
        self.trace.record(op, at, TimedOutcome::Snapshot(got));
    }
}

/// A `max_wait`: none, tiny, a number of slots (± 1), any [`biased_u64`] ns, more than
/// `u64::MAX` ns, or `Duration::MAX`.
fn arbitrary_max_wait(u: &mut Unstructured<'_>, interval: u64, burst: u32) -> ArbResult<Duration> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => Duration::ZERO,
        1 | 2 => Duration::from_nanos(arbitrary_delta(u, interval, burst)?),
        3 => Duration::new(
            u64::MAX / 1_000_000_000 + u.int_in_range(0..=1)?,
            999_999_999,
        ),
        _ => Duration::MAX,
    })
}

fn run_leaky_bucket(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    let limiter = LeakyBucket::with_clock(quota, NoClock);
    let start = arbitrary_start(u, &quota)?;
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let mut d = PacerDiff {
        trace: Trace::new(
            "leaky_bucket_differential",
            "LeakyBucket",
            "LeakyBucketModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: LeakyBucketModel::new(quota),
        now: start,
        interval: t,
        burst,
        last_denied: None,
    };
    let all = (0, u64::MAX);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.now;
        match u.int_in_range(0u8..=7)? {
            0 => {
                let by = arbitrary_delta(u, t, burst)?;
                d.move_to(TimedOp::Advance(by), now.saturating_add(by));
            }
            1 => {
                let to = arbitrary_time(u, now, all, t, burst)?;
                d.move_to(TimedOp::SetTime(to), to);
            }
            2 => {
                let n = arbitrary_n(u, burst)?;
                d.acquire(TimedOp::Acquire(n), n);
            }
            3 | 4 => {
                let n = arbitrary_n(u, burst)?;
                let max_wait = arbitrary_max_wait(u, t, burst)?;
                d.reserve(TimedOp::Reserve(n, max_wait), n, max_wait);
            }
            5 => {
                let Some((n, max_wait, wait)) = d.last_denied else {
                    continue;
                };
                let by = wait - u64::from(u.arbitrary::<bool>()?);
                d.move_to(TimedOp::WaitRetry(by), now.saturating_add(by));
                match max_wait {
                    None => d.acquire(TimedOp::Acquire(n), n),
                    Some(mw) => d.reserve(TimedOp::Reserve(n, mw), n, mw),
                }
            }
            6 => {
                let at = arbitrary_time(u, now, all, t, burst)?;
                d.snapshot(TimedOp::SnapshotAt(at), at);
            }
            _ => d.snapshot(TimedOp::SnapshotAt(now), now),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// keyed_differential
// ---------------------------------------------------------------------------------------

/// The algorithms [`Keyed`] runs per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyedAlgorithm {
    Gcra,
    TokenBucket,
    FixedWindow,
    SlidingWindow,
    LeakyBucket,
}

impl KeyedAlgorithm {
    const ALL: [KeyedAlgorithm; 5] = [
        KeyedAlgorithm::Gcra,
        KeyedAlgorithm::TokenBucket,
        KeyedAlgorithm::FixedWindow,
        KeyedAlgorithm::SlidingWindow,
        KeyedAlgorithm::LeakyBucket,
    ];

    /// A quota, decoded as this algorithm's own target decodes one.
    fn arbitrary_quota(self, u: &mut Unstructured<'_>) -> ArbResult<Result<Quota, QuotaError>> {
        match self {
            KeyedAlgorithm::SlidingWindow => bounded_quota(u, MAX_SLIDING_WINDOW_COUNT),
            _ => Ok(arbitrary_quota(u)?.3),
        }
    }

    /// The single limiter one key must behave exactly like (its "twin": a
    /// [`SlidingWindow`] with batch 0, which is the formula on exact counts), or the error
    /// `Keyed` must give for this quota.
    fn twin(self, quota: Quota) -> Result<Box<dyn RateLimiter>, QuotaError> {
        Ok(match self {
            KeyedAlgorithm::Gcra => Box::new(Gcra::with_clock(quota, NoClock)),
            KeyedAlgorithm::TokenBucket => Box::new(TokenBucket::with_clock(quota, NoClock)?),
            KeyedAlgorithm::FixedWindow => Box::new(FixedWindow::with_clock(quota, NoClock)?),
            KeyedAlgorithm::SlidingWindow => {
                Box::new(SlidingWindow::with_batch(quota, NoClock, 0)?)
            }
            KeyedAlgorithm::LeakyBucket => Box::new(LeakyBucket::with_clock(quota, NoClock)),
        })
    }

    /// The most permits one request may ask for.
    fn capacity(self, quota: &Quota) -> u32 {
        match self {
            KeyedAlgorithm::FixedWindow | KeyedAlgorithm::SlidingWindow => quota.count(),
            _ => quota.burst(),
        }
    }
}

/// The reference model of one key's state.
#[derive(Debug, Clone)]
enum KeyModel {
    Gcra(GcraModel),
    Bucket(TokenBucketModel),
    Fixed(FixedWindowModel),
    Sliding(SlidingWindowModel),
    /// Per key, the pacer's `try_acquire` (a request must start now).
    Leaky(LeakyBucketModel),
}

impl KeyModel {
    fn new(alg: KeyedAlgorithm, quota: Quota) -> KeyModel {
        match alg {
            KeyedAlgorithm::Gcra => KeyModel::Gcra(GcraModel::new(quota)),
            KeyedAlgorithm::TokenBucket => KeyModel::Bucket(TokenBucketModel::new(quota)),
            KeyedAlgorithm::FixedWindow => KeyModel::Fixed(FixedWindowModel::new(quota)),
            KeyedAlgorithm::SlidingWindow => KeyModel::Sliding(SlidingWindowModel::new(quota)),
            KeyedAlgorithm::LeakyBucket => KeyModel::Leaky(LeakyBucketModel::new(quota)),
        }
    }

    fn acquire(&mut self, n: u32, now: u64) -> Result<(), Denied> {
        match self {
            KeyModel::Gcra(m) => m.acquire(n, now),
            KeyModel::Bucket(m) => m.acquire(n, now),
            KeyModel::Fixed(m) => m.acquire(n, now),
            KeyModel::Sliding(m) => m.acquire(n, now),
            KeyModel::Leaky(m) => m.acquire(n, now),
        }
    }
}

/// One state of the shadow map (a key's, or the shared overflow state): its quota, its
/// model, its twin (the single limiter fed the same requests), and what the harness needs
/// to know about its word.
struct KeyState {
    quota: Quota,
    model: KeyModel,
    twin: Box<dyn RateLimiter>,
    /// After the first admission: the token bucket's lower bound of the stored refill time
    /// (see [`stored_time_lower_bound`]), the latest window admitted in (the windows), the
    /// end of the pacer's queue; `None` before (and always for GCRA).
    mark: Option<u64>,
}

impl KeyState {
    fn new(alg: KeyedAlgorithm, quota: Quota) -> KeyState {
        KeyState {
            quota,
            model: KeyModel::new(alg, quota),
            twin: alg
                .twin(quota)
                .expect("harness bug: a state for a quota the algorithm refuses"),
            mark: None,
        }
    }

    /// `n` permits at `now` on the model and on the twin: `(model, twin, retired)`, with
    /// `retired` true if the admission leaves the word `u64::MAX` (see [`KeyState::retired`]).
    fn decide(&mut self, n: u32, now: u64) -> (Result<(), Denied>, Result<(), Denied>, bool) {
        let want = self.model.acquire(n, now);
        let twin = self.twin.try_acquire_n_at(n, now);
        if want.is_ok() && n >= 1 {
            let (t, p) = (self.quota.emission_interval_ns(), self.quota.period_ns());
            let mark = match &self.model {
                KeyModel::Gcra(_) => return (want, twin, self.retired(now)),
                KeyModel::Bucket(m) => stored_time_lower_bound(now, m.snapshot(now).full_after, t),
                KeyModel::Fixed(_) | KeyModel::Sliding(_) => now / p,
                // `try_acquire` admits only into a drained queue: the slots start now, and
                // the model refused an end past `u64::MAX`.
                KeyModel::Leaky(_) => now + u64::from(n) * t,
            };
            self.mark = Some(self.mark.map_or(mark, |old| old.max(mark)));
            return (want, twin, self.retired(now));
        }
        (want, twin, false)
    }

    /// After an admission at `now`: is the new word `u64::MAX`, the word `Keyed`
    /// reserves for a state retired by eviction? `Keyed` refuses such a transition with
    /// `retry_after = Duration::MAX` (see `RETIRED` in `src/keyed.rs`), where the single limiter admits.
    /// It happens only in the last nanoseconds of the clock: a GCRA TAT or the end of the
    /// pacer's queue at `u64::MAX`, or a full fixed window numbered `u64::MAX >> b` with
    /// `count = 2^b − 1` (a token bucket's word never has all its token bits set after a
    /// take; a sliding window's never has both counts at `count`).
    fn retired(&self, now: u64) -> bool {
        match (&self.model, self.mark) {
            (KeyModel::Gcra(m), _) => {
                now.checked_add(saturating_nanos(m.snapshot(now).full_after)) == Some(u64::MAX)
            }
            (KeyModel::Leaky(_), Some(end)) => end == u64::MAX,
            (KeyModel::Fixed(m), Some(k)) => {
                let count = self.quota.count();
                let bits = u32::BITS - count.leading_zeros();
                let used = count - m.remaining(now);
                k == u64::MAX >> bits && u64::from(used) == (1u64 << bits) - 1
            }
            _ => false,
        }
    }

    /// Is the state indistinguishable from a fresh one for every reading at or after `at`
    /// (what `Keyed` may evict, one grace later)? From the model, not from the word.
    fn idle(&self, at: u64) -> bool {
        let p = self.quota.period_ns();
        match (&self.model, self.mark) {
            (KeyModel::Gcra(m), _) => m.snapshot(at).full_after.is_zero(),
            (KeyModel::Bucket(m), _) => m.snapshot(at).full_after.is_zero(),
            (_, None) => true,
            (KeyModel::Fixed(_), Some(k)) => at / p > k,
            // Window k's counts weigh on the formula until the end of window k + 1.
            (KeyModel::Sliding(_), Some(k)) => at / p >= k.saturating_add(2),
            (KeyModel::Leaky(_), Some(end)) => end <= at,
        }
    }

    /// The earliest time at or after `now` from which [`KeyState::idle`] holds (saturated
    /// at `u64::MAX`).
    fn idle_from(&self, now: u64) -> u64 {
        let p = self.quota.period_ns();
        let at = match (&self.model, self.mark) {
            (KeyModel::Gcra(m), _) => {
                now.saturating_add(saturating_nanos(m.snapshot(now).full_after))
            }
            (KeyModel::Bucket(m), _) => {
                now.saturating_add(saturating_nanos(m.snapshot(now).full_after))
            }
            (_, None) => now,
            (KeyModel::Fixed(_), Some(k)) => k.saturating_add(1).saturating_mul(p),
            (KeyModel::Sliding(_), Some(k)) => k.saturating_add(2).saturating_mul(p),
            (KeyModel::Leaky(_), Some(end)) => end,
        };
        at.max(now)
    }

    /// The latest reading at which this state's word is still read exactly, as the
    /// algorithm's documentation gives it: for the token bucket, less than `2^W − R` ns
    /// after the stored refill time (see [`token_bucket_differential`]); for the sliding
    /// window, a window less than `2^F − tolerance` after the stored one (see
    /// [`SlidingReadings`]); no limit for the others, or before the first admission (a
    /// fresh word is fresh at any time).
    fn latest_reading(&self) -> u64 {
        match (&self.model, self.mark) {
            (KeyModel::Bucket(_), Some(lb)) => {
                let (w, r) = token_bucket_window(self.quota.burst());
                lb.saturating_add((1u64 << w) - r - 1)
            }
            (KeyModel::Sliding(_), Some(k)) => {
                let mut r = SlidingReadings::new(&self.quota);
                r.stored = Some(k);
                Readings::Sliding(r).bounds().1
            }
            _ => u64::MAX,
        }
    }

    /// The twin's snapshot at `at`, checked against the model first (`Err`: they differ).
    fn snapshot(&self, at: u64) -> Result<Snapshot, String> {
        let got = self.twin.snapshot_at(at);
        let (remaining, full_after) = match &self.model {
            KeyModel::Gcra(m) => {
                let s = m.snapshot(at);
                (s.remaining, Some(s.full_after))
            }
            KeyModel::Bucket(m) => {
                let s = m.snapshot(at);
                (s.remaining, Some(s.full_after))
            }
            KeyModel::Fixed(m) => (m.remaining(at), None),
            KeyModel::Sliding(m) => (WindowModel::left(m, at, self.quota.count()), None),
            KeyModel::Leaky(_) => {
                // The queue drains at its end; `remaining` slots fit in what is left.
                let backlog = self.mark.map_or(0, |end| end.saturating_sub(at));
                let free = self.quota.burst_span_ns().saturating_sub(backlog);
                (
                    (free / self.quota.emission_interval_ns()) as u32,
                    Some(Duration::from_nanos(backlog)),
                )
            }
        };
        if got.remaining != remaining || full_after.is_some_and(|f| f != got.full_after) {
            return Err(format!(
                "  the single limiter: {got:?}\n  its model: remaining {remaining}, full_after \
                 {full_after:?}"
            ));
        }
        Ok(got)
    }
}

/// One operation of a keyed run, at the run's `now` unless it says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyedOp {
    /// Move `now` forward by this many ns (clamped to the readings the run allows).
    Advance(u64),
    /// Move `now` back by this many ns (at most [`EVICTION_GRACE_NS`] behind the latest
    /// reading).
    Back(u64),
    /// Set `now` (inside the readings the run allows).
    SetTime(u64),
    /// Move `now` forward by the last finite `retry_after` (or 1 ns less), then ask again.
    WaitRetry(u64),
    /// Move `now` to where the key becomes evictable (idle for the grace), minus this many
    /// ns.
    ToEvictable(u8, u64),
    /// `try_acquire_n_at(key, n, now)`.
    Acquire(u8, u32),
    /// `evict_idle_at(now)`.
    EvictIdle,
    /// `set_quota_at(key, quota, now)`.
    SetQuota(u8, Quota),
    /// `snapshot_at(key, t)`.
    SnapshotAt(u8, u64),
}

/// Which state the shadow decided a request on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// By size alone (`n == 0`, or above the capacity of a key without a state).
    Size,
    /// The key's own state.
    Own,
    /// A state created for this request.
    New,
    /// The shared overflow state (no room for the key).
    Overflow,
}

/// What the shadow says a request must give.
struct Expected {
    /// The model's decision.
    want: Result<(), Denied>,
    /// The single limiter's (none for a decision by size alone).
    twin: Option<Result<(), Denied>>,
    place: Place,
    /// The admission leaves the word `u64::MAX` (see [`KeyState::retired`]).
    retired: bool,
}

/// What a step gave (`Keyed`'s answer; the shadow agreed or the run failed).
#[derive(Debug, Clone)]
enum KeyedOutcome {
    Time,
    Decision(Result<(), Denied>, Place),
    Evicted(usize),
    SetQuota(Result<(), QuotaError>),
    Snapshot(Snapshot),
}

/// A [`Keyed`] and its shadow: a map of [`KeyState`]s that mirrors `Keyed`'s map (which
/// keys have a state of their own, created and evicted exactly when `Keyed` must), the
/// overrides, the overflow state and the sweep schedule.
struct KeyedDiff<'a, L: Algorithm, S: Store<u8>> {
    keyed: &'a Keyed<u8, L, NoClock, S>,
    alg: KeyedAlgorithm,
    default: Quota,
    setup: String,
    max_keys: usize,
    /// The automatic sweep interval, ns (0: off).
    sweep_every: u64,
    /// The time from which the next automatic sweep may run.
    next_sweep: u64,
    slots: BTreeMap<u8, KeyState>,
    overrides: BTreeMap<u8, Quota>,
    overflow: KeyState,
    /// Each key's model over its whole life, never evicted: every decision on the key's
    /// own state must equal it (eviction changes no decision). Restarted when the key gets
    /// a state under another quota; dropped when the key is decided on the overflow state.
    forever: BTreeMap<u8, (Quota, KeyModel)>,
    now: u64,
    /// The latest reading so far: no reading may be more than the grace behind it.
    latest: u64,
    start: u64,
    /// The last denial with a finite wait: `(key, n, retry_after in ns)`.
    last_denied: Option<(u8, u32, u64)>,
    history: Vec<(KeyedOp, u64, KeyedOutcome)>,
    /// The run cannot go on (see [`KeyState::retired`]).
    stopped: bool,
}

impl<L: Algorithm, S: Store<u8>> KeyedDiff<'_, L, S> {
    /// Panic with everything needed to reproduce and understand a disagreement.
    #[cold]
    #[inline(never)]
    fn fail(&self, what: &str, op: KeyedOp, detail: &str) -> ! {
        let mut msg = String::new();
        let q = &self.default;
        let _ = writeln!(
            msg,
            "[keyed_differential] Keyed<u8, {:?}> on {}: {what}",
            self.alg,
            core::any::type_name::<S>()
        );
        let _ = writeln!(
            msg,
            "  default quota: {q} = {q:?} (count {}, period {} ns, interval {} ns, burst {})",
            q.count(),
            q.period_ns(),
            q.emission_interval_ns(),
            q.burst()
        );
        let _ = writeln!(msg, "  setup: {}", self.setup);
        let _ = writeln!(
            msg,
            "  at step {}: {op:?} with now = {} (latest reading {}, u64::MAX - now = {}); the \
             run started at {}",
            self.history.len(),
            self.now,
            self.latest,
            u64::MAX - self.now,
            self.start
        );
        let _ = writeln!(msg, "{detail}");
        let _ = writeln!(
            msg,
            "  shadow map ({} keys): {:?}; overrides: {:?}; next sweep at {}",
            self.slots.len(),
            self.slots.keys().collect::<Vec<_>>(),
            self.overrides,
            self.next_sweep
        );
        fail_with_history(msg, &self.history, |(op, now, outcome)| {
            format!("{op:?} now={now} -> {outcome:?}")
        })
    }

    fn record(&mut self, op: KeyedOp, outcome: KeyedOutcome) {
        self.history.push((op, self.now, outcome));
    }

    /// The readings the run may use now: at most the grace behind the latest one (within
    /// it a stale reading is plausible, and eviction must not show), and no later than any
    /// state's
    /// [`KeyState::latest_reading`].
    fn bounds(&self) -> (u64, u64) {
        let lo = self.latest.saturating_sub(EVICTION_GRACE_NS);
        let hi = self
            .slots
            .values()
            .chain([&self.overflow])
            .map(KeyState::latest_reading)
            .min()
            .unwrap_or(u64::MAX);
        assert!(
            self.latest <= hi,
            "harness bug: the latest reading {} is past a state's limit {hi}",
            self.latest
        );
        (lo, hi)
    }

    fn move_to(&mut self, op: KeyedOp, to: u64) {
        let (lo, hi) = self.bounds();
        self.now = to.clamp(lo, hi);
        self.latest = self.latest.max(self.now);
        self.record(op, KeyedOutcome::Time);
    }

    /// The quota a new state for `key` gets.
    fn quota_for_new(&self, key: u8) -> Quota {
        self.overrides.get(&key).copied().unwrap_or(self.default)
    }

    /// Remove the states idle at `now − grace`, as `Keyed::evict_idle_at(now)` must.
    fn shadow_evict(&mut self, now: u64) -> Vec<u8> {
        let Some(at) = now.checked_sub(EVICTION_GRACE_NS) else {
            return Vec::new();
        };
        let idle: Vec<u8> = self
            .slots
            .iter()
            .filter(|(_, s)| s.idle(at))
            .map(|(&k, _)| k)
            .collect();
        for k in &idle {
            self.slots.remove(k);
        }
        idle
    }

    /// `Keyed::room_for_new_key`, on the shadow: sweep first if one is due, then is there
    /// room for one more key?
    fn shadow_room(&mut self, now: u64) -> bool {
        let full = self.slots.len() >= self.max_keys;
        if (self.sweep_every > 0 || full) && now >= self.next_sweep {
            self.next_sweep = now.saturating_add(self.sweep_every.max(1_000_000));
            self.shadow_evict(now);
        }
        self.slots.len() < self.max_keys
    }

    /// What `try_acquire_n_at(key, n, now)` must give.
    fn shadow_acquire(&mut self, key: u8, n: u32, now: u64) -> Expected {
        let by_size = |want| Expected {
            want,
            twin: None,
            place: Place::Size,
            retired: false,
        };
        let on = |s: &mut KeyState, place| {
            let (want, twin, retired) = s.decide(n, now);
            Expected {
                want,
                twin: Some(twin),
                place,
                retired,
            }
        };
        if n == 0 {
            return by_size(Ok(()));
        }
        if let Some(s) = self.slots.get_mut(&key) {
            return on(s, Place::Own);
        }
        let quota = self.quota_for_new(key);
        let capacity = self.alg.capacity(&quota);
        if n > capacity {
            return by_size(Err(Denied::ExceedsCapacity { capacity }));
        }
        if !self.shadow_room(now) {
            return on(&mut self.overflow, Place::Overflow);
        }
        let mut s = KeyState::new(self.alg, quota);
        let expected = on(&mut s, Place::New);
        self.slots.insert(key, s);
        expected
    }

    fn check_len(&self, op: KeyedOp) {
        let len = self.keyed.len();
        if len != self.slots.len() || len > self.max_keys || self.keyed.is_empty() != (len == 0) {
            self.fail(
                "len",
                op,
                &format!(
                    "  Keyed::len() = {len} (is_empty {}), but the shadow map holds {} keys \
                     (max_keys {})",
                    self.keyed.is_empty(),
                    self.slots.len(),
                    self.max_keys
                ),
            );
        }
    }

    fn acquire(&mut self, op: KeyedOp, key: u8, n: u32) {
        let now = self.now;
        let got = self.keyed.try_acquire_n_at(&key, n, now);
        let Expected {
            want,
            twin,
            place,
            retired,
        } = self.shadow_acquire(key, n, now);
        if retired {
            // Refused where the model and the single limiter admit: the states part here, so
            // the run ends (after checking that the refusal is the documented one).
            if got
                != Err(Denied::RateLimited {
                    retry_after: Duration::MAX,
                })
                || twin != Some(want)
            {
                self.fail(
                    "a transition to the word u64::MAX",
                    op,
                    &format!(
                        "  Keyed: {got:?} (expected never: retry_after = Duration::MAX)\n  model ({place:?}): \
                         {want:?}\n  the single limiter: {twin:?}"
                    ),
                );
            }
            self.record(op, KeyedOutcome::Decision(got, place));
            self.stopped = true;
            return;
        }
        if got != want || twin.is_some_and(|t| t != want) {
            self.fail(
                "decision",
                op,
                &format!(
                    "  Keyed: {got:?}\n  model ({place:?}): {want:?}\n  the single limiter: \
                     {twin:?}"
                ),
            );
        }
        match place {
            Place::Own | Place::New => {
                let quota = self.slots[&key].quota;
                let alg = self.alg;
                let ever = self
                    .forever
                    .entry(key)
                    .or_insert_with(|| (quota, KeyModel::new(alg, quota)));
                if ever.0 != quota {
                    *ever = (quota, KeyModel::new(alg, quota));
                }
                let ever = ever.1.acquire(n, now);
                if ever != want {
                    self.fail(
                        "eviction changed a decision",
                        op,
                        &format!(
                            "  Keyed and the key's current model: {want:?} ({place:?})\n  the \
                             key's model over its whole life (never evicted): {ever:?}"
                        ),
                    );
                }
            }
            Place::Overflow => {
                self.forever.remove(&key);
            }
            Place::Size => {}
        }
        self.record(op, KeyedOutcome::Decision(got, place));
        if let Err(Denied::RateLimited { retry_after }) = got {
            if retry_after != Duration::MAX {
                self.last_denied = Some((key, n, saturating_nanos(retry_after)));
            }
        }
        self.check_len(op);
    }

    fn evict(&mut self, op: KeyedOp) {
        let now = self.now;
        let got = self.keyed.evict_idle_at(now);
        let want = self.shadow_evict(now);
        if got != want.len() {
            self.fail(
                "evict_idle_at",
                op,
                &format!(
                    "  Keyed evicted {got} keys; the shadow evicts {} (keys {want:?})",
                    want.len()
                ),
            );
        }
        self.record(op, KeyedOutcome::Evicted(got));
        self.check_len(op);
    }

    fn set_quota(&mut self, op: KeyedOp, key: u8, quota: Quota) {
        let now = self.now;
        let got = self.keyed.set_quota_at(key, quota, now);
        let want = self.alg.twin(quota).map(|_| ());
        if got != want {
            self.fail(
                "set_quota_at",
                op,
                &format!("  Keyed: {got:?}\n  the single limiter's constructor: {want:?}"),
            );
        }
        if want.is_ok() {
            self.overrides.insert(key, quota);
            // An idle state is evicted at once, so the quota applies to the next request.
            if let Some(at) = now.checked_sub(EVICTION_GRACE_NS) {
                if self.slots.get(&key).is_some_and(|s| s.idle(at)) {
                    self.slots.remove(&key);
                }
            }
        }
        self.record(op, KeyedOutcome::SetQuota(got));
        self.check_len(op);
    }

    fn snapshot(&mut self, op: KeyedOp, key: u8, at: u64) {
        let got = self.keyed.snapshot_at(&key, at);
        let fresh;
        let state = match self.slots.get(&key) {
            Some(s) => s,
            None => {
                // A fresh state under the quota the key's next state would get.
                fresh = KeyState::new(self.alg, self.quota_for_new(key));
                &fresh
            }
        };
        let want = match state.snapshot(at) {
            Ok(s) => s,
            Err(detail) => self.fail("the single limiter against its model", op, &detail),
        };
        if got != want {
            self.fail(
                "snapshot",
                op,
                &format!(
                    "  Keyed: {got:?}\n  the single limiter ({}): {want:?}",
                    if self.slots.contains_key(&key) {
                        "the key's state"
                    } else {
                        "fresh"
                    }
                ),
            );
        }
        self.latest = self.latest.max(at);
        self.record(op, KeyedOutcome::Snapshot(got));
    }
}

/// A distance for a keyed run: one of [`arbitrary_delta`]'s, a number of periods (± 1), or
/// about the eviction grace (± a little, plus one of [`arbitrary_delta`]'s).
fn keyed_delta(u: &mut Unstructured<'_>, quota: &Quota) -> ArbResult<u64> {
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    Ok(match u.int_in_range(0u8..=3)? {
        0 | 1 => arbitrary_delta(u, t, burst)?,
        2 => quota
            .period_ns()
            .saturating_mul(u.int_in_range(0..=3)?)
            .saturating_add(u.int_in_range(0..=2)?)
            .saturating_sub(1),
        _ => EVICTION_GRACE_NS
            .saturating_add(arbitrary_delta(u, t, burst)?)
            .saturating_sub(u.int_in_range(0..=2)?),
    })
}

/// A key: mostly one of the run's first `keys`, sometimes any.
fn keyed_key(u: &mut Unstructured<'_>, keys: u8) -> ArbResult<u8> {
    Ok(match u.int_in_range(0u8..=7)? {
        0 => u.arbitrary()?,
        _ => u.int_in_range(0..=keys - 1)?,
    })
}

/// [`Keyed`] (`u8` keys, explicit times) against a shadow of its map, for every algorithm
/// it runs: [`Gcra`], [`TokenBucket`], [`FixedWindow`], [`SlidingWindow`] and
/// [`LeakyBucket`].
///
/// The shadow holds, for each key with a state of its own, the reference model and the
/// single limiter (the "twin") of the state's quota; it creates a key's state when `Keyed`
/// must (first use, with room), evicts it when `Keyed` must (idle, by the model, for
/// [`EVICTION_GRACE_NS`]: on `evict_idle_at`, on `set_quota_at`, and in the automatic sweeps
/// it schedules exactly as `Keyed` does), and decides keys refused a state (`max_keys`
/// reached) on one shared overflow state with the default quota. A run: an algorithm, a
/// quota (decoded as that algorithm's own target does; skipped if refused, after checking
/// that `Keyed` and the single limiter refuse it alike), an optional `max_keys` (0 to 16),
/// a sweep interval (the default, off, or any), a start time (near `u64::MAX` too), and up
/// to [`MAX_OPS`] operations: moves of `now` forward and back, to the last `retry_after`,
/// to where a key becomes evictable; `try_acquire_n_at`, `evict_idle_at`, `set_quota_at`,
/// `snapshot_at`. Checked at every step:
///
/// - every decision (`Ok`, `ExceedsCapacity` with its capacity, `RateLimited` with its exact
///   `retry_after`) equals the model's and the twin's;
/// - every decision on a key's own state equals the key's model over its whole life, never
///   evicted (for as long as its quota is unchanged and it never overflowed): eviction
///   changes no decision;
/// - `evict_idle_at` evicts as many keys as the shadow, and `len()` is always the shadow's
///   count (so never above `max_keys`);
/// - `set_quota_at` accepts and refuses as the single limiter's constructor does;
/// - `snapshot_at` equals the twin's (a fresh one under the key's next quota for a key
///   without a state), and the twin's agrees with the model.
///
/// Every reading stays where the algorithms promise exactness: never more than the grace
/// behind the latest one (within it a stale reading is plausible; beyond it, eviction may
/// show), and before every live state's wrap limit ([`KeyState::latest_reading`]).
///
/// One departure from "exactly the single limiter", stepped around: a transition to
/// the word `u64::MAX` (`Keyed`'s retired marker, the last nanoseconds of the clock) is
/// refused with `retry_after = Duration::MAX` where the single limiter admits, which is
/// checked and ends the run (see [`KeyState::retired`]).
///
/// Found by this target and fixed: a sweep at a stale reading evicted a busy token bucket
/// with a burst of 2^31 or more (its 32-bit time field read `now −` grace as a wrap far
/// ahead); kept as `regressions/keyed_differential/bucket-w32-stale-sweep`.
///
/// Every input runs twice, the same operations on each store: the default `PapayaStore` and
/// (with the feature `dashmap`, on by default in this crate) `DashMapStore`.
pub(crate) fn keyed_differential(data: &[u8]) {
    let _ = run_keyed(&mut Unstructured::new(data), PapayaStore::new);
    #[cfg(feature = "dashmap")]
    let _ = run_keyed(&mut Unstructured::new(data), limitcore::DashMapStore::new);
}

fn run_keyed<S: Store<u8>>(u: &mut Unstructured<'_>, store: fn() -> S) -> ArbResult<()> {
    let alg = KeyedAlgorithm::ALL[u.choose_index(KeyedAlgorithm::ALL.len())?];
    let Ok(quota) = alg.arbitrary_quota(u)? else {
        return Ok(());
    };
    match alg {
        KeyedAlgorithm::Gcra => run_keyed_with::<Gcra<NoClock>, S>(u, alg, quota, store),
        KeyedAlgorithm::TokenBucket => {
            run_keyed_with::<TokenBucket<NoClock>, S>(u, alg, quota, store)
        }
        KeyedAlgorithm::FixedWindow => {
            run_keyed_with::<FixedWindow<NoClock>, S>(u, alg, quota, store)
        }
        KeyedAlgorithm::SlidingWindow => {
            run_keyed_with::<SlidingWindow<NoClock>, S>(u, alg, quota, store)
        }
        KeyedAlgorithm::LeakyBucket => {
            run_keyed_with::<LeakyBucket<NoClock>, S>(u, alg, quota, store)
        }
    }
}

fn run_keyed_with<L: Algorithm, S: Store<u8>>(
    u: &mut Unstructured<'_>,
    alg: KeyedAlgorithm,
    quota: Quota,
    store: fn() -> S,
) -> ArbResult<()> {
    let keyed = match (
        Keyed::<u8, L, NoClock, S>::with_store(quota, NoClock, store()),
        alg.twin(quota),
    ) {
        (Ok(keyed), Ok(_)) => keyed,
        (Err(a), Err(b)) if a == b => return Ok(()),
        (keyed, twin) => panic!(
            "[keyed_differential] Keyed<u8, {alg:?}>::with_store({quota:?}) gives {:?}, the \
             single limiter {:?}",
            keyed.map(|_| ()),
            twin.map(|_| ())
        ),
    };
    let keys = u.int_in_range(1u8..=16)?;
    let max_keys = match u.int_in_range(0u8..=2)? {
        0 => None,
        _ => Some(u.int_in_range(0usize..=16)?),
    };
    let keyed = match max_keys {
        Some(m) => keyed.with_max_keys(m),
        None => keyed,
    };
    let sweep = match u.int_in_range(0u8..=3)? {
        0 => None,
        1 => Some(0),
        2 => Some(EVICTION_GRACE_NS.saturating_sub(u.int_in_range(0..=1)?)),
        _ => Some(keyed_delta(u, &quota)?),
    };
    let keyed = match sweep {
        Some(ns) => keyed.with_sweep_interval(Duration::from_nanos(ns)),
        None => keyed,
    };
    let start = arbitrary_start(u, &quota)?;
    let mut d = KeyedDiff {
        keyed: &keyed,
        alg,
        default: quota,
        setup: format!(
            "{keys} keys (0..{keys}, and any u8 now and then), max_keys {max_keys:?}, sweep \
             interval {sweep:?} ns (None: the default)"
        ),
        max_keys: max_keys.unwrap_or(usize::MAX),
        sweep_every: sweep.unwrap_or(1_000_000_000),
        next_sweep: 0,
        slots: BTreeMap::new(),
        overrides: BTreeMap::new(),
        overflow: KeyState::new(alg, quota),
        forever: BTreeMap::new(),
        now: start,
        latest: start,
        start,
        last_denied: None,
        history: Vec::new(),
        stopped: false,
    };
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let capacity = alg.capacity(&quota);
    for _ in 0..MAX_OPS {
        if u.is_empty() || d.stopped {
            break;
        }
        // A snapshot may have moved the latest reading on: bring `now` back inside.
        let (lo, hi) = d.bounds();
        d.now = d.now.clamp(lo, hi);
        let now = d.now;
        match u.int_in_range(0u8..=11)? {
            0 => {
                let by = keyed_delta(u, &quota)?;
                d.move_to(KeyedOp::Advance(by), now.saturating_add(by));
            }
            1 => {
                let by = keyed_delta(u, &quota)?;
                d.move_to(KeyedOp::Back(by), now.saturating_sub(by));
            }
            2 => {
                let to = arbitrary_time(u, now, (lo, hi), t, burst)?;
                d.move_to(KeyedOp::SetTime(to), to);
            }
            3..=5 => {
                let key = keyed_key(u, keys)?;
                let n = arbitrary_n(u, capacity)?;
                d.acquire(KeyedOp::Acquire(key, n), key, n);
            }
            6 => {
                let Some((key, n, wait)) = d.last_denied else {
                    continue;
                };
                let by = wait.saturating_sub(u64::from(u.arbitrary::<bool>()?));
                d.move_to(KeyedOp::WaitRetry(by), now.saturating_add(by));
                d.acquire(KeyedOp::Acquire(key, n), key, n);
            }
            7 => {
                let key = keyed_key(u, keys)?;
                let less = u.int_in_range(0..=1)?;
                let Some(s) = d.slots.get(&key) else {
                    continue;
                };
                let to = s
                    .idle_from(now)
                    .saturating_add(EVICTION_GRACE_NS)
                    .saturating_sub(less);
                d.move_to(KeyedOp::ToEvictable(key, less), to);
            }
            8 => d.evict(KeyedOp::EvictIdle),
            9 => {
                let key = keyed_key(u, keys)?;
                let q = match u.int_in_range(0u8..=2)? {
                    0 => Ok(quota),
                    1 => quota.with_burst(arbitrary_n(u, burst)?),
                    _ => alg.arbitrary_quota(u)?,
                };
                let Ok(q) = q else {
                    continue;
                };
                d.set_quota(KeyedOp::SetQuota(key, q), key, q);
            }
            10 => {
                let key = keyed_key(u, keys)?;
                d.snapshot(KeyedOp::SnapshotAt(key, now), key, now);
            }
            _ => {
                let key = keyed_key(u, keys)?;
                let at = arbitrary_time(u, now, (lo, hi), t, burst)?;
                d.snapshot(KeyedOp::SnapshotAt(key, at), key, at);
            }
        }
    }
    Ok(())
}
