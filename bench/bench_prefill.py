#!/usr/bin/env python3
"""Prefill (causal) attention: the generated kernel against torch SDPA.

One sequence of n tokens per case, all n rows attending causally (a whole
prompt prefilled at once), on the head shapes of real models. Our kernel
(condensate.prefill_attention lowered to PTX, called through the C API
condensate_gpu_prefill) reads the keys and values from a paged bf16 cache
(pages of 64, shuffled) and computes in float32; the peers, in the same
process, on the same keys and values in SDPA's [1, H, n, D] layout:
  - sdpa_flash_bf16: torch SDPA, flash backend, bf16 (tensor cores);
  - sdpa_cudnn_bf16: torch SDPA, cuDNN backend, bf16;
  - sdpa_efficient_f32: torch SDPA, memory-efficient backend, float32
    (keys and values repeated per query head: it takes no GQA).
GQA through enable_gqa otherwise. Each timed call follows a write of 3x L2 (cold L2);
the figure is the median of --iters calls timed with CUDA events. FLOPs
count the causal half: 4 * Hq * D * n(n+1)/2. Correctness: our output
against float64 attention over the same bf16 keys and values (rows sampled).

Usage:
  bench_prefill.py --lib build/runtime/libCondensateCompiler.so --json out.json
      [--shapes 14/2/64,32/8/128] [--contexts 4096,16384] [--iters N]
  bench_prefill.py --report out.json        (markdown table)
"""
import argparse
import ctypes
import json
import math
import os
import sys

# bench_attention (load_lib, check) imports torch: imported where used, so
# --report runs without it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

P = 64
L2_BYTES = 60 * 1024**2
SHAPES = [
    ("Qwen2.5-0.5B", 14, 2, 64), ("Llama-3.2-1B", 32, 8, 64),
    ("Llama-3-8B", 32, 8, 128), ("Qwen2.5-7B", 28, 4, 128),
    ("Gemma-3-270M", 4, 1, 256),
]
CONTEXTS = [4096, 16384, 32768]
PEERS = ["sdpa_flash_bf16", "sdpa_cudnn_bf16", "sdpa_efficient_f32"]

MODEL = """condensate.model @prefill layers = 1, q_heads = {hq}, kv_heads = {hkv},
    head_dim = {d}, page_size = {p}, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>
"""


def load_lib(path):
    # bench_attention's declarations (compile, attend, ...) plus prefill.
    import bench_attention
    lib = bench_attention.load_lib(path)
    c = ctypes
    lib.condensate_gpu_prefill.argtypes = (
        [c.c_void_p, c.c_int64, c.c_int64, c.c_int64, c.c_int64, c.c_int64] +
        [c.c_void_p] * 7 + [c.c_void_p, c.c_char_p, c.c_size_t])
    lib.condensate_gpu_free.argtypes = [c.c_void_p]
    return lib


