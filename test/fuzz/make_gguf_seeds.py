#!/usr/bin/env python3
"""Writes the small seed GGUF files of the FuzzGGUF corpus (corpus/FuzzGGUF/):
a llama-style header with a byte-level BPE tokenizer and tensors in several
ggml types, and one with a SentencePiece vocabulary (tokenizer.ggml.model
"llama": scores, byte tokens, user-defined and control tokens, as Gemma 3
ships). Run once; the outputs are committed (a few KB each)."""
import os
import sys

import numpy as np
import gguf

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "FuzzGGUF")
os.makedirs(out, exist_ok=True)

def tokenizer(w, n_extra):
    toks = ["<|endoftext|>", "H", "e", "l", "o", "Ġ", "w", "r", "d", "!", "He", "ll", "llo", "Hello"]
    toks += ["t%d" % i for i in range(n_extra)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(toks)
    w.add_token_types([3] + [1] * (len(toks) - 1))
    w.add_token_merges(["H e", "l l", "ll o", "He llo"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)

def sentencepiece(w, n_extra):
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "\n", "  "]
    types = [3, 3, 3, 2, 3, 4, 4]
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256
    normal = ["\u2581", "H", "e", "l", "o", "w", "r", "d", "!", "1", "2",
              "He", "ll", "llo", "Hello", "\u2581w", "\u2581wor", "or", "ld"]
    normal += ["t%d" % i for i in range(n_extra)]
    toks += normal
    types += [1] * len(normal)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_scores([0.0] * (7 + 256) + [-float(i) for i in range(len(normal))])
    w.add_add_space_prefix(False)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)

def write(name, types, tok=tokenizer):
    w = gguf.GGUFWriter(os.path.join(out, name), "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    tok(w, 4)
    rng = np.random.default_rng(1)
    for i, t in enumerate(types):
        data = rng.standard_normal((2, 64)).astype(np.float32)
        if t == gguf.GGMLQuantizationType.F32:
            w.add_tensor("t%d" % i, data)
        elif t == gguf.GGMLQuantizationType.F16:
            w.add_tensor("t%d" % i, data.astype(np.float16))
        else:
            q = gguf.quants.quantize(data, t)
            w.add_tensor("t%d" % i, q, raw_shape=q.shape, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

T = gguf.GGMLQuantizationType
write("f32_f16.gguf", [T.F32, T.F16])
quant = []
for t in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q6_K, T.BF16):
    try:
        gguf.quants.quantize(np.zeros((1, 256), np.float32), t)
        quant.append(t)
    except Exception as e:  # a type this gguf version cannot write
        print("skipping", t.name, e, file=sys.stderr)
write("quantised.gguf", quant)
write("sentencepiece.gguf", [T.F32], sentencepiece)
print("wrote", sorted(os.listdir(out)))
