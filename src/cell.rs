//! How a rule's state is shared between threads: the cells of layer 0.
//!
//! A [`Rule`](crate::rules::Rule) is pure; its state lives in a cell that a shell updates:
//!
//! - a `u64` word lives in one `AtomicU64`, changed only through the crate's one CAS loop
//!   (`cas`): lock-free, and `Relaxed` is enough (see the "Orderings" of `src/cas.rs`);
//! - any other state (the sliding log's ring) lives behind a mutex.
//!
//! A keyed slot ([`Keyed`][crate::Keyed]) adds two protocols: *retirement* (eviction: a
//! slot can be retired once its state is indistinguishable from a fresh one, after which no
//! update may touch it) and the *redirect* marker (a slot of `Keyed`'s main map that holds
//! no state: the key's state lives in the map of keys with their own quota).
//!
//! # Orderings of the retirement protocol on a word
//!
//! The evictor replaces an idle word by the reserved word `RETIRED` (`u64::MAX`) with a
//! compare-and-swap, and only then removes the key from the map. Every acquirer's CAS
//! expects the exact word it decided on, so exactly one of "an acquirer's charge" and "the
//! retirement" wins (the word's modification order is total, whatever the orderings); an
//! acquirer that finds `RETIRED` helps remove the dead entry and looks the key up again,
//! getting a fresh state that is indistinguishable from the retired one. No charge is ever
//! applied to a removed state, and none is applied twice. The retiring CAS publishes
//! nothing but the word itself, so it is `Relaxed` like every other access here. Under a
//! mutex (the sliding log's slot) the lock orders everything, and retirement is the slot's
//! state becoming `Held::Retired`.
//!
//! # Why the words are raw `AtomicU64`s
//!
//! The `atomic` crate's `Atomic<T>` (a typed word over a `bytemuck::NoUninit` struct) was
//! considered for the state words and not adopted, for two reasons. It stores through
//! `core`'s atomics, which loom cannot see: every model of `loom-tests` would lose the
//! word it checks, and a shim under the loom cfg would have to re-implement `Atomic<T>` over
//! loom's `AtomicU64`, which is this module's `u64` cell again. And the words are not
//! fixed structs: the token bucket splits its word at the bit length of the burst, chosen
//! per quota at run time ([`TokenBucketRule`](crate::rules::TokenBucketRule)'s "Word
//! layout"); a budget's TAT field means units of whichever configuration its generation tag
//! names ([`Budget`](crate::Budget)'s "Word"); a `#[repr(C)]` struct of fixed fields
//! expresses neither. Each rule documents its layout where it packs and unpacks it, and
//! this module's one CAS loop is the only place a word changes.
//!
//! # The redirect word
//!
//! `REDIRECT` (`u64::MAX − 1`) is a second reserved word: a slot created holding it (by
//! `Cells::redirect`) never holds a state. No update applies
//! to it (`update_slot` answers `Attempt::Redirect`), it is never retired (`retire_if`
//! leaves it), and no state may become it (a transition to `REDIRECT` or `RETIRED` is
//! refused as `Attempt::Reserved`), so a word is either a live state, a retired one, or a
//! redirect for its whole life, and the marker is published with the slot itself (by the
//! map, like a fresh state). Why `Keyed` never retires it is in its "Orderings". The
//! sliding log's slot uses `Held::Redirect`.

use crate::cas;
use crate::sync::{AtomicU64, Ordering};

/// The word no rule ever stores in a keyed slot: a state retired by eviction.
///
/// A new state equal to it is refused instead ([`Denied::BeyondHorizon`](crate::Denied)); that can
/// only happen at the last nanosecond of the clock's range.
pub(crate) const RETIRED: u64 = u64::MAX;

/// The word of a keyed slot that holds no state: the key's state lives elsewhere (see the
/// module's "The redirect word"). Refused as a new state exactly like [`RETIRED`].
pub(crate) const REDIRECT: u64 = u64::MAX - 1;

pub(crate) use sealed::{Attempt, Gone};

