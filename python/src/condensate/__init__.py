"""condensate: sparse decode attention compiled from an MLIR dialect.

    import torch, condensate
    plan = condensate.plan(condensate.ModelShape(layers=1, q_heads=8,
                           kv_heads=2, head_dim=64), "#condensate.policy<"
                           "anchor = 1, window = 64, topk = 256, selector = "
                           "sketch, bits = 4, page_size = 16, tau = 0.01, "
                           "max_extra = 512>")
    k, v, summaries = plan.empty_cache(num_pages=64)
    plan.append(k_new, v_new, k, v, page_table, positions, summaries)
    # a prompt (its tokens appended): causal attention of its rows
    out = plan.prefill(q_rows, k, v, page_table, lens, row_starts)
    # a decode step (its token appended)
    out, stats = plan.run(q, k, v, page_table, lens, summaries)

Ops: torch.ops.condensate.decode_attention, .prefill_attention and
.append_kv (see condensate.ops). Plans: condensate.plan (JIT, CPU or GPU,
cached) and condensate.load (an AOT library, runtime only).
"""

from ._native import CondensateError, have_compiler
from .plan import ModelShape, Plan, load, model_text, plan, prebuilt_libraries
from . import ops  # registers torch.ops.condensate.*

__all__ = [
    "CondensateError",
    "ModelShape",
    "Plan",
    "have_compiler",
    "load",
    "model_text",
    "ops",
    "plan",
    "prebuilt_libraries",
]
