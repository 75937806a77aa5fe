//! The token gateway's scenario (issue 37): an OpenAI-style upstream answering with random
//! token usage, and `requests` concurrent requests sent to it through the tower layer
//! (`limitcore-tower`) and through this rate-limit service, each path run once with
//! reserve-then-settle and once with check-then-report.
//!
//! The example (`main.rs` beside this file) runs it on the real clock and prints the table;
//! `tests/token_gateway.rs` includes this file as a module and runs it with the issue's
//! numbers on a frozen clock.
//!
//! Every hop is HTTP/2 over cleartext on 127.0.0.1, ports from `:0`: the requests of a run
//! are all in flight at once, and on HTTP/1 that would be four sockets each (client to
//! gateway and gateway to upstream, both ends), past the default descriptor limit of many
//! machines at a thousand requests.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use clap::Parser as _;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as RlsCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use limitcore::clock::{Clock, ManualClock, MonotonicClock, Nanos};
use limitcore::rules::FixedWindowRule;
use limitcore::{Keyed, Quota};
use limitcore_rls::{RefusedHits, ServerConfig, SharedClock};
use limitcore_tower::{HeaderKey, RateLimitLayer, ResponseCost};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tonic::transport::Channel;

/// The errors of a run: a server that does not start, a limit the limiter refuses.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// The upstream's route, as OpenAI's.
const PATH: &str = "/v1/chat/completions";
/// The header naming the tenant, the one key of the limit.
const TENANT_HEADER: HeaderName = HeaderName::from_static("x-tenant");
/// The one tenant every request belongs to.
const TENANT: &str = "acme";
/// The header naming a request's number in its run (the upstream's index into its usages).
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The header the upstream writes its total tokens in, and the layer reads.
const X_TOKENS: HeaderName = HeaderName::from_static("x-tokens");
/// The service's domain and its descriptor key.
const DOMAIN: &str = "gateway";
const DESCRIPTOR_KEY: &str = "tenant";
/// What every client asks (the upstream does not read it).
const PROMPT: &str = r#"{"model":"demo","messages":[{"role":"user","content":"Say something."}]}"#;
/// The limit's period: a minute, as a tokens-per-minute quota.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// The most requests a run takes: every one of them is in flight at once, with its usage
/// in a table, so a number past this is refused as an error rather than exhausting memory.
pub(crate) const MAX_REQUESTS: usize = 100_000;
/// How long a held upstream waits for every request to be decided before it answers anyway
/// (a request lost on the way would otherwise hold the run forever); the outcome says so.
const GATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The settings of the scenario.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// Concurrent requests per run.
    pub(crate) requests: usize,
    /// Tokens per minute, for the one tenant.
    pub(crate) limit: u32,
    /// Reserve-then-settle's estimate per request, in tokens.
    pub(crate) estimate: u32,
    /// The upstream's largest answer: each total is uniform in `0..=max_tokens`.
    pub(crate) max_tokens: u32,
    /// The seed of the upstream's token counts.
    pub(crate) seed: u64,
    /// When the upstream answers.
    pub(crate) answer: Answer,
    /// The service's `--refused-hits`.
    pub(crate) refused_hits: RefusedHits,
}

/// When the upstream answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Once every request of the run has been decided (admitted and arrived, or refused):
    /// all of them in flight at once, the case "1,000 concurrent requests" names, in the
    /// same order of decisions and charges on any machine, however fast.
    WhenAllDecided,
    /// After this long (a model's generation time), as the requests come.
    After(Duration),
}

/// The clock the limiters read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Time {
    /// The monotonic clock, counted from the start of each run: its limiter's first window
    /// opens with the run.
    Real,
    /// A clock that never moves: every decision of a run at one instant, in one window,
    /// however slow the machine.
    // The test's clock; the example runs on the real one.
    #[allow(dead_code)]
    Frozen,
}

/// Where the limit is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// `RateLimitLayer` in an axum gateway in front of the upstream.
    Layer,
    /// This service over gRPC, asked by the proxy (this program, as Envoy would).
    Service,
}

