//! The scripts against the core's reference models, on a real redis-server: thousands of
//! random steps at explicit times (µs), every decision, `retry_after` and state compared.
//! Then the contract's edges on Redis's own clock: writes, TTLs, bounds, NOSCRIPT.

use redis_server_tests as common;

use limitcore::reference::{BudgetModel, GcraModel, SlidingLogModel};
use limitcore::{BudgetConfig, Denied, Quota, Snapshot};
use limitcore_redis::{gcra_micros, Policy, RedisAll, RedisGcra, RedisMicros, RedisSlidingLog};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use std::time::Duration;

/// Around now, in µs since the epoch (any start works; this one is realistic).
const START_US: u64 = 1_750_000_000_000_000;

fn quota(count: u32, period: Duration, burst: u32) -> Quota {
    Quota::new_with_burst(count, period, burst).unwrap()
}

/// The next explicit time: mostly forwards by up to a few intervals, sometimes the same
/// instant, sometimes backwards (a stale reading must only be stricter).
fn step(rng: &mut StdRng, now: u64, unit_us: u64) -> u64 {
    match rng.gen_range(0..20) {
        0..=2 => now,
        3 => now.saturating_sub(rng.gen_range(0..=unit_us)),
        4 => now + rng.gen_range(0..=unit_us * 20),
        _ => now + rng.gen_range(0..=unit_us * 2),
    }
}

fn size(rng: &mut StdRng, capacity: u32) -> u32 {
    match rng.gen_range(0..30) {
        0 => 0,
        1 => capacity + 1,
        2 => capacity,
        _ => rng.gen_range(1..=capacity.min(4)),
    }
}

#[tokio::test]
async fn gcra_script_matches_the_reference_model() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let quotas = [
        quota(10, Duration::from_secs(1), 3),       // T = 100 ms
        quota(1000, Duration::from_secs(1), 50),    // T = 1 ms
        quota(1, Duration::from_micros(1), 5),      // T = 1 µs: the resolution itself
        quota(10, Duration::from_secs(86_400), 10), // T = 2.4 h
        quota(3, Duration::from_millis(3), 1),      // burst 1: a pure pacer
    ];
    let mut steps = 0;
    for (i, q) in quotas.into_iter().enumerate() {
        let limit = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
        let (t_us, _) = gcra_micros(&q).unwrap();
        assert_eq!(t_us * 1_000, q.emission_interval_ns(), "whole-µs interval");
        let mut model = GcraModel::new(q);
        let mut rng = StdRng::seed_from_u64(0x5eed + i as u64);
        let key = format!("diff-{i}");
        let mut now = START_US;
        for _ in 0..1_500 {
            now = step(&mut rng, now, t_us);
            let n = size(&mut rng, q.burst());
            let got = limit
                .try_decide_at(&key, n, RedisMicros::new(now))
                .await
                .unwrap();
            let want = model.acquire(n, now * 1_000);
            assert_eq!(got.decision.result, want, "quota {q}, n {n}, now {now}");
            assert_eq!(got.server_time, RedisMicros::new(now));
            assert_eq!(
                got.decision.state,
                model.snapshot(now * 1_000),
                "quota {q}, n {n}, now {now}"
            );
            assert_eq!(got.granted, if want.is_ok() { n } else { 0 });
            steps += 1;
        }
    }
    assert_eq!(steps, 7_500);
}

/// A request size for a limit of capacity `capacity` (burst `burst`): mostly small, often
/// above the burst (oversized, under debt), sometimes at or past the capacity.
fn budget_size(rng: &mut StdRng, burst: u32, capacity: u32) -> u32 {
    match rng.gen_range(0..20) {
        0 => 0,
        1 => capacity + 1,
        2 => capacity,
        3..=5 => rng.gen_range(burst.saturating_add(1).min(capacity)..=capacity),
        _ => rng.gen_range(1..=burst.min(4)),
    }
}

/// A charge size: small, a burst's worth, past the whole room, or `u32::MAX` (whose
/// product with the interval no double holds: the script must cut it first).
fn charge_size(rng: &mut StdRng, capacity: u32) -> u32 {
    match rng.gen_range(0..20) {
        0 => 0,
        1 => u32::MAX,
        2 => capacity.saturating_mul(2),
        3..=5 => rng.gen_range(1..=capacity),
        _ => rng.gen_range(1..=4),
    }
}

