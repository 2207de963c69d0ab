//===- Tuner.h - the GPU kernels' autotuner ---------------------*- C++ -*-===//
//
// tuneGPULibrary searches the GPU lowering's knobs (GPUTuning) for one
// model shape and schedule on the device at hand: it compiles each
// candidate in-process, checks its outputs against the float64 reference,
// times it cold in L2 on the workloads given (the method of BENCHMARKS.md:
// distinct caches whose bytes exceed a multiple of the L2, every call of a
// round in one CUDA graph) and stores the winner as a tuning record in the
// disk cache, where getGPULibrary and condensate-translate find it.
// docs/TUNING.md describes the search and the record.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_COMPILER_TUNER_H
#define CONDENSATE_COMPILER_TUNER_H

#include "condensate/Compiler/Compiler.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace condensate {

/// A decode step the kernels are timed on: `batch` sequences of `context`
/// tokens each.
struct TuneWorkload {
  int64_t batch = 1;
  int64_t context = 32768;
};

struct TuneOptions {
  std::vector<TuneWorkload> workloads = {{1, 32768}};
  int device = 0;
  /// Timed graph replays per candidate and workload (their median counts).
  int replays = 15;
  /// Distinct cache copies are timed until their bytes exceed this many
  /// times the device's L2 (at least two copies).
  double coldFactor = 3.0;
  /// A candidate replaces the best so far only when it is faster by this
  /// fraction (timing noise must not pick the knobs).
  double minGain = 0.02;
  /// Where the record is stored ("" keeps it in the result only).
  std::string cacheDir = defaultCacheDirectory();
  /// Called before each candidate is evaluated and once at the end
  /// (done == total).
  std::function<void(size_t done, size_t total, const std::string &what)>
      progress;
};

/// One candidate's outcome.
struct TuneCandidate {
  GPUTuning tuning;
  /// Why it was rejected (compile, load or reference check failure); ""
  /// when it was timed.
  std::string error;
  /// Index of an earlier candidate whose PTX is identical (its results are
  /// shared, nothing is re-timed), or -1.
  int sameAs = -1;
  double compileSeconds = 0.0;
  /// Largest relative L2 error of an output head against the float64
  /// reference in the check.
  double worstRelError = 0.0;
  /// Per workload: median device time of one layer call, microseconds.
  std::vector<double> microseconds;
  /// Geometric mean of `microseconds` (+inf when rejected).
  double score = std::numeric_limits<double>::infinity();
};

struct TuneResult {
  std::string chip;   ///< sm_90, sm_80
  std::string device; ///< the device's name
  std::vector<TuneWorkload> workloads;
  /// Per workload: the distinct cache copies timed, and the bytes of one.
  std::vector<int64_t> copies, bytesPerCopy;
  /// Every candidate evaluated, in order; [0] holds the defaults.
  std::vector<TuneCandidate> candidates;
  size_t best = 0;        ///< index of the winner
  double seconds = 0.0;   ///< the whole search
  std::string record;     ///< the tuning record (JSON)
  std::string recordPath; ///< where it was stored, "" when not
};

/// Tunes `shape` under `schedule` on `options.device` (see the file
/// comment). Fails when there is no usable device, a workload does not fit
/// in its memory twice, or even the defaults fail their check.
Result<TuneResult> tuneGPULibrary(const ModelShape &shape,
                                  const Schedule &schedule,
                                  const TuneOptions &options = {});

/// The chip (sm_90, sm_80) kernels are built for on a device of compute
/// capability `cc` (90 for sm_90); an error for devices older than sm_80.
Result<std::string> chipForComputeCapability(int cc);

} // namespace condensate

#endif // CONDENSATE_COMPILER_TUNER_H