/// How a request's tokens are accounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accounting {
    /// The estimate reserved before the upstream, settled to the actual tokens after it.
    ReserveThenSettle,
    /// A check of no cost before the upstream (refused only in debt), the actual tokens
    /// charged after it.
    CheckThenReport,
}

/// The four runs, in the order they are run and printed.
pub(crate) const RUNS: [(Path, Accounting); 4] = [
    (Path::Layer, Accounting::ReserveThenSettle),
    (Path::Layer, Accounting::CheckThenReport),
    (Path::Service, Accounting::ReserveThenSettle),
    (Path::Service, Accounting::CheckThenReport),
];

/// What one run did.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) path: Path,
    pub(crate) accounting: Accounting,
    /// Requests answered by the upstream (200).
    pub(crate) admitted: usize,
    /// Requests refused by the limit (429, `OVER_LIMIT`).
    pub(crate) refused: usize,
    /// Requests neither answered nor refused (an error on the way); 0 in a sound run.
    pub(crate) failed: usize,
    /// The first of those errors.
    pub(crate) first_failure: Option<String>,
    /// Service runs: settles and reports the service did not answer (their tokens were
    /// used but maybe not recorded); 0 in a sound run.
    pub(crate) lost_reports: usize,
    /// The tokens the admitted requests used (their answers' `usage.total_tokens`).
    pub(crate) tokens: u64,
    /// The limit, in tokens per minute.
    pub(crate) limit: u32,
    /// From the limiter's creation to the run's last settle or report.
    pub(crate) elapsed: Duration,
    /// Whether a held upstream answered on its timeout (a request lost on the way) rather
    /// than once every request was decided.
    pub(crate) gate_timed_out: bool,
}

impl Outcome {
    /// The tokens used above the limit.
    pub(crate) fn overshoot(&self) -> u64 {
        self.tokens.saturating_sub(u64::from(self.limit))
    }

    /// The tokens used as a multiple of the limit.
    pub(crate) fn multiple(&self) -> f64 {
        self.tokens as f64 / f64::from(self.limit)
    }
}

/// One answer's token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) prompt: u32,
    pub(crate) completion: u32,
}

impl Usage {
    /// `total_tokens`.
    pub(crate) fn total(self) -> u32 {
        self.prompt + self.completion
    }
}

/// The usage of requests `0..n`: each total uniform in `0..=max`, split uniformly into
/// prompt and completion, from a generator seeded with `seed`. Request `i` is answered
/// with entry `i` whatever order the requests arrive in, so that a seed gives the same
/// answers on every run and machine (with this lockfile's `rand`).
pub(crate) fn usages(seed: u64, n: usize, max: u32) -> Vec<Usage> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let total = rng.gen_range(0..=max);
            let prompt = rng.gen_range(0..=total);
            Usage {
                prompt,
                completion: total - prompt,
            }
        })
        .collect()
}

impl Scenario {
    /// Refuses the settings the runs cannot mean, with the reason.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.requests == 0 || self.requests > MAX_REQUESTS {
            return Err(format!(
                "--requests must be in 1..={MAX_REQUESTS} (every request is in flight at once), not {}",
                self.requests
            ));
        }
        if self.limit == 0 {
            return Err("--limit must be at least 1 token a minute".into());
        }
        if self.estimate == 0 || self.estimate > self.limit {
            return Err(format!(
                "--estimate must be in 1..={} (the limit): a reservation of 0 is a check, and one above the limit is never admitted; not {}",
                self.limit, self.estimate
            ));
        }
        Ok(())
    }

    /// The estimate a request declares under `accounting`.
    fn request_cost(&self, accounting: Accounting) -> u32 {
        match accounting {
            Accounting::ReserveThenSettle => self.estimate,
            Accounting::CheckThenReport => 0,
        }
    }
}

