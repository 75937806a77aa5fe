//! [`Subscription`]: the service's ADS client, state of the world. It subscribes to
//! every `RateLimitConfig` resource ([`TYPE_URL`]) at the management server as its node,
//! applies each response's resources as one whole configuration or refuses it, answers
//! every response with an ACK or a NACK, and reconnects with [`Backoff`] when the stream
//! ends, the configuration in force staying meanwhile.

use super::backoff::Backoff;
use crate::config::{Config, ConfigStatus, Settings, SourceKind};
use crate::pb::ratelimit::config::ratelimit::v3::RateLimitConfig;
use crate::service::Service;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::{value, Any, Struct, Value};
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::Endpoint;

/// The type URL of the resources the service subscribes to: envoyproxy/ratelimit's
/// `RateLimitConfig`.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
/// The type URL of xDS's resource wrapper, which a management server may put a resource in.
const RESOURCE_WRAPPER: &str = "type.googleapis.com/envoy.service.discovery.v3.Resource";
/// How long a connection to the management server may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on the stream, so that a management server gone without closing it (a
/// host lost, a network cut) is noticed within these two and reconnected.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response read: a fleet's whole configuration comes in one (tonic's default
/// is 4 MiB).
const MAX_RESPONSE: usize = 64 << 20;
/// `google.rpc.Code.INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// Where and as whom the service subscribes, and how it reconnects
/// ([`XdsArgs::resolve`](super::XdsArgs::resolve) makes one from the flags).
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::XdsConfig;
/// use std::time::Duration;
///
/// let c = XdsConfig::new("http://127.0.0.1:18000", "ratelimit");
/// assert_eq!(c.backoff_max, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsConfig {
    /// The management server, `http://host:port`.
    pub server: String,
    /// The node id sent in every request (`Node.id`).
    pub node_id: String,
    /// The node's metadata (`Node.metadata`, string values), if any.
    pub node_metadata: Vec<(String, String)>,
    /// The first delay before reconnecting; it doubles with each failure in a row.
    pub backoff: Duration,
    /// The longest delay before reconnecting.
    pub backoff_max: Duration,
}

impl XdsConfig {
    /// Subscribe to `server` as `node_id`, without metadata, reconnecting after 500 ms
    /// doubling up to 30 s.
    pub fn new(server: impl Into<String>, node_id: impl Into<String>) -> Self {
        XdsConfig {
            server: server.into(),
            node_id: node_id.into(),
            node_metadata: Vec::new(),
            backoff: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
        }
    }

    /// The node the requests name.
    fn node(&self) -> Node {
        let metadata = (!self.node_metadata.is_empty()).then(|| Struct {
            fields: self
                .node_metadata
                .iter()
                .map(|(k, v)| {
                    let v = Value {
                        kind: Some(value::Kind::StringValue(v.clone())),
                    };
                    (k.clone(), v)
                })
                .collect(),
        });
        Node {
            id: self.node_id.clone(),
            metadata,
            user_agent_name: "limitcore-rls".to_owned(),
            ..Node::default()
        }
    }
}

/// The requests of one stream, as tonic reads them: what the subscription queues.
struct Requests(mpsc::Receiver<DiscoveryRequest>);

impl Stream for Requests {
    type Item = DiscoveryRequest;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The service's subscription to its configuration over xDS (ADS, state of the world).
///
/// Each response carries the whole configuration: its resources are decoded, read as a
/// set of configuration files would be ([`Config::from_resources`]) and applied to the
/// service in one step, keeping each key's usage as a reload of the files does. The
/// request that answers it is an ACK (`version_info` the response's, its nonce) or, when
/// any resource is refused, a NACK (`version_info` the version still in force, its nonce,
/// `error_detail` with the error's message; the configuration in force stays). When the
/// stream ends or cannot open, the subscription reconnects after a [`Backoff`] delay and
/// asks again, naming the version in force; meanwhile that version keeps deciding. Until
/// the first version arrives the service has no rule (every descriptor is answered `OK`),
/// as envoyproxy/ratelimit with `FORCE_START_WITHOUT_INITIAL_CONFIG`.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::{Subscription, XdsConfig};
/// use limitcore_rls::{Memory, Options, Service, Settings, UnixClock};
/// use std::sync::Arc;
///
/// let service = Arc::new(Service::new(Memory::new(UnixClock::shared(), 1000), Options::default()));
/// let subscription = Arc::new(Subscription::new(
///     XdsConfig::new("http://127.0.0.1:18000", "ratelimit"),
///     Settings::default(),
///     service,
/// ));
/// assert_eq!(subscription.status().report().version, None);
/// // `tokio::spawn(subscription.run(stop))` subscribes until `stop` turns true.
/// ```
#[derive(Debug)]
pub struct Subscription {
    config: XdsConfig,
    settings: Settings,
    service: Arc<Service>,
    status: Arc<ConfigStatus>,
}

impl Subscription {
    /// A subscription of `service` to `config`'s management server, reading the resources
    /// under `settings`; nothing is sent before [`Subscription::run`].
    pub fn new(config: XdsConfig, settings: Settings, service: Arc<Service>) -> Self {
        let status = Arc::new(ConfigStatus::new(SourceKind::Xds, config.server.clone()));
        Subscription {
            config,
            settings,
            service,
            status,
        }
    }

    /// The version in force, the latest refusal, whether the stream is up.
    pub fn status(&self) -> &Arc<ConfigStatus> {
        &self.status
    }

