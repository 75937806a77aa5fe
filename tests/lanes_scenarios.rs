//! `Lanes` scenarios derived from RocksDB's `util/rate_limiter_test.cc` (rate accuracy with
//! 1–16 threads and random sizes, a rate change while a request is pending, partial
//! consumption, priority order, the hang regression #11742, a runtime burst change) and from
//! TiKV's `components/file_system/src/rate_limiter.rs` tests (`hybrid_flow`, `light_flow`):
//! each is described, then re-derived for a limiter without a refill period, not copied.
//! Tests on the real clock keep to a few hundred ms and leave room for a loaded machine.
//! Their upper bounds (`r·Δ + B`) take `Δ` from the limiter's own clock ([`on_the_clock`]):
//! the bound holds in the time the limiter reads, and the TSC's calibration can put that
//! clock a fraction of a per cent away from `Instant` on a loaded machine.

use limitcore::clock::{Clock, ManualClock, MonotonicClock};
use limitcore::{Lane, LaneError, Lanes, LanesConfig, Mode, Progress, Quota};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// Lanes of `config` on a clock the test reads too (the process's `MonotonicClock`, the
/// default), that clock, and its reading just before the lanes' first: the time `Δ` of an
/// `r·Δ + B` bound is read where the limiter reads it, over the budget's whole life.
fn on_the_clock(config: LanesConfig) -> (Lanes<MonotonicClock>, MonotonicClock, u64) {
    let clock = MonotonicClock::new();
    let born = clock.now();
    (
        Lanes::with_clock(config, clock.clone()).unwrap(),
        clock,
        born,
    )
}

/// Seconds on `clock` since its reading `t0`.
fn secs_since(clock: &MonotonicClock, t0: u64) -> f64 {
    Duration::from_nanos(clock.now() - t0).as_secs_f64()
}

fn q(text: &str) -> Quota {
    text.parse().unwrap()
}

/// How long something that is already due may take to happen: generous, for a loaded
/// machine (it takes microseconds).
const PROMPT: Duration = Duration::from_secs(10);

/// Wait (real time, at most [`PROMPT`]) until `cond` holds.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < PROMPT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `attempt` until it returns `Ok`, at most [`TRIES`] times, and fails with every
/// try's error if none did. For the floors of real-clock runs (at least so much granted, so
/// little waited): a loaded machine can keep every thread of one run off its CPU long
/// enough to miss a floor, but a limiter that grants too little misses it on every try.
/// The ceilings (never more than `r·Δ + B`) are asserted inside each try: they hold
/// whatever the machine does.
fn within_tries(mut attempt: impl FnMut() -> Result<(), String>) {
    let mut missed = Vec::new();
    for _ in 0..TRIES {
        match attempt() {
            Ok(()) => return,
            Err(e) => missed.push(e),
        }
    }
    panic!("every try missed its floor:\n{}", missed.join("\n"));
}

/// Tries of a real-clock run whose floor a loaded machine can make it miss.
const TRIES: usize = 3;

/// A small deterministic generator (xorshift), so that no test depends on a seed source.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// RocksDB `Rate`: 1, 2, 4, 8 and 16 threads issue random-size requests in all four lanes
/// (a few USER, HIGH and MID ones, then one LOW, over and over) for a while at a target
/// rate, then again after the rate is doubled at run time; RocksDB accepts 0.80–1.25 of the
/// target. Here the budget starts full, so the achieved rate is compared with the rate plus
/// one burst over the time: at least RocksDB's 80 % of the target (`benches/lanes.rs`
/// measures it to 0.1 %; a run that misses it is tried again, up to [`TRIES`] times, since
/// a loaded machine can keep every thread off its CPU for longer than the burst lasts),
/// never more than `r·Δ + B` (the budget's bound, with 2 % for the clock reads around the
/// run; on every try).
#[test]
fn rocksdb_rate_with_1_to_16_threads_and_a_rate_change() {
    for threads in [1u64, 2, 4, 8, 16] {
        within_tries(|| rate_with_threads(threads));
    }
}