/// Runs the four runs of `scenario` in turn ([`RUNS`]), each on limiters of its own read
/// from a fresh clock of `time`.
///
/// # Errors
///
/// Settings [`Scenario::validate`] refuses; a server that does not start.
pub(crate) async fn run(scenario: &Scenario, time: Time) -> Result<Vec<Outcome>, Error> {
    scenario.validate()?;
    let usages: Arc<[Usage]> = usages(scenario.seed, scenario.requests, scenario.max_tokens).into();
    let mut outcomes = Vec::with_capacity(RUNS.len());
    for (path, accounting) in RUNS {
        let outcome = match path {
            Path::Layer => through_layer(scenario, accounting, time, &usages).await?,
            Path::Service => through_service(scenario, accounting, time, &usages).await?,
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The clock of one run's limiters.
fn clock(time: Time) -> SharedClock {
    match time {
        Time::Real => Arc::new(RunClock::new()),
        Time::Frozen => Arc::new(ManualClock::new()),
    }
}

/// The monotonic clock counted from its creation: a limit of a minute on it has its first
/// window, `[0, 60 s)`, open from the moment the run starts (the process-wide monotonic
/// clock counts from the process's first reading, and a run late in the program could
/// straddle two of its windows).
#[derive(Debug)]
struct RunClock {
    origin: Nanos,
    clock: MonotonicClock,
}

impl RunClock {
    fn new() -> Self {
        let clock = MonotonicClock::new();
        RunClock {
            origin: clock.now(),
            clock,
        }
    }
}

impl Clock for RunClock {
    fn now(&self) -> Nanos {
        self.clock.now().saturating_sub(self.origin)
    }
}

// ---------------------------------------------------------------------------------------
// The upstream and its gate.
// ---------------------------------------------------------------------------------------

/// Opens once `expected` requests have been decided: the upstream counts each that
/// arrives (admitted), the clients each that is refused or fails on the way.
#[derive(Debug)]
struct Gate {
    expected: usize,
    decided: AtomicUsize,
    open: watch::Sender<bool>,
    timed_out: AtomicBool,
}

impl Gate {
    fn new(expected: usize) -> Arc<Self> {
        Arc::new(Gate {
            expected,
            decided: AtomicUsize::new(0),
            open: watch::Sender::new(false),
            timed_out: AtomicBool::new(false),
        })
    }

    /// One more request decided.
    fn decided(&self) {
        // Relaxed: a count alone; the watch channel orders what the waiters see.
        if self.decided.fetch_add(1, Ordering::Relaxed) + 1 >= self.expected {
            self.open.send_replace(true);
        }
    }

    /// Waits until the gate is open, or opens it on the timeout.
    async fn wait(&self) {
        let mut open = self.open.subscribe();
        let opened = tokio::time::timeout(GATE_TIMEOUT, open.wait_for(|o| *o)).await;
        if opened.is_err() {
            // Relaxed: read after the run, when every task has ended.
            self.timed_out.store(true, Ordering::Relaxed);
            self.open.send_replace(true);
        }
    }
}

/// The upstream's state: the answers, when to give them.
#[derive(Debug, Clone)]
struct Upstream {
    usages: Arc<[Usage]>,
    answer: Answer,
    gate: Arc<Gate>,
}

/// `POST /v1/chat/completions`: an OpenAI-style chat completion whose `usage` is request
/// `x-request-id`'s entry, with its total in `x-tokens` too.
async fn complete(State(upstream): State<Upstream>, request: Request) -> Response {
    let usage = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .and_then(|i| Some((i, *upstream.usages.get(i)?)));
    let Some((i, usage)) = usage else {
        let reason = "x-request-id: the request's number in its run";
        return (StatusCode::BAD_REQUEST, reason).into_response();
    };
    match upstream.answer {
        Answer::WhenAllDecided => {
            upstream.gate.decided();
            upstream.gate.wait().await;
        }
        Answer::After(latency) => tokio::time::sleep(latency).await,
    }
    let body = serde_json::json!({
        "id": format!("chatcmpl-demo-{i}"),
        "object": "chat.completion",
        "model": "demo",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "token ".repeat(usage.completion as usize)},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.completion,
            "total_tokens": usage.total(),
        },
    });
    let headers = [
        (X_TOKENS, HeaderValue::from(usage.total())),
        (CONTENT_TYPE, HeaderValue::from_static("application/json")),
    ];
    (headers, body.to_string()).into_response()
}

/// The upstream of one run: request `i` answered with `usages[i]`, as `answer` says.
async fn upstream(
    usages: &Arc<[Usage]>,
    answer: Answer,
    gate: &Arc<Gate>,
) -> Result<Server, Error> {
    let state = Upstream {
        usages: Arc::clone(usages),
        answer,
        gate: Arc::clone(gate),
    };
    serve(Router::new().route(PATH, post(complete)).with_state(state)).await
}

// ---------------------------------------------------------------------------------------
// HTTP/2 servers and clients.
// ---------------------------------------------------------------------------------------

/// A server on 127.0.0.1, stopped (with its connections) when dropped.
#[derive(Debug)]
struct Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `app` over HTTP/2 (cleartext, prior knowledge) on a port chosen by the system.
async fn serve(app: Router) -> Result<Server, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        // The connections belong to the accept loop: aborting it drops them too.
        let mut connections = JoinSet::new();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // let the condition pass rather than spin on it.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(app.clone());
            connections.spawn(async move {
                let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                // No stream limit: a run's requests are in flight at once, and with hyper's
                // default of 200 the rest would queue at the client while a held upstream
                // waits for them.
                builder.max_concurrent_streams(None);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    });
    Ok(Server { addr, task })
}

