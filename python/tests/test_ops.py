"""The condensate package on the CPU: the ops against a float64 reference
and torch SDPA on fresh random caches, several shapes and policies, the
certificate's bounds, prefill attention (whole prompts, later chunks, window
layers) against a float64 causal reference, torch.compile tracing, opcheck,
and bad arguments.
GPU checks are in test_gpu.py (skipped without a GPU)."""

from __future__ import annotations

import json
import math
import os
import random

import pytest
import torch
import torch.nn.functional as F

import condensate
from condensate import CondensateError, ModelShape

SEED = int(os.environ.get("CONDENSATE_TEST_SEED", random.SystemRandom().randrange(1 << 31)))
print(f"[condensate python tests] seed {SEED} (replay: CONDENSATE_TEST_SEED={SEED})")

KV_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# (q heads, kv heads, head dim, page size, kv type)
SHAPES = [
    (9, 3, 64, 16, "f32"),    # SmolLM2-135M
    (8, 2, 128, 16, "f16"),   # Llama-style GQA 4
    (14, 2, 64, 32, "bf16"),  # Qwen2.5-0.5B heads, pages of 32
    (4, 4, 32, 8, "f32"),     # MHA
    (8, 1, 256, 16, "f16"),   # MQA, Gemma-style head dim
]

# Policies name the cache's page size ({P}).
POLICIES = {
    "dense": "#condensate.dense",
    "streaming": "#condensate.policy<anchor = 4, window = 32, topk = 0, page_size = {P}>",
    "block_minmax": "#condensate.policy<anchor = 1, window = 16, topk = 64, "
                    "selector = block_minmax, page_size = {P}>",
    "exact": {"anchor": 1, "window": 16, "topk": 48, "selector": "exact",
              "page_size": "{P}"},
}


def shape_id(s):
    return "q{}_kv{}_d{}_p{}_{}".format(*s)


def with_page_size(schedule, p):
    if isinstance(schedule, dict):
        return {k: (p if v == "{P}" else v) for k, v in schedule.items()}
    return schedule.replace("{P}", str(p))


def make_plan(shape, schedule, layers=1):
    hq, hkv, d, p, kv = shape
    schedule = with_page_size(schedule, p)
    return condensate.plan(ModelShape(layers=layers, q_heads=hq, kv_heads=hkv,
                                      head_dim=d, page_size=p, kv_type=kv),
                           schedule)


class Cache:
    """A paged cache filled through the append op, with the float keys and
    values that were appended (as the cache stores them)."""

    def __init__(self, plan, lens, gen, *, spare_pages=3):
        self.plan = plan
        P = plan.page_size
        self.lens = lens
        B = len(lens)
        pages = [math.ceil(n / P) for n in lens]
        self.max_pages = max(pages) + 1
        num = sum(pages) + spare_pages
        # Pages of all sequences interleaved in a shuffled pool.
        order = list(range(num))
        random.Random(gen.initial_seed()).shuffle(order)
        self.page_table = torch.full((B, self.max_pages), 0, dtype=torch.int32)
        it = iter(order)
        for b in range(B):
            for j in range(pages[b]):
                self.page_table[b, j] = next(it)
        self.k, self.v, self.summaries = plan.empty_cache(num)
        G, D = plan.kv_heads, plan.head_dim
        self.keys = [torch.empty(n, G, D, dtype=torch.float64) for n in lens]
        self.values = [torch.empty(n, G, D, dtype=torch.float64) for n in lens]
        for pos in range(max(lens)):
            live = [b for b in range(B) if pos < lens[b]]
            kn = torch.randn(len(live), G, D, generator=gen) * 0.8
            vn = torch.randn(len(live), G, D, generator=gen)
            plan.append(kn, vn, self.k, self.v,
                        self.page_table[live].contiguous(),
                        torch.full((len(live),), pos, dtype=torch.int32),
                        self.summaries)
            for i, b in enumerate(live):
                self.keys[b][pos] = kn[i].to(plan.kv_dtype).double()
                self.values[b][pos] = vn[i].to(plan.kv_dtype).double()
        self.lens_t = torch.tensor(lens, dtype=torch.int32)


def policy_of(plan):
    return plan.description["schedule"]["default"]


