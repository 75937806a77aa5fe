//! [`Service`]: a `ShouldRateLimit` request in, its response out: validation, costs,
//! matching, `replaces`, the backend's decision, shadow and quota modes, the statuses and
//! what goes with them (rate-limit headers, the refusal body, dynamic metadata).
//!
//! The protocol is Envoy's RLS v3 (`envoy.service.ratelimit.v3.RateLimitService`); this
//! module works on plain types ([`Request`], [`Response`]) that the gRPC service and the
//! `/json` endpoint convert from and to.

use crate::backend::{Backend, Handle, Item, Mode, Op, Outcome};
use crate::config::{Config, Limit, Rule, Unit};
use crate::matching;
use crate::metrics::RuleCounters;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The most a descriptor or a request can ask for at once: Envoy caps `hits_addend` at
/// 10^9, and so does the service (a larger value counts as 10^9).
pub const MAX_HITS: u64 = 1_000_000_000;

/// A request-side limit (`RateLimitDescriptor.limit`): replaces the configured limit of
/// the descriptor, in a domain the configuration has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOverride {
    /// Permits per unit.
    pub requests_per_unit: u32,
    /// The proto unit number (`envoy.type.v3.RateLimitUnit`).
    pub unit: i32,
}

/// One descriptor of a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// The entries, `(key, value)`, in order.
    pub entries: Vec<(String, String)>,
    /// A request-side limit.
    pub limit: Option<LimitOverride>,
    /// This descriptor's own cost; present, it wins over the request's (0: a check that
    /// consumes nothing).
    pub hits_addend: Option<u64>,
    /// The cost is given back (a refund), never past an empty state.
    pub is_negative_hits: bool,
}

/// A `ShouldRateLimit` request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The domain; must not be empty.
    pub domain: String,
    /// The descriptors; at least one.
    pub descriptors: Vec<Descriptor>,
    /// The request's cost for descriptors without their own (0 counts 1).
    pub hits_addend: u32,
}

/// A descriptor's or the request's code (`RateLimitResponse.Code`; never `UNKNOWN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Within the limit (proto 1).
    Ok,
    /// Over the limit (proto 2).
    OverLimit,
}

/// `RateLimitResponse.RateLimit`: the limit a descriptor was decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// The rule's name (empty when it has none).
    pub name: String,
    /// Permits per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

/// `RateLimitResponse.DescriptorStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The descriptor's code.
    pub code: Code,
    /// The limit it was decided by (`None`: no rule, a whitelisting rule, or one replaced).
    pub current_limit: Option<CurrentLimit>,
    /// Permits left (`u32::MAX` for an unlimited rule, 0 without a rule).
    pub limit_remaining: u32,
    /// Admitted: the time until the limit is full again; refused: the time until this
    /// request would be admitted in full (for a request larger than the limit, which no wait
    /// admits, the time until the limit is full).
    pub duration_until_reset: Option<Duration>,
}

/// A `ShouldRateLimit` response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// `OVER_LIMIT` if any descriptor is (shadow and quota mode excepted), else `OK`.
    pub overall_code: Code,
    /// One per request descriptor, in order.
    pub statuses: Vec<Status>,
    /// Response headers for the client (`RateLimit-*`, the refusal's content type).
    pub response_headers_to_add: Vec<(String, String)>,
    /// The body of a refusal, if configured.
    pub raw_body: Vec<u8>,
    /// The dynamic metadata (a JSON object), if any.
    pub dynamic_metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Why a request got no decision: answered as a gRPC status, so the proxy applies its
/// `failure_mode_deny`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The request is malformed (gRPC `INVALID_ARGUMENT`): an empty domain or descriptor
    /// list, a descriptor without entries, an unknown unit in a limit override.
    InvalidArgument(String),
    /// The backend could not decide (gRPC `UNAVAILABLE`).
    Unavailable(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            RequestError::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for RequestError {}

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// All or nothing (default), or charge each descriptor.
    pub mode: Mode,
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
            shadow_mode: false,
            headers: None,
            over_limit_body: None,
            dynamic_metadata: false,
            max_overrides: 1024,
        }
    }
}

/// A configured rule's state in the backend and its counters.
#[derive(Debug, Clone)]
struct Slot {
    handle: Option<Handle>,
    counters: RuleCounters,
}

/// One configuration in force, with its rules' states.
#[derive(Debug)]
struct State {
    config: Config,
    /// By (domain, path).
    slots: HashMap<(String, String), Slot>,
}

