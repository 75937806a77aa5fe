//! [`Outcome`](crate::Outcome): what the rate-limit layer did with a request, in the response's extensions.

use std::fmt;
use std::time::Duration;

/// What the layer did with a request, put into the response's extensions for logging and
/// metrics (as nginx's `$limit_req_status`: `PASSED`, `DELAYED`, `REJECTED`,
/// `DELAYED_DRY_RUN`, `REJECTED_DRY_RUN`).
///
/// # Examples
///
/// ```
/// use limitcore_tower::Outcome;
/// use std::time::Duration;
///
/// let o = Outcome::Rejected { retry_after: Some(Duration::from_millis(200)) };
/// assert!(o.is_refused());
/// assert_eq!(o.as_str(), "REJECTED");
/// assert!(!Outcome::DryRunRejected { retry_after: None }.is_refused());
/// assert!(Outcome::LimiterError { admitted: false }.is_refused());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// Admitted at once.
    Passed,
    /// Admitted after waiting `wait` for its slot (delay mode).
    Delayed {
        /// How long the request was held before the inner service was called.
        wait: Duration,
    },
    /// Refused: over the limit. `retry_after` is the exact wait after which the same
    /// request would be admitted (`None`: never within the limiter's clock, and the
    /// response carries no `Retry-After`).
    Rejected {
        /// The exact wait (the `Retry-After` field carries it rounded up to seconds).
        retry_after: Option<Duration>,
    },
    /// Refused: the request's cost ([`Builder::cost`](crate::Builder::cost)) is more than the key's limit can ever
    /// admit at once (its capacity, the quota's burst); no wait helps, so the answer is
    /// 413 Content Too Large by default ([`Builder::too_large_status`](crate::Builder::too_large_status)) with no
    /// `Retry-After`.
    TooLarge {
        /// The request's cost, in permits.
        cost: u32,
        /// The most one request may cost, in permits.
        capacity: u32,
    },
    /// Refused: the request had no usable key and the layer's [`MissingKey`](crate::MissingKey) answer is a
    /// refusal.
    MissingKey,
    /// Dry run: would have waited `wait`; passed at once (its slot is taken all the same).
    DryRunDelayed {
        /// The wait the request would have had.
        wait: Duration,
    },
    /// Dry run: would have been refused; passed (and charged nothing, as a refusal).
    DryRunRejected {
        /// The wait a refusal would have reported (`None`: none would help, as for
        /// [`Outcome::TooLarge`](crate::Outcome::TooLarge)).
        retry_after: Option<Duration>,
    },
    /// No decision: the limiter failed ([`AsyncKeyedRateLimiter`](limitcore::AsyncKeyedRateLimiter)'s
    /// `Err`, a remote limiter's server down or slow); the layer answered by its
    /// [`OnLimiterError`](crate::OnLimiterError) policy: passed (`admitted: true`), or refused
    /// with its status and no `Retry-After` (`admitted: false`). A dry run passes it.
    LimiterError {
        /// Whether the request was passed to the inner service.
        admitted: bool,
    },
}

impl Outcome {
    /// Whether the layer answered the request itself instead of the inner service.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Outcome::Rejected { .. }
                | Outcome::TooLarge { .. }
                | Outcome::MissingKey
                | Outcome::LimiterError { admitted: false }
        )
    }

    /// nginx's name for it (`$limit_req_status`); `TOO_LARGE` for [`Outcome::TooLarge`](crate::Outcome::TooLarge),
    /// `MISSING_KEY` for [`Outcome::MissingKey`](crate::Outcome::MissingKey) and `LIMITER_ERROR` for
    /// [`Outcome::LimiterError`](crate::Outcome::LimiterError), which nginx does not have.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Passed => "PASSED",
            Outcome::Delayed { .. } => "DELAYED",
            Outcome::Rejected { .. } => "REJECTED",
            Outcome::TooLarge { .. } => "TOO_LARGE",
            Outcome::MissingKey => "MISSING_KEY",
            Outcome::DryRunDelayed { .. } => "DELAYED_DRY_RUN",
            Outcome::DryRunRejected { .. } => "REJECTED_DRY_RUN",
            Outcome::LimiterError { .. } => "LIMITER_ERROR",
        }
    }

    /// The outcome's dry-run form (a dry run reports what it would have done).
    pub(crate) fn dry(self) -> Outcome {
        match self {
            Outcome::Delayed { wait } => Outcome::DryRunDelayed { wait },
            Outcome::Rejected { retry_after } => Outcome::DryRunRejected { retry_after },
            Outcome::TooLarge { .. } => Outcome::DryRunRejected { retry_after: None },
            Outcome::LimiterError { .. } => Outcome::LimiterError { admitted: true },
            other => other,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