def reference(plan, cache, q):
    """Float64 attention of every head over the set the policy selects
    (anchor, window, top-k pages by min/max bound or tokens by exact logit,
    ranked by the group's best score, ties by unit order). Returns (out,
    selection margin per (b, kv head): near-ties may legally differ)."""
    pol = policy_of(plan)
    B, H, D = q.shape
    G = plan.kv_heads
    grp = H // G
    out = torch.zeros(B, H, D, dtype=torch.float64)
    margins = torch.full((B, G), math.inf, dtype=torch.float64)
    for b, n in enumerate(cache.lens):
        K, V = cache.keys[b], cache.values[b]
        for g in range(G):
            qs = q[b, g * grp:(g + 1) * grp].double()            # [grp, D]
            logits = plan.scale * qs @ K[:, g].T                 # [grp, n]
            mask = torch.ones(n, dtype=torch.bool)
            if pol != "dense":
                A, W, topk = pol["anchor"], pol["window"], pol["topk"]
                mask[:] = False
                mask[:min(A, n)] = True
                mask[max(0, n - W):] = True
                sel = pol["selector"]
                unit = 1 if sel == "exact" else plan.page_size
                if topk > 0:
                    k_units = math.ceil(topk / unit)
                    nu = math.ceil(n / unit)
                    keys, size, cands = [], [], []
                    for u in range(nu):
                        lo, hi = u * unit, min(n, (u + 1) * unit)
                        cnt = max(0, min(hi, n - W) - max(lo, A))
                        if cnt == 0:
                            continue
                        if sel == "exact":
                            score = logits[:, u]
                            mag = (plan.scale * (qs * K[u, g]).abs().sum(1)).max()
                        else:
                            mn = K[lo:hi, g].min(0).values
                            mx = K[lo:hi, g].max(0).values
                            score = plan.scale * torch.maximum(qs * mn, qs * mx).sum(1)
                            mag = (plan.scale * torch.maximum((qs * mn).abs(),
                                                              (qs * mx).abs()).sum(1)).max()
                        cands.append(u)
                        keys.append(score.max().item())
                        size.append(mag.item())
                    order = sorted(range(len(cands)), key=lambda i: (-keys[i], cands[i]))
                    for i in order[:k_units]:
                        u = cands[i]
                        for t in range(u * unit, min(n, (u + 1) * unit)):
                            if A <= t < n - W:
                                mask[t] = True
                    if len(order) > k_units:
                        a, c = order[k_units - 1], order[k_units]
                        mag = max(abs(keys[a]), abs(keys[c]), size[a], size[c], 1e-30)
                        margins[b, g] = (keys[a] - keys[c]) / mag
            lg = logits[:, mask]
            w = torch.softmax(lg, dim=1)
            out[b, g * grp:(g + 1) * grp] = w @ V[mask, g]
    return out, margins


def dense_reference(plan, cache, q):
    B, H, D = q.shape
    grp = H // plan.kv_heads
    out = torch.zeros(B, H, D, dtype=torch.float64)
    for b in range(len(cache.lens)):
        for h in range(H):
            g = h // grp
            lg = plan.scale * cache.keys[b][:, g] @ q[b, h].double()
            out[b, h] = torch.softmax(lg, 0) @ cache.values[b][:, g]
    return out


def rel_err(a, b):
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-300)).item()


