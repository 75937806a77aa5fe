//! The workspace's layering, checked on its source: in the core (`src/`) and in every crate
//! under `crates/` ([`CRATES`]), nothing imports an item through the crate root (`lib.rs`
//! only re-exports), the top-level modules import one another without a cycle, and none
//! imports a module of a layer above its own ([`LAYERS`], the list of the core's crate
//! docs' "# Layers" and the README's "Layout"; each crate's own list in [`CRATES`], the
//! list of its crate docs).
//!
//! `cargo test -p limitcore --test layers` is the command that shows it: on failure it prints
//! every import through the crate root (file and line), every cycle of the import graph (the
//! modules in order, with a file and line that makes each edge) and every import that runs
//! up the layers (or out of a module that must import nothing, [`LEAVES`]); with
//! `-- --nocapture` it prints each crate's graph.
//!
//! What it reads: every `.rs` file of the crate's `src/`, with comments (doc comments
//! included) and string literals blanked out, so that intra-doc links
//! (`[...](crate::Gcra)`) are free. A crate root is `lib.rs` or a binary's `main.rs` (which
//! imports the library by its name). In what remains, every `crate::` path (in a `use` line,
//! a grouped `use crate::{...}` over several lines, or a path in code):
//!
//! - names an item directly at the root (`crate::Quota`, `crate::{DefaultClock, ...}`: an
//!   item whose name starts with an uppercase letter): refused in every file but the crate
//!   root, which re-exports them; everything else imports an item from its home module
//!   (`crate::quota::Quota`). Test code included.
//! - names a top-level module (`crate::clock::...`, `crate::{clock::..., quota::...}`): an
//!   edge of the import graph from the top-level module of the file (`src/budget/wait.rs` is
//!   in `budget`) to that module.
//!
//! Test code (an item under `#[cfg(test)]` or `#[cfg(all(test, ...))]`, and the file of such
//! a `mod x;`) makes no edge: a test may check a module against a layer above it (`quota`'s
//! tests build the rules' quotas).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first, with their top-level modules: a module imports only modules
/// of its own layer or of the layers below it (and, within a layer, without a cycle). A new
/// top-level module must be placed here. `notify` is the waiting layer (issue 27).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "primitives",
        &["sync", "cas", "cell", "clock", "notify", "tally"],
    ),
    (
        "vocabulary",
        &["quota", "decision", "limiter", "async_limiter"],
    ),
    ("rules", &["rules"]),
    ("shells", &["limiters", "wait"]),
    (
        "composites",
        &[
            "budget",
            "keyed",
            "all",
            "batch",
            "counters",
            "throttler",
            "lanes",
            "concurrency",
        ],
    ),
    ("on top", &["io", "algorithm", "reference"]),
];

/// Modules that import nothing of the crate: the decision vocabulary every layer speaks.
const LEAVES: &[&str] = &["decision"];

/// A crate's layers, lowest first, each named, with its top-level modules.
type Layers = &'static [(&'static str, &'static [&'static str])];

/// One crate of the workspace under `crates/`: its directory, its layers and its leaves
/// (as [`LAYERS`] and [`LEAVES`] are the core's).
struct Crate {
    dir: &'static str,
    layers: Layers,
    leaves: &'static [&'static str],
}

/// The workspace's other crates, each with the layers of its crate docs (a crate whose
/// `src/` holds one file, or whose modules import nothing of one another, has one layer).
/// A new crate under `crates/` must be placed here.
const CRATES: &[Crate] = &[
    Crate {
        dir: "cli",
        layers: &[
            ("traces", &["trace"]),
            ("tools", &["engine", "pace", "lanes", "copy", "scale"]),
            ("reports", &["report"]),
        ],
        leaves: &[],
    },
    // One file: no module.
    Crate {
        dir: "no-std-check",
        layers: &[],
        leaves: &[],
    },
    Crate {
        dir: "redis",
        layers: &[
            (
                "primitives",
                &["sync", "time", "error", "scripts", "telemetry"],
            ),
            ("client and policies", &["client", "policy", "fair"]),
            ("exact", &["exact"]),
            ("leased", &["leased"]),
            ("test servers", &["server"]),
        ],
        leaves: &["error"],
    },
    Crate {
        dir: "redis-server-tests",
        layers: &[("helpers", &["fair_model", "proxy"])],
        leaves: &[],
    },
    Crate {
        dir: "rls",
        layers: &[
            (
                "vocabulary",
                &["clock", "config", "metrics", "pb", "protocol", "tls"],
            ),
            ("matching and backends", &["matching", "backend"]),
            ("service", &["service"]),
            ("faces", &["grpc", "json", "http", "reload", "xds"]),
            ("server", &["server"]),
        ],
        leaves: &["clock", "metrics", "pb"],
    },
    Crate {
        dir: "testkit",
        layers: &[
            ("models and strategies", &["as_model", "strategies"]),
            ("drivers", &["differential", "fuzz"]),
        ],
        leaves: &[],
    },
    Crate {
        dir: "tower",
        layers: &[
            (
                "vocabulary",
                &[
                    "body",
                    "forwarded",
                    "headers",
                    "mode",
                    "response_cost",
                    "outcome",
                ],
            ),
            ("keys and metrics", &["key", "telemetry"]),
            ("decisions", &["policy", "future"]),
            ("services", &["service", "remote", "metered"]),
            (
                "layers",
                &["layer", "builder", "concurrency", "pace", "limit_req"],
            ),
        ],
        leaves: &[],
    },
];

fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// One file of `src/`, read.
struct Source {
    /// Relative to `src/`, with `/` separators.
    path: String,
    /// The top-level module it belongs to (`None` for `lib.rs`).
    module: Option<String>,
    /// The code with comments and literals blanked (same length, same line breaks).
    code: Vec<u8>,
    /// The same without its test items (empty for a test module's file).
    lib_code: Vec<u8>,
}

/// A `crate::` path found in code: its first segment (or each first segment of a group).
struct Reference {
    line: usize,
    first: String,
}

fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with comments, string literals and character literals replaced by spaces (line
/// breaks kept, so that positions and line numbers stay those of the file).
fn blank_comments_and_literals(text: &str) -> Vec<u8> {
    let src = text.as_bytes();
    let mut out = src.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(src.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < src.len() {
                if src[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (src[i] == b'r' || rest.starts_with(b"br"))
            && (i == 0 || !is_ident(src[i - 1]))
            && {
                let k = if src[i] == b'r' { i + 1 } else { i + 2 };
                let hashes = src[k..].iter().take_while(|&&b| b == b'#').count();
                src.get(k + hashes) == Some(&b'"')
            }
        {
            // A raw string: r"...", r#"..."#, br"...".
            let k = if src[i] == b'r' { i + 1 } else { i + 2 };
            let hashes = src[k..].iter().take_while(|&&b| b == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat(b'#').take(hashes));
            let body = k + hashes + 1;
            let end = src[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(src.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if src[i] == b'"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != b'"' {
                j += if src[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(src.len());
            blank(&mut out, i, end);
            i = end;
        } else if src[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}', a multi-byte character) or a lifetime.
            if src.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < src.len() && src[j] != b'\'' {
                    j += 1;
                }
                blank(&mut out, i, j + 1);
                i = j + 1;
            } else {
                let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if src.get(i + 1 + ch_len) == Some(&b'\'') {
                    blank(&mut out, i, i + 2 + ch_len);
                    i += 2 + ch_len;
                } else {
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

fn skip_space(code: &[u8], mut i: usize) -> usize {
    while i < code.len() && code[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The end of the bracketed group opening at `code[open]` (one past its closing bracket).
fn group_end(code: &[u8], open: usize) -> usize {
    let (o, c) = match code[open] {
        b'{' => (b'{', b'}'),
        b'(' => (b'(', b')'),
        _ => (b'[', b']'),
    };
    let mut depth = 0;
    for (j, &b) in code.iter().enumerate().skip(open) {
        if b == o {
            depth += 1;
        } else if b == c {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        }
    }
    code.len()
}

/// `code` with the test items blanked: whatever follows a `#[cfg(test)]` or
/// `#[cfg(all(test, ...))]` attribute, up to the end of its item (`;` or a braced body).
/// Returns the names of the file modules so declared (`#[cfg(test)] mod tests;`).
fn blank_test_items(code: &mut [u8]) -> Vec<String> {
    let mut file_modules = Vec::new();
    let marker = b"#[cfg(";
    let mut i = 0;
    while let Some(p) = code[i..].windows(marker.len()).position(|w| w == marker) {
        let start = i + p;
        let attribute_end = group_end(code, start + 1);
        let condition: String = String::from_utf8_lossy(&code[start..attribute_end])
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if condition != "#[cfg(test)]" && !condition.starts_with("#[cfg(all(test,") {
            i = attribute_end;
            continue;
        }
        let mut j = attribute_end;
        // Further attributes of the same item.
        loop {
            j = skip_space(code, j);
            if code[j..].starts_with(b"#[") {
                j = group_end(code, j + 1);
            } else {
                break;
            }
        }
        let item = j;
        let mut end = j;
        while end < code.len() && code[end] != b';' && code[end] != b'{' {
            end += 1;
        }
        let end = if end < code.len() && code[end] == b'{' {
            group_end(code, end)
        } else {
            let words = String::from_utf8_lossy(&code[item..end]).into_owned();
            let words: Vec<&str> = words.split_whitespace().collect();
            if let Some(m) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(m + 1) {
                    file_modules.push((*name).to_owned());
                }
            }
            (end + 1).min(code.len())
        };
        for b in &mut code[start..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = end;
    }
    file_modules
}

/// The first segments of the items of a `use` group `{a::b, C, d::{e, f}}` opening at `open`.
fn group_firsts(code: &[u8], open: usize, line: usize, out: &mut Vec<Reference>) {
    let end = group_end(code, open);
    let mut i = open + 1;
    while i < end - 1 {
        i = skip_space(code, i);
        let start = i;
        while i < end && is_ident(code[i]) {
            i += 1;
        }
        if i > start {
            out.push(Reference {
                line,
                first: String::from_utf8_lossy(&code[start..i]).into_owned(),
            });
        }
        // The rest of this item, up to the next comma at this depth.
        while i < end - 1 && code[i] != b',' {
            if matches!(code[i], b'{' | b'(' | b'[') {
                i = group_end(code, i);
            } else {
                i += 1;
            }
        }
        i += 1;
    }
}

/// Every `crate::` path in `code`, by its first segment(s).
fn crate_references(code: &[u8]) -> Vec<Reference> {
    let mut out = Vec::new();
    let word = b"crate";
    let mut i = 0;
    while let Some(p) = code[i..].windows(word.len()).position(|w| w == word) {
        let at = i + p;
        i = at + word.len();
        let before = at.checked_sub(1).map(|k| code[k]);
        if before.is_some_and(|b| is_ident(b) || b == b'$')
            || code.get(i).is_some_and(|&b| is_ident(b))
        {
            continue;
        }
        let j = skip_space(code, i);
        if !code[j..].starts_with(b"::") {
            continue; // `pub(crate)`, `crate` alone
        }
        let j = skip_space(code, j + 2);
        let line = 1 + code[..at].iter().filter(|&&b| b == b'\n').count();
        if code.get(j) == Some(&b'{') {
            group_firsts(code, j, line, &mut out);
        } else {
            let end = j + code[j..].iter().take_while(|&&b| is_ident(b)).count();
            out.push(Reference {
                line,
                first: String::from_utf8_lossy(&code[j..end]).into_owned(),
            });
        }
    }
    out
}

/// Every file of the crate whose sources are in `src`.
fn read_sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut sources = Vec::new();
    let mut test_files = BTreeSet::new();
    for file in files {
        let path = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = fs::read_to_string(&file).unwrap();
        let code = blank_comments_and_literals(&text);
        let mut lib_code = code.clone();
        let root = is_root(&path);
        let dir = match path.rsplit_once('/') {
            Some((dir, "mod.rs")) => format!("{dir}/"),
            Some((dir, name)) => format!("{dir}/{}/", name.trim_end_matches(".rs")),
            None if root => String::new(),
            None => format!("{}/", path.trim_end_matches(".rs")),
        };
        for name in blank_test_items(&mut lib_code) {
            test_files.insert(format!("{dir}{name}.rs"));
            test_files.insert(format!("{dir}{name}/mod.rs"));
        }
        let module = match path.split_once('/') {
            Some((top, _)) => Some(top.to_owned()),
            None if root => None,
            None => Some(path.trim_end_matches(".rs").to_owned()),
        };
        sources.push(Source {
            path,
            module,
            code,
            lib_code,
        });
    }
    for source in &mut sources {
        if test_files.contains(&source.path) {
            source.lib_code.clear();
        }
    }
    sources
}

/// Whether the file at `path` (relative to `src/`) is a crate root: the library's
/// `lib.rs`, or a binary's `main.rs` (which imports the library by its name).
fn is_root(path: &str) -> bool {
    path == "lib.rs" || path == "main.rs"
}

/// The cycles of `graph`, each once (its elementary circuits through the edges that are in
/// a strongly connected component, found by depth-first search from each node in order,
/// visiting only nodes after the start).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        let last = path.last().unwrap().clone();
        for next in graph.get(&last).into_iter().flatten() {
            if next == start {
                found.push(path.clone());
            } else if next.as_str() > start && !path.contains(next) {
                path.push(next.clone());
                walk(graph, start, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for start in graph.keys() {
        walk(graph, start, &mut vec![start.clone()], &mut found);
    }
    found
}

/// Every import of the crate in `src` (shown as `shown/`) through its root, every cycle of
/// its top-level modules' import graph, every import up `layers` or out of a module of
/// `leaves`, and every top-level module in no layer: the report (empty if none), and the
/// graph printed.
fn check(src: &Path, shown: &str, layers: Layers, leaves: &[&str]) -> String {
    let sources = read_sources(src);
    let modules: BTreeSet<String> = sources.iter().filter_map(|s| s.module.clone()).collect();

    let mut report = String::new();
    // (from, to) -> where.
    let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for source in &sources {
        let Some(from) = &source.module else { continue };
        // Through the root: refused everywhere, test code included.
        for r in crate_references(&source.code) {
            if r.first.starts_with(|c: char| c.is_ascii_uppercase()) {
                writeln!(
                    report,
                    "{shown}/{}:{}: imports `crate::{}` through the crate root (import it from its home module)",
                    source.path, r.line, r.first
                )
                .unwrap();
            }
        }
        // The graph: the library's code only.
        for r in crate_references(&source.lib_code) {
            if modules.contains(&r.first) && r.first != *from {
                edges
                    .entry((from.clone(), r.first.clone()))
                    .or_default()
                    .push(format!("{shown}/{}:{}", source.path, r.line));
            }
        }
    }

    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from.clone()).or_default().insert(to.clone());
    }
    for cycle in cycles(&graph) {
        write!(report, "import cycle in {shown}: ").unwrap();
        for (k, from) in cycle.iter().enumerate() {
            let to = &cycle[(k + 1) % cycle.len()];
            let at = &edges[&(from.clone(), to.clone())];
            write!(report, "{from} -> {to} ({}", at[0]).unwrap();
            if at.len() > 1 {
                write!(report, " and {} more", at.len() - 1).unwrap();
            }
            write!(report, "); ").unwrap();
        }
        writeln!(report).unwrap();
    }

    for module in &modules {
        if layer_of(layers, module).is_none() {
            writeln!(report, "{shown}/{module} is in no layer: place it in the crate's layers (and in its crate docs)").unwrap();
        }
    }
    for ((from, to), at) in &edges {
        if leaves.contains(&from.as_str()) {
            writeln!(
                report,
                "{shown}: {from} imports {to}, but imports nothing of the crate (leaves): {}",
                at.join(", ")
            )
            .unwrap();
        }
        if let (Some(a), Some(b)) = (layer_of(layers, from), layer_of(layers, to)) {
            if b > a {
                writeln!(
                    report,
                    "{shown}: {from} ({}) imports {to} ({}), a layer above it: {}",
                    layers[a].0,
                    layers[b].0,
                    at.join(", ")
                )
                .unwrap();
            }
        }
    }

    println!("import graph of {shown}/ (top-level modules):");
    for (from, tos) in &graph {
        println!(
            "  {from} -> {}",
            tos.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    report
}

#[test]
fn lib_rs_is_a_facade_and_the_modules_import_down_the_layers_without_a_cycle() {
    let report = check(&workspace_dir().join("src"), "src", LAYERS, LEAVES);
    assert!(report.is_empty(), "\n{report}");
}

/// Every crate under `crates/` as the core: no import through its root, its top-level
/// modules without a cycle, each importing down the crate's layers ([`CRATES`]).
#[test]
fn every_crate_of_the_workspace_imports_down_its_layers_without_a_cycle() {
    let crates = workspace_dir().join("crates");
    let mut report = String::new();
    let mut dirs: Vec<String> = fs::read_dir(&crates)
        .unwrap_or_else(|e| panic!("read {}: {e}", crates.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    for dir in &dirs {
        match CRATES.iter().find(|c| c.dir == dir.as_str()) {
            Some(c) => {
                let src = crates.join(dir).join("src");
                report += &check(&src, &format!("crates/{dir}/src"), c.layers, c.leaves);
            }
            None => writeln!(
                report,
                "crates/{dir} is not in CRATES: place it there, with its layers"
            )
            .unwrap(),
        }
    }
    for c in CRATES {
        if !dirs.iter().any(|d| d == c.dir) {
            writeln!(report, "CRATES names crates/{}, which has no src/", c.dir).unwrap();
        }
    }
    assert!(report.is_empty(), "\n{report}");
}
