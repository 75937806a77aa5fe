//! The ordered multi-channel throttler: FIFO, earliest, exact, on random submissions; and
//! its worker under faults (drop and shutdown while tasks wait or run, panicking tasks, a
//! worker that cannot start or stops, no polling), each test bounded in time.

use limitcore::clock::{Clock, ManualClock, MonotonicClock, Nanos, SleepHint};
use limitcore::{Quota, SubmitError, TaskError, TaskHandle, Throttler};
use limitcore_testkit::cases;
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

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
        assert_eq!(h.wait_blocking().unwrap(), i * 10);
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
    assert_eq!(first.wait_blocking().unwrap(), 1);
    assert!(matches!(second.wait_blocking(), Err(TaskError::Cancelled)));
    let third = t.submit(None, || 3).unwrap();
    drop(t);
    assert!(matches!(third.wait_blocking(), Err(TaskError::Cancelled)));
}

#[test]
fn max_wait_refuses_without_scheduling() {
    let t = Throttler::with_clock(
        "1/s".parse().unwrap(),
        Vec::<(u8, Quota)>::new(),
        ManualClock::new(),
    )
    .unwrap()
    .with_max_wait(Duration::from_millis(1_500));
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
    // One start per millisecond: the five calls start at 0, 1, 2, 3 and 4 ms.
    let t = Throttler::new("1/ms".parse().unwrap(), Vec::<(u8, Quota)>::new()).unwrap();
    let t0 = std::time::Instant::now();
    for i in 0..5 {
        assert_eq!(t.run(None, async move { i }).await.unwrap(), i);
    }
    assert!(t0.elapsed() >= Duration::from_millis(4));
}

// ---- The worker under faults. ----

/// Run `body` on its own thread and fail if it has not returned within `limit`: a hang fails
/// the test (with a message) instead of stalling the run. A panic in `body` is the test's.
fn within<T: Send + 'static>(limit: Duration, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => {
            thread.join().expect("the body returned");
            value
        }
        Err(RecvTimeoutError::Timeout) => panic!("the test did not finish within {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the body neither returned nor panicked"),
        },
    }
}

/// How long a test may take at most (generous: the machine may be busy).
const TEST_LIMIT: Duration = Duration::from_secs(60);
/// How long an outcome that is already due may take to arrive.
const PROMPT: Duration = Duration::from_secs(10);

fn no_channels() -> Vec<(u8, Quota)> {
    Vec::new()
}

fn one_per(period: Duration) -> Quota {
    Quota::new(1, period).unwrap()
}

/// The task's outcome within [`PROMPT`], or a failure naming the task.
fn outcome<T>(handle: TaskHandle<T>, what: &str) -> Result<T, TaskError> {
    handle
        .wait_blocking_within(PROMPT)
        .unwrap_or_else(|h| panic!("{what}: no outcome within {PROMPT:?} ({h:?})"))
}

fn assert_cancelled<T: std::fmt::Debug>(handle: TaskHandle<T>, what: &str) {
    assert!(handle.is_finished(), "{what}: not settled yet ({handle:?})");
    match outcome(handle, what) {
        Err(TaskError::Cancelled) => {}
        other => panic!("{what}: expected Cancelled, got {other:?}"),
    }
}

/// The scenario, on the real clock: one task run, a second submitted (due one
/// period later), the throttler dropped 50 ms later while the worker waits for that start.
/// The second task must be cancelled, not run early (nor late). The quota was 1/s;
/// here it is 1/min, so that the drop comes before the start even on a loaded machine
/// (the test drops within milliseconds; a second left too little room), and a worker that
/// the drop did not wake would hold the test past [`TEST_LIMIT`].
#[test]
fn drop_while_the_worker_waits_for_a_start_cancels_instead_of_running_early() {
    within(TEST_LIMIT, || {
        let clock = Watched::new(MonotonicClock::new());
        let t =
            Throttler::with_clock("1/min".parse().unwrap(), no_channels(), clock.clone()).unwrap();
        let first = t.submit(None, || ()).unwrap();
        outcome(first, "first").unwrap();
        let asked = clock.asks();
        let ran = Arc::new(AtomicBool::new(false));
        let second = {
            let ran = ran.clone();
            t.submit(None, move || ran.store(true, Ordering::SeqCst))
                .unwrap()
        };
        clock.wait_for_asks(asked + 1); // the worker has taken up the second task's start
        std::thread::sleep(Duration::from_millis(50)); // and sleeps towards it
        assert!(
            clock.now() < second.start(),
            "the test must drop before the start"
        );
        drop(t);
        assert_cancelled(second, "second");
        assert!(!ran.load(Ordering::SeqCst), "the second task ran");
        assert_eq!(Arc::strong_count(&ran), 1, "its closure was dropped");
    });
}

