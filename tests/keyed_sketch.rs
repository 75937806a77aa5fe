//! `KeyedSketch`: never looser than one exact sliding-window counter per key (property tests
//! against `reference::SlidingWindowModel`, also with every key colliding), exact when keys do
//! not collide, no permit created by threads, and memory fixed whatever the number of keys.

use limitcore::clock::{ManualClock, Nanos};
use limitcore::reference::SlidingWindowModel;
use limitcore::{Denied, KeyedSketch, Quota, QuotaError};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Sketch = KeyedSketch<u8, ManualClock>;

#[derive(Debug, Clone)]
enum Op {
    /// Move time by this many thousandths of a period (backwards allowed, see `run`).
    Shift(i64),
    /// `n` permits for a key.
    Acquire(u8, u32),
}

/// Ops over `keys` keys, with time moving back by up to `max_back` thousandths of a period
/// at a time (0: never back).
fn ops(keys: u8, max_back: i64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (-max_back..=2_500i64).prop_map(Op::Shift),
            6 => (0..keys, 0u32..=6).prop_map(|(k, n)| Op::Acquire(k, n)),
        ],
        1..200,
    )
}

/// Counts 1..=5 (so requests of 0..=6 also exceed them), periods 1 ms..10 s.
fn quota() -> impl Strategy<Value = Quota> {
    (1u32..=5, 1_000_000u64..=10_000_000_000)
        .prop_map(|(c, p)| Quota::new(c, Duration::from_nanos(p)).unwrap())
}

fn start() -> impl Strategy<Value = Nanos> {
    prop_oneof![Just(0u64), 0..(1u64 << 62)]
}

/// The wait of a denial in ns, if it is `RateLimited` within the clock's range.
fn wait_ns(d: &Denied) -> Option<u64> {
    d.retry_after()
        .map(|r| u64::try_from(r.as_nanos()).unwrap())
}

/// The checks every decision must pass, whatever the collisions: the size rules, and a
/// `retry_after` that is the sketch's own exact wait (at `now + wait` some row admits `n`,
/// one ns earlier none does; a snapshot reads exactly the rows a decision reads).
fn check_decision(
    sketch: &Sketch,
    key: u8,
    n: u32,
    now: Nanos,
    got: &Result<(), Denied>,
) -> Result<(), TestCaseError> {
    let count = sketch.quota().count();
    if n == 0 {
        // No permits: refused only while the key's rows all lie past the limit as seen at
        // `now` (no test charges, so only a reading behind a row's window sees that), and
        // then with the exact wait until one is back within it.
        if let Err(d) = got {
            let w = wait_ns(d);
            prop_assert!(
                w.is_some_and(|w| w > 0),
                "key {} n 0 at {}: {:?}",
                key,
                now,
                d
            );
            if let Some(at) = w.and_then(|w| now.checked_add(w)) {
                prop_assert!(
                    sketch.debt_at(&key, at).is_ok(),
                    "key {} n 0 at {}: still refused after {:?}",
                    key,
                    now,
                    d
                );
                prop_assert!(
                    sketch.debt_at(&key, at - 1).is_err(),
                    "key {} n 0 at {}: {:?} too long",
                    key,
                    now,
                    d
                );
            }
        }
    } else if n > count {
        prop_assert_eq!(got, &Err(Denied::ExceedsCapacity { capacity: count }));
    } else if let Err(d) = got {
        prop_assert!(matches!(d, Denied::RateLimited { .. }), "{:?}", d);
        let wait = wait_ns(d);
        // The tests' clocks stay far below the end of the clock's range: every wait is finite.
        prop_assert!(wait.is_some(), "key {} n {} at {}: {:?}", key, n, now, d);
        if let Some(at) = wait.and_then(|w| now.checked_add(w)) {
            let w = wait.unwrap();
            prop_assert!(w > 0, "refused with a zero wait");
            prop_assert!(
                sketch.snapshot_at(&key, at).remaining >= n,
                "key {} n {} at {}: still refused after the wait {}",
                key,
                n,
                now,
                w
            );
            prop_assert!(
                sketch.snapshot_at(&key, at - 1).remaining < n,
                "key {} n {} at {}: the wait {} is too long",
                key,
                n,
                now,
                w
            );
        }
    }
    Ok(())
}

