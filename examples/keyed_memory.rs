//! Bytes per key at 10^6 keys: `Keyed<u64, GcraRule>` against governor's keyed limiter, measured
//! by counting the heap bytes each allocates (through `stats_alloc`), and the fixed-memory
//! `KeyedSketch` (count-min sketch, 2^16 × 4 cells) for comparison.
//!
//! ```text
//! cargo run --release --example keyed_memory --features dashmap
//! ```
//!
//! Without `--features dashmap` the `DashMapStore` line is left out.

use limitcore::rules::GcraRule;
use limitcore::{Keyed, KeyedSketch, Quota};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::num::NonZeroU32;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const KEYS: u64 = 1_000_000;

/// Live heap bytes held after `build` has run (allocated minus freed).
fn live_bytes<T>(build: impl FnOnce() -> T) -> (T, i64) {
    let region = Region::new(GLOBAL);
    let value = build();
    let stats = region.change();
    (
        value,
        stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
            + stats.bytes_reallocated as i64,
    )
}

fn main() {
    let quota = Quota::per_second(10).unwrap();
    let (ours, ours_bytes) = live_bytes(|| {
        // No automatic sweep: the keys would go idle (and be evicted) while we insert them.
        let keyed: Keyed<u64, GcraRule> = Keyed::new(quota)
            .unwrap()
            .with_sweep_interval(std::time::Duration::ZERO);
        for k in 0..KEYS {
            let _ = keyed.try_acquire(&k);
        }
        keyed
    });
    let (on_dashmap, dashmap_bytes) = live_bytes(|| {
        let keyed: Keyed<u64, GcraRule, limitcore::DefaultClock, limitcore::DashMapStore<u64>> =
            Keyed::with_store(
                quota,
                limitcore::DefaultClock::new(),
                limitcore::DashMapStore::new(),
            )
            .unwrap()
            .with_sweep_interval(std::time::Duration::ZERO);
        for k in 0..KEYS {
            let _ = keyed.try_acquire(&k);
        }
        keyed
    });
    let (gov, gov_bytes) = live_bytes(|| {
        let gov =
            governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(10).unwrap()));
        for k in 0..KEYS {
            let _ = gov.check_key(&k);
        }
        gov
    });
    let (sketch, sketch_bytes) = live_bytes(|| {
        let sketch: KeyedSketch<u64> = KeyedSketch::new(quota, 1 << 16, 4).unwrap();
        for k in 0..KEYS {
            let _ = sketch.try_acquire(&k);
        }
        sketch
    });
    assert_eq!(ours.len() as u64, KEYS);
    assert_eq!(gov.len() as u64, KEYS);
    println!("keys: {KEYS} (u64 keys, GCRA state)");
    println!(
        "limitcore Keyed<u64, GcraRule> (papaya): {:.1} bytes/key",
        ours_bytes as f64 / KEYS as f64
    );
    {
        assert_eq!(on_dashmap.len() as u64, KEYS);
        println!(
            "limitcore Keyed<u64, GcraRule> (dashmap): {:.1} bytes/key",
            dashmap_bytes as f64 / KEYS as f64
        );
    }
    println!(
        "governor keyed (dashmap):            {:.1} bytes/key",
        gov_bytes as f64 / KEYS as f64
    );
    println!(
        "ratio limitcore / governor:          {:.2}",
        ours_bytes as f64 / gov_bytes as f64
    );
    // The heap part of the sketch (its cells and row parameters); `memory_bytes` adds the
    // struct itself. Fixed at construction: the same for 10 keys or 10^9.
    println!(
        "limitcore KeyedSketch<u64> 2^16 x 4:  {:.1} bytes/key ({} bytes in all, eps {:.1e}, delta {:.3})",
        sketch_bytes as f64 / KEYS as f64,
        sketch.memory_bytes(),
        sketch.epsilon(),
        sketch.delta()
    );
}