/// Many tasks pending on several channels (and none, and an unknown one) when the throttler
/// is dropped: none runs, and every handle is settled when `drop` returns. The quotas are
/// per minute, so that no task is due before the drop however slowly a loaded machine runs
/// the test (it drops within milliseconds).
#[test]
fn drop_with_many_pending_tasks_on_several_channels_cancels_them_all() {
    within(TEST_LIMIT, || {
        let clock = MonotonicClock::new();
        let quota = |s: &str| s.parse::<Quota>().unwrap();
        let t = Throttler::with_clock(
            quota("5/min"),
            [
                ("a", quota("1/min")),
                ("b", quota("2/min")),
                ("c", quota("1/min")),
            ],
            clock.clone(),
        )
        .unwrap();
        // Fill the first minute, so that no task below is due before the drop.
        for _ in 0..5 {
            t.reserve(None).unwrap();
        }
        let submitted_at = clock.now();
        let ran = Arc::new(AtomicUsize::new(0));
        let channels = [Some("a"), Some("b"), Some("c"), None, Some("unknown")];
        let handles: Vec<_> = (0..60)
            .map(|i| {
                let ran = ran.clone();
                t.submit(channels[i % channels.len()].as_ref(), move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap()
            })
            .collect();
        for h in &handles {
            assert!(
                h.start() >= submitted_at + 30_000_000_000,
                "{h:?} is due too soon"
            );
        }
        std::thread::sleep(Duration::from_millis(20)); // the worker waits for the first
        let first = handles.iter().map(TaskHandle::start).min().unwrap();
        assert!(
            clock.now() < first,
            "the test must drop before the first start"
        );
        drop(t);
        for (i, h) in handles.into_iter().enumerate() {
            assert_cancelled(h, &format!("task {i}"));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a task ran");
        assert_eq!(Arc::strong_count(&ran), 1, "every closure was dropped");
    });
}

/// A task that is running when the throttler is dropped finishes, and `drop` does not wait
/// for it; the pending ones are cancelled at once.
#[test]
fn drop_during_a_running_task_cancels_the_rest_without_waiting() {
    within(TEST_LIMIT, || {
        let t = Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap();
        let (started_tx, started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let running = t
            .submit(None, move || {
                started_tx.send(()).unwrap();
                released.recv_timeout(PROMPT).is_ok()
            })
            .unwrap();
        let pending: Vec<_> = (0..5).map(|i| t.submit(None, move || i).unwrap()).collect();
        started.recv_timeout(PROMPT).unwrap();
        drop(t); // returns although the running task cannot finish until released
        assert!(!running.is_finished(), "drop waited for the running task");
        for (i, h) in pending.into_iter().enumerate() {
            assert_cancelled(h, &format!("pending task {i}"));
        }
        release.send(()).unwrap();
        assert!(outcome(running, "running").unwrap(), "it ran to its end");
    });
}

/// `shutdown` cancels the pending tasks first, then waits for the running one.
#[test]
fn shutdown_waits_for_the_running_task_and_cancels_the_rest() {
    within(TEST_LIMIT, || {
        let t = Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap();
        let (started_tx, started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let running = t
            .submit(None, move || {
                started_tx.send(()).unwrap();
                released.recv_timeout(PROMPT).is_ok()
            })
            .unwrap();
        let pending: Vec<_> = (0..3)
            .map(|i| t.submit(Some(&i), move || i).unwrap())
            .collect();
        let already_cancelled = t.submit(None, || 9).unwrap();
        assert!(already_cancelled.cancel());
        started.recv_timeout(PROMPT).unwrap();
        let (done_tx, done) = mpsc::channel();
        let shutting = std::thread::spawn(move || done_tx.send(t.shutdown()).unwrap());
        // It cancels the pending ones (each outcome waited for: the shutting thread may be
        // slow to start on a loaded machine) while the running task cannot finish...
        for (i, h) in pending.into_iter().enumerate() {
            match outcome(h, &format!("pending task {i}")) {
                Err(TaskError::Cancelled) => {}
                other => panic!("pending task {i}: expected Cancelled, got {other:?}"),
            }
        }
        assert!(!running.is_finished());
        // ...and waits for it (a slow machine can only hide a shutdown that returns early).
        assert_eq!(
            done.recv_timeout(Duration::from_millis(200)),
            Err(RecvTimeoutError::Timeout),
            "shutdown returned while a task was running"
        );
        release.send(()).unwrap();
        assert_eq!(
            done.recv_timeout(PROMPT).unwrap(),
            3,
            "it counts only the tasks it cancelled"
        );
        shutting.join().unwrap();
        assert!(running.is_finished(), "shutdown returned before the task");
        assert!(outcome(running, "running").unwrap());
        assert_cancelled(already_cancelled, "cancelled through its handle");
    });
}

/// `shutdown_within` gives up on a task that keeps running; `Ok` when the worker stops.
#[test]
fn shutdown_within_gives_up_on_a_task_that_keeps_running() {
    within(TEST_LIMIT, || {
        let t = Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap();
        let (started_tx, started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let running = t
            .submit(None, move || {
                started_tx.send(()).unwrap();
                released.recv_timeout(PROMPT).is_ok()
            })
            .unwrap();
        let pending = t.submit(None, || ()).unwrap();
        started.recv_timeout(PROMPT).unwrap();
        let t0 = Instant::now();
        assert_eq!(t.shutdown_within(Duration::from_millis(50)), Err(1));
        assert!(t0.elapsed() >= Duration::from_millis(50));
        assert_cancelled(pending, "pending");
        release.send(()).unwrap();
        assert!(outcome(running, "running").unwrap());

        // An idle worker stops in time; a throttler that never started one has nothing to do.
        let t = Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap();
        outcome(t.submit(None, || ()).unwrap(), "first").unwrap();
        let _pending = t.submit(None, || ()).unwrap();
        assert_eq!(t.shutdown_within(PROMPT), Ok(1));
        let unused = Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap();
        assert_eq!(unused.shutdown(), 0);
    });
}

/// A task that owns the throttler may shut it down or drop it: neither waits for the task
/// itself (which would never end).
#[test]
fn shutdown_or_drop_from_inside_a_task_does_not_wait_for_itself() {
    within(TEST_LIMIT, || {
        for explicit in [true, false] {
            let t = Arc::new(Throttler::new("1/s".parse().unwrap(), no_channels()).unwrap());
            let (go, ready) = mpsc::channel::<()>();
            let owner = t.clone();
            let closing = t
                .submit(None, move || {
                    ready.recv_timeout(PROMPT).unwrap();
                    let t = Arc::try_unwrap(owner).expect("the only reference");
                    if explicit {
                        Some(t.shutdown())
                    } else {
                        drop(t);
                        None
                    }
                })
                .unwrap();
            let pending = t.submit(None, || ()).unwrap();
            drop(t);
            go.send(()).unwrap();
            let expected = explicit.then_some(1);
            assert_eq!(outcome(closing, "closing task").unwrap(), expected);
            assert_cancelled(pending, "pending");
        }
    });
}

/// A panicking task, then 100 more, on the real clock: the panic is reported by its handle,
/// and the 100 run in submission order, never before their starts, which are exactly one
/// period apart as scheduled; the schedule after them is unchanged.
#[test]
fn a_panicking_task_is_contained_and_the_next_100_run_in_order_at_their_starts() {
    within(TEST_LIMIT, || {
        const PERIOD: Nanos = 1_000_000;
        let clock = MonotonicClock::new();
        let t = Throttler::with_clock(
            one_per(Duration::from_nanos(PERIOD)),
            no_channels(),
            clock.clone(),
        )
        .unwrap();
        // Push the first start 200 ms out: every start below is then one period after the
        // previous one, unless a loaded machine holds this thread past a start before it
        // submits; then the start is the time of that submission (measured around it).
        for _ in 0..200 {
            t.reserve(None).unwrap();
        }
        let boom = t
            .submit(None, || -> usize { panic!("task 0 fails") })
            .unwrap();
        let ran: Arc<Mutex<Vec<(usize, Nanos)>>> = Arc::default();
        let mut submitted = Vec::new();
        let handles: Vec<_> = (1..=100)
            .map(|i| {
                let (ran, task_clock) = (ran.clone(), clock.clone());
                let before = clock.now();
                let handle = t
                    .submit(None, move || {
                        ran.lock().unwrap().push((i, task_clock.now()));
                        i
                    })
                    .unwrap();
                submitted.push((before, clock.now()));
                handle
            })
            .collect();
        let starts: Vec<Nanos> = handles.iter().map(TaskHandle::start).collect();
        let mut previous = boom.start();
        for (k, (&start, &(before, after))) in starts.iter().zip(&submitted).enumerate() {
            let due = previous + PERIOD;
            assert!(
                start == due || (start > due && (before..=after).contains(&start)),
                "task {}: start {start}, one period on {due}, submitted in {before}..={after}",
                k + 1
            );
            previous = start;
        }
        match outcome(boom, "task 0") {
            Err(TaskError::Panicked(panic)) => assert_eq!(panic.message(), Some("task 0 fails")),
            other => panic!("task 0: expected its panic, got {other:?}"),
        }
        for (k, h) in handles.into_iter().enumerate() {
            assert_eq!(outcome(h, "a later task").unwrap(), k + 1);
        }
        let ran = ran.lock().unwrap();
        assert_eq!(
            ran.iter().map(|r| r.0).collect::<Vec<_>>(),
            (1..=100).collect::<Vec<_>>(),
            "submission order"
        );
        for &(i, at) in ran.iter() {
            assert!(
                at >= starts[i - 1],
                "task {i} ran at {at} before its start {}",
                starts[i - 1]
            );
        }
        assert_eq!(
            t.reserve_at(None, 0).unwrap(),
            starts[99] + PERIOD,
            "the schedule after them moved"
        );
    });
}

/// The same on a manual clock, moved to each start in turn: every task runs exactly at its
/// start (the clock's advance wakes the worker) and not before it.
#[test]
fn after_a_panicking_task_each_task_starts_exactly_when_a_manual_clock_reaches_it() {
    within(TEST_LIMIT, || {
        const PERIOD: Nanos = 10;
        let clock = ManualClock::new();
        let t = Throttler::with_clock(
            one_per(Duration::from_nanos(PERIOD)),
            no_channels(),
            clock.clone(),
        )
        .unwrap();
        let boom = t.submit(None, || -> Nanos { panic!("no") }).unwrap();
        let handles: Vec<_> = (0..100)
            .map(|_| {
                let clock = clock.clone();
                t.submit(None, move || clock.now()).unwrap()
            })
            .collect();
        assert!(outcome(boom, "task 0").unwrap_err().is_panic());
        let mut handles = handles.into_iter().peekable();
        while let Some(h) = handles.next() {
            let start = h.start();
            assert!(!h.is_finished(), "ran before its start {start}");
            clock.set_nanos(start);
            assert_eq!(
                outcome(h, "task").unwrap(),
                start,
                "ran at its start exactly"
            );
            if let Some(next) = handles.peek() {
                assert_eq!(next.start(), start + PERIOD);
            }
        }
    });
}

/// A worker that cannot be started is an error of `submit`, not a panic; nothing is
/// scheduled, and the next `submit` tries again.
#[test]
fn spawn_failure_is_an_error_that_schedules_nothing() {
    fn refuse(_worker: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "no threads",
        ))
    }
    /// Fails once, then starts an OS thread.
    fn refuse_once(worker: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            return refuse(worker);
        }
        std::thread::Builder::new().spawn(worker).map(drop)
    }
    /// "Starts" the worker by dropping it.
    fn lose(worker: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
        drop(worker);
        Ok(())
    }
    within(TEST_LIMIT, || {
        let manual = || {
            Throttler::with_clock("1/s".parse().unwrap(), no_channels(), ManualClock::new())
                .unwrap()
        };
        let t = manual().with_spawner(refuse);
        for _ in 0..2 {
            match t.submit(None, || 1) {
                Err(SubmitError::Spawn(e)) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock)
                }
                other => panic!("expected a spawn error, got {other:?}"),
            }
        }
        assert_eq!(
            t.reserve(None).unwrap(),
            Duration::ZERO,
            "nothing was scheduled"
        );

        let t = manual().with_spawner(refuse_once);
        assert!(matches!(t.submit(None, || 1), Err(SubmitError::Spawn(_))));
        let retried = t.submit(None, || 2).unwrap();
        assert_eq!(retried.start(), 0);
        assert_eq!(outcome(retried, "after the retry").unwrap(), 2);

        let t = manual().with_spawner(lose);
        assert!(matches!(t.submit(None, || 3), Err(SubmitError::Spawn(_))));
        assert_eq!(
            t.reserve(None).unwrap(),
            Duration::ZERO,
            "nothing was scheduled"
        );
    });
}

