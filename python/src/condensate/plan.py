"""plan/run: compile (or load) once for a model shape and schedule, launch
many times.

A Plan owns one compiled program: the CPU JIT's, the GPU JIT's (memory and
disk cache) or an AOT library's. Its run(), prefill() and append() go
through the torch.ops.condensate ops (condensate/ops.py), so they trace
under torch.compile and capture in a CUDA graph; the ops look the plan up
by its integer id.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import torch

from . import _native
from ._native import CondensateError

_KV_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Plans by id, for the ops; weak, so a plan the caller drops is released.
_plans: "weakref.WeakValueDictionary[int, Plan]" = weakref.WeakValueDictionary()
_plans_lock = threading.Lock()
_next_id = 1


@dataclass(frozen=True)
class ModelShape:
    """A model's attention shape and KV-cache layout (the runtime's
    ModelShape): layers, query and key/value heads, head dim, page size, KV
    element type ("f32", "f16", "bf16"), softmax scale (None: 1/sqrt(head
    dim)) and sketch bits (0: taken from the schedule)."""

    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    page_size: int = 16
    kv_type: str = "f32"
    scale: Optional[float] = None
    sketch_bits: int = 0

    def to_json(self) -> str:
        d = {
            "layers": self.layers,
            "q_heads": self.q_heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "page_size": self.page_size,
            "kv_type": self.kv_type,
            "sketch_bits": self.sketch_bits,
        }
        if self.scale is not None:
            d["scale"] = self.scale
        return json.dumps(d)


ShapeLike = Union[ModelShape, dict]
ScheduleLike = Union[str, dict]


def _shape_json(shape: ShapeLike) -> str:
    if isinstance(shape, ModelShape):
        return shape.to_json()
    if isinstance(shape, dict):
        return json.dumps(shape)
    raise TypeError(
        f"shape must be a condensate.ModelShape or a dict, got {type(shape).__name__}")


def _schedule_text(schedule: ScheduleLike) -> str:
    if isinstance(schedule, dict):
        return json.dumps(schedule)
    if isinstance(schedule, str):
        return "#condensate.dense" if schedule.strip() == "dense" else schedule
    raise TypeError(
        "schedule must be MLIR text, JSON text or a dict, got "
        f"{type(schedule).__name__}")


def model_text(shape: ShapeLike, schedule: ScheduleLike) -> str:
    """The condensate.model op for `shape` under `schedule`."""
    lib = _native.compiler()
    return _native.take_string(lib.condensate_model_text,
                               _shape_json(shape).encode(),
                               _schedule_text(schedule).encode())


class Plan:
    """A compiled program: `run` is decode attention of one layer,
    `prefill` causal attention of a prompt's rows (chunked prefill) of one
    layer, `append` writes one token per sequence into the paged cache and
    its summaries."""

    def __init__(self, kind: str, handle: int, device: torch.device,
                 description: dict, seconds: float = 0.0, source: str = ""):
        global _next_id
        self.kind = kind  # "cpu" or "gpu"
        self._handle = ctypes.c_void_p(handle)
        self.device = device
        self.description = description
        self.compile_seconds = seconds
        self.source = source
        m = description["model"]
        self.num_layers = int(m["layers"])
        self.q_heads = int(m["q_heads"])
        self.kv_heads = int(m["kv_heads"])
        self.head_dim = int(m["head_dim"])
        self.page_size = int(m["page_size"])
        self.kv_type = m["kv_type"]
        self.kv_dtype = _KV_DTYPES[self.kv_type]
        self.scale = float(m["scale"])
        self.sketch_bits = int(m["sketch_bits"])
        self.summary_rows = int(description["summary_rows"])
        self.adaptive = [bool(a) for a in description["adaptive"]]
        self.stats_fields = list(description["stats"])
        # The condensate.model op text (bytes_read): plan() sets it, load()
        # takes the manifest's.
        self.model_mlir = ""
        self._err = _native.ErrorBuffer()
        self._call_lock = threading.Lock()
        self._reserved = (0, 0, 0)
        with _plans_lock:
            self.id = _next_id
            _next_id += 1
            _plans[self.id] = self

    # -- buffers ----------------------------------------------------------

    def empty_cache(self, num_pages: int, device=None):
        """(k_cache, v_cache, summaries) for a pool of `num_pages` pages,
        zeroed, on the plan's device (or `device`)."""
        if not isinstance(num_pages, int) or num_pages <= 0:
            raise ValueError(f"num_pages must be a positive int, got {num_pages!r}")
        dev = self.device if device is None else torch.device(device)
        kv = (num_pages, self.kv_heads, self.page_size, self.head_dim)
        k = torch.zeros(kv, dtype=self.kv_dtype, device=dev)
        v = torch.zeros(kv, dtype=self.kv_dtype, device=dev)
        s = torch.zeros((num_pages, self.kv_heads, self.summary_rows, self.head_dim),
                        dtype=torch.float32, device=dev)
        return k, v, s

    def empty_stats(self, batch: int, device=None) -> torch.Tensor:
        dev = self.device if device is None else torch.device(device)
        return torch.empty((batch, self.q_heads, len(self.stats_fields)),
                           dtype=torch.float32, device=dev)

    # -- launching --------------------------------------------------------

    def run(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
            page_table: torch.Tensor, lens: torch.Tensor, summaries: torch.Tensor,
            *, layer: int = 0, windows: Optional[torch.Tensor] = None,
            out: Optional[torch.Tensor] = None,
            stats: Optional[torch.Tensor] = None):
        """Decode attention of `layer`: returns (out [B, Hq, D] f32, stats
        [B, Hq, 5] f32: eps_hat, attended, extra, fallback, output_bound;
        fallback is 1 after the sparse pass, 2 when the certificate's early
        test sent the group to dense before it; output_bound is NaN under a
        policy with output_bound = false; see AttentionABI.h).
        Pass `out` and `stats` to allocate nothing (graphs, engines)."""
        if out is None:
            out = torch.empty_like(q)
        if stats is None:
            stats = self.empty_stats(q.shape[0] if q.dim() == 3 else 0, q.device)
        torch.ops.condensate.decode_attention(
            self.id, layer, q, k_cache, v_cache, page_table, lens, summaries,
            windows, out, stats)
        return out, stats

    def bytes_read(self, lens: torch.Tensor, stats: torch.Tensor, *,
                   layer: int = 0):
        """Bytes of the KV cache a `run` of `layer` read, from the `lens`
        ([B] int32) and `stats` ([B, Hq, 5]) of that call: returns (bytes,
        dense_bytes), summed over the batch: what the generated stages read
        (summaries and sketches scored, K and V attended, value boxes, the
        sparse and the dense pass of a fallback) and what dense attention
        reads over the same contexts. The savings of a policy are
        1 - bytes / dense_bytes, not the positions it attended. Copies
        `lens` and `stats` to the host (on a GPU that synchronises). Needs
        the compiler library."""
        if not isinstance(layer, int) or isinstance(layer, bool):
            raise CondensateError(f"bytes_read: layer must be an int, got {layer!r}")
        if not self.model_mlir:
            raise CondensateError("bytes_read: this plan has no model text")
        B = lens.shape[0] if lens.dim() == 1 else -1
        if lens.dtype != torch.int32 or B < 1:
            raise CondensateError(
                f"bytes_read: lens must be [B] int32, got {list(lens.shape)} "
                f"{lens.dtype}")
        want = (B, self.q_heads, len(self.stats_fields))
        if stats.dtype != torch.float32 or tuple(stats.shape) != want:
            raise CondensateError(
                f"bytes_read: stats must be {list(want)} float32, got "
                f"{list(stats.shape)} {stats.dtype}")
        lens_h = lens.detach().to("cpu").contiguous()
        stats_h = stats.detach().to("cpu").contiguous()
        got, dense = ctypes.c_double(), ctypes.c_double()
        lib = _native.compiler()
        self._err.check(lib.condensate_bytes_read(
            self.model_mlir.encode(), layer, B, lens_h.data_ptr(),
            stats_h.data_ptr(), ctypes.byref(got), ctypes.byref(dense),
            self._err.buf, _native._ERR), "bytes_read")
        return got.value, dense.value

    def prefill(self, q: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, page_table: torch.Tensor,
                lens: torch.Tensor, row_starts: torch.Tensor, *,
                layer: int = 0, out: Optional[torch.Tensor] = None):
        """Causal prefill attention of `layer`: q [R, Hq, D] f32 holds the
        rows of S sequences concatenated (sequence s: rows [row_starts[s],
        row_starts[s + 1]), row_starts [S + 1] int32), whose keys and values
        are already appended; lens [S] int32 counts each sequence's context
        including its rows, which are its last positions. Returns out [R, Hq,
        D] f32 (pass `out` to allocate nothing). A static window policy's
        layer attends in its window and anchor, every other layer densely.
        See torch.ops.condensate.prefill_attention."""
        if out is None:
            out = torch.empty_like(q)
        torch.ops.condensate.prefill_attention(
            self.id, layer, q, k_cache, v_cache, page_table, lens, row_starts,
            out)
        return out

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor,
               k_cache: torch.Tensor, v_cache: torch.Tensor,
               page_table: torch.Tensor, positions: torch.Tensor,
               summaries: torch.Tensor) -> None:
        """Writes k_new/v_new [B, Hkv, D] f32 row b at positions[b] of the
        sequence whose page table is row b and updates the page summaries
        (and key sketches). Rows that land in one page must be consecutive,
        in position order (one row per decoding sequence, or a prefill's
        run of positions with its page table repeated per row)."""
        torch.ops.condensate.append_kv(self.id, k_new, v_new, k_cache, v_cache,
                                       page_table, positions, summaries)

    def reserve(self, max_batch: int, max_pages: int, num_pages: int) -> None:
        """GPU: sizes the scratch workspace for calls up to these sizes, so
        later calls allocate nothing (required before CUDA-graph capture).
        A no-op on the CPU."""
        if self.kind != "gpu":
            return
        want = (max(max_batch, self._reserved[0]), max(max_pages, self._reserved[1]),
                max(num_pages, self._reserved[2]))
        if want == self._reserved:
            return
        lib = _native.runtime()
        self._err.check(lib.condensate_gpu_reserve(self._handle, *want, self._err.buf,
                                                   _native._ERR), "reserve")
        self._reserved = want

    def launch_count(self, layer: int) -> int:
        """GPU kernel launches one attention call of `layer` makes."""
        if self.kind != "gpu":
            raise CondensateError("launch_count: a CPU plan launches no kernels")
        return _native.runtime().condensate_gpu_launch_count(self._handle, layer)

    # The ops call these after checking their arguments (ops.py).
    def _attend(self, layer, batch, max_pages, num_pages, ptrs, stream):
        with self._call_lock:
            if self.kind == "cpu":
                rc = _native.compiler().condensate_cpu_attend(
                    self._handle, layer, batch, max_pages, num_pages, *ptrs,
                    self._err.buf, _native._ERR)
            else:
                if not torch.cuda.is_current_stream_capturing():
                    self.reserve(batch, max_pages, num_pages)
                rc = _native.runtime().condensate_gpu_attend(
                    self._handle, layer, batch, max_pages, num_pages, *ptrs,
                    stream, self._err.buf, _native._ERR)
            self._err.check(rc, f"decode_attention (layer {layer})")

    def _prefill(self, layer, rows, seqs, max_pages, num_pages, ptrs, stream):
        # Prefill functions use no workspace: nothing to reserve.
        with self._call_lock:
            if self.kind == "cpu":
                rc = _native.compiler().condensate_cpu_prefill(
                    self._handle, layer, rows, seqs, max_pages, num_pages,
                    *ptrs, self._err.buf, _native._ERR)
            else:
                rc = _native.runtime().condensate_gpu_prefill(
                    self._handle, layer, rows, seqs, max_pages, num_pages,
                    *ptrs, stream, self._err.buf, _native._ERR)
            self._err.check(rc, f"prefill_attention (layer {layer})")

    def _append(self, batch, max_pages, num_pages, ptrs, stream):
        with self._call_lock:
            if self.kind == "cpu":
                rc = _native.compiler().condensate_cpu_append(
                    self._handle, batch, max_pages, num_pages, *ptrs,
                    self._err.buf, _native._ERR)
            else:
                if not torch.cuda.is_current_stream_capturing():
                    self.reserve(batch, max_pages, num_pages)
                rc = _native.runtime().condensate_gpu_append(
                    self._handle, batch, max_pages, num_pages, *ptrs, stream,
                    self._err.buf, _native._ERR)
            self._err.check(rc, "append_kv")

    def close(self) -> None:
        """Releases the program (the plan must not be used afterwards)."""
        with _plans_lock:
            _plans.pop(self.id, None)
        if self._handle:
            if self.kind == "cpu":
                _native.compiler().condensate_cpu_free(self._handle)
            else:
                _native.runtime().condensate_gpu_free(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return (f"condensate.Plan({self.kind}, layers={self.num_layers}, "
                f"q/kv/d={self.q_heads}/{self.kv_heads}/{self.head_dim}, "
                f"page_size={self.page_size}, kv={self.kv_type}, "
                f"sketch_bits={self.sketch_bits})")


def lookup(plan_id: int) -> Plan:
    with _plans_lock:
        p = _plans.get(plan_id)
    if p is None:
        raise CondensateError(f"no condensate plan with id {plan_id} (closed or never made)")
    return p


def _describe(fn, handle) -> dict:
    return json.loads(_native.take_string(fn, handle))


_prebuilt_index: Optional[dict] = None


def prebuilt_libraries() -> dict:
    """The AOT libraries the package carries (condensate/prebuilt): the
    condensate.model text each was built from, mapped to its fat index."""
    global _prebuilt_index
    if _prebuilt_index is None:
        index = {}
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prebuilt")
        if os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if not name.endswith(".json") or re.search(r"\.sm_\d+\.json$", name):
                    continue  # an image's manifest (NAME.sm_90.json), not an index
                try:
                    with open(path) as f:
                        images = json.load(f)["images"]
                    with open(os.path.join(folder, images[0]["manifest"])) as f:
                        index[json.load(f)["model_mlir"]] = path
                except (OSError, ValueError, KeyError, IndexError, TypeError):
                    continue  # a damaged entry is skipped; the JIT serves it
        _prebuilt_index = index
    return _prebuilt_index


def plan(shape: ShapeLike, schedule: ScheduleLike = "dense", *, device="cpu",
         chip: Optional[str] = None, cache_dir: Optional[str] = None,
         reserve: Optional[Sequence[int]] = None,
         use_prebuilt: bool = True) -> Plan:
    """Compiles (or takes from the memory/disk cache) the attention of
    `shape` under `schedule` (MLIR attribute text, JSON text, a dict, or
    "dense") for `device` ("cpu" or a CUDA device; `chip` defaults to the
    device's, sm_90 or sm_80). On a GPU, a shape and
    schedule the package carries prebuilt (prebuilt_libraries()) loads with
    no JIT unless `use_prebuilt` is False. `reserve` = (max_batch,
    max_pages, num_pages) sizes a GPU plan's workspace up front."""
    dev = torch.device(device)
    text = model_text(shape, schedule)
    lib = _native.compiler()
    handle = ctypes.c_void_p()
    seconds = ctypes.c_double()
    err = _native.ErrorBuffer()
    if dev.type == "cpu":
        err.check(lib.condensate_cpu_compile(text.encode(), ctypes.byref(handle),
                                             ctypes.byref(seconds), err.buf,
                                             _native._ERR), "plan (cpu)")
        desc = _describe(lib.condensate_cpu_describe, handle)
        p = Plan("cpu", handle.value, dev, desc, seconds.value, "compiled")
        p.model_mlir = text
        return p
    if dev.type != "cuda":
        raise CondensateError(f"plan: device must be cpu or cuda, got {dev}")
    if dev.index not in (None, 0):
        raise CondensateError("plan: condensate's GPU runtime uses device 0")
    torch.cuda.init()
    if chip is None:
        major, minor = torch.cuda.get_device_capability(0)
        if major < 8:
            raise CondensateError(
                f"plan: condensate's GPU kernels need sm_80 or newer; device 0 "
                f"is sm_{major}{minor}")
        chip = "sm_90" if major >= 9 else "sm_80"
    if use_prebuilt and text in prebuilt_libraries():
        p = load(prebuilt_libraries()[text], reserve=reserve)
        p.source = "prebuilt"
        p.model_mlir = text
        return p
    source = ctypes.c_int()
    cache = None if cache_dir is None else cache_dir.encode()
    err.check(lib.condensate_gpu_compile(text.encode(), chip.encode(), cache,
                                         ctypes.byref(handle), ctypes.byref(seconds),
                                         ctypes.byref(source), err.buf,
                                         _native._ERR), "plan (gpu)")
    desc = _describe(_native.runtime().condensate_gpu_describe, handle)
    p = Plan("gpu", handle.value, torch.device("cuda", 0), desc, seconds.value,
             ["compiled", "memory cache", "disk cache"][source.value])
    p.model_mlir = text
    if reserve is not None:
        p.reserve(*reserve)
    return p


def load(library: Union[str, os.PathLike], *, reserve: Optional[Sequence[int]] = None) -> Plan:
    """Loads an AOT library written by condensate-translate with the runtime
    alone (no compiler, no JIT): `library` is its manifest (PREFIX.json) or
    prefix, of a one-chip library or of a fat one (--chip=sm_80,sm_90), from
    which this GPU's image is taken (its cubin, else an older chip's PTX)."""
    path = os.fspath(library)
    if path.endswith(".ptx"):
        path = path[:-4]
    manifest = path if path.endswith(".json") else path + ".json"
    if not os.path.isfile(manifest):
        raise CondensateError(f"load: {manifest} does not exist")
    torch.cuda.init()
    lib = _native.runtime()
    handle = ctypes.c_void_p()
    err = _native.ErrorBuffer()
    err.check(lib.condensate_gpu_load_library(manifest.encode(), ctypes.byref(handle),
                                              err.buf, _native._ERR),
              f"load {manifest}")
    desc = _describe(lib.condensate_gpu_describe, handle)
    p = Plan("gpu", handle.value, torch.device("cuda", 0), desc, 0.0, "aot")
    with open(manifest) as f:
        p.model_mlir = json.load(f).get("model_mlir", "")
    if reserve is not None:
        p.reserve(*reserve)
    return p
