// StreamingLLM: attention sinks plus a recent window, no top-k, every layer.
// Four sink tokens and 508 recent tokens: a 512-token budget.
condensate.model @streaming_llm layers = 30, q_heads = 9, kv_heads = 3,
    head_dim = 64, page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 4, window = 508>,
      rules = []>
