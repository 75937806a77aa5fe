//! Every validation and matching rule of the configuration as table tests, one per
//! behaviour of envoyproxy/ratelimit's configuration fixtures (restated here, not copied).

use limitcore::Algorithm;
use limitcore_rls::matching::find;
use limitcore_rls::{Config, Settings, Unit};
use std::path::PathBuf;

fn load(text: &str) -> Result<Config, limitcore_rls::ConfigError> {
    Config::from_str_named("t.yaml", text, &Settings::default())
}

/// An invalid case: what it shows, the YAML, the line, the key, a fragment of the message.
type Invalid = (
    &'static str,
    &'static str,
    usize,
    Option<&'static str>,
    &'static str,
);

const INVALID: &[Invalid] = &[
    ("bad YAML names its line", "domain: d\ndescriptors:\n  - key: a\n    value: [x\n", 5, None, "error loading config file"),
    ("misspelled top-level key", "domian: d\n", 1, Some("domian"), "unknown key 'domian'"),
    ("misspelled descriptor key", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {unit: second, requests_per_unit: 1}\n", 4, Some("rate_limt"), "unknown key 'rate_limt'"),
    ("misspelled rate_limit key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_units: 1\n", 6, Some("requests_per_units"), "unknown key"),
    ("non-string key", "domain: d\ndescriptors:\n  - key: a\n    1: x\n", 4, None, "key is not of type string"),
    ("non-string top-level key", "true: d\n", 1, None, "key is not of type string"),
    ("empty domain", "domain: \"\"\ndescriptors: []\n", 1, Some("domain"), "domain must not be empty"),
    ("missing domain", "descriptors: []\n", 1, Some("domain"), "domain must not be empty"),
    ("empty file", "", 0, Some("domain"), "domain must not be empty"),
    ("empty descriptor key", "domain: d\ndescriptors:\n  - key: \"\"\n    rate_limit: {unit: second, requests_per_unit: 1}\n", 3, Some("key"), "descriptor has empty key"),
    ("missing descriptor key", "domain: d\ndescriptors:\n  - value: v\n", 3, Some("key"), "descriptor has empty key"),
    ("duplicate composite key", "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n", 5, Some("key"), "duplicate descriptor composite key 'd.a_b'"),
    ("duplicate nested composite key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n", 6, Some("key"), "duplicate descriptor composite key 'd.a.b'"),
    ("bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n", 5, Some("unit"), "invalid rate limit unit"),
    ("missing unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 1\n", 4, Some("unit"), "invalid rate limit unit"),
    ("unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n", 6, Some("unit"), "should not specify rate limit unit when unlimited"),
    ("a rule replacing itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: me\n", 9, Some("replaces"), "replaces should not contain name of same descriptor"),
    ("an empty replaces entry", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: \"\"\n", 8, Some("replaces"), "should not have an empty replaces entry"),
    ("requests_per_unit not a number", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: many}\n", 4, Some("requests_per_unit"), "must be an integer"),
    ("negative requests_per_unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, Some("requests_per_unit"), "must be an integer"),
    ("shadow_mode not a boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n", 4, Some("shadow_mode"), "must be true or false"),
    ("descriptors not a list", "domain: d\ndescriptors: {key: a}\n", 2, Some("descriptors"), "must be a list"),
    ("unknown algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n", 4, Some("algorithm"), "unknown algorithm"),
    ("leaky bucket is no rate limit", "domain: d\nalgorithm: leaky-bucket\n", 2, Some("algorithm"), "unknown algorithm"),
    ("burst on a window algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, burst: 9}\n", 4, Some("rate_limit"), "fixed-window"),
    ("zero burst", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, burst: 0}\n", 4, Some("burst"), "must be an integer in 1"),
    ("a key given twice", "domain: d\ndomain: e\n", 2, Some("domain"), "given twice"),
];

#[test]
fn every_invalid_configuration_is_refused_with_file_line_and_key() {
    for (what, yaml, line, key, fragment) in INVALID {
        let err = load(yaml).expect_err(what);
        assert_eq!(err.file, PathBuf::from("t.yaml"), "{what}");
        assert_eq!(err.line, *line, "{what}: {err}");
        assert_eq!(err.key.as_deref(), *key, "{what}: {err}");
        assert!(err.message.contains(fragment), "{what}: {err}");
    }
}

#[test]
fn duplicate_domains_are_refused_unless_merged() {
    let a = (PathBuf::from("a.yaml"), "domain: d\ndescriptors:\n  - key: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n".to_owned());
    let b = (PathBuf::from("b.yaml"), "domain: d\ndescriptors:\n  - key: y\n    rate_limit: {unit: minute, requests_per_unit: 2}\n".to_owned());
    let err = Config::from_files(&[a.clone(), b.clone()], &Settings::default()).unwrap_err();
    assert_eq!((err.file.clone(), err.line), (PathBuf::from("b.yaml"), 1));
    assert!(err.message.contains("duplicate domain 'd'"), "{err}");
    let merged = Settings {
        merge_domains: true,
        ..Settings::default()
    };
    let config = Config::from_files(&[a.clone(), b], &merged).unwrap();
    let d = config.domain("d").unwrap();
    assert!(find(d, &[("x", "1")]).is_some());
    assert_eq!(
        find(d, &[("y", "1")]).unwrap().rule.limit.unwrap().unit,
        Unit::Minute
    );
    // Merged files still may not define one composite key twice.
    let again = (
        PathBuf::from("c.yaml"),
        "domain: d\ndescriptors:\n  - key: x\n".to_owned(),
    );
    let err = Config::from_files(&[a, again], &merged).unwrap_err();
    assert!(
        err.message
            .contains("duplicate descriptor composite key 'd.x'"),
        "{err}"
    );
    assert_eq!(err.file, PathBuf::from("c.yaml"));
}

const BASIC: &str = "
domain: basic
descriptors:
  - key: key1
    value: value1
    rate_limit: {unit: second, requests_per_unit: 5}
    descriptors:
      - key: subkey1
        rate_limit: {unit: minute, requests_per_unit: 10}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: hour, requests_per_unit: 20}
  - key: key2
    rate_limit: {unit: day, requests_per_unit: 30}
  - key: key2
    value: white
    rate_limit: {unlimited: true}
  - key: key3
    descriptors:
      - key: sub
        rate_limit: {unit: YEAR, requests_per_unit: 40}
  - key: key4
    value: nolimit
  - key: key5
    rate_limit: {unit: Month, requests_per_unit: 50}
";

/// A matching case: what it shows, the descriptor, the matched path (or `None`).
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    Option<&'static str>,
);

