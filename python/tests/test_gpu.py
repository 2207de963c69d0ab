"""The condensate package on a GPU: the ops (decode and prefill attention,
append) against the CPU plan, torch SDPA and a float64 reference, inside a
CUDA graph, under torch.compile, an AOT library loaded with
the runtime alone, and the ops' overhead over the C API (printed; a
measurement, not a gate). Skipped, saying so, without a CUDA device."""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

import condensate
from condensate import ModelShape, _native

from test_ops import (SEED, assert_rows_close, prefill_reference,
                      prefill_window, rel_err, row_starts_of)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: the package's GPU tests skip")

GPU_POLICIES = {
    "dense": "#condensate.dense",
    "block_minmax": "#condensate.policy<anchor = 1, window = 32, topk = 64, "
                    "selector = block_minmax, page_size = 16>",
    "sketch_certified": "#condensate.policy<anchor = 1, window = 32, topk = 64, "
                        "selector = sketch, bits = 4, page_size = 16, tau = 0.01, "
                        "max_extra = 128>",
}
GPU_SHAPES = [(9, 3, 64, "f32"), (32, 8, 128, "f16"), (28, 4, 128, "bf16"), (14, 2, 64, "f16")]


class Pair:
    """The same cache on the CPU and on the GPU, filled by each plan's append."""

    def __init__(self, shape, policy, lens, gen):
        hq, hkv, d, kv = shape
        ms = ModelShape(1, hq, hkv, d, 16, kv)
        self.cpu = condensate.plan(ms, policy)
        self.gpu = condensate.plan(ms, policy, device="cuda")
        self.lens = lens
        # Room in every page table for 16 more tokens (the graph test appends).
        pages = [(n + 16 + 15) // 16 for n in lens]
        self.max_pages = max(pages)
        num = sum(pages) + 2
        order = list(range(num))
        random.Random(SEED).shuffle(order)
        it = iter(order)
        pt = torch.zeros(len(lens), self.max_pages, dtype=torch.int32)
        for b, n in enumerate(pages):
            for j in range(n):
                pt[b, j] = next(it)
        self.pt = pt
        self.c = self.cpu.empty_cache(num)
        self.g = self.gpu.empty_cache(num)
        for pos in range(max(lens)):
            live = [b for b in range(len(lens)) if pos < lens[b]]
            kn = torch.randn(len(live), hkv, d, generator=gen)
            vn = torch.randn(len(live), hkv, d, generator=gen)
            p = torch.full((len(live),), pos, dtype=torch.int32)
            rows = pt[live].contiguous()
            self.cpu.append(kn, vn, *self.c[:2], rows, p, self.c[2])
            self.gpu.append(kn.cuda(), vn.cuda(), *self.g[:2], rows.cuda(), p.cuda(),
                            self.g[2])
        self.lens_t = torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "q{}_kv{}_d{}_{}".format(*s))
@pytest.mark.parametrize("policy", list(GPU_POLICIES))
def test_gpu_matches_cpu_and_sdpa(shape, policy):
    gen = torch.Generator().manual_seed(SEED)
    lens = [random.Random(SEED + i).randint(1, 1500) for i in range(4)]
    pair = Pair(shape, GPU_POLICIES[policy], lens, gen)
    # The caches agree bit for bit (the same lowering on both targets);
    # compared as integers, since sketch words read as floats can be NaNs.
    ints = {4: torch.int32, 2: torch.int16}
    for name, a, b in zip(("k", "v", "summaries"), pair.c, pair.g):
        a = a.view(ints[a.element_size()])
        b = b.cpu().view(ints[a.element_size()])
        if not torch.equal(a, b):
            bad = (a != b) if name != "summaries" else (a != b).any(-1)
            where = bad.nonzero()[:8].tolist()
            rows = sorted(set(w[2] for w in where)) if name == "summaries" else []
            pytest.fail(f"{name} differ between CPU and GPU: {int(bad.sum())} of "
                        f"{bad.numel()} ({'rows ' + str(rows) + ', ' if rows else ''}"
                        f"first at {where})")
    hq, hkv, d, kv = shape
    q = torch.randn(len(lens), hq, d, generator=gen)
    oc, sc = pair.cpu.run(q, *pair.c[:2], pair.pt, pair.lens_t, pair.c[2])
    og, sg = pair.gpu.run(q.cuda(), *pair.g[:2], pair.pt.cuda(), pair.lens_t.cuda(),
                          pair.g[2])
    torch.cuda.synchronize()
    og, sg = og.cpu(), sg.cpu()
    same = (sc[..., 1:4] == sg[..., 1:4]).all(-1)  # attended, extra, fallback
    assert same.float().mean() >= 0.9, "CPU and GPU decisions differ on many heads"
    for b in range(len(lens)):
        for h in range(hq):
            if same[b, h]:
                assert rel_err(og[b, h], oc[b, h].double()) < 1e-5
    if policy == "dense":
        grp = hq // hkv
        kc, vc = pair.g[0], pair.g[1]
        for b, n in enumerate(lens):
            idx = pair.pt[b, :(n + 15) // 16].long().cuda()
            K = kc[idx].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n].float()
            V = vc[idx].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n].float()
            K, V = K.repeat_interleave(grp, 0), V.repeat_interleave(grp, 0)
            ref = F.scaled_dot_product_attention(q[b].cuda()[:, None], K, V,
                                                 scale=pair.gpu.scale)[:, 0]
            assert rel_err(og[b], ref.cpu().double()) < 1e-4


