//! Tests of the pacer comparison (`limitcore_cli::pace`, the engine of `limitcore pace`): short
//! real-clock runs whose schedule must be exact, and the figures' definitions on known data.
//!
//! The rate, the send count and the order of the starts are properties of the pacer's
//! schedule, so they are asserted exactly; lateness is the machine's scheduling noise (a
//! loaded 2-core CI machine can preempt a worker for milliseconds), so it only gets a sign
//! check and a loose sanity bound. The runs are serialised by a lock so that they do not
//! compete for the CPUs; the whole file takes about 2 s.

use limitcore_cli::pace::{
    self, Comparison, Config, PacerCounters, PacerRun, Percentiles, Schedule, Slot,
};
use std::sync::Mutex;

/// One real-clock run at a time.
static RUNS: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    RUNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The pacer's FIFO: each worker's starts strictly increase in the order it reserved, and a
/// reservation that began after another had returned (by the clock, with 2 µs to spare for
/// any cross-CPU clock skew) starts later.
fn assert_fifo(run: &PacerRun) {
    for (w, sends) in run.workers.iter().enumerate() {
        for pair in sends.windows(2) {
            assert!(
                pair[1].start > pair[0].start,
                "worker {w}: start {} after {} in reservation order",
                pair[1].start,
                pair[0].start
            );
        }
    }
    let mut by_return: Vec<Slot> = run.sends().copied().collect();
    by_return.sort_unstable_by_key(|s| s.returned);
    let prefix_max: Vec<u64> = by_return
        .iter()
        .scan(0, |max, s| {
            *max = s.start.max(*max);
            Some(*max)
        })
        .collect();
    for s in run.sends() {
        let before = by_return.partition_point(|r| r.returned + 2_000 < s.called);
        if before > 0 {
            assert!(
                prefix_max[before - 1] < s.start,
                "a reservation made after another returned starts no later: {s:?}"
            );
        }
    }
}

