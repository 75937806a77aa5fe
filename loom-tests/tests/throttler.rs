//! Loom models of the `Throttler`'s task lifecycle (README, model 12).
//!
//! The real throttler runs here: its worker is started on a loom thread through the
//! `with_spawner` test hook, its locks are loom's and its waits park loom's threads
//! (`src/sync.rs`, the waiting layer's blocking driver), and it reads a `ManualClock` (loom
//! atomics, and a loom lock for the clock's waiters). So
//! loom explores every order of the worker's `begin` against a handle's `cancel`, a drop or
//! shutdown of the throttler and the clock's wake-up, and reports a deadlock if any handle
//! could wait forever (every thread blocked) or a wake-up could be lost.
//!
//! Preemption bound: 3 (`loom_tests::PREEMPTION_BOUND`, set on `loom::model::Builder`). Every
//! transition of a task is one critical section of its lock, and the protocol's decisions
//! are made under the queue lock; a thread blocked on a lock or parked in a wait switches
//! without a preemption. The races that matter (a cancel, drop or advance landing between
//! the worker's look at the queue and its `begin`, or between its registration with the clock
//! and its sleep) take 1–2 preemptions; bound 3 also lets a third thread land in each.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p loom-tests --release --test throttler`.
#![cfg(limitcore_loom)]

use limitcore::clock::{Clock, ManualClock, Nanos};
use limitcore::{Quota, TaskError, TaskHandle, Throttler};
use loom_tests::{model, Outcomes, NOW};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The task period: one start per `P` ns.
const P: Nanos = 100;

/// The payload of the tasks that panic on purpose (their message is not printed).
const TASK_PANIC: &str = "this task panics on purpose";

/// Start the worker on a loom thread (its join handle is not needed: the worker stops by
/// itself once the throttler is dropped or shut down, which every model does).
fn loom_spawn(worker: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    drop(loom::thread::spawn(worker));
    Ok(())
}

/// A fresh throttler at [`NOW`], one start per [`P`] ns, its worker on loom threads.
fn throttler(clock: &ManualClock) -> Throttler<u8, ManualClock> {
    Throttler::with_clock(
        Quota::new(1, Duration::from_nanos(P)).expect("valid quota"),
        Vec::new(),
        clock.clone(),
    )
    .expect("valid throttler")
    .with_spawner(loom_spawn)
}

/// Keep the default panic message for everything but [`TASK_PANIC`] (thousands of
/// executions would print it otherwise).
fn quiet_task_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&TASK_PANIC) {
                default(info);
            }
        }));
    });
}

/// A task due now that records that it ran (a std atomic: a record, not part of the
/// protocol; the handle's outcome is what orders it before the check).
fn due_task(t: &Throttler<u8, ManualClock>, panics: bool) -> (TaskHandle<u32>, Arc<AtomicBool>) {
    let ran = Arc::new(AtomicBool::new(false));
    let record = ran.clone();
    let handle = t
        .submit(None, move || {
            record.store(true, Ordering::SeqCst);
            if panics {
                std::panic::panic_any(TASK_PANIC);
            }
            7
        })
        .expect("submitted");
    assert_eq!(handle.start(), NOW, "due at once");
    (handle, ran)
}

/// The checks every model makes on a task's outcome: exactly one of run and cancelled, the
/// outcome the one the closure had (its value, or its panic), and the closure gone (run or
/// dropped) by the time the outcome is seen. Returns (ran, cancelled).
fn settle(outcome: Result<u32, TaskError>, ran: &Arc<AtomicBool>, panics: bool) -> (bool, bool) {
    let did_run = ran.load(Ordering::SeqCst);
    assert_eq!(
        Arc::strong_count(ran),
        1,
        "the closure outlived the outcome"
    );
    match outcome {
        Ok(value) => {
            assert!(did_run && !panics, "a value without a run");
            assert_eq!(value, 7);
            (true, false)
        }
        Err(TaskError::Panicked(panic)) => {
            assert!(did_run && panics, "a panic without a run");
            assert_eq!(
                panic.into_payload().downcast_ref::<&str>(),
                Some(&TASK_PANIC)
            );
            (true, false)
        }
        Err(TaskError::Cancelled) => {
            assert!(!did_run, "ran and cancelled");
            (false, true)
        }
        Err(other) => panic!("unexpected outcome {other:?}"),
    }
}

/// The handle's `cancel` races the worker's `begin`: `cancel` returns true exactly when the
/// outcome is `Cancelled`, and the task ran exactly when it was not cancelled. Patterns:
/// (ran, cancel returned true).
fn cancel_races_begin(name: &str, panics: bool) -> Outcomes {
    quiet_task_panics();
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model(name, move || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (handle, ran) = due_task(&t, panics);
        let cancelled = handle.cancel();
        let (did_run, was_cancelled) = settle(handle.wait_blocking(), &ran, panics);
        assert_eq!(
            cancelled, was_cancelled,
            "cancel's answer and the outcome agree"
        );
        drop(t);
        seen.record_pattern(vec![did_run, cancelled]);
    });
    outcomes
}

#[test]
fn cancel_races_the_workers_begin() {
    cancel_races_begin("throttler: cancel vs begin", false).assert_exactly(&["NY", "YN"]);
}

#[test]
fn cancel_races_the_begin_of_a_panicking_task() {
    cancel_races_begin("throttler: cancel vs begin, the task panics", true)
        .assert_exactly(&["NY", "YN"]);
}

