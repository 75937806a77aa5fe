//! The fleet's bound with a debt policy and forced charges, on a real server: the leased
//! protocol (leases, local spends, charges that spend held cells first and then charge
//! Redis, requests above the lease decided on Redis) at explicit times against the core's
//! `BudgetModel`, and four independent nodes deciding and charging on one key. What is
//! counted is what the fleet consumed (admissions plus charges), in every window.

use redis_server_tests as common;

use limitcore::reference::BudgetModel;
use limitcore::{BudgetConfig, KeyedRateLimiter, Quota, RateLimiter};
use limitcore_redis::{
    gcra_micros, LeaseConfig, LeaseRule, LeasedLimiter, Policy, RedisGcra, RedisMicros, Source,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const START_US: u64 = 1_750_000_000_000_000;

/// The stated bound: `B + ⌈(Δ + D)/T⌉ − 1 + N·L` permits consumed in any window of Δ
/// (µs), with debt `D` (µs).
fn bound(burst: u32, t_us: u64, debt_us: u64, window_us: u64, nodes: u64, l: u32) -> u64 {
    u64::from(burst) + (window_us + debt_us).div_ceil(t_us) - 1 + nodes * u64::from(l)
}

/// A node of the simulated fleet: its lease word and the lease in flight (when it
/// arrives, the cells, Redis's wait when it refused).
struct SimNode {
    word: u64,
    inflight: Option<(u64, u32, Option<Duration>)>,
}

#[tokio::test]
async fn leased_charges_and_debt_match_an_exact_model_of_the_fleet() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let debt = Duration::from_millis(100);
    let (t_us, _) = gcra_micros(&q).unwrap();
    let gcra = RedisGcra::new(redis, q, Policy::FailClosed)
        .unwrap()
        .with_max_debt(debt)
        .unwrap();
    assert_eq!(gcra.capacity(), 150);
    let (nodes, l) = (4usize, 8u32);
    // Local times are ns since START_US; the rule's epoch is 0.
    let rule = LeaseRule::with_epoch(q, 0, l);
    let ttl_ns = 200_000_000;
    let mut model = BudgetModel::new(BudgetConfig::new(q).max_debt(debt));
    let mut fleet: Vec<SimNode> = (0..nodes)
        .map(|_| SimNode {
            word: rule.fresh(),
            inflight: None,
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(0xc4a6e);
    // Every permit consumed, at its time (µs); what Redis consumed (leases, charges, requests
    // above the lease); the cells spent locally (by decisions and by charges).
    let (mut consumed, mut on_redis, mut from_cells, mut granted) = (Vec::new(), 0u64, 0u64, 0u64);
    let (mut charges, mut short, mut oversized) = (0, 0, 0);
    let mut now_us = START_US;
    for _ in 0..6_000 {
        // Mostly busy; now and then a pause long enough for the key to fill up again (its
        // backlog is at most burst + debt, 150 ms), after which a request above the lease
        // often comes first.
        let pause = rng.gen_range(0..100) == 0;
        now_us += if pause {
            rng.gen_range(150_000..400_000)
        } else {
            rng.gen_range(0..400)
        };
        let ns = now_us * 1_000;
        let local = (now_us - START_US) * 1_000;
        let i = rng.gen_range(0..nodes);
        let node = &mut fleet[i];
        if let Some((arrive, g, wait)) = node.inflight {
            if arrive <= local {
                match wait {
                    None => rule.install(&mut node.word, g, arrive, arrive + ttl_ns),
                    Some(w) => rule.block(&mut node.word, arrive, arrive + w.as_nanos() as u64),
                }
                node.inflight = None;
            }
        }
        let op = if pause && rng.gen_bool(0.5) {
            3
        } else {
            rng.gen_range(0..20)
        };
        match op {
            // A forced charge: the held cells first, then Redis for the rest (the charge
            // path of `LeasedLimiter::charge`, here with a reply that arrives at once).
            0..=2 => {
                let n = rng.gen_range(1..=30);
                let spent = rule.spend_up_to(&mut node.word, local, n);
                consumed.extend(std::iter::repeat_n(now_us, spent as usize));
                from_cells += u64::from(spent);
                if spent < n {
                    let rest = n - spent;
                    let answer = gcra
                        .try_charge_at("fleet", rest, RedisMicros::new(now_us))
                        .await
                        .unwrap();
                    let want = model.charge(rest, ns);
                    assert_eq!(answer.charged, want, "charge {rest} at {now_us}");
                    let c = answer.charged.charged;
                    consumed.extend(std::iter::repeat_n(now_us, c as usize));
                    on_redis += u64::from(c);
                    short += usize::from(want.shortfall > 0);
                    if !want.wait.is_zero() {
                        rule.block(&mut node.word, local, local + want.wait.as_nanos() as u64);
                    }
                }
                charges += 1;
            }
            // A request above the lease (acquire of n > L): the exact script on Redis, up
            // to the capacity, admitted only from a full key.
            3 => {
                let n = rng.gen_range(l + 1..=151);
                let answer = gcra
                    .try_decide_at("fleet", n, RedisMicros::new(now_us))
                    .await
                    .unwrap();
                let want = model.acquire(n, ns);
                assert_eq!(answer.decision.result, want, "n {n} at {now_us}");
                if want.is_ok() {
                    consumed.extend(std::iter::repeat_n(now_us, n as usize));
                    on_redis += u64::from(n);
                    oversized += 1;
                }
            }
            // A decision: local cells only.
            _ => {
                let n = rng.gen_range(1..=2);
                if rule.spend(&mut node.word, local, n).is_ok() {
                    consumed.extend(std::iter::repeat_n(now_us, n as usize));
                    from_cells += u64::from(n);
                }
            }
        }
        // The refill: a lease of `L − held` when at most half is held and nothing blocks.
        let held = rule.cells(&node.word, local);
        let blocked = rule.blocked_until(&node.word, local).is_some();
        if node.inflight.is_none() && !blocked && held <= l / 2 {
            let want = l - held;
            let answer = gcra
                .try_take_up_to_at("fleet", want, RedisMicros::new(now_us))
                .await
                .unwrap();
            // A lease takes as many cells as conform, never into debt.
            let expect = model.take_up_to(want, ns);
            assert_eq!(answer.granted, expect, "lease at {now_us}");
            let wait = if expect > 0 {
                None
            } else {
                let w = model.acquire(1, ns).unwrap_err().retry_after().unwrap();
                assert_eq!(answer.decision.retry_after(), Some(w));
                Some(w)
            };
            granted += u64::from(expect);
            on_redis += u64::from(expect);
            let rtt = rng.gen_range(50_000..2_000_000);
            node.inflight = Some((local + rtt, expect, wait));
        }
        // Each node owns at most L cells, held plus in flight.
        for node in &fleet {
            let flying = node.inflight.map_or(0, |(_, g, _)| g);
            assert!(rule.cells(&node.word, local) + flying <= l);
        }
    }
    let (debt_us, n) = (debt.as_micros() as u64, nodes as u64);
    // Every cell spent was granted; the fleet never consumed more than Redis did, and
    // Redis within the long-run bound (no N·L term).
    assert!(
        from_cells <= granted,
        "{from_cells} cells spent > {granted} granted"
    );
    assert!(
        consumed.len() as u64 <= on_redis,
        "consumed more than Redis charged"
    );
    let run_us = now_us - START_US + 1;
    assert!(
        on_redis <= bound(50, t_us, debt_us, run_us, 0, l),
        "long run"
    );
    let mut worst_at = Vec::new();
    for window in [1_000, 10_000, 100_000, 1_000_000] {
        let (worst, at) = common::max_in_window(&mut consumed, window);
        let most = bound(50, t_us, debt_us, window, n, l);
        assert!(
            worst as u64 <= most,
            "window {window} µs at {at}: {worst} > {most}"
        );
        worst_at.push((window, worst as u64, most));
    }
    // The bound was approached: in the busiest 100 ms the fleet consumed well past the rate
    // and the burst (the debt ran), and charges saturated.
    let (_, worst, most) = worst_at[2];
    assert!(worst > 200, "{worst_at:?}");
    assert!(worst <= most);
    assert!(
        charges > 500 && short > 100 && oversized > 10,
        "{charges} charges, {short} saturated, {oversized} requests above the lease admitted"
    );
}

/// What a node reports: every permit it consumed at its time (µs: Redis's, or the wall
/// clock's span around the local call that spent it), the cells Redis granted it, the permits Redis charged or admitted directly for it, the permits its
/// held cells covered (decisions and charges).
type Report = (Vec<(u64, u64)>, u64, u64, u64);

/// Four nodes (each its own thread, runtime, client and connection), each with a leased
/// limiter on one key under a debt policy: a synchronous hammer of decisions, a forced
/// charge every 64 decisions, a request above the lease every 512. Every permit consumed
/// is counted at its own time: a local admission and the cells a charge spent when the
/// node spent them (the wall clock, as Redis's `TIME` on this machine), what Redis charged
/// or admitted at the server's time.
#[test]
fn four_nodes_charging_and_deciding_stay_within_the_stated_bound() {
    let server = common::server();
    let url = server.url();
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let debt = Duration::from_millis(200);
    let (nodes, l) = (4usize, 16u32);
    let run = Duration::from_millis(2_500);
    let barrier = Arc::new(Barrier::new(nodes));
    let started = common::wall_us();
    let handles: Vec<_> = (0..nodes)
        .map(|seed| {
            let (barrier, url) = (Arc::clone(&barrier), url.clone());
            std::thread::spawn(move || node(url, q, debt, l, run, barrier, seed as u64))
        })
        .collect();
    let reports: Vec<Report> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ended = common::wall_us();
    let mut all: Vec<(u64, u64)> = reports.iter().flat_map(|r| r.0.iter().copied()).collect();
    let granted: u64 = reports.iter().map(|r| r.1).sum();
    let on_redis: u64 = reports.iter().map(|r| r.2).sum();
    let from_cells: u64 = reports.iter().map(|r| r.3).sum();
    let debt_us = debt.as_micros() as u64;
    assert!(
        from_cells <= granted,
        "{from_cells} cells spent > {granted} granted"
    );
    // Redis's consumption over the whole run: the leases, the charges, the requests above
    // the lease, within the long-run bound.
    let redis_total = granted + on_redis;
    let run_bound = bound(50, 1_000, debt_us, ended - started, 0, l);
    assert!(
        redis_total <= run_bound,
        "{redis_total} on Redis over the run > {run_bound}"
    );
    // Each permit counted only in the windows that surely hold its span: a loaded machine
    // that holds a node between a local spend and its reading cannot move it.
    let (worst, at) = common::max_surely_in_window(&mut all, 1_000_000);
    let most = bound(50, 1_000, debt_us, 1_000_000, nodes as u64, l);
    assert!(
        worst as u64 <= most,
        "{worst} consumed in 1 s from {at} > {most}"
    );
    assert!(worst > 1_000, "the limit was reached: {worst}");
    assert!(on_redis > 0, "charges and large requests reached Redis");
}

/// One node of [`four_nodes_charging_and_deciding_stay_within_the_stated_bound`].
fn node(
    url: String,
    q: Quota,
    debt: Duration,
    l: u32,
    run: Duration,
    barrier: Arc<Barrier>,
    seed: u64,
) -> Report {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let limiter = rt.block_on(async {
        let redis = common::connect_with(&url, common::config()).await;
        let config = LeaseConfig::new(l).max_debt(debt);
        LeasedLimiter::new(redis, q, config, Policy::FailClosed).unwrap()
    });
    assert_eq!(limiter.capacity(), 250);
    let handle = limiter.key("hot");
    let mut rng = StdRng::seed_from_u64(0xf1ee7 + seed);
    let (mut times, mut on_redis, mut from_cells) = (Vec::new(), 0u64, 0u64);
    barrier.wait();
    let end = Instant::now() + run;
    let mut i = 0u64;
    while Instant::now() < end {
        i += 1;
        if i.is_multiple_of(512) {
            // A request above the lease: one script call, admitted only from a full key.
            let n = rng.gen_range(l + 1..=120);
            let v = rt.block_on(limiter.acquire("hot", n));
            if v.is_admitted() {
                let Source::Redis { server_time } = v.source else {
                    panic!("a request above the lease is Redis's: {v:?}");
                };
                let at = server_time.as_micros();
                times.extend(std::iter::repeat_n((at, at), n as usize));
                on_redis += u64::from(n);
            }
        } else if i.is_multiple_of(64) {
            let n = rng.gen_range(1..=24);
            let before = common::wall_us();
            let c = rt.block_on(handle.charge(n));
            let spent = (before, common::wall_us());
            times.extend(std::iter::repeat_n(spent, c.from_lease as usize));
            from_cells += u64::from(c.from_lease);
            let rest = c.charged.charged - c.from_lease;
            match c.source {
                Source::Redis { server_time } => {
                    let at = server_time.as_micros();
                    times.extend(std::iter::repeat_n((at, at), rest as usize));
                    on_redis += u64::from(rest);
                }
                Source::Lease => assert_eq!(rest, 0),
                other => panic!("Redis answers: {other:?}"),
            }
            assert_eq!(c.charged.charged + c.charged.shortfall, n);
        } else {
            let before = common::wall_us();
            let admitted = if i.is_multiple_of(2) {
                limiter.try_acquire("hot").is_ok()
            } else {
                handle.try_acquire().is_ok()
            };
            if admitted {
                times.push((before, common::wall_us()));
                from_cells += 1;
            }
            if i % 64 == 63 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
    let granted = limiter.granted();
    drop(handle);
    drop(limiter);
    (times, granted, on_redis, from_cells)
}
