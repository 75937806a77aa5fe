//! [`ConfigError`]: why a configuration was refused, with the file, line and key.

use std::fmt;
use std::path::PathBuf;

/// Why a configuration file (or the set of them) was refused: the file, the line (1-based;
/// 0 when the error is about the file as a whole) and, where there is one, the YAML key the
/// error is about. A refused reload keeps the previous configuration in force
/// ([`Reloader`](crate::Reloader)).
///
/// The messages follow envoyproxy/ratelimit's validation (unknown key, non-string key, empty
/// domain, empty descriptor key, duplicate composite key, duplicate domain, bad unit,
/// `unlimited` with a unit, a rule replacing itself, an empty `replaces` entry) and add the
/// checks of this service's own keys (`algorithm`, `burst`).
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Config, Settings};
///
/// let err = Config::from_str_named("a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", &Settings::default())
///     .unwrap_err();
/// assert_eq!(err.line, 4);
/// assert_eq!(err.key.as_deref(), Some("unit"));
/// assert!(err.to_string().starts_with("a.yaml:4: unit: invalid rate limit unit"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file the error is in.
    pub file: PathBuf,
    /// The line, 1-based (0: the file as a whole, or no file).
    pub line: usize,
    /// The YAML key the error is about, if any.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at `line` of `file` about `key`.
    pub(crate) fn at(
        file: impl Into<PathBuf>,
        line: usize,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.into(),
            line,
            key: key.map(str::to_owned),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}