def random_lens(rng, batch, lo=1, hi=300):
    return [rng.randint(lo, hi) for _ in range(batch)]


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("policy", list(POLICIES))
def test_matches_float64_reference(shape, policy):
    rng = random.Random(SEED ^ hash((shape, policy)) & 0xFFFFFFFF)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    plan = make_plan(shape, POLICIES[policy])
    lens = random_lens(rng, 4) + [1, 17]
    cache = Cache(plan, lens, gen)
    B = len(lens)
    q = torch.randn(B, plan.q_heads, plan.head_dim, generator=gen)
    out = torch.full_like(q, float("nan"))
    stats = torch.full((B, plan.q_heads, len(plan.stats_fields)), -7.0)
    plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t,
             cache.summaries, out=out, stats=stats)
    assert not torch.isnan(out).any(), "output left unwritten"
    assert not (stats == -7.0).any(), "stats left unwritten"
    # Bounds: 0 for dense, NaN where no certificate ran (AttentionABI.h).
    bounds = stats[..., [0, 4]]
    if policy == "dense":
        assert (bounds == 0).all()
    else:
        assert torch.isnan(bounds).all()
    assert (stats[..., 2:4] == 0).all()  # no extras, no fallback
    ref, margins = reference(plan, cache, q)
    grp = plan.q_heads // plan.kv_heads
    checked = 0
    for b in range(B):
        for h in range(plan.q_heads):
            if margins[b, h // grp] < 1e-5:
                continue  # a near-tie at the selection boundary
            checked += 1
            err = rel_err(out[b, h], ref[b, h])
            assert err < 2e-5, (
                f"{policy} {shape_id(shape)} b={b} h={h} n={lens[b]}: relative "
                f"error {err:.3g} (seed {SEED})")
    assert checked >= B * plan.q_heads // 2
    if policy == "dense":
        assert (stats[..., 1] == cache.lens_t[:, None].float()).all()


@pytest.mark.parametrize("shape", SHAPES[:3], ids=shape_id)
def test_dense_matches_sdpa(shape):
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan(shape, "dense")
    n = 200
    cache = Cache(plan, [n, n], gen)
    q = torch.randn(2, plan.q_heads, plan.head_dim, generator=gen)
    out, _ = plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                      cache.summaries)
    grp = plan.q_heads // plan.kv_heads
    for b in range(2):
        K = cache.keys[b].float().permute(1, 0, 2).repeat_interleave(grp, 0)
        V = cache.values[b].float().permute(1, 0, 2).repeat_interleave(grp, 0)
        sdpa = F.scaled_dot_product_attention(q[b][:, None], K, V,
                                              scale=plan.scale)[:, 0]
        assert rel_err(out[b], sdpa.double()) < 1e-5


CERTIFIED = [
    "#condensate.policy<anchor = 1, window = 16, topk = 32, selector = sketch, "
    "bits = 4, page_size = 16, tau = 0.01, max_extra = 64>",
    "#condensate.policy<anchor = 1, window = 16, topk = 32, selector = "
    "block_minmax, page_size = 16, tau = 0.01, max_extra = 4>",
    {"anchor": 1, "window": 8, "topk": 16, "selector": "exact", "tau": 1e-3,
     "max_extra": 32},
]


@pytest.mark.parametrize("shape", SHAPES[:3], ids=shape_id)
@pytest.mark.parametrize("which", range(len(CERTIFIED)))
def test_certificate_bounds_hold(shape, which):
    """Every certified head: ||o - o_dense|| <= the reported output bound,
    eps_hat <= tau; every fallback: dense attention, eps_hat 0."""
    rng = random.Random(SEED + which)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    hq, hkv, d, p, kv = shape
    plan = condensate.plan(ModelShape(1, hq, hkv, d, 16, kv), CERTIFIED[which])
    lens = random_lens(rng, 5, 20, 400)
    cache = Cache(plan, lens, gen)
    # Queries along one direction: peaked attention that certifies.
    direction = torch.randn(d, generator=gen)
    sharp = torch.rand(len(lens), hq, 1, generator=gen) * 3
    q = sharp * direction + 0.5 * torch.randn(len(lens), hq, d, generator=gen)
    out, stats = plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                          cache.summaries)
    dense = dense_reference(plan, cache, q)
    tau = policy_of(plan)["tau"]
    for b in range(len(lens)):
        for h in range(hq):
            eps, attended, extra, fallback, bound = stats[b, h].tolist()
            err = (out[b, h].double() - dense[b, h]).norm().item()
            scale = dense[b, h].norm().item()
            if fallback:
                assert eps == 0 and attended == lens[b]
                assert err <= 1e-5 * max(scale, 1)
            else:
                assert eps <= tau
                # float32 rounding of the sparse output on top of the bound
                assert err <= bound * (1 + 1e-3) + 2e-6 * max(scale, 1), (
                    f"b={b} h={h}: ||o - dense|| {err:.3g} > bound {bound:.3g}")


def test_policies_as_mlir_json_and_dict_agree():
    shape = ModelShape(2, 8, 2, 64)
    mlir = "#condensate.policy<anchor = 2, window = 32, topk = 64, selector = block_minmax, page_size = 16>"
    d = {"anchor": 2, "window": 32, "topk": 64, "selector": "block_minmax", "page_size": 16}
    texts = [condensate.model_text(shape, s) for s in (mlir, json.dumps(d), d)]
    assert texts[0] == texts[1] == texts[2]
    sched = {"default": "dense", "rules": [{"layers": [1], "policy": d}]}
    p = condensate.plan(shape, sched)
    assert p.description["schedule"]["rules"][0]["layers"] == [1]


