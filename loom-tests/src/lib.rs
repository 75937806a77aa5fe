//! Loom models of limitcore's CAS protocols live in `tests/`; see `README.md` next to this
//! crate's `Cargo.toml`. This library only holds the harness they share, and only under
//! `--cfg loom`: a normal build of this crate is empty.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p loom-tests --release`.

#[cfg(loom)]
pub use harness::*;

#[cfg(loom)]
mod harness {
    use limitcore::clock::{Clock, ManualClock, Nanos};
    use limitcore::reference::{GcraModel, TokenBucketModel};
    use limitcore::{Denied, Gcra, Quota, RateLimiter, Snapshot, TokenBucket};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Preemption bound of every model in this crate: 3.
    ///
    /// Each attempt of the CAS loop (`cas::apply`) is one load (or the value a failed CAS
    /// returned) and one CAS. What can break such a loop is another thread's successful CAS
    /// landing inside a thread's load→CAS window, and entering a window takes one
    /// preemption. The worst case here, 3 threads that all load the same state before any of
    /// them commits, is A→B, B→C, C→A: 3 preemptions; every commit order after that is free,
    /// because the remaining switches happen at a thread's end, at a blocking `join`, or at
    /// the retry's back-off (`loom::hint::spin_loop`, a yield under loom), and none of those
    /// counts as a preemption. With 2 threads it takes 2. So 3 covers every interleaving of
    /// the 2–3 threads' attempts in these models.
    ///
    /// It is not loom's full state space: a higher bound also moves the main thread's
    /// bookkeeping (spawns, `Arc` counts) and, in the moving-clock models, the clock thread
    /// and the second attempts to more places. `LOOM_MAX_PREEMPTIONS=n` (n ≤ 255, loom keeps
    /// it in a `u8`) reruns every model with bound n; see the README for the runs made.
    pub const PREEMPTION_BOUND: usize = 3;

    /// Run `f` under loom with [`PREEMPTION_BOUND`] (or `LOOM_MAX_PREEMPTIONS` if set, to
    /// check a model with a higher bound), never cut short by `LOOM_MAX_PERMUTATIONS` /
    /// `LOOM_MAX_DURATION`, and print how many executions were explored.
    pub fn model<F>(name: &str, f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(
            std::env::var("LOOM_MAX_PREEMPTIONS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(PREEMPTION_BOUND),
        );
        // An exploration must always be complete (within the bound), never truncated.
        builder.max_permutations = None;
        builder.max_duration = None;
        builder.checkpoint_file = None;
        let bound = builder.preemption_bound;

        // A std atomic: invisible to loom, it survives across executions.
        let executions = Arc::new(AtomicUsize::new(0));
        let counter = executions.clone();
        let started = std::time::Instant::now();
        builder.check(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            f();
        });
        eprintln!(
            "loom model {name}: {} executions, preemption bound {bound:?}, {:.2?}",
            executions.load(Ordering::Relaxed),
            started.elapsed(),
        );
    }

    /// Emission interval of every quota in the models, ns.
    pub const T: Nanos = 100;

    /// The time the models start at (and, in the frozen-clock models, stay at), ns. Not 0,
    /// so that a fresh limiter's state (TAT 0 / stored time 0) is read from a later `now`.
    pub const NOW: Nanos = 1_000;

    /// One permit per [`T`] ns, `burst` at once.
    pub fn quota(burst: u32) -> Quota {
        Quota::new(1, Duration::from_nanos(T))
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota")
    }

    /// Times at which the models compare snapshots: behind, at and after [`NOW`]. Together
    /// they pin down a state of these small quotas completely (equal TATs give equal
    /// snapshots everywhere, and `full_after` at `NOW` is the TAT minus `NOW`).
    pub const PROBES: [Nanos; 7] = [
        NOW - 50,
        NOW,
        NOW + 1,
        NOW + T / 2,
        NOW + T,
        NOW + 2 * T,
        NOW + 4 * T,
    ];

