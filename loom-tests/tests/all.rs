//! Loom models of `All`'s rollback (README, model 10): two `Gcra` limits shared by 2–3
//! threads, each calling `All::try_acquire_n_at` (or a plain `try_acquire_n_at` on one
//! limit) at a frozen time, with quotas where the second limit refuses, so that the first
//! is refunded.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`). An `All` decision is up to three
//! CAS loops in a row (charge the first limit, charge the second, refund the first), so,
//! as for the sliding window's leases, bound 3 does not place every thread inside every
//! other's load→CAS windows when 3 threads each run three loops. The interleavings that
//! matter (a charge or refund of one thread between another's charge and its refund, and
//! one CAS window entered by another thread's commit) take 1–2 preemptions; the models
//! were also run with `LOOM_MAX_PREEMPTIONS=4`, and the 2-thread ones unbounded (README).
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::{All, Denied, Gcra, RateLimiter, Snapshot};
use loom_tests::{in_threads, model, permutations, quota, Outcomes, NOW, PROBES, T};
use std::sync::Arc;

type G = Gcra<ManualClock>;
type AllOf = All<Arc<G>>;

/// One request, all at [`NOW`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Req {
    /// `All::try_acquire_n_at(n, NOW)` on the `All` with this index in the model's
    /// `orders` (each `All` covers both limits, in its order).
    All(usize, u32),
    /// `try_acquire_n_at(n, NOW)` on limit `0` or `1` alone.
    Plain(usize, u32),
}

impl Req {
    fn n(self) -> u32 {
        match self {
            Req::All(_, n) | Req::Plain(_, n) => n,
        }
    }

    /// Whether an admission of this request is charged to `limit`.
    fn charges(self, limit: usize) -> bool {
        match self {
            Req::All(..) => true,
            Req::Plain(l, _) => l == limit,
        }
    }
}

/// A model's setup: the two limits' bursts, the limit orders of its `All`s, and the
/// requests the main thread makes first (all must be admitted).
#[derive(Debug, Clone, Copy)]
struct Setup {
    bursts: [u32; 2],
    orders: &'static [[usize; 2]],
    prefix: &'static [Req],
}

/// Two fresh limits on one `ManualClock` frozen at [`NOW`], and the `All`s over them.
struct World {
    limits: [Arc<G>; 2],
    alls: Vec<AllOf>,
}

impl World {
    fn new(setup: Setup) -> World {
        let clock = ManualClock::starting_at(NOW);
        let limits = setup
            .bursts
            .map(|b| Arc::new(Gcra::with_clock(quota(b), clock.clone()).unwrap()));
        let alls = setup
            .orders
            .iter()
            .map(|order| All::new(order.map(|l| limits[l].clone()).to_vec()))
            .collect();
        let world = World { limits, alls };
        for &req in setup.prefix {
            world.run(req).expect("prefix is admitted");
        }
        world
    }

    fn run(&self, req: Req) -> Result<(), Denied> {
        match req {
            Req::All(i, n) => self.alls[i].try_acquire_n_at(n, NOW),
            Req::Plain(l, n) => self.limits[l].try_acquire_n_at(n, NOW),
        }
    }

    /// Each limit's state as decisions at or after [`NOW`] see it: the TAT, with every TAT
    /// ≤ `NOW` (0 for a limit never charged, `NOW` for one charged and fully refunded)
    /// read as `NOW`, and the snapshots at the probe times from `NOW` on.
    fn state(&self) -> State {
        self.limits
            .iter()
            .map(|l| {
                let probes = PROBES.iter().filter(|&&t| t >= NOW);
                (
                    l.tat().max(NOW),
                    probes.map(|&t| l.snapshot_at(t)).collect(),
                )
            })
            .collect()
    }
}

/// A sequential execution on a fresh world: the prefix, then `reqs[order[0]]`, … Returns
/// the world and each request's result, indexed like `reqs`.
fn sequential(setup: Setup, reqs: &[Req], order: &[usize]) -> (World, Vec<Result<(), Denied>>) {
    let world = World::new(setup);
    let mut results = vec![Ok(()); reqs.len()];
    for &i in order {
        results[i] = world.run(reqs[i]);
    }
    (world, results)
}

