//! envoyproxy/ratelimit's `/json` mapping: a `RateLimitRequest` and its response in
//! protobuf's JSON form (field names in `lowerCamelCase` or as in the proto, enums by
//! name or number, 64-bit integers as numbers or strings, durations as `"1.5s"`); and the
//! configuration's status, which `GET /json` answers ([`status`]).

use crate::config::{StatusReport, Unit};
use crate::protocol::{Code, Descriptor, LimitOverride, Request, Response};
use serde_json::{json, Map, Value};

/// The field `camel` (or `snake`) of `o`.
fn field<'a>(o: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a Value> {
    o.get(camel).or_else(|| o.get(snake))
}

/// An unsigned integer given as a number or a string.
fn uint(v: &Value, what: &str) -> Result<u64, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("{what} must be a non-negative integer")),
        Value::String(s) => s
            .parse()
            .map_err(|_| format!("{what} must be a non-negative integer")),
        _ => Err(format!("{what} must be a non-negative integer")),
    }
}

/// A JSON `RateLimitRequest` as a [`Request`].
///
/// # Errors
///
/// A message naming the field that is malformed.
///
/// # Examples
///
/// ```
/// use limitcore_rls::json::request;
///
/// let r = request(br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":"0"}]}"#)?;
/// assert_eq!(r.descriptors[0].hits_addend, Some(0));
/// # Ok::<(), String>(())
/// ```
pub fn request(body: &[u8]) -> Result<Request, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let o = v.as_object().ok_or("the request must be a JSON object")?;
    let domain = match o.get("domain") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("domain must be a string".into()),
    };
    let hits_addend = match field(o, "hitsAddend", "hits_addend") {
        None => 0,
        Some(v) => {
            u32::try_from(uint(v, "hitsAddend")?).map_err(|_| "hitsAddend must fit 32 bits")?
        }
    };
    let mut descriptors = Vec::new();
    if let Some(list) = o.get("descriptors") {
        let list = list.as_array().ok_or("descriptors must be a list")?;
        for (i, d) in list.iter().enumerate() {
            let d = d
                .as_object()
                .ok_or_else(|| format!("descriptor {i} must be an object"))?;
            let mut entries = Vec::new();
            if let Some(es) = d.get("entries") {
                for e in es
                    .as_array()
                    .ok_or_else(|| format!("descriptor {i}: entries must be a list"))?
                {
                    let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                    let value = e.get("value").and_then(Value::as_str).unwrap_or_default();
                    entries.push((key.to_owned(), value.to_owned()));
                }
            }
            let limit = match d.get("limit") {
                None | Some(Value::Null) => None,
                Some(l) => {
                    let l = l
                        .as_object()
                        .ok_or_else(|| format!("descriptor {i}: limit must be an object"))?;
                    let rpu = match field(l, "requestsPerUnit", "requests_per_unit") {
                        Some(v) => u32::try_from(uint(v, "requestsPerUnit")?)
                            .map_err(|_| "requestsPerUnit must fit 32 bits")?,
                        None => 0,
                    };
                    let unit = match l.get("unit") {
                        Some(Value::String(s)) => s
                            .parse::<Unit>()
                            .map(Unit::proto)
                            .map_err(|e| format!("descriptor {i}: {e}"))?,
                        Some(Value::Number(n)) => {
                            n.as_i64().and_then(|n| i32::try_from(n).ok()).unwrap_or(0)
                        }
                        _ => 0,
                    };
                    Some(LimitOverride {
                        requests_per_unit: rpu,
                        unit,
                    })
                }
            };
            let hits = match field(d, "hitsAddend", "hits_addend") {
                None | Some(Value::Null) => None,
                Some(v) => Some(uint(v, "hitsAddend")?),
            };
            let negative = match field(d, "isNegativeHits", "is_negative_hits") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(format!("descriptor {i}: isNegativeHits must be a boolean")),
            };
            descriptors.push(Descriptor {
                entries,
                limit,
                hits_addend: hits,
                is_negative_hits: negative,
            });
        }
    }
    Ok(Request {
        domain,
        descriptors,
        hits_addend,
    })
}

