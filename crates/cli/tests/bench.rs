//! `limitcore bench` end to end, on the built binary: a short run of every contender on 1, 2
//! and 4 threads (4 oversubscribes a 2-core machine) whose JSON has every point, every ratio
//! and no zero, and whose SVG parses with one line per contender in each panel, each named
//! in the legend; the text report; and bad parameters refused with a message, never a
//! panic. CI runs this file as its own step too (`.ci/run`, "limitcore bench smoke run").

use limitcore_cli::scale::{Contender, QuotaKind, Role};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The thread counts of the smoke run.
const THREADS: [u64; 3] = [1, 2, 4];

fn limitcore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_limitcore"))
        .args(args)
        .output()
        .expect("the limitcore binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A file path in this test's scratch directory.
fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{}-{name}", std::process::id()))
}

fn number(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {v}"))
}

#[test]
fn every_contender_at_every_thread_count_with_its_ratio_and_a_line_in_the_plot() {
    let svg = scratch("scale.svg");
    let threads: Vec<String> = THREADS.iter().map(u64::to_string).collect();
    let out = limitcore(&[
        "bench",
        "--seconds",
        "0.05",
        "--threads",
        &threads.join(","),
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the JSON parses");

    // The machine and the run.
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(!v["machine"]["cpu_model"].as_str().unwrap().is_empty());
    assert_eq!(v["seconds"], 0.05);
    let measured: Vec<u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert_eq!(measured, THREADS);
    assert_eq!(
        v["contenders"].as_array().unwrap().len(),
        Contender::ALL.len()
    );
    assert_eq!(v["added_peers"].as_array().unwrap().len(), 0);
    // The pairs, stated.
    let pairs: BTreeMap<&str, &str> = v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["contender"].as_str().unwrap(),
                p["peer"].as_str().unwrap(),
            )
        })
        .collect();
    let limitcore: Vec<Contender> = Contender::ALL
        .into_iter()
        .filter(|c| c.role() == Role::Limitcore)
        .collect();
    assert_eq!(pairs.len(), limitcore.len());
    assert_eq!(pairs["gcra"], "governor");
    assert_eq!(pairs["keyed-hot"], "governor-keyed-hot");
    assert_eq!(pairs["keyed-spread"], "governor-keyed-spread");
    assert_eq!(pairs["keyed-hot-papaya"], "governor-keyed-hot");
    assert_eq!(pairs["keyed-spread-papaya"], "governor-keyed-spread");
    assert_eq!(pairs["permits"], "tokio-semaphore");
    assert_eq!(pairs["budget"], "leaky-bucket");

    // Every contender under each of its quotas at every thread count: nothing zero, every
    // limitcore contender's ratio to its peer present.
    let points = v["points"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    for p in points {
        let name = p["contender"].as_str().unwrap();
        let contender: Contender = name.parse().unwrap();
        let quota = p["quota"].as_str().unwrap();
        let threads = p["threads"].as_u64().unwrap();
        assert!(
            seen.insert((name, quota, threads)),
            "{name} {quota} {threads} twice"
        );
        for field in [
            "decisions_per_second",
            "per_thread_per_second",
            "wall_seconds",
            "efficiency",
            "fastest_thread_per_second",
        ] {
            assert!(number(p, field) > 0.0, "{field} of {p}");
        }
        assert!(p["decisions"].as_u64().unwrap() > 0, "{p}");
        // The threads' share of the wall time on a CPU, from Linux's per-thread CPU clock.
        if cfg!(target_os = "linux") {
            let on_cpu = number(p, "on_cpu");
            assert!(on_cpu > 0.0 && on_cpu <= 1.05, "{p}");
        }
        let per_thread = number(p, "per_thread_per_second");
        let total = number(p, "decisions_per_second");
        assert!(
            (per_thread * threads as f64 - total).abs() <= 1e-6 * total,
            "{p}"
        );
        // Efficiency 1 at one thread by definition.
        if threads == 1 {
            assert!((number(p, "efficiency") - 1.0).abs() < 1e-12, "{p}");
        }
        match contender.role() {
            Role::Limitcore => {
                assert!(number(p, "ratio_to_peer") > 0.0, "{p}");
                assert_eq!(p["peer"], pairs[name], "{p}");
            }
            Role::Peer | Role::Floor => {
                assert!(p["ratio_to_peer"].is_null() && p["peer"].is_null(), "{p}");
            }
        }
        // The quotas held: nothing admitted under the refusing one; under the admitting one
        // at most a few refusals (stale readings of preempted threads), never a saturation.
        let decisions = p["decisions"].as_u64().unwrap();
        let admitted = p["admitted"].as_u64().unwrap();
        match quota {
            "refusing" => assert_eq!(admitted, 0, "{p}"),
            "admitting" => assert!(admitted as f64 >= 0.999 * decisions as f64, "{p}"),
            "none" => assert_eq!(admitted, decisions, "{p}"),
            other => panic!("quota {other}"),
        }
    }
    let series: usize = Contender::ALL.iter().map(|c| c.quota_kinds().len()).sum();
    assert_eq!(points.len(), series * THREADS.len());
    for c in Contender::ALL {
        for kind in c.quota_kinds() {
            for t in THREADS {
                assert!(seen.contains(&(c.name(), kind.name(), t)), "{c} {kind} {t}");
            }
        }
    }

    // The plot: a panel per quota (admitting, refusing), each with one line (a polyline in
    // the contender's colour; the axes are black) per contender of that quota and per floor,
    // with a point per thread count, and a legend box of the same colour beside the
    // contender's name.
    let text = std::fs::read_to_string(&svg).expect("the SVG was written");
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses");
    let lines: Vec<(String, usize)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| n.attribute("stroke") != Some("#000000"))
        .map(|n| {
            let points = n
                .attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count();
            (n.attribute("stroke").unwrap_or("").to_owned(), points)
        })
        .collect();
    let floors = Contender::ALL
        .iter()
        .filter(|c| c.role() == Role::Floor)
        .count();
    let limiters = Contender::ALL.len() - floors;
    assert_eq!(lines.len(), 2 * (limiters + floors), "{lines:?}");
    assert!(lines.iter().all(|&(_, n)| n == THREADS.len()), "{lines:?}");
    let legend: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .collect();
    for c in Contender::ALL {
        let name = match c.role() {
            Role::Limitcore => c.name().to_owned(),
            Role::Peer => format!("{c} (peer)"),
            Role::Floor => format!("{c} (floor)"),
        };
        assert_eq!(
            legend.iter().filter(|t| **t == name).count(),
            2,
            "{name} in each panel's legend: {legend:?}"
        );
    }
    // Each line's colour is a legend box's, and each colour is one contender's: one line per
    // colour in each panel.
    let boxes: BTreeSet<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter_map(|n| n.attribute("fill"))
        .filter(|&fill| fill != "#FFFFFF")
        .collect();
    assert_eq!(boxes.len(), Contender::ALL.len(), "{boxes:?}");
    let mut per_colour: BTreeMap<&str, usize> = BTreeMap::new();
    for (colour, _) in &lines {
        *per_colour.entry(colour.as_str()).or_default() += 1;
    }
    assert_eq!(per_colour.keys().copied().collect::<BTreeSet<_>>(), boxes);
    assert!(per_colour.values().all(|&n| n == 2), "{per_colour:?}");
    std::fs::remove_file(&svg).ok();
}

