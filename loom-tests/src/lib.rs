//! Loom models of limitcore's CAS (and lock) protocols live in `tests/`; see `README.md` next to this
//! crate's `Cargo.toml`. This library only holds the harness they share, and only under
//! `--cfg limitcore_loom`: a normal build of this crate is empty.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.

#[cfg(limitcore_loom)]
pub use harness::*;

#[cfg(limitcore_loom)]
mod harness {
    use limitcore::clock::{Clock, ManualClock, Nanos};
    use limitcore::reference::{self, Model};
    use limitcore::{Algorithm, Denied, Gcra, Quota, RateLimiter, Snapshot, TokenBucket};
    use limitcore_testkit::AsModel;
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
        /// Its algorithm: `reference::model(Self::ALGORITHM, quota)` is the reference model
        /// it must agree with.
        const ALGORITHM: Algorithm;
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
        const ALGORITHM: Algorithm = Algorithm::Gcra;
        fn build(quota: Quota, clock: ManualClock) -> Self {
            Gcra::with_clock(quota, clock).unwrap()
        }
        fn tat(&self) -> Nanos {
            Gcra::tat(self)
        }
    }

    impl Limiter for TokenBucket<ManualClock> {
        const ALGORITHM: Algorithm = Algorithm::TokenBucket;
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

    /// Snapshots of a limiter at every [`PROBES`] time.
    pub fn probe<L: RateLimiter>(limiter: &L) -> Vec<Snapshot> {
        probe_model(&AsModel(limiter))
    }

    /// Snapshots of a reference model (or a limiter through [`AsModel`]) at every
    /// [`PROBES`] time.
    pub fn probe_model(model: &dyn Model) -> Vec<Snapshot> {
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

    /// A sequential execution at the frozen time [`NOW`] on `subject` (a reference model,
    /// or a limiter through [`AsModel`]): `prefix` (all must be admitted), then
    /// `asks[order[0]]`, `asks[order[1]]`, …; each ask's result, indexed like `asks`.
    fn in_order(
        subject: &mut dyn Model,
        prefix: &[u32],
        asks: &[u32],
        order: &[usize],
    ) -> Vec<Result<(), Denied>> {
        let at_now = |&n: &u32| (n, NOW);
        let prefix: Vec<Ask> = prefix.iter().map(at_now).collect();
        let asks: Vec<Ask> = asks.iter().map(at_now).collect();
        replay(subject, &prefix, &asks, order)
    }

    /// A sequential execution at the frozen time [`NOW`] (see `in_order`). Returns the
    /// limiter and each ask's result, indexed like `asks`.
    pub fn sequential<L: Limiter>(
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
        order: &[usize],
    ) -> (L, Vec<Result<(), Denied>>) {
        let limiter = L::build(quota, ManualClock::starting_at(NOW));
        let results = in_order(&mut AsModel(&limiter), prefix, asks, order);
        (limiter, results)
    }

    /// The same sequential execution on the reference model of `algorithm`.
    pub fn sequential_model(
        algorithm: Algorithm,
        quota: Quota,
        prefix: &[u32],
        asks: &[u32],
        order: &[usize],
    ) -> (reference::AnyModel, Vec<Result<(), Denied>>) {
        let mut model = reference::model(algorithm, quota);
        let results = in_order(&mut model, prefix, asks, order);
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
            let (model, model_results) =
                sequential_model(L::ALGORITHM, quota, prefix, asks, &order);
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

    /// One loom thread per entry of `asks`, each running `run(&shared, ask)` on its own clone
    /// of `shared`; their results in the order of `asks`. `P` is the caller's pointer: a
    /// `loom::sync::Arc`, or a `std::sync::Arc` where the reference counts should not be loom
    /// operations (fewer executions to explore; see README, "Preemption bound").
    pub fn in_threads<P, A, T>(shared: &P, asks: &[A], run: fn(&P::Target, A) -> T) -> Vec<T>
    where
        P: std::ops::Deref + Clone + Send + 'static,
        A: Copy + Send + 'static,
        T: Send + 'static,
    {
        let handles: Vec<_> = asks
            .iter()
            .map(|&ask| {
                let shared = shared.clone();
                loom::thread::spawn(move || run(&shared, ask))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread panicked"))
            .collect()
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
        let results = in_threads(&limiter, asks, |l: &L, n| l.try_acquire_n_at(n, NOW));
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

    /// The most single-permit requests the reference model of `algorithm` admits at times
    /// in `[NOW, max_time]`: all it can at `NOW`, then all it can at `max_time` (taking
    /// early and late is the greedy optimum for single permits).
    pub fn model_allowance(algorithm: Algorithm, burst: u32, max_time: Nanos) -> u32 {
        let mut model = reference::model(algorithm, quota(burst));
        let mut admitted = 0;
        for now in [NOW, max_time] {
            while model.acquire(1, now).is_ok() {
                admitted += 1;
            }
        }
        admitted
    }

    // ---- Window limiters and reservations: requests at explicit times. ----

    /// A request at an explicit time: `(permits, now)`.
    pub type Ask = (u32, Nanos);

    /// `count` permits per `period` ns (burst `count`): the window limiters' quota.
    pub fn window_quota(count: u32, period: Nanos) -> Quota {
        Quota::new(count, Duration::from_nanos(period)).expect("valid quota")
    }

    /// The concurrent part of an explicit-time model: `limiter`, `prefix` admitted in order
    /// by the main thread, then one loom thread per entry of `asks`, each calling
    /// `try_acquire_n_at(n, now)`. Returns the limiter and each thread's result.
    pub fn race_at<L: RateLimiter + Send + Sync + 'static>(
        limiter: L,
        prefix: &[Ask],
        asks: &[Ask],
    ) -> (loom::sync::Arc<L>, Vec<Result<(), Denied>>) {
        let limiter = loom::sync::Arc::new(limiter);
        for &(n, now) in prefix {
            limiter
                .try_acquire_n_at(n, now)
                .expect("prefix is admitted");
        }
        let results = in_threads(&limiter, asks, |l: &L, (n, now)| l.try_acquire_n_at(n, now));
        (limiter, results)
    }

    /// A thread's decision and the `snapshot_at` its own reading time it took right after.
    pub type Observed = (Result<(), Denied>, Snapshot);

    /// As [`race_at`], but each thread, right after its decision, also takes
    /// `snapshot_at` its own reading time, while the other threads may still be running.
    pub fn race_at_observing<L: RateLimiter + Send + Sync + 'static>(
        limiter: L,
        prefix: &[Ask],
        asks: &[Ask],
    ) -> (loom::sync::Arc<L>, Vec<Observed>) {
        let limiter = loom::sync::Arc::new(limiter);
        for &(n, now) in prefix {
            limiter
                .try_acquire_n_at(n, now)
                .expect("prefix is admitted");
        }
        let results = in_threads(&limiter, asks, |l: &L, (n, now)| {
            let result = l.try_acquire_n_at(n, now);
            (result, l.snapshot_at(now))
        });
        (limiter, results)
    }

    /// A sequential execution at explicit times on `subject` (a reference model, or a
    /// limiter through [`AsModel`]): `prefix` (all must be admitted), then
    /// `asks[order[0]]`, `asks[order[1]]`, … Returns each ask's result, indexed like `asks`.
    pub fn replay(
        subject: &mut dyn Model,
        prefix: &[Ask],
        asks: &[Ask],
        order: &[usize],
    ) -> Vec<Result<(), Denied>> {
        for &(n, now) in prefix {
            subject.acquire(n, now).expect("prefix is admitted");
        }
        let mut results = vec![Ok(()); asks.len()];
        for &i in order {
            let (n, now) = asks[i];
            results[i] = subject.acquire(n, now);
        }
        results
    }

    /// Snapshots of a limiter at each of `probes`.
    pub fn probe_at<L: RateLimiter>(limiter: &L, probes: &[Nanos]) -> Vec<Snapshot> {
        probes.iter().map(|&t| limiter.snapshot_at(t)).collect()
    }

    /// The first sequential order of `asks` (after `prefix`) that a fresh limiter from
    /// `build` turns into exactly the concurrent `results` (retry-after included) and the
    /// concurrent final state (`snapshot_at` every probe time), or `None`.
    pub fn linearization<L: RateLimiter>(
        build: impl Fn() -> L,
        prefix: &[Ask],
        asks: &[Ask],
        results: &[Result<(), Denied>],
        concurrent: &L,
        probes: &[Nanos],
    ) -> Option<Vec<usize>> {
        let state = probe_at(concurrent, probes);
        permutations(asks.len()).into_iter().find(|order| {
            let seq = build();
            let seq_results = replay(&mut AsModel(&seq), prefix, asks, order);
            seq_results == results && probe_at(&seq, probes) == state
        })
    }

    /// Linearizability at explicit times against the limiter *and* its reference model:
    /// some sequential order of `asks` gives exactly the concurrent `results` and final state
    /// on a fresh limiter from `build` (snapshots at every probe) and on the reference model
    /// of `algorithm` (`remaining` at every probe). Returns that order.
    #[allow(clippy::too_many_arguments)]
    pub fn assert_linearizable_at<L: RateLimiter>(
        algorithm: Algorithm,
        quota: Quota,
        build: impl Fn() -> L,
        prefix: &[Ask],
        asks: &[Ask],
        results: &[Result<(), Denied>],
        concurrent: &L,
        probes: &[Nanos],
    ) -> Vec<usize> {
        let state = probe_at(concurrent, probes);
        let remaining: Vec<u32> = state.iter().map(|s| s.remaining).collect();
        let found = permutations(asks.len()).into_iter().find(|order| {
            let seq = build();
            let seq_results = replay(&mut AsModel(&seq), prefix, asks, order);
            let mut model = reference::model(algorithm, quota);
            let model_results = replay(&mut model, prefix, asks, order);
            seq_results == results
                && model_results == results
                && probe_at(&seq, probes) == state
                && probes
                    .iter()
                    .map(|&t| model.snapshot(t).remaining)
                    .collect::<Vec<_>>()
                    == remaining
        });
        found.unwrap_or_else(|| {
            panic!(
                "no sequential order of {asks:?} (after {prefix:?}) explains results \
                 {results:?} and final state {state:?}"
            )
        })
    }

    /// Permits admitted by `asks` (those whose result is `Ok`).
    pub fn admitted(asks: &[Ask], results: &[Result<(), Denied>]) -> u32 {
        asks.iter()
            .zip(results)
            .filter(|(_, r)| r.is_ok())
            .map(|(&(n, _), _)| n)
            .sum()
    }

    /// The aligned window each admitted request of `prefix` then `asks[order[..]]` is
    /// counted in by the fixed- and sliding-window rule for stale readings: its own reading's
    /// window, or the latest window an earlier admission was counted in, whichever is later
    /// (a reading behind the state's window was taken before the admission that moved it,
    /// so it is decided, and happens, in that later window). Returns `(window, n)` per
    /// admission.
    pub fn counted_windows(
        period: Nanos,
        prefix: &[Ask],
        asks: &[Ask],
        results: &[Result<(), Denied>],
        order: &[usize],
    ) -> Vec<(u64, u32)> {
        let admitted = prefix.iter().copied().chain(
            order
                .iter()
                .filter(|&&i| results[i].is_ok())
                .map(|&i| asks[i]),
        );
        let mut latest = 0;
        admitted
            .map(|(n, now)| {
                latest = latest.max(now / period);
                (latest, n)
            })
            .collect()
    }

    /// Every admitted request (`prefix` and the admitted `asks`), replayed alone on a fresh
    /// reference model of `algorithm` in the order of its reading times (ties in `prefix`-then-`asks` order), is
    /// admitted there too: the admissions satisfy the model's rule at their own times.
    ///
    /// Only meaningful where a reading taken earlier but decided later cannot be counted
    /// differently from the time order (see the callers).
    pub fn assert_admitted_in_time_order(
        algorithm: Algorithm,
        quota: Quota,
        prefix: &[Ask],
        asks: &[Ask],
        results: &[Result<(), Denied>],
    ) {
        let mut admitted: Vec<Ask> = prefix
            .iter()
            .copied()
            .chain(
                asks.iter()
                    .zip(results)
                    .filter(|(_, r)| r.is_ok())
                    .map(|(&a, _)| a),
            )
            .collect();
        admitted.sort_by_key(|&(_, now)| now);
        let mut model = reference::model(algorithm, quota);
        for &(n, now) in &admitted {
            assert_eq!(
                model.acquire(n, now),
                Ok(()),
                "{n} at {now} admitted, but not by the model in time order {admitted:?} \
                 (results {results:?})"
            );
        }
    }

    /// Permits per window in a list of `(window, n)`.
    pub fn per_window(admissions: &[(u64, u32)]) -> std::collections::BTreeMap<u64, u32> {
        let mut totals = std::collections::BTreeMap::new();
        for &(k, n) in admissions {
            *totals.entry(k).or_insert(0) += n;
        }
        totals
    }

    /// The admitted/denied patterns seen across all the executions of a model (one `bool`
    /// per thread, `true` = admitted), kept in a std `Mutex` that loom does not see, so a
    /// test can check that every outcome it expects was explored and no other occurred.
    #[derive(Debug, Clone, Default)]
    pub struct Outcomes(Arc<std::sync::Mutex<std::collections::BTreeSet<Vec<bool>>>>);

    impl Outcomes {
        /// Record one execution's results.
        pub fn record<T>(&self, results: &[Result<T, Denied>]) {
            self.record_pattern(results.iter().map(Result::is_ok).collect());
        }

        /// Record one execution's pattern directly (for outcomes that are not a `Result`,
        /// such as "the evictor removed the key").
        pub fn record_pattern(&self, pattern: Vec<bool>) {
            self.0.lock().expect("not poisoned").insert(pattern);
        }

        /// Every pattern recorded, as strings of `Y` (admitted) and `N` (denied).
        pub fn seen(&self) -> Vec<String> {
            let seen = self.0.lock().expect("not poisoned");
            seen.iter()
                .map(|p| p.iter().map(|&ok| if ok { 'Y' } else { 'N' }).collect())
                .collect()
        }

        /// Assert that exactly the patterns `expected` (`Y`/`N` strings, any order) were seen.
        pub fn assert_exactly(&self, expected: &[&str]) {
            let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
            expected.sort();
            assert_eq!(self.seen(), expected, "outcomes explored");
        }
    }
}
