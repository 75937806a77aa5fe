//! [`TokenBucketRule`]: tokens and the time of the last refill, packed in one word.
//!
//! The token bucket (Turner, "New directions in communications", IEEE Communications
//! Magazine 24(10), 1986) with continuous refill is the dual of GCRA's virtual scheduling
//! (ATM Forum TM 4.0, Annex C): a bucket holding `tokens` at time `last` is the GCRA state
//! `TAT = last + (burst − tokens)·T`. This rule keeps whole tokens and carries the
//! fractional refill in the time field, which makes its decisions *exactly* GCRA's (same
//! admissions, same `retry_after` to the nanosecond) inside the window described under
//! "Time field" below.

use super::{Rule, Schedule};
use crate::clock::Nanos;
use crate::decision::{Denied, Receipt, Snapshot};
use crate::quota::{Quota, QuotaError};
use core::time::Duration;

/// The bit layout of one bucket's word, fixed at construction from the burst.
///
/// ```text
///  63                         token_bits  token_bits-1            0
/// +-----------------------------------+---------------------------+
/// | last refill time, ns, mod 2^W      | tokens at that time       |
/// +-----------------------------------+---------------------------+
///   W = time_bits = 64 − token_bits      token_bits = bit length of burst (1..=32)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Bit length of the burst: the low `token_bits` bits hold the token count.
    pub(crate) token_bits: u32,
    /// `2^token_bits − 1`.
    pub(crate) token_mask: u64,
    /// `2^W − 1`, W = `64 − token_bits`: the time field is kept modulo `2^W`.
    pub(crate) time_mask: u64,
    /// Readings up to this far behind the stored time are "behind"; the rest are "ahead".
    pub(crate) max_lag: u64,
}

impl Layout {
    /// The layout for `burst`, or the error if a full refill (`span` ns) does not fit half
    /// the wrap period.
    pub(crate) fn new(burst: u32, span: Nanos) -> Result<Layout, QuotaError> {
        let token_bits = (u32::BITS - burst.leading_zeros()).max(1);
        let time_bits = 64 - token_bits;
        let max_span = 1u64 << (time_bits - 1);
        if span > max_span {
            return Err(QuotaError::BurstTooLarge {
                burst,
                span_ns: u128::from(span),
                max_span_ns: max_span,
            });
        }
        Ok(Layout {
            token_bits,
            token_mask: (1u64 << token_bits) - 1,
            time_mask: u64::MAX >> token_bits,
            max_lag: TokenBucketRule::MAX_CLOCK_LAG_NS.min(1u64 << (time_bits - 2)),
        })
    }

    #[inline]
    pub(crate) fn pack(&self, time: Nanos, tokens: u64) -> u64 {
        ((time & self.time_mask) << self.token_bits) | tokens
    }

    #[inline]
    pub(crate) fn tokens(&self, word: u64) -> u64 {
        word & self.token_mask
    }

    #[inline]
    pub(crate) fn time(&self, word: u64) -> Nanos {
        word >> self.token_bits
    }

    /// Where `now` stands relative to the stored time `last`: `Ok(d)` ahead by `d` ns, or
    /// `Err(b)` behind by `1 ≤ b ≤ max_lag` ns.
    #[inline]
    pub(crate) fn offset(&self, last: Nanos, now: Nanos) -> Result<Nanos, Nanos> {
        let d = now.wrapping_sub(last) & self.time_mask;
        if d > self.time_mask - self.max_lag {
            Err(self.time_mask - d + 1)
        } else {
            Ok(d)
        }
    }
}