/// The limits' state as [`World::state`] reads it.
type State = Vec<(u64, Vec<Snapshot>)>;

/// A sequential execution's outcome: each request's result, and the final state.
type Run = (Vec<Result<(), Denied>>, State);

/// The sequential executions a model compares against, computed in its first execution
/// and kept (in std `Mutex`es, which loom does not see) for the others: they do not depend
/// on the interleaving, and recomputing them would double the models' time.
#[derive(Default)]
struct Cache {
    /// Every order of the requests: each request's result and the final state.
    orders: std::sync::Mutex<Option<Arc<Vec<Run>>>>,
    /// Per admitted/denied pattern: the admitted requests alone, run in index order.
    alone: std::sync::Mutex<std::collections::HashMap<Vec<bool>, Run>>,
}

impl Cache {
    fn orders(&self, setup: Setup, reqs: &[Req]) -> Arc<Vec<Run>> {
        let mut orders = self.orders.lock().expect("not poisoned");
        orders
            .get_or_insert_with(|| {
                Arc::new(
                    permutations(reqs.len())
                        .iter()
                        .map(|order| {
                            let (world, results) = sequential(setup, reqs, order);
                            (results, world.state())
                        })
                        .collect(),
                )
            })
            .clone()
    }

    fn alone(&self, setup: Setup, reqs: &[Req], pattern: &[bool]) -> Run {
        let mut alone = self.alone.lock().expect("not poisoned");
        alone
            .entry(pattern.to_vec())
            .or_insert_with(|| {
                let admitted: Vec<Req> = reqs
                    .iter()
                    .zip(pattern)
                    .filter(|(_, &ok)| ok)
                    .map(|(&q, _)| q)
                    .collect();
                let order: Vec<usize> = (0..admitted.len()).collect();
                let (world, results) = sequential(setup, &admitted, &order);
                (results, world.state())
            })
            .clone()
    }
}

