//! A deterministic simulation, in virtual time, of the adaptive concurrency limits against
//! a server: clients that send as fast as the limit lets them (or at a fixed pace), a
//! server whose latency has a base, noise, a slope with load and a capacity knee, and that
//! answers overload with errors or not at all. Scenarios in the style of Vector's adaptive
//! request concurrency suite (`tests/data/adaptive-concurrency/*.yaml`: constant link,
//! defers and drops at high concurrency, slow link, jittery link, slow send), plus a server
//! that queues past its capacity; each with an accepted range for the limit's time-weighted
//! mean and its maximum, for each algorithm.
//!
//! Everything runs on one thread: the limit is a real `Permits::adaptive_with_clock` on a
//! `ManualClock` set to each event's time, the requests hold real permits, and every
//! outcome goes through `Permit::success` / `Permit::dropped`. The noise comes from a
//! seeded generator, so a run is the same every time. `SIM_PRINT=1` prints every run's
//! figures.
//!
//! The ranges say what each algorithm is for, and where it is blind (`EXPECTED` argues
//! each one):
//!
//! - every algorithm keeps in flight within its limit (but just after a cut), and none
//!   stays low on a healthy link (constant link, jittery link);
//! - the loss-based one (AIMD) follows errors and timeouts down to the knee (defers, drops,
//!   slow link) but not a latency below its 5 s timeout (queueing server);
//! - Vegas follows both; Envoy's gradient follows latency (drops, slow link, queueing
//!   server) but not errors that come back as fast as successes (defers);
//! - Netflix's Gradient2 compares the latency with its own long-term average, so a steady
//!   latency, however high, is its baseline: it follows none of these knees and runs to
//!   its cap (as its source does: a drop is a latency sample like any other);
//! - none raises its limit for a client that does not need it (slow send), except Envoy's
//!   controller, whose formula has no such guard and climbs to its maximum.

use limitcore::clock::ManualClock;
use limitcore::concurrency::{
    AdaptiveRule, Aimd, EnvoyGradient, Gradient2, Permit, Permits, Vegas,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

/// What the server does with a request past its knee.
#[derive(Debug, Clone, Copy)]
enum Overload {
    /// Answer it with an error after the base delay (Vector's "defer": back-pressure).
    Defer,
    /// Never answer: the client times out (Vector's "drop").
    Drop,
    /// Queue it: a server with `knee` workers shares them, latency grows with the load.
    Queue,
}

/// A scenario: the clients and the server.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    /// Clients, each with one request at a time (closed loop).
    clients: u32,
    /// `Some(gap)`: one request every `gap` ns instead (open loop, queued until admitted).
    interval: Option<u64>,
    /// The base latency, ns.
    delay: u64,
    /// Noise: each latency adds `delay · jitter · Exp(1)`.
    jitter: f64,
    /// Latency grows by `delay · scale` per request in flight beyond the first.
    scale: f64,
    /// Past `knee` requests in flight at the server, `overload` applies.
    knee: Option<(u32, Overload)>,
    /// How long the run lasts, ns of virtual time.
    length: u64,
}

/// A client's request gives up after this long, dropped.
const CLIENT_TIMEOUT: u64 = SECOND;

const BASE: Scenario = Scenario {
    name: "",
    clients: 64,
    interval: None,
    delay: 100 * MS,
    jitter: 0.0,
    scale: 0.0,
    knee: None,
    length: 60 * SECOND,
};

const SCENARIOS: [Scenario; 7] = [
    Scenario {
        name: "constant link",
        ..BASE
    },
    Scenario {
        name: "defers at high concurrency",
        knee: Some((5, Overload::Defer)),
        ..BASE
    },
    Scenario {
        name: "drops at high concurrency",
        knee: Some((5, Overload::Drop)),
        ..BASE
    },
    Scenario {
        name: "slow link",
        scale: 1.0,
        ..BASE
    },
    Scenario {
        name: "jittery link",
        jitter: 0.1,
        ..BASE
    },
    Scenario {
        name: "slow send",
        clients: 1,
        interval: Some(100 * MS),
        delay: 50 * MS,
        ..BASE
    },
    Scenario {
        name: "queueing server",
        knee: Some((10, Overload::Queue)),
        ..BASE
    },
];

