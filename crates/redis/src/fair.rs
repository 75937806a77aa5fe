//! Fair leases: the leased mode's grants split a saturated key's rate between the nodes
//! by max-min fair shares of their reported demands, while the key's own GCRA still
//! charges every grant (so the fleet's bounds are unchanged).
//!
//! # Why
//!
//! A lease takes up to `g` cells from the key's GCRA, as many as conform when it arrives
//! ([`RedisGcra::try_take_up_to`](crate::RedisGcra::try_take_up_to)). Under saturation that
//! is first come, first served, and a node's lease size follows its own recent rate: a node
//! that ran dry asks for less, so the nodes that get cells keep getting them. Measured with
//! the `fleet` example before this design (4 nodes on one key at `1000/s burst 50`, 5 s):
//! one node got 2,655 of 5,033 admissions (2.1 equal shares) and another 541 (0.43); with
//! 2 nodes the smaller one got 285 of 5,022 (0.11 of an equal share).
//!
//! # Design
//!
//! Doorman's (capacity by fair share of the clients' stated demand), on the key's GCRA:
//!
//! 1. **Demand.** Each node measures its *offered load* on each key, admitted plus refused
//!    permits (admitted ones from the cells it spent, so an admission writes nothing more;
//!    refused ones counted by the refusal while they can still raise the sample, so a
//!    saturated key's refusals only read), between two lease requests, and reports it with
//!    each request as a share of the key's rate in millionths ([`Demand::ppm`], at most
//!    [`FULL_DEMAND_PPM`]: a node that offers more than the whole rate demands the whole
//!    rate), averaged over about the lease target.
//! 2. **Live nodes.** The fair script keeps, beside the key (in [`fair_key`]'s hash, in
//!    the key's hash slot), one field per node that asked for the key: its last demand,
//!    the TAT of its own GCRA, and when its report expires (the lease TTL after it was
//!    made, plus the wait of a refusal: a node that was told to wait is still live). Each
//!    request drops the expired reports. The node ids are the heartbeats' ([`RedisConfig::node_id`](crate::RedisConfig::node_id)):
//!    the heartbeats announce the fleet (for the outage policy), the reports tell which of
//!    its nodes want this key now.
//! 3. **Shares.** Max-min fair shares of the key's rate by water-filling over the live
//!    demands ([`max_min_shares`]): every demand below an equal split of what is left is
//!    met, the rest split the remainder equally; when every demand is met, the spare is
//!    split equally on top. The shares add up to the whole rate (less rounding, at most one
//!    millionth per node). A node alone gets the whole rate; a node that reports less than
//!    an equal split gets its demand and lends the rest to the others.
//! 4. **Per-node GCRA.** Beside the key's GCRA (emission interval `T`, burst `B`), each
//!    node has its own, at its share: interval `T_i = ⌈T · 10^6 / share_i⌉` µs (so never
//!    faster than its share), burst `B`. A lease of `g` cells is granted only what both
//!    allow: `min(g, free_key, free_i)`, and charged to both (the node's backlog is capped
//!    at its span `B·T_i`: a share that shrank does not leave a debt behind). A share that
//!    changes keeps the node's backlog in time, so the new rate applies from then on.
//! 5. **Lending.** What the key holds above a reserve of half its burst (`⌈B/2⌉` cells) is
//!    granted to any node, beyond its share: cells that no one claims in time (a node that
//!    stalled, a demand that fell before its report expired) go to the nodes that ask,
//!    while the reserve waits for the ones whose share it is. What is lent is charged to
//!    the borrower's GCRA too (up to its span), so a borrower pays it back by waiting
//!    while the others claim their shares.
//! 6. **Refusal.** When nothing is granted, the script returns the exact wait until one
//!    cell would be granted to this node if nothing else happened (the later of the key's
//!    and the node's waits for one cell, or the wait until the key holds more than the
//!    reserve, whichever is first); the node blocks the key until then, as before.
//!
//! Every number is an integer (µs, cells, millionths) and every product in the script is
//! bounded below 2^53 as the GCRA script's ([`scripts`](crate::scripts), "Numbers"):
//! `(T mod share)·10^6 < 10^12`, `T_i ≤ 2^52 / B` (clamped: an extreme share then runs
//! faster than its share, never the key faster than its rate), `g·T_i ≤ B·T_i ≤ 2^52`,
//! a stored TAT below `2·2^52`.
//!
//! # The bounds still hold
//!
//! A fair lease is a lease: `min(g, free_key, …) ≤ min(g, free_key)`, the cells that the
//! key's GCRA allows now, and it moves the key's TAT by `g·T` exactly as the plain lease
//! does (it never runs into debt: `free_key` counts only what fits below `B·T`). The
//! fairness can only grant *less* than the plain lease would, and every grant is one of the
//! key's GCRA calls of step (i) of [`leased`](crate::leased)'s proof ("The bound"). Steps
//! (ii) and (iii) do not look at how many cells a lease took, only that a node holds at most
//! `L` (its request is for `size − held ≤ L − held`, as before). So, unchanged:
//!
//! ```text
//! consumed(fleet, [a, a+Δ))  ≤  B + ⌈(Δ + D)/T⌉ − 1 + N·L
//! consumed(fleet, [0, t))    ≤  B + ⌈(t + D)/T⌉ − 1
//! ```
//!
//! # The fairness claim
//!
//! Let `N` nodes ask for one key, each offering at least an equal split `R/N` of its rate
//! `R = 1/T` (saturation), their reports live. Then every node's share is `10^6/N`
//! millionths (rounded down), `T_i = ⌈N·T⌉` µs (for `N` dividing 10^6, exactly `N·T`),
//! and:
//!
//! - **At most an equal share, plus a burst.** Without lending, node `i`'s grants in any
//!   window of length Δ are at most `B + ⌈Δ/T_i⌉ − 1`: the GCRA bound of step (i) applied
//!   to the node's own GCRA (each grant of `m` moves its TAT to `max(TAT, t) + m·T_i` and
//!   leaves it at most `B·T_i` ahead; the same sum). Over 5 s at `1000/s burst 50` with 4
//!   nodes: at most `50 + 1250 − 1 = 1299` of an equal share of 1,262 (5,050 / 4), 1.03.
//!   Lending adds only cells the key held above its reserve, which the owners of the
//!   shares had left unclaimed.
//! - **At least an equal share, less what the node leaves unclaimed.** The shares add up
//!   to the key's rate, so the others together are capped at `R − R/N` (plus their bursts
//!   and what they borrow), and what the key accrues beyond their caps waits for node `i`:
//!   in the reserve, which no node may take beyond its own share, or in node `i`'s own
//!   GCRA, whose credit keeps accruing at `R/N` up to `B` cells while it is away. A node
//!   that asks at least once per `B·T_i` (200 ms above) and gets its answers within it
//!   therefore loses nothing of its share but what the key's burst cannot hold.
//!
//! That gives each node between `1 − ε` and `1 + (B + 1)/(R·Δ/N)` of an equal share over a
//! window Δ, with `ε` the share of its cells it left unclaimed. How small `ε` is depends
//! on the node asking in time: a node starved of CPU (the `fleet` example runs 4 nodes,
//! each a deciding thread and a runtime, on 2 cores) is the one that loses. This part is
//! an argument and a measurement, not a proof: no bound on `ε` holds whatever the
//! scheduler does.
//!
//! Measured with the `fleet` example (`1000/s burst 50`, `L = 16`, 5 s, 2 shared cores):
//!
//! | run | nodes | shares of an equal split | Jain's index |
//! |---|---:|---|---:|
//! | fair, 5 runs | 4 | 0.935–1.036, 0.965–1.037, 0.952–1.034, 0.962–1.032, 0.920–1.035 | 0.9979–0.9991 |
//! | fair, 3 runs | 2 | 0.989–1.011, 0.974–1.026, 0.978–1.022 | 0.9993–0.9999 |
//! | first come, first served | 4 | 0.004–3.853 (5, 4,845, 141 and 39 admitted) | 0.27 |
//! | first come, first served | 2 | 0.218–1.782 | 0.62 |
//! | exact mode (every decision on Redis) | 4 | 0.865–1.212 | 0.983 |
//!
//! The fleet used the key's whole rate either way (5,030 to 5,040 admissions in the leased
//! runs, 5,049 and 5,050 in the exact mode's: `B` plus 1,000 a second), and never more than
//! 1,050 in any 1 s window (the bound `B + ⌈1 s/T⌉ − 1 + N·L` is 1,113 for 4 nodes).
//! `redis-server-tests` asserts the target on four real nodes (`tests/fleet.rs`) and on
//! simulated fleets at explicit times (`tests/fair.rs`).
//!
//! # Cost
//!
//! A lease request reads the key's fair-share hash (one field per live node) and sorts the
//! demands: `O(N log N)` in the script, for a fleet of tens to hundreds of nodes on a key.
//! A decision costs what it cost: an admission writes nothing more (the admitted count is
//! derived from the cells spent), a refusal counts itself with a plain store only while
//! the sample is below the key's whole rate, and reads only once it is there.
//! [`LeaseConfig::fair`](crate::LeaseConfig::fair) turns the fair lease off (the plain
//! lease, first come, first served).

