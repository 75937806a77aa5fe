#!/usr/bin/env bash
# The exact Redis limit behind the HTTP layer's awaited seam beside the in-process layer,
# under wrk, in the same run: the contenders of examples/layer_server.rs (`local`,
# `local-awaited`, `exact`, `leased`, `leased-awaited`) interleaved in each of ROUNDS rounds; medians of
# requests/s and p99 latency, and requests/s as a ratio to `local`. Every request is admitted
# (QUOTA is far above what wrk sends), so the figures are the limit's cost, not refusals.
# The Redis contenders start their own redis-server on loopback; nothing is pinned (the
# server, redis-server and wrk share the machine's CPUs).
#
# Usage: crates/redis-server-tests/bench/layer.sh      (from anywhere in the repository)
# Environment: CONTENDERS ("local local-awaited exact leased-awaited"), ROUNDS (3), DURATION (10s),
#   CONNECTIONS (32), QUOTA ("1000000/s"), PORT (18282), MAX_LEASE (64: the leased
#   contender's largest lease, cells), CARGO_TARGET_DIR.
# Needs wrk and redis-server (bash .ci/redis-deps.sh). Only 127.0.0.1 is loaded.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
QUOTA=${QUOTA:-1000000/s}
PORT=${PORT:-18282}
MAX_LEASE=${MAX_LEASE:-64}
CONTENDERS=(${CONTENDERS:-local local-awaited exact leased-awaited})

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
command -v wrk >/dev/null || { echo "layer.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"; [[ -n ${PID:-} ]] && kill "$PID" 2>/dev/null || true' EXIT

cargo build --release -q -p redis-server-tests --example layer_server
SERVER="${CARGO_TARGET_DIR:-target}/release/examples/layer_server"
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) CPUs)" >&2

p99_us() {
    awk '$1 == "99%" {
        v = $2; unit = v; sub(/[0-9.]+/, "", unit); sub(/[a-z]+$/, "", v);
        if (unit == "us") f = 1; else if (unit == "ms") f = 1000; else if (unit == "s") f = 1000000; else f = 0;
        printf "%.0f\n", v * f }' "$1"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

for round in $(seq 1 "$ROUNDS"); do
    for who in "${CONTENDERS[@]}"; do
        : >"$OUT/server.log"
        "$SERVER" --addr "127.0.0.1:$PORT" --limit "$who" --quota "$QUOTA" --max-lease "$MAX_LEASE" >"$OUT/server.log" 2>&1 &
        PID=$!
        for _ in $(seq 1 400); do
            grep -q "listening on" "$OUT/server.log" && break
            sleep 0.05
        done
        grep -q "listening on" "$OUT/server.log" || { cat "$OUT/server.log" >&2; exit 1; }
        wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$PORT/" >"$OUT/wrk.txt"
        kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
        # Every response must have been a 200: wrk reports others as "Non-2xx".
        if grep -q "Non-2xx" "$OUT/wrk.txt"; then cat "$OUT/wrk.txt" >&2; exit 1; fi
        rps=$(awk '/Requests\/sec/ { print $2 }' "$OUT/wrk.txt")
        echo "$rps" >>"$OUT/$who.rps"
        p99_us "$OUT/wrk.txt" >>"$OUT/$who.p99"
        echo "round $round $who: $rps req/s, p99 $(tail -1 "$OUT/$who.p99") µs" >&2
    done
done

base=$(median <"$OUT/${CONTENDERS[0]}.rps")
printf '%-14s %12s %8s %10s\n' contender "req/s" ratio "p99 µs"
for who in "${CONTENDERS[@]}"; do
    rps=$(median <"$OUT/$who.rps")
    printf '%-14s %12.0f %8.3f %10.0f\n' "$who" "$rps" "$(echo "$rps / $base" | bc -l)" "$(median <"$OUT/$who.p99")"
done
