//! A budget's live configuration: the current generation and the last few configurations,
//! published so that a decision reads one whole configuration or another, never a mix, and
//! never waits for a writer.
//!
//! # Protocol
//!
//! - Configurations are numbered (generations, tagged modulo [`GENERATIONS`] in the words)
//!   and kept in [`SLOTS`] slots, generation `g` in slot `g mod SLOTS`. A slot is a
//!   [`SeqLock`] whose version is the generation it holds (its protocol is written there,
//!   once, with its write guard). A reader that finds another generation there (the slot
//!   was reused) starts over from the current generation: it never waits.
//! - `current` names the newest generation. The writer fills its slot first, then stores
//!   `current` with release; a reader loads `current` with acquire, so the slot it then
//!   reads is complete.
//! - The *hot line* repeats the current generation's tag and the numbers a decision reads
//!   (its flags with the capacity and the mode, `K`, `S`, `A`, `D`, and the scale when a
//!   unit is not 1 ns) in one cache line of its own, a [`SeqLock`] like a slot: the writer
//!   fills it after storing `current`. A decision on a word of the tag it names reads that
//!   line alone (the fast read: no `current`, no slot); any other word (idle, or of an older
//!   generation) and a line being rewritten take the general read below.
//! - Every state word carries the generation of the configuration it was written under.
//!   A decision reads the word, then `current`, converts the word to the current
//!   generation if it is older (through the slots in between), decides under the current
//!   configuration, and writes with one compare-and-swap that expects the word it read. So
//!   it applies one configuration to a state of that configuration: if the word changed
//!   meanwhile (a conversion, another decision), the compare-and-swap fails and the
//!   decision is made again from the new word. A decision that read `current` just before
//!   a change and wins its compare-and-swap just after is ordered before the change: the
//!   writer then converts the word it left.
//! - Writers are serialised by a lock (a reconfiguration is rare; with `std` the lock of the
//!   budget's waiters, which the writer settles under it; without, a spin flag released by
//!   its guard's drop); each converts every word
//!   of its configuration before it returns, so a word lags the current generation by at
//!   most two (one written by a decision that raced a conversion of an idle word, which
//!   needs no conversion), within the [`SLOTS`] kept. Tags repeat after
//!   [`GENERATIONS`] changes: a decision stalled across that many reconfigurations whose
//!   word returns to the very same 64 bits could be applied to a later configuration (the
//!   bounded tag of every tagged compare-and-swap scheme).

use super::params::{Hot, Params};
use super::scale::Scale;
use super::seqlock::SeqLock;
use super::word::{self, GENERATIONS, IDLE};
use super::Mode;
use crate::clock::Nanos;
use crate::quota::{Quota, QuotaError};
#[cfg(not(feature = "std"))]
use crate::sync::AtomicBool;
use crate::sync::{fence, AtomicU64, Backoff, Ordering};
#[cfg(feature = "std")]
use crate::sync::{lock, Mutex, MutexGuard};

/// Configurations kept: the current one and the three before it.
pub(crate) const SLOTS: usize = 4;

/// Words per slot (see [`encode`]): the hot ones first.
const FIELDS: usize = 18;

/// The flags word's bit for "a unit is 1 ns".
const NS: u64 = 1 << 10;

/// The current configuration's hot numbers, in one cache line (see the module): the tag
/// (the seqlock's version), the flags word (tag, mode, "a unit is 1 ns", capacity), `K`,
/// `S`, `A`, `D`; then, on the next line and read only when a unit is not 1 ns, the
/// scale's `m, p, a, b` and `R`'s two words.
#[derive(Debug)]
#[repr(align(64))]
struct HotLine {
    lock: SeqLock<HOT_FIELDS>,
}

/// Words of the hot line: flags, `K`, `S`, `A`, `D`, `m`, `p`, `a`, `b`, `R` (two words).
const HOT_FIELDS: usize = 11;

impl HotLine {
    fn new(params: &Params) -> HotLine {
        let line = HotLine {
            lock: SeqLock::new(),
        };
        line.store(params);
        line
    }