/// One try of [`rocksdb_rate_with_1_to_16_threads_and_a_rate_change`] with `threads`
/// threads: the floor missed, if it was.
fn rate_with_threads(threads: u64) -> Result<(), String> {
    let rate = 256 * 1024 * threads; // 256 KiB/s a thread
    let burst = (rate / 20) as u32; // 50 ms of the rate (RocksDB: a refill, 100 ms)
    let config = LanesConfig::new(Quota::new_u64(rate, Duration::from_secs(1), burst).unwrap());
    let (lanes, clock, _) = on_the_clock(config.clone());
    for round in 0..2 {
        let rate = rate << round;
        if round == 1 {
            let faster = Quota::new_u64(rate, Duration::from_secs(1), burst).unwrap();
            lanes.reconfigure(&config.clone().quota(faster)).unwrap();
        }
        let before: u64 = (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap().granted)
            .sum();
        let full = lanes.snapshot().remaining;
        let (t0, start) = (Instant::now(), clock.now());
        std::thread::scope(|s| {
            for t in 0..threads {
                let lanes = &lanes;
                s.spawn(move || {
                    let mut rng = Rng(0x9e37_79b9 + t);
                    let request = 8 * 1024;
                    while t0.elapsed() < Duration::from_millis(250) {
                        for (lane, times) in [
                            (Lane::USER, 3),
                            (Lane::HIGH, 2),
                            (Lane::MID, 1),
                            (Lane::LOW, 1),
                        ] {
                            for _ in 0..=rng.below(times) {
                                let n = 1 + rng.below(request - 1) as u32;
                                lanes.acquire_blocking(lane, n).unwrap();
                            }
                        }
                    }
                });
            }
        });
        let elapsed = secs_since(&clock, start);
        let after: u64 = (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap().granted)
            .sum();
        let got = (after - before) as f64;
        let most = rate as f64 * elapsed * 1.02 + f64::from(full) + f64::from(burst);
        assert!(
            got <= most,
            "{threads} threads, round {round}: {got} > {most}"
        );
        if got < 0.8 * rate as f64 * elapsed {
            return Err(format!(
                "{threads} threads, round {round}: {got} in {elapsed} s at {rate}/s"
            ));
        }
    }
    Ok(())
}

/// RocksDB `LimitChangeTest`: a request pending for a whole refill completes when the rate
/// is doubled or halved meanwhile (no starvation). Re-derived at explicit times: the
/// backlog is kept in units and re-timed, so the pending request completes exactly when the
/// new rate says, whichever way the rate moved; and on the real clock with a blocked waiter.
#[test]
fn rocksdb_rate_change_while_a_request_is_pending() {
    for (num, den) in [(2u64, 1u64), (1, 2)] {
        let config = LanesConfig::new(q("10KiB/s burst 10KiB"));
        let lanes = Lanes::with_clock(config.clone(), ManualClock::new()).unwrap();
        lanes.try_acquire_at(Lane::HIGH, 10 * 1024, 0).unwrap(); // the whole burst
        let mut pending = lanes.submit_at(Lane::HIGH, 10 * 1024, 0).unwrap();
        // At 0.5 s half of it has been granted in pieces, 5 KiB wait, the budget is empty.
        assert!(matches!(
            pending.poll_at(500 * MS),
            Progress::Waiting { .. }
        ));
        let new = Quota::new_u64(10 * 1024 * num / den, Duration::from_secs(1), 10 * 1024).unwrap();
        lanes
            .reconfigure_at(&config.clone().quota(new), 500 * MS)
            .unwrap();
        // It completes when the backlog drains at the new rate: 0.25 s or 1 s later.
        let done = 500 * MS + 500 * MS * den / num;
        assert!(matches!(
            pending.poll_at(done - 1),
            Progress::Waiting { .. }
        ));
        assert_eq!(
            pending.poll_at(done),
            Progress::Granted,
            "rate ×{num}/{den}"
        );
    }
    // A blocked waiter, the rate halved under it: it still completes, and not too early.
    // The change comes when it comes (about 20 ms in, or later on a loaded machine), so the
    // bound is computed from when it came, read on the lanes' own clock around it.
    let config = LanesConfig::new(q("100KiB/s burst 10KiB"));
    let (lanes, clock, _) = on_the_clock(config.clone());
    let lanes = Arc::new(lanes);
    let emptied = clock.now();
    lanes.try_acquire(Lane::HIGH, 10 * 1024).unwrap();
    let waiter = {
        let (lanes, clock) = (lanes.clone(), clock.clone());
        std::thread::spawn(move || {
            lanes
                .acquire_blocking(Lane::HIGH, 10 * 1024)
                .map(|()| clock.now())
        })
    };
    until("the waiter to queue", || {
        lanes.counts(Lane::HIGH).unwrap().delayed == 1
    });
    std::thread::sleep(Duration::from_millis(20));
    lanes
        .reconfigure(&config.quota(q("50KiB/s burst 10KiB")))
        .unwrap();
    let changed = clock.now();
    let done = waiter.join().unwrap().unwrap();
    // Emptied at E (after `emptied`), halved at R (before `changed`): the 10 KiB take
    // 100 ms at the old rate, and what is left of them at R twice as long at the new one,
    // so the waiter completes at E + 200 ms − (R − E), or at E + 100 ms if R came after
    // that (20 ms in: 180 ms). 1 µs for the re-timing's rounding to whole ns.
    let least = (200 * MS).saturating_sub(changed - emptied).max(100 * MS) - 1_000;
    assert!(
        done - emptied >= least,
        "done {} ns after the budget was emptied, the rate halved within {} ns",
        done - emptied,
        changed - emptied
    );
}

