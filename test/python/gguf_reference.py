#!/usr/bin/env python3
"""Independent reference for condensate's model layer (GGUF, tokenizer, Llama).

Built only on numpy, the `gguf` package (GGUFReader, gguf.quants.dequantize)
and Hugging Face `tokenizers`; it shares no code with the C++ so that the two
can check each other. Install: pip install numpy gguf tokenizers

Subcommands
-----------
tokenize MODEL [--text T ...] [--texts-file F] [--no-special] [--out OUT]
    Token ids of each text with a tokenizers ByteLevel BPE built from the
    GGUF vocabulary and merges. --texts-file is a JSON list of strings; a text
    whose UTF-8 cannot be represented (lone surrogates) is rejected. Control
    tokens (token_type 3) are recognised in the text unless --no-special.
    Output (stdout or OUT): JSON {"ids": [[int, ...], ...]} in input order.

dequant MODEL --out OUT [--tensor NAME[:FIRST:COUNT] ...] [--rows FIRST:COUNT]
    Dequantised float32 values of the named tensors (all tensors if none).
    NAME:FIRST:COUNT (or --rows, for every tensor without its own range)
    keeps rows FIRST..FIRST+COUNT-1 (a row is ne[0] values).
    Writes OUT (raw little-endian float32, tensors concatenated in the order
    listed) and OUT.json: {"tensors": [{"name", "type", "shape" (GGUF order,
    ne[0] first), "first_row", "num_rows", "offset" (in floats into OUT),
    "count"}]}.

logits MODEL (--prompt TEXT | --ids I,J,...) [--chat] [--last N]
             [--rope adjacent|halves] [--generate K] [--dtype float64|float32]
             [--out OUT.npy]
    A plain numpy Llama forward pass over the prompt, in float64 by default.
    OUT.npy: float32 array [P, n_vocab] (npy v1.0, little-endian, C order),
        the logits of the last P positions (all positions unless --last N).
    OUT.json (same stem): {"token_ids": [...], "positions": [first P
        positions' indices], "n_vocab", "rope": "adjacent", "model", "prompt"}.
    Prints the top-5 next tokens of the last position, and with --generate K
    greedily continues K tokens (recomputing the whole prompt each step).

Model notes (verified on SmolLM2-135M-Instruct Q4_1):
* RoPE pairs ADJACENT elements (x[2i], x[2i+1]) of each head with angle
  pos * theta^(-2i/head_dim) -- llama.cpp's "NORM" mode. llama.cpp's HF->GGUF
  conversion permutes the q/k projection rows so that this equals HF's
  rotate-half form. With --rope halves (pairs x[i], x[i+d/2]) on the GGUF
  weights the predictions are wrong ("The capital of France is" no longer
  continues with " Paris").
* Qwen2 (general.architecture qwen2): llama.cpp's NEOX rope, i.e. halves
  (its conversion does not permute q/k), and biases on q, k and v; the
  default --rope follows the architecture. Its tokenizer splits by Llama
  3's regex with single digits (tokenizer.ggml.pre qwen2).
* GQA: q head h uses kv head h // (n_head / n_head_kv).
* Output projection is tied to token_embd when output.weight is absent.
* RMSNorm: x / sqrt(mean(x^2) + eps) * w, eps from
  llama.attention.layer_norm_rms_epsilon.
"""
import argparse
import json
import os
import sys

import numpy as np


def _reader(path):
    import gguf

    return gguf.GGUFReader(path)


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------

