//===- CPUDecoder.cpp - Reference Llama decoder on the CPU ----------------===//
//
// The forward pass: RMSNorm, fused q/k/v projection, RoPE, KV append through
// the compiled append kernel, attention (dense BLAS blocks for prefill, the
// compiled condensate kernels for decode steps), output projection, SwiGLU
// MLP and logits. Every matrix product goes through OpenBLAS (sgemv for a
// single row, sgemm otherwise); the loops here are element-wise only.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/CPUDecoder.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace condensate::decoder {

namespace {

using blas_int = blasint;
using Clock = std::chrono::steady_clock;

/// Adds the time since the last lap to `slot` (a few tens of nanoseconds
/// per lap, against milliseconds of BLAS work per step).
class Lap {
public:
  Lap() : last_(Clock::now()) {}
  void to(double &slot) {
    Clock::time_point now = Clock::now();
    slot += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

private:
  Clock::time_point last_;
};

/// y[rows, out] = x[rows, in] * W[out, in]^T + beta * y: sgemv for one
/// row (the decode step's shape), sgemm for several.
void linear(const float *x, int64_t rows, int64_t in, const float *w,
            int64_t out, float *y, float beta) {
  if (rows == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, blas_int(out), blas_int(in), 1.0f,
                w, blas_int(in), x, 1, beta, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(rows),
                blas_int(out), blas_int(in), 1.0f, x, blas_int(in), w,
                blas_int(in), beta, y, blas_int(out));
}

/// Adds `bias` [n] to each of `rows` rows of y (row stride n).
void addBias(float *y, int64_t rows, const std::vector<float> &bias) {
  if (bias.empty())
    return;
  const int64_t n = int64_t(bias.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] += bias[size_t(i)];
}

/// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for `rows` rows of `n`.
void rmsNorm(const float *x, int64_t rows, int64_t n, const float *w,
             double eps, float *out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i)
      ss += double(xr[i]) * double(xr[i]);
    const float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
    float *o = out + r * n;
    for (int64_t i = 0; i < n; ++i)
      o[i] = xr[i] * inv * w[i];
  }
}

/// exp(x) for x <= 0 (larger x is clamped to 0) in branch-free float
/// arithmetic the compiler vectorises, unlike calls to std::exp: x = n ln2
/// + f with n = round(x / ln2), 2^n placed in the exponent bits, e^f by its
/// degree-7 Taylor polynomial (|f| <= ln2 / 2). Relative error < 1.1e-7
/// (checked against exp() for every float in [-87, 0]); below -87 the
/// result is exp(-87) ~ 1.6e-38, negligible next to the row maximum's 1.
inline float expNonPositive(float x) {
  x = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
  const float magic = 12582912.0f; // 1.5 * 2^23: adding rounds to integer
  float n = (x * 1.44269504088896341f + magic) - magic;
  float f = x - n * 0.693145751953125f; // ln2 split hi/lo for exactness
  f = f - n * 1.42860682030941723e-6f;
  float p = 1.0f / 5040.0f;
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &p, 4);
  bits += int32_t(n) << 23;
  std::memcpy(&p, &bits, 4);
  return p;
}

/// act[r, i] = silu(gu[r, i]) * gu[r, ffn + i], with silu(g) = g sigmoid(g)
/// and sigmoid from t = exp(-|g|) <= 1 so the exponential never overflows.
void swiglu(const float *gu, int64_t rows, int64_t ffn, float *act) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = gu + r * 2 * ffn, *u = g + ffn;
    float *a = act + r * ffn;
    for (int64_t i = 0; i < ffn; ++i) {
      const float t = expNonPositive(-std::fabs(g[i]));
      const float sigmoid = (g[i] >= 0.0f ? 1.0f : t) / (1.0f + t);
      a[i] = g[i] * sigmoid * u[i];
    }
  }
}