/// The debt policy and forced charges: decisions (oversized ones included), charges and
/// leases (`take_up_to`) at random explicit times, every answer against the core's
/// `BudgetModel` (the budget's reference, whose whole-ns behaviour on a whole-µs interval
/// the script must equal, in µs): admission or the exact refusal, the charge's count,
/// shortfall and wait, the state left.
#[tokio::test]
async fn gcra_script_with_debt_and_charges_matches_the_budget_model() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let limits = [
        // (quota, debt): T = 100 ms with 350 ms of debt (capacity ⌊650/100⌋ = 6).
        (
            quota(10, Duration::from_secs(1), 3),
            Duration::from_millis(350),
        ),
        (
            quota(1000, Duration::from_secs(1), 50),
            Duration::from_millis(120),
        ),
        // T = 1 µs with a debt of 7 µs: capacity 12.
        (
            quota(1, Duration::from_micros(1), 5),
            Duration::from_micros(7),
        ),
        // T = 2.4 h, one day of debt: u32::MAX charges on an interval of 8.64e9 µs.
        (
            quota(10, Duration::from_secs(86_400), 10),
            Duration::from_secs(86_400),
        ),
        // A pure pacer with debt: burst 1, 5.5 intervals of debt.
        (
            quota(3, Duration::from_millis(3), 1),
            Duration::from_micros(5_500),
        ),
        // No debt: the charges alone (saturating at an empty bucket).
        (quota(100, Duration::from_secs(1), 7), Duration::ZERO),
    ];
    let (mut decided, mut charged, mut leased, mut oversized, mut short) = (0, 0, 0, 0, 0);
    for (i, (q, debt)) in limits.into_iter().enumerate() {
        let limit = RedisGcra::new(redis.clone(), q, Policy::FailClosed)
            .unwrap()
            .with_max_debt(debt)
            .unwrap();
        let (t_us, _) = gcra_micros(&q).unwrap();
        assert_eq!(t_us * 1_000, q.emission_interval_ns(), "whole-µs interval");
        let mut model = BudgetModel::new(BudgetConfig::new(q).max_debt(debt));
        let capacity = limit.capacity();
        let expected_capacity = (u64::from(q.burst()) * t_us + debt.as_micros() as u64) / t_us;
        assert_eq!(u64::from(capacity), expected_capacity, "quota {q}");
        let mut rng = StdRng::seed_from_u64(0xde87 + i as u64);
        let key = format!("budget-{i}");
        let mut now = START_US;
        for _ in 0..1_200 {
            now = step(&mut rng, now, t_us);
            let ns = now * 1_000;
            let at = format!("quota {q}, debt {debt:?}, now {now}");
            match rng.gen_range(0..10) {
                0..=2 => {
                    let n = charge_size(&mut rng, capacity);
                    let got = limit
                        .try_charge_at(&key, n, RedisMicros::new(now))
                        .await
                        .unwrap();
                    let want = model.charge(n, ns);
                    assert_eq!(got.charged, want, "charge {n}, {at}");
                    assert_eq!(got.state, model.snapshot(ns), "charge {n}, {at}");
                    assert_eq!(got.server_time, RedisMicros::new(now));
                    charged += 1;
                    short += usize::from(want.shortfall > 0);
                }
                3 => {
                    let want_cells = rng.gen_range(1..=q.burst());
                    let got = limit
                        .try_take_up_to_at(&key, want_cells, RedisMicros::new(now))
                        .await
                        .unwrap();
                    let taken = model.take_up_to(want_cells, ns);
                    assert_eq!(got.granted, taken, "lease {want_cells}, {at}");
                    if taken == 0 {
                        // Refused: the exact wait for one cell (the model refuses, unchanged).
                        assert_eq!(got.decision.result, model.acquire(1, ns), "{at}");
                    }
                    assert_eq!(got.decision.state, model.snapshot(ns), "lease, {at}");
                    leased += 1;
                }
                _ => {
                    let n = budget_size(&mut rng, q.burst(), capacity);
                    let got = limit
                        .try_decide_at(&key, n, RedisMicros::new(now))
                        .await
                        .unwrap();
                    let want = model.acquire(n, ns);
                    assert_eq!(got.decision.result, want, "n {n}, {at}");
                    assert_eq!(got.decision.state, model.snapshot(ns), "n {n}, {at}");
                    assert_eq!(got.granted, if want.is_ok() { n } else { 0 });
                    if n > q.burst() && want.is_ok() {
                        oversized += 1;
                    }
                    decided += 1;
                }
            }
        }
    }
    assert!(
        decided > 3_000 && charged > 1_500 && leased > 400,
        "{decided} {charged} {leased}"
    );
    assert!(
        oversized > 25,
        "oversized requests admitted into debt: {oversized}"
    );
    assert!(short > 300, "charges that saturated: {short}");
}

