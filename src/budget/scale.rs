//! [`Scale`]: a budget's clock in units of its own, so that every permit costs a whole number
//! of units and the rate is kept exactly, however fast.
//!
//! A rate of `c` permits per `p` ns (in lowest terms, [`Quota::count`] / [`Quota::period`])
//! has the emission interval `T = p / c` ns, a rational number: `3/500ms` has 166 666 666.67
//! ns, `64GiB/s` 0.0146 ns. A schedule in whole nanoseconds must round it (the classic
//! limiters round it up: 2 ppb for `3/500ms`, but no rate above 10^9/s at all). A budget
//! instead counts time in **units** of `u = T / K` ns, with `K` permits' worth of units per
//! permit chosen so that a unit is at most 1 ns:
//!
//! - `T` a whole number of ns: `u = 1 ns`, `K = T` (the clock needs no conversion);
//! - otherwise `K = 2^F`, the least power of two with `u = T / 2^F ≤ 1 ns` (`F = 0` for a
//!   rate above one permit per ns: a unit is then one permit).
//!
//! Then a permit costs exactly `K` units, and a clock reading `t` ns is `t·m / p` units, with
//! `m = c·K` (the units per `p` ns). The only rounding left is of a clock reading to a
//! whole unit (less than 1 ns), made in the caller's disfavour; the long-run rate is exact.

use crate::clock::Nanos;
use crate::quota::{Quota, QuotaError};

/// `⌈b·2^128 / p⌉` as high and low words (`b < p < 2^63`, so it is below 2^128): two
/// steps of long division by `p`.
fn reciprocal(b: u64, p: u64) -> (u64, u64) {
    let (b, p) = (u128::from(b), u128::from(p));
    let hi = (b << 64) / p;
    let r1 = (b << 64) % p;
    let lo = (r1 << 64) / p;
    let r2 = (r1 << 64) % p;
    let r = (hi << 64 | lo) + u128::from(r2 != 0);
    ((r >> 64) as u64, r as u64)
}

/// The unit clock of one budget configuration (see the module).
///
/// Invariants: `1 ≤ p < 2^63`, `p ≤ m < 2^64` (a unit is at most 1 ns), `K ≥ 1`,
/// `a = ⌊m / p⌋ ≥ 1`, `b = m mod p`, `R = ⌈b·2^128 / p⌉ < 2^128` (in two words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scale {
    /// Units per permit, `K`.
    pub(crate) per_permit: u64,
    /// Units per `p` ns, `m = c·K` (so a reading `t` is `t·m/p` units).
    m: u64,
    /// The rate's period in lowest terms, ns.
    p: u64,
    /// `⌊m / p⌋` and `m mod p`: `t·m/p = t·a + t·b/p`.
    a: u64,
    b: u64,
    /// `R = ⌈b·2^128 / p⌉`, high and low words: `⌊t·b/p⌋ = ⌊t·R / 2^128⌋` exactly for every
    /// `t < 2^64` (see [`Scale::units`]).
    r_hi: u64,
    r_lo: u64,
}

/// A clock reading in units: `floor = ⌊t·m/p⌋` modulo 2^64, whether the reading falls
/// between two units (then the ceiling is the floor plus one), and the reading itself (for
/// the exact remainder, which only the conversions back to ns need: [`Scale::rem`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Units {
    pub(crate) floor: u64,
    /// `t·m mod p ≠ 0`: the reading is not on a unit boundary.
    pub(crate) between: bool,
    /// The reading, ns.
    t: Nanos,
}

impl Units {
    /// `⌈t·m/p⌉` modulo 2^64.
    #[inline(always)]
    pub(crate) fn ceil(&self) -> u64 {
        self.floor.wrapping_add(u64::from(self.between))
    }
}

impl Scale {
    /// The longest period a budget takes: 2^63 − 1 ns (292 years), so that `m < 2^64`.
    pub(crate) const MAX_PERIOD_NS: u64 = (1 << 63) - 1;

