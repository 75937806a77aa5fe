//! Loom models of the lease protocol on one key's [`Entry`]: the handles' pins, the sweep's
//! retirement and a fetch's install racing each other, and the waiters' wake-ups (a waiter
//! on an entry the sweep retires is woken, a waiter on a fetch is woken when it ends and
//! then sees the fetch's cells). Every interleaving loom finds of the entry's atomics, its
//! lease word (the core's compare-and-swap loop, `crate::sync::WordCell` under the model)
//! and its event (the core's `limitcore::notify::Event`, on loom's lock and atomics) is
//! checked; a waiter that is never woken
//! is a deadlock loom reports.
//!
//! Run (release, a target directory of their own; see `crate::sync`):
//!
//! ```text
//! RUSTFLAGS="--cfg limitcore_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p limitcore-redis --release --lib loom
//! ```
//!
//! Every model runs with a preemption bound of 3 ([`PREEMPTION_BOUND`], as the core's
//! `loom-tests`; `LOOM_MAX_PREEMPTIONS=n` reruns them with another), which covers three
//! threads that all read the entry before any of them writes. `-- --nocapture` prints how
//! many executions each explored and how long it took.
//!
//! The map of entries (papaya) is not in the models: its atomics are its own. What the map
//! adds (a lookup that meets a retired entry replaces it, and removes only it) is tested
//! step by step without a server in `entry.rs` and `key.rs`.

use super::entry::Entry;
use super::LeaseRule;
use loom::thread;

use std::sync::Arc;

const MS: u64 = 1_000_000;

/// The preemption bound of every model here (see the module docs).
const PREEMPTION_BOUND: usize = 3;

/// Run `f` under loom with [`PREEMPTION_BOUND`] (or `LOOM_MAX_PREEMPTIONS`), never cut short,
/// and print how many executions were explored in how long.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(
        std::env::var("LOOM_MAX_PREEMPTIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PREEMPTION_BOUND),
    );
    builder.max_permutations = None;
    builder.max_duration = None;
    builder.checkpoint_file = None;
    let bound = builder.preemption_bound;
    // A std atomic: invisible to loom, it survives across executions.
    let executions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&executions);
    let started = std::time::Instant::now();
    builder.check(move || {
        // Relaxed: a count of executions, read after the model.
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "loom model {name}: {} executions, preemption bound {bound:?}, {:.2?}",
        // Relaxed: see above.
        executions.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed()
    );
}

/// The rule of the models: epoch 0, `L = 4`.
fn rule() -> LeaseRule {
    LeaseRule::with_epoch("100/s burst 10".parse().unwrap(), 0, 4)
}

/// One wait of `LeasedLimiter::acquire` on `entry`: its listener first, then the check,
/// then the wait if the check says so (`await_lease`'s order, with loom's executor in place
/// of tokio's timer). Returns whether it waited; a waiter woken decides again, and waits
/// again while the slot is held ([`wait_until_free`]).
fn wait_for_fetch(entry: &Entry) -> bool {
    let listener = entry.arrived.listen();
    if entry.awaits_fetch() {
        loom::future::block_on(listener);
        return true;
    }
    false
}

/// A waiter's loop: wait while a fetch (or the sweep) holds the slot of a live entry.
/// Returns once it has seen the slot free or the entry retired; a waiter that is never
/// woken is a deadlock, which loom reports.
fn wait_until_free(entry: &Entry) {
    while wait_for_fetch(entry) {}
}

/// A fetch's whole life on `entry`: take the slot, install `cells` valid until 10 ms, end.
/// `false` if the slot was taken (by another fetch or the sweep).
fn fetch(entry: &Entry, rule: &LeaseRule, cells: u32) -> bool {
    if !entry.take_fetch_slot() {
        return false;
    }
    entry.install(rule, cells, 0, 10 * MS);
    entry.end_fetch(cells);
    true
}