/// RocksDB `AvailableByteSizeExhaustTest`: the bytes available are used up before the rest
/// of a larger request queues. At 500 B/s with 500 at once: 100, then 500 at the same time
/// gets the 400 left at once and waits for 100 (0.2 s), and the counters say 500 went
/// through while it waits.
#[test]
fn rocksdb_partial_consumption() {
    let lanes =
        Lanes::with_clock(LanesConfig::new(q("500/s burst 500")), ManualClock::new()).unwrap();
    lanes.try_acquire_at(Lane::USER, 100, 0).unwrap();
    let mut rest = lanes.submit_at(Lane::USER, 500, 0).unwrap();
    assert!(!rest.is_granted());
    let counts = lanes.counts(Lane::USER).unwrap();
    assert_eq!(
        (counts.granted, counts.pending, counts.delayed),
        (500, 1, 1)
    );
    assert!(matches!(
        rest.poll_at(200 * MS - 1),
        Progress::Waiting { .. }
    ));
    assert_eq!(rest.poll_at(200 * MS), Progress::Granted);
    let counts = lanes.counts(Lane::USER).unwrap();
    assert_eq!(
        (counts.granted, counts.pending, counts.wait),
        (600, 0, Duration::from_millis(200))
    );
}

/// RocksDB's priority order (`GeneratePriorityIterationOrder`, and `IO_USER` always first):
/// with the budget empty and a request waiting in every lane, the top lane's is granted
/// first; the weighted lanes then share by weight (90 : 9 : 1 by default), which RocksDB's
/// fairness coin flips give only in expectation.
#[test]
fn rocksdb_priority_order() {
    let config = LanesConfig::new(q("1000/s burst 100")).with_piece(1);
    let lanes = Lanes::with_clock(config, ManualClock::new()).unwrap();
    lanes.try_acquire_at(Lane::LOW, 100, 0).unwrap();
    let mut waiting: Vec<_> = [Lane::LOW, Lane::MID, Lane::HIGH, Lane::USER]
        .into_iter()
        .map(|lane| lanes.submit_at(lane, 1_000_000, 0).unwrap())
        .collect();
    // The top lane's 1,000,000 first: nothing else for its 1000 s.
    let mut t = 0;
    for _ in 0..10 {
        t += 100 * MS;
        for w in &mut waiting {
            w.poll_at(t);
        }
    }
    let granted = |lane: Lane| lanes.counts(lane).unwrap().granted;
    assert_eq!(
        (granted(Lane::USER), granted(Lane::HIGH), granted(Lane::MID)),
        (1_000, 0, 0)
    );
    assert_eq!(granted(Lane::LOW), 100);
    // Without it: 90 : 9 : 1 of every 100 units, exactly.
    waiting.pop().unwrap().cancel_at(t).unwrap_err();
    for _ in 0..10 {
        t += 100 * MS;
        for w in &mut waiting {
            w.poll_at(t);
        }
    }
    assert_eq!(
        (
            granted(Lane::HIGH),
            granted(Lane::MID),
            granted(Lane::LOW) - 100
        ),
        (900, 90, 10)
    );
}

