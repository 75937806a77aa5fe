//! The replay (`limitcore_cli::{trace, engine}`) on two real logs and on small logs written
//! here: every decision equals the reference model's, every per-client window bound holds, and
//! the parsers count and locate bad lines instead of panicking.
//!
//! The real logs are an SEC EDGAR CSV and a NASA-HTTP TSV. Their samples in `testdata/` (the
//! first 2,000 requests of each; see `testdata/README.md`) are always replayed. The full logs
//! are replayed too when `../shared/data/` exists beside the repository (they are read where
//! they are, never copied); on a clone without it that part is skipped with a note on stderr.

use limitcore::Quota;
use limitcore_cli::engine::{self, Algorithm, Outcome, Settings};
use limitcore_cli::trace::{self, Format, Malformed, Request, Trace};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A real log, and what it holds.
struct Log {
    path: PathBuf,
    format: Format,
    /// Requests: every line but the header (none is malformed).
    requests: usize,
    /// Distinct clients.
    clients: usize,
}

impl Log {
    /// The log's file name, for messages.
    fn name(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// The log, read and checked against what it holds.
    fn read(&self) -> Trace {
        let file = std::fs::File::open(&self.path)
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
        let trace = trace::read(std::io::BufReader::new(file), |_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
        let name = self.name();
        assert_eq!(trace.format, self.format, "{name}");
        assert_eq!(trace.requests.len(), self.requests, "{name}");
        assert_eq!(trace.clients.len(), self.clients, "{name}");
        assert!(
            trace.malformed.is_empty(),
            "{name}: {:?}",
            &trace.malformed[..1]
        );
        assert_eq!(
            trace.lines,
            self.requests + 1,
            "{name}: the header and the requests"
        );
        trace
    }
}

/// This crate's `testdata/` directory.
fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// `../shared/data/` beside the repository, if it exists (the repository's root is two
/// levels above this crate's manifest). Looked up once; its absence is noted once.
fn shared_data() -> Option<PathBuf> {
    static SHARED: OnceLock<Option<PathBuf>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
            if dir.is_dir() {
                Some(dir)
            } else {
                eprintln!(
                    "note: {} does not exist: the full logs are skipped, only their samples \
                     in testdata/ are replayed",
                    dir.display()
                );
                None
            }
        })
        .clone()
}

/// The EDGAR sample, and the full EDGAR log (`log20170630`'s first 10,000 lines) if present.
fn edgar_logs() -> Vec<Log> {
    let log = |path, requests, clients| Log {
        path,
        format: Format::EdgarCsv,
        requests,
        clients,
    };
    let mut logs = vec![log(
        testdata().join("edgar_log20170630_first2000.csv"),
        2_000,
        159,
    )];
    if let Some(dir) = shared_data() {
        logs.push(log(dir.join("edgar_log20170630_first10k.csv"), 9_999, 326));
    }
    logs
}

/// The NASA-HTTP sample, and the full NASA-HTTP log of 1 August 1995 if present.
fn nasa_logs() -> Vec<Log> {
    let log = |path, requests, clients| Log {
        path,
        format: Format::NasaTsv,
        requests,
        clients,
    };
    let mut logs = vec![log(
        testdata().join("nasa_http_19950801_first2000.tsv"),
        2_000,
        205,
    )];
    if let Some(dir) = shared_data() {
        logs.push(log(dir.join("nasa_http_19950801.tsv"), 30_969, 2_365));
    }
    logs
}

fn read_str(text: &str) -> Result<Trace, trace::TraceError> {
    trace::read(text.as_bytes(), |_| {})
}

fn settings(quota: &str, global: Option<&str>, threads: usize) -> Settings {
    Settings {
        quota: quota.parse().unwrap(),
        global: global.map(|g| g.parse().unwrap()),
        threads,
    }
}

