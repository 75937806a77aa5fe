//! [`ConfigStatus`]: the configuration in force and where it comes from, written by the
//! source that applies configurations (the directory's reloader, the xDS subscription)
//! and read by what reports it (`GET /json`, `/metrics`).

use crate::metrics::ConfigCounters;
use std::fmt;
use std::sync::Mutex;

/// Where configurations come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A directory of envoyproxy/ratelimit YAML files, polled.
    Files,
    /// `RateLimitConfig` resources from an xDS management server (ADS, state of the world).
    Xds,
}

impl SourceKind {
    /// Its name in `/json` and in the metrics' `source` label: `files` or `xds`.
    pub const fn name(self) -> &'static str {
        match self {
            SourceKind::Files => "files",
            SourceKind::Xds => "xds",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A snapshot of a [`ConfigStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// Where configurations come from.
    pub source: SourceKind,
    /// The directory, or the management server's address.
    pub location: String,
    /// The version in force (the xDS `version_info`; for files a digest of their names
    /// and contents); `None` before the first configuration.
    pub version: Option<String>,
    /// The latest version refused and why, while no later version was accepted (the
    /// version in force is then an earlier one).
    pub refused: Option<(Option<String>, String)>,
    /// How many configurations were applied.
    pub accepted: u64,
    /// How many were refused.
    pub rejected: u64,
    /// Whether the source is reachable: an xDS stream is up (files: always).
    pub connected: bool,
    /// Why the source became unreachable, while it is (the latest failure: a connection
    /// refused, a TLS handshake failed, the stream ended).
    pub disconnected: Option<String>,
}

/// The configuration in force and where it comes from, shared between the source that
/// applies configurations and the faces that report it; each change is also recorded in
/// the metrics ([`metrics`](mod@crate::metrics)'s configuration series).
///
/// # Examples
///
/// ```
/// use limitcore_rls::config::{ConfigStatus, SourceKind};
///
/// let status = ConfigStatus::new(SourceKind::Xds, "http://127.0.0.1:18000");
/// status.accepted("1");
/// status.rejected(Some("2"), "edge: descriptors[0].key: descriptor has empty key");
/// let report = status.report();
/// assert_eq!(report.version.as_deref(), Some("1"));
/// assert_eq!((report.accepted, report.rejected), (1, 1));
/// assert!(report.refused.unwrap().1.contains("empty key"));
///
/// status.disconnected("cannot connect: connection refused");
/// assert!(!status.report().connected);
/// status.connected(true);
/// assert_eq!(status.report().disconnected, None);
/// ```
#[derive(Debug)]
pub struct ConfigStatus {
    report: Mutex<StatusReport>,
    counters: ConfigCounters,
}

impl ConfigStatus {
    /// The status of `source` at `location`, before any configuration (connected for
    /// files, not yet for xDS). Its metrics go to the recorder in force now.
    pub fn new(source: SourceKind, location: impl Into<String>) -> Self {
        let connected = source == SourceKind::Files;
        let counters = ConfigCounters::new(source.name());
        counters.connected(connected);
        ConfigStatus {
            report: Mutex::new(StatusReport {
                source,
                location: location.into(),
                version: None,
                refused: None,
                accepted: 0,
                rejected: 0,
                connected,
                disconnected: None,
            }),
            counters,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatusReport> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `version` was applied: it is in force now, and no refusal stands.
    pub fn accepted(&self, version: &str) {
        let mut report = self.lock();
        self.counters.accepted(report.version.as_deref(), version);
        report.version = Some(version.to_owned());
        report.refused = None;
        report.accepted += 1;
    }

    /// `version` (if known) was refused for `why`; the version in force stays.
    pub fn rejected(&self, version: Option<&str>, why: &str) {
        let mut report = self.lock();
        self.counters.rejected();
        report.refused = Some((version.map(str::to_owned), why.to_owned()));
        report.rejected += 1;
    }

    /// Whether the source is reachable now.
    pub fn connected(&self, up: bool) {
        let mut report = self.lock();
        if up {
            report.disconnected = None;
        }
        if report.connected != up {
            report.connected = up;
            self.counters.connected(up);
        }
    }

    /// The source is unreachable, for `why` (kept in the report until it is reachable
    /// again).
    pub fn disconnected(&self, why: &str) {
        self.connected(false);
        self.lock().disconnected = Some(why.to_owned());
    }

    /// A snapshot.
    pub fn report(&self) -> StatusReport {
        self.lock().clone()
    }
}