/// s[0, valid) becomes softmax(s[0, valid)); s[valid, end) becomes 0 (the
/// causal mask). Written as lane-parallel loops the compiler vectorises:
/// prefill spends a third of its time here otherwise.
void causalSoftmax(float *s, int64_t valid, int64_t end) {
  constexpr int64_t W = 16;
  float lanes[W];
  std::fill(lanes, lanes + W, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + W <= valid; j += W)
    for (int64_t k = 0; k < W; ++k)
      lanes[k] = std::max(lanes[k], s[j + k]);
  float m = *std::max_element(lanes, lanes + W);
  for (; j < valid; ++j)
    m = std::max(m, s[j]);
  for (j = 0; j < valid; ++j)
    s[j] = expNonPositive(s[j] - m);
  double sums[W] = {};
  for (j = 0; j + W <= valid; j += W)
    for (int64_t k = 0; k < W; ++k)
      sums[k] += double(s[j + k]);
  double sum = 0.0;
  for (; j < valid; ++j)
    sum += double(s[j]);
  for (double v : sums)
    sum += v;
  const float inv = float(1.0 / sum);
  for (j = 0; j < valid; ++j)
    s[j] *= inv;
  std::fill(s + valid, s + end, 0.0f);
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // Subnormal: normalise.
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// One layer's KV pages, [numPages, Hkv, P, D] in the KV type, and their
/// summaries [numPages, Hkv, 5, D]. Storage is float-typed so it is
/// float-aligned; f16/bf16 pages use half of it.
struct LayerCache {
  std::vector<float> k, v, summaries;
};

struct Sequence {
  bool live = false;
  std::vector<int32_t> pages;
  std::vector<int32_t> tokens;
};

} // namespace

std::string blasDescription() {
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ')
    config.pop_back();
  return config + "; core " + openblas_get_corename() + "; " +
         std::to_string(openblas_get_num_threads()) + " threads";
}

std::string blasCoreRecommendation() {
  if (std::string(openblas_get_corename()) != "Prescott")
    return "";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2"))
    return "Haswell";
  return "";
}

