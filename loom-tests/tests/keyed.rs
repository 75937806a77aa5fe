//! Loom models of `Keyed`'s eviction protocol and per-key quotas (README, model 9):
//! acquirers racing the evictor on one key, slots re-created after eviction, keys
//! redirected to a state under their own quota, `reconfigure_key` racing requests.
//!
//! # Two stores
//!
//! On `PapayaStore` loom sees only limitcore's own atomics: a key's word (an acquirer's load
//! and CAS, the evictor's load and CAS to `RETIRED`, the `RETIRED` check inside `remove_if`'s
//! predicate) and the `next_sweep` / overflow words. papaya uses std atomics and
//! thread-locals that loom does not instrument: every papaya call is one atomic step
//! between limitcore's loom operations, except that a `remove_if` is split at its predicate.
//! papaya runs under loom's threads (`papaya_from_two_loom_threads`), but loom cannot see
//! its release/acquire publication of an entry: a slot's word is a loom `AtomicU64` created
//! inside `get_or_insert_with`, and when another loom thread reaches that slot through the
//! map, loom reports `Causality violation: Concurrent load and mut accesses.`, a false alarm
//! about the real program that ends the model.
//! `slot_created_in_another_loom_thread_is_a_loom_causality_violation` pins this (it
//! expects loom's panic). The papaya models therefore pin the map full (`max_keys` 0 after
//! the setup), so that a re-lookup ends in the overflow limiter (a word created before the
//! threads) instead of a new slot.
//!
//! `LoomStore` (only under `--cfg limitcore_loom`) is a `loom::sync::Mutex` around a `HashMap` of
//! `Arc`ed slots: loom sees every map operation (a critical section, a point where it can
//! switch threads) and the publication of every slot. On it the models let acquirers create
//! a key's next slot after meeting `RETIRED`, follow a redirect into the side map, and race
//! `reconfigure_key`; the checks are the same (every decision is some sequential order's from one
//! fresh state, every charge lands once on the key's one live state).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`). The models were also run with
//! `LOOM_MAX_PREEMPTIONS=4`, and the 2-thread ones unbounded (README).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::reference::GcraModel;
use limitcore::rules::GcraRule;
use limitcore::{
    Denied, Gcra, Keyed, KeyedRateLimiter, LoomStore, PapayaStore, Quota, RateLimiter, Snapshot,
    Store,
};
use loom_tests::{model, quota, Outcomes, NOW, T};
use std::time::Duration;

/// The models of papaya under loom (what loom can and cannot see there: the module note).
type K = Keyed<u8, GcraRule, ManualClock, PapayaStore<u8>>;

/// The models on the loom-visible store (`LoomStore`: a loom mutex around a `HashMap`).
type L = Keyed<u8, GcraRule, ManualClock, LoomStore<u8>>;

/// The eviction grace.
const EVICTION_GRACE_NS: Nanos = K::EVICTION_GRACE_NS;

/// The key every acquirer uses.
const KEY: u8 = 7;

/// A key no model uses before its final checks: with the map full it reads the overflow
/// limiter.
const OTHER: u8 = 9;

/// The time of the race for a limiter of `burst`: the key's setup admission (all `burst`
/// permits at [`NOW`]) leaves TAT `NOW + burst·T`, exactly [`EVICTION_GRACE_NS`] before
/// it, so the state is idle (evictable) at this time, at the boundary.
fn race_time(burst: u32) -> Nanos {
    NOW + u64::from(burst) * T + EVICTION_GRACE_NS
}

/// Where states are compared, around the race time `at`: behind it, at it and after it
/// (together they pin down a GCRA state of these small quotas).
fn probes(at: Nanos) -> [Nanos; 7] {
    [
        at - 50,
        at,
        at + 1,
        at + T / 2,
        at + T,
        at + 2 * T,
        at + 4 * T,
    ]
}

/// Snapshots of `key` at every probe time.
fn key_state<S: Store<u8>>(
    keyed: &Keyed<u8, GcraRule, ManualClock, S>,
    key: u8,
    at: Nanos,
) -> Vec<Snapshot> {
    probes(at)
        .iter()
        .map(|&p| keyed.snapshot_at(&key, p))
        .collect()
}