/// RocksDB `WaitHangingBug` (#11742): two LOW requests of a whole refill at t = 0 (one goes,
/// one waits for the refill), and a third arrives as the refill happens; before the fix the
/// third could wait forever. Here the clock is manual and advanced in steps while the
/// threads run, in many interleavings; every request completes, each in its turn.
#[test]
fn rocksdb_hang_regression_11742() {
    for round in 0..100 {
        let clock = ManualClock::new();
        let lanes = Arc::new(
            Lanes::with_clock(LanesConfig::new(q("100/s burst 100")), clock.clone()).unwrap(),
        );
        let (done, finished) = mpsc::channel();
        let spawn = |lanes: &Arc<Lanes<ManualClock>>| {
            let (lanes, done) = (lanes.clone(), done.clone());
            std::thread::spawn(move || {
                lanes.acquire_blocking(Lane::LOW, 100).unwrap();
                done.send(lanes.now()).unwrap();
            })
        };
        let mut threads = vec![spawn(&lanes), spawn(&lanes)];
        while lanes.counts(Lane::LOW).unwrap().requests < 2 {
            std::thread::yield_now();
        }
        // The refill and the third request race (which one first varies by round).
        if round % 2 == 0 {
            threads.push(spawn(&lanes));
            clock.advance(Duration::from_secs(1));
        } else {
            clock.advance(Duration::from_secs(1));
            threads.push(spawn(&lanes));
        }
        let mut times = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while times.len() < 3 {
            assert!(
                Instant::now() < deadline,
                "round {round}: a request hung ({times:?})"
            );
            match finished.recv_timeout(Duration::from_millis(2)) {
                Ok(t) => times.push(t),
                Err(_) => {
                    // Time goes on in steps once all three asked (a step may come before
                    // the second's grant: then it starts later, and so does the third).
                    if lanes.counts(Lane::LOW).unwrap().requests == 3 && clock.now() < 10_000 * MS {
                        clock.advance(Duration::from_millis(250));
                    }
                }
            }
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        times.sort_unstable();
        // One at once, one at 1 s, one at 2 s (or as soon after as the steps reached).
        assert!(
            times[1] >= 1_000 * MS && times[2] >= 2_000 * MS,
            "round {round}: {times:?}"
        );
        assert_eq!(lanes.counts(Lane::LOW).unwrap().granted, 300);
    }
}

/// RocksDB `RuntimeSingleBurstBytesChange`: a new burst takes effect at run time. Re-derived
/// for GCRA, where a burst change moves the ceiling and keeps the charge: at 400 B/s and a
/// burst of 100 with the budget just emptied, a request of 1700 would take 4.25 s; with the
/// burst raised to 1700 it takes the 0.25 s the 100 charged need to drain.
#[test]
fn rocksdb_runtime_burst_change() {
    for (burst, done) in [(100u32, 4_250 * MS), (1_700, 250 * MS)] {
        let config = LanesConfig::new(q("400/s burst 100"));
        let lanes = Lanes::with_clock(config.clone(), ManualClock::new()).unwrap();
        lanes.try_acquire_at(Lane::USER, 100, 0).unwrap();
        let wider =
            config.quota(Quota::new_with_burst(400, Duration::from_secs(1), burst).unwrap());
        lanes.reconfigure_at(&wider, 0).unwrap();
        let mut request = lanes.submit_at(Lane::USER, 1_700, 0).unwrap();
        // Served exactly when it asks: it completes at `done`, not a nanosecond before.
        let mut t = 0;
        while let Progress::Waiting { next: Some(next) } = request.poll_at(t) {
            assert!(next <= done, "burst {burst}: next piece at {next}");
            t = next;
        }
        assert_eq!(t, done, "burst {burst}");
    }
}

/// RocksDB `AutoTuneIncreaseWhenFull`: a limiter that is always drained for a tuning period
/// raises its rate a step (×1.05), and one nobody waited on for a period drops to its floor
/// (a twentieth of the maximum). Here at explicit times, with periods of 1 s: a request
/// waits throughout the first period, then nothing waits.
#[test]
fn rocksdb_auto_tune_increase_when_full() {
    let tune = limitcore::AutoTune {
        period: Duration::from_secs(1),
        ..limitcore::AutoTune::default()
    };
    let config = LanesConfig::new(q("1000000/s burst 1000")).auto_tune(tune);
    let lanes = Lanes::with_clock(config, ManualClock::new()).unwrap();
    // It starts at half the maximum.
    assert_eq!(lanes.quota().count_as_written(), 500_000);
    let mut busy = lanes.submit_at(Lane::HIGH, 2_000_000, 0).unwrap();
    for t in 1..=10 {
        assert!(matches!(
            busy.poll_at(t * 100 * MS),
            Progress::Waiting { .. }
        ));
    }
    // At 1 s it had waited the whole period: a step up.
    assert_eq!(lanes.quota().count_as_written(), 525_000);
    busy.cancel_at(1_000 * MS).unwrap_err();
    // Nobody waits from 1 s to 2 s: the next look at 2 s drops it to the floor.
    lanes.try_acquire_at(Lane::USER, 1, 2_000 * MS).unwrap();
    assert_eq!(lanes.quota().count_as_written(), 50_000);
}

/// A job in its own thread until `stop`: `n` units every `step`, on a schedule. A job that
/// waited (or was held off its CPU) skips the steps it missed and starts its schedule again
/// a step after it is back, so it never asks more often than its schedule says, however
/// late the machine runs it.
fn job(
    lanes: &Arc<Lanes>,
    lane: Lane,
    n: u32,
    step: Duration,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (lanes, stop) = (lanes.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut next = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            lanes.acquire_blocking(lane, n).unwrap();
            next += step;
            let now = Instant::now();
            if next < now {
                next = now + step;
            }
            if let Some(sleep) = next.checked_duration_since(now) {
                std::thread::sleep(sleep);
            }
        }
    })
}

