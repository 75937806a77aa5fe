//! `limitcore lanes` end to end: a short run's JSON and table, its shares and the top lane's
//! waits, and its refusal of bad parameters.

use serde_json::Value;
use std::process::{Command, Output};

fn limitcore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_limitcore"))
        .args(args)
        .output()
        .expect("the limitcore binary runs")
}

#[test]
fn a_short_run_reports_every_lane_and_the_top_lanes_waits() {
    let out = limitcore(&[
        "lanes",
        "--rate",
        "16MiB/s",
        "--burst",
        "256KiB",
        "--seconds",
        "1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rate = v["rate"].as_f64().unwrap();
    assert_eq!(rate, 16.0 * 1048576.0);
    let lanes = v["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 4);
    let roles: Vec<&str> = lanes.iter().map(|l| l["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["reads", "unused", "flusher", "writer"]);
    // The budget holds: at most the rate and a burst over the run; and the writer saturates it
    // (at least 80 % of the rate: the writer always has a request queued, so the budget idles
    // only while every thread of the run is held off its CPU for longer than the burst
    // lasts, 16 ms, 200 ms of such stalls in the second).
    let total = v["total_bytes_per_sec"].as_f64().unwrap();
    let secs = v["seconds"].as_f64().unwrap();
    assert!(total <= rate + 256.0 * 1024.0 / secs + 1.0, "{total}");
    assert!(total >= 0.8 * rate, "{total}");
    let shares: f64 = lanes.iter().map(|l| l["share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9);
    assert_eq!(lanes[1]["bytes"], 0);
    // Reads were made, and they did not wait long: the bound for 64 KiB at 16 MiB/s is
    // 3.9 ms. The waits are measured by the reading thread on the real clock, so they
    // include its wake-ups: the median gets 50 ms of slack for a loaded machine (the
    // slowest read is one preemption's measure, and the median needs half the reads held
    // that long).
    assert!(v["reads"].as_u64().unwrap() > 50);
    assert!((v["bound_us"].as_f64().unwrap() - 3906.25).abs() < 1e-6);
    let median = v["top_wait_us"][0].as_f64().unwrap();
    assert!(
        median < 3906.25 + 50_000.0,
        "the median read waited {median} µs"
    );
}

#[test]
fn the_table_names_the_lanes_and_bad_parameters_are_refused() {
    let out = limitcore(&["lanes", "--rate", "8MiB/s", "--seconds", "0.3"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "lanes: 8388608 B/s",
        "reads",
        "flusher",
        "writer",
        "top lane:",
        "p99",
    ] {
        assert!(text.contains(word), "{text}");
    }
    for bad in [
        &["lanes", "--seconds", "0"][..],
        &["lanes", "--burst", "lots"],
        &["lanes", "--reads", "-1"],
    ] {
        let out = limitcore(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("limitcore lanes"));
    }
}