/// An HTTP/2 client (one multiplexed connection per server).
fn client<B>() -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// What became of one request.
enum Reply {
    /// Answered: the tokens its answer says it used.
    Admitted(u32),
    /// Refused by the limit.
    Refused,
    /// Neither: what went wrong.
    Failed(String),
}

/// Reads the upstream's answer as the client sees it: `usage.total_tokens` of a 200, a
/// refusal (429), or anything else as a failure.
async fn read_answer(response: Response<hyper::body::Incoming>) -> Reply {
    let status = response.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Reply::Refused;
    }
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Reply::Failed(format!("reading the answer: {e}")),
    };
    if status != StatusCode::OK {
        return Reply::Failed(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    let total = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("usage")?.get("total_tokens")?.as_u64())
        .and_then(|n| u32::try_from(n).ok());
    match total {
        Some(total) => Reply::Admitted(total),
        None => Reply::Failed("an answer without usage.total_tokens".into()),
    }
}

/// A `POST /v1/chat/completions` for request `i` at `addr`.
fn chat_request(addr: SocketAddr, i: usize) -> Result<axum::http::Request<Full<Bytes>>, Error> {
    let uri = format!("http://{addr}{PATH}");
    let request = axum::http::Request::post(uri)
        .header(TENANT_HEADER, TENANT)
        .header(REQUEST_ID, i)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(PROMPT.as_bytes())))?;
    Ok(request)
}

// ---------------------------------------------------------------------------------------
// The runs.
// ---------------------------------------------------------------------------------------

/// The tally of a run's replies.
#[derive(Default)]
struct Tally {
    admitted: usize,
    refused: usize,
    failed: usize,
    first_failure: Option<String>,
    lost_reports: usize,
    tokens: u64,
}

impl Tally {
    fn add(&mut self, reply: Reply) {
        match reply {
            Reply::Admitted(tokens) => {
                self.admitted += 1;
                self.tokens += u64::from(tokens);
            }
            Reply::Refused => self.refused += 1,
            Reply::Failed(why) => {
                self.failed += 1;
                self.first_failure.get_or_insert(why);
            }
        }
    }
}

/// Spawns `n` clients, each running `one(i)` once all are spawned (so that they start
/// together), and tallies their replies: (the reply, whether a report after it was lost).
async fn clients<F, Fut>(n: usize, one: F) -> Tally
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = (Reply, bool)> + Send + 'static,
{
    let (go, ready) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let mut ready = ready.clone();
        let request = one(i);
        tasks.spawn(async move {
            // A closed channel also means go: the sender is dropped only after sending.
            let _ = ready.wait_for(|go| *go).await;
            request.await
        });
    }
    go.send_replace(true);
    let mut tally = Tally::default();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((reply, lost_report)) => {
                tally.add(reply);
                tally.lost_reports += usize::from(lost_report);
            }
            Err(e) => tally.add(Reply::Failed(format!("a client task: {e}"))),
        }
    }
    tally
}

/// The gateway's state: where to forward, and with what.
#[derive(Debug, Clone)]
struct Gateway {
    client: Client<HttpConnector, Body>,
    upstream: Uri,
}

