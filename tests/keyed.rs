//! Keyed limiters: per-key decisions equal a map of reference models, eviction changes no
//! decision, memory stays bounded under a flood of fresh keys, and threads agree.

use limitcore::clock::{ManualClock, Nanos};
use limitcore::reference::{self, Model};
use limitcore::rules::{
    FixedWindowRule, GcraRule, QuotaRule, Rule, SlidingWindowRule, TokenBucketRule,
};
use limitcore::DashMapStore;
use limitcore::{Algorithm, Denied, Keyed, PapayaStore, Quota, RateLimiter, Store, TokenBucket};
use limitcore_testkit::cases;
use proptest::prelude::*;

/// The eviction grace.
const EVICTION_GRACE_NS: Nanos = Keyed::<u8>::EVICTION_GRACE_NS;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    /// Move time forward (or back by less than the eviction grace).
    Shift(i64),
    Acquire(u8, u32),
    Evict,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (-(EVICTION_GRACE_NS as i64) / 2..=1i64 << 36).prop_map(Op::Shift),
            6 => (0u8..8, 0u32..=4).prop_map(|(k, n)| Op::Acquire(k, n)),
            1 => Just(Op::Evict),
        ],
        1..300,
    )
}

/// Run `ops` on a keyed limiter and on a map of the `algorithm`'s reference models for
/// `quota` (never evicted): every decision must agree, so eviction changed nothing.
fn agree<R: Rule>(
    keyed: &Keyed<u8, R, ManualClock, impl Store<u8>>,
    algorithm: Algorithm,
    quota: Quota,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut models: HashMap<u8, reference::AnyModel> = HashMap::new();
    let mut now: u64 = 1 << 40;
    let mut latest = now;
    for op in ops {
        match *op {
            // Never more than half the grace behind the latest reading.
            Op::Shift(d) => {
                now = now
                    .saturating_add_signed(d)
                    .max(latest.saturating_sub(EVICTION_GRACE_NS / 2))
            }
            Op::Acquire(k, n) => {
                let got = keyed.try_acquire_n_at(&k, n, now);
                let want = models
                    .entry(k)
                    .or_insert_with(|| reference::model(algorithm, quota))
                    .acquire(n, now);
                prop_assert_eq!(got, want, "key {} n {} at {}", k, n, now);
            }
            Op::Evict => {
                keyed.evict_idle_at(latest);
            }
        }
        latest = latest.max(now);
    }
    Ok(())
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u32..=50, 1_000_000u64..=10_000_000_000, 1u32..=8).prop_filter_map("valid", |(c, p, b)| {
        Quota::new(c, Duration::from_nanos(p))
            .ok()?
            .with_burst(b)
            .ok()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn keyed_gcra_equals_models_through_evictions(q in quota(), ops in ops()) {
        let keyed: Keyed<u8, GcraRule, ManualClock> = Keyed::with_clock(q, ManualClock::new()).unwrap();
        agree(&keyed, Algorithm::Gcra, q, &ops)?;
    }

    #[test]
    fn keyed_token_bucket_equals_models_through_evictions(q in quota(), ops in ops()) {
        let keyed: Keyed<u8, TokenBucketRule, ManualClock> = Keyed::with_clock(q, ManualClock::new()).unwrap();
        agree(&keyed, Algorithm::TokenBucket, q, &ops)?;
    }

    #[test]
    fn keyed_fixed_window_equals_models_through_evictions(q in quota(), ops in ops()) {
        // A window has no burst: the quota's count per window.
        let q = Quota::new(q.count(), q.period()).unwrap();
        let keyed: Keyed<u8, FixedWindowRule, ManualClock> = Keyed::with_clock(q, ManualClock::new()).unwrap();
        agree(&keyed, Algorithm::FixedWindow, q, &ops)?;
    }

    #[test]
    fn keyed_gcra_on_papaya_equals_models_through_evictions(q in quota(), ops in ops()) {
        let keyed: Keyed<u8, GcraRule, ManualClock, PapayaStore<u8>> =
            Keyed::with_store(q, ManualClock::new(), PapayaStore::new()).unwrap();
        agree(&keyed, Algorithm::Gcra, q, &ops)?;
    }

    #[test]
    fn keyed_token_bucket_on_papaya_equals_models_through_evictions(q in quota(), ops in ops()) {
        let keyed: Keyed<u8, TokenBucketRule, ManualClock, PapayaStore<u8>> =
            Keyed::with_store(q, ManualClock::new(), PapayaStore::new()).unwrap();
        agree(&keyed, Algorithm::TokenBucket, q, &ops)?;
    }
}

/// A flood of 2 million fresh keys with `max_keys` = 10 000: the map never holds more than
/// the bound, limited keys are never reset, and keys beyond the bound share one overflow
/// limiter. (A per-hour quota keeps every flood key busy for the whole test, so no eviction
/// frees room and the count is exact.)
#[test]
fn key_flood_is_bounded_and_never_resets_a_limited_key() {
    key_flood_is_bounded(PapayaStore::new());
}

#[test]
fn key_flood_on_dashmap_is_bounded_and_never_resets_a_limited_key() {
    key_flood_is_bounded(DashMapStore::new());
}

fn key_flood_is_bounded(store: impl Store<u64>) {
    let q = Quota::per_hour(10).unwrap();
    let clock = ManualClock::starting_at(1 << 40);
    let keyed: Keyed<u64, GcraRule, ManualClock, _> = Keyed::with_store(q, clock.clone(), store)
        .unwrap()
        .with_max_keys(10_000);
    // 100 limited clients, each exhausted.
    for k in 0..100u64 {
        keyed.try_acquire_n(&k, 10).unwrap();
        assert!(keyed.try_acquire(&k).is_err());
    }
    let mut admitted = 0u64;
    for k in 1_000..2_001_000u64 {
        if k % 1000 == 0 {
            clock.advance(Duration::from_millis(1)); // 2 s over the flood, many sweeps
        }
        admitted += u64::from(keyed.try_acquire(&k).is_ok());
        assert!(keyed.len() <= 10_000, "len {} at key {k}", keyed.len());
    }
    // 9 900 keys got a slot of their own; the rest shared one limiter of 10 per hour.
    assert_eq!(admitted, 9_900 + 10);
    for k in 0..100u64 {
        assert!(keyed.try_acquire(&k).is_err(), "limited key {k} was reset");
    }
    assert_eq!(keyed.len(), 10_000);
}

/// With a per-second quota, flood keys go idle and are evicted while the flood runs, and
/// the map still never exceeds its bound.
#[test]
fn key_flood_with_evictions_stays_bounded() {
    let clock = ManualClock::starting_at(1 << 40);
    let keyed: Keyed<u64, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(10).unwrap(), clock.clone())
            .unwrap()
            .with_max_keys(5_000);
    for k in 0..1_000_000u64 {
        if k % 100 == 0 {
            clock.advance(Duration::from_millis(1));
        }
        let _ = keyed.try_acquire(&k);
        assert!(keyed.len() <= 5_000);
    }
    // 10 s passed: everything but the last ~1.2 s of keys is idle.
    let left = keyed.len();
    keyed.evict_idle();
    assert!(keyed.len() < left || left == 0);
}

