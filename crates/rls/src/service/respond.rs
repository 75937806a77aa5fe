//! A request's [`Response`] ([`respond`]) from its plan's targets and the backend's
//! outcomes: each descriptor's status and counters, shadow and quota modes, the overall
//! code, the rate-limit headers, the refusal's body and the dynamic metadata.

use super::options::{HeaderNames, Options};
use super::plan::{Limited, Target};
use crate::backend::{Op, Outcome};
use crate::protocol::{Code, CurrentLimit, Request, Response, Status};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// What the statuses add up to beyond themselves.
#[derive(Default)]
struct Verdict {
    /// A descriptor refused the request.
    over: bool,
    /// A matched rule is in quota mode.
    quota_enabled: bool,
    /// The descriptors a quota-mode rule refused.
    quota_violations: Vec<usize>,
    /// The `metadata` of each matched rule that has one, by descriptor.
    metadata: Vec<(usize, Value)>,
}

/// The response to `request`, whose descriptors were matched to `targets` and whose items
/// the backend decided as `outcomes`.
pub(crate) fn respond(
    options: &Options,
    request: &Request,
    targets: &[Target<'_>],
    outcomes: &[Outcome],
) -> Response {
    let mut verdict = Verdict::default();
    let statuses: Vec<Status> = targets
        .iter()
        .enumerate()
        .map(|(i, target)| status(options, i, target, outcomes, &mut verdict))
        .collect();
    let mut headers = match &options.headers {
        Some(names) => rate_limit_headers(names, &statuses),
        None => Vec::new(),
    };
    let mut raw_body = Vec::new();
    if verdict.over {
        if let Some((body, content_type)) = &options.over_limit_body {
            raw_body = body.clone();
            headers.push(("content-type".into(), content_type.clone()));
        }
    }
    Response {
        overall_code: if verdict.over {
            Code::OverLimit
        } else {
            Code::Ok
        },
        statuses,
        response_headers_to_add: headers,
        raw_body,
        dynamic_metadata: dynamic_metadata(options, request, verdict),
    }
}

/// Descriptor `i`'s status, its decision counted and added to `verdict`.
fn status(
    options: &Options,
    i: usize,
    target: &Target<'_>,
    outcomes: &[Outcome],
    verdict: &mut Verdict,
) -> Status {
    match target {
        Target::Open { unlimited } => Status {
            code: Code::Ok,
            current_limit: None,
            limit_remaining: if *unlimited { u32::MAX } else { 0 },
            duration_until_reset: None,
        },
        Target::Limited(limited) => limited_status(options, i, limited, outcomes, verdict),
    }
}

/// The status of descriptor `i`, matched to a rule with a limit.
fn limited_status(
    options: &Options,
    i: usize,
    target: &Limited<'_>,
    outcomes: &[Outcome],
    verdict: &mut Verdict,
) -> Status {
    let Limited {
        rule, limit, op, ..
    } = target;
    let outcome = match (target.item, op) {
        (Some(j), _) => outcomes[j],
        // A zero limit, decided here: it refuses a take and reads empty otherwise.
        (None, Op::Take(_)) => Outcome::refused(0, limit.unit.period()),
        (None, _) => Outcome::admitted(0, Duration::ZERO),
    };
    let shadow = rule.shadow_mode || options.shadow_mode;
    if let Op::Take(n) = op {
        let (rpu, remaining) = (limit.requests_per_unit, outcome.remaining);
        target
            .counters
            .record(*n, rpu, remaining, outcome.admitted, shadow);
    }
    verdict.quota_enabled |= rule.quota_mode;
    let refused = !outcome.admitted;
    if refused && rule.quota_mode {
        verdict.quota_violations.push(i);
    }
    let code = if refused && !shadow && !rule.quota_mode {
        verdict.over = true;
        Code::OverLimit
    } else {
        Code::Ok
    };
    if let Some(m) = &rule.metadata {
        verdict.metadata.push((i, m.clone()));
    }
    Status {
        code,
        current_limit: Some(CurrentLimit {
            name: rule.name.clone().unwrap_or_default(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
        }),
        limit_remaining: outcome.remaining,
        duration_until_reset: outcome.reset,
    }
}

/// The IETF draft's headers of the most constrained limited descriptor (the fewest
/// permits left), if any: the limit and its window, the permits left, the seconds until
/// reset rounded up.
fn rate_limit_headers(names: &HeaderNames, statuses: &[Status]) -> Vec<(String, String)> {
    let tightest = statuses
        .iter()
        .filter_map(|s| Some((s, s.current_limit.as_ref()?)))
        .min_by_key(|(s, _)| s.limit_remaining);
    let Some((s, l)) = tightest else {
        return Vec::new();
    };
    let reset = s.duration_until_reset.unwrap_or_default();
    let secs = reset.as_secs() + u64::from(reset.subsec_nanos() > 0);
    let rpu = l.requests_per_unit;
    vec![
        (
            names.limit.clone(),
            format!("{rpu}, {rpu};w={}", l.unit.seconds()),
        ),
        (names.remaining.clone(), s.limit_remaining.to_string()),
        (names.reset.clone(), secs.to_string()),
    ]
}

/// The dynamic metadata, if any: envoyproxy/ratelimit's (the domain and descriptors) when
/// asked for, quota mode's violations, the matched rules' `metadata`.
fn dynamic_metadata(
    options: &Options,
    request: &Request,
    verdict: Verdict,
) -> Option<Map<String, Value>> {
    if !options.dynamic_metadata && !verdict.quota_enabled && verdict.metadata.is_empty() {
        return None;
    }
    let mut m = Map::new();
    if options.dynamic_metadata {
        request_metadata(request, &mut m);
    }
    if verdict.quota_enabled {
        m.insert("quotaModeEnabled".into(), Value::Bool(true));
        m.insert(
            "quotaModeViolations".into(),
            json!(verdict.quota_violations),
        );
    }
    if !verdict.metadata.is_empty() {
        let rules: Map<String, Value> = verdict
            .metadata
            .into_iter()
            .map(|(i, v)| (i.to_string(), v))
            .collect();
        m.insert("metadata".into(), Value::Object(rules));
    }
    Some(m)
}

/// envoyproxy/ratelimit's metadata of `request` into `m`: its domain, its descriptors'
/// entries (`key=value`) and hits, its own hits.
fn request_metadata(request: &Request, m: &mut Map<String, Value>) {
    m.insert("domain".into(), Value::from(request.domain.clone()));
    let descriptors: Vec<Value> = request
        .descriptors
        .iter()
        .map(|d| {
            let entries: Vec<String> = d.entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut o = Map::new();
            o.insert("entries".into(), Value::from(entries));
            if let Some(h) = d.hits_addend {
                o.insert("hitsAddend".into(), Value::from(h));
            }
            Value::Object(o)
        })
        .collect();
    m.insert("descriptors".into(), Value::from(descriptors));
    if request.hits_addend > 0 {
        m.insert("hitsAddend".into(), Value::from(request.hits_addend));
    }
}
