//! The leased limiter's `acquire` while the idle-key sweep retires the key's entry every
//! millisecond, on a real server: a request waiting on an entry the sweep retires is woken
//! and looks the key up again at once (the lookup replaces a retired entry it meets), so
//! no call waits out the Redis deadline, and every call is admitted. (Before the sweep
//! woke its waiters and the lookup replaced retired entries, keyed calls here waited the
//! whole deadline and were refused.)

use redis_server_tests as common;

use limitcore::Quota;
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Redis deadline: what a request stuck on a retired entry would wait before its
/// refusal.
const DEADLINE: Duration = Duration::from_secs(1);
/// Well before the deadline: a lease is one loopback round trip (a retry or two when a
/// 1 ms lease expires before the waiter runs); the rest is scheduling slack on a loaded
/// 2-core machine. Half the deadline: a call stuck on a retired entry takes all of it.
const WELL_BEFORE: Duration = Duration::from_millis(500);
/// Keys pinned by handles, which the sweep walks past on every pass.
const PADS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_never_wait_out_the_deadline_while_the_sweep_retires_the_entry() {
    let server = common::server();
    let redis = common::connect_with(&server.url(), common::config().deadline(DEADLINE)).await;
    let q: Quota = "1000000/s burst 1000".parse().unwrap();
    // Leases live 1 ms and the sweep runs every 1 ms: between two calls (and sometimes
    // during one) the key's lease expires and the sweep retires its entry.
    let config = LeaseConfig::new(2).ttl(Duration::from_millis(1));
    let limiter = LeasedLimiter::new(redis, q, config, Policy::FailClosed).unwrap();
    // Pinned keys the sweep walks past on every pass (it never retires them): a pass lasts
    // long enough that requests meet an entry retired but not yet removed.
    let pads: Vec<_> = (0..PADS)
        .map(|i| limiter.key(&format!("pad-{i}")))
        .collect();
    // 2 s of calls, and on until there were more than 400 calls and 200 leases in all (a
    // loaded machine makes calls slow; 30 s at most).
    let (started, end) = (
        Instant::now(),
        Instant::now() + Duration::from_millis(2_000),
    );
    let total_calls = Arc::new(AtomicU32::new(0));
    let enough = {
        let (limiter, total_calls) = (limiter.clone(), Arc::clone(&total_calls));
        move || {
            (total_calls.load(Ordering::Relaxed) > 400 && limiter.leases() >= 200)
                || started.elapsed() >= Duration::from_secs(30)
        }
    };
    // Four tasks, each on a key of its own, pausing 1 to 4 ms between calls, so that the
    // key goes idle and the sweep retires its entry around the next call: three through
    // the keyed `acquire`, one through a `LeasedKey` made for each call and dropped after.
    let tasks: Vec<_> = (0..4u32)
        .map(|task| {
            let (limiter, total_calls, enough) =
                (limiter.clone(), Arc::clone(&total_calls), enough.clone());
            tokio::spawn(async move {
                let key = format!("k{task}");
                let (mut calls, mut slowest) = (0u32, Duration::ZERO);
                while Instant::now() < end || !enough() {
                    let started = Instant::now();
                    let verdict = if task < 3 {
                        limiter.acquire(&key, 1).await
                    } else {
                        limiter.key(&key).acquire(1).await
                    };
                    let took = started.elapsed();
                    assert!(
                        took < WELL_BEFORE,
                        "{key}, call {calls}: {took:?} (deadline {DEADLINE:?}): {verdict:?}"
                    );
                    assert!(verdict.is_admitted(), "{key}, call {calls}: {verdict:?}");
                    slowest = slowest.max(took);
                    calls += 1;
                    total_calls.fetch_add(1, Ordering::Relaxed);
                    let pause = 1 + u64::from((calls + task) % 4);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                (calls, slowest)
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        let (calls, slowest) = task.await.unwrap();
        eprintln!("{calls} calls, the slowest {slowest:?}");
        total += calls;
    }
    assert!(total > 400, "{total} calls in {:?}", started.elapsed());
    assert!(limiter.leases() >= 200, "{} leases", limiter.leases());
    // The sweep does retire the keys at this TTL: idle, they are gone within a few ms (the
    // pads stay); 10 s for a loaded machine, looking every 5 ms.
    let pads_only = format!("keys: {PADS}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut shown = format!("{limiter:?}");
    while !shown.contains(&pads_only) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        shown = format!("{limiter:?}");
    }
    assert!(shown.contains(&pads_only), "{shown}");
    drop(pads);
}
