#!/usr/bin/env bash
# Short cargo-fuzz campaign over every target in fuzz/ (nightly only).
#
#   .ci/fuzz.sh [extra libFuzzer flags...]
#
# Environment: FUZZ_SECONDS (default 25) per target; FUZZ_TARGETS (default: all nine,
# space separated); FUZZ_JOBS (default 1) targets fuzzed at once, each on one core. Every
# target is built first, in one cargo call. The defaults keep the whole script under about
# 7 minutes on 2 cores (9 × 25 s of fuzzing plus the build). New corpus entries go to fuzz/corpus/TARGET
# (gitignored); the committed inputs in fuzz/regressions/TARGET are read as a second
# corpus, never written.
# Crashes land in fuzz/artifacts/TARGET (gitignored) and fail the script.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${FUZZ_SECONDS:-25}"
targets="${FUZZ_TARGETS:-gcra_differential token_bucket_differential quota_parse fixed_window_differential sliding_log_differential sliding_window_differential leaky_bucket_differential keyed_differential budget_differential}"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: no nightly toolchain (\`cargo +nightly --version\` failed): skipping the fuzz campaign." >&2
    echo "fuzz.sh: install one with \`rustup toolchain install nightly\` to run it." >&2
    exit 0
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

jobs="${FUZZ_JOBS:-1}"
# Every target in one build (the crate and its sanitizer flags compiled once, the targets
# linked side by side); `cargo fuzz run` below then finds them built.
cargo +nightly fuzz build

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=0
running=()

# Wait for the oldest running target, print its log and record whether it failed.
reap() {
    local pid=${running[0]%%:*} target=${running[0]#*:}
    running=("${running[@]:1}")
    if ! wait "$pid"; then
        failed=1
        echo "fuzz.sh: $target FAILED" >&2
    fi
    cat "$logs/$target"
}

for target in $targets; do
    mkdir -p "fuzz/corpus/$target"
    echo "fuzz.sh: $target for ${seconds}s" >&2
    # libFuzzer writes new inputs to the FIRST corpus directory only.
    cargo +nightly fuzz run "$target" "fuzz/corpus/$target" "fuzz/regressions/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1 "$@" >"$logs/$target" 2>&1 &
    running+=("$!:$target")
    if [ "${#running[@]}" -ge "$jobs" ]; then
        reap
    fi
done
while [ "${#running[@]}" -gt 0 ]; do
    reap
done
exit "$failed"
