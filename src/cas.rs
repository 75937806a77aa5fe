//! The single compare-and-swap loop that applies a pure rate transition to one `AtomicU64`.
//!
//! Every single-word limiter is a pure function `(old word, now, request) -> Result<new word,
//! Denied>` plus this loop. Keeping the loop in one place means it is checked once, by loom,
//! for every limiter built on it.
//!
//! # Orderings
//!
//! The state word is the limiter's entire shared state: no other memory is published through
//! it and no decision depends on any other location. Read-modify-write operations on one
//! location are totally ordered (its modification order) whatever their ordering argument,
//! and a successful `compare_exchange` replaces exactly the value it read, the latest in that
//! order. So every admission is a transition from the state the previous admission left, and
//! `Relaxed` is enough for correctness (no permit can be created by a race). The limiter does
//! **not** act as a memory fence for the caller's data; use a real synchronisation primitive
//! for that.
//!
//! # Release for the budgets
//!
//! The state cells of every rule ([`cell`](crate::cell)) store with `Release` on success.
//! The rules above need only `Relaxed`; a [`Budget`](crate::Budget) needs more: its word
//! carries the generation of the configuration it was written under, and a decision that
//! reads a word must then read a configuration at least that new. So every successful
//! compare-and-swap of a state word is a release, and a budget follows its (relaxed) load
//! of a word with an acquire fence (`budget::live::Live::resolve`): whoever reads a word
//! sees everything its writer had seen (the configuration it decided under, or published
//! before converting). On x86-64 a release compare-and-swap is the same instruction as a
//! relaxed one, and an acquire fence only restrains the compiler.
//!
//! A protocol that spans several words ([`KeyedSketch`](crate::KeyedSketch)'s rows) needs
//! more than that from some of its RMWs; it passes the success ordering its own proof asks
//! for to [`apply_ordered`]. The first load and a failed CAS stay `Relaxed` there too: their
//! values are only retried on, never decided on.

use crate::sync::{AtomicU64, Backoff, Ordering};

/// Apply `transition` to `word` atomically: retry on interference, never write on denial.
///
/// `transition` is pure: given the current word it returns the word to store and a value for
/// the caller (a reservation's delay, or `()`), or the error (a denial; for keyed
/// limiters also "this state was retired"). It may be called more than
/// once (once per attempt), always with the freshest value; the value of the attempt whose
/// CAS succeeded is returned.
#[inline(always)]
pub(crate) fn apply<T, E, F>(word: &AtomicU64, transition: F) -> Result<T, E>
where
    F: Fn(u64) -> Result<(u64, T), E>,
{
    // Relaxed: the RMW itself is what serialises admissions (module note).
    apply_ordered(word, Ordering::Relaxed, transition)
}

/// [`apply`] with `success` as the ordering of the CAS that stores the new word (for
/// multi-word protocols; see the module note). Every other access is `Relaxed`.
#[inline(always)]
pub(crate) fn apply_ordered<T, E, F>(
    word: &AtomicU64,
    success: Ordering,
    transition: F,
) -> Result<T, E>
where
    F: Fn(u64) -> Result<(u64, T), E>,
{
    // Relaxed: a stale value only makes the CAS below fail and retry with the fresh one;
    // see the module's "Orderings" note.
    let current = word.load(Ordering::Relaxed);
    let (next, value) = transition(current)?;
    // `success` as the caller's protocol needs; Relaxed on failure: the value that beat us is
    // only retried on.
    match word.compare_exchange_weak(current, next, success, Ordering::Relaxed) {
        Ok(_) => Ok(value),
        Err(actual) => apply_contended(word, actual, success, transition),
    }
}

/// The retry path: another thread (or a spurious weak-CAS failure) got in between.
#[cold]
#[inline(never)]
fn apply_contended<T, E, F>(
    word: &AtomicU64,
    mut current: u64,
    success: Ordering,
    transition: F,
) -> Result<T, E>
where
    F: Fn(u64) -> Result<(u64, T), E>,
{
    let backoff = Backoff::new();
    // The first retry goes at once: the value that beat us is fresh, and with a few threads
    // (the common case) the retry usually wins. Only a thread that keeps losing backs off,
    // so that many threads on one word do not keep its line in flight.
    let mut first = true;
    loop {
        let (next, value) = transition(current)?;
        // As in `apply_ordered`; a failure returns the value that beat us and we retry on it.
        match word.compare_exchange_weak(current, next, success, Ordering::Relaxed) {
            Ok(_) => return Ok(value),
            Err(actual) => {
                current = actual;
                if !core::mem::take(&mut first) {
                    backoff.spin();
                }
            }
        }
    }
}