/// The token bucket on one word: whole tokens and the time of the last refill. The rule of
/// [`TokenBucket`](crate::TokenBucket).
///
/// It holds up to `burst` tokens, gains one every emission interval T, and a request for `n`
/// takes `n` tokens or is refused. Its decisions are **exactly** [`GcraRule`](super::GcraRule)'s
/// on the same quota and input (the crate's tests check this differentially) as long as the
/// clock readings stay in the window described under "Time field"; prefer GCRA if you
/// have no reason to think in tokens: its state covers the clock's whole 584-year range.
///
/// # Word layout
///
/// ```text
///  63                          b  b-1                 0
/// +------------------------------+---------------------+
/// | last refill, ns mod 2^(64-b)  | whole tokens (b bits) |
/// +------------------------------+---------------------+
/// ```
///
/// `b` is the bit length of the burst (1 to [`TokenBucketRule::MAX_TOKEN_BITS`]), so the
/// time field gets `W = 64 − b` bits (at least [`TokenBucketRule::MIN_TIME_BITS`]): for
/// burst ≤ 1 023, W ≥ 54 (wraps every 208 days); ≤ 65 535, W ≥ 48 (3.26 days); ≤ 2^20 − 1,
/// W ≥ 44 (4.9 h).
///
/// # Fractional tokens
///
/// Exact to 1 ns of refill, i.e. to `1/T` of a token: the token field holds whole tokens and
/// the refill moves the stored time forward by exactly `k·T` for `k` whole tokens, so the
/// fraction is carried by the clock and never lost or rounded.
///
/// # Time field
///
/// The time is kept modulo `2^W`. A reading is interpreted against the stored time: up to
/// `R` ns behind it (`R` = 2^33 ns = 8.59 s, or `2^(W−2)` if smaller,
/// [`TokenBucketRule::MAX_CLOCK_LAG_NS`]) is a stale or backwards reading and is decided
/// exactly as strictly as GCRA would; anything else is ahead. Hence:
/// - decisions equal GCRA's while every reading is less than `2^W − R` ns after the stored
///   refill time and at most `R` ns before it, which covers any clock that does not step
///   back more than `R` and any bucket used at least once per `2^W − R` ns;
/// - after an idle of `2^W − R` ns or longer, a bucket that was not full when last used may
///   (with probability at most `(R + burst·T) / 2^W`) make its next decision as if the idle
///   had been shorter: stricter than GCRA, by at most `R + burst·T`, never more permissive;
/// - a clock that steps back by more than `R` is read as having jumped forward.
///
/// A fresh bucket is full at any time. [`Rule::new`] refuses a quota whose full refill
/// (`burst·T`) exceeds `2^(W−1)` ns ([`QuotaError::BurstTooLarge`]; for example a burst of
/// 2^20 − 1 needs T ≤ 8.39 ms).
///
/// # Refund
///
/// GCRA's refund (see [`GcraRule`](super::GcraRule)) on the equivalent TAT at the refund
/// time `at`: the word is rewritten to encode the smaller backlog at `at`, exactly (a debt,
/// or a reading of `at` behind the stored refill time, included).
///
/// # Charges
///
/// GCRA's charge on the equivalent TAT ([`Rule::charge`]): past the burst the debt is
/// held as a stored refill time ahead of the reading, which later readings see as readings
/// behind it. So a bucket holds at most [`TokenBucketRule::MAX_CLOCK_LAG_NS`] of debt (8.59 s
/// of its rate, or a quarter of the time field's wrap if shorter), and reports the rest as
/// the shortfall; [`GcraRule`](super::GcraRule)'s word holds any debt.
///
/// # Examples
///
/// ```
/// use limitcore::rules::{Rule, TokenBucketRule};
/// use limitcore::Quota;
///
/// let rule = TokenBucketRule::new(&Quota::per_second(4)?)?;
/// let mut word = rule.fresh();
/// rule.take(&mut word, 0, 4).unwrap();
/// // 375 ms later: 1.5 tokens' worth. One is taken; the half already accrued is kept.
/// rule.take(&mut word, 375_000_000, 1).unwrap();
/// let wait = rule.take(&mut word, 375_000_000, 1).unwrap_err().retry_after().unwrap();
/// assert_eq!(wait.as_millis(), 125);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucketRule {
    pub(crate) schedule: Schedule,
    pub(crate) layout: Layout,
    /// `u64::MAX − 2·burst·T`: up to this reading, no time plus a state's backlog (at most
    /// `2·burst·T`) can pass the clock's range, so the fast path needs no overflow check.
    late: Nanos,
    quota: Quota,
}

impl TokenBucketRule {
    /// The most bits the token field can take: a burst is a `u32`.
    pub const MAX_TOKEN_BITS: u32 = 32;

    /// The fewest bits the time field gets (`64 − MAX_TOKEN_BITS`): its wrap period is at
    /// least 2^32 ns (4.29 s).
    pub const MIN_TIME_BITS: u32 = 64 - Self::MAX_TOKEN_BITS;

    /// The most a clock reading may lag the stored refill time and still be read as *behind*
    /// (stale or stepped back, decided as strictly as GCRA would): 2^33 ns (8.59 s), or a
    /// quarter of the wrap period if that is shorter.
    pub const MAX_CLOCK_LAG_NS: Nanos = 1 << 33;

