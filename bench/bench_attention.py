#!/usr/bin/env python3
"""Decode-attention benchmark: condensate's generated kernels vs torch SDPA.

One process, one GPU, the same data: for each (batch, context) the keys and
values live in condensate's paged layout [pages, Hkv, P, D] and, for the
peer, in SDPA's [B, Hkv, n, D]; queries are shared. Timed:
  - torch SDPA, flash and cuDNN backends (GQA via enable_gqa), eager and
    replayed from a CUDA graph;
  - our dense decode (generated flash-decoding kernels + merge);
  - our condensate decode end to end (page scoring + top-k selection +
    sparse attention + merge), and its certified variant;
all as medians of CUDA-event timings over many replays of a CUDA graph
(eager ctypes launches are also reported, they include Python overhead).
Per-stage kernel times come from CUPTI (torch.profiler: device time of each
kernel, no launch overhead); event-bracketed launches are kept for
comparison. Bytes per stage are counted analytically and set against the
measured copy bandwidth.
Correctness is checked in the same run: our dense output against SDPA's,
and the condensate output against the dense one.

Usage: bench_attention.py --lib build/runtime/libCondensateCompiler.so
                          [--quick] [--json out.json]
"""
import argparse
import ctypes
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

from bench_model import LAYERS, MODEL_TEMPLATE

HQ, HKV, D, P = 32, 8, 128, 64
BUDGET_TOPK = 960  # + anchor 1 + window 64 = 1025 tokens, about 1K


def load_lib(path):
    # The compiler library (condensate_gpu_compile); the runtime's C API it
    # depends on (reserve, attend, ...) is found through it.
    lib = ctypes.CDLL(path)
    c = ctypes
    lib.condensate_gpu_compile.argtypes = [
        c.c_char_p, c.c_char_p, c.c_char_p, c.POINTER(c.c_void_p),
        c.POINTER(c.c_double), c.POINTER(c.c_int), c.c_char_p, c.c_size_t]
    lib.condensate_gpu_reserve.argtypes = [
        c.c_void_p, c.c_int64, c.c_int64, c.c_int64, c.c_char_p, c.c_size_t]
    ptrs = [c.c_void_p] * 9
    lib.condensate_gpu_attend.argtypes = (
        [c.c_void_p, c.c_int64, c.c_int64, c.c_int64, c.c_int64] + ptrs +
        [c.c_void_p, c.c_char_p, c.c_size_t])
    lib.condensate_gpu_attend_profiled.argtypes = (
        [c.c_void_p, c.c_int64, c.c_int64, c.c_int64, c.c_int64] + ptrs +
        [c.c_void_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_float), c.c_int,
         c.POINTER(c.c_int), c.c_char_p, c.c_size_t])
    lib.condensate_gpu_launch_count.argtypes = [c.c_void_p, c.c_int64]
    return lib


def check(rc, err):
    if rc != 0:
        raise RuntimeError(err.value.decode())


MODEL = MODEL_TEMPLATE.format(hq=HQ, hkv=HKV, d=D, p=P, topk=BUDGET_TOPK)