/// Run `ops` from `start`, never letting a reading lag the latest by more than 2 periods
/// (well within the stale tolerance). Each admitted request is fed to its key's exact model,
/// which must admit it too; after every step each key's `remaining` is at most the model's.
/// Returns the sketch's decisions.
fn never_looser(
    sketch: &Sketch,
    ops: &[Op],
    start: Nanos,
) -> Result<Vec<Result<(), Denied>>, TestCaseError> {
    let q = sketch.quota();
    let p = q.period_ns();
    let mut models: HashMap<u8, SlidingWindowModel> = HashMap::new();
    let (mut now, mut latest) = (start, start);
    let mut decisions = Vec::new();
    for op in ops {
        match *op {
            Op::Shift(d) => {
                let by = (i128::from(d) * i128::from(p) / 1_000) as i64;
                now = now
                    .saturating_add_signed(by)
                    .max(latest.saturating_sub(2 * p));
                latest = latest.max(now);
            }
            Op::Acquire(k, n) => {
                let got = sketch.try_acquire_n_at(&k, n, now);
                check_decision(sketch, k, n, now, &got)?;
                let model = models
                    .entry(k)
                    .or_insert_with(|| SlidingWindowModel::new(q));
                if got.is_ok() && (1..=q.count()).contains(&n) {
                    prop_assert_eq!(
                        model.acquire(n, now),
                        Ok(()),
                        "key {} n {} at {}: admitted by the sketch, refused by the exact model",
                        k,
                        n,
                        now
                    );
                }
                decisions.push(got);
            }
        }
        for (k, model) in &models {
            let ours = sketch.snapshot_at(k, now).remaining;
            prop_assert!(
                ours <= model.remaining(now),
                "key {} at {}: {} remaining, exact model {}",
                k,
                now,
                ours,
                model.remaining(now)
            );
        }
    }
    Ok(decisions)
}

/// Run `ops` with time never moving back against `want(key, n, now)`, which must give the
/// same decision (retry-after included) and the same `remaining(key, now)`.
fn equal_to(
    sketch: &Sketch,
    ops: &[Op],
    start: Nanos,
    mut want: impl FnMut(u8, u32, Nanos) -> Result<(), Denied>,
    remaining: impl Fn(u8, Nanos) -> u32,
) -> Result<(), TestCaseError> {
    let p = sketch.quota().period_ns();
    let mut now = start;
    for op in ops {
        match *op {
            Op::Shift(d) => {
                now = now.saturating_add((d.max(0) as u64) * p / 1_000);
            }
            Op::Acquire(k, n) => {
                let got = sketch.try_acquire_n_at(&k, n, now);
                prop_assert_eq!(got, want(k, n, now), "key {} n {} at {}", k, n, now);
                prop_assert_eq!(sketch.snapshot_at(&k, now).remaining, remaining(k, now));
            }
        }
    }
    Ok(())
}

