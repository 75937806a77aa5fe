//! Redis exact against the in-process backend on a shared trace (a real `redis-server` on
//! a free loopback port; `bash .ci/redis-deps.sh` installs it): every algorithm, both
//! modes, refused hits recorded and dropped, requests of several descriptors, checks,
//! charges past the limit, requests above the capacity and negative hits, at explicit
//! whole-µs times on one manual clock (the exact backend's script then decides at the
//! clock's time instead of Redis's `TIME`), so that no verdict depends on the machine's
//! speed. Every answer must be the same: codes, `limit_remaining`, and
//! `duration_until_reset` (the in-process backend's ns rounded up to the script's µs).

use limitcore::clock::ManualClock;
use limitcore_redis::server::RedisServer;
use limitcore_redis::{Policy, Redis, RedisConfig};
use limitcore_rls::{
    Config, Descriptor, Memory, Mode, Options, RedisExact, RefusedHits, Request, Response, Service,
    Settings, SharedClock,
};
use std::sync::Arc;
use std::time::Duration;

/// Every algorithm at 10 a second, so that a trace of minutes crosses hundreds of windows;
/// a shadow rule for the soft refusals.
const CONFIG: &str = "
domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: fixed-window}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token-bucket, burst: 4}
  - key: window
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding-window}
  - key: log
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding-log}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding-window}
";

const KEYS: [&str; 6] = ["fixed", "gcra", "bucket", "window", "log", "shadow"];