def test_append_writes_cache_and_summaries():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((8, 2, 64, 16, "f16"),
                     "#condensate.policy<anchor = 1, window = 16, topk = 32, "
                     "selector = sketch, bits = 8, page_size = 16>")
    assert plan.sketch_bits == 8 and plan.summary_rows > 5
    lens = [37, 16]
    cache = Cache(plan, lens, gen)
    for b, n in enumerate(lens):
        for t in range(n):
            page = cache.page_table[b, t // 16].item()
            got = cache.k[page, :, t % 16].double()
            assert torch.equal(got, cache.keys[b][t])
        for j in range(math.ceil(n / 16)):
            page = cache.page_table[b, j].item()
            keys = cache.keys[b][j * 16:min(n, (j + 1) * 16)]
            vals = cache.values[b][j * 16:min(n, (j + 1) * 16)]
            s = cache.summaries[page].double()  # [G, R, D]
            slot = plan.description["summary_slots"]
            assert torch.equal(s[:, slot["k_min"]], keys.min(0).values)
            assert torch.equal(s[:, slot["k_max"]], keys.max(0).values)
            assert torch.equal(s[:, slot["v_min"]], vals.min(0).values)
            assert torch.equal(s[:, slot["v_max"]], vals.max(0).values)


def _args(plan, cache, q):
    B = q.shape[0]
    return dict(q=q, k_cache=cache.k, v_cache=cache.v,
                page_table=cache.page_table, lens=cache.lens_t,
                summaries=cache.summaries,
                out=torch.empty_like(q), stats=plan.empty_stats(B))


def test_torch_compile_traces_the_ops():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((8, 2, 64, 16, "f32"), POLICIES["block_minmax"])
    cache = Cache(plan, [100, 250], gen)

    def step(q, k_new, v_new, positions, lens):
        plan.append(k_new, v_new, cache.k, cache.v, cache.page_table,
                    positions, cache.summaries)
        out, stats = plan.run(q * 1.0, cache.k, cache.v, cache.page_table,
                              lens, cache.summaries)
        return out.sum(-1), stats

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    q = torch.randn(2, 8, 64, generator=gen)
    kn, vn = torch.randn(2, 2, 64, generator=gen), torch.randn(2, 2, 64, generator=gen)
    positions = torch.tensor([100, 250], dtype=torch.int32)
    lens = positions + 1
    got, st = compiled(q, kn, vn, positions, lens)
    cache.lens_t = lens
    want, _ = plan.run(q, cache.k, cache.v, cache.page_table, lens, cache.summaries)
    assert torch.allclose(got, want.sum(-1))
    assert (st[..., 1] > 0).all()


def test_opcheck():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((4, 2, 32, 8, "f32"), POLICIES["streaming"])
    cache = Cache(plan, [40, 9], gen)
    q = torch.randn(2, 4, 32, generator=gen)
    a = _args(plan, cache, q)
    torch.library.opcheck(
        torch.ops.condensate.decode_attention.default,
        (plan.id, 0, a["q"], a["k_cache"], a["v_cache"], a["page_table"],
         a["lens"], a["summaries"], None, a["out"], a["stats"]),
        test_utils=("test_schema", "test_faketensor"))


def test_bad_arguments_raise_clear_errors():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((8, 2, 64, 16, "f32"), POLICIES["block_minmax"])
    cache = Cache(plan, [40, 70], gen)
    q = torch.randn(2, 8, 64, generator=gen)

    def run(**over):
        a = _args(plan, cache, q)
        a.update(over)
        torch.ops.condensate.decode_attention(
            plan.id, over.pop("layer", 0), a["q"], a["k_cache"], a["v_cache"],
            a["page_table"], a["lens"], a["summaries"], a.get("windows"),
            a["out"], a["stats"])

    cases = [
        (dict(q=q.double()), "q must be torch.float32"),
        (dict(q=torch.randn(2, 7, 64)), "q must be [2, 8, 64]"),
        (dict(k_cache=cache.k.half()), "k_cache must be torch.float32"),
        (dict(v_cache=cache.v[:-1]), "v_cache must be"),
        (dict(q=torch.randn(2, 64, 8).transpose(1, 2)), "q must be contiguous"),
        (dict(lens=cache.lens_t.long()), "lens must be torch.int32"),
        (dict(stats=torch.empty(2, 8, 4)), "stats must be [2, 8, 5]"),
        (dict(layer=3), "layer must be in [0, 1)"),
    ]
    for over, message in cases:
        with pytest.raises(CondensateError, match=__import__("re").escape(message)):
            run(**over)
    bad = cache.page_table.clone()
    bad[1, 2] = cache.k.shape[0] + 5
    with pytest.raises(CondensateError, match="page"):
        run(page_table=bad)
    with pytest.raises(CondensateError, match="len"):
        run(lens=torch.tensor([40, 10_000], dtype=torch.int32))
    # A non-finite key is refused at the append.
    with pytest.raises(CondensateError, match="finite|NaN|inf"):
        kn = torch.randn(2, 2, 64)
        kn[0, 1, 3] = float("nan")
        plan.append(kn, torch.randn(2, 2, 64), cache.k, cache.v, cache.page_table,
                    torch.tensor([40, 70], dtype=torch.int32), cache.summaries)
    with pytest.raises(CondensateError, match="condensate.*error|expected|policy"):
        condensate.plan(ModelShape(1, 8, 2, 64), "#condensate.policy<anchor = -1>")
    with pytest.raises(CondensateError, match="head_dim"):
        condensate.plan(ModelShape(1, 8, 2, 63), "dense")
    with pytest.raises(TypeError):
        condensate.plan(ModelShape(1, 8, 2, 64), 42)
    closed = make_plan((8, 2, 64, 16, "f32"), "dense")
    pid = closed.id
    closed.close()
    with pytest.raises(CondensateError, match="no condensate plan"):
        torch.ops.condensate.decode_attention(
            pid, 0, q, cache.k, cache.v, cache.page_table, cache.lens_t,
            cache.summaries, None, torch.empty_like(q), plan.empty_stats(2))


def test_adaptive_layer_needs_windows():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((8, 2, 64, 16, "f32"),
                     "#condensate.policy<anchor = 1, window = 16, window_max = 48, "
                     "topk = 32, selector = block_minmax>")
    cache = Cache(plan, [90, 120], gen)
    q = torch.randn(2, 8, 64, generator=gen)
    with pytest.raises(CondensateError, match="windows"):
        plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t, cache.summaries)
    out, stats = plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                          cache.summaries, windows=torch.tensor([16, 48], dtype=torch.int32))
    assert stats[0, 0, 1] < stats[1, 0, 1]


