#!/usr/bin/env bash
# What a user of the core compiles (BENCHMARKS.md, "Build cost"): throwaway crates outside
# the workspace, in $DIR (default /tmp/limitcore-build-cost), on the core at BEFORE and AFTER
# (git revisions, default f5aa45e and HEAD) and on governor 0.10.4; clean release builds,
# interleaved, ROUNDS rounds (default 3); then the core's own compile (its lib.rs touched),
# the lines of the core rustc read (its dep-info) and the dependency trees.
# Usage: bash benches/build_cost.sh   (about 15 minutes on 2 cores)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DIR:-/tmp/limitcore-build-cost}
BEFORE=${BEFORE:-f5aa45e}
AFTER=${AFTER:-HEAD}
ROUNDS=${ROUNDS:-3}
rm -rf "$DIR" && mkdir -p "$DIR/lc-before" "$DIR/lc-after"
git -C "$repo" archive "$BEFORE" | tar -x -C "$DIR/lc-before"
git -C "$repo" archive "$AFTER" | tar -x -C "$DIR/lc-after"
cd "$DIR"

crate() { # name, dependency line, main.rs
    mkdir -p "$1/src"
    printf '[package]\nname = "%s"\nversion = "0.1.0"\nedition = "2021"\npublish = false\n\n[workspace]\n\n[dependencies]\n%s\n' \
        "$1" "$2" > "$1/Cargo.toml"
    printf '%s\n' "$3" > "$1/src/main.rs"
}
gcra='use limitcore::{Gcra, Quota, RateLimiter};
fn main() {
    let limiter = Gcra::new(Quota::per_second(100).unwrap()).unwrap();
    println!("{:?}", limiter.try_acquire());
}'
permits='use limitcore::concurrency::Permits;
fn main() {
    let permits = Permits::new(4).unwrap();
    println!("{:?}", permits.try_acquire(1).map(|p| p.n()));
}'
crate gcra-before 'limitcore = { path = "../lc-before" }' "$gcra"
crate gcra-after 'limitcore = { path = "../lc-after" }' "$gcra"
crate gcra-governor 'governor = "=0.10.4"' 'use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
fn main() {
    let limiter = RateLimiter::direct(Quota::per_second(NonZeroU32::new(100).unwrap()));
    println!("{:?}", limiter.check().is_ok());
}'
crate permits-before 'limitcore = { path = "../lc-before" }' "$permits"
crate permits-after 'limitcore = { path = "../lc-after", default-features = false, features = ["concurrency"] }' "$permits"
crate std-only-after 'limitcore = { path = "../lc-after", default-features = false, features = ["std"] }' "$gcra"
users="gcra-before gcra-after gcra-governor permits-before permits-after std-only-after"
for d in $users; do (cd "$d" && cargo generate-lockfile -q); done

echo "== clean release builds (seconds; load average at the start)"
for round in $(seq "$ROUNDS"); do
    for d in $users; do
        rm -rf "target-$d"
        load=$(cut -d' ' -f1 /proc/loadavg)
        start=$(date +%s.%N)
        (cd "$d" && CARGO_TARGET_DIR="$DIR/target-$d" cargo build --release -q)
        echo "$round $d $(echo "$(date +%s.%N) - $start" | bc) load=$load"
    done
done

echo "== the core alone (lib.rs touched, dependencies built)"
for round in $(seq "$ROUNDS"); do
    for d in gcra-before gcra-after permits-after std-only-after; do
        case $d in *before) touch lc-before/src/lib.rs ;; *) touch lc-after/src/lib.rs ;; esac
        start=$(date +%s.%N)
        (cd "$d" && CARGO_TARGET_DIR="$DIR/target-$d" cargo build --release -q)
        echo "$round $d $(echo "$(date +%s.%N) - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
    done
done

echo "== lines of the core compiled, and the dependency trees"
for d in $users; do
    lines=-
    if info=$(ls "target-$d"/release/deps/limitcore-*.d 2>/dev/null | head -1) && [ -n "$info" ]; then
        files=$(head -1 "$info" | tr ' ' '\n' | grep '\.rs$')
        lines="$(echo "$files" | xargs cat | wc -l) lines in $(echo "$files" | wc -l) files"
    fi
    tree=$(cd "$d" && cargo tree | wc -l)
    distinct=$(cd "$d" && cargo tree --prefix none -e normal,build | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u | wc -l)
    echo "$d: $lines; cargo tree | wc -l: $tree; distinct crates: $distinct"
done
