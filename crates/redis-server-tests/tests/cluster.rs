//! The same API on a real 3-master Redis Cluster started on loopback ports: the scripts
//! against the reference model on keys spread over the slots, a tenant's limits in one
//! slot through its hash tag, and a leased limiter (its fair leases' hash in its key's
//! slot, with a hash tag or without).

use redis_server_tests as common;

use limitcore::reference::GcraModel;
use limitcore::{KeyedRateLimiter, Quota};
use limitcore_redis::fair::fair_key;
use limitcore_redis::{
    LeaseConfig, LeasedLimiter, Policy, Redis, RedisAll, RedisGcra, RedisMicros,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_masters_same_api() {
    let cluster = common::cluster();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redis = Redis::connect_cluster(&urls, common::config())
        .await
        .unwrap();

    // The GCRA script against the model on 24 keys, which land on all three masters.
    let q: Quota = "100/s burst 5".parse().unwrap();
    let limit = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
    let keys: Vec<String> = (0..24).map(|i| format!("user-{i}")).collect();
    let mut models: Vec<GcraModel> = keys.iter().map(|_| GcraModel::new(q)).collect();
    let mut rng = StdRng::seed_from_u64(0xc1);
    let mut now = 1_750_000_000_000_000u64;
    for _ in 0..600 {
        now += rng.gen_range(0..15_000);
        let i = rng.gen_range(0..keys.len());
        let n = rng.gen_range(0..=6);
        let got = limit
            .try_decide_at(&keys[i], n, RedisMicros::new(now))
            .await
            .unwrap();
        assert_eq!(got.decision.result, models[i].acquire(n, now * 1_000));
        assert_eq!(got.decision.state, models[i].snapshot(now * 1_000));
    }
    let slots: std::collections::BTreeSet<u32> = keys
        .iter()
        .map(|k| {
            let reply = cluster.nodes()[0]
                .command(&["CLUSTER", "KEYSLOT", &limit.redis_key(k)])
                .unwrap();
            reply.trim().trim_start_matches(':').parse().unwrap()
        })
        .collect();
    // `redis-cli --cluster create` gives the masters 0-5460, 5461-10922, 10923-16383.
    let masters: std::collections::BTreeSet<u32> = slots
        .iter()
        .map(|&s| u32::from(s > 5_460) + u32::from(s > 10_922))
        .collect();
    assert_eq!(masters.len(), 3, "keys on every master: slots {slots:?}");

    // Several limits of one tenant in one script: one slot, thanks to the hash tag.
    let all = RedisAll::new(
        redis.clone(),
        &[
            ("s", "5/s".parse().unwrap()),
            ("m", "8/min".parse().unwrap()),
        ],
        Policy::FailClosed,
    )
    .unwrap();
    let mut admitted = 0;
    for _ in 0..10 {
        if all
            .try_decide("acme", 1)
            .await
            .unwrap()
            .decision
            .is_admitted()
        {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5, "the per-second burst, all or nothing");

    // The fair-share hash of a leased key sits in the key's own slot, whether the key has a
    // hash tag or not (the fair lease script touches both in one call).
    let slot = |key: &str| -> u32 {
        let reply = cluster.nodes()[0]
            .command(&["CLUSTER", "KEYSLOT", key])
            .unwrap();
        reply.trim().trim_start_matches(':').parse().unwrap()
    };
    for key in ["tenant-x", "{acme}:api", "user-7"] {
        let tat = limit.redis_key(key);
        assert_eq!(slot(&tat), slot(&fair_key(&tat)), "{tat}");
    }
    let tagged =
        LeasedLimiter::new(redis.clone(), q, LeaseConfig::new(4), Policy::FailClosed).unwrap();
    assert!(tagged.acquire("{acme}:api", 1).await.is_admitted());

    // The leased limiter on the cluster.
    let leased =
        LeasedLimiter::new(redis.clone(), q, LeaseConfig::new(4), Policy::FailClosed).unwrap();
    let started = Instant::now();
    assert!(leased.acquire("tenant-x", 1).await.is_admitted());
    let until = Instant::now() + Duration::from_millis(300);
    let mut n = 1;
    while Instant::now() < until {
        if leased.try_acquire("tenant-x").is_ok() {
            n += 1;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    // About 300 ms of 100/s with burst 5 and L = 4: at most 5 + 30 + 4, over the time the
    // admissions really took (a loaded machine stretches it, and 10 ms more admit one more).
    let most = 5 + started.elapsed().as_millis().div_ceil(10) as u32 + 4;
    assert!((5..=most).contains(&n), "{n} admitted, at most {most}");
    assert!(leased.leases() > 1);
}
