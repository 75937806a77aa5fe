//! Loom models of reservations (`limitcore::Reserve`) on `LeakyBucket` and `Gcra`
//! (README, model 8).
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`).
//! A reservation is the same `cas::apply` loop as an admission, on the same word (the
//! bucket's drain time, GCRA's TAT), with a transition that also returns the delay; each
//! call also reads the clock first. So the argument of the `Gcra` models holds: 3 threads
//! all loading the word before any commits is 3 preemptions, and the rest switches at
//! thread ends, joins and the retry's back-off.
//!
//! Every thread calls through the `Reserve` / `RateLimiter` traits with the clock (a
//! `ManualClock` frozen at [`NOW`]) read inside: `reserve_n`, `reserve_n_within` or
//! `try_acquire_n`. One permit per [`T`] = 100 ns.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::{ManualClock, Nanos};
use limitcore::reference::LeakyBucketModel;
use limitcore::{Denied, Gcra, LeakyBucket, Quota, RateLimiter, Reserve};
use loom_tests::{in_threads, model, permutations, probe, quota, Outcomes, NOW, T};
use std::time::Duration;

/// One thread's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `reserve_n(n)`: no bound on the wait but the limiter's own.
    Reserve(u32),
    /// `reserve_n_within(n, max_wait ns)`.
    Within(u32, Nanos),
    /// `try_acquire_n(n)`: start now or not at all.
    Acquire(u32),
}

impl Op {
    fn n(self) -> u32 {
        match self {
            Op::Reserve(n) | Op::Within(n, _) | Op::Acquire(n) => n,
        }
    }

    /// The largest wait this call accepts, ns (the limiter's own bounds apply as well).
    fn max_wait(self) -> Nanos {
        match self {
            Op::Reserve(_) => u64::MAX,
            Op::Within(_, w) => w,
            Op::Acquire(_) => 0,
        }
    }

    /// Run it; an admission is reported as the start time, `NOW` for `try_acquire_n`.
    fn run<R: Reserve>(self, limiter: &R) -> Result<Nanos, Denied> {
        match self {
            Op::Reserve(n) => limiter.reserve_n(n).map(|r| r.start()),
            Op::Within(n, w) => limiter
                .reserve_n_within(n, Duration::from_nanos(w))
                .map(|r| r.start()),
            Op::Acquire(n) => limiter.try_acquire_n(n).map(|()| limiter.now()),
        }
    }
}

/// The reservation limiters, built the same way, with their state as a time.
trait Pacer: Reserve + Send + Sync + Sized + 'static {
    fn build(quota: Quota) -> Self;
    /// The word: `LeakyBucket`'s drain time, `Gcra`'s TAT (0 when fresh).
    fn state(&self) -> Nanos;
}

impl Pacer for LeakyBucket<ManualClock> {
    fn build(quota: Quota) -> Self {
        LeakyBucket::with_clock(quota, ManualClock::starting_at(NOW)).unwrap()
    }
    fn state(&self) -> Nanos {
        // `full_after` at NOW is the drain time minus NOW, 0 once drained (never before NOW
        // here: the models only reserve from a fresh bucket at NOW).
        let after = self.snapshot_at(NOW).full_after;
        if after.is_zero() {
            0
        } else {
            NOW + u64::try_from(after.as_nanos()).expect("small")
        }
    }
}

impl Pacer for Gcra<ManualClock> {
    fn build(quota: Quota) -> Self {
        Gcra::with_clock(quota, ManualClock::starting_at(NOW)).unwrap()
    }
    fn state(&self) -> Nanos {
        self.tat()
    }
}

/// One loom thread per op on a fresh limiter; returns it and each op's result.
fn race<P: Pacer>(burst: u32, ops: &[Op]) -> (loom::sync::Arc<P>, Vec<Result<Nanos, Denied>>) {
    let limiter = loom::sync::Arc::new(P::build(quota(burst)));
    let results = in_threads(&limiter, ops, |l: &P, op: Op| op.run(l));
    (limiter, results)
}

/// The first order of `ops` that a fresh sequential limiter turns into exactly `results`
/// (start times and retry-after included) and the concurrent final state (the word and
/// the snapshots at every probe), and, if `queue` is set, that `LeakyBucketModel` turns into
/// the same results. Panics if there is none.
fn assert_linearizable<P: Pacer>(
    burst: u32,
    ops: &[Op],
    results: &[Result<Nanos, Denied>],
    concurrent: &P,
    queue: bool,
) -> Vec<usize> {
    let state = (concurrent.state(), probe(concurrent));
    let found = permutations(ops.len()).into_iter().find(|order| {
        let seq = P::build(quota(burst));
        let mut model = LeakyBucketModel::new(quota(burst));
        let mut seq_results = vec![Ok(0); ops.len()];
        let mut model_results = vec![Ok(0); ops.len()];
        for &i in order {
            seq_results[i] = ops[i].run(&seq);
            model_results[i] = model
                .reserve(ops[i].n(), NOW, ops[i].max_wait())
                .map(|delay| NOW + delay);
        }
        seq_results == results
            && (!queue || model_results == results)
            && (seq.state(), probe(&seq)) == state
    });
    found.unwrap_or_else(|| {
        panic!("no sequential order of {ops:?} explains {results:?} and final state {state:?}")
    })
}

/// Permits admitted.
fn admitted(ops: &[Op], results: &[Result<Nanos, Denied>]) -> u32 {
    ops.iter()
        .zip(results)
        .filter(|(_, r)| r.is_ok())
        .map(|(op, _)| op.n())
        .sum()
}

fn only_rate_limited(results: &[Result<Nanos, Denied>]) {
    for r in results {
        if let Err(denied) = r {
            assert!(
                matches!(denied, Denied::RateLimited { .. }),
                "unexpected denial {denied:?}"
            );
        }
    }
}

// ---- LeakyBucket: slots. ----

/// `LeakyBucket` of capacity `capacity`, frozen at `NOW`, threads running `ops`. In every
/// interleaving:
///
/// - the admitted requests' slots tile `[NOW, NOW + admitted·T)` exactly: sorted by start,
///   the first starts at `NOW` and each starts where the previous one's `n` slots end (no
///   two reservations share a slot, none is skipped), and none ends more than `capacity`
///   slots from now;
/// - a refusal writes nothing: the drain time is exactly `NOW + admitted·T` (a refused
///   reservation, for capacity or for its `max_wait`, would have moved it); and a request is
///   refused only if it does not fit even the final queue (capacity or its wait);
/// - the execution is linearizable against a sequential `LeakyBucket` and
///   `LeakyBucketModel` (starts, retry-after, final state).
fn check_leaky(name: &str, capacity: u32, ops: &'static [Op]) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let (limiter, results) = race::<LeakyBucket<ManualClock>>(capacity, ops);
        seen.record(&results);
        only_rate_limited(&results);
        let total = admitted(ops, &results);

        let mut slots: Vec<(Nanos, u32)> = ops
            .iter()
            .zip(&results)
            .filter_map(|(op, r)| r.as_ref().ok().map(|&start| (start, op.n())))
            .collect();
        slots.sort_unstable();
        let mut next = NOW;
        for &(start, n) in &slots {
            assert_eq!(start, next, "slots {slots:?} do not tile from NOW");
            next = start + u64::from(n) * T;
        }
        assert!(
            next <= NOW + u64::from(capacity) * T,
            "past capacity: {slots:?}"
        );

        let drain = if total == 0 {
            0
        } else {
            NOW + u64::from(total) * T
        };
        assert_eq!(limiter.state(), drain, "results {results:?}");
        let backlog = u64::from(total) * T;
        for (op, r) in ops.iter().zip(&results) {
            if r.is_err() {
                let over_capacity = backlog + u64::from(op.n()) * T > u64::from(capacity) * T;
                assert!(
                    over_capacity || backlog > op.max_wait(),
                    "{op:?} refused with backlog {backlog}: {results:?}"
                );
            }
        }
        assert_linearizable(capacity, ops, &results, &*limiter, true);
    });
    outcomes
}

#[test]
fn leaky_three_reservations_fill_distinct_slots() {
    check_leaky(
        "leaky bucket: 3 × reserve_n(1), capacity 3",
        3,
        &[Op::Reserve(1), Op::Reserve(1), Op::Reserve(1)],
    )
    .assert_exactly(&["YYY"]);
}

#[test]
fn leaky_refused_for_capacity_writes_nothing() {
    // Capacity 2: two get slots NOW and NOW + T, the third is refused (retry after T) and
    // the drain time stays NOW + 2T.
    check_leaky(
        "leaky bucket: 3 × reserve_n(1), capacity 2",
        2,
        &[Op::Reserve(1), Op::Reserve(1), Op::Reserve(1)],
    )
    .assert_exactly(&["YYN", "YNY", "NYY"]);
}

#[test]
fn leaky_mixed_sizes() {
    // Capacity 3: 2 then 1 gives slots [NOW, NOW + 2T) and [NOW + 2T, NOW + 3T); 1 then 2
    // gives [NOW, NOW + T) and [NOW + T, NOW + 3T).
    check_leaky(
        "leaky bucket: reserve_n(2) vs reserve_n(1), capacity 3",
        3,
        &[Op::Reserve(2), Op::Reserve(1)],
    )
    .assert_exactly(&["YY"]);
}

#[test]
fn leaky_refused_for_max_wait_writes_nothing() {
    // Capacity 3. `try_acquire_n(1)` and `reserve_n_within(1, 0)` accept only a start now,
    // so only one of them can succeed, and only before anything is queued; the other is
    // refused for its wait (not for capacity) and must not write.
    check_leaky(
        "leaky bucket: reserve_n(1) vs try_acquire vs reserve_n_within(1, 0), capacity 3",
        3,
        &[Op::Reserve(1), Op::Acquire(1), Op::Within(1, 0)],
    )
    .assert_exactly(&["YYN", "YNY", "YNN"]);
}

// ---- Gcra: reserve_n_within racing try_acquire. ----

/// `Gcra` of burst `burst`, frozen at `NOW`. In every interleaving: the final TAT is
/// `NOW + (admitted permits)·T`, the sum of the admitted costs from the same start (a
/// reservation moves the TAT by its cost as if admitted at its start; a refusal moves it
/// not at all); and the execution is linearizable against a sequential `Gcra` (starts,
/// retry-after, TAT and snapshots).
fn check_gcra(name: &str, burst: u32, ops: &'static [Op]) -> Outcomes {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let (limiter, results) = race::<Gcra<ManualClock>>(burst, ops);
        seen.record(&results);
        only_rate_limited(&results);
        let total = admitted(ops, &results);
        let expected = if total == 0 {
            0
        } else {
            NOW + u64::from(total) * T
        };
        assert_eq!(limiter.tat(), expected, "results {results:?}");
        assert_linearizable(burst, ops, &results, &*limiter, false);
    });
    outcomes
}

#[test]
fn gcra_reservation_vs_try_acquire() {
    // Burst 2. The reservation of 2 (up to T late) first: starts now, TAT NOW + 2T, the
    // try_acquire is refused. The try_acquire first: TAT NOW + T, and the 2 conform T later:
    // reserved with delay T, TAT NOW + 3T.
    check_gcra(
        "gcra: reserve_n_within(2, T) vs try_acquire, burst 2",
        2,
        &[Op::Within(2, T), Op::Acquire(1)],
    )
    .assert_exactly(&["YY", "YN"]);
}

#[test]
fn gcra_reservations_vs_try_acquire_three_threads() {
    // Burst 2: reserve 2 within T, try_acquire 1, reserve 1 within 0.
    check_gcra(
        "gcra: reserve_n_within(2, T) vs try_acquire vs reserve_n_within(1, 0), burst 2",
        2,
        &[Op::Within(2, T), Op::Acquire(1), Op::Within(1, 0)],
    )
    .assert_exactly(&["YNN", "YYN", "YNY", "NYY"]);
}
