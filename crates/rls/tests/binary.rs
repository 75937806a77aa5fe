//! The `limitcore-rls` binary itself: the runtime it builds (`--workers`) and its refusal
//! of a bad flag, on loopback with the example configuration.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_limitcore-rls");

/// The running binary, killed when dropped (so that a failed assertion does not leave it
/// holding the test's output open).
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary on loopback (ports chosen by the system) with `flags`.
fn spawn(flags: &[&str]) -> Service {
    Service(
        Command::new(BIN)
            .args([
                "--grpc-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                "--backend",
                "memory",
                "--config-dir",
                concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config"),
            ])
            .args(flags)
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts"),
    )
}

/// The startup line's HTTP address and runtime workers.
fn started(service: &mut Service) -> (String, usize) {
    let stderr = service.0.stderr.take().expect("stderr is piped");
    let mut lines = BufReader::new(stderr).lines();
    let line = loop {
        let line = lines
            .next()
            .expect("a startup line before stderr closes")
            .expect("stderr reads");
        if line.contains("runtime workers") {
            break line;
        }
    };
    let http = line
        .split("HTTP on ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no HTTP address in {line:?}"))
        .to_owned();
    let workers = line
        .rsplit(", ")
        .next()
        .and_then(|last| last.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no worker count in {line:?}"));
    (http, workers)
}

/// `GET /healthcheck` over a real connection: the status line.
fn healthcheck(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("the HTTP port accepts");
    write!(
        stream,
        "GET /healthcheck HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("the response reads");
    response.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn the_runtime_has_the_workers_it_is_given() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (flags, expected) in [
        (&["--workers", "1"][..], 1),
        (&["--workers", "3"], 3),
        (&[], cores),
    ] {
        let mut service = spawn(flags);
        let (http, workers) = started(&mut service);
        assert_eq!(workers, expected, "{flags:?}");
        assert!(
            healthcheck(&http).contains("200"),
            "{flags:?}: the service answers"
        );
    }
}

#[test]
fn zero_workers_is_refused_with_a_clear_error() {
    let out = Command::new(BIN)
        .args(["--workers", "0", "--backend", "memory"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value '0' for '--workers"),
        "{stderr}"
    );
}
