//! The cargo-fuzz drivers, as plain functions of `&[u8]`.
//!
//! The targets in `fuzz/fuzz_targets/` (nightly, libFuzzer) are one-line calls of these
//! functions, and this crate's `tests/fuzz_regressions.rs` (stable, `cargo test`) replays
//! the inputs committed under `fuzz/regressions/<target>/` through them. They panic (with
//! the whole story in the message) on any disagreement.
//!
//! - [`gcra_differential`]: `Gcra` against both reference models, at any time in the
//!   clock's 64-bit range, including backwards steps and readings near `u64::MAX`.
//! - [`token_bucket_differential`]: `TokenBucket` against both reference models, with
//!   every reading kept inside the window its "Time field" documentation promises exact
//!   agreement in (phase 1: a window of `R` ns around a base time, any order; phase 2:
//!   monotone time with long forward steps).
//! - [`quota_parse`]: `Quota`'s parser, constructors and `Display`.
//! - [`fixed_window_differential`], [`sliding_log_differential`]: `FixedWindow` and
//!   `SlidingLog` against `FixedWindowModel` and `SlidingLogModel`, at explicit times
//!   anywhere in the 64-bit range, in any order.
//! - [`sliding_window_differential`]: `SlidingWindow` with batch 0 against
//!   `SlidingWindowModel`, exactly, with every reading inside the window its clock-lag
//!   tolerance and window-number field promise exactness in; then with leases (batch
//!   `1..=16`) and monotone time, never admitting what the formula on the true counts
//!   refuses.
//! - [`leaky_bucket_differential`]: `LeakyBucket`'s `try_acquire_n_at` and `reserve_n_at`
//!   against `LeakyBucketModel`, at any time.
//! - [`budget_differential`]: `Budget` against `BudgetModel`: decisions, charges, partial
//!   grants, reservations, refunds and reconfigurations at decoded times.
//! - [`keyed_differential`]: `Keyed`, for each rule it runs, against a shadow of its map
//!   (per key: the model and the single limiter; the overflow state, the overrides and the
//!   sweeps), with every reading inside what the rules and the eviction grace promise
//!   exactness in.
//!
//! Every driver decides through [`reference::Model`] where it
//! drives a model. The last five have no clock: every call gets its time explicitly (the
//! limiters are built on a clock that panics if read).
//!
//! # Keeping inputs meaningful
//!
//! Inputs are decoded with [`arbitrary::Unstructured`]; running out of bytes ends a run
//! (the runs never fail for lack of input). Changing any choice the drivers make (a
//! selector's range, the order of choices) changes what every committed regression input
//! means: they still run, but test something else, so re-pick them from a fresh corpus (see
//! `fuzz/README.md`).
//!
//! The window targets decode a burst they do not use: the window limiters used to ignore
//! it, and now refuse a quota whose burst is not its count. The bytes are still decoded,
//! and the window limiter gets the quota's count as its burst, so every input decides what
//! it decided before (a window quota that cannot be built that way, a period past about
//! 2^62 ns, is skipped).

mod budget;
mod decode;
mod gcra;
mod keyed;
mod leaky_bucket;
mod quota;
mod timed;
mod token_bucket;
mod windows;

pub use budget::budget_differential;
pub use gcra::gcra_differential;
pub use keyed::keyed_differential;
pub use leaky_bucket::leaky_bucket_differential;
pub use quota::quota_parse;
pub use token_bucket::token_bucket_differential;
pub use windows::{
    fixed_window_differential, sliding_log_differential, sliding_window_differential,
};

use core::fmt::Write as _;
use core::time::Duration;
use limitcore::clock::{Clock, Nanos};
use limitcore::reference::{self, AnyModel, Model};
use limitcore::{Algorithm, Denied, Quota, Snapshot};

type ArbResult<T> = arbitrary::Result<T>;

/// Most operations in one run (per phase for the token bucket and the sliding window).
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

/// The clock of an explicit-time run: every call is given its time, so nothing may read it.
#[derive(Debug, Clone, Copy)]
struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> Nanos {
        panic!("harness bug: an explicit-time run read the limiter's clock")
    }
}

/// `Duration` → ns, saturating (as the crate converts a `max_wait`).
fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The reference model of an algorithm, as the drivers drive it: decisions and snapshots
/// through [`Model`], copies for the probes, and the two questions the window checks ask.
#[derive(Debug, Clone)]
struct Reference {
    algorithm: Algorithm,
    model: AnyModel,
}

impl Reference {
    /// A fresh model of `algorithm` for `quota` ([`reference::model`]).
    fn new(algorithm: Algorithm, quota: Quota) -> Reference {
        Reference {
            algorithm,
            model: reference::model(algorithm, quota),
        }
    }

    /// [`Model::acquire`].
    fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
        self.model.acquire(n, now)
    }

    /// [`Model::snapshot`].
    fn snapshot(&self, now: Nanos) -> Snapshot {
        self.model.snapshot(now)
    }

    /// Is `SlidingWindowModel` the model? Its `remaining` tries every `n` from the count
    /// down, so the window checks ask it differently.
    fn is_sliding_window(&self) -> bool {
        self.algorithm == Algorithm::SlidingWindow
    }

    /// Permits the model admits at `now`, of at most `capacity`: its snapshot's
    /// `remaining`; for the sliding window above a capacity of 4 096, the largest `n` that
    /// `acquire` admits on copies (binary search), the same number.
    fn remaining(&self, now: Nanos, capacity: u32) -> u32 {
        if !self.is_sliding_window() || capacity <= 4_096 {
            return self.snapshot(now).remaining;
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

    /// Is nothing counted against the next request at `now`: all of `capacity` left (for
    /// the sliding window: a request for all of it admitted, on a copy)?
    fn is_full(&self, now: Nanos, capacity: u32) -> bool {
        if self.is_sliding_window() {
            self.clone().acquire(capacity, now).is_ok()
        } else {
            self.remaining(now, capacity) == capacity
        }
    }
}

/// A broken contract: what (the failure's title) and the detail lines, for a `fail`.
type Broken = (&'static str, String);

/// The contract of a [`Denied::RateLimited`] `denied` at `now`, probed with `decide(t)`: the
/// model's decision on the same request at `t`, on a fresh copy of the model each call (the
/// model the limiter has just been shown to equal).
///
/// - [`Denied::BeyondHorizon`] means never: still refused at the end of the clock.
/// - A finite `retry_after` is exact: at least 1 ns, with `now + retry_after` on the clock,
///   admitted when asked again exactly that much later, and refused by exactly 1 ns one
///   nanosecond earlier.
///
/// Returns the instant `now + retry_after` (`None` for a final denial: waiting cannot help).
fn probe_retry_after<T: core::fmt::Debug>(
    denied: Denied,
    now: u64,
    decide: impl Fn(u64) -> Result<T, Denied>,
) -> Result<Option<u64>, Broken> {
    if denied == Denied::BeyondHorizon {
        let at_end = decide(u64::MAX);
        if at_end.is_ok() {
            return Err((
                "BeyondHorizon but admitted later",
                format!("  denied {denied:?}, but asking again at u64::MAX gives {at_end:?}"),
            ));
        }
        return Ok(None);
    }
    let Denied::RateLimited { retry_after } = denied else {
        return Ok(None);
    };
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
                "  denied {denied:?}: now + retry_after passes u64::MAX (should be BeyondHorizon)"
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