def test_cuda_graph_replays_append_and_attention():
    gen = torch.Generator().manual_seed(SEED)
    pair = Pair((32, 8, 128, "f16"), GPU_POLICIES["sketch_certified"], [700, 300], gen)
    plan = pair.gpu
    k, v, s = pair.g
    pt, B = pair.pt.cuda(), 2
    plan.reserve(B, pair.max_pages, k.shape[0])
    q = torch.zeros(B, 32, 128, device="cuda")
    kn = torch.zeros(B, 8, 128, device="cuda")
    vn = torch.zeros_like(kn)
    pos = torch.zeros(B, dtype=torch.int32, device="cuda")
    lens = torch.zeros_like(pos)
    out = torch.empty_like(q)
    stats = plan.empty_stats(B)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    # Capture on a side stream after a warm-up there, as torch asks.
    with torch.cuda.stream(stream):
        pos.copy_(pair.lens_t.cuda() - 1)
        lens.copy_(pair.lens_t.cuda())
        plan.run(q, k, v, pt, lens, s, out=out, stats=stats)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        plan.append(kn, vn, k, v, pt, pos, s)
        plan.run(q, k, v, pt, lens, s, out=out, stats=stats)
    eager = Pair((32, 8, 128, "f16"), GPU_POLICIES["sketch_certified"], [700, 300],
                 torch.Generator().manual_seed(SEED))
    ek, ev, es = eager.g
    for step in range(5):
        qs = torch.randn(B, 32, 128, generator=gen).cuda()
        kns = torch.randn(B, 8, 128, generator=gen).cuda()
        vns = torch.randn(B, 8, 128, generator=gen).cuda()
        n = pair.lens_t.cuda() + step
        q.copy_(qs)
        kn.copy_(kns)
        vn.copy_(vns)
        pos.copy_(n)
        lens.copy_(n + 1)
        graph.replay()
        eager.gpu.append(kns, vns, ek, ev, pt, n.clone(), es)
        want, wst = eager.gpu.run(qs, ek, ev, pt, n + 1, es)
        torch.cuda.synchronize()
        assert torch.equal(out, want), f"graph replay {step} differs from eager"
        assert torch.equal(stats[..., 1:4], wst[..., 1:4])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_on_gpu(backend):
    gen = torch.Generator().manual_seed(SEED)
    pair = Pair((16, 2, 128, "bf16"), GPU_POLICIES["block_minmax"], [900, 64], gen)
    plan = pair.gpu
    k, v, s = pair.g
    pt, lens = pair.pt.cuda(), pair.lens_t.cuda()

    def f(q):
        out, stats = plan.run(torch.nn.functional.normalize(q, dim=-1) * 8, k, v,
                              pt, lens, s)
        return out * 2, stats

    q = torch.randn(2, 16, 128, generator=gen).cuda()
    got, _ = torch.compile(f, fullgraph=True, backend=backend)(q)
    want, _ = f(q)
    # Inductor fuses normalize(q) * 8 and rounds it differently from eager
    # (an ulp of the query); the tensor-core attention carries the query as
    # a bf16 pair good to 2^-16 of it, so the outputs agree to the kernels'
    # stated accuracy (1e-4 against float64), not to f32 rounding.
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_aot_library_loads_without_the_compiler(tmp_path):
    prefix = os.environ.get("CONDENSATE_AOT_PREFIX")
    if not prefix or not os.path.isfile(prefix + ".json"):
        pytest.skip("CONDENSATE_AOT_PREFIX names no AOT library (the test suite "
                    "writes the fat library build/test/unit/aot/c-example.json)")
    lib = _native._find("libCondensateRuntime.so")
    only = tmp_path / "lib"
    only.mkdir()
    shutil.copy(lib, only)
    script = f"""
import torch, condensate
assert not condensate.have_compiler()
p = condensate.load({prefix!r})
assert p.source == "aot" and p.sketch_bits == 4, p
k, v, s = p.empty_cache(8)
pt = torch.arange(8, dtype=torch.int32, device="cuda").reshape(1, 8)
g = torch.Generator().manual_seed(1)
ks = torch.randn(100, p.kv_heads, p.head_dim, generator=g)
vs = torch.randn(100, p.kv_heads, p.head_dim, generator=g)
for t in range(100):
    p.append(ks[t:t+1].cuda(), vs[t:t+1].cuda(), k, v, pt,
             torch.tensor([t], dtype=torch.int32, device="cuda"), s)
q = torch.randn(1, p.q_heads, p.head_dim, generator=g).cuda()
out, st = p.run(q, k, v, pt, torch.tensor([100], dtype=torch.int32, device="cuda"), s, layer=0)
grp = p.q_heads // p.kv_heads
K = ks.cuda().permute(1, 0, 2).repeat_interleave(grp, 0)
V = vs.cuda().permute(1, 0, 2).repeat_interleave(grp, 0)
ref = torch.nn.functional.scaled_dot_product_attention(q[0][:, None], K, V, scale=p.scale)[:, 0]
err = ((out[0] - ref).norm() / ref.norm()).item()
assert err < 1e-4, err
print("aot ok", err)
"""
    env = dict(os.environ, CONDENSATE_LIBRARY_DIR=str(only))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "aot ok" in r.stdout


