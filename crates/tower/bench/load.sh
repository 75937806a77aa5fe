#!/usr/bin/env bash
# Load comparison of the example server (crates/tower/examples/server/main.rs) with no layer,
# with limitcore-tower (per client IP, a quota that admits everything; with and without its
# Outcome extension) and with
# tower_governor on the same quota, under wrk, in the same run: ROUNDS rounds, the four
# contenders interleaved in each, medians of requests/s and p99 latency, and of the
# server's CPU time per request (all its threads' run time from /proc/PID/task/*/schedstat
# over the wrk run, divided by the requests wrk completed): on a machine shared with other
# work, throughput and latency move with the neighbours' load, the CPU cost much less.
#
# The metrics (feature `metrics`): `limitcore-metrics` is the `limitcore` contender built with
# the feature, the Prometheus recorder installed and `/metrics` served (a second binary, built
# beside the first); after its wrk run the script scrapes `/metrics` and checks that the layer
# counted the requests wrk completed. In the same run as the layer without the feature:
#   CONTENDERS="none limitcore limitcore-metrics governor" crates/tower/bench/load.sh
#
# Before and after: BASELINE=<a server binary built from another commit> adds the contender
# `baseline`, that binary as `--limiter limitcore` (build it with the same features, copy it
# out of the target directory), e.g. to check that a change keeps the layer's cost:
#   BASELINE=/tmp/server-base CONTENDERS="none baseline limitcore governor" crates/tower/bench/load.sh
#
# The concurrency limits run in the same way (the quota is not used then): `concurrency` is
# limitcore-tower's ConcurrencyLimitLayer at a fixed LIMIT (shedding with 503, so LIMIT must be
# at least CONNECTIONS), `concurrency-queue` the same queueing up to 10 s for a permit,
# `tower-concurrency` tower's ConcurrencyLimit at the same LIMIT (waiting in poll_ready):
#   CONTENDERS="none concurrency tower-concurrency" crates/tower/bench/load.sh        (no waits)
#   LIMIT=16 CONTENDERS="none concurrency-queue tower-concurrency" crates/tower/bench/load.sh
#
# Usage: crates/tower/bench/load.sh            (from anywhere in the repository)
# Environment: CONTENDERS (the first four), BASELINE, ROUNDS (3), DURATION (10s), CONNECTIONS (32), QUOTA ("1000000/s"),
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
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"; [[ -n ${PID:-} ]] && kill "$PID" 2>/dev/null || true' EXIT
trap 'echo "load.sh: failed at line $LINENO (exit $?)" >&2' ERR

# The server without the feature `metrics`, and with it when a contender needs it: the same
# example, built twice into the same place, so each build is copied out first.
BUILT="${CARGO_TARGET_DIR:-target}/release/examples/server"
cargo build --release -q -p limitcore-tower --features axum --example server
cp "$BUILT" "$OUT/server"
SERVER="$OUT/server"
if [[ " ${CONTENDERS[*]} " == *" limitcore-metrics "* ]]; then
    cargo build --release -q -p limitcore-tower --features axum,metrics --example server
    cp "$BUILT" "$OUT/server-metrics"
fi
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) CPUs)" >&2

if [[ $PIN == 1 ]]; then
    SERVER_PIN=(env TOKIO_WORKER_THREADS=1 taskset -c 0)
    WRK_PIN=(taskset -c 1)
else
    SERVER_PIN=()
    WRK_PIN=()
fi

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
        server=$SERVER
        case $who in
            limitcore-no-outcome) args=(--limiter limitcore --no-outcome) ;;
            limitcore-metrics) args=(--limiter limitcore) server="$OUT/server-metrics" ;;
            baseline) args=(--limiter limitcore) server=${BASELINE:?BASELINE: the baseline server binary} ;;
            concurrency) args=(--limiter concurrency --concurrency "$LIMIT") ;;
            concurrency-queue) args=(--limiter concurrency --concurrency "$LIMIT" --queue-ms 10000) ;;
            tower-concurrency) args=(--limiter tower-concurrency --concurrency "$LIMIT") ;;
            *) args=(--limiter "$who") ;;
        esac
        # Emptied first: the server's own `>` happens after the fork, and a check before it
        # would read the previous server's "listening on".
        : >"$OUT/server.log"
        "${SERVER_PIN[@]}" "$server" --addr "127.0.0.1:$PORT" --quota "$QUOTA" --key peer \
            "${args[@]}" >"$OUT/server.log" 2>&1 &
        PID=$!
        for _ in $(seq 1 400); do  # up to 20 s: a loaded machine starts slowly
            grep -q "listening on" "$OUT/server.log" && break
            sleep 0.05
        done
        grep -q "listening on" "$OUT/server.log" || { cat "$OUT/server.log" >&2; exit 1; }
        before=$(cpu_ns "$PID")
        "${WRK_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$PORT/" >"$OUT/wrk.txt"
        after=$(cpu_ns "$PID")
        if [[ $who == limitcore-metrics ]]; then
            # The layer counted what wrk got (wrk leaves up to CONNECTIONS requests unread at
            # its end, which the server counted all the same).
            done_=$(awk '/requests in/ { print $1 }' "$OUT/wrk.txt")
            curl -s --max-time 10 -o "$OUT/metrics.txt" "http://127.0.0.1:$PORT/metrics" || true
            counted=$(awk '/^limitcore_requests_total\{limit="default",outcome="admitted"\}/ { print $2 }' "$OUT/metrics.txt")
            if [[ -z $counted ]] || ((counted < done_ || counted > done_ + CONNECTIONS)); then
                echo "$who: the layer counted ${counted:-nothing} admissions, wrk completed $done_" >&2
                cat "$OUT/server.log" "$OUT/metrics.txt" >&2
                exit 1
            fi
        fi
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
echo "(medians of $ROUNDS rounds of $DURATION, $CONNECTIONS connections; load after the run: $(cut -d' ' -f1-3 /proc/loadavg))"

# On a shared machine the rounds move together with the neighbours' load: each contender's
# ratio to the first contender of the same round, then the median of those ratios, is the
# steadier comparison.
first=${CONTENDERS[0]}
echo
echo "paired: the median over rounds of each contender's ratio to $first in the same round"
echo "| server | requests/s ÷ $first | server CPU ÷ $first |"
echo "|---|---:|---:|"
for who in "${CONTENDERS[@]}"; do
    for c in 2 4; do
        awk -v w="$who" -v f="$first" -v c="$c" '
            $1 == f { ref = $c }
            $1 == w { print $c / ref }' "$OUT/all.txt" | median
    done | paste -sd' ' | awk -v w="$who" '{ printf "| %s | %.3f | %.3f |\n", w, $1, $2 }'
done
echo
echo "raw (server requests/s p99_us cpu_us_per_request, in run order):"
cat "$OUT/all.txt"
