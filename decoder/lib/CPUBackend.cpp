//===- CPUBackend.cpp - The recipe's operations on the CPU ----------------===//
//
// Every float32 matrix product goes through OpenBLAS (sgemv for a single
// row, sgemm otherwise); a product over a quantised matrix dequantises it a
// few rows at a time, dotted with each input row across threads for the
// few rows of decode steps, or a tile at a time into sgemm for prefill.
// Decode attention, prefill attention and the KV append run through the
// compiled condensate kernels (CPUProgram) on a host page pool; prefill
// rows are split across threads. The other loops here are element-wise.
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Model/GGUF.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>

namespace condensate::decoder {

namespace {

using blas_int = blasint;

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

/// y[rows, out] = x[rows, in] * W[out, in]^T + beta * y over a matrix held
/// as quantised blocks (out = w.rows()). Up to kFewRows input rows (decode
/// steps): each thread (`threads` of them) dots 16 rows of W at a time with
/// every input row, block by block without decoding them
/// (WeightMatrix::dotRows). More (prefill): tiles of W are dequantised
/// into `scratch` and multiplied by sgemm.
void quantizedLinear(const float *x, int64_t rows, int64_t in,
                     const WeightMatrix &w, float *y, float beta,
                     int threads, std::vector<float> &scratch) {
  constexpr int64_t kFewRows = 8, kBlock = 16;
  const int64_t out = w.rows();
  if (rows <= kFewRows) {
    const int64_t blocks = (out + kBlock - 1) / kBlock;
    // The sums of each input row over 32 elements (the blocks' offsets
    // multiply them), kept between calls: steady-state steps allocate
    // nothing.
    const int64_t runs = (in + 31) / 32;
    thread_local std::vector<float> sums;
    if (sums.size() < size_t(rows * runs))
      sums.resize(size_t(rows * runs));
    for (int64_t r = 0; r < rows; ++r)
      model::blockSums(x + r * in, in, sums.data() + r * runs);
    const float *xSums = sums.data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * kBlock, n = std::min(kBlock, out - first);
      float part[kBlock];
      for (int64_t r = 0; r < rows; ++r) {
        w.dotRows(first, n, x + r * in, xSums + r * runs, part);
        for (int64_t o = 0; o < n; ++o) {
          float &dst = y[r * out + first + o];
          dst = beta == 0.0f ? part[o] : part[o] + beta * dst;
        }
      }
    }
    return;
  }
  // A tile of about 8 MB of float32 rows.
  const int64_t tile = std::max<int64_t>(kBlock, (int64_t(1) << 21) / in);
  if (scratch.size() < size_t(tile * in))
    scratch.resize(size_t(tile * in));
  // The tile is dequantised on this thread alone: OpenBLAS's threads run
  // the product, and OpenMP's would spin against them.
  for (int64_t first = 0; first < out; first += tile) {
    const int64_t n = std::min(tile, out - first);
    w.rowsF32(first, n, scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(rows),
                blas_int(n), blas_int(in), 1.0f, x, blas_int(in),
                scratch.data(), blas_int(in), beta, y + first, blas_int(out));
  }
}

/// Adds `bias` [n] to each of `rows` rows of y (row stride n).
void addBias(float *y, int64_t rows, const float *bias, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] += bias[i];
}

/// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w (+ out[r] when
/// `accumulate`) for `rows` rows of `n`; out may be x.
void rmsNorm(const float *x, int64_t rows, int64_t n, const float *w,
             double eps, float *out, bool accumulate = false) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i)
      ss += double(xr[i]) * double(xr[i]);
    const float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
    float *o = out + r * n;
    if (accumulate)
      for (int64_t i = 0; i < n; ++i)
        o[i] += xr[i] * inv * w[i];
    else
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
  // n is in [-126, 0]: a multiply, not a shift of a negative value (UB).
  bits += int32_t(n) * (int32_t(1) << 23);
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

/// act[r, i] = gelu(gu[r, i]) * gu[r, ffn + i], gelu's tanh form with
/// tanh(u) = 1 - 2 / (exp(2u) + 1) from exp(-2|u|) <= 1 (no overflow).
void geglu(const float *gu, int64_t rows, int64_t ffn, float *act) {
  const float c = 0.7978845608028654f; // sqrt(2 / pi)
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = gu + r * 2 * ffn, *u = g + ffn;
    float *a = act + r * ffn;
    for (int64_t i = 0; i < ffn; ++i) {
      const float x = g[i], v = c * (x + 0.044715f * x * x * x);
      const float t = expNonPositive(-2.0f * std::fabs(v));
      const float th = (1.0f - t) / (1.0f + t);
      a[i] = 0.5f * x * (1.0f + (v >= 0.0f ? th : -th)) * u[i];
    }
  }
}

