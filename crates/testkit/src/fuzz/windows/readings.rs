//! Where the window runs may read the clock and still expect exact agreement with their
//! model: anywhere, or (the sliding window) inside what its window-number field and its
//! clock-lag tolerance promise.

use limitcore::rules::SlidingWindowRule;
use limitcore::Quota;

/// The readings a run may use and still expect exact agreement with its model.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Readings {
    /// Any `u64` time, in any order (the fixed window, the sliding log, the pacer).
    Anywhere,
    /// The sliding window's: see [`SlidingReadings`].
    Sliding(SlidingReadings),
}

/// Where `SlidingWindow`'s documentation promises the formula exactly (batch 0).
///
/// The global word keeps the window number modulo `2^F` (`F = 64 − 2b`, `b` the bit length
/// of the count plus one); a reading up to `tolerance` windows before the stored window is stale and
/// decided at the stored window's start ([`SlidingWindowRule::MAX_CLOCK_LAG_NS`]: "2^33 ns
/// worth of windows, at least 4, at most a quarter of the field's range"), and a reading `D`
/// windows after it is read modulo `2^F` ("a limiter left idle for about a multiple of
/// `2^F` windows may read its old counts as current or stale"). So, with `S` the stored window
/// (the latest window of an admission), every reading's window is kept in
/// `[S − tolerance, S + 2^F − tolerance − 1]`: both ends inclusive, on purpose.
///
/// Before the first admission the word is the fresh `0` (window 0, no counts): any reading
/// decides like the model. An *admission* at a window within `tolerance` below a multiple
/// of `2^F` used to be taken as stale and recorded up to `tolerance` windows in the future
/// (fixed: see `fuzz/README.md`); such readings are still moved out of that band, as when
/// the committed inputs were picked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlidingReadings {
    period: u64,
    /// `F`.
    field_bits: u32,
    /// In windows.
    tolerance: u64,
    /// `S`, once something was admitted.
    pub(crate) stored: Option<u64>,
}

impl SlidingReadings {
    pub(crate) fn new(quota: &Quota) -> SlidingReadings {
        // Each count's field: the bit length of `count + 1` (a count past the limit, a
        // charge's debt, is held up to `2^bits − 1`).
        let bits = u64::BITS - (u64::from(quota.count()) + 1).leading_zeros();
        let field_bits = 64 - 2 * bits;
        let quarter = (1u64 << (field_bits - 2)) - 1;
        SlidingReadings {
            period: quota.period_ns(),
            field_bits,
            tolerance: SlidingWindowRule::MAX_CLOCK_LAG_NS
                .div_ceil(quota.period_ns())
                .max(4)
                .min(quarter.max(4)),
            stored: None,
        }
    }
}

impl Readings {
    /// The range every reading must be in.
    pub(crate) fn bounds(&self) -> (u64, u64) {
        match self {
            Readings::Anywhere => (0, u64::MAX),
            Readings::Sliding(r) => match r.stored {
                None => (0, u64::MAX),
                Some(s) => {
                    let lo = s.saturating_sub(r.tolerance) * r.period;
                    let end = (u128::from(s) + (1u128 << r.field_bits) - u128::from(r.tolerance))
                        * u128::from(r.period);
                    (lo, u64::try_from(end - 1).unwrap_or(u64::MAX))
                }
            },
        }
    }

    /// The nearest reading to `t` that the run may use.
    pub(crate) fn allowed(&self, t: u64) -> u64 {
        let (lo, hi) = self.bounds();
        let t = t.clamp(lo, hi);
        let Readings::Sliding(r) = self else {
            return t;
        };
        if r.stored.is_some() {
            return t;
        }
        // The fresh word's stale band: window residues [2^F − tolerance, 2^F).
        let field = 1u64 << r.field_bits;
        let residue = (t / r.period) & (field - 1);
        let band = field - r.tolerance;
        if residue < band {
            return t;
        }
        // Forward to the next multiple of 2^F windows, or back just below the band.
        u128::from(field - residue)
            .checked_mul(u128::from(r.period))
            .and_then(|d| u64::try_from(u128::from(t) + d).ok())
            .unwrap_or_else(|| t - (residue - band + 1) * r.period)
    }

    pub(crate) fn allows(&self, t: u64) -> bool {
        self.allowed(t) == t
    }

    /// `n ≥ 1` permits were admitted at `at`.
    pub(crate) fn admitted(&mut self, at: u64) {
        if let Readings::Sliding(r) = self {
            let k = at / r.period;
            r.stored = Some(r.stored.map_or(k, |s| s.max(k)));
        }
    }
}