/// Dropping the throttler races the worker's `begin`: the task runs (begun first) or is
/// cancelled, never both, and never starts after the drop returned. Patterns: (ran).
#[test]
fn drop_races_the_workers_begin() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model("throttler: drop vs begin", move || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (handle, ran) = due_task(&t, false);
        drop(t);
        // The drop either found the task queued (and cancelled it, on this thread) or found
        // it begun: never still pending, to be begun later.
        let stage = format!("{handle:?}");
        assert!(
            !stage.contains("Pending"),
            "pending after the drop: {stage}"
        );
        let begun = stage.contains("Running") || stage.contains("Done");
        let (did_run, _) = settle(handle.wait_blocking(), &ran, false);
        assert_eq!(did_run, begun, "after the drop: {stage}");
        seen.record_pattern(vec![did_run]);
    });
    outcomes.assert_exactly(&["N", "Y"]);
}

/// A handle's `cancel` (on its own thread) and the drop of the throttler (main) both race
/// the worker's `begin`. Exactly one outcome; `cancel` returns true only if it was the one
/// that cancelled. Patterns: (ran, cancel returned true).
#[test]
fn cancel_and_drop_race_the_workers_begin() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model("throttler: cancel and drop vs begin", move || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (handle, ran) = due_task(&t, false);
        let handle = Arc::new(handle);
        let canceller = {
            let handle = handle.clone();
            loom::thread::spawn(move || handle.cancel())
        };
        drop(t);
        let cancelled = canceller.join().expect("canceller");
        let handle = Arc::into_inner(handle).expect("the only handle left");
        let (did_run, was_cancelled) = settle(handle.wait_blocking(), &ran, false);
        assert!(
            !(cancelled && did_run),
            "cancel returned true and the task ran"
        );
        assert!(!cancelled || was_cancelled);
        seen.record_pattern(vec![did_run, cancelled]);
    });
    // NN: the drop cancelled it first.
    outcomes.assert_exactly(&["NN", "NY", "YN"]);
}

/// `shutdown` races the worker's `begin`: if it cancelled the task it says so (1); if not,
/// the task had begun, and `shutdown` returns only after the task finished. Patterns: (ran,
/// shutdown cancelled it).
#[test]
fn shutdown_races_the_workers_begin() {
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    model("throttler: shutdown vs begin", move || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (handle, ran) = due_task(&t, false);
        let cancelled = t.shutdown();
        assert!(
            handle.is_finished(),
            "shutdown returned before the running task"
        );
        let (did_run, was_cancelled) = settle(handle.wait_blocking(), &ran, false);
        assert_eq!(cancelled == 1, was_cancelled);
        seen.record_pattern(vec![did_run, cancelled == 1]);
    });
    outcomes.assert_exactly(&["NY", "YN"]);
}

/// The scenario: the worker waits for a start (asleep until the clock moves) when
/// the throttler is dropped. The task is cancelled, never run, and the worker wakes up and
/// stops (a worker left asleep would be reported as a deadlock).
#[test]
fn drop_while_the_worker_waits_for_a_start() {
    model("throttler: drop while the worker waits for a start", || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (first, _) = due_task(&t, false);
        let ran = Arc::new(AtomicBool::new(false));
        let second = {
            let ran = ran.clone();
            t.submit(None, move || {
                ran.store(true, Ordering::SeqCst);
                7
            })
            .expect("submitted")
        };
        assert_eq!(second.start(), NOW + P, "the clock never gets there");
        first.wait_blocking().expect("the first ran");
        drop(t);
        assert!(second.is_finished(), "not cancelled by the drop");
        let (did_run, cancelled) = settle(second.wait_blocking(), &ran, false);
        assert!(!did_run && cancelled);
    });
}

/// The worker waits for a start that the main thread reaches with `advance` (by `steps`, of
/// which the first may come from another thread): no wake-up is lost (a lost one leaves the
/// worker asleep and `wait` blocked: loom reports the deadlock), and the task runs exactly
/// when the clock reaches its start, never earlier.
fn advance_wakes_the_worker(name: &str, helper_step: Option<Nanos>) {
    model(name, move || {
        let clock = ManualClock::starting_at(NOW);
        let t = throttler(&clock);
        let (first, _) = due_task(&t, false);
        let seen_at = Arc::new(std::sync::Mutex::new(None));
        let second = {
            let (clock, seen_at) = (clock.clone(), seen_at.clone());
            t.submit(None, move || {
                let now = clock.now();
                *seen_at.lock().unwrap() = Some(now);
            })
            .expect("submitted")
        };
        assert_eq!(second.start(), NOW + P);
        let helper = helper_step.map(|step| {
            let clock = clock.clone();
            loom::thread::spawn(move || clock.advance_nanos(step))
        });
        clock.advance_nanos(P - helper_step.unwrap_or(0));
        second
            .wait_blocking()
            .expect("ran once the clock reached its start");
        assert_eq!(*seen_at.lock().unwrap(), Some(NOW + P), "ran at its start");
        if let Some(helper) = helper {
            helper.join().expect("helper");
        }
        first.wait_blocking().expect("the first ran");
        drop(t);
    });
}

#[test]
fn an_advance_wakes_the_worker() {
    advance_wakes_the_worker("throttler: one advance wakes the worker", None);
}

#[test]
fn two_advances_from_two_threads_wake_the_worker() {
    advance_wakes_the_worker(
        "throttler: two advances (two threads) wake the worker",
        Some(P / 2),
    );
}