/// The model: `setup`, then one loom thread per request of `reqs`, all at the frozen time
/// [`NOW`]. Checks, in every execution:
///
/// - every denial is `RateLimited`, with a `retry_after` between 1 ns and the whole
///   demand's worth;
/// - no limit is charged more than what was admitted through it, nor less: each limit's
///   final `tat()` is exactly `NOW + admitted·T` (the prefix and the admitted requests that
///   charge it; a limit nothing was admitted through is at 0 if never charged or at `NOW`
///   if charged and refunded, both the fresh state for decisions from `NOW` on), and that
///   admitted total is within the limit's burst;
/// - the admitted requests alone, run sequentially on fresh limits, are all admitted and
///   leave exactly the concurrent final state: denied requests leave no trace;
/// - some sequential order of all the requests admits every request admitted here (no
///   interleaving admits a request no sequential order could);
/// - whether the execution is linearizable exactly (some order gives the same results,
///   retry-after included, and the same state). It need not be: a charge that is about to
///   be refunded can make a concurrent request be refused (documented on `All`: only
///   ever stricter).
///
/// Returns the outcomes (one `Y`/`N` per request) seen, and those seen in executions that
/// were not exactly linearizable.
fn check_all(name: &str, setup: Setup, reqs: &'static [Req]) -> (Outcomes, Outcomes) {
    let outcomes = Outcomes::default();
    let stricter = Outcomes::default();
    let (seen, seen_stricter) = (outcomes.clone(), stricter.clone());
    let cache = Cache::default();
    model(name, move || {
        // A std `Arc`: its counts are no loom operations, so loom does not also explore
        // where they happen (README, "Preemption bound").
        let world = Arc::new(World::new(setup));
        let results: Vec<Result<(), Denied>> = in_threads(&world, reqs, World::run);

        let demand: u32 = setup.prefix.iter().chain(reqs).map(|r| r.n()).sum();
        for r in &results {
            if let Err(denied) = r {
                let Denied::RateLimited { retry_after } = *denied else {
                    panic!("unexpected denial {denied:?}: {results:?}");
                };
                assert!(
                    !retry_after.is_zero()
                        && retry_after.as_nanos() <= u128::from(u64::from(demand) * T),
                    "retry after {retry_after:?}: {results:?}"
                );
            }
        }

        // Per limit: charged exactly what was admitted through it, within its burst.
        let admitted: Vec<Req> = setup
            .prefix
            .iter()
            .copied()
            .chain(
                reqs.iter()
                    .zip(&results)
                    .filter(|(_, r)| r.is_ok())
                    .map(|(&q, _)| q),
            )
            .collect();
        for (l, limit) in world.limits.iter().enumerate() {
            let through: u32 = admitted
                .iter()
                .filter(|q| q.charges(l))
                .map(|q| q.n())
                .sum();
            assert!(
                through <= setup.bursts[l],
                "limit {l}: {through} admitted through it, burst {}: {results:?}",
                setup.bursts[l]
            );
            let tat = limit.tat();
            if through > 0 {
                assert_eq!(
                    tat,
                    NOW + u64::from(through) * T,
                    "limit {l}: {through} admitted through it: {results:?}"
                );
            } else {
                assert!(tat == 0 || tat == NOW, "limit {l}: tat {tat}: {results:?}");
            }
        }

        // The admitted requests alone, sequentially: all admitted, the same final state.
        let pattern: Vec<bool> = results.iter().map(Result::is_ok).collect();
        let (only_results, only_state) = cache.alone(setup, reqs, &pattern);
        assert!(
            only_results.iter().all(Result::is_ok),
            "the admitted requests of {reqs:?} ({results:?}) do not all fit: {only_results:?}"
        );
        let state = world.state();
        assert_eq!(
            only_state, state,
            "denied requests left a trace: {results:?}"
        );

        // Some sequential order admits every request admitted here.
        let orders = cache.orders(setup, reqs);
        assert!(
            orders.iter().any(|(seq, _)| results
                .iter()
                .zip(seq)
                .all(|(c, s)| c.is_err() || s.is_ok())),
            "no sequential order of {reqs:?} admits all of {results:?}"
        );

        let exact = orders
            .iter()
            .any(|(seq, seq_state)| *seq == results && *seq_state == state);
        seen.record(&results);
        if !exact {
            seen_stricter.record(&results);
        }
    });
    (outcomes, stricter)
}

/// `All`s over limits 0 then 1, and 1 then 0.
const FORWARD: usize = 0;
const BACKWARD: usize = 1;
const BOTH_ORDERS: &[[usize; 2]] = &[[0, 1], [1, 0]];

// ---- One `All`, shared. ----

#[test]
fn two_threads_same_all_second_limit_refuses() {
    // Limit 0 has room for both, limit 1 for one: the second request is charged on
    // limit 0, refused by limit 1 and refunded. Always linearizable.
    let setup = Setup {
        bursts: [2, 1],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: 2 threads, [0,1], bursts [2,1], asks 1+1",
        setup,
        &[Req::All(FORWARD, 1), Req::All(FORWARD, 1)],
    );
    outcomes.assert_exactly(&["NY", "YN"]);
    stricter.assert_exactly(&[]);
}

#[test]
fn three_threads_same_all() {
    // Bursts [3, 2], asks 2, 1, 1 through [0, 1]: sequentially 2 then a 1 (the other 1 is
    // refused by limit 1 and refunded), or both 1s (the 2 is refused by limit 0, or by
    // limit 1 and refunded).
    let setup = Setup {
        bursts: [3, 2],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: 3 threads, [0,1], bursts [3,2], asks 2+1+1",
        setup,
        &[
            Req::All(FORWARD, 2),
            Req::All(FORWARD, 1),
            Req::All(FORWARD, 1),
        ],
    );
    outcomes.assert_exactly(&["NNY", "NYN", "NYY", "YNN"]);
    // 1 charged on both, 2 charged on limit 0 (full): the other 1 is refused by the 2's
    // charge, which limit 1 then refuses and refunds. Sequentially it would have fitted.
    stricter.assert_exactly(&["NNY", "NYN"]);
}

