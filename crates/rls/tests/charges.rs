//! No charge lost (issue 37): a cost charged after the response (Envoy's
//! `apply_on_stream_done`, Envoy Gateway's `cost.response`) arrives as a request the
//! service cannot tell from any other, so a refused descriptor records its hits past the
//! limit, and the next checks (`hits_addend: 0`) are refused until the debt is paid back.
//!
//! On the in-process backend (a manual clock) and on Redis exact (a real `redis-server` on
//! loopback; the script decides at the same explicit times), against reference models of
//! each algorithm written here in a different formulation (a bucket's content, per-window
//! counters, the whole log of entries), over 10^4 random sequences of checks, requests,
//! charges and negative hits; `--mode charge-each` against envoyproxy/ratelimit's rule
//! (a counter per window, `INCRBY` always, over iff the count after it passes the limit);
//! all or nothing: a refused request charges no descriptor that admitted it; and on Redis
//! leased, within its stated bound.

use limitcore::clock::{Clock, ManualClock};
use limitcore::Algorithm;
use limitcore_redis::server::RedisServer;
use limitcore_redis::{Policy, Redis, RedisConfig};
use limitcore_rls::{
    Code, Config, Descriptor, Memory, Mode, Options, RedisExact, RedisLeased, RefusedHits, Request,
    Response, Service, Settings, SharedClock,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// 2026-01-01T00:00:00Z in ns.
const EPOCH: u64 = 1_767_225_600_000_000_000;

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::FixedWindow,
    Algorithm::Gcra,
    Algorithm::TokenBucket,
    Algorithm::SlidingWindow,
    Algorithm::SlidingLog,
];

/// One rule per algorithm, `LIMIT` per `PERIOD_S` seconds (the token bucket with a burst
/// of 5), keyed by the algorithm's name.
const LIMIT: u64 = 20;
const PERIOD_S: u64 = 1;

fn config(unit: &str, count: u64) -> Config {
    let mut yaml = String::from("domain: c\ndescriptors:\n");
    for a in ALGORITHMS {
        let burst = if a == Algorithm::TokenBucket {
            ", burst: 5"
        } else {
            ""
        };
        yaml.push_str(&format!(
            "  - key: {a}\n    rate_limit: {{unit: {unit}, requests_per_unit: {count}, algorithm: {a}{burst}}}\n"
        ));
    }
    Config::from_str_named("c.yaml", &yaml, &Settings::default()).unwrap()
}

fn unit(seconds: u64) -> &'static str {
    match seconds {
        1 => "second",
        60 => "minute",
        _ => unreachable!(),
    }
}

/// A descriptor of rule `alg` for `value`: `hits` hits, given back if `negative`.
fn d(alg: Algorithm, value: &str, hits: u64, negative: bool) -> Descriptor {
    Descriptor {
        entries: vec![(alg.to_string(), value.into())],
        limit: None,
        hits_addend: Some(hits),
        is_negative_hits: negative,
    }
}

fn request(descriptors: Vec<Descriptor>) -> Request {
    Request {
        domain: "c".into(),
        descriptors,
        hits_addend: 0,
    }
}

fn ok(r: &Response) -> bool {
    r.overall_code == Code::Ok
}

/// The backends a test runs on: in process, and Redis exact at the same clock's times.
enum Place {
    Memory,
    Exact,
}

struct Bench {
    clock: ManualClock,
    _server: Option<RedisServer>,
    services: Vec<(String, Service)>,
}

