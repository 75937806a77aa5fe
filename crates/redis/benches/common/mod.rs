//! What the Redis benchmarks share: how long a cell runs, and the timing of concurrent
//! client tasks (calls/s over all tasks, p50 and p99 of each call's latency).

use limitcore_redis::server::RedisServer;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `redis-server` of the crate's harness on a loopback port, and the multi-thread tokio
/// runtime with 2 workers (this machine's 2 cores) that the client tasks run on.
pub(crate) fn server_and_runtime() -> (RedisServer, tokio::runtime::Runtime) {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    (server, rt)
}

/// How long each measured cell runs.
pub(crate) const RUN: Duration = Duration::from_secs(2);

/// Decisions per second over all tasks, and the latency of one decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Decisions per second over all tasks.
    pub(crate) per_s: f64,
    /// Median latency of a decision, µs.
    pub(crate) p50_us: f64,
    /// 99th percentile latency of a decision, µs.
    pub(crate) p99_us: f64,
}

impl Timing {
    /// The timing of `lat`, one latency per decision, gathered over [`RUN`].
    pub(crate) fn of(mut lat: Vec<Duration>) -> Timing {
        lat.sort_unstable();
        Timing {
            per_s: lat.len() as f64 / RUN.as_secs_f64(),
            p50_us: pct(&lat, 0.5),
            p99_us: pct(&lat, 0.99),
        }
    }
}

/// The `p` quantile (nearest rank) of sorted latencies, in µs.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Run `tasks` copies of `op` (each call `batch` decisions) for [`RUN`] on `rt`, after 200
/// calls of warm-up (the connection, the script's load): the timing of every decision (a
/// batched decision's latency is its batch's). `op` is given a number unique to the call
/// (task `t` counts from `t << 40`).
pub(crate) fn time_tasks<F, Fut>(
    rt: &tokio::runtime::Runtime,
    tasks: usize,
    batch: usize,
    op: F,
) -> Timing
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let lat = rt.block_on(async {
        for i in 0..200 {
            op(i).await;
        }
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let op = Arc::clone(&op);
                tokio::spawn(async move {
                    let mut lat = Vec::with_capacity(200_000);
                    let end = Instant::now() + RUN;
                    let mut i = (t as u64) << 40;
                    while Instant::now() < end {
                        let began = Instant::now();
                        op(i).await;
                        lat.extend(std::iter::repeat_n(began.elapsed(), batch));
                        i += 1;
                    }
                    lat
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.unwrap());
        }
        all
    });
    Timing::of(lat)
}