    /// The transition, returning the new word and its backlog at `now`: refill from the stored time to `now`, then take `n` tokens, as one
    /// new word; or the denial. Requires `1 ≤ n ≤ burst`.
    ///
    /// Refill adds `k = ⌊d / T⌋` whole tokens for `d` ns ahead and moves the stored time
    /// forward by exactly `k·T`, so the fraction `d − k·T` stays in the clock and is never
    /// lost. A bucket that reaches `burst` is full at `now` (the excess is dropped, as a
    /// bucket overflows). A reading behind the stored time refills nothing and counts the
    /// lag against the tokens, exactly as GCRA counts it against the TAT.
    #[inline]
    fn transition(&self, word: u64, now: Nanos, n: u32) -> Result<(u64, Nanos), Denied> {
        let (l, t) = (&self.layout, self.schedule.interval);
        let burst = u64::from(self.schedule.burst);
        let n = u64::from(n);
        let tokens = l.tokens(word);
        // The fast paths, almost every decision: a bucket that is not full, far from the
        // clock's end (so no sum below can pass `u64::MAX`), read ahead of its stored time.
        if tokens != burst && now <= self.late {
            let ahead = now.wrapping_sub(l.time(word)) & l.time_mask;
            if ahead < t {
                // No whole token has accrued (and `ahead < T ≤ 2^(W−1)` lies outside the
                // "behind" range at the top of the time field): the general path would take
                // `k = 0`, `fraction = ahead`.
                if tokens < n {
                    return Err(Denied::rate_limited((n - tokens) * t - ahead));
                }
                // Same stored time (the fraction stays in the clock), `n` fewer tokens.
                return Ok((word - n, (burst - tokens + n) * t - ahead));
            }
            if ahead >= (burst - tokens) * t && ahead <= l.time_mask - l.max_lag {
                // Refilled completely: full at `now`, then `n` taken.
                return Ok((l.pack(now, burst - n), n * t));
            }
        }
        self.transition_general(word, now, n)
    }

    /// [`TokenBucketRule::transition`] in general: a fresh bucket, a partial refill (a
    /// division), a reading behind the stored time, a time near the clock's end. Kept out
    /// of line so that the fast paths above need few registers.
    #[inline(never)]
    fn transition_general(&self, word: u64, now: Nanos, n: u64) -> Result<(u64, Nanos), Denied> {
        let (l, t) = (&self.layout, self.schedule.interval);
        let burst = u64::from(self.schedule.burst);
        let tokens = l.tokens(word);
        // Below, `missing` is the time until full that the new word would encode (its GCRA
        // backlog); `now + missing` is the TAT GCRA would store, which must fit in u64
        // exactly as GCRA requires (see `Schedule::gcra`), so both refuse the same requests
        // at the end of the clock.
        let (next, missing) = if tokens == burst {
            // Only a fresh bucket is stored full (every write takes at least one token),
            // and a fresh bucket is full at any time, like GCRA's TAT of 0.
            (l.pack(now, burst - n), n * t)
        } else {
            let last = l.time(word);
            match l.offset(last, now) {
                Ok(ahead) => {
                    // Full once `ahead` covers the missing tokens; `(burst − tokens)·T ≤ span`.
                    // Comparing first skips the division whenever the bucket refills
                    // completely, and `ahead < T` skips it when no whole token accrued.
                    if ahead >= (burst - tokens) * t {
                        (l.pack(now, burst - n), n * t)
                    } else {
                        let k = if ahead < t { 0 } else { ahead / t };
                        let tokens = tokens + k;
                        let fraction = ahead - k * t;
                        if tokens < n {
                            // (n − tokens)·T ≤ span: no overflow; the accrued fraction counts.
                            let wait = (n - tokens) * t - fraction;
                            let end = (burst - tokens) * t - fraction + n * t;
                            return Err(match now.checked_add(end) {
                                Some(_) => Denied::rate_limited(wait),
                                None => Denied::NEVER,
                            });
                        }
                        let left = tokens - n;
                        (
                            l.pack(last.wrapping_add(k * t), left),
                            (burst - left) * t - fraction,
                        )
                    }
                }
                Err(behind) => {
                    // tokens·T and n·T are ≤ span ≤ 2^62; behind ≤ 2^33.
                    let (have, need) = (tokens * t, n * t + behind);
                    let missing = (burst - tokens + n) * t + behind;
                    if have < need {
                        return Err(match now.checked_add(missing) {
                            Some(_) => Denied::rate_limited(need - have),
                            None => Denied::NEVER,
                        });
                    }
                    (l.pack(last, tokens - n), missing)
                }
            }
        };
        match now.checked_add(missing) {
            Some(_) => Ok((next, missing)),
            None => Err(Denied::NEVER),
        }
    }