/// `count` per `seconds` on every algorithm, in every mode and refused-hits setting
/// given, on `places`.
async fn bench(places: &[Place], modes: &[(Mode, RefusedHits)], seconds: u64, count: u64) -> Bench {
    let clock = ManualClock::starting_at(EPOCH + 10_000_000_000);
    let shared: SharedClock = Arc::new(clock.clone());
    let server = places
        .iter()
        .any(|p| matches!(p, Place::Exact))
        .then(|| RedisServer::start().unwrap_or_else(|e| panic!("{e}")));
    let mut services = Vec::new();
    for (i, &(mode, refused_hits)) in modes.iter().enumerate() {
        let options = Options {
            mode,
            refused_hits,
            ..Options::default()
        };
        for place in places {
            let (name, service) = match place {
                Place::Memory => (
                    "memory",
                    Service::new(Memory::new(shared.clone(), 100_000), options.clone()),
                ),
                Place::Exact => {
                    let url = server.as_ref().unwrap().url();
                    let redis = Redis::connect(
                        &url,
                        RedisConfig::default().deadline(Duration::from_secs(2)),
                    )
                    .await
                    .unwrap();
                    let local = Memory::new(shared.clone(), 100_000);
                    let exact = RedisExact::new(redis, Policy::Propagate, format!("m{i}:"), local)
                        .with_clock(shared.clone());
                    ("redis-exact", Service::new(exact, options.clone()))
                }
            };
            service.apply(config(unit(seconds), count)).unwrap();
            services.push((format!("{name} {mode:?} {refused_hits:?}"), service));
        }
    }
    Bench {
        clock,
        _server: server,
        services,
    }
}

const BOTH_MODES: [(Mode, RefusedHits); 2] = [
    (Mode::AllOrNothing, RefusedHits::Record),
    (Mode::ChargeEach, RefusedHits::Record),
];

/// The trace: `1000/minute`; a check, a charge of 900, a charge of 200 with 100
/// left (refused, and recorded), and the next check refused: 1,100 used, the next request
/// not admitted. With `--refused-hits drop` the 200 are not recorded and the next check
/// is admitted (the pure request semantics, for deployments that never charge after the
/// response).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_past_the_limit_is_recorded_and_the_next_check_refused() {
    let modes = [
        (Mode::AllOrNothing, RefusedHits::Record),
        (Mode::ChargeEach, RefusedHits::Record),
        (Mode::AllOrNothing, RefusedHits::Drop),
        (Mode::ChargeEach, RefusedHits::Drop),
    ];
    let b = bench(&[Place::Memory, Place::Exact], &modes, 60, 1000).await;
    for (name, service) in &b.services {
        for alg in ALGORITHMS {
            let record = name.ends_with("Record");
            let one = |hits| request(vec![d(alg, "tenant", hits, false)]);
            let r = service.should_rate_limit(&one(0)).await.unwrap();
            assert!(ok(&r), "{name} {alg}: the first check");
            let r = service.should_rate_limit(&one(900)).await.unwrap();
            let burst = if alg == Algorithm::TokenBucket {
                5
            } else {
                1000
            };
            if burst < 900 {
                // The token bucket's burst of 5 refuses 900 at once: recorded all the same.
                assert!(!ok(&r), "{name} {alg}: 900 above the burst");
            } else {
                assert!(ok(&r), "{name} {alg}: 900 of 1000");
                assert_eq!(r.statuses[0].limit_remaining, 100, "{name} {alg}");
            }
            let r = service.should_rate_limit(&one(200)).await.unwrap();
            assert!(!ok(&r), "{name} {alg}: 200 with 100 left");
            let left = match (record, burst < 900) {
                (true, _) => 0,
                (false, true) => 5,
                (false, false) => 100,
            };
            assert_eq!(r.statuses[0].limit_remaining, left, "{name} {alg}");
            let next = service.should_rate_limit(&one(0)).await.unwrap();
            if record {
                assert!(
                    !ok(&next),
                    "{name} {alg}: 1,100 used: the next check refused"
                );
                let wait = next.statuses[0].duration_until_reset.unwrap();
                assert!(wait > Duration::ZERO, "{name} {alg}: a wait");
                let request = service.should_rate_limit(&one(1)).await.unwrap();
                assert!(!ok(&request), "{name} {alg}: and the next request");
            } else if burst >= 900 {
                assert!(
                    ok(&next),
                    "{name} {alg}: dropped, 900 used: the check admitted"
                );
            }
        }
        b.clock.advance(Duration::from_secs(3_600));
    }
}

