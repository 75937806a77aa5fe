//! What a [`Lanes`](super::Lanes) limiter is configured with ([`LanesConfig`]), the lanes a
//! request is tagged with ([`Lane`]), and what can be wrong with either ([`LanesConfigError`],
//! [`LaneError`]).

use super::tune::AutoTune;
use crate::budget::Mode;
use crate::quota::{Quota, QuotaError};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

/// The most lanes one limiter has: 16 (the top lane and 15 weighted ones).
pub const MAX_LANES: usize = 16;

/// The largest weight of a lane: 2^20 (so that the weights' sum stays below 2^24).
pub const MAX_WEIGHT: u32 = 1 << 20;

/// The largest piece handed to a waiting request at once by default: 64 KiB.
pub const DEFAULT_MAX_PIECE: u32 = 64 << 10;

/// A lane: which share of the budget a request comes from. Lane 0 is the top lane, served
/// strictly first; lanes `1..` share what it leaves by their weights.
///
/// The constants name RocksDB's four priorities (`Env::IO_USER`, `IO_HIGH`, `IO_MID`,
/// `IO_LOW`), the default layout ([`LanesConfig::new`]).
///
/// # Examples
///
/// ```
/// use limitcore::Lane;
///
/// assert_eq!(Lane::USER, Lane::TOP);
/// assert_eq!(Lane::LOW.index(), 3);
/// assert!(Lane::new(2) == Lane::MID && Lane::MID.is_top() == false);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane(u8);

impl Lane {
    /// The top lane, served strictly first.
    pub const TOP: Lane = Lane(0);
    /// RocksDB's `IO_USER`: the top lane (user reads and writes).
    pub const USER: Lane = Lane(0);
    /// RocksDB's `IO_HIGH` (flushes).
    pub const HIGH: Lane = Lane(1);
    /// RocksDB's `IO_MID`.
    pub const MID: Lane = Lane(2);
    /// RocksDB's `IO_LOW` (compactions, backups).
    pub const LOW: Lane = Lane(3);

    /// Lane number `index` (0 is the top lane). Whether a limiter has it is checked when a
    /// request uses it ([`LaneError::NoSuchLane`]).
    pub const fn new(index: u8) -> Lane {
        Lane(index)
    }

    /// The lane's number.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is the top lane.
    pub const fn is_top(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lane {}", self.0)
    }
}

/// A [`Lanes`](super::Lanes) limiter's configuration: the budget's rate and burst (in bytes,
/// or any unit), its [`Mode`], the weights of the lanes below the top one, the largest piece
/// a waiting request is granted at once, and an optional [`AutoTune`].
///
/// # Examples
///
/// ```
/// use limitcore::{Lane, LanesConfig};
///
/// // RocksDB's four priorities at 64 MiB/s: USER strictly first, then HIGH, MID and LOW
/// // weighted 90 : 9 : 1 (the shares RocksDB's `fairness = 10` coin flips give them under
/// // saturation, in expectation).
/// let config = LanesConfig::new("64MiB/s burst 1MiB".parse()?);
/// assert_eq!(config.lanes(), 4);
/// assert_eq!(config.weight(Lane::HIGH), Some(90));
/// assert_eq!(config.piece(), 64 << 10); // a sixteenth of the burst, at most 64 KiB
/// // Two lanes below the top one, weighted 3 : 1, granted in pieces of 16 KiB.
/// let config = config.weights(&[3, 1]).with_piece(16 << 10);
/// assert_eq!((config.lanes(), config.weight(Lane::new(2))), (3, Some(1)));
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanesConfig {
    /// The budget's rate and burst.
    pub quota: Quota,
    /// Enabled, disabled (everything granted, nothing charged) or paused (nothing granted).
    pub mode: Mode,
    weights: Vec<u32>,
    piece: Option<u32>,
    auto_tune: Option<AutoTune>,
}

impl LanesConfig {
    /// `quota` in RocksDB's layout: four lanes ([`Lane::USER`] on top; [`Lane::HIGH`],
    /// [`Lane::MID`], [`Lane::LOW`] weighted 90 : 9 : 1), enabled, pieces of a sixteenth of
    /// the burst (at most 64 KiB), no auto-tuning.
    pub fn new(quota: Quota) -> Self {
        LanesConfig {
            quota,
            mode: Mode::Enabled,
            weights: alloc::vec![90, 9, 1],
            piece: None,
            auto_tune: None,
        }
    }

    /// The same with these weights for lanes `1..=weights.len()` (so `weights.len() + 1`
    /// lanes; an empty slice leaves the top lane alone). Checked when a limiter takes the
    /// configuration.
    #[must_use]
    pub fn weights(mut self, weights: &[u32]) -> Self {
        self.weights = weights.to_vec();
        self
    }

    /// The same with `quota`.
    #[must_use]
    pub fn quota(self, quota: Quota) -> Self {
        LanesConfig { quota, ..self }
    }

    /// The same in `mode`.
    #[must_use]
    pub fn mode(self, mode: Mode) -> Self {
        LanesConfig { mode, ..self }
    }

    /// The same with waiting requests granted in pieces of at most `piece` units (capped at
    /// the burst when used; 0 is refused by the limiter).
    #[must_use]
    pub fn with_piece(self, piece: u32) -> Self {
        LanesConfig {
            piece: Some(piece),
            ..self
        }
    }

    /// The same with auto-tuning: the quota's rate is the maximum, the limiter starts at
    /// half of it and retunes by `tune`'s rule ([`AutoTune`]).
    #[must_use]
    pub fn auto_tune(self, tune: AutoTune) -> Self {
        LanesConfig {
            auto_tune: Some(tune),
            ..self
        }
    }

