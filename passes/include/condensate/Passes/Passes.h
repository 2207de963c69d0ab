//===- Passes.h - condensate transformation passes --------------*- C++ -*-===//
//
// Declares the passes that stay inside the condensate dialect.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_PASSES_PASSES_H
#define CONDENSATE_PASSES_PASSES_H

#include "condensate/Dialect/CondensateDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::condensate {

#define GEN_PASS_DECL
#include "condensate/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "condensate/Passes/Passes.h.inc"

/// The number of sparse-attention splits the specialiser picks for a
/// condensate set of `virtualLength` slots on `target` (on a GPU the most a
/// launch runs; each launch runs as many as its batch needs).
int64_t chooseSparseSplits(Target target, int64_t virtualLength);

/// The blocks a GPU's dense attention launch aims for over all its
/// sequences and kv heads (4 a multiprocessor on 132): chooseDenseSplits
/// sizes one sequence's splits for them and the lowering launches a
/// batch's share (ToGPU/Attend.cpp, liveSplits).
constexpr int64_t kGPUDenseBlockTarget = 512;

/// The number of splits of dense attention picked for `target` when one
/// launch covers `kvHeads` kv heads (each sequence's context is cut into
/// at most that many equal chunks).
int64_t chooseDenseSplits(Target target, int64_t kvHeads);

} // namespace mlir::condensate

#endif // CONDENSATE_PASSES_PASSES_H