/// A reload that changes the limit keeps a debt: `1000/minute`, 1,100 recorded (900, then
/// 200 refused and recorded), then the limit raised to `2000/minute`. GCRA carries the
/// whole 1,100 (900 more fit and not one more); the token bucket (burst 5) stays in debt
/// (its next check refused); the windows and the log carry at least one permit past the
/// limit (their count past it is not readable by the new limit), so 1,000 more are refused.
/// Carrying only up to the old capacity (1,000) admitted the one, the 1,000 and the token
/// bucket's check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_a_key_s_debt() {
    let b = bench(&[Place::Memory], &BOTH_MODES, 60, 1000).await;
    for (name, service) in &b.services {
        for alg in ALGORITHMS {
            let one = |hits| request(vec![d(alg, "tenant", hits, false)]);
            service.should_rate_limit(&one(900)).await.unwrap();
            let r = service.should_rate_limit(&one(200)).await.unwrap();
            assert!(!ok(&r), "{name} {alg}: 200 with 100 left");
        }
        service.apply(config("minute", 2000)).unwrap();
        for alg in ALGORITHMS {
            let one = |hits| request(vec![d(alg, "tenant", hits, false)]);
            if alg == Algorithm::TokenBucket {
                let next = service.should_rate_limit(&one(0)).await.unwrap();
                assert!(!ok(&next), "{name} {alg}: still in debt after the reload");
            } else if alg == Algorithm::Gcra {
                let r = service.should_rate_limit(&one(900)).await.unwrap();
                assert!(ok(&r), "{name} {alg}: exactly 1,100 carried, 900 fit");
                let r = service.should_rate_limit(&one(1)).await.unwrap();
                assert!(!ok(&r), "{name} {alg}: and not one more");
            } else {
                let r = service.should_rate_limit(&one(1000)).await.unwrap();
                assert!(
                    !ok(&r),
                    "{name} {alg}: at least 1,001 carried, 1,000 refused"
                );
            }
        }
        b.clock.advance(Duration::from_secs(3_600));
    }
}

/// A reference model of one key of one algorithm, in plain `i128` µs arithmetic, written in
/// a different formulation from the core's rules: GCRA as the continuous-state leaky
/// bucket (its content and the last time it was updated), the windows as counters per
/// window, the sliding log as the whole multiset of its entries.
#[derive(Debug, Clone)]
struct Model {
    alg: Algorithm,
    period: i128,
    count: i128,
    burst: i128,
    /// GCRA: the bucket's content (µs) at `last`.
    content: i128,
    last: i128,
    /// The windows: count per window number.
    windows: HashMap<i128, i128>,
    /// The sliding log: every entry's time, in order.
    log: Vec<i128>,
}

impl Model {
    fn new(alg: Algorithm, period_us: i128, count: i128) -> Model {
        Model {
            alg,
            period: period_us,
            count,
            burst: if alg == Algorithm::TokenBucket {
                5
            } else {
                count
            },
            content: 0,
            last: 0,
            windows: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// The largest count the core's window field holds (`2^b − 1`, `b` the bit length of
    /// `count + 1`): a charge saturates there, and a saturated count gives nothing back.
    fn ceiling(&self) -> i128 {
        let mut p = 1;
        while p <= self.count + 1 {
            p *= 2;
        }
        p - 1
    }

    fn interval(&self) -> i128 {
        self.period / self.count
    }

    /// The bucket's content at `now`.
    fn level(&self, now: i128) -> i128 {
        (self.content - (now - self.last)).max(0)
    }

    /// Entries of the log within `(t − P, t]`, `t` the time an entry would be recorded at.
    fn t(&self, now: i128) -> i128 {
        self.log.last().map_or(now, |&newest| newest.max(now))
    }

    fn inside(&self, now: i128) -> i128 {
        let t = self.t(now);
        self.log.iter().filter(|&&e| e + self.period > t).count() as i128
    }

    fn cnt(&self, k: i128) -> i128 {
        self.windows.get(&k).copied().unwrap_or(0)
    }

    /// The sliding window's estimate at `now`, and whether a count is saturated.
    fn estimate(&self, now: i128) -> (i128, bool) {
        let k = now / self.period;
        let e = now - k * self.period;
        let (prev, curr) = (self.cnt(k - 1), self.cnt(k));
        let weighted = (prev * (self.period - e) + self.period - 1) / self.period;
        let top = self.ceiling();
        (curr + weighted, prev == top || curr == top)
    }

    /// The usage `n` more permits would leave, against what the limit allows: `(after, allowed)`.
    fn after(&self, n: i128, now: i128) -> (i128, i128, bool) {
        match self.alg {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                let t = self.interval();
                (self.level(now) + n * t, self.burst * t, false)
            }
            Algorithm::FixedWindow => (self.cnt(now / self.period) + n, self.count, false),
            Algorithm::SlidingWindow => {
                let (estimate, saturated) = self.estimate(now);
                (estimate + n, self.count, saturated)
            }
            _ => (self.inside(now) + n, self.count, false),
        }
    }

    /// Whether `n` permits (0: a check) are admitted at `now`, deciding nothing.
    fn admits(&self, n: i128, now: i128) -> bool {
        if n > self.burst {
            return false;
        }
        let (after, allowed, saturated) = self.after(n, now);
        after <= allowed && !saturated
    }

    /// Record `n` permits at `now`, whatever the limit (a take admitted, or a refused one
    /// recorded).
    fn add(&mut self, n: i128, now: i128) {
        match self.alg {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                self.content = self.level(now) + n * self.interval();
                self.last = now;
            }
            Algorithm::FixedWindow | Algorithm::SlidingWindow => {
                let top = self.ceiling();
                let c = self.windows.entry(now / self.period).or_default();
                *c = (*c + n).min(top);
            }
            _ => {
                let t = self.t(now);
                self.log.extend(std::iter::repeat_n(t, n as usize));
            }
        }
    }

