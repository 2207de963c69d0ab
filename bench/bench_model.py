"""The benchmark model of bench_attention.py and bench_cold.py, and which
layer is which method: plain data (no torch), so that benchmarks_md.py,
which reads their results, can import it too."""

# The benchmark model: layer 0 dense, layer 1 block selection (anchor 1 +
# window 64 + top-k by page min/max), layer 2 the same certified at tau 1e-3
# with up to 4 extra pages. bench_cold.py formats it for other shapes.
MODEL_TEMPLATE = """condensate.model @bench layers = 3, q_heads = {hq}, kv_heads = {hkv},
    head_dim = {d}, page_size = {p}, kv_type = bf16,
    schedule = #condensate.schedule<layers = 3,
      default = #condensate.dense,
      rules = [
        #condensate.rule<layers = [1], policy = #condensate.policy<anchor = 1,
          window = 64, topk = {topk}, selector = block_minmax, page_size = {p}>>,
        #condensate.rule<layers = [2], policy = #condensate.policy<anchor = 1,
          window = 64, topk = {topk}, selector = block_minmax, page_size = {p},
          tau = 1.0e-3, max_extra = 4>>]>
"""

# The layer of each method in MODEL_TEMPLATE.
LAYERS = {"dense": 0, "condensate": 1, "certified": 2}
