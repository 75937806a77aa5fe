#!/usr/bin/env bash
# limitcore-rls's load figures (BENCHMARKS.md, "limitcore-rls"): the service in process, on
# Redis exact and leased, and the same tonic server answering OK without deciding, each
# under the same gRPC load (examples/load.rs), on this machine's cores. Redis commands per
# decision are read from INFO commandstats. Needs redis-server (bash .ci/redis-deps.sh).
#
#   bash crates/rls/bench/run.sh [SECONDS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-10}
conc=${2:-64}
cargo build --release -q -p limitcore-rls --bins --examples
bin=target/release
cfg=$(mktemp -d)
cp crates/rls/bench/bench.yaml "$cfg/"
port=6390
redis-server --port $port --save '' --appendonly no --daemonize yes --logfile /dev/null >/dev/null
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; rm -rf "$cfg"' EXIT
sleep 0.3
load() { "$bin/examples/load" --addr "$1" --domain bench --key "$2" --keys 100 --seconds "$secs" --concurrency "$conc" --connections 4; }
# Commands the service sends (a script's own GET/SET/TIME run inside its one call, and
# INFO commandstats counts them apart: cmdstat_get, ...): scripts, and any plain command.
commands() { redis-cli -p $port info commandstats | awk -F'[=,:]' '/^cmdstat_(evalsha|eval|script|ping|zadd|zremrangebyscore|zcard|get|set|del|pexpire|incrby|info|config)/ {print}' >/dev/null; redis-cli -p $port info commandstats | awk -F'[=,:]' '/^cmdstat_(evalsha|eval|script):/ {s += $3} END {print s + 0}'; }
run() {
    local name=$1; shift
    "$bin/limitcore-rls" --grpc-addr 127.0.0.1:18181 --http-addr 127.0.0.1:18180 --config-dir "$cfg" \
        --redis-url redis://127.0.0.1:$port "$@" 2>/dev/null &
    local pid=$!
    sleep 1
    redis-cli -p $port config resetstat >/dev/null
    local out
    out=$(load 127.0.0.1:18181 user)
    local cmds
    cmds=$(commands)
    local sent
    sent=$(echo "$out" | sed -E 's/.*sent ([0-9]+).*/\1/')
    printf '%-14s %s  redis commands/decision %s\n' "$name" "$out" \
        "$(awk -v c="$cmds" -v d="$sent" 'BEGIN { if (d > 0) printf "%.4f", c / d; else print "-" }')"
    kill $pid; wait $pid 2>/dev/null || true
}
"$bin/examples/ok_server" 127.0.0.1:18191 &
okpid=$!
sleep 1
printf '%-14s %s\n' "ok-server" "$(load 127.0.0.1:18191 user)"
kill $okpid; wait $okpid 2>/dev/null || true
run memory --backend memory
run memory-gcra --backend memory --algorithm gcra
run redis-exact --backend redis-exact --redis-deadline-ms 20
run redis-leased --backend redis-leased --algorithm gcra --redis-deadline-ms 20 --max-lease 256 --lease-target-ms 900
