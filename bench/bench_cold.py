#!/usr/bin/env python3
"""Decode attention timed cold in L2, on the head shapes of real models.

The method of ../shared/DESIGN.md section 8 (BENCHMARKS.md, "Cold method"):
a decode step reads every layer's cache once, so no layer finds its keys in
the 60 MB L2. Each case therefore builds L distinct layers (their own K, V,
summaries, queries, page tables and outputs; L so that their bytes exceed
3x L2, at least 2), captures all L calls of one method in one CUDA graph,
and reports the median replay time divided by L. The same layers, in the
same process, are timed for every method:
  - torch SDPA with the cuDNN and the flash backend (GQA via enable_gqa),
    over the same keys and values in SDPA's [B, Hkv, n, D] layout;
  - our dense decode, our block-selection decode (anchor 1 + window 64 +
    top 960 tokens by page min/max, ~1K) and its certified variant
    (tau 1e-3, up to 4 extra pages, then dense fallback);
  - token top-960 by 4-bit key sketches (the same budget; its own program,
    whose summaries carry the sketch rows, written here by the ABI's
    formula, dialect/include/condensate/ABI/AttentionABI.h).
Correctness is checked on layer 0 of every case before timing (dense
against SDPA, the sparse outputs against dense).

Usage:
  bench_cold.py --lib build/runtime/libCondensateCompiler.so --json out.json
      [--shapes 32/8/128,28/4/128] [--batches 1,8] [--contexts 4096,131072]
      [--max-tokens N] [--iters N]
  bench_cold.py --report out.json [--png speedup.png]   (table and plot)
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

P = 64            # page size
TOPK = 960        # + anchor 1 + window 64 = 1025 tokens
L2_BYTES = 60 * 1024**2
# (name, q heads, kv heads, head dim): the models whose shape each is.
SHAPES = [
    ("Llama-3-8B", 32, 8, 128), ("Llama-3-70B", 64, 8, 128),
    ("Qwen2.5-7B", 28, 4, 128), ("Qwen2.5-1.5B/3B-class", 16, 2, 128),
    ("Llama-3.2-1B", 32, 8, 64), ("Qwen2.5-0.5B", 14, 2, 64),
    ("Gemma-class", 8, 1, 256),
]
BATCHES = [1, 8, 32, 64]
CONTEXTS = [4096, 16384, 32768, 65536, 131072, 1048576]
METHODS = ["sdpa_cudnn", "sdpa_flash", "dense", "condensate", "certified",
           "sketch"]
SKETCH_BITS = 4
SKETCH_TEMPLATE = """condensate.model @sketch layers = 1, q_heads = {hq},
    kv_heads = {hkv}, head_dim = {d}, page_size = {p}, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1,
      default = #condensate.policy<anchor = 1, window = 64, topk = {topk},
        selector = sketch, bits = {bits}, page_size = {p}>, rules = []>
