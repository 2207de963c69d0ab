"""torch.ops.condensate: decode attention, prefill attention and KV append
as torch.library custom ops.

All three write into caller-provided tensors (out, stats; the caches and
summaries), allocate nothing per call, run on the caller's current CUDA
stream with no host synchronisation (a GPU plan's workspace is reserved
outside capture; prefill needs none), and so capture in a CUDA graph. Their
fake (meta) implementations check shapes and dtypes only, so torch.compile
traces through them. Arguments are checked here before any pointer reaches
C; lengths, row starts and page-table entries are checked by the runtime on
the CPU (device tables are not read back, that would synchronise).
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch

from ._native import CondensateError
from .plan import Plan, lookup


def _fail(what: str, msg: str):
    raise CondensateError(f"{what}: {msg}")


def _expect(what: str, name: str, t: torch.Tensor, dtype: torch.dtype,
            shape: tuple, device: torch.device, check_layout: bool = True):
    if not isinstance(t, torch.Tensor):
        _fail(what, f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        _fail(what, f"{name} must be {dtype}, got {t.dtype}")
    if t.dim() != len(shape):
        _fail(what, f"{name} must have {len(shape)} dimensions "
                    f"{_fmt(shape)}, got shape {tuple(t.shape)}")
    for i, (got, want) in enumerate(zip(t.shape, shape)):
        if want is not None and got != want:
            _fail(what, f"{name} must be {_fmt(shape)}, got {tuple(t.shape)} "
                        f"(dimension {i} is {got}, expected {want})")
    if t.device.type != device.type or (
            device.type == "cuda" and t.device.index not in (None, device.index or 0)):
        _fail(what, f"{name} is on {t.device}, the plan runs on {device}")
    if check_layout and not t.is_contiguous():
        _fail(what, f"{name} must be contiguous (strides {t.stride()})")


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


def _check_pool(what, p: Plan, name, rows, heads, k_cache, v_cache,
                page_table, summaries):
    """Checks the per-sequence rows `name` [B, heads, D] f32 and the page
    pool (caches, page table, summaries); returns (B, MP, NP)."""
    if not isinstance(rows, torch.Tensor) or rows.dim() != 3:
        _fail(what, f"{name} must be a [batch, heads, head_dim] tensor")
    if not isinstance(k_cache, torch.Tensor) or k_cache.dim() != 4:
        _fail(what, "k_cache must be a [pages, kv_heads, page_size, head_dim] tensor")
    if not isinstance(page_table, torch.Tensor) or page_table.dim() != 2:
        _fail(what, "page_table must be a [batch, max_pages] tensor")
    B, NP, MP = rows.shape[0], k_cache.shape[0], page_table.shape[1]
    G, P, D, dev = p.kv_heads, p.page_size, p.head_dim, p.device
    _expect(what, name, rows, torch.float32, (B, heads, D), dev)
    _expect(what, "k_cache", k_cache, p.kv_dtype, (NP, G, P, D), dev)
    _expect(what, "v_cache", v_cache, p.kv_dtype, (NP, G, P, D), dev)
    _expect(what, "page_table", page_table, torch.int32, (B, MP), dev)
    _expect(what, "summaries", summaries, torch.float32,
            (NP, G, p.summary_rows, D), dev)
    if B == 0 or NP == 0 or MP == 0:
        _fail(what, f"empty call (batch {B}, pages {NP}, max_pages {MP})")
    return B, MP, NP


def _check_attend(p: Plan, layer, q, k_cache, v_cache, page_table, lens,
                  summaries, windows, out, stats):
    what = f"condensate.decode_attention (layer {layer})"
    if not isinstance(layer, int) or not 0 <= layer < p.num_layers:
        _fail(what, f"layer must be in [0, {p.num_layers}), got {layer!r}")
    dev = p.device
    B, MP, NP = _check_pool(what, p, "q", q, p.q_heads, k_cache, v_cache,
                            page_table, summaries)
    H, D = p.q_heads, p.head_dim
    _expect(what, "lens", lens, torch.int32, (B,), dev)
    if windows is not None:
        _expect(what, "windows", windows, torch.int32, (B,), dev)
    elif p.adaptive[layer]:
        _fail(what, "this layer's policy has an adaptive window: pass windows [batch] int32")
    _expect(what, "out", out, torch.float32, (B, H, D), dev)
    _expect(what, "stats", stats, torch.float32, (B, H, len(p.stats_fields)), dev)
    return B, MP, NP


def _check_append(p: Plan, k_new, v_new, k_cache, v_cache, page_table,
                  positions, summaries):
    what = "condensate.append_kv"
    dev = p.device
    B, MP, NP = _check_pool(what, p, "k_new", k_new, p.kv_heads, k_cache,
                            v_cache, page_table, summaries)
    _expect(what, "v_new", v_new, torch.float32, (B, p.kv_heads, p.head_dim), dev)
    _expect(what, "positions", positions, torch.int32, (B,), dev)
    return B, MP, NP


def _check_prefill(p: Plan, layer, q, k_cache, v_cache, page_table, lens,
                   row_starts, out):
    """Checks a prefill call's tensors (dtypes, shapes, devices, layouts);
    returns (R, S, MP, NP). The values of lens, row_starts and the page
    table are the runtime's to check (on the CPU only)."""
    what = f"condensate.prefill_attention (layer {layer})"
    if not isinstance(layer, int) or not 0 <= layer < p.num_layers:
        _fail(what, f"layer must be in [0, {p.num_layers}), got {layer!r}")
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        _fail(what, "q must be a [rows, q_heads, head_dim] tensor")
    if not isinstance(k_cache, torch.Tensor) or k_cache.dim() != 4:
        _fail(what, "k_cache must be a [pages, kv_heads, page_size, head_dim] tensor")
    if not isinstance(lens, torch.Tensor) or lens.dim() != 1:
        _fail(what, "lens must be a [seqs] tensor")
    if not isinstance(page_table, torch.Tensor) or page_table.dim() != 2:
        _fail(what, "page_table must be a [seqs, max_pages] tensor")
    R, S, NP, MP = q.shape[0], lens.shape[0], k_cache.shape[0], page_table.shape[1]
    H, G, P, D, dev = p.q_heads, p.kv_heads, p.page_size, p.head_dim, p.device
    _expect(what, "q", q, torch.float32, (R, H, D), dev)
    _expect(what, "k_cache", k_cache, p.kv_dtype, (NP, G, P, D), dev)
    _expect(what, "v_cache", v_cache, p.kv_dtype, (NP, G, P, D), dev)
    _expect(what, "lens", lens, torch.int32, (S,), dev)
    _expect(what, "page_table", page_table, torch.int32, (S, MP), dev)
    _expect(what, "row_starts", row_starts, torch.int32, (S + 1,), dev)
    _expect(what, "out", out, torch.float32, (R, H, D), dev)
    if R == 0 or S == 0 or NP == 0 or MP == 0:
        _fail(what, f"empty call (rows {R}, seqs {S}, pages {NP}, max_pages {MP})")
    return R, S, MP, NP


