//! What the benchmarks share: one operation run on several threads at once.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// `threads` threads, started together, each make `iters` calls of `op` (given the thread's
/// index, from 0) on whatever it shares; the sample's time is the wall time of the slowest
/// thread, so the time per iteration is per call per thread (total throughput is threads ÷
/// time). Generic, so that an operation's own code is inlined into the loop (a contender
/// behind a `dyn Fn` keeps its one indirect call).
pub(crate) fn run_threads<R>(
    op: &(impl Fn(usize) -> R + Sync),
    threads: usize,
    iters: u64,
) -> Duration {
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        black_box(op(t));
                    }
                    t0.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}
