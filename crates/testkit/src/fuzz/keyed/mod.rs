//! `keyed_differential`: `Keyed` against a shadow of its map, for every rule it runs, on
//! each store.

mod shadow;
mod state;

use super::decode::{
    arbitrary_delta, arbitrary_n, arbitrary_quota, arbitrary_start, arbitrary_time, bounded_quota,
    window_quota,
};
use super::{ArbResult, NoClock, MAX_OPS};
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::rules::{
    FixedWindowRule, GcraRule, LeakyBucketRule, QuotaRule, SlidingWindowRule, TokenBucketRule,
};
use limitcore::{Algorithm, Keyed, PapayaStore, Quota, QuotaError, Store};
use shadow::{KeyedDiff, KeyedOp};
use state::{twin, KeyState};
use std::collections::{BTreeMap, BTreeSet};

/// `Keyed`'s eviction grace, ns.
const GRACE: u64 = Keyed::<u8>::EVICTION_GRACE_NS;

/// The algorithms the run picks from, in this order (the input's first choice).
const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Gcra,
    Algorithm::TokenBucket,
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::LeakyBucket,
];

/// A quota for `algorithm`, decoded as that algorithm's own target decodes one (so a
/// window quota may come with a burst: see [`keyed_quota`]).
fn arbitrary_quota_for(
    algorithm: Algorithm,
    u: &mut Unstructured<'_>,
) -> ArbResult<Result<Quota, QuotaError>> {
    match algorithm {
        Algorithm::SlidingWindow => bounded_quota(u, SlidingWindowRule::MAX_COUNT),
        _ => Ok(arbitrary_quota(u)?.3),
    }
}

/// The quota `Keyed` and the shadow are given for a decoded `quota`: for the window
/// algorithms the count as the burst (see the [module](crate::fuzz)'s "Keeping inputs
/// meaningful"), for the others the quota itself.
fn keyed_quota(algorithm: Algorithm, quota: &Quota) -> Result<Quota, QuotaError> {
    match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindow => window_quota(quota),
        _ => Ok(*quota),
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
        _ => GRACE
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

/// `Keyed` (`u8` keys, explicit times) against a shadow of its map, for every rule it
/// runs here: `GcraRule`, `TokenBucketRule`, `FixedWindowRule`, `SlidingWindowRule` and
/// `LeakyBucketRule`.
///
/// The shadow holds, for each key with a state of its own, the reference model and the
/// single limiter (the "twin") of the state's quota; it creates a key's state when `Keyed`
/// must (first use, with room), evicts it when `Keyed` must (idle, by the model, for
/// `Keyed::EVICTION_GRACE_NS`: on `evict_idle_at`, on `reconfigure_key_at`, and in the automatic
/// sweeps it schedules exactly as `Keyed` does), and decides keys refused a state
/// (`max_keys` reached) on one shared overflow state with the default quota. A run: an
/// algorithm, a quota (decoded as that algorithm's own target does, a window's with its
/// count as its burst; skipped if refused, after checking that `Keyed` and the single
/// limiter refuse it alike), an optional `max_keys` (0 to 16), a sweep interval (the
/// default, off, or any), a start time (near `u64::MAX` too), and up to 400 operations:
/// moves of `now` forward and back, to the last `retry_after`, to where a key becomes
/// evictable; `try_acquire_n_at`, `evict_idle_at`, `reconfigure_key_at`, `snapshot_at`. Checked
/// at every step:
///
/// - every decision (`Ok`, `ExceedsCapacity` with its capacity, `RateLimited` with its exact
///   `retry_after`) equals the model's and the twin's;
/// - every decision on a key's own state equals the key's model over its whole life, never
///   evicted (for as long as its quota is unchanged and it never overflowed): eviction
///   changes no decision;
/// - `evict_idle_at` evicts as many keys as the shadow, and `len()` is always the shadow's
///   count (so never above `max_keys`);
/// - `reconfigure_key_at` accepts and refuses as the single limiter's constructor does;
/// - `snapshot_at` equals the twin's (a fresh one under the key's next quota for a key
///   without a state), and the twin's agrees with the model.
///
/// Every reading stays where the algorithms promise exactness: never more than the grace
/// behind the latest one (within it a stale reading is plausible; beyond it, eviction may
/// show), and before every live state's wrap limit.
///
/// One departure from "exactly the single limiter", stepped around: a transition to one of
/// the words `u64::MAX − 1` and `u64::MAX` (`Keyed`'s redirect and retired markers, the last
/// nanoseconds of the clock; the harness runs each state's rule on its word to know) is
/// refused with `Denied::BeyondHorizon` where the single limiter admits, which is
/// checked and ends the run.
///
/// Found by this target and fixed: a sweep at a stale reading evicted a busy token bucket
/// with a burst of 2^31 or more (its 32-bit time field read `now −` grace as a wrap far
/// ahead); kept as `fuzz/regressions/keyed_differential/bucket-w32-stale-sweep`.
///
/// Keys given a quota of their own (`reconfigure_key_at`) are redirected for good once they get a
/// state (`Keyed`'s main map keeps a redirect word for them, counted by `len()`); the shadow
/// keeps that set too, and creates a redirected key's next state without a room check.
///
/// Every input runs twice, the same operations on each store: `PapayaStore` and the default
/// `DashMapStore`.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn keyed_differential(data: &[u8]) {
    let _ = run_keyed(&mut Unstructured::new(data), PapayaStore::new);
    let _ = run_keyed(&mut Unstructured::new(data), limitcore::DashMapStore::new);
}

