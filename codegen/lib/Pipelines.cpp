//===- Pipelines.cpp - named lowering pipelines ---------------------------===//
//
// Registers condensate-to-cpu: one flag from a model schedule (or a decode
// attention op) to the LLVM dialect for the CPU.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/Passes.h"
#include "condensate/Passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::condensate;

namespace {

/// Rewrites bf16 conversions (arith.truncf to bf16, arith.extf from it) as
/// integer arithmetic: round to nearest even, NaN to a quiet NaN. On an x86
/// CPU without AVX512-BF16, LLVM lowers an f32 -> bf16 truncation to a call
/// of __truncsfbf2, which neither the JIT's process (GCC 12's libgcc) nor
/// the CPU programs provide: bf16 caches then failed to compile ("Symbols
/// not found: __truncsfbf2") on such machines while passing on others.
struct ExpandBF16Pass
    : public PassWrapper<ExpandBF16Pass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExpandBF16Pass)
  StringRef getArgument() const override { return "condensate-expand-bf16"; }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

/// Gives gpu.dynamic_shared_memory's global external linkage. The GPU to
/// NVVM conversion declares it `internal` as a zero-length array, which the
/// NVPTX printer emits as a one-byte static `.shared` variable placed among
/// the kernel's other shared arrays; external linkage prints the
/// `.extern .shared .b8 name[]` that dynamic shared memory needs.
struct ExternDynamicSharedPass
    : public PassWrapper<ExternDynamicSharedPass,
                         OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExternDynamicSharedPass)
  StringRef getArgument() const override {
    return "condensate-extern-dynamic-shared";
  }
  void runOnOperation() override {
    getOperation().walk([](LLVM::GlobalOp global) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() == 3 && array && array.getNumElements() == 0 &&
          !global.getInitializerBlock() && !global.getValue())
        global.setLinkage(LLVM::Linkage::External);
    });
  }
};

} // namespace

void mlir::condensate::buildCondensateToCPUPipeline(
    OpPassManager &pm, const CPUPipelineOptions &options) {
  pm.addPass(createCondensateExpandSchedule());
  CondensateSpecializeOptions specialize;
  specialize.target = "cpu";
  specialize.splits = options.splits;
  pm.addPass(createCondensateSpecialize(specialize));
  pm.addPass(createCondensateDecompose());
  ConvertCondensateToLoopsOptions loops;
  loops.kvShare = options.kvShare;
  pm.addPass(createConvertCondensateToLoops(loops));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(std::make_unique<ExpandBF16Pass>());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::condensate::buildCondensateToPTXPipeline(
    OpPassManager &pm, const PTXPipelineOptions &options) {
  pm.addPass(createCondensateExpandSchedule());
  CondensateSpecializeOptions specialize;
  specialize.target = options.chip;
  specialize.splits = options.splits;
  pm.addPass(createCondensateSpecialize(specialize));
  CondensateDecomposeOptions decompose;
  decompose.denseSplits = options.denseSplits;
  pm.addPass(createCondensateDecompose(decompose));
  ConvertCondensateToGPUOptions toGPU;
  toGPU.chip = options.chip;
  toGPU.tensorCores = options.tensorCores;
  toGPU.attendWarps = options.attendWarps;
  toGPU.sketchOccupancy = options.sketchOccupancy;
  toGPU.attendOccupancy = options.attendOccupancy;
  toGPU.attendStages = options.attendStages;
  pm.addPass(createConvertCondensateToGPU(toGPU));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  buildGPUModulesToPTXPipeline(pm, options);
}

std::string mlir::condensate::findLibdevice() {
  std::vector<std::string> roots;
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var))
      roots.push_back(v);
  roots.push_back("/usr/local/cuda");
  roots.push_back("/usr/lib/cuda");
  std::vector<std::string> candidates;
  for (const std::string &r : roots)
    candidates.push_back(r + "/nvvm/libdevice/libdevice.10.bc");
  // Debian's nvidia-cuda-toolkit package.
  candidates.push_back("/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc");
  for (const std::string &c : candidates)
    if (llvm::sys::fs::exists(c))
      return c;
  return "";
}

void mlir::condensate::buildGPUModulesToPTXPipeline(
    OpPassManager &pm, const PTXPipelineOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  // Math functions lower to libdevice calls; link it explicitly so the
  // PTX does not depend on how this MLIR was built.
  if (std::string libdevice = findLibdevice(); !libdevice.empty())
    target.linkLibs.push_back(libdevice);
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createLowerAffinePass());
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(std::make_unique<ExternDynamicSharedPass>());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::condensate::registerCondensatePipelines() {
  PassPipelineRegistration<PTXPipelineOptions>(
      "condensate-to-ptx",
      "Lowers condensate models and decode attention to GPU kernels in PTX "
      "(a gpu.binary) with host launch plans",
      buildCondensateToPTXPipeline);
  PassPipelineRegistration<CPUPipelineOptions>(
      "condensate-to-cpu",
      "Lowers condensate models and decode attention to the LLVM dialect "
      "for the CPU",
      buildCondensateToCPUPipeline);
}