/// TiKV `test_rate_limited_hybrid_flow`: at 100 kB/s, a foreground writer (top lane) asking
/// 50 % of the rate, a compaction (a middle lane) asking 80 % and an import (the lowest)
/// asking 50 %, each in 1 ms steps. The top lane gets its whole demand, and the lowest lane
/// starves first: the writer and the compaction take nearly all of it.
///
/// Run at explicit times on a `ManualClock` (one simulated second), so that the verdict
/// never depends on how a machine schedules threads (on the real clock, with OS sleeps,
/// this test once missed a floor pinned to one CPU beside three busy loops). Each job asks
/// `n` units at every 1 ms step of its schedule and catches up after a wait (its demand is
/// `n` per step, as TiKV's jobs mean it); a waiting job looks again when the queue says
/// its next piece fits ([`Progress::Waiting`]'s `next`), the time jumping to the earliest
/// such moment.
#[test]
fn tikv_hybrid_flow() {
    let rate = 100_000u64;
    let config = LanesConfig::new(Quota::new_u64(rate, Duration::from_secs(1), 5_000).unwrap());
    let lanes = Lanes::with_clock(config, ManualClock::new()).unwrap();
    let per_ms = |pct: u64| (pct * rate / 100 / 1000) as u32;
    // (lane, units a step, the schedule's next step, the request waiting now)
    let mut jobs = [
        (Lane::USER, per_ms(50), 0, None),
        (Lane::MID, per_ms(80), 0, None),
        (Lane::LOW, per_ms(50), 0, None),
    ];
    let end = 1_000 * MS;
    let mut t = 0;
    while t < end {
        let mut wake = end;
        for (lane, n, due, waiting) in &mut jobs {
            loop {
                let ticket = match waiting {
                    Some(ticket) => ticket,
                    None if *due > t => {
                        wake = wake.min(*due);
                        break;
                    }
                    None => {
                        *due += MS; // on the schedule, not on the grant: a late job catches up
                        waiting.insert(lanes.submit_at(*lane, *n, t).unwrap())
                    }
                };
                match ticket.poll_at(t) {
                    Progress::Granted => *waiting = None,
                    Progress::Waiting { next } => {
                        wake = wake.min(next.unwrap_or(end));
                        break;
                    }
                }
            }
        }
        t = wake.max(t + 1);
    }
    let secs = Duration::from_nanos(end).as_secs_f64();
    let g = |lane: Lane| lanes.counts(lane).unwrap().granted as f64;
    let (user, mid, low) = (g(Lane::USER), g(Lane::MID), g(Lane::LOW));
    let total = user + mid + low;
    let shares = format!("user {user} mid {mid} low {low}");
    assert!(total <= rate as f64 * secs + 5_000.0, "{shares}");
    // The writer gets its whole demand (TiKV: within 25 %); the lowest lane starves first:
    // the writer and the compaction take nearly everything (TiKV: within 25 %; here the
    // compaction's weight is 9 to the import's 1, so the import gets about a tenth of what
    // the writer leaves); the budget is used (every lane asks more than it has).
    assert!(user >= 0.75 * 0.5 * rate as f64 * secs, "{shares}");
    assert!(user + mid >= 0.85 * total, "{shares}");
    assert!(total >= 0.85 * rate as f64 * secs, "{shares}");
    assert!(
        low > 0.0,
        "the import starves first, but is not shut out: {shares}"
    );
    // Each of the writer's requests waits about its own cost at the rate (50 B: 0.5 ms),
    // not behind the other lanes (behind the compaction's queue it would be seconds).
    let c = lanes.counts(Lane::USER).unwrap();
    let mean = c.wait.as_secs_f64() / c.delayed.max(1) as f64;
    assert!(
        mean <= 0.000_5,
        "the writer waited {mean} s a request on average: {c:?}"
    );
}

