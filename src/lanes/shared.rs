//! [`Lanes`]' shared state (layer 2): the budget word, the lanes' waiting flags, the queue
//! of waiting requests behind a mutex, and the counters; the lock-free fast path and the
//! queue's steps at explicit times (submit, poll, cancel, reconfigure, retune).

use super::config::{Lane, LaneError, LanesConfig, LanesConfigError};
use super::counts::{Counters, LaneCounts};
use super::schedule::Schedule;
use super::tune::Tuner;
use crate::budget::{Budget, BudgetConfig};
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::decision::{Denied, Packed, Snapshot};
use crate::limiter::RateLimiter;
use crate::notify::wake::WakeList;
use crate::quota::{Quota, QuotaError};
use crate::rules::Rule;
use crate::sync::{fence, lock, AtomicU64, Mutex, Ordering};
use core::fmt;
use crossbeam_utils::CachePadded;

/// What a waiting request found when it looked ([`Lanes::poll_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Polled {
    /// Granted in full (its entry is gone).
    pub(crate) granted: bool,
    /// It is the timer: it serves the queue at this time.
    pub(crate) timer: Option<Nanos>,
    /// When the next piece fits (`None`: nobody waits, or nothing fits until a change).
    pub(crate) next: Option<Nanos>,
}

/// Everything behind the lock.
#[derive(Debug)]
pub(crate) struct Inner {
    /// The waiting requests; each entry's data says whether it was delayed (not granted in
    /// full when submitted).
    pub(crate) schedule: Schedule<bool>,
    /// The waiter that serves the queue when the next piece fits, and that time (see the
    /// module's "No lost wake-up").
    pub(crate) timer: Option<(usize, Nanos)>,
    /// When the next piece fits, as of the last serve.
    pub(crate) next: Option<Nanos>,
    pub(super) config: LanesConfig,
    pub(super) tuner: Option<Tuner>,
}

/// A limiter of one budget shared by lanes of requests: the top lane strictly first, the
/// others by weight, grants at exact GCRA times. See the [module](crate::lanes) for the rules, the
/// bounds and their proofs.
///
/// # Examples
///
/// ```
/// use limitcore::{Lane, Lanes, LanesConfig};
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
///
/// let lanes = Arc::new(Lanes::new(LanesConfig::new("64MiB/s burst 1MiB".parse()?))?);
/// // 8 MiB of compaction: 1 MiB at once, the rest in pieces over the next 109 ms.
/// let compaction = {
///     let lanes = lanes.clone();
///     std::thread::spawn(move || lanes.acquire_blocking(Lane::LOW, 8 << 20))
/// };
/// std::thread::sleep(Duration::from_millis(10));
/// // A user read goes before the compaction's waiting pieces: 64 KiB at the rate, ≤ 0.98 ms.
/// let t0 = Instant::now();
/// lanes.acquire_blocking(Lane::USER, 64 << 10)?;
/// assert!(t0.elapsed() < Duration::from_millis(40));
/// compaction.join().unwrap()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Lanes<C = DefaultClock> {
    /// Alone on its cache lines: its word is the one every grant writes, and nothing the
    /// fast path only reads may share a line with it.
    pub(crate) budget: CachePadded<Budget<C>>,
    /// Bit `l` set iff lane `l` has a waiting request, at every release of `inner`'s lock
    /// (stored only with it held). Read by every fast-path decision, written rarely.
    pub(super) waiting: CachePadded<AtomicU64>,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) counters: Counters,
    /// When auto-tuning is next due (`u64::MAX`: never). Read by every fast-path decision.
    tune_at: CachePadded<AtomicU64>,
    pub(super) lanes: usize,
}

impl<C: fmt::Debug> fmt::Debug for Lanes<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lanes")
            .field("budget", &self.budget)
            .field("lanes", &self.lanes)
            // Relaxed: a diagnostic read.
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The flags whose bits hold back a request of `lane` that does not wait: the top lane's own
/// for the top lane (it goes before every other lane), every lane's for the others.
#[inline(always)]
fn blockers(lane: usize) -> u64 {
    if lane == 0 {
        1
    } else {
        u64::MAX
    }
}

/// A fast path's refusal as a lane's: held back by a waiting lane (`None`), or the
/// budget's refusal.
#[cold]
#[inline(never)]
fn lane_refusal(refused: Option<Packed>) -> LaneError {
    refused.map_or(LaneError::WouldWait { retry_after: None }, |packed| {
        lane_error(packed.unpack())
    })
}

