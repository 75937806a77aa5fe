//! Fair leases on a real server, at explicit times: the fair lease script against a model of
//! it in Rust integers (`common::fair_model`) and against the core's GCRA model for the
//! key's own limit (every grant charged to it, never more than it allows), and simulated
//! fleets driving the script: saturated nodes get equal shares, a light node keeps its
//! demand, a node alone gets the whole rate, and an idle node's share is lent.

use redis_server_tests as common;

use common::fair_model::{FairModel, FairReply};
use limitcore::reference::GcraModel;
use limitcore::Quota;
use limitcore_redis::{
    gcra_micros, Demand, FairAnswer, Policy, RedisGcra, RedisMicros, FULL_DEMAND_PPM,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

const START_US: u64 = 1_750_000_000_000_000;

/// The script's reply as the model's.
fn reply(answer: &FairAnswer) -> FairReply {
    FairReply {
        granted: answer.answer.granted,
        retry_us: answer
            .answer
            .decision
            .retry_after()
            .map_or(0, |d| d.as_micros() as u64),
        backlog_us: answer.answer.decision.state.full_after.as_micros() as u64,
        share_ppm: answer.share_ppm,
        nodes: answer.nodes,
        lent: false,
    }
}

#[tokio::test]
async fn the_fair_script_matches_its_model_and_the_keys_gcra() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let (t_us, burst) = gcra_micros(&q).unwrap();
    let gcra = RedisGcra::new(redis, q, Policy::FailClosed).unwrap();
    let mut model = FairModel::new(t_us, burst);
    let mut key_model = GcraModel::new(q);
    let nodes = ["a", "b", "c", "d", "e"];
    let horizon = Duration::from_millis(200);
    let mut rng = StdRng::seed_from_u64(0xfa1e);
    let mut now = START_US;
    let (mut grants, mut refusals, mut lent, mut lone) = (0, 0, 0, 0);
    let mut granted_at = Vec::new();
    for step in 0..4_000 {
        // Mostly busy; now and then a pause past the horizon, so that reports expire.
        now += if rng.gen_range(0..200) == 0 {
            rng.gen_range(250_000..600_000)
        } else {
            rng.gen_range(0..3_000)
        };
        let node = nodes[rng.gen_range(0..nodes.len())];
        let demand = match rng.gen_range(0..4) {
            0 => FULL_DEMAND_PPM,
            1 => rng.gen_range(1..=FULL_DEMAND_PPM),
            2 => rng.gen_range(1..=300_000),
            _ => rng.gen_range(1..=2_000),
        };
        let want = rng.gen_range(1..=16);
        let me = Demand::new(node, demand, horizon);
        let got = gcra
            .try_take_fair_at("fair", want, &me, RedisMicros::new(now))
            .await
            .unwrap();
        let expected = model.take(now, want, node, demand, horizon.as_micros() as u64);
        assert_eq!(
            reply(&got),
            FairReply {
                lent: false,
                ..expected
            },
            "step {step} at {now}: {node} wants {want}, demand {demand}"
        );
        assert_eq!(got.answer.server_time, RedisMicros::new(now));
        // The key's own GCRA: a fair lease takes no more than conforms, and is charged to it
        // as that many admissions (the plain lease's `min(want, free)` at most).
        let ns = now * 1_000;
        let free = key_model.snapshot(ns).remaining;
        assert!(got.answer.granted <= want.min(free), "step {step}");
        if got.answer.granted > 0 {
            key_model.acquire(got.answer.granted, ns).unwrap();
            grants += 1;
            lent += usize::from(expected.lent);
            lone += usize::from(expected.nodes == 1);
            granted_at.extend(std::iter::repeat_n(now, got.answer.granted as usize));
        } else {
            refusals += 1;
            // Never early: until the wait has passed this node gets nothing, asked again
            // with the same report at the same instant.
            assert!(got.answer.decision.retry_after().unwrap() > Duration::ZERO);
        }
        assert_eq!(
            got.answer.decision.state,
            key_model.snapshot(ns),
            "step {step}"
        );
    }
    // The exact bound of the key's GCRA holds on the grants (a subset of what it allowed).
    for window in [10_000, 100_000, 1_000_000] {
        let (worst, _) = common::max_in_window(&mut granted_at, window);
        let bound = common::gcra_bound(burst, t_us, window);
        assert!(worst as u64 <= bound, "window {window}: {worst} > {bound}");
    }
    assert!(
        grants > 500 && refusals > 500,
        "{grants} grants, {refusals} refusals"
    );
    assert!(lent > 0, "lending was exercised: {lent}");
    assert!(lone > 10, "a node alone was exercised: {lone}");
}

