#!/usr/bin/env python3
"""Session 47's A/B, every method: the branch's build (cold-ab-run-1.json)
against main's (cold-ab-main-1.json), us a layer, cold in L2, one H100.
  python3 reports/gpu/session47/compare.py"""
import json
import pathlib

here = pathlib.Path(__file__).parent / "ab"
run = json.loads((here / "cold-ab-run-1.json").read_text())
main = json.loads((here / "cold-ab-main-1.json").read_text())
key = lambda r: (r["shape"], r["batch"], r["context"])
base = {key(r): r for r in main["rows"]}
cols = ["dense_us", "condensate_us", "sketch_us", "certified_us"]
print("| shape | batch | context | " +
      " | ".join(f"{c[:-3]} branch / main" for c in cols) + " |")
print("|---|---|---|" + "---|" * len(cols))
for r in run["rows"]:
    m = base[key(r)]
    cells = [f"{r[c]:.1f} / {m[c]:.1f} ({r[c] / m[c]:.2f})" for c in cols]
    print(f"| {r['shape']} | {r['batch']} | {r['context'] // 1024}K | " +
          " | ".join(cells) + " |")