/// A budget refusal as a lane's.
fn lane_error(denied: Denied) -> LaneError {
    match denied {
        Denied::RateLimited { retry_after } => LaneError::WouldWait {
            retry_after: Some(retry_after),
        },
        Denied::ExceedsCapacity { capacity } => LaneError::ExceedsBurst { burst: capacity },
        Denied::Paused => LaneError::Paused,
        _ => LaneError::WouldWait { retry_after: None },
    }
}

/// The quota at `rate` units per `max`'s written period, with `max`'s burst.
fn quota_at(max: &Quota, rate: u64) -> Result<Quota, QuotaError> {
    let period = core::time::Duration::from_nanos(max.period_as_written_ns());
    Quota::new_u64(rate, period, max.burst())
}

impl Lanes<DefaultClock> {
    /// A limiter of `config` on the default clock.
    ///
    /// # Errors
    ///
    /// As [`Lanes::with_clock`].
    pub fn new(config: LanesConfig) -> Result<Self, LanesConfigError> {
        Lanes::with_clock(config, DefaultClock::new())
    }
}

impl<C: Clock> Lanes<C> {
    /// A limiter of `config` reading time from `clock`: a fresh budget (full), no waiter.
    /// With auto-tuning it starts at half the quota's rate.
    ///
    /// # Errors
    ///
    /// [`LanesConfigError`] for a configuration out of range (more than [`MAX_LANES`] lanes, a
    /// weight of 0 or above [`MAX_WEIGHT`], a piece of 0, a bad auto-tuning rule) and
    /// [`LanesConfigError::Quota`] for a quota a [`Budget`] refuses.
    ///
    /// [`MAX_LANES`]: super::MAX_LANES
    /// [`MAX_WEIGHT`]: super::MAX_WEIGHT
    pub fn with_clock(config: LanesConfig, clock: C) -> Result<Self, LanesConfigError> {
        config.check()?;
        let now = clock.now();
        let (quota, tuner) = Self::start(&config, now)?;
        let budget = Budget::with_config(&BudgetConfig::new(quota).mode(config.mode), clock)?;
        let lanes = config.lanes();
        let tune_at = tuner.map_or(u64::MAX, |t| t.due());
        Ok(Lanes {
            budget: CachePadded::new(budget),
            waiting: CachePadded::new(AtomicU64::new(0)),
            inner: Mutex::new(Inner {
                schedule: Schedule::new(config.get_weights(), config.piece()),
                timer: None,
                next: None,
                config,
                tuner,
            }),
            counters: Counters::new(lanes),
            tune_at: CachePadded::new(AtomicU64::new(tune_at)),
            lanes,
        })
    }

    /// The quota to start `config` with at `now`, and its tuner.
    fn start(config: &LanesConfig, now: Nanos) -> Result<(Quota, Option<Tuner>), LanesConfigError> {
        Ok(match config.get_auto_tune() {
            None => (config.quota, None),
            Some(rule) => {
                let max = config.quota.count_as_written();
                let rate = (max / 2).clamp(rule.floor(max), max);
                (quota_at(&config.quota, rate)?, Some(Tuner::new(*rule, now)))
            }
        })
    }

    /// The number of lanes.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// The configuration in force (with auto-tuning, its quota is the maximum; the rate in
    /// force is [`Lanes::quota`]).
    pub fn config(&self) -> LanesConfig {
        lock(&self.inner).config.clone()
    }

    /// The quota in force (the tuned one, with auto-tuning).
    pub fn quota(&self) -> Quota {
        self.budget.config().quota
    }

    /// The budget's state now: units a request could take at once, and the time until full.
    pub fn snapshot(&self) -> Snapshot {
        self.budget.snapshot()
    }

    /// The budget's state at `now` (ns of the clock).
    pub fn snapshot_at(&self, now: Nanos) -> Snapshot {
        self.budget.snapshot_at(now)
    }

    /// The clock's reading, ns.
    pub fn now(&self) -> Nanos {
        self.budget.now()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        self.budget.clock()
    }

    /// What `lane` did so far (`None` for a lane the limiter does not have).
    pub fn counts(&self, lane: Lane) -> Option<LaneCounts> {
        (lane.index() < self.lanes).then(|| self.counters.counts(lane.index()))
    }

    /// `lane`'s index, if the limiter has it.
    #[inline]
    pub(crate) fn index(&self, lane: Lane) -> Result<usize, LaneError> {
        if lane.index() < self.lanes {
            Ok(lane.index())
        } else {
            Err(LaneError::NoSuchLane {
                lane,
                lanes: self.lanes,
            })
        }
    }

    /// Whether no request that goes before a request of `lane` waits.
    #[inline(always)]
    fn clear(&self, lane: usize) -> bool {
        // Relaxed: see `fast`.
        self.waiting.load(Ordering::Relaxed) & blockers(lane) == 0
    }