/// Forwards a request to the upstream, and its answer back (the layer around this handler
/// reads its `x-tokens`).
async fn forward(State(gateway): State<Gateway>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    parts.uri = gateway.upstream.clone();
    match gateway
        .client
        .request(axum::http::Request::from_parts(parts, body))
        .await
    {
        Ok(answer) => answer.map(Body::new),
        Err(e) => (StatusCode::BAD_GATEWAY, format!("upstream: {e}")).into_response(),
    }
}

/// A run through the layer: an axum gateway with `RateLimitLayer` (the tenant's header as
/// the key, a fixed window of `limit` a minute) forwarding to the upstream, and the
/// clients sending to the gateway.
async fn through_layer(
    scenario: &Scenario,
    accounting: Accounting,
    time: Time,
    usages: &Arc<[Usage]>,
) -> Result<Outcome, Error> {
    let gate = Gate::new(scenario.requests);
    let upstream = upstream(usages, scenario.answer, &gate).await?;
    let started = Instant::now();
    let limiter: Keyed<HeaderValue, FixedWindowRule, SharedClock> =
        Keyed::with_clock(Quota::per_minute(scenario.limit)?, clock(time))?;
    let estimate = scenario.request_cost(accounting);
    // With an estimate above 0 the layer reserves it and settles it to the answer's
    // `x-tokens`; with 0 it admits while the tenant is not in debt and charges `x-tokens`
    // after the answer.
    let layer = RateLimitLayer::builder(limiter, HeaderKey::new(TENANT_HEADER))
        .response_cost(ResponseCost::header(X_TOKENS))
        .cost(move |_| estimate)
        .build()?;
    let state = Gateway {
        client: client(),
        upstream: format!("http://{}{PATH}", upstream.addr).parse()?,
    };
    let app = Router::new()
        .route(PATH, post(forward))
        .with_state(state)
        .layer(layer);
    let gateway = serve(app).await?;
    let http = client::<Full<Bytes>>();
    let tally = clients(scenario.requests, |i| {
        let (http, gate) = (http.clone(), Arc::clone(&gate));
        let request = chat_request(gateway.addr, i);
        async move {
            let reply = match request {
                Ok(request) => match http.request(request).await {
                    Ok(response) => read_answer(response).await,
                    Err(e) => Reply::Failed(format!("the gateway: {e}")),
                },
                Err(e) => Reply::Failed(format!("the request: {e}")),
            };
            // An admitted request was counted by the upstream when it arrived.
            if !matches!(reply, Reply::Admitted(_)) {
                gate.decided();
            }
            (reply, false)
        }
    })
    .await;
    let elapsed = started.elapsed();
    Ok(outcome(
        Path::Layer,
        accounting,
        scenario,
        tally,
        elapsed,
        &gate,
    ))
}

/// The service's configuration: the tenant's `limit` tokens a minute, a fixed window.
fn rls_config(limit: u32) -> String {
    format!(
        "domain: {DOMAIN}\ndescriptors:\n  - key: {DESCRIPTOR_KEY}\n    rate_limit: {{unit: minute, requests_per_unit: {limit}, algorithm: fixed-window}}\n"
    )
}

/// A `ShouldRateLimit` for the tenant with `hits` hits (given back if `negative`).
fn rls_request(hits: u32, negative: bool) -> RateLimitRequest {
    RateLimitRequest {
        domain: DOMAIN.into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: DESCRIPTOR_KEY.into(),
                value: TENANT.into(),
            }],
            hits_addend: Some(UInt64Value {
                value: u64::from(hits),
            }),
            is_negative_hits: negative,
            ..Default::default()
        }],
        // 0: each descriptor's own `hits_addend` counts (a request's 0 would mean 1).
        hits_addend: 0,
    }
}

/// Whether the service admits `request`.
async fn admitted(
    rls: &mut RateLimitServiceClient<Channel>,
    request: RateLimitRequest,
) -> Result<bool, tonic::Status> {
    let answer = rls.should_rate_limit(request).await?.into_inner();
    Ok(answer.overall_code == RlsCode::Ok as i32)
}

