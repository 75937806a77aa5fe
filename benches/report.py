#!/usr/bin/env python3
"""Print the BENCHMARKS.md tables from criterion's results (target/criterion).

Run after `cargo bench --bench limiters`. Medians in ns per check (per thread for the
contended groups), the ratio to governor in the same run (< 1 is faster than governor),
and for contended groups the total checks per second across all threads.
"""
import json, os, sys

root = os.path.join(os.path.dirname(__file__), "..", "target", "criterion")

def median(group, bench):
    path = os.path.join(root, group, bench, "new", "estimates.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]

def bench_dirs(group):
    d = os.path.join(root, group)
    return sorted(x for x in os.listdir(d) if x != "report") if os.path.isdir(d) else []

def table(group, threads=None):
    rows = []
    names = bench_dirs(group)
    gov = None
    results = {}
    for name in names:
        sub = bench_dirs(os.path.join(group, name))
        key = os.path.join(name, sub[0]) if threads and sub else name
        m = median(group, key)
        if m is not None:
            results[name] = m
    gov = results.get("governor")
    print(f"\n### {group}\n")
    if threads:
        print("| limiter | median ns/check/thread | × governor's time | total checks/s |")
        print("|---|---:|---:|---:|")
    else:
        print("| limiter | median ns/check | × governor's time |")
        print("|---|---:|---:|")
    for name, m in results.items():
        ratio = f"{m / gov:.2f}" if gov else "-"
        if threads:
            print(f"| {name} | {m:.2f} | {ratio} | {threads * 1e9 / m / 1e6:.1f} M |")
        else:
            print(f"| {name} | {m:.2f} | {ratio} |")

threads = os.cpu_count() or 2
for g in ["single/allow", "single/deny"]:
    table(g.replace("/", "_"))
for g in ["contended/allow", "contended/deny"]:
    table(g.replace("/", "_"), threads)
table("clock")