/// Why a configuration could not be applied (a rule the backend cannot run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyError(pub String);

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ApplyError {}

/// The rate-limit service: a configuration, a backend and the answering options. The
/// crate's docs have an example.
#[derive(Debug)]
pub struct Service {
    backend: Backend,
    options: Options,
    state: RwLock<Arc<State>>,
    overrides: Mutex<HashMap<Limit, Slot>>,
    override_counters: RuleCounters,
}

/// A descriptor's match: its rule, counter key, metric label and the rule's state.
type Match = (Arc<Rule>, String, Option<String>, Slot);

/// What a descriptor was matched to.
enum Target {
    /// No rule, a whitelisting rule, or a replaced one.
    Open { unlimited: bool },
    /// A rule with a limit, and the index of its item (or `None` for a zero limit).
    Limited {
        rule: Arc<Rule>,
        limit: Limit,
        item: Option<usize>,
        op: Op,
        counters: RuleCounters,
    },
}

impl Service {
    /// A service on `backend` answering by `options`, with an empty configuration (every
    /// descriptor is answered `OK` until [`Service::apply`]).
    pub fn new(backend: Backend, options: Options) -> Self {
        Service {
            backend,
            options,
            state: RwLock::new(Arc::new(State {
                config: Config::default(),
                slots: HashMap::new(),
            })),
            overrides: Mutex::new(HashMap::new()),
            override_counters: RuleCounters::new("", "override"),
        }
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn current(&self) -> Arc<State> {
        match self.state.read() {
            Ok(s) => Arc::clone(&s),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Put `config` in force for the next request. A rule whose domain, path and limit are
    /// unchanged keeps its state; one whose limit changed carries each key's usage over (in
    /// process) or keeps its Redis keys (exact); a new rule starts fresh.
    ///
    /// # Errors
    ///
    /// [`ApplyError`] if the backend cannot run a rule (a sliding algorithm on Redis, a
    /// window algorithm leased, a rate Redis cannot represent); the configuration in force
    /// is kept then.
    pub fn apply(&self, config: Config) -> Result<(), ApplyError> {
        let old = self.current();
        let mut slots = HashMap::with_capacity(config.rules().len());
        for rule in config.rules() {
            let id = (rule.domain.clone(), rule.path.clone());
            let previous = old.slots.get(&id).and_then(|s| s.handle.as_ref());
            let handle = match rule.limit {
                Some(limit) if limit.requests_per_unit > 0 => Some(match previous {
                    Some(h) if Backend::keeps(h, &limit) => h.clone(),
                    _ => self
                        .backend
                        .handle(&format!("{} {}", rule.domain, rule.path), limit, previous)
                        .map_err(|e| {
                            ApplyError(format!("{}:{}: {e}", rule.file.display(), rule.line))
                        })?,
                }),
                _ => None,
            };
            let counters = RuleCounters::new(&rule.domain, rule.label());
            slots.insert(id, Slot { handle, counters });
        }
        let state = Arc::new(State { config, slots });
        match self.state.write() {
            Ok(mut s) => *s = state,
            Err(p) => *p.into_inner() = state,
        }
        Ok(())
    }

    /// The state of a request-side limit.
    fn override_slot(&self, limit: Limit) -> Result<Slot, RequestError> {
        let mut map = match self.overrides.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(slot) = map.get(&limit) {
            return Ok(slot.clone());
        }
        if map.len() >= self.options.max_overrides {
            return Err(RequestError::InvalidArgument(format!(
                "more than {} distinct limit overrides",
                self.options.max_overrides
            )));
        }
        let handle = self
            .backend
            .handle(
                &format!("override {}:{}", limit.unit.name(), limit.requests_per_unit),
                limit,
                None,
            )
            .map_err(|e| RequestError::InvalidArgument(e.to_string()))?;
        let slot = Slot {
            handle: Some(handle),
            counters: self.override_counters.clone(),
        };
        map.insert(limit, slot.clone());
        Ok(slot)
    }

    /// Decide `request`.
    ///
    /// # Errors
    ///
    /// [`RequestError::InvalidArgument`] for an empty domain or descriptor list, a
    /// descriptor without entries, or a limit override with an unknown unit;
    /// [`RequestError::Unavailable`] when the backend cannot decide.
    pub async fn should_rate_limit(&self, request: &Request) -> Result<Response, RequestError> {
        if request.domain.is_empty() {
            return Err(RequestError::InvalidArgument(
                "rate limit domain must not be empty".into(),
            ));
        }
        if request.descriptors.is_empty() {
            return Err(RequestError::InvalidArgument(
                "rate limit descriptor list must not be empty".into(),
            ));
        }
        if let Some(i) = request
            .descriptors
            .iter()
            .position(|d| d.entries.is_empty())
        {
            return Err(RequestError::InvalidArgument(format!(
                "rate limit descriptor {i} has no entries"
            )));
        }
        let state = self.current();
        let domain = state.config.domain(&request.domain);
        let request_hits = u64::from(request.hits_addend.max(1));

        // Match each descriptor.
        let mut matched: Vec<Option<Match>> = Vec::with_capacity(request.descriptors.len());
        for d in &request.descriptors {
            let Some(domain) = domain else {
                matched.push(None);
                continue;
            };
            if let Some(o) = d.limit {
                let unit = Unit::from_proto(o.unit).ok_or_else(|| {
                    RequestError::InvalidArgument(format!(
                        "limit override with unknown unit {}",
                        o.unit
                    ))
                })?;
                let limit = Limit::new(
                    o.requests_per_unit,
                    unit,
                    limitcore::Algorithm::FixedWindow,
                    None,
                );
                let rule = Arc::new(Rule {
                    domain: domain.name.clone(),
                    path: "override".into(),
                    name: None,
                    limit: Some(limit),
                    replaces: Vec::new(),
                    shadow_mode: false,
                    quota_mode: false,
                    detailed_metric: false,
                    metadata: None,
                    file: Default::default(),
                    line: 0,
                });
                let slot = if limit.requests_per_unit > 0 {
                    self.override_slot(limit)?
                } else {
                    Slot {
                        handle: None,
                        counters: self.override_counters.clone(),
                    }
                };
                let counter = d
                    .entries
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("|");
                matched.push(Some((rule, counter, None, slot)));
                continue;
            }
            matched.push(matching::find(domain, &d.entries).and_then(|m| {
                let slot = state
                    .slots
                    .get(&(m.rule.domain.clone(), m.rule.path.clone()))?
                    .clone();
                Some((m.rule, m.counter, m.metric, slot))
            }));
        }

        // `replaces`: a matched rule's listed names drop the other matched rules so named.
        let replaced: Vec<String> = matched
            .iter()
            .flatten()
            .flat_map(|(r, ..)| r.replaces.iter().cloned())
            .collect();

        // The items the backend decides.
        let mut items: Vec<Item> = Vec::new();
        let mut targets: Vec<Target> = Vec::with_capacity(matched.len());
        let mut zero_refusal = false;
        for (d, m) in request.descriptors.iter().zip(matched) {
            let Some((rule, counter, metric, slot)) = m else {
                targets.push(Target::Open { unlimited: false });
                continue;
            };
            if rule.name.as_ref().is_some_and(|n| replaced.contains(n)) {
                targets.push(Target::Open { unlimited: false });
                continue;
            }
            let Some(limit) = rule.limit else {
                targets.push(Target::Open { unlimited: true });
                continue;
            };
            let hits = d.hits_addend.unwrap_or(request_hits).min(MAX_HITS) as u32;
            let op = match (d.is_negative_hits, hits) {
                (_, 0) => Op::Check,
                (true, n) => Op::Refund(n),
                (false, n) => Op::Take(n),
            };
            let soft = rule.shadow_mode || rule.quota_mode || self.options.shadow_mode;
            let counters = match &metric {
                Some(label) => RuleCounters::new(&rule.domain, label),
                None => slot.counters.clone(),
            };
            let item = match (slot.handle, limit.requests_per_unit) {
                (Some(handle), n) if n > 0 => {
                    items.push(Item {
                        op,
                        key: counter,
                        soft,
                        handle,
                    });
                    Some(items.len() - 1)
                }
                _ => {
                    if matches!(op, Op::Take(_)) && !soft {
                        zero_refusal = true;
                    }
                    None
                }
            };
            targets.push(Target::Limited {
                rule,
                limit,
                item,
                op,
                counters,
            });
        }
        if zero_refusal && self.options.mode == Mode::AllOrNothing {
            // A zero limit refuses the request: nothing is charged, the others are read.
            for item in &mut items {
                if let Op::Take(_) = item.op {
                    item.op = Op::Check;
                }
            }
        }
        let outcomes: Vec<Outcome> = if items.is_empty() {
            Vec::new()
        } else {
            self.backend
                .decide(&request.domain, &items, self.options.mode)
                .await
                .map_err(|e| {
                    if e.0.contains("not supported") {
                        RequestError::InvalidArgument(e.0)
                    } else {
                        RequestError::Unavailable(e.0)
                    }
                })?
        };
        Ok(self.respond(request, &targets, &outcomes))
    }

    /// The response from the targets and the backend's outcomes.
    fn respond(&self, request: &Request, targets: &[Target], outcomes: &[Outcome]) -> Response {
        let mut statuses = Vec::with_capacity(targets.len());
        let mut over = false;
        let mut quota_violations = Vec::new();
        let mut quota_enabled = false;
        let mut metadata_rules = Vec::new();
        for (i, target) in targets.iter().enumerate() {
            let status = match target {
                Target::Open { unlimited } => Status {
                    code: Code::Ok,
                    current_limit: None,
                    limit_remaining: if *unlimited { u32::MAX } else { 0 },
                    duration_until_reset: None,
                },
                Target::Limited {
                    rule,
                    limit,
                    item,
                    op,
                    counters,
                    ..
                } => {
                    let outcome = match item {
                        Some(j) => outcomes[*j],
                        None => match op {
                            Op::Take(_) => Outcome::refused(0, limit.unit.period()),
                            _ => Outcome::admitted(0, Duration::ZERO),
                        },
                    };
                    let shadow = rule.shadow_mode || self.options.shadow_mode;
                    if let Op::Take(n) = op {
                        counters.record(
                            *n,
                            limit.requests_per_unit,
                            outcome.remaining,
                            outcome.admitted,
                            shadow,
                        );
                    }
                    quota_enabled |= rule.quota_mode;
                    let refused = !outcome.admitted;
                    if refused && rule.quota_mode {
                        quota_violations.push(i);
                    }
                    let code = if refused && !shadow && !rule.quota_mode {
                        over = true;
                        Code::OverLimit
                    } else {
                        Code::Ok
                    };
                    if let Some(m) = &rule.metadata {
                        metadata_rules.push((i, m.clone()));
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
            };
            statuses.push(status);
        }
        let overall_code = if over { Code::OverLimit } else { Code::Ok };
        let mut headers = Vec::new();
        if let Some(names) = &self.options.headers {
            if let Some(s) = statuses
                .iter()
                .filter(|s| s.current_limit.is_some())
                .min_by_key(|s| s.limit_remaining)
            {
                if let Some(l) = &s.current_limit {
                    headers.push((
                        names.limit.clone(),
                        format!(
                            "{}, {};w={}",
                            l.requests_per_unit,
                            l.requests_per_unit,
                            l.unit.seconds()
                        ),
                    ));
                    headers.push((names.remaining.clone(), s.limit_remaining.to_string()));
                    let reset = s.duration_until_reset.unwrap_or_default();
                    let secs = reset.as_secs() + u64::from(reset.subsec_nanos() > 0);
                    headers.push((names.reset.clone(), secs.to_string()));
                }
            }
        }
        let mut raw_body = Vec::new();
        if over {
            if let Some((body, content_type)) = &self.options.over_limit_body {
                raw_body = body.clone();
                headers.push(("content-type".into(), content_type.clone()));
            }
        }
        let mut dynamic_metadata = None;
        if self.options.dynamic_metadata || quota_enabled || !metadata_rules.is_empty() {
            use serde_json::{json, Value};
            let mut m = serde_json::Map::new();
            if self.options.dynamic_metadata {
                m.insert("domain".into(), Value::from(request.domain.clone()));
                let descriptors: Vec<Value> = request
                    .descriptors
                    .iter()
                    .map(|d| {
                        let mut o = serde_json::Map::new();
                        o.insert(
                            "entries".into(),
                            Value::from(
                                d.entries
                                    .iter()
                                    .map(|(k, v)| format!("{k}={v}"))
                                    .collect::<Vec<_>>(),
                            ),
                        );
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
            if quota_enabled {
                m.insert("quotaModeEnabled".into(), Value::Bool(true));
                m.insert("quotaModeViolations".into(), json!(quota_violations));
            }
            if !metadata_rules.is_empty() {
                let rules: serde_json::Map<String, Value> = metadata_rules
                    .into_iter()
                    .map(|(i, v)| (i.to_string(), v))
                    .collect();
                m.insert("metadata".into(), Value::Object(rules));
            }
            dynamic_metadata = Some(m);
        }
        Response {
            overall_code,
            statuses,
            response_headers_to_add: headers,
            raw_body,
            dynamic_metadata,
        }
    }
}