Result<int64_t> schedulePageSize(const Schedule &schedule) {
  int64_t size = 0;
  auto visit = [&](const Policy &p) -> Status {
    if (p.dense)
      return Status::success();
    if (size && p.pageSize != size)
      return Status::error("the schedule mixes page sizes " +
                           std::to_string(size) + " and " +
                           std::to_string(p.pageSize));
    size = p.pageSize;
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(visit(schedule.defaultPolicy));
  for (const ScheduleRule &r : schedule.rules)
    CONDENSATE_RETURN_IF_ERROR(visit(r.policy));
  return size;
}

Schedule withPageSize(Schedule schedule, int64_t pageSize) {
  if (!schedule.defaultPolicy.dense)
    schedule.defaultPolicy.pageSize = pageSize;
  for (ScheduleRule &r : schedule.rules)
    if (!r.policy.dense)
      r.policy.pageSize = pageSize;
  return schedule;
}

struct CPUDecoder::Impl {
  std::shared_ptr<const LlamaWeights> weights;
  LlamaConfig cfg;
  ModelShape shape;
  DecoderOptions options;
  std::shared_ptr<const CPUProgram> program;
  int64_t numPages = 0;
  int64_t pageElems = 0; ///< floats of storage per page of K (or V)
  std::vector<LayerCache> caches;
  std::vector<Sequence> seqs;
  std::vector<int32_t> freeList; ///< popped from the back
  std::vector<double> invFreq;   ///< [ropeDim / 2]

  // Scratch, grown on demand and reused so steady-state steps allocate
  // nothing.
  std::vector<float> x, h, qkv, q, kNew, vNew, attn, gu, act, stats;
  std::vector<float> lastQ; ///< [numLayers, batch, Hq, D] of the last step
  std::vector<float> ropeCos, ropeSin;
  std::vector<int32_t> pageTable, positions, lens, windows;
  std::vector<double> rep;
  std::vector<float> kSeq, vSeq, scores;
  StepProfile profile, prefillProfile;

  const Sequence *live(SeqId s) const {
    return s >= 0 && s < int64_t(seqs.size()) && seqs[size_t(s)].live
               ? &seqs[size_t(s)]
               : nullptr;
  }
  Status checkSeq(SeqId s) const {
    return live(s) ? Status::success()
                   : Status::error("sequence " + std::to_string(s) +
                                   " does not exist");
  }
  Status checkToken(int32_t t) const {
    if (t < 0 || t >= cfg.vocab)
      return Status::error("token id " + std::to_string(t) +
                           " outside [0, " + std::to_string(cfg.vocab) + ")");
    return Status::success();
  }
  int64_t pagesFor(int64_t tokens) const {
    return (tokens + shape.pageSize - 1) / shape.pageSize;
  }
  /// Checks that every sequence in `which` can grow by `extra` tokens.
  Status checkCapacity(const SeqId *which, int64_t count,
                       int64_t extra) const {
    int64_t need = 0;
    for (int64_t i = 0; i < count; ++i) {
      const Sequence &s = seqs[size_t(which[i])];
      int64_t newLen = int64_t(s.tokens.size()) + extra;
      if (cfg.contextLength > 0 && newLen > cfg.contextLength)
        return Status::error("sequence " + std::to_string(which[i]) +
                             " would reach " + std::to_string(newLen) +
                             " tokens, past the model's context length " +
                             std::to_string(cfg.contextLength));
      need += std::max<int64_t>(0, pagesFor(newLen) - int64_t(s.pages.size()));
    }
    if (need > int64_t(freeList.size()))
      return Status::error("KV cache full: " + std::to_string(need) +
                           " more pages needed, " +
                           std::to_string(freeList.size()) + " of " +
                           std::to_string(numPages) +
                           " free (raise maxTokens)");
    return Status::success();
  }
  void grow(Sequence &s, int64_t newLen) {
    while (int64_t(s.pages.size()) < pagesFor(newLen)) {
      s.pages.push_back(freeList.back());
      freeList.pop_back();
    }
  }

  /// cos/sin of every rotary pair at position `pos`.
  void ropeAngles(int64_t pos) {
    const double p = double(pos) / cfg.ropeLinearScale;
    for (size_t i = 0; i < invFreq.size(); ++i) {
      const double a = p * invFreq[i];
      ropeCos[i] = float(std::cos(a));
      ropeSin[i] = float(std::sin(a));
    }
  }
  /// Rotates `heads` heads of headDim at `v` with the current angles.
  void rope(float *v, int64_t heads) const {
    const int64_t half = cfg.ropeDim / 2, d = cfg.headDim;
    for (int64_t hd = 0; hd < heads; ++hd) {
      float *x = v + hd * d;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = cfg.ropeMode == RopeMode::Adjacent ? 2 * i : i;
        const int64_t b = cfg.ropeMode == RopeMode::Adjacent ? 2 * i + 1
                                                             : i + half;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * ropeCos[size_t(i)] - x1 * ropeSin[size_t(i)];
        x[b] = x0 * ropeSin[size_t(i)] + x1 * ropeCos[size_t(i)];
      }
    }
  }

  /// Reads positions [from, to) of `seq` in layer `l` back from the cache
  /// as float32 into kSeq/vSeq [Hkv][stride][D].
  void gather(int64_t l, const Sequence &seq, int64_t from, int64_t to,
              int64_t stride) {
    const int64_t P = shape.pageSize, D = shape.headDim, G = shape.kvHeads;
    const LayerCache &c = caches[size_t(l)];
    for (int64_t pos = from; pos < to; ++pos) {
      const int64_t page = seq.pages[size_t(pos / P)], slot = pos % P;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t src = ((page * G + g) * P + slot) * D;
        float *kd = kSeq.data() + (g * stride + pos) * D;
        float *vd = vSeq.data() + (g * stride + pos) * D;
        switch (shape.kvType) {
        case KVType::F32:
          std::memcpy(kd, c.k.data() + src, size_t(D) * 4);
          std::memcpy(vd, c.v.data() + src, size_t(D) * 4);
          break;
        case KVType::F16:
        case KVType::BF16: {
          auto *ks = reinterpret_cast<const uint16_t *>(c.k.data()) + src;
          auto *vs = reinterpret_cast<const uint16_t *>(c.v.data()) + src;
          const bool f16 = shape.kvType == KVType::F16;
          for (int64_t i = 0; i < D; ++i) {
            kd[i] = f16 ? halfToFloat(ks[i]) : bf16ToFloat(ks[i]);
            vd[i] = f16 ? halfToFloat(vs[i]) : bf16ToFloat(vs[i]);
          }
          break;
        }
        }
      }
    }
  }

  AppendArgs appendArgs(int64_t l, int64_t batch, int64_t maxPages,
                        const int32_t *table, const int32_t *pos) {
    LayerCache &c = caches[size_t(l)];
    AppendArgs a;
    a.batch = batch;
    a.maxPages = maxPages;
    a.numPages = numPages;
    a.kNew = kNew.data();
    a.vNew = vNew.data();
    a.kCache = c.k.data();
    a.vCache = c.v.data();
    a.pageTable = table;
    a.positions = pos;
    a.summaries = c.summaries.data();
    return a;
  }

  /// Final norm and logits of `rows` rows of x into `out` [rows, vocab].
  void logits(const float *xs, int64_t rows, float *out) {
    const LlamaWeights &w = *weights;
    const int64_t H = cfg.hidden;
    grow(h, rows * H);
    rmsNorm(xs, rows, H, w.outputNorm(), cfg.rmsEps, h.data());
    linear(h.data(), rows, H, w.outputWeights(), cfg.vocab, out, 0.0f);
  }

  static void grow(std::vector<float> &v, int64_t n) {
    if (int64_t(v.size()) < n)
      v.resize(size_t(n));
  }
  static void grow(std::vector<int32_t> &v, int64_t n) {
    if (int64_t(v.size()) < n)
      v.resize(size_t(n));
  }

  Status prefillImpl(SeqId id, const int32_t *tokens, int64_t count,
                     float *lastLogits, std::vector<float> *allLogits,
                     const ProgressFn &progress);
  Status stepImpl(const SeqId *ids, const int32_t *tokens, int64_t batch,
                  float *logitsOut);
};

