//! [`LanesModel`]: the plain model of a [`Lanes`](crate::Lanes) limiter.

use super::BudgetModel;
use crate::budget::BudgetConfig;
use crate::clock::{duration_to_nanos, Nanos};
use crate::decision::{Denied, Snapshot};
use crate::lanes::{LaneCounts, LaneError, LanesConfig};
use alloc::vec::Vec;
use core::time::Duration;

/// One request in the model.
#[derive(Debug, Clone)]
struct Request {
    id: u64,
    lane: usize,
    remaining: u32,
    granted: u32,
    since: Nanos,
    delayed: bool,
}

/// A [`Lanes`](crate::Lanes) limiter in plain code: one [`BudgetModel`], one `Vec` of
/// waiting requests per lane, the lanes' tags in `u128`, no lock, no atomics, no timer.
///
/// Its rules, as [`Lanes`](crate::Lanes) documents them:
///
/// - A request of lane `l` made when no request that goes before it waits (for the top
///   lane: none of the top lane; for the others: none at all) takes what fits at once; the
///   rest waits at the tail of its lane.
/// - Serving at `t`: repeatedly pick the top lane if it has a waiting request, else the
///   weighted lane with the least tag (the lower number on a tie); its first request's next
///   piece (`min(remaining, piece)`) is granted if the budget admits it at `t`, adding
///   `⌈piece·2^64 / weight⌉` to a weighted lane's tag (after the virtual time became that
///   tag); otherwise stop: the next piece fits after the budget's wait.
/// - A weighted lane that starts waiting takes the tag `max(tag, virtual time)`.
/// - A cancelled request leaves its lane; what it was granted passes to the next requests
///   of its lane in order; the rest stays charged.
///
/// Every submission, look, cancellation and reconfiguration serves at its time; a look at a
/// request already collected as granted does not.
///
/// # Examples
///
/// ```
/// use limitcore::reference::LanesModel;
/// use limitcore::{Lane, Lanes, LanesConfig, Progress};
/// use limitcore::clock::ManualClock;
///
/// let config = LanesConfig::new("1000/s burst 100".parse()?).with_piece(10);
/// let lanes = Lanes::with_clock(config.clone(), ManualClock::new())?;
/// let mut model = LanesModel::new(config);
/// let mut low = lanes.submit_at(Lane::LOW, 130, 0)?;
/// let id = model.submit(3, 130, 0).unwrap();          // 100 now, 30 waiting
/// assert_eq!(low.poll_at(25_000_000), Progress::Waiting { next: Some(30_000_000) });
/// assert_eq!(model.poll(id, 25_000_000), Some(Some(30_000_000)));
/// assert_eq!(lanes.counts(Lane::LOW), Some(model.counts(3)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LanesModel {
    budget: BudgetModel,
    config: LanesConfig,
    queues: Vec<Vec<Request>>,
    tags: Vec<u128>,
    vnow: u128,
    /// Requests granted in full and not yet collected.
    finished: Vec<u64>,
    next_id: u64,
    next: Option<Nanos>,
    counts: Vec<LaneCounts>,
}

impl LanesModel {
    /// The model of a fresh limiter of `config` (auto-tuning is not modelled).
    ///
    /// # Panics
    ///
    /// For a configuration a [`Budget`](crate::Budget) refuses.
    pub fn new(config: LanesConfig) -> Self {
        let lanes = config.lanes();
        LanesModel {
            budget: BudgetModel::new(BudgetConfig::new(config.quota).mode(config.mode)),
            config,
            queues: alloc::vec![Vec::new(); lanes],
            tags: alloc::vec![0; lanes],
            vnow: 0,
            finished: Vec::new(),
            next_id: 0,
            next: None,
            counts: alloc::vec![LaneCounts::default(); lanes],
        }
    }

    /// Whether a request of `lane` may take without waiting.
    fn may_take(&self, lane: usize) -> bool {
        if lane == 0 {
            self.queues[0].is_empty()
        } else {
            self.queues.iter().all(Vec::is_empty)
        }
    }

    /// All or nothing, never waiting (as [`Lanes::try_acquire_at`](crate::Lanes::try_acquire_at)).
    ///
    /// # Errors
    ///
    /// As `Lanes::try_acquire_at`.
    pub fn try_acquire(&mut self, lane: usize, n: u32, now: Nanos) -> Result<(), LaneError> {
        if n == 0 {
            return Ok(());
        }
        if !self.may_take(lane) {
            return Err(LaneError::WouldWait { retry_after: None });
        }
        self.budget.acquire(n, now).map_err(|d| match d {
            Denied::RateLimited { retry_after } => LaneError::WouldWait {
                retry_after: Some(retry_after),
            },
            Denied::ExceedsCapacity { capacity } => LaneError::ExceedsBurst { burst: capacity },
            Denied::Paused => LaneError::Paused,
            _ => LaneError::WouldWait { retry_after: None },
        })?;
        self.counts[lane].requests += 1;
        self.counts[lane].granted += u64::from(n);
        Ok(())
    }

    /// What fits of `n`, never waiting (as `Lanes::take_up_to_at`).
    pub fn take_up_to(&mut self, lane: usize, n: u32, now: Nanos) -> u32 {
        if n == 0 || !self.may_take(lane) {
            return 0;
        }
        let taken = self.budget.take_up_to(n, now);
        if taken > 0 {
            self.counts[lane].requests += 1;
            self.counts[lane].granted += u64::from(taken);
        }
        taken
    }