/// What the proxy sends after the answer, for a request whose estimate was `estimate` and
/// whose answer used `actual`: the difference (negative hits give back what was not
/// used), or nothing when there is none (0 hits would be a check, which records nothing).
fn after_answer(estimate: u32, actual: u32) -> Option<RateLimitRequest> {
    match actual.cmp(&estimate) {
        std::cmp::Ordering::Less => Some(rls_request(estimate - actual, true)),
        std::cmp::Ordering::Greater => Some(rls_request(actual - estimate, false)),
        std::cmp::Ordering::Equal => None,
    }
}

/// A run through the service: this program is the proxy, as Envoy would be: a
/// `ShouldRateLimit` of the estimate (or 0) before the upstream, one of the difference to
/// the actual tokens after it, the service in process (memory backend) on a real gRPC port.
async fn through_service(
    scenario: &Scenario,
    accounting: Accounting,
    time: Time,
    usages: &Arc<[Usage]>,
) -> Result<Outcome, Error> {
    let gate = Gate::new(scenario.requests);
    let upstream = upstream(usages, scenario.answer, &gate).await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("tokens.yaml"), rls_config(scenario.limit))?;
    let refused_hits = match scenario.refused_hits {
        RefusedHits::Record => "record",
        RefusedHits::Drop => "drop",
    };
    let config = ServerConfig::try_parse_from([
        "limitcore-rls",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--backend",
        "memory",
        "--refused-hits",
        refused_hits,
        "--config-dir",
        &dir.path().display().to_string(),
    ])?;
    let started = Instant::now();
    let running = limitcore_rls::start(&config, clock(time), None).await?;
    let rls = RateLimitServiceClient::connect(format!("http://{}", running.grpc_addr)).await?;
    let http = client::<Full<Bytes>>();
    let estimate = scenario.request_cost(accounting);
    let tally = clients(scenario.requests, |i| {
        let (mut rls, http, gate) = (rls.clone(), http.clone(), Arc::clone(&gate));
        let request = chat_request(upstream.addr, i);
        async move {
            match admitted(&mut rls, rls_request(estimate, false)).await {
                Ok(true) => {}
                Ok(false) => {
                    gate.decided();
                    return (Reply::Refused, false);
                }
                Err(e) => {
                    gate.decided();
                    return (Reply::Failed(format!("the service: {e}")), false);
                }
            }
            let reply = match request {
                Ok(request) => match http.request(request).await {
                    Ok(response) => read_answer(response).await,
                    Err(e) => Reply::Failed(format!("the upstream: {e}")),
                },
                Err(e) => Reply::Failed(format!("the request: {e}")),
            };
            let Reply::Admitted(actual) = reply else {
                // Admitted, but no answer reached the proxy: its estimate stands, as the
                // layer leaves a reservation whose answer says nothing. Whether it reached
                // the upstream is unknown: counted as decided here too, since a gate
                // opened one request early only shortens the hold, and one never opened
                // holds the run until its timeout.
                gate.decided();
                return (reply, false);
            };
            // The answer to the report does not matter (Envoy ignores it after the
            // response): over the limit, the tokens are recorded as debt all the same.
            let lost = match after_answer(estimate, actual) {
                Some(report) => admitted(&mut rls, report).await.is_err(),
                None => false,
            };
            (reply, lost)
        }
    })
    .await;
    let elapsed = started.elapsed();
    drop(rls);
    // The clients' connection is gone; the rest ends with the listeners.
    let _ = tokio::time::timeout(Duration::from_secs(5), running.stop()).await;
    Ok(outcome(
        Path::Service,
        accounting,
        scenario,
        tally,
        elapsed,
        &gate,
    ))
}

/// A run's outcome from its tally.
fn outcome(
    path: Path,
    accounting: Accounting,
    scenario: &Scenario,
    tally: Tally,
    elapsed: Duration,
    gate: &Gate,
) -> Outcome {
    Outcome {
        path,
        accounting,
        admitted: tally.admitted,
        refused: tally.refused,
        failed: tally.failed,
        first_failure: tally.first_failure,
        lost_reports: tally.lost_reports,
        tokens: tally.tokens,
        limit: scenario.limit,
        elapsed,
        // Relaxed: every task that could set it has ended.
        gate_timed_out: gate.timed_out.load(Ordering::Relaxed),
    }
}

