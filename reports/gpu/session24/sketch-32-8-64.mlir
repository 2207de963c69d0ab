// Llama-3.2-1B's attention shape (32/8/64) with the sketch selector: the
// model bench/sass_loop.sh reads for the score_sketch kernel's SASS
// (llama1b_layer0_score_sketch). At 4 blocks a SM (64 registers) ptxas
// spills 20 bytes, and the k-step loop reloads 3 of them (LDL) each pass;
// with 3 blocks a SM it takes 80 registers and spills nothing (not timed).
condensate.model @llama1b layers = 1, q_heads = 32, kv_heads = 8, head_dim = 64,
    page_size = 64, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1,
      default = #condensate.policy<anchor = 1, window = 64, topk = 960,
        selector = sketch, bits = 4, page_size = 64>, rules = []>
