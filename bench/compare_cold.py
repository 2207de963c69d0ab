#!/usr/bin/env python3
"""Compares one method between two cold sweeps (bench_cold.py JSON files).

Prints a markdown table of the method's time over our dense time in each
sweep, per case both sweeps hold, with the fallback and early-fallback
rates of the second where it records them, and the median of each ratio.

Usage: compare_cold.py BEFORE.json AFTER.json [--method certified]
           [--min-context N]
"""
import argparse
import json
import statistics


def rows(path):
    with open(path) as f:
        data = json.load(f)
    return {(r["shape"], r["batch"], r["context"]): r
            for r in data["rows"] if "error" not in r}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--method", default="certified")
    ap.add_argument("--min-context", type=int, default=0)
    args = ap.parse_args()
    a, b = rows(args.before), rows(args.after)
    key = args.method + "_us"
    print(f"| shape | batch | context | dense us | {args.method} us before"
          f" / after | / dense before | / dense after | fallback | early |")
    print("|---|---|---|---|---|---|---|---|---|")
    before, after = [], []
    for k in sorted(set(a) & set(b), key=lambda k: (k[0], k[1], k[2])):
        x, y = a[k], b[k]
        if key not in x or key not in y or k[2] < args.min_context:
            continue
        rb, ra = x[key] / x["dense_us"], y[key] / y["dense_us"]
        before.append(rb)
        after.append(ra)
        fb = y.get(args.method + "_fallback_rate")
        early = y.get(args.method + "_early_rate")
        pct = (lambda v: "-" if v is None else f"{100 * v:.0f}%")
        print(f"| {k[0]} | {k[1]} | {k[2]:,} | {y['dense_us']:.1f} | "
              f"{x[key]:.1f} / {y[key]:.1f} | {rb:.2f}x | {ra:.2f}x | "
              f"{pct(fb)} | {pct(early)} |")
    if before:
        print(f"\n{len(before)} cases; median {args.method} / dense "
              f"{statistics.median(before):.2f}x before, "
              f"{statistics.median(after):.2f}x after; after within 1.1x "
              f"of dense in {sum(r <= 1.1 for r in after)}")


if __name__ == "__main__":
    main()