/// TiKV `test_rate_limited_light_flow`: at 3 kB/s, two jobs of 1 byte a millisecond (at most
/// 2 kB/s): demand below the limit is served in full, without waiting. The jobs skip the
/// steps a loaded machine made them miss (a job that caught up would ask a burst above the
/// rate, and wait): then no window of `W` ms holds more than `2·W + 4` requests, which the
/// budget's `100 + 3·W` always covers, so none waits however the threads are scheduled.
#[test]
fn tikv_light_flow() {
    let lanes = Arc::new(Lanes::new(LanesConfig::new(q("3000/s burst 100"))).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let step = Duration::from_millis(1);
    let jobs = [
        job(&lanes, Lane::LOW, 1, step, &stop),
        job(&lanes, Lane::LOW, 1, step, &stop),
    ];
    // About half a second; longer if the machine runs the jobs slowly.
    let t0 = Instant::now();
    while lanes.counts(Lane::LOW).unwrap().requests < 1_000 && t0.elapsed() < PROMPT {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    jobs.into_iter().for_each(|j| j.join().unwrap());
    let c = lanes.counts(Lane::LOW).unwrap();
    // Every request granted in full, none delayed.
    assert_eq!(c.granted, c.requests);
    assert_eq!((c.delayed, c.pending), (0, 0), "{c:?}");
    assert!(c.requests >= 200, "{c:?}");
}

/// Every unit granted is the budget's: threads in every lane, waiting and not, at a rate
/// that keeps them queued, never get more than `r·Δ + B` in all (no unit granted twice), and
/// the lanes' counters add up to the budget's charge.
#[test]
fn no_unit_is_granted_twice_across_threads() {
    let (lanes, clock, start) = on_the_clock(LanesConfig::new(q("1MiB/s burst 64KiB")));
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let lanes = &lanes;
            s.spawn(move || {
                let mut rng = Rng(7 + t);
                while t0.elapsed() < Duration::from_millis(300) {
                    let lane = Lane::new(rng.below(4) as u8);
                    let n = 1 + rng.below(48 << 10) as u32;
                    match rng.below(3) {
                        0 => drop(lanes.try_acquire(lane, n)),
                        1 => drop(lanes.take_up_to(lane, n)),
                        _ => lanes.acquire_blocking(lane, n).unwrap(),
                    }
                }
            });
        }
    });
    let elapsed = secs_since(&clock, start);
    let granted: u64 = (0..4)
        .map(|l| lanes.counts(Lane::new(l)).unwrap().granted)
        .sum();
    let most = (1 << 20) as f64 * elapsed + f64::from(64 << 10);
    assert!(granted as f64 <= most + 1.0, "{granted} > {most}");
    // What the budget still owes: its backlog. Charged = granted (nothing refunded).
    let left = lanes.snapshot().full_after.as_secs_f64() * f64::from(1 << 20);
    assert!(granted as f64 - left <= (1 << 20) as f64 * elapsed + f64::from(64 << 10) + 1.0);
}

