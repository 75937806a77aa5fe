//! The client comparison: redis-rs beside fred, in one run, against one real `redis-server`
//! on loopback (the crate's own harness, [`RedisServer`](limitcore_redis::server::RedisServer)).
//!
//! Each client keeps one connection, shared by every task: redis-rs through
//! `redis::aio::ConnectionManager` (configured as `Redis::connect` configures it, with a
//! 1 s deadline as in `benches/redis.rs`), fred through one `fred::clients::Client` (the
//! same timeouts and a like reconnection policy). On a multi-thread tokio runtime with 2
//! workers, 1 and then 2 tasks loop for 2 s each on:
//!
//! - the exact GCRA decision: `EVALSHA` of the crate's GCRA script (loaded once with
//!   `SCRIPT LOAD`) on the key `hot` with the arguments `1000 50 0 0 "" 1` (interval
//!   1,000 µs, burst 50, no debt, the operation "decide", Redis's `TIME`, one request of
//!   n = 1), its 4-integer
//!   reply (the time, then the request's three) parsed into a `Vec<i64>`;
//! - the naive fixed window: `INCR fw:<window>` + `PEXPIRE fw:<window> 1000` in one
//!   pipeline (`<window>` the current second), both replies parsed as integers.
//!
//! It prints the `redis-server` version line and one Markdown table: decisions/s over all
//! tasks, p50 and p99 of each call's latency, and fred ÷ redis-rs in decisions/s for each
//! pair of rows. Client, server and both runtime workers share the machine's cores.
//!
//! Run: `cargo bench -p limitcore-redis --bench clients`.

use fred::prelude::{ClientLike, KeysInterface, LuaInterface, ReconnectPolicy};
use limitcore_redis::scripts::{gcra_sha, gcra_source};
use redis::aio::ConnectionManager;
use std::future::Future;
use std::hint::black_box;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod common;

use common::{time_tasks, Timing, RUN};

/// The per-call deadline both clients get (`benches/redis.rs`'s `RedisConfig` deadline).
const DEADLINE: Duration = Duration::from_secs(1);

/// The GCRA script's arguments in its order: interval 1,000 µs, burst 50, debt 0, the
/// operation "decide" (`0`), `now` empty (Redis's `TIME`), then one request of n = 1.
const GCRA_ARGS: [&str; 6] = ["1000", "50", "0", "0", "", "1"];

/// One measured cell.
struct Row {
    /// `redis-rs` or `fred`.
    client: &'static str,
    /// The workload's name.
    workload: &'static str,
    /// Client tasks sharing the one client.
    tasks: usize,
    /// Decisions/s and latencies.
    timing: Timing,
}

/// Run `tasks` copies of `op` for [`RUN`] on the 2-worker runtime `rt`, after 200 calls of
/// warm-up: one row of the table.
fn measure<F, Fut>(
    rt: &tokio::runtime::Runtime,
    client: &'static str,
    workload: &'static str,
    tasks: usize,
    op: F,
) -> Row
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    Row {
        client,
        workload,
        tasks,
        timing: time_tasks(rt, tasks, 1, move |_| op()),
    }
}

/// The fixed window's key: `fw:` and the current second.
fn window_key() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("fw:{secs}")
}

/// The `redis-server --version` line of the binary the harness starts.
fn server_version() -> String {
    std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|e| format!("redis-server --version: {e}"))
}

/// redis-rs's connection, as `Redis::connect` makes it (with the bench's deadline).
async fn redis_rs_connect(url: &str) -> ConnectionManager {
    let client = redis::Client::open(url).unwrap();
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(DEADLINE))
        .set_response_timeout(Some(DEADLINE))
        .set_min_delay(Duration::from_millis(5))
        .set_max_delay(Duration::from_millis(250))
        .set_number_of_retries(usize::MAX);
    let mut conn = ConnectionManager::new_lazy_with_config(client, config).unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(gcra_source())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(sha, gcra_sha());
    conn
}

