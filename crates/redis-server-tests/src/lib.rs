//! # redis-server-tests
//!
//! `limitcore-redis`'s tests against real `redis-server` processes (never a mock): the
//! scripts against the core's reference models (the debt policy and forced charges against
//! the budget's), a 3-master cluster, faults (a frozen, killed and restarted server; a slow
//! or flaky proxy; charges under each outage policy), a fleet of nodes on one key (deciding,
//! and deciding and charging), the leased handles through the idle-key sweep, the leased
//! charge and requests above the lease, charges recorded past the limit and reservations
//! settled (against a GCRA-with-debt model, exact and leased; reserve-then-settle beside
//! check-then-report; the Envoy Gateway pattern), and the leased limiter behind the HTTP
//! layer. They live in `tests/`; this library holds what they share: a server per test,
//! a connected handle, the fault proxy ([`proxy`]) and the bounds they check.
//!
//! # Layers
//!
//! One layer: the fair lease's model (`fair_model`) and the fault proxy (`proxy`) import
//! nothing of each other, and nothing imports through this file (`tests/layers.rs` of the
//! workspace checks it).
//!
//! # Why a package of its own
//!
//! `cargo test --workspace` runs the packages' test binaries in the order of the
//! packages' names and, without `--no-fail-fast`, stops at the first package that fails.
//! These tests fail on a machine without `redis-server`; their package's name sorts after
//! every other package of the workspace, so every other package's tests have run (and
//! reported) by then. `limitcore-redis`'s own tests need no server.
//!
//! # Without `redis-server`
//!
//! The first test that needs a server and finds none ([`server`], [`cluster`]) writes one
//! line to stderr naming the install command (`bash .ci/redis-deps.sh`, or `apt-get
//! install redis-server`) and ends its test binary with exit status 1 at once: no test is
//! skipped or ignored, and no test panics with a backtrace each. Install the server and
//! run them:
//!
//! ```text
//! bash .ci/redis-deps.sh
//! cargo test -p limitcore-redis -p redis-server-tests --all-features
//! ```

pub mod fair_model;
pub mod proxy;

use limitcore_redis::server::{RedisCluster, RedisServer, ServerError};
use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
use std::io::Write;
use std::sync::Once;
use std::time::Duration;

/// A fresh server on a free loopback port. Never skips: without `redis-server` the test
/// binary ends at once (see the crate's docs, "Without `redis-server`").
///
/// # Panics
///
/// If the server is installed but does not start.
pub fn server() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| missing_or_panic(e, "redis-server"))
}

/// A fresh 3-master cluster on free loopback ports. Without `redis-server` or `redis-cli`,
/// as [`server`].
///
/// # Panics
///
/// If the servers are installed but the cluster does not form.
pub fn cluster() -> RedisCluster {
    RedisCluster::start().unwrap_or_else(|e| missing_or_panic(e, "a redis-server cluster"))
}

/// A missing program ends the process with one line (the first caller's); any other
/// failure panics, as a failure of the test that met it.
fn missing_or_panic(e: ServerError, what: &str) -> ! {
    match e {
        ServerError::NotInstalled(program) => missing(program),
        e => panic!("this test needs {what}: {e}"),
    }
}

/// Write one line naming the install command and end the test binary with exit status 1.
/// Tests run on several threads: the first one here writes and exits; any other one
/// waits for that exit inside the same `Once` (its `call_once` blocks while the first
/// runs, and the first never returns), so the line is written once.
fn missing(program: &str) -> ! {
    static MISSING: Once = Once::new();
    MISSING.call_once(|| {
        // Straight to the process's stderr: libtest captures `eprintln!` of a test
        // (printing it only with a failure report), not writes to `std::io::stderr()`.
        let _ = writeln!(
            std::io::stderr(),
            "redis-server-tests: `{program}` is not installed (these tests start real Redis servers): install it with `bash .ci/redis-deps.sh` (or `apt-get install redis-server`), then run the tests again"
        );
        std::process::exit(1);
    });
    unreachable!("the first caller of `missing` ends the process")
}

/// The test configuration: a generous deadline, fast breaker. A call is one loopback round
/// trip; the deadline matters for the tests on this configuration only where a call missed
/// it, which fails them (a refusal of the outage policy instead of Redis's answer), on a
/// loaded 2-core machine that holds the server or the test off its CPU for a while. So it
/// is 1 s, four times what it was; it costs time only where a test kills the server (the
/// first calls to a killed server wait it out before the breaker opens). The tests that time
/// a server's silence (`faults.rs`, `seam.rs`) have configurations of their own.
pub fn config() -> RedisConfig {
    RedisConfig::default()
        .deadline(Duration::from_secs(1))
        .breaker(3, Duration::from_millis(100))
        .heartbeat(Duration::from_millis(100))
}