/// One layer's KV pages, [numPages, Hkv, P, D] in the KV type, and their
/// summaries [numPages, Hkv, abi::summaryRows(P, sketch bits), D]. Storage is float-typed so it is
/// float-aligned; f16/bf16 pages use half of it.
struct LayerCache {
  std::vector<float> k, v, summaries;
};

/// A schedule compiled for the CPU.
class CPUAttention final : public AttentionProgram {
public:
  explicit CPUAttention(std::shared_ptr<const CPUProgram> program)
      : program(std::move(program)) {}
  const Schedule &schedule() const override { return program->schedule(); }
  double compileSeconds() const override { return program->info().seconds; }
  std::shared_ptr<const CPUProgram> program;
};

const float *host(const Param &p) {
  return reinterpret_cast<const float *>(uintptr_t(p.address));
}
Param param(const float *data, size_t size) {
  return Param{uint64_t(reinterpret_cast<uintptr_t>(data)), int64_t(size)};
}
Param param(const std::vector<float> &v) { return param(v.data(), v.size()); }
Param param(const WeightMatrix &m) {
  Param p = param(m.f32(), size_t(m.rows() * m.cols()));
  p.matrix = &m;
  return p;
}

class CPUBackend final : public Backend {
public:
  static Result<std::unique_ptr<Backend>> create(const BackendSetup &setup);

  std::string description() const override { return blasDescription(); }
  const WeightFootprint &weightFootprint() const override { return footprint_; }
  double compileSeconds() const override { return compileSeconds_; }
  bool synchronous() const override { return true; }
  int64_t maxRows() const override { return 0; }
  int64_t tableWidth(int64_t pages) const override { return pages; }
  const ModelParams &params() const override { return params_; }

  Result<std::shared_ptr<const AttentionProgram>>
  compile(const Schedule &schedule) const override {
    auto program = CPUProgram::compile(shape_, schedule);
    if (!program)
      return program.status();
    return std::shared_ptr<const AttentionProgram>(
        std::make_shared<CPUAttention>(*program));
  }
  std::shared_ptr<const AttentionProgram> program() const override {
    return program_;
  }
  Status setProgram(std::shared_ptr<const AttentionProgram> p) override {
    auto cpu = std::dynamic_pointer_cast<const CPUAttention>(p);
    if (!cpu)
      return Status::error("setProgram: not a CPU program");
    const ModelShape &a = cpu->program->shape(), &b = shape_;
    if (a.numLayers != b.numLayers || a.qHeads != b.qHeads ||
        a.kvHeads != b.kvHeads || a.headDim != b.headDim ||
        a.pageSize != b.pageSize || a.kvType != b.kvType ||
        a.sketchBits != b.sketchBits ||
        a.effectiveScale() != b.effectiveScale())
      return Status::error("setProgram: the program was compiled for another "
                           "model shape");
    program_ = std::move(cpu);
    return Status::success();
  }

  Status copyPage(int32_t from, int32_t to) override {
    const int64_t E = pageElems_,
                  S = abi::summaryElements(1, modelDims(shape_));
    for (LayerCache &c : caches_) {
      std::memcpy(c.k.data() + to * E, c.k.data() + from * E, size_t(E) * 4);
      std::memcpy(c.v.data() + to * E, c.v.data() + from * E, size_t(E) * 4);
      std::memcpy(c.summaries.data() + to * S, c.summaries.data() + from * S,
                  size_t(S) * 4);
    }
    return Status::success();
  }
  Decoder::CacheView cache(int64_t layer) const override {
    Decoder::CacheView view;
    if (layer < 0 || layer >= cfg_.numLayers)
      return view;
    const LayerCache &c = caches_[size_t(layer)];
    view.k = c.k.data();
    view.v = c.v.data();
    view.summaries = c.summaries.data();
    view.numPages = numPages_;
    return view;
  }

