//! limitcore-redis benchmarks against a real redis-server started on loopback:
//!
//! - exact mode (one `EVALSHA` a decision): decisions/s and p50/p99 per decision with 1
//!   and 2 client tasks, without and with pipelining (batches of 16 on the hot key: one
//!   script call each, `RedisGcra::try_decide_many`);
//! - the naive fixed window (`INCR` + `PEXPIRE` in one pipeline, the envoy approach), one
//!   decision a round trip and 16 (32 commands) a round trip;
//! - a raw RESP client on a blocking socket, the floor any client pays (client overhead);
//! - leased mode: local decisions/s on one thread and Redis commands per 1,000 decisions,
//!   admitted (cells available) and saturated (the key refused locally), through the
//!   keyed trait and through a handle on the key (`LeasedKey`);
//! - the in-process core (`Gcra`, `Keyed<String, GcraRule>`) beside the leased decision.
//!
//! Run: `cargo bench -p limitcore-redis --bench redis` (prints Markdown tables).

use limitcore::clock::{Clock, MonotonicClock};
use limitcore::rules::GcraRule;
use limitcore::{Gcra, KeyHasher, Keyed, KeyedRateLimiter, Quota, RateLimiter};
use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig, RedisGcra};
use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{time_tasks, Timing, RUN};

/// One measured cell of the exact-mode table.
struct Row {
    name: String,
    tasks: usize,
    timing: Timing,
}

/// Run `tasks` copies of `op` (each doing `batch` decisions per await) for [`RUN`] on a
/// 2-worker runtime: one row of the table.
fn measure<F, Fut>(
    rt: &tokio::runtime::Runtime,
    name: &str,
    tasks: usize,
    batch: usize,
    op: F,
) -> Row
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    Row {
        name: name.to_owned(),
        tasks,
        timing: time_tasks(rt, tasks, batch, op),
    }
}

/// EVALSHA on a blocking socket with hand-written RESP: no client library at all.
fn raw_resp(port: u16, sha: &str) -> Row {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let args = [
        "EVALSHA",
        sha,
        "1",
        "lc:gcra:raw",
        "1000",
        "50",
        "0",
        "0",
        "",
        "1",
    ];
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    let mut buf = [0u8; 512];
    let mut lat = Vec::new();
    let end = Instant::now() + RUN;
    while Instant::now() < end {
        let began = Instant::now();
        s.write_all(req.as_bytes()).unwrap();
        // The reply is a 4-element array of integers (the time, then the request's
        // three): read until 5 line ends.
        let mut lines = 0;
        while lines < 5 {
            let n = s.read(&mut buf).unwrap();
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        }
        lat.push(began.elapsed());
    }
    Row {
        name: "exact GCRA, raw RESP on a blocking socket (no client)".into(),
        tasks: 1,
        timing: Timing::of(lat),
    }
}

/// Calls of `f` per [`ns_per`] measurement, warm-up included.
const NS_PER_CALLS: u64 = 5_100_000;