    /// The number of lanes: the top one and one per weight.
    pub fn lanes(&self) -> usize {
        self.weights.len() + 1
    }

    /// The weight of `lane` (`None` for the top lane, which has none, and for a lane the
    /// configuration does not have).
    pub fn weight(&self, lane: Lane) -> Option<u32> {
        lane.index()
            .checked_sub(1)
            .and_then(|i| self.weights.get(i).copied())
    }

    /// The weights of lanes `1..`.
    pub fn get_weights(&self) -> &[u32] {
        &self.weights
    }

    /// The most units a waiting request is granted at once: as set, else a sixteenth of the
    /// burst (at least 1, at most [`DEFAULT_MAX_PIECE`]); never more than the burst.
    pub fn piece(&self) -> u32 {
        let burst = self.quota.burst();
        self.piece
            .unwrap_or_else(|| (burst / 16).clamp(1, DEFAULT_MAX_PIECE))
            .min(burst)
    }

    /// The auto-tuning rule, if any.
    pub fn get_auto_tune(&self) -> Option<&AutoTune> {
        self.auto_tune.as_ref()
    }

    /// Check everything but the quota (which the budget checks).
    pub(crate) fn check(&self) -> Result<(), LanesConfigError> {
        if self.lanes() > MAX_LANES {
            return Err(LanesConfigError::TooManyLanes {
                lanes: self.lanes(),
            });
        }
        if let Some(i) = self.weights.iter().position(|&w| w == 0 || w > MAX_WEIGHT) {
            return Err(LanesConfigError::Weight {
                lane: Lane(i as u8 + 1),
                weight: self.weights[i],
            });
        }
        if self.piece == Some(0) {
            return Err(LanesConfigError::ZeroPiece);
        }
        if let Some(tune) = &self.auto_tune {
            tune.check()?;
        }
        Ok(())
    }
}

/// A configuration a [`Lanes`](super::Lanes) limiter refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LanesConfigError {
    /// The budget refuses the quota.
    Quota(QuotaError),
    /// More than [`MAX_LANES`] lanes.
    TooManyLanes {
        /// The lanes asked for.
        lanes: usize,
    },
    /// A weight of 0 or above [`MAX_WEIGHT`].
    Weight {
        /// The lane.
        lane: Lane,
        /// Its weight.
        weight: u32,
    },
    /// A piece of 0 units.
    ZeroPiece,
    /// A reconfiguration with another number of lanes than the limiter has.
    LaneCount {
        /// The limiter's lanes.
        lanes: usize,
        /// The configuration's.
        asked: usize,
    },
    /// An auto-tuning period of zero, or a floor above the maximum.
    AutoTune,
}

impl From<QuotaError> for LanesConfigError {
    fn from(e: QuotaError) -> Self {
        LanesConfigError::Quota(e)
    }
}

impl fmt::Display for LanesConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LanesConfigError::Quota(e) => write!(f, "{e}"),
            LanesConfigError::TooManyLanes { lanes } => {
                write!(f, "{lanes} lanes: at most {MAX_LANES}")
            }
            LanesConfigError::Weight { lane, weight } => {
                write!(f, "{lane} has weight {weight}: 1 to {MAX_WEIGHT}")
            }
            LanesConfigError::ZeroPiece => f.write_str("a piece of 0 units grants nothing"),
            LanesConfigError::LaneCount { lanes, asked } => write!(
                f,
                "the limiter has {lanes} lanes; a reconfiguration cannot make them {asked}"
            ),
            LanesConfigError::AutoTune => {
                f.write_str("auto-tuning needs a non-zero period and a divisor of at least 1")
            }
        }
    }
}

impl std::error::Error for LanesConfigError {}

/// Why a request of a [`Lanes`](super::Lanes) limiter was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaneError {
    /// A request that does not wait would have to: its units do not fit now
    /// (`retry_after`: when they would, if nobody else came first) or requests that go
    /// before it are waiting (`retry_after: None`).
    WouldWait {
        /// When the units would fit with nobody ahead, if known.
        retry_after: Option<Duration>,
    },
    /// A request that does not wait asked for more than the burst at once.
    ExceedsBurst {
        /// The burst.
        burst: u32,
    },
    /// The budget is paused ([`Mode::Paused`]).
    Paused,
    /// The limiter has no such lane.
    NoSuchLane {
        /// The lane asked for.
        lane: Lane,
        /// The limiter's number of lanes.
        lanes: usize,
    },
    /// The deadline passed before the request was granted in full. The `granted` units it
    /// had been given were passed on to the next waiting request of its lane (those that no
    /// request of the lane was waiting for stay charged: see [`Lanes`](super::Lanes)'s
    /// "Cancellation").
    TimedOut {
        /// Units granted before the deadline.
        granted: u32,
    },
}

impl fmt::Display for LaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaneError::WouldWait {
                retry_after: Some(d),
            } => write!(f, "would wait {d:?}"),
            LaneError::WouldWait { retry_after: None } => {
                f.write_str("would wait behind requests that go first")
            }
            LaneError::ExceedsBurst { burst } => write!(f, "more than the burst of {burst}"),
            LaneError::Paused => f.write_str("the budget is paused"),
            LaneError::NoSuchLane { lane, lanes } => {
                write!(f, "{lane} does not exist: the limiter has {lanes} lanes")
            }
            LaneError::TimedOut { granted } => {
                write!(f, "timed out with {granted} units granted")
            }
        }
    }
}

impl std::error::Error for LaneError {}
