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