  Status begin(const ForwardBatch &batch) override {
    batch_ = &batch;
    for (int b = 0; b < kNumBufs; ++b) {
      const size_t n = size_t(batch.rows * width(Buf(b)));
      if (bufs_[size_t(b)].size() < n)
        bufs_[size_t(b)].resize(n);
    }
    if (batch.kind == ForwardKind::Decode) {
      stats_.resize(size_t(cfg_.numLayers * batch.rows * cfg_.qHeads *
                           Decoder::kStatFields));
      queries_.resize(size_t(cfg_.numLayers * batch.rows * cfg_.qDim()));
    }
    return Status::success();
  }
  Status run(const std::function<Status()> &body) override { return body(); }
  Status finish(float *logits, int64_t logitRows) override {
    if (logits && logitRows > 0)
      std::memcpy(logits, buf(Buf::Logits), size_t(logitRows * cfg_.vocab) * 4);
    return Status::success();
  }
  const std::vector<float> &stats() const override { return stats_; }
  std::vector<float> &stats() override { return stats_; }
  const std::vector<float> &queries() const override { return queries_; }

  Status embed(float scale) override {
    const int64_t H = cfg_.hidden;
    const WeightMatrix &table = *params_.embedding.matrix;
    for (int64_t r = 0; r < batch_->rows; ++r) {
      float *x = buf(Buf::X) + r * H;
      table.rowsF32(batch_->tokens[size_t(r)], 1, x);
      for (int64_t i = 0; i < H; ++i)
        x[i] *= scale;
    }
    return Status::success();
  }
  Status rmsNorm(Buf in, const Param &weight, Buf out, Rows rows,
                 bool accumulate) override {
    const int64_t H = width(in);
    decoder::rmsNorm(buf(in) + rows.first * H, count(rows), H, host(weight),
                     cfg_.rmsEps, buf(out), accumulate);
    return Status::success();
  }
  Status headNorm(Buf qOrK, const Param &weight) override {
    const int64_t D = cfg_.headDim, rows = batch_->rows * width(qOrK) / D;
    decoder::rmsNorm(buf(qOrK), rows, D, host(weight), cfg_.rmsEps,
                     buf(qOrK));
    return Status::success();
  }
  Status linear(Buf in, const Param &weight, const Param &bias, Buf out,
                bool accumulate, Rows rows) override {
    const int64_t K = width(in), N = width(out), R = count(rows);
    if (weight.size != N * K)
      return Status::error("linear: a weight of " +
                           std::to_string(weight.size) + " elements for a [" +
                           std::to_string(N) + ", " + std::to_string(K) +
                           "] product");
    if (weight.matrix && weight.matrix->quantized())
      quantizedLinear(buf(in) + rows.first * K, R, K, *weight.matrix, buf(out),
                      accumulate ? 1.0f : 0.0f, threads_, tile_);
    else
      decoder::linear(buf(in) + rows.first * K, R, K, host(weight), N,
                      buf(out), accumulate ? 1.0f : 0.0f);
    if (bias.present())
      addBias(buf(out), R, host(bias), N);
    return Status::success();
  }
  Status splitQKV() override {
    const int64_t qDim = cfg_.qDim(), kvDim = cfg_.kvDim(),
                  qkvDim = cfg_.qkvDim();
    for (int64_t r = 0; r < batch_->rows; ++r) {
      const float *row = buf(Buf::QKV) + r * qkvDim;
      std::memcpy(buf(Buf::Q) + r * qDim, row, size_t(qDim) * 4);
      std::memcpy(buf(Buf::K) + r * kvDim, row + qDim, size_t(kvDim) * 4);
      std::memcpy(buf(Buf::V) + r * kvDim, row + qDim + kvDim,
                  size_t(kvDim) * 4);
    }
    return Status::success();
  }
  Status rope(Buf qOrK, int64_t layer) override {
    const int64_t half = cfg_.ropeDim / 2, D = cfg_.headDim,
                  heads = qOrK == Buf::Q ? cfg_.qHeads : cfg_.kvHeads;
    const bool adjacent = cfg_.ropeMode == RopeMode::Adjacent;
    const std::vector<double> &invFreq =
        cfg_.localLayer(layer) ? invFreqLocal_ : invFreq_;
    for (int64_t r = 0; r < batch_->rows; ++r) {
      const double p = double(batch_->positions[size_t(r)]);
      for (size_t i = 0; i < invFreq.size(); ++i) {
        const double a = p * invFreq[i];
        ropeCos_[i] = float(std::cos(a));
        ropeSin_[i] = float(std::sin(a));
      }
      float *v = buf(qOrK) + r * heads * D;
      for (int64_t hd = 0; hd < heads; ++hd) {
        float *x = v + hd * D;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = adjacent ? 2 * i : i,
                        b = adjacent ? 2 * i + 1 : i + half;
          const float x0 = x[a], x1 = x[b];
          x[a] = x0 * ropeCos_[size_t(i)] - x1 * ropeSin_[size_t(i)];
          x[b] = x0 * ropeSin_[size_t(i)] + x1 * ropeCos_[size_t(i)];
        }
      }
    }
    return Status::success();
  }
  Status append(int64_t l) override {
    LayerCache &c = caches_[size_t(l)];
    AppendArgs a;
    a.maxPages = batch_->tableWidth;
    a.numPages = numPages_;
    a.kCache = c.k.data();
    a.vCache = c.v.data();
    a.summaries = c.summaries.data();
    const CPUProgram &program = *program_->program;
    // One call for every row: a prefill's rows of one page are
    // consecutive, in position order, which append_kv asks.
    a.batch = batch_->rows;
    a.kNew = buf(Buf::K);
    a.vNew = buf(Buf::V);
    a.pageTable = batch_->pageTable.data();
    a.positions = batch_->positions.data();
    return program.append(a);
  }
  Status attend(int64_t l) override {
    const int64_t B = batch_->rows, hq = cfg_.qHeads, qDim = cfg_.qDim();
    LayerCache &c = caches_[size_t(l)];
    const bool dense = dense_ && !batch_->denseLayers.empty() &&
                       batch_->denseLayers[size_t(l)];
    const CPUProgram &program = dense ? *dense_ : *program_->program;
    const int32_t *lens = batch_->lens.data();
    // Sequences and key/value heads are independent: attention whose keys
    // and values are worth a thread's start (kParallelAttendElements) runs
    // as one call a thread, each on a run of sequences with about equal
    // positions or, with fewer sequences than threads, on a share of the
    // heads (CPUProgram::KVShare).
    int64_t positions = 0;
    for (int64_t r = 0; r < B; ++r)
      positions += lens[r];
    const int64_t perPosition = 2 * cfg_.kvDim();
    const int64_t chunks =
        positions * perPosition >= kParallelAttendElements ? threads_ : 1;
    const int64_t parts = std::min<int64_t>(chunks, cfg_.kvHeads);
    if (B < chunks && parts > 1)
      return runEach(parts, Workers::OpenMP, [&](int64_t part) {
        AttentionArgs a;
        cacheArgs(a, c, 0);
        a.batch = B;
        a.lens = lens;
        a.windows = batch_->windows.data() + l * B;
        a.summaries = c.summaries.data();
        a.out = buf(Buf::Attn);
        a.stats = stats_.data() + l * B * hq * Decoder::kStatFields;
        return program.attend(l, a, {part, parts});
      });
    return runChunks(
        B, chunks, Workers::OpenMP, [&](int64_t r) { return int64_t(lens[r]); },
        [&](int64_t r0, int64_t r1) {
          AttentionArgs a;
          cacheArgs(a, c, r0);
          a.batch = r1 - r0;
          a.lens = lens + r0;
          a.windows = batch_->windows.data() + l * B + r0;
          a.summaries = c.summaries.data();
          a.out = buf(Buf::Attn) + r0 * qDim;
          a.stats = stats_.data() + (l * B + r0) * hq * Decoder::kStatFields;
          return program.attend(l, a);
        });
  }
  Status prefillAttend(int64_t l) override {
    // The rows are consecutive positions of one sequence. They are cut into
    // one chunk per thread with equal work (a row reads the keys its window
    // lets it see); each chunk is a prefill call of its own, a "sequence"
    // whose last position is the chunk's last row.
    const int64_t T = batch_->rows, qDim = cfg_.qDim();
    const int32_t *pos = batch_->positions.data();
    const int64_t window =
        prefillWindowOf(prefillSchedule_, l, cfg_.kvHeads).window;
    LayerCache &c = caches_[size_t(l)];
    const CPUProgram &program = *prefill_;
    return runChunks(
        T, threads_, Workers::Plain,
        [&](int64_t r) {
          const int64_t seen = int64_t(pos[r]) + 1;
          return window > 0 ? std::min(seen, window) : seen;
        },
        [&](int64_t r0, int64_t r1) {
          const int32_t len = pos[r1 - 1] + 1,
                        starts[2] = {0, int32_t(r1 - r0)};
          PrefillArgs a;
          cacheArgs(a, c, r0);
          a.rows = r1 - r0;
          a.seqs = 1;
          a.lens = &len;
          a.rowStarts = starts;
          a.out = buf(Buf::Attn) + r0 * qDim;
          return program.prefill(l, a);
        });
  }
  Status activation(Activation kind) override {
    switch (kind) {
    case Activation::SwiGLU:
      swiglu(buf(Buf::GU), batch_->rows, cfg_.ffn, buf(Buf::Act));
      return Status::success();
    case Activation::GeGLU:
      geglu(buf(Buf::GU), batch_->rows, cfg_.ffn, buf(Buf::Act));
      return Status::success();
    }
    return Status::error("unknown activation");
  }
  Status keepQueries(int64_t l) override {
    const int64_t n = batch_->rows * cfg_.qDim();
    std::memcpy(queries_.data() + l * n, buf(Buf::Q), size_t(n) * 4);
    return Status::success();
  }