    /// The limiters under test, built the same way.
    pub trait Limiter: RateLimiter + Sized + 'static {
        /// The reference model it must agree with.
        type Model: Model;
        /// A fresh, full limiter on `clock`.
        fn build(quota: Quota, clock: ManualClock) -> Self;
        /// The GCRA-equivalent state: the theoretical arrival time, ns.
        ///
        /// For `Gcra` this is `tat()`. For `TokenBucket` it is read through `snapshot_at`:
        /// its `full_after` at time `NOW` is `TAT − NOW` (the models never let a reading
        /// lag the stored time by anywhere near the backward tolerance).
        fn tat(&self) -> Nanos;
    }

    impl Limiter for Gcra<ManualClock> {
        type Model = GcraModel;
        fn build(quota: Quota, clock: ManualClock) -> Self {
            Gcra::with_clock(quota, clock)
        }
        fn tat(&self) -> Nanos {
            Gcra::tat(self)
        }
    }

    impl Limiter for TokenBucket<ManualClock> {
        type Model = TokenBucketModel;
        fn build(quota: Quota, clock: ManualClock) -> Self {
            TokenBucket::with_clock(quota, clock).expect("quota fits the token bucket")
        }
        fn tat(&self) -> Nanos {
            let full_after = self.snapshot_at(NOW).full_after;
            if full_after.is_zero() {
                // Full: any TAT ≤ NOW is the same state; report the one a fresh Gcra has.
                0
            } else {
                NOW + u64::try_from(full_after.as_nanos()).expect("small")
            }
        }
    }

    /// The plain reference models of `limitcore::reference`.
    pub trait Model {
        /// A full model.
        fn new(quota: Quota) -> Self;
        /// Decide `n` at `now`.
        fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied>;
        /// The state at `now`.
        fn snapshot(&self, now: Nanos) -> Snapshot;
    }

    impl Model for GcraModel {
        fn new(quota: Quota) -> Self {
            GcraModel::new(quota)
        }
        fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
            GcraModel::acquire(self, n, now)
        }
        fn snapshot(&self, now: Nanos) -> Snapshot {
            GcraModel::snapshot(self, now)
        }
    }

    impl Model for TokenBucketModel {
        fn new(quota: Quota) -> Self {
            TokenBucketModel::new(quota)
        }
        fn acquire(&mut self, n: u32, now: Nanos) -> Result<(), Denied> {
            TokenBucketModel::acquire(self, n, now)
        }
        fn snapshot(&self, now: Nanos) -> Snapshot {
            TokenBucketModel::snapshot(self, now)
        }
    }

    /// Snapshots of a limiter at every [`PROBES`] time.
    pub fn probe<L: RateLimiter>(limiter: &L) -> Vec<Snapshot> {
        PROBES.iter().map(|&t| limiter.snapshot_at(t)).collect()
    }

    /// Snapshots of a reference model at every [`PROBES`] time.
    pub fn probe_model<M: Model>(model: &M) -> Vec<Snapshot> {
        PROBES.iter().map(|&t| model.snapshot(t)).collect()
    }

    /// Every order of `0..k` (k ≤ 3 here).
    pub fn permutations(k: usize) -> Vec<Vec<usize>> {
        fn go(prefix: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
            if prefix.len() == k {
                out.push(prefix.clone());
                return;
            }
            for i in 0..k {
                if !prefix.contains(&i) {
                    prefix.push(i);
                    go(prefix, k, out);
                    prefix.pop();
                }
            }
        }
        let mut out = Vec::new();
        go(&mut Vec::new(), k, &mut out);
        out
    }

    /// A sequential execution at the frozen time [`NOW`]: `prefix` (all must be admitted),
    /// then `asks[order[0]]`, `asks[order[1]]`, … Returns the limiter and each ask's result,
    /// indexed like `asks`.
    pub fn sequential<L: Limiter>(
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
        order: &[usize],
    ) -> (L, Vec<Result<(), Denied>>) {
        let limiter = L::build(quota, ManualClock::starting_at(NOW));
        for &n in prefix {
            limiter
                .try_acquire_n_at(n, NOW)
                .expect("prefix is admitted");
        }
        let mut results = vec![Ok(()); asks.len()];
        for &i in order {
            results[i] = limiter.try_acquire_n_at(asks[i], NOW);
        }
        (limiter, results)
    }

    /// The same sequential execution on the reference model.
    pub fn sequential_model<M: Model>(
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
        order: &[usize],
    ) -> (M, Vec<Result<(), Denied>>) {
        let mut model = M::new(quota);
        for &n in prefix {
            model.acquire(n, NOW).expect("prefix is admitted");
        }
        let mut results = vec![Ok(()); asks.len()];
        for &i in order {
            results[i] = model.acquire(asks[i], NOW);
        }
        (model, results)
    }

    /// Linearizability at a frozen time: some sequential order of `asks` gives exactly the
    /// concurrent `results` (retry-after included) and the concurrent final state, on a
    /// fresh sequential limiter of the same type *and* on the reference model.
    pub fn assert_linearizable<L: Limiter>(
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
        results: &[Result<(), Denied>],
        concurrent: &L,
    ) {
        let state = (concurrent.tat(), probe(concurrent));
        let found = permutations(asks.len()).into_iter().any(|order| {
            let (seq, seq_results) = sequential::<L>(quota, prefix, asks, &order);
            let (model, model_results) = sequential_model::<L::Model>(quota, prefix, asks, &order);
            seq_results == results
                && model_results == results
                && (seq.tat(), probe(&seq)) == state
                && probe_model(&model) == state.1
        });
        assert!(
            found,
            "no sequential order of {asks:?} (after {prefix:?}) explains results {results:?} \
             and final state {state:?}"
        );
    }

    /// The concurrent part of a frozen-clock model: a fresh limiter, `prefix` admitted at
    /// [`NOW`] by the main thread, then one loom thread per entry of `asks`, each calling
    /// `try_acquire_n_at(ask, NOW)`. Returns the limiter and each thread's result.
    pub fn race_frozen<L: Limiter + Send + Sync>(
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
    ) -> (loom::sync::Arc<L>, Vec<Result<(), Denied>>) {
        let limiter = loom::sync::Arc::new(L::build(quota, ManualClock::starting_at(NOW)));
        for &n in prefix {
            limiter
                .try_acquire_n_at(n, NOW)
                .expect("prefix is admitted");
        }
        let handles: Vec<_> = asks
            .iter()
            .map(|&n| {
                let limiter = limiter.clone();
                loom::thread::spawn(move || limiter.try_acquire_n_at(n, NOW))
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("thread panicked"))
            .collect();
        (limiter, results)
    }

    /// The whole frozen-clock check (models 1 and 2 of the README): no permit created or
    /// lost, the final state is `NOW + admitted·T`, and the execution is linearizable.
    ///
    /// `expect_total`: the admitted total every interleaving must reach (`burst` minus the
    /// prefix when every order fills the limiter exactly), or `None` where it depends on the
    /// order.
    pub fn check_frozen<L: Limiter + Send + Sync>(
        name: &str,
        burst: u32,
        prefix: &'static [u32],
        asks: &'static [u32],
        expect_total: Option<u32>,
    ) {
        model(name, move || {
            let quota = quota(burst);
            let (limiter, results) = race_frozen::<L>(quota, prefix, asks);
            let before: u32 = prefix.iter().sum();
            let admitted: u32 = asks
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(&n, _)| n)
                .sum();
            // No permit created by a race.
            assert!(
                before + admitted <= burst,
                "admitted {admitted} after {before} with burst {burst}: {results:?}"
            );
            // No permit lost: a request is denied only if it does not fit what is left even
            // at the end (what is left only shrinks), and only as `RateLimited`.
            for (&n, r) in asks.iter().zip(&results) {
                if let Err(denied) = r {
                    assert!(
                        matches!(denied, Denied::RateLimited { .. }),
                        "unexpected denial {denied:?}"
                    );
                    assert!(
                        n > burst - before - admitted,
                        "ask {n} denied with {} permits left: {results:?}",
                        burst - before - admitted
                    );
                }
            }
            if let Some(total) = expect_total {
                assert_eq!(admitted, total, "results {results:?}");
            }
            // The state a sequential execution at a frozen time gives, whatever the order.
            assert_eq!(
                limiter.tat(),
                NOW + u64::from(before + admitted) * T,
                "results {results:?}"
            );
            assert_linearizable(quota, prefix, asks, &results, &*limiter);
        });
    }

    /// Model 1/2 with time moving: [`NOW`] on a clock that one thread advances by `advance`
    /// ns while two threads each make `per_thread` calls of `try_acquire_n(1)` (the clock is
    /// read inside). Every thread reads the state (GCRA-equivalent TAT) before and after
    /// each call and requires it never to go backwards; each acquiring thread then reads
    /// the clock, which is at least every time its calls used.
    ///
    /// Returns: admitted total, the largest time any acquiring thread saw, the final TAT.
    pub fn race_moving<L: Limiter + Send + Sync>(
        burst: u32,
        advance: Nanos,
        per_thread: usize,
    ) -> (u32, Nanos, Nanos) {
        let clock = ManualClock::starting_at(NOW);
        let limiter = loom::sync::Arc::new(L::build(quota(burst), clock.clone()));
        let ticker = {
            let limiter = limiter.clone();
            let clock = clock.clone();
            loom::thread::spawn(move || {
                let before = limiter.tat();
                clock.advance_nanos(advance);
                let after = limiter.tat();
                assert!(after >= before, "state moved back: {before} -> {after}");
                after
            })
        };
        let acquirers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = limiter.clone();
                let clock = clock.clone();
                loom::thread::spawn(move || {
                    let mut seen = limiter.tat();
                    let mut admitted = 0u32;
                    for _ in 0..per_thread {
                        if limiter.try_acquire_n(1).is_ok() {
                            admitted += 1;
                        }
                        let now = limiter.tat();
                        assert!(now >= seen, "state moved back: {seen} -> {now}");
                        seen = now;
                    }
                    (admitted, clock.now(), seen)
                })
            })
            .collect();
        let ticker_seen = ticker.join().expect("ticker panicked");
        let mut admitted = 0;
        let mut max_time = NOW;
        let mut max_seen_state = ticker_seen;
        for h in acquirers {
            let (a, t, s) = h.join().expect("acquirer panicked");
            admitted += a;
            max_time = max_time.max(t);
            max_seen_state = max_seen_state.max(s);
        }
        let tat = limiter.tat();
        assert!(
            tat >= max_seen_state,
            "final state {tat} behind one seen, {max_seen_state}"
        );
        assert_eq!(clock.now(), NOW + advance, "the clock lost an advance");
        // Each admission of n moves the TAT from max(TAT, now) to that plus n·T, and only
        // if the result is within burst·T of its `now` (≤ max_time): so
        // NOW + admitted·T ≤ TAT ≤ max_time + burst·T.
        if admitted > 0 {
            assert!(
                tat >= NOW + u64::from(admitted) * T,
                "tat {tat}, admitted {admitted}"
            );
            assert!(
                tat <= max_time + u64::from(burst) * T,
                "tat {tat}, max time {max_time}"
            );
        } else {
            assert_eq!(tat, 0, "nothing admitted but the state moved");
        }
        (admitted, max_time, tat)
    }

    /// The most single-permit requests the reference model `M` admits at times in
    /// `[NOW, max_time]`: all it can at `NOW`, then all it can at `max_time` (taking early
    /// and late is the greedy optimum for single permits).
    pub fn model_allowance<M: Model>(burst: u32, max_time: Nanos) -> u32 {
        let mut model = M::new(quota(burst));
        let mut admitted = 0;
        for now in [NOW, max_time] {
            while model.acquire(1, now).is_ok() {
                admitted += 1;
            }
        }
        admitted
    }
}