/// Snapshots of a `Gcra` at every probe time.
fn gcra_state(gcra: &Gcra<ManualClock>, at: Nanos) -> Vec<Snapshot> {
    probes(at).iter().map(|&p| gcra.snapshot_at(p)).collect()
}

/// A fresh `Gcra` of `burst` (the sequential reference).
fn fresh_gcra(burst: u32, at: Nanos) -> Gcra<ManualClock> {
    Gcra::with_clock(quota(burst), ManualClock::starting_at(at)).unwrap()
}

/// A keyed GCRA on a `ManualClock` with automatic sweeps off (only `evict_idle_at`, and
/// with `max_keys`, a full map, sweep), and [`KEY`]'s state made idle at
/// `race_time(burst)` by a full admission at [`NOW`] by the main thread.
fn keyed_with_idle_key(burst: u32) -> K {
    let keyed: K = Keyed::with_store(
        quota(burst),
        ManualClock::starting_at(NOW),
        PapayaStore::new(),
    )
    .expect("valid quota")
    .with_sweep_interval(Duration::ZERO);
    keyed
        .try_acquire_n_at(&KEY, burst, NOW)
        .expect("setup is admitted");
    assert_eq!(keyed.len(), 1);
    keyed
}

/// Every interleaving of the threads' request lists that keeps each thread's own order,
/// as a list of `(thread, index)`.
fn merges(lens: &[usize]) -> Vec<Vec<(usize, usize)>> {
    fn go(
        next: &mut Vec<usize>,
        lens: &[usize],
        prefix: &mut Vec<(usize, usize)>,
        out: &mut Vec<Vec<(usize, usize)>>,
    ) {
        if next.iter().zip(lens).all(|(n, l)| n == l) {
            out.push(prefix.clone());
            return;
        }
        for t in 0..lens.len() {
            if next[t] < lens[t] {
                prefix.push((t, next[t]));
                next[t] += 1;
                go(next, lens, prefix, out);
                next[t] -= 1;
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    go(&mut vec![0; lens.len()], lens, &mut Vec::new(), &mut out);
    out
}

/// Each thread's results, indexed like its asks.
type Results = Vec<Vec<Result<(), Denied>>>;

/// The sequential reference: `order` of the threads' asks, all at time `at`, from a fresh
/// state, on a `Gcra` and on `GcraModel` (which must agree on every decision and on the
/// final state). Returns each ask's result and the `Gcra`.
fn sequential(
    burst: u32,
    asks: &[&[u32]],
    order: &[(usize, usize)],
    at: Nanos,
) -> (Results, Gcra<ManualClock>) {
    let gcra = fresh_gcra(burst, at);
    let mut reference = GcraModel::new(quota(burst));
    let mut results: Results = asks.iter().map(|a| vec![Ok(()); a.len()]).collect();
    for &(t, i) in order {
        let n = asks[t][i];
        let r = gcra.try_acquire_n_at(n, at);
        assert_eq!(r, reference.acquire(n, at), "Gcra and GcraModel disagree");
        results[t][i] = r;
    }
    for &p in &probes(at) {
        assert_eq!(
            reference.snapshot(p),
            gcra.snapshot_at(p),
            "Gcra and GcraModel disagree"
        );
    }
    (results, gcra)
}

/// The first interleaving of `asks` whose sequential run from a fresh state gives exactly
/// `results` (retry-after included) and whose final state satisfies `state_matches`.
fn linearization(
    burst: u32,
    asks: &[&[u32]],
    results: &Results,
    at: Nanos,
    state_matches: impl Fn(&Gcra<ManualClock>) -> bool,
) -> Option<Gcra<ManualClock>> {
    let lens: Vec<usize> = asks.iter().map(|a| a.len()).collect();
    merges(&lens).into_iter().find_map(|order| {
        let (seq_results, gcra) = sequential(burst, asks, &order, at);
        (seq_results == *results && state_matches(&gcra)).then_some(gcra)
    })
}

/// The race: one loom thread per entry of `asks`, each calling `try_acquire_n_at(&KEY, n,
/// at)` for each `n` of its list, and one thread calling `evict_idle_at(at)`. Returns
/// each thread's results and how many keys the evictor removed.
fn race<S: Store<u8>>(
    keyed: &loom::sync::Arc<Keyed<u8, GcraRule, ManualClock, S>>,
    asks: &'static [&'static [u32]],
    at: Nanos,
) -> (Results, usize) {
    let acquirers: Vec<_> = asks
        .iter()
        .map(|&list| {
            let keyed = keyed.clone();
            loom::thread::spawn(move || {
                list.iter()
                    .map(|&n| keyed.try_acquire_n_at(&KEY, n, at))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let evictor = {
        let keyed = keyed.clone();
        loom::thread::spawn(move || keyed.evict_idle_at(at))
    };
    let results: Results = acquirers
        .into_iter()
        .map(|h| h.join().expect("acquirer panicked"))
        .collect();
    let removed = evictor.join().expect("evictor panicked");
    (results, removed)
}

// ---- papaya under loom's threads. ----

/// papaya works from loom threads: two threads insert a key each (a first acquisition)
/// and read it back, one of them removes its key (`reconfigure_key_at` a time the key is idle:
/// retire and remove), misses it, and inserts it again under its new quota, while both
/// race on a key the main thread inserted. No thread reaches a slot another spawned thread
/// created (see the module note). The map must stay consistent and the shared key must
/// admit exactly its last permit.
#[test]
fn papaya_from_two_loom_threads() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed papaya smoke: insert/get/remove, 2 threads",
        move || {
            const SHARED: u8 = 3;
            // Key 2's state after its first admission (TAT NOW + T) is idle at this time.
            let late = NOW + T + EVICTION_GRACE_NS;
            let keyed: K =
                Keyed::with_store(quota(2), ManualClock::starting_at(NOW), PapayaStore::new())
                    .expect("valid quota")
                    .with_sweep_interval(Duration::ZERO);
            keyed
                .try_acquire_n_at(&SHARED, 1, NOW)
                .expect("setup is admitted");
            let keyed = loom::sync::Arc::new(keyed);
            let first = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || {
                    let own = keyed.try_acquire_n_at(&1, 1, NOW);
                    let seen = keyed.snapshot_at(&1, NOW);
                    (own, seen, keyed.try_acquire_n_at(&SHARED, 1, NOW))
                })
            };
            let second = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || {
                    let own = keyed.try_acquire_n_at(&2, 1, NOW);
                    let before = keyed.snapshot_at(&2, NOW);
                    keyed
                        .reconfigure_key_at(2, quota(1), late)
                        .expect("valid quota");
                    let gone = keyed.snapshot_at(&2, NOW);
                    let again = keyed.try_acquire_n_at(&2, 1, NOW);
                    (
                        [own, again],
                        [before, gone],
                        keyed.try_acquire_n_at(&SHARED, 1, NOW),
                    )
                })
            };
            let (own1, seen1, shared1) = first.join().expect("first panicked");
            let (own2, seen2, shared2) = second.join().expect("second panicked");
            assert_eq!(own1, Ok(()), "a fresh key admits");
            assert_eq!(own2, [Ok(()), Ok(())], "a fresh key admits");

            // Key 1: one permit of 2 taken. Key 2: one permit of 2 taken, then removed (a
            // fresh state under the new burst 1), then one permit of 1 taken.
            let one_of_two = fresh_gcra(2, NOW);
            one_of_two.try_acquire_n_at(1, NOW).expect("fresh");
            let one_of_one = fresh_gcra(1, NOW);
            let none_of_one = one_of_one.snapshot_at(NOW);
            one_of_one.try_acquire_n_at(1, NOW).expect("fresh");
            assert_eq!(seen1, one_of_two.snapshot_at(NOW));
            assert_eq!(seen2, [one_of_two.snapshot_at(NOW), none_of_one]);
            assert_eq!(keyed.snapshot_at(&1, NOW), one_of_two.snapshot_at(NOW));
            assert_eq!(keyed.snapshot_at(&2, NOW), one_of_one.snapshot_at(NOW));

            // The shared key had 1 permit left: exactly one of the two gets it.
            assert!(
                shared1.is_ok() != shared2.is_ok(),
                "{shared1:?} {shared2:?}"
            );
            let full = fresh_gcra(2, NOW);
            full.try_acquire_n_at(2, NOW).expect("fresh");
            assert_eq!(keyed.snapshot_at(&SHARED, NOW), full.snapshot_at(NOW));
            assert_eq!(keyed.len(), 3);
            seen.record(&[shared1, shared2]);
        },
    );
    outcomes.assert_exactly(&["NY", "YN"]);
}

