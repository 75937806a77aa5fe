//! Shared helpers: a real redis-server per test (never a mock), and a connected handle.
#![allow(dead_code, unreachable_pub)]

pub mod proxy;

use limitcore_redis::server::RedisServer;
use limitcore_redis::{Policy, Redis, RedisConfig, RedisGcra};
use std::time::Duration;

/// A fresh server on a free loopback port. Fails (never skips) when redis-server is
/// missing, naming the script that installs it.
pub fn server() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| {
        panic!("this test needs a real redis-server: {e} (see .ci/redis-deps.sh)")
    })
}

/// The test configuration: generous deadline (a loaded 2-core machine), fast breaker.
pub fn config() -> RedisConfig {
    RedisConfig::default()
        .deadline(Duration::from_millis(250))
        .breaker(3, Duration::from_millis(100))
        .heartbeat(Duration::from_millis(100))
}

/// A handle on `server` with the test configuration.
pub async fn connect(server: &RedisServer) -> Redis {
    connect_with(&server.url(), config()).await
}

/// A handle on the server at `url` (a test server, or a proxy in front of one).
pub async fn connect_with(url: &str, config: RedisConfig) -> Redis {
    Redis::connect(url, config)
        .await
        .expect("connect to the test server")
}

/// An exact GCRA of `quota` on `redis`, failing closed.
pub fn gcra(redis: &Redis, quota: &str) -> RedisGcra {
    RedisGcra::new(redis.clone(), quota.parse().unwrap(), Policy::FailClosed).unwrap()
}

/// Whether Redis admits `n` permits for `key` now (an unreachable Redis fails the test).
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
        .unwrap()
        .as_micros() as u64
}

/// The most events in any half-open window of `window_us` among sorted timestamps (µs).
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

/// The GCRA bound: at most `burst + ⌈Δ/T⌉ − 1` permits in any window of Δ.
pub fn gcra_bound(burst: u32, interval_us: u64, window_us: u64) -> u64 {
    u64::from(burst) + window_us.div_ceil(interval_us) - 1
}