def _ptr(t: Optional[torch.Tensor]):
    return ctypes.c_void_p(0 if t is None else t.data_ptr())


def _stream(p: Plan):
    if p.kind != "gpu":
        return None
    return ctypes.c_void_p(torch.cuda.current_stream(p.device).cuda_stream)


@torch.library.custom_op("condensate::decode_attention",
                         mutates_args=("out", "stats"))
def decode_attention(plan: int, layer: int, q: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor,
                     page_table: torch.Tensor, lens: torch.Tensor,
                     summaries: torch.Tensor, windows: Optional[torch.Tensor],
                     out: torch.Tensor, stats: torch.Tensor) -> None:
    """Decode attention of `layer` of plan `plan` into out and stats."""
    p = lookup(plan)
    B, MP, NP = _check_attend(p, layer, q, k_cache, v_cache, page_table, lens,
                              summaries, windows, out, stats)
    ptrs = [_ptr(t) for t in (q, k_cache, v_cache, page_table, lens, windows,
                              summaries, out, stats)]
    p._attend(layer, B, MP, NP, ptrs, _stream(p))


@decode_attention.register_fake
def _decode_attention_fake(plan, layer, q, k_cache, v_cache, page_table, lens,
                           summaries, windows, out, stats) -> None:
    # Under dynamic shapes the ints may arrive as SymInts: specialise them
    # (a plan and a layer are compile-time facts of the traced function).
    _check_attend(lookup(int(plan)), int(layer), q, k_cache, v_cache,
                  page_table, lens, summaries, windows, out, stats)


@torch.library.custom_op("condensate::append_kv",
                         mutates_args=("k_cache", "v_cache", "summaries"))
def append_kv(plan: int, k_new: torch.Tensor, v_new: torch.Tensor,
              k_cache: torch.Tensor, v_cache: torch.Tensor,
              page_table: torch.Tensor, positions: torch.Tensor,
              summaries: torch.Tensor) -> None:
    """Writes one token per sequence into the cache and its summaries."""
    p = lookup(plan)
    B, MP, NP = _check_append(p, k_new, v_new, k_cache, v_cache, page_table,
                              positions, summaries)
    ptrs = [_ptr(t) for t in (k_new, v_new, k_cache, v_cache, page_table,
                              positions, summaries)]
    p._append(B, MP, NP, ptrs, _stream(p))


@append_kv.register_fake
def _append_kv_fake(plan, k_new, v_new, k_cache, v_cache, page_table,
                    positions, summaries) -> None:
    _check_append(lookup(int(plan)), k_new, v_new, k_cache, v_cache,
                  page_table, positions, summaries)


@torch.library.custom_op("condensate::prefill_attention", mutates_args=("out",))
def prefill_attention(plan: int, layer: int, q: torch.Tensor,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      page_table: torch.Tensor, lens: torch.Tensor,
                      row_starts: torch.Tensor, out: torch.Tensor) -> None:
    """Causal prefill attention of `layer` of plan `plan` into out.

    q, out [R, Hq, D] f32 hold the rows of S sequences concatenated, those
    of sequence s being [row_starts[s], row_starts[s + 1]) (row_starts
    [S + 1] int32, row_starts[0] = 0, row_starts[S] = R); their keys and
    values are already appended. lens [S] int32 is each sequence's context
    length including its rows and page_table [S, MP] int32 its pages. With
    c rows, row r of sequence s is the query at position lens[s] - c +
    (r - row_starts[s]) and attends to positions <= it (only to the layer's
    window and anchor when its policy is a static window policy, densely
    otherwise). On a CPU plan the runtime checks row_starts, lens and the
    page table; on a GPU plan they stay on the device and only their sizes
    are checked: the caller keeps them consistent."""
    p = lookup(plan)
    R, S, MP, NP = _check_prefill(p, layer, q, k_cache, v_cache, page_table,
                                  lens, row_starts, out)
    ptrs = [_ptr(t) for t in (q, k_cache, v_cache, page_table, lens,
                              row_starts, out)]
    p._prefill(layer, R, S, MP, NP, ptrs, _stream(p))


@prefill_attention.register_fake
def _prefill_attention_fake(plan, layer, q, k_cache, v_cache, page_table, lens,
                            row_starts, out) -> None:
    _check_prefill(lookup(int(plan)), int(layer), q, k_cache, v_cache,
                   page_table, lens, row_starts, out)
