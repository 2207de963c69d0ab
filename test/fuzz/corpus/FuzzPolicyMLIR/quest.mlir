// Quest: the first two layers stay dense; elsewhere, query-aware page
// selection by the min/max upper bound (pages of 16 tokens, 1024-token
// budget), with the current page always kept (a 16-token window).
condensate.model @quest layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 0, window = 16, topk = 1024,
                                   selector = block_minmax>,
      rules = [#condensate.rule<layers = [0, 1], policy = #condensate.dense>]>
