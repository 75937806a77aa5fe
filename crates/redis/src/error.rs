//! [`Error`]: why a call to Redis gave no decision.

use std::fmt;
use std::time::Duration;

/// Why a call to Redis gave no decision.
///
/// # Examples
///
/// ```
/// use limitcore_redis::Error;
/// use std::time::Duration;
///
/// let e = Error::Timeout(Duration::from_millis(20));
/// assert!(e.to_string().contains("20ms"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The client or the server reported an error (connection refused or lost, a cluster
    /// error, a script error).
    Redis(redis::RedisError),
    /// No answer within the deadline ([`RedisConfig::deadline`](crate::RedisConfig::deadline)).
    Timeout(Duration),
    /// The circuit breaker is open: Redis was not asked.
    CircuitOpen,
    /// A script answered something this crate does not understand.
    Reply(String),
    /// The quota (or tenant) cannot be represented on Redis.
    Quota(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Redis(e) => write!(f, "redis: {e}"),
            Error::Timeout(d) => write!(f, "redis did not answer within {d:?}"),
            Error::CircuitOpen => write!(f, "redis circuit breaker open: not asked"),
            Error::Reply(why) => write!(f, "unexpected reply: {why}"),
            Error::Quota(why) => write!(f, "quota not representable on redis: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}
