#!/usr/bin/env python3
"""Renders the JSON written by bench_attention.py --json as the Markdown
table in docs/BENCHMARKS-HISTORY.md ("Single shape, hot in L2").

Usage: python3 bench/table.py reports/gpu/bench.json
"""
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: table.py BENCH_JSON")
    rows = json.load(open(sys.argv[1]))
    if isinstance(rows, dict):
        rows = rows.get("rows", rows.get("results", []))
    print("| batch | context | SDPA flash eager / graph | SDPA cuDNN eager / graph "
          "| ours dense | condensate | certified | condensate vs faster SDPA: "
          "eager / graph | ours dense / cuDNN graph | score_pages BW | "
          "condensate rel. diff to dense |")
    print("|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        fastest_eager = min(r["sdpa_flash_ms"], r["sdpa_cudnn_ms"])
        fastest_graph = min(r["sdpa_flash_graph_ms"], r["sdpa_cudnn_graph_ms"])
        c = r["condensate_graph_ms"]
        print(f"| {r['batch']} | {r['context']:,} "
              f"| {r['sdpa_flash_ms']:.3f} / {r['sdpa_flash_graph_ms']:.3f} "
              f"| {r['sdpa_cudnn_ms']:.3f} / {r['sdpa_cudnn_graph_ms']:.3f} "
              f"| {r['dense_graph_ms']:.3f} | {c:.4f} "
              f"| {r['certified_graph_ms']:.3f} "
              f"| {fastest_eager / c:.1f}x / {fastest_graph / c:.1f}x "
              f"| {r['dense_graph_ms'] / r['sdpa_cudnn_graph_ms']:.2f} "
              f"| {100 * r['score_pages_bw_fraction']:.0f}% "
              f"| {r['condensate_vs_dense_rel_diff']:.1e} |")


if __name__ == "__main__":
    main()
