//===- Backend.h - The operations the layer recipe runs, per device -------===//
//
// The recipe (Recipe.cpp) says once what a forward pass does; a Backend
// says how each step runs on its device: where the activations and weights
// live, which BLAS and kernels compute them, and whether the pass is
// replayed from a captured graph. The host-side page bookkeeping
// (PagePool) is shared; the pages themselves live in the backend.
//
// A forward pass is begin(batch), run(body) with the body calling the ops,
// then finish(). Ops act on the forward's rows unless given a Rows range.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_LIB_BACKEND_H
#define CONDENSATE_DECODER_LIB_BACKEND_H

#include "condensate/Decoder/Decoder.h"

#include <functional>
#include <optional>

namespace condensate::decoder {

/// The recipe's activation buffers, each [rows, bufferWidth] float32 in the
/// backend's memory, sized for the backend's row capacity.
enum class Buf { X, H, QKV, Q, K, V, Attn, GU, Act, Logits };
constexpr int kNumBufs = int(Buf::Logits) + 1;

inline int64_t bufferWidth(Buf b, const ModelConfig &c) {
  switch (b) {
  case Buf::X:
  case Buf::H:
    return c.hidden;
  case Buf::QKV:
    return c.qkvDim();
  case Buf::Q:
  case Buf::Attn:
    return c.qDim();
  case Buf::K:
  case Buf::V:
    return c.kvDim();
  case Buf::GU:
    return 2 * c.ffn;
  case Buf::Act:
    return c.ffn;
  case Buf::Logits:
    return c.vocab;
  }
  return 0;
}

/// A weight in the backend's memory: float32 at a host or device address
/// (on the GPU a matrix is bfloat16 with WeightType::BF16), or (on the CPU)
/// a matrix held as quantised blocks; absent when `size` is 0.
struct Param {
  uint64_t address = 0;
  int64_t size = 0; ///< elements
  /// The host matrix, when the weight is one (its blocks, if quantised;
  /// then `address` is 0).
  const WeightMatrix *matrix = nullptr;
  bool present() const { return size > 0; }
};
struct LayerParams {
  Param attnNorm, wqkv, bqkv, wo, bo, ffnNorm, wGateUp, wDown;
  Param qNorm, kNorm, postAttnNorm, postFfnNorm; ///< absent unless the model has them
};
struct ModelParams {
  Param embedding, outputNorm, output;
  std::vector<LayerParams> layers;
};

/// Input rows [first, first + count) of an op; its output rows are
/// [0, count). count < 0 means every row of the forward.
struct Rows {
  int64_t first = 0;
  int64_t count = -1;
};

enum class ForwardKind {
  /// Rows are consecutive positions of one sequence: dense causal
  /// attention, keys appended one row at a time.
  Prefill,
  /// Rows are distinct sequences: the program's attention, one batched
  /// append.
  Decode,
};

/// The host-side inputs of one forward pass (kept by the caller until
/// finish() returns).
struct ForwardBatch {
  ForwardKind kind = ForwardKind::Decode;
  int64_t rows = 0;
  int64_t tableWidth = 0;         ///< page-table row width
  std::vector<int32_t> tokens;    ///< [rows]
  std::vector<int32_t> positions; ///< [rows]
  std::vector<int32_t> lens;      ///< [rows]: position + 1
  std::vector<int32_t> pageTable; ///< [rows, tableWidth]
  std::vector<int32_t> windows;   ///< [numLayers, rows], Decode only
  /// [numLayers], Decode only: 1 where the layer runs the dense program
  /// (BackendSetup::dense) instead of the current one (fallback memory).
  std::vector<uint8_t> denseLayers;
};

/// What a backend is created for.
struct BackendSetup {
  std::shared_ptr<const ModelWeights> weights;
  ModelShape shape;
  Schedule schedule;
  /// What prompt rows attend with (prefillSchedule): its layers' prefill
  /// functions are what prefillAttend runs.
  Schedule prefill;
  /// Set with DecoderOptions::fallbackMemory: the model's own attention
  /// (withModelRoles of a dense schedule), whose decode functions run the
  /// layers ForwardBatch::denseLayers names.
  std::optional<Schedule> dense;
  DecoderOptions options;
  int64_t numPages = 0;
  /// Longest page-table row a sequence can need (pool and context bound).
  int64_t maxTablePages = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// "OpenBLAS ..." or "NVIDIA H200 (sm_90, 132 SMs), weights bf16".
  virtual std::string description() const = 0;
  virtual const WeightFootprint &weightFootprint() const = 0;
  /// The device memory in use now, e.g. "12.3 GB of 143.8 GB in use" on a
  /// GPU; empty on the CPU.
  virtual std::string memoryUse() const { return ""; }
  virtual double compileSeconds() const = 0;
  /// Whether ops finish before they return (so timing them means
  /// something).
  virtual bool synchronous() const = 0;
  /// Most rows one forward may carry; 0 for no limit.
  virtual int64_t maxRows() const = 0;
  /// Page-table row width for a forward whose longest row has `pages`.
  virtual int64_t tableWidth(int64_t pages) const = 0;
  virtual const ModelParams &params() const = 0;