def test_prebuilt_libraries_match_their_specs():
    """Every spec in python/prebuilt was packed as a fat AOT library, found
    by the model text condensate.plan builds for the same shape and policy."""
    import glob
    libs = condensate.prebuilt_libraries()
    here = os.path.dirname(os.path.abspath(__file__))
    specs = sorted(glob.glob(os.path.join(here, "..", "prebuilt", "*.json")))
    if not libs:
        pytest.skip("the installed package carries no prebuilt libraries "
                    "(built without condensate-translate or CUDA's libdevice)")
    assert len(libs) == len(specs)
    for spec in specs:
        with open(spec) as f:
            d = json.load(f)
        text = condensate.model_text(d["model"], d["schedule"])
        assert text in libs, f"{spec}: no prebuilt library has its model text"
        with open(libs[text]) as f:
            chips = [im["chip"] for im in json.load(f)["images"]]
        assert chips == ["sm_80", "sm_90"]


# -- prefill ---------------------------------------------------------------

def prefill_window(plan, layer=0):
    """(window, anchor) the layer prefills in ((0, 0): dense), as the plan
    describes it (abi::prefillWindowOf)."""
    window, anchor = plan.description["prefill_windows"][layer]
    return window, anchor


def row_starts_of(counts):
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    return torch.tensor(starts, dtype=torch.int32)


