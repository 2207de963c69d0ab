// A certified policy the certificate governs entirely: token top-k of 192
// by 4-bit key sketches (per-token upper bounds on q.k from the page's
// quantised keys, see docs/CERTIFICATE.md), a window of 64 and the anchor;
// the omitted-mass certificate at tau = 1e-2 then takes in the next-best
// tokens in bound order until the bound holds. max_extra = 32768 covers
// every context the supported models allow (open extras): a group never
// runs out of extras, so it never falls back to dense attention, and it
// reads only what its bound needs. (On the GPU, walks of thousands of
// extras are slow today: docs/CERTIFICATE.md, "Open extras".)
// output_bound = false: the certificate bounds the omitted mass, which
// governs every decision; the bound on the output error that it could add
// would read the value box of every omitted page (docs/CERTIFICATE.md,
// "Fixed reads") and nothing in the decoder uses it.
condensate.model @certified layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 1, window = 64, topk = 192,
                                   selector = sketch, bits = 4, tau = 1.0e-2,
                                   max_extra = 32768, output_bound = false>,
      rules = []>