/// The limitation, pinned: a slot created by one loom thread (a first acquisition) and
/// read by another (a snapshot) is reported by loom as a causality violation, because
/// papaya's publication is invisible to it. If this test starts failing (loom no longer
/// panics), papaya has become visible to loom: the `LoomStore` models can run on papaya too.
#[test]
#[should_panic(expected = "Causality violation")]
fn slot_created_in_another_loom_thread_is_a_loom_causality_violation() {
    model(
        "keyed: slot created in one loom thread, read in another",
        || {
            let keyed: K =
                Keyed::with_store(quota(1), ManualClock::starting_at(NOW), PapayaStore::new())
                    .expect("valid quota")
                    .with_sweep_interval(Duration::ZERO);
            let keyed = loom::sync::Arc::new(keyed);
            let creator = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || keyed.try_acquire_n_at(&1, 1, NOW))
            };
            loom::thread::yield_now();
            let _ = keyed.snapshot_at(&1, NOW);
            creator
                .join()
                .expect("creator panicked")
                .expect("fresh key");
        },
    );
}

// ---- The eviction race, the map pinned full: re-lookups end in the overflow limiter. ----

/// The model with the map full: [`KEY`] idle at `race_time(burst)` in a map whose
/// `max_keys` is 0 after the setup, so a lookup that does not find the key sweeps (once
/// per sweep interval) and then uses the overflow limiter. One loom thread per entry of
/// `asks` acquires on [`KEY`]; one thread calls `evict_idle_at(race time)`. Checks, in
/// every execution:
///
/// - the evictor removed 0 or 1 keys, and `len()` is 0 or 1;
/// - some interleaving of the asks (each thread's own order kept), run sequentially on a
///   fresh `Gcra` and on `GcraModel` at the race time, gives exactly every decision the
///   threads got (retry-after included);
/// - every charge landed once, all on one state: if the key is still in the map, its
///   state (`snapshot_at` at every probe) is that sequential state and the overflow is
///   fresh; if not, the key reads fresh and the overflow holds the sequential state (a
///   request of `burst` on another key, which goes to the overflow, is decided exactly as
///   on the sequential `Gcra`: admitted iff its TAT ≤ the race time, else denied with
///   retry-after TAT − race time);
/// - a key left in the map is live: a second sweep at the race time removes nothing, its
///   next request is decided as the sequential `Gcra` decides it, and a sweep late enough
///   removes it.
///
/// Records, per execution: each ask's admission, "the key is in the map at the end",
/// "the evictor removed it".
fn check_eviction_race_map_full(
    name: &str,
    burst: u32,
    asks: &'static [&'static [u32]],
) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let at = race_time(burst);
        let keyed = loom::sync::Arc::new(keyed_with_idle_key(burst).with_max_keys(0));
        let (results, removed) = race(&keyed, asks, at);

        assert!(removed <= 1, "removed {removed} keys of 1");
        let len = keyed.len();
        assert!(len <= 1, "len {len}");
        let in_map = len == 1;
        let state = key_state(&keyed, KEY, at);
        let fresh = fresh_gcra(burst, at);
        let Some(expected) = linearization(burst, asks, &results, at, |seq| {
            if in_map {
                gcra_state(seq, at) == state
            } else {
                gcra_state(&fresh, at) == state
            }
        }) else {
            panic!(
                "no sequential order of {asks:?} from a fresh state explains results \
                 {results:?} and the key's final state {state:?} (in map: {in_map}, \
                 evictor removed {removed})"
            )
        };
        // The overflow limiter: fresh if the key kept its state, else the sequential state.
        let overflow_expected = if in_map { &fresh } else { &expected };
        assert_eq!(
            keyed.try_acquire_n_at(&OTHER, burst, at),
            overflow_expected.try_acquire_n_at(burst, at),
            "the overflow limiter (results {results:?}, in map: {in_map})"
        );
        if in_map {
            assert_eq!(keyed.evict_idle_at(at), 0, "a charged state was evicted");
            assert_eq!(
                keyed.try_acquire_n_at(&KEY, 1, at),
                expected.try_acquire_n_at(1, at),
                "the next request after the race, results {results:?}"
            );
            let late = at + 10 * u64::from(burst) * T + EVICTION_GRACE_NS;
            assert_eq!(keyed.evict_idle_at(late), 1, "a late sweep");
        }
        assert_eq!(keyed.len(), 0);

        let mut pattern: Vec<bool> = results.iter().flatten().map(Result::is_ok).collect();
        pattern.extend([in_map, removed == 1]);
        seen.record_pattern(pattern);
    });
    outcomes
}

