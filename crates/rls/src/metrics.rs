//! The service's counters through the `metrics` facade: envoyproxy/ratelimit's, per domain
//! and rule.
//!
//! | series | labels | counts |
//! |---|---|---|
//! | `ratelimit_total_hits` | `domain`, `rule` | hits asked of the rule (a request's cost) |
//! | `ratelimit_over_limit` | `domain`, `rule` | hits refused |
//! | `ratelimit_near_limit` | `domain`, `rule` | admitted hits that left the rule above 80 % of its limit |
//! | `ratelimit_within_limit` | `domain`, `rule` | hits admitted |
//! | `ratelimit_shadow_mode` | `domain`, `rule` | hits a shadow rule would have refused |
//!
//! `rule` is the rule's `name`, else its composite key as configured (`key_value.key2`):
//! never a value from a request, so a flood of unique values adds no series — unless the
//! rule sets `detailed_metric` (the request's whole descriptor) or a level sets
//! `value_to_metric` (that level's value). Request-side limit overrides are labelled
//! `rule="override"`. The 0.8 near-limit ratio is envoyproxy/ratelimit's.
//!
//!
//! The configuration source has series of its own:
//!
//! | series | labels | what |
//! |---|---|---|
//! | `ratelimit_config_info` | `source`, `version` | 1 for the version in force, 0 for those before it |
//! | `ratelimit_config_updates_total` | `source`, `result` (`accepted`, `rejected`) | configurations applied, and refused |
//! | `ratelimit_config_connected` | `source` | 1 while the source is reachable (an xDS stream is up), else 0 |
//!
//! `source` is `files` or `xds`; `version` is the xDS `version_info`, or for files a
//! digest of their names and contents.

use metrics::Counter;

/// The counters of one label pair.
#[derive(Debug, Clone)]
pub(crate) struct RuleCounters {
    total: Counter,
    over: Counter,
    near: Counter,
    within: Counter,
    shadow: Counter,
}

/// envoyproxy/ratelimit's near-limit ratio.
const NEAR_RATIO: f64 = 0.8;

impl RuleCounters {
    /// The counters for `domain` and `rule`, from the recorder in force now.
    pub(crate) fn new(domain: &str, rule: &str) -> Self {
        let labels = [("domain", domain.to_owned()), ("rule", rule.to_owned())];
        RuleCounters {
            total: metrics::counter!("ratelimit_total_hits", &labels),
            over: metrics::counter!("ratelimit_over_limit", &labels),
            near: metrics::counter!("ratelimit_near_limit", &labels),
            within: metrics::counter!("ratelimit_within_limit", &labels),
            shadow: metrics::counter!("ratelimit_shadow_mode", &labels),
        }
    }

    /// Record a decision of `hits` against a limit of `limit` that left `remaining`.
    pub(crate) fn record(
        &self,
        hits: u32,
        limit: u32,
        remaining: u32,
        admitted: bool,
        shadow: bool,
    ) {
        let hits = u64::from(hits);
        self.total.increment(hits);
        if admitted {
            self.within.increment(hits);
            let used = u64::from(limit.saturating_sub(remaining));
            let threshold = (f64::from(limit) * NEAR_RATIO).floor() as u64;
            if used > threshold {
                self.near.increment(hits.min(used - threshold));
            }
        } else {
            self.over.increment(hits);
            if shadow {
                self.shadow.increment(hits);
            }
        }
    }
}

/// The configuration source's series (the module's second table): which version is in
/// force, how many versions were accepted and refused, whether the source is reachable.
#[derive(Debug, Clone)]
pub(crate) struct ConfigCounters {
    source: &'static str,
    accepted: Counter,
    rejected: Counter,
}

impl ConfigCounters {
    /// The series of `source`, from the recorder in force now.
    pub(crate) fn new(source: &'static str) -> Self {
        let accepted = [("source", source), ("result", "accepted")];
        let rejected = [("source", source), ("result", "rejected")];
        ConfigCounters {
            source,
            accepted: metrics::counter!("ratelimit_config_updates_total", &accepted),
            rejected: metrics::counter!("ratelimit_config_updates_total", &rejected),
        }
    }

    /// `version` is in force now, in place of `previous`.
    pub(crate) fn accepted(&self, previous: Option<&str>, version: &str) {
        self.accepted.increment(1);
        if let Some(previous) = previous.filter(|p| *p != version) {
            self.info(previous).set(0.0);
        }
        self.info(version).set(1.0);
    }

    /// A version was refused (the one in force stays).
    pub(crate) fn rejected(&self) {
        self.rejected.increment(1);
    }

    /// Whether the source is reachable (an xDS stream is up).
    pub(crate) fn connected(&self, up: bool) {
        let labels = [("source", self.source)];
        metrics::gauge!("ratelimit_config_connected", &labels).set(if up { 1.0 } else { 0.0 });
    }

    fn info(&self, version: &str) -> metrics::Gauge {
        let labels = [
            ("source", self.source.to_owned()),
            ("version", version.to_owned()),
        ];
        metrics::gauge!("ratelimit_config_info", &labels)
    }
}
