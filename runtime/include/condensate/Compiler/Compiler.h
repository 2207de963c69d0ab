//===- Compiler.h - policies from MLIR text, kernels on demand --*- C++ -*-===//
//
// The compiler library's API beside CPUProgram: reading policies and
// schedules written as MLIR attributes, and building GPU kernel libraries
// (PTX + launch plan, what the MLIR-free runtime loads) in-process, cached in
// memory and on disk. Linking it brings LLVM and MLIR (statically, hidden);
// the header needs neither.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_COMPILER_COMPILER_H
#define CONDENSATE_COMPILER_COMPILER_H

#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Support/Status.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace condensate {

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

/// Compiles the first condensate.model op of MLIR `text` for `chip` with
/// the tuning knobs `tuning` (condensate-to-ptx's options; the defaults
/// leave every choice to the compiler).
Result<GPULibrary> compileGPULibrary(const std::string &text,
                                     const std::string &bufferName,
                                     const std::string &chip = "sm_90",
                                     const GPUTuning &tuning = {});
/// Compiles `shape` under `schedule` for `chip`, building the model op from
/// the structures (no text on the way).
Result<GPULibrary> compileGPULibrary(const ModelShape &shape,
                                     const Schedule &schedule,
                                     const std::string &chip = "sm_90",
                                     const GPUTuning &tuning = {});

/// The CUDA libdevice the GPU compiler links into every kernel library
/// ($CUDA_ROOT, $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda), or "" when
/// there is none; compiling kernels that call its math functions then fails
/// with an error naming it.
std::string libdevicePath();

/// Lowers the gpu.module(s) of MLIR `text` (gpu dialect kernels) to PTX
/// through the same NVVM lowering as the condensate kernels.
Result<std::string> compileGPUModulesToPTX(const std::string &text,
                                           const std::string &bufferName,
                                           const std::string &chip = "sm_90");

/// Where compiled libraries are cached on disk: $CONDENSATE_CACHE_DIR, else
/// $XDG_CACHE_HOME/condensate, else ~/.cache/condensate.
std::string defaultCacheDirectory();

struct GPUCompileOptions {
  std::string chip = "sm_90";
  /// The knobs to build with; unset: the tuning record condensate-tune
  /// stored in `cacheDir` for this compiler, chip and model when there is
  /// one (its winner), else the compiler's defaults.
  std::optional<GPUTuning> tuning;
  std::string cacheDir = defaultCacheDirectory(); ///< "" disables the disk cache
};

/// How a library was obtained.
struct GPUCompileReport {
  enum class Source { Compiled, MemoryCache, DiskCache } source =
      Source::Compiled;
  double seconds = 0.0; ///< time spent (compile or load)
  std::string cacheKey;
  GPUTuning tuning;   ///< the knobs it was built with
  bool tuned = false; ///< they came from a tuning record
};

/// The compiler's identity (a hash of its sources): disk-cache entries and
/// tuning records of another build are not used.
std::string compilerIdentity();

/// The model text tuning records are keyed by and name (`model_mlir`): the
/// condensate.model op of the cache shape (cacheShapeFor) under `schedule`.
std::string tuningModelText(const ModelShape &shape, const Schedule &schedule);
/// The key of the tuning record of `shape` under `schedule` on `chip`:
/// the record is `cacheDir`/KEY.tune.json.
std::string tuningRecordKey(const ModelShape &shape, const Schedule &schedule,
                            const std::string &chip);
/// The tuning record stored for `shape` under `schedule` on `chip` in
/// `cacheDir` (its JSON), or "" when there is none for this compiler; a
/// record that cannot be read or names another compiler, chip or model is
/// ignored (the caller builds with the defaults).
std::string findTuningRecord(const ModelShape &shape, const Schedule &schedule,
                             const std::string &chip,
                             const std::string &cacheDir);
/// The winning knobs of a tuning record (its "best" entry), checked.
Result<GPUTuning> tuningOfRecord(const std::string &recordJSON);

/// Returns the library of `shape` under `schedule`: from the in-memory
/// cache, else the disk cache, else compiled in-process (and stored).
Result<std::shared_ptr<const GPULibrary>>
getGPULibrary(const ModelShape &shape, const Schedule &schedule,
              const GPUCompileOptions &options = {},
              GPUCompileReport *report = nullptr);

} // namespace condensate

#endif // CONDENSATE_COMPILER_COMPILER_H
