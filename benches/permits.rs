//! The concurrency limit's fast path against `tokio::sync::Semaphore`, in the same run:
//! a grant and its release (`Permits::try_acquire(1)` and dropping the permit; tokio's
//! `try_acquire` and dropping its permit) on 1 and 2 threads sharing one limit, never full.
//!
//! ```text
//! cargo bench --bench permits
//! ```
//!
//! Groups:
//! - `permits/acquire-release`: the time per acquire + release *per thread* (as
//!   `benches/limiters.rs`' thread groups); total throughput is threads ÷ time.
//! - `permits/acquire-release-owned`: the same with an owned permit (`try_acquire_owned`:
//!   an `Arc` clone and drop more) beside tokio's `try_acquire_owned`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use limitcore::concurrency::Permits;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Permits enough that two threads never find the limit full.
const LIMIT: u32 = 1 << 20;

/// One contender in a group: 1 and 2 threads.
fn bench<F: Fn() -> bool + Sync>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    op: F,
) {
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
            b.iter_custom(|iters| common::run_threads(&|_| op(), threads, iters))
        });
    }
}

fn acquire_release(c: &mut Criterion) {
    let permits = Arc::new(Permits::new(LIMIT).unwrap());
    let semaphore = Arc::new(Semaphore::new(LIMIT as usize));

    let mut g = c.benchmark_group("permits/acquire-release");
    bench(&mut g, "limitcore", || permits.try_acquire(1).is_ok());
    bench(&mut g, "tokio", || semaphore.try_acquire().is_ok());
    // The floor the issue measured: a bare CAS grant on a count and a `fetch_sub` release,
    // no limit in the word, no queue, no permit type.
    let bare = AtomicU64::new(0);
    bench(&mut g, "bare-cas", || {
        let mut count = bare.load(Ordering::Relaxed);
        loop {
            if count >= u64::from(LIMIT) {
                return false;
            }
            match bare.compare_exchange_weak(count, count + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(actual) => count = actual,
            }
        }
        bare.fetch_sub(1, Ordering::Relaxed);
        true
    });
    g.finish();

    let mut g = c.benchmark_group("permits/acquire-release-owned");
    bench(&mut g, "limitcore", || permits.try_acquire_owned(1).is_ok());
    bench(&mut g, "tokio", || {
        semaphore.clone().try_acquire_owned().is_ok()
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = acquire_release
}
criterion_main!(benches);