/// A clock that counts how often the worker asks it how to sleep (and can be made to panic).
#[derive(Debug, Clone)]
struct Watched<C> {
    inner: C,
    asks: Arc<AtomicUsize>,
    broken: Arc<AtomicBool>,
}

impl<C> Watched<C> {
    fn new(inner: C) -> Self {
        Watched {
            inner,
            asks: Arc::default(),
            broken: Arc::default(),
        }
    }

    fn asks(&self) -> usize {
        self.asks.load(Ordering::SeqCst)
    }

    /// Wait (up to [`PROMPT`]) until the worker has asked the clock `n` times in all.
    fn wait_for_asks(&self, n: usize) {
        let deadline = Instant::now() + PROMPT;
        while self.asks() < n {
            assert!(
                Instant::now() < deadline,
                "the worker never asked the clock"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl<C: Clock> Clock for Watched<C> {
    fn now(&self) -> Nanos {
        self.inner.now()
    }

    fn sleep_hint(&self, deadline: Nanos, waker: &Waker) -> SleepHint {
        self.asks.fetch_add(1, Ordering::SeqCst);
        assert!(!self.broken.load(Ordering::SeqCst), "the clock broke");
        self.inner.sleep_hint(deadline, waker)
    }
}

/// While the next start is 300 ms away on the real clock, the worker sleeps on the OS timer
/// for the whole wait: a handful of questions to the clock, not one per millisecond.
#[test]
fn a_waiting_worker_does_not_poll_the_real_clock() {
    within(TEST_LIMIT, || {
        let clock = Watched::new(MonotonicClock::new());
        let t = Throttler::with_clock(
            one_per(Duration::from_millis(300)),
            no_channels(),
            clock.clone(),
        )
        .unwrap();
        outcome(t.submit(None, || ()).unwrap(), "first").unwrap();
        let before = clock.asks();
        let second = t.submit(None, || ()).unwrap();
        outcome(second, "second").unwrap();
        let asks = clock.asks() - before;
        assert!(
            (1..=5).contains(&asks),
            "the worker asked the clock {asks} times during a 300 ms wait"
        );
    });
}

/// On a frozen manual clock the worker sleeps until the clock moves: no question to the clock
/// while nothing happens, and one advance starts the task.
#[test]
fn a_waiting_worker_sleeps_until_a_manual_clock_moves() {
    within(TEST_LIMIT, || {
        let clock = Watched::new(ManualClock::new());
        let t =
            Throttler::with_clock("1/s".parse().unwrap(), no_channels(), clock.clone()).unwrap();
        outcome(t.submit(None, || ()).unwrap(), "first").unwrap();
        let before = clock.asks();
        let second = t.submit(None, || ()).unwrap();
        clock.wait_for_asks(before + 1); // the worker asks, then sleeps
        let asked = clock.asks();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(clock.asks(), asked, "the worker polled a frozen clock");
        assert!(!second.is_finished());
        clock.inner.advance(Duration::from_millis(400)); // wakes it; not due yet
        let second = second
            .wait_blocking_within(Duration::from_millis(100))
            .expect_err("ran before its start");
        clock.inner.advance(Duration::from_millis(600)); // due
        outcome(second, "second").unwrap();
        assert!(clock.asks() <= asked + 3, "{} asks", clock.asks() - asked);
    });
}

/// If the worker stops (here its clock panics), its queued tasks are cancelled, and the next
/// `submit` starts a new worker; the cancelled task's slot stays taken.
#[test]
fn a_stopped_worker_cancels_its_tasks_and_the_next_submit_starts_another() {
    within(TEST_LIMIT, || {
        let clock = Watched::new(ManualClock::new());
        let t =
            Throttler::with_clock("1/s".parse().unwrap(), no_channels(), clock.clone()).unwrap();
        outcome(t.submit(None, || 1).unwrap(), "first").unwrap();
        let before = clock.asks();
        let stranded = t.submit(None, || 2).unwrap(); // at 1 s
        clock.wait_for_asks(before + 1); // the worker sleeps towards it
        clock.broken.store(true, Ordering::SeqCst);
        clock.inner.advance_nanos(1); // wakes the worker, which asks the broken clock
        assert!(outcome(stranded, "stranded").unwrap_err().is_cancelled());
        clock.broken.store(false, Ordering::SeqCst);
        let next = t.submit(None, || 3).unwrap();
        assert_eq!(
            next.start(),
            2_000_000_000,
            "the cancelled slot stays taken"
        );
        clock.inner.set(Duration::from_secs(2));
        assert_eq!(outcome(next, "next").unwrap(), 3);
    });
}

/// `wait_blocking_within` hands the handle back while there is no outcome yet.
#[test]
fn wait_blocking_within_returns_the_handle_until_there_is_an_outcome() {
    within(TEST_LIMIT, || {
        let t = Throttler::with_clock("1/s".parse().unwrap(), no_channels(), ManualClock::new())
            .unwrap();
        let _first = t.submit(None, || 1).unwrap();
        let second = t.submit(None, || 2).unwrap(); // at 1 s, on a frozen clock
        let t0 = Instant::now();
        let second = second
            .wait_blocking_within(Duration::from_millis(30))
            .expect_err("no outcome yet");
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert!(second.cancel());
        assert!(matches!(
            second.wait_blocking_within(Duration::ZERO),
            Ok(Err(TaskError::Cancelled))
        ));
    });
}

// ---- The async `run`: the same contract. ----

/// `run` waits for the throttler's clock: on a manual clock, until it is moved (not for
/// tokio's timer), and not a nanosecond before its start.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn run_waits_for_a_manual_clock() {
    let clock = ManualClock::new();
    let t = Arc::new(
        Throttler::with_clock("1/s".parse().unwrap(), no_channels(), clock.clone()).unwrap(),
    );
    assert_eq!(t.run(None, async { 1 }).await.unwrap(), 1);
    let second = {
        let (t, clock) = (t.clone(), clock.clone());
        tokio::spawn(async move { t.run(None, async move { clock.now() }).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!second.is_finished(), "ran on a frozen clock");
    clock.advance(Duration::from_millis(999));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!second.is_finished(), "ran 1 ms early");
    clock.advance(Duration::from_millis(1));
    let ran_at = tokio::time::timeout(PROMPT, second)
        .await
        .expect("the advance woke it")
        .unwrap()
        .unwrap();
    assert_eq!(ran_at, 1_000_000_000);
}

/// Dropping a `run` future before its start cancels the call: the future is never polled,
/// and its slot stays taken.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn dropping_a_run_future_cancels_it_and_keeps_its_slot() {
    let clock = ManualClock::new();
    let t = Throttler::with_clock("1/s".parse().unwrap(), no_channels(), clock.clone()).unwrap();
    t.run(None, async {}).await.unwrap();
    let polled = Arc::new(AtomicBool::new(false));
    let call = {
        let polled = polled.clone();
        t.run(None, async move { polled.store(true, Ordering::SeqCst) })
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(20), call)
            .await
            .is_err(),
        "due at 1 s on a frozen clock"
    );
    assert!(!polled.load(Ordering::SeqCst));
    assert_eq!(Arc::strong_count(&polled), 1, "the future was dropped");
    assert_eq!(
        t.reserve_at(None, 0).unwrap(),
        2_000_000_000,
        "the dropped call's slot (1 s) stays taken"
    );
}

/// A panic in a `run` future reaches its caller (it runs in the caller's task); the
/// throttler is unharmed and later starts do not move.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_panic_in_a_run_future_reaches_its_caller_and_nothing_else() {
    let clock = ManualClock::new();
    let t = Arc::new(
        Throttler::with_clock("1/s".parse().unwrap(), no_channels(), clock.clone()).unwrap(),
    );
    let boom = {
        let t = t.clone();
        tokio::spawn(async move { t.run(None, async { panic!("the future fails") }).await })
    };
    let error = boom.await.unwrap_err();
    assert!(error.is_panic());
    let after = {
        let t = t.clone();
        tokio::spawn(async move { t.run(None, async { 2 }).await })
    };
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        tokio::time::timeout(PROMPT, after)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        2
    );
    assert_eq!(
        t.reserve_at(None, 0).unwrap(),
        2_000_000_000,
        "starts 0 and 1 s taken"
    );
}
