#!/usr/bin/env python3
"""Writes a small llama GGUF (one layer, hidden 32, a byte-level BPE
tokenizer) with one hostile change, for test/Tools/hostile-inputs.test:
  heads  attention.head_count = 10^6 in a file of a few KB
  blocks block_count = 10^7
  nan    a NaN weight in blk.0.ffn_up.weight
usage: hostile_gguf.py KIND OUT"""
import sys

import numpy as np
import gguf

kind, out = sys.argv[1], sys.argv[2]
H, F, HQ, HKV, V = 32, 64, 4, 2, 16
w = gguf.GGUFWriter(out, "llama")
w.add_block_count(10**7 if kind == "blocks" else 1)
w.add_context_length(64)
w.add_embedding_length(H)
w.add_feed_forward_length(F)
w.add_head_count(10**6 if kind == "heads" else HQ)
w.add_head_count_kv(10**6 if kind == "heads" else HKV)
w.add_rope_freq_base(10000.0)
w.add_layer_norm_rms_eps(1e-5)
toks = ["<|endoftext|>", "h", "i", "Ġ", "hi"] + ["t%d" % i for i in range(V - 5)]
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("smollm")
w.add_token_list(toks)
w.add_token_types([3] + [1] * (len(toks) - 1))
w.add_token_merges(["h i"])
w.add_bos_token_id(0)
w.add_eos_token_id(0)
rng = np.random.default_rng(0)
def t(name, *shape):
    a = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    if kind == "nan" and name == "blk.0.ffn_up.weight":
        a.flat[7] = np.nan
    w.add_tensor(name, a)
D = H // HQ
t("token_embd.weight", V, H)
t("output_norm.weight", H)
b = "blk.0."
t(b + "attn_norm.weight", H)
t(b + "attn_q.weight", HQ * D, H)
t(b + "attn_k.weight", HKV * D, H)
t(b + "attn_v.weight", HKV * D, H)
t(b + "attn_output.weight", H, HQ * D)
t(b + "ffn_norm.weight", H)
t(b + "ffn_gate.weight", F, H)
t(b + "ffn_up.weight", F, H)
t(b + "ffn_down.weight", H, F)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