/// One `u64` state word shared between threads, changed only through the crate's
/// compare-and-swap loop: the cell every lock-free limiter keeps its rule's state in,
/// published for protocols of your own on one word (a downstream crate's lease word, for
/// example) that are not a [`Rule`](crate::rules::Rule).
///
/// Every change is [`WordCell::update`]: a pure function of the current word, applied with
/// one compare-and-swap and retried on the freshest word if another thread got in between,
/// so changes never interleave and none is lost. A change that returns `Err` writes nothing.
///
/// # Orderings
///
/// The word publishes nothing but itself: every access is `Relaxed` (see the crate's CAS
/// loop, "Orderings"). Read-modify-writes of one location are totally ordered whatever
/// their ordering, so each successful update replaces exactly the word it was computed
/// from. Data beside the word needs its own synchronisation.
///
/// # Examples
///
/// ```
/// use limitcore::cell::WordCell;
///
/// let cells = WordCell::new(5);
/// // Spend 3 if at least 3 are there; a refusal writes nothing.
/// let spend = |n: u64| cells.update(|w| if *w >= n { *w -= n; Ok(*w) } else { Err(*w) });
/// assert_eq!(spend(3), Ok(2));
/// assert_eq!(spend(3), Err(2));
/// assert_eq!(cells.load(), 2);
/// ```
#[derive(Debug)]
pub struct WordCell(AtomicU64);

impl WordCell {
    /// A cell holding `word`.
    #[inline]
    pub fn new(word: u64) -> Self {
        WordCell(AtomicU64::new(word))
    }

    /// The current word.
    #[inline]
    pub fn load(&self) -> u64 {
        // Relaxed: a read-only observation of the single word (see the type's "Orderings").
        self.0.load(Ordering::Relaxed)
    }

    /// Apply `f` atomically: `f` gets the current word, changes it and returns a value, or
    /// refuses with `Err` (nothing is written). `f` must be pure: it may run once per
    /// attempt, always on the freshest word; the value of the attempt that was applied is
    /// returned.
    ///
    /// # Errors
    ///
    /// The `E` of the attempt that was not applied.
    #[inline(always)]
    pub fn update<T, E>(&self, f: impl Fn(&mut u64) -> Result<T, E>) -> Result<T, E> {
        <u64 as sealed::Cells>::update(&self.0, f)
    }
}

/// A state type a shell can share between threads: `u64` (one atomic word, lock-free) or
/// [`Log`][crate::rules::Log] (behind a mutex).
///
/// Sealed: the cells and their protocols are the crate's own. A rule of your own
/// ([`Rule`](crate::rules::Rule)) with `State = u64` gets the lock-free shell
/// ([`Limiter`](crate::Limiter)) and keyed slots ([`Keyed`][crate::Keyed]) for free.
pub trait Shared: sealed::Cells {}

impl<T: sealed::Cells> Shared for T {}

pub(crate) mod sealed {
    use core::fmt;

    /// The outcome of an update of a keyed slot that did not apply.
    #[derive(Debug)]
    pub enum Attempt<E> {
        /// The update refused (the rule's denial, or whatever the update returns).
        Failed(E),
        /// The slot was retired by eviction: look the key up again.
        Retired,
        /// The slot holds the redirect marker: the key's state is elsewhere.
        Redirect,
        /// The new state would have been a reserved word ([`RETIRED`](super::RETIRED) or
        /// [`REDIRECT`](super::REDIRECT)); refused as never conforming
        /// (`Denied::BeyondHorizon`).
        Reserved,
    }