    /// Write `params`' hot numbers (the writer, alone).
    fn store(&self, params: &Params) {
        self.lock.write(params.gen).store(&encode(params));
    }

    /// The hot numbers if the line holds generation `gen` and its mode is enabled (the
    /// read of [`read_hot`]).
    #[inline(always)]
    fn load<R>(&self, gen: u64, then: impl Fn(Hot) -> R) -> Option<R> {
        read_hot::<true, HOT_FIELDS, R>(&self.lock, gen, then)
    }
}

/// One configuration's [`Params`], in atomics (a seqlock whose version is the generation).
#[derive(Debug)]
struct Slot {
    lock: SeqLock<FIELDS>,
}

impl Slot {
    fn empty() -> Slot {
        Slot {
            lock: SeqLock::new(),
        }
    }

    /// Write `params` (the writer, alone).
    fn store(&self, params: &Params) {
        self.lock.write(params.gen).store(&encode(params));
    }

    /// The params of generation `gen`, if this slot holds them (a whole, consistent read).
    fn load(&self, gen: u64) -> Option<Params> {
        if !self.lock.optimistic_read(gen) {
            return None;
        }
        let words: [u64; FIELDS] = core::array::from_fn(|i| self.lock.word(i));
        self.lock.validate_read(gen).then(|| decode(&words))
    }

    /// The hot part of generation `gen`'s params, if this slot holds them: five words, and
    /// the scale's six more only when a unit is not 1 ns (the read of [`read_hot`]).
    #[inline(always)]
    fn load_hot(&self, gen: u64) -> Option<Hot> {
        read_hot::<false, FIELDS, Hot>(&self.lock, gen, |hot| hot)
    }
}

/// The hot numbers of generation `gen` from `lock` (a slot, or the hot line), if it holds
/// that generation, given to `then`: five words, and the scale's six more only when a unit
/// is not 1 ns; one seqlock read. The one read behind [`HotLine::load`] and
/// [`Slot::load_hot`]; with `ENABLED_ONLY`, `None` unless the mode is enabled too (the fast
/// read's condition, checked on the flags word, so that the mode it gives is a constant).
///
/// Each branch of the scale validates the read and calls `then` itself (two inlined copies
/// of the caller's decision), so that a unit of 1 ns is a constant in its copy: a decision
/// after the branches merged would test the scale again (issue 28: 8 instructions).
#[inline(always)]
fn read_hot<const ENABLED_ONLY: bool, const N: usize, R>(
    lock: &SeqLock<N>,
    gen: u64,
    then: impl Fn(Hot) -> R,
) -> Option<R> {
    if !lock.optimistic_read(gen) {
        return None;
    }
    let field = |i: usize| lock.word(i);
    let flags = field(0);
    let (per_permit, span, ahead, debt) = (field(1), field(2), field(3), field(4));
    let hot = |scale| hot_numbers::<ENABLED_ONLY>(flags, scale, [span, ahead, debt]);
    if flags & NS != 0 {
        if !validated::<ENABLED_ONLY, N>(lock, gen, flags) {
            return None;
        }
        Some(then(hot(Scale::ns(per_permit))))
    } else {
        let scale = Scale::from_words([
            per_permit,
            field(5),
            field(6),
            field(7),
            field(8),
            field(9),
            field(10),
        ]);
        if !validated::<ENABLED_ONLY, N>(lock, gen, flags) {
            return None;
        }
        Some(then(hot(scale)))
    }
}

/// [`Hot`] from its flags word, its scale and `[S, A, D]` (see [`read_hot`]).
#[inline(always)]
fn hot_numbers<const ENABLED_ONLY: bool>(
    flags: u64,
    scale: Scale,
    [span, ahead, debt]: [u64; 3],
) -> Hot {
    Hot {
        gen: flags & 0xff,
        scale,
        span,
        ahead,
        capacity: (flags >> 32) as u32,
        mode: if ENABLED_ONLY {
            Mode::Enabled
        } else {
            Mode::from_word((flags >> 8) & 0b11)
        },
        debt,
    }
}

