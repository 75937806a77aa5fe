//! `Lanes` against its plain model (`reference::LanesModel`) on random histories of every
//! operation — submissions, looks, cancellations, non-waiting takes, reconfigurations of
//! rate, burst, mode, weights and piece — at random times; and the two stated bounds (the
//! top lane's wait, the weighted lanes' floor) and the rate, checked at explicit times on a
//! schedule served exactly when it asks.

use limitcore::clock::ManualClock;
use limitcore::reference::LanesModel;
use limitcore::{Lane, Lanes, LanesConfig, Mode, Progress, Quota, Ticket};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::time::Duration;

/// Quotas whose interval is 0.1 ms to 100 ms (whole ns or not), bursts 1..=64 units; and
/// byte rates (KiB/s to MiB/s) with bursts of 1 KiB to 64 KiB.
fn quota() -> impl Strategy<Value = Quota> {
    prop_oneof![
        3 => (1u32..=1_000, 100_000u64..=100_000_000, 1u32..=64).prop_filter_map("valid", |(c, t, b)| {
            Quota::new_with_burst(c, Duration::from_nanos(t * u64::from(c) / 7 + 1), b).ok()
        }),
        1 => (1u64..=4096, 0u32..=6).prop_filter_map("bytes", |(kib, b)| {
            Quota::new_u64(kib << 10, Duration::from_secs(1), 1024 << b).ok()
        }),
    ]
}

/// A configuration of `lanes` lanes.
fn config(lanes: usize) -> impl Strategy<Value = LanesConfig> {
    (
        quota(),
        prop::collection::vec(1u32..=10, lanes - 1),
        prop_oneof![Just(None), (1u32..=64).prop_map(Some)],
        prop_oneof![10 => Just(Mode::Enabled), 1 => Just(Mode::Disabled), 1 => Just(Mode::Paused)],
    )
        .prop_map(|(q, w, piece, mode)| {
            let c = LanesConfig::new(q).weights(&w).mode(mode);
            match piece {
                Some(p) => c.with_piece(p),
                None => c,
            }
        })
}

#[derive(Debug, Clone)]
enum Op {
    /// Forward by this many µs.
    Advance(u32),
    Submit(u8, u32),
    Poll(usize),
    PollAll,
    Cancel(usize),
    Try(u8, u32),
    TakeUpTo(u8, u32),
    Reconfigure(LanesConfig),
}

fn op(lanes: usize) -> impl Strategy<Value = Op> {
    let n = prop_oneof![1u32..=8, 1u32..=200, 1u32..=100_000];
    let lane = 0u8..lanes as u8;
    prop_oneof![
        4 => (0u32..=50_000).prop_map(Op::Advance),
        5 => (lane.clone(), n.clone()).prop_map(|(l, n)| Op::Submit(l, n)),
        2 => any::<usize>().prop_map(Op::Poll),
        2 => Just(Op::PollAll),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => (lane.clone(), n.clone()).prop_map(|(l, n)| Op::Try(l, n)),
        1 => (lane, n).prop_map(|(l, n)| Op::TakeUpTo(l, n)),
        1 => config(lanes).prop_map(Op::Reconfigure),
    ]
}

fn history() -> impl Strategy<Value = (LanesConfig, Vec<Op>)> {
    (1usize..=5).prop_flat_map(|lanes| (config(lanes), prop::collection::vec(op(lanes), 1..80)))
}