    /// Give `n` permits back at `now`, never past a full state.
    fn credit(&mut self, n: i128, now: i128) {
        match self.alg {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                self.content = (self.level(now) - n * self.interval()).max(0);
                self.last = now;
            }
            Algorithm::FixedWindow | Algorithm::SlidingWindow => {
                let top = self.ceiling();
                let c = self.windows.entry(now / self.period).or_default();
                if *c != top {
                    *c -= (*c).min(n);
                }
            }
            _ => {
                // Nothing while the log is over its limit; else its newest entries inside.
                if self.inside(now) > self.count {
                    return;
                }
                let t = self.t(now);
                for _ in 0..n {
                    match self.log.last() {
                        Some(&e) if e + self.period > t => {
                            self.log.pop();
                        }
                        _ => break,
                    }
                }
            }
        }
    }

    /// The permits left at `now` (0 over the limit).
    fn remaining(&self, now: i128) -> u32 {
        match self.alg {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                let t = self.interval();
                ((self.burst * t - self.level(now)).max(0) / t) as u32
            }
            Algorithm::SlidingWindow if self.estimate(now).1 => 0,
            Algorithm::SlidingLog if self.inside(now) > self.count => 0,
            _ => {
                let (after, allowed, _) = self.after(0, now);
                (allowed - after).max(0) as u32
            }
        }
    }
}

/// One step of a sequence: a check, a request of 1–4, a charge after the response of
/// 5–40 (past the limit as often as not), or negative hits of 1–10.
fn op(rng: &mut Rng) -> (u64, bool) {
    match rng.below(10) {
        0 | 1 => (0, false),
        2..=5 => (1 + rng.below(4), false),
        6..=8 => (5 + rng.below(36), false),
        _ => (1 + rng.below(10), true),
    }
}

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

/// The time of the bench's clock in µs (every step is on a whole µs).
fn now_us(b: &Bench) -> i128 {
    i128::from(b.clock.now() / 1_000)
}

