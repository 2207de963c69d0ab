//===- Pipelines.cpp - named lowering pipelines ---------------------------===//
//
// Registers condensate-to-cpu: one flag from a model schedule (or a decode
// attention op) to the LLVM dialect for the CPU.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/Passes.h"
#include "condensate/Passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::condensate;

void mlir::condensate::buildCondensateToCPUPipeline(
    OpPassManager &pm, const CPUPipelineOptions &options) {
  pm.addPass(createCondensateExpandSchedule());
  CondensateSpecializeOptions specialize;
  specialize.target = "cpu";
  specialize.splits = options.splits;
  pm.addPass(createCondensateSpecialize(specialize));
  pm.addPass(createCondensateDecompose());
  pm.addPass(createConvertCondensateToLoops());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
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

void mlir::condensate::registerCondensatePipelines() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "condensate-to-cpu",
      "Lowers condensate models and decode attention to the LLVM dialect "
      "for the CPU",
      buildCondensateToCPUPipeline);
}
