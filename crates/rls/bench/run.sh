#!/usr/bin/env bash
# limitcore-rls's load figures (BENCHMARKS.md, "limitcore-rls"): the service in process, on
# Redis exact and leased, and the same tonic server answering OK without deciding, each
# under the same gRPC load (examples/load.rs), on this machine's cores. Redis commands per
# decision are read from INFO commandstats. Needs redis-server (bash .ci/redis-deps.sh)
# when a Redis target runs.
#
#   bash crates/rls/bench/run.sh [SECONDS] [CONCURRENCY]
#
# Environment (all optional):
#   ROUNDS=N        run the targets N times, interleaved: round 1 runs every target once,
#                   then round 2, ... so that the machine's drift falls on all of them (1)
#   TARGETS="..."   limitcore's side, in this order within a round, from: ok (the always-OK
#                   tonic server, examples/ok_server.rs), memory, memory-gcra, redis-exact,
#                   redis-leased (all five); TARGET:N runs it on N runtime worker threads
#                   (TOKIO_WORKER_THREADS; by default one per core), e.g. memory:1
#   EXTERNAL="NAME=HOST:PORT[,PID] ..."
#                   also put the same load, in each round after limitcore's targets, on
#                   RLS v3 servers already running at these addresses (any implementation
#                   serving domain `bench` with this directory's limits in its own format);
#                   with PID, the server's CPU time per decision is read from /proc too
#   CONNECTIONS=4   HTTP/2 connections of the load generator; THREADS=1 its runtime threads
#   PROFILE=dist    build with this cargo profile (release; dist: whole-program
#                   optimisation, as limitador-server's release profile)
#   PIN=1           pin the servers started here to CPU 0 and the load generator to CPU 1
#                   (taskset); pin an EXTERNAL server yourself when you start it
#   MODE=overshoot  instead of throughput: TRIALS (20) trials per target, each with
#                   CONCURRENCY clients on HOT_KEYS (1) fresh values of the `hot` rule
#                   (200 per hour) for 1 s from the first request (no warm-up); prints the
#                   admissions against the limit (200 per value per trial)
#
# Each line: the round, the target, the load generator's line, the server's CPU time per
# decision (user + system, warm-up included, over the requests sent) where its PID is
# known, Redis commands per decision for the Redis targets, and `uptime`'s 1-minute load
# average before and after the run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-10}
conc=${2:-64}
rounds=${ROUNDS:-1}
targets=${TARGETS:-ok memory memory-gcra redis-exact redis-leased}
external=${EXTERNAL:-}
connections=${CONNECTIONS:-4}
threads=${THREADS:-1}
mode=${MODE:-throughput}
trials=${TRIALS:-20}
hot_keys=${HOT_KEYS:-1}
hot_limit=200
profile=${PROFILE:-release}
cargo build --profile "$profile" -q -p limitcore-rls --bins --examples
bin=target/$profile
cfg=$(mktemp -d)
cp crates/rls/bench/bench.yaml "$cfg/"
results=$cfg/results
port=6390
srv_pin=()
load_pin=()
if [ "${PIN:-0}" = 1 ]; then
    srv_pin=(taskset -c 0)
    load_pin=(taskset -c 1)
fi
redis=0
case " $targets " in *" redis-"*) redis=1 ;; esac
cleanup() {
    if [ $redis = 1 ]; then redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; fi
    kill $(jobs -p) 2>/dev/null || true
    rm -rf "$cfg"
}
trap cleanup EXIT
if [ $redis = 1 ]; then
    redis-server --port $port --save '' --appendonly no --daemonize yes --logfile /dev/null >/dev/null
    sleep 0.3