    /// Why the latest version was refused, while no later one was accepted.
    pub fn last_error(&self) -> Option<String> {
        self.status.report().refused.map(|(_, why)| why)
    }

    /// Subscribe until `stop` turns true (or its sender is dropped): one stream at a time,
    /// reconnecting with backoff, each outcome logged to stderr.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut backoff = Backoff::new(self.config.backoff, self.config.backoff_max);
        loop {
            let (why, responded) = tokio::select! {
                ended = self.stream() => ended,
                _ = stop.changed() => return,
            };
            self.status.connected(false);
            if responded {
                backoff.reset();
            }
            let delay = backoff.next_delay();
            eprintln!(
                "limitcore-rls: xDS: {why}; reconnecting to {} in {delay:?} (the configuration in force stays)",
                self.config.server
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One stream, until it ends: why it ended, and whether it delivered a response.
    async fn stream(&self) -> (String, bool) {
        let endpoint = match Endpoint::from_shared(self.config.server.clone()) {
            Ok(e) => e,
            Err(e) => return (format!("bad management server address: {e}"), false),
        };
        let endpoint = endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(e) => return (format!("cannot connect: {}", chain(&e)), false),
        };
        let mut client =
            AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(MAX_RESPONSE);
        // The first request names the version in force, so that a management server
        // restarted, or a reconnection, does not resend what is applied already.
        let (queue, requests) = mpsc::channel(4);
        let first = self.request(self.version_in_force(), String::new(), None);
        if queue.send(first).await.is_err() {
            return ("the request stream closed".to_owned(), false);
        }
        let mut responses = match client.stream_aggregated_resources(Requests(requests)).await {
            Ok(r) => r.into_inner(),
            Err(status) => return (format!("the stream was refused: {status}"), false),
        };
        self.status.connected(true);
        let mut responded = false;
        loop {
            let response = match responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return ("the management server ended the stream".into(), responded),
                Err(status) => return (format!("the stream failed: {status}"), responded),
            };
            responded = true;
            let answer = self.answer(&response);
            if queue.send(answer).await.is_err() {
                return ("the request stream closed".into(), responded);
            }
        }
    }

    /// The version in force ("" before the first).
    fn version_in_force(&self) -> String {
        self.status.report().version.unwrap_or_default()
    }

    /// A request for the resources: `version` the version in force (or accepted now),
    /// `nonce` the response answered (empty for the first request), `error` a NACK's.
    fn request(&self, version: String, nonce: String, error: Option<String>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version,
            node: Some(self.config.node()),
            // None named: every resource of the type (a wildcard subscription).
            resource_names: Vec::new(),
            type_url: TYPE_URL.to_owned(),
            response_nonce: nonce,
            error_detail: error.map(|message| Status {
                code: INVALID_ARGUMENT,
                message,
                details: Vec::new(),
            }),
            ..DiscoveryRequest::default()
        }
    }

    /// Apply `response` or refuse it, and the request that says which: an ACK or a NACK.
    fn answer(&self, response: &DiscoveryResponse) -> DiscoveryRequest {
        let version = &response.version_info;
        match self.apply(response) {
            Ok(rules) => {
                self.status.accepted(version);
                eprintln!(
                    "limitcore-rls: xDS: version {version:?} applied ({} resources, {rules} rules)",
                    response.resources.len()
                );
                self.request(version.clone(), response.nonce.clone(), None)
            }
            Err(why) => {
                self.status.rejected(Some(version), &why);
                eprintln!(
                    "limitcore-rls: xDS: version {version:?} refused, the version in force stays: {why}"
                );
                let mut nack = self.request(
                    self.version_in_force(),
                    response.nonce.clone(),
                    Some(format!("version {version:?} refused: {why}")),
                );
                // A response of another type (none is asked for) is answered in its type.
                if response.type_url != TYPE_URL {
                    nack.type_url = response.type_url.clone();
                }
                nack
            }
        }
    }

    /// Decode `response`'s resources, read them as one configuration and put it in force:
    /// the number of rules, or why it was refused.
    fn apply(&self, response: &DiscoveryResponse) -> Result<usize, String> {
        if response.type_url != TYPE_URL {
            return Err(format!(
                "type {:?} was not asked for (only {TYPE_URL})",
                response.type_url
            ));
        }
        let resources = response
            .resources
            .iter()
            .enumerate()
            .map(|(i, any)| decode(any).map_err(|e| format!("resource {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let config =
            Config::from_resources(&resources, &self.settings).map_err(|e| e.to_string())?;
        let rules = config.rules().len();
        self.service.apply(config).map_err(|e| e.to_string())?;
        Ok(rules)
    }
}

/// A `RateLimitConfig` from its `Any` (or from xDS's `Resource` wrapper around one).
fn decode(any: &Any) -> Result<RateLimitConfig, String> {
    let any = if any.type_url == RESOURCE_WRAPPER {
        let wrapper = Resource::decode(any.value.as_slice())
            .map_err(|e| format!("cannot decode a Resource wrapper: {e}"))?;
        match wrapper.resource {
            Some(inner) => return decode(&inner),
            None => return Err(format!("the Resource wrapper {:?} is empty", wrapper.name)),
        }
    } else {
        any
    };
    if any.type_url != TYPE_URL {
        return Err(format!("type {:?}, expected {TYPE_URL}", any.type_url));
    }
    RateLimitConfig::decode(any.value.as_slice())
        .map_err(|e| format!("cannot decode a RateLimitConfig: {e}"))
}

/// An error with its sources (tonic's transport errors say little at the top).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
