//===- Lowering.h - stage files of the GPU lowering -------------*- C++ -*-===//
//
// The populate functions of the stage files that make up
// convert-condensate-to-gpu. Each adds patterns that turn a stage op into a
// kernel in `kernels` and a launch where the op stood.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_TOGPU_LOWERING_H
#define CONDENSATE_CODEGEN_TOGPU_LOWERING_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::condensate {

struct CandidateUnits;
namespace kernel {
class GPUEmitter;
} // namespace kernel

/// rankRelative's offsets r_i of key/value head g's query heads in sequence
/// bb (forcedScoreMax over the lanes, rankOffset), held by every lane of
/// the warp; every lane must reach it. Select and precertify rank with them.
SmallVector<Value> warpRankOffsets(kernel::GPUEmitter &e,
                                   const CandidateUnits &units, Value scores,
                                   Value bb, Value g, int64_t group);

/// score_pages and score_tokens.
void populateScoreToGPUPatterns(RewritePatternSet &patterns,
                                gpu::GPUModuleOp kernels);
/// select_topk.
void populateSelectToGPUPatterns(RewritePatternSet &patterns,
                                 gpu::GPUModuleOp kernels);
/// sparse_attend and dense_attend.
void populateAttendToGPUPatterns(RewritePatternSet &patterns,
                                 gpu::GPUModuleOp kernels);
/// certify.
void populateCertifyToGPUPatterns(RewritePatternSet &patterns,
                                  gpu::GPUModuleOp kernels);
/// merge.
void populateMergeToGPUPatterns(RewritePatternSet &patterns,
                                gpu::GPUModuleOp kernels);
/// append_kv.
void populateAppendToGPUPatterns(RewritePatternSet &patterns,
                                 gpu::GPUModuleOp kernels);
/// prefill_attention.
void populatePrefillToGPUPatterns(RewritePatternSet &patterns,
                                  gpu::GPUModuleOp kernels);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_TOGPU_LOWERING_H
