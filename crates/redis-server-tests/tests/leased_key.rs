//! [`LeasedKey`] handles on a real server: they share the key's word with the keyed path,
//! keep their key through the idle-key sweep, and never end up on an entry the sweep
//! retired.

use redis_server_tests as common;

use limitcore::{KeyedRateLimiter, Quota, RateLimiter};
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Verdict};
use std::time::{Duration, Instant};

/// How long something due within milliseconds (a lease's round trip, a sweep or two) may
/// take on a loaded machine: generous, since every wait for it ends as soon as it happens.
const PROMPT: Duration = Duration::from_secs(10);

/// Wait until `limiter`'s `Debug` text holds `shown` (its count of keys), for at most
/// [`PROMPT`]; the text last seen.
async fn until_shown(limiter: &LeasedLimiter, shown: &str) -> String {
    let deadline = Instant::now() + PROMPT;
    loop {
        let text = format!("{limiter:?}");
        if text.contains(shown) || Instant::now() >= deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_handle_shares_the_keyed_word() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // 10/s burst 8, L = 8: one lease holds the whole burst and Redis refuses the next one.
    let q: Quota = "10/s burst 8".parse().unwrap();
    let limiter = LeasedLimiter::new(redis, q, LeaseConfig::new(8), Policy::FailClosed).unwrap();
    let handle = limiter.key("k");
    assert_eq!(handle.key(), "k");
    assert_eq!(handle.capacity(), 8);
    assert!(handle.acquire(1).await.is_admitted());
    // The two paths see one state.
    let now = handle.now();
    assert_eq!(handle.snapshot_at(now), limiter.snapshot_at("k", now));
    // Spend by turns until both refuse: never more than Redis granted, over both paths.
    let mut admitted = 1u64;
    let deadline = Instant::now() + PROMPT;
    while Instant::now() < deadline && limiter.refusals() == 0 {
        admitted += u64::from(handle.try_acquire().is_ok());
        admitted += u64::from(limiter.try_acquire("k").is_ok());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        limiter.refusals() > 0,
        "Redis refused a lease within {PROMPT:?}"
    );
    // Blocked, the cells still held may be spent: spend them (through the handle).
    let now = handle.now();
    while handle.try_acquire_n_at(1, now).is_ok() {
        admitted += 1;
    }
    assert!(
        admitted <= limiter.granted(),
        "{admitted} admitted > {} granted",
        limiter.granted()
    );
    assert!(
        admitted > 1,
        "cells were spent beyond the first: {admitted}"
    );
    // Then both refuse with the same exact wait, and a clone shares it too.
    let by_key = limiter.try_acquire_n_at("k", 1, now).unwrap_err();
    let by_handle = handle.clone().try_acquire_n_at(1, now).unwrap_err();
    assert_eq!(by_key, by_handle);
    assert!(by_handle.retry_after().unwrap() > Duration::ZERO);
}

#[tokio::test]
async fn a_handle_keeps_its_key_through_the_sweep() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "100000/s burst 1000".parse().unwrap();
    // Leases live 5 ms and the sweep runs every 5 ms: an idle key is swept within 15 ms.
    let config = LeaseConfig::new(4).ttl(Duration::from_millis(5));
    let limiter = LeasedLimiter::new(redis, q, config, Policy::FailClosed).unwrap();
    let handle = limiter.key("pinned");
    assert!(handle.acquire(1).await.is_admitted());
    assert!(limiter.acquire("unpinned", 1).await.is_admitted());
    // A few sweeps later (15 ms; longer on a loaded machine): the unpinned key's entry is
    // gone, the pinned one's is not.
    let shown = until_shown(&limiter, "keys: 1").await;
    assert!(shown.contains("keys: 1"), "{shown}");
    // The handle's entry still takes leases (a retired one never would: the sweep keeps
    // its fetch slot).
    if let Err(last) = admitted_within(|| handle.acquire(1), PROMPT).await {
        panic!("the handle's entry took no lease in {PROMPT:?}: {last:?} ({shown})");
    }
    let leases = limiter.leases();
    drop(handle);
    let shown = until_shown(&limiter, "keys: 0").await;
    assert!(
        shown.contains("keys: 0"),
        "a dropped handle's key is swept: {shown}"
    );
    if let Err(last) = admitted_within(|| limiter.acquire("pinned", 1), PROMPT).await {
        panic!("the key's new entry took no lease in {PROMPT:?}: {last:?}");
    }
    assert!(limiter.leases() > leases);
}

/// Ask `acquire` until it admits, for up to `within`; the last refusal if none did. A live
/// entry is admitted at the first lease that reaches it in time, but `acquire` alone may
/// refuse one on a loaded machine: its lease (1 or 5 ms here) can expire before the
/// waiting task runs again, and it gives up at the Redis deadline (1 s). A retired
/// entry is never admitted (no lease reaches it again), however long it is asked.
async fn admitted_within<F: std::future::Future<Output = Verdict>>(
    mut acquire: impl FnMut() -> F,
    within: Duration,
) -> Result<(), Verdict> {
    let end = Instant::now() + within;
    loop {
        let verdict = acquire().await;
        if verdict.is_admitted() {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(verdict);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_made_while_the_sweep_runs_always_take_leases() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q: Quota = "1000000/s burst 1000".parse().unwrap();
    // Leases live 1 ms and the sweep runs every 1 ms: handles are made and dropped while
    // the key goes idle and the sweep retires its entry, again and again.
    let config = LeaseConfig::new(2).ttl(Duration::from_millis(1));
    let limiter = LeasedLimiter::new(redis, q, config, Policy::FailClosed).unwrap();
    // 1.5 s of rounds, and on until there were more than 100 of them and 100 leases (a
    // loaded machine makes rounds slow; 30 s at most).
    let started = Instant::now();
    let mut rounds = 0u32;
    while started.elapsed() < Duration::from_millis(1_500)
        || ((rounds <= 100 || limiter.leases() < 100) && started.elapsed() < 3 * PROMPT)
    {
        let handle = limiter.key("k");
        // A handle pinned to a retired entry would be refused however long it asked.
        if let Err(last) = admitted_within(|| handle.acquire(1), PROMPT).await {
            panic!("round {rounds}: no lease in {PROMPT:?}: {last:?}");
        }
        drop(handle);
        tokio::time::sleep(Duration::from_micros(500 + 700 * u64::from(rounds % 5))).await;
        rounds += 1;
    }
    assert!(rounds > 100, "{rounds} rounds");
    assert!(limiter.leases() >= 100, "{} leases", limiter.leases());
}