    /// The fast path: `transition` on the budget word, in the one compare-and-swap loop,
    /// unless a request that goes before `lane` waits (then [`LaneError::WouldWait`]).
    ///
    /// # Orderings
    ///
    /// The word is loaded (relaxed) by `cas::apply` before `transition` runs; the acquire
    /// fence keeps the flags' load after it, so a successful compare-and-swap decided on a
    /// word that was in place from before the flags' load to the CAS. The flags' load is
    /// relaxed: its partner is the relaxed store in [`Lanes::settle`], made with the queue's
    /// lock held. A grant that read a clear flag while a waiter was joining is ordered
    /// before that waiter: the waiter's serve decided on the word before this grant or
    /// failed its own CAS and decided again after it, and a piece that does not fit before
    /// a grant does not fit after it, so what it decided still holds (its timer may only be
    /// early, and is served again).
    #[inline(always)]
    fn fast<T, E>(
        &self,
        lane: usize,
        transition: impl Fn(&mut u64) -> Result<T, Option<E>>,
    ) -> Result<T, Option<E>> {
        self.budget.update(
            #[inline(always)]
            move |word| {
                // Acquire fence: keeps the flags' load after the word's (see "Orderings").
                fence(Ordering::Acquire);
                if !self.clear(lane) {
                    return Err(None);
                }
                transition(word)
            },
        )
    }

    /// Take `n` units for `lane` now if they fit at once and nobody who goes first waits,
    /// all or nothing. See [`Lanes::try_acquire_at`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::try_acquire_at`].
    #[inline]
    pub fn try_acquire(&self, lane: Lane, n: u32) -> Result<(), LaneError> {
        self.try_acquire_at(lane, n, self.now())
    }

