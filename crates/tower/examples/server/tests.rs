//! The example server's tests: its application (`app.rs`) with its `/metrics` page, on real
//! servers on 127.0.0.1:0 with a real client: after 30 concurrent
//! requests from one client at `5/s`, a scrape with the same client reports exactly the
//! responses it got (5 admitted, 25 limited); a dry-run server admits all 30 and counts the
//! 25 it would have refused as `dry_run`.
//!
//! The recorder is the process's (installed once, as the example does): the example's test
//! binary is a process of its own, whose tests share it, each server under a limit name of
//! its own.

use super::app;
use bytes::Bytes;
use clap::Parser;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::OnceLock;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A pooled HTTP/1 client.
fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What a test reads of a response.
struct Reply {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

/// GET `path` on `addr`.
async fn fetch(client: &HttpClient, addr: SocketAddr, path: &str) -> Reply {
    let req = http::Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap();
    let (parts, body) = client.request(req).await.unwrap().into_parts();
    Reply {
        status: parts.status,
        content_type: parts
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// How many of `statuses` are `which`.
fn count(statuses: &[StatusCode], which: StatusCode) -> usize {
    statuses.iter().filter(|&&s| s == which).count()
}

/// The process's Prometheus recorder, installed on first use.
fn recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
        .clone()
}

/// The example's application with `args` (its command line) on 127.0.0.1:0.
async fn start(args: &[&str]) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let args = app::Args::parse_from(std::iter::once("server").chain(args.iter().copied()));
    let page = Some(recorder());
    tokio::spawn(async move { app::run(listener, args, page).await.unwrap() });
    addr
}

/// `limitcore_requests_total{limit="<limit>",outcome="<outcome>"}` on the scraped `page`.
fn requests(page: &str, limit: &str, outcome: &str) -> u64 {
    let series = format!("limitcore_requests_total{{limit=\"{limit}\",outcome=\"{outcome}\"}} ");
    let line = page
        .lines()
        .find(|line| line.starts_with(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{page}"));
    line[series.len()..].parse().unwrap()
}

/// 30 requests at once from one client (one address: one key); the statuses.
async fn thirty_at_once(c: &HttpClient, addr: SocketAddr) -> Vec<StatusCode> {
    let tasks: Vec<_> = (0..30)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { fetch(&c, addr, "/").await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_matches_the_responses() {
    let addr = start(&[
        "--quota",
        "5/s",
        "--key",
        "peer",
        "--policy-name",
        "enforced",
    ])
    .await;
    let c = client();
    let statuses = thirty_at_once(&c, addr).await;
    let ok = count(&statuses, StatusCode::OK) as u64;
    let limited = count(&statuses, StatusCode::TOO_MANY_REQUESTS) as u64;
    assert_eq!((ok, limited), (5, 25), "{statuses:?}");
    // The same client, over its limit: the page is not rate-limited.
    let scrape = fetch(&c, addr, "/metrics").await;
    assert_eq!(scrape.status, StatusCode::OK);
    assert!(
        scrape
            .content_type
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let page = std::str::from_utf8(&scrape.body).unwrap();
    assert_eq!(requests(page, "enforced", "admitted"), ok);
    assert_eq!(requests(page, "enforced", "limited"), limited);
    assert_eq!(requests(page, "enforced", "dry_run"), 0);
    assert!(
        page.contains("# TYPE limitcore_requests_total counter"),
        "{page}"
    );
    // Scraping again counts nothing: the page is outside the layer.
    let again = fetch(&c, addr, "/metrics").await;
    let again = std::str::from_utf8(&again.body).unwrap();
    assert_eq!(
        requests(again, "enforced", "admitted") + requests(again, "enforced", "limited"),
        30
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_admits_all_and_counts_what_it_would_refuse() {
    let addr = start(&[
        "--quota",
        "5/s",
        "--key",
        "peer",
        "--mode",
        "dry-run",
        "--policy-name",
        "shadow",
    ])
    .await;
    let c = client();
    let statuses = thirty_at_once(&c, addr).await;
    assert_eq!(count(&statuses, StatusCode::OK), 30, "{statuses:?}");
    let scrape = fetch(&c, addr, "/metrics").await;
    let page = std::str::from_utf8(&scrape.body).unwrap();
    assert_eq!(requests(page, "shadow", "dry_run"), 25);
    assert_eq!(requests(page, "shadow", "admitted"), 5);
    assert_eq!(requests(page, "shadow", "limited"), 0);
}