#[test]
fn one_acquire_races_eviction_map_full() {
    let outcomes =
        check_eviction_race_map_full("keyed (map full) evict vs acquire [1], burst 1", 1, &[&[1]]);
    // Admitted every time: on the key's state (charged first, the evictor leaves it), or on
    // the overflow after the evictor retired the key and either removed it itself (YNY) or
    // the acquirer, meeting RETIRED, removed it first (YNN: the evictor's own removal
    // found nothing).
    outcomes.assert_exactly(&["YNN", "YNY", "YYN"]);
}

#[test]
fn two_acquires_race_eviction_map_full() {
    // From a fresh state at the race time: 1 is admitted, then 2 does not fit (burst 2,
    // retry after T), whichever state the two calls land on.
    let outcomes = check_eviction_race_map_full(
        "keyed (map full) evict vs acquires [1,2], burst 2",
        2,
        &[&[1, 2]],
    );
    outcomes.assert_exactly(&["YNNN", "YNNY", "YNYN"]);
}

#[test]
fn two_acquirers_race_eviction_map_full() {
    // Burst 1: exactly one of them is admitted, and both decide on the same state.
    let outcomes = check_eviction_race_map_full(
        "keyed (map full) evict vs 2 acquirers [1] [1], burst 1",
        1,
        &[&[1], &[1]],
    );
    outcomes.assert_exactly(&["NYNN", "NYNY", "NYYN", "YNNN", "YNNY", "YNYN"]);
}

