// A certified policy the certificate governs entirely: token top-k of 192
// by 4-bit key sketches (per-token upper bounds on q.k from the page's
// quantised keys, see docs/CERTIFICATE.md), a window of 64 and the anchor;
// the omitted-mass certificate at tau = 1e-2 adds up to 512 next-best
// tokens in bound order, then the head group falls back to dense attention.
// On the main job (SmolLM2-135M, ~900 tokens) it certifies 88% of
// head-steps and decodes the same text as dense.
condensate.model @certified layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 1, window = 64, topk = 192,
                                   selector = sketch, bits = 4, tau = 1.0e-2,
                                   max_extra = 512>,
      rules = []>