fi
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# A process's CPU time (user + system) in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
load() { # ADDR [load.rs flags...]
    local addr=$1
    shift
    "${load_pin[@]}" "$bin/examples/load" --addr "$addr" --domain bench \
        --concurrency "$conc" --connections "$connections" --threads "$threads" "$@"
}
# Scripts the service sends (a script's own GET/SET/TIME run inside its one call, and INFO
# commandstats counts them apart).
commands() { redis-cli -p $port info commandstats | awk -F'[=,:]' '/^cmdstat_(evalsha|eval|script):/ {s += $3} END {print s + 0}'; }
start() { # TARGET[:THREADS] -> sets $pid
    local workers=${1#*:}
    [ "$workers" = "$1" ] && workers=
    # tokio's multi-thread runtime (the service's and ok_server's) reads its worker count
    # from TOKIO_WORKER_THREADS; unset, one per core.
    if [ -n "$workers" ]; then export TOKIO_WORKER_THREADS=$workers; else unset TOKIO_WORKER_THREADS; fi
    case ${1%%:*} in
        ok) "${srv_pin[@]}" "$bin/examples/ok_server" 127.0.0.1:18181 & ;;
        memory) flags=(--backend memory) ;;
        memory-gcra) flags=(--backend memory --algorithm gcra) ;;
        redis-exact) flags=(--backend redis-exact --redis-deadline-ms 20) ;;
        redis-leased) flags=(--backend redis-leased --algorithm gcra --redis-deadline-ms 20
            --max-lease 256 --lease-target-ms 900) ;;
        *) echo "unknown target $1" >&2; exit 2 ;;
    esac
    if [ "${1%%:*}" != ok ]; then
        "${srv_pin[@]}" "$bin/limitcore-rls" --grpc-addr 127.0.0.1:18181 --http-addr 127.0.0.1:18180 \
            --config-dir "$cfg" --redis-url redis://127.0.0.1:$port "${flags[@]}" 2>/dev/null &
    fi
    pid=$!
    unset TOKIO_WORKER_THREADS
    sleep 1
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# One throughput run: NAME ADDR PID (PID empty: unknown)
measure() {
    local name=$1 addr=$2 spid=$3
    local l0 l1 t0 t1 out sent cpu red=-
    [ $redis = 1 ] && redis-cli -p $port config resetstat >/dev/null
    l0=$(loadavg)
    t0=$( [ -n "$spid" ] && ticks "$spid" || echo 0)
    out=$(load "$addr" --key user --keys 100 --seconds "$secs")
    t1=$( [ -n "$spid" ] && ticks "$spid" || echo 0)
    l1=$(loadavg)
    sent=$(echo "$out" | sed -E 's/.*sent ([0-9]+).*/\1/')
    cpu=-
    if [ -n "$spid" ] && [ "$sent" -gt 0 ]; then
        cpu=$(awk -v t=$((t1 - t0)) -v s="$sent" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t * 1e6 / hz / s }')
    fi
    case $name in redis-*)
        red=$(awk -v c="$(commands)" -v d="$sent" 'BEGIN { if (d > 0) printf "%.4f", c / d; else print "-" }') ;;
    esac
    printf 'round %s  %-14s %s  server CPU %s us/decision  redis commands/decision %s  load %s -> %s (2 cores)\n' \
        "$round" "$name" "$out" "$cpu" "$red" "$l0" "$l1" | tee -a "$results"
}
# Medians over the rounds, with the lowest and highest, per target (throughput mode).
summary() {
    awk '
    function med(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        name = $3; if (!(name in n)) order[++names] = name
        k = ++n[name]
        for (f = 1; f <= NF; f++) {
            if ($f == "decisions/s") d[name, k] = $(f + 1)
            if ($f == "p50") p50[name, k] = $(f + 1)
            if ($f == "p99") p99[name, k] = $(f + 1)
            if ($f == "p99.9") p999[name, k] = $(f + 1)
            if ($f == "CPU") cpu[name, k] = $(f + 1)
        }
    }
    function col(arr, name, k,   i, a, lo, hi) {
        for (i = 1; i <= k; i++) { a[i] = arr[name, i] + 0; if (i == 1 || a[i] < lo) lo = a[i]; if (i == 1 || a[i] > hi) hi = a[i] }
        return sprintf("%s (%s-%s)", med(a, k), lo, hi)
    }
    END {
        print "median (lowest-highest) over the rounds, 2 cores:"
        for (i = 1; i <= names; i++) {
            m = order[i]; k = n[m]
            printf "%-14s rounds %d  decisions/s %s  p50 us %s  p99 us %s  p99.9 us %s  server CPU us/decision %s\n", m, k,
                col(d, m, k), col(p50, m, k), col(p99, m, k), col(p999, m, k), (cpu[m, 1] == "-" ? "-" : col(cpu, m, k))
        }
    }' "$results"
}
# Overshoot trials on one target: NAME ADDR
overshoot() {
    local name=$1 addr=$2 admitted=0 errors=0 over_trials=0 worst=0 counted=0 skipped=0 t out a t0 t1
    local l0
    l0=$(loadavg)
    for t in $(seq 1 "$trials"); do
        t0=$(date +%s)
        out=$(load "$addr" --key hot --keys "$hot_keys" --value-prefix "r$run_id-$round-$t-" \
            --seconds 1 --warmup-ms 0)
        t1=$(date +%s)
        # A trial across a whole hour of the epoch met two of the fixed window's hours (it
        # may admit twice the limit, rightly): it is left out of the count.
        if [ $((t0 / 3600)) -ne $((t1 / 3600)) ]; then skipped=$((skipped + 1)); continue; fi
        counted=$((counted + 1))
        a=$(echo "$out" | sed -E 's/.*admitted ([0-9]+).*/\1/')
        admitted=$((admitted + a))
        errors=$((errors + $(echo "$out" | sed -E 's/.*errors ([0-9]+).*/\1/')))
        [ "$a" -gt $((hot_limit * hot_keys)) ] && over_trials=$((over_trials + 1))
        [ "$a" -gt "$worst" ] && worst=$a
    done
    printf 'round %s  %-14s trials %s (%s across an hour, left out)  clients %s on %s value(s)  admitted %s  allowed %s  overshoot %s  errors %s  trials over %s  most in one trial %s (allowed %s)  load %s -> %s (2 cores)\n' \
        "$round" "$name" "$counted" "$skipped" "$conc" "$hot_keys" "$admitted" $((hot_limit * hot_keys * counted)) \
        $((admitted - hot_limit * hot_keys * counted)) "$errors" "$over_trials" "$worst" $((hot_limit * hot_keys)) "$l0" "$(loadavg)"
}
run_id=$(date +%s)
for round in $(seq 1 "$rounds"); do
    for target in $targets; do
        start "$target"
        if [ "$mode" = overshoot ]; then
            [ "${target%%:*}" != ok ] && overshoot "$target" 127.0.0.1:18181
        else
            measure "$target" 127.0.0.1:18181 "$pid"
        fi
        stop "$pid"
    done
    for ext in $external; do
        name=${ext%%=*}
        rest=${ext#*=}
        addr=${rest%%,*}
        epid=
        [ "$rest" != "$addr" ] && epid=${rest#*,}
        if [ "$mode" = overshoot ]; then
            overshoot "$name" "$addr"
        else
            measure "$name" "$addr" "$epid"
        fi
    done
done
if [ "$mode" != overshoot ] && [ "$rounds" -gt 1 ]; then summary; fi