fn sketch(q: Quota, width: usize, depth: usize) -> Sketch {
    KeyedSketch::with_clock(q, width, depth, ManualClock::new()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// (1) Whatever collides, whatever order of times: everything the sketch admits, the
    /// exact per-key counter admits too (fed only what the sketch admitted, so the two never
    /// diverge for a reason that is not the sketch's strictness).
    #[test]
    fn admitted_requests_are_admissible_under_the_exact_per_key_limit(
        q in quota(),
        width in prop_oneof![Just(1usize), Just(2), Just(4), Just(64)],
        depth in 1usize..=4,
        ops in ops(6, 1_500),
        start in start(),
    ) {
        never_looser(&sketch(q, width, depth), &ops, start)?;
    }

    /// (2) One key (no collision possible): exactly the exact counter's decisions, waits and
    /// snapshots, with time moving forward.
    #[test]
    fn one_key_equals_the_exact_counter(
        q in quota(),
        width in prop_oneof![Just(1usize), Just(8)],
        depth in 1usize..=4,
        ops in ops(1, 0),
        start in start(),
    ) {
        let model = std::cell::RefCell::new(SlidingWindowModel::new(q));
        equal_to(
            &sketch(q, width, depth),
            &ops,
            start,
            |_, n, now| model.borrow_mut().acquire(n, now),
            |_, now| model.borrow().remaining(now),
        )?;
    }

    /// (2) Four keys in rows of 2^16 cells (all of a key's 3 rows shared with another key:
    /// probability about 10^−13): the exact per-key counters' decisions.
    #[test]
    fn keys_that_do_not_collide_equal_their_exact_counters(
        q in quota(),
        ops in ops(4, 0),
        start in start(),
    ) {
        let models = std::cell::RefCell::new(HashMap::<u8, SlidingWindowModel>::new());
        equal_to(
            &sketch(q, 1 << 16, 3),
            &ops,
            start,
            |k, n, now| models.borrow_mut().entry(k).or_insert_with(|| SlidingWindowModel::new(q)).acquire(n, now),
            |k, now| models.borrow().get(&k).map_or(q.count(), |m| m.remaining(now)),
        )?;
    }

    /// (4) Width 1: every key shares every cell, so the sketch is one sliding window over all
    /// keys together: exactly one exact counter fed every request, and so never looser (and
    /// often stricter) than one counter per key.
    #[test]
    fn width_one_is_one_shared_counter(
        q in quota(),
        depth in 1usize..=4,
        ops in ops(4, 0),
        start in start(),
    ) {
        let shared = std::cell::RefCell::new(SlidingWindowModel::new(q));
        let s = sketch(q, 1, depth);
        equal_to(
            &s,
            &ops,
            start,
            |_, n, now| shared.borrow_mut().acquire(n, now),
            |_, now| shared.borrow().remaining(now),
        )?;
        never_looser(&sketch(q, 1, depth), &ops, start)?;
    }
}

/// (4) A collision by hand: with width 1, one key's traffic refuses another key (stricter
/// than per-key limits), with the shared counter's exact wait; never the other way round.
#[test]
fn width_one_collision_is_stricter_never_looser() {
    let q = Quota::per_second(3).unwrap();
    let s: KeyedSketch<&str, ManualClock> =
        KeyedSketch::with_clock(q, 1, 2, ManualClock::new()).unwrap();
    s.try_acquire_n(&"a", 2).unwrap();
    s.try_acquire(&"b").unwrap();
    // "b" has used 1 of its own 3, but shares its cells with "a": refused, until window 0's
    // 3 weigh ⌈3·(1 − e)⌉ ≤ 2 in window 1, e ≥ ⅓ s.
    assert_eq!(
        s.try_acquire(&"b").unwrap_err().retry_after(),
        Some(Duration::from_nanos(1_333_333_334))
    );
    assert_eq!(s.estimate_at(&"b", 0), 3);
    assert_eq!(
        s.estimate_at(&"a", 0),
        3,
        "never below a key's own count (2)"
    );
    assert!(s.try_acquire_n_at(&"b", 1, 1_333_333_334).is_ok());
}

/// (3) Threads hammering one key with a frozen clock: never more than `count` admitted, and
/// every refusal's refund lands: what is left is exactly `count − admitted`.
#[test]
fn threads_on_one_key_never_exceed_count() {
    for depth in [1, 2, 4] {
        let q = Quota::per_hour(1_000).unwrap();
        let s: Arc<KeyedSketch<u64, ManualClock>> = Arc::new(
            KeyedSketch::with_clock(q, 1 << 10, depth, ManualClock::starting_at(1 << 40)).unwrap(),
        );
        let admitted = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..8u32)
            .map(|t| {
                let (s, admitted) = (s.clone(), admitted.clone());
                std::thread::spawn(move || {
                    for i in 0..2_000u32 {
                        let n = 1 + (i + t) % 3;
                        if s.try_acquire_n(&7, n).is_ok() {
                            admitted.fetch_add(u64::from(n), Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let admitted = admitted.load(Ordering::Relaxed);
        assert!(admitted <= 1_000, "depth {depth}: admitted {admitted}");
        let left = s.snapshot(&7).remaining;
        assert_eq!(
            u64::from(left),
            1_000 - admitted,
            "depth {depth}: a refund was lost"
        );
        if left > 0 {
            s.try_acquire_n(&7, left).unwrap();
        }
        assert!(s.try_acquire(&7).is_err());
    }
}

/// (3) Threads on a few keys that collide (width 2): every key stays within its count, and
/// the cells end exactly at the admitted totals (each key's estimate is at least its own).
#[test]
fn threads_on_colliding_keys_never_exceed_count() {
    let q = Quota::per_hour(300).unwrap();
    let s: Arc<KeyedSketch<u64, ManualClock>> =
        Arc::new(KeyedSketch::with_clock(q, 2, 2, ManualClock::starting_at(1 << 40)).unwrap());
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..5).map(|_| AtomicU64::new(0)).collect());
    let handles: Vec<_> = (0..6u64)
        .map(|t| {
            let (s, admitted) = (s.clone(), admitted.clone());
            std::thread::spawn(move || {
                for i in 0..3_000u64 {
                    let key = (i * 3 + t) % 5;
                    if s.try_acquire(&key).is_ok() {
                        admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for key in 0..5u64 {
        let own = admitted[key as usize].load(Ordering::Relaxed);
        assert!(own <= 300, "key {key}: {own}");
        assert!(
            s.estimate(&key) >= own,
            "key {key}: estimate below its count"
        );
    }
}

/// (5) The memory is fixed at construction: a million keys later it is the same, and it is
/// `width × depth × 8` bytes plus the header.
#[test]
fn memory_is_independent_of_the_number_of_keys() {
    let s: KeyedSketch<u64, ManualClock> = KeyedSketch::with_clock(
        Quota::per_second(10).unwrap(),
        1 << 16,
        4,
        ManualClock::new(),
    )
    .unwrap();
    let before = s.memory_bytes();
    assert_eq!(before, (1 << 16) * 4 * 8 + s.header_bytes());
    assert!(s.header_bytes() < 512, "header {}", s.header_bytes());
    for k in 0..1_000_000u64 {
        let _ = s.try_acquire(&k);
    }
    assert_eq!(s.memory_bytes(), before);
}

/// (5) Bad sizes and counts are errors, never panics; widths round up to a power of two.
#[test]
fn bad_dimensions_are_errors() {
    let q = Quota::per_second(10).unwrap();
    let build = |w: usize, d: usize| {
        KeyedSketch::<u64, ManualClock>::with_clock(q, w, d, ManualClock::new()).map(|s| s.width())
    };
    for (w, d) in [
        (0, 1),
        (1, 0),
        (0, 0),
        (KeyedSketch::<u64>::MAX_WIDTH + 1, 1),
        (usize::MAX, 4),
        (16, KeyedSketch::<u64>::MAX_DEPTH + 1),
        (16, usize::MAX),
    ] {
        assert_eq!(
            build(w, d),
            Err(QuotaError::SketchSize { width: w, depth: d })
        );
    }
    assert_eq!(build(1, 1), Ok(1));
    assert_eq!(build(1000, KeyedSketch::<u64>::MAX_DEPTH), Ok(1024));
    let e = build(0, 3).unwrap_err().to_string();
    assert!(e.contains("width 0") && e.contains("depth 3"), "{e}");

    let too_many = Quota::per_hour(KeyedSketch::<u64>::MAX_COUNT + 1).unwrap();
    assert_eq!(
        KeyedSketch::<u64, ManualClock>::with_clock(too_many, 8, 2, ManualClock::new()).err(),
        Some(QuotaError::CountTooLarge {
            count: KeyedSketch::<u64>::MAX_COUNT + 1,
            max: KeyedSketch::<u64>::MAX_COUNT
        })
    );
    let most = Quota::per_hour(KeyedSketch::<u64>::MAX_COUNT).unwrap();
    let s = KeyedSketch::<u64, ManualClock>::with_clock(most, 8, 2, ManualClock::new()).unwrap();
    s.try_acquire_n(&1, KeyedSketch::<u64>::MAX_COUNT).unwrap();
    assert!(s.try_acquire(&1).is_err());
}

/// The size rules of every limiter: `n == 0` changes nothing, `n > count` is
/// `ExceedsCapacity` and consumes nothing.
#[test]
fn size_rules() {
    let s = sketch(Quota::per_second(3).unwrap(), 4, 2);
    assert_eq!(s.try_acquire_n_at(&1, 0, 0), Ok(()));
    assert_eq!(
        s.try_acquire_n_at(&1, 4, 0),
        Err(Denied::ExceedsCapacity { capacity: 3 })
    );
    assert_eq!(s.estimate_at(&1, 0), 0);
    s.try_acquire_n_at(&1, 3, 0).unwrap();
    assert_eq!(s.snapshot_at(&1, 0).remaining, 0);
    assert_eq!(s.snapshot_at(&1, 0).full_after, Duration::from_secs(2));
}

/// A thread preempted across a window boundary: once the key's cells are in window 1, a
/// reading from window 0 is refused until window 1 starts (the cells may have dropped what
/// the reading's window needs), where the exact counter would decide it at window 1's start.
#[test]
fn a_reading_behind_the_cells_window_waits_for_it() {
    let s = sketch(Quota::per_second(3).unwrap(), 4, 2);
    s.try_acquire_n_at(&1, 1, 1_000_000_000).unwrap();
    assert_eq!(
        s.try_acquire_n_at(&1, 1, 999_999_000),
        Err(Denied::RateLimited {
            retry_after: Duration::from_micros(1)
        })
    );
    assert_eq!(s.estimate_at(&1, 999_999_000), u64::MAX);
    assert!(s.try_acquire_n_at(&1, 2, 1_000_000_000).is_ok());
}