/// A handle on `server` with the test configuration.
///
/// # Panics
///
/// If the URL is invalid (never for a [`RedisServer`]'s).
pub async fn connect(server: &RedisServer) -> Redis {
    connect_with(&server.url(), config()).await
}

/// A handle on `server` with the test configuration but heartbeats an hour apart (the first
/// is sent as it connects): for tests that count the commands a call sends
/// ([`Redis::commands`] counts heartbeats too, and one every 100 ms could land inside any
/// call that waits for Redis, the longer the call the likelier).
///
/// # Panics
///
/// If the URL is invalid (never for a [`RedisServer`]'s).
pub async fn connect_counted(server: &RedisServer) -> Redis {
    connect_with(&server.url(), config().heartbeat(Duration::from_secs(3600))).await
}

/// A handle on the server at `url` (a test server, or a proxy in front of one).
///
/// # Panics
///
/// If `url` is invalid.
pub async fn connect_with(url: &str, config: RedisConfig) -> Redis {
    Redis::connect(url, config)
        .await
        .expect("connect to the test server")
}

/// An exact GCRA of `quota` on `redis`, failing closed.
///
/// # Panics
///
/// If `quota` does not parse or cannot be represented on Redis.
pub fn gcra(redis: &Redis, quota: &str) -> RedisGcra {
    RedisGcra::new(redis.clone(), quota.parse().unwrap(), Policy::FailClosed).unwrap()
}

/// Whether Redis admits `n` permits for `key` now.
///
/// # Panics
///
/// If Redis does not answer (a test of a reachable server fails).
pub async fn admits(limit: &RedisGcra, key: &str, n: u32) -> bool {
    limit
        .try_decide(key, n)
        .await
        .unwrap()
        .decision
        .is_admitted()
}

/// Wall-clock µs since the Unix epoch: the clock Redis's `TIME` reads on this machine.
pub fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the wall clock is after 1970")
        .as_micros() as u64
}

/// The most events in any half-open window of `window_us` among `times` (µs; sorted in
/// place), and where that window starts.
pub fn max_in_window(times: &mut [u64], window_us: u64) -> (usize, u64) {
    times.sort_unstable();
    let (mut best, mut at, mut lo) = (0, 0, 0);
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= window_us {
            lo += 1;
        }
        if hi + 1 - lo > best {
            best = hi + 1 - lo;
            at = times[lo];
        }
    }
    (best, at)
}

/// The most events *surely* in one half-open window of `window_us` among events each known
/// only to lie within a span `[from, to]` of µs (a local decision read on the wall clock
/// before and after the call that made it; `from == to` for a time Redis gave), and where
/// that window starts. An event counts in a window only if its whole span does, so the
/// result is at most the true count of the busiest window, whatever the spans: a bound
/// checked on it holds however long a loaded machine held the test between a decision and
/// its reading (a single reading after the call could move an event into a later window).
/// With narrow spans it is the true count.
pub fn max_surely_in_window(spans: &mut [(u64, u64)], window_us: u64) -> (usize, u64) {
    spans.sort_unstable();
    let (mut best, mut at) = (0, 0);
    for (i, &(start, _)) in spans.iter().enumerate() {
        let end = start.saturating_add(window_us);
        let inside = spans[i..]
            .iter()
            .take_while(|&&(from, _)| from < end)
            .filter(|&&(_, to)| to < end)
            .count();
        if inside > best {
            best = inside;
            at = start;
        }
    }
    (best, at)
}

/// The time this thread has spent runnable but waiting for a CPU since it started (Linux's
/// `/proc/thread-self/schedstat`, its second field), or `None` where the kernel does not
/// say. Around a synchronous call, its growth is how long a loaded machine held the call off
/// its CPU: the rest of the call's wall-clock time is its own (running, or blocked).
pub fn run_delay() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let waited = stat.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(waited))
}

/// The GCRA bound: at most `burst + ⌈Δ/T⌉ − 1` permits in any window of Δ (`window_us`),
/// with emission interval T (`interval_us`).
pub fn gcra_bound(burst: u32, interval_us: u64, window_us: u64) -> u64 {
    u64::from(burst) + window_us.div_ceil(interval_us) - 1
}

/// Each node's count over an equal split of the total (1.0: exactly its share), and Jain's
/// fairness index `(Σx)² / (N·Σx²)` over the counts (1: all equal; `1/N`: one took all).
pub fn fairness(counts: &[u64]) -> (Vec<f64>, f64) {
    let n = counts.len() as f64;
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    let shares = counts
        .iter()
        .map(|&c| {
            if total > 0.0 {
                c as f64 * n / total
            } else {
                0.0
            }
        })
        .collect();
    let jain = if squares > 0.0 {
        total * total / (n * squares)
    } else {
        0.0
    };
    (shares, jain)
}