/// 10^4 random sequences (2,000 per algorithm) of checks, requests, charges after the
/// response and negative hits, each on a fresh key, one descriptor a request, on the
/// in-process backend and on Redis exact, in the default mode: every decision and every
/// `limit_remaining` as the model's, where a refused request's hits are recorded. The
/// sequences run in `PARTS` concurrent parts, each with its own clock and `redis-server`
/// (a sequence is a chain of round trips to Redis: one part at a time left the cores idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_charge_lost_in_ten_thousand_sequences_against_the_models() {
    const PARTS: usize = 4;
    let mut parts = tokio::task::JoinSet::new();
    for part in 0..PARTS {
        parts.spawn(sequences((part..10_000).step_by(PARTS), 0x37 + part as u64));
    }
    let (mut refused_charges, mut steps) = (0u32, 0u32);
    while let Some(done) = parts.join_next().await {
        match done {
            Ok((refused, n)) => {
                refused_charges += refused;
                steps += n;
            }
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    assert!(
        refused_charges > 2_000,
        "{refused_charges} charges refused and recorded in {steps} steps"
    );
}

/// The sequences numbered `seqs` against the models, on a bench of their own: the charges
/// refused and recorded, and the steps.
async fn sequences(seqs: impl Iterator<Item = usize>, seed: u64) -> (u32, u32) {
    let b = bench(
        &[Place::Memory, Place::Exact],
        &[(Mode::AllOrNothing, RefusedHits::Record)],
        PERIOD_S,
        LIMIT,
    )
    .await;
    let mut rng = Rng(seed);
    let (mut refused_charges, mut steps) = (0u32, 0u32);
    for seq in seqs {
        let alg = ALGORITHMS[seq % ALGORITHMS.len()];
        let key = format!("s{seq}");
        let mut model = Model::new(alg, i128::from(PERIOD_S) * 1_000_000, i128::from(LIMIT));
        for step in 0..1 + rng.below(12) {
            b.clock.advance(Duration::from_micros(match rng.below(6) {
                0 => 0,
                1 => rng.below(3 * PERIOD_S * 1_000_000),
                _ => rng.below(150_000),
            }));
            let now = now_us(&b);
            let (hits, negative) = op(&mut rng);
            let n = i128::from(hits);
            let (admit, remaining) = if negative {
                model.credit(n, now);
                (true, model.remaining(now))
            } else {
                let admit = model.admits(n, now);
                // Admitted or refused, the hits are recorded (a check's none).
                model.add(n, now);
                if !admit && hits >= 5 {
                    refused_charges += 1;
                }
                (admit, model.remaining(now))
            };
            let r = request(vec![d(alg, &key, hits, negative)]);
            for (name, service) in &b.services {
                let answer = service.should_rate_limit(&r).await.unwrap();
                assert_eq!(
                    (ok(&answer), answer.statuses[0].limit_remaining),
                    (admit, remaining),
                    "{name} {alg}, sequence {seq} step {step} at {now} µs: {hits} hits{}\n{model:?}",
                    if negative { " given back" } else { "" }
                );
            }
            steps += 1;
        }
    }
    (refused_charges, steps)
}

/// Two descriptors a request (two algorithms, or one key twice), in both modes: all or
/// nothing, a refused request records its hits on the descriptors that refused it and
/// charges none that admitted it; charge each, every descriptor records every request's
/// hits. Against the models, on both backends, over 2,000 sequences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_charges_no_descriptor_that_admitted_it() {
    let b = bench(&[Place::Memory, Place::Exact], &BOTH_MODES, PERIOD_S, LIMIT).await;
    let mut rng = Rng(0x39);
    let mut kept = 0u32;
    for (which, &(mode, _)) in BOTH_MODES.iter().enumerate() {
        let services: Vec<&(String, Service)> = b
            .services
            .iter()
            .filter(|(name, _)| name.contains(&format!("{mode:?}")))
            .collect();
        assert_eq!(services.len(), 2);
        for seq in 0..2_000 {
            let algs = [
                ALGORITHMS[rng.below(5) as usize],
                ALGORITHMS[rng.below(5) as usize],
            ];
            let keys = [format!("p{which}-{seq}-a"), format!("p{which}-{seq}-b")];
            let mut models: Vec<Model> = algs
                .iter()
                .map(|&a| Model::new(a, i128::from(PERIOD_S) * 1_000_000, i128::from(LIMIT)))
                .collect();
            for step in 0..1 + rng.below(10) {
                b.clock.advance(Duration::from_micros(rng.below(400_000)));
                let now = now_us(&b);
                let hits = [op(&mut rng).0, op(&mut rng).0];
                let admits: Vec<bool> = (0..2)
                    .map(|i| models[i].admits(i128::from(hits[i]), now))
                    .collect();
                let all = admits.iter().all(|&a| a);
                for i in 0..2 {
                    // All or nothing: an admitting descriptor of a refused request keeps
                    // nothing; every other records its hits.
                    if all || !admits[i] || mode == Mode::ChargeEach {
                        models[i].add(i128::from(hits[i]), now);
                    } else {
                        kept += 1;
                    }
                }
                let r = request(vec![
                    d(algs[0], &keys[0], hits[0], false),
                    d(algs[1], &keys[1], hits[1], false),
                ]);
                for (name, service) in &services {
                    let answer = service.should_rate_limit(&r).await.unwrap();
                    let seen: Vec<(bool, u32)> = answer
                        .statuses
                        .iter()
                        .map(|s| (s.code == Code::Ok, s.limit_remaining))
                        .collect();
                    let want: Vec<(bool, u32)> = (0..2)
                        .map(|i| (admits[i], models[i].remaining(now)))
                        .collect();
                    assert_eq!(
                        (ok(&answer), seen),
                        (all, want),
                        "{name}: {algs:?} sequence {seq} step {step}: {hits:?}"
                    );
                }
            }
        }
    }
    assert!(
        kept > 500,
        "{kept} admitting descriptors of refused requests kept nothing"
    );
}