  // Attention programs.
  virtual Result<std::shared_ptr<const AttentionProgram>>
  compile(const Schedule &schedule) const = 0;
  virtual std::shared_ptr<const AttentionProgram> program() const = 0;
  virtual Status setProgram(std::shared_ptr<const AttentionProgram> p) = 0;

  // Page storage.
  /// Copies page `from` to page `to` in every layer (keys, values and
  /// summaries).
  virtual Status copyPage(int32_t from, int32_t to) = 0;
  virtual Decoder::CacheView cache(int64_t layer) const = 0;

  // A forward pass.
  virtual Status begin(const ForwardBatch &batch) = 0;
  /// Runs `body` (the recipe's ops); the GPU may capture it once per batch
  /// size and replay it.
  virtual Status run(const std::function<Status()> &body) = 0;
  /// Waits for the pass; copies its first `logitRows` rows of logits to
  /// `logits` (if non-null) and, after a decode, the statistics.
  virtual Status finish(float *logits, int64_t logitRows) = 0;
  /// [numLayers, rows, Hq, kStatFields] of the last decode.
  virtual const std::vector<float> &stats() const = 0;
  /// The same, for the decoder to mark what it ran dense.
  virtual std::vector<float> &stats() = 0;
  /// [numLayers, rows, Hq, D] of the last decode.
  virtual const std::vector<float> &queries() const = 0;

  // The ops of the recipe.
  /// X = scale * embedding rows of the tokens.
  virtual Status embed(float scale) = 0;
  /// out = rmsnorm(in) * weight, or out += that when `accumulate`; in
  /// place (in == out) is allowed.
  virtual Status rmsNorm(Buf in, const Param &weight, Buf out,
                         Rows rows = {}, bool accumulate = false) = 0;
  /// RMSNorm of every head of Q or K in place (weight [headDim]).
  virtual Status headNorm(Buf qOrK, const Param &weight) = 0;
  /// out (+)= in * weight^T (+ bias); weight [width(out), width(in)].
  virtual Status linear(Buf in, const Param &weight, const Param &bias, Buf out,
                        bool accumulate, Rows rows = {}) = 0;
  /// QKV rows split into Q, K and V.
  virtual Status splitQKV() = 0;
  /// Rotates the heads of Q or K in place at the rows' positions, with
  /// layer `layer`'s RoPE base and scaling (ModelConfig::ropeThetaFor).
  virtual Status rope(Buf qOrK, int64_t layer) = 0;
  /// splitQKV, then rope of Q and of K (a backend may do it in one pass).
  virtual Status splitRope(int64_t layer) {
    CONDENSATE_RETURN_IF_ERROR(splitQKV());
    CONDENSATE_RETURN_IF_ERROR(rope(Buf::Q, layer));
    return rope(Buf::K, layer);
  }
  /// Writes K and V at the rows' positions (and the page summaries).
  virtual Status append(int64_t layer) = 0;
  /// Attn = decode attention of Q under the program (statistics kept).
  virtual Status attend(int64_t layer) = 0;
  /// Attn = the model's own causal attention of Q over the sequence's cache:
  /// dense, or the last ModelConfig::slidingWindow positions on a local
  /// layer.
  virtual Status prefillAttend(int64_t layer) = 0;
  /// Act = activation(gate) * up of GU.
  virtual Status activation(Activation kind) = 0;
  /// Keeps Q as layer `layer`'s queries of this decode.
  virtual Status keepQueries(int64_t layer) = 0;
};

Result<std::unique_ptr<Backend>> createCPUBackend(const BackendSetup &setup);
Result<std::unique_ptr<Backend>> createGPUBackend(const BackendSetup &setup);

/// Runs the layer recipe for `batch`: every layer, then the logits of rows
/// [logitRows.first, +count) into `logits` (count 0: none). Times the
/// parts into `profile` when the backend is synchronous.
Status forward(Backend &backend, const ModelConfig &config,
               const ForwardBatch &batch, Rows logitRows, float *logits,
               StepProfile &profile);

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_LIB_BACKEND_H