#[test]
fn the_text_names_the_machine_the_pairs_and_the_added_peer() {
    let out = limitcore(&[
        "bench",
        "--seconds",
        "0.02",
        "--threads",
        "2",
        "--contenders",
        "permits,fetch-add-shared",
        "--no-pin",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for phrase in [
        "machine: ",
        " cores",
        "threads 1, 2",
        "not pinned (--no-pin)",
        "permits ÷ tokio-semaphore",
        "added for the ratios: tokio-semaphore",
        "admitting quota: ",
        "refusing quota: ",
        "the floor: ",
        "M decisions/s, all threads",
        "M decisions/s per thread",
        "efficiency (per thread ÷ 1 thread)",
        "fetch-add-shared (floor)",
        "tokio-semaphore (peer)",
    ] {
        assert!(text.contains(phrase), "lacks {phrase:?}:\n{text}");
    }
    // The table has a column per thread count.
    let header = text
        .lines()
        .find(|l| l.starts_with("M decisions/s, all threads"))
        .unwrap();
    assert!(header.ends_with("1 thread 2 threads"), "{header}");
    assert!(!text.contains("gcra"), "{text}");
}

#[test]
fn bad_parameters_are_refused_with_a_message() {
    let unknown = limitcore(&["bench", "--contenders", "gcra,nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    let message = stderr(&unknown);
    assert!(message.contains("unknown contender \"nope\""), "{message}");
    for c in Contender::ALL {
        assert!(message.contains(c.name()), "{message}");
    }
    for (args, expected) in [
        (&["--threads", "0"][..], "--threads 0: between 1 and 4096"),
        (
            &["--threads", "5000"][..],
            "--threads 5000: between 1 and 4096",
        ),
        (
            &["--seconds", "0"][..],
            "--seconds 0: between 0.001 and 3600",
        ),
        (
            &["--seconds", "NaN"][..],
            "--seconds NaN: between 0.001 and 3600",
        ),
        (&["--warmup=-1"][..], "--warmup -1: between 0 and 60"),
        (&["--threads", "1,x"][..], "invalid value 'x'"),
        (&["--seconds", "soon"][..], "invalid value 'soon'"),
        (&["--contenders", ""][..], "unknown contender \"\""),
    ] {
        let out = limitcore(&[&["bench"][..], args].concat());
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {message}");
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(!message.contains("panicked"), "{args:?}: {message}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // An unwritable plot: the run's report, then an error and status 1.
    let out = limitcore(&[
        "bench",
        "--seconds",
        "0.01",
        "--threads",
        "1",
        "--contenders",
        "fetch-add-shared",
        "--plot",
        "/nonexistent-dir/plot.svg",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/nonexistent-dir/plot.svg"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"));
}

#[test]
fn the_library_measures_what_it_is_asked() {
    use limitcore_cli::scale::{self, Config};
    let config = Config {
        contenders: vec![Contender::SlidingWindow],
        threads: vec![2],
        seconds: 0.02,
        warmup: Some(0.0),
        pin: true,
    };
    assert_eq!(config.thread_counts(), [1, 2]);
    assert_eq!(config.points(), 8); // sliding-window and governor, 2 quotas, 2 thread counts
    let report = scale::run(&config, &mut |_| {}).unwrap();
    assert_eq!(report.points.len(), 8);
    assert_eq!(report.added_peers, [Contender::Governor]);
    let p = report
        .point(Contender::SlidingWindow, QuotaKind::Admitting, 2)
        .unwrap();
    assert_eq!(p.peer, Some(Contender::Governor));
    assert!(p.ratio_to_peer.unwrap() > 0.0);
}

#[test]
fn help_names_every_option_and_the_top_level_help_names_the_command() {
    let out = limitcore(&["bench", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--threads",
        "--seconds",
        "--warmup",
        "--contenders",
        "--no-pin",
        "--json",
        "--plot",
        "[default: 1]",
        "keyed-spread",
        "keyed-hot-papaya",
        "keyed-spread-papaya",
        "tokio-semaphore",
        "fetch-add-per-thread",
    ] {
        assert!(
            text.contains(option),
            "bench --help lacks {option}:\n{text}"
        );
    }
    let out = limitcore(&["--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("bench"));
}