/// envoyproxy/ratelimit's fixed-window rule as it is written (its `INCRBY` and
/// `limitAfterIncrease > overLimitThreshold`): a counter per descriptor per window, every
/// request's hits added, over iff the count after them passes the limit.
#[derive(Default)]
struct Envoyproxy {
    counts: HashMap<(String, i128), u64>,
}

impl Envoyproxy {
    fn should_rate_limit(&mut self, key: &str, window: i128, hits: u64, limit: u64) -> (bool, u32) {
        let count = self.counts.entry((key.to_owned(), window)).or_default();
        *count += hits;
        let over = *count > limit;
        (!over, if over { 0 } else { (limit - *count) as u32 })
    }
}

/// `--mode charge-each` is envoyproxy/ratelimit on this pattern: checks (0 hits),
/// requests, charges past the limit, two descriptors a request, windows crossed; on both
/// backends, 2,000 sequences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charge_each_decides_as_envoyproxy_ratelimit() {
    let b = bench(
        &[Place::Memory, Place::Exact],
        &[(Mode::ChargeEach, RefusedHits::Record)],
        PERIOD_S,
        LIMIT,
    )
    .await;
    let mut rng = Rng(0x3a);
    let mut envoyproxy = Envoyproxy::default();
    let mut over = 0u32;
    for seq in 0..2_000 {
        let keys = [format!("e{seq}-a"), format!("e{seq}-b")];
        for step in 0..1 + rng.below(10) {
            b.clock.advance(Duration::from_micros(rng.below(700_000)));
            let window = now_us(&b) / (i128::from(PERIOD_S) * 1_000_000);
            let hits = [op(&mut rng).0, op(&mut rng).0];
            let want: Vec<(bool, u32)> = (0..2)
                .map(|i| envoyproxy.should_rate_limit(&keys[i], window, hits[i], LIMIT))
                .collect();
            over += want.iter().filter(|w| !w.0).count() as u32;
            let r = request(vec![
                d(Algorithm::FixedWindow, &keys[0], hits[0], false),
                d(Algorithm::FixedWindow, &keys[1], hits[1], false),
            ]);
            for (name, service) in &b.services {
                let answer = service.should_rate_limit(&r).await.unwrap();
                let seen: Vec<(bool, u32)> = answer
                    .statuses
                    .iter()
                    .map(|s| (s.code == Code::Ok, s.limit_remaining))
                    .collect();
                assert_eq!(seen, want, "{name}: sequence {seq} step {step}: {hits:?}");
            }
        }
    }
    assert!(over > 1_000, "{over} descriptors over the limit");
}

/// Redis's time in µs, read with `TIME`.
async fn redis_time(redis: &Redis) -> i128 {
    let v = redis.command(&redis::cmd("TIME")).await.unwrap();
    let redis::Value::Array(parts) = v else {
        panic!("TIME: {v:?}")
    };
    let num = |p: &redis::Value| match p {
        redis::Value::BulkString(b) => std::str::from_utf8(b).unwrap().parse::<i128>().unwrap(),
        other => panic!("TIME: {other:?}"),
    };
    num(&parts[0]) * 1_000_000 + num(&parts[1])
}

