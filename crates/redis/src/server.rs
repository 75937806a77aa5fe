//! Real Redis servers for tests, benchmarks and examples: [`RedisServer`] starts Debian's
//! `redis-server` on a free loopback port with a temporary directory and no persistence,
//! and kills it when dropped (also while a panicking test unwinds); [`RedisCluster`] starts
//! three such servers in cluster mode and joins them with `redis-cli --cluster create`.
//!
//! Nothing here is a mock: every test of `limitcore-redis` that needs Redis talks to a real
//! server (those tests are the workspace's `redis-server-tests` package, see the crate's
//! docs, "Tests"). A machine without `redis-server` gets [`ServerError::NotInstalled`],
//! whose message names `bash .ci/redis-deps.sh`, the script that installs it.

use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a server could not be started or controlled.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// `redis-server` (or `redis-cli`) is not on `PATH`.
    NotInstalled(&'static str),
    /// Starting, signalling or joining the servers failed.
    Io(std::io::Error),
    /// The server did not answer `PING` (or the cluster did not reach `cluster_state:ok`)
    /// within the time allowed; the text holds the log's tail.
    NotReady(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::NotInstalled(program) => write!(
                f,
                "`{program}` is not installed or not on PATH: install it with `bash .ci/redis-deps.sh` (or `apt-get install redis-server`)"
            ),
            ServerError::Io(e) => write!(f, "redis-server: {e}"),
            ServerError::NotReady(why) => write!(f, "redis-server did not become ready: {why}"),
        }
    }
}

impl std::error::Error for ServerError {}

impl From<std::io::Error> for ServerError {
    fn from(e: std::io::Error) -> Self {
        ServerError::Io(e)
    }
}

/// A directory under the system's temporary directory, removed on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> std::io::Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "limitcore-redis-{label}-{}-{}",
            std::process::id(),
            // Relaxed: a unique number for a directory name, nothing published with it.
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn require(program: &'static str) -> Result<(), ServerError> {
    match Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        _ => Err(ServerError::NotInstalled(program)),
    }
}