/// A handle's pin, the sweep's step and a refill's fetch, all at once on an idle entry:
/// the sweep retires the entry only if no handle pinned it and no cell arrived; a retired
/// entry holds no cell and keeps its fetch slot for good (a late decision on it is refused,
/// and nothing is ever installed on it); a pinned one is never retired; a fetch that ran
/// installed its cells on the live entry.
#[test]
fn pin_racing_retire_racing_a_fetchs_install() {
    model("pin_racing_retire_racing_a_fetchs_install", || {
        let rule = rule();
        let entry = Arc::new(Entry::new(&rule, 1));
        let sweep = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || entry.sweep_step(&rule, 0))
        };
        let pin = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || entry.pin())
        };
        let fetched = fetch(&entry, &rule, 2);
        let retired = sweep.join().unwrap();
        let pinned = pin.join().unwrap();

        assert_eq!(retired, entry.is_retired());
        assert!(!(retired && pinned), "a pinned entry was retired");
        let cells = rule.cells(&entry.word.load(), 0);
        if retired {
            assert!(!fetched, "a fetch ran on a retired entry");
            assert_eq!(cells, 0, "a retired entry holds cells");
            assert!(
                !entry.take_fetch_slot(),
                "a retired entry's slot was given back"
            );
        } else {
            assert_eq!(cells, if fetched { 2 } else { 0 });
            assert!(entry.take_fetch_slot(), "a live entry's slot was kept");
        }
    });
}

/// A waiter on an idle entry while the sweep steps on it (a handle's pin racing, so that the
/// sweep either retires the entry or gives its slot back): the waiter is always woken (or
/// never waits), and then decides again at once: the slot is free, or the entry is retired.
#[test]
fn a_waiter_on_an_entry_the_sweep_retires_is_woken() {
    model("a_waiter_on_an_entry_the_sweep_retires_is_woken", || {
        let rule = rule();
        let entry = Arc::new(Entry::new(&rule, 1));
        let sweep = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || entry.sweep_step(&rule, 0))
        };
        let pin = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || entry.pin())
        };
        wait_until_free(&entry);
        let retired = sweep.join().unwrap();
        let pinned = pin.join().unwrap();
        assert!(!(retired && pinned));
    });
}

/// A waiter on an entry whose fetch is in flight, with the sweep stepping on it too: the
/// waiter is woken when the fetch ends (or by the sweep's brief hold of the slot after it),
/// and then sees the fetch's cells; the sweep never retires the entry (it holds cells).
#[test]
fn a_waiter_on_a_fetch_is_woken_when_it_ends_and_sees_its_cells() {
    model(
        "a_waiter_on_a_fetch_is_woken_when_it_ends_and_sees_its_cells",
        || {
            let rule = rule();
            let entry = Arc::new(Entry::new(&rule, 1));
            assert!(entry.take_fetch_slot(), "the fetch in flight");
            let fetch = {
                let entry = Arc::clone(&entry);
                thread::spawn(move || {
                    entry.install(&rule, 2, 0, 10 * MS);
                    entry.end_fetch(2);
                })
            };
            let sweep = {
                let entry = Arc::clone(&entry);
                thread::spawn(move || entry.sweep_step(&rule, 0))
            };
            wait_until_free(&entry);
            assert_eq!(rule.cells(&entry.word.load(), 0), 2, "the fetch's cells");
            fetch.join().unwrap();
            assert!(!sweep.join().unwrap(), "an entry holding cells was retired");
        },
    );
}

/// Two refills racing for the slot while a waiter waits: one fetch at a time (the second, if
/// it runs, runs after the first ended, and each installs its cells once), and a waiter that
/// waited is woken with the cells of the fetch it waited for.
#[test]
fn one_fetch_at_a_time_and_its_waiter_sees_it() {
    model("one_fetch_at_a_time_and_its_waiter_sees_it", || {
        let rule = rule();
        let entry = Arc::new(Entry::new(&rule, 1));
        let other = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || fetch(&entry, &rule, 3))
        };
        let waiter = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || {
                if wait_for_fetch(&entry) {
                    assert!(
                        rule.cells(&entry.word.load(), 0) >= 3,
                        "woken before the install"
                    );
                }
            })
        };
        let mine = fetch(&entry, &rule, 3);
        let theirs = other.join().unwrap();
        waiter.join().unwrap();
        let cells = rule.cells(&entry.word.load(), 0);
        assert_eq!(cells, 3 * (u32::from(mine) + u32::from(theirs)));
        assert!(mine || theirs, "no refill ran");
    });
}
