//! The differential driver of the property tests: one history of [`Step`]s applied to
//! several limiters and reference models, which must agree at every step.

use crate::strategies::Step;
use limitcore::clock::Nanos;
use limitcore::reference::Model;
use limitcore::Denied;
use proptest::prelude::*;
use std::time::Duration;

/// Run `steps` from `start` on every subject (limiters through [`AsModel`](crate::AsModel),
/// reference models as they are), and require at every step:
///
/// - identical decisions (`Ok`, `ExceedsCapacity`, `RateLimited` with the same
///   `retry_after`) from every subject;
/// - after a finite `retry_after`, when its boundary lies inside the run's readings: one
///   nanosecond early every subject refuses with exactly 1 ns left, and exactly then every
///   subject admits (the caller waited: time moves on to that boundary);
/// - identical [`Snapshot`](limitcore::Snapshot)s (`remaining` and `full_after`) at the
///   step's time.
///
/// Every reading stays within `[start, start + window]` (saturating at `u64::MAX`).
/// Returns the admitted requests as `(time, n)`, in order.
///
/// # Errors
///
/// The first disagreement, as a proptest failure.
///
/// # Examples
///
/// ```
/// use limitcore::clock::ManualClock;
/// use limitcore::reference::{GcraModel, TokenBucketModel};
/// use limitcore::{Gcra, Quota};
/// use limitcore_testkit::{run, AsModel, Step};
///
/// let q = Quota::per_second(2)?;
/// let gcra = Gcra::with_clock(q, ManualClock::new())?;
/// let steps = [Step::Acquire(2), Step::Acquire(1), Step::Shift(500_000_000), Step::Acquire(1)];
/// let admitted = run(
///     &mut [&mut AsModel(&gcra), &mut GcraModel::new(q), &mut TokenBucketModel::new(q)],
///     0,
///     u64::MAX,
///     &steps,
/// )
/// .unwrap();
/// // The refused request was asked again at its retry_after (500 ms) and admitted.
/// assert_eq!(admitted, [(0, 2), (500_000_000, 1), (1_000_000_000, 1)]);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn run(
    subjects: &mut [&mut dyn Model],
    start: Nanos,
    window: u64,
    steps: &[Step],
) -> Result<Vec<(Nanos, u32)>, TestCaseError> {
    let (lo, hi) = (start, start.saturating_add(window));
    let mut now = start;
    let mut admitted = Vec::new();
    for step in steps {
        match *step {
            Step::Shift(d) => now = now.saturating_add_signed(d).clamp(lo, hi),
            Step::Jump(t) => now = start.saturating_add(t).clamp(lo, hi),
            Step::Acquire(n) => {
                let results: Vec<_> = subjects.iter_mut().map(|s| s.acquire(n, now)).collect();
                prop_assert!(
                    results.windows(2).all(|w| w[0] == w[1]),
                    "n={n} now={now}: {results:?}"
                );
                match results[0] {
                    Ok(()) => admitted.push((now, n)),
                    Err(Denied::RateLimited { retry_after }) => {
                        let r = retry_after.as_nanos() as u64;
                        prop_assert!(r >= 1);
                        let at = now.saturating_add(r);
                        if at <= hi {
                            if r > 1 {
                                for s in subjects.iter_mut() {
                                    prop_assert_eq!(
                                        s.acquire(n, at - 1),
                                        Err(Denied::RateLimited {
                                            retry_after: Duration::from_nanos(1)
                                        })
                                    );
                                }
                            }
                            for s in subjects.iter_mut() {
                                prop_assert_eq!(
                                    s.acquire(n, at),
                                    Ok(()),
                                    "retry_after {} ns is not enough",
                                    r
                                );
                            }
                            admitted.push((at, n));
                            // The caller waited: time has moved on to the probe.
                            now = at;
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        let states: Vec<_> = subjects.iter().map(|s| s.snapshot(now)).collect();
        prop_assert!(
            states.windows(2).all(|w| w[0].remaining == w[1].remaining),
            "remaining at now={now}: {states:?}"
        );
        prop_assert!(
            states
                .windows(2)
                .all(|w| w[0].full_after == w[1].full_after),
            "full_after at now={now}: {states:?}"
        );
    }
    Ok(admitted)
}