/// A limited key is never evicted while limited, even by an explicit sweep, and an idle one
/// is evicted exactly once it has been idle for the grace.
#[test]
fn eviction_waits_for_idle_plus_grace() {
    let q = Quota::per_second(1).unwrap();
    let keyed: Keyed<&str, GcraRule, ManualClock> =
        Keyed::with_clock(q, ManualClock::new()).unwrap();
    let t0 = 5_000_000_000;
    keyed.try_acquire_n_at(&"a", 1, t0).unwrap(); // TAT = t0 + 1 s
    assert_eq!(
        keyed.evict_idle_at(t0 + 1_000_000_000 + EVICTION_GRACE_NS - 1),
        0
    );
    assert_eq!(keyed.len(), 1);
    assert_eq!(
        keyed.evict_idle_at(t0 + 1_000_000_000 + EVICTION_GRACE_NS),
        1
    );
    assert_eq!(keyed.len(), 0);
}

/// Found by the `keyed_differential` fuzz target: with a burst of 2^31 or more the token
/// bucket's time field has 32 bits, and a sweep at a reading even 1 ns behind a busy key's
/// refill time took `now − grace` for a reading far ahead, saw a full bucket and evicted
/// the key, whose next request then got a full bucket. For every burst size, a sweep before
/// the bucket has been full for the grace evicts nothing, and one after it does.
#[test]
fn a_busy_token_bucket_is_not_evicted_by_a_stale_sweep() {
    for burst in [1u32 << 31, (1 << 30) + 7, 1 << 20, 10] {
        // One token per ns: a full refill takes `burst` ns.
        let q = Quota::new_with_burst(39, Duration::from_nanos(39), burst).unwrap();
        let keyed: Keyed<u8, TokenBucketRule, ManualClock> =
            Keyed::with_clock(q, ManualClock::new()).unwrap();
        let single = TokenBucket::with_clock(q, ManualClock::new()).unwrap();
        let t0: Nanos = 1 << 40;
        let half = burst.div_ceil(2);
        keyed.try_acquire_n_at(&0, half, t0).unwrap();
        single.try_acquire_n_at(half, t0).unwrap();
        // Stale and current sweeps while the bucket refills: nothing to evict.
        for at in [t0 - 1, t0 - EVICTION_GRACE_NS + 1, t0, t0 + u64::from(half)] {
            assert_eq!(
                keyed.evict_idle_at(at),
                0,
                "burst {burst}, sweep at t0 {:+}",
                at as i64 - t0 as i64
            );
        }
        assert_eq!(
            keyed.try_acquire_n_at(&0, burst, t0),
            single.try_acquire_n_at(burst, t0),
            "burst {burst}"
        );
        // Full at t0 + half; evictable from t0 + half + grace on.
        let full = t0 + u64::from(half);
        assert_eq!(keyed.evict_idle_at(full + EVICTION_GRACE_NS - 1), 0);
        assert_eq!(
            keyed.evict_idle_at(full + EVICTION_GRACE_NS),
            1,
            "burst {burst}"
        );
    }
}

