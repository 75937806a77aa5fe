//! Loopback servers and a real HTTP client for the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod far;

use axum::Router;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use limitcore_tower::Outcome;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// An axum router served on 127.0.0.1:0 with `ConnectInfo<SocketAddr>`; the server task
/// ends with the test's runtime.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = app.layer(axum::middleware::map_response(outcome_header));
    // Without the crate's `axum` feature, `PeerIp` reads a plain `SocketAddr` extension.
    #[cfg(not(feature = "axum"))]
    let app = app.layer(axum::middleware::map_request(
        |mut req: axum::extract::Request| async move {
            let peer = req
                .extensions()
                .get::<axum::extract::ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            if let Some(peer) = peer {
                req.extensions_mut().insert(peer);
            }
            req
        },
    ));
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Copies the layer's [`Outcome`] extension into an `x-outcome` header, so that the client
/// side of a test can see it (as a logging layer would read it).
pub async fn outcome_header(mut response: Response) -> Response {
    if let Some(outcome) = response.extensions().get::<Outcome>().copied() {
        response
            .headers_mut()
            .insert("x-outcome", HeaderValue::from_static(outcome.as_str()));
    }
    response
}

/// A pooled hyper-util client.
pub fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What a test reads of a response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub fn outcome(&self) -> &str {
        self.header("x-outcome").unwrap_or("-")
    }
}

/// GET `path` on `addr` with `headers`.
pub async fn get(
    client: &Client<HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = http::Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        req = req.header(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let res = client
        .request(req.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = res.into_parts();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// GET `/` on a connection of its own (a fresh TCP connection, no pool).
pub async fn get_on_new_connection(addr: SocketAddr) -> StatusCode {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/")
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    let status = res.status();
    let _ = res.into_body().collect().await;
    status
}

/// Counts of statuses.
pub fn count(statuses: &[StatusCode], which: StatusCode) -> usize {
    statuses.iter().filter(|&&s| s == which).count()
}

/// The handler of every test route.
pub async fn ok() -> &'static str {
    "ok"
}

/// A plain hyper server (no axum) on 127.0.0.1:0: each connection's service is
/// `make(peer)`, and every request gets the peer's `SocketAddr` in its extensions.
pub async fn serve_hyper<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use tower::ServiceExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let svc = service.clone().map_request(
                move |mut req: http::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(peer);
                    req
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(
                        TokioIo::new(stream),
                        hyper_util::service::TowerToHyperService::new(svc),
                    )
                    .await;
            });
        }
    });
    addr
}