/// A code's proto name.
fn code(c: Code) -> &'static str {
    match c {
        Code::Ok => "OK",
        Code::OverLimit => "OVER_LIMIT",
    }
}

/// A [`Response`] in protobuf's JSON form (default values omitted, as protojson does).
///
/// # Examples
///
/// ```
/// use limitcore_rls::{json, Code, Response};
///
/// let r = Response { overall_code: Code::Ok, statuses: vec![], response_headers_to_add: vec![], raw_body: vec![], dynamic_metadata: None };
/// assert_eq!(json::response(&r)["overallCode"], "OK");
/// ```
pub fn response(r: &Response) -> Value {
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut o = Map::new();
            o.insert("code".into(), json!(code(s.code)));
            if let Some(l) = &s.current_limit {
                let mut limit = Map::new();
                if !l.name.is_empty() {
                    limit.insert("name".into(), json!(l.name));
                }
                limit.insert("requestsPerUnit".into(), json!(l.requests_per_unit));
                limit.insert("unit".into(), json!(l.unit.name()));
                o.insert("currentLimit".into(), Value::Object(limit));
            }
            if s.limit_remaining > 0 {
                o.insert("limitRemaining".into(), json!(s.limit_remaining));
            }
            if let Some(d) = s.duration_until_reset {
                let text = if d.subsec_nanos() == 0 {
                    format!("{}s", d.as_secs())
                } else {
                    format!("{}.{:09}s", d.as_secs(), d.subsec_nanos())
                };
                o.insert("durationUntilReset".into(), json!(text));
            }
            Value::Object(o)
        })
        .collect();
    let mut o = Map::new();
    o.insert("overallCode".into(), json!(code(r.overall_code)));
    o.insert("statuses".into(), Value::Array(statuses));
    if !r.response_headers_to_add.is_empty() {
        let headers: Vec<Value> = r
            .response_headers_to_add
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        o.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    if !r.raw_body.is_empty() {
        o.insert(
            "rawBody".into(),
            json!(String::from_utf8_lossy(&r.raw_body)),
        );
    }
    if let Some(m) = &r.dynamic_metadata {
        o.insert("dynamicMetadata".into(), Value::Object(m.clone()));
    }
    Value::Object(o)
}

/// The configuration's status as JSON, what `GET /json` answers: its `source` (`files`,
/// `xds`), `location` (the directory, the management server), the `version` in force
/// (absent before the first), whether the source is `connected` (and while it is not, why
/// it was lost: `disconnected`, such as a TLS handshake refused), the counts of versions
/// `accepted` and `rejected`, and the latest refusal while it stands (`refused`: its
/// `version` if known, and the `error`).
///
/// # Examples
///
/// ```
/// use limitcore_rls::config::{ConfigStatus, SourceKind};
/// use limitcore_rls::json;
///
/// let status = ConfigStatus::new(SourceKind::Xds, "http://127.0.0.1:18000");
/// status.accepted("7");
/// let v = json::status(&status.report());
/// assert_eq!((v["source"].as_str(), v["version"].as_str()), (Some("xds"), Some("7")));
/// ```
pub fn status(report: &StatusReport) -> Value {
    let mut o = Map::new();
    o.insert("source".into(), json!(report.source.name()));
    o.insert("location".into(), json!(report.location));
    if let Some(v) = &report.version {
        o.insert("version".into(), json!(v));
    }
    o.insert("connected".into(), json!(report.connected));
    if let Some(why) = &report.disconnected {
        o.insert("disconnected".into(), json!(why));
    }
    o.insert("accepted".into(), json!(report.accepted));
    o.insert("rejected".into(), json!(report.rejected));
    if let Some((version, error)) = &report.refused {
        let mut refused = Map::new();
        if let Some(v) = version {
            refused.insert("version".into(), json!(v));
        }
        refused.insert("error".into(), json!(error));
        o.insert("refused".into(), Value::Object(refused));
    }
    Value::Object(o)
}