/// Per-key quotas: a tenant with its own allowance applies at once to a new or idle key,
/// and to a limited key only once it has gone idle (a quota change never resets it).
#[test]
fn reconfigure_key_gives_a_key_its_own_allowance() {
    let keyed: Keyed<&str, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(1).unwrap(), ManualClock::new()).unwrap();
    keyed
        .reconfigure_key_at("big", Quota::per_second(100).unwrap(), 0)
        .unwrap();
    assert!(keyed.try_acquire_n_at(&"big", 100, 0).is_ok());
    assert_eq!(
        keyed.try_acquire_n_at(&"small", 2, 0),
        Err(Denied::ExceedsCapacity { capacity: 1 })
    );
    assert_eq!(
        keyed.try_acquire_n_at(&"big", 101, 0),
        Err(Denied::ExceedsCapacity { capacity: 100 })
    );
    // A limited key keeps its state and its old quota...
    keyed.try_acquire_n_at(&"late", 1, 0).unwrap();
    keyed
        .reconfigure_key_at("late", Quota::per_second(100).unwrap(), 0)
        .unwrap();
    assert_eq!(
        keyed
            .try_acquire_n_at(&"late", 1, 0)
            .unwrap_err()
            .retry_after(),
        Some(Duration::from_secs(1))
    );
    // ...until it has been idle for the grace: then the override applies.
    let later = 1_000_000_000 + EVICTION_GRACE_NS;
    keyed
        .reconfigure_key_at("late", Quota::per_second(100).unwrap(), later)
        .unwrap();
    assert!(keyed.try_acquire_n_at(&"late", 100, later).is_ok());
}

/// Threads on hot keys and many cold keys with a frozen clock: every key admits exactly its
/// burst in total, even while another thread sweeps.
#[test]
fn threads_many_keys_and_hot_keys() {
    threads_on_many_and_hot_keys(PapayaStore::new);
}

#[test]
fn threads_on_dashmap_many_keys_and_hot_keys() {
    threads_on_many_and_hot_keys(DashMapStore::new);
}