/// A simulated node: when it asks next (µs), what it was granted, and how it asks.
struct Sim {
    name: &'static str,
    next_at: u64,
    granted: u64,
    /// `None`: saturated (asks again as soon as an answer arrives, or its wait ends);
    /// `Some(every)`: asks for one cell every `every` µs (a light load).
    every: Option<u64>,
    /// Stops asking after this time (µs since the start).
    until: u64,
}

/// Drive the script at explicit times with `nodes` for `run_us`, round trips of 100 µs to
/// 2 ms: each node asks for up to 16 cells, reporting its demand (the whole rate when
/// saturated, its own rate when light). Returns what each node was granted.
async fn simulate(gcra: &RedisGcra, key: &str, nodes: &mut [Sim], run_us: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let horizon = Duration::from_millis(200);
    let (t_us, _) = gcra_micros(&gcra.quota()).unwrap();
    loop {
        let (i, at) = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.next_at < n.until)
            .map(|(i, n)| (i, n.next_at))
            .min_by_key(|&(_, at)| at)
            .map_or((usize::MAX, u64::MAX), |x| x);
        if at >= run_us {
            return;
        }
        let node = &mut nodes[i];
        let demand = match node.every {
            None => FULL_DEMAND_PPM,
            Some(every) => (t_us * 1_000_000 / every) as u32,
        };
        let want = if node.every.is_some() { 1 } else { 16 };
        let me = Demand::new(node.name, demand, horizon);
        let got = gcra
            .try_take_fair_at(key, want, &me, RedisMicros::new(START_US + at))
            .await
            .unwrap();
        node.granted += u64::from(got.answer.granted);
        let rtt = rng.gen_range(100..2_000);
        node.next_at = match (node.every, got.answer.decision.retry_after()) {
            (Some(every), _) => at + every,
            (None, Some(wait)) => at + wait.as_micros() as u64 + rtt,
            (None, None) => at + rtt,
        };
    }
}

fn sim(name: &'static str, every: Option<u64>, until: u64) -> Sim {
    Sim {
        name,
        next_at: 0,
        granted: 0,
        every,
        until,
    }
}

#[tokio::test]
async fn a_simulated_fleet_gets_max_min_fair_shares() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let gcra = RedisGcra::new(redis, q, Policy::FailClosed).unwrap();
    let run = 5_000_000;
    // At most B + ⌈5 s / T⌉ − 1 over the run, whoever asks.
    let most = common::gcra_bound(50, 1_000, run);

    // Four saturated nodes: equal shares, each within 0.8 to 1.25 of an equal split.
    let mut four: Vec<Sim> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|n| sim(n, None, u64::MAX))
        .collect();
    simulate(&gcra, "four", &mut four, run, 1).await;
    let total: u64 = four.iter().map(|n| n.granted).sum();
    assert!(total <= most && total > 4_800, "{total} of at most {most}");
    for n in &four {
        let share = n.granted as f64 * 4.0 / total as f64;
        assert!(
            (0.8..=1.25).contains(&share),
            "{}: {share:.3} of an equal split",
            n.name
        );
    }

    // One light node (100/s, below an equal split) keeps its demand; the other three split
    // the rest.
    let mut mixed = vec![
        sim("light", Some(10_000), u64::MAX),
        sim("x", None, u64::MAX),
        sim("y", None, u64::MAX),
        sim("z", None, u64::MAX),
    ];
    simulate(&gcra, "mixed", &mut mixed, run, 2).await;
    assert!(
        mixed[0].granted >= 490,
        "the light node: {}",
        mixed[0].granted
    );
    let rest: u64 = mixed[1..].iter().map(|n| n.granted).sum();
    for n in &mixed[1..] {
        let share = n.granted as f64 * 3.0 / rest as f64;
        assert!((0.8..=1.25).contains(&share), "{}: {share:.3}", n.name);
        assert!(n.granted > 1_300, "{}: {}", n.name, n.granted);
    }

    // A node alone gets the whole rate (and the burst).
    let mut alone = vec![sim("solo", None, u64::MAX)];
    simulate(&gcra, "alone", &mut alone, run, 3).await;
    assert!(alone[0].granted > 4_900, "alone: {}", alone[0].granted);

    // A node that stops asking after 100 ms: its share is lent at once (above the reserve)
    // and handed back in full when its report expires; the busy node gets nearly the whole
    // rate over the run.
    let mut idle = vec![sim("busy", None, u64::MAX), sim("gone", None, 100_000)];
    simulate(&gcra, "idle", &mut idle, run, 4).await;
    assert!(idle[0].granted > 4_800, "busy: {}", idle[0].granted);
    assert!(idle[0].granted + idle[1].granted <= most);
}