    /// The scale of `quota`'s rate.
    ///
    /// # Errors
    ///
    /// [`QuotaError::PeriodTooLarge`] for a period (in lowest terms) of 2^63 ns or more.
    pub(crate) fn new(quota: &Quota) -> Result<Scale, QuotaError> {
        let (c, p) = (u64::from(quota.count()), quota.period_ns());
        if p > Self::MAX_PERIOD_NS {
            return Err(QuotaError::PeriodTooLarge);
        }
        let per_permit = if p % c == 0 {
            p / c
        } else if c >= p {
            1
        } else {
            // The least 2^F with c·2^F ≥ p (then u = p / (c·2^F) ≤ 1 ns); c·2^F < 2p < 2^64.
            (p.div_ceil(c)).next_power_of_two()
        };
        // Whole-ns interval: m = c·T = p. Otherwise c·2^F: for c < p below 2p + 2c, which a
        // period near 2^63 can push past 2^64 (refused); for c ≥ p it is c < 2^33.
        let m = c
            .checked_mul(per_permit)
            .ok_or(QuotaError::PeriodTooLarge)?;
        let (a, b) = (m / p, m % p);
        let (r_hi, r_lo) = reciprocal(b, p);
        Ok(Scale {
            per_permit,
            m,
            p,
            a,
            b,
            r_hi,
            r_lo,
        })
    }

    /// The scale as seven words (for a configuration slot): `K, m, p, a, b` and `R`'s two.
    pub(crate) fn to_words(self) -> [u64; 7] {
        [
            self.per_permit,
            self.m,
            self.p,
            self.a,
            self.b,
            self.r_hi,
            self.r_lo,
        ]
    }

    /// The scale of [`Scale::to_words`].
    #[inline(always)]
    pub(crate) fn from_words(w: [u64; 7]) -> Scale {
        Scale {
            per_permit: w[0],
            m: w[1],
            p: w[2],
            a: w[3],
            b: w[4],
            r_hi: w[5],
            r_lo: w[6],
        }
    }

    /// The scale of a unit of 1 ns, `K` units a permit (`m = p = a = 1`, `b = R = 0`).
    #[inline(always)]
    pub(crate) fn ns(per_permit: u64) -> Scale {
        Scale::from_words([per_permit, 1, 1, 1, 0, 0, 0])
    }

    /// Whether a unit is exactly 1 ns (the interval is a whole number of ns): readings need
    /// no conversion.
    #[inline(always)]
    pub(crate) fn is_ns(&self) -> bool {
        self.m == self.p
    }

    /// The reading `t` (ns) in units.
    ///
    /// `⌊t·b/p⌋ = ⌊t·R / 2^128⌋` with `R = ⌈b·2^128/p⌉ = b·2^128/p + δ` (`0 ≤ δ < 1`): `t·R /
    /// 2^128 = t·b/p + t·δ/2^128`, and `t·δ/2^128 < 2^-64 < 1/p` (as `p < 2^63`) is less than
    /// what the fraction of `t·b/p` lacks to the next integer, so the floors agree; and the
    /// fraction of `t·R/2^128` is below 2^-64 iff that of `t·b/p` is 0 (otherwise it is at
    /// least `1/p > 2^-63`). So two multiplications give the floor and whether the reading
    /// lies between two units, exactly.
    #[inline(always)]
    pub(crate) fn units(&self, t: Nanos) -> Units {
        if self.is_ns() {
            return Units {
                floor: t,
                between: false,
                t,
            };
        }
        // t·R = t·r_hi·2^64 + t·r_lo: `y` holds bits 64.. of it.
        let x = u128::from(t) * u128::from(self.r_lo);
        let y = u128::from(t) * u128::from(self.r_hi) + (x >> 64);
        Units {
            floor: t.wrapping_mul(self.a).wrapping_add((y >> 64) as u64),
            between: y as u64 != 0,
            t,
        }
    }

    /// `t·m − ⌊t·m/p⌋·p` for the reading of `at`: the remainder, in `[0, p)`.
    #[inline(always)]
    pub(crate) fn rem(&self, at: &Units) -> u64 {
        if self.is_ns() {
            return 0;
        }
        let q = at.floor.wrapping_sub(at.t.wrapping_mul(self.a));
        (u128::from(at.t) * u128::from(self.b) - u128::from(q) * u128::from(self.p)) as u64
    }