#[test]
fn two_acquirers_of_different_sizes_race_eviction_map_full() {
    // Burst 2: 1 then 2 or 2 then 1; either fits alone, not both.
    let outcomes = check_eviction_race_map_full(
        "keyed (map full) evict vs 2 acquirers [1] [2], burst 2",
        2,
        &[&[1], &[2]],
    );
    outcomes.assert_exactly(&["NYNN", "NYNY", "NYYN", "YNNN", "YNNY", "YNYN"]);
}

// ---- On the loom-visible store: slots re-created, keys redirected, `reconfigure_key` racing. ----
//
// `LoomStore` puts every map operation in a loom critical section, so loom sees a slot's
// publication (the lock's release/acquire) and can switch threads between any two map
// operations and slot CASes: an acquirer meeting `RETIRED` and creating the key's next slot,
// that slot read by the evictor or another acquirer, a redirect followed into the side map.

/// A keyed GCRA of `burst` on [`LoomStore`], automatic sweeps off.
fn loom_keyed(burst: u32) -> L {
    Keyed::with_store(
        quota(burst),
        ManualClock::starting_at(NOW),
        LoomStore::new(),
    )
    .expect("valid quota")
    .with_sweep_interval(Duration::ZERO)
}

/// The eviction race with slot re-creation (README, section 9): [`KEY`]'s state, made idle
/// at `race_time(burst)` by a full admission at [`NOW`], races one loom thread per entry of
/// `asks` (each acquiring its list at the race time) and an evictor (`evict_idle_at` at the
/// race time). With `redirected`, [`KEY`] was given its own quota of `burst` first (the
/// default quota has `burst + 1`, so a decision under the wrong rule shows): its state lives
/// in the side map, behind the redirect word, and it is that state that is evicted and
/// created again. Checks, in every execution:
///
/// - the evictor removed 0 or 1 states;
/// - some interleaving of the asks (each thread's order kept), run sequentially on a fresh
///   `Gcra` of `burst` and on `GcraModel` at the race time, gives exactly every decision and
///   the key's final state (`snapshot_at` at every probe): every charge landed once, all on
///   one state (an idle state evicted and a fresh one are indistinguishable);
/// - the key has its entry (`len()` 1: a charged state, or the redirect word);
/// - the state left is live and the key's only one: a second sweep at the race time removes
///   nothing, the next request is decided as the sequential `Gcra` decides it, and a late
///   sweep removes exactly one state (the redirect word stays).
///
/// Records each ask's admission, then "the evictor removed a state".
fn check_eviction_race(
    name: &str,
    burst: u32,
    asks: &'static [&'static [u32]],
    redirected: bool,
) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let at = race_time(burst);
        let keyed = if redirected {
            let keyed = loom_keyed(burst + 1);
            keyed
                .reconfigure_key_at(KEY, quota(burst), NOW)
                .expect("valid quota");
            keyed
        } else {
            loom_keyed(burst)
        };
        keyed
            .try_acquire_n_at(&KEY, burst, NOW)
            .expect("setup is admitted");
        assert_eq!(keyed.len(), 1);
        let keyed = loom::sync::Arc::new(keyed);
        let (results, removed) = race(&keyed, asks, at);

        assert!(removed <= 1, "removed {removed} states of 1");
        let state = key_state(&keyed, KEY, at);
        let Some(expected) = linearization(burst, asks, &results, at, |seq| {
            gcra_state(seq, at) == state
        }) else {
            panic!(
                "no sequential order of {asks:?} from a fresh state explains results \
                 {results:?} and the key's final state {state:?} (evictor removed {removed})"
            )
        };
        assert_eq!(keyed.len(), 1, "results {results:?}");
        assert_eq!(keyed.quota_for(&KEY), quota(burst));
        assert_eq!(keyed.evict_idle_at(at), 0, "a charged state was evicted");
        assert_eq!(
            keyed.try_acquire_n_at(&KEY, 1, at),
            expected.try_acquire_n_at(1, at),
            "the next request after the race, results {results:?}"
        );
        let late = at + 10 * u64::from(burst) * T + EVICTION_GRACE_NS;
        assert_eq!(keyed.evict_idle_at(late), 1, "a late sweep");
        assert_eq!(keyed.len(), usize::from(redirected));

        let mut pattern: Vec<bool> = results.iter().flatten().map(Result::is_ok).collect();
        pattern.push(removed == 1);
        seen.record_pattern(pattern);
    });
    outcomes
}

