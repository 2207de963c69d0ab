// Qwen2.5-7B's attention shape (28/4/128) with the sketch selector: the model
// bench/sass_loop.sh reads for the score_sketch kernel's SASS.
condensate.model @qwen layers = 1, q_heads = 28, kv_heads = 4, head_dim = 128,
    page_size = 64, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1,
      default = #condensate.policy<anchor = 1, window = 64, topk = 960,
        selector = sketch, bits = 4, page_size = 64>, rules = []>

