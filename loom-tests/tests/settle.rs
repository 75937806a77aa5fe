//! Loom models of costs known after the work on `Gcra`'s word (issue 37): a reservation
//! settled to its actual cost, racing other decisions, a refund and a charge. A settle is a
//! refund of the unused tail or a charge of the excess, each one pass of the word's CAS
//! loop; these models check that no interleaving creates a permit or loses a charge.
//!
//! Frozen clock (every operation at `NOW`): each execution must be *linearizable*: its
//! outcome (which requests were admitted, and the final TAT) must be the outcome of some
//! sequential order of the same operations that keeps each thread's own order. The
//! sequential outcomes are computed in the model itself, on fresh limiters, from every
//! such order.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`), as `gcra.rs` argues for CAS loops
//! of 2–3 threads.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test settle`.
#![cfg(limitcore_loom)]

use limitcore::clock::ManualClock;
use limitcore::{Gcra, RateLimiter, Refund};
use loom_tests::{model, quota, NOW};

type L = Gcra<ManualClock>;

/// One thread's operations, in its own order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Reserve `estimate` permits and, if admitted, settle them to `actual`.
    ReserveSettle { estimate: u32, actual: u32 },
    /// Ask for `n` permits.
    Take(u32),
    /// Give back the prefix's receipt (taken by the main thread before the race).
    RefundPrefix,
    /// Charge `n` permits.
    Charge(u32),
}

/// The steps of `op`: a reservation and its settle are two steps the other threads may
/// come between.
fn steps(op: Op) -> usize {
    match op {
        Op::ReserveSettle { .. } => 2,
        _ => 1,
    }
}

/// What one thread saw: whether its request (the reservation, or the take) was admitted.
type Seen = Option<bool>;

/// Run `ops` on `limiter`, one step at a time in the order `order` names threads (each
/// entry is a thread index; a thread's steps run in its own order), and return what each
/// thread saw.
fn sequential(limiter: &L, prefix: limitcore::Receipt, ops: &[Op], order: &[usize]) -> Vec<Seen> {
    let mut prefix = Some(prefix);
    let mut seen: Vec<Seen> = vec![None; ops.len()];
    let mut next = vec![0usize; ops.len()];
    let mut receipts: Vec<Option<limitcore::Receipt>> = (0..ops.len()).map(|_| None).collect();
    for &t in order {
        let step = next[t];
        next[t] += 1;
        match (ops[t], step) {
            (Op::ReserveSettle { estimate, .. }, 0) => {
                let r = limiter.acquire_refundable_at(estimate, NOW);
                seen[t] = Some(r.is_ok());
                receipts[t] = r.ok();
            }
            (Op::ReserveSettle { actual, .. }, _) => {
                if let Some(r) = receipts[t].take() {
                    limiter.settle(r, actual, NOW);
                }
            }
            (Op::Take(n), _) => seen[t] = Some(limiter.try_acquire_n_at(n, NOW).is_ok()),
            (Op::RefundPrefix, _) => {
                if let Some(r) = prefix.take() {
                    limiter.refund(r, NOW);
                }
            }
            (Op::Charge(n), _) => {
                let c = limiter.charge_at(n, NOW);
                assert_eq!((c.charged, c.shortfall), (n, 0));
            }
        }
    }
    seen
}

