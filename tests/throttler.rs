//! The ordered multi-channel throttler: FIFO, earliest, exact, on random submissions.

use limitcore::clock::{Clock, ManualClock};
use limitcore::{Quota, Throttler};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Count of `starts` in the half-open window of length `period` ending at `t` inclusive.
fn inside(starts: &[u64], t: u64, period: u64) -> usize {
    starts.iter().filter(|&&s| s <= t && s + period > t).count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fifo_earliest_and_exact(
        total in (1u32..=6, 1u64..=1_000),
        per_channel in prop::collection::vec((1u32..=4, 1u64..=1_000), 3),
        calls in prop::collection::vec((0u64..=300, 0usize..5), 1..120),
    ) {
        let q = |(c, p): (u32, u64)| Quota::new(c, Duration::from_nanos(p.max(u64::from(c)))).unwrap();
        let total_q = q(total);
        let chan_q: Vec<Quota> = per_channel.iter().map(|&x| q(x)).collect();
        // Channels 0..3 have quotas; 3 is unknown (total only); 4 means no channel.
        let t = Throttler::with_clock(total_q, (0..3usize).map(|c| (c, chan_q[c])), ManualClock::new()).unwrap();
        let mut now = 0u64;
        let mut prev = 0u64;
        let mut all: Vec<u64> = Vec::new();
        let mut by_channel: Vec<Vec<u64>> = vec![Vec::new(); 3];
        for (step, c) in calls {
            now += step;
            let channel = (c < 4).then_some(c);
            let start = t.reserve_at(channel.as_ref(), now).unwrap();
            // FIFO: never before the previous start, nor before now.
            prop_assert!(start >= prev && start >= now);
            // Earliest: one ns earlier (if allowed at all) breaks an applicable limit.
            let from = now.max(prev);
            if start > from {
                let e = start - 1;
                let total_full = inside(&all, e, total_q.period_ns()) >= total_q.count() as usize;
                let chan_full = c < 3 && inside(&by_channel[c], e, chan_q[c].period_ns()) >= chan_q[c].count() as usize;
                prop_assert!(total_full || chan_full, "start {} could have been {}", start, e);
            }
            all.push(start);
            if c < 3 {
                by_channel[c].push(start);
            }
            prev = start;
        }
        // Exact: at most count in any window, for the total and each channel.
        for &s in &all {
            prop_assert!(inside(&all, s, total_q.period_ns()) <= total_q.count() as usize);
        }
        for c in 0..3 {
            for &s in &by_channel[c] {
                prop_assert!(inside(&by_channel[c], s, chan_q[c].period_ns()) <= chan_q[c].count() as usize);
            }
        }
    }
}

/// `submit` runs tasks in submission order, each at or after its start on the clock.
#[test]
fn submit_runs_tasks_in_order_at_their_time() {
    let clock = ManualClock::new();
    let t = Throttler::with_clock(
        "2/s".parse().unwrap(),
        [("slow", "1/s".parse().unwrap())],
        clock.clone(),
    )
    .unwrap();
    let ran: Arc<Mutex<Vec<(usize, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let (ran, clock) = (ran.clone(), clock.clone());
            let channel = if i % 3 == 0 { Some(&"slow") } else { None };
            t.submit(channel, move || {
                ran.lock().unwrap().push((i, clock.now()));
                i * 10
            })
            .unwrap()
        })
        .collect();
    let starts: Vec<u64> = handles.iter().map(|h| h.start()).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    // Drive the clock until the last start.
    while clock.now() < *starts.last().unwrap() {
        clock.advance(Duration::from_millis(50));
        std::thread::sleep(Duration::from_micros(200));
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.wait(), Ok(i * 10));
    }
    let ran = ran.lock().unwrap();
    assert_eq!(
        ran.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    for &(i, at) in ran.iter() {
        assert!(
            at >= starts[i],
            "task {i} ran at {at} before its start {}",
            starts[i]
        );
    }
}

#[test]
fn cancel_before_start_and_drop_cancels_pending() {
    let clock = ManualClock::new();
    let t = Throttler::with_clock(
        "1/s".parse().unwrap(),
        Vec::<(u8, Quota)>::new(),
        clock.clone(),
    )
    .unwrap();
    let first = t.submit(None, || 1).unwrap();
    let second = t.submit(None, || 2).unwrap(); // starts at 1 s: the clock is frozen
    assert!(second.cancel());
    assert_eq!(first.wait(), Ok(1));
    assert_eq!(second.wait(), Err(limitcore::Cancelled));
    let third = t.submit(None, || 3).unwrap();
    drop(t);
    assert_eq!(third.wait(), Err(limitcore::Cancelled));
}

#[test]
fn max_delay_refuses_without_scheduling() {
    let t = Throttler::with_clock(
        "1/s".parse().unwrap(),
        Vec::<(u8, Quota)>::new(),
        ManualClock::new(),
    )
    .unwrap()
    .with_max_delay(Duration::from_millis(1_500));
    assert_eq!(t.reserve(None).unwrap(), Duration::ZERO);
    assert_eq!(t.reserve(None).unwrap(), Duration::from_secs(1));
    assert_eq!(
        t.reserve(None).unwrap_err().retry_after(),
        Some(Duration::from_millis(500))
    );
    assert_eq!(
        t.reserve_at(None, 500_000_000).unwrap(),
        2_000_000_000,
        "the refusal scheduled nothing"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn run_awaits_its_turn() {
    let t = Throttler::new("1000/s".parse().unwrap(), Vec::<(u8, Quota)>::new()).unwrap();
    let t0 = std::time::Instant::now();
    for i in 0..5 {
        assert_eq!(t.run(None, async move { i }).await.unwrap(), i);
    }
    assert!(t0.elapsed() >= Duration::from_millis(3));
}