    /// Submit `n` units for `lane` at `now`: `None` if granted in full at once, else the
    /// request's id.
    pub fn submit(&mut self, lane: usize, n: u32, now: Nanos) -> Option<u64> {
        if n == 0 {
            return None;
        }
        let taken = if self.may_take(lane) {
            self.budget.take_up_to(n, now)
        } else {
            0
        };
        self.counts[lane].requests += 1;
        self.counts[lane].granted += u64::from(taken);
        if taken == n {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        if lane > 0 && self.queues[lane].is_empty() {
            self.tags[lane] = self.tags[lane].max(self.vnow);
        }
        self.queues[lane].push(Request {
            id,
            lane,
            remaining: n - taken,
            granted: taken,
            since: now,
            delayed: false,
        });
        self.serve(now);
        if let Some(at) = self.finished.iter().position(|&f| f == id) {
            self.finished.remove(at);
            return None;
        }
        let request = self.queues[lane].iter_mut().find(|r| r.id == id);
        if let Some(r) = request {
            r.delayed = true;
        }
        self.counts[lane].delayed += 1;
        Some(id)
    }

    /// Serve at `now`; returns when the next piece fits.
    pub fn serve(&mut self, now: Nanos) -> Option<Nanos> {
        self.next = loop {
            let Some(lane) = self.pick() else {
                break None;
            };
            let piece = self.queues[lane][0].remaining.min(self.config.piece());
            match self.budget.acquire(piece, now) {
                Ok(()) => {}
                Err(Denied::RateLimited { retry_after }) => {
                    break Some(now.saturating_add(duration_to_nanos(retry_after).max(1)));
                }
                Err(_) => break None,
            }
            self.counts[lane].granted += u64::from(piece);
            if lane > 0 {
                self.vnow = self.tags[lane];
                let w = u128::from(self.config.get_weights()[lane - 1]);
                self.tags[lane] += (u128::from(piece) << 64).div_ceil(w);
            }
            let r = &mut self.queues[lane][0];
            r.remaining -= piece;
            r.granted += piece;
            if r.remaining == 0 {
                let r = self.queues[lane].remove(0);
                self.finish(&r, now);
            }
        };
        for (lane, queue) in self.queues.iter().enumerate() {
            self.counts[lane].pending = queue.len() as u64;
        }
        self.next
    }

    fn finish(&mut self, r: &Request, now: Nanos) {
        if r.delayed {
            self.counts[r.lane].wait += Duration::from_nanos(now.saturating_sub(r.since));
        }
        self.finished.push(r.id);
    }

    fn pick(&self) -> Option<usize> {
        if !self.queues[0].is_empty() {
            return Some(0);
        }
        (1..self.queues.len())
            .filter(|&l| !self.queues[l].is_empty())
            .min_by_key(|&l| (self.tags[l], l))
    }

    /// Look at request `id` at `now`: `None` if granted in full (collected now), else
    /// `Some(next)` (when the next piece fits). A request collected already is not served
    /// for.
    pub fn poll(&mut self, id: u64, now: Nanos) -> Option<Option<Nanos>> {
        let next = self.serve(now);
        if let Some(at) = self.finished.iter().position(|&f| f == id) {
            self.finished.remove(at);
            return None;
        }
        Some(next)
    }

    /// Cancel request `id` at `now`: `Ok(())` if it was granted in full (collected now),
    /// else `Err(granted)`.
    ///
    /// # Errors
    ///
    /// The cancellation's report (see `Ticket::cancel_at`).
    pub fn cancel(&mut self, id: u64, now: Nanos) -> Result<(), u32> {
        if let Some(at) = self.finished.iter().position(|&f| f == id) {
            self.finished.remove(at);
            return Ok(());
        }
        let Some((lane, at)) = self
            .queues
            .iter()
            .enumerate()
            .find_map(|(l, q)| q.iter().position(|r| r.id == id).map(|at| (l, at)))
        else {
            return Ok(());
        };
        let gone = self.queues[lane].remove(at);
        self.counts[lane].cancelled += 1;
        let mut left = gone.granted;
        while left > 0 && at < self.queues[lane].len() {
            let r = &mut self.queues[lane][at];
            let take = left.min(r.remaining);
            r.remaining -= take;
            r.granted += take;
            left -= take;
            if r.remaining == 0 {
                let r = self.queues[lane].remove(at);
                self.finish(&r, now);
            }
        }
        self.serve(now);
        Err(gone.granted)
    }

    /// Apply `config` at `now` (same number of lanes), then serve.
    pub fn reconfigure(&mut self, config: LanesConfig, now: Nanos) {
        self.budget
            .reconfigure(BudgetConfig::new(config.quota).mode(config.mode), now);
        self.config = config;
        self.serve(now);
    }

    /// The budget at `now`.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        self.budget.snapshot(now)
    }

    /// Lane `lane`'s counts.
    pub fn counts(&self, lane: usize) -> LaneCounts {
        self.counts[lane]
    }

    /// Units granted so far to waiting request `id` (`None` if not waiting).
    pub fn granted(&self, id: u64) -> Option<u32> {
        self.queues
            .iter()
            .flatten()
            .find(|r| r.id == id)
            .map(|r| r.granted)
    }
}