def build_tokenizer(reader):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise SystemExit(f"tokenizer.ggml.model is {model!r}, expected 'gpt2'")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = _field(reader, "tokenizer.ggml.merges")
    pre = _field(reader, "tokenizer.ggml.pre", "smollm")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    if pre in ("qwen2", "llama-bpe", "llama3"):
        # Hugging Face's own form of these (their tokenizer.json): split by
        # Llama 3's regex, Qwen2's with single digits, then byte-level.
        from tokenizers import Regex
        digits = r"\p{N}" if pre == "qwen2" else r"\p{N}{1,3}"
        pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                   + digits + r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                   r"\s+(?!\S)|\s+")
        steps = [pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    else:
        steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        if pre == "smollm":
            steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tk.decoder = decoders.ByteLevel()
    specials = [AddedToken(tokens[i], special=True, normalized=False)
                for i, t in enumerate(types) if t == 3]
    tk.add_special_tokens(specials)
    return tk


def cmd_tokenize(args):
    reader = _reader(args.model)
    tk = build_tokenizer(reader)
    texts = list(args.text or [])
    if args.texts_file:
        with open(args.texts_file, "r", encoding="utf-8") as f:
            texts += json.load(f)
    tk.encode_special_tokens = args.no_special
    ids = [tk.encode(t, add_special_tokens=False).ids for t in texts]
    out = json.dumps({"ids": ids})
    if args.out:
        with open(args.out, "w") as f:
            f.write(out)
    else:
        print(out)


# --------------------------------------------------------------------------
# Dequantisation
# --------------------------------------------------------------------------

def dequant_tensor(t):
    from gguf.quants import dequantize

    values = dequantize(t.data, t.tensor_type)
    # numpy order is the reverse of GGUF's: the last axis is ne[0].
    return np.asarray(values, dtype=np.float32).reshape(
        [int(d) for d in reversed(t.shape)])


def cmd_dequant(args):
    reader = _reader(args.model)
    by_name = {t.name: t for t in reader.tensors}
    specs = args.tensor or [t.name for t in reader.tensors]
    entries, offset = [], 0
    with open(args.out, "wb") as f:
        for spec in specs:
            name, _, row_range = spec.partition(":")
            row_range = row_range or args.rows
            t = by_name[name]
            shape = [int(d) for d in t.shape]
            rows = dequant_tensor(t).reshape(-1, shape[0])
            first, count = 0, rows.shape[0]
            if row_range:
                first, count = (int(x) for x in row_range.split(":"))
            data = np.ascontiguousarray(rows[first:first + count], dtype="<f4")
            f.write(data.tobytes())
            entries.append({"name": name, "type": t.tensor_type.name,
                            "shape": shape, "first_row": first,
                            "num_rows": int(data.shape[0]), "offset": offset,
                            "count": int(data.size)})
            offset += int(data.size)
    with open(args.out + ".json", "w") as f:
        json.dump({"tensors": entries}, f)


# --------------------------------------------------------------------------
# Llama forward pass
# --------------------------------------------------------------------------

class Llama:
    def __init__(self, reader, dtype=np.float64):
        arch = _field(reader, "general.architecture")
        if arch not in ("llama", "qwen2"):
            raise SystemExit(f"general.architecture is {arch!r}, expected "
                             "'llama' or 'qwen2'")
        p = arch + "."
        self.n_layer = int(_field(reader, p + "block_count"))
        self.n_embd = int(_field(reader, p + "embedding_length"))
        self.n_head = int(_field(reader, p + "attention.head_count"))
        self.n_head_kv = int(_field(reader, p + "attention.head_count_kv",
                                    self.n_head))
        self.eps = float(_field(reader, p + "attention.layer_norm_rms_epsilon"))
        self.theta = float(_field(reader, p + "rope.freq_base", 10000.0))
        self.head_dim = self.n_embd // self.n_head
        self.default_rope = "halves" if arch == "qwen2" else "adjacent"
        self.n_rot = int(_field(reader, p + "rope.dimension_count",
                                self.head_dim))
        tensors = {t.name: t for t in reader.tensors}

        def w(name):
            return dequant_tensor(tensors[name]).astype(dtype, copy=False)

        self.tok_embd = w("token_embd.weight")            # [n_vocab, n_embd]
        self.output = (w("output.weight") if "output.weight" in tensors
                       else self.tok_embd)
        self.output_norm = w("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            b = f"blk.{i}."
            layer = {k: w(b + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            # Qwen2's query/key/value biases (zero where a model has none).
            for k in ("attn_q", "attn_k", "attn_v"):
                name = b + k + ".bias"
                layer[k + "_b"] = (w(name) if name in tensors
                                   else np.zeros(layer[k].shape[0], dtype))
            self.layers.append(layer)

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, mode):
        # x: [T, heads, head_dim]; rotate the first n_rot dims of each head.
        T = x.shape[0]
        half = self.n_rot // 2
        freqs = self.theta ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        angles = np.arange(T, dtype=np.float64)[:, None] * freqs[None, :]
        cos = np.cos(angles)[:, None, :].astype(x.dtype)
        sin = np.sin(angles)[:, None, :].astype(x.dtype)
        out = x.copy()
        if mode == "adjacent":
            a, b = x[..., 0:self.n_rot:2], x[..., 1:self.n_rot:2]
            out[..., 0:self.n_rot:2] = a * cos - b * sin
            out[..., 1:self.n_rot:2] = a * sin + b * cos
        else:
            a, b = x[..., :half], x[..., half:self.n_rot]
            out[..., :half] = a * cos - b * sin
            out[..., half:self.n_rot] = a * sin + b * cos
        return out

    def forward(self, ids, rope_mode="adjacent"):
        T = len(ids)
        hd, nh, nkv = self.head_dim, self.n_head, self.n_head_kv
        x = self.tok_embd[np.asarray(ids)]                 # [T, n_embd]
        mask = np.triu(np.full((T, T), -np.inf, dtype=x.dtype), k=1)
        for L in self.layers:
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ L["attn_q"].T + L["attn_q_b"]).reshape(T, nh, hd)
            k = (h @ L["attn_k"].T + L["attn_k_b"]).reshape(T, nkv, hd)
            v = (h @ L["attn_v"].T + L["attn_v_b"]).reshape(T, nkv, hd)
            q, k = self.rope(q, rope_mode), self.rope(k, rope_mode)
            group = nh // nkv
            attn = np.empty((T, nh, hd), dtype=x.dtype)
            for head in range(nh):
                kv = head // group
                scores = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
                scores -= scores.max(axis=-1, keepdims=True)
                p = np.exp(scores)
                p /= p.sum(axis=-1, keepdims=True)
                attn[:, head, :] = p @ v[:, kv, :]
            x = x + attn.reshape(T, nh * hd) @ L["attn_output"].T
            h = self.rmsnorm(x, L["ffn_norm"])
            gate = h @ L["ffn_gate"].T
            up = h @ L["ffn_up"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ L["ffn_down"].T
        x = self.rmsnorm(x, self.output_norm)
        return x @ self.output.T                            # [T, n_vocab]


def cmd_logits(args):
    reader = _reader(args.model)
    tk = build_tokenizer(reader)
    if args.ids:
        ids = [int(i) for i in args.ids.split(",") if i.strip()]
        prompt = None
    else:
        prompt = args.prompt
        if args.chat:
            prompt = ("<|im_start|>user\n" + prompt +
                      "<|im_end|>\n<|im_start|>assistant\n")
        ids = tk.encode(prompt, add_special_tokens=False).ids
    if not ids:
        raise SystemExit("empty prompt")
    model = Llama(reader, np.float32 if args.dtype == "float32" else np.float64)
    if args.rope is None:
        args.rope = model.default_rope
    logits = model.forward(ids, args.rope)
    last = logits[-1]
    top = np.argsort(-last)[:5]
    print(f"prompt ids ({len(ids)}): {ids}")
    print("top-5 next tokens:")
    for t in top:
        print(f"  {int(t):6d} {last[t]:10.4f} {tk.decode([int(t)])!r}")
    if args.generate:
        seq = list(ids)
        for _ in range(args.generate):
            seq.append(int(np.argmax(model.forward(seq, args.rope)[-1])))
        print("greedy continuation:", repr(tk.decode(seq[len(ids):])))
    if args.out:
        n = len(ids) if not args.last else min(args.last, len(ids))
        np.save(args.out, np.ascontiguousarray(logits[-n:], dtype="<f4"))
        meta = {"token_ids": ids, "positions": list(range(len(ids) - n, len(ids))),
                "n_vocab": int(logits.shape[1]), "rope": args.rope,
                "model": os.path.abspath(args.model), "prompt": prompt,
                "logits_file": os.path.abspath(args.out),
                "dtype": "float32", "computed_in": args.dtype}
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(meta, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokenize")
    t.add_argument("model")
    t.add_argument("--text", action="append")
    t.add_argument("--texts-file")
    t.add_argument("--no-special", action="store_true")
    t.add_argument("--out")
    t.set_defaults(func=cmd_tokenize)

    d = sub.add_parser("dequant")
    d.add_argument("model")
    d.add_argument("--tensor", action="append")
    d.add_argument("--rows")
    d.add_argument("--out", required=True)
    d.set_defaults(func=cmd_dequant)

    g = sub.add_parser("logits")
    g.add_argument("model")
    g.add_argument("--prompt")
    g.add_argument("--ids")
    g.add_argument("--chat", action="store_true")
    g.add_argument("--last", type=int, default=0)
    g.add_argument("--rope", choices=["adjacent", "halves"], default=None,
                   help="default: the architecture's (llama adjacent, qwen2 halves)")
    g.add_argument("--generate", type=int, default=0)
    g.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="arithmetic precision (float32 loads faster)")
    g.add_argument("--out")
    g.set_defaults(func=cmd_logits)

    args = ap.parse_args(argv)
    if args.cmd == "logits" and not (args.prompt or args.ids):
        ap.error("logits needs --prompt or --ids")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