private:
  /// Elements of K and V a decode step's attention reads at least before
  /// it is split across threads (tens of microseconds' reading against an
  /// OpenMP region's start on workers just back from a product).
  static constexpr int64_t kParallelAttendElements = int64_t(1) << 16;

  /// Where runChunks runs its chunks: on the OpenMP workers the products
  /// over quantised weights use (they spin for a while after each product,
  /// and plain threads beside them get no core), or on plain threads (an
  /// OpenMP region's idle workers would spin against OpenBLAS's own between
  /// the float32 products: a third of the prefill).
  enum class Workers { OpenMP, Plain };

  /// Cuts rows [0, n) into up to `chunks` runs of about equal cost(r) and
  /// runs fn(r0, r1) on each, one on this thread; the first error, if any.
  static Status runChunks(int64_t n, int64_t chunks, Workers workers,
                          const std::function<int64_t(int64_t)> &cost,
                          const std::function<Status(int64_t, int64_t)> &fn) {
    chunks = std::max<int64_t>(1, std::min(chunks, n));
    int64_t total = 0;
    for (int64_t r = 0; r < n; ++r)
      total += cost(r);
    std::vector<int64_t> bounds{0};
    int64_t acc = 0;
    for (int64_t r = 0; r < n; ++r) {
      acc += cost(r);
      if (acc * chunks >= total * int64_t(bounds.size()) &&
          int64_t(bounds.size()) < chunks)
        bounds.push_back(r + 1);
    }
    if (bounds.back() != n)
      bounds.push_back(n);
    return runEach(int64_t(bounds.size()) - 1, workers, [&](int64_t i) {
      return fn(bounds[size_t(i)], bounds[size_t(i + 1)]);
    });
  }

  /// fn(i) for i in [0, n) at once, one on this thread; the first error.
  static Status runEach(int64_t n, Workers workers,
                        const std::function<Status(int64_t)> &fn) {
    std::vector<Status> status(size_t(std::max<int64_t>(n, 0)));
    auto run = [&](int64_t i) { status[size_t(i)] = fn(i); };
    if (workers == Workers::OpenMP && n > 1) {
#pragma omp parallel for num_threads(int(n)) schedule(static, 1)
      for (int64_t i = 0; i < n; ++i)
        run(i);
    } else {
      std::vector<std::thread> threads;
      for (int64_t i = 1; i < n; ++i)
        threads.emplace_back(run, i);
      if (n > 0)
        run(0);
      for (std::thread &t : threads)
        t.join();
    }
    for (const Status &st : status)
      CONDENSATE_RETURN_IF_ERROR(st);
    return Status::success();
  }

  /// What a layer's attention or prefill call reads from row r0 on: the
  /// queries, the layer's cache and the rows' page tables.
  template <typename Args> void cacheArgs(Args &a, LayerCache &c, int64_t r0) {
    a.maxPages = batch_->tableWidth;
    a.numPages = numPages_;
    a.q = buf(Buf::Q) + r0 * cfg_.qDim();
    a.kCache = c.k.data();
    a.vCache = c.v.data();
    a.pageTable = batch_->pageTable.data() + r0 * batch_->tableWidth;
  }

  float *buf(Buf b) { return bufs_[size_t(b)].data(); }
  int64_t width(Buf b) const { return bufferWidth(b, cfg_); }
  int64_t count(Rows r) const { return r.count < 0 ? batch_->rows : r.count; }

  std::shared_ptr<const ModelWeights> weights_;
  ModelConfig cfg_;
  ModelShape shape_;
  ModelParams params_;
  WeightFootprint footprint_;
  std::shared_ptr<const CPUAttention> program_;
  double compileSeconds_ = 0.0;
  int64_t numPages_ = 0;
  int64_t pageElems_ = 0; ///< floats of storage per page of K (or V)
  std::vector<LayerCache> caches_;
  /// ModelWeights::ropeFrequencies of the global and the local layers.
  std::vector<double> invFreq_, invFreqLocal_;

  const ForwardBatch *batch_ = nullptr;
  // Scratch, grown on demand and reused so steady-state steps allocate
  // nothing.
  std::vector<std::vector<float>> bufs_ =
      std::vector<std::vector<float>>(kNumBufs);
  std::vector<float> stats_, queries_;
  std::vector<float> ropeCos_, ropeSin_, tile_;
  int threads_ = 1; ///< of the products over quantised matrices
  /// The prefill functions (decoder::prefillSchedule) and their schedule.
  std::shared_ptr<const CPUProgram> prefill_;
  /// BackendSetup::dense compiled (prefill_ when the two schedules agree).
  std::shared_ptr<const CPUProgram> dense_;
  Schedule prefillSchedule_;
};

