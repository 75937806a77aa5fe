//! The response fields: `Retry-After` (RFC 9110 §10.2.3), `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers, the syntax of drafts -10 and -11), the legacy
//! `X-RateLimit-*` fields, and the `application/problem+json` body (RFC 9457).

use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use limitcore::{Quota, Snapshot};
use std::fmt;
use std::time::Duration;

/// When the layer writes `RateLimit-Policy` and `RateLimit`
/// (draft-ietf-httpapi-ratelimit-headers).
///
/// # Examples
///
/// ```
/// use limitcore_tower::RateLimitHeaders;
/// assert_eq!(RateLimitHeaders::default(), RateLimitHeaders::OnRefusal);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateLimitHeaders {
    /// Never (`Retry-After` is still sent on refusals).
    Off,
    /// On refusals only (the default).
    #[default]
    OnRefusal,
    /// On every response the layer decided on: refusals, passes, delays, dry-run passes.
    Always,
}

/// A policy name that cannot be written as a structured-field String (RFC 9651 §3.3.3:
/// printable ASCII, `%x20-7E`), or is empty.
///
/// # Examples
///
/// ```
/// use limitcore::Quota;
/// use limitcore_tower::{GlobalKey, RateLimitLayer};
///
/// let limiter = limitcore::Global::new(limitcore::Gcra::new(Quota::per_second(5)?)?);
/// let err = RateLimitLayer::builder(limiter, GlobalKey).policy_name("café").build().unwrap_err();
/// assert!(err.to_string().contains("café"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPolicyName(pub String);

impl fmt::Display for InvalidPolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid policy name {:?}: it must be non-empty printable ASCII (a structured-field String)",
            self.0
        )
    }
}

impl std::error::Error for InvalidPolicyName {}

/// `name` as a structured-field String (quoted, `"` and `\` escaped), and as a JSON string.
pub(crate) fn quote_policy(name: &str) -> Result<(String, String), InvalidPolicyName> {
    if name.is_empty() || !name.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(InvalidPolicyName(name.to_owned()));
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    // Printable ASCII needs no JSON escape but these two.
    Ok((quoted.clone(), quoted))
}

/// `d` in whole seconds, rounded **up**: the delay-seconds of `Retry-After` (RFC 9110
/// §10.2.3) and of the draft's `t`, so that a client that waits that long is not early.
/// Saturates at `u64::MAX`.
///
/// # Examples
///
/// ```
/// use limitcore_tower::delay_seconds;
/// use std::time::Duration;
///
/// assert_eq!(delay_seconds(Duration::from_millis(1)), 1); // never 0 for a real wait
/// assert_eq!(delay_seconds(Duration::from_secs(2)), 2);
/// assert_eq!(delay_seconds(Duration::from_millis(2001)), 3);
/// assert_eq!(delay_seconds(Duration::ZERO), 0);
/// ```
pub fn delay_seconds(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// `RateLimit-Policy`'s `w`: the quota's period in whole seconds, rounded up, at least 1
/// (the draft's window is a non-zero Integer of seconds; a sub-second or fractional period
/// is advertised as the next whole second, which understates the rate: a client that keeps
/// it is never refused for it).
pub(crate) fn window_seconds(quota: &Quota) -> u64 {
    delay_seconds(quota.period()).max(1)
}

static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The fields a response gets, built once per layer.
#[derive(Debug, Clone)]
pub(crate) struct Fields {
    /// `"name"`, ready for a structured field.
    pub(crate) policy_sf: String,
    /// `"name"`, ready for JSON.
    pub(crate) policy_json: String,
    pub(crate) legacy: bool,
    pub(crate) problem: bool,
}

fn value(s: String) -> HeaderValue {
    // Digits, ASCII punctuation and a printable-ASCII policy name: always a valid value.
    HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn number(n: u64) -> HeaderValue {
    HeaderValue::from(n)
}

/// Adds `fields` to a response's `headers`: `RateLimit-Policy` and `RateLimit` are appended
/// (each is a List, so a response that passed several layers, one per route and one for
/// the whole server, lists every policy), the others replace what is there.
pub(crate) fn merge(headers: &mut HeaderMap, fields: HeaderMap) {
    let mut last = None;
    for (name, value) in fields {
        let name = match name {
            Some(name) => {
                last = Some(name.clone());
                name
            }
            None => match &last {
                Some(name) => name.clone(),
                None => continue,
            },
        };
        if name == RATELIMIT || name == RATELIMIT_POLICY {
            headers.append(name, value);
        } else {
            headers.insert(name, value);
        }
    }
}

impl Fields {
    /// Writes the rate-limit state fields (`RateLimit-Policy`, `RateLimit`, and the legacy
    /// ones if enabled) for `quota` and `state`.
    pub(crate) fn write_state(&self, headers: &mut HeaderMap, quota: &Quota, state: &Snapshot) {
        let reset = delay_seconds(state.full_after);
        headers.append(
            RATELIMIT_POLICY.clone(),
            value(format!(
                "{};q={};w={}",
                self.policy_sf,
                quota.count(),
                window_seconds(quota)
            )),
        );
        headers.append(
            RATELIMIT.clone(),
            value(format!(
                "{};r={};t={}",
                self.policy_sf, state.remaining, reset
            )),
        );
        if self.legacy {
            headers.insert(X_RATELIMIT_LIMIT.clone(), number(quota.count().into()));
            headers.insert(
                X_RATELIMIT_REMAINING.clone(),
                number(state.remaining.into()),
            );
            headers.insert(X_RATELIMIT_RESET.clone(), number(reset));
        }
    }

    /// The head and body of a refusal: `Retry-After` (when waiting helps), the state
    /// fields for the key's quota and the decision's state when given (the layer gives them
    /// unless [`RateLimitHeaders::Off`]), and the body.
    pub(crate) fn refusal(
        &self,
        headers: &mut HeaderMap,
        status: http::StatusCode,
        retry_after: Option<Duration>,
        state: Option<(&Quota, &Snapshot)>,
    ) -> bytes::Bytes {
        if let Some(wait) = retry_after {
            headers.insert(RETRY_AFTER, number(delay_seconds(wait)));
        }
        if let Some((quota, state)) = state {
            self.write_state(headers, quota, state);
        }
        if self.problem {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            );
            let detail = match retry_after {
                Some(wait) => format!("retry after {} s", delay_seconds(wait)),
                None => "the request exceeds the limit's capacity".to_owned(),
            };
            format!(
                concat!(
                    "{{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",",
                    "\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",",
                    "\"status\":{},\"detail\":\"{}\",\"violated-policies\":[{}]}}"
                ),
                status.as_u16(),
                detail,
                self.policy_json
            )
            .into()
        } else {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            format!("{}\n", status.canonical_reason().unwrap_or("Rate limited")).into()
        }
    }
}