    /// Take `n` units for `lane` at `now` (ns) if they fit and no request that goes first
    /// waits (for the top lane: no top-lane request; for the others: no request at all),
    /// all or nothing, never waiting: one compare-and-swap on the budget word. `n = 0`
    /// succeeds.
    ///
    /// # Errors
    ///
    /// [`LaneError::WouldWait`] (with the exact wait when only the budget is in the way),
    /// [`LaneError::ExceedsBurst`] for `n` above the burst, [`LaneError::Paused`],
    /// [`LaneError::NoSuchLane`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Lane, LaneError, Lanes, LanesConfig};
    /// use limitcore::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let lanes = Lanes::with_clock(LanesConfig::new("1000/s burst 10".parse()?), ManualClock::new())?;
    /// lanes.try_acquire_at(Lane::LOW, 10, 0)?;
    /// let err = lanes.try_acquire_at(Lane::USER, 2, 0).unwrap_err();
    /// assert_eq!(err, LaneError::WouldWait { retry_after: Some(Duration::from_millis(2)) });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn try_acquire_at(&self, lane: Lane, n: u32, now: Nanos) -> Result<(), LaneError> {
        let l = self.index(lane)?;
        if n == 0 {
            return Ok(());
        }
        self.tune_if_due(now);
        let rule = self.budget.rule();
        // The budget's refusal (or `None`: held back by a waiting lane) leaves the loop
        // packed in two words (`decision::Packed`: in registers), and becomes a lane's
        // error out of the decision's line.
        let taken = self.fast(
            l,
            #[inline(always)]
            move |word| {
                rule.take(word, now, n)
                    .map(drop)
                    .map_err(|denied| Some(denied.pack()))
            },
        );
        match taken {
            Ok(()) => {
                self.counters.fast_grant(l, n);
                Ok(())
            }
            Err(refused) => Err(lane_refusal(refused)),
        }
    }

    /// Take up to `n` units for `lane` now, never waiting. See [`Lanes::take_up_to_at`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::take_up_to_at`].
    pub fn take_up_to(&self, lane: Lane, n: u32) -> Result<u32, LaneError> {
        self.take_up_to_at(lane, n, self.now())
    }

    /// Take as many of `n` units for `lane` as fit at `now`, exactly (RocksDB's and TiKV's
    /// partial grant, `min(available, n)`), unless a request that goes first waits (then
    /// none); never waiting. Returns how many.
    ///
    /// # Errors
    ///
    /// [`LaneError::NoSuchLane`]; nothing else (a refusal is 0 units).
    pub fn take_up_to_at(&self, lane: Lane, n: u32, now: Nanos) -> Result<u32, LaneError> {
        let l = self.index(lane)?;
        self.tune_if_due(now);
        let taken = self.take_fast(l, n, now);
        if taken > 0 {
            self.counters.fast_grant(l, taken);
        }
        Ok(taken)
    }

    /// The fast path's partial take (0 when held back or nothing fits).
    pub(super) fn take_fast(&self, lane: usize, n: u32, now: Nanos) -> u32 {
        if n == 0 || !self.clear(lane) {
            return 0;
        }
        let rule = self.budget.rule();
        self.fast(
            lane,
            #[inline(always)]
            move |word| match rule.take_up_to(word, now, n) {
                (0, _) => Err(None::<()>),
                (taken, _) => Ok(taken),
            },
        )
        .unwrap_or(0)
    }

    /// Apply `config` from now on. See [`Lanes::reconfigure_at`].
    ///
    /// # Errors
    ///
    /// As [`Lanes::reconfigure_at`].
    pub fn reconfigure(&self, config: &LanesConfig) -> Result<(), LanesConfigError> {
        self.reconfigure_at(config, self.now())
    }

    /// Apply `config` at `now` (ns): a new rate, burst and mode for the budget (its backlog
    /// kept in units and re-timed at the new rate, as [`Budget::reconfigure`]), new weights
    /// and piece size for the queue (tags kept). Every waiting request is decided again at
    /// once under the new configuration: pieces that fit now are granted, and the waiter
    /// that serves the queue next is woken with the new time. With auto-tuning, the tuned
    /// rate starts again at half the new maximum.
    ///
    /// # Errors
    ///
    /// [`LanesConfigError::LaneCount`] for another number of lanes, and as [`Lanes::with_clock`];
    /// then nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Lane, Lanes, LanesConfig};
    /// use limitcore::clock::ManualClock;
    ///
    /// let config = LanesConfig::new("1000/s burst 100".parse()?);
    /// let lanes = Lanes::with_clock(config.clone(), ManualClock::new())?;
    /// lanes.try_acquire_at(Lane::LOW, 100, 0)?;
    /// // Twice as fast: the 100 charged now drain in 50 ms, not 100.
    /// lanes.reconfigure_at(&config.quota("2000/s burst 100".parse()?), 0)?;
    /// assert_eq!(lanes.snapshot_at(0).full_after.as_millis(), 50);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure_at(&self, config: &LanesConfig, now: Nanos) -> Result<(), LanesConfigError> {
        config.check()?;
        if config.lanes() != self.lanes {
            return Err(LanesConfigError::LaneCount {
                lanes: self.lanes,
                asked: config.lanes(),
            });
        }
        let mut wakes = WakeList::new();
        {
            let mut inner = lock(&self.inner);
            let (quota, tuner) = Self::start(config, now)?;
            self.budget
                .reconfigure_at(&BudgetConfig::new(quota).mode(config.mode), now)?;
            inner.schedule.set(config.get_weights(), config.piece());
            inner.config = config.clone();
            inner.tuner = tuner;
            // Relaxed: a hint for the fast path, read and written under the lock otherwise.
            self.tune_at
                .store(tuner.map_or(u64::MAX, |t| t.due()), Ordering::Relaxed);
            inner.timer = None;
            self.serve(&mut inner, now, None, &mut wakes);
        }
        wakes.wake_all();
        Ok(())
    }

    /// Change the weights alone (see [`Lanes::reconfigure`]).
    ///
    /// # Errors
    ///
    /// As [`Lanes::reconfigure`].
    pub fn set_weights(&self, weights: &[u32]) -> Result<(), LanesConfigError> {
        self.reconfigure(&self.config().weights(weights))
    }

    /// Retune if auto-tuning is due at `now`.
    #[inline(always)]
    pub(super) fn tune_if_due(&self, now: Nanos) {
        // Relaxed: a hint; the tuning itself is decided under the lock.
        if self.tune_at.load(Ordering::Relaxed) <= now {
            self.retune(now);
        }
    }

    /// Retune at `now` under the lock ([`AutoTune`](super::AutoTune)), if still due.
    #[cold]
    #[inline(never)]
    fn retune(&self, now: Nanos) {
        let mut wakes = WakeList::new();
        {
            let mut inner = lock(&self.inner);
            let Some(mut tuner) = inner.tuner else {
                return;
            };
            if tuner.due() > now {
                return;
            }
            let max = inner.config.quota;
            let rate = self.budget.config().quota.count_as_written();
            let next = tuner.retune(rate, max.count_as_written(), now);
            inner.tuner = Some(tuner);
            // Relaxed: as in `reconfigure_at`.
            self.tune_at.store(tuner.due(), Ordering::Relaxed);
            if next != rate {
                if let Ok(quota) = quota_at(&max, next) {
                    let config = BudgetConfig::new(quota).mode(inner.config.mode);
                    if self.budget.reconfigure_at(&config, now).is_ok() {
                        inner.timer = None;
                        self.serve(&mut inner, now, None, &mut wakes);
                    }
                }
            }
        }
        wakes.wake_all();
    }
}
