//! The HTTP endpoints: `/healthcheck`, envoyproxy/ratelimit's `/json` (a JSON
//! `RateLimitRequest` in, `200` or `429` with the JSON response out; `GET`: the
//! configuration's source, version and latest refusal) and `/metrics` (Prometheus text),
//! on hyper.

use crate::config::ConfigStatus;
use crate::json;
use crate::protocol::{Code, RequestError};
use crate::service::Service;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The largest `/json` body read: 1 MiB.
const MAX_BODY: usize = 1 << 20;

/// What the endpoints answer from.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// The service.
    pub service: Arc<Service>,
    /// The Prometheus recorder's handle, for `/metrics` (`None`: 404).
    pub metrics: Option<PrometheusHandle>,
    /// Cleared when shutting down: `/healthcheck` then answers 503.
    pub healthy: Arc<AtomicBool>,
    /// The configuration in force and its source, for `GET /json`.
    pub config: Arc<ConfigStatus>,
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

impl Endpoints {
    /// Answer one HTTP request.
    pub async fn handle(
        &self,
        request: hyper::Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let text = "text/plain; charset=utf-8";
        Ok(match (request.method(), request.uri().path()) {
            (&Method::GET, "/healthcheck") => {
                // Relaxed: a flag read alone.
                if self.healthy.load(Ordering::Relaxed) {
                    reply(StatusCode::OK, text, "OK")
                } else {
                    reply(StatusCode::SERVICE_UNAVAILABLE, text, "shutting down")
                }
            }
            (&Method::GET, "/metrics") => match &self.metrics {
                Some(h) => reply(StatusCode::OK, "text/plain; version=0.0.4", h.render()),
                None => reply(StatusCode::NOT_FOUND, text, "no metrics recorder"),
            },
            (&Method::POST, "/json") => {
                let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(e) => {
                        return Ok(reply(
                            StatusCode::BAD_REQUEST,
                            text,
                            format!("cannot read the body: {e}\n"),
                        ))
                    }
                };
                let req = match json::request(&body) {
                    Ok(r) => r,
                    Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, text, format!("{e}\n"))),
                };
                match self.service.should_rate_limit(&req).await {
                    Ok(r) => {
                        let status = match r.overall_code {
                            Code::Ok => StatusCode::OK,
                            Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
                        };
                        reply(status, "application/json", json::response(&r).to_string())
                    }
                    Err(RequestError::InvalidArgument(m)) => {
                        reply(StatusCode::BAD_REQUEST, text, format!("{m}\n"))
                    }
                    Err(RequestError::Unavailable(m)) => {
                        reply(StatusCode::SERVICE_UNAVAILABLE, text, format!("{m}\n"))
                    }
                }
            }
            (&Method::GET, "/json") => reply(
                StatusCode::OK,
                "application/json",
                json::status(&self.config.report()).to_string(),
            ),
            (_, "/json") => reply(
                StatusCode::METHOD_NOT_ALLOWED,
                text,
                "POST a JSON RateLimitRequest, or GET the configuration's status\n",
            ),
            _ => reply(
                StatusCode::NOT_FOUND,
                text,
                "not found: /healthcheck, /json, /metrics\n",
            ),
        })
    }
}