/// The debt's edges on Redis's own clock: an oversized request waits for a full key (the
/// exact wait), then leaves it in debt that later requests wait out; a charge saturates at
/// `burst·T + D` and says so; configurations whose sums could pass 2^52 µs are refused by
/// Rust and by the script.
///
/// Every wait is checked against the time that passed between the calls on Redis's clock
/// (their `server_time`s): what a loaded machine adds between two calls comes off the wait
/// to the microsecond, and a key it let fill up again (a whole window later) is admitted.
#[tokio::test]
async fn debt_admits_from_a_full_key_and_refuses_what_could_pass_two_to_the_52() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let ms = Duration::from_millis;
    let since = |later: RedisMicros, earlier: RedisMicros| later.saturating_duration_since(earlier);
    // 10/s burst 2, 500 ms of debt: capacity 7.
    let limit = common::gcra(&redis, "10/s burst 2")
        .with_max_debt(ms(500))
        .unwrap();
    assert_eq!(limit.capacity(), 7);
    assert_eq!(limit.max_debt(), ms(500));
    let first = limit.try_decide("k", 1).await.unwrap();
    assert!(first.decision.is_admitted());
    // Not full: the oversized request waits until it is (100 ms after the first admission),
    // and writes nothing.
    let before = get(&redis, &limit.redis_key("k")).await;
    let a = limit.try_decide("k", 5).await.unwrap();
    let between = since(a.server_time, first.server_time);
    match a.decision.retry_after() {
        Some(wait) => {
            assert!(
                wait <= ms(100) && wait + between >= ms(100),
                "{wait:?}, {between:?} on"
            );
            assert_eq!(get(&redis, &limit.redis_key("k")).await, before);
            tokio::time::sleep(wait).await;
        }
        // Full again, a window after the first: admitted at once, as below.
        None => assert!(
            between >= ms(100),
            "admitted {between:?} after the first: {a:?}"
        ),
    }
    // From a full key, into debt: 5 permits, 500 ms of backlog.
    let b = if a.decision.is_admitted() {
        a
    } else {
        limit.try_decide("k", 5).await.unwrap()
    };
    assert!(b.decision.is_admitted(), "{b:?}");
    assert_eq!(b.decision.state, Snapshot::new(0, ms(500)));
    // In debt: one permit waits for 400 ms of it to be repaid (less what passed since).
    let c = limit.try_decide("k", 1).await.unwrap();
    let between = since(c.server_time, b.server_time);
    let wait = c.decision.retry_after().unwrap();
    assert!(
        wait <= ms(400) && wait + between >= ms(400),
        "{wait:?}, {between:?} on"
    );
    assert_eq!(
        limit.try_decide("k", 8).await.unwrap().decision.result,
        Err(Denied::ExceedsCapacity { capacity: 7 })
    );
    // A charge fills up to 700 ms of backlog and reports the rest: 2 permits at once after
    // `b` (500 ms of backlog), one more for each 100 ms repaid since.
    let charge = limit.try_charge("k", 10).await.unwrap();
    let repaid = since(charge.server_time, b.server_time);
    let most = 2 + (repaid.as_millis() / 100) as u32;
    assert!(
        (1..=most).contains(&charge.charged.charged),
        "{charge:?}, {repaid:?} after the debt"
    );
    assert_eq!(charge.charged.charged + charge.charged.shortfall, 10);
    assert!(charge.charged.wait > ms(500), "{charge:?}");
    // A key lives as long as its debt: over 600 ms of backlog after the charge, less the
    // time until PTTL is read (on the wall clock, Redis's `TIME` on this machine; 2 ms for
    // the truncations to whole ms).
    let ttl = pttl(&redis, &limit.redis_key("k")).await;
    let read = common::wall_us().saturating_sub(charge.server_time.as_micros()) / 1_000;
    assert!(
        ttl <= 700 && ttl as u64 + read + 2 >= 600,
        "PTTL {ttl}, read {read} ms after the charge"
    );

    // Rust refuses a debt that would pass 2^52 µs with the burst span...
    let day = common::gcra(&redis, "1/d burst 1");
    assert!(day.with_max_debt(Duration::from_micros(1 << 52)).is_err());
    let day = common::gcra(&redis, "1/d burst 1");
    let most = Duration::from_micros((1 << 52) - 86_400_000_000);
    assert!(day.with_max_debt(most).is_ok());
    // ...and so does the script, called directly; and an unknown operation.
    let eval = |t: u64, burst: u64, debt: u64, op: &'static str| {
        let redis = redis.clone();
        async move {
            redis
                .command(
                    redis::cmd("EVAL")
                        .arg(limitcore_redis::scripts::gcra_source())
                        .arg(1)
                        .arg("edge")
                        .arg(t)
                        .arg(burst)
                        .arg(debt)
                        .arg(op)
                        .arg("")
                        .arg(1),
                )
                .await
        }
    };
    // burst·T = 2^51 µs: a debt of 2^51 µs reaches 2^52 exactly, one µs more passes it.
    assert!(eval(1 << 40, 1 << 11, 1 << 51, "0").await.is_ok());
    assert!(eval(1 << 40, 1 << 11, (1 << 51) + 1, "0").await.is_err());
    assert!(eval(1 << 40, 1 << 12, 1 << 53, "2").await.is_err());
    // Operations 0 to 4 exist (3 records a charge as debt, 4 settles); 9 does not.
    assert!(eval(10, 10, 0, "9").await.is_err());
}