const MATCHES: &[Case] = &[
    ("an exact value", &[("key1", "value1")], Some("key1_value1")),
    (
        "an unknown value of a key with no default",
        &[("key1", "other")],
        None,
    ),
    ("an unknown key", &[("nokey", "x")], None),
    (
        "the key's default below an exact node",
        &[("key1", "value1"), ("subkey1", "any")],
        Some("key1_value1.subkey1"),
    ),
    (
        "an exact value wins over the default",
        &[("key1", "value1"), ("subkey1", "subvalue1")],
        Some("key1_value1.subkey1_subvalue1"),
    ),
    (
        "the key's default at the top",
        &[("key2", "anything")],
        Some("key2"),
    ),
    (
        "a whitelisting node matches",
        &[("key2", "white")],
        Some("key2_white"),
    ),
    (
        "an intermediate node without a limit",
        &[("key3", "x")],
        None,
    ),
    (
        "the limit of the last entry's node",
        &[("key3", "x"), ("sub", "y")],
        Some("key3.sub"),
    ),
    (
        "a node without a rate_limit limits nothing",
        &[("key4", "nolimit")],
        None,
    ),
    (
        "a descriptor longer than the tree",
        &[("key2", "x"), ("more", "y")],
        None,
    ),
    (
        "a shorter descriptor does not borrow a deeper limit",
        &[("key3", "x")],
        None,
    ),
    (
        "entries in another order",
        &[("subkey1", "any"), ("key1", "value1")],
        None,
    ),
];

#[test]
fn basic_matching_and_overrides() {
    let config = load(BASIC).unwrap();
    let d = config.domain("basic").unwrap();
    for (what, entries, path) in MATCHES {
        let got = find(d, entries).map(|m| m.rule.path.clone());
        assert_eq!(got.as_deref(), *path, "{what}");
    }
    let white = find(d, &[("key2", "white")]).unwrap();
    assert!(white.rule.limit.is_none(), "unlimited");
    let units: Vec<Unit> = ["key1_value1", "key3.sub", "key5"]
        .iter()
        .map(|p| {
            config
                .rules()
                .iter()
                .find(|r| r.path == *p)
                .unwrap()
                .limit
                .unwrap()
                .unit
        })
        .collect();
    assert_eq!(
        units,
        vec![Unit::Second, Unit::Year, Unit::Month],
        "units read in any case"
    );
    // Counters: per value at a default node.
    assert_ne!(
        find(d, &[("key2", "a")]).unwrap().counter,
        find(d, &[("key2", "b")]).unwrap().counter
    );
}