/// The model's answer to a look, as the limiter's `Progress`.
fn progress(model: &mut LanesModel, id: &mut Option<u64>, now: u64) -> Progress {
    match *id {
        None => Progress::Granted,
        Some(i) => match model.poll(i, now) {
            None => {
                *id = None;
                Progress::Granted
            }
            Some(next) => Progress::Waiting { next },
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Every operation gives the model's answer, and the budget and every lane's counters
    /// after it are the model's.
    #[test]
    fn lanes_equal_their_model((first, ops) in history()) {
        let clock = ManualClock::new();
        let lanes = Lanes::with_clock(first.clone(), clock.clone()).unwrap();
        let mut model = LanesModel::new(first);
        let mut now = 0u64;
        let mut tickets: Vec<(Ticket<'_, ManualClock>, Option<u64>)> = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let ctx = format!("op {i} {op:?} at {now}");
            match op {
                Op::Advance(us) => {
                    now += u64::from(us) * 1_000;
                    clock.set_nanos(now);
                }
                Op::Submit(l, n) => {
                    let ticket = lanes.submit_at(Lane::new(l), n, now).unwrap();
                    let id = model.submit(usize::from(l), n, now);
                    prop_assert_eq!(ticket.is_granted(), id.is_none(), "{}", ctx);
                    tickets.push((ticket, id));
                }
                Op::Poll(k) if !tickets.is_empty() => {
                    let k = k % tickets.len();
                    let (ticket, id) = &mut tickets[k];
                    let want = progress(&mut model, id, now);
                    prop_assert_eq!(ticket.poll_at(now), want, "{}", ctx);
                }
                Op::PollAll => {
                    for (ticket, id) in &mut tickets {
                        let want = progress(&mut model, id, now);
                        prop_assert_eq!(ticket.poll_at(now), want, "{}", ctx);
                    }
                }
                Op::Cancel(k) if !tickets.is_empty() => {
                    let (ticket, id) = tickets.remove(k % tickets.len());
                    let want = match id {
                        None => Ok(()),
                        Some(id) => model.cancel(id, now),
                    };
                    prop_assert_eq!(ticket.cancel_at(now), want, "{}", ctx);
                }
                Op::Try(l, n) => {
                    let got = lanes.try_acquire_at(Lane::new(l), n, now);
                    prop_assert_eq!(got, model.try_acquire(usize::from(l), n, now), "{}", ctx);
                }
                Op::TakeUpTo(l, n) => {
                    let got = lanes.take_up_to_at(Lane::new(l), n, now).unwrap();
                    prop_assert_eq!(got, model.take_up_to(usize::from(l), n, now), "{}", ctx);
                }
                Op::Reconfigure(config) => {
                    lanes.reconfigure_at(&config, now).unwrap();
                    model.reconfigure(config, now);
                }
                Op::Poll(_) | Op::Cancel(_) => {}
            }
            prop_assert_eq!(lanes.snapshot_at(now), model.snapshot(now), "after {}", ctx);
            for l in 0..lanes.lanes() {
                let lane = Lane::new(l as u8);
                prop_assert_eq!(lanes.counts(lane), Some(model.counts(l)), "{} after {}", lane, ctx);
            }
        }
    }
}

/// `x·p/c` ns for `x` units of a quota of `c` per `p` ns, rounded up.
fn units_ns(q: &Quota, x: u64) -> u64 {
    let (c, p) = (
        u128::from(q.count_as_written()),
        u128::from(q.period_as_written_ns()),
    );
    u64::try_from((u128::from(x) * p).div_ceil(c)).unwrap()
}

/// `x·p/c` ns, rounded down.
fn units_ns_floor(q: &Quota, x: u64) -> u64 {
    let (c, p) = (
        u128::from(q.count_as_written()),
        u128::from(q.period_as_written_ns()),
    );
    u64::try_from(u128::from(x) * p / c).unwrap()
}

/// Units the rate grants in `d` ns, rounded down.
fn ns_units(q: &Quota, d: u64) -> u64 {
    let (c, p) = (
        u128::from(q.count_as_written()),
        u128::from(q.period_as_written_ns()),
    );
    u64::try_from(u128::from(d) * c / p).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 4, ..ProptestConfig::default() })]

    /// The top lane's bound, served exactly: every top-lane request of `n` units made at
    /// `t₀` with `Q` units of top-lane requests ahead is granted by
    /// `t₀ + max(0, b(t₀) + (Q + n)·τ − B·τ)` (and so within `(Q + n)·τ`), whatever the
    /// weighted lanes ask, here a saturating lowest lane and a busy middle one.
    #[test]
    fn the_top_lane_waits_at_most_its_bound(
        q in quota(),
        arrivals in prop::collection::vec((0u64..=3_000_000, 1u32..=64, any::<bool>()), 1..40),
    ) {
        let config = LanesConfig::new(q);
        let burst = q.burst();
        let lanes = Lanes::with_clock(config.clone(), ManualClock::new()).unwrap();
        let mut now = 0u64;
        // The low lane saturates with requests of 4 bursts; the middle lane asks a burst now and then.
        let mut low = vec![lanes.submit_at(Lane::LOW, 4 * burst, now).unwrap()];
        let mut others: Vec<Ticket<'_, ManualClock>> = Vec::new();
        // Top-lane requests: (ticket, made at, bound).
        let mut top: Vec<(Ticket<'_, ManualClock>, u64, u64)> = Vec::new();
        let mut arrivals = arrivals.into_iter().peekable();
        let mut next_arrival = 0u64;
        loop {
            // Serve at `now`: look at everything; record the top lane's completions.
            let mut next: Option<u64> = None;
            for t in low.iter_mut().chain(others.iter_mut()) {
                if let Progress::Waiting { next: Some(n) } = t.poll_at(now) {
                    next = Some(next.map_or(n, |m: u64| m.min(n)));
                }
            }
            let mut i = 0;
            while i < top.len() {
                match top[i].0.poll_at(now) {
                    Progress::Granted => {
                        let (_, at, bound) = top.remove(i);
                        prop_assert!(now <= at + bound, "made at {at}, granted at {now}, bound {bound}");
                    }
                    Progress::Waiting { next: n } => {
                        if let Some(n) = n { next = Some(next.map_or(n, |m: u64| m.min(n))); }
                        i += 1;
                    }
                }
            }
            low.retain(|t| !t.is_granted());
            if low.is_empty() {
                low.push(lanes.submit_at(Lane::LOW, 4 * burst, now).unwrap());
                continue;
            }
            if now >= next_arrival {
                let Some((gap, n, mid)) = arrivals.next() else { break };
                next_arrival = now + gap;
                if mid {
                    others.push(lanes.submit_at(Lane::MID, burst, now).unwrap());
                }
                // The bound from the state before it: b(t₀) (at most the burst: (I)), and Q
                // from the top requests ahead (their whole size: an upper bound).
                let n = n.min(burst * 3);
                let b0 = lanes.snapshot_at(now).full_after.as_nanos() as u64;
                prop_assert!(b0 <= units_ns(&q, u64::from(burst)), "(I): backlog {b0} ns");
                let queued: u64 = top.iter().map(|(t, _, _)| u64::from(t.n())).sum();
                let ahead = units_ns(&q, queued + u64::from(n));
                let burst_ns = units_ns_floor(&q, u64::from(burst));
                // + 1 ns: an idle budget restarts from the reading rounded up to its unit;
                // with pieces of the whole burst, 1 ns more per piece (the module's Notation).
                let piece = config.piece();
                let pieces = if piece == burst {
                    top.iter().map(|(t, _, _)| u64::from(t.n().div_ceil(piece))).sum::<u64>() + u64::from(n.div_ceil(piece))
                } else {
                    0
                };
                let bound = (b0 + ahead).saturating_sub(burst_ns) + 1 + pieces;
                prop_assert!(bound <= ahead + 2 + pieces);
                let ticket = lanes.submit_at(Lane::USER, n, now).unwrap();
                if !ticket.is_granted() {
                    top.push((ticket, now, bound));
                }
                continue;
            }
            others.retain(|t| !t.is_granted());
            now = next.unwrap_or(next_arrival).min(next_arrival).max(now + 1);
        }
    }

    /// The floor, served exactly: with every weighted lane always waiting (and a random top
    /// lane), every window `(t₁, t₂]` gives lane `i` at least
    /// `(wᵢ/W)·(r·Δ − P − U₀) − m·P − 1` units; and the budget grants `r·Δ − P` to
    /// `r·Δ + B` in all.
    #[test]
    fn every_waiting_lane_gets_its_floor(
        q in quota(),
        weights in prop::collection::vec(1u32..=10, 1..=4),
        piece in 1u32..=64,
        top in prop::collection::vec(prop_oneof![Just(0u32), 1u32..=32], 1..60),
    ) {
        let config = LanesConfig::new(q).weights(&weights).with_piece(piece);
        let p = u64::from(config.piece());
        let lanes = Lanes::with_clock(config.clone(), ManualClock::new()).unwrap();
        let m = weights.len();
        let w_sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut now = 0u64;
        // Two requests waiting in every weighted lane at all times.
        let mut tickets: Vec<Ticket<'_, ManualClock>> = Vec::new();
        for l in 1..=m {
            for _ in 0..2 {
                tickets.push(lanes.submit_at(Lane::new(l as u8), 1_000_000, now).unwrap());
            }
        }
        // (time, granted per lane) after each serve.
        let mut log: Vec<(u64, Vec<u64>)> = Vec::new();
        for n in top {
            if n > 0 {
                tickets.push(lanes.submit_at(Lane::USER, n.min(q.burst()), now).unwrap());
            }
            tickets.retain(|t| !t.is_granted());
            let mut next = u64::MAX;
            for t in &mut tickets {
                match t.poll_at(now) {
                    Progress::Waiting { next: Some(x) } => next = next.min(x),
                    Progress::Waiting { next: None } => {}
                    Progress::Granted => prop_assert!(t.lane() == Lane::USER, "a million units granted"),
                }
            }
            log.push((now, (0..=m).map(|l| lanes.counts(Lane::new(l as u8)).unwrap().granted).collect()));
            prop_assert!(next < u64::MAX);
            now = next;
        }
        let b = u64::from(q.burst());
        for (i, (t1, g1)) in log.iter().enumerate() {
            for (t2, g2) in &log[i + 1..] {
                let d = t2 - t1;
                let total: u64 = (0..=m).map(|l| g2[l] - g1[l]).sum();
                let rate = ns_units(&q, d);
                prop_assert!(total <= rate + b + 1, "{total} granted in {d} ns: rate {rate}, burst {b}");
                prop_assert!(total + p + 1 >= rate, "{total} granted in {d} ns: rate {rate}, piece {p}");
                let u0 = g2[0] - g1[0];
                for l in 1..=m {
                    let w = u64::from(weights[l - 1]);
                    let share = ((rate as i128 - p as i128 - u0 as i128) * w as i128).div_euclid(w_sum as i128);
                    let floor = share - (m as i128) * p as i128 - 1;
                    let got = (g2[l] - g1[l]) as i128;
                    prop_assert!(got >= floor, "lane {l} (weight {w} of {w_sum}) got {got} in ({t1}, {t2}]: floor {floor}");
                }
            }
        }
    }
}