/// Batches (`try_decide_many_at`): the requests on each key decided in order at one
/// instant, as the reference model decides them one after another; keys interleaved.
#[tokio::test]
async fn gcra_batches_match_the_reference_model() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let q = quota(1000, Duration::from_secs(1), 20);
    let limit = RedisGcra::new(redis.clone(), q, Policy::FailClosed).unwrap();
    let (t_us, _) = gcra_micros(&q).unwrap();
    let keys = ["batch-a", "batch-b", "batch-c"];
    let mut models: Vec<GcraModel> = keys.iter().map(|_| GcraModel::new(q)).collect();
    let mut rng = StdRng::seed_from_u64(0xba7c);
    let mut now = START_US;
    let mut decided = 0;
    for _ in 0..400 {
        now = step(&mut rng, now, t_us);
        let batch: Vec<(usize, u32)> = (0..rng.gen_range(1..=8))
            .map(|_| (rng.gen_range(0..keys.len()), size(&mut rng, q.burst())))
            .collect();
        let requests: Vec<(&str, u32)> = batch.iter().map(|&(k, n)| (keys[k], n)).collect();
        let got = limit
            .try_decide_many_at(&requests, RedisMicros::new(now))
            .await
            .unwrap();
        assert_eq!(got.len(), batch.len());
        for (answer, &(k, n)) in got.iter().zip(&batch) {
            let want = models[k].acquire(n, now * 1_000);
            assert_eq!(answer.decision.result, want, "key {k}, n {n}, now {now}");
            assert_eq!(answer.decision.state, models[k].snapshot(now * 1_000));
            assert_eq!(answer.granted, if want.is_ok() { n } else { 0 });
            assert_eq!(answer.server_time, RedisMicros::new(now));
            decided += 1;
        }
    }
    assert!(decided > 1_000, "{decided} decisions");
    // One script call per key of a batch: a batch on one key is one command.
    let before = redis.commands();
    let answers = limit.try_decide_many(&[("one", 1); 16]).await.unwrap();
    assert_eq!(redis.commands() - before, 1);
    assert!(answers.iter().all(|a| a.decision.is_admitted()));
    assert_eq!(answers[15].decision.state.remaining, 4);
}

#[tokio::test]
async fn sliding_log_script_matches_the_reference_model() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let quotas = [
        Quota::new(3, Duration::from_secs(1)).unwrap(),
        Quota::new(10, Duration::from_millis(100)).unwrap(),
        Quota::new(1, Duration::from_millis(1)).unwrap(),
    ];
    for (i, q) in quotas.into_iter().enumerate() {
        let log = RedisSlidingLog::new(redis.clone(), q, Policy::FailClosed).unwrap();
        let mut model = SlidingLogModel::new(q);
        let mut rng = StdRng::seed_from_u64(0x10c + i as u64);
        let key = format!("log-{i}");
        let unit = q.period_ns() / 1_000 / u64::from(q.count());
        let mut now = START_US;
        for _ in 0..1_500 {
            now = step(&mut rng, now, unit);
            let n = size(&mut rng, q.count());
            let got = log
                .try_decide_at(&key, n, RedisMicros::new(now))
                .await
                .unwrap();
            let want = model.acquire(n, now * 1_000);
            assert_eq!(got.decision.result, want, "quota {q}, n {n}, now {now}");
            assert_eq!(
                got.decision.state,
                model.snapshot(now * 1_000),
                "quota {q}, n {n}, now {now}"
            );
        }
    }
}