Status CPUDecoder::Impl::prefillImpl(SeqId id, const int32_t *tokens,
                                     int64_t count, float *lastLogits,
                                     std::vector<float> *allLogits,
                                     const ProgressFn &progress) {
  CONDENSATE_RETURN_IF_ERROR(checkSeq(id));
  if (count <= 0)
    return Status::error("prefill: no tokens");
  for (int64_t i = 0; i < count; ++i)
    CONDENSATE_RETURN_IF_ERROR(checkToken(tokens[i]).withContext("prefill"));
  CONDENSATE_RETURN_IF_ERROR(checkCapacity(&id, 1, count));

  Sequence &seq = seqs[size_t(id)];
  const int64_t p0 = int64_t(seq.tokens.size()), n = p0 + count;
  grow(seq, n);
  seq.tokens.insert(seq.tokens.end(), tokens, tokens + count);

  const LlamaWeights &w = *weights;
  const int64_t H = cfg.hidden, D = cfg.headDim, Hq = cfg.qHeads,
                Hkv = cfg.kvHeads, G = Hq / Hkv, qDim = cfg.qDim(),
                kvDim = cfg.kvDim(), qkvDim = cfg.qkvDim(), F = cfg.ffn;
  const int64_t C = std::max<int64_t>(1, std::min(options.prefillChunk, count));
  const float scale = shape.effectiveScale();

  // Layer-major order: all prompt rows pass layer l before layer l + 1, so
  // only one layer's keys and values are held as float32 at a time.
  std::vector<float> xs(size_t(count * H));
  for (int64_t t = 0; t < count; ++t)
    std::memcpy(xs.data() + t * H, w.tokenEmbedding() + int64_t(tokens[t]) * H,
                size_t(H) * 4);
  grow(h, C * H);
  grow(qkv, C * qkvDim);
  grow(kNew, Hkv * D);
  grow(vNew, Hkv * D);
  grow(attn, C * qDim);
  grow(gu, C * 2 * F);
  grow(act, C * F);
  grow(kSeq, Hkv * n * D);
  grow(vSeq, Hkv * n * D);
  grow(scores, C * n);
  ropeCos.resize(invFreq.size());
  ropeSin.resize(invFreq.size());
  const int64_t maxPages = int64_t(seq.pages.size());
  int32_t pos32 = 0;

  const int64_t chunks = (count + C - 1) / C, total = cfg.numLayers * chunks;
  int64_t done = 0;
  StepProfile &prof = prefillProfile;
  const Clock::time_point prefillStart = Clock::now();
  Lap lap;
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const LayerWeights &L = w.layer(l);
    gather(l, seq, 0, p0, n);
    lap.to(prof.append);
    for (int64_t c0 = 0; c0 < count; c0 += C) {
      const int64_t T = std::min(C, count - c0);
      float *xc = xs.data() + c0 * H;
      rmsNorm(xc, T, H, L.attnNorm.data(), cfg.rmsEps, h.data());
      lap.to(prof.norms);
      linear(h.data(), T, H, L.wqkv.data(), qkvDim, qkv.data(), 0.0f);
      addBias(qkv.data(), T, L.bqkv);
      lap.to(prof.qkv);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = p0 + c0 + t;
        float *row = qkv.data() + t * qkvDim;
        ropeAngles(pos);
        rope(row, Hq);
        rope(row + qDim, Hkv);
        std::memcpy(kNew.data(), row + qDim, size_t(kvDim) * 4);
        std::memcpy(vNew.data(), row + qDim + kvDim, size_t(kvDim) * 4);
        pos32 = int32_t(pos);
        CONDENSATE_RETURN_IF_ERROR(program->append(
            appendArgs(l, 1, maxPages, seq.pages.data(), &pos32)));
      }
      const int64_t end = p0 + c0 + T;
      gather(l, seq, p0 + c0, end, n);
      lap.to(prof.append);
      // Dense causal attention of this block of T query rows over keys
      // [0, end): S = scale Q K^T, row-wise masked softmax, O = S V.
      for (int64_t hq = 0; hq < Hq; ++hq) {
        const int64_t g = hq / G;
        const float *kg = kSeq.data() + g * n * D;
        const float *vg = vSeq.data() + g * n * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(T),
                    blas_int(end), blas_int(D), scale, qkv.data() + hq * D,
                    blas_int(qkvDim), kg, blas_int(D), 0.0f, scores.data(),
                    blas_int(end));
        for (int64_t t = 0; t < T; ++t)
          causalSoftmax(scores.data() + t * end, p0 + c0 + t + 1, end);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(T),
                    blas_int(D), blas_int(end), 1.0f, scores.data(),
                    blas_int(end), vg, blas_int(D), 0.0f, attn.data() + hq * D,
                    blas_int(qDim));
      }
      lap.to(prof.attention);
      linear(attn.data(), T, qDim, L.wo.data(), H, xc, 1.0f);
      addBias(xc, T, L.bo);
      lap.to(prof.output);
      rmsNorm(xc, T, H, L.ffnNorm.data(), cfg.rmsEps, h.data());
      lap.to(prof.norms);
      linear(h.data(), T, H, L.wGateUp.data(), 2 * F, gu.data(), 0.0f);
      lap.to(prof.mlp);
      swiglu(gu.data(), T, F, act.data());
      lap.to(prof.norms);
      linear(act.data(), T, F, L.wDown.data(), H, xc, 1.0f);
      lap.to(prof.mlp);
      if (progress)
        progress(++done, total);
    }
  }

  if (allLogits) {
    allLogits->resize(size_t(count * cfg.vocab));
    for (int64_t c0 = 0; c0 < count; c0 += C) {
      const int64_t T = std::min(C, count - c0);
      logits(xs.data() + c0 * H, T, allLogits->data() + c0 * cfg.vocab);
    }
    if (lastLogits)
      std::memcpy(lastLogits, allLogits->data() + (count - 1) * cfg.vocab,
                  size_t(cfg.vocab) * 4);
  } else if (lastLogits) {
    logits(xs.data() + (count - 1) * H, 1, lastLogits);
  }
  lap.to(prof.logits);
  prof.total +=
      std::chrono::duration<double>(Clock::now() - prefillStart).count();
  prof.steps += count;
  return Status::success();
}