Result<std::unique_ptr<Backend>> CPUBackend::create(const BackendSetup &setup) {
  auto be = std::make_unique<CPUBackend>();
  be->weights_ = setup.weights;
  be->cfg_ = setup.weights->config();
  be->shape_ = setup.shape;
  const ModelConfig &cfg = be->cfg_;
  if (setup.options.threads > 0)
    openblas_set_num_threads(setup.options.threads);
  be->threads_ = setup.options.threads > 0 ? int(setup.options.threads)
                                           : omp_get_max_threads();
  auto program = CPUProgram::compile(be->shape_, setup.schedule);
  if (!program)
    return program.status();
  be->program_ = std::make_shared<CPUAttention>(*program);
  be->compileSeconds_ = (*program)->info().seconds;
  be->prefillSchedule_ = setup.prefill;
  auto prefill = CPUProgram::compile(be->shape_, setup.prefill);
  if (!prefill)
    return prefill.status();
  be->prefill_ = *prefill;
  be->compileSeconds_ += (*prefill)->info().seconds;
  if (setup.dense) {
    if (setup.options.prefillWindow == 0) {
      be->dense_ = be->prefill_; // the same schedule (prefillSchedule)
    } else {
      auto dense = CPUProgram::compile(be->shape_, *setup.dense);
      if (!dense)
        return dense.status();
      be->dense_ = *dense;
      be->compileSeconds_ += (*dense)->info().seconds;
    }
  }

  const ModelWeights &w = *setup.weights;
  be->params_.embedding = param(w.tokenEmbedding());
  be->params_.output = param(w.outputWeights());
  be->params_.outputNorm = param(w.outputNorm(), size_t(cfg.hidden));
  be->footprint_.heldBytes = w.bytes();
  be->footprint_.stepBytes =
      w.bytes() - (cfg.tiedOutput ? 0 : w.tokenEmbedding().bytes());
  for (int64_t l = 0; l < cfg.numLayers; ++l) {
    const LayerWeights &L = w.layer(l);
    be->params_.layers.push_back(
        {param(L.attnNorm), param(L.wqkv), param(L.bqkv), param(L.wo),
         param(L.bo), param(L.ffnNorm), param(L.wGateUp), param(L.wDown),
         param(L.qNorm), param(L.kNorm), param(L.postAttnNorm),
         param(L.postFfnNorm)});
  }

  be->numPages_ = setup.numPages;
  be->pageElems_ = cfg.kvHeads * setup.shape.pageSize * cfg.headDim *
                   kvTypeBytes(setup.shape.kvType) / 4;
  try {
    be->caches_.resize(size_t(cfg.numLayers));
    for (LayerCache &c : be->caches_) {
      c.k.resize(size_t(be->numPages_ * be->pageElems_));
      c.v.resize(size_t(be->numPages_ * be->pageElems_));
      c.summaries.resize(
          size_t(abi::summaryElements(be->numPages_, modelDims(setup.shape))));
    }
  } catch (const std::bad_alloc &) {
    return Status::error("out of memory allocating a KV cache of " +
                         std::to_string(be->numPages_) + " pages");
  }
  be->invFreq_ = w.ropeFrequencies(false);
  be->invFreqLocal_ = w.ropeFrequencies(true);
  be->ropeCos_.resize(be->invFreq_.size());
  be->ropeSin_.resize(be->invFreq_.size());
  return std::unique_ptr<Backend>(std::move(be));
}

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

Result<std::unique_ptr<Backend>> createCPUBackend(const BackendSetup &setup) {
  return CPUBackend::create(setup);
}

} // namespace condensate::decoder