    /// The ns to wait from a reading `at` (in units) until the units have advanced `d` more
    /// past its floor: the least `w` with `⌊(t + w)·m/p⌋ ≥ at.floor + d`. Exact; `None` if
    /// it does not fit `u64` ns.
    #[inline(always)]
    pub(crate) fn wait_ns(&self, at: &Units, d: u64) -> Option<Nanos> {
        if d == 0 {
            return Some(0);
        }
        if self.is_ns() {
            return Some(d);
        }
        // (t + w)·m ≥ (floor + d)·p ⟺ w·m ≥ d·p − rem (with t·m = floor·p + rem).
        let need = u128::from(d) * u128::from(self.p) - u128::from(self.rem(at));
        // `m ≥ p ≥ 1` (the invariants), said to the compiler: a division that cannot fault
        // has no effect but its value, so a caller that drops the refusal (`is_ok`) never
        // makes it (issue 28). A `need` of one word takes the one-word division.
        let m = self.m.max(1);
        match u64::try_from(need) {
            Ok(need) => Some(need.div_ceil(m)),
            Err(_) => u64::try_from(need.div_ceil(u128::from(m))).ok(),
        }
    }

    /// `d` units in ns, rounded up (at most `u128`-exact; saturates at `u64::MAX`).
    pub(crate) fn units_to_ns_ceil(&self, d: u64) -> Nanos {
        if self.is_ns() {
            return d;
        }
        u64::try_from((u128::from(d) * u128::from(self.p)).div_ceil(u128::from(self.m)))
            .unwrap_or(u64::MAX)
    }

    /// `ns` in units, rounded up (saturating at `u64::MAX`).
    pub(crate) fn ns_to_units_ceil(&self, ns: Nanos) -> u64 {
        if self.is_ns() {
            return ns;
        }
        u64::try_from((u128::from(ns) * u128::from(self.m)).div_ceil(u128::from(self.p)))
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    fn scale(count: u32, period_ns: u64) -> Scale {
        Scale::new(&Quota::new_with_burst(count, Duration::from_nanos(period_ns), 1).unwrap())
            .unwrap()
    }

    /// The exact reading in units, by u128 division.
    fn exact(s: &Scale, t: u64) -> (u128, u64) {
        let x = u128::from(t) * u128::from(s.m);
        (x / u128::from(s.p), (x % u128::from(s.p)) as u64)
    }

    #[test]
    fn units_per_permit() {
        assert_eq!(scale(1, 1_000_000_000).per_permit, 1_000_000_000); // 1/s: whole ns
        assert!(scale(1, 1_000_000_000).is_ns());
        // 3/500ms: T = 166 666 666.67 ns, K = 2^28 (u = 0.62 ns).
        let s = scale(3, 500_000_000);
        assert_eq!(s.per_permit, 1 << 28);
        assert!(!s.is_ns());
        // 64 GiB/s: a unit is a byte.
        let q: Quota = "64GiB/s burst 1MiB".parse().unwrap();
        assert_eq!(Scale::new(&q).unwrap().per_permit, 1);
    }

    #[test]
    fn readings_convert_exactly() {
        let q: Quota = "64GiB/s burst 1MiB".parse().unwrap();
        let cases = [
            scale(3, 500_000_000),
            scale(7, 1_000),
            scale(1, 3),
            scale(1_000_000_007, 1_000_000_009),
            scale(u32::MAX, (1 << 62) + 12_345),
            Scale::new(&q).unwrap(),
            Scale::new(&Quota::new_with_burst(4_000_000_000, Duration::from_nanos(3), 1).unwrap())
                .unwrap(),
        ];
        let times = [0, 1, 2, 999, 1 << 32, (1 << 62) + 7, u64::MAX - 1, u64::MAX];
        for s in cases {
            for &t in &times {
                let (floor, rem) = exact(&s, t);
                let got = s.units(t);
                assert_eq!(got.floor, floor as u64, "{s:?} t={t}");
                assert_eq!(s.rem(&got), rem, "{s:?} t={t}");
                assert_eq!(got.between, rem != 0, "{s:?} t={t}");
                // As a slot keeps it (`R`'s low word made again when read).
                let kept = Scale::from_words(s.to_words());
                assert_eq!(kept.units(t), got, "{s:?} t={t}");
                // The wait back to a later unit is exact: one ns earlier falls short.
                // (A `d·p` of one word and of two: both divisions.)
                for d in [1u64, 2, 1_000, 1 << 40, 1 << 62] {
                    let w = s.wait_ns(&got, d).unwrap();
                    if let Some(later) = t.checked_add(w) {
                        let (f, _) = exact(&s, later);
                        assert!(f >= floor + u128::from(d), "{s:?} t={t} d={d} w={w}");
                        if w > 0 {
                            let (f, _) = exact(&s, later - 1);
                            assert!(f < floor + u128::from(d), "{s:?} t={t} d={d} w={w}");
                        }
                    }
                }
            }
        }
    }
}