def prefill_reference(plan, cache, q, lens, counts, window=0, anchor=0):
    """Float64 causal attention of the rows q [R, Hq, D]: sequence s's
    counts[s] rows are its positions lens[s] - counts[s] .. lens[s] - 1 and
    attend to the positions t <= their own (only t > p - window or t <
    anchor when window > 0), as abi::prefillVisible says."""
    R, H, D = q.shape
    grp = H // plan.kv_heads
    out = torch.zeros(R, H, D, dtype=torch.float64)
    r0 = 0
    for s, (n, c) in enumerate(zip(lens, counts)):
        if c == 0:
            continue
        K = cache.keys[s][:n].repeat_interleave(grp, 1)     # [n, H, D]
        V = cache.values[s][:n].repeat_interleave(grp, 1)
        Q = q[r0:r0 + c].double()                           # [c, H, D]
        p = torch.arange(n - c, n)[:, None]                 # [c, 1]
        t = torch.arange(n)[None, :]                        # [1, n]
        vis = t <= p
        if window > 0:
            vis &= (t > p - window) | (t < anchor)
        logits = plan.scale * torch.einsum("chd,nhd->hcn", Q, K)
        logits = logits.masked_fill(~vis, -math.inf)
        out[r0:r0 + c] = torch.einsum("hcn,nhd->chd", torch.softmax(logits, -1), V)
        r0 += c
    return out


def assert_rows_close(got, want, what, tol=1e-5):
    """Every (row, head) of `got` within relative `tol` of `want`."""
    assert not torch.isnan(got).any(), f"{what}: NaN in the output (unwritten rows?)"
    err = ((got.double() - want).norm(dim=-1)
           / want.norm(dim=-1).clamp_min(1e-300))
    worst = err.max().item()
    r, h = divmod(int(err.argmax()), err.shape[1])
    assert worst <= tol, (f"{what}: relative error {worst:.3g} at row {r} head "
                          f"{h} (seed {SEED})")


PREFILL_POLICIES = {
    "dense": "#condensate.dense",
    # a static window policy: prefills in its window and anchor
    "window": "#condensate.policy<anchor = 3, window = 24, topk = 0, page_size = {P}>",
    # top-k selection: prefills densely
    "block_minmax": POLICIES["block_minmax"],
}


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("policy", list(PREFILL_POLICIES))
def test_prefill_whole_prompts_match_float64_reference(shape, policy):
    """Several whole prompts in one call (one of a single token)."""
    rng = random.Random(SEED ^ hash((shape, policy, "prefill")) & 0xFFFFFFFF)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    plan = make_plan(shape, PREFILL_POLICIES[policy])
    window, anchor = prefill_window(plan)
    assert (window > 0) == (policy == "window")
    lens = random_lens(rng, 3, 1, 150) + [1]
    cache = Cache(plan, lens, gen)
    q = torch.randn(sum(lens), plan.q_heads, plan.head_dim, generator=gen)
    out = torch.full_like(q, float("nan"))
    got = plan.prefill(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                       row_starts_of(lens), out=out)
    assert got is out
    want = prefill_reference(plan, cache, q, lens, lens, window, anchor)
    assert_rows_close(out, want, f"{policy} {shape_id(shape)} lens {lens}")


@pytest.mark.parametrize("shape", SHAPES[:3], ids=shape_id)
def test_prefill_later_chunk_matches_float64_reference(shape):
    """A later chunk of each prompt (its earlier positions prefilled before),
    a sequence with no rows in this call, and the chunks of one prompt
    prefilled one call at a time agree with the reference."""
    rng = random.Random(SEED ^ hash((shape, "chunk")) & 0xFFFFFFFF)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    plan = make_plan(shape, "dense")
    lens = [rng.randint(40, 200), rng.randint(2, 30), 77, rng.randint(20, 90)]
    counts = [rng.randint(1, 33), lens[1], 0, rng.randint(1, lens[3])]
    cache = Cache(plan, lens, gen)
    q = torch.randn(sum(counts), plan.q_heads, plan.head_dim, generator=gen)
    out = plan.prefill(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                       row_starts_of(counts))
    want = prefill_reference(plan, cache, q, lens, counts)
    assert_rows_close(out, want, f"{shape_id(shape)} lens {lens} rows {counts}")
    # Sequence 0 in chunks of 16: each call's lens is the chunk's end.
    n = lens[0]
    qs = torch.randn(n, plan.q_heads, plan.head_dim, generator=gen)
    want = prefill_reference(plan, cache, qs, [n], [n])
    got = torch.empty_like(qs)
    for lo in range(0, n, 16):
        hi = min(n, lo + 16)
        plan.prefill(qs[lo:hi], cache.k, cache.v, cache.page_table[:1],
                     torch.tensor([hi], dtype=torch.int32),
                     row_starts_of([hi - lo]), out=got[lo:hi])
    assert_rows_close(got, want, f"{shape_id(shape)} chunked n={n}")


