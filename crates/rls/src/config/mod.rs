//! The configuration: envoyproxy/ratelimit's YAML format, verbatim, read from a directory
//! of files, plus two keys of this service (`algorithm`, `burst`).
//!
//! # Format (envoyproxy/ratelimit's)
//!
//! ```yaml
//! domain: <non-empty string>
//! algorithm: <optional: this file's default algorithm>   # limitcore
//! burst: <optional: this file's default burst>           # limitcore
//! descriptors:
//!   - key: <non-empty string>
//!     value: <optional string; `*` anywhere is a wildcard>
//!     rate_limit:                 # optional
//!       unit: second | minute | hour | day | week | month | year
//!       requests_per_unit: <u32>
//!       unlimited: <bool>         # no unit then
//!       name: <optional string>
//!       replaces: [{name: <string>}, ...]
//!       algorithm: fixed-window | gcra | token-bucket | sliding-window | sliding-log  # limitcore
//!       burst: <u32>                                                                  # limitcore
//!     shadow_mode: <bool>
//!     quota_mode: <bool>
//!     detailed_metric: <bool>
//!     value_to_metric: <bool>
//!     share_threshold: <bool>
//!     metadata: <any mapping, echoed in the response's dynamic metadata>
//!     descriptors: [ ... nested ... ]
//! ```
//!
//! # Over xDS
//!
//! The same configuration comes as envoyproxy/ratelimit's `RateLimitConfig` resources
//! ([`crate::pb`]) from a management server: [`Config::from_resources`] makes each into the
//! document a file with its content would be and reads it with the same code, so the model,
//! the validation and the messages are the files' (an error names the resource and the
//! field path, `descriptors[0].rate_limit.unit`, where a file's names the file and line).
//!
//! Units are read case-insensitively, as envoyproxy/ratelimit reads them; their lengths
//! are its own: a month is 30 days and a year 365 (windows aligned to the Unix epoch).
//! Source: envoyproxy/ratelimit's README, "Configuration"; Envoy's RLS v3
//! `RateLimitResponse.RateLimit.Unit` for the unit numbers (`WEEK = 7`).

mod error;
mod parse;
mod resource;
mod status;
pub(crate) mod yaml;

pub use error::ConfigError;
pub use status::{ConfigStatus, SourceKind, StatusReport};

use limitcore::{Algorithm, Quota, QuotaError, WithRule};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The configuration's maps, looked up on every request (the domain, each level's keys and
/// values): aHash under random keys (the core's `KeyHasher` primitive) rather than std's
/// SipHash, which took a tenth of the service's own instructions per decision (callgrind,
/// BENCHMARKS.md "limitcore-rls"). Their keys come from the configuration only; a request's
/// values are looked up, never inserted, so no request can flood them.
pub(crate) type Map<K, V> = HashMap<K, V, ahash::RandomState>;

/// A unit of time of a limit: Envoy RLS v3's `RateLimitResponse.RateLimit.Unit` (without
/// `UNKNOWN`), with envoyproxy/ratelimit's lengths.
///
/// # Examples
///
/// ```
/// use limitcore_rls::Unit;
///
/// assert_eq!("Week".parse::<Unit>(), Ok(Unit::Week));
/// assert_eq!(Unit::Week.seconds(), 7 * 86_400);
/// assert_eq!(Unit::Week.proto(), 7);
/// assert_eq!(Unit::from_proto(5), Some(Unit::Month));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// One second (proto 1).
    Second,
    /// 60 s (proto 2).
    Minute,
    /// 3600 s (proto 3).
    Hour,
    /// 86 400 s (proto 4).
    Day,
    /// 7 days (proto 7).
    Week,
    /// 30 days, as envoyproxy/ratelimit counts a month (proto 5).
    Month,
    /// 365 days, as envoyproxy/ratelimit counts a year (proto 6).
    Year,
}

impl Unit {
    /// The unit's length in seconds.
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The unit's length.
    pub const fn period(self) -> Duration {
        Duration::from_secs(self.seconds())
    }

