#!/usr/bin/env python3
"""Print the BENCHMARKS.md tables from criterion's results (target/criterion).

Run after `cargo bench --bench limiters`. Single-thread tables: median ns per check and the
ratio to governor's median in the same run (< 1.00 is faster). Thread tables: total checks
per second across all threads (threads x 1e9 / median ns per check per thread), the ratio
to governor at the same thread count (> 1.00 is faster), and the scaling from 1 to 2 threads.
"""
import json
import os

ROOT = os.path.join(
    os.environ.get("CARGO_TARGET_DIR")
    or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target"),
    "criterion",
)


def median(*parts):
    path = os.path.join(ROOT, *parts, "new", "estimates.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def names(*parts):
    d = os.path.join(ROOT, *parts)
    return sorted(x for x in os.listdir(d) if x != "report") if os.path.isdir(d) else []


def single(group):
    rows = {n: median(group, n) for n in names(group)}
    gov = rows.get("governor")
    print(f"\n#### {group.replace('_', '/')} (1 thread)\n")
    print("| limiter | median ns/check | time ÷ governor's |")
    print("|---|---:|---:|")
    for n, m in sorted(rows.items(), key=lambda kv: kv[1] or 0):
        if m is not None:
            print(f"| {n} | {m:.1f} | {m / gov:.2f} |" if gov else f"| {n} | {m:.1f} | - |")


def threads(group):
    counts = [1, 2, 8]
    table = {}
    for n in names(group):
        for t in counts:
            m = median(group, n, str(t))
            if m is not None:
                table.setdefault(n, {})[t] = t * 1e9 / m / 1e6  # M checks/s
    gov = table.get("governor", {})
    print(f"\n#### {group.replace('_', '/')} (total M checks/s; this machine has 2 cores)\n")
    print("| limiter | 1 thread | 2 threads | 8 threads | 2 threads ÷ governor's | 2 threads ÷ own 1 thread |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, row in sorted(table.items(), key=lambda kv: -kv[1].get(2, 0)):
        cells = [f"{row[t]:.1f}" if t in row else "-" for t in counts]
        vs_gov = f"{row[2] / gov[2]:.2f}" if 2 in row and 2 in gov else "-"
        scale = f"{row[2] / row[1]:.2f}" if 1 in row and 2 in row else "-"
        print(f"| {n} | {' | '.join(cells)} | {vs_gov} | {scale} |")


single("single_allow")
single("single_deny")
threads("threads_allow")
threads("threads_deny")
rows = {n: median("clock", n) for n in names("clock")}
print("\n#### clock reads (1 thread)\n")
print("| clock | median ns/read |")
print("|---|---:|")
for n, m in sorted(rows.items(), key=lambda kv: kv[1] or 0):
    if m is not None:
        print(f"| {n} | {m:.2f} |")


def pairs(group, names_, counts=(1, 2)):
    """Total M checks/s for `names_` at each thread count, and the first ÷ the second."""
    if not names_:
        return  # the group was not run
    print(f"\n#### {group.replace('_', '/')} (total M operations/s; this machine has 2 cores)\n")
    print("| | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    rates = {}
    for n in names_:
        row = []
        for t in counts:
            m = median(group, n, str(t))
            rates[(n, t)] = t * 1e9 / m / 1e6 if m else None
            row.append(f"{rates[(n, t)]:.1f}" if m else "-")
        print(f"| {n} | " + " | ".join(row) + " |")
    # Each contender against the last one (the baseline).
    b = names_[-1]
    for a in names_[:-1]:
        print(f"| {a} ÷ {b} | " + " | ".join(
            f"{rates[(a, t)] / rates[(b, t)]:.2f}" if rates[(a, t)] and rates[(b, t)] else "-" for t in counts) + " |")


KEYED = [
    "limitcore-keyed-gcra",
    "limitcore-keyed-gcra-siphash",
    "limitcore-keyed-gcra-papaya",
    "limitcore-sketch",
    "governor-keyed",
]
pairs("keyed_hot", [n for n in KEYED if n in names("keyed_hot")])
pairs("keyed_spread", [n for n in KEYED if n in names("keyed_spread")])
rows = {n: median("keyed_insert", n) for n in names("keyed_insert")}
gov = rows.get("governor-keyed")
if gov:
    print("\n#### keyed/insert (1 thread, every check a new key)\n")
    print("| | median ns/check | checks/s ÷ governor's |")
    print("|---|---:|---:|")
    for n, m in sorted(rows.items(), key=lambda kv: kv[1] or 0):
        if m is not None:
            print(f"| {n} | {m:.1f} | {gov / m:.2f} |")
pairs("map_hot", ["papaya", "dashmap"])
pairs("map_spread", ["papaya", "dashmap"])


def counters(group):
    """`counted-gcra` against `gcra`: ns per check on 1 thread and the difference, total M
    checks/s on 2 threads and the ratio."""
    one = {n: median(group, n, "1") for n in ("gcra", "counted-gcra")}
    two = {n: median(group, n, "2") for n in ("gcra", "counted-gcra")}
    if None in one.values() or None in two.values():
        return
    print(f"\n#### {group.replace('_', '/')} (this machine has 2 cores)\n")
    print("| | gcra | counted-gcra | difference |")
    print("|---|---:|---:|---:|")
    print(f"| 1 thread, ns/check | {one['gcra']:.2f} | {one['counted-gcra']:.2f} | "
          f"{one['counted-gcra'] - one['gcra']:+.2f} ns |")
    rate = {n: 2 * 1e9 / m / 1e6 for n, m in two.items()}
    print(f"| 2 threads, total M checks/s | {rate['gcra']:.1f} | {rate['counted-gcra']:.1f} | "
          f"{rate['counted-gcra'] / rate['gcra']:.3f}× |")


counters("counters_allow")
counters("counters_deny")
