//===- GPUProgram.h - load and launch generated GPU kernels ---*- C++ -*-===//
//
// A model's attention compiled for an NVIDIA GPU is a GPULibrary: PTX
// kernels and a launch plan, with what they were specialised for. The
// compiler library builds one in-process (condensate/Compiler/Compiler.h);
// condensate-translate writes one to disk as an AOT library (PTX + JSON
// manifest), which this runtime reads without the compiler. A GPUProgram
// loads the PTX through the CUDA driver API and launches the plan on device
// buffers.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_GPUPROGRAM_H
#define CONDENSATE_RUNTIME_GPUPROGRAM_H

#include "condensate/Cuda/Driver.h"
#include "condensate/Runtime/Attention.h"
#include "condensate/ABI/LaunchPlan.h"
#include "condensate/Runtime/Policy.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace condensate {

/// The GPU lowering's tuning knobs: specialisation options of
/// condensate-to-ptx (docs/TUNING.md). A count of 0 leaves it to the
/// compiler's rule for the target; every value is a request the kernels
/// compute the same results under (up to float rounding), only faster or
/// slower.
struct GPUTuning {
  bool tensorCores = true;  ///< tensor-cores: attention on mma.sync
  int64_t denseSplits = 0;  ///< dense-splits: dense splits per sequence
  int64_t sparseSplits = 0; ///< splits: sparse-attention splits
  int64_t attendWarps = 0;  ///< attend-warps: warps per attention block
  int64_t sketchOccupancy = 0; ///< sketch-occupancy: sketch kernels' warps/SM
  int64_t attendStages = 0;    ///< attend-stages: attention pipeline depth
  int64_t attendOccupancy = 0; ///< attend-occupancy: attention warps/SM

  /// Checks each knob against docs/LIMITS.md.
  Status validate() const;
  /// The knobs as condensate-to-ptx options:
  /// "tensor-cores=1 dense-splits=0 splits=0 attend-warps=0
  /// sketch-occupancy=0 attend-stages=0 attend-occupancy=0".
  std::string options() const;
  /// {"tensor_cores": true, "dense_splits": 0, "splits": 0,
  ///  "attend_warps": 0, "sketch_occupancy": 0, "attend_stages": 0,
  ///  "attend_occupancy": 0}
  std::string toJSON() const;
  /// Reads toJSON()'s form (every key optional, no others), validated.
  static Result<GPUTuning> fromJSON(const std::string &json,
                                    const std::string &what = "tuning");
  bool operator==(const GPUTuning &o) const {
    return tensorCores == o.tensorCores && denseSplits == o.denseSplits &&
           sparseSplits == o.sparseSplits && attendWarps == o.attendWarps &&
           sketchOccupancy == o.sketchOccupancy &&
           attendStages == o.attendStages &&
           attendOccupancy == o.attendOccupancy;
  }
  bool operator!=(const GPUTuning &o) const { return !(*this == o); }
};

/// PTX plus the launch plan and what it was specialised for.
struct GPULibrary {
  ModelShape shape;
  Schedule schedule;
  std::string chip;       ///< sm_90, sm_80
  std::string ptx;        ///< every kernel of the model
  /// The same kernels assembled for `chip` (ptxas), when the library
  /// carries a cubin for the device it is loaded on; loaded instead of the
  /// PTX (no driver JIT at load time).
  std::string cubin;
  LaunchPlan plan;
  std::string modelText;  ///< the condensate.model op it was built from
  /// Per layer function: the #condensate.spec it was specialised with.
  std::map<std::string, std::string> specs;
  /// The knobs it was built with, and the autotuner's record (JSON,
  /// condensate-tune) that chose them; "" when they were not tuned.
  GPUTuning tuning;
  std::string tuningRecord;
  double compileSeconds = 0.0;

