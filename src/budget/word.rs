//! A budget's state word: a generation tag and a theoretical arrival time (TAT) in units,
//! in one `u64`.
//!
//! ```text
//!  63    60 59                                                0
//! +--------+--------------------------------------------------+
//! |  gen   | TAT: units of the generation's scale, mod 2^60    |
//! +--------+--------------------------------------------------+
//! ```
//!
//! - `gen` in `0..GENERATIONS` (12): the configuration whose units the TAT is in; a word is
//!   converted to the current configuration before any decision reads it.
//! - `gen = 14`: [`IDLE`], a full budget under every configuration (the TAT bits are 0).
//!   A fresh state; a conversion that finds no backlog writes it.
//! - `gen = 15`: never a state (the words `u64::MAX` and `u64::MAX − 1` that keyed slots
//!   reserve for their own markers live there).
//!
//! # Reading the TAT
//!
//! The TAT is kept modulo 2^60 and read against the reading `t` (in units): if it lies at
//! most `A` (the configuration's threshold, [`Params`](super::params::Params)) ahead of
//! `⌊t⌋`, that distance is the backlog; otherwise it lies behind `t` and the budget is full.
//! So a budget has no horizon: it runs for as long as its clock does. What it gives for it:
//!
//! - a reading more than `A − backlog` behind the state (a clock stepped back, or a thread
//!   stalled between reading the clock and deciding, by more than 8.6 s beyond the budget's
//!   span, debt and queue) is read as a jump forward;
//! - a state left idle for between `2^60 − A` and `2^60` units (at least 13 years for a unit
//!   near 1 ns; 194 days at 64 GiB/s, where a unit is a byte) reads as a backlog of at most
//!   `A` for that long: stricter, never more permissive.

/// Bits of the generation tag.
pub(crate) const GEN_SHIFT: u32 = 60;

/// The TAT field: the low 60 bits.
pub(crate) const TAT_MASK: u64 = (1 << GEN_SHIFT) - 1;

/// How many generation tags configurations cycle through.
pub(crate) const GENERATIONS: u64 = 12;

/// The word of a full budget, under any configuration.
pub(crate) const IDLE: u64 = 14 << GEN_SHIFT;

/// The generation tag of `word`.
#[inline]
pub(crate) fn gen(word: u64) -> u64 {
    word >> GEN_SHIFT
}

/// The TAT field of `word`.
#[inline]
pub(crate) fn tat(word: u64) -> u64 {
    word & TAT_MASK
}

/// The word of generation `gen` with TAT `tat` (taken modulo 2^60).
#[inline]
pub(crate) fn pack(gen: u64, tat: u64) -> u64 {
    debug_assert!(gen < GENERATIONS);
    (gen << GEN_SHIFT) | (tat & TAT_MASK)
}