/// Starts sorted, and the gaps between consecutive ones.
fn gaps(run: &PacerRun) -> Vec<u64> {
    let mut starts: Vec<u64> = run.sends().map(|s| s.start).collect();
    starts.sort_unstable();
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

fn assert_never_early(run: &PacerRun) {
    for s in run.sends() {
        assert!(s.actual >= s.start, "sent before its start: {s:?}");
    }
}

#[test]
fn open_loop_keeps_the_rate_and_the_schedule() {
    let _one = serial();
    let config = Config::new(2_000, 2, 1.0);
    let run = pace::run_limitcore(&config).unwrap();
    let summary = run.summary();
    let (rate, seconds) = (f64::from(config.rate), config.seconds);

    // The achieved (paced) rate: sends with a start in [t0, t0 + D), over D.
    assert!(
        (summary.rate - rate).abs() <= rate / 100.0,
        "rate {} not within 1% of {rate}",
        summary.rate
    );
    // The count the rate and duration imply: 2000 slots of 500 µs in 1 s.
    let implied = (rate * seconds).round() as u64;
    assert!(
        summary.sends.abs_diff(implied) <= 1,
        "{} sends, {implied} implied",
        summary.sends
    );
    assert_eq!(summary.sends, config.slots().unwrap());

    // FIFO, and the open-loop schedule: slot k at exactly t0 + k·T, nothing skipped.
    assert_fifo(&run);
    let first = run.sends().map(|s| s.start).min().unwrap();
    assert_eq!(first, run.t0);
    assert!(gaps(&run).iter().all(|&g| g == run.interval));
    assert_eq!(summary.slip_us, Some(0.0));

    // Lateness: never negative; only a loose sanity bound on a loaded machine.
    assert_never_early(&run);
    let late = summary.schedule_lateness_us.unwrap();
    assert!(late.min >= 0.0);
    assert!(late.p50 < 50_000.0, "median lateness {} µs", late.p50);
    assert!(summary.ideal_lateness_us.unwrap().min >= 0.0);
    assert!(summary.wall_rate.is_some());

    // The pacer's own counters: every slot reserved at t0 (slot k waits k·T), and each
    // worker's one refusal after the last slot was given out.
    let n = summary.sends;
    assert_eq!(
        PacerCounters::from(&run.counts),
        PacerCounters {
            reservations: n,
            refused: config.workers as u64,
            delayed: n - 1,
            wait_total_ns: run.interval * n * (n - 1) / 2,
        }
    );
}

#[test]
fn live_clock_never_exceeds_the_rate() {
    let _one = serial();
    let config = Config {
        schedule: Schedule::Live,
        ..Config::new(2_000, 2, 0.4)
    };
    let run = pace::run_limitcore(&config).unwrap();
    let summary = run.summary();
    // Reserving at the live clock can lose slots (slip) but never add one.
    assert!(summary.sends >= 1 && summary.sends <= config.slots().unwrap());
    assert_fifo(&run);
    assert!(gaps(&run).iter().all(|&g| g >= run.interval));
    assert!(summary.slip_us.unwrap() >= 0.0);
    assert_never_early(&run);
    // Every send was a reservation, and each worker made one more that starts past the end.
    assert_eq!(run.counts.admitted, summary.sends + config.workers as u64);
    assert!(run.counts.delayed <= run.counts.admitted);
}

#[test]
fn the_report_shows_the_pacer_counters() {
    let _one = serial();
    // 20 slots of 1 ms on two workers, open loop.
    let comparison = Comparison::run(Config::new(1_000, 2, 0.02)).unwrap();
    assert_eq!(
        comparison.limitcore_counters,
        PacerCounters {
            reservations: 20,
            refused: 2,
            delayed: 19,
            wait_total_ns: 1_000_000 * 20 * 19 / 2,
        }
    );
    let text = comparison.text();
    assert!(
        text.ends_with(
            "\nlimitcore pacer's counters (limitcore::Counted): 20 reservations, 2 refused, \
             19 delayed, wait granted 0.190000 s in all (9500.00 µs a reservation)\n"
        ),
        "{text}"
    );
}

#[test]
fn governor_run_sends_at_most_the_rate() {
    let _one = serial();
    let config = Config::new(2_000, 2, 0.3);
    let summary = pace::run_governor(&config).unwrap().summary();
    // Burst 1: at most one per interval (1% and one send of slack for the two clocks).
    assert!(summary.sends >= 1);
    assert!(summary.sends as f64 <= 2_000.0 * 0.3 * 1.01 + 1.0);
    assert!(summary.schedule_lateness_us.is_none() && summary.slip_us.is_none());
}

#[test]
fn figures_follow_their_definitions() {
    // Nearest-rank percentiles of 1..=100 ns.
    let p = Percentiles::of_nanos((1..=100).rev().collect()).unwrap();
    assert_eq!((p.min, p.p50, p.p99, p.max), (0.001, 0.05, 0.099, 0.1));
    assert_eq!(Percentiles::of_nanos(Vec::new()), None);

    // Four sends at 1000/s over 4 ms, starting at t0 = 10 ms: one 3 µs late, one slipped.
    let ms = 1_000_000;
    let slot = |start: u64, late: u64| Slot {
        called: 0,
        returned: 0,
        start,
        actual: start + late,
    };
    let run = PacerRun {
        t0: 10 * ms,
        duration: 4 * ms,
        rate: 1_000,
        interval: ms,
        workers: vec![
            vec![slot(10 * ms, 0), slot(12 * ms, 3_000)],
            vec![slot(11 * ms, 0), slot(14 * ms, 0)],
        ],
        counts: Default::default(),
    };
    let s = run.summary();
    assert_eq!(s.sends, 4);
    assert_eq!(s.rate, 1_000.0);
    // Three intervals over 10..14 ms.
    assert_eq!(s.wall_rate, Some(750.0));
    let sched = s.schedule_lateness_us.unwrap();
    assert_eq!((sched.min, sched.p50, sched.max), (0.0, 0.0, 3.0));
    // The 4th send should have been at 13 ms and was at 14 ms.
    let ideal = s.ideal_lateness_us.unwrap();
    assert_eq!((ideal.min, ideal.max), (0.0, 1_000.0));
    assert_eq!(s.slip_us, Some(1_000.0));
}