fn run_keyed<S: Store<u8>>(u: &mut Unstructured<'_>, store: fn() -> S) -> ArbResult<()> {
    let alg = ALGORITHMS[u.choose_index(ALGORITHMS.len())?];
    let Ok(quota) = arbitrary_quota_for(alg, u)? else {
        return Ok(());
    };
    match alg {
        Algorithm::Gcra => run_keyed_with::<GcraRule, S>(u, alg, quota, store),
        Algorithm::TokenBucket => run_keyed_with::<TokenBucketRule, S>(u, alg, quota, store),
        Algorithm::FixedWindow => run_keyed_with::<FixedWindowRule, S>(u, alg, quota, store),
        Algorithm::SlidingWindow => run_keyed_with::<SlidingWindowRule, S>(u, alg, quota, store),
        Algorithm::LeakyBucket => run_keyed_with::<LeakyBucketRule, S>(u, alg, quota, store),
        other => unreachable!("{other} is not one of the keyed run's algorithms"),
    }
}

/// One run of rule `R` (`alg`'s) on a store from `store`, for the decoded `quota` (whose
/// burst, for a window, only steers the decoding: see [`keyed_quota`]).
fn run_keyed_with<R: QuotaRule, S: Store<u8>>(
    u: &mut Unstructured<'_>,
    alg: Algorithm,
    quota: Quota,
    store: fn() -> S,
) -> ArbResult<()> {
    let Ok(default) = keyed_quota(alg, &quota) else {
        return Ok(());
    };
    let keyed = match (
        Keyed::<u8, R, NoClock, S>::with_store(default, NoClock, store()),
        twin(alg, default),
    ) {
        (Ok(keyed), Ok(_)) => keyed,
        (Err(a), Err(b)) if a == b => return Ok(()),
        (keyed, twin) => panic!(
            "[keyed_differential] Keyed<u8, {alg:?}>::with_store({default:?}) gives {:?}, the \
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
        2 => Some(GRACE.saturating_sub(u.int_in_range(0..=1)?)),
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
        default,
        setup: format!(
            "{keys} keys (0..{keys}, and any u8 now and then), max_keys {max_keys:?}, sweep \
             interval {sweep:?} ns (None: the default)"
        ),
        max_keys: max_keys.unwrap_or(usize::MAX),
        sweep_every: sweep.unwrap_or(1_000_000_000),
        next_sweep: 0,
        slots: BTreeMap::new(),
        overrides: BTreeMap::new(),
        redirects: BTreeSet::new(),
        overflow: KeyState::new(alg, default),
        forever: BTreeMap::new(),
        now: start,
        latest: start,
        start,
        last_denied: None,
        history: Vec::new(),
        stopped: false,
    };
    // The decoding draws on the decoded quota (its burst too), as it always did.
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let capacity = default.burst();
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
                let to = s.idle_from(now).saturating_add(GRACE).saturating_sub(less);
                d.move_to(KeyedOp::ToEvictable(key, less), to);
            }
            8 => d.evict(KeyedOp::EvictIdle),
            9 => {
                let key = keyed_key(u, keys)?;
                let q = match u.int_in_range(0u8..=2)? {
                    0 => Ok(quota),
                    1 => quota.with_burst(arbitrary_n(u, burst)?),
                    _ => arbitrary_quota_for(alg, u)?,
                };
                let Ok(q) = q.and_then(|q| keyed_quota(alg, &q)) else {
                    continue;
                };
                d.reconfigure_key(KeyedOp::SetQuota(key, q), key, q);
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