/// Every interleaving of the threads' steps (each thread's own order kept).
fn orders(ops: &[Op]) -> Vec<Vec<usize>> {
    fn go(left: &mut Vec<usize>, acc: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.iter().all(|&l| l == 0) {
            out.push(acc.clone());
            return;
        }
        for t in 0..left.len() {
            if left[t] > 0 {
                left[t] -= 1;
                acc.push(t);
                go(left, acc, out);
                acc.pop();
                left[t] += 1;
            }
        }
    }
    let mut out = Vec::new();
    go(
        &mut ops.iter().map(|&op| steps(op)).collect(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

/// The race: a limiter of `burst` with one permit taken by the main thread (the prefix,
/// whose receipt a `RefundPrefix` thread gives back), then one thread per op. Its outcome
/// must be one of the sequential ones.
fn check(name: &'static str, burst: u32, ops: &'static [Op]) {
    model(name, move || {
        let limiter = loom::sync::Arc::new(
            L::with_clock(quota(burst), ManualClock::starting_at(NOW)).unwrap(),
        );
        let prefix = loom::sync::Arc::new(loom::sync::Mutex::new(Some(
            limiter.acquire_refundable_at(1, NOW).unwrap(),
        )));
        let handles: Vec<_> = ops
            .iter()
            .map(|&op| {
                let (limiter, prefix) = (limiter.clone(), prefix.clone());
                loom::thread::spawn(move || match op {
                    Op::ReserveSettle { estimate, actual } => {
                        let r = limiter.acquire_refundable_at(estimate, NOW);
                        let seen = r.is_ok();
                        if let Ok(r) = r {
                            limiter.settle(r, actual, NOW);
                        }
                        Some(seen)
                    }
                    Op::Take(n) => Some(limiter.try_acquire_n_at(n, NOW).is_ok()),
                    Op::RefundPrefix => {
                        if let Some(r) = prefix.lock().unwrap().take() {
                            limiter.refund(r, NOW);
                        }
                        None
                    }
                    Op::Charge(n) => {
                        let c = limiter.charge_at(n, NOW);
                        assert_eq!((c.charged, c.shortfall), (n, 0));
                        None
                    }
                })
            })
            .collect();
        let seen: Vec<Seen> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // No charge lost, none counted twice: on a frozen clock every permit held at the end
        // is one emission interval of the TAT past `NOW` (the refund of the prefix, and the
        // settle's give-back, are exact at `NOW`).
        let held: u32 = ops
            .iter()
            .zip(&seen)
            .map(|(op, seen)| match (op, seen) {
                (Op::ReserveSettle { actual, .. }, Some(true)) => *actual,
                (Op::Take(n), Some(true)) | (Op::Charge(n), _) => *n,
                _ => 0,
            })
            .sum::<u32>()
            + u32::from(!ops.contains(&Op::RefundPrefix));
        assert_eq!(
            limiter.tat(),
            NOW + u64::from(held) * loom_tests::T,
            "{name}: {seen:?}"
        );
        let outcome = (seen, limiter.tat());
        let sequential: Vec<(Vec<Seen>, u64)> = orders(ops)
            .iter()
            .map(|order| {
                let fresh = L::with_clock(quota(burst), ManualClock::starting_at(NOW)).unwrap();
                let prefix = fresh.acquire_refundable_at(1, NOW).unwrap();
                (sequential(&fresh, prefix, ops, order), fresh.tat())
            })
            .collect();
        assert!(
            sequential.contains(&outcome),
            "{name}: {outcome:?} is no sequential outcome: {sequential:?}"
        );
    });
}

/// A reservation of 2 settled to 1 races a request for 2 and the refund of the prefix:
/// the request fits only where the permits it needs were free at its step.
#[test]
fn settle_below_the_estimate_races_a_take_and_a_refund() {
    check(
        "settle 2→1 vs take 2 vs refund",
        3,
        &[
            Op::ReserveSettle {
                estimate: 2,
                actual: 1,
            },
            Op::Take(2),
            Op::RefundPrefix,
        ],
    );
}

/// A reservation of 1 settled to 3 (its excess charged into debt) races a request for 2
/// and a charge of 1: every charge is recorded once, and the request never fits into
/// permits a charge had already used.
#[test]
fn settle_above_the_estimate_races_a_take_and_a_charge() {
    check(
        "settle 1→3 vs take 2 vs charge 1",
        3,
        &[
            Op::ReserveSettle {
                estimate: 1,
                actual: 3,
            },
            Op::Take(2),
            Op::Charge(1),
        ],
    );
}
