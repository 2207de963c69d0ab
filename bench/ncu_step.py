#!/usr/bin/env python3
"""Sums the kernel times of profiled decode steps by kernel name.

Reads the CSV of `ncu --csv --metrics gpu__time_duration.sum` over
`condensate-bench --profile` (one bracketed step per policy, in the bench's
order: dense first). A step begins where the first kernel of the profile
recurs; if that does not split the profile into `--steps` parts, the whole
profile is reported as one.

usage: ncu_step.py FILE.csv [--steps N] [--names dense,sketch,...]
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


# Microseconds per unit of gpu__time_duration as Nsight Compute prints it
# (it scales units unless --print-units base).
TIME_UNIT_US = {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0,
                "msecond": 1e3, "ms": 1e3}


def to_us(value, unit):
    """A gpu__time_duration value in microseconds; a unit this table does
    not know is an error, not a guess."""
    if unit not in TIME_UNIT_US:
        sys.exit(f"ncu_step.py: unknown time unit '{unit}'")
    return value * TIME_UNIT_US[unit]


def rows(path):
    out = []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if len(rec) < 15 or not rec[0].isdigit():
                continue
            if rec[12] != "gpu__time_duration.sum":
                continue
            unit, value = rec[13], float(rec[14].replace(",", ""))
            out.append((int(rec[0]), rec[4], to_us(value, unit)))
    out.sort()
    return out


def family(name):
    name = re.sub(r"layer\d+_", "layer*_", name)
    name = re.sub(r"\(.*", "", name)
    return name[:70]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--names", default="dense,sketch top-1024,block_minmax")
    a = ap.parse_args()
    rs = rows(a.csv)
    if not rs:
        sys.exit(f"ncu_step.py: {a.csv}: no gpu__time_duration rows")
    first = rs[0][1]
    starts = [i for i, r in enumerate(rs) if r[1] == first]
    if len(starts) != a.steps:
        starts = [0]
    names = a.names.split(",")
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else len(rs)
        part = rs[s:e]
        total = sum(r[2] for r in part)
        by = defaultdict(lambda: [0.0, 0])
        for _, n, t in part:
            by[family(n)][0] += t
            by[family(n)][1] += 1
        title = names[k] if len(starts) > 1 and k < len(names) else "all"
        print(f"== {title}: {len(part)} kernels, {total / 1e3:.3f} ms")
        for n, (t, c) in sorted(by.items(), key=lambda x: -x[1][0]):
            print(f"  {t / 1e3:8.3f} ms {100 * t / total:5.1f}%  x{c:<5d} {n}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # a reader such as `head` stopped early
        sys.stderr.close()
