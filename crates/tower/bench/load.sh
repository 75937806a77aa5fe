#!/usr/bin/env bash
# Load comparison of the example server (crates/tower/examples/server.rs) with no layer,
# with limitcore-tower (per client IP, a quota that admits everything; with and without its
# Outcome extension) and with
# tower_governor on the same quota, under wrk, in the same run: ROUNDS rounds, the four
# contenders interleaved in each, medians of requests/s and p99 latency, and of the
# server's CPU time per request (all its threads' run time from /proc/PID/task/*/schedstat
# over the wrk run, divided by the requests wrk completed): on a machine shared with other
# work, throughput and latency move with the neighbours' load, the CPU cost much less.
#
# The concurrency limits run in the same way (the quota is not used then): `concurrency` is
# limitcore-tower's ConcurrencyLimitLayer at a fixed LIMIT (shedding with 503, so LIMIT must be
# at least CONNECTIONS), `concurrency-queue` the same queueing up to 10 s for a permit,
# `tower-concurrency` tower's ConcurrencyLimit at the same LIMIT (waiting in poll_ready):
#   CONTENDERS="none concurrency tower-concurrency" crates/tower/bench/load.sh        (no waits)
#   LIMIT=16 CONTENDERS="none concurrency-queue tower-concurrency" crates/tower/bench/load.sh
#
# Usage: crates/tower/bench/load.sh            (from anywhere in the repository)
# Environment: CONTENDERS (the first four), ROUNDS (3), DURATION (10s), CONNECTIONS (32), QUOTA ("1000000/s"),
#   LIMIT (1024: the concurrency contenders' limit),
#   PIN (1: server on CPU 0 with one tokio worker, wrk on CPU 1; 0: no pinning),
#   CARGO_TARGET_DIR (where the example is built).
# Installs wrk from Debian's packages if it is missing. Only 127.0.0.1 is loaded.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
QUOTA=${QUOTA:-1000000/s}
PIN=${PIN:-1}
PORT=${PORT:-18181}
LIMIT=${LIMIT:-1024}
# limitcore: the layer's defaults (an Outcome extension on every response);
# limitcore-no-outcome: the same without it (Builder::outcome_extension(false)).
CONTENDERS=(${CONTENDERS:-none limitcore limitcore-no-outcome governor})

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)" >&2
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
cargo build --release -q -p limitcore-tower --features axum --example server
SERVER="${CARGO_TARGET_DIR:-target}/release/examples/server"

if [[ $PIN == 1 ]]; then
    SERVER_PIN=(env TOKIO_WORKER_THREADS=1 taskset -c 0)
    WRK_PIN=(taskset -c 1)
else
    SERVER_PIN=()
    WRK_PIN=()
fi

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"; [[ -n ${PID:-} ]] && kill "$PID" 2>/dev/null || true' EXIT

# p99 latency from wrk's --latency table, in microseconds.
p99_us() {
    awk '$1 == "99%" {
        v = $2; unit = v; sub(/[0-9.]+/, "", unit); sub(/[a-z]+$/, "", v);
        if (unit == "us") f = 1; else if (unit == "ms") f = 1000; else if (unit == "s") f = 1000000; else f = 0;
        printf "%.0f\n", v * f }' "$1"
}

# Nanoseconds the process has run on a CPU, all threads.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

for round in $(seq 1 "$ROUNDS"); do
    for who in "${CONTENDERS[@]}"; do
        case $who in
            limitcore-no-outcome) args=(--limiter limitcore --no-outcome) ;;
            concurrency) args=(--limiter concurrency --concurrency "$LIMIT") ;;
            concurrency-queue) args=(--limiter concurrency --concurrency "$LIMIT" --queue-ms 10000) ;;
            tower-concurrency) args=(--limiter tower-concurrency --concurrency "$LIMIT") ;;
            *) args=(--limiter "$who") ;;
        esac
        "${SERVER_PIN[@]}" "$SERVER" --addr "127.0.0.1:$PORT" --quota "$QUOTA" --key peer \
            "${args[@]}" >"$OUT/server.log" 2>&1 &
        PID=$!
        for _ in $(seq 1 100); do
            grep -q "listening on" "$OUT/server.log" && break
            sleep 0.05
        done
        grep -q "listening on" "$OUT/server.log" || { cat "$OUT/server.log" >&2; exit 1; }
        before=$(cpu_ns "$PID")
        "${WRK_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$PORT/" >"$OUT/wrk.txt"
        after=$(cpu_ns "$PID")
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=
        if grep -q "Non-2xx" "$OUT/wrk.txt"; then
            echo "$who: refusals under an admit-everything quota:" >&2
            cat "$OUT/wrk.txt" >&2
            exit 1
        fi
        rps=$(awk '/^Requests\/sec:/ { printf "%.0f\n", $2 }' "$OUT/wrk.txt")
        p99=$(p99_us "$OUT/wrk.txt")
        requests=$(awk '/requests in/ { print $1 }' "$OUT/wrk.txt")
        cpu=$(awk -v a="$after" -v b="$before" -v n="$requests" 'BEGIN { printf "%.2f\n", (a - b) / n / 1000 }')
        echo "$who $rps $p99 $cpu" >>"$OUT/all.txt"
        echo "round $round: $who $rps req/s, p99 $p99 us, server CPU $cpu us/request" >&2
    done
done

col() { awk -v w="$1" -v c="$2" '$1 == w { print $c }' "$OUT/all.txt" | median; }
base_rps=$(col none 2)
base_p99=$(col none 3)
base_cpu=$(col none 4)
echo
echo "| server | requests/s | ÷ no layer | p99 latency (µs) | ÷ no layer | server CPU (µs/request) | ÷ no layer |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for who in "${CONTENDERS[@]}"; do
    awk -v w="$who" -v r="$(col "$who" 2)" -v p="$(col "$who" 3)" -v c="$(col "$who" 4)" \
        -v br="$base_rps" -v bp="$base_p99" -v bc="$base_cpu" \
        'BEGIN { printf "| %s | %.0f | %.3f | %.0f | %.3f | %.2f | %.3f |\n", w, r, r / br, p, p / bp, c, c / bc }'
done
echo "(medians of $ROUNDS rounds)"
echo
echo "raw (server requests/s p99_us cpu_us_per_request, in run order):"
cat "$OUT/all.txt"
