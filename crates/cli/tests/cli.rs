//! The `limitcore` binary end to end: its subcommands, their help, their exit statuses, the
//! replay's table and JSON on the EDGAR sample in `testdata/`, and the pace's JSON on a short
//! run.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn limitcore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_limitcore"))
        .args(args)
        .output()
        .expect("the limitcore binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn edgar_sample() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/edgar_log20170630_first2000.csv")
        .display()
        .to_string()
}

/// A file path in this test's scratch directory.
fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{}-{name}", std::process::id()))
}

/// Assert that `v` is a JSON object with exactly the keys `expected` (in any order).
fn assert_keys(v: &Value, expected: &[&str]) {
    let mut keys: Vec<&str> = v
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = expected.to_vec();
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected);
}

#[test]
fn help_names_every_subcommand_and_option() {
    let out = limitcore(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for word in ["replay", "pace"] {
        assert!(text.contains(word), "{text}");
    }
    let out = limitcore(&["replay", "--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for option in [
        "[LOG]",
        "--quota",
        "--burst",
        "--global",
        "--algorithms",
        "--threads",
        "--top",
        "--json",
        "--plot",
        "[default: 10/s]",
        "[default: 3]",
        "[default: gcra,token-bucket,fixed-window,sliding-window,sliding-log,leaky-bucket]",
    ] {
        assert!(
            text.contains(option),
            "replay --help lacks {option}:\n{text}"
        );
    }
    let out = limitcore(&["pace", "--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for option in [
        "--rate",
        "--workers",
        "--seconds",
        "--json",
        "--live",
        "--spin-us",
        "--work-ns",
        "--governor-burst",
        "[default: 10000]",
        "[default: 2]",
        "[default: 100]",
        "[default: 0]",
        "[default: 1]",
    ] {
        assert!(text.contains(option), "pace --help lacks {option}:\n{text}");
    }
    // No subcommand is a usage error.
    assert_eq!(limitcore(&[]).status.code(), Some(2));
}

#[test]
fn replay_prints_the_table() {
    let log = edgar_sample();
    let out = limitcore(&[
        "replay",
        &log,
        "--quota",
        "10/s",
        "--algorithms",
        "gcra,sliding-log",
        "--threads",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "trace: {log} (EDGAR CSV): 2001 lines, 2000 requests, 159 clients, 7.0 s; 0 \
             malformed lines"
        )
    );
    assert_eq!(lines[1], "limit: 10/s per client");
    assert!(lines[3].starts_with("algorithm        requests  admitted    denied  limited"));
    let mut table = Vec::new();
    for (line, algorithm) in lines[4..6].iter().zip(["gcra", "sliding-log"]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[0], algorithm, "{line}");
        assert_eq!(cells[1], "2000", "{line}");
        // admitted + denied = requests; 0 decisions differ; 1 thread.
        let n = |i: usize| cells[i].parse::<u64>().unwrap();
        assert_eq!(n(2) + n(3), 2000, "{line}");
        assert_eq!(cells[8], "0", "{line}");
        assert_eq!(cells[cells.len() - 1], "1", "{line}");
        table.push((n(2), n(3)));
    }
    // The core's counters of the same decisions: admitted, refused (all rate-limited, none
    // final) and one permit per admission, equal to the table's columns.
    let at = lines
        .iter()
        .position(|l| l.starts_with("core counters (limitcore::Counted"))
        .expect("the counters' section");
    assert_eq!(
        lines[at + 1].split_whitespace().collect::<Vec<_>>(),
        [
            "algorithm",
            "admitted",
            "refused",
            "rate-limited",
            "final",
            "permits"
        ]
    );
    for (i, algorithm) in ["gcra", "sliding-log"].into_iter().enumerate() {
        let cells: Vec<&str> = lines[at + 2 + i].split_whitespace().collect();
        let (admitted, denied) = table[i];
        assert_eq!(
            cells,
            [
                algorithm.to_string(),
                admitted.to_string(),
                denied.to_string(),
                denied.to_string(),
                "0".to_string(),
                admitted.to_string()
            ],
            "{}",
            lines[at + 2 + i]
        );
    }
    assert!(!text.contains("COUNTERS DISAGREE"), "{text}");
    assert!(text.contains("top clients by denials (denied/requests):"));
}

#[test]
fn replay_json_keeps_its_fields() {
    let out = limitcore(&[
        "replay",
        &edgar_sample(),
        "--algorithms",
        "token-bucket",
        "--threads",
        "1",
        "--top",
        "2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).expect("JSON on stdout");
    assert_keys(
        &report,
        &[
            "source",
            "format",
            "lines",
            "requests",
            "clients",
            "span_seconds",
            "malformed_lines",
            "malformed_first",
            "quota",
            "global",
            "algorithms",
            "skipped",
        ],
    );
    assert_eq!(report["format"], "EDGAR CSV");
    assert_eq!(report["requests"], 2000);
    assert_eq!(report["quota"], "10/s");
    let row = &report["algorithms"][0];
    assert_keys(
        row,
        &[
            "algorithm",
            "requests",
            "admitted",
            "denied",
            "clients_limited",
            "max_in_window",
            "max_in_window_client",
            "promise",
            "promise_rule",
            "max_in_any_window",
            "differing_decisions",
            "first_difference",
            "decisions_per_second",
            "threads",
            "keys_held_at_end",
            "top_denied",
            "counters",
            "counters_agree",
        ],
    );
    assert_eq!(row["algorithm"], "token-bucket");
    assert_eq!(row["differing_decisions"], 0);
    assert_keys(
        &row["counters"],
        &[
            "admitted",
            "refused",
            "rate_limited",
            "final_refusals",
            "permits",
        ],
    );
    // The core's counters equal the row's own columns.
    assert_eq!(row["counters"]["admitted"], row["admitted"]);
    assert_eq!(row["counters"]["refused"], row["denied"]);
    assert_eq!(row["counters"]["rate_limited"], row["denied"]);
    assert_eq!(row["counters"]["final_refusals"], 0);
    assert_eq!(row["counters"]["permits"], row["admitted"]);
    assert_eq!(row["counters_agree"], true);
    // The same sample, quota and algorithm as the table test's GCRA row (token bucket and
    // GCRA decide alike): the counts are the trace's, whatever the thread count.
    assert_eq!(row["admitted"], 1571);
    assert_eq!(row["denied"], 429);
    let top = row["top_denied"].as_array().unwrap();
    assert_eq!(top.len(), 2);
    assert_keys(&top[0], &["client", "requests", "denied"]);
}

#[test]
fn replay_lists_malformed_lines_and_plots() {
    let log = scratch("bad.log");
    std::fs::write(
        &log,
        b"10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1\n\
          garbage\n\
          \xff\xfe\n\
          10.0.0.2 - - [10/Oct/2000:13:55:37 +0000] \"GET / HTTP/1.0\" 200 1\n",
    )
    .unwrap();
    let svg = scratch("plot.svg");
    let out = limitcore(&[
        "replay",
        log.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--threads",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(combined log format): 4 lines, 2 requests, 2 clients"));
    assert!(text.contains("2 malformed lines"), "{text}");
    assert!(text.contains("  line 2: no [timestamp]"), "{text}");
    assert!(text.contains("  line 3: not valid UTF-8"), "{text}");
    assert!(text.contains(&format!("plot: {}", svg.display())), "{text}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"), "{drawn:.100}");
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&svg);
}

#[test]
fn replay_errors_exit_2() {
    let out = limitcore(&["replay", "--algorithms", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown algorithm \"nope\""));

    let out = limitcore(&["replay", "/nonexistent/limitcore.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open /nonexistent/limitcore.log"));

    let out = limitcore(&[
        "replay",
        &edgar_sample(),
        "--quota",
        "1000/us",
        "--algorithms",
        "fixed-window",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no algorithm could run: fixed-window"));

    // One early but valid time makes a span of 25 years: too long to plot, not a crash.
    let far_apart = scratch("far-apart.tsv");
    std::fs::write(&far_apart, "a\t-\t1\tGET\nb\t-\t807256800\tGET\n").unwrap();
    let svg = scratch("far-apart.svg");
    let out = limitcore(&[
        "replay",
        far_apart.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the trace spans 807256800 s"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_file(&far_apart);
    let _ = std::fs::remove_file(&svg);

    let not_a_log = scratch("not-a-log.txt");
    std::fs::write(&not_a_log, "hello\nworld\n").unwrap();
    let out = limitcore(&["replay", not_a_log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot tell the log's format"));
    let _ = std::fs::remove_file(&not_a_log);
}

#[test]
fn pace_json_and_its_errors() {
    let out = limitcore(&[
        "pace",
        "--rate",
        "1000",
        "--workers",
        "1",
        "--seconds",
        "0.05",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).expect("JSON on stdout");
    assert_keys(
        &report,
        &[
            "config",
            "cores",
            "interval_ns",
            "limitcore",
            "governor",
            "ratio",
            "limitcore_counters",
        ],
    );
    assert_keys(
        &report["config"],
        &[
            "rate",
            "workers",
            "seconds",
            "schedule",
            "spin_us",
            "work_us",
            "governor_burst",
        ],
    );
    assert_eq!(report["config"]["schedule"], "open");
    assert_eq!(report["interval_ns"], 1_000_000);
    assert_eq!(report["limitcore"]["sends"], 50);
    assert_keys(
        &report["limitcore"],
        &[
            "sends",
            "rate",
            "wall_rate",
            "schedule_lateness_us",
            "ideal_lateness_us",
            "slip_us",
        ],
    );
    assert_eq!(report["governor"]["slip_us"], Value::Null);
    // The pacer's own counters: 50 slots 1 ms apart, all reserved at t0 (slot k waits k ms),
    // and the one worker's refusal after the last slot, which ended it.
    assert_keys(
        &report["limitcore_counters"],
        &["reservations", "refused", "delayed", "wait_total_ns"],
    );
    assert_eq!(report["limitcore_counters"]["reservations"], 50);
    assert_eq!(report["limitcore_counters"]["refused"], 1);
    assert_eq!(report["limitcore_counters"]["delayed"], 49);
    assert_eq!(
        report["limitcore_counters"]["wait_total_ns"],
        1_000_000u64 * 50 * 49 / 2
    );

    for (args, message) in [
        (
            &["pace", "--workers", "0"][..],
            "--workers must be at least 1",
        ),
        (&["pace", "--rate", "0"], "--rate 0"),
        (
            &["pace", "--seconds=-1"],
            "--seconds -1 is not in (0, 86400]",
        ),
    ] {
        let out = limitcore(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}