const WILDCARDS: &str = "
domain: wild
descriptors:
  - key: path
    value: /api/*
    rate_limit: {name: api, unit: second, requests_per_unit: 1}
  - key: path
    value: /api/v2/*
    rate_limit: {name: v2, unit: second, requests_per_unit: 2}
  - key: path
    value: /api/exact
    rate_limit: {name: exact, unit: second, requests_per_unit: 3}
  - key: path
    rate_limit: {name: default, unit: second, requests_per_unit: 4}
  - key: host
    value: '*.example.*'
    share_threshold: true
    rate_limit: {name: shared, unit: second, requests_per_unit: 5}
  - key: host
    value: 'api-*'
    rate_limit: {name: per-host, unit: second, requests_per_unit: 6}
";

#[test]
fn wildcards_and_shared_wildcards() {
    let config = load(WILDCARDS).unwrap();
    let d = config.domain("wild").unwrap();
    let name = |e: &[(&str, &str)]| find(d, e).map(|m| m.rule.name.clone().unwrap());
    assert_eq!(
        name(&[("path", "/api/exact")]).as_deref(),
        Some("exact"),
        "exact before wildcards"
    );
    assert_eq!(
        name(&[("path", "/api/v2/x")]).as_deref(),
        Some("api"),
        "the first wildcard in load order"
    );
    assert_eq!(
        name(&[("path", "/api/")]).as_deref(),
        Some("api"),
        "a star matches nothing too"
    );
    assert_eq!(
        name(&[("path", "/other")]).as_deref(),
        Some("default"),
        "then the key's default"
    );
    assert_eq!(
        name(&[("host", "www.example.org")]).as_deref(),
        Some("shared"),
        "a star in the middle"
    );
    // share_threshold: every value the wildcard matches shares one counter.
    let a = find(d, &[("host", "a.example.com")]).unwrap();
    let b = find(d, &[("host", "b.example.net")]).unwrap();
    assert_eq!(a.counter, b.counter);
    // Without it, each value has its own.
    let a = find(d, &[("host", "api-1")]).unwrap();
    let b = find(d, &[("host", "api-2")]).unwrap();
    assert_ne!(a.counter, b.counter);
    assert_eq!(name(&[("host", "nothing")]), None);
}

const FLAGS: &str = "
domain: flags
algorithm: gcra
burst: 7
descriptors:
  - key: a
    shadow_mode: true
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: b
    quota_mode: true
    metadata:
      owner: team-b
      tags: [x, y]
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: sliding-log}
  - key: c
    value_to_metric: true
    descriptors:
      - key: d
        rate_limit: {name: named, unit: hour, requests_per_unit: 2, replaces: [{name: other}]}
";

#[test]
fn shadow_quota_metadata_metrics_and_limitcore_keys() {
    let config = load(FLAGS).unwrap();
    let d = config.domain("flags").unwrap();
    let a = find(d, &[("a", "1")]).unwrap();
    assert!(a.rule.shadow_mode && a.rule.detailed_metric);
    let limit = a.rule.limit.unwrap();
    assert_eq!(
        (limit.algorithm, limit.burst),
        (Algorithm::Gcra, Some(7)),
        "the file's defaults"
    );
    assert_eq!(
        a.metric.as_deref(),
        Some("a_1"),
        "detailed_metric: the runtime descriptor"
    );
    let b = find(d, &[("b", "2")]).unwrap();
    assert!(b.rule.quota_mode);
    assert_eq!(b.rule.limit.unwrap().algorithm, Algorithm::SlidingLog);
    assert_eq!(
        b.rule.metadata,
        Some(serde_json::json!({"owner": "team-b", "tags": ["x", "y"]}))
    );
    assert_eq!(b.metric, None, "no runtime value in metrics by default");
    let c = find(d, &[("c", "v9"), ("d", "w")]).unwrap();
    assert_eq!(
        c.metric.as_deref(),
        Some("c_v9.d"),
        "value_to_metric: that level's value"
    );
    assert_eq!(c.rule.label(), "named");
    assert_eq!(c.rule.replaces, vec!["other".to_owned()]);
}

#[test]
fn a_service_default_algorithm_and_burst() {
    let settings = Settings {
        algorithm: Algorithm::TokenBucket,
        burst: Some(3),
        ..Settings::default()
    };
    let config = Config::from_str_named("s.yaml", "domain: s\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n", &settings).unwrap();
    let limit = config.rules()[0].limit.unwrap();
    assert_eq!(
        (limit.algorithm, limit.burst),
        (Algorithm::TokenBucket, Some(3))
    );
}

#[test]
fn the_shipped_example_loads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config");
    let config = Config::load_dir(&dir, &Settings::default()).unwrap();
    assert!(config.domain("example").is_some());
}

#[test]
fn load_dir_reads_yaml_files_in_name_order_and_skips_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.yaml"), "domain: b\n").unwrap();
    std::fs::write(dir.path().join("a.yml"), "domain: a\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml: [").unwrap();
    std::fs::write(dir.path().join(".hidden.yaml"), "not yaml: [").unwrap();
    let config = Config::load_dir(dir.path(), &Settings::default()).unwrap();
    assert!(config.domain("a").is_some() && config.domain("b").is_some());
    let err = Config::load_dir(&dir.path().join("missing"), &Settings::default()).unwrap_err();
    assert!(err.message.contains("cannot read"), "{err}");
}