/// The second half of [`read_hot`]'s seqlock read, after its word loads: whether `lock`
/// still holds `gen` (and, with `ENABLED_ONLY`, whether the mode in `flags` is enabled).
#[inline(always)]
fn validated<const ENABLED_ONLY: bool, const N: usize>(
    lock: &SeqLock<N>,
    gen: u64,
    flags: u64,
) -> bool {
    let mode = (flags >> 8) & 0b11;
    lock.validate_read(gen) && (!ENABLED_ONLY || mode == Mode::Enabled as u64)
}

/// A budget's configurations (see the module).
#[derive(Debug)]
pub(crate) struct Live {
    /// The current configuration's hot numbers, first and alone on its line (nothing a
    /// waiter or a writer touches often shares it).
    hot: HotLine,
    current: AtomicU64,
    slots: [Slot; SLOTS],
    /// The budget's waiters (`Budget`'s waits), behind the lock a reconfiguration holds
    /// while it publishes, converts and settles them: one lock, so a waiter never sees a
    /// change half made. A panic in a reconfiguration poisons it, which the crate's `lock`
    /// ignores: it is never left held.
    #[cfg(feature = "std")]
    pub(crate) waiters: Mutex<super::wait::Waiters>,
    /// How many wait in `waiters`: stored (release) with the lock held after each change,
    /// read (acquire) without it by a wait's first look, which takes the one-CAS path
    /// when nobody waits (a waiter queued before the look is seen by it, or queued after it
    /// began).
    #[cfg(feature = "std")]
    pub(crate) queued: AtomicU64,
    /// Without `std` (no waiters, no lock): held by a reconfiguration while it publishes and
    /// converts, released by its guard's drop (so an unwinding panic releases it too).
    #[cfg(not(feature = "std"))]
    writing: AtomicBool,
    /// Generations published so far (the next tag is this modulo GENERATIONS). Written
    /// only by the holder of `writing`.
    serial: AtomicU64,
}

impl Live {
    /// A live configuration starting with `quota`, `max_debt` ns of debt and `mode`, in
    /// effect from `since` (ns).
    pub(crate) fn new(
        quota: &Quota,
        max_debt: Nanos,
        mode: Mode,
        since: Nanos,
    ) -> Result<Live, QuotaError> {
        let params = Params::new(quota, max_debt, mode, 0, since, None)?;
        let live = Live {
            hot: HotLine::new(&params),
            current: AtomicU64::new(0),
            slots: core::array::from_fn(|_| Slot::empty()),
            #[cfg(feature = "std")]
            waiters: Mutex::new(super::wait::Waiters::new()),
            #[cfg(feature = "std")]
            queued: AtomicU64::new(0),
            #[cfg(not(feature = "std"))]
            writing: AtomicBool::new(false),
            serial: AtomicU64::new(1),
        };
        live.slots[0].store(&params);
        Ok(live)
    }

    /// The current configuration.
    #[inline]
    pub(crate) fn current(&self) -> Params {
        let backoff = Backoff::new();
        loop {
            // Acquire: partner of the release store in `publish`; the slot is complete.
            let gen = self.current.load(Ordering::Acquire);
            if let Some(params) = self.slots[slot(gen)].load(gen) {
                return params;
            }
            // The slot was reused since (four changes in between): read `current` again.
            backoff.spin();
        }
    }

    /// The current configuration's hot part (see [`Live::current`]).
    #[inline]
    pub(crate) fn current_hot(&self) -> Hot {
        let backoff = Backoff::new();
        loop {
            // Acquire: partner of the release store in `publish`; the slot is complete.
            let gen = self.current.load(Ordering::Acquire);
            if let Some(hot) = self.slots[slot(gen)].load_hot(gen) {
                return hot;
            }
            backoff.spin();
        }
    }