    /// How long before `now` the bucket in `word` became full (it refills to `burst` at its
    /// stored time plus the time to refill what is missing), or `None` if it is not full at
    /// `now` or `now` reads as behind the stored time. Measured from `now`, never from an
    /// earlier reading: the time field wraps, and a reading far enough behind the stored time
    /// would be taken for one far ahead (a full bucket).
    pub(crate) fn full_for(&self, word: u64, now: Nanos) -> Option<Nanos> {
        let l = &self.layout;
        let missing = (u64::from(self.schedule.burst) - l.tokens(word)) * self.schedule.interval;
        l.offset(l.time(word), now).ok()?.checked_sub(missing)
    }

    /// The word that encodes a backlog of `backlog` ns at `now` (the time until full; above
    /// `burst·T`, a debt): `m = ⌈backlog / T⌉` tokens missing (at least one, so that the
    /// word is never the fresh, full-at-any-time one) at the stored time
    /// `now + backlog − m·T`, which carries the fraction; past `burst·T`, no token at the
    /// stored time `now + backlog − burst·T`, ahead of `now` by the debt (read as a reading
    /// behind the stored time: `backlog − burst·T ≤ max_lag`, the caller's bound).
    fn encode(&self, backlog: Nanos, now: Nanos) -> u64 {
        let (l, t) = (&self.layout, self.schedule.interval);
        let burst = u64::from(self.schedule.burst);
        match backlog.checked_sub(self.schedule.span) {
            Some(debt) if debt > 0 => l.pack(now.wrapping_add(debt), 0),
            _ => {
                let m = backlog.div_ceil(t).clamp(1, burst);
                l.pack(now.wrapping_add(backlog).wrapping_sub(m * t), burst - m)
            }
        }
    }

    /// The backlog (time until full) the word encodes at `now`: 0 when full.
    #[inline]
    fn backlog(&self, word: u64, now: Nanos) -> Nanos {
        let (l, t) = (&self.layout, self.schedule.interval);
        let tokens = l.tokens(word);
        let missing = (u64::from(self.schedule.burst) - tokens) * t;
        if missing == 0 {
            return 0;
        }
        match l.offset(l.time(word), now) {
            Ok(ahead) => missing.saturating_sub(ahead),
            Err(behind) => missing + behind,
        }
    }
}

impl Rule for TokenBucketRule {
    type State = u64;

    /// # Errors
    ///
    /// [`QuotaError::BurstTooLarge`] if `burst·T` exceeds half the wrap period of the time
    /// field (`2^(W−1)` ns, see "Time field"); [`QuotaError::RateTooFast`] for a rate faster
    /// than one permit per nanosecond (a [`Budget`](crate::Budget) takes it).
    fn new(quota: &Quota) -> Result<Self, QuotaError> {
        quota.whole_interval_ns()?;
        let schedule = Schedule::new(quota);
        let layout = Layout::new(schedule.burst, schedule.span)?;
        Ok(TokenBucketRule {
            late: u64::MAX - 2 * schedule.span,
            schedule,
            layout,
            quota: *quota,
        })
    }

    #[inline]
    fn quota(&self) -> Quota {
        self.quota
    }

    /// The word of a full, fresh bucket.
    #[inline]
    fn fresh(&self) -> u64 {
        self.layout.pack(0, u64::from(self.schedule.burst))
    }

    #[inline]
    fn take(&self, word: &mut u64, now: Nanos, n: u32) -> Result<Receipt, Denied> {
        let (next, missing) = self.transition(*word, now, n)?;
        *word = next;
        // `now + missing` is the TAT GCRA would store (checked to fit); the admission
        // started from it minus its cost.
        Ok(Receipt::new(
            n,
            now + missing - self.schedule.interval * u64::from(n),
        ))
    }

    #[inline]
    fn check(&self, word: &u64, now: Nanos, n: u32) -> Result<(), Denied> {
        self.transition(*word, now, n).map(|_| ())
    }

