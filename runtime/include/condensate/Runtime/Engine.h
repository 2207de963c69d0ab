//===- Engine.h - compile and run condensate attention ---------*- C++ -*-===//
//
// The runtime API a decoder uses for its attention: compile a model's layer
// schedule (in-process, through the MLIR pipeline; cached) and call one
// layer's decode attention or the KV append on host buffers. The headers
// need neither LLVM nor MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_ENGINE_H
#define CONDENSATE_RUNTIME_ENGINE_H

#include "condensate/Runtime/Policy.h"
#include "condensate/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace condensate {

/// Entries per (sequence, query head) of AttentionArgs::stats.
constexpr int64_t kAttentionStatsWidth = 5;
/// What each stats entry holds. Both bounds are 0 for dense attention and
/// after a dense fallback, NaN where no certificate ran (uncertified sparse
/// policies).
enum AttentionStat : int64_t {
  /// eps_hat: bound on the softmax mass the attended set leaves out.
  kStatEpsHat = 0,
  /// Positions attended.
  kStatAttended = 1,
  /// Extra units the certificate added.
  kStatExtra = 2,
  /// 1 when the head's group fell back to dense attention.
  kStatFallback = 3,
  /// Bound on ||o_dense - o||_2 of the output:
  /// eps_hat * sqrt(sum_c max(Vmax_c - o_c, o_c - Vmin_c, 0)^2) over the
  /// per-channel box [Vmin, Vmax] of the omitted values.
  kStatOutputBound = 4,
};

/// Buffers of one decode-attention call. Shapes (B = batch, MP = maxPages,
/// NP = numPages): q, out [B, Hq, D] f32; k/vCache [NP, Hkv, P, D] of the
/// model's KV type; pageTable [B, MP] i32; lens [B] i32 (context length
/// including the query's own, already appended position); windows [B] i32
/// (per-sequence window of adaptive layers; may be null otherwise);
/// summaries [NP, Hkv, 5, D] f32; stats [B, Hq, kAttentionStatsWidth = 5]
/// f32 (see AttentionStat). Host pointers on the CPU, device pointers on
/// the GPU.
struct AttentionArgs {
  int64_t batch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  const float *q = nullptr;
  const void *kCache = nullptr;
  const void *vCache = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *lens = nullptr;
  const int32_t *windows = nullptr;
  const float *summaries = nullptr;
  float *out = nullptr;
  float *stats = nullptr;
};

/// Buffers of one append: kNew/vNew [B, Hkv, D] f32 written at positions[b]
/// of sequence b, page summaries updated.
struct AppendArgs {
  int64_t batch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  const float *kNew = nullptr;
  const float *vNew = nullptr;
  void *kCache = nullptr;
  void *vCache = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *positions = nullptr;
  float *summaries = nullptr;
};

/// How a program came to be.
struct CompileInfo {
  double seconds = 0.0;  ///< wall time of the compile that built it
  int64_t functions = 0; ///< distinct layer functions generated
};

/// Parses a policy or schedule given as JSON, as MLIR attribute text
/// (`#condensate.schedule<...>`, `#condensate.policy<...>`,
/// `#condensate.dense`), or as a `condensate.model` op (whose schedule is
/// taken). `bufferName` names the source in error messages, which are one
/// line and located.
Result<Schedule> parseSchedule(const std::string &text, int64_t numLayers,
                               const std::string &bufferName = "<schedule>");

/// Reads the shape and schedule of the first `condensate.model` op of MLIR
/// `text` (verified; errors are one located line).
Result<std::pair<ModelShape, Schedule>>
parseModel(const std::string &text, const std::string &bufferName);

/// A model's attention compiled for the CPU: the functions the
/// condensate-to-cpu pipeline generates, JIT-compiled in-process.
class CPUProgram {
public:
  ~CPUProgram();
  CPUProgram(const CPUProgram &) = delete;
  CPUProgram &operator=(const CPUProgram &) = delete;

  /// Compiles (or fetches from the process-wide in-memory cache, keyed by
  /// the model op text) the program of `shape` under `schedule`.
  static Result<std::shared_ptr<const CPUProgram>>
  compile(const ModelShape &shape, const Schedule &schedule);

  /// Compiles the first `condensate.model` op of MLIR `text`.
  static Result<std::shared_ptr<const CPUProgram>>
  compileMLIR(const std::string &text, const std::string &bufferName);

  const ModelShape &shape() const;
  const Schedule &schedule() const;
  const CompileInfo &info() const;
  /// Whether layer `layer` takes a per-sequence window.
  bool isAdaptive(int64_t layer) const;

  /// Decode attention of layer `layer`; checks the arguments first.
  Status attend(int64_t layer, const AttentionArgs &args) const;
  /// Writes one token per sequence into the cache and its summaries.
  Status append(const AppendArgs &args) const;

  struct Impl;

private:
  explicit CPUProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace condensate

#endif // CONDENSATE_RUNTIME_ENGINE_H
