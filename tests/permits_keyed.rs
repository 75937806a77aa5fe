//! Keyed concurrency limits (`KeyedPermits`) and partitions (`Partitioned`) on real
//! threads: per-key limits under eviction races, bounded memory, pinned limits, and the
//! partitioned bound.

use limitcore::concurrency::{AcquireError, KeyedPermits, Partitioned};
use limitcore::PapayaStore;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn keys_are_isolated_and_idle_keys_evicted() {
    let keyed: KeyedPermits<String> = KeyedPermits::new(2).unwrap();
    let a = keyed.try_acquire("a", 2).unwrap();
    assert!(matches!(
        keyed.try_acquire("a", 1),
        Err(AcquireError::Full { .. })
    ));
    let b = keyed.try_acquire("b", 1).unwrap();
    assert_eq!(
        (keyed.in_flight("a"), keyed.in_flight("b"), keyed.len()),
        (2, 1, 2)
    );
    assert_eq!(keyed.evict_idle(), 0, "both busy");
    drop(b);
    assert_eq!(keyed.evict_idle(), 1);
    assert_eq!(
        (keyed.len(), keyed.in_flight("b"), keyed.limit("b")),
        (1, 0, 2)
    );
    drop(a);
    assert_eq!(keyed.evict_idle(), 1);
    assert!(keyed.is_empty());
}

#[test]
fn a_key_limit_is_pinned_until_reset() {
    let keyed: KeyedPermits<u64> = KeyedPermits::new(2).unwrap();
    keyed.reconfigure_key(7, 5).unwrap();
    assert_eq!(keyed.evict_idle(), 0, "pinned: never evicted");
    assert_eq!(keyed.limit(&7), 5);
    let held = keyed.try_acquire(&7, 5).unwrap();
    // A cut takes effect as permits come back.
    keyed.reconfigure_key(7, 1).unwrap();
    assert_eq!(keyed.limit(&7), 1);
    assert!(keyed.try_acquire(&7, 1).is_err());
    drop(held);
    assert!(keyed.try_acquire(&7, 1).is_ok());
    assert!(keyed.reconfigure_key(7, 0).is_err());
    keyed.reset_limit(&7);
    assert_eq!(keyed.limit(&7), 2);
    assert_eq!(keyed.evict_idle(), 1);
    assert_eq!(keyed.limit(&7), 2, "an unknown key has the default");
}

#[test]
fn max_keys_sends_new_keys_to_one_shared_overflow_limit() {
    let keyed: KeyedPermits<u32> = KeyedPermits::new(1).unwrap().with_max_keys(2);
    let _a = keyed.try_acquire(&1, 1).unwrap();
    let _b = keyed.try_acquire(&2, 1).unwrap();
    // Keys 3 and 4 share the overflow limit of 1.
    let c = keyed.try_acquire(&3, 1).unwrap();
    assert!(keyed.try_acquire(&4, 1).is_err());
    assert_eq!(keyed.len(), 2, "no existing key dropped, no new entry");
    drop(c);
    assert!(keyed.try_acquire(&4, 1).is_ok());
}

#[test]
fn blocking_and_async_waits_per_key() {
    let keyed = Arc::new(
        KeyedPermits::<u32>::new(1)
            .unwrap()
            .with_backlog(4)
            .unwrap(),
    );
    let held = keyed.try_acquire(&1, 1).unwrap();
    let waiter = {
        let keyed = keyed.clone();
        thread::spawn(move || keyed.acquire_blocking(&1, 1).map(|p| p.n()))
    };
    thread::sleep(Duration::from_millis(20));
    // Another key is not held up by key 1's waiter.
    assert!(keyed.try_acquire(&2, 1).is_ok());
    drop(held);
    assert_eq!(waiter.join().unwrap(), Ok(1));
    assert_eq!(
        keyed.acquire_blocking(&1, 2).unwrap_err(),
        AcquireError::ExceedsLimit {
            requested: 2,
            limit: 1
        }
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let first = keyed.acquire(&9, 1).await.unwrap();
        let second = keyed.acquire(&9, 1);
        drop(first);
        assert_eq!(second.await.unwrap().n(), 1);
    });
}