    /// The state at `now`, as [`Rule::take`] would see it, consuming nothing.
    fn snapshot(&self, word: &u64, now: Nanos) -> Snapshot {
        let backlog = self.backlog(*word, now);
        let remaining = self.schedule.span.saturating_sub(backlog) / self.schedule.interval;
        Snapshot {
            remaining: remaining as u32,
            full_after: Duration::from_nanos(backlog),
        }
    }

    fn refund(&self, word: &mut u64, receipt: &Receipt, at: Nanos) -> bool {
        let cost = self.schedule.interval * u64::from(receipt.n());
        let give = cost - cost.min(at.saturating_sub(receipt.mark()));
        // The backlog at `at` (with a debt, or a reading behind the stored time, past the
        // burst), less what the refund gives back, encoded at `at` exactly.
        let backlog = self.backlog(*word, at);
        if give == 0 || backlog == 0 {
            return false; // nothing to give, or full at `at`
        }
        let next = self.encode(backlog - backlog.min(give), at);
        let changed = next != *word;
        *word = next;
        changed
    }

    fn fresh_since(&self, word: &u64, since: Nanos, now: Nanos) -> bool {
        *word == self.fresh() || self.full_for(*word, now).is_some_and(|d| d >= now - since)
    }

    /// GCRA's charge on the equivalent TAT, encoded back: the debt is held as a stored
    /// refill time ahead of `now`, which later readings see as readings behind it, so it
    /// can reach [`TokenBucketRule::MAX_CLOCK_LAG_NS`] (8.59 s of the rate, or a quarter of
    /// the time field's wrap if shorter) and no more; the permits past it are the shortfall
    /// (use [`GcraRule`](super::GcraRule), whose word holds any debt, where more is needed).
    fn charge(&self, word: &mut u64, now: Nanos, n: u32) -> u32 {
        let t = self.schedule.interval;
        let backlog = self.backlog(*word, now);
        // Room up to the deepest debt the word can hold, and (as GCRA) within the clock.
        let ceiling = (self.schedule.span + self.layout.max_lag).min(u64::MAX - now);
        let k = (ceiling.saturating_sub(backlog) / t).min(u64::from(n));
        if k > 0 {
            *word = self.encode(backlog + k * t, now);
        }
        n - k as u32
    }

    /// In debt while the equivalent GCRA backlog passes `burst·T`.
    fn debt(&self, word: &u64, now: Nanos) -> Result<(), Denied> {
        match self.backlog(*word, now).checked_sub(self.schedule.span) {
            Some(over) if over > 0 => Err(Denied::rate_limited(over)),
            _ => Ok(()),
        }
    }

    /// The backlog at `at` shortened by `n·T`, never below 0 (full); a full bucket is
    /// unchanged.
    fn credit(&self, word: &mut u64, n: u32, at: Nanos) -> bool {
        let backlog = self.backlog(*word, at);
        if backlog == 0 || n == 0 {
            return false;
        }
        let give = self.schedule.interval.saturating_mul(u64::from(n));
        // A backlog of 0 encodes as a bucket that became full at `at`.
        let next = self.encode(backlog.saturating_sub(give), at);
        let changed = next != *word;
        *word = next;
        changed
    }

