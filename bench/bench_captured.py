#!/usr/bin/env python3
"""Decode attention on KV captured from a real model, timed cold in L2.

`condensate-decode --capture-kv DIR [--capture-layers LIST]` writes one
decode step of a real model: its queries and the keys and values of the
chosen layers (tools/condensate-decode/Capture.h). This times attention on
them, in one process, graph against graph and cold in L2 as bench_cold.py
does (../shared/DESIGN.md section 8: L distinct layer copies whose bytes
exceed 3x the 60 MB L2, copy i holding captured layer i mod the captured
count, all in one CUDA graph, median replay over L per layer):
  - torch SDPA, cuDNN and flash backends (GQA);
  - our dense decode;
  - the certified key-sketch policy of examples/certified.mlir (read from
    it: today anchor 1, window 64, 4-bit sketch top-192, no output-error
    bound) with extras open up to the context and pages of --page-size, at
    each --taus;
  - the uncertified 4-bit sketch top-960 (~1K tokens, bench_cold's budget).
Each method's bytes read come from its own call's statistics
(condensate_bytes_read, the decoder's definition), over every captured
layer, with the certificate's pass and fallback rates. Issue 10's target
for the certified step: faster than the faster SDPA by at least (dense
bytes / bytes read) / 1.5 where it certifies, and at most 1.1x our dense
where it falls back.

Usage:
  bench_captured.py --lib LIB --kv DIR [--taus 1e-2,1e-1] [--page-size 16]
      [--batch B] [--json out.json] [--iters N]
With BENCH_CAPTURED_DEVICE=cpu the same layouts, outputs, decisions and
bytes come from the CPU program (condensate_cpu_*), and nothing is timed:
a check of the setup on a machine without a GPU.
"""
import argparse
import ctypes
import json
import math
import os
import re
import sys
import time

L2_BYTES = 60 * 1024**2
DEV = os.environ.get("BENCH_CAPTURED_DEVICE", "cuda")  # "cpu": layout checks
BITS = 4
SKETCH_TOPK = 960
# The certified policy timed: examples/certified.mlir's default policy, its
# tau, page size and max_extra set per run (certified_policy).
CERTIFIED_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "..", "examples", "certified.mlir")
MODEL = """condensate.model @captured layers = {layers}, q_heads = {hq},
    kv_heads = {hkv}, head_dim = {d}, page_size = {p}, kv_type = bf16,
    scale = {scale}, schedule = #condensate.schedule<layers = {layers},
      default = #condensate.dense, rules = [
        #condensate.rule<layers = [1], policy = #condensate.policy<anchor = 1,
          window = 64, topk = {sketch_topk}, selector = sketch, bits = {bits},
          page_size = {p}>>{cert_rules}]>
"""
CERT_RULE = """,
        #condensate.rule<layers = [{layer}], policy = {policy}>"""


def certified_policy(tau, page_size, max_extra):
    """examples/certified.mlir's default policy with `tau`, `page_size`
    and `max_extra` (open extras: at least the context) in place of its
    own."""
    with open(CERTIFIED_EXAMPLE) as fh:
        text = fh.read()
    m = re.search(r"default = (#condensate\.policy<[^>]*>)", text)
    if not m or "selector = sketch" not in m.group(1):
        sys.exit(f"bench_captured.py: no sketch policy as the default of "
                 f"{CERTIFIED_EXAMPLE}")
    policy = " ".join(m.group(1).split())
    for key, value in (("tau", f"{tau:e}"), ("max_extra", str(max_extra)),
                       ("page_size", str(page_size))):
        policy, count = re.subn(rf"\b{key} = [^,>]+", f"{key} = {value}",
                                policy)
        if count == 0:
            policy = policy[:-1] + f", {key} = {value}>"
    return policy


def load_capture(torch, path):
    """capture.json, q [Lc, Hq, D] f32, k and v [Lc, Hkv, n, D] bf16 (on
    the GPU)."""
    import numpy as np
    with open(os.path.join(path, "capture.json")) as fh:
        meta = json.load(fh)
    arrays = {}
    for name in ("q", "k", "v"):
        a = np.load(os.path.join(path, name + ".npy"))
        if name != "q" and meta["kv_type"] == "bf16":
            t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16))
            t = t.view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.ascontiguousarray(a))
        arrays[name] = t.to(DEV)
    q = arrays["q"].float()
    k = arrays["k"].to(torch.bfloat16)
    v = arrays["v"].to(torch.bfloat16)
    lc, hq, d = q.shape
    if k.shape != (lc, meta["kv_heads"], meta["context"], d) or \
            v.shape != k.shape or hq != meta["q_heads"]:
        sys.exit(f"bench_captured.py: {path}: shapes q {tuple(q.shape)} k "
                 f"{tuple(k.shape)} v {tuple(v.shape)} do not match "
                 "capture.json")
    return meta, q, k, v


