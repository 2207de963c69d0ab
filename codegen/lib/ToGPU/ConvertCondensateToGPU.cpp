//===- ConvertCondensateToGPU.cpp - stages to GPU kernels -----------------===//
//
// Implements convert-condensate-to-gpu: every stage op becomes a gpu.func
// kernel with an explicit thread mapping plus a gpu.launch_func in the host
// function. The mapping of each stage is described in its file beside this
// one (Score, Select, Attend, Certify, Merge, Append); the numerics the
// kernels share with the loop lowering live in ../Common.
//
//===----------------------------------------------------------------------===//
#include "condensate/ABI/Limits.h"
#include "condensate/Codegen/Passes.h"

#include "KernelBuilder.h"
#include "Lowering.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Rewrite/PatternApplicator.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONVERTCONDENSATETOGPU
#include "condensate/Codegen/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

struct ConvertCondensateToGPUPass
    : public mlir::condensate::impl::ConvertCondensateToGPUBase<
          ConvertCondensateToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> stages;
    bool decomposed = true;
    module.walk([&](Operation *op) {
      if (isStageOp(op))
        stages.push_back(op);
      if (auto d = dyn_cast<DecodeAttentionOp>(op)) {
        d.emitOpError() << "must be decomposed before lowering to GPU "
                           "kernels (run condensate-decompose)";
        decomposed = false;
      }
    });
    if (!decomposed)
      return signalPassFailure();
    if (stages.empty())
      return;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto kernels = dyn_cast_or_null<gpu::GPUModuleOp>(
        SymbolTable::lookupSymbolIn(module, moduleName));
    if (!kernels)
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), moduleName);
    kernels->setAttr(kernel::kSharedOptinAttr,
                     b.getI64IntegerAttr(kernel::sharedBytesOptin(chip)));
    if (gridDependency && kernel::computeCapability(chip) >= 90)
      kernels->setAttr(kGridDependencyAttrName, b.getUnitAttr());
    else
      kernels->removeAttr(kGridDependencyAttrName);
    if (tensorCores && kernel::computeCapability(chip) >= 80)
      kernels->setAttr(kernel::kTensorCoresAttr, b.getUnitAttr());
    else
      kernels->removeAttr(kernel::kTensorCoresAttr);
    // A count knob: refused out of [0, max]; 0 leaves the lowering's rule
    // (no attribute), anything else is passed on as `attr`.
    auto countKnob = [&](const char *name, int64_t value, int64_t max,
                         StringRef attr) {
      if (value < 0 || value > max) {
        module.emitError() << name << " must be in [0, " << max << "], got "
                           << value;
        return false;
      }
      if (value > 0)
        kernels->setAttr(attr, b.getI64IntegerAttr(value));
      else
        kernels->removeAttr(attr);
      return true;
    };
    if (!countKnob("attend-warps", attendWarps,
                   ::condensate::limits::kMaxAttendWarps,
                   kernel::kAttendWarpsAttr) ||
        !countKnob("sketch-occupancy", sketchOccupancy,
                   ::condensate::limits::kMaxSketchOccupancy,
                   kernel::kSketchOccupancyAttr) ||
        !countKnob("attend-occupancy", attendOccupancy,
                   ::condensate::limits::kMaxAttendOccupancy,
                   kernel::kAttendOccupancyAttr) ||
        !countKnob("attend-stages", attendStages,
                   ::condensate::limits::kMaxAttendStages,
                   kernel::kAttendStagesAttr))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateCondensateToGPUPatterns(patterns, kernels);
    FrozenRewritePatternSet frozen(std::move(patterns));
    PatternApplicator applicator(frozen);
    applicator.applyDefaultCostModel();
    // One pass in program order rather than a greedy rewrite: kernel names
    // are made unique in the order the kernels are created, and the
    // lowering neither folds nor erases anything beyond the stage ops.
    PatternRewriter rewriter(&getContext());
    for (Operation *op : stages) {
      rewriter.setInsertionPoint(op);
      if (failed(applicator.matchAndRewrite(op, rewriter))) {
        op->emitOpError() << "could not be lowered to GPU kernels";
        return signalPassFailure();
      }
    }
  }
};

} // namespace

void mlir::condensate::populateCondensateToGPUPatterns(
    RewritePatternSet &patterns, gpu::GPUModuleOp kernels) {
  populateScoreToGPUPatterns(patterns, kernels);
  populateSelectToGPUPatterns(patterns, kernels);
  populateAttendToGPUPatterns(patterns, kernels);
  populateCertifyToGPUPatterns(patterns, kernels);
  populateMergeToGPUPatterns(patterns, kernels);
  populateAppendToGPUPatterns(patterns, kernels);
  populatePrefillToGPUPatterns(patterns, kernels);
}