    /// As GCRA's: the tail of an admission that started at `mark` starts `keep·T` later.
    fn split(&self, receipt: &Receipt, keep: u32) -> Receipt {
        let at = receipt
            .mark()
            .saturating_add(self.schedule.interval.saturating_mul(u64::from(keep)));
        receipt.tail(keep, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(count: u32, period_ns: u64, burst: u32) -> TokenBucketRule {
        let q = Quota::new(count, Duration::from_nanos(period_ns))
            .unwrap()
            .with_burst(burst)
            .unwrap();
        TokenBucketRule::new(&q).unwrap()
    }

    fn step(b: &TokenBucketRule, w: u64, now: Nanos, n: u32) -> Result<u64, Denied> {
        b.transition(w, now, n).map(|(w, _)| w)
    }

    #[test]
    fn layout_is_sized_by_the_burst() {
        let b = bucket(1, 100, 3);
        assert_eq!(b.layout.token_bits, 2);
        assert_eq!(b.layout.time_mask, u64::MAX >> 2);
        assert_eq!(b.layout.max_lag, TokenBucketRule::MAX_CLOCK_LAG_NS);
        let b = Layout::new(u32::MAX, 1).unwrap();
        assert_eq!((b.token_bits, b.time_mask), (32, u64::from(u32::MAX)));
        assert_eq!(b.max_lag, 1 << 30);
    }

    #[test]
    fn transition_matches_gcra_by_hand() {
        let b = bucket(1, 100, 3); // T = 100
        let w = b.fresh();
        let w = step(&b, w, 1_000, 1).unwrap(); // 2 left at 1000
        assert_eq!((b.layout.tokens(w), b.layout.time(w)), (2, 1_000));
        let w = step(&b, w, 1_050, 2).unwrap(); // 0 left, stored time still 1000 (fraction 50)
        assert_eq!((b.layout.tokens(w), b.layout.time(w)), (0, 1_000));
        assert_eq!(step(&b, w, 1_050, 1), Err(Denied::rate_limited(50)));
        assert_eq!(step(&b, w, 1_099, 1), Err(Denied::rate_limited(1)));
        let w2 = step(&b, w, 1_100, 1).unwrap(); // refill 1 exactly, take it
        assert_eq!((b.layout.tokens(w2), b.layout.time(w2)), (0, 1_100));
        // Behind the stored time: the lag counts against the tokens.
        let w = step(&b, b.fresh(), 1_000, 1).unwrap();
        assert_eq!(step(&b, w, 950, 2), Err(Denied::rate_limited(50)));
        assert!(step(&b, w, 1_000, 2).is_ok());
    }

    #[test]
    fn fresh_bucket_is_full_at_any_time() {
        let b = bucket(1, 100, 3);
        for now in [0, 1, 1 << 40, u64::MAX - 1_000] {
            let w = step(&b, b.fresh(), now, 3).unwrap();
            assert_eq!(b.layout.tokens(w), 0);
            assert_eq!(step(&b, w, now, 1), Err(Denied::rate_limited(100)));
            assert_eq!(b.snapshot(&w, now + 300).remaining, 3);
        }
        // At the very end of the clock a full burst's schedule no longer fits: refused as GCRA.
        for now in [u64::MAX - 299, u64::MAX] {
            assert_eq!(step(&b, b.fresh(), now, 3), Err(Denied::NEVER));
        }
    }

    #[test]
    fn too_long_a_refill_is_refused() {
        // burst 2^20 − 1: 20 token bits, W = 44, refill must fit 2^43 ns: T ≤ 8.39 ms.
        let q = Quota::new(1, Duration::from_millis(9))
            .unwrap()
            .with_burst((1 << 20) - 1)
            .unwrap();
        assert!(matches!(
            TokenBucketRule::new(&q),
            Err(QuotaError::BurstTooLarge { .. })
        ));
        let q = Quota::new(1, Duration::from_millis(8))
            .unwrap()
            .with_burst((1 << 20) - 1)
            .unwrap();
        assert!(TokenBucketRule::new(&q).is_ok());
    }

    #[test]
    fn refund_at_the_admission_time_is_exact_and_never_fills_past_gcra() {
        let b = bucket(1, 100, 3);
        for (start, now, n) in [
            (None, 1_000, 2),
            (Some((1_000, 1)), 1_050, 1),
            (Some((1_000, 1)), 1_140, 2),
        ] {
            let before = match start {
                None => b.fresh(),
                Some((t, n0)) => step(&b, b.fresh(), t, n0).unwrap(),
            };
            let mut w = before;
            let r = b.take(&mut w, now, n).unwrap();
            b.refund(&mut w, &r, now);
            // Every later reading decides exactly as before the admission.
            for t in [
                now,
                now + 1,
                now + 50,
                now + 99,
                now + 100,
                now + 250,
                now + 400,
            ] {
                assert_eq!(b.snapshot(&w, t), b.snapshot(&before, t), "t = {t}");
                for k in 1..=3 {
                    assert_eq!(
                        step(&b, w, t, k).is_ok(),
                        step(&b, before, t, k).is_ok(),
                        "t = {t}, n = {k}"
                    );
                }
            }
        }
        // A refund later than the admission gives back only what was not absorbed.
        let mut w = b.fresh();
        let r = b.take(&mut w, 1_000, 3).unwrap(); // empty at 1000, full again at 1300
        let mut late = w;
        b.refund(&mut late, &r, 1_200);
        assert_eq!(b.snapshot(&late, 1_200).full_after, Duration::ZERO);
        assert_eq!(b.snapshot(&w, 1_200).full_after, Duration::from_nanos(100));
    }
}