/// ns per call of `f` on one thread: 10^5 calls of warm-up, then the median of five
/// rounds of 10^6 calls (a round that another process interrupted does not move it).
fn ns_per(mut f: impl FnMut(u64)) -> f64 {
    for i in 0..100_000 {
        f(i);
    }
    let mut rounds = [0.0; 5];
    for (r, round) in rounds.iter_mut().enumerate() {
        let began = Instant::now();
        for i in 0..1_000_000 {
            f(r as u64 * 1_000_000 + i);
        }
        *round = began.elapsed().as_nanos() as f64 / 1e6;
    }
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn main() {
    let (server, rt) = common::server_and_runtime();
    let config = RedisConfig::default().deadline(Duration::from_secs(1));
    let redis = rt.block_on(Redis::connect(&server.url(), config)).unwrap();
    // A quota that keeps a mix of admissions and refusals on one hot key.
    let quota: Quota = "1000/s burst 50".parse().unwrap();
    let gcra = Arc::new(RedisGcra::new(redis.clone(), quota, Policy::FailClosed).unwrap());

    let mut rows = Vec::new();
    for tasks in [1, 2] {
        let g = Arc::clone(&gcra);
        rows.push(measure(&rt, "exact GCRA (EVALSHA)", tasks, 1, move |_| {
            let g = Arc::clone(&g);
            async move {
                black_box(g.try_decide("hot", 1).await.unwrap());
            }
        }));
    }
    for tasks in [1, 2] {
        let g = Arc::clone(&gcra);
        rows.push(measure(
            &rt,
            "exact GCRA, pipelined ×16 (one script call for the 16)",
            tasks,
            16,
            move |_| {
                let g = Arc::clone(&g);
                async move {
                    black_box(g.try_decide_many(&[("hot", 1); 16]).await.unwrap());
                }
            },
        ));
    }
    for (name, batch) in [
        ("naive fixed window (INCR + PEXPIRE, one pipeline)", 1),
        (
            "naive fixed window, pipelined ×16 (16 × INCR + PEXPIRE)",
            16,
        ),
    ] {
        for tasks in [1, 2] {
            let r = redis.clone();
            rows.push(measure(&rt, name, tasks, batch, move |i| {
                let r = r.clone();
                async move {
                    let mut pipe = redis::pipe();
                    // One counter per task (`i >> 40` is the task's number): the commands
                    // of a window, whichever window it is.
                    let key = format!("fw:{}", i >> 40);
                    for _ in 0..batch {
                        pipe.cmd("INCR")
                            .arg(&key)
                            .cmd("PEXPIRE")
                            .arg(&key)
                            .arg(1_000)
                            .ignore();
                    }
                    let mut c = r.clone();
                    black_box(naive(&mut c, &pipe).await);
                }
            }));
        }
    }
    let sha = limitcore_redis::scripts::gcra_sha();
    rows.push(raw_resp(server.port(), sha));

    println!(
        "\n#### exact mode on one hot key (loopback redis-server 7.0, 2 cores, this machine)\n"
    );
    println!("| contender | client tasks | decisions/s | p50 µs | p99 µs |");
    println!("|---|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} |",
            r.name, r.tasks, r.timing.per_s, r.timing.p50_us, r.timing.p99_us
        );
    }
    let exact_1 = rows[0].timing.per_s;
    let naive_best = rows[4].timing.per_s.max(rows[5].timing.per_s);
    let exact_best = rows[0].timing.per_s.max(rows[1].timing.per_s);
    let naive_piped_best = rows[6].timing.per_s.max(rows[7].timing.per_s);
    let exact_piped_best = rows[2].timing.per_s.max(rows[3].timing.per_s);

    // Leased mode: one thread deciding locally on one key.
    // The admitted path: a lease of 25,000 cells held (1,000,000/s burst 100,000,
    // L = 100,000, first lease L/4), 20,000 decisions timed on each of 50 keys, all served
    // from held cells (the refill at half runs in the background); through the keyed trait
    // or through a handle on each key (`LeasedKey`, no lookup).
    let leased_cells = |by_handle: bool| {
        let q: Quota = "1000000/s burst 100000".parse().unwrap();
        let _guard = rt.enter();
        let l = LeasedLimiter::new(
            redis.clone(),
            q,
            LeaseConfig::new(100_000),
            Policy::FailClosed,
        )
        .unwrap();
        let (mut spent, mut admitted, mut total) = (Duration::ZERO, 0u64, 0u64);
        let before = redis.commands();
        for k in 0..50 {
            // Each run on keys of its own (the other run's state on Redis stays out of it).
            let key = format!("cells-{}-{k}", if by_handle { "handle" } else { "keyed" });
            let handle = by_handle.then(|| l.key(&key));
            assert!(rt.block_on(l.acquire(&key, 1)).is_admitted());
            let began = Instant::now();
            if let Some(handle) = &handle {
                for _ in 0..20_000 {
                    admitted += u64::from(black_box(handle.try_acquire().is_ok()));
                }
            } else {
                for _ in 0..20_000 {
                    admitted += u64::from(black_box(l.try_acquire(&key).is_ok()));
                }
            }
            spent += began.elapsed();
            total += 20_000;
        }
        assert_eq!(
            admitted, total,
            "every timed decision was served from held cells"
        );
        (
            spent.as_nanos() as f64 / total as f64,
            redis.commands() - before,
            total,
        )
    };
    let leased_cells_handle = leased_cells(true);
    let leased_cells = leased_cells(false);
    let leased_saturated = {
        let _guard = rt.enter();
        let l = LeasedLimiter::new(
            redis.clone(),
            quota,
            LeaseConfig::new(16),
            Policy::FailClosed,
        )
        .unwrap();
        rt.block_on(l.acquire("sat", 1));
        let before = redis.commands();
        let ns = ns_per(|_| {
            black_box(l.try_acquire("sat").is_ok());
        });
        (ns, redis.commands() - before, NS_PER_CALLS)
    };
    let (leased_refused, leased_refused_handle) = {
        // The refused path: Redis refused the key's lease (1/min burst 1, its one cell
        // spent), so the node refuses locally, with the exact wait, until Redis's wait ends.
        let q: Quota = "1/min burst 1".parse().unwrap();
        let _guard = rt.enter();
        let l =
            LeasedLimiter::new(redis.clone(), q, LeaseConfig::new(16), Policy::FailClosed).unwrap();
        assert!(rt.block_on(l.acquire("blocked", 1)).is_admitted());
        let blocked = || {
            l.try_acquire("blocked")
                .unwrap_err()
                .retry_after()
                .is_some_and(|wait| wait > Duration::from_secs(1))
        };
        let began = Instant::now();
        while !blocked() {
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "no block from Redis"
            );
            rt.block_on(tokio::time::sleep(Duration::from_millis(1)));
        }
        let before = redis.commands();
        let ns = ns_per(|_| {
            black_box(l.try_acquire("blocked").is_ok());
        });
        let by_key = (ns, redis.commands() - before, NS_PER_CALLS);
        let handle = l.key("blocked");
        let before = redis.commands();
        let ns = ns_per(|_| {
            black_box(handle.try_acquire().is_ok());
        });
        let by_handle = (ns, redis.commands() - before, NS_PER_CALLS);
        assert!(blocked(), "every timed decision was a local refusal");
        (by_key, by_handle)
    };
    // The in-process core, on the same clock (`MonotonicClock`): admitted (a quota that
    // never refuses within the run: every call compare-and-swaps), refused (1/min burst 1,
    // its one permit taken: every call reads the word and refuses, writing nothing), and
    // the mixed quota of earlier runs (10^6/s burst 10^5: the first ~1.5·10^5 calls
    // admitted, then mostly refusals).
    let never_refuses: Quota = "1000000000/s burst 1000000".parse().unwrap();
    let always_refuses: Quota = "1/min burst 1".parse().unwrap();
    let mixed: Quota = "1000000/s burst 100000".parse().unwrap();
    let core_gcra = |q: Quota| {
        let g = Gcra::new(q).unwrap();
        let _ = g.try_acquire();
        ns_per(|_| {
            black_box(g.try_acquire().is_ok());
        })
    };
    let core_keyed = |q: Quota| {
        let k: Keyed<String, GcraRule> = Keyed::new(q).unwrap();
        let _ = k.try_acquire("cells");
        ns_per(|_| {
            black_box(k.try_acquire("cells").is_ok());
        })
    };
    // The floor of any keyed refusal on a concurrent map: the clock, the lookup of the
    // key's entry (an `Arc`, as the leased limiter's) and one load of its word, on papaya
    // (the leased limiter's map) and on dashmap, both hashing with the core's `KeyHasher`.
    let clock = MonotonicClock::new();
    let floor_papaya = {
        let m: papaya::HashMap<String, Arc<AtomicU64>, KeyHasher> =
            papaya::HashMap::builder().hasher(KeyHasher::new()).build();
        m.pin()
            .insert("cells".to_owned(), Arc::new(AtomicU64::new(0)));
        ns_per(|_| {
            let now = clock.now();
            let m = m.pin();
            black_box(m.get("cells").map(|w| w.load(Ordering::Relaxed) < now));
        })
    };
    let floor_dashmap = {
        let m: dashmap::DashMap<String, Arc<AtomicU64>, KeyHasher> =
            dashmap::DashMap::with_hasher(KeyHasher::new());
        m.insert("cells".to_owned(), Arc::new(AtomicU64::new(0)));
        ns_per(|_| {
            let now = clock.now();
            black_box(m.get("cells").map(|w| w.load(Ordering::Relaxed) < now));
        })
    };
    let clock_read = ns_per(|_| {
        black_box(clock.now());
    });
    let gcra_admitted = core_gcra(never_refuses);
    let gcra_refused = core_gcra(always_refuses);
    let gcra_mixed = core_gcra(mixed);
    let keyed_admitted = core_keyed(never_refuses);
    let keyed_refused = core_keyed(always_refuses);
    let keyed_mixed = core_keyed(mixed);
    println!("\n#### leased mode, one node, one thread, one key\n");
    println!("| contender | ns/decision | decisions/s | Redis commands per 1,000 decisions |");
    println!("|---|---:|---:|---:|");
    for (name, (ns, cmds, n)) in [
        ("leased, admitted from held cells", leased_cells),
        (
            "leased, refused locally (Redis refused the lease: the key is blocked)",
            leased_refused,
        ),
        (
            "leased, saturated (1000/s burst 50, L = 16: mostly local refusals)",
            leased_saturated,
        ),
        (
            "leased, one key's handle (`LeasedKey`), admitted from held cells",
            leased_cells_handle,
        ),
        (
            "leased, one key's handle (`LeasedKey`), refused locally (blocked)",
            leased_refused_handle,
        ),
    ] {
        println!(
            "| {name} | {ns:.1} | {:.0} | {:.4} |",
            1e9 / ns,
            cmds as f64 * 1_000.0 / n as f64
        );
    }
    for (name, ns) in [
        ("core `Gcra` (in-process, unkeyed), admitted", gcra_admitted),
        ("core `Gcra` (in-process, unkeyed), refused", gcra_refused),
        (
            "core `Gcra` (in-process, unkeyed), mixed (earlier runs' row)",
            gcra_mixed,
        ),
        (
            "core `Keyed<String, GcraRule>` (in-process, one key), admitted",
            keyed_admitted,
        ),
        (
            "core `Keyed<String, GcraRule>` (in-process, one key), refused",
            keyed_refused,
        ),
        (
            "core `Keyed<String, GcraRule>` (in-process, one key), mixed (earlier runs' row)",
            keyed_mixed,
        ),
    ] {
        println!("| {name} | {ns:.1} | {:.0} | — |", 1e9 / ns);
    }
    for (name, ns) in [
        (
            "floor: clock + papaya lookup (`KeyHasher`) + one load",
            floor_papaya,
        ),
        (
            "floor: clock + dashmap lookup (`KeyHasher`) + one load",
            floor_dashmap,
        ),
        ("the clock alone (`MonotonicClock::now`)", clock_read),
    ] {
        println!("| {name} | {ns:.1} | {:.0} | — |", 1e9 / ns);
    }

    // The slowest of the three leased paths.
    let leased_per_s = 1e9 / leased_cells.0.max(leased_saturated.0).max(leased_refused.0);
    println!("\n#### targets\n");
    println!("| target | measured | met |");
    println!("|---|---|---|");
    println!(
        "| leased ≥ 100× exact per node | {:.0} / {:.0} = {:.0}× | {} |",
        leased_per_s,
        exact_1,
        leased_per_s / exact_1,
        if leased_per_s >= 100.0 * exact_1 {
            "yes"
        } else {
            "no"
        }
    );
    for (what, leased, core) in [
        (
            "leased handle admission ≤ 2× in-process unkeyed `Gcra` admission",
            leased_cells_handle.0,
            gcra_admitted,
        ),
        (
            "leased handle refusal ≤ 2× in-process unkeyed `Gcra` refusal",
            leased_refused_handle.0,
            gcra_refused,
        ),
        (
            "leased keyed admission ≤ 2× in-process unkeyed `Gcra` admission",
            leased_cells.0,
            gcra_admitted,
        ),
        (
            "leased keyed refusal ≤ 2× in-process unkeyed `Gcra` refusal",
            leased_refused.0,
            gcra_refused,
        ),
        (
            "leased keyed admission ≤ 2× in-process keyed GCRA admission",
            leased_cells.0,
            keyed_admitted,
        ),
        (
            "leased keyed refusal ≤ 2× in-process keyed GCRA refusal",
            leased_refused.0,
            keyed_refused,
        ),
    ] {
        println!(
            "| {what} | {leased:.1} / {core:.1} ns = {:.2}× | {} |",
            leased / core,
            if leased <= 2.0 * core { "yes" } else { "no" }
        );
    }
    for (what, exact, naive) in [
        (
            "exact ≥ naive fixed window, one call a decision",
            exact_best,
            naive_best,
        ),
        (
            "exact batched ×16 (one script call) ≥ naive pipelined ×16 (32 commands)",
            exact_piped_best,
            naive_piped_best,
        ),
    ] {
        println!(
            "| {what} | {exact:.0} / {naive:.0} decisions/s (best of 1 and 2 tasks) = {:.2}× | {} |",
            exact / naive,
            if exact >= naive { "yes" } else { "no" }
        );
    }
}

async fn naive(c: &mut Redis, pipe: &redis::Pipeline) -> Vec<redis::Value> {
    c.pipeline(pipe).await.unwrap()
}