#[test]
fn one_acquire_races_eviction_recreating_the_slot() {
    let outcomes = check_eviction_race("keyed evict vs acquire [1], burst 1", 1, &[&[1]], false);
    // Admitted every time, on the old state (charged first: the evictor leaves it) or on a
    // fresh one (the evictor retired the old one and removed it, or the acquirer met
    // RETIRED, removed it itself and created the next).
    outcomes.assert_exactly(&["YN", "YY"]);
}

#[test]
fn two_acquires_race_eviction_recreating_the_slot() {
    let outcomes = check_eviction_race(
        "keyed evict vs acquires [1,2], burst 2",
        2,
        &[&[1, 2]],
        false,
    );
    outcomes.assert_exactly(&["YNN", "YNY"]);
}

#[test]
fn two_acquirers_race_eviction_recreating_the_slot() {
    let outcomes = check_eviction_race(
        "keyed evict vs 2 acquirers [1] [1], burst 1",
        1,
        &[&[1], &[1]],
        false,
    );
    outcomes.assert_exactly(&["NYN", "NYY", "YNN", "YNY"]);
}

#[test]
fn one_acquire_races_eviction_of_a_redirected_key() {
    let outcomes = check_eviction_race(
        "keyed evict vs acquire [1] through the redirect, burst 1",
        1,
        &[&[1]],
        true,
    );
    outcomes.assert_exactly(&["YN", "YY"]);
}