use std::time::Duration;

/// A demand of the whole rate, in millionths of a key's rate: `10^6`. The shares are in the
/// same unit.
pub const FULL_DEMAND_PPM: u32 = 1_000_000;

/// A node's report with a fair lease request ([`RedisGcra::try_take_fair`](crate::RedisGcra::try_take_fair)):
/// who it is, how much of the key's rate it offers, how long the report lives.
///
/// # Examples
///
/// ```
/// use limitcore_redis::{Demand, FULL_DEMAND_PPM};
/// use std::time::Duration;
///
/// // A node offering 250 requests/s on a key of 1000/s: a quarter of the rate.
/// let demand = Demand::new("edge-7", FULL_DEMAND_PPM / 4, Duration::from_secs(1));
/// assert_eq!(demand.ppm, 250_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Demand<'a> {
    /// The node's id (the heartbeat's, [`RedisConfig::node_id`](crate::RedisConfig::node_id)).
    pub node: &'a str,
    /// Its offered load on the key, millionths of the key's rate (`1 ..=`
    /// [`FULL_DEMAND_PPM`]; clamped into that range when sent).
    pub ppm: u32,
    /// How long the report counts the node as live after it is made (plus the wait of a
    /// refusal), whole µs, at most 2^52 µs: the leased limiter's lease TTL.
    pub horizon: Duration,
}