def test_prefill_window_layer_and_gqa():
    """Layer 1 under #condensate.policy<anchor = 2, window = 8> prefills in
    its window, layer 0 (dense) over every earlier position; the last rows
    agree with decode attention of the same layer."""
    gen = torch.Generator().manual_seed(SEED)
    P = 16
    shape = ModelShape(layers=2, q_heads=8, kv_heads=2, head_dim=64, page_size=P)
    plan = condensate.plan(shape, {"default": "dense", "rules": [
        {"layers": [1], "policy": {"anchor": 2, "window": 8, "page_size": P}}]})
    assert prefill_window(plan, 0) == (0, 0)
    assert prefill_window(plan, 1) == (8, 2)
    lens = [45, 9, 120]
    counts = [45, 9, 30]
    cache = Cache(plan, lens, gen)
    q = torch.randn(sum(counts), 8, 64, generator=gen)
    rs = row_starts_of(counts)
    args = (q, cache.k, cache.v, cache.page_table, cache.lens_t, rs)
    dense = plan.prefill(*args, layer=0)
    windowed = plan.prefill(*args, layer=1)
    assert_rows_close(dense, prefill_reference(plan, cache, q, lens, counts),
                      "layer 0 (dense)")
    assert_rows_close(windowed,
                      prefill_reference(plan, cache, q, lens, counts, 8, 2),
                      "layer 1 (window 8, anchor 2)")
    # Rows at positions < 10 see the same keys in both layers; later ones not.
    assert torch.allclose(dense[:10], windowed[:10], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(dense[20:45], windowed[20:45], rtol=1e-3, atol=1e-4)
    # The last row of each sequence is its decode step.
    last = (rs[1:] - 1).long()
    for layer, got in ((0, dense), (1, windowed)):
        out, _ = plan.run(q[last].contiguous(), cache.k, cache.v,
                          cache.page_table, cache.lens_t, cache.summaries,
                          layer=layer)
        assert_rows_close(got[last], out.double(), f"layer {layer} vs decode")


def test_prefill_opcheck_and_torch_compile():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((4, 2, 32, 8, "f32"), PREFILL_POLICIES["window"])
    cache = Cache(plan, [40, 9], gen)
    q = torch.randn(49, 4, 32, generator=gen)
    rs = row_starts_of([40, 9])
    torch.library.opcheck(
        torch.ops.condensate.prefill_attention.default,
        (plan.id, 0, q, cache.k, cache.v, cache.page_table, cache.lens_t, rs,
         torch.empty_like(q)),
        test_utils=("test_schema", "test_faketensor"))

    def f(q):
        return plan.prefill(q * 2.0, cache.k, cache.v, cache.page_table,
                            cache.lens_t, rs).sum(-1)

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q)
    assert torch.allclose(got, f(q))