    /// Why a keyed slot had no state to read.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Gone {
        /// Retired by eviction.
        Retired,
        /// The redirect marker.
        Redirect,
    }

    /// The cells of a state type (see the module). The trait sits in a private module, so
    /// its methods cannot be called, nor its types named, outside the crate.
    pub trait Cells: Clone + fmt::Debug + Send + Sync + Sized + 'static {
        /// The cell of a limiter.
        type Cell: fmt::Debug + Send + Sync;
        /// The cell of a keyed slot, which can be retired.
        type Slot: Send + Sync;

        fn cell(self) -> Self::Cell;

        /// Apply `f` atomically; `f` is pure and may run once per attempt. On `Err` nothing
        /// is written.
        fn update<T, E>(cell: &Self::Cell, f: impl Fn(&mut Self) -> Result<T, E>) -> Result<T, E>;

        fn read<T>(cell: &Self::Cell, f: impl FnOnce(&Self) -> T) -> T;

        fn slot(self) -> Self::Slot;

        /// A slot holding the redirect marker (never a state, never retired).
        fn redirect() -> Self::Slot;

        /// As `update`, on a live slot; `Attempt::Retired` if it was retired,
        /// `Attempt::Redirect` if it is a redirect.
        fn update_slot<T, E>(
            slot: &Self::Slot,
            f: impl Fn(&mut Self) -> Result<T, E>,
        ) -> Result<T, Attempt<E>>;

        /// `f` of the slot's state, or why it has none.
        fn read_slot<T>(slot: &Self::Slot, f: impl FnOnce(&Self) -> T) -> Result<T, Gone>;

        /// Retire the slot if `idle` says its state is; whether the slot is retired now (by
        /// this call or before). A redirect is never retired (`false`).
        fn retire_if(slot: &Self::Slot, idle: impl FnOnce(&Self) -> bool) -> bool;

        fn is_retired(slot: &Self::Slot) -> bool;
    }
}

impl sealed::Cells for u64 {
    type Cell = AtomicU64;
    type Slot = AtomicU64;

    #[inline]
    fn cell(self) -> AtomicU64 {
        AtomicU64::new(self)
    }

    #[inline(always)]
    fn update<T, E>(cell: &AtomicU64, f: impl Fn(&mut u64) -> Result<T, E>) -> Result<T, E> {
        // Release on success: see "Release for the budgets" in `cas`.
        cas::apply_ordered(
            cell,
            Ordering::Release,
            #[inline(always)]
            move |word| {
                let mut next = word;
                let value = f(&mut next)?;
                Ok((next, value))
            },
        )
    }

    #[inline]
    fn read<T>(cell: &AtomicU64, f: impl FnOnce(&u64) -> T) -> T {
        // Relaxed: a read-only observation of the single state word (see `cas` "Orderings").
        f(&cell.load(Ordering::Relaxed))
    }

    #[inline]
    fn slot(self) -> AtomicU64 {
        AtomicU64::new(self)
    }

    #[inline]
    fn redirect() -> AtomicU64 {
        AtomicU64::new(REDIRECT)
    }

    #[inline]
    fn update_slot<T, E>(
        slot: &AtomicU64,
        f: impl Fn(&mut u64) -> Result<T, E>,
    ) -> Result<T, Attempt<E>> {
        // Release on success: see "Release for the budgets" in `cas`.
        cas::apply_ordered(
            slot,
            Ordering::Release,
            #[inline(always)]
            move |word| {
                if word >= REDIRECT {
                    return Err(reserved(word));
                }
                let mut next = word;
                match f(&mut next) {
                    // The reserved words cannot be a state (see `RETIRED`, `REDIRECT`).
                    Ok(_) if next >= REDIRECT => Err(Attempt::Reserved),
                    Ok(value) => Ok((next, value)),
                    Err(e) => Err(Attempt::Failed(e)),
                }
            },
        )
    }

    #[inline]
    fn read_slot<T>(slot: &AtomicU64, f: impl FnOnce(&u64) -> T) -> Result<T, Gone> {
        // Relaxed: a read-only observation (module "Orderings"); a redirect is one for its
        // whole life, published with the slot.
        match slot.load(Ordering::Relaxed) {
            word if word >= REDIRECT => Err(match reserved::<()>(word) {
                Attempt::Retired => Gone::Retired,
                _ => Gone::Redirect,
            }),
            word => Ok(f(&word)),
        }
    }