"""


def add_sketches(torch, c, bits):
    """Summaries with the key sketch rows after the five box rows: per page,
    channel and token the code round((k - lo) * L / (hi - lo)) clamped to
    [0, L], packed 32 / bits codes a word (AttentionABI.h)."""
    k, summ = c["k"], c["summ"]
    num_pages, hkv, p, d = k.shape
    per_word = 32 // bits
    rows = (p + per_word - 1) // per_word
    levels = (1 << bits) - 1
    out = torch.empty(num_pages, hkv, 5 + rows, d, device=k.device,
                      dtype=torch.float32)
    out[:, :, :5] = summ
    step = max(1, (1 << 26) // (hkv * p * d * 4))
    for s in range(0, num_pages, step):
        kk = k[s:s + step].float()
        lo = summ[s:s + step, :, 0][:, :, None, :]
        hi = summ[s:s + step, :, 1][:, :, None, :]
        rng = hi - lo
        inv = levels / torch.where(rng > 0, rng, torch.ones_like(rng))
        code = torch.floor((kk - lo) * inv + 0.5).clamp(0, levels)
        code = torch.where(rng > 0, code, torch.zeros_like(code)).to(torch.int64)
        code = torch.nn.functional.pad(code, (0, 0, 0, rows * per_word - p))
        code = code.view(code.shape[0], hkv, rows, per_word, d)
        shifts = (torch.arange(per_word, device=k.device) * bits).view(
            1, 1, 1, per_word, 1)
        words = (code << shifts).sum(3)            # < 2^32, in int64
        words = torch.where(words >= 1 << 31, words - (1 << 32), words)
        out[s:s + step, :, 5:] = words.to(torch.int32).view(torch.float32)
        del kk, code, words
    c["summ_sketch"] = out



def shape_key(hq, hkv, d):
    return f"{hq}/{hkv}/{d}"


def parse_shape(text):
    """A q/kv/d shape: the named model's where it is one of SHAPES, any
    other (q a multiple of kv) as a custom shape."""
    for s in SHAPES:
        if shape_key(*s[1:]) == text:
            return s
    try:
        hq, hkv, d = (int(x) for x in text.split("/"))
    except ValueError:
        sys.exit(f"bench_cold.py: --shapes: '{text}' is not q/kv/d")
    if hkv < 1 or hq < hkv or hq % hkv or d < 1:
        sys.exit(f"bench_cold.py: --shapes: '{text}': q heads must be a "
                 "positive multiple of kv heads")
    return ("custom", hq, hkv, d)


def run_bench(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_attention import (MODEL_TEMPLATE, check, copy_bandwidth,
                                 load_lib)

    lib = load_lib(args.lib)
    lib.condensate_gpu_free.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(4096)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    props = torch.cuda.get_device_properties(0)
    bw = copy_bandwidth()
    print(f"{props.name}, {props.multi_processor_count} SMs, copy "
          f"{bw / 1e9:.0f} GB/s (read + write), torch {torch.__version__}",
          flush=True)
    shapes = SHAPES
    if args.shapes:
        shapes = [parse_shape(x) for x in args.shapes.split(",")]
    batches = [int(x) for x in args.batches.split(",")] if args.batches \
        else BATCHES
    contexts = [int(x) for x in args.contexts.split(",")] if args.contexts \
        else CONTEXTS
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261201)
    backends = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
                "sdpa_flash": SDPBackend.FLASH_ATTENTION}
    rows = []
    for name, hq, hkv, d in shapes:
        prog = ctypes.c_void_p()
        secs = ctypes.c_double()
        src = ctypes.c_int()
        text = MODEL_TEMPLATE.format(hq=hq, hkv=hkv, d=d, p=P, topk=TOPK)
        check(lib.condensate_gpu_compile(text.encode(), b"sm_90", b"",
                                         ctypes.byref(prog), ctypes.byref(secs),
                                         ctypes.byref(src), err, 4096), err)
        sk_prog = ctypes.c_void_p()
        sk_text = SKETCH_TEMPLATE.format(hq=hq, hkv=hkv, d=d, p=P, topk=TOPK,
                                         bits=SKETCH_BITS)
        check(lib.condensate_gpu_compile(sk_text.encode(), b"sm_90", b"",
                                         ctypes.byref(sk_prog),
                                         ctypes.byref(secs),
                                         ctypes.byref(src), err, 4096), err)
        progs = (prog, sk_prog)
        print(f"{name} {shape_key(hq, hkv, d)}: compiled in {secs.value:.2f} s",
              flush=True)
        for batch in batches:
            for n in contexts:
                if batch * n > args.max_tokens:
                    continue
                t0 = time.time()
                torch.cuda.empty_cache()
                layer_bytes = 2 * batch * n * hkv * d * 2
                layers = max(2, math.ceil(3 * L2_BYTES / layer_bytes))
                layers = min(layers, args.max_layers)
                # Ours and SDPA's copies of the cache, within the memory cap.
                while layers > 2 and 2.5 * layers * layer_bytes > args.mem_cap:
                    layers -= 1
                if 2.5 * layers * layer_bytes > args.mem_cap:
                    print(f"  skip B{batch} n{n}: over the memory cap",
                          flush=True)
                    continue
                try:
                    row = measure_case(torch, F, sdpa_kernel, lib, progs, err,
                                       backends, bw, (name, hq, hkv, d),
                                       batch, n, layers, layer_bytes, gen,
                                       args.iters)
                except Exception as e:  # record it, go on with the sweep
                    row = {"shape": shape_key(hq, hkv, d), "model": name,
                           "batch": batch, "context": n, "layers": layers,
                           "layer_kv_bytes": layer_bytes,
                           "error": str(e).splitlines()[0][:300]}
                    torch.cuda.synchronize()
                row["seconds"] = time.time() - t0
                rows.append(row)
                print(json.dumps(row), flush=True)
                write_json(args, props, torch, bw, rows)
        lib.condensate_gpu_free(prog)
        lib.condensate_gpu_free(sk_prog)
    print_table(write_json(args, props, torch, bw, rows))


def write_json(args, props, torch, bw, rows):
    out = {"gpu": props.name, "sms": props.multi_processor_count,
           "torch": torch.__version__, "copy_bandwidth_Bps": bw,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": " ".join(sys.argv), "page_size": P,
           "budget_tokens": 1 + 64 + TOPK, "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


def measure_case(torch, F, sdpa_kernel, lib, progs, err, backends, bw, shape,
                 batch, n, layers, layer_bytes, gen, iters):
    from bench_attention import LAYERS, check, graph_time, make_cache
    name, hq, hkv, d = shape
    ls = [make_cache(hq, hkv, d, batch, n, gen) for _ in range(layers)]
    for c in ls:
        add_sketches(torch, c, SKETCH_BITS)
    mp = ls[0]["max_pages"]
    npg = ls[0]["num_pages"]
    for prog in progs:
        check(lib.condensate_gpu_reserve(prog, batch, mp, npg, err,
                                         4096), err)

    def ours(method, c):
        sketch = method == "sketch"
        prog = progs[1] if sketch else progs[0]
        layer = 0 if sketch else LAYERS[method]
        summ = c["summ_sketch"] if sketch else c["summ"]

        def call():
            check(lib.condensate_gpu_attend(
                prog, layer, batch, mp, npg, c["q"].data_ptr(),
                c["k"].data_ptr(), c["v"].data_ptr(),
                c["pt"].data_ptr(), c["lens"].data_ptr(),
                c["windows"].data_ptr(), summ.data_ptr(),
                c["out"].data_ptr(), c["stats"].data_ptr(),
                torch.cuda.current_stream().cuda_stream, err,
                4096), err)
        return call

    def sdpa(method, c):
        kb = backends[method]

        def call():
            with sdpa_kernel(kb):
                c["sdpa_out"] = F.scaled_dot_product_attention(
                    c["q4"], c["ks"], c["vs"], enable_gqa=True)
        return call

    row = {"shape": shape_key(hq, hkv, d), "model": name,
           "batch": batch, "context": n, "layers": layers,
           "layer_kv_bytes": layer_bytes}
    # Correctness on layer 0 (outputs poisoned by make_layer).
    c0 = ls[0]
    with sdpa_kernel(backends["sdpa_flash"]):
        ref = F.scaled_dot_product_attention(
            c0["q4"], c0["ks"], c0["vs"],
            enable_gqa=True).squeeze(2).float()
    ours("dense", c0)()
    torch.cuda.synchronize()
    dense = c0["out"].clone()
    row["dense_vs_sdpa_rel_err"] = float(
        (dense - ref).norm() / ref.norm())
    for m in ("condensate", "certified", "sketch"):
        c0["out"].fill_(float("nan"))
        ours(m, c0)()
        torch.cuda.synchronize()
        row[m + "_vs_dense_rel_diff"] = float(
            (c0["out"] - dense).norm() / dense.norm())
        if m == "certified":
            # stats column 3: 1 = fell back after the sparse pass, 2 =
            # decided early (docs/CERTIFICATE.md).
            flag = c0["stats"][:, :, 3]
            row["certified_fallback_rate"] = float((flag != 0).float().mean())
            row["certified_early_rate"] = float((flag == 2).float().mean())
    del ref, dense
    for m in METHODS:
        make = sdpa if m.startswith("sdpa") else ours
        try:
            ms = graph_time([make(m, c) for c in ls],
                            iters)
            row[m + "_us"] = 1e3 * ms / layers
        except Exception as e:  # a backend may refuse a shape
            row[m + "_error"] = str(e).splitlines()[0][:200]
    sd = [row[k] for k in ("sdpa_cudnn_us", "sdpa_flash_us")
          if k in row]
    if sd:
        best = min(sd)
        row["faster_sdpa_us"] = best
        for m in ("dense", "condensate", "certified", "sketch"):
            if m + "_us" in row:
                row[m + "_speedup"] = best / row[m + "_us"]
    del ls
    return row


def fmt_us(v):
    return "–" if v is None else f"{v:.1f}"


def print_table(out):
    print(f"\n{out['gpu']}, torch {out['torch']}, copy "
          f"{out['copy_bandwidth_Bps'] / 1e9:.0f} GB/s, {out['date']}; "
          f"times in us per layer, cold in L2\n")
    print("| shape | batch | context | layers | cuDNN | flash | ours dense | "
          "dense / faster SDPA | K+V at copy BW | condensate | speedup | "
          "certified | speedup | certified fallback | sketch | speedup |")
    print("|" + "---|" * 16)
    for r in out["rows"]:
        best = r.get("faster_sdpa_us")
        # What one layer must read at least, K and V, at the device-copy
        # rate (bytes read + written per second).
        roof = 1e6 * r["layer_kv_bytes"] / out["copy_bandwidth_Bps"]

        def ratio(m):
            v = r.get(m + "_us")
            return "–" if v is None or best is None else f"{v / best:.2f}x"

        def speed(m):
            v = r.get(m + "_speedup")
            return "–" if v is None else f"{v:.1f}x"
        print(f"| {r['shape']} | {r['batch']} | {r['context']:,} | "
              f"{r['layers']} | {fmt_us(r.get('sdpa_cudnn_us'))} | "
              f"{fmt_us(r.get('sdpa_flash_us'))} | {fmt_us(r.get('dense_us'))}"
              f" | {ratio('dense')} | {fmt_us(roof)} | "
              f"{fmt_us(r.get('condensate_us'))} | {speed('condensate')} | "
              f"{fmt_us(r.get('certified_us'))} | {speed('certified')} | "
              f"{100 * r.get('certified_fallback_rate', float('nan')):.0f}% | "
              f"{fmt_us(r.get('sketch_us'))} | {speed('sketch')} |")


def report(args):
    with open(args.report) as fh:
        out = json.load(fh)
    print_table(out)
    if not args.png:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    methods = [m for m in ("condensate", "sketch", "dense")
               if any(m + "_speedup" in r for r in out["rows"])]
    titles = {"condensate": "block_minmax (~1K budget) / faster SDPA",
              "sketch": "4-bit sketch top-k (~1K budget) / faster SDPA",
              "dense": "ours dense / faster SDPA"}
    fig, axes = plt.subplots(1, len(methods), figsize=(6.5 * len(methods), 5))
    for ax, method in zip(axes, methods):
        title = titles[method]
        for key in sorted({r["shape"] for r in out["rows"]}):
            pts = sorted((r["context"], r[method + "_speedup"])
                         for r in out["rows"]
                         if r["shape"] == key and r["batch"] == args.batch
                         and method + "_speedup" in r)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=key)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linestyle=":")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("speedup over the faster SDPA (cold L2)")
        ax.set_title(f"{title}, batch {args.batch}")
        ax.legend(fontsize=7, title="q/kv/d")
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", help="path of libCondensateCompiler.so")
    ap.add_argument("--json")
    ap.add_argument("--shapes", help="q/kv/d list, e.g. 32/8/128,28/4/128")
    ap.add_argument("--batches")
    ap.add_argument("--contexts")
    ap.add_argument("--max-tokens", type=int, default=1 << 21,
                    help="largest batch * context (default 2M)")
    ap.add_argument("--max-layers", type=int, default=128)
    ap.add_argument("--mem-cap", type=float, default=80e9,
                    help="bytes of caches a case may hold (default 80 GB)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--report", help="print the table of a results JSON")
    ap.add_argument("--png", help="with --report: the speedup plot")
    ap.add_argument("--batch", type=int, default=1,
                    help="with --png: the batch plotted (default 1)")
    args = ap.parse_args()
    if args.report:
        report(args)
    elif args.lib:
        run_bench(args)
    else:
        ap.error("--lib (run) or --report (table) is required")


if __name__ == "__main__":
    main()
