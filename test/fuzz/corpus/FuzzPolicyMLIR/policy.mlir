#condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 1024, selector = block_minmax, page_size = 64, tau = 1.0e-4, max_extra = 8>