impl<'a> Demand<'a> {
    /// The report of `node`, offering `ppm` millionths of the key's rate, live for
    /// `horizon`.
    pub fn new(node: &'a str, ppm: u32, horizon: Duration) -> Self {
        Demand { node, ppm, horizon }
    }
}

/// Max-min fair shares of a key's rate, in millionths, for the demands `demands_ppm`
/// (millionths each, clamped to `1 ..= FULL_DEMAND_PPM`), as the fair script computes them:
/// water-filling over the demands in increasing order, each met while it is at most an
/// equal split of what is left, the rest at that split (rounded down); when every demand
/// is met, the spare split equally on top (rounded down). The shares add up to at most
/// [`FULL_DEMAND_PPM`], and to more than `FULL_DEMAND_PPM − demands.len()` when the demands
/// add up to at least it.
///
/// # Examples
///
/// ```
/// use limitcore_redis::fair::max_min_shares;
///
/// // Saturated nodes: equal shares.
/// assert_eq!(max_min_shares(&[1_000_000; 4]), [250_000; 4]);
/// // A light node keeps its demand, the others split the rest.
/// assert_eq!(max_min_shares(&[100_000, 1_000_000, 1_000_000]), [100_000, 450_000, 450_000]);
/// // Alone: the whole rate, whatever the demand.
/// assert_eq!(max_min_shares(&[10]), [1_000_000]);
/// ```
pub fn max_min_shares(demands_ppm: &[u32]) -> Vec<u32> {
    let full = u64::from(FULL_DEMAND_PPM);
    let demands: Vec<u64> = demands_ppm
        .iter()
        .map(|&d| u64::from(d.clamp(1, FULL_DEMAND_PPM)))
        .collect();
    let mut sorted = demands.clone();
    sorted.sort_unstable();
    let (mut rest, mut k, mut level) = (full, sorted.len() as u64, None);
    for &d in &sorted {
        if d * k <= rest {
            rest -= d;
            k -= 1;
        } else {
            level = Some(rest / k);
            break;
        }
    }
    let spare = rest / (demands.len() as u64).max(1);
    demands
        .iter()
        .map(|&d| {
            let share = match level {
                None => d + spare,
                Some(level) => d.min(level),
            };
            share.max(1) as u32
        })
        .collect()
}

