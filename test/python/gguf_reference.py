#!/usr/bin/env python3
"""Independent reference for condensate's model layer (GGUF, tokenizer, Llama).

Built only on numpy, the `gguf` package (GGUFReader, gguf.quants.dequantize)
and Hugging Face `tokenizers`; it shares no code with the C++ so that the two
can check each other. Install: pip install numpy gguf tokenizers

Subcommands
-----------
tokenize MODEL [--text T ...] [--texts-file F] [--no-special] [--out OUT]
    Token ids of each text. tokenizer.ggml.model "gpt2": a tokenizers
    ByteLevel BPE built from the GGUF vocabulary and merges. "llama"
    (SentencePiece BPE, e.g. Gemma 3; needs pip install sentencepiece
    protobuf): the `sentencepiece` library itself, on a ModelProto rebuilt
    from the GGUF pieces, scores and types (BPE, byte fallback, identity
    normalizer, add_dummy_prefix = tokenizer.ggml.add_space_prefix). Two
    things undo llama.cpp's conversion: the unknown_token_id piece is typed
    UNKNOWN (sentencepiece needs one), and user-defined pieces get their
    spaces back as U+2581, as in the original tokenizer.model. sentencepiece
    never parses control-token text, so the text is first cut at control
    tokens (leftmost, longest), the pieces between are encoded on their own
    (each with the dummy prefix when it is on; llama.cpp also adds one after
    user-defined tokens) and the ids joined. --texts-file is a JSON list of
    strings; a text whose UTF-8 cannot be represented (lone surrogates) is
    rejected. Control tokens (token_type 3) are recognised in the text unless
    --no-special. Output (stdout or OUT): JSON {"ids": [[int, ...], ...]} in
    input order.

dequant MODEL --out OUT [--tensor NAME[:FIRST:COUNT] ...] [--rows FIRST:COUNT]
    Dequantised float32 values of the named tensors (all tensors if none).
    NAME:FIRST:COUNT (or --rows, for every tensor without its own range)
    keeps rows FIRST..FIRST+COUNT-1 (a row is ne[0] values).
    Writes OUT (raw little-endian float32, tensors concatenated in the order
    listed) and OUT.json: {"tensors": [{"name", "type", "shape" (GGUF order,
    ne[0] first), "first_row", "num_rows", "offset" (in floats into OUT),
    "count"}]}.

kv MODEL CAPTURE [--tolerance T]
    Checks a `condensate-decode --capture-kv CAPTURE` folder: the queries of
    the last prompt position and every position's keys and values after
    RoPE, from this forward in float64 over capture.json's prompt_ids,
    against q.npy, k.npy and v.npy (max |difference| / max |value| per
    layer and tensor; exit status 1 above T, default 1e-3).

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

class _SentencePieceTokenizer:
    """The part of tokenizers.Tokenizer's interface the subcommands use
    (encode(...).ids, decode, encode_special_tokens), over sentencepiece."""

    def __init__(self, reader):
        import re
        import sentencepiece
        from sentencepiece import sentencepiece_model_pb2 as pb

        tokens = _field(reader, "tokenizer.ggml.tokens")
        scores = _field(reader, "tokenizer.ggml.scores")
        types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
        if scores is None or len(scores) != len(tokens):
            raise SystemExit("tokenizer.ggml.scores missing or of the wrong "
                             "length")
        unk = _field(reader, "tokenizer.ggml.unknown_token_id")
        proto = pb.ModelProto()
        Piece = pb.ModelProto.SentencePiece
        # GGUF token_type codes are sentencepiece's Type numbers.
        kinds = {1: Piece.NORMAL, 2: Piece.UNKNOWN, 3: Piece.CONTROL,
                 4: Piece.USER_DEFINED, 5: Piece.UNUSED, 6: Piece.BYTE}
        if unk is None and 2 not in types:
            raise SystemExit("tokenizer.ggml.unknown_token_id missing: "
                             "sentencepiece needs an unknown piece")
        for i, (text, score, kind) in enumerate(zip(tokens, scores, types)):
            p = proto.pieces.add()
            kind = Piece.UNKNOWN if i == unk else kinds.get(kind, Piece.NORMAL)
            if kind == Piece.USER_DEFINED:
                # llama.cpp's converter writes U+2581 in user-defined tokens
                # as ' ' so that its raw-text split finds runs of spaces.
                text = text.replace(" ", "\u2581")
            p.piece = text
            p.score = score
            p.type = kind
        trainer = proto.trainer_spec
        trainer.model_type = pb.TrainerSpec.BPE
        trainer.byte_fallback = True
        trainer.vocab_size = len(tokens)
        for key, name in (("unknown", "unk"), ("bos", "bos"), ("eos", "eos"),
                          ("padding", "pad")):
            value = _field(reader, f"tokenizer.ggml.{key}_token_id")
            setattr(trainer, name + "_id", -1 if value is None else int(value))
        norm = proto.normalizer_spec
        norm.name = "identity"
        norm.add_dummy_prefix = bool(
            _field(reader, "tokenizer.ggml.add_space_prefix", True))
        norm.remove_extra_whitespaces = False
        norm.escape_whitespaces = True
        self.sp = sentencepiece.SentencePieceProcessor(
            model_proto=proto.SerializeToString())
        controls = sorted({t for t, k in zip(tokens, types) if k == 3 and t},
                          key=len, reverse=True)
        # Alternatives longest first: leftmost match, longest there.
        self.control_re = re.compile(
            "(" + "|".join(re.escape(t) for t in controls) + ")"
        ) if controls else None
        self.ids = {}
        for i, (t, k) in enumerate(zip(tokens, types)):
            if k == 3:
                self.ids.setdefault(t, i)
        self.bos = _field(reader, "tokenizer.ggml.bos_token_id")
        self.add_bos = bool(
            _field(reader, "tokenizer.ggml.add_bos_token", False))
        self.encode_special_tokens = False  # True: control text is plain

    def encode(self, text, add_special_tokens=True):
        from types import SimpleNamespace

        ids = [int(self.bos)] if add_special_tokens and self.add_bos else []
        parts = ([text] if self.encode_special_tokens or not self.control_re
                 else self.control_re.split(text))
        # re.split puts the captured control texts at the odd indices.
        for i, part in enumerate(parts):
            if i % 2:
                ids.append(self.ids[part])
            elif part:
                ids += self.sp.encode(part)
        return SimpleNamespace(ids=ids)

    def decode(self, ids):
        return self.sp.decode([int(i) for i in ids])


def build_tokenizer(reader):
    model = _field(reader, "tokenizer.ggml.model")
    if model == "llama":
        return _SentencePieceTokenizer(reader)
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if model != "gpt2":
        raise SystemExit(f"tokenizer.ggml.model is {model!r}, expected 'gpt2' "
                         "or 'llama'")
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
        if arch not in ("llama", "qwen2", "gemma3"):
            raise SystemExit(f"general.architecture is {arch!r}, expected "
                             "'llama', 'qwen2' or 'gemma3'")
        p = arch + "."
        self.arch = arch
        self.n_layer = int(_field(reader, p + "block_count"))
        self.n_embd = int(_field(reader, p + "embedding_length"))
        self.n_head = int(_field(reader, p + "attention.head_count"))
        self.n_head_kv = int(_field(reader, p + "attention.head_count_kv",
                                    self.n_head))
        self.eps = float(_field(reader, p + "attention.layer_norm_rms_epsilon"))
        self.theta = float(_field(reader, p + "rope.freq_base", 10000.0))
        self.head_dim = int(_field(reader, p + "attention.key_length",
                                   self.n_embd // self.n_head))
        self.default_rope = "adjacent" if arch == "llama" else "halves"
        # Gemma 3 (Hugging Face's Gemma3ForCausalLM): embeddings times
        # sqrt(n_embd); per-head RMSNorm of q and k before RoPE; the
        # attention and MLP outputs RMSNorm'd before the residual adds; GeGLU
        # (gelu, tanh form); layers i with (i + 1) % 6 != 0 are local: they
        # see the last `sliding_window` positions and use RoPE base 10000
        # (rope_local_base_freq), the others the file's freq_base; q.k scaled
        # by query_pre_attn_scalar^-0.5 = head_dim^-0.5 (hidden / heads for
        # the 62-layer 27B). The GGUF's norm weights already hold (1 + w).
        self.gemma = arch == "gemma3"
        self.window = int(_field(reader, p + "attention.sliding_window", 0)) \
            if self.gemma else 0
        self.local_theta = 10000.0
        scalar = (self.n_embd // self.n_head
                  if self.gemma and self.n_layer == 62 else self.head_dim)
        self.scale = 1.0 / np.sqrt(scalar)
        self.n_rot = int(_field(reader, p + "rope.dimension_count",
                                self.head_dim))
        tensors = {t.name: t for t in reader.tensors}

        def w(name):
            return dequant_tensor(tensors[name]).astype(dtype, copy=False)

        self.tok_embd = w("token_embd.weight")            # [n_vocab, n_embd]
        self.output = (w("output.weight") if "output.weight" in tensors
                       else self.tok_embd)
        self.output_norm = w("output_norm.weight")
        # Llama 3.1's rope scaling, as llama.cpp stores it: per-pair divisors
        # of the frequencies.
        self.rope_factors = (w("rope_freqs.weight").astype(np.float64)
                             if "rope_freqs.weight" in tensors else None)
        self.layers = []
        for i in range(self.n_layer):
            b = f"blk.{i}."
            names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                     "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
            if self.gemma:
                names += ["attn_q_norm", "attn_k_norm", "post_attention_norm",
                          "post_ffw_norm"]
            layer = {k: w(b + k + ".weight") for k in names}
            # Qwen2's query/key/value biases (zero where a model has none).
            for k in ("attn_q", "attn_k", "attn_v"):
                name = b + k + ".bias"
                layer[k + "_b"] = (w(name) if name in tensors
                                   else np.zeros(layer[k].shape[0], dtype))
            self.layers.append(layer)

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def local(self, i):
        return self.gemma and self.window > 0 and (i + 1) % 6 != 0

    def rope(self, x, mode, theta=None):
        # x: [T, heads, head_dim]; rotate the first n_rot dims of each head.
        T = x.shape[0]
        half = self.n_rot // 2
        theta = self.theta if theta is None else theta
        freqs = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        if self.rope_factors is not None:
            freqs = freqs / self.rope_factors[:half]
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

    def forward(self, ids, rope_mode="adjacent", record=None):
        """Logits of every position; with `record` (a list), appends each
        layer's (queries of the last position [n_head, head_dim], keys and
        values [T, n_head_kv, head_dim]) after RoPE, as attention sees them."""
        T = len(ids)
        hd, nh, nkv = self.head_dim, self.n_head, self.n_head_kv
        x = self.tok_embd[np.asarray(ids)]                 # [T, n_embd]
        if self.gemma:
            x = x * np.sqrt(self.n_embd)
        causal = np.triu(np.full((T, T), -np.inf, dtype=x.dtype), k=1)
        for i, L in enumerate(self.layers):
            mask, theta = causal, self.theta
            if self.local(i):
                # Query t sees keys t - window + 1 .. t.
                mask = causal + np.tril(np.full((T, T), -np.inf, dtype=x.dtype),
                                        k=-self.window)
                theta = self.local_theta
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ L["attn_q"].T + L["attn_q_b"]).reshape(T, nh, hd)
            k = (h @ L["attn_k"].T + L["attn_k_b"]).reshape(T, nkv, hd)
            v = (h @ L["attn_v"].T + L["attn_v_b"]).reshape(T, nkv, hd)
            if self.gemma:
                q = self.rmsnorm(q, L["attn_q_norm"])
                k = self.rmsnorm(k, L["attn_k_norm"])
            q, k = self.rope(q, rope_mode, theta), self.rope(k, rope_mode, theta)
            if record is not None:
                record.append((q[-1].copy(), k.copy(), v.copy()))
            group = nh // nkv
            attn = np.empty((T, nh, hd), dtype=x.dtype)
            for head in range(nh):
                kv = head // group
                scores = q[:, head, :] @ k[:, kv, :].T * self.scale + mask
                scores -= scores.max(axis=-1, keepdims=True)
                p = np.exp(scores)
                p /= p.sum(axis=-1, keepdims=True)
                attn[:, head, :] = p @ v[:, kv, :]
            o = attn.reshape(T, nh * hd) @ L["attn_output"].T
            if self.gemma:
                o = self.rmsnorm(o, L["post_attention_norm"])
            x = x + o
            h = self.rmsnorm(x, L["ffn_norm"])
            gate = h @ L["ffn_gate"].T
            up = h @ L["ffn_up"].T
            if self.gemma:
                act = 0.5 * gate * (1.0 + np.tanh(
                    np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)))
            else:
                act = gate / (1.0 + np.exp(-gate))
            o = (act * up) @ L["ffn_down"].T
            if self.gemma:
                o = self.rmsnorm(o, L["post_ffw_norm"])
            x = x + o
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


def _bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def cmd_kv(args):
    """Checks a `condensate-decode --capture-kv DIR` folder: this forward
    over its prompt ids, in float64, against its q.npy, k.npy and v.npy."""
    with open(os.path.join(args.capture, "capture.json")) as f:
        meta = json.load(f)
    ids = meta["prompt_ids"]
    model = Llama(_reader(args.model))
    record = []
    model.forward(ids, args.rope or model.default_rope, record)
    raw = {x: np.load(os.path.join(args.capture, x + ".npy"))
           for x in ("q", "k", "v")}
    if meta["kv_type"] == "bf16":
        raw["k"], raw["v"] = _bf16_to_f32(raw["k"]), _bf16_to_f32(raw["v"])
    worst = 0.0
    for i, layer in enumerate(meta["layers"]):
        q, k, v = record[layer]
        ref = {"q": q, "k": k.transpose(1, 0, 2), "v": v.transpose(1, 0, 2)}
        errs = []
        for x in ("q", "k", "v"):
            got = raw[x][i].astype(np.float64)
            if got.shape != ref[x].shape:
                raise SystemExit(f"layer {layer} {x}: shape {got.shape}, "
                                 f"expected {ref[x].shape}")
            err = np.abs(got - ref[x]).max() / max(np.abs(ref[x]).max(), 1e-30)
            errs.append(err)
            worst = max(worst, err)
        print(f"layer {layer}: max error / max |value|: q {errs[0]:.2e} "
              f"k {errs[1]:.2e} v {errs[2]:.2e}")
    print(f"worst {worst:.2e} (tolerance {args.tolerance:.0e})")
    if not worst <= args.tolerance:
        raise SystemExit(f"captured KV differs from the reference: {worst:.2e}")


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

    c = sub.add_parser("kv")
    c.add_argument("model")
    c.add_argument("capture", help="a condensate-decode --capture-kv folder")
    c.add_argument("--rope", choices=["adjacent", "halves"], default=None)
    c.add_argument("--tolerance", type=float, default=1e-3)
    c.set_defaults(func=cmd_kv)

    args = ap.parse_args(argv)
    if args.cmd == "logits" and not (args.prompt or args.ids):
        ap.error("logits needs --prompt or --ids")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