    /// The proto enum number (`RateLimitResponse.RateLimit.Unit`, and `envoy.type.v3.RateLimitUnit`).
    pub const fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit of a proto enum number; `None` for `UNKNOWN` (0) and numbers no unit has.
    pub const fn from_proto(n: i32) -> Option<Unit> {
        Some(match n {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// The proto name (`"SECOND"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }
}

impl std::str::FromStr for Unit {
    type Err = String;

    /// A unit by name, any ASCII case (`"minute"`, `"MINUTE"`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "YEAR" => Unit::Year,
            _ => return Err(format!("invalid rate limit unit {s:?}")),
        })
    }
}

/// A limit: `requests_per_unit` per `unit`, decided by `algorithm` with an optional
/// `burst` (the GCRA family's; the window algorithms have none).
///
/// # Examples
///
/// ```
/// use limitcore::Algorithm;
/// use limitcore_rls::{Limit, Unit};
///
/// let limit = Limit::new(10, Unit::Minute, Algorithm::FixedWindow, None);
/// assert_eq!(limit.quota()?.count(), 10);
/// assert!(Limit::new(10, Unit::Minute, Algorithm::FixedWindow, Some(3)).quota().is_err());
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    /// Permits per unit; 0 refuses every request that asks for any.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
    /// The algorithm that decides it.
    pub algorithm: Algorithm,
    /// The burst (GCRA, token bucket); `None`: the count per unit.
    pub burst: Option<u32>,
}

impl Limit {
    /// A limit from its parts.
    pub const fn new(
        requests_per_unit: u32,
        unit: Unit,
        algorithm: Algorithm,
        burst: Option<u32>,
    ) -> Self {
        Limit {
            requests_per_unit,
            unit,
            algorithm,
            burst,
        }
    }

    /// The core's quota for this limit (`requests_per_unit` per unit, the burst if set).
    ///
    /// # Errors
    ///
    /// The core's [`QuotaError`]: a zero count (decided without a limiter: see
    /// [`Limit::requests_per_unit`]), a burst on a window algorithm, a burst of 0.
    pub fn quota(&self) -> Result<Quota, QuotaError> {
        let quota = Quota::new(self.requests_per_unit, self.unit.period())?;
        let quota = match self.burst {
            Some(burst) => quota.with_burst(burst)?,
            None => quota,
        };
        // The algorithm's own checks (a window has no burst).
        struct Check(Quota);
        impl WithRule for Check {
            type Output = Result<(), QuotaError>;
            fn run<R: limitcore::rules::Rule>(self) -> Self::Output {
                R::new(&self.0).map(|_| ())
            }
        }
        self.algorithm.with_rule(Check(quota))?;
        Ok(quota)
    }
}

/// The service-wide settings the configuration is read under.
///
/// # Examples
///
/// ```
/// use limitcore::Algorithm;
/// use limitcore_rls::Settings;
///
/// let s = Settings::default();
/// assert_eq!(s.algorithm, Algorithm::FixedWindow);
/// assert!(!s.merge_domains);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Merge the descriptors of a domain defined in several files
    /// (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`); otherwise a second definition of a
    /// domain is an error.
    pub merge_domains: bool,
    /// The algorithm of rules that name none (nor their file): `fixed-window` by default,
    /// envoyproxy/ratelimit's, aligned to the Unix epoch.
    pub algorithm: Algorithm,
    /// The burst of `gcra` and `token-bucket` rules that set none (nor their file); `None`:
    /// the count per unit. The window algorithms have no burst: a default one does not
    /// apply to them, and a rule's own is refused.
    pub burst: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            merge_domains: false,
            algorithm: Algorithm::FixedWindow,
            burst: None,
        }
    }
}

/// A rate-limit rule: the `rate_limit` of one descriptor node, with the node's flags.
///
/// Its identity across reloads is its domain and [`Rule::path`]: a reload that keeps the
/// path keeps the rule's counters (a changed limit carries each key's usage over).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The domain.
    pub domain: String,
    /// The composite key of the node, envoyproxy/ratelimit's: `key_value` (or `key` for a
    /// node without a value) for each level, joined with `.` (the domain not included).
    pub path: String,
    /// The rule's `name`, if any (reported in `current_limit.name`, used by `replaces`).
    pub name: Option<String>,
    /// The limit; `None` for `unlimited: true` (a whitelisting node).
    pub limit: Option<Limit>,
    /// Names of the rules this one replaces when both match one request.
    pub replaces: Vec<String>,
    /// Decide and count, never refuse.
    pub shadow_mode: bool,
    /// Refusals are reported in the dynamic metadata, and the request is admitted
    /// (envoyproxy/ratelimit's quota mode).
    pub quota_mode: bool,
    /// Metrics labelled by the request's full descriptor (its runtime values).
    pub detailed_metric: bool,
    /// The `metadata` mapping of the node, as JSON, if any.
    pub metadata: Option<serde_json::Value>,
    /// Where the rule is defined: its file, or the name of the xDS resource.
    pub file: PathBuf,
    /// The line of its `rate_limit` key (0 for an xDS resource, which has no lines).
    pub line: usize,
}