/// The Redis key of the fair-share hash beside the key `tat_key` (a limit's Redis key, as
/// [`RedisGcra::redis_key`](crate::RedisGcra::redis_key) gives it), in the same hash slot
/// of a cluster: `tat_key:fair` if `tat_key` has a hash tag (a `{…}` with something inside,
/// which then decides the slot of both), `{tat_key}:fair` otherwise (the tag is then the
/// whole of `tat_key`, which is what decides its own slot). A key with a `}` but no hash tag
/// cannot be put in a tag: its hash is `tat_key:fair`, which a stand-alone server accepts
/// and a cluster refuses (`CROSSSLOT`) unless the two land in one slot; give such keys a
/// hash tag.
///
/// # Examples
///
/// ```
/// use limitcore_redis::fair::fair_key;
///
/// assert_eq!(fair_key("lc:gcra:tenant"), "{lc:gcra:tenant}:fair");
/// assert_eq!(fair_key("lc:gcra:{tenant}:api"), "lc:gcra:{tenant}:api:fair");
/// ```
pub fn fair_key(tat_key: &str) -> String {
    let tagged = tat_key
        .find('{')
        .and_then(|open| tat_key[open + 1..].find('}'))
        .is_some_and(|len| len > 0);
    if tagged || tat_key.contains('}') {
        format!("{tat_key}:fair")
    } else {
        format!("{{{tat_key}}}:fair")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_max_min_fair_and_add_up_to_the_rate() {
        let cases: &[&[u32]] = &[
            &[1_000_000, 1_000_000],
            &[1, 1_000_000, 1_000_000, 1_000_000],
            &[300_000, 300_000, 300_000, 300_000],
            &[100_000, 200_000, 300_000],
            &[0, 0, 0],
            &[999_999, 2],
            &[333_334, 333_333, 333_333, 5],
        ];
        for &demands in cases {
            let shares = max_min_shares(demands);
            let total: u64 = shares.iter().map(|&s| u64::from(s)).sum();
            let wanted: u64 = demands.iter().map(|&d| u64::from(d.max(1))).sum();
            assert!(total <= 1_000_000, "{demands:?} → {shares:?}");
            assert!(
                total + demands.len() as u64 > 1_000_000 || total >= wanted,
                "{demands:?} → {shares:?}: the rate is split"
            );
            let top = shares.iter().copied().max().unwrap();
            for (&d, &s) in demands.iter().zip(&shares) {
                // Max-min: a node gets its demand, or no other node gets more than it
                // (the spare aside, spread equally when every demand is met).
                assert!(s >= d.max(1) || top - s <= 1, "{demands:?} → {shares:?}");
            }
        }
        // Equal demands, equal shares; a light node keeps its demand.
        assert_eq!(max_min_shares(&[1_000_000; 3]), [333_333; 3]);
        assert_eq!(
            max_min_shares(&[50_000, 2_000_000]),
            [50_000, 950_000],
            "the light node's spare goes to the heavy one"
        );
        assert_eq!(
            max_min_shares(&[50_000, 900_000]),
            [75_000, 925_000],
            "every demand met: the spare split equally on top"
        );
        assert_eq!(
            max_min_shares(&[100_000, 100_000]),
            [500_000, 500_000],
            "every demand met: the spare split equally"
        );
    }

    #[test]
    fn the_fair_key_shares_the_limits_slot() {
        assert_eq!(fair_key("lc:gcra:k"), "{lc:gcra:k}:fair");
        assert_eq!(fair_key("lc:gcra:{t}:k"), "lc:gcra:{t}:k:fair");
        // A `}` with no tag (`{}` is none: the whole key is hashed) cannot be wrapped: it
        // would end the tag early.
        assert_eq!(fair_key("lc:gcra:{}k"), "lc:gcra:{}k:fair");
        assert_eq!(fair_key("lc:gcra:a}b"), "lc:gcra:a}b:fair");
    }
}
