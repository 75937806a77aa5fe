//! The contended wait paths, for a before/after comparison of the waiting layer (issue 27):
//! two threads that wait on one limiter, on the real clock.
//!
//! ```text
//! cargo run --release --example waits -- [permits|budget|lanes] [SECONDS]
//! ```
//!
//! - `permits`: a concurrency limit of 1 shared by two threads that each take the permit,
//!   hold it for a short spin, and give it back: every other acquisition waits in the queue
//!   and is handed the permit by a release.
//! - `budget`: a budget of 1 M permits/s, burst 1000, taken 100 at a time by two threads:
//!   once the burst is spent every request waits (first come, first served) for its place.
//! - `lanes`: lanes of 64 MiB/s, burst 1 MiB: one thread takes 256 KiB in the low lane,
//!   the other 4 KiB in the top lane, so the low lane's requests queue in pieces.
//!
//! It prints the operations done, their rate, and the rate's share of the limit (for the
//! rate limits: 1.0 means the waits lose nothing to wake-up latency). Measure CPU and wall
//! time from outside (`farm-bench`; BENCHMARKS.md has the commands and figures).

use limitcore::concurrency::Permits;
use limitcore::{Budget, Lane, Lanes, LanesConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run `work` on two threads until `seconds` pass; the operations each counted.
fn two_threads(seconds: f64, work: impl Fn(usize, &AtomicBool) -> u64 + Sync) -> (u64, Duration) {
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let ops = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (work, stop) = (&work, &stop);
                s.spawn(move || work(i, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        // Relaxed: a flag read in a loop; nothing is published through it.
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    (ops, t0.elapsed())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("permits", String::as_str);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    match which {
        "permits" => {
            let permits = Permits::new(1).unwrap();
            let (ops, wall) = two_threads(seconds, |_, stop| {
                let mut ops = 0;
                while !stop.load(Ordering::Relaxed) {
                    let permit = permits.acquire_blocking(1).unwrap();
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    drop(permit);
                    ops += 1;
                }
                ops
            });
            let rate = ops as f64 / wall.as_secs_f64();
            println!("permits: {ops} acquisitions in {wall:.2?}: {rate:.0}/s (2 threads, limit 1)");
        }
        "budget" => {
            let budget = Budget::new("1000000/s burst 1000".parse().unwrap()).unwrap();
            let (ops, wall) = two_threads(seconds, |_, stop| {
                let mut permits = 0;
                while !stop.load(Ordering::Relaxed) {
                    budget.acquire_blocking(100).unwrap();
                    permits += 100;
                }
                permits
            });
            let rate = ops as f64 / wall.as_secs_f64();
            println!(
                "budget: {ops} permits in {wall:.2?}: {rate:.0}/s, {:.4} of the rate (2 threads, 100 a request)",
                rate / 1e6
            );
        }
        "lanes" => {
            let lanes = Arc::new(
                Lanes::new(LanesConfig::new("64MiB/s burst 1MiB".parse().unwrap())).unwrap(),
            );
            let (bytes, wall) = two_threads(seconds, |i, stop| {
                let (lane, size) = if i == 0 {
                    (Lane::LOW, 256 << 10)
                } else {
                    (Lane::USER, 4 << 10)
                };
                let mut bytes = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    lanes.acquire_blocking(lane, size).unwrap();
                    bytes += u64::from(size);
                }
                bytes
            });
            let rate = bytes as f64 / wall.as_secs_f64();
            println!(
                "lanes: {bytes} bytes in {wall:.2?}: {:.2} MiB/s, {:.4} of the rate (2 threads: low 256 KiB, top 4 KiB)",
                rate / f64::from(1 << 20),
                rate / f64::from(64 << 20)
            );
        }
        other => {
            eprintln!("unknown scenario {other:?}: permits, budget or lanes");
            std::process::exit(2);
        }
    }
}