/// A paused budget holds its waiters (RisingWave's `Pause`); resuming wakes them all. A
/// disabled one grants everything at once.
#[test]
fn pause_holds_waiters_and_resume_wakes_them() {
    let config = LanesConfig::new(q("1MiB/s burst 64KiB"));
    let lanes = Arc::new(Lanes::new(config.clone().mode(Mode::Paused)).unwrap());
    let waiters: Vec<_> = [Lane::USER, Lane::HIGH, Lane::LOW]
        .into_iter()
        .map(|lane| {
            let lanes = lanes.clone();
            std::thread::spawn(move || lanes.acquire_blocking(lane, 16 << 10))
        })
        .collect();
    let pending = || -> u64 {
        (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap().pending)
            .sum()
    };
    until("the three waiters to queue", || pending() == 3);
    assert_eq!(
        lanes.try_acquire(Lane::USER, 1),
        Err(LaneError::WouldWait { retry_after: None })
    );
    lanes
        .reconfigure(&config.clone().mode(Mode::Enabled))
        .unwrap();
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
    lanes.reconfigure(&config.mode(Mode::Disabled)).unwrap();
    let before = lanes.snapshot().remaining;
    lanes.acquire_blocking(Lane::LOW, 100 << 20).unwrap(); // 100 MiB at once: not charged
    assert!(lanes.snapshot().remaining >= before);
}

