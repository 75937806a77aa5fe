//! This crate's metrics through the `metrics` facade (feature `metrics`; the crate docs list
//! them). Every handle is registered once, when a [`Redis`](crate::Redis) handle or a limiter
//! is built, from the recorder in force then, and kept beside the state it counts: an event
//! costs an atomic add on a handle already held (with no recorder, a check of an empty
//! handle). Labels are the names the user gives (a limiter's key prefix, a policy), never a
//! key. Without the feature every type here is empty and every call does nothing.

use crate::error::Error;

/// `limitcore_redis_errors_total`'s `kind` values, in the order of [`ClientMetrics`]'
/// counters.
#[cfg(feature = "metrics")]
const ERROR_KINDS: [&str; 5] = ["connection", "server", "timeout", "circuit_open", "reply"];

/// The `kind` of a failed call (the index into [`ERROR_KINDS`]), or `None` for an error
/// that no call to Redis made ([`Error::Quota`]: the request was never sent).
#[cfg(feature = "metrics")]
fn kind(error: &Error) -> Option<usize> {
    Some(match error {
        Error::Redis(e)
            if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() =>
        {
            0
        }
        Error::Redis(e) if e.is_timeout() => 2,
        Error::Redis(_) => 1,
        Error::Timeout(_) => 2,
        Error::CircuitOpen => 3,
        Error::Reply(_) => 4,
        Error::Quota(_) => return None,
    })
}

/// A [`Redis`](crate::Redis) handle's handles: its failed calls.
pub(crate) struct ClientMetrics {
    /// `limitcore_redis_errors_total` by kind, in the order of [`ERROR_KINDS`].
    #[cfg(feature = "metrics")]
    errors: [metrics::Counter; 5],
}

impl ClientMetrics {
    /// The handles, from the recorder in force now.
    pub(crate) fn register() -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::describe_counter!(
                "limitcore_redis_errors_total",
                metrics::Unit::Count,
                "Calls of the limiters to Redis that failed (a decision, a lease fetch, a \
                 pipeline of decisions: one each), by kind."
            );
            let errors = ERROR_KINDS
                .map(|kind| metrics::counter!("limitcore_redis_errors_total", "kind" => kind));
            ClientMetrics { errors }
        }
        #[cfg(not(feature = "metrics"))]
        ClientMetrics {}
    }

    /// Counts one failed call.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn error(&self, error: &Error) {
        #[cfg(feature = "metrics")]
        if let Some(kind) = kind(error) {
            self.errors[kind].increment(1);
        }
    }
}

/// An outage policy's handle: the decisions (and forced charges) it made.
pub(crate) struct FallbackMetrics {
    /// `limitcore_redis_fallback_decisions_total{limit, policy}`.
    #[cfg(feature = "metrics")]
    decisions: metrics::Counter,
}

impl FallbackMetrics {
    /// The handle of the policy labelled `policy` on the limit named `limit`, from the
    /// recorder in force now.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn register(policy: &'static str, limit: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::describe_counter!(
                "limitcore_redis_fallback_decisions_total",
                metrics::Unit::Count,
                "Decisions and forced charges the outage policy made because Redis gave no \
                 answer, by limit (key prefix) and policy."
            );
            let decisions = metrics::counter!(
                "limitcore_redis_fallback_decisions_total",
                "limit" => limit.to_owned(),
                "policy" => policy,
            );
            FallbackMetrics { decisions }
        }
        #[cfg(not(feature = "metrics"))]
        FallbackMetrics {}
    }

    /// Counts one decision (or charge) of the policy.
    #[inline]
    pub(crate) fn record(&self) {
        #[cfg(feature = "metrics")]
        self.decisions.increment(1);
    }
}

/// A leased limiter's handles: its lease fetches and the permits they brought.
pub(crate) struct LeaseMetrics {
    /// `limitcore_lease_fetches_total{limit, outcome}`: granted, blocked, error.
    #[cfg(feature = "metrics")]
    fetches: [metrics::Counter; 3],
    /// `limitcore_lease_permits_total{limit}`.
    #[cfg(feature = "metrics")]
    permits: metrics::Counter,
}

impl LeaseMetrics {
    /// The handles of the leased limit named `limit`, from the recorder in force now.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn register(limit: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::describe_counter!(
                "limitcore_lease_fetches_total",
                metrics::Unit::Count,
                "Lease fetches from Redis, by limit (key prefix) and outcome: granted (cells \
                 leased), blocked (Redis refused: the key waits), error (no answer)."
            );
            metrics::describe_counter!(
                "limitcore_lease_permits_total",
                metrics::Unit::Count,
                "Permits (cells) leased from Redis by this node, by limit (key prefix)."
            );
            let fetches = ["granted", "blocked", "error"].map(|outcome| {
                metrics::counter!(
                    "limitcore_lease_fetches_total",
                    "limit" => limit.to_owned(),
                    "outcome" => outcome,
                )
            });
            let permits =
                metrics::counter!("limitcore_lease_permits_total", "limit" => limit.to_owned());
            LeaseMetrics { fetches, permits }
        }
        #[cfg(not(feature = "metrics"))]
        LeaseMetrics {}
    }

    /// Counts a fetch that leased `cells` cells.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn granted(&self, cells: u32) {
        #[cfg(feature = "metrics")]
        {
            self.fetches[0].increment(1);
            self.permits.increment(u64::from(cells));
        }
    }

    /// Counts a fetch Redis refused (the key is blocked until its wait).
    #[inline]
    pub(crate) fn blocked(&self) {
        #[cfg(feature = "metrics")]
        self.fetches[1].increment(1);
    }

    /// Counts a fetch that got no answer.
    #[inline]
    pub(crate) fn failed(&self) {
        #[cfg(feature = "metrics")]
        self.fetches[2].increment(1);
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    #[test]
    fn every_error_but_a_quota_has_a_kind() {
        let io =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(kind(&Error::Redis(io)), Some(0));
        assert_eq!(
            kind(&Error::Timeout(std::time::Duration::from_millis(5))),
            Some(2)
        );
        assert_eq!(kind(&Error::CircuitOpen), Some(3));
        assert_eq!(kind(&Error::Reply("x".into())), Some(4));
        assert_eq!(kind(&Error::Quota("x".into())), None);
    }
}