/// What a run measured.
#[derive(Debug, Clone, Copy)]
struct Stats {
    /// The limit's time-weighted mean and its maximum.
    limit_mean: f64,
    limit_max: u32,
    /// In flight, the same.
    in_flight_mean: f64,
    in_flight_max: u32,
    completed: u64,
    dropped: u64,
}

/// A small deterministic generator (xorshift64*).
struct Random(u64);

impl Random {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponential variate with mean 1.
    fn exp1(&mut self) -> f64 {
        -(1.0 - self.unit()).ln()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Request `id` comes back (or its client gives up).
    Done(u64),
    /// The open-loop client has a new request.
    Arrival,
}

/// Run `scenario` against an adaptive limit of `rule`.
fn run<R: AdaptiveRule>(rule: R, scenario: &Scenario, seed: u64) -> Stats {
    let clock = ManualClock::new();
    let permits = Permits::adaptive_with_clock(rule, clock.clone()).unwrap();
    let mut random = Random(seed | 1);
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut schedule = |events: &mut BinaryHeap<_>, at: u64, event: Event| {
        seq += 1;
        events.push(Reverse((at, seq, event)));
    };
    // Requests waiting for a permit (clients, or the open-loop arrivals), in order.
    let mut waiting: VecDeque<()> = VecDeque::new();
    // Requests in flight: their permit and whether they end dropped.
    let mut flying: HashMap<u64, (Permit<&Permits<_>>, bool)> = HashMap::new();
    let mut next_id = 0u64;
    let mut at_server = 0u32;
    let (mut completed, mut dropped) = (0u64, 0u64);
    // Time-weighted sums.
    let (mut last, mut limit_area, mut flight_area) = (0u64, 0f64, 0f64);
    let (mut limit_max, mut in_flight_max) = (permits.limit(), 0u32);

    match scenario.interval {
        Some(_) => schedule(&mut events, 0, Event::Arrival),
        None => waiting.extend((0..scenario.clients).map(|_| ())),
    }
    let mut now = 0u64;
    loop {
        // Admit waiting requests while the limit lets them in.
        while !waiting.is_empty() {
            let Ok(permit) = permits.try_acquire(1) else {
                break;
            };
            assert!(permit.in_flight_at_grant() <= permit.limit_at_grant());
            waiting.pop_front();
            at_server += 1;
            let level = at_server;
            let noise = scenario.jitter * random.exp1();
            let base = scenario.delay as f64;
            let (latency, fails) = match scenario.knee {
                Some((knee, Overload::Defer)) if level > knee => (base, true),
                Some((knee, Overload::Drop)) if level > knee => (CLIENT_TIMEOUT as f64, true),
                Some((knee, Overload::Queue)) => {
                    let share = (f64::from(level) / f64::from(knee)).max(1.0);
                    (base * (share + noise), false)
                }
                _ => {
                    let slope = scenario.scale * f64::from(level - 1);
                    (base * (1.0 + slope + noise), false)
                }
            };
            let latency = (latency as u64).min(CLIENT_TIMEOUT);
            let fails = fails || latency >= CLIENT_TIMEOUT;
            next_id += 1;
            flying.insert(next_id, (permit, fails));
            schedule(&mut events, now + latency, Event::Done(next_id));
        }
        let now_seen = permits.snapshot();
        limit_max = limit_max.max(now_seen.limit);
        in_flight_max = in_flight_max.max(now_seen.in_flight);
        assert!(
            now_seen.in_flight <= now_seen.limit
                || now_seen.in_flight <= in_flight_before_cut(&flying),
            "{now_seen:?}"
        );
        let Some(Reverse((at, _, event))) = events.pop() else {
            break;
        };
        if at > scenario.length {
            break;
        }
        limit_area += f64::from(now_seen.limit) * (at - last) as f64;
        flight_area += f64::from(now_seen.in_flight) * (at - last) as f64;
        last = at;
        now = at;
        clock.set_nanos(now);
        match event {
            Event::Done(id) => {
                let (permit, fails) = flying.remove(&id).expect("in flight");
                at_server -= 1;
                if fails {
                    dropped += 1;
                    permit.dropped();
                } else {
                    completed += 1;
                    permit.success();
                }
                if scenario.interval.is_none() {
                    waiting.push_back(());
                }
            }
            Event::Arrival => {
                waiting.push_back(());
                let gap = scenario.interval.expect("open loop");
                schedule(&mut events, now + gap, Event::Arrival);
            }
        }
    }
    let span = last.max(1) as f64;
    Stats {
        limit_mean: limit_area / span,
        limit_max,
        in_flight_mean: flight_area / span,
        in_flight_max,
        completed,
        dropped,
    }
}

/// In flight above the limit is allowed only after a cut, before the permits granted under
/// the old limit are back: every one of those was granted under a larger limit.
fn in_flight_before_cut<P>(flying: &HashMap<u64, (Permit<P>, bool)>) -> u32
where
    P: std::ops::Deref,
    P::Target: limitcore::concurrency::Release,
{
    flying
        .values()
        .map(|(p, _)| p.limit_at_grant())
        .max()
        .unwrap_or(0)
}

/// A run of one algorithm: a scenario and a seed in, the figures out.
type Algorithm = Box<dyn Fn(&Scenario, u64) -> Stats>;

/// The algorithms under test, each with a floor of 1 (or Envoy's minimum concurrency, 3)
/// so that it can follow a knee at 5, and its source's other defaults.
fn algorithms() -> [(&'static str, Algorithm); 4] {
    [
        (
            "aimd",
            Box::new(|s, seed| run(Aimd::new().with_limits(1, 200).unwrap(), s, seed)),
        ),
        (
            "vegas",
            Box::new(|s, seed| run(Vegas::new().with_limits(1, 200).unwrap(), s, seed)),
        ),
        (
            "gradient2",
            Box::new(|s, seed| run(Gradient2::new().with_limits(1, 200).unwrap(), s, seed)),
        ),
        (
            "envoy",
            Box::new(|s, seed| {
                let envoy = EnvoyGradient::new()
                    .with_interval(Duration::from_secs(10))
                    .unwrap();
                run(envoy, s, seed)
            }),
        ),
    ]
}

/// An accepted range, inclusive.
type Range = (f64, f64);

/// The accepted (limit mean, limit max) per scenario and algorithm, in the order of
/// `SCENARIOS` and `algorithms()`. Each range is the behaviour the algorithm's formula
/// predicts for the scenario, with room for the noise and the transients; a run outside it
/// means the algorithm no longer does what its source says.
///
/// Two numbers recur: the guarded rules (AIMD, Vegas, Gradient2) never raise a limit that
/// the load does not reach half of, so 64 clients cap them at 2 × 64 = 128 (AIMD's +1 and
/// Vegas' + β take them to 129 and 140); they start at 20, so a run that only backs off has
/// a maximum of 20.
const EXPECTED: [[(Range, Range); 4]; 7] = [
    // constant link: room to grow. The guarded rules stop at their cap; Envoy's gradient
    // (1.25 at a steady latency, plus √L) climbs to its maximum, 1000, with dips to 3 for
    // its minRTT measurements.
    [
        ((120.0, 129.0), (128.0, 129.0)),
        ((128.0, 141.0), (129.0, 141.0)),
        ((120.0, 129.0), (128.0, 129.0)),
        ((700.0, 1000.0), (1000.0, 1000.0)),
    ],
    // defers at 5: past the knee, errors after the base delay. AIMD and Vegas back off to
    // the knee. Gradient2 and Envoy only see latency, which does not change: they climb as
    // on a constant link.
    [
        ((3.0, 8.0), (5.0, 21.0)),
        ((3.0, 10.0), (5.0, 21.0)),
        ((100.0, 129.0), (128.0, 129.0)),
        ((700.0, 1000.0), (1000.0, 1000.0)),
    ],
    // drops at 5: past the knee, no answer, a drop at the client's 1 s timeout. AIMD and
    // Vegas back off on the drops, Envoy on the latency, to between the knee and about
    // twice it. Gradient2 is blind: its baseline is a long average of latency, which the
    // steady share of 1 s timeouts raises as much as the current latency.
    [
        ((4.0, 12.0), (5.0, 21.0)),
        ((4.0, 14.0), (5.0, 21.0)),
        ((100.0, 129.0), (128.0, 129.0)),
        ((4.0, 12.0), (5.0, 40.0)),
    ],
    // slow link, latency = 100 ms × in flight: every request past 9 in flight times out.
    // AIMD backs off on those timeouts, Vegas and Envoy on the latency, all to below 10;
    // Gradient2 is blind again (a steady latency is its own baseline).
    [
        ((5.0, 12.0), (5.0, 21.0)),
        ((4.0, 12.0), (5.0, 21.0)),
        ((100.0, 129.0), (128.0, 129.0)),
        ((3.0, 8.0), (5.0, 40.0)),
    ],
    // jittery link (exponential noise, 10 % of the delay on average): as the constant link.
    [
        ((120.0, 129.0), (128.0, 129.0)),
        ((125.0, 141.0), (129.0, 141.0)),
        ((120.0, 129.0), (128.0, 129.0)),
        ((600.0, 1000.0), (1000.0, 1000.0)),
    ],
    // slow send, one request of 50 ms every 100 ms: never more than 1 in flight. The
    // guarded rules keep their initial limit; Envoy's formula has no such guard and climbs.
    [
        ((20.0, 20.0), (20.0, 20.0)),
        ((20.0, 20.0), (20.0, 20.0)),
        ((20.0, 20.0), (20.0, 20.0)),
        ((400.0, 1000.0), (1000.0, 1000.0)),
    ],
    // a server of 10 workers that shares them past 10 in flight (latency × in flight / 10):
    // Vegas settles at the knee plus its queue allowance (α to β), Envoy at the knee times
    // its 25 % buffer plus √L. AIMD cannot see it (no drop, latency far below its 5 s
    // timeout), nor Gradient2 (the latency rises with the limit, but its long average
    // follows within its tolerance of 1.5: the limit runs to its cap).
    [
        ((120.0, 129.0), (128.0, 129.0)),
        ((10.0, 25.0), (15.0, 40.0)),
        ((100.0, 129.0), (128.0, 129.0)),
        ((10.0, 20.0), (15.0, 40.0)),
    ],
];

#[test]
fn every_algorithm_in_every_scenario() {
    let print = std::env::var_os("SIM_PRINT").is_some();
    let mut failures = Vec::new();
    for (scenario, expected) in SCENARIOS.iter().zip(EXPECTED) {
        for ((name, algorithm), (mean_range, max_range)) in algorithms().iter().zip(expected) {
            let stats = algorithm(scenario, 0x5EED);
            if print {
                eprintln!("{:<28} {name:<9} {stats:?}", scenario.name);
            }
            let mean_ok = (mean_range.0..=mean_range.1).contains(&stats.limit_mean);
            let max_ok = (max_range.0..=max_range.1).contains(&f64::from(stats.limit_max));
            if !(mean_ok && max_ok) {
                failures.push(format!(
                    "{} / {name}: limit mean {:.1} (accepted {mean_range:?}), max {} \
                     (accepted {max_range:?}); in flight mean {:.1}",
                    scenario.name, stats.limit_mean, stats.limit_max, stats.in_flight_mean
                ));
            }
            assert!(stats.in_flight_max <= stats.limit_max);
            assert!(
                stats.completed + stats.dropped > 0,
                "{}: nothing ran",
                scenario.name
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_simulation_is_deterministic() {
    for (_, algorithm) in algorithms() {
        let a = algorithm(&SCENARIOS[4], 7);
        let b = algorithm(&SCENARIOS[4], 7);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
