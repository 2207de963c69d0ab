//===- CPUProgram.h - condensate attention compiled for the CPU -*- C++ -*-===//
//
// Part of the compiler library: compiles a model's layer schedule
// in-process (the condensate-to-cpu pipeline, JIT through MLIR's
// ExecutionEngine; cached) and calls one layer's decode attention, its
// prefill attention or the KV append on host buffers. The header needs neither LLVM nor MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_COMPILER_CPUPROGRAM_H
#define CONDENSATE_COMPILER_CPUPROGRAM_H

#include "condensate/Runtime/Attention.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace condensate {

/// How a program came to be.
struct CompileInfo {
  double seconds = 0.0;  ///< wall time of the compile that built it
  int64_t functions = 0; ///< distinct layer functions generated
};

/// The key/value heads one call of a layer's decode attention computes:
/// part, part + parts, ... (AttentionABI.h, kCpuKVShareSymbol). Calls over
/// the same arguments with the shares of one `parts`, at once on as many
/// threads, compute the whole layer; the default share is all of it.
struct CPUKVShare {
  int64_t part = 0, parts = 1;
};

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

  using KVShare = CPUKVShare;
  /// Decode attention of layer `layer`, the heads of `share`; checks the
  /// arguments first.
  Status attend(int64_t layer, const AttentionArgs &args,
                KVShare share = CPUKVShare()) const;
  /// Prefill attention of layer `layer` (causal, in the layer's prefill
  /// window); checks the arguments first.
  Status prefill(int64_t layer, const PrefillArgs &args) const;
  /// Writes one token per sequence into the cache and its summaries.
  Status append(const AppendArgs &args) const;

  struct Impl;

private:
  explicit CPUProgram(std::unique_ptr<Impl> impl);
  static std::shared_ptr<const CPUProgram> fromImpl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace condensate

#endif // CONDENSATE_COMPILER_CPUPROGRAM_H