impl Rule {
    /// The label metrics use for this rule: its name, else its path.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.path)
    }
}

/// A descriptor node of the configuration tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The entry key it matches.
    pub key: String,
    /// The value it matches: `None` matches any value (the key's default), a value with
    /// `*` is a wildcard.
    pub value: Option<String>,
    /// The rule of this node, if it has a `rate_limit`.
    pub rule: Option<Arc<Rule>>,
    /// `value_to_metric`: the metric label uses the request's value at this level.
    pub value_to_metric: bool,
    /// `share_threshold`: every value this wildcard matches shares one counter.
    pub share_threshold: bool,
    /// The nodes below.
    pub children: Descriptors,
}

/// The nodes of one level: exact values, wildcards in load order, and each key's default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Descriptors {
    /// `key` → `value` → node.
    pub(crate) exact: Map<String, Map<String, Arc<Node>>>,
    /// Wildcard nodes, in load order.
    pub(crate) wildcards: Vec<Arc<Node>>,
    /// `key` → the node with no value.
    pub(crate) defaults: Map<String, Arc<Node>>,
}

impl Descriptors {
    /// Every node of the level.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.exact
            .values()
            .flat_map(|m| m.values())
            .chain(&self.wildcards)
            .chain(self.defaults.values())
    }

    /// Whether the level has no node.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcards.is_empty() && self.defaults.is_empty()
    }
}

/// A domain's configuration tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Domain {
    /// The domain name.
    pub name: String,
    /// Its top level.
    pub descriptors: Descriptors,
}

/// A whole configuration: the domains of a directory's files.
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Config, Settings};
///
/// let config = Config::from_str_named(
///     "api.yaml",
///     "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
///     &Settings::default(),
/// )?;
/// assert_eq!(config.rules().len(), 1);
/// assert_eq!(config.rules()[0].path, "user");
/// # Ok::<(), limitcore_rls::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    pub(crate) domains: Map<String, Domain>,
    pub(crate) rules: Vec<Arc<Rule>>,
}

impl Config {
    /// The configuration of one file's text, `name` standing for its path in errors.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for the first problem found.
    pub fn from_str_named(
        name: &str,
        text: &str,
        settings: &Settings,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        parse::add_file(&mut config, Path::new(name), text, settings)?;
        Ok(config)
    }

    /// The configuration of several files' texts, in order (`(path, text)`), as a
    /// directory of them loads.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for the first problem found.
    pub fn from_files(
        files: &[(PathBuf, String)],
        settings: &Settings,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (path, text) in files {
            parse::add_file(&mut config, path, text, settings)?;
        }
        Ok(config)
    }

    /// The configuration of every `*.yaml` / `*.yml` file in `dir` (not recursive; hidden
    /// files, such as a Kubernetes ConfigMap's `..data`, skipped; symbolic links followed),
    /// in the order of their names.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a directory or file that cannot be read, or the first problem
    /// found in a file.
    pub fn load_dir(dir: &Path, settings: &Settings) -> Result<Config, ConfigError> {
        Config::from_files(&read_dir(dir)?, settings)
    }

    /// The domain named `name`.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Every rule, in load order.
    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }
}

/// The configuration files of `dir`, `(path, text)`, in the order of their names.
///
/// # Errors
///
/// [`ConfigError`] for a directory or file that cannot be read.
pub(crate) fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let io = |path: &Path, e: std::io::Error| {
        ConfigError::at(path, 0, None, format!("cannot read: {e}"))
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        if name.starts_with('.') || !yaml || !path.is_file() {
            continue;
        }
        paths.push(path);
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
            Ok((path, text))
        })
        .collect()
}