#[tokio::test]
async fn all_script_is_all_or_nothing_over_the_reference_models() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let qs = [
        ("fast", quota(10, Duration::from_millis(10), 4)), // T = 1 ms, burst 4
        ("slow", quota(20, Duration::from_secs(1), 6)),    // T = 50 ms, burst 6
    ];
    let all = RedisAll::new(redis, &qs, Policy::FailClosed).unwrap();
    let mut models: Vec<GcraModel> = qs.iter().map(|(_, q)| GcraModel::new(*q)).collect();
    let mut rng = StdRng::seed_from_u64(0xa11);
    let mut now = START_US;
    for _ in 0..1_500 {
        now = step(&mut rng, now, 10_000);
        let n = size(&mut rng, 5);
        let got = all
            .try_decide_at("tenant", n, RedisMicros::new(now))
            .await
            .unwrap();
        // The expected answer: every model on a copy; commit only if all admit.
        let mut trial = models.clone();
        let results: Vec<Result<(), Denied>> = trial
            .iter_mut()
            .map(|m| m.acquire(n, now * 1_000))
            .collect();
        // The stricter of the refusals (Denied::stricter), or Ok if all admit.
        let want = results
            .iter()
            .filter_map(|r| r.err())
            .reduce(Denied::stricter)
            .map_or(Ok(()), Err);
        let want = match want {
            Err(Denied::ExceedsCapacity { .. }) => Err(Denied::ExceedsCapacity { capacity: 4 }),
            other => other,
        };
        if want.is_ok() {
            models = trial;
        }
        assert_eq!(got.decision.result, want, "n {n}, now {now}");
        let snaps: Vec<Snapshot> = models.iter().map(|m| m.snapshot(now * 1_000)).collect();
        let tight = Snapshot::new(
            snaps.iter().map(|s| s.remaining).min().unwrap(),
            snaps.iter().map(|s| s.full_after).max().unwrap(),
        );
        assert_eq!(got.decision.state, tight, "n {n}, now {now}");
    }
    // The keys share one hash slot: the tenant is their hash tag.
    let keys = all.redis_keys("tenant").unwrap();
    assert!(keys.iter().all(|k| k.contains("{tenant}")), "{keys:?}");
    assert!(all.redis_keys("bad}tenant").is_err());
}

async fn get(redis: &limitcore_redis::Redis, key: &str) -> Value {
    redis.command(redis::cmd("GET").arg(key)).await.unwrap()
}

async fn pttl(redis: &limitcore_redis::Redis, key: &str) -> i64 {
    match redis.command(redis::cmd("PTTL").arg(key)).await.unwrap() {
        Value::Int(i) => i,
        other => panic!("PTTL: {other:?}"),
    }
}

