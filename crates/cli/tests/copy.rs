//! `limitcore copy` end to end: the copied file, the report (text and JSON), the pace on the
//! real clock (generous bounds), and the exit statuses of bad settings (2) and of a copy that
//! fails part of the way (1, never reported as done).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn limitcore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_limitcore"))
        .args(args)
        .output()
        .expect("the limitcore binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `len` bytes that differ from one MiB to the next.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&text(&out.stdout)).expect("JSON on stdout")
}

#[test]
fn help_names_the_arguments() {
    let out = limitcore(&["copy", "--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for word in [
        "<SRC>",
        "<DST>",
        "--rate",
        "--burst",
        "--json",
        "Exit status",
    ] {
        assert!(help.contains(word), "copy --help lacks {word}:\n{help}");
    }
    assert!(text(&limitcore(&["--help"]).stdout).contains("copy"));
}

#[test]
fn copies_the_file_exactly_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let data = pattern(4 << 20);
    std::fs::write(&src, &data).unwrap();
    let out = limitcore(&[
        "copy",
        path(&src),
        path(&dst),
        "--rate",
        "256MiB/s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    let report = json(&out);
    let mut keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "achieved_bytes_per_second",
            "achieved_ratio",
            "burst_bytes",
            "bytes",
            "complete",
            "destination",
            "error",
            "max_window_bytes",
            "quota",
            "rate_bytes_per_second",
            "seconds",
            "source",
            "source_bytes",
            "window_bound_bytes",
            "window_seconds",
            "within_bound",
            "writes"
        ]
    );
    assert_eq!(report["bytes"], 4 << 20);
    assert_eq!(report["source_bytes"], 4 << 20);
    assert_eq!(report["complete"], true);
    assert_eq!(report["error"], Value::Null);
    // 1/64 s of 256 MiB/s is 4 MiB: the default burst is capped at 1 MiB.
    assert_eq!(report["burst_bytes"], 1 << 20);
    assert_eq!(report["writes"], 4);
    assert_eq!(report["rate_bytes_per_second"], 268_435_456.0);
    assert_eq!(report["window_bound_bytes"], (256u64 << 20) + (1 << 20));
    assert_eq!(report["within_bound"], true);
    // Three waits of 1/256 s after the first MiB.
    let seconds = report["seconds"].as_f64().unwrap();
    assert!(seconds >= 3.0 / 256.0, "{report}");
    // Every write within 1 s, so all 4 MiB in one window: unless a loaded machine stretched
    // the copy past a second (it takes 12 ms), then at least a write's MiB.
    let most = report["max_window_bytes"].as_u64().unwrap();
    if seconds < 1.0 {
        assert_eq!(most, 4 << 20, "{report}");
    } else {
        assert!((1 << 20..=4 << 20).contains(&most), "{report}");
    }
}

#[test]
fn keeps_the_rate_and_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    std::fs::write(&src, pattern(3 << 20)).unwrap();
    // 4 MiB/s with 256 KiB at once: 11 waits of 1/16 s.
    let out = limitcore(&[
        "copy",
        path(&src),
        path(&dst),
        "--rate",
        "4MiB/s",
        "--burst",
        "256KiB",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], format!("copy: {} -> {}", path(&src), path(&dst)));
    assert_eq!(
        lines[1],
        "rate: 4194304 B/s (4.00 MiB/s), burst 262144 B (4194304/s burst 262144)"
    );
    assert!(lines[2].starts_with("copied: 3145728 B in "), "{table}");
    assert!(lines[2].ends_with(", 12 writes"), "{table}");
    let seconds: f64 = lines[2]["copied: 3145728 B in ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // At least what the rate needs; at most that and 1.3 s more, a sanity bound for a
    // copy that sleeps far too long (its 11 waits are OS timer sleeps, late by milliseconds
    // on a loaded machine).
    assert!((0.6875..2.0).contains(&seconds), "{table}");
    assert!(lines[3].starts_with("achieved: "), "{table}");
    assert!(
        lines[4].starts_with("most in any 1 s: ")
            && lines[4].ends_with("(rate x 1 s + burst): within"),
        "{table}"
    );
    assert_eq!(lines.len(), 5, "{table}");
}

#[test]
fn bad_settings_exit_2_before_touching_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    std::fs::write(&src, b"data").unwrap();
    for (rate, burst, says) in [
        ("0/s", None, "--rate 0/s"),
        ("fast", None, "--rate fast"),
        (
            "9223372036854775807/s",
            None,
            "--rate 9223372036854775807/s",
        ),
        ("1MiB/s", Some("0"), "burst"),
        ("1MiB/s", Some("1MiB/s"), "--burst 1MiB/s"),
        ("1MiB/s", Some("lots"), "--burst lots"),
    ] {
        let mut args = vec!["copy", path(&src), path(&dst), "--rate", rate];
        args.extend(burst.iter().flat_map(|b| ["--burst", b]));
        let out = limitcore(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rate} {burst:?}: {err}");
        assert!(
            err.starts_with("limitcore copy: ") && err.contains(says),
            "{err}"
        );
        assert!(!dst.exists(), "{rate} {burst:?} created the destination");
    }
}

#[test]
fn unreadable_sources_and_unwritable_destinations_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"data").unwrap();
    let missing = dir.path().join("missing");
    let nowhere = dir.path().join("no-such-dir").join("dst");
    for (from, to, says) in [
        (&missing, &dir.path().join("a"), "cannot read"),
        (
            &dir.path().to_path_buf(),
            &dir.path().join("b"),
            "is a directory",
        ),
        (&src, &nowhere, "cannot write"),
        (&src, &src, "are the same file"),
    ] {
        let out = limitcore(&["copy", path(from), path(to), "--rate", "1MiB/s"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{from:?} -> {to:?}: {err}");
        assert!(err.contains(says), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&src).unwrap(), b"data");
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_copy_is_not_reported_as_done() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, pattern(1 << 20)).unwrap();
    let out = limitcore(&["copy", path(&src), "/dev/full", "--rate", "1GiB/s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("writing /dev/full") && err.contains("0 bytes of 1048576 copied"),
        "{err}"
    );
    assert!(err.contains("incomplete"), "{err}");
    let out = limitcore(&[
        "copy",
        path(&src),
        "/dev/full",
        "--rate",
        "1GiB/s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(
        (&report["complete"], &report["bytes"]),
        (&Value::Bool(false), &Value::from(0))
    );
    assert!(report["error"]
        .as_str()
        .unwrap()
        .contains("writing /dev/full"));
}

#[cfg(target_os = "linux")]
#[test]
fn a_copy_that_fails_part_way_exits_1_with_what_was_copied() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    std::fs::write(&src, pattern(4 << 20)).unwrap();
    // The shell caps the size of the files it and its children write (ulimit -f) and ignores
    // SIGXFSZ, so the write past the cap fails with EFBIG part of the way.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 2048 && exec "$0" copy "$1" "$2" --rate 1GiB/s --json"#)
        .args([env!("CARGO_BIN_EXE_limitcore"), path(&src), path(&dst)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = json(&out);
    let copied = report["bytes"].as_u64().unwrap();
    assert_eq!(report["complete"], false);
    assert!(copied > 0 && copied < 4 << 20, "{report}");
    assert_eq!(copied, std::fs::metadata(&dst).unwrap().len());
    assert_eq!(
        std::fs::read(&dst).unwrap(),
        pattern(4 << 20)[..copied as usize]
    );
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{copied} bytes of 4194304 copied")),
        "{err}"
    );
}