def make_copy(torch, q, k, v, p, gen, batch=1):
    """One layer's paged cache (condensate's layout, bf16, pages in a random
    order) from a captured layer's q [Hq, D], k and v [Hkv, n, D], for
    `batch` sequences that each hold the captured one in their own pages:
    page summaries over each page's positions (min, max, sum of K; min, max
    of V), and SDPA's views."""
    from bench_attention import page_summaries
    hkv, n, d = k.shape
    hq = q.shape[0]
    pages = math.ceil(n / p)
    pad = pages * p - n
    kp = torch.nn.functional.pad(k, (0, 0, 0, pad)).view(hkv, pages, p, d)
    vp = torch.nn.functional.pad(v, (0, 0, 0, pad)).view(hkv, pages, p, d)
    valid = (torch.arange(pages * p, device=DEV) < n).view(pages, p)
    num = batch * pages
    perm = torch.randperm(num, device=DEV, generator=gen).view(batch, pages)
    kc = torch.empty(num, hkv, p, d, device=DEV, dtype=torch.bfloat16)
    vc = torch.empty_like(kc)
    valid_pool = torch.empty(num, p, device=DEV, dtype=torch.bool)
    for b in range(batch):
        kc[perm[b]] = kp.permute(1, 0, 2, 3)
        vc[perm[b]] = vp.permute(1, 0, 2, 3)
        valid_pool[perm[b]] = valid
    summ = page_summaries(kc, vc, valid_pool)
    qb = q.expand(batch, hq, d).contiguous()
    c = dict(k=kc, v=vc, summ=summ, q=qb,
             q4=qb.to(torch.bfloat16).view(batch, hq, 1, d),
             ks=k.expand(batch, hkv, n, d).contiguous(),
             vs=v.expand(batch, hkv, n, d).contiguous(),
             pt=perm.to(torch.int32).contiguous(),
             lens=torch.full((batch,), n, device=DEV, dtype=torch.int32),
             windows=torch.zeros(batch, device=DEV, dtype=torch.int32),
             out=torch.full((batch, hq, d), float("nan"), device=DEV),
             stats=torch.full((batch, hq, 5), float("nan"), device=DEV),
             num_pages=num, max_pages=pages)
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--kv", required=True, help="a --capture-kv folder")
    ap.add_argument("--taus", default="1e-2,1e-1")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--batch", type=int, default=1,
                    help="sequences a call, each the captured one in its "
                         "own pages")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_attention import check, copy_bandwidth, graph_time, load_lib
    from bench_cold import add_sketches

    lib = load_lib(args.lib)
    lib.condensate_gpu_free.argtypes = [ctypes.c_void_p]
    c_ = ctypes
    lib.condensate_bytes_read.argtypes = [
        c_.c_char_p, c_.c_int64, c_.c_int64, c_.c_void_p, c_.c_void_p,
        c_.POINTER(c_.c_double), c_.POINTER(c_.c_double), c_.c_char_p,
        c_.c_size_t]
    err = ctypes.create_string_buffer(4096)
    gpu = DEV != "cpu"
    if gpu:
        torch.cuda.init()
        gpu_name = torch.cuda.get_device_properties(0).name
        bw = copy_bandwidth()
    else:
        gpu_name, bw = "cpu (no timing)", None
        ptrs = [c_.c_void_p] * 9
        lib.condensate_cpu_compile.argtypes = [
            c_.c_char_p, c_.POINTER(c_.c_void_p), c_.POINTER(c_.c_double),
            c_.c_char_p, c_.c_size_t]
        lib.condensate_cpu_attend.argtypes = (
            [c_.c_void_p, c_.c_int64, c_.c_int64, c_.c_int64, c_.c_int64] +
            ptrs + [c_.c_char_p, c_.c_size_t])
    batch = args.batch
    if not 1 <= batch <= 1024:
        sys.exit(f"bench_captured.py: --batch must be in [1, 1024], got {batch}")
    meta, q, k, v = load_capture(torch, args.kv)
    lc, hq, d = q.shape
    hkv, n = k.shape[1], k.shape[2]
    p = args.page_size
    taus = [float(t) for t in args.taus.split(",") if t]
    cert_rules = "".join(
        CERT_RULE.format(layer=2 + i,
                         policy=certified_policy(t, p, max(32768, n)))
        for i, t in enumerate(taus))
    text = MODEL.format(layers=2 + len(taus), hq=hq, hkv=hkv, d=d, p=p,
                        scale=f"{meta['scale']:.9e}", sketch_topk=SKETCH_TOPK,
                        bits=BITS, cert_rules=cert_rules)
    prog, secs, src = ctypes.c_void_p(), ctypes.c_double(), ctypes.c_int()
    if gpu:
        check(lib.condensate_gpu_compile(text.encode(), b"sm_90", b"",
                                         ctypes.byref(prog), ctypes.byref(secs),
                                         ctypes.byref(src), err, 4096), err)
    else:
        check(lib.condensate_cpu_compile(text.encode(), ctypes.byref(prog),
                                         ctypes.byref(secs), err, 4096), err)
    print(f"{gpu_name}; {meta['model']} layers {meta['layers']}, context "
          f"{n}, {hq}/{hkv}/{d}, pages of {p}, batch {batch}; compiled in "
          f"{secs.value:.1f} s", flush=True)
    layer_bytes = 2 * batch * n * hkv * d * 2
    copies = max(2, math.ceil(3 * L2_BYTES / layer_bytes), lc) if gpu else lc
    gen = torch.Generator(device=DEV)
    gen.manual_seed(20261208)
    cs = []
    for i in range(copies):
        c = make_copy(torch, q[i % lc], k[i % lc], v[i % lc], p, gen, batch)
        add_sketches(torch, c, BITS)
        cs.append(c)
    if gpu:
        check(lib.condensate_gpu_reserve(prog, batch, cs[0]["max_pages"],
                                         cs[0]["num_pages"], err, 4096), err)
    methods = {"dense": 0, "sketch": 1}
    for i, t in enumerate(taus):
        methods[f"certified_{t:g}"] = 2 + i

    def ours(layer, c):
        if not gpu:
            return lambda: check(lib.condensate_cpu_attend(
                prog, layer, batch, c["max_pages"], c["num_pages"],
                c["q"].data_ptr(), c["k"].data_ptr(), c["v"].data_ptr(),
                c["pt"].data_ptr(), c["lens"].data_ptr(),
                c["windows"].data_ptr(), c["summ_sketch"].data_ptr(),
                c["out"].data_ptr(), c["stats"].data_ptr(), err, 4096), err)

        def call():
            check(lib.condensate_gpu_attend(
                prog, layer, batch, c["max_pages"], c["num_pages"],
                c["q"].data_ptr(), c["k"].data_ptr(), c["v"].data_ptr(),
                c["pt"].data_ptr(), c["lens"].data_ptr(),
                c["windows"].data_ptr(), c["summ_sketch"].data_ptr(),
                c["out"].data_ptr(), c["stats"].data_ptr(),
                torch.cuda.current_stream().cuda_stream, err, 4096), err)
        return call

    def sdpa(backend, c):
        def call():
            with sdpa_kernel(backend):
                c["sdpa_out"] = F.scaled_dot_product_attention(
                    c["q4"], c["ks"], c["vs"], enable_gqa=True,
                    scale=meta["scale"])
        return call

    capture = {key: val for key, val in meta.items() if key != "prompt_ids"}
    capture["prompt_tokens"] = len(meta.get("prompt_ids", []))
    row = {"gpu": gpu_name, "capture": capture, "page_size": p, "batch": batch,
           "copies": copies, "layer_kv_bytes": layer_bytes,
           "copy_bandwidth_Bps": bw,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": " ".join(sys.argv), "methods": {}}
    # Every captured layer once, outside the timing: outputs against SDPA
    # (dense) or dense (the others), the certificate's decisions and the
    # bytes each call read.
    for name, layer in methods.items():
        m = {"rel_diff_vs_dense": [], "fallback": [], "early": [],
             "bytes": 0.0, "dense_bytes": 0.0}
        for i in range(lc):
            c = cs[i]
            c["out"].fill_(float("nan"))
            ours(layer, c)()
            if gpu:
                torch.cuda.synchronize()
            out = c["out"].clone()
            if name == "dense":
                c["dense_out"] = out
                # The flash kernel takes bf16 queries; the CPU's math
                # backend float32 ones.
                qs, ks, vs = c["q4"], c["ks"], c["vs"]
                if not gpu:
                    qs = c["q"].view(batch, hq, 1, d)
                    ks, vs = ks.float(), vs.float()
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION if gpu else
                                 SDPBackend.MATH):
                    ref = F.scaled_dot_product_attention(
                        qs, ks, vs, enable_gqa=True,
                        scale=meta["scale"]).squeeze(2).float()
            else:
                ref = c["dense_out"]
            m["rel_diff_vs_dense"].append(
                float((out - ref).norm() / ref.norm()))
            st = c["stats"].cpu()
            m["fallback"].append(float((st[..., 3] != 0).float().mean()))
            m["early"].append(float((st[..., 3] == 2).float().mean()))
            got, dense = ctypes.c_double(), ctypes.c_double()
            lens = c["lens"].cpu()
            check(lib.condensate_bytes_read(
                text.encode(), layer, batch, lens.data_ptr(),
                st.data_ptr(), ctypes.byref(got), ctypes.byref(dense), err,
                4096), err)
            m["bytes"] += got.value
            m["dense_bytes"] += dense.value
        m["bytes_fraction"] = m["bytes"] / m["dense_bytes"]
        row["methods"][name] = m
    if not gpu:
        print("| method | bytes read | fallback | rel diff vs dense (max) |")
        print("|---|---|---|---|")
        for name, m in row["methods"].items():
            print(f"| {name} | {100 * m['bytes_fraction']:.1f}% | "
                  f"{100 * sum(m['fallback']) / lc:.0f}% | "
                  f"{max(m['rel_diff_vs_dense']):.2e} |")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(row, fh, indent=1)
        return
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        try:
            ms = graph_time([sdpa(backend, c) for c in cs], args.iters)
            row["methods"][name] = {"us": 1e3 * ms / copies}
        except Exception as e:  # a backend may refuse a shape
            row["methods"][name] = {"error": str(e).splitlines()[0][:200]}
    for name, layer in methods.items():
        ms = graph_time([ours(layer, c) for c in cs], args.iters)
        row["methods"][name]["us"] = 1e3 * ms / copies
    sd = [row["methods"][s]["us"] for s in ("sdpa_cudnn", "sdpa_flash")
          if "us" in row["methods"][s]]
    best = min(sd) if sd else None
    dense_us = row["methods"]["dense"]["us"]
    print(f"\ncold in L2, us a layer (mean over the {lc} captured layers, "
          f"{copies} copies); bytes read over dense's K+V (bf16)\n")
    print("| method | us | speedup over faster SDPA | bytes read | "
          "fallback | rel diff vs dense (max) | target |")
    print("|---|---|---|---|---|---|---|")
    for name in ("sdpa_cudnn", "sdpa_flash"):
        m = row["methods"][name]
        print(f"| {name} | {m.get('us', float('nan')):.1f} | | | | | |")
    for name in methods:
        m = row["methods"][name]
        m["speedup"] = best / m["us"] if best else None
        verdict = ""
        if name.startswith("certified"):
            fb = sum(m["fallback"]) / lc
            need = (m["dense_bytes"] / m["bytes"]) / 1.5
            if fb == 0.0:
                m["target"] = "met" if m["speedup"] >= need else "missed"
                verdict = (f"certifies everywhere: needs >= {need:.2f}x, "
                           f"{m['target']}")
            elif fb == 1.0:
                ratio = m["us"] / dense_us
                m["target"] = "met" if ratio <= 1.1 else "missed"
                verdict = (f"falls back everywhere: {ratio:.2f}x dense "
                           f"(<= 1.1x), {m['target']}")
            else:
                verdict = f"mixed ({100 * fb:.0f}% fallback)"
            m["verdict"] = verdict
        print(f"| {name} | {m['us']:.1f} | {m['speedup']:.2f}x | "
              f"{100 * m['bytes_fraction']:.1f}% | "
              f"{100 * sum(m['fallback']) / lc:.0f}% | "
              f"{max(m['rel_diff_vs_dense']):.2e} | {verdict} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(row, fh, indent=1)
    lib.condensate_gpu_free(prog)


if __name__ == "__main__":
    main()