def run_case(lib, torch, F, SDPBackend, sdpa_kernel, name, hq, hkv, d, n,
             iters, flush):
    from bench_attention import check
    dev = torch.device("cuda")
    err = ctypes.create_string_buffer(4096)
    prog = ctypes.c_void_p()
    secs, fns = ctypes.c_double(), ctypes.c_int()
    text = MODEL.format(hq=hq, hkv=hkv, d=d, p=P).encode()
    check(lib.condensate_gpu_compile(text, b"sm_90", b"", ctypes.byref(prog),
                                     ctypes.byref(secs), ctypes.byref(fns),
                                     err, len(err)), err)
    g = torch.Generator(device=dev).manual_seed(n * 131 + hq)
    q = torch.randn(n, hq, d, device=dev, generator=g)
    k = torch.randn(1, hkv, n, d, device=dev, generator=g).to(torch.bfloat16)
    v = torch.randn(1, hkv, n, d, device=dev, generator=g).to(torch.bfloat16)
    pages = (n + P - 1) // P
    perm = torch.randperm(pages, device=dev, generator=g).to(torch.int32)
    kc = torch.zeros(pages, hkv, P, d, dtype=torch.bfloat16, device=dev)
    vc = torch.zeros_like(kc)
    t = torch.arange(n, device=dev)
    kc[perm[t // P].long(), :, t % P, :] = k[0].transpose(0, 1)
    vc[perm[t // P].long(), :, t % P, :] = v[0].transpose(0, 1)
    pt = perm.view(1, pages).contiguous()
    lens = torch.tensor([n], dtype=torch.int32, device=dev)
    starts = torch.tensor([0, n], dtype=torch.int32, device=dev)
    out = torch.full((n, hq, d), float("nan"), device=dev)
    stream = torch.cuda.current_stream().cuda_stream

    def ours():
        check(lib.condensate_gpu_prefill(
            prog, 0, n, 1, pages, pages, q.data_ptr(), kc.data_ptr(),
            vc.data_ptr(), pt.data_ptr(), lens.data_ptr(), starts.data_ptr(),
            out.data_ptr(), stream, err, len(err)), err)

    # Correctness on sampled rows against float64.
    ours()
    torch.cuda.synchronize()
    rows = torch.unique(torch.cat([torch.tensor([0, 1, n - 1], device=dev),
                                   torch.randint(0, n, (29,), device=dev,
                                                 generator=g)]))
    kf, vf = k[0].double(), v[0].double()
    worst = 0.0
    scale = 1.0 / math.sqrt(d)
    for r in rows.tolist():
        for h in range(hq):
            kv = h // (hq // hkv)
            s = (kf[kv, :r + 1] @ q[r, h].double()) * scale
            p = torch.softmax(s, 0)
            ref = p @ vf[kv, :r + 1]
            worst = max(worst, (out[r, h].double() - ref).abs().max().item())

    qs = q.transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
    q16 = qs.to(torch.bfloat16)
    k32x = k.float().repeat_interleave(hq // hkv, dim=1)
    v32x = v.float().repeat_interleave(hq // hkv, dim=1)

    def peer(which):
        if which == "sdpa_flash_bf16":
            backend, a = SDPBackend.FLASH_ATTENTION, (q16, k, v)
        elif which == "sdpa_cudnn_bf16":
            backend, a = SDPBackend.CUDNN_ATTENTION, (q16, k, v)
        else:
            # The memory-efficient kernel takes no GQA: heads expanded.
            backend, a = SDPBackend.EFFICIENT_ATTENTION, (qs, k32x, v32x)

        def call():
            with sdpa_kernel(backend):  # a context manager is single-use
                F.scaled_dot_product_attention(
                    *a, is_causal=True,
                    enable_gqa=backend != SDPBackend.EFFICIENT_ATTENTION)
        return call

    def timed(fn):
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # a backend that does not take this case
            return None, str(e).splitlines()[0][:120]
        times = []
        try:
            for _ in range(iters):
                flush.add_(1.0)
                a, b = torch.cuda.Event(True), torch.cuda.Event(True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
        except Exception as e:
            return None, str(e).splitlines()[0][:120]
        times.sort()
        return times[len(times) // 2], None

    flops = 4.0 * hq * d * n * (n + 1) / 2
    res = {"shape": name, "hq": hq, "hkv": hkv, "d": d, "n": n,
           "max_abs_err_vs_f64": worst, "compile_s": secs.value, "ms": {},
           "tflops": {}, "skipped": {}}
    for m, fn in [("condensate", ours)] + [(p, peer(p)) for p in PEERS]:
        ms, why = timed(fn)
        if ms is None:
            res["skipped"][m] = why
            continue
        res["ms"][m] = ms
        res["tflops"][m] = flops / (ms * 1e-3) / 1e12
    lib.condensate_gpu_free(prog)
    return res


def report(data):
    lines = ["| shape (q/kv/d) | context | condensate ms | TFLOP/s | "
             + " | ".join(f"{p} ms (ours/peer FLOP rate)" for p in PEERS)
             + " | max err vs f64 |",
             "|---|---|---|---|" + "---|" * len(PEERS) + "---|"]
    for r in data["cases"]:
        ours = r["ms"].get("condensate")
        cells = []
        for p in PEERS:
            if p in r["ms"] and ours:
                cells.append(f"{r['ms'][p]:.3f} ({r['ms'][p] / ours:.2f})")
            else:
                cells.append("n/a")
        lines.append(
            f"| {r['shape']} {r['hq']}/{r['hkv']}/{r['d']} | {r['n']} | "
            f"{ours:.3f} | {r['tflops'].get('condensate', 0):.1f} | "
            + " | ".join(cells) + f" | {r['max_abs_err_vs_f64']:.1e} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib")
    ap.add_argument("--json")
    ap.add_argument("--report")
    ap.add_argument("--shapes")
    ap.add_argument("--contexts")
    ap.add_argument("--iters", type=int, default=7)
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(report(json.load(f)))
        return 0
    if not args.lib or not args.json:
        ap.error("--lib and --json are required to run")
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shapes = SHAPES
    if args.shapes:
        want = set(args.shapes.split(","))
        shapes = [s for s in SHAPES if f"{s[1]}/{s[2]}/{s[3]}" in want]
    contexts = ([int(c) for c in args.contexts.split(",")] if args.contexts
                else CONTEXTS)
    lib = load_lib(args.lib)
    flush = torch.empty(3 * L2_BYTES // 4, device="cuda")
    cases = []
    for name, hq, hkv, d in shapes:
        for n in contexts:
            r = run_case(lib, torch, F, SDPBackend, sdpa_kernel, name, hq, hkv,
                         d, n, args.iters, flush)
            cases.append(r)
            print(json.dumps(r), flush=True)
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(),
                           "torch": torch.__version__, "cases": cases}, f,
                          indent=1)
    print(report({"cases": cases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