    fn retire_if(slot: &AtomicU64, idle: impl FnOnce(&u64) -> bool) -> bool {
        // Relaxed: see the module's "Orderings"; the CAS below decides.
        let word = slot.load(Ordering::Relaxed);
        word == RETIRED
            || (word != REDIRECT
                && idle(&word)
                // Relaxed: the retirement only has to be ordered against the other writes of
                // this word (the acquirers' CASes), which the word's modification order does;
                // it publishes nothing.
                && slot
                    .compare_exchange(word, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok())
    }

    #[inline]
    fn is_retired(slot: &AtomicU64) -> bool {
        // Relaxed: the retiring CAS is the slot's last write (module "Orderings"); a stale
        // read only leaves a live slot in place for a later sweep.
        slot.load(Ordering::Relaxed) == RETIRED
    }
}

/// What a reserved word read from a slot means, after an acquire fence: a word that a
/// budget's move wrote into a live slot (`REDIRECT`, with release) publishes the key's own
/// state inserted before it (see `Keyed::reconfigure_key`), and the fence makes that insert
/// visible to a reader that goes on to look the key up there. A marker published by the map
/// with its slot needs none, and the fence costs a reader of a live word nothing.
#[cold]
fn reserved<E>(word: u64) -> Attempt<E> {
    // Acquire: partner of the release compare-and-swap of a move (see above).
    crate::sync::fence(Ordering::Acquire);
    if word == RETIRED {
        Attempt::Retired
    } else {
        Attempt::Redirect
    }
}

/// The cells of a state behind a lock: `Mutex<S>` for a limiter, `Mutex<Held<S>>` for a
/// keyed slot. A panic while the lock is held cannot leave a state the rules would misread
/// (a rule writes only on admission, in one assignment), so a poisoned lock is used as it
/// is.
#[cfg(feature = "std")]
pub(crate) mod locked {
    use super::{Attempt, Gone};
    use crate::sync::{lock, Mutex};

    /// What a keyed slot behind a lock holds: a live state, nothing (retired by eviction), or
    /// the redirect marker (never a state; see the module's "The redirect word").
    #[derive(Debug)]
    pub enum Held<S> {
        Live(S),
        Retired,
        Redirect,
    }

    #[inline(always)]
    pub(crate) fn update<S, T, E>(
        cell: &Mutex<S>,
        f: impl Fn(&mut S) -> Result<T, E>,
    ) -> Result<T, E> {
        f(&mut lock(cell))
    }

    pub(crate) fn read<S, T>(cell: &Mutex<S>, f: impl FnOnce(&S) -> T) -> T {
        f(&lock(cell))
    }

    pub(crate) fn update_slot<S, T, E>(
        slot: &Mutex<Held<S>>,
        f: impl Fn(&mut S) -> Result<T, E>,
    ) -> Result<T, Attempt<E>> {
        match &mut *lock(slot) {
            Held::Live(state) => f(state).map_err(Attempt::Failed),
            Held::Retired => Err(Attempt::Retired),
            Held::Redirect => Err(Attempt::Redirect),
        }
    }

    pub(crate) fn read_slot<S, T>(
        slot: &Mutex<Held<S>>,
        f: impl FnOnce(&S) -> T,
    ) -> Result<T, Gone> {
        match &*lock(slot) {
            Held::Live(state) => Ok(f(state)),
            Held::Retired => Err(Gone::Retired),
            Held::Redirect => Err(Gone::Redirect),
        }
    }

    pub(crate) fn retire_if<S>(slot: &Mutex<Held<S>>, idle: impl FnOnce(&S) -> bool) -> bool {
        let mut guard = lock(slot);
        match &*guard {
            Held::Retired => true,
            Held::Live(state) if idle(state) => {
                *guard = Held::Retired;
                true
            }
            Held::Live(_) | Held::Redirect => false,
        }
    }

    pub(crate) fn is_retired<S>(slot: &Mutex<Held<S>>) -> bool {
        matches!(*lock(slot), Held::Retired)
    }
}
