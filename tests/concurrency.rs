//! Real threads racing on one limiter: no permit is created by a race.

use limitcore::clock::{ManualClock, MonotonicClock};
use limitcore::{Gcra, Quota, RateLimiter, TokenBucket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const THREADS: usize = 8;

/// With a frozen clock, `THREADS` threads asking for one permit until refused are admitted
/// exactly `burst` times in total.
fn frozen_clock_admits_exactly_burst(limiter: Arc<dyn RateLimiter>, burst: u64) {
    let admitted = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (limiter, admitted, start) = (limiter.clone(), admitted.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                // Keep asking well past the first refusal: a late success would be a created permit.
                let mut refusals = 0;
                while refusals < 1_000 {
                    match limiter.try_acquire() {
                        Ok(()) => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => refusals += 1,
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(admitted.load(Ordering::Relaxed), burst);
    assert_eq!(limiter.snapshot().remaining, 0);
}

#[test]
fn gcra_frozen_clock_exact() {
    for burst in [1, 7, 10_000] {
        let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
        frozen_clock_admits_exactly_burst(
            Arc::new(Gcra::with_clock(q, ManualClock::new()).unwrap()),
            u64::from(burst),
        );
    }
}

#[test]
fn token_bucket_frozen_clock_exact() {
    for burst in [1, 7, 10_000] {
        let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
        frozen_clock_admits_exactly_burst(
            Arc::new(TokenBucket::with_clock(q, ManualClock::new()).unwrap()),
            u64::from(burst),
        );
    }
}

/// Mixed request sizes with a frozen clock: the total admitted never exceeds the burst, and
/// what is left is less than every size that was refused at the end.
#[test]
fn mixed_sizes_never_exceed_burst() {
    let q = Quota::per_second(1).unwrap().with_burst(1_000).unwrap();
    let limiters: [Arc<dyn RateLimiter>; 2] = [
        Arc::new(Gcra::with_clock(q, ManualClock::new()).unwrap()),
        Arc::new(TokenBucket::with_clock(q, ManualClock::new()).unwrap()),
    ];
    for limiter in limiters {
        let admitted = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS as u32)
            .map(|i| {
                let (limiter, admitted) = (limiter.clone(), admitted.clone());
                thread::spawn(move || {
                    for k in 0..10_000u32 {
                        let n = 1 + (k * 7 + i * 13) % 5;
                        if limiter.try_acquire_n(n).is_ok() {
                            admitted.fetch_add(u64::from(n), Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let left = u64::from(limiter.snapshot().remaining);
        assert_eq!(
            admitted.load(Ordering::Relaxed) + left,
            1_000,
            "permits created or lost"
        );
        assert!(
            left < 5,
            "{left} left though every thread kept asking for 1..=5"
        );
    }
}

/// On the real clock, many threads over ~200 ms are admitted no more than
/// `burst + elapsed / T + 1`, and (since they ask constantly) not much less.
///
/// The lower bound counts only the time someone was asking: a loaded machine can leave
/// every thread off its CPU at once, and while nobody asks a full limiter drops what it
/// would have granted. The threads record, on the limiter's clock, every stretch of more
/// than [`IDLE_NS`] between one attempt and the next (whoever made them), and that time is
/// taken out of the lower bound whole. A limiter that refused permits it had (a lost CAS
/// counted as a refusal, a wrong refill) still falls below it, since the threads asked
/// throughout the rest.
#[test]
fn real_clock_rate_holds_under_contention() {
    /// A stretch without attempts longer than this counts as idle (10 permits' time).
    const IDLE_NS: u64 = 1_000_000;
    let q = Quota::per_second(10_000).unwrap().with_burst(100).unwrap();
    let limiters: [Arc<dyn RateLimiter>; 2] = [
        Arc::new(Gcra::with_clock(q, MonotonicClock::new()).unwrap()),
        Arc::new(TokenBucket::with_clock(q, MonotonicClock::new()).unwrap()),
    ];
    for limiter in limiters {
        let admitted = Arc::new(AtomicU64::new(0));
        let clock_start = limiter.now();
        // The latest attempt's time (ns of the limiter's clock) and the idle time so far.
        let last = Arc::new(AtomicU64::new(clock_start));
        let idle = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (limiter, admitted) = (limiter.clone(), admitted.clone());
                let (last, idle) = (last.clone(), idle.clone());
                thread::spawn(move || {
                    let end = Instant::now() + Duration::from_millis(200);
                    while Instant::now() < end {
                        let now = limiter.now();
                        let before = last.fetch_max(now, Ordering::Relaxed);
                        if now > before + IDLE_NS {
                            idle.fetch_add(now - before, Ordering::Relaxed);
                        }
                        if limiter.try_acquire().is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let end = limiter.now();
        let elapsed = end - clock_start;
        let bound = 100 + elapsed / 100_000 + 1;
        let got = admitted.load(Ordering::Relaxed);
        assert!(
            got <= bound,
            "admitted {got} > bound {bound} over {elapsed} ns"
        );
        // The tail after the last attempt (the joins) is idle too.
        let last = last.load(Ordering::Relaxed);
        let idle = idle.load(Ordering::Relaxed) + end.saturating_sub(last);
        let asking = elapsed.saturating_sub(idle);
        let least = asking / 100_000 / 2;
        assert!(
            got >= least,
            "admitted only {got} in {asking} ns of asking (at least {least}; \
             {elapsed} ns in all, {idle} ns idle)"
        );
    }
}