Status CPUDecoder::Impl::stepImpl(const SeqId *ids, const int32_t *tokens,
                                  int64_t B, float *logitsOut) {
  if (B <= 0)
    return Status::error("step: empty batch");
  for (int64_t b = 0; b < B; ++b) {
    CONDENSATE_RETURN_IF_ERROR(checkSeq(ids[b]).withContext("step"));
    CONDENSATE_RETURN_IF_ERROR(checkToken(tokens[b]).withContext("step"));
    for (int64_t c = 0; c < b; ++c)
      if (ids[c] == ids[b])
        return Status::error("step: sequence " + std::to_string(ids[b]) +
                             " appears twice in the batch");
  }
  CONDENSATE_RETURN_IF_ERROR(checkCapacity(ids, B, 1));

  const LlamaWeights &w = *weights;
  const int64_t H = cfg.hidden, Hq = cfg.qHeads, Hkv = cfg.kvHeads,
                qDim = cfg.qDim(), kvDim = cfg.kvDim(), qkvDim = cfg.qkvDim(),
                F = cfg.ffn;
  grow(positions, B);
  grow(lens, B);
  grow(windows, B);
  rep.resize(size_t(B));
  int64_t maxPages = 0;
  for (int64_t b = 0; b < B; ++b) {
    Sequence &s = seqs[size_t(ids[b])];
    const int64_t pos = int64_t(s.tokens.size());
    grow(s, pos + 1);
    s.tokens.push_back(tokens[b]);
    positions[size_t(b)] = int32_t(pos);
    lens[size_t(b)] = int32_t(pos + 1);
    rep[size_t(b)] = repetitionScore(s.tokens.data(), pos + 1,
                                     options.repetitionSpan);
    maxPages = std::max<int64_t>(maxPages, int64_t(s.pages.size()));
  }
  grow(pageTable, B * maxPages);
  for (int64_t b = 0; b < B; ++b) {
    const Sequence &s = seqs[size_t(ids[b])];
    int32_t *row = pageTable.data() + b * maxPages;
    std::copy(s.pages.begin(), s.pages.end(), row);
    std::fill(row + s.pages.size(), row + maxPages, s.pages[0]);
  }

  grow(x, B * H);
  grow(h, B * H);
  grow(qkv, B * qkvDim);
  grow(q, B * qDim);
  grow(kNew, B * kvDim);
  grow(vNew, B * kvDim);
  grow(attn, B * qDim);
  grow(gu, B * 2 * F);
  grow(act, B * F);
  stats.resize(size_t(cfg.numLayers * B * Hq * CPUDecoder::kStatFields));
  lastQ.resize(size_t(cfg.numLayers * B * qDim));
  ropeCos.resize(invFreq.size());
  ropeSin.resize(invFreq.size());
  const Clock::time_point stepStart = Clock::now();
  Lap lap;
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(x.data() + b * H, w.tokenEmbedding() + int64_t(tokens[b]) * H,
                size_t(H) * 4);

  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const LayerWeights &L = w.layer(l);
    rmsNorm(x.data(), B, H, L.attnNorm.data(), cfg.rmsEps, h.data());
    lap.to(profile.norms);
    linear(h.data(), B, H, L.wqkv.data(), qkvDim, qkv.data(), 0.0f);
    addBias(qkv.data(), B, L.bqkv);
    lap.to(profile.qkv);
    for (int64_t b = 0; b < B; ++b) {
      float *row = qkv.data() + b * qkvDim;
      ropeAngles(positions[size_t(b)]);
      rope(row, Hq);
      rope(row + qDim, Hkv);
      std::memcpy(q.data() + b * qDim, row, size_t(qDim) * 4);
      std::memcpy(kNew.data() + b * kvDim, row + qDim, size_t(kvDim) * 4);
      std::memcpy(vNew.data() + b * kvDim, row + qDim + kvDim,
                  size_t(kvDim) * 4);
    }
    std::memcpy(lastQ.data() + l * B * qDim, q.data(), size_t(B * qDim) * 4);
    lap.to(profile.norms);
    CONDENSATE_RETURN_IF_ERROR(program->append(
        appendArgs(l, B, maxPages, pageTable.data(), positions.data())));
    lap.to(profile.append);

    const Policy &policy = program->schedule().policyFor(l, 0);
    for (int64_t b = 0; b < B; ++b)
      windows[size_t(b)] = int32_t(policy.windowFor(rep[size_t(b)]));
    LayerCache &c = caches[size_t(l)];
    AttentionArgs a;
    a.batch = B;
    a.maxPages = maxPages;
    a.numPages = numPages;
    a.q = q.data();
    a.kCache = c.k.data();
    a.vCache = c.v.data();
    a.pageTable = pageTable.data();
    a.lens = lens.data();
    a.windows = windows.data();
    a.summaries = c.summaries.data();
    a.out = attn.data();
    a.stats = stats.data() + l * B * Hq * CPUDecoder::kStatFields;
    CONDENSATE_RETURN_IF_ERROR(program->attend(l, a));
    lap.to(profile.attention);

    linear(attn.data(), B, qDim, L.wo.data(), H, x.data(), 1.0f);
    addBias(x.data(), B, L.bo);
    lap.to(profile.output);
    rmsNorm(x.data(), B, H, L.ffnNorm.data(), cfg.rmsEps, h.data());
    lap.to(profile.norms);
    linear(h.data(), B, H, L.wGateUp.data(), 2 * F, gu.data(), 0.0f);
    lap.to(profile.mlp);
    swiglu(gu.data(), B, F, act.data());
    lap.to(profile.norms);
    linear(act.data(), B, F, L.wDown.data(), H, x.data(), 1.0f);
    lap.to(profile.mlp);
  }
  logits(x.data(), B, logitsOut);
  lap.to(profile.logits);
  profile.total += std::chrono::duration<double>(Clock::now() - stepStart)
                       .count();
  ++profile.steps;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// CPUDecoder
