//===- SyntheticModel.h - Small random GGUF models and their float64 forward ===//
//
// What the decoder tests share: a TinySpec names an architecture (llama,
// qwen2, gemma3) and its sizes; tinyTensors draws its weights, tinyGGUF
// writes them as an in-memory GGUF, loadTiny loads that, and naiveForward is
// the plain float64 forward of the same weights (every position's logits),
// written from the architectures' definitions and sharing no code with the
// decoder.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_DECODER_SYNTHETICMODEL_H
#define CONDENSATE_TEST_DECODER_SYNTHETICMODEL_H

#include "../Half.h"
#include "ModelTestSupport.h"

#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace condensate::decoder::testsupport {

using model::GGUFFile;
using model::GGMLType;
using model::testsupport::GGUFBuilder;

struct TinySpec {
  std::string arch = "llama";
  int64_t layers = 2, hidden = 64, qHeads = 4, kvHeads = 2, ffn = 96,
          vocab = 50;
  double theta = 10000.0, eps = 1e-5, linearScale = 1.0;
  bool bias = false, tied = true;
  /// attention.key_length when > 0 (else hidden / qHeads).
  int64_t keyLength = 0;
  /// gemma3's attention.sliding_window (written when > 0).
  int64_t slidingWindow = 0;
  /// A rope_freqs.weight tensor of per-pair divisors (Llama 3.1's scaling).
  bool ropeFactors = false;
  /// Matrices with rows of a multiple of 32 stored as Q8_0 blocks (their
  /// values in the TensorMap are the ones the blocks decode to).
  bool q8 = false;
  bool gemma() const { return arch == "gemma3"; }
  int64_t headDim() const { return keyLength ? keyLength : hidden / qHeads; }
  /// Gemma 3's local layers: all but every sixth.
  bool local(int64_t l) const {
    return gemma() && slidingWindow > 0 && (l + 1) % 6 != 0;
  }
};

/// Weights by GGUF tensor name, float32 in [out, in] order.
using TensorMap = std::map<std::string, std::pair<std::vector<uint64_t>,
                                                  std::vector<float>>>;

using condensate::test::floatToHalf;
using condensate::test::halfToFloat;

/// Q8_0 blocks of `v` (a multiple of 32 values): per block a half scale d =
/// max|x| / 127 and 32 int8 q = round(x / d). `v` becomes what they decode
/// to (q d), so that quantising it again gives the same blocks.
inline std::vector<uint8_t> quantizeQ8_0(std::vector<float> &v) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < v.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i)
      amax = std::max(amax, std::fabs(v[i]));
    const uint16_t dh = floatToHalf(amax / 127.0f);
    const float d = halfToFloat(dh);
    out.push_back(uint8_t(dh & 0xff));
    out.push_back(uint8_t(dh >> 8));
    for (size_t i = b; i < b + 32; ++i) {
      const int q = std::clamp(int(std::lround(v[i] / d)), -127, 127);
      out.push_back(uint8_t(int8_t(q)));
      v[i] = float(q) * d;
    }
  }
  return out;
}

inline bool storedAsQ8(const TinySpec &s, const std::vector<uint64_t> &dims) {
  return s.q8 && dims.size() == 2 && dims[0] % 32 == 0;
}