    /// The current capacity and mode, for the shells' size check: the hot line's flags,
    /// one load, no seqlock (a value a change behind, or of a line being rewritten, is
    /// caught by the decision, which checks its own configuration's capacity again).
    #[inline(always)]
    pub(crate) fn capacity(&self) -> (u32, Mode) {
        // One word on its own (see above): no seqlock read.
        let flags = self.hot.lock.word(0);
        ((flags >> 32) as u32, Mode::from_word((flags >> 8) & 0b11))
    }

    /// The decision `then` on the hot numbers for `word`, if it is of the current
    /// generation and the budget is enabled: the fast read, one cache line (see the module;
    /// `then` is inlined once per scale, see `read_hot`). `None` for an idle word, an older
    /// generation, a line being rewritten, or a budget disabled or paused: the caller then
    /// takes the general read ([`Live::resolve_hot`]).
    #[inline(always)]
    pub(crate) fn fast<R>(&self, word: u64, then: impl Fn(Hot) -> R) -> Option<R> {
        // Acquire fence: as in `resolve`; whoever wrote `word` had seen its configuration.
        fence(Ordering::Acquire);
        // An idle word's tag (14) is never a generation's: the read fails.
        self.hot.load(word::gen(word), then)
    }

    /// The configuration of generation `gen`, if it is still kept.
    #[inline]
    fn generation(&self, gen: u64) -> Option<Params> {
        self.slots[slot(gen)].load(gen)
    }

    /// `word` in the current configuration, with it: converted through every change since
    /// its own generation. A word older than the slots kept (never, by the writers'
    /// conversions; see the module) is taken as the strictest state, a full threshold of
    /// backlog.
    #[inline]
    pub(crate) fn resolve(&self, word: u64) -> (Params, u64) {
        // Acquire fence: `word` was loaded (relaxed) from a state cell whose every store is a
        // release (`cas`, "Release for the budgets"); the fence makes its writer's view ours,
        // so `current` below is at least the generation `word` carries.
        fence(Ordering::Acquire);
        let now = self.current();
        if word == IDLE || word::gen(word) == now.gen {
            return (now, word);
        }
        (now, self.convert(word, &now))
    }

    /// As [`Live::resolve`], with the hot part of the current configuration only: what a
    /// decision reads. A word of an older generation goes through [`Live::resolve`].
    #[inline]
    pub(crate) fn resolve_hot(&self, word: u64) -> (Hot, u64) {
        // Acquire fence: as in `resolve`.
        fence(Ordering::Acquire);
        let now = self.current_hot();
        if word == IDLE || word::gen(word) == now.gen {
            return (now, word);
        }
        let (params, word) = self.resolve(word);
        (params.hot, word)
    }

    #[cold]
    #[inline(never)]
    fn convert(&self, word: u64, to: &Params) -> u64 {
        let mut word = word;
        let mut gen = word::gen(word);
        let mut from = self.generation(gen);
        while gen != to.gen {
            let next = (gen + 1) % GENERATIONS;
            let into = if next == to.gen {
                Some(*to)
            } else {
                self.generation(next)
            };
            match (from, into) {
                (Some(f), Some(i)) => {
                    word = f.convert(word, &i);
                    if word == IDLE {
                        return IDLE;
                    }
                    from = Some(i);
                }
                _ => {
                    debug_assert!(false, "a budget word lagged past the kept configurations");
                    let at = to.scale.units(to.since).ceil();
                    return word::pack(to.gen, at.wrapping_add(to.ahead));
                }
            }
            gen = next;
        }
        word
    }

    /// Run `write` as the only writer: it publishes with [`WriteGuard::publish`];
    /// conversions of the words (and, with `std`, the settling of the waiters, through
    /// [`WriteGuard::waiters`]) follow inside it.
    pub(crate) fn write<T>(&self, write: impl FnOnce(&mut WriteGuard<'_>) -> T) -> T {
        // The lock's acquire: the previous writer's publication and conversions (released by
        // its unlock) happen before ours.
        #[cfg(feature = "std")]
        let mut guard = WriteGuard {
            live: self,
            waiters: lock(&self.waiters),
        };
        #[cfg(not(feature = "std"))]
        let mut guard = {
            let backoff = Backoff::new();
            // Acquire on success: as the lock's.
            while self
                .writing
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff.spin();
            }
            WriteGuard { live: self }
        };
        write(&mut guard)
    }
}

