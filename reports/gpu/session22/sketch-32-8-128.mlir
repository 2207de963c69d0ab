// Llama-3-8B's attention shape (32/8/128, group 4: half columns) with the
// sketch selector, for bench/sass_loop.sh.
condensate.model @llama layers = 1, q_heads = 32, kv_heads = 8, head_dim = 128,
    page_size = 64, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1,
      default = #condensate.policy<anchor = 1, window = 64, topk = 960,
        selector = sketch, bits = 4, page_size = 64>, rules = []>