/// 2026-01-01T00:00:00Z in ns.
const EPOCH: u64 = 1_767_225_600_000_000_000;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One descriptor of the trace: a take of `n` (1–4, a charge of 5–30, or 12 above every
/// capacity), a check (0 hits) or negative hits.
fn descriptor(rng: &mut Rng) -> Descriptor {
    let key = KEYS[rng.below(KEYS.len() as u64) as usize];
    let value = if rng.below(3) == 0 { "b" } else { "a" };
    let (hits, negative) = match rng.below(20) {
        0..=9 => (1 + rng.below(4), false),
        10..=12 => (5 + rng.below(26), false),
        13 => (12, false),
        14..=16 => (0, false),
        _ => (1 + rng.below(5), true),
    };
    Descriptor {
        entries: vec![(key.into(), value.into())],
        limit: None,
        hits_addend: Some(hits),
        is_negative_hits: negative,
    }
}

/// The answer as compared: overall code, then each status's code, remaining and reset in
/// µs (rounded up: the script's resolution).
fn seen(r: &Response) -> (bool, Vec<(bool, u32, Option<u64>)>) {
    let statuses = r
        .statuses
        .iter()
        .map(|s| {
            let reset = s
                .duration_until_reset
                .map(|d| u64::try_from(d.as_nanos().div_ceil(1_000)).unwrap());
            (s.code == limitcore_rls::Code::Ok, s.limit_remaining, reset)
        })
        .collect();
    (r.overall_code == limitcore_rls::Code::Ok, statuses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_decides_on_redis_exact_as_in_process() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let clock = ManualClock::starting_at(EPOCH + 10_000_000_000);
    let shared: SharedClock = Arc::new(clock.clone());
    let config = || Config::from_str_named("d.yaml", CONFIG, &Settings::default()).unwrap();
    let config_redis = RedisConfig::default().deadline(Duration::from_secs(2));
    let mut pairs = Vec::new();
    for (i, (mode, refused_hits)) in [
        (Mode::AllOrNothing, RefusedHits::Record),
        (Mode::AllOrNothing, RefusedHits::Drop),
        (Mode::ChargeEach, RefusedHits::Record),
        (Mode::ChargeEach, RefusedHits::Drop),
    ]
    .into_iter()
    .enumerate()
    {
        let options = Options {
            mode,
            refused_hits,
            ..Options::default()
        };
        let memory = Service::new(Memory::new(shared.clone(), 10_000), options.clone());
        memory.apply(config()).unwrap();
        let redis = Redis::connect(&server.url(), config_redis.clone())
            .await
            .unwrap();
        let local = Memory::new(shared.clone(), 10_000);
        let exact = RedisExact::new(redis, Policy::Propagate, format!("p{i}:"), local)
            .with_clock(shared.clone());
        let exact = Service::new(exact, options);
        exact.apply(config()).unwrap();
        pairs.push((format!("{mode:?}/{refused_hits:?}"), memory, exact));
    }
    let mut rng = Rng(37);
    let mut t = EPOCH + 10_000_000_000;
    let (mut admitted, mut refused, mut steps) = (0u32, 0u32, 0u32);
    for step in 0..2_500 {
        // Whole µs apart: mostly within a window, sometimes at the same instant, sometimes
        // several windows later.
        t += match rng.below(10) {
            0 => 0,
            1 => 1_000 * (1 + rng.below(3_000_000)),
            _ => 1_000 * rng.below(150_000),
        };
        clock.set_nanos(t);
        let descriptors = (0..1 + rng.below(3))
            .map(|_| descriptor(&mut rng))
            .collect();
        let request = Request {
            domain: "d".into(),
            descriptors,
            hits_addend: 0,
        };
        for (name, memory, exact) in &pairs {
            let m = memory.should_rate_limit(&request).await.unwrap();
            let e = exact
                .should_rate_limit(&request)
                .await
                .unwrap_or_else(|err| panic!("{name} step {step}: {err}"));
            assert_eq!(
                seen(&e),
                seen(&m),
                "{name}, step {step} at {t}: {request:?}\nredis exact {e:?}\nin process {m:?}"
            );
            if m.overall_code == limitcore_rls::Code::Ok {
                admitted += 1;
            } else {
                refused += 1;
            }
            steps += 1;
        }
    }
    // The trace exercised both answers, in every mode.
    assert!(
        admitted > steps / 5 && refused > steps / 5,
        "{admitted} admitted, {refused} refused"
    );
}

/// On a real Redis Cluster of three `redis-server` masters on loopback (`--redis-cluster`'s
/// connection): every key of a request carries its domain's hash tag, `{domain}`, so a
/// request of several descriptors (every algorithm) is one script call in one slot (a
/// request across slots would be refused by the cluster, `CROSSSLOT`), and decides as on one
/// server: the same trace on a single server and on the cluster, at the same explicit
/// times, gets the same answers, and the domains spread over the masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_requests_keys_share_a_slot_and_decide_as_on_one_server() {
    use limitcore_redis::server::RedisCluster;
    use std::collections::{BTreeMap, BTreeSet};
    let cluster = RedisCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let single = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let clock = ManualClock::starting_at(EPOCH + 10_000_000_000);
    let shared: SharedClock = Arc::new(clock.clone());
    let domains: Vec<String> = (0..8).map(|i| format!("d{i}")).collect();
    let files: Vec<(std::path::PathBuf, String)> = domains
        .iter()
        .map(|d| {
            let text = CONFIG.replace("domain: d", &format!("domain: {d}"));
            (format!("{d}.yaml").into(), text)
        })
        .collect();
    let config = || Config::from_files(&files, &Settings::default()).unwrap();
    let redis_config = RedisConfig::default().deadline(Duration::from_secs(2));
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let on_cluster = Redis::connect_cluster(&urls, redis_config.clone())
        .await
        .unwrap();
    let on_one = Redis::connect(&single.url(), redis_config).await.unwrap();
    let exact = |redis: Redis| {
        let local = Memory::new(shared.clone(), 10_000);
        let service = Service::new(
            RedisExact::new(redis, Policy::Propagate, "c:", local).with_clock(shared.clone()),
            Options::default(),
        );
        service.apply(config()).unwrap();
        service
    };
    let (cluster_service, one_service) = (exact(on_cluster), exact(on_one));
    let mut rng = Rng(39);
    let mut t = EPOCH + 10_000_000_000;
    for step in 0..1_500 {
        t += 1_000 * rng.below(200_000);
        clock.set_nanos(t);
        let domain = domains[rng.below(domains.len() as u64) as usize].clone();
        let descriptors = (0..1 + rng.below(4))
            .map(|_| descriptor(&mut rng))
            .collect();
        let request = Request {
            domain,
            descriptors,
            hits_addend: 0,
        };
        let on_cluster = cluster_service
            .should_rate_limit(&request)
            .await
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        let on_one = one_service.should_rate_limit(&request).await.unwrap();
        assert_eq!(seen(&on_cluster), seen(&on_one), "step {step}: {request:?}");
    }
    // Where the keys went: each domain's on one master (its slot's), the domains on more
    // than one.
    let mut masters_of = BTreeMap::<&str, BTreeSet<usize>>::new();
    for (m, node) in cluster.nodes().iter().enumerate() {
        let keys = node.command(&["KEYS", "*"]).unwrap();
        for d in &domains {
            if keys.contains(&format!("{{{d}}}:")) {
                masters_of.entry(d.as_str()).or_default().insert(m);
            }
        }
    }
    assert_eq!(masters_of.len(), domains.len(), "{masters_of:?}");
    assert!(masters_of.values().all(|m| m.len() == 1), "{masters_of:?}");
    let used: BTreeSet<usize> = masters_of.values().flatten().copied().collect();
    assert!(used.len() >= 2, "8 domains on one master: {masters_of:?}");
}
