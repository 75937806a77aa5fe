//! Many clients on one key at once, in process: exactly what the algorithm allows is
//! admitted, through the gRPC service (a frozen manual clock: every request in one window).

mod common;

use common::*;
use limitcore::clock::ManualClock;
use std::sync::Arc;

const CONFIG: &str = "
domain: race
descriptors:
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 50}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 50, algorithm: sliding-log}
  - key: other
    rate_limit: {unit: minute, requests_per_unit: 1000}
";

async fn hammer(key: &str, with_other: bool) -> usize {
    let dir = config_dir(&[("race.yaml", CONFIG)]);
    let clock = ManualClock::starting_at(unix(5.0));
    let running = serve(dir.path(), Arc::new(clock), &[]).await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let mut c = client(&running).await;
        let key = key.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..25 {
                let mut ds = vec![desc(&[(key.as_str(), "hot")])];
                if with_other {
                    ds.push(desc(&[("other", "x")]));
                }
                if ask(&mut c, req("race", ds, 0)).await.overall_code == OK {
                    admitted += 1;
                }
            }
            admitted
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    running.stop().await;
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fixed_window_admits_its_count_exactly() {
    assert_eq!(hammer("fw", false).await, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcra_admits_its_burst_exactly() {
    assert_eq!(hammer("gcra", false).await, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sliding_log_admits_its_count_exactly() {
    assert_eq!(hammer("log", false).await, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_or_nothing_under_contention_admits_exactly_too() {
    assert_eq!(hammer("fw", true).await, 50);
}
