//! A model of the fair lease script (`limitcore_redis::scripts::fair_source`) in Rust
//! integers, for the differential tests at explicit times: the key's GCRA, each node's report
//! (demand, TAT of its own GCRA, expiry), the max-min fair shares
//! ([`max_min_shares`]), the per-node GCRA, lending above the reserve, the exact wait of a
//! refusal.

use limitcore_redis::fair::{max_min_shares, FULL_DEMAND_PPM};
use std::collections::BTreeMap;

/// 2^52, the scripts' bound.
const P52: u128 = 1 << 52;

/// What the script answers to one fair lease request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairReply {
    /// Cells granted.
    pub granted: u32,
    /// The exact wait for one cell when nothing was granted, µs (0 on a grant).
    pub retry_us: u64,
    /// The key's backlog after the request, µs.
    pub backlog_us: u64,
    /// The asking node's share, millionths of the key's rate.
    pub share_ppm: u32,
    /// The live nodes counted, the asking one included.
    pub nodes: u32,
    /// Whether the grant went beyond the node's own allowance (lent from above the
    /// reserve).
    pub lent: bool,
}

/// One node's report as the script keeps it.
#[derive(Debug, Clone, Copy)]
struct Report {
    demand: u32,
    tat: u128,
    expires: u128,
}

/// The fair lease script's state for one key and its decision, in integers.
#[derive(Debug, Clone)]
pub struct FairModel {
    t: u128,
    burst: u128,
    tat: u128,
    reports: BTreeMap<String, Report>,
}

impl FairModel {
    /// A fresh key of emission interval `t_us` µs and burst `burst`.
    pub fn new(t_us: u64, burst: u32) -> Self {
        FairModel {
            t: u128::from(t_us),
            burst: u128::from(burst),
            tat: 0,
            reports: BTreeMap::new(),
        }
    }

    /// The key's TAT, µs.
    pub fn tat(&self) -> u64 {
        self.tat as u64
    }

    /// The request of `node` for `want` cells at `now` (µs), reporting `demand` (millionths)
    /// that lives `horizon` µs: the script's answer, and the state it leaves.
    pub fn take(
        &mut self,
        now: u64,
        want: u32,
        node: &str,
        demand: u32,
        horizon: u64,
    ) -> FairReply {
        let (now, want, horizon) = (
            u128::from(now),
            u128::from(want.max(1)),
            u128::from(horizon),
        );
        let demand = demand.clamp(1, FULL_DEMAND_PPM);
        let (t, burst) = (self.t, self.burst);
        let span = t * burst;
        let mut backlog = self.tat.saturating_sub(now);
        let free = span.saturating_sub(backlog) / t;
        // The live reports, the asking node's first (its demand from the request).
        let mine = self.reports.get(node).map_or(0, |r| r.tat);
        self.reports.retain(|n, r| n == node || r.expires > now);
        let mut last = now + horizon;
        let mut demands = vec![demand];
        for (n, r) in &self.reports {
            if n != node {
                demands.push(r.demand);
                last = last.max(r.expires);
            }
        }
        let share = u128::from(max_min_shares(&demands)[0]);
        // The node's GCRA.
        let m = u128::from(FULL_DEMAND_PPM);
        let q = t / share;
        let mut ti = if q > P52 / m {
            P52
        } else {
            q * m + ((t % share) * m).div_ceil(share)
        };
        ti = ti.min(P52 / burst).max(t);
        let nspan = ti * burst;
        let mut nback = mine.saturating_sub(now).min(nspan);
        let allow = (nspan - nback) / ti;
        let reserve = burst.div_ceil(2);
        let lend = free.saturating_sub(reserve);
        let granted = want.min(free).min(allow.max(lend));
        let mut retry = 0;
        if granted > 0 {
            backlog += granted * t;
            nback = (nback + granted * ti).min(nspan);
            self.tat = now + backlog;
        } else {
            let gw = backlog.saturating_sub(span - t);
            let nw = nback.saturating_sub(nspan - ti);
            retry = gw.max(nw);
            if reserve < burst {
                retry = retry.min(backlog.saturating_sub(span - (reserve + 1) * t));
            }
        }
        let expires = (now + horizon + retry).min(2 * P52);
        self.reports.insert(
            node.to_owned(),
            Report {
                demand,
                tat: now + nback,
                expires,
            },
        );
        FairReply {
            granted: granted as u32,
            retry_us: retry as u64,
            backlog_us: backlog as u64,
            share_ppm: share as u32,
            nodes: demands.len() as u32,
            lent: granted > allow,
        }
    }
}
