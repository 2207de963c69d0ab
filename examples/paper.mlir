// The source paper's layer-adaptive schedule for SmolLM2-135M (30 layers,
// 9 query / 3 key-value heads, head_dim 64), KV pages of 16 tokens:
//   - one pillar layer (15) keeps dense attention: |P|/L = 1/30 <= 1/16;
//   - early layers 0..7: anchor 1 + a wide fixed window of 1024 + top-32;
//   - late layers: anchor 1 + adaptive window 64..256 (RepScore) + top-32,
//     i.e. the paper's budget B = 1 + 64 + 32 = 97 at the narrowest window.
// `depth = relative`: written for 30 layers, the schedule applies to a model
// of any depth by relative position (at 24 layers the pillar is layer 12 and
// the wide windows cover layers 0..6; see #condensate.schedule).
// Lower it for the CPU:  condensate-opt --condensate-to-cpu paper.mlir
condensate.model @paper layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30, depth = relative,
      default = #condensate.policy<anchor = 1, window = 64, window_max = 256,
                                   topk = 32, selector = exact>,
      rules = [
        #condensate.rule<layers = [0 to 7],
          policy = #condensate.policy<anchor = 1, window = 1024, topk = 32,
                                      selector = exact>>,
        #condensate.rule<layers = [15], policy = #condensate.dense>
      ]>