//===----------------------------------------------------------------------===//

CPUDecoder::CPUDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CPUDecoder::~CPUDecoder() = default;

Result<std::unique_ptr<CPUDecoder>>
CPUDecoder::create(std::shared_ptr<const LlamaWeights> weights,
                   const Schedule &schedule, const DecoderOptions &options) {
  if (!weights)
    return Status::error("CPUDecoder: no weights");
  const LlamaConfig &cfg = weights->config();
  if (schedule.numLayers != cfg.numLayers)
    return Status::error("the schedule is for " +
                         std::to_string(schedule.numLayers) +
                         " layers but the model has " +
                         std::to_string(cfg.numLayers));
  Result<int64_t> schedulePage = schedulePageSize(schedule);
  if (!schedulePage)
    return schedulePage.status();
  int64_t pageSize = options.pageSize ? options.pageSize
                                      : (*schedulePage ? *schedulePage : 16);
  if (*schedulePage && *schedulePage != pageSize)
    return Status::error("page size " + std::to_string(pageSize) +
                         " differs from the schedule's page_size " +
                         std::to_string(*schedulePage));
  if (options.prefillChunk <= 0)
    return Status::error("prefillChunk must be > 0");

  auto impl = std::make_unique<Impl>();
  impl->weights = std::move(weights);
  impl->cfg = cfg;
  impl->options = options;
  ModelShape &shape = impl->shape;
  shape.numLayers = cfg.numLayers;
  shape.qHeads = cfg.qHeads;
  shape.kvHeads = cfg.kvHeads;
  shape.headDim = cfg.headDim;
  shape.pageSize = pageSize;
  shape.kvType = options.kvType;
  CONDENSATE_RETURN_IF_ERROR(shape.validate().withContext("model shape"));

  if (options.threads > 0)
    openblas_set_num_threads(options.threads);

  auto program = CPUProgram::compile(shape, schedule);
  if (!program)
    return program.status();
  impl->program = *program;

  int64_t maxTokens = options.maxTokens > 0
                          ? options.maxTokens
                          : (cfg.contextLength > 0 ? cfg.contextLength : 4096);
  impl->numPages = std::max<int64_t>(1, impl->pagesFor(maxTokens));
  if (impl->numPages > std::numeric_limits<int32_t>::max())
    return Status::error("maxTokens " + std::to_string(maxTokens) +
                         " needs more pages than an i32 page table holds");
  impl->pageElems =
      cfg.kvHeads * pageSize * cfg.headDim * kvTypeBytes(options.kvType) / 4;
  try {
    impl->caches.resize(size_t(cfg.numLayers));
    for (LayerCache &c : impl->caches) {
      c.k.resize(size_t(impl->numPages * impl->pageElems));
      c.v.resize(size_t(impl->numPages * impl->pageElems));
      c.summaries.resize(size_t(impl->numPages * cfg.kvHeads * 5 * cfg.headDim));
    }
  } catch (const std::bad_alloc &) {
    return Status::error("out of memory allocating a KV cache of " +
                         std::to_string(impl->numPages) + " pages");
  }
  impl->freeList.resize(size_t(impl->numPages));
  for (int64_t i = 0; i < impl->numPages; ++i) // Page 0 is handed out first.
    impl->freeList[size_t(i)] = int32_t(impl->numPages - 1 - i);
  impl->invFreq.resize(size_t(cfg.ropeDim / 2));
  for (int64_t i = 0; i < cfg.ropeDim / 2; ++i)
    impl->invFreq[size_t(i)] =
        std::pow(cfg.ropeTheta, -2.0 * double(i) / double(cfg.ropeDim));
  return std::unique_ptr<CPUDecoder>(new CPUDecoder(std::move(impl)));
}

