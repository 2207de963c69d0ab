#!/usr/bin/env python3
"""Compares the certified policies of two fidelity studies (results.json).

For every policy and context both hold, prints bytes read before and after,
the certificate's pass, fallback and early-fallback rates after, and
whether the fidelity figures (top-1, KL mean, survival, task accuracy) are
identical: the early test must change only what is read.

Usage: compare.py BEFORE/results.json AFTER/results.json
"""
import json
import sys

SAME = ["top1_agreement", "kl_mean", "kl_max", "survival", "accuracy",
        "identical_logits", "cert_pass_rate", "cert_fallback_rate"]


def load(path):
    with open(path) as f:
        return {(r["policy"], str(r["context"])): r
                for r in json.load(f)["results"]}


def main():
    before, after = load(sys.argv[1]), load(sys.argv[2])
    print("| policy | context | bytes read before | after | pass | fallback "
          "| of which early | fidelity identical |")
    print("|---|---|---|---|---|---|---|---|")
    identical = total = 0
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        if "cert_pass_rate" not in a:
            continue
        same = all(b.get(f) == a.get(f) for f in SAME)
        identical += same
        total += 1
        early = a.get("cert_early_fallback_rate")
        fb = a["cert_fallback_rate"]
        share = "-" if early is None or fb == 0 else f"{100 * early / fb:.0f}%"
        print(f"| {key[0]} | {key[1]} | {100 * b['bytes_read']:.1f}% | "
              f"{100 * a['bytes_read']:.1f}% | {100 * a['cert_pass_rate']:.0f}%"
              f" | {100 * fb:.0f}% | {share} | {'yes' if same else 'NO'} |")
    print(f"\n{identical} of {total} rows have identical fidelity figures.")


if __name__ == "__main__":
    main()