/// `store` makes an empty store, once for each of the two limiters.
fn threads_on_many_and_hot_keys<S: Store<u32> + Send + Sync + 'static>(store: fn() -> S) {
    let q = Quota::per_hour(1).unwrap().with_burst(50).unwrap();
    let keyed: Arc<Keyed<u32, SlidingWindowRule, ManualClock, S>> = Arc::new(
        Keyed::with_store(
            Quota::per_hour(50).unwrap(),
            ManualClock::starting_at(1 << 40),
            store(),
        )
        .unwrap(),
    );
    let gcra: Arc<Keyed<u32, GcraRule, ManualClock, S>> =
        Arc::new(Keyed::with_store(q, ManualClock::starting_at(1 << 40), store()).unwrap());
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..1_000).map(|_| AtomicU64::new(0)).collect());
    let admitted_sw: Arc<Vec<AtomicU64>> =
        Arc::new((0..1_000).map(|_| AtomicU64::new(0)).collect());
    let mut handles = Vec::new();
    for t in 0..6u32 {
        let (g, s, a, b) = (
            gcra.clone(),
            keyed.clone(),
            admitted.clone(),
            admitted_sw.clone(),
        );
        handles.push(std::thread::spawn(move || {
            for i in 0..40_000u32 {
                // Half the traffic on 4 hot keys, the rest spread over 1 000.
                let key = if i % 2 == 0 {
                    i % 4
                } else {
                    (i * 7 + t * 13) % 1_000
                };
                if g.try_acquire(&key).is_ok() {
                    a[key as usize].fetch_add(1, Ordering::Relaxed);
                }
                if s.try_acquire(&key).is_ok() {
                    b[key as usize].fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let sweeper = {
        let g = gcra.clone();
        std::thread::spawn(move || (0..200).map(|_| g.evict_idle()).sum::<usize>())
    };
    for h in handles {
        h.join().unwrap();
    }
    // With a frozen clock no charged key is idle, but a slot another thread has just
    // inserted fresh is, until its first charge: a sweep may retire it (papaya inserts, then
    // charges; dashmap does both under one shard lock), and that request then charges a new
    // slot. Harmless; the counts below show that no charged key was reset (a reset hot key
    // would admit more than its burst).
    let _retired = sweeper.join().unwrap();
    for k in 0..1_000 {
        assert!(admitted[k].load(Ordering::Relaxed) <= 50, "key {k}");
        assert!(admitted_sw[k].load(Ordering::Relaxed) <= 50, "key {k}");
    }
    for k in 0..4 {
        assert_eq!(
            admitted[k].load(Ordering::Relaxed),
            50,
            "hot key {k} admits exactly its burst"
        );
        assert_eq!(admitted_sw[k].load(Ordering::Relaxed), 50, "hot key {k}");
    }
}

/// The eviction race on real threads: in each phase the clock stands still while two threads
/// hammer 64 keys and a third sweeps; between phases the clock moves past every key's idle
/// point plus the grace, so every key starts each phase evictable and is retired while the
/// others charge it. With 2 permits per key and phase, a charge lost to a retirement (or a
/// key reset while busy) admits a third, and a charge applied twice admits only one.
/// Checked by mutation: evicting busy keys fails it on both stores, and dropping the
/// acquirers' `RETIRED` check fails it on papaya (whose retired slots stay visible until
/// removed; dashmap retires and removes under one shard lock) within the 2 000 phases.
#[test]
fn eviction_racing_acquisitions_loses_and_duplicates_no_charge() {
    eviction_races(PapayaStore::new(), false);
}

#[test]
fn eviction_on_dashmap_racing_acquisitions_loses_and_duplicates_no_charge() {
    eviction_races(DashMapStore::new(), false);
}

/// The same race with every other key given its own quota (burst 3) first: each phase, a
/// redirected key's state in the side map is evicted and created again.
#[test]
fn eviction_of_own_states_racing_acquisitions_loses_and_duplicates_no_charge() {
    eviction_races(PapayaStore::new(), true);
}

#[test]
fn eviction_of_own_states_on_dashmap_racing_acquisitions_loses_and_duplicates_no_charge() {
    eviction_races(DashMapStore::new(), true);
}

fn eviction_races(store: impl Store<u32> + Sync, overrides: bool) {
    const KEYS: u32 = 64;
    const PHASES: u64 = 2000;
    let q = Quota::per_hour(1).unwrap().with_burst(2).unwrap();
    let clock = ManualClock::starting_at(1 << 40);
    let keyed = Keyed::<u32, GcraRule, ManualClock, _>::with_store(q, clock.clone(), store)
        .unwrap()
        .with_sweep_interval(Duration::ZERO);
    let burst = |key: usize| if overrides && key % 2 == 1 { 3 } else { 2 };
    if overrides {
        for key in (1..KEYS).step_by(2) {
            keyed
                .reconfigure_key(key, q.with_burst(3).unwrap())
                .unwrap();
        }
    }
    let admitted: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let evicted = AtomicU64::new(0);
    let barrier = std::sync::Barrier::new(3);
    // Checked after the threads are joined: a panic inside the scope would leave the
    // workers waiting at the barrier.
    let mut wrong = Vec::new();
    std::thread::scope(|s| {
        for t in 0..2u32 {
            let (keyed, admitted, barrier) = (&keyed, &admitted, &barrier);
            s.spawn(move || {
                for _ in 0..PHASES {
                    barrier.wait();
                    for i in 0..KEYS * 4 {
                        let key = (i * 5 + t * 31) % KEYS;
                        if keyed.try_acquire(&key).is_ok() {
                            admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    barrier.wait();
                }
            });
        }
        for phase in 1..=PHASES {
            barrier.wait();
            for _ in 0..20 {
                evicted.fetch_add(keyed.evict_idle() as u64, Ordering::Relaxed);
            }
            barrier.wait();
            for (k, a) in admitted.iter().enumerate() {
                let got = a.load(Ordering::Relaxed);
                if got != burst(k) * phase {
                    wrong.push(format!("phase {phase}, key {k}: {got} admitted in all"));
                }
            }
            // Past every TAT (at most 2 h ahead) by more than the grace.
            clock.advance(Duration::from_secs(3 * 3600));
        }
    });
    assert!(
        wrong.is_empty(),
        "exactly a burst per key and phase: {wrong:?}"
    );
    // Redirected keys keep their entry (the redirect word) through every sweep.
    let redirected = if overrides { u64::from(KEYS) / 2 } else { 0 };
    keyed.evict_idle_at(limitcore::clock::Clock::now(&clock) + (3 << 40));
    assert_eq!(keyed.len() as u64, redirected);
    // Every key was idle at the start of each phase after the first, so sweeps found work.
    assert!(evicted.load(Ordering::Relaxed) > 0);
}

/// `reconfigure_key` racing the first requests for the same keys (frozen clock, no sweeps): every
/// key admits exactly one state's burst in all, the default's (a state was created before
/// the quota and stays, under its old quota) or its own quota's, never the two added up.
#[test]
fn reconfigure_key_racing_first_requests_gives_each_key_one_state() {
    reconfigure_key_races(PapayaStore::new());
}

#[test]
fn reconfigure_key_on_dashmap_racing_first_requests_gives_each_key_one_state() {
    reconfigure_key_races(DashMapStore::new());
}

fn reconfigure_key_races(store: impl Store<u32> + Sync) {
    const KEYS: u32 = 20_000;
    let q = Quota::per_hour(1).unwrap().with_burst(2).unwrap();
    let own = q.with_burst(5).unwrap();
    let keyed = Keyed::<u32, GcraRule, ManualClock, _>::with_store(q, ManualClock::new(), store)
        .unwrap()
        .with_sweep_interval(Duration::ZERO);
    let admitted: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            for key in 0..KEYS {
                keyed.reconfigure_key(key, own).unwrap();
            }
        });
        for t in 0..2u32 {
            let (keyed, admitted) = (&keyed, &admitted);
            s.spawn(move || {
                for i in 0..KEYS * 6 {
                    let key = (i / 6 + t * 7) % KEYS;
                    if keyed.try_acquire(&key).is_ok() {
                        admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut counts = [0u32; 2];
    for (k, a) in admitted.iter().enumerate() {
        let key = k as u32;
        let got = a.load(Ordering::Relaxed);
        // The state the key's requests ended on, and its quota.
        let quota = limitcore::KeyedRateLimiter::quota_for(&keyed, &key);
        let remaining = keyed.snapshot(&key).remaining;
        match (got, quota.burst(), remaining) {
            (2, 2, 0) => counts[0] += 1,
            (5, 5, 0) => counts[1] += 1,
            other => panic!("key {k}: (admitted, burst, remaining) = {other:?}"),
        }
    }
    assert_eq!(keyed.len() as u32, KEYS);
    // Both outcomes happen in practice: the setter runs beside the requests.
    assert!(counts[1] > 0, "{counts:?}");
}

/// A key with its own quota keeps its entry (the redirect word) when its state is evicted,
/// and gets a fresh state under its quota again; on the sliding log's locked slots too.
#[test]
fn redirected_keys_are_evicted_and_come_back_under_their_quota() {
    fn check<R: QuotaRule>(window: bool) {
        let q = Quota::per_second(2).unwrap();
        let own = if window {
            Quota::per_second(4).unwrap()
        } else {
            q.with_burst(4).unwrap()
        };
        let keyed: Keyed<u8, R, ManualClock> = Keyed::with_clock(q, ManualClock::new()).unwrap();
        keyed.reconfigure_key_at(1, own, 0).unwrap();
        assert_eq!(keyed.len(), 0);
        assert!(keyed.try_acquire_n_at(&1, 4, 0).is_ok());
        assert!(keyed.try_acquire_n_at(&1, 1, 0).is_err());
        assert!(keyed.try_acquire_n_at(&2, 2, 0).is_ok());
        assert_eq!(
            keyed.try_acquire_n_at(&2, 3, 0),
            Err(Denied::ExceedsCapacity { capacity: 2 })
        );
        assert_eq!(keyed.len(), 2);
        let later = 4_000_000_000 + EVICTION_GRACE_NS;
        // Both states evicted; key 1's redirect stays.
        assert_eq!(keyed.evict_idle_at(later), 2);
        assert_eq!(keyed.len(), 1);
        assert_eq!(keyed.snapshot_at(&1, later).remaining, 4);
        assert!(keyed.try_acquire_n_at(&1, 4, later).is_ok());
        assert!(keyed.try_acquire_n_at(&1, 1, later).is_err());
        assert_eq!(keyed.snapshot_at(&1, later).remaining, 0);
        // A new quota applies at once to an idle state, through the same redirect.
        let much_later = later + 4_000_000_000 + EVICTION_GRACE_NS;
        let bigger = if window {
            Quota::per_second(6).unwrap()
        } else {
            q.with_burst(6).unwrap()
        };
        keyed.reconfigure_key_at(1, bigger, much_later).unwrap();
        assert!(keyed.try_acquire_n_at(&1, 6, much_later).is_ok());
        assert_eq!(keyed.len(), 1);
    }
    check::<GcraRule>(false);
    check::<limitcore::rules::SlidingLogRule>(true);
}

/// A transition to the redirect word `u64::MAX − 1` is refused as never conforming
/// (`Denied::BeyondHorizon`), as one
/// to `u64::MAX` is (the contract's "clock's last nanoseconds"), where a single limiter
/// admits.
#[test]
fn a_state_equal_to_the_redirect_word_is_refused() {
    let q = Quota::per_second(1).unwrap();
    let t = q.emission_interval_ns();
    let keyed: Keyed<u8, GcraRule, ManualClock> = Keyed::with_clock(q, ManualClock::new()).unwrap();
    let single = limitcore::Gcra::with_clock(q, ManualClock::new()).unwrap();
    // From a fresh state, one permit at `now` leaves TAT `now + T`.
    let now = u64::MAX - 1 - t;
    assert_eq!(single.try_acquire_n_at(1, now), Ok(()));
    assert_eq!(
        keyed.try_acquire_n_at(&1, 1, now),
        Err(Denied::BeyondHorizon)
    );
    // One nanosecond earlier the state is a plain one.
    assert_eq!(keyed.try_acquire_n_at(&2, 1, now - 1), Ok(()));
}
