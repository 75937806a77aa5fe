//! What a node asks for with each lease request, from what it measured on the key since
//! the previous one ([`Measured`]): the lease size (its own admission rate times the target
//! lease duration) and the demand it reports for the fair shares (its offered load,
//! admitted plus refused, in millionths of the key's rate). Pure functions of the
//! measurements, tested without a server.

use super::entry::Measured;
use crate::fair::FULL_DEMAND_PPM;
use std::time::Duration;

/// The next lease size, in cells, `1 ..= max_lease`: the node's admission rate on the key
/// since its previous request times the `target` lease duration (the size as it was before
/// a first measurement), at least twice the old size when the word ran dry.
pub(super) fn next_size(
    m: &Measured,
    size: u32,
    dry: bool,
    target: Duration,
    max_lease: u32,
) -> u32 {
    let mut next = match m.elapsed {
        Some(elapsed) if elapsed > 0 => {
            let cells = u128::from(m.admitted) * target.as_nanos();
            u64::try_from(cells.div_ceil(u128::from(elapsed))).unwrap_or(u64::MAX)
        }
        _ => u64::from(size),
    };
    if dry {
        next = next.max(u64::from(size) * 2);
    }
    next.clamp(1, u64::from(max_lease.max(1))) as u32
}

/// The demand to report, in millionths of the key's rate (`1 ..= FULL_DEMAND_PPM`): the
/// node's offered load on the key since its previous request (admitted plus refused
/// permits, over the time since; over `target` before a first measurement) as a share of
/// the key's rate (one permit per `interval_ns`), capped at the whole rate, and averaged
/// with the previous report over about `target` (weights: `target` for the old value, the
/// time measured for the new). At least 1: the node is asking for cells.
pub(super) fn demand_ppm(m: &Measured, interval_ns: u64, target: Duration) -> u32 {
    let target_ns = u64::try_from(target.as_nanos()).unwrap_or(u64::MAX).max(1);
    let elapsed = m.elapsed.unwrap_or(target_ns).max(1);
    let offered = u128::from(m.admitted) + u128::from(m.refused);
    let full = u128::from(FULL_DEMAND_PPM);
    let sample = (offered * u128::from(interval_ns) * full / u128::from(elapsed)).min(full);
    let smoothed = if m.demand_ppm == 0 {
        sample
    } else {
        let (old, tau, dt) = (
            u128::from(m.demand_ppm),
            u128::from(target_ns),
            u128::from(elapsed),
        );
        (old * tau + sample * dt) / (tau + dt)
    };
    smoothed.clamp(1, full) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn measured(elapsed: Option<u64>, admitted: u64, refused: u64, demand_ppm: u32) -> Measured {
        Measured {
            elapsed,
            admitted,
            refused,
            demand_ppm,
        }
    }

    #[test]
    fn the_size_follows_the_admission_rate_and_doubles_when_dry() {
        let target = Duration::from_millis(50);
        // 10 admitted in 10 ms: 1/ms, 50 cells a lease, clamped to L = 16.
        assert_eq!(
            next_size(&measured(Some(10 * MS), 10, 0, 0), 4, false, target, 16),
            16
        );
        // 1 admitted in 100 ms: half a cell a lease, at least 1.
        assert_eq!(
            next_size(&measured(Some(100 * MS), 1, 0, 0), 4, false, target, 16),
            1
        );
        // Dry: at least twice the old size.
        assert_eq!(
            next_size(&measured(Some(100 * MS), 1, 0, 0), 4, true, target, 16),
            8
        );
        // Before a first measurement: the size as it was.
        assert_eq!(next_size(&measured(None, 0, 0, 0), 4, false, target, 16), 4);
    }

    #[test]
    fn the_demand_is_the_offered_load_as_a_share_of_the_rate() {
        let target = Duration::from_millis(50);
        let t = MS; // 1000/s
                    // 100 offered (60 admitted, 40 refused) in 1 s: a tenth of the rate.
        assert_eq!(
            demand_ppm(&measured(Some(1_000 * MS), 60, 40, 0), t, target),
            100_000
        );
        // Refusals beyond the rate: capped at the whole rate.
        assert_eq!(
            demand_ppm(&measured(Some(MS), 1, 1_000_000, 0), t, target),
            FULL_DEMAND_PPM
        );
        // Nothing offered: still 1 (the node asks for cells).
        assert_eq!(demand_ppm(&measured(Some(MS), 0, 0, 0), t, target), 1);
        // Before a first measurement: over the target (1 refusal in 50 ms: 20/s).
        assert_eq!(demand_ppm(&measured(None, 0, 1, 0), t, target), 20_000);
        // Averaged with the previous report: 50 ms of new (the whole rate) against a
        // target's worth of old (a tenth): halfway.
        assert_eq!(
            demand_ppm(&measured(Some(50 * MS), 50, 1_000, 100_000), t, target),
            550_000
        );
    }
}