def _time(fn, reps):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e6


def test_overhead_over_the_c_api():
    """Per-call cost of the torch op against a direct C API call, eager and
    inside a CUDA graph (100 calls a graph). Printed and written to
    $CONDENSATE_BENCH_OUT/python_overhead.json; not a gate."""
    gen = torch.Generator().manual_seed(SEED)
    pair = Pair((32, 8, 128, "f16"), GPU_POLICIES["dense"], [4096], gen)
    plan = pair.gpu
    k, v, s = pair.g
    pt, lens = pair.pt.cuda(), pair.lens_t.cuda()
    q = torch.randn(1, 32, 128, device="cuda")
    out = torch.empty_like(q)
    stats = plan.empty_stats(1)
    lib = _native.runtime()
    err = ctypes.create_string_buffer(512)
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, pt, lens)] + [
        ctypes.c_void_p(0)] + [ctypes.c_void_p(t.data_ptr()) for t in (s, out, stats)]

    def c_call():
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = lib.condensate_gpu_attend(plan._handle, 0, 1, pair.max_pages, k.shape[0],
                                       *ptrs, stream, err, 512)
        assert rc == 0, err.value

    def op_call():
        torch.ops.condensate.decode_attention(plan.id, 0, q, k, v, pt, lens, s, None,
                                              out, stats)

    plan.reserve(1, pair.max_pages, k.shape[0])
    for f in (c_call, op_call):
        for _ in range(10):
            f()
    eager_c, eager_op = _time(c_call, 300), _time(op_call, 300)

    def graph_of(f):
        g = torch.cuda.CUDAGraph()
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            f()
        torch.cuda.current_stream().wait_stream(st)
        with torch.cuda.graph(g):
            for _ in range(100):
                f()
        return g

    gc, go = graph_of(c_call), graph_of(op_call)
    graph_c = _time(gc.replay, 20) / 100
    graph_op = _time(go.replay, 20) / 100
    result = {"shape": "32/8/128 f16, 4096 tokens, batch 1, dense",
              "eager_us": {"c_api": eager_c, "torch_op": eager_op},
              "graph_us_per_call": {"c_api": graph_c, "torch_op": graph_op},
              "overhead_us": {"eager": eager_op - eager_c, "graph": graph_op - graph_c}}
    print("[condensate overhead]", json.dumps(result))
    dest = os.environ.get("CONDENSATE_BENCH_OUT")
    if dest:
        pathlib.Path(dest).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(dest) / "python_overhead.json").write_text(json.dumps(result, indent=1))