const LlamaConfig &CPUDecoder::config() const { return impl_->cfg; }
const ModelShape &CPUDecoder::shape() const { return impl_->shape; }
const DecoderOptions &CPUDecoder::options() const { return impl_->options; }
const CPUProgram &CPUDecoder::program() const { return *impl_->program; }
std::shared_ptr<const CPUProgram> CPUDecoder::programPtr() const {
  return impl_->program;
}

Result<std::shared_ptr<const CPUProgram>>
CPUDecoder::compile(const Schedule &schedule) const {
  Result<int64_t> page = schedulePageSize(schedule);
  if (!page)
    return page.status();
  if (*page && *page != impl_->shape.pageSize)
    return Status::error("the schedule's page_size " + std::to_string(*page) +
                         " differs from the decoder's " +
                         std::to_string(impl_->shape.pageSize));
  return CPUProgram::compile(impl_->shape, schedule);
}

Status CPUDecoder::setProgram(std::shared_ptr<const CPUProgram> program) {
  if (!program)
    return Status::error("setProgram: null program");
  const ModelShape &a = program->shape(), &b = impl_->shape;
  if (a.numLayers != b.numLayers || a.qHeads != b.qHeads ||
      a.kvHeads != b.kvHeads || a.headDim != b.headDim ||
      a.pageSize != b.pageSize || a.kvType != b.kvType ||
      a.effectiveScale() != b.effectiveScale())
    return Status::error("setProgram: the program was compiled for another "
                         "model shape");
  impl_->program = std::move(program);
  return Status::success();
}

CPUDecoder::SeqId CPUDecoder::newSequence() {
  for (size_t i = 0; i < impl_->seqs.size(); ++i)
    if (!impl_->seqs[i].live) {
      impl_->seqs[i] = Sequence();
      impl_->seqs[i].live = true;
      return SeqId(i);
    }
  impl_->seqs.emplace_back();
  impl_->seqs.back().live = true;
  return SeqId(impl_->seqs.size() - 1);
}

