//! A `#![no_std]` use of `limitcore`: an explicit clock, no default clock, no keyed map.
//!
//! `cargo test -p limitcore-no-std-check` builds the core without its `std` feature (this
//! crate asks for no feature), so this code compiling and its tests passing shows the
//! no_std-style API works without `std`; `cargo test --workspace --all-features` builds the
//! same code with `std` unified in, and the same tests must pass: turning `std` on never
//! changes what this code means (features are additive).
#![no_std]

use limitcore::clock::ManualClock;
use limitcore::{Denied, Gcra, Quota, QuotaError, RateLimiter};

/// Admit `n` permits of a fresh 10/s limiter at each of `times` (ns), on a manual clock:
/// which were admitted, written into `out`.
///
/// # Errors
///
/// The [`QuotaError`] of the quota (none for 10/s).
///
/// # Examples
///
/// ```
/// let mut out = [false; 3];
/// limitcore_no_std_check::decide(&[0, 0, 100_000_000], 5, &mut out)?;
/// assert_eq!(out, [true, true, false]);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn decide(times: &[u64], n: u32, out: &mut [bool]) -> Result<(), QuotaError> {
    let limiter = Gcra::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    for (t, admitted) in times.iter().zip(out.iter_mut()) {
        *admitted = limiter.try_acquire_n_at(n, *t).is_ok();
    }
    Ok(())
}

/// The refusal a full 10/s limiter gives one more permit, on a manual clock moved by hand.
///
/// # Errors
///
/// The [`QuotaError`] of the quota (none for 10/s).
pub fn refusal_after_a_burst() -> Result<Denied, QuotaError> {
    let clock = ManualClock::new();
    let limiter = Gcra::with_clock(Quota::per_second(10)?, clock.clone())?;
    let _ = limiter.try_acquire_n(10);
    Ok(limiter
        .try_acquire()
        .err()
        .unwrap_or(Denied::ExceedsCapacity { capacity: 0 }))
}

/// Whether the default clock type is `MonotonicClock`, with and without `std` (it never
/// means `ManualClock`).
pub fn default_clock_is_monotonic() -> bool {
    core::any::type_name::<limitcore::DefaultClock>()
        == core::any::type_name::<limitcore::clock::MonotonicClock>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    #[test]
    fn gcra_on_a_manual_clock_decides_the_same_with_and_without_std() {
        let mut out = [false; 4];
        decide(&[0, 0, 499_999_999, 500_000_000], 5, &mut out).unwrap();
        assert_eq!(out, [true, true, false, true]);
        assert_eq!(
            refusal_after_a_burst().unwrap().retry_after(),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn the_default_clock_is_the_same_type_with_and_without_std() {
        assert!(default_clock_is_monotonic());
    }
}