#[test]
fn two_acquirers_race_eviction_of_a_redirected_key() {
    let outcomes = check_eviction_race(
        "keyed evict vs 2 acquirers [1] [1] through the redirect, burst 1",
        1,
        &[&[1], &[1]],
        true,
    );
    outcomes.assert_exactly(&["NYN", "NYY", "YNN", "YNY"]);
}

/// `reconfigure_key_at(KEY, burst 1, NOW)` racing the first requests for [`KEY`] (one loom thread
/// per entry of `asks`, at [`NOW`]) on a fresh map whose default quota has burst 2. Checks,
/// in every execution, that the key ended with one state and every charge on it: some
/// interleaving of the asks, run sequentially on a fresh `Gcra` of the burst of the quota
/// the key's state is under (`quota_for`: 2, a default state created before the quota and
/// kept, or 1, the key's own), gives exactly every decision and the key's final state; the
/// key has one entry; and once that state is evicted, the key's next state is under its own
/// quota (burst 1) and the key is redirected (`len()` 1 after a late sweep).
///
/// Records each ask's admission, then "the state is under the key's own quota".
fn check_reconfigure_key_race(name: &str, asks: &'static [&'static [u32]]) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let keyed = loom::sync::Arc::new(loom_keyed(2));
        let setter = {
            let keyed = keyed.clone();
            loom::thread::spawn(move || keyed.reconfigure_key_at(KEY, quota(1), NOW))
        };
        let acquirers: Vec<_> = asks
            .iter()
            .map(|&list| {
                let keyed = keyed.clone();
                loom::thread::spawn(move || {
                    list.iter()
                        .map(|&n| keyed.try_acquire_n_at(&KEY, n, NOW))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Results = acquirers
            .into_iter()
            .map(|h| h.join().expect("acquirer panicked"))
            .collect();
        setter
            .join()
            .expect("setter panicked")
            .expect("valid quota");

        let burst = keyed.quota_for(&KEY).burst();
        assert!(burst == 1 || burst == 2, "burst {burst}");
        let state = key_state(&keyed, KEY, NOW);
        if linearization(burst, asks, &results, NOW, |seq| {
            gcra_state(seq, NOW) == state
        })
        .is_none()
        {
            panic!(
                "no sequential order of {asks:?} on one fresh state of burst {burst} explains \
                 results {results:?} and the key's final state {state:?}"
            )
        }
        assert_eq!(keyed.len(), 1);
        let late = NOW + 10 * T + EVICTION_GRACE_NS;
        assert_eq!(keyed.evict_idle_at(late), 1, "a late sweep");
        assert_eq!(keyed.try_acquire_n_at(&KEY, 1, late), Ok(()));
        assert_eq!(
            keyed.try_acquire_n_at(&KEY, 1, late),
            Err(Denied::RateLimited {
                retry_after: Duration::from_nanos(T)
            }),
            "the key's next state is under its own quota"
        );
        assert_eq!(keyed.quota_for(&KEY), quota(1));
        assert_eq!(keyed.len(), 1);

        let mut pattern: Vec<bool> = results.iter().flatten().map(Result::is_ok).collect();
        pattern.push(burst == 1);
        seen.record_pattern(pattern);
    });
    outcomes
}

#[test]
fn reconfigure_key_races_a_first_request() {
    let outcomes =
        check_reconfigure_key_race("keyed reconfigure_key vs first requests [1,1]", &[&[1, 1]]);
    // Both on a default state (created first: the quota waits for it to go idle), or the
    // first on the key's own state of burst 1.
    outcomes.assert_exactly(&["YNY", "YYN"]);
}

#[test]
fn reconfigure_key_races_two_first_requests() {
    let outcomes = check_reconfigure_key_race(
        "keyed reconfigure_key vs 2 first requests [1] [1]",
        &[&[1], &[1]],
    );
    outcomes.assert_exactly(&["NYY", "YNY", "YYN"]);
}

/// A new quota racing a request through the redirect word: [`KEY`] has its own quota
/// (burst 1) and its state, charged at [`NOW`], is idle at `race_time(1)`. One thread sets a
/// quota of burst 2 at the race time (retiring the idle state, so the new quota applies at
/// once); another acquires `[1, 1]` at the race time. Either the acquirer's first charge
/// lands on the old state (which is then busy, so `reconfigure_key` leaves it: burst 1, `YN`) or
/// the state is retired first and the acquirer creates the next one under burst 2 (`YY`);
/// the decisions and the final state are one fresh state's of that burst.
#[test]
fn reconfigure_key_races_a_request_through_the_redirect() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed reconfigure_key vs acquire [1,1] through the redirect",
        move || {
            let keyed = loom_keyed(3);
            keyed
                .reconfigure_key_at(KEY, quota(1), NOW)
                .expect("valid quota");
            keyed
                .try_acquire_n_at(&KEY, 1, NOW)
                .expect("setup is admitted");
            let at = race_time(1);
            let keyed = loom::sync::Arc::new(keyed);
            let setter = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || keyed.reconfigure_key_at(KEY, quota(2), at))
            };
            let acquirer = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || {
                    [
                        keyed.try_acquire_n_at(&KEY, 1, at),
                        keyed.try_acquire_n_at(&KEY, 1, at),
                    ]
                })
            };
            let results: Results = vec![acquirer.join().expect("acquirer panicked").to_vec()];
            setter
                .join()
                .expect("setter panicked")
                .expect("valid quota");

            let burst = keyed.quota_for(&KEY).burst();
            let state = key_state(&keyed, KEY, at);
            const ASKS: &[&[u32]] = &[&[1, 1]];
            if linearization(burst, ASKS, &results, at, |seq| {
                gcra_state(seq, at) == state
            })
            .is_none()
            {
                panic!(
                    "no sequential order on one fresh state of burst {burst} explains results \
                     {results:?} and the key's final state {state:?}"
                )
            }
            assert_eq!(keyed.len(), 1);
            let mut pattern: Vec<bool> = results.iter().flatten().map(Result::is_ok).collect();
            pattern.push(burst == 2);
            seen.record_pattern(pattern);
        },
    );
    outcomes.assert_exactly(&["YNN", "YYY"]);
}

