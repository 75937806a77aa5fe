//! The limiters at work: threads hammering one limiter on the real clock, and the same
//! quota decided at explicit times.
//!
//! ```text
//! cargo run --release --example limiters -- [QUOTA] [THREADS] [MILLIS]
//! cargo run --release --example limiters -- "1000/s burst 50" 8 500
//! ```

use limitcore::{Gcra, Quota, RateLimiter, TokenBucket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let quota: Quota = match args
        .next()
        .unwrap_or_else(|| "1000/s burst 50".into())
        .parse()
    {
        Ok(q) => q,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(8);
    let millis: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(500);

    println!(
        "quota {quota}: emission interval {:?}, burst {}",
        quota.emission_interval(),
        quota.burst()
    );
    println!("{threads} threads asking as fast as they can for {millis} ms\n");
    println!(
        "{:<13} {:>10} {:>12} {:>10} {:>14}",
        "limiter", "admitted", "promised ≤", "checks", "ns/check/thr"
    );

    let limiters: Vec<(&str, Arc<dyn RateLimiter>)> = vec![
        ("gcra", Arc::new(Gcra::new(quota).unwrap())),
        (
            "token-bucket",
            Arc::new(TokenBucket::new(quota).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2);
            })),
        ),
    ];
    for (name, limiter) in limiters {
        let admitted = Arc::new(AtomicU64::new(0));
        let checks = Arc::new(AtomicU64::new(0));
        let t0 = limiter.now();
        let wall = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (limiter, admitted, checks) = (&limiter, &admitted, &checks);
                s.spawn(move || {
                    let end = Instant::now() + Duration::from_millis(millis);
                    let (mut ok, mut n) = (0u64, 0u64);
                    while Instant::now() < end {
                        for _ in 0..64 {
                            ok += u64::from(limiter.try_acquire().is_ok());
                        }
                        n += 64;
                    }
                    admitted.fetch_add(ok, Ordering::Relaxed);
                    checks.fetch_add(n, Ordering::Relaxed);
                });
            }
        });
        let elapsed = limiter.now() - t0;
        let promised = u64::from(quota.burst()) + elapsed / quota.emission_interval_ns() + 1;
        let n = checks.load(Ordering::Relaxed);
        println!(
            "{:<13} {:>10} {:>12} {:>10} {:>14.1}",
            name,
            admitted.load(Ordering::Relaxed),
            promised,
            n,
            wall.elapsed().as_nanos() as f64 * threads as f64 / n as f64
        );
    }

    // Decisions at explicit times: a proxy that already stamped each request.
    println!("\nexplicit times (quota {quota}):");
    let limiter = Gcra::with_clock(quota, limitcore::clock::ManualClock::new()).unwrap();
    let step = quota.emission_interval_ns() / 2;
    for i in 0..6u64 {
        let at = i * step;
        let n = quota.burst().min(2);
        match limiter.try_acquire_n_at(n, at) {
            Ok(()) => println!(
                "  t = {at:>12} ns  take {n}: admitted ({} left)",
                limiter.snapshot_at(at).remaining
            ),
            Err(d) => println!("  t = {at:>12} ns  take {n}: {d}"),
        }
    }
}