def test_prebuilt_plan_needs_no_jit():
    libs = condensate.prebuilt_libraries()
    shape = ModelShape(32, 32, 8, 128, 16, "f16")
    if condensate.model_text(shape, "dense") not in libs:
        pytest.skip("the package carries no prebuilt Llama-3-8B dense library")
    pre = condensate.plan(shape, "dense", device="cuda")
    jit = condensate.plan(shape, "dense", device="cuda", use_prebuilt=False)
    assert pre.source == "prebuilt" and jit.source != "prebuilt"
    gen = torch.Generator().manual_seed(SEED)
    k, v, s = pre.empty_cache(40)
    pt = torch.arange(40, dtype=torch.int32, device="cuda").reshape(2, 20)
    for t in range(300):
        kn = torch.randn(2, 8, 128, generator=gen).cuda()
        vn = torch.randn(2, 8, 128, generator=gen).cuda()
        pre.append(kn, vn, k, v, pt, torch.full((2,), t, dtype=torch.int32,
                                                device="cuda"), s)
    q = torch.randn(2, 32, 128, generator=gen).cuda()
    lens = torch.full((2,), 300, dtype=torch.int32, device="cuda")
    a, _ = pre.run(q, k, v, pt, lens, s, layer=31)
    b, _ = jit.run(q, k, v, pt, lens, s, layer=31)
    assert torch.equal(a, b)


GPU_PREFILL_POLICIES = {
    "dense": "#condensate.dense",
    "window": "#condensate.policy<anchor = 4, window = 64, topk = 0, page_size = 16>",
    "block_minmax": GPU_POLICIES["block_minmax"],  # prefills densely
}


def cache_rows(pair, b):
    """Float64 keys and values [n, Hkv, D] of sequence b, read from the CPU
    plan's cache (the same bits as the GPU's)."""
    n = pair.lens[b]
    pages = pair.pt[b, :(n + 15) // 16].long()
    k, v = pair.c[0][pages], pair.c[1][pages]  # [pages, Hkv, 16, D]
    rows = lambda x: x.permute(0, 2, 1, 3).reshape(-1, x.shape[1], x.shape[3])[:n]
    return rows(k).double(), rows(v).double()


@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "q{}_kv{}_d{}_{}".format(*s))
@pytest.mark.parametrize("policy", list(GPU_PREFILL_POLICIES))
def test_gpu_prefill_matches_cpu_and_reference(shape, policy):
    """Whole prompts, later chunks and a sequence with no rows in one call,
    on the GPU against the CPU plan and a float64 reference."""
    gen = torch.Generator().manual_seed(SEED)
    rng = random.Random(SEED ^ 0x5EED)
    lens = [rng.randint(1, 1500) for _ in range(3)] + [rng.randint(200, 700)]
    pair = Pair(shape, GPU_PREFILL_POLICIES[policy], lens, gen)
    counts = [lens[0], rng.randint(1, min(lens[1], 300)), 0,
              rng.randint(1, 128)]
    hq, hkv, d, kv = shape
    q = torch.randn(sum(counts), hq, d, generator=gen)
    rs = row_starts_of(counts)
    oc = pair.cpu.prefill(q, *pair.c[:2], pair.pt, pair.lens_t, rs)
    og = torch.full((sum(counts), hq, d), float("nan"), device="cuda")
    pair.gpu.prefill(q.cuda(), *pair.g[:2], pair.pt.cuda(), pair.lens_t.cuda(),
                     rs.cuda(), out=og)
    torch.cuda.synchronize()
    og = og.cpu()
    what = f"{policy} {shape} lens {lens} rows {counts}"
    assert_rows_close(og, oc.double(), what + ": GPU vs CPU")
    keys, values = zip(*(cache_rows(pair, b) for b in range(len(lens))))
    ref = prefill_reference(pair.gpu, type("C", (), {"keys": keys, "values": values}),
                            q, lens, counts, *prefill_window(pair.gpu))
    assert_rows_close(og, ref, what + ": GPU vs float64")


def test_gpu_prefill_in_cuda_graph():
    """Prefill needs no workspace: it captures with no reserve, and a replay
    over new queries matches an eager call."""
    gen = torch.Generator().manual_seed(SEED)
    pair = Pair((32, 8, 128, "bf16"), GPU_PREFILL_POLICIES["window"], [300, 90], gen)
    plan = pair.gpu
    k, v, _ = pair.g
    pt, lens = pair.pt.cuda(), pair.lens_t.cuda()
    rs = row_starts_of([64, 90]).cuda()
    q = torch.zeros(154, 32, 128, device="cuda")
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        plan.prefill(q, k, v, pt, lens, rs, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        plan.prefill(q, k, v, pt, lens, rs, out=out)
    for _ in range(3):
        qs = torch.randn(154, 32, 128, generator=gen).cuda()
        q.copy_(qs)
        graph.replay()
        want = plan.prefill(qs, k, v, pt, lens, rs)
        torch.cuda.synchronize()
        assert torch.equal(out, want)