def events_median(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def graph_time(calls, iters):
    """Median time of one replay of a graph that makes every call in
    `calls` once, in order."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls:  # warm-up: lazy init, workspace allocation
            c()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    del g
    return statistics.median(times)


def graph_median(fn, iters, replays_per_timing=20):
    """Median per-call time of `fn` replayed from a CUDA graph."""
    return graph_time([fn] * replays_per_timing, iters) / replays_per_timing


def stage_name(kernel):
    """`<function>_<n>_<stage>` -> `<stage>` (the runtime's kernel names)."""
    return kernel.split("_", 2)[-1]


def kernel_times(fn, iters):
    """Median device time (ms) per launch of each kernel `fn` launches, as
    CUPTI records it through torch.profiler: the kernels' own time, without
    the launch and event overhead that bracketing each launch adds."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    times = {}
    for ev in prof.events():
        if not str(ev.device_type).endswith("CUDA"):
            continue
        times.setdefault(stage_name(ev.name), []).append(
            ev.time_range.elapsed_us() / 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def copy_bandwidth():
    x = torch.empty(2 * 1024**3 // 2, dtype=torch.bfloat16, device="cuda")
    x.uniform_()
    y = torch.empty_like(x)
    ms = events_median(lambda: y.copy_(x), 20)
    return 2 * x.numel() * 2 / (ms * 1e-3)  # read + write


def page_summaries(k, v, valid=None):
    """The page summaries [pages, Hkv, 5, D] f32 of a paged cache k, v
    [pages, Hkv, P, D] (AttentionABI.h's box rows): min, max and sum of K,
    min and max of V over each page's positions, those `valid` [pages, P]
    marks where it is given (a sequence's last page may be partial)."""
    pages, hkv, p, d = k.shape
    summ = torch.empty(pages, hkv, 5, d, device=k.device, dtype=torch.float32)
    inf = float("inf")
    step = max(1, (1 << 28) // (hkv * p * d * 4))
    for s in range(0, pages, step):
        kk = k[s:s + step].float()
        vv = v[s:s + step].float()
        if valid is None:
            rows = (kk.amin(dim=2), kk.amax(dim=2), kk.sum(dim=2),
                    vv.amin(dim=2), vv.amax(dim=2))
        else:
            out = ~valid[s:s + step, None, :, None]
            rows = (kk.masked_fill(out, inf).amin(dim=2),
                    kk.masked_fill(out, -inf).amax(dim=2),
                    kk.masked_fill(out, 0.0).sum(dim=2),
                    vv.masked_fill(out, inf).amin(dim=2),
                    vv.masked_fill(out, -inf).amax(dim=2))
        for i, r in enumerate(rows):
            summ[s:s + step, :, i] = r
        del kk, vv, rows
    return summ


def make_cache(hq, hkv, d, batch, n, gen):
    """One layer's cache in condensate's paged layout [pages, Hkv, P, D]:
    random bf16 keys and values, and structure real caches have and random
    ones lack (8 "needle" pages per sequence whose keys align with the
    group's mean query, logit ~ +16, so attention concentrates and
    selection has something to find); page summaries [pages, Hkv, 5, D]
    (min, max, sum of K; min, max of V); the same values in SDPA's
    [B, Hkv, n, D] (ks, vs); queries (q, and q4 for SDPA) and poisoned
    out / stats buffers."""
    pages_per_seq = math.ceil(n / P)
    num_pages = batch * pages_per_seq
    dev = "cuda"
    k = torch.randn(num_pages, hkv, P, d, device=dev, dtype=torch.bfloat16,
                    generator=gen)
    v = torch.randn(num_pages, hkv, P, d, device=dev, dtype=torch.bfloat16,
                    generator=gen)
    q = torch.randn(batch, hq, d, device=dev, dtype=torch.float32,
                    generator=gen)
    perm = torch.randperm(num_pages, device=dev, generator=gen)
    pt = perm.view(batch, pages_per_seq).to(torch.int32).contiguous()
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    qg = q.view(batch, hkv, g, d).mean(2)
    qdir = qg / qg.norm(dim=-1, keepdim=True)
    amp = 16.0 / (scale * (q.view(batch, hkv, g, d) * qdir[:, :, None])
                  .sum(-1).mean(-1).clamp(min=1.0))
    for b in range(batch):
        chosen = torch.randperm(pages_per_seq, device=dev, generator=gen)[:8]
        pages = pt[b, chosen].long()
        boost = amp[b][:, None] * qdir[b]
        k[pages] = (k[pages].float() + boost[None, :, None, :]).to(k.dtype)
    summ = page_summaries(k, v)
    ks = k[pt.long()].permute(0, 2, 1, 3, 4).reshape(batch, hkv, -1, d)
    vs = v[pt.long()].permute(0, 2, 1, 3, 4).reshape(batch, hkv, -1, d)
    return dict(k=k, v=v, q=q, q4=q.to(torch.bfloat16).unsqueeze(2), pt=pt,
                lens=torch.full((batch,), n, device=dev, dtype=torch.int32),
                windows=torch.zeros(batch, device=dev, dtype=torch.int32),
                summ=summ, ks=ks[:, :, :n].contiguous(),
                vs=vs[:, :, :n].contiguous(),
                out=torch.full((batch, hq, d), float("nan"), device=dev),
                stats=torch.full((batch, hq, 5), float("nan"), device=dev),
                num_pages=num_pages, max_pages=pages_per_seq)


def make_case(batch, n, gen):
    return make_cache(HQ, HKV, D, batch, n, gen)


def sdpa_fn(case, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q4 = case["q4"]  # [B, HQ, 1, D]
    kb = {"flash": SDPBackend.FLASH_ATTENTION,
          "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def run():
        with sdpa_kernel(kb):
            return F.scaled_dot_product_attention(
                q4, case["ks"], case["vs"], enable_gqa=True)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True,
                    help="path of libCondensateCompiler.so")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--configs",
                    help="comma-separated BATCHxCONTEXT list, e.g. 32x32768")
    args = ap.parse_args()

    lib = load_lib(args.lib)
    err = ctypes.create_string_buffer(4096)
    prog = ctypes.c_void_p()
    secs = ctypes.c_double()
    src = ctypes.c_int()
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # create the primary context first
    check(lib.condensate_gpu_compile(MODEL.encode(), b"sm_90", b"",
                                     ctypes.byref(prog), ctypes.byref(secs),
                                     ctypes.byref(src), err, 4096), err)
    print(f"compiled the benchmark model (3 layer functions) in "
          f"{secs.value:.3f} s", flush=True)
    bw = copy_bandwidth()
    print(f"device copy bandwidth: {bw / 1e9:.0f} GB/s (read + write)",
          flush=True)
    props = torch.cuda.get_device_properties(0)

    configs = [(1, 4096), (1, 16384), (1, 65536), (1, 131072), (1, 524288),
               (1, 1048576), (8, 131072), (32, 32768), (8, 4096),
               (32, 4096), (8, 16384)]
    if args.quick:
        configs = [(1, 131072), (32, 32768)]
    if args.configs:
        configs = [tuple(int(x) for x in c.split("x"))
                   for c in args.configs.split(",")]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    results = []
    for batch, n in configs:
        torch.cuda.empty_cache()
        case = make_case(batch, n, gen)
        # Poisoned by make_cache. Stats per query head: eps_hat, positions
        # attended, extra units, dense fallback, output-error bound
        # (AttentionABI.h, StatsEntry).
        out, stats = case["out"], case["stats"]
        check(lib.condensate_gpu_reserve(prog, batch, case["max_pages"],
                                         case["num_pages"], err, 4096), err)

        def ours(layer):
            def run():
                check(lib.condensate_gpu_attend(
                    prog, layer, batch, case["max_pages"], case["num_pages"],
                    case["q"].data_ptr(), case["k"].data_ptr(),
                    case["v"].data_ptr(), case["pt"].data_ptr(),
                    case["lens"].data_ptr(), case["windows"].data_ptr(),
                    case["summ"].data_ptr(), out.data_ptr(), stats.data_ptr(),
                    torch.cuda.current_stream().cuda_stream, err, 4096), err)
            return run

        row = {"batch": batch, "context": n}
        # Correctness first (outputs poisoned above).
        ref = sdpa_fn(case, "flash")().squeeze(2).float()
        ours(LAYERS["dense"])()
        torch.cuda.synchronize()
        dense_out = out.clone()
        row["dense_vs_sdpa_rel_err"] = float(
            (dense_out - ref).norm() / ref.norm())
        row["dense_nan"] = bool(torch.isnan(dense_out).any())
        for name in ("condensate", "certified"):
            out.fill_(float("nan"))
            stats.fill_(float("nan"))
            ours(LAYERS[name])()
            torch.cuda.synchronize()
            row[name + "_vs_dense_rel_diff"] = float(
                (out - dense_out).norm() / dense_out.norm())
            row[name + "_nan"] = bool(torch.isnan(out).any())
            row[name + "_keys_attended_mean"] = float(stats[:, :, 1].mean())
            if name == "certified":
                row["certified_eps_hat_max"] = float(stats[:, :, 0].max())
                flag = stats[:, :, 3]  # 1 after the sparse pass, 2 early
                row["certified_fallback_rate"] = float(
                    (flag != 0).float().mean())
                row["certified_early_rate"] = float((flag == 2).float().mean())
                row["certified_extra_mean"] = float(stats[:, :, 2].mean())
                # The certified bound on ||o_dense - o|| against the
                # measured error, per query head, with 1e-5 relative slack
                # for the float32 rounding of both outputs (fallback heads
                # report 0); <= 1 when it holds.
                out_err = (out - dense_out).norm(dim=-1)
                bound = stats[:, :, 4]
                slack = 1e-5 * dense_out.norm(dim=-1)
                row["certified_output_bound_max"] = float(bound.max())
                row["certified_output_err_over_bound_max"] = float(
                    (out_err / (bound + slack).clamp_min(1e-30)).max())
        # Timings.
        for backend in ("flash", "cudnn"):
            fn = sdpa_fn(case, backend)
            try:
                row[f"sdpa_{backend}_ms"] = events_median(fn, args.iters)
                row[f"sdpa_{backend}_graph_ms"] = graph_median(fn, args.iters)
            except Exception as e:  # a backend may refuse a shape
                row[f"sdpa_{backend}_error"] = str(e).splitlines()[0][:200]
        for name, layer in LAYERS.items():
            fn = ours(layer)
            row[f"{name}_eager_ms"] = events_median(fn, args.iters)
            row[f"{name}_graph_ms"] = graph_median(fn, args.iters)
            row[f"{name}_launches"] = lib.condensate_gpu_launch_count(prog, layer)
        # Per-stage profile of the condensate layer and dense layer.
        for name in ("condensate", "dense"):
            names = ctypes.create_string_buffer(8192)
            ms = (ctypes.c_float * 32)()
            count = ctypes.c_int()
            check(lib.condensate_gpu_attend_profiled(
                prog, LAYERS[name], batch, case["max_pages"], case["num_pages"],
                case["q"].data_ptr(), case["k"].data_ptr(), case["v"].data_ptr(),
                case["pt"].data_ptr(), case["lens"].data_ptr(),
                case["windows"].data_ptr(), case["summ"].data_ptr(),
                out.data_ptr(), stats.data_ptr(),
                torch.cuda.current_stream().cuda_stream, names, 8192, ms, 32,
                ctypes.byref(count), err, 4096), err)
            kernel_names = names.raw.split(b"\0")[:count.value]
            row[name + "_stages"] = {
                stage_name(k.decode()): ms[i]
                for i, k in enumerate(kernel_names)}
        # Kernel device times (CUPTI) of all three paths.
        for name in LAYERS:
            try:
                kt = kernel_times(ours(LAYERS[name]), args.iters)
                row[name + "_kernels"] = kt
                row[name + "_kernel_sum_ms"] = sum(kt.values())
            except Exception as e:  # no CUPTI: event timings only
                row[name + "_kernels_error"] = str(e).splitlines()[0][:200]
        # Bytes per stage (analytic) against the copy bandwidth.
        pages = batch * case["max_pages"]
        budget = 1 + 64 + BUDGET_TOPK
        bytes_score = pages * HKV * 2 * D * 4 + batch * HQ * case["max_pages"] * 4
        bytes_attend = batch * HKV * budget * D * 2 * 2
        bytes_dense = batch * HKV * n * D * 2 * 2
        # Kernel times from CUPTI where present, else the event-bracketed
        # ones (which carry launch overhead).
        def stage_ms(layer, stage):
            for key in (layer + "_kernels", layer + "_stages"):
                v = next((t for k, t in row.get(key, {}).items()
                          if stage in k), None)
                if v:
                    return v
            return None
        score_ms = stage_ms("condensate", "score")
        if score_ms:
            row["score_pages_bytes"] = bytes_score
            row["score_pages_bw_fraction"] = bytes_score / (score_ms * 1e-3) / bw
        row["attend_bytes"] = bytes_attend
        attend_ms = stage_ms("condensate", "sparse_attend")
        if attend_ms:
            row["sparse_attend_bw_fraction"] = bytes_attend / (
                attend_ms * 1e-3) / bw
        dense_attend_ms = stage_ms("dense", "dense_attend")
        if dense_attend_ms:
            row["dense_attend_bw_fraction"] = bytes_dense / (
                dense_attend_ms * 1e-3) / bw
        faster = min(v for k, v in row.items()
                     if k.startswith("sdpa_") and k.endswith("_ms")
                     and "graph" not in k)
        row["faster_sdpa_ms"] = faster
        row["speedup_condensate_graph"] = faster / row["condensate_graph_ms"]
        row["speedup_certified_graph"] = faster / row["certified_graph_ms"]
        cudnn = row.get("sdpa_cudnn_ms")
        if cudnn:
            row["dense_graph_vs_cudnn"] = row["dense_graph_ms"] / cudnn
        results.append(row)
        print(json.dumps(row), flush=True)
        del case
    # Summary table.
    print()
    print(f"GPU: {props.name}, {props.multi_processor_count} SMs; torch "
          f"{torch.__version__}; copy {bw / 1e9:.0f} GB/s; compile "
          f"{secs.value:.3f} s")
    hdr = ("| batch | context | SDPA flash | SDPA cuDNN | ours dense (graph) | "
           "condensate (graph) | certified (graph) | speedup vs faster SDPA | "
           "dense/cuDNN | score BW | dense err |")
    print(hdr)
    print("|" + "---|" * 11)
    for r in results:
        def f(key):
            v = r.get(key)
            return f"{v:.4f} ms" if isinstance(v, float) else "n/a"
        print(f"| {r['batch']} | {r['context']:,} | {f('sdpa_flash_ms')} | "
              f"{f('sdpa_cudnn_ms')} | {f('dense_graph_ms')} | "
              f"{f('condensate_graph_ms')} | {f('certified_graph_ms')} | "
              f"{r['speedup_condensate_graph']:.1f}x | "
              f"{r.get('dense_graph_vs_cudnn', float('nan')):.2f} | "
              f"{100 * r.get('score_pages_bw_fraction', float('nan')):.0f}% | "
              f"{r['dense_vs_sdpa_rel_err']:.1e} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": props.name, "torch": torch.__version__,
                       "copy_bandwidth_Bps": bw, "compile_seconds": secs.value,
                       "date": time.strftime("%Y-%m-%d"), "rows": results},
                      fh, indent=1)


if __name__ == "__main__":
    main()
