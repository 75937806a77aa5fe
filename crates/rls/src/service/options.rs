//! [`Options`]: how the service answers (the mode, what becomes of refused hits, shadow mode, the rate-limit headers, a
//! refusal's body, dynamic metadata, the bound on request-side limits).

use crate::backend::{Mode, RefusedHits};

/// The names of the IETF draft's rate-limit headers (draft-ietf-httpapi-ratelimit-headers),
/// envoyproxy/ratelimit's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// The limit: `RateLimit-Limit` (value `N, N;w=SECONDS`).
    pub limit: String,
    /// The permits left: `RateLimit-Remaining`.
    pub remaining: String,
    /// Seconds until reset, rounded up: `RateLimit-Reset`.
    pub reset: String,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

/// How the service answers.
///
/// # Examples
///
/// ```
/// use limitcore_rls::{HeaderNames, Mode, Options};
///
/// let options = Options { mode: Mode::ChargeEach, headers: Some(HeaderNames::default()), ..Options::default() };
/// assert_eq!(options.max_overrides, 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// All or nothing (default), or charge each descriptor.
    pub mode: Mode,
    /// What becomes of the hits of a descriptor that refuses a request: recorded on it
    /// past its limit (default: a charge after the response is never lost), or dropped.
    pub refused_hits: RefusedHits,
    /// Global shadow mode: decide and count, never refuse.
    pub shadow_mode: bool,
    /// Add the rate-limit headers of the most constrained descriptor to every response.
    pub headers: Option<HeaderNames>,
    /// A refusal's body and its content type.
    pub over_limit_body: Option<(Vec<u8>, String)>,
    /// Build envoyproxy/ratelimit's dynamic metadata (the domain and descriptors).
    pub dynamic_metadata: bool,
    /// The most distinct request-side limit overrides kept (each has its own counters).
    pub max_overrides: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::AllOrNothing,
            refused_hits: RefusedHits::Record,
            shadow_mode: false,
            headers: None,
            over_limit_body: None,
            dynamic_metadata: false,
            max_overrides: 1024,
        }
    }
}