inline TensorMap tinyTensors(const TinySpec &s, uint32_t seed) {
  std::mt19937 rng(seed);
  TensorMap t;
  auto add = [&](const std::string &name, int64_t ne0, int64_t ne1,
                 float scale, float offset = 0.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(ne0 * (ne1 ? ne1 : 1)));
    for (float &x : v)
      x = offset + dist(rng);
    std::vector<uint64_t> dims = {uint64_t(ne0)};
    if (ne1)
      dims.push_back(uint64_t(ne1));
    if (storedAsQ8(s, dims))
      (void)quantizeQ8_0(v);
    t[name] = {dims, v};
  };
  const int64_t H = s.hidden, D = s.headDim();
  add("token_embd.weight", H, s.vocab, 1.0f);
  if (!s.tied)
    add("output.weight", H, s.vocab, 0.3f);
  add("output_norm.weight", H, 0, 0.1f, 1.0f);
  if (s.ropeFactors) {
    // Divisors from 1 (high frequencies) to 8 (low), as Llama 3.1's.
    std::vector<float> f(static_cast<size_t>(D / 2));
    for (size_t i = 0; i < f.size(); ++i)
      f[i] = 1.0f + 7.0f * float(i) / float(f.size() - 1);
    t["rope_freqs.weight"] = {{uint64_t(D / 2)}, f};
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const float w = 1.0f / std::sqrt(float(H));
    add(b + "attn_norm.weight", H, 0, 0.1f, 1.0f);
    add(b + "attn_q.weight", H, s.qHeads * D, 2 * w);
    add(b + "attn_k.weight", H, s.kvHeads * D, 2 * w);
    add(b + "attn_v.weight", H, s.kvHeads * D, w);
    if (s.bias) {
      add(b + "attn_q.bias", s.qHeads * D, 0, 0.3f);
      add(b + "attn_k.bias", s.kvHeads * D, 0, 0.3f);
      add(b + "attn_v.bias", s.kvHeads * D, 0, 0.3f);
    }
    add(b + "attn_output.weight", s.qHeads * D, H, w);
    add(b + "ffn_norm.weight", H, 0, 0.1f, 1.0f);
    add(b + "ffn_gate.weight", H, s.ffn, w);
    add(b + "ffn_up.weight", H, s.ffn, w);
    add(b + "ffn_down.weight", s.ffn, H, 1.0f / std::sqrt(float(s.ffn)));
    if (s.gemma()) {
      add(b + "attn_q_norm.weight", D, 0, 0.1f, 1.0f);
      add(b + "attn_k_norm.weight", D, 0, 0.1f, 1.0f);
      add(b + "post_attention_norm.weight", H, 0, 0.1f, 1.0f);
      add(b + "post_ffw_norm.weight", H, 0, 0.1f, 1.0f);
    }
  }
  return t;
}

inline std::vector<uint8_t> tinyGGUF(const TinySpec &s, const TensorMap &tensors) {
  GGUFBuilder g;
  const std::string p = s.arch + ".";
  g.addString("general.architecture", s.arch);
  g.addU32(p + "block_count", uint32_t(s.layers));
  g.addU32(p + "context_length", 4096);
  g.addU32(p + "embedding_length", uint32_t(s.hidden));
  g.addU32(p + "feed_forward_length", uint32_t(s.ffn));
  g.addU32(p + "attention.head_count", uint32_t(s.qHeads));
  g.addU32(p + "attention.head_count_kv", uint32_t(s.kvHeads));
  g.addF32(p + "rope.freq_base", float(s.theta));
  g.addF32(p + "attention.layer_norm_rms_epsilon", float(s.eps));
  if (s.linearScale != 1.0) {
    g.addString(p + "rope.scaling.type", "linear");
    g.addF32(p + "rope.scaling.factor", float(s.linearScale));
  }
  if (s.keyLength) {
    g.addU32(p + "attention.key_length", uint32_t(s.keyLength));
    g.addU32(p + "attention.value_length", uint32_t(s.keyLength));
  }
  if (s.slidingWindow)
    g.addU32(p + "attention.sliding_window", uint32_t(s.slidingWindow));
  for (const auto &[name, entry] : tensors) {
    if (storedAsQ8(s, entry.first)) {
      std::vector<float> v = entry.second;
      g.addTensor(name, uint32_t(GGMLType::Q8_0), entry.first,
                  quantizeQ8_0(v));
      continue;
    }
    std::vector<uint8_t> bytes(entry.second.size() * 4);
    std::memcpy(bytes.data(), entry.second.data(), bytes.size());
    g.addTensor(name, uint32_t(GGMLType::F32), entry.first, bytes);
  }
  return g.build();
}

