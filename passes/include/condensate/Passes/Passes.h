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

/// The number of splits of dense attention picked for `target` when one
/// launch covers `kvHeads` kv heads (each sequence's context is cut into
/// at most that many equal chunks).
int64_t chooseDenseSplits(Target target, int64_t kvHeads);

} // namespace mlir::condensate

#endif // CONDENSATE_PASSES_PASSES_H