#[tokio::test]
async fn zero_excess_and_denials_write_nothing() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let limit = common::gcra(&redis, "10/s burst 2");
    let key = limit.redis_key("k");
    // n = 0 on a fresh key: admitted, nothing created.
    assert!(common::admits(&limit, "k", 0).await);
    assert_eq!(get(&redis, &key).await, Value::Nil);
    // n > burst: ExceedsCapacity, nothing created.
    let a = limit.try_decide("k", 3).await.unwrap();
    assert_eq!(
        a.decision.result,
        Err(Denied::ExceedsCapacity { capacity: 2 })
    );
    assert_eq!(get(&redis, &key).await, Value::Nil);
    // Take the burst; then a denial leaves the stored TAT and its TTL as they were. The
    // next permit conforms 100 ms after the burst was taken (on Redis's clock): a loaded
    // machine that held the test that long finds it admitted, and tries again with the
    // burst taken anew (a key a denial never reached is no test of it).
    let mut tries = 0;
    let (wait, before) = loop {
        tries += 1;
        let burst = limit.try_decide("k", 2).await.unwrap();
        assert!(burst.decision.is_admitted(), "{burst:?}");
        let before = get(&redis, &key).await;
        let denied = limit.try_decide("k", 1).await.unwrap();
        let between = denied
            .server_time
            .saturating_duration_since(burst.server_time);
        match denied.decision.retry_after() {
            Some(wait) => {
                assert!(
                    wait <= Duration::from_millis(100)
                        && wait + between >= Duration::from_millis(100),
                    "{wait:?}, {between:?} after the burst"
                );
                break (wait, before);
            }
            None => {
                assert!(between >= Duration::from_millis(100), "{denied:?}");
                assert!(tries < 3, "admitted on every try: {denied:?}");
                // Let the key fill up again before the burst is taken anew.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert_eq!(get(&redis, &key).await, before);
    // After exactly the wait Redis gave (measured from before the call), it conforms.
    tokio::time::sleep(wait).await;
    assert!(common::admits(&limit, "k", 1).await);
}

/// The keys' TTLs. Each PTTL is read a moment after the decision that set it: the expected
/// TTL less the time until the read, which the test bounds on the wall clock (Redis's
/// `TIME` on this machine) from the decision's `server_time` to after the read, with 2 ms
/// for the truncations to whole ms (the TTL's and the bound's).
#[tokio::test]
async fn ttl_is_the_time_until_the_state_is_fresh() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let limit = common::gcra(&redis, "10/s burst 5");
    let key = limit.redis_key("ttl");
    let read_since = |at: RedisMicros| common::wall_us().saturating_sub(at.as_micros()) / 1_000;
    // 3 permits from fresh: TAT = now + 300 ms, so the key lives 300 ms (rounded up).
    let a = limit.try_decide("ttl", 3).await.unwrap();
    assert_eq!(a.decision.state.full_after, Duration::from_millis(300));
    let ttl = pttl(&redis, &key).await;
    let read = read_since(a.server_time);
    assert!(
        ttl <= 300 && ttl as u64 + read + 2 >= 300,
        "PTTL {ttl}, read {read} ms on"
    );
    // Limited: the whole burst taken, the key lives as long as its backlog.
    let b = limit.try_decide("ttl", 2).await.unwrap();
    assert!(b.decision.is_admitted());
    let ttl = pttl(&redis, &key).await;
    let read = read_since(b.server_time);
    assert!(
        ttl as u128 + u128::from(read) + 2 >= b.decision.state.full_after.as_millis() && ttl <= 500,
        "PTTL {ttl}, read {read} ms on"
    );
    // Idle: it vanishes on its own once the state is indistinguishable from fresh.
    tokio::time::sleep(Duration::from_millis(520)).await;
    assert_eq!(get(&redis, &key).await, Value::Nil);
    // The sliding log's set lives until its newest entry leaves the window.
    let log = RedisSlidingLog::new(
        redis.clone(),
        "2/200ms".parse().unwrap(),
        Policy::FailClosed,
    )
    .unwrap();
    let s = log.try_decide("s", 2).await.unwrap();
    assert!(s.decision.is_admitted());
    let ttl = pttl(&redis, "lc:log:s").await;
    let read = read_since(s.server_time);
    assert!(
        ttl <= 200 && ttl as u64 + read + 2 >= 200,
        "PTTL {ttl}, read {read} ms on"
    );
}

#[tokio::test]
async fn bounds_are_checked_before_any_arithmetic() {
    let server = common::server();
    let redis = common::connect(&server).await;
    // Rust refuses what the doubles could not hold...
    // A span the core accepts (≤ 2^62 ns) but the doubles cannot (> 2^52 µs).
    let huge =
        Quota::new_with_burst(1, Duration::from_nanos(4_600_000_000_000_000_000), 1).unwrap();
    assert!(RedisGcra::new(redis.clone(), huge, Policy::FailClosed).is_err());
    let fast = Quota::per_second(2_000_000).unwrap();
    assert!(RedisGcra::new(redis.clone(), fast, Policy::FailClosed).is_err());
    // ...and the script refuses it again if called directly, as it refuses a time past
    // 2^52 µs or a fractional argument.
    let limit = common::gcra(&redis, "10/s");
    assert!(limit
        .try_decide_at("b", 1, RedisMicros::new(1 << 53))
        .await
        .is_err());
    let sha_call = redis
        .command(
            redis::cmd("EVAL")
                .arg(limitcore_redis::scripts::gcra_source())
                .arg(1)
                .arg("b2")
                .arg("1.5")
                .arg(10)
                .arg(0)
                .arg("0")
                .arg("")
                .arg(1),
        )
        .await;
    assert!(sha_call.is_err(), "{sha_call:?}");
    let too_big = redis
        .command(
            redis::cmd("EVAL")
                .arg(limitcore_redis::scripts::gcra_source())
                .arg(1)
                .arg("b3")
                .arg(1u64 << 40)
                .arg(1u64 << 13)
                .arg(0)
                .arg("0")
                .arg("")
                .arg(1),
        )
        .await;
    assert!(too_big.is_err(), "{too_big:?}");
    // The latest time allowed still decides.
    let edge = limit
        .try_decide_at("b4", 1, RedisMicros::MAX)
        .await
        .unwrap();
    assert!(edge.decision.is_admitted());
}

#[tokio::test]
async fn noscript_is_reloaded_with_one_extra_command() {
    let server = common::server();
    // Heartbeats an hour apart: the commands counted below are the calls' alone.
    let redis = common::connect_counted(&server).await;
    let limit = common::gcra(&redis, "100/s");
    assert!(common::admits(&limit, "r", 1).await);
    let before = redis.commands();
    assert!(common::admits(&limit, "r", 1).await);
    assert_eq!(redis.commands() - before, 1, "EVALSHA alone once loaded");
    redis
        .command(redis::cmd("SCRIPT").arg("FLUSH"))
        .await
        .unwrap();
    let before = redis.commands();
    assert!(common::admits(&limit, "r", 1).await);
    assert_eq!(redis.commands() - before, 2, "EVALSHA, NOSCRIPT, then EVAL");
    let before = redis.commands();
    assert!(common::admits(&limit, "r", 1).await);
    assert_eq!(redis.commands() - before, 1, "loaded again");
    // A pipeline of decisions: one round trip, each its own script call.
    let answers = limit
        .try_decide_many(&[("p", 1), ("p", 2), ("q", 101), ("p", 0)])
        .await
        .unwrap();
    assert!(answers[0].decision.is_admitted() && answers[1].decision.is_admitted());
    assert_eq!(
        answers[2].decision.result,
        Err(Denied::ExceedsCapacity { capacity: 100 })
    );
    assert_eq!(answers[1].decision.state.remaining, 97);
}

/// A caller's own script through the public [`Redis::eval`](limitcore_redis::Redis::eval):
/// `EVALSHA` alone once the server knows it, `EVALSHA` then `EVAL` on a fresh or flushed
/// server, the script's own error passed on (and, an answer, not counted as an outage).
#[tokio::test]
async fn a_callers_script_runs_by_its_hash_and_is_reloaded_after_a_flush() {
    use limitcore_redis::{scripts::Script, Error};
    let server = common::server();
    // Heartbeats an hour apart: the commands counted below are the calls' alone.
    let redis = common::connect_counted(&server).await;
    let incr = Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let args = |n: u32| vec![n.to_string()];
    let before = redis.commands();
    assert_eq!(
        redis.eval(&incr, &["c"], &args(2)).await.unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        redis.commands() - before,
        2,
        "fresh server: EVALSHA, NOSCRIPT, EVAL"
    );
    let before = redis.commands();
    assert_eq!(
        redis.eval(&incr, &["c"], &args(3)).await.unwrap(),
        Value::Int(5)
    );
    assert_eq!(redis.commands() - before, 1, "EVALSHA alone once loaded");
    redis
        .command(redis::cmd("SCRIPT").arg("FLUSH"))
        .await
        .unwrap();
    assert_eq!(
        redis.eval(&incr, &["c"], &args(1)).await.unwrap(),
        Value::Int(6)
    );
    // The hash is the one the server computes for the body.
    let loaded = redis
        .command(redis::cmd("SCRIPT").arg("LOAD").arg(incr.body()))
        .await
        .unwrap();
    assert_eq!(loaded, Value::BulkString(incr.sha().as_bytes().to_vec()));
    // The script's error is the caller's answer, five times over; the breaker stays closed.
    let fails = Script::new("return redis.error_reply('PLAN no such plan')");
    for _ in 0..5 {
        match redis.eval(&fails, &["c"], &[]).await {
            Err(Error::Redis(e)) => assert_eq!(e.code(), Some("PLAN"), "{e}"),
            other => panic!("the script's error: {other:?}"),
        }
    }
    assert!(!redis.is_open());
}