/// A waiter past its deadline gives up with what it was granted, which passes to the next
/// request of its lane. On a manual clock: the waiter's pieces and its deadline come at the
/// times the clock is moved to, whatever the machine's speed.
#[test]
fn a_timed_out_waiter_passes_its_partial_grant_on() {
    let clock = ManualClock::new();
    let config = LanesConfig::new(q("100KiB/s burst 10KiB")).with_piece(1024);
    let lanes = Arc::new(Lanes::with_clock(config, clock.clone()).unwrap());
    lanes.try_acquire(Lane::LOW, 10 << 10).unwrap();
    // 40 KiB: 400 ms; it gives up after 50 ms with 5 KiB granted (a piece every 10 ms).
    let waiter = {
        let lanes = lanes.clone();
        std::thread::spawn(move || {
            lanes.acquire_blocking_within(Lane::LOW, 40 << 10, Duration::from_millis(50))
        })
    };
    until("the waiter to queue", || {
        lanes.counts(Lane::LOW).unwrap().pending == 1
    });
    clock.advance(Duration::from_millis(50));
    let err = waiter.join().unwrap().unwrap_err();
    let LaneError::TimedOut { granted } = err else {
        panic!("{err:?}");
    };
    assert_eq!(granted, 5 << 10);
    let c = lanes.counts(Lane::LOW).unwrap();
    assert_eq!((c.cancelled, c.pending), (1, 0));
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;

    /// A dropped async waiter leaves its queue; its partial grant goes to the next waiter of
    /// its lane, which then needs that much less.
    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_future_passes_its_partial_grant_on() {
        let config = LanesConfig::new(q("100KiB/s burst 10KiB")).with_piece(1024);
        let lanes = Lanes::new(config).unwrap();
        lanes.try_acquire(Lane::MID, 10 << 10).unwrap();
        let mut first = Box::pin(lanes.acquire(Lane::MID, 20 << 10));
        // Its first poll queues it; then a second request queues behind it.
        assert!(tokio::time::timeout(Duration::from_millis(1), &mut first)
            .await
            .is_err());
        let mut second = lanes.submit(Lane::MID, 4 << 10).unwrap();
        // 60 ms more: the first is granted about 6 KiB in pieces (the head's); then dropped.
        assert!(tokio::time::timeout(Duration::from_millis(60), &mut first)
            .await
            .is_err());
        assert!(matches!(
            second.poll_at(lanes.now()),
            Progress::Waiting { .. }
        ));
        drop(first);
        // Its pieces passed on: the second needed 4 KiB and has them.
        assert_eq!(second.poll_at(lanes.now()), Progress::Granted);
        let c = lanes.counts(Lane::MID).unwrap();
        assert_eq!((c.cancelled, c.pending, c.delayed), (1, 0, 2), "{c:?}");
    }

    /// Async waits in several lanes complete, the top lane's first. On a manual clock: a
    /// low-lane wait for 40 KiB queues first, then a top-lane wait for 8 KiB; when the
    /// clock reaches the 8 KiB's time (40 ms at 200 KiB/s) the top lane's is granted and
    /// the low lane's, queued before it, still waits, for 200 ms more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_waits_complete_in_lane_order() {
        let clock = ManualClock::new();
        let lanes = Arc::new(
            Lanes::with_clock(LanesConfig::new(q("200KiB/s burst 8KiB")), clock.clone()).unwrap(),
        );
        lanes.try_acquire(Lane::LOW, 8 << 10).unwrap();
        let pending = |lane: Lane| lanes.counts(lane).unwrap().pending;
        let low = tokio::spawn({
            let (lanes, clock) = (lanes.clone(), clock.clone());
            async move {
                lanes.acquire(Lane::LOW, 40 << 10).await.unwrap();
                clock.now()
            }
        });
        while pending(Lane::LOW) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let user = tokio::spawn({
            let (lanes, clock) = (lanes.clone(), clock.clone());
            async move {
                lanes.acquire(Lane::USER, 8 << 10).await.unwrap();
                clock.now()
            }
        });
        while pending(Lane::USER) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        clock.advance(Duration::from_millis(40));
        let user = tokio::time::timeout(PROMPT, user)
            .await
            .expect("the top lane's wait is granted at 40 ms")
            .unwrap();
        assert_eq!(user, 40 * MS);
        assert_eq!(
            lanes.counts(Lane::LOW).unwrap().granted,
            8 << 10,
            "only its first 8 KiB"
        );
        assert!(!low.is_finished(), "the low lane's 40 KiB need 200 ms more");
        // 40 ms at a time (the burst's worth), each step's 8 KiB granted before the next:
        // a manual clock moved further at once would find the budget full and lose the rest.
        for step in 1..=5u64 {
            clock.advance(Duration::from_millis(40));
            let t0 = Instant::now();
            while lanes.counts(Lane::LOW).unwrap().granted < (8 << 10) * (step + 1) {
                assert!(t0.elapsed() < PROMPT, "step {step}: no piece granted");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let low = tokio::time::timeout(PROMPT, low)
            .await
            .expect("the low lane's wait is granted at 240 ms")
            .unwrap();
        assert_eq!(low, 240 * MS);
    }
}