/// Threads on a few keys while another thread keeps evicting: per key, never more than its
/// limit held (a shadow count per key), and no key ever ends with permits held.
fn eviction_races<S: limitcore::Store<u8> + Default>() {
    const THREADS: usize = 6;
    const LIMIT: u32 = 2;
    let keyed = Arc::new(KeyedPermits::<u8, S>::with_store(LIMIT, S::default()).unwrap());
    let shadow: Arc<HashMap<u8, AtomicU32>> =
        Arc::new((0..3).map(|k| (k, AtomicU32::new(0))).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS + 1));
    // Keys the evictor has removed so far.
    let evictions = Arc::new(AtomicUsize::new(0));
    let evictor = {
        let (keyed, stop, start) = (keyed.clone(), stop.clone(), start.clone());
        let evictions = evictions.clone();
        thread::spawn(move || {
            start.wait();
            while !stop.load(Ordering::Relaxed) {
                evictions.fetch_add(keyed.evict_idle(), Ordering::SeqCst);
            }
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (keyed, shadow, start) = (keyed.clone(), shadow.clone(), start.clone());
            let evictions = evictions.clone();
            thread::spawn(move || {
                start.wait();
                // 20 000 attempts, and on until the evictor has removed a key while this
                // thread runs: on a loaded machine the evictor may not get a CPU before the
                // 20 000 are done (the 10 s bound is for one that never evicts).
                let until = Instant::now() + Duration::from_secs(10);
                for i in 0u32.. {
                    if i >= 20_000
                        && (evictions.load(Ordering::SeqCst) > 0 || Instant::now() >= until)
                    {
                        break;
                    }
                    let key = ((i as usize + t) % 3) as u8;
                    if let Ok(permit) = keyed.try_acquire(&key, 1) {
                        let held = shadow[&key].fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(held <= LIMIT, "key {key}: {held} held");
                        shadow[&key].fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    evictor.join().unwrap();
    assert!(
        evictions.load(Ordering::SeqCst) > 0,
        "the evictor never removed a key: the race was not exercised"
    );
    for key in 0..3u8 {
        assert_eq!(keyed.in_flight(&key), 0);
    }
    keyed.evict_idle();
    assert!(keyed.is_empty());
}

#[test]
fn eviction_races_on_dashmap() {
    eviction_races::<limitcore::DashMapStore<u8>>();
}

#[test]
fn eviction_races_on_papaya() {
    eviction_races::<PapayaStore<u8>>();
}

#[test]
fn automatic_sweeps_bound_the_map() {
    let keyed: KeyedPermits<u64> = KeyedPermits::new(1).unwrap();
    for key in 0..100_000u64 {
        drop(keyed.try_acquire(&key, 1).unwrap());
    }
    // Sweeps run every max(1024, keys) new keys and remove the idle ones: the map holds at
    // most the keys seen since the last sweep, never all 100 000.
    assert!(keyed.len() <= 2 * 1024 + 64, "{} keys kept", keyed.len());
}

#[test]
fn partitions_keep_their_bound_under_threads() {
    const LIMIT: u32 = 4;
    const SHARES: [u32; 3] = [2, 1, 1];
    // Shares 0.5 / 0.25 / 0.25 of 4: guaranteed 2, 1 and 1. Six threads each try to hold
    // two permits at once (twelve wanted): the bound, limit + Σ shares = 8, must hold.
    let limit = Arc::new(Partitioned::new(LIMIT, &[0.5, 0.25, 0.25]).unwrap());
    // Shadow counts: all permits, and per partition those granted by the guaranteed path
    // (a grant that left more than the limit in flight can only be one).
    let total = Arc::new(AtomicU32::new(0));
    let guaranteed: Arc<Vec<AtomicU32>> = Arc::new((0..3).map(|_| AtomicU32::new(0)).collect());
    let over = Arc::new(AtomicU32::new(0));
    let start = Arc::new(Barrier::new(6));
    let workers: Vec<_> = (0..6)
        .map(|t| {
            let (limit, total, guaranteed, over, start) = (
                limit.clone(),
                total.clone(),
                guaranteed.clone(),
                over.clone(),
                start.clone(),
            );
            thread::spawn(move || {
                start.wait();
                let partition = t % 3;
                let mut held = Vec::new();
                for i in 0..40_000 {
                    if let Ok(permit) = limit.try_acquire(partition, 1) {
                        let now = total.fetch_add(1, Ordering::SeqCst) + 1;
                        // The documented bound: limit + Σ guaranteed shares.
                        assert!(now <= LIMIT + 4, "{now} in flight");
                        let by_share = permit.in_flight_at_grant() > LIMIT;
                        if by_share {
                            over.fetch_add(1, Ordering::Relaxed);
                            let mine = guaranteed[partition].fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(mine <= SHARES[partition], "partition {partition}: {mine}");
                        }
                        held.push((permit, by_share));
                    }
                    if held.len() == 2 || (i % 3 == 0 && !held.is_empty()) {
                        for (permit, by_share) in held.drain(..) {
                            if by_share {
                                guaranteed[partition].fetch_sub(1, Ordering::SeqCst);
                            }
                            total.fetch_sub(1, Ordering::SeqCst);
                            drop(permit);
                        }
                    }
                }
                for (permit, by_share) in held.drain(..) {
                    if by_share {
                        guaranteed[partition].fetch_sub(1, Ordering::SeqCst);
                    }
                    total.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(limit.in_flight(), 0);
    assert!((0..3).all(|i| limit.partition_in_flight(i) == 0));
    // Whether the threads above ever took the guaranteed path depends on how the OS
    // interleaved them (on 2 cores, sometimes never), so the path itself is shown here at
    // once: with the shared limit filled by partition 2, partition 0 still gets its two
    // guaranteed permits, each past the limit, and no third.
    let mut filler = Vec::new();
    while let Ok(permit) = limit.try_acquire(2, 1) {
        filler.push(permit);
    }
    assert!(
        limit.in_flight() >= LIMIT,
        "{} in flight",
        limit.in_flight()
    );
    let share: Vec<_> = (0..SHARES[0])
        .map(|_| limit.try_acquire(0, 1).expect("a guaranteed permit"))
        .collect();
    assert!(share.iter().all(|p| p.in_flight_at_grant() > LIMIT));
    assert!(
        limit.try_acquire(0, 1).is_err(),
        "partition 0 past its share"
    );
    assert!(limit.in_flight() <= LIMIT + SHARES.iter().sum::<u32>());
    eprintln!(
        "guaranteed grants under threads: {}",
        over.load(Ordering::Relaxed)
    );
}

#[test]
fn keyed_limits_are_shared_between_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<KeyedPermits<String>>();
    send_sync::<KeyedPermits<u64, PapayaStore<u64>>>();
}
