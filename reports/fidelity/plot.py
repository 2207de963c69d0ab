#!/usr/bin/env python3
"""Plots and tables of the fidelity study (condensate-study run).

usage: python3 reports/fidelity/plot.py [results.json]

Writes *.png next to results.json and tables.md (markdown tables that
README.md quotes). Needs matplotlib (pip install matplotlib).
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ULP = 2.0 ** -24
SURV = ["16", "32", "64", "128", "256"]
FAMILY_COLOR = {
    "dense": "black", "noise": "grey", "window": "tab:brown",
    "exact": "tab:blue", "block_minmax": "tab:green",
    "block_mean": "tab:orange", "certified": "tab:red", "paper": "tab:purple",
    "sketch": "tab:cyan", "certified-sketch": "tab:pink",
    "certified-open": "tab:olive",
}
CERTIFIED = ("certified", "certified-sketch", "certified-open")
CERT_SKETCH = ("certified-sketch", "certified-open")


def load(path):
    with open(path) as f:
        r = json.load(f)
    pol = {p["name"]: p for p in r["policies"]}
    res = {}
    for x in r["results"]:
        res[(x["policy"], x["context"])] = x
    ctxs = [str(c) for c in r["meta"]["contexts"]]
    return r, pol, res, ctxs


def fmt(v, spec="{:.3g}"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return spec.format(v)


def pct(v):
    return "–" if v is None else "{:.0f}%".format(100 * v)


def acc(x, task):
    a = x.get("accuracy", {}).get(task)
    return None if a is None else (a["correct"], a["total"])


def ppl_change(res, name, ctx):
    """Perplexity change against dense on the same natural prompts."""
    x, d = res.get((name, ctx)), res.get(("dense", ctx))
    if not x or not d:
        return None
    dense = {c["prompt"]: c for c in d["cases"] if c.get("nll_tokens")}
    pn = dn = 0.0
    n = 0
    for c in x["cases"]:
        if c.get("nll_tokens") and c["prompt"] in dense:
            pn += c["nll"]
            dn += dense[c["prompt"]]["nll"]
            n += c["nll_tokens"]
    if not n:
        return None
    return math.exp(pn / n) / math.exp(dn / n) - 1


def passkey_by_depth(x):
    """{depth: correct} of a result's passkey cases."""
    out = {}
    for c in x.get("cases", []):
        if c["task"] == "passkey":
            out[c.get("depth")] = out.get(c.get("depth"), 0) + int(c["correct"])
    return out


def verdict(ok):
    return "**met**" if ok else "**missed**"