Result<CPUDecoder::SeqId> CPUDecoder::fork(SeqId id) {
  CONDENSATE_RETURN_IF_ERROR(impl_->checkSeq(id).withContext("fork"));
  const int64_t need = int64_t(impl_->seqs[size_t(id)].pages.size());
  if (need > int64_t(impl_->freeList.size()))
    return Status::error("fork: KV cache full: " + std::to_string(need) +
                         " pages needed, " +
                         std::to_string(impl_->freeList.size()) + " free");
  SeqId copy = newSequence();
  Sequence &src = impl_->seqs[size_t(id)], &dst = impl_->seqs[size_t(copy)];
  dst.tokens = src.tokens;
  impl_->grow(dst, int64_t(src.tokens.size()));
  const int64_t E = impl_->pageElems,
                S = impl_->cfg.kvHeads * 5 * impl_->cfg.headDim;
  for (LayerCache &c : impl_->caches)
    for (size_t i = 0; i < src.pages.size(); ++i) {
      const int64_t from = src.pages[i], to = dst.pages[i];
      std::memcpy(c.k.data() + to * E, c.k.data() + from * E, size_t(E) * 4);
      std::memcpy(c.v.data() + to * E, c.v.data() + from * E, size_t(E) * 4);
      std::memcpy(c.summaries.data() + to * S, c.summaries.data() + from * S,
                  size_t(S) * 4);
    }
  return copy;
}

Status CPUDecoder::release(SeqId id) {
  CONDENSATE_RETURN_IF_ERROR(impl_->checkSeq(id).withContext("release"));
  Sequence &s = impl_->seqs[size_t(id)];
  impl_->freeList.insert(impl_->freeList.end(), s.pages.rbegin(),
                         s.pages.rend());
  s = Sequence();
  return Status::success();
}

int64_t CPUDecoder::length(SeqId id) const {
  const Sequence *s = impl_->live(id);
  return s ? int64_t(s->tokens.size()) : -1;
}

const std::vector<int32_t> &CPUDecoder::tokens(SeqId id) const {
  static const std::vector<int32_t> none;
  const Sequence *s = impl_->live(id);
  return s ? s->tokens : none;
}

int64_t CPUDecoder::freePages() const {
  return int64_t(impl_->freeList.size());
}
int64_t CPUDecoder::totalPages() const { return impl_->numPages; }

Status CPUDecoder::prefill(SeqId seq, const int32_t *tokens, int64_t count,
                           float *lastLogits, std::vector<float> *allLogits,
                           const ProgressFn &progress) {
  return impl_->prefillImpl(seq, tokens, count, lastLogits, allLogits,
                            progress);
}

Status CPUDecoder::step(const SeqId *seqs, const int32_t *tokens,
                        int64_t batch, float *logits) {
  return impl_->stepImpl(seqs, tokens, batch, logits);
}

const std::vector<float> &CPUDecoder::stats() const { return impl_->stats; }
const std::vector<float> &CPUDecoder::lastQueries() const {
  return impl_->lastQ;
}

const std::vector<int32_t> &CPUDecoder::pages(SeqId id) const {
  static const std::vector<int32_t> none;
  const Sequence *s = impl_->live(id);
  return s ? s->pages : none;
}

CPUDecoder::CacheView CPUDecoder::cache(int64_t layer) const {
  CacheView view;
  if (layer < 0 || layer >= impl_->cfg.numLayers)
    return view;
  const LayerCache &c = impl_->caches[size_t(layer)];
  view.k = c.k.data();
  view.v = c.v.data();
  view.summaries = c.summaries.data();
  view.numPages = impl_->numPages;
  return view;
}
const int32_t *CPUDecoder::lastLens() const { return impl_->lens.data(); }
const StepProfile &CPUDecoder::profile() const { return impl_->profile; }
const StepProfile &CPUDecoder::prefillProfile() const {
  return impl_->prefillProfile;
}
void CPUDecoder::resetProfile() {
  impl_->profile = StepProfile();
  impl_->prefillProfile = StepProfile();
}

Status CPUDecoder::teacherForce(SeqId seq, const int32_t *tokens,
                                int64_t count, std::vector<float> &logits,
                                std::vector<float> *stats) {
  const int64_t V = impl_->cfg.vocab;
  const int64_t perStep =
      impl_->cfg.numLayers * impl_->cfg.qHeads * kStatFields;
  logits.resize(size_t(count * V));
  if (stats)
    stats->resize(size_t(count * perStep));
  for (int64_t i = 0; i < count; ++i) {
    CONDENSATE_RETURN_IF_ERROR(
        step(seq, tokens[i], logits.data() + i * V)
            .withContext("teacher-forced step " + std::to_string(i)));
    if (stats)
      std::memcpy(stats->data() + i * perStep, impl_->stats.data(),
                  size_t(perStep) * 4);
  }
  return Status::success();
}

} // namespace condensate::decoder