// ---- Two `All`s over the same limits in opposite orders. ----

#[test]
fn two_threads_opposite_orders() {
    // Bursts [1, 1]: sequentially exactly one is admitted. Concurrently each can charge
    // its first limit, be refused by the other's charge and be refunded: both refused.
    let setup = Setup {
        bursts: [1, 1],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: 2 threads, [0,1] and [1,0], bursts [1,1], asks 1+1",
        setup,
        &[Req::All(FORWARD, 1), Req::All(BACKWARD, 1)],
    );
    outcomes.assert_exactly(&["NN", "NY", "YN"]);
    stricter.assert_exactly(&["NN"]);
}

#[test]
fn three_threads_opposite_orders() {
    // Bursts [2, 2], three asks of 1 through [0,1], [1,0], [0,1]: sequentially two are
    // admitted and the third is refused by its first limit.
    let setup = Setup {
        bursts: [2, 2],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: 3 threads, [0,1] [1,0] [0,1], bursts [2,2], asks 1+1+1",
        setup,
        &[
            Req::All(FORWARD, 1),
            Req::All(BACKWARD, 1),
            Req::All(FORWARD, 1),
        ],
    );
    // Concurrently, one request can be refused by an in-flight charge of another that
    // is itself refused and refunded, so only one is admitted (NNY, YNN). Never none: the
    // first request to charge its second limit is admitted. Never the [1,0] one alone: it
    // needs room on limit 0, so one [0,1] request holds limit 0 and the other is refused
    // there; the holder then finds room on limit 1.
    outcomes.assert_exactly(&["NNY", "NYY", "YNN", "YNY", "YYN"]);
    stricter.assert_exactly(&["NNY", "YNN"]);
}

// ---- A plain acquisition on a shared limit racing an `All` on it. ----

#[test]
fn plain_acquire_races_all_refund() {
    // Limit 1 is full (prefix), so the `All` is always refused by it and refunds limit 0,
    // whose CAS races the plain request's on limit 0 (burst 1). Sequentially the plain
    // request is always admitted; concurrently the `All`'s in-flight charge can refuse it.
    let setup = Setup {
        bursts: [1, 1],
        orders: BOTH_ORDERS,
        prefix: &[Req::Plain(1, 1)],
    };
    let (outcomes, stricter) = check_all(
        "all: plain on limit 0 vs [0,1], limit 1 full, bursts [1,1]",
        setup,
        &[Req::Plain(0, 1), Req::All(FORWARD, 1)],
    );
    outcomes.assert_exactly(&["NN", "YN"]);
    stricter.assert_exactly(&["NN"]);
}

#[test]
fn plain_acquire_on_the_refusing_limit() {
    // Bursts [1, 1]: a plain request on limit 1 races an `All` through [0, 1]. Whichever
    // takes limit 1 first is admitted; when it is the plain one, the `All` is refused by
    // limit 1 and refunds limit 0. Always linearizable.
    let setup = Setup {
        bursts: [1, 1],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: plain on limit 1 vs [0,1], bursts [1,1]",
        setup,
        &[Req::Plain(1, 1), Req::All(FORWARD, 1)],
    );
    outcomes.assert_exactly(&["NY", "YN"]);
    stricter.assert_exactly(&[]);
}

#[test]
fn plain_acquire_and_two_alls() {
    // Bursts [2, 1]: a plain request on limit 0 and two `All`s through [0, 1]. Limit 1
    // admits one `All`; the other is refused by it and refunded, or by limit 0 if the
    // plain request and the first `All` filled it.
    let setup = Setup {
        bursts: [2, 1],
        orders: BOTH_ORDERS,
        prefix: &[],
    };
    let (outcomes, stricter) = check_all(
        "all: plain on limit 0 + 2 x [0,1], bursts [2,1]",
        setup,
        &[Req::Plain(0, 1), Req::All(FORWARD, 1), Req::All(FORWARD, 1)],
    );
    outcomes.assert_exactly(&["NNY", "NYN", "YNY", "YYN"]);
    stricter.assert_exactly(&["NNY", "NYN"]);
}
