//! The two error types of the concurrency limits: [`LimitError`] (a limit, a backlog or a
//! rule's parameter that cannot be used, refused when it is set) and [`AcquireError`] (why a
//! request got no permit).

use core::fmt;

/// A setting of a concurrency limit, a backlog or an adaptive rule that cannot be used.
/// Returned when the setting is made (a constructor, a `with_*` method, a resize), never
/// later, and never replaced by a silent clamp or a panic.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{LimitError, Permits, MAX_LIMIT};
///
/// assert_eq!(Permits::new(0).unwrap_err(), LimitError::ZeroLimit);
/// assert!(matches!(Permits::new(MAX_LIMIT + 1), Err(LimitError::LimitTooLarge { .. })));
/// assert_eq!(Permits::new(8)?.with_backlog(0).unwrap_err(), LimitError::ZeroBacklog);
/// # Ok::<(), LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LimitError {
    /// A limit of 0 where a limit must admit something (a [`Permits`](super::Permits), a
    /// keyed default, a rule's minimum).
    ZeroLimit,
    /// A limit above [`MAX_LIMIT`](super::MAX_LIMIT), the most the packed word holds.
    LimitTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit there is.
        max: u32,
    },
    /// A backlog of 0: a queue nobody may wait in. Leave the backlog unset to wait without a
    /// bound, or use `try_acquire` to never wait.
    ZeroBacklog,
    /// A rule's minimum limit above its maximum.
    MinAboveMax {
        /// The minimum limit.
        min: u32,
        /// The maximum limit.
        max: u32,
    },
    /// An adaptive rule's initial limit outside its minimum and maximum limits.
    InitialOutsideLimits {
        /// The initial limit.
        initial: u32,
        /// The minimum limit.
        min: u32,
        /// The maximum limit.
        max: u32,
    },
    /// A rule's or a partition's parameter outside the range it is defined on.
    Parameter {
        /// The parameter's name, as the rule's builder method spells it.
        name: &'static str,
        /// The value given.
        value: f64,
        /// The range it must be in, in words.
        expected: &'static str,
    },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::ZeroLimit => f.write_str("invalid concurrency limit: 0 admits nothing"),
            LimitError::LimitTooLarge { limit, max } => {
                write!(
                    f,
                    "invalid concurrency limit: {limit} is above the maximum, {max}"
                )
            }
            LimitError::ZeroBacklog => {
                f.write_str("invalid backlog: 0 (leave it unset for no bound, or never wait)")
            }
            LimitError::MinAboveMax { min, max } => {
                write!(
                    f,
                    "invalid limits: the minimum {min} is above the maximum {max}"
                )
            }
            LimitError::InitialOutsideLimits { initial, min, max } => write!(
                f,
                "invalid initial limit: {initial} is outside the rule's limits {min}..={max} \
                 (set the limits first, then the initial limit)"
            ),
            LimitError::Parameter {
                name,
                value,
                expected,
            } => write!(f, "invalid {name}: {value} (expected {expected})"),
        }
    }
}

impl std::error::Error for LimitError {}

/// Why a request got no permit. Nothing is held after an error: a refused or timed-out
/// request took nothing, and a cancelled one gave back what it was granted.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{AcquireError, Permits};
///
/// let permits = Permits::new(2)?;
/// let held = permits.try_acquire(2)?;
/// assert_eq!(permits.try_acquire(1).unwrap_err(), AcquireError::Full { limit: 2, in_flight: 2 });
/// assert_eq!(
///     permits.try_acquire(3).unwrap_err(),
///     AcquireError::ExceedsLimit { requested: 3, limit: 2 }
/// );
/// drop(held);
/// assert!(permits.try_acquire(1).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// No permit now: `in_flight` of `limit` are held (more than the limit only just after
    /// it shrank), or others are queued first (a request that does not wait never overtakes
    /// a queued one). Retry later, or wait.
    Full {
        /// The limit when the request was refused.
        limit: u32,
        /// Permits held when the request was refused.
        in_flight: u32,
    },
    /// More permits than the whole limit, so they could never be granted together while it
    /// stays (a queued waiter gets this too when the limit shrinks below its request).
    ExceedsLimit {
        /// Permits asked for.
        requested: u32,
        /// The limit when the request was refused.
        limit: u32,
    },
    /// The queue of waiters already holds `backlog` requests.
    BacklogFull {
        /// The most waiters the queue takes.
        backlog: u32,
    },
    /// The wait ended at its timeout with no permit granted.
    TimedOut,
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Full { limit, in_flight } => {
                write!(f, "no permit: {in_flight} of {limit} in flight")
            }
            AcquireError::ExceedsLimit { requested, limit } => {
                write!(
                    f,
                    "{requested} permits asked for, above the limit of {limit}"
                )
            }
            AcquireError::BacklogFull { backlog } => {
                write!(f, "no permit: the queue of {backlog} waiters is full")
            }
            AcquireError::TimedOut => f.write_str("no permit before the timeout"),
        }
    }
}

impl std::error::Error for AcquireError {}

/// A refusal inside the crate: the public error, or "this keyed state was retired" (the
/// keyed wrapper looks the key up again; see `KeyedPermits`).
/// Unreachable from outside the crate (the outcome type of the sealed `Queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(unreachable_pub)]
pub enum Refusal {
    Denied(AcquireError),
    Gone,
}

impl From<AcquireError> for Refusal {
    #[inline]
    fn from(e: AcquireError) -> Self {
        Refusal::Denied(e)
    }
}

impl Refusal {
    /// The public error. `Gone` never reaches a caller of an unkeyed limit (its word is
    /// never retired) and a keyed caller retries it before answering; if it ever did, "no
    /// permit now" is the honest answer.
    #[inline]
    pub(crate) fn into_error(self) -> AcquireError {
        match self {
            Refusal::Denied(e) => e,
            Refusal::Gone => AcquireError::Full {
                limit: 0,
                in_flight: 0,
            },
        }
    }
}
