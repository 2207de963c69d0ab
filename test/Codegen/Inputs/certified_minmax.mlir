// The earlier examples/certified.mlir: certified block min/max with a
// per-head override on layers 0-3 (two distinct layer functions).
// A certified policy: block min/max selection of 32 pages of 16 tokens with
// the omitted-mass certificate at tau = 1e-4; up to 8 extra pages are added
// when the bound is above tau, then the head group falls back to dense.
// Per-head override: key/value head 0 of layers 0..3 keeps a plain window.
condensate.model @certified layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 1, window = 64, topk = 512,
                                   selector = block_minmax, tau = 1.0e-4,
                                   max_extra = 8>,
      rules = [#condensate.rule<layers = [0 to 3], kv_heads = [0],
                 policy = #condensate.policy<anchor = 1, window = 256>>]>