/// fred's client on one connection, with the same deadlines and a like reconnection
/// policy (unbounded attempts, 5 ms doubling to 250 ms), TCP options left at their
/// defaults as redis-rs's are.
async fn fred_connect(url: &str) -> fred::clients::Client {
    let config = fred::prelude::Config::from_url(url).unwrap();
    let client = fred::prelude::Builder::from_config(config)
        .with_performance_config(|p| p.default_command_timeout = DEADLINE)
        .with_connection_config(|c| c.connection_timeout = DEADLINE)
        .set_policy(ReconnectPolicy::new_exponential(0, 5, 250, 2))
        .build()
        .unwrap();
    client.init().await.unwrap();
    let sha: String = client.script_load(gcra_source()).await.unwrap();
    assert_eq!(sha, gcra_sha());
    client
}

/// The exact GCRA workload's name.
const EXACT: &str = "exact GCRA (EVALSHA)";
/// The fixed-window workload's name.
const NAIVE: &str = "fixed window (INCR + PEXPIRE, one pipeline)";

/// Start the server, connect both clients, measure every cell, print the version line and
/// the table.
fn main() {
    let (server, rt) = common::server_and_runtime();
    let rs = rt.block_on(redis_rs_connect(&server.url()));
    let fr = rt.block_on(fred_connect(&server.url()));

    let mut rows = Vec::new();
    for (workload, tasks) in [(EXACT, 1), (EXACT, 2), (NAIVE, 1), (NAIVE, 2)] {
        if workload == EXACT {
            let c = rs.clone();
            rows.push(measure(&rt, "redis-rs", workload, tasks, move || {
                let mut c = c.clone();
                async move {
                    let reply: Vec<i64> = redis::cmd("EVALSHA")
                        .arg(gcra_sha())
                        .arg(1)
                        .arg("hot")
                        .arg(&GCRA_ARGS)
                        .query_async(&mut c)
                        .await
                        .unwrap();
                    black_box(reply);
                }
            }));
            let c = fr.clone();
            rows.push(measure(&rt, "fred", workload, tasks, move || {
                let c = c.clone();
                async move {
                    let reply: Vec<i64> = c.evalsha(gcra_sha(), "hot", GCRA_ARGS).await.unwrap();
                    black_box(reply);
                }
            }));
        } else {
            let c = rs.clone();
            rows.push(measure(&rt, "redis-rs", workload, tasks, move || {
                let mut c = c.clone();
                async move {
                    let key = window_key();
                    let reply: (i64, i64) = redis::pipe()
                        .cmd("INCR")
                        .arg(&key)
                        .cmd("PEXPIRE")
                        .arg(&key)
                        .arg(1_000)
                        .query_async(&mut c)
                        .await
                        .unwrap();
                    black_box(reply);
                }
            }));
            let c = fr.clone();
            rows.push(measure(&rt, "fred", workload, tasks, move || {
                let c = c.clone();
                async move {
                    let key = window_key();
                    let pipe = c.pipeline();
                    let () = pipe.incr(key.as_str()).await.unwrap();
                    let () = pipe.pexpire(key.as_str(), 1_000, None).await.unwrap();
                    let reply: (i64, i64) = pipe.all().await.unwrap();
                    black_box(reply);
                }
            }));
        }
    }

    println!("\n{}", server_version());
    println!(
        "\n#### redis-rs beside fred: one client, one connection, loopback redis-server, \
         {} s a cell, 2 runtime workers\n",
        RUN.as_secs()
    );
    println!(
        "| client | workload | tasks | decisions/s | p50 µs | p99 µs | fred ÷ redis-rs (decisions/s) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for pair in rows.chunks(2) {
        let ratio = pair[1].timing.per_s / pair[0].timing.per_s;
        for (r, ratio) in pair.iter().zip(["—".to_owned(), format!("{ratio:.2}×")]) {
            println!(
                "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {ratio} |",
                r.client, r.workload, r.tasks, r.timing.per_s, r.timing.p50_us, r.timing.p99_us
            );
        }
    }
    rt.block_on(fr.quit()).unwrap();
}