/// The plain float64 forward: logits [T, vocab] of every position.
inline std::vector<double> naiveForward(const TinySpec &s, const TensorMap &t,
                                 const std::vector<int32_t> &ids) {
  const int64_t T = int64_t(ids.size()), H = s.hidden, D = s.headDim(),
                Hq = s.qHeads, Hkv = s.kvHeads, F = s.ffn;
  auto W = [&](const std::string &n) -> const std::vector<float> & {
    return t.at(n).second;
  };
  // y[out] = W[out, in] x[in] (+ bias)
  auto matvec = [](const std::vector<float> &w, const std::vector<double> &x,
                   int64_t out, const std::vector<float> *bias) {
    const int64_t in = int64_t(x.size());
    std::vector<double> y(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias ? double((*bias)[size_t(o)]) : 0.0;
      for (int64_t i = 0; i < in; ++i)
        acc += double(w[size_t(o * in + i)]) * x[size_t(i)];
      y[size_t(o)] = acc;
    }
    return y;
  };
  auto rms = [&](const std::vector<double> &x, const std::vector<float> &w) {
    double ss = 0;
    for (double v : x)
      ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + s.eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] * inv * double(w[i]);
    return y;
  };
  // Gemma 3: per-head RMSNorm of q and k; local layers rotate with base
  // 10000 and no scaling.
  auto headRms = [&](std::vector<double> &v, const std::vector<float> &w) {
    std::vector<double> head(static_cast<size_t>(D));
    for (size_t h = 0; h < v.size() / size_t(D); ++h) {
      std::copy(v.begin() + long(h * D), v.begin() + long((h + 1) * D),
                head.begin());
      head = rms(head, w);
      std::copy(head.begin(), head.end(), v.begin() + long(h * D));
    }
  };
  auto rope = [&](std::vector<double> &v, int64_t heads, int64_t pos,
                  bool local) {
    const bool halves = s.arch != "llama";
    const double theta = local ? 10000.0 : s.theta,
                 linear = local ? 1.0 : s.linearScale;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double factor =
            s.ropeFactors ? t.at("rope_freqs.weight").second[size_t(i)] : 1.0;
        const double ang = double(pos) / linear / factor *
                           std::pow(theta, -2.0 * double(i) / double(D));
        const int64_t a = h * D + (halves ? i : 2 * i);
        const int64_t b = h * D + (halves ? i + D / 2 : 2 * i + 1);
        const double x0 = v[size_t(a)], x1 = v[size_t(b)];
        v[size_t(a)] = x0 * std::cos(ang) - x1 * std::sin(ang);
        v[size_t(b)] = x0 * std::sin(ang) + x1 * std::cos(ang);
      }
  };
  std::vector<std::vector<double>> x(static_cast<size_t>(T));
  for (int64_t p = 0; p < T; ++p) {
    x[size_t(p)].assign(W("token_embd.weight").begin() + ids[size_t(p)] * H,
                        W("token_embd.weight").begin() +
                            (ids[size_t(p)] + 1) * H);
    if (s.gemma())
      for (double &e : x[size_t(p)])
        e *= std::sqrt(double(H));
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const bool local = s.local(l);
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::vector<float> *bq = s.bias ? &W(b + "attn_q.bias") : nullptr;
    const std::vector<float> *bk = s.bias ? &W(b + "attn_k.bias") : nullptr;
    const std::vector<float> *bv = s.bias ? &W(b + "attn_v.bias") : nullptr;
    std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t p = 0; p < T; ++p) {
      auto h = rms(x[size_t(p)], W(b + "attn_norm.weight"));
      q[size_t(p)] = matvec(W(b + "attn_q.weight"), h, Hq * D, bq);
      k[size_t(p)] = matvec(W(b + "attn_k.weight"), h, Hkv * D, bk);
      v[size_t(p)] = matvec(W(b + "attn_v.weight"), h, Hkv * D, bv);
      if (s.gemma()) {
        headRms(q[size_t(p)], W(b + "attn_q_norm.weight"));
        headRms(k[size_t(p)], W(b + "attn_k_norm.weight"));
      }
      rope(q[size_t(p)], Hq, p, local);
      rope(k[size_t(p)], Hkv, p, local);
    }
    for (int64_t p = 0; p < T; ++p) {
      std::vector<double> o(static_cast<size_t>(Hq * D), 0.0);
      for (int64_t hq = 0; hq < Hq; ++hq) {
        const int64_t g = hq / (Hq / Hkv);
        // A local layer's query p sees keys p - window + 1 .. p.
        const int64_t first =
            local ? std::max<int64_t>(0, p - s.slidingWindow + 1) : 0;
        std::vector<double> sc(static_cast<size_t>(p + 1), 0.0);
        double m = -1e300, z = 0;
        for (int64_t j = first; j <= p; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < D; ++c)
            dot += q[size_t(p)][size_t(hq * D + c)] *
                   k[size_t(j)][size_t(g * D + c)];
          sc[size_t(j)] = dot / std::sqrt(double(D));
          m = std::max(m, sc[size_t(j)]);
        }
        for (int64_t j = first; j <= p; ++j)
          z += (sc[size_t(j)] = std::exp(sc[size_t(j)] - m));
        for (int64_t j = first; j <= p; ++j)
          for (int64_t c = 0; c < D; ++c)
            o[size_t(hq * D + c)] +=
                sc[size_t(j)] / z * v[size_t(j)][size_t(g * D + c)];
      }
      auto proj = matvec(W(b + "attn_output.weight"), o, H, nullptr);
      if (s.gemma())
        proj = rms(proj, W(b + "post_attention_norm.weight"));
      for (int64_t i = 0; i < H; ++i)
        x[size_t(p)][size_t(i)] += proj[size_t(i)];
      auto h = rms(x[size_t(p)], W(b + "ffn_norm.weight"));
      auto g = matvec(W(b + "ffn_gate.weight"), h, F, nullptr);
      auto u = matvec(W(b + "ffn_up.weight"), h, F, nullptr);
      for (int64_t i = 0; i < F; ++i) {
        const double a = g[size_t(i)];
        const double act =
            s.gemma() ? 0.5 * a *
                            (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                             (a + 0.044715 * a * a * a)))
                      : a / (1.0 + std::exp(-a));
        g[size_t(i)] = act * u[size_t(i)];
      }
      auto down = matvec(W(b + "ffn_down.weight"), g, H, nullptr);
      if (s.gemma())
        down = rms(down, W(b + "post_ffw_norm.weight"));
      for (int64_t i = 0; i < H; ++i)
        x[size_t(p)][size_t(i)] += down[size_t(i)];
    }
  }
  std::vector<double> out;
  const std::vector<float> &wo =
      s.tied ? W("token_embd.weight") : W("output.weight");
  for (int64_t p = 0; p < T; ++p) {
    auto h = rms(x[size_t(p)], W("output_norm.weight"));
    auto lg = matvec(wo, h, s.vocab, nullptr);
    out.insert(out.end(), lg.begin(), lg.end());
  }
  return out;
}