fn replay_all(trace: &Trace, settings: &Settings) -> Vec<Outcome> {
    Algorithm::ALL
        .into_iter()
        .map(|a| engine::replay(trace, a, settings).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// The three checks every replay must pass.
fn assert_sound(outcomes: &[Outcome], what: &str) {
    for o in outcomes {
        assert_eq!(
            o.differing,
            0,
            "{what}, {}: decisions differ from the reference model; first: {:?}",
            o.algorithm.name(),
            o.first_difference
        );
        let (client, max) = o.worst_window();
        assert!(
            o.bound_holds(),
            "{what}, {}: client #{client} had {max} admitted in one window, promise {} ({})",
            o.algorithm.name(),
            o.promise.bound,
            o.promise.rule
        );
        assert_eq!(
            o.requests(),
            o.clients.iter().map(|c| c.requests).sum::<u64>()
        );
        // The core's counters of the same decisions equal the decisions' own tally.
        let admitted = o.admitted_count();
        assert!(
            o.counts_agree(),
            "{what}, {}: {}",
            o.algorithm.name(),
            o.counts
        );
        assert_eq!(
            (o.counts.admitted, o.counts.refused(), o.counts.permits),
            (admitted, o.requests() - admitted, admitted),
            "{what}, {}",
            o.algorithm.name()
        );
        assert_eq!(o.counts.final_refusals, 0);
    }
    let by = |a| outcomes.iter().find(|o| o.algorithm == a).unwrap();
    // Token bucket and GCRA decide identically (within the token bucket's time window).
    assert_eq!(
        by(Algorithm::Gcra).admitted,
        by(Algorithm::TokenBucket).admitted,
        "{what}: GCRA and the token bucket disagree"
    );
}

/// Each sample is the beginning of its full log, byte for byte: the header and the first
/// 2,000 requests, whole lines.
#[test]
fn samples_are_the_first_lines_of_the_full_logs() {
    for (sample, full) in [
        (
            "edgar_log20170630_first2000.csv",
            "edgar_log20170630_first10k.csv",
        ),
        ("nasa_http_19950801_first2000.tsv", "nasa_http_19950801.tsv"),
    ] {
        let sample_bytes = std::fs::read(testdata().join(sample)).unwrap();
        assert_eq!(
            sample_bytes.iter().filter(|&&b| b == b'\n').count(),
            2_001,
            "{sample}"
        );
        assert_eq!(
            sample_bytes.last(),
            Some(&b'\n'),
            "{sample}: a whole last line"
        );
        if let Some(dir) = shared_data() {
            let full_bytes = std::fs::read(dir.join(full)).unwrap();
            assert!(
                full_bytes.starts_with(&sample_bytes),
                "{sample} is not the beginning of {full}"
            );
        }
    }
}

#[test]
fn edgar_log_replays_exactly() {
    for log in edgar_logs() {
        let trace = log.read();
        let name = log.name();
        for threads in [1, 2] {
            let outcomes = replay_all(&trace, &settings("10/s", None, threads));
            assert_sound(&outcomes, &format!("{name} 10/s"));
            // The SEC's limit bites on this log: someone is limited under every algorithm.
            assert!(
                outcomes.iter().all(|o| o.clients_limited() > 0),
                "{name}: 10/s limits nobody under some algorithm"
            );
        }
        // A tighter quota with a burst, and one where the burst is smaller than the count.
        assert_sound(
            &replay_all(&trace, &settings("5/s burst 20", None, 2)),
            &format!("{name} 5/s b20"),
        );
        assert_sound(
            &replay_all(&trace, &settings("100/min burst 3", None, 2)),
            &format!("{name} 100/min"),
        );
    }
}

#[test]
fn nasa_log_replays_exactly() {
    for log in nasa_logs() {
        let trace = log.read();
        let name = log.name();
        for quota in ["10/min", "2/s burst 5", "100/h"] {
            let outcomes = replay_all(&trace, &settings(quota, None, 2));
            assert_sound(&outcomes, &format!("{name} {quota}"));
            assert!(
                outcomes.iter().any(|o| o.clients_limited() > 0),
                "{name}: {quota} limits nobody"
            );
        }
    }
}

/// With a global limit, the per-client and global limits are all or nothing: the models
/// agree, and the global bound holds over all clients together, for every algorithm (each
/// refunds exactly through the core's `All`).
#[test]
fn edgar_log_with_a_global_limit() {
    for log in edgar_logs() {
        let trace = log.read();
        let name = log.name();
        let s = settings("10/s", Some("200/s burst 50"), 1);
        for algorithm in Algorithm::ALL {
            let o = engine::replay(&trace, algorithm, &s).unwrap();
            assert_eq!(
                o.differing, 0,
                "{name}, {algorithm}: {:?}",
                o.first_difference
            );
            assert!(o.bound_holds(), "{name}, {algorithm:?}");
            // `Counted` around the `All`: the combined decisions, counted once each.
            assert_eq!(
                (o.counts.admitted, o.counts.rate_limited),
                (o.admitted_count(), o.requests() - o.admitted_count()),
                "{name}, {algorithm:?}"
            );
            assert!(o.counts_agree());
            let times: Vec<u64> = trace
                .requests
                .iter()
                .zip(&o.admitted)
                .filter(|(_, &a)| a)
                .map(|(r, _)| r.t)
                .collect();
            // The global limit's own promise, over all clients together (the window
            // algorithms run it without its burst).
            let global = s.global.unwrap();
            let global = if global.burst() != global.count()
                && matches!(
                    algorithm,
                    Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog
                ) {
                Quota::new(global.count(), global.period()).unwrap()
            } else {
                global
            };
            let promise = engine::promise(algorithm, &global);
            let global_max = if promise.aligned {
                engine::max_in_aligned_window(&times, 1_000_000_000)
            } else {
                engine::max_in_any_window(&times, 1_000_000_000)
            };
            assert!(
                global_max <= promise.bound,
                "{name}, {algorithm:?}: {global_max} > {}",
                promise.bound
            );
            if algorithm == Algorithm::Gcra {
                assert_eq!(promise.bound, 200 + 50 - 1);
            }
            // The global limit binds: fewer admitted than per client alone.
            let alone = engine::replay(&trace, algorithm, &settings("10/s", None, 1)).unwrap();
            assert!(
                o.admitted_count() < alone.admitted_count(),
                "{name}, {algorithm:?}: the global limit does not bind"
            );
        }
    }
}

#[test]
fn synthetic_trace_is_deterministic_and_replays_exactly() {
    let a = trace::synthetic(300, 120, 7);
    let b = trace::synthetic(300, 120, 7);
    assert_eq!(a.requests, b.requests);
    assert_ne!(a.requests, trace::synthetic(300, 120, 8).requests);
    assert!(a.requests.windows(2).all(|w| w[0].t <= w[1].t));
    assert!(a.requests.len() > 1_000);
    let outcomes = replay_all(&a, &settings("10/s", None, 2));
    assert_sound(&outcomes, "synthetic");
    assert!(outcomes.iter().all(|o| o.clients_limited() > 0));
}

#[test]
fn a_quota_an_algorithm_cannot_take_is_an_error() {
    let trace = trace::synthetic(10, 10, 1);
    // 1000 per µs: a fixed window of count 1000 needs a period of at least 2^10 ns.
    let s = Settings {
        quota: Quota::new(1_000, std::time::Duration::from_nanos(1_000)).unwrap(),
        global: None,
        threads: 1,
    };
    let err = engine::replay(&trace, Algorithm::FixedWindow, &s).unwrap_err();
    assert!(err.starts_with("fixed-window"), "{err}");
}

#[test]
fn combined_log_format_with_bad_lines() {
    let log = "\
127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326 \"http://x/\" \"Mozilla/4.08\"
10.0.0.2 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 512 \"-\" \"curl/8\"

garbage without a timestamp
10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] \"GET /a HTTP/1.1\" 404 0 \"-\" \"curl/8\"
10.0.0.3 - - [31/Foo/2000:13:55:37 -0700] \"GET /b HTTP/1.1\" 200 1 \"-\" \"-\"
10.0.0.1 - - [10/Oct/2000:13:55:35 -0700] \"GET /c HTTP/1.0\" 200 9
";
    let t = read_str(log).unwrap();
    assert_eq!(t.format, Format::Combined);
    let lines: Vec<usize> = t.malformed.iter().map(|m| m.line).collect();
    assert_eq!(lines, vec![4, 6], "{:?}", t.malformed);
    assert!(t.malformed[1].reason.contains("31/Foo/2000"));
    assert_eq!(t.requests.len(), 4);
    assert_eq!(t.clients, vec!["127.0.0.1", "10.0.0.2", "10.0.0.1"]);
    // 13:55:36 -0700 is 20:55:36 UTC: 971211336 s since the epoch.
    let s = 971_211_336_000_000_000u64;
    assert_eq!(
        t.requests,
        vec![
            Request {
                t: s - 1_000_000_000,
                client: 2
            }, // sorted before the rest
            Request { t: s, client: 0 },
            Request {
                t: s + 500_000_000,
                client: 1
            }, // 2nd of 2 in its second
            Request {
                t: s + 1_000_000_000,
                client: 1
            },
        ]
    );
}

#[test]
fn nasa_tsv_with_bad_lines() {
    let log = "host\tlogname\ttime\tmethod\turl\tresponse\tbytes\treferer\tuseragent
a.example\t-\t807256800\tGET\t/\t200\t1713\t\t
b.example\t-\t807256800\tGET\t/x\t200\t10\t\t
b.example\t-\tsoon\tGET\t/x\t200\t10\t\t
only-one-field
\t-\t807256801\tGET\t/\t200\t1\t\t
c.example\t-\t807256800\tGET\t/y\t304\t0\t\t
";
    let t = read_str(log).unwrap();
    assert_eq!(t.format, Format::NasaTsv);
    let lines: Vec<usize> = t.malformed.iter().map(|m| m.line).collect();
    assert_eq!(lines, vec![4, 5, 6], "{:?}", t.malformed);
    assert!(t.malformed[0].reason.contains("soon"));
    // Three requests in one second, a third of a second apart, in file order.
    let s = 807_256_800_000_000_000u64;
    let times: Vec<u64> = t.requests.iter().map(|r| r.t - s).collect();
    assert_eq!(times, vec![0, 333_333_333, 666_666_666]);
    assert_eq!(t.lines, 7); // the header and the malformed lines count too
}

#[test]
fn edgar_csv_with_bad_lines() {
    let log = "ip,date,time,zone,cik,accession,extention,code,size,idx,norefer,noagent,find,crawler,browser
1.2.3.abc,2017-06-30,00:00:00,0.0,1.0,x,-index.htm,200.0,1.0,1.0,0.0,0.0,9.0,0.0,
1.2.3.abc,2017-06-30,00:00:61,0.0,1.0,x,-index.htm,200.0,1.0,1.0,0.0,0.0,9.0,0.0,
1.2.3.abc,2017-06-31,00:00:01,0.0,1.0,x,-index.htm,200.0,1.0,1.0,0.0,0.0,9.0,0.0,
,2017-06-30,00:00:01,0.0
5.6.7.xyz,2017-06-30
5.6.7.xyz,2017-06-30,00:00:01,0.0,1.0,x,-index.htm,200.0,1.0,1.0,0.0,0.0,9.0,0.0,
";
    let t = read_str(log).unwrap();
    assert_eq!(t.format, Format::EdgarCsv);
    let lines: Vec<usize> = t.malformed.iter().map(|m| m.line).collect();
    assert_eq!(lines, vec![3, 4, 5, 6], "{:?}", t.malformed);
    let s = 1_498_780_800_000_000_000u64; // 2017-06-30T00:00:00Z
    assert_eq!(
        t.requests,
        vec![
            Request { t: s, client: 0 },
            Request {
                t: s + 1_000_000_000,
                client: 1
            },
        ]
    );
}

#[test]
fn invalid_utf8_is_a_counted_line_and_unknown_formats_are_errors() {
    let mut log = b"10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1\n".to_vec();
    log.extend_from_slice(b"\xff\xfe not text\n");
    log.extend_from_slice(b"10.0.0.1 - - [10/Oct/2000:13:55:37 +0000] \"GET / HTTP/1.0\" 200 1\n");
    let t = trace::read(&log[..], |_| {}).unwrap();
    assert_eq!(
        t.malformed,
        vec![Malformed {
            line: 2,
            reason: "not valid UTF-8".into()
        }]
    );
    assert_eq!(t.requests.len(), 2);

    let err = read_str("hello\nworld\n").unwrap_err();
    assert!(err.to_string().contains("hello"), "{err}");
    assert!(read_str("").is_err());
    // A time past the u64 nanosecond range is a bad line, not an overflow.
    let t = read_str("a\t-\t1\tGET\nb\t-\t18446744073\tGET\n").unwrap();
    assert_eq!(t.malformed.len(), 1);
    assert_eq!(t.malformed[0].line, 2);
}

#[test]
fn window_maxima() {
    let p = 10;
    assert_eq!(engine::max_in_any_window(&[], p), 0);
    assert_eq!(engine::max_in_any_window(&[0, 9, 10, 19, 20], p), 2);
    assert_eq!(engine::max_in_any_window(&[5, 6, 7, 14, 15], p), 4);
    assert_eq!(engine::max_in_aligned_window(&[5, 6, 7, 14, 15], p), 3);
    assert_eq!(engine::max_in_aligned_window(&[9, 10, 11, 12], p), 3);
    assert_eq!(engine::max_in_aligned_window(&[], p), 0);
    // A period of 0 counts as 1 ns, rather than dividing by zero.
    assert_eq!(engine::max_in_any_window(&[1, 1, 2], 0), 2);
    assert_eq!(engine::max_in_aligned_window(&[1, 1, 2], 0), 2);
}