def targets(r, pol, res, ctxs):
    """The issue's study targets, each stated as met or missed with the
    numbers it rests on (sketch selectors and certified policies)."""
    out = ["## Targets", ""]
    names = [p["name"] for p in r["policies"]]
    budgets = sorted({pol[n]["budget"] for n in names
                      if pol[n]["family"] == "sketch"})
    # 1. Sketch top-k below the block selectors at every budget and context.
    rows, ok = [], True
    for b in budgets:
        for c in ctxs:
            xs = {f: res.get((f"{f}-{b}", c)) for f in ("sketch", "minmax", "mean")}
            if any(v is None or not v["teacher_forced_steps"] for v in xs.values()):
                continue
            below = xs["sketch"]["kl_mean"] < min(xs["minmax"]["kl_mean"],
                                                  xs["mean"]["kl_mean"])
            ok = ok and below
            rows.append("| {} | {} | {} ({}) | {} ({}) | {} ({}) |".format(
                b, c, *[x for f in ("sketch", "minmax", "mean") for x in (
                    fmt(xs[f]["kl_mean"], "{:.2g}"), pct(xs[f].get("bytes_read")))]))
    if rows:
        out.append("1. Sketch top-k below block_minmax and block_mean in mean KL "
                   "at every budget and context: " + verdict(ok) + ".")
        out.append("")
        out.append("| budget | context | sketch KL (bytes) | minmax KL (bytes) "
                   "| mean KL (bytes) |")
        out.append("|---|---|---|---|---|")
        out += rows
        out.append("")
    # 2. At a ~1K budget: exact top-k's fidelity within 30% of dense bytes at 8K.
    s1k = res.get(("sketch-1025", "all"))
    if s1k:
        # Passkey against dense on the contexts the policy ran at.
        pk, shared = {}, {}
        for c in ctxs:
            if (("sketch-1025", c)) not in res:
                continue
            for d, v in passkey_by_depth(res[("sketch-1025", c)]).items():
                pk[d] = pk.get(d, 0) + v
            for d, v in passkey_by_depth(res[("dense", c)]).items():
                shared[d] = shared.get(d, 0) + v
        pk_ok = all(pk.get(d, 0) >= v for d, v in shared.items())
        b8 = res.get(("sketch-1025", ctxs[-1]), {}).get("bytes_read")
        ok = (s1k["top1_agreement"] >= 0.995 and s1k["kl_mean"] <= 1e-3
              and pk_ok and b8 is not None and b8 <= 0.30)
        out.append("2. sketch-1025 (contexts it does not cover): top-1 >= 99.5% "
                   "(measured {}), mean KL <= 1e-3 ({}), passkey = dense at "
                   "every depth ({}), bytes read <= 30% at {} ({}): {}.".format(
                       "{:.1%}".format(s1k["top1_agreement"]),
                       fmt(s1k["kl_mean"], "{:.2g}"),
                       "yes" if pk_ok else "no: {} vs dense {}".format(pk, shared),
                       ctxs[-1], pct(b8), verdict(ok)))
        out.append("")
    # 3. Certified policies against the oracle, and the largest faithful tau.
    cert = [n for n in names if pol[n]["family"] in CERTIFIED]
    if cert:
        out.append("3. Certified tokens read within 1.3x of the oracle's at the "
                   "same tau (per context, mean over sampled head-steps):")
        out.append("")
        for n in cert:
            cells = []
            good = True
            for c in ctxs:
                x = res.get((n, c))
                if x and "tokens_read_over_oracle" in x:
                    group = x.get("tokens_read_over_group_oracle")
                    cells.append("{} {:.2f}x{}".format(
                        c, x["tokens_read_over_oracle"],
                        "" if group is None else
                        " (group {:.2f}x)".format(group)))
                    good = good and x["tokens_read_over_oracle"] <= 1.3
            if cells:
                out.append("   - {}: {}: {}".format(n, ", ".join(cells), verdict(good)))
        out.append("")
        dense_pk = passkey_by_depth(res[("dense", "all")])
        faithful = []
        for n in cert:
            x = res.get((n, "all"))
            if not x:
                continue
            # Through the longest continuation the run followed (256 tokens
            # in the full study).
            last = max(x["survival"], key=int) if x["survival"] else None
            surv = x["survival"].get(last)
            pk = passkey_by_depth(x)
            if surv == 1.0 and all(pk.get(d, 0) >= v for d, v in dense_pk.items()):
                faithful.append(n)
        sk = [n for n in faithful if pol[n]["family"] in CERT_SKETCH]
        # Issue 10: <= 50% at 8K (SmolLM2), <= 30% at 32K (a second model).
        limit = 0.3 if int(ctxs[-1]) >= 32768 else 0.5
        line = ("4. The certified sketch policy with the largest tau that keeps "
                "every natural-text run greedy-identical (through the longest "
                "continuation followed: 256 tokens, 64 with --quick) and "
                "passkey = dense reads <= {:.0f}% of dense bytes at {}: ".format(
                    100 * limit, ctxs[-1]))
        if sk:
            def tau(n):
                t = pol[n]["mlir"].split("tau = ")[1].split(",")[0].split(">")[0]
                return 2.0 ** -24 if t == "strict" else float(t)
            def bytes_at_last(n):
                b = res.get((n, ctxs[-1]), {}).get("bytes_read")
                return float("inf") if b is None else b
            # The largest tau; among policies of that tau (e.g. cert-open
            # and cert-mass), the one that reads the fewest bytes.
            best = max(sk, key=lambda n: (tau(n), -bytes_at_last(n)))
            x = res.get((best, ctxs[-1]), {})
            b8 = x.get("bytes_read")
            line += "{} reads {}: {}".format(best, pct(b8),
                                             verdict(b8 is not None and b8 <= limit))
            if "bytes_read_bf16" in x:
                line += " ({} of a bf16 cache's)".format(pct(x["bytes_read_bf16"]))
            line += "."
        else:
            line += "no certified sketch policy kept all runs identical: " + \
                verdict(False) + "."
        out.append(line)
        out.append("")
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results.json")
    out = os.path.dirname(os.path.abspath(path))
    r, pol, res, ctxs = load(path)
    names = [p["name"] for p in r["policies"]]
    sparse = [n for n in names if n not in ("dense",)]

    # Survival curves (all contexts pooled).
    fig, ax = plt.subplots(figsize=(8, 5))
    for n in names:
        x = res.get((n, "all"))
        if not x or not x.get("natural_runs"):
            continue
        ts = [int(t) for t in SURV if t in x["survival"]]
        ys = [x["survival"][str(t)] for t in ts]
        fam = pol[n]["family"]
        ax.plot(ts, ys, marker="o", label=n, color=FAMILY_COLOR.get(fam),
                linestyle="-" if fam != "paper" else "--", alpha=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("generated tokens t")
    ax.set_ylabel("fraction of runs identical to dense through t")
    ax.set_title("Greedy survival on natural text (all contexts)")
    ax.set_ylim(-0.03, 1.03)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "survival.png"), dpi=120)
    plt.close(fig)

    # Mean KL vs fraction of positions attended, per context.
    fig, ax = plt.subplots(figsize=(8, 5))
    for n in sparse:
        fam = pol[n]["family"]
        xs, ys = [], []
        for c in ctxs:
            x = res.get((n, c))
            if x and x["teacher_forced_steps"]:
                xs.append(x["positions_attended"])
                ys.append(max(x["kl_mean"], 1e-12))
        if xs:
            ax.scatter(xs, ys, color=FAMILY_COLOR.get(fam), label=n, s=18)
            ax.plot(xs, ys, color=FAMILY_COLOR.get(fam), alpha=0.3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("positions attended / context (mean over layers, heads, steps)")
    ax.set_ylabel("mean KL(dense || policy), nats")
    ax.set_title("Fidelity vs keys read (one point per context)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "kl_vs_keys.png"), dpi=120)
    plt.close(fig)

    # Fidelity per byte: mean KL and passkey accuracy against bytes read
    # (page summaries, sketches, K/V rows and fallbacks over dense K+V bytes).
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for n in sparse:
        fam = pol[n]["family"]
        if fam == "noise":
            continue
        pts = []
        for c in ctxs:
            x = res.get((n, c))
            if x and x["teacher_forced_steps"] and "bytes_read" in x:
                a = acc(x, "passkey")
                pts.append((x["bytes_read"], max(x["kl_mean"], 1e-12),
                            None if a is None else a[0] / a[1]))
        if not pts:
            continue
        style = dict(color=FAMILY_COLOR.get(fam), label=n, s=18,
                     marker="^" if fam in CERTIFIED else "o")
        axes[0].scatter([p[0] for p in pts], [p[1] for p in pts], **style)
        kp = [p for p in pts if p[2] is not None]
        axes[1].scatter([p[0] for p in kp], [p[2] for p in kp], **style)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("mean KL(dense || policy), nats")
    axes[1].set_xscale("log")
    axes[1].set_ylabel("passkey accuracy")
    for ax in axes:
        ax.set_xlabel("bytes read / dense K+V bytes")
        ax.axvline(1.0, color="grey", linestyle=":")
    axes[0].set_title("Fidelity per byte (one point per policy and context)")
    axes[1].set_title("Passkey accuracy per byte")
    axes[1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "kl_vs_bytes.png"), dpi=120)
    plt.close(fig)

    # Passkey accuracy heatmap: policy x context.
    rows = [n for n in names]
    grid = []
    for n in rows:
        line = []
        for c in ctxs:
            a = acc(res.get((n, c), {}), "passkey")
            line.append(float("nan") if a is None else a[0] / a[1])
        grid.append(line)
    fig, ax = plt.subplots(figsize=(6, 0.32 * len(rows) + 1.5))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(ctxs)))
    ax.set_xticklabels(ctxs)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    for i, line in enumerate(grid):
        for j, v in enumerate(line):
            if not math.isnan(v):
                ax.text(j, i, "{:.0%}".format(v), ha="center", va="center",
                        fontsize=6, color="white" if v < 0.6 else "black")
    ax.set_xlabel("context")
    ax.set_title("Passkey accuracy (5 depths per context)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "passkey.png"), dpi=120)
    plt.close(fig)

    # Certificate: pass / fallback / keys read by context.
    cert = [n for n in names if pol[n]["family"] in CERTIFIED]
    if cert:
        fig, axes = plt.subplots(1, 3, figsize=(12, 4))
        for n in cert:
            cs = [c for c in ctxs if (n, c) in res]
            xs = [int(c) for c in cs]
            for ax, key, title in zip(
                    axes, ["cert_pass_rate", "cert_fallback_rate", "bytes_read"],
                    ["certified without fallback", "dense fallback",
                     "bytes read / dense K+V bytes"]):
                ax.plot(xs, [res[(n, c)].get(key, float("nan")) for c in cs],
                        marker="o", label=n)
                ax.set_xscale("log", base=2)
                ax.set_title(title)
                ax.set_xlabel("context")
                ax.set_ylim(-0.03, 1.6 if key == "bytes_read" else 1.03)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "certificate.png"), dpi=120)
        plt.close(fig)

    # True omitted softmax mass (float64 reference on the real KV cache).
    fig, ax = plt.subplots(figsize=(9, 5))
    shown = [n for n in sparse if res.get((n, "all"), {}).get("eps_true_quantiles")]
    for i, n in enumerate(shown):
        q = res[(n, "all")]["eps_true_quantiles"]  # 0, 5, ..., 100
        lo = [max(v, 1e-30) for v in q]
        ax.vlines(i, lo[1], lo[19], color=FAMILY_COLOR.get(pol[n]["family"]),
                  linewidth=6, alpha=0.6)
        ax.scatter([i], [lo[10]], color="black", s=12, zorder=3)
        ax.scatter([i], [lo[20]], color="red", marker="^", s=14, zorder=3)
    ax.axhline(ULP, color="grey", linestyle="--", label="2^-24 (float32 unit roundoff)")
    ax.axhline(1e-2, color="grey", linestyle=":", label="1e-2")
    ax.set_yscale("log")
    ax.set_ylim(1e-30, 2)
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels(shown, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("omitted softmax mass per (layer, head)")
    ax.set_title("True omitted mass: 5-95% bar, median dot, max triangle")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "omitted_mass.png"), dpi=120)
    plt.close(fig)

    # Tables.
    lines = []
    lines.append("| policy | top-1 agree | identical logits | KL mean | KL p99 "
                 "| KL max | survive 16/32/64/128/256 | QA answers = dense "
                 "| ppl change | attended | bytes read (bf16 cache) "
                 "| cert pass / fallback "
                 "| omitted mass median / max | > 2^-24 |")
    lines.append("|" + "---|" * 14)
    for n in names:
        x = res.get((n, "all"))
        if not x:
            continue
        surv = "/".join(pct(x["survival"].get(t)) for t in SURV
                        if t in x["survival"])
        cert = "–"
        if "cert_pass_rate" in x:
            cert = "{} / {}".format(pct(x["cert_pass_rate"]),
                                    pct(x["cert_fallback_rate"]))
        eps = "–"
        above = "–"
        if "eps_true_p50" in x:
            eps = "{} / {}".format(fmt(x["eps_true_p50"], "{:.1e}"),
                                   fmt(x["eps_true_max"], "{:.2g}"))
            above = pct(x["eps_true_above_float32_ulp"])
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} "
                     "| {} | {} | {} |".format(
                         n,
                         pct(x["top1_agreement"]) if n != "dense" else "–",
                         pct(x["identical_logits"]) if n != "dense" else "–",
                         fmt(x["kl_mean"]), fmt(x["kl_p99"]), fmt(x["kl_max"]),
                         surv, pct(x["qa_identical_answers"]),
                         fmt(100 * ppl_change(res, n, "all"), "{:+.2f}%")
                         if n != "dense" else "–",
                         pct(x["positions_attended"]),
                         pct(x.get("bytes_read")) +
                         (" ({})".format(pct(x["bytes_read_bf16"]))
                          if "bytes_read_bf16" in x else ""),
                         cert, eps, above))
    lines.append("")
    lines.append("Accuracy (correct/total) by context; dense first:")
    lines.append("")
    lines.append("| policy | task | " + " | ".join(ctxs) + " |")
    lines.append("|" + "---|" * (len(ctxs) + 2))
    for n in names:
        for task in ["passkey", "multikey", "vartrack", "copy"]:
            cells = []
            for c in ctxs:
                a = acc(res.get((n, c), {}), task)
                cells.append("–" if a is None else "{}/{}".format(*a))
            if all(v == "–" for v in cells):
                continue
            lines.append("| {} | {} | {} |".format(n, task, " | ".join(cells)))
    lines.append("")
    lines.append("Certified policies against the oracle (the fewest positions "
                 "that leave out <= tau of the exact softmax mass), per "
                 "context: positions whose K/V rows the policy read / the "
                 "oracle's, as fractions of the context (mean over sampled "
                 "head-steps), the group oracle's (the most the oracle needs "
                 "for a head of the group: one set serves the group) where "
                 "measured, and bytes read:")
    lines.append("")
    lines.append("| policy | " + " | ".join(ctxs) + " |")
    lines.append("|" + "---|" * (len(ctxs) + 1))
    for n in names:
        if pol[n]["family"] not in CERTIFIED:
            continue
        cells = []
        for c in ctxs:
            x = res.get((n, c))
            if not x or "oracle_tokens" not in x:
                cells.append("–")
                continue
            group = ""
            if "group_oracle_tokens" in x:
                group = "; group {} ({:.2f}x)".format(
                    pct(x["group_oracle_tokens"]),
                    x["tokens_read_over_group_oracle"])
            cells.append("{} / {} ({:.2f}x{}), bytes {}".format(
                pct(x["certified_tokens_read"]), pct(x["oracle_tokens"]),
                x["tokens_read_over_oracle"], group, pct(x.get("bytes_read"))))
        lines.append("| {} | {} |".format(n, " | ".join(cells)))
    lines.append("")
    lines.append("Per context: top-1 agreement / mean KL / bytes read:")
    lines.append("")
    lines.append("| policy | " + " | ".join(ctxs) + " |")
    lines.append("|" + "---|" * (len(ctxs) + 1))
    for n in sparse:
        cells = []
        for c in ctxs:
            x = res.get((n, c))
            if not x:
                cells.append("skipped")
                continue
            cells.append("{} / {} / {}".format(pct(x["top1_agreement"]),
                                               fmt(x["kl_mean"], "{:.2g}"),
                                               pct(x.get("bytes_read"))))
        lines.append("| {} | {} |".format(n, " | ".join(cells)))
    lines.append("")
    lines += targets(r, pol, res, ctxs)
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