// ---------------------------------------------------------------------------------------
// The report.
// ---------------------------------------------------------------------------------------

/// The table of `outcomes`, with the settings above it and what to read in it below.
pub(crate) fn report(scenario: &Scenario, time: Time, outcomes: &[Outcome]) -> String {
    let all = usages(scenario.seed, scenario.requests, scenario.max_tokens);
    let all_tokens: u64 = all.iter().map(|u| u64::from(u.total())).sum();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let answer = match scenario.answer {
        Answer::WhenAllDecided => {
            "once every request of the run is decided (all in flight at once)".to_owned()
        }
        Answer::After(latency) => format!("after {} ms each", latency.as_millis()),
    };
    let refused_hits = match scenario.refused_hits {
        RefusedHits::Record => "record",
        RefusedHits::Drop => "drop",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} concurrent requests for tenant {TENANT:?}, estimate {} tokens, actual uniform in 0..={} (seed {}: {} tokens in all, {:.1} a request)",
        scenario.requests,
        scenario.estimate,
        scenario.max_tokens,
        scenario.seed,
        all_tokens,
        all_tokens as f64 / scenario.requests as f64,
    );
    let _ = writeln!(
        out,
        "limit {} tokens a minute (fixed window), the upstream answering {answer}; the service in process (memory, --refused-hits {refused_hits})",
        scenario.limit
    );
    let _ = writeln!(out, "this machine: {cores} cores");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<8} {:<20} {:>8} {:>8} {:>11} {:>7} {:>10} {:>10} {:>7}",
        "path",
        "accounting",
        "admitted",
        "refused",
        "tokens used",
        "limit",
        "over limit",
        "used/limit",
        "run (s)"
    );
    for o in outcomes {
        let path = match o.path {
            Path::Layer => "layer",
            Path::Service => "service",
        };
        let accounting = match o.accounting {
            Accounting::ReserveThenSettle => "reserve-then-settle",
            Accounting::CheckThenReport => "check-then-report",
        };
        let _ = writeln!(
            out,
            "{path:<8} {accounting:<20} {:>8} {:>8} {:>11} {:>7} {:>10} {:>9.2}x {:>7.2}",
            o.admitted,
            o.refused,
            o.tokens,
            o.limit,
            o.overshoot(),
            o.multiple(),
            o.elapsed.as_secs_f64()
        );
    }
    let _ = writeln!(out);
    let longest = outcomes.iter().map(|o| o.elapsed).max().unwrap_or_default();
    match time {
        Time::Real if longest < WINDOW => {
            let _ = writeln!(
                out,
                "Each run had fresh limiters whose one-minute window opened as it started; the longest run took {:.2} s, so every request of each run fell in that one window.",
                longest.as_secs_f64()
            );
        }
        Time::Real => {
            let _ = writeln!(
                out,
                "WARNING: a run took {:.1} s, longer than the limit's window of 60 s: its requests fell in more than one window, and its tokens are not one window's.",
                longest.as_secs_f64()
            );
        }
        Time::Frozen => {
            let _ = writeln!(
                out,
                "The limiters' clock was frozen: every request of a run fell in one window (the longest run took {:.2} s of real time).",
                longest.as_secs_f64()
            );
        }
    }
    for o in outcomes {
        if o.failed > 0 {
            let _ = writeln!(
                out,
                "WARNING: {} requests of a {:?} {:?} run failed on the way (first: {}).",
                o.failed,
                o.path,
                o.accounting,
                o.first_failure.as_deref().unwrap_or("?")
            );
        }
        if o.lost_reports > 0 {
            let _ = writeln!(
                out,
                "WARNING: the service did not answer {} settles or reports of the {:?} run.",
                o.lost_reports, o.accounting
            );
        }
        if o.gate_timed_out {
            let _ = writeln!(
                out,
                "WARNING: the upstream of a {:?} {:?} run answered on its timeout: not every request was in flight at once.",
                o.path, o.accounting
            );
        }
    }
    out
}