inline std::shared_ptr<const ModelWeights>
loadTiny(const TinySpec &s, const TensorMap &t,
         WeightStorage storage = WeightStorage::Float32) {
  Result<GGUFFile> f = GGUFFile::fromBuffer(tinyGGUF(s, t), "tiny.gguf");
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok())
    return nullptr;
  auto w = ModelWeights::load(*f, storage);
  EXPECT_TRUE(w.ok()) << w.message();
  return w.ok() ? *w : nullptr;
}

inline std::vector<int32_t> randomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t &t : ids)
    t = dist(rng);
  return ids;
}

/// A schedule for the fallback memory's tests (DecoderOptions::
/// fallbackMemory) on a 3-layer model with 300-odd positions, pages of 16:
/// layer 0 can never certify (tau 1e-12), layer 1 always can (tau 0.7, its
/// extras open, reading fewer bytes than dense), layer 2 is sparse without
/// a certificate.
inline const char *kFallbackMemorySchedule = R"({"default": "dense", "rules": [
    {"layers": [0], "policy": {"anchor": 1, "window": 8, "topk": 16,
     "selector": "sketch", "bits": 4, "tau": 1e-12, "max_extra": 4}},
    {"layers": [1], "policy": {"anchor": 1, "window": 8, "topk": 16,
     "selector": "sketch", "bits": 4, "tau": 0.7, "max_extra": 4096}},
    {"layers": [2], "policy": {"anchor": 1, "window": 8, "topk": 16,
     "selector": "sketch", "bits": 4}}]})";

} // namespace condensate::decoder::testsupport

#endif // CONDENSATE_TEST_DECODER_SYNTHETICMODEL_H
