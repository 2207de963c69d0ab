//===- Passes.h - condensate lowerings --------------------------*- C++ -*-===//
//
// Declares the conversions out of the condensate dialect and the named
// pipelines that lower a policy all the way for a target.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_PASSES_H
#define CONDENSATE_CODEGEN_PASSES_H

#include "condensate/Dialect/CondensateDialect.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class RewritePatternSet;
class OpPassManager;
} // namespace mlir

namespace mlir::condensate {

#define GEN_PASS_DECL
#include "condensate/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "condensate/Codegen/Passes.h.inc"

/// Adds the loop lowering of every condensate stage to `patterns`.
void populateCondensateToLoopsPatterns(RewritePatternSet &patterns);

/// Adds the GPU lowering of every condensate stage to `patterns`: each
/// stage op becomes a kernel in `kernels` and a gpu.launch_func where it
/// stood. Kernel names are made unique in the order they are created, so
/// apply the patterns in program order for names that do not depend on the
/// driver (convert-condensate-to-gpu does).
void populateCondensateToGPUPatterns(RewritePatternSet &patterns,
                                     gpu::GPUModuleOp kernels);

/// Options of the CPU pipeline.
struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  Option<int64_t> splits{*this, "splits",
                         llvm::cl::desc("Sparse-attention splits (0: auto)"),
                         llvm::cl::init(0)};
  Option<bool> kvShare{
      *this, "kv-share",
      llvm::cl::desc("Decode functions compute the calling thread's share "
                     "of the kv heads (convert-condensate-to-loops)"),
      llvm::cl::init(false)};
};

/// condensate-to-cpu: schedule expansion, specialisation, decomposition,
/// loops, and the standard lowering to the LLVM dialect.
void buildCondensateToCPUPipeline(OpPassManager &pm,
                                  const CPUPipelineOptions &options);

/// Options of the PTX pipeline.
struct PTXPipelineOptions : public PassPipelineOptions<PTXPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (sm_90, sm_80)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (+ptx80 or newer)"),
      llvm::cl::init("+ptx80")};
  Option<int64_t> optLevel{*this, "O", llvm::cl::desc("LLVM optimisation level"),
                           llvm::cl::init(3)};
  Option<int64_t> splits{*this, "splits",
                         llvm::cl::desc("Sparse-attention splits (0: auto)"),
                         llvm::cl::init(0)};
  Option<bool> tensorCores{
      *this, "tensor-cores",
      llvm::cl::desc("Attention on tensor cores where the chip has them"),
      llvm::cl::init(true)};
  Option<int64_t> denseSplits{
      *this, "dense-splits",
      llvm::cl::desc("Dense-attention splits per sequence (0: auto)"),
      llvm::cl::init(0)};
  Option<int64_t> attendWarps{
      *this, "attend-warps",
      llvm::cl::desc("Warps or lane groups per attention block (0: auto)"),
      llvm::cl::init(0)};
  Option<int64_t> sketchOccupancy{
      *this, "sketch-occupancy",
      llvm::cl::desc("Resident warps per SM of the key-sketch scoring "
                     "kernels (0: auto)"),
      llvm::cl::init(0)};
  Option<int64_t> attendOccupancy{
      *this, "attend-occupancy",
      llvm::cl::desc("Resident warps per SM of the attention kernels "
                     "(0: auto)"),
      llvm::cl::init(0)};
  Option<int64_t> attendStages{
      *this, "attend-stages",
      llvm::cl::desc("Pipeline stages of the tensor-core attention loop "
                     "(1: registers, >= 2: cp.async ring; 0: the rule)"),
      llvm::cl::init(0)};
};

/// condensate-to-ptx: schedule expansion, specialisation for the chip,
/// decomposition, GPU kernels, and the NVVM lowering down to a gpu.binary
/// holding PTX (the host functions keep their launch plans).
void buildCondensateToPTXPipeline(OpPassManager &pm,
                                  const PTXPipelineOptions &options);

/// Path of CUDA's libdevice.10.bc ($CUDA_ROOT, $CUDA_HOME, $CUDA_PATH,
/// /usr/local/cuda, Debian's nvidia-cuda-toolkit), or "" when none exists.
std::string findLibdevice();

/// The device half of condensate-to-ptx: attaches the NVVM target and
/// lowers every gpu.module to a gpu.binary holding PTX. Also used for the
/// decoder's hand-written gpu-dialect kernels.
void buildGPUModulesToPTXPipeline(OpPassManager &pm,
                                  const PTXPipelineOptions &options);

/// Registers the named pipelines (condensate-to-cpu, condensate-to-ptx).
void registerCondensatePipelines();

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_PASSES_H