/// The writer's handle (see [`Live::write`]): the lock, released when it drops.
pub(crate) struct WriteGuard<'a> {
    live: &'a Live,
    #[cfg(feature = "std")]
    waiters: MutexGuard<'a, super::wait::Waiters>,
}

#[cfg(not(feature = "std"))]
impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Release: partner of the next writer's acquire.
        self.live.writing.store(false, Ordering::Release);
    }
}

impl WriteGuard<'_> {
    /// The budget's waiters, locked by the writer.
    #[cfg(feature = "std")]
    pub(crate) fn waiters(&mut self) -> &mut super::wait::Waiters {
        &mut self.waiters
    }

    /// Publish `quota`, `max_debt` and `mode` as the next generation, taking effect at
    /// `since` (ns): every word of the budget must then be converted to it.
    pub(crate) fn publish(
        &self,
        quota: &Quota,
        max_debt: Nanos,
        mode: Mode,
        since: Nanos,
    ) -> Result<Params, QuotaError> {
        let live = self.live;
        let before = live.current();
        // Relaxed: written only by the writer, which holds the lock.
        let serial = live.serial.load(Ordering::Relaxed);
        let gen = serial % GENERATIONS;
        // A change never takes effect before the one it follows (a stale clock reading).
        let since = since.max(before.since);
        let params = Params::new(quota, max_debt, mode, gen, since, Some(&before))?;
        live.slots[slot(gen)].store(&params);
        // Release: partner of the deciders' acquire load of `current`.
        live.current.store(gen, Ordering::Release);
        // After `current`: a fast read that finds the new tag there finds `current` at it
        // or later too.
        live.hot.store(&params);
        live.serial.store(serial + 1, Ordering::Relaxed);
        Ok(params)
    }
}

/// The slot of generation `gen`.
#[inline]
fn slot(gen: u64) -> usize {
    (gen % SLOTS as u64) as usize
}

/// `params` as a slot's words: the hot ones first (flags, `K`, `S`, `A`, `D`, then the
/// scale's `m, p, a, b` and `R`'s two words, read only when a unit is not 1 ns; [`Slot::load_hot`]; the
/// hot line keeps the first [`HOT_FIELDS`]).
fn encode(p: &Params) -> [u64; FIELDS] {
    let s = p.scale.to_words();
    let q = p.quota.to_words();
    let ns = if p.scale.is_ns() { NS } else { 0 };
    [
        p.gen | (p.mode as u64) << 8 | ns | u64::from(p.capacity) << 32,
        s[0],
        p.span,
        p.ahead,
        p.debt,
        s[1],
        s[2],
        s[3],
        s[4],
        s[5],
        s[6],
        p.queue,
        p.since,
        p.max_debt,
        q[0],
        q[1],
        q[2],
        q[3],
    ]
}

/// The hot params of a slot's words (the scale's words unread when a unit is 1 ns: then
/// `m = p = 1`, `a = 1`, `b = r = 0`, which convert as the identity).
#[inline(always)]
fn decode_hot(w: &[u64; FIELDS]) -> Hot {
    let flags = w[0];
    let scale = if flags & NS != 0 {
        Scale::ns(w[1])
    } else {
        Scale::from_words([w[1], w[5], w[6], w[7], w[8], w[9], w[10]])
    };
    Hot {
        gen: flags & 0xff,
        scale,
        span: w[2],
        ahead: w[3],
        capacity: (flags >> 32) as u32,
        mode: Mode::from_word((flags >> 8) & 0b11),
        debt: w[4],
    }
}

/// The params of a slot's words.
fn decode(w: &[u64; FIELDS]) -> Params {
    Params {
        hot: decode_hot(w),
        queue: w[11],
        since: w[12],
        max_debt: w[13],
        quota: Quota::from_words([w[14], w[15], w[16], w[17]]),
    }
}