def test_prefill_bad_arguments_raise_clear_errors():
    gen = torch.Generator().manual_seed(SEED)
    plan = make_plan((8, 2, 64, 16, "f32"), "dense")
    cache = Cache(plan, [40, 70], gen)
    q = torch.randn(50, 8, 64, generator=gen)
    rs = row_starts_of([20, 30])

    def run(**over):
        a = dict(layer=0, q=q, k_cache=cache.k, v_cache=cache.v,
                 page_table=cache.page_table, lens=cache.lens_t,
                 row_starts=rs, out=torch.empty_like(q))
        a.update(over)
        torch.ops.condensate.prefill_attention(
            plan.id, a["layer"], a["q"], a["k_cache"], a["v_cache"],
            a["page_table"], a["lens"], a["row_starts"], a["out"])

    run()  # the arguments below differ from these, which are fine
    i32 = dict(dtype=torch.int32)
    cases = [
        (dict(q=q.double()), "q must be torch.float32"),
        (dict(q=q.half()), "q must be torch.float32"),
        (dict(k_cache=cache.k.half()), "k_cache must be torch.float32"),
        (dict(v_cache=cache.v[:-1]), "v_cache must be"),
        (dict(q=torch.randn(50, 7, 64)), "q must be [50, 8, 64]"),
        (dict(out=torch.empty(49, 8, 64)), "out must be [50, 8, 64]"),
        (dict(q=torch.randn(50, 64, 8).transpose(1, 2)), "q must be contiguous"),
        (dict(lens=cache.lens_t.long()), "lens must be torch.int32"),
        (dict(row_starts=rs.long()), "row_starts must be torch.int32"),
        (dict(row_starts=rs[:-1].contiguous()), "row_starts must be [3]"),
        (dict(row_starts=torch.tensor([0, 20, 40, 50], **i32)), "row_starts must be [3]"),
        (dict(page_table=cache.page_table[:1]), "page_table must be [2, 6]"),
        (dict(layer=1), "layer must be in [0, 1)"),
        # Values, checked by the CPU runtime:
        (dict(row_starts=torch.tensor([1, 20, 50], **i32)),
         "row_starts[0] = 1, expected 0"),
        (dict(row_starts=torch.tensor([0, 20, 49], **i32)),
         "row_starts[2] = 49, expected the row count 50"),
        (dict(row_starts=torch.tensor([0, 55, 50], **i32),
              lens=torch.tensor([60, 70], **i32)), "row_starts decreases at 2"),
        (dict(row_starts=torch.tensor([0, 45, 50], **i32)),
         "sequence 0 has 45 rows but only 40 positions"),
        (dict(lens=torch.tensor([40, 10_000], **i32)), "lens[1] = 10000 outside"),
        (dict(lens=torch.tensor([0, 70], **i32)), "lens[0] = 0 outside"),
    ]
    for over, message in cases:
        with pytest.raises(CondensateError, match=__import__("re").escape(message)):
            run(**over)
    bad = cache.page_table.clone()
    bad[1, 2] = cache.k.shape[0] + 5
    with pytest.raises(CondensateError, match=r"page_table\[1, 2\]"):
        run(page_table=bad)
    with pytest.raises(CondensateError, match="prefill_attention"):
        run(row_starts=torch.tensor([1, 20, 50], **i32))


def test_bytes_read_from_a_calls_stats():
    """Plan.bytes_read against the definition (runtime/core/Attention.cpp's
    bytesRead): dense reads K and V once; block top-k its page boxes and the
    K and V rows it attended, per kv head's share of the group."""
    rng = random.Random(SEED ^ 0xB17E5)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    shape = SHAPES[0]
    hq, hkv, d, p, kv = shape
    lens = [rng.randrange(200, 700), rng.randrange(1, 40), 16]
    elem = torch.empty(0, dtype=KV_DTYPES[kv]).element_size()
    for name in ("dense", "block_minmax"):
        plan = make_plan(shape, POLICIES[name])
        cache = Cache(plan, lens, gen)
        q = torch.randn(len(lens), hq, d, generator=gen)
        _, stats = plan.run(q, cache.k, cache.v, cache.page_table, cache.lens_t,
                            cache.summaries)
        got, dense = plan.bytes_read(cache.lens_t, stats)
        want_dense = sum(2 * n * d * elem * hkv for n in lens)
        assert dense == want_dense
        if name == "dense":
            assert got == pytest.approx(want_dense, rel=1e-12)
            continue
        want = 0.0
        for b, n in enumerate(lens):
            pages = math.ceil(n / p)
            for h in range(hq):
                attended = float(stats[b, h, 1])
                want += (pages * 2 * d * 4 + 2 * attended * d * elem) / (hq // hkv)
        assert got == pytest.approx(want, rel=1e-12)
        assert got < dense
    with pytest.raises(CondensateError, match="stats must be"):
        plan.bytes_read(cache.lens_t, stats[:, :2])
    with pytest.raises(CondensateError, match="lens must be"):
        plan.bytes_read(cache.lens_t.long(), stats)
    bad = stats.clone()
    bad[0, 0, 1] = float("nan")
    with pytest.raises(CondensateError, match="not finite"):
        plan.bytes_read(cache.lens_t, bad)
    with pytest.raises(CondensateError, match="layer 3 outside"):
        plan.bytes_read(cache.lens_t, stats, layer=3)
    with pytest.raises(CondensateError, match="layer must be an int"):
        plan.bytes_read(cache.lens_t, stats, layer=0.5)