/// The same race on the sliding log, whose slot is a state behind a lock (`Held`: a live
/// log, `Retired` or `Redirect`): `reconfigure_key_at(KEY, 1 per period, NOW)` against an
/// acquirer asking `[1, 1]` at [`NOW`] on a fresh map whose default quota is 2 per period.
/// Both requests land on one log: the default's (both admitted) or the key's own (one
/// admitted); `quota_for` names it, and the log is full (`remaining` 0) either way.
#[test]
fn reconfigure_key_races_a_first_request_on_a_sliding_log() {
    use limitcore::rules::SlidingLogRule;
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(
        "keyed sliding log: reconfigure_key vs first requests [1,1]",
        move || {
            let per = |count| Quota::new(count, Duration::from_nanos(10 * T)).expect("valid quota");
            let keyed: Keyed<u8, SlidingLogRule, ManualClock, LoomStore<u8>> =
                Keyed::with_store(per(2), ManualClock::starting_at(NOW), LoomStore::new())
                    .expect("valid quota")
                    .with_sweep_interval(Duration::ZERO);
            let keyed = loom::sync::Arc::new(keyed);
            let setter = {
                let keyed = keyed.clone();
                loom::thread::spawn(move || keyed.reconfigure_key_at(KEY, per(1), NOW))
            };
            let results = [
                keyed.try_acquire_n_at(&KEY, 1, NOW),
                keyed.try_acquire_n_at(&KEY, 1, NOW),
            ];
            setter
                .join()
                .expect("setter panicked")
                .expect("valid quota");
            let count = keyed.quota_for(&KEY).count();
            let admitted = results.iter().filter(|r| r.is_ok()).count() as u32;
            assert_eq!(admitted, count, "results {results:?} on a log of {count}");
            assert_eq!(keyed.snapshot_at(&KEY, NOW).remaining, 0);
            assert_eq!(keyed.len(), 1);
            seen.record(&results);
        },
    );
    outcomes.assert_exactly(&["YN", "YY"]);
}
