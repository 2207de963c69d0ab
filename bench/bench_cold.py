#!/usr/bin/env python3
"""Decode attention timed cold in L2, on the head shapes of real models.

The method of ../shared/DESIGN.md section 8 (BENCHMARKS.md, "Method"):
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
    formula, dialect/include/condensate/ABI/AttentionABI.h);
  - FlexAttention (torch.nn.attention.flex_attention, compiled once per
    process by torch.compile) with a block mask of the same budget at KV
    blocks of P = 64: per batch and kv head the anchor block, the blocks
    of the window and ceil(960 / 64) = 15 blocks whose key sum aligns best
    with the group's mean query (the needle pages come first), 17 blocks
    where n is a multiple of 64. The mask is built outside every timing:
    the peer is handed its blocks, whereas our condensate step computes its
    selection within its time. Its compile (first call) is not timed
    either; flex_compile_s records it. It runs at the --flex-cases only.
Correctness is checked on layer 0 of every case before timing (dense
against SDPA, the sparse outputs against dense, FlexAttention against
float32 attention over exactly its masked blocks).

Usage:
  bench_cold.py --lib build/runtime/libCondensateCompiler.so --json out.json
      [--shapes 32/8/128,28/4/128] [--batches 1,8] [--contexts 4096,131072]
      [--max-tokens N] [--iters N]
      [--flex-cases 1:131072,8:131072 | --flex-cases all | --no-flex]
  bench_cold.py --report out.json [--png speedup.png]   (table and plot)
  bench_cold.py --compare a.json b.json ... [--method dense]
      (one method's times in several runs side by side)
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
WINDOW = 64       # the policy's window, in tokens
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
           "sketch", "flex"]
# The (batch, context) cases FlexAttention runs at by default: the key rows,
# so that its compiles (one per case) keep the sweep's GPU time small.
FLEX_CASES = "1:131072,8:131072,32:32768,1:1048576"
# The Q block of the peer's BlockMask: FlexAttention's default, which its
# decode kernel accepts (its query tile, 16 rows for up to 16 query heads a
# kv head, must divide it).
FLEX_Q_BLOCK = 128
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


# torch.compile(flex_attention), made by compiled_flex on first use.
_flex_attention = None


def compiled_flex(torch):
    """FlexAttention compiled once per process. dynamic=False: the
    flex-decoding kernel is chosen only for a static batch and head count
    (its KV split count is fixed from them at compile time); a dynamic
    batch would fall back to the main kernel, which gives each query head
    a tile of many query rows. Each (shape, batch, context) therefore compiles once,
    on its first call, outside every timing; the recompile limit is raised
    so that a long sweep never falls back to the eager flex_attention (which
    materialises the scores), and hitting it fails rather than falls back
    where this torch has the switch."""
    global _flex_attention
    if _flex_attention is None:
        from torch.nn.attention.flex_attention import flex_attention
        config = torch._dynamo.config
        # recompile_limit is the newer name of cache_size_limit; each name
        # is set only where this torch has it.
        for name in ("recompile_limit", "cache_size_limit",
                     "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(config, name):
                setattr(config, name, max(getattr(config, name), 4096))
        if hasattr(config, "fail_on_recompile_limit_hit"):
            config.fail_on_recompile_limit_hit = True
        _flex_attention = torch.compile(flex_attention, dynamic=False)
    return _flex_attention


def add_flex_mask(torch, c):
    """The peer's inputs and block mask, stored in the layer's cache `c`.

    FlexAttention's decode kernel takes a block mask with grouped-query
    heads only when the mask has one head (every query head of a batch
    then shares its blocks). To give each (batch, kv head) its own blocks,
    as our selection does, the kv heads are folded into the batch: queries
    [B * Hkv, G, 1, D], keys and values [B * Hkv, 1, n, D] (views of q4,
    ks and vs, no copy), the mask [B * Hkv, 1, 1, ceil(n / P)]. Its blocks
    (KV blocks of P tokens): the anchor block, the blocks that hold the
    last WINDOW tokens, and ceil(TOPK / P) more whose key sum (summary row
    2) aligns best with the group's mean query, which puts make_cache's
    eight needle pages first. That is 17 blocks where n is a multiple of
    P, 18 where the window straddles two, at least the ~1K tokens of ours.
    They are all "partial" blocks (kv_num_blocks, the no-op mask_mod): the
    decode kernel sizes its KV splits by the number of partial blocks, but
    by the whole context for full blocks, which would leave one split to
    walk all 17. Built outside every timing: the peer is handed its blocks
    for free, whereas our condensate step computes its selection within
    its time."""
    from torch.nn.attention.flex_attention import BlockMask
    q, pt = c["q"], c["pt"].long()
    batch, hq, d = q.shape
    hkv = c["ks"].shape[1]
    n = c["ks"].shape[2]
    nb = pt.shape[1]                       # ceil(n / P) blocks
    g = hq // hkv
    qg = q.view(batch, hkv, g, d).mean(2)
    k_sum = c["summ"][:, :, 2][pt]         # [B, blocks, Hkv, D]
    score = torch.einsum("bphd,bhd->bhp", k_sum, qg).reshape(batch * hkv, nb)
    del k_sum
    w0 = max(0, n - WINDOW) // P           # the window's first block
    keep = torch.zeros(batch * hkv, nb, dtype=torch.bool, device=q.device)
    keep[:, 0] = True
    keep[:, w0:] = True
    fixed = nb - w0 + (1 if w0 > 0 else 0)
    top = min(math.ceil(TOPK / P), nb - fixed)
    if top > 0:
        best = score.masked_fill(keep, float("-inf")).topk(top, dim=1).indices
        keep.scatter_(1, best, True)
    # kv_indices in FlexAttention's convention: each row a permutation of
    # the blocks, the kept ones first (ascending), of which kv_num_blocks
    # are read.
    order = torch.argsort((~keep).to(torch.int32), dim=1, stable=True)
    count = fixed + top
    c["flex_blocks"] = order[:, :count]
    c["flex_mask"] = BlockMask.from_kv_blocks(
        torch.full((batch * hkv, 1, 1), count, dtype=torch.int32,
                   device=q.device),
        order.to(torch.int32).view(batch * hkv, 1, 1, nb).contiguous(),
        BLOCK_SIZE=(FLEX_Q_BLOCK, P), seq_lengths=(1, n))
    c["flex_q"] = c["q4"].reshape(batch * hkv, g, 1, d)
    c["flex_k"] = c["ks"].view(batch * hkv, 1, n, d)
    c["flex_v"] = c["vs"].view(batch * hkv, 1, n, d)
    return count


def flex_reference(torch, c):
    """float32 attention of c's queries (q4, as FlexAttention reads them)
    over exactly the blocks of c's mask, [B, Hq, D]: query head j of kv
    head h reads kv head h's blocks."""
    q4, ks, vs = c["q4"], c["ks"], c["vs"]
    batch, hq, _, d = q4.shape
    hkv, n = ks.shape[1], ks.shape[2]
    blocks = c["flex_blocks"]                        # [B * Hkv, count]
    tok = (blocks[:, :, None] * P
           + torch.arange(P, device=blocks.device)).flatten(1)
    valid = tok < n
    tok = tok.clamp(max=n - 1)
    rows = torch.arange(batch * hkv, device=blocks.device)[:, None]
    kk = ks.reshape(batch * hkv, n, d)[rows, tok].float()
    vv = vs.reshape(batch * hkv, n, d)[rows, tok].float()
    qq = q4.reshape(batch * hkv, hq // hkv, d).float()
    logits = torch.einsum("bgd,btd->bgt", qq, kk) / math.sqrt(d)
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    out = torch.einsum("bgt,btd->bgd", logits.softmax(-1), vv)
    return out.reshape(batch, hq, d)


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


def parse_flex_cases(args):
    """The (batch, context) pairs FlexAttention runs at: None for every
    case (--flex-cases all), an empty set for none (--no-flex)."""
    if args.no_flex:
        return set()
    if args.flex_cases == "all":
        return None
    cases = set()
    for item in args.flex_cases.split(","):
        try:
            batch, n = (int(x) for x in item.split(":"))
        except ValueError:
            sys.exit(f"bench_cold.py: --flex-cases: '{item}' is not "
                     "batch:context")
        cases.add((batch, n))
    return cases


def run_bench(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_attention import check, copy_bandwidth, load_lib
    from bench_model import MODEL_TEMPLATE

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
    flex_cases = parse_flex_cases(args)
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
                flex = flex_cases is None or (batch, n) in flex_cases
                try:
                    row = measure_case(torch, F, sdpa_kernel, lib, progs, err,
                                       backends, bw, (name, hq, hkv, d),
                                       batch, n, layers, layer_bytes, gen,
                                       args.iters, flex, args.once)
                except Exception as e:  # record it, go on with the sweep
                    row = {"shape": shape_key(hq, hkv, d), "model": name,
                           "batch": batch, "context": n, "layers": layers,
                           "layer_kv_bytes": layer_bytes,
                           "error": first_line(e, 300)}
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
                 batch, n, layers, layer_bytes, gen, iters, flex, once):
    from bench_attention import check, graph_time, make_cache
    from bench_model import LAYERS
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

    g = hq // hkv
    # The decode kernel packs a kv head's query heads into one tile and
    # needs their number to be a power of 2; for other groups (7 for the
    # Qwen2.5 shapes) FlexAttention's main kernel is asked for outright,
    # which is what torch picks there where it does not refuse.
    flex_decode = g & (g - 1) == 0
    flex_options = None if flex_decode else {"FORCE_USE_FLEX_ATTENTION": True}

    def flex_call(method, c):
        fa = compiled_flex(torch)

        def call():
            c["flex_out"] = fa(c["flex_q"], c["flex_k"], c["flex_v"],
                               block_mask=c["flex_mask"], enable_gqa=True,
                               kernel_options=flex_options)
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
    if flex:
        try:
            for c in ls:
                blocks = add_flex_mask(torch, c)
            row["flex_blocks"] = blocks
            row["flex_kernel"] = "decode" if flex_decode else "main"
            # The first call compiles (seconds, never timed); graph_time's
            # warm-up then calls every layer once before its capture, so
            # no compile happens while capturing.
            t = time.time()
            flex_call("flex", c0)()
            torch.cuda.synchronize()
            row["flex_compile_s"] = time.time() - t
            out = c0["flex_out"].reshape(batch, hq, d).float()
            fref = flex_reference(torch, c0)
            rel = float((out - fref).norm() / fref.norm())
            row["flex_vs_ref_rel_err"] = rel
            row["flex_vs_dense_rel_diff"] = float(
                (out - dense).norm() / dense.norm())
            if not rel <= 2e-2:
                row["flex_error"] = f"flex vs its reference: rel err {rel:.3g}"
            del out, fref
        except Exception as e:  # record it, time the others
            row["flex_error"] = first_line(e, 300)
            torch.cuda.synchronize()
    del ref, dense
    if once:
        # For Nsight Compute: every kernel has now run once on layer 0 but
        # cuDNN's; run it once too, and time nothing.
        sdpa("sdpa_cudnn", c0)()
        torch.cuda.synchronize()
        del ls
        return row
    for m in METHODS:
        if m == "flex" and (not flex or "flex_error" in row):
            continue
        make = (sdpa if m.startswith("sdpa") else
                flex_call if m == "flex" else ours)
        try:
            ms = graph_time([make(m, c) for c in ls],
                            iters)
            row[m + "_us"] = 1e3 * ms / layers
        except Exception as e:  # a backend may refuse a shape
            row[m + "_error"] = first_line(e, 200)
    sd = [row[k] for k in ("sdpa_cudnn_us", "sdpa_flash_us")
          if k in row]
    if sd:
        best = min(sd)
        row["faster_sdpa_us"] = best
        for m in ("dense", "condensate", "certified", "sketch", "flex"):
            if m + "_us" in row:
                row[m + "_speedup"] = best / row[m + "_us"]
    if "flex_us" in row and "condensate_us" in row:
        # Above 1: our condensate step is faster than the peer.
        row["condensate_vs_flex"] = row["flex_us"] / row["condensate_us"]
    del ls
    return row


def first_line(e, limit):
    """An exception's first line, cut to `limit` characters (its type where
    it has no message, as many of torch.compile's assertions do)."""
    lines = str(e).splitlines()
    return (lines[0] if lines and lines[0] else type(e).__name__)[:limit]


def fmt_us(v):
    return "–" if v is None else f"{v:.1f}"


def print_table(out):
    print(f"\n{out['gpu']}, torch {out['torch']}, copy "
          f"{out['copy_bandwidth_Bps'] / 1e9:.0f} GB/s, {out['date']}; "
          f"times in us per layer, cold in L2; flex: FlexAttention with a "
          f"block mask of the same budget, handed its blocks (\"err\": see "
          f"flex_error in the JSON); condensate / flex: flex time over "
          f"condensate time, above 1 ours faster\n")
    print("| shape | batch | context | layers | cuDNN | flash | ours dense | "
          "dense / faster SDPA | K+V at copy BW | condensate | speedup | "
          "certified | speedup | certified fallback | sketch | speedup | "
          "flex (same budget) | condensate / flex |")
    print("|" + "---|" * 18)
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
        flex = "err" if "flex_error" in r else fmt_us(r.get("flex_us"))
        vs_flex = r.get("condensate_vs_flex")
        vs_flex = "–" if vs_flex is None else f"{vs_flex:.2f}x"
        print(f"| {r['shape']} | {r['batch']} | {r['context']:,} | "
              f"{r['layers']} | {fmt_us(r.get('sdpa_cudnn_us'))} | "
              f"{fmt_us(r.get('sdpa_flash_us'))} | {fmt_us(r.get('dense_us'))}"
              f" | {ratio('dense')} | {fmt_us(roof)} | "
              f"{fmt_us(r.get('condensate_us'))} | {speed('condensate')} | "
              f"{fmt_us(r.get('certified_us'))} | {speed('certified')} | "
              f"{100 * r.get('certified_fallback_rate', float('nan')):.0f}% | "
              f"{fmt_us(r.get('sketch_us'))} | {speed('sketch')} | "
              f"{flex} | {vs_flex} |")


def report(args):
    with open(args.report) as fh:
        out = json.load(fh)
    print_table(out)
    if args.png:
        plot(out, args.png, args.batch)


def compare(paths, method="dense"):
    """One method's time in several results JSONs (each its own build and
    process, beside its own SDPA) side by side: per case, the time and its
    ratio to that run's faster SDPA; a dash where a run lacks the case."""
    runs = []
    for path in paths:
        with open(path) as fh:
            runs.append({(r["shape"], r["batch"], r["context"]): r
                         for r in json.load(fh)["rows"]})
    names = [os.path.basename(p).rsplit(".", 1)[0] for p in paths]
    print("| shape | batch | context | " + " | ".join(
        f"{n} {method} us (/ SDPA)" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    keys = sorted({k for run in runs for k in run},
                  key=lambda k: (k[0], k[1], k[2]))
    for key in keys:
        cells = []
        for run in runs:
            r = run.get(key)
            us = r.get(method + "_us") if r else None
            cells.append("-" if us is None else
                         f"{us:.1f} ({us / r['faster_sdpa_us']:.2f}x)")
        print(f"| {key[0]} | {key[1]} | {key[2] // 1024}K | "
              + " | ".join(cells) + " |")


def plot(out, png, batch):
    """The speedup plot of a results JSON: one panel a method, one line a
    shape, speedup over the faster SDPA against context at `batch`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    methods = [m for m in ("condensate", "sketch", "dense", "flex")
               if any(m + "_speedup" in r for r in out["rows"])]
    titles = {"condensate": "block_minmax (~1K budget) / faster SDPA",
              "sketch": "4-bit sketch top-k (~1K budget) / faster SDPA",
              "dense": "ours dense / faster SDPA",
              "flex": "FlexAttention, same block budget / faster SDPA"}
    fig, axes = plt.subplots(1, len(methods), figsize=(6.5 * len(methods), 5),
                             squeeze=False)
    for ax, method in zip(axes[0], methods):
        title = titles[method]
        for key in sorted({r["shape"] for r in out["rows"]}):
            pts = sorted((r["context"], r[method + "_speedup"])
                         for r in out["rows"]
                         if r["shape"] == key and r["batch"] == batch
                         and method + "_speedup" in r)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=key)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linestyle=":")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("speedup over the faster SDPA (cold L2)")
        ax.set_title(f"{title}, batch {batch}")
        ax.legend(fontsize=7, title="q/kv/d")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


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
    ap.add_argument("--flex-cases", default=FLEX_CASES,
                    help="batch:context pairs FlexAttention runs at, or "
                    f"'all' (default {FLEX_CASES})")
    ap.add_argument("--no-flex", action="store_true",
                    help="time no FlexAttention")
    ap.add_argument("--once", action="store_true",
                    help="run every method once on layer 0 after the "
                         "checks and time nothing (for Nsight Compute)")
    ap.add_argument("--report", help="print the table of a results JSON")
    ap.add_argument("--compare", nargs="+", metavar="JSON",
                    help="one method's times in several results JSONs side "
                         "by side (--method, default dense)")
    ap.add_argument("--method", default="dense",
                    help="with --compare: dense, condensate, certified or "
                         "sketch")
    ap.add_argument("--png", help="with --report: the speedup plot")
    ap.add_argument("--batch", type=int, default=1,
                    help="with --png: the batch plotted (default 1)")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.method)
    elif args.report:
        report(args)
    elif args.lib:
        run_bench(args)
    else:
        ap.error("--lib (run), --report or --compare (tables) is required")


if __name__ == "__main__":
    main()