/// Redis leased (`100/minute`, GCRA, leases of at most 16 cells, a debt of one minute):
/// 10^4 random sequences of checks, requests and charges past the limit on fresh keys,
/// at Redis's own time. No charge lost: every permit a sequence consumed (admitted, or
/// refused and recorded) is on Redis, whose TAT ends at least `consumed · T` after the
/// sequence's start (each call moves it by its permits from `max(TAT, now)`), with no
/// slack for the machine's speed; and the stated bound `B + ⌈(Δ + D)/T⌉ − 1 + L` holds.
/// Negative hits are `INVALID_ARGUMENT` (a leased cell is never given back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_records_every_refused_charge_within_its_bound() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = server.url();
    let connect = || {
        Redis::connect(
            &url,
            RedisConfig::default().deadline(Duration::from_secs(2)),
        )
    };
    let redis = connect().await.unwrap();
    let leased = RedisLeased::new(
        connect().await.unwrap(),
        Policy::Propagate,
        "lz:",
        16,
        Duration::from_millis(50),
    );
    let service = Service::new(leased, Options::default());
    let yaml = "domain: c\ndescriptors:\n  - key: gcra\n    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra}\n";
    service
        .apply(Config::from_str_named("c.yaml", yaml, &Settings::default()).unwrap())
        .unwrap();
    let (t_us, burst, debt_us, lease) = (600_000i128, 100i128, 60_000_000i128, 16i128);
    let mut rng = Rng(0x3b);
    let (mut charged, mut refused_charges) = (0i128, 0u32);
    let started = Instant::now();
    for seq in 0..10_000 {
        let key = format!("l{seq}");
        let start = redis_time(&redis).await;
        let mut consumed = 0i128;
        for step in 0..1 + rng.below(8) {
            // A first charge of 60–100 (a response that used most of the limit), then
            // requests of 1–4, charges of 5–14, checks and negative hits: at most 198 a
            // sequence, within the burst plus the debt (200), so nothing is cut.
            let (hits, negative) = match (step, rng.below(10)) {
                (0, _) => (60 + rng.below(41), false),
                (_, 0 | 1) => (0, false),
                (_, 2..=4) => (1 + rng.below(4), false),
                (_, 5..=8) => (5 + rng.below(10), false),
                _ => (1 + rng.below(10), true),
            };
            let r = request(vec![d(Algorithm::Gcra, &key, hits, negative)]);
            match service.should_rate_limit(&r).await {
                Ok(answer) => {
                    consumed += i128::from(hits);
                    if !ok(&answer) && hits >= 5 {
                        refused_charges += 1;
                    }
                }
                Err(limitcore_rls::RequestError::InvalidArgument(why)) => {
                    assert!(negative && why.contains("never given back"), "{why}");
                }
                Err(e) => panic!("sequence {seq}: {e}"),
            }
        }
        charged += consumed;
        let end = redis_time(&redis).await;
        let tat = redis
            .command(redis::cmd("GET").arg(format!("lz:lease:{{c}}:gcra:gcra={key}")))
            .await
            .unwrap();
        let tat: i128 = match tat {
            redis::Value::BulkString(b) => std::str::from_utf8(&b).unwrap().parse().unwrap(),
            redis::Value::Nil => 0,
            other => panic!("{other:?}"),
        };
        assert!(
            consumed == 0 || tat >= start + consumed * t_us,
            "sequence {seq}: {consumed} permits consumed, Redis's TAT {tat} < {start} + {consumed}·T"
        );
        let delta = end - start;
        let bound = burst + (delta + debt_us + t_us - 1) / t_us - 1 + lease;
        assert!(consumed <= bound, "sequence {seq}: {consumed} > {bound}");
    }
    assert!(
        refused_charges > 1_000,
        "{refused_charges} refused charges recorded"
    );
    eprintln!(
        "leased: 10^4 sequences, {charged} permits consumed, {refused_charges} refused charges recorded, {:?}",
        started.elapsed()
    );
}
