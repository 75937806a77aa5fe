//! The fleet's bounds on a real server: the lease protocol at explicit times against an
//! exact model of the fleet, and four independent nodes (each its own thread, runtime,
//! client and connection) hammering one key in exact and leased mode, every 1 s window
//! counted from the admissions' own timestamps; in leased mode, the fair leases' target
//! (every node between 0.8 and 1.25 of an equal share over 5 s, Jain's index ≥ 0.95).

use redis_server_tests as common;

use limitcore::reference::GcraModel;
use limitcore::{KeyedRateLimiter, Quota, RateLimiter};
use limitcore_redis::{
    gcra_micros, LeaseConfig, LeaseRule, LeasedLimiter, Policy, RedisGcra, RedisMicros,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const START_US: u64 = 1_750_000_000_000_000;

/// The tests that run a fleet of threads take turns: each measures what its nodes got, and
/// on a 2-core machine another fleet's threads would take the CPU its nodes need to ask in
/// time.
static FLEETS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A node of the simulated fleet: its lease word and the lease in flight (when it
/// arrives, what Redis answered).
struct SimNode {
    word: u64,
    inflight: Option<(u64, u32, Option<Duration>)>,
}

#[tokio::test]
async fn lease_protocol_matches_an_exact_model_of_the_fleet() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let (t_us, _) = gcra_micros(&q).unwrap();
    let gcra = RedisGcra::new(redis, q, Policy::FailClosed).unwrap();
    let (nodes, l) = (4usize, 8u32);
    // Local times are ns since START_US; the rule's epoch is 0.
    let rule = LeaseRule::with_epoch(q, 0, l);
    let ttl_ns = 200_000_000;
    let mut model = GcraModel::new(q);
    let mut fleet: Vec<SimNode> = (0..nodes)
        .map(|_| SimNode {
            word: rule.fresh(),
            inflight: None,
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(0x1ea5e);
    let (mut now_us, mut admitted, mut granted_total) = (START_US, Vec::new(), 0u64);
    for _ in 0..6_000 {
        now_us += rng.gen_range(0..400);
        let local = (now_us - START_US) * 1_000;
        let i = rng.gen_range(0..nodes);
        let node = &mut fleet[i];
        // A lease whose reply has arrived is installed (or blocks the key) now.
        if let Some((arrive, g, wait)) = node.inflight {
            if arrive <= local {
                match wait {
                    None => rule.install(&mut node.word, g, arrive, arrive + ttl_ns),
                    Some(w) => rule.block(&mut node.word, arrive, arrive + w.as_nanos() as u64),
                }
                node.inflight = None;
            }
        }
        let n = rng.gen_range(1..=2);
        let taken = rule.spend(&mut node.word, local, n);
        if taken.is_ok() {
            admitted.extend(std::iter::repeat_n(now_us, n as usize));
        }
        let held = rule.cells(&node.word, local);
        let blocked = rule.blocked_until(&node.word, local).is_some();
        if node.inflight.is_none() && !blocked && held <= l / 2 {
            let want = l - held;
            let answer = gcra
                .try_take_up_to_at("lease", want, RedisMicros::new(now_us))
                .await
                .unwrap();
            // The exact model: a lease takes as many cells as conform now, up to `want`.
            let free = model.snapshot(now_us * 1_000).remaining;
            let expect = want.min(free);
            assert_eq!(answer.granted, expect, "at {now_us}");
            let wait = if expect > 0 {
                model.acquire(expect, now_us * 1_000).unwrap();
                None
            } else {
                let w = model
                    .acquire(1, now_us * 1_000)
                    .unwrap_err()
                    .retry_after()
                    .unwrap();
                assert_eq!(answer.decision.retry_after(), Some(w));
                Some(w)
            };
            granted_total += u64::from(answer.granted);
            let rtt = rng.gen_range(50_000..2_000_000);
            node.inflight = Some((local + rtt, answer.granted, wait));
        }
        // Each node owns at most L cells: held plus in flight.
        for node in &fleet {
            let flying = node.inflight.map_or(0, |(_, g, _)| g);
            assert!(rule.cells(&node.word, local) + flying <= l);
        }
    }
    let span_us = now_us - START_US;
    assert!(
        admitted.len() as u64 <= granted_total,
        "never more than granted"
    );
    assert!(
        granted_total <= common::gcra_bound(50, t_us, span_us + 1),
        "long run"
    );
    for window in [10_000, 100_000, 1_000_000] {
        let (worst, _) = common::max_in_window(&mut admitted, window);
        let bound = common::gcra_bound(50, t_us, window) + nodes as u64 * u64::from(l);
        assert!(
            worst as u64 <= bound,
            "window {window} µs: {worst} > {bound}"
        );
    }
    assert!(
        admitted.len() > 1_000,
        "the fleet was admitted: {}",
        admitted.len()
    );
}

/// What a node reports: its admissions' µs spans (the wall clock before and after the call
/// that admitted; Redis's time, exactly, in exact mode), its decisions, the cells Redis
/// granted it (leased mode).
type Report = (Vec<(u64, u64)>, u64, u64);

/// Run `nodes` threads, each with its own runtime and `Redis` connection, for `run`.
fn fleet<F, Fut>(url: String, nodes: usize, run: Duration, node: F) -> Vec<Report>
where
    F: Fn(limitcore_redis::Redis, Instant) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Report>,
{
    let node = Arc::new(node);
    let barrier = Arc::new(Barrier::new(nodes));
    let handles: Vec<_> = (0..nodes)
        .map(|_| {
            let (node, barrier, url) = (Arc::clone(&node), Arc::clone(&barrier), url.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let redis = common::connect_with(&url, common::config()).await;
                    barrier.wait();
                    node(redis, Instant::now() + run).await
                })
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn four_nodes_exact_mode_stay_within_the_gcra_bound() {
    let _turn = FLEETS.lock().unwrap_or_else(|e| e.into_inner());
    let server = common::server();
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let results = fleet(
        server.url(),
        4,
        Duration::from_millis(2_500),
        move |redis, end| async move {
            let limit = RedisGcra::new(redis, q, Policy::FailClosed).unwrap();
            let (mut times, mut decisions) = (Vec::new(), 0);
            while Instant::now() < end {
                let a = limit.try_decide("hot", 1).await.unwrap();
                decisions += 1;
                if a.decision.is_admitted() {
                    let at = a.server_time.as_micros();
                    times.push((at, at));
                }
            }
            (times, decisions, 0)
        },
    );
    let mut all: Vec<u64> = results
        .iter()
        .flat_map(|(t, _, _)| t.iter().map(|&(at, _)| at))
        .collect();
    let decisions: u64 = results.iter().map(|(_, d, _)| d).sum();
    let (worst, _) = common::max_in_window(&mut all, 1_000_000);
    let bound = common::gcra_bound(50, 1_000, 1_000_000);
    assert!(worst as u64 <= bound, "{worst} admitted in 1 s > {bound}");
    assert!(
        decisions > all.len() as u64,
        "the key was contended: {decisions} decisions"
    );
    assert!(worst > 500, "the limit was reached: {worst}");
}

#[test]
fn four_nodes_leased_mode_stay_within_gcra_plus_n_l_and_get_fair_shares() {
    let _turn = FLEETS.lock().unwrap_or_else(|e| e.into_inner());
    let server = common::server();
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let l = 16;
    let started = common::wall_us();
    let results = fleet(
        server.url(),
        4,
        Duration::from_secs(5),
        move |redis, end| async move {
            let limiter =
                LeasedLimiter::new(redis, q, LeaseConfig::new(l), Policy::FailClosed).unwrap();
            assert_eq!(limiter.max_lease(), l);
            // The hammer is synchronous on its own thread, by turns through the keyed trait
            // and through a handle on the key (the same word); the lease fetches run on
            // this runtime's worker meanwhile.
            let hammer = limiter.clone();
            let handle = limiter.key("hot");
            let hammer = std::thread::spawn(move || {
                let (mut times, mut decisions) = (Vec::new(), 0u64);
                while Instant::now() < end {
                    for i in 0..64 {
                        decisions += 1;
                        let before = common::wall_us();
                        let admitted = if i % 2 == 0 {
                            hammer.try_acquire("hot").is_ok()
                        } else {
                            handle.try_acquire().is_ok()
                        };
                        if admitted {
                            times.push((before, common::wall_us()));
                        }
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                (times, decisions)
            });
            while !hammer.is_finished() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let (times, decisions) = hammer.join().unwrap();
            assert!(limiter.leases() > 0);
            (times, decisions, limiter.granted())
        },
    );
    let ended = common::wall_us();
    let mut all: Vec<(u64, u64)> = results
        .iter()
        .flat_map(|(t, _, _)| t.iter().copied())
        .collect();
    let total = all.len() as u64;
    let granted: u64 = results.iter().map(|(_, _, g)| g).sum();
    // Each admission counted only in the windows that surely hold its span: a loaded
    // machine that holds a hammer between its decision and its reading cannot move it.
    let (worst, _) = common::max_surely_in_window(&mut all, 1_000_000);
    let bound = common::gcra_bound(50, 1_000, 1_000_000) + 4 * u64::from(l);
    assert!(worst as u64 <= bound, "{worst} admitted in 1 s > {bound}");
    // Over the whole run, never more than the exact limit (no N·L term): every admission
    // spent a granted cell, and the grants are exact GCRA admissions on Redis.
    assert!(total <= granted, "{total} admitted > {granted} granted");
    let run_bound = common::gcra_bound(50, 1_000, ended - started);
    assert!(
        granted <= run_bound,
        "{granted} granted over the run > {run_bound}"
    );
    assert!(worst > 500, "the limit was reached: {worst}");
    let decisions: u64 = results.iter().map(|(_, d, _)| d).sum();
    assert!(
        decisions > 10 * total,
        "decisions {decisions}, admitted {total}"
    );
    // Fair leases: under saturation every node gets between 0.8 and 1.25 of an equal share
    // over the 5 s, and Jain's index over the nodes is at least 0.95.
    let counts: Vec<u64> = results.iter().map(|(t, _, _)| t.len() as u64).collect();
    let (shares, jain) = common::fairness(&counts);
    assert!(
        shares.iter().all(|s| (0.8..=1.25).contains(s)) && jain >= 0.95,
        "admitted {counts:?}: shares of an equal split {shares:.3?}, Jain's index {jain:.4}"
    );
}

#[tokio::test]
async fn leased_limiter_blocks_locally_until_the_time_redis_gave() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // 10/s burst 2: after the burst, Redis's next cell is 100 ms away.
    let q: Quota = "10/s burst 2".parse().unwrap();
    let limiter =
        LeasedLimiter::new(redis.clone(), q, LeaseConfig::new(2), Policy::FailClosed).unwrap();
    let first = limiter.acquire("k", 1).await;
    assert!(first.is_admitted(), "{first:?}");
    // Spend what is held, then wait for the refusal to be installed (10 s at most: a round
    // trip or two, on a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refused = None;
    while Instant::now() < deadline {
        let asked = Instant::now();
        match limiter.try_acquire("k") {
            Ok(()) => {}
            Err(d) if limiter.refusals() > 0 => {
                // The block ends `left` after the decision, which came after `asked` (and
                // before `now`): no earlier than `asked + left`, no later than `now + left`.
                let left = d.retry_after().unwrap();
                refused = Some((asked + left, Instant::now() + left));
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    let (blocked_until, until) =
        refused.expect("Redis refused a lease and the node blocked the key");
    assert!(limiter.refusals() > 0);
    // While blocked: refused locally, no command sent. A loaded machine may hold the test
    // past the block before the 1000 calls are made: a call that returns after the block's
    // earliest end is not the block's, and the calls stop there.
    let before = redis.commands();
    for _ in 0..1_000 {
        let d = limiter.try_acquire("k");
        if Instant::now() >= blocked_until {
            break;
        }
        assert!(d.unwrap_err().retry_after().unwrap() > Duration::ZERO);
    }
    let sent = redis.commands() - before;
    assert!(
        sent <= 1,
        "blocked decisions sent {sent} commands (a heartbeat at most)"
    );
    // Never early: at the reported time, Redis itself admits one cell.
    tokio::time::sleep_until(until.into()).await;
    let exact = RedisGcra::new(redis, q, Policy::FailClosed).unwrap();
    assert!(common::admits(&exact, "k", 1).await);
}