  /// The JSON manifest: the launch plan plus model, schedule, target and
  /// per-kernel parameter lists and specialisation keys.
  std::string manifestJSON() const;
  /// Reads a library written as PTX + manifest (condensate-translate),
  /// checking that the manifest's plan matches its model and the PTX.
  static Result<GPULibrary> fromManifest(const std::string &manifestJSON,
                                         std::string ptx);
  /// The AOT library whose manifest is `manifestPath`, for a device of
  /// compute capability `computeCapability` (90 for sm_90): a one-chip
  /// manifest (its PTX beside it, PREFIX.ptx, and PREFIX.cubin when present
  /// and built for this chip), or the fat index condensate-translate writes
  /// for several chips, from which chooseImage() picks the image.
  static Result<GPULibrary> loadForDevice(const std::string &manifestPath,
                                          int computeCapability);
  /// Which of the images built for `chips` ("sm_80", "sm_90") a device of
  /// `computeCapability` runs: its own chip (`exact`: its cubin can load),
  /// else the highest one below it (its PTX, JIT-compiled by the driver);
  /// an error naming both when every image is for a newer chip.
  static Result<size_t> chooseImage(const std::vector<std::string> &chips,
                                    int computeCapability, bool *exact);
  /// Reads `prefix`.json and `prefix`.ptx (or the two paths given).
  static Result<GPULibrary> load(const std::string &ptxPath,
                                 const std::string &manifestPath);
};

/// A library loaded on one device. Launches go to the caller's stream and are
/// capturable in a CUDA graph once the workspace is reserved. One program
/// serves one stream at a time (its scratch workspace is shared).
class GPUProgram {
public:
  static Result<std::unique_ptr<GPUProgram>>
  load(std::shared_ptr<const GPULibrary> library, int device = 0);

  const GPULibrary &library() const { return *library_; }
  const ModelShape &shape() const { return library_->shape; }
  bool isAdaptive(int64_t layer) const;

  /// Grows the scratch workspace to serve calls up to these sizes without
  /// allocating (required before graph capture).
  Status reserve(int64_t maxBatch, int64_t maxPages, int64_t numPages);

  /// Per-kernel device times of one profiled call.
  using Profile = std::vector<std::pair<std::string, float>>;

  /// Decode attention of `layer` on device buffers (AttentionArgs pointers
  /// are device addresses). With `profile`, every kernel is bracketed by
  /// events and the call waits for the stream (not capturable).
  Status attend(int64_t layer, const AttentionArgs &args,
                const cuda::Stream &stream, Profile *profile = nullptr);
  Status append(const AppendArgs &args, const cuda::Stream &stream);
  /// Prefill attention of `layer` on device buffers (causal, in the layer's
  /// prefill window). The row starts, lens and page table are device
  /// memory too, so only sizes are checked here: the caller keeps them
  /// consistent (checkPrefillArgs on its host copies).
  Status prefill(int64_t layer, const PrefillArgs &args,
                 const cuda::Stream &stream);
  /// Whether the library carries prefill functions (libraries written
  /// before prefill_attention existed do not).
  bool hasPrefill() const { return !library_->plan.prefill.empty(); }

  /// Bytes of scratch the last call of `layer` needed.
  int64_t workspaceBytes() const { return workspaceBytes_; }

private:
  GPUProgram() = default;
  Status run(const FunctionPlan &fn,
             const std::vector<cuda::DevicePtr> &args,
             const std::vector<std::vector<int64_t>> &shapes,
             const cuda::Stream &stream, Profile *profile = nullptr);
  Result<int64_t> scratchBytes(const FunctionPlan &fn,
                               const std::vector<std::vector<int64_t>> &shapes,
                               std::vector<int64_t> *offsets) const;

  std::shared_ptr<const GPULibrary> library_;
  cuda::Context context_;
  cuda::Module module_;
  std::map<std::string, cuda::Function> functions_;
  cuda::DeviceBuffer workspace_;
  int64_t workspaceBytes_ = 0;
  /// Launch the kernels whose plan entry says grid_dependency
  /// programmatically (cuda::LaunchOptions); off when the environment sets
  /// CONDENSATE_GRID_DEPENDENCY=0 (an A/B switch: the kernels' wait then
  /// returns at once).
  bool programmatic_ = true;
  std::vector<bool> adaptive_;
};

} // namespace condensate

#endif // CONDENSATE_RUNTIME_GPUPROGRAM_H