/// A loopback port that is free now (and, for a cluster node, whose bus port `port +
/// 10000` is free too). Another process may take it before the server binds it; starting
/// retries with a new port when that happens.
fn free_port(cluster: bool) -> std::io::Result<u16> {
    for _ in 0..50 {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        if !cluster {
            return Ok(port);
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::other("no free loopback port pair"))
}

/// One raw RESP command on a fresh connection (the harness needs no client library):
/// the reply's text.
fn raw_command(port: u16, args: &[&str], timeout: Duration) -> std::io::Result<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(request.as_bytes())?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let read = stream.read(&mut buf)?;
        if read == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..read]);
        if reply.ends_with(b"\r\n") && reply_complete(&reply) {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Whether a simple, error, integer or bulk reply has fully arrived.
fn reply_complete(reply: &[u8]) -> bool {
    match reply.first() {
        Some(b'$') => {
            let Some(end) = reply.windows(2).position(|w| w == b"\r\n") else {
                return false;
            };
            let len: i64 = std::str::from_utf8(&reply[1..end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            len < 0 || reply.len() >= end + 2 + len as usize + 2
        }
        _ => true,
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// A `redis-server` on `127.0.0.1`, started by this process and killed on drop.
///
/// The server keeps no data on disk (`save ""`, `appendonly no`) and writes its log to a
/// temporary directory removed on drop. [`RedisServer::pause`] (`SIGSTOP`),
/// [`RedisServer::resume`] (`SIGCONT`), [`RedisServer::kill`] (`SIGKILL`) and
/// [`RedisServer::restart`] (same port, empty data) are the fault injections the tests use.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::server::RedisServer;
///
/// let server = RedisServer::start()?;
/// println!("{}", server.url()); // redis://127.0.0.1:PORT
/// drop(server);                  // killed, directory removed
/// # Ok::<(), limitcore_redis::server::ServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    cluster: bool,
    dir: TempDir,
}

impl RedisServer {
    /// Start a stand-alone server on a free loopback port and wait (up to 10 s) until it
    /// answers `PING`.
    ///
    /// # Errors
    ///
    /// [`ServerError::NotInstalled`] without `redis-server` on `PATH` (its message names
    /// `bash .ci/redis-deps.sh`); [`ServerError::Io`] or [`ServerError::NotReady`] if it does
    /// not come up.
    pub fn start() -> Result<Self, ServerError> {
        Self::start_mode(false)
    }

    /// Start a server with `--cluster-enabled yes` (not yet part of any cluster).
    fn start_mode(cluster: bool) -> Result<Self, ServerError> {
        require("redis-server")?;
        let mut last = None;
        for _ in 0..5 {
            let port = free_port(cluster)?;
            let mut server = RedisServer {
                child: None,
                port,
                cluster,
                dir: TempDir::new(if cluster { "cluster" } else { "server" })?,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                // Dropping `server` removes its directory; try another port.
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ServerError::NotReady("no attempt".into())))
    }

    fn spawn(&mut self) -> Result<(), ServerError> {
        let port = self.port.to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "no",
        ])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(&self.dir.0)
        .arg("--logfile")
        .arg(self.dir.0.join("redis.log"));
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
                .args(["--cluster-config-file", "nodes.conf"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(reply) = raw_command(self.port, &["PING"], Duration::from_millis(500)) {
                if reply.starts_with("+PONG") {
                    return Ok(());
                }
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(ServerError::NotReady(format!(
                        "exited with {status}: {}",
                        tail(&self.dir.0.join("redis.log"))
                    )));
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(ServerError::NotReady(tail(&self.dir.0.join("redis.log"))));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, signal: &str) -> Result<(), ServerError> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(ServerError::Io(std::io::Error::other(format!(
                "kill {signal} {pid} failed"
            ))))
        }
    }

    /// Freeze the server (`SIGSTOP`): connections stay open, nothing is answered.
    ///
    /// # Errors
    ///
    /// [`ServerError::Io`] if the signal cannot be sent.
    pub fn pause(&self) -> Result<(), ServerError> {
        self.signal("-STOP")
    }

    /// Thaw a paused server (`SIGCONT`).
    ///
    /// # Errors
    ///
    /// [`ServerError::Io`] if the signal cannot be sent.
    pub fn resume(&self) -> Result<(), ServerError> {
        self.signal("-CONT")
    }

    /// Kill the server (`SIGKILL`) and reap it; its data is gone (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same port, empty (after [`RedisServer::kill`], or
    /// killing it first).
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start`] (the port may have been taken meanwhile).
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        let _ = std::fs::remove_file(self.dir.0.join("nodes.conf"));
        self.spawn()
    }

    /// Run one command on a fresh raw connection and return the reply's text (RESP), for
    /// tests and the harness's own checks.
    ///
    /// # Errors
    ///
    /// [`ServerError::Io`] if the server does not answer within 2 s.
    pub fn command(&self, args: &[&str]) -> Result<String, ServerError> {
        Ok(raw_command(self.port, args, Duration::from_secs(2))?)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would not die of SIGKILL any later, but a thawed one is cleaner.
        let _ = self.resume();
        self.kill();
    }
}

/// Three `redis-server` masters in cluster mode on loopback ports, joined with
/// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`; all killed on drop.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::server::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// assert_eq!(cluster.urls().len(), 3);
/// # Ok::<(), limitcore_redis::server::ServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Start three masters, create the cluster (16 384 slots split evenly) and wait (up to
    /// 20 s) until every node reports `cluster_state:ok`.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start`], and [`ServerError::NotInstalled`] without `redis-cli`.
    pub fn start() -> Result<Self, ServerError> {
        // The server first: without Debian's package both are missing, and the server is
        // the one to name.
        require("redis-server")?;
        require("redis-cli")?;
        let nodes = (0..3)
            .map(|_| RedisServer::start_mode(true))
            .collect::<Result<Vec<_>, _>>()?;
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(ServerError::NotReady(format!(
                "redis-cli --cluster create: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = nodes.iter().all(|n| {
                n.command(&["CLUSTER", "INFO"])
                    .map(|info| info.contains("cluster_state:ok"))
                    .unwrap_or(false)
            });
            if ok {
                return Ok(RedisCluster { nodes });
            }
            if Instant::now() > deadline {
                return Err(ServerError::NotReady("cluster_state never ok".into()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The three nodes' URLs, `redis://127.0.0.1:PORT`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes themselves (for their ports and for fault injection).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }
}
