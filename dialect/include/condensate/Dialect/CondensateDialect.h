//===- CondensateDialect.h - The condensate dialect -------------*- C++ -*-===//
//
// Declares the condensate dialect, its attributes and its operations.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DIALECT_CONDENSATEDIALECT_H
#define CONDENSATE_DIALECT_CONDENSATEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "condensate/Dialect/CondensateDialect.h.inc"
#include "condensate/Dialect/CondensateEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "condensate/Dialect/CondensateAttrs.h.inc"

#define GET_OP_CLASSES
#include "condensate/Dialect/CondensateOps.h.inc"

namespace mlir::condensate {

/// Number of summary vectors kept per page and key/value head.
constexpr int64_t kSummarySlots = 5;
/// Summary slot indices.
enum SummarySlot : int64_t { KMin = 0, KMax = 1, KSum = 2, VMin = 3, VMax = 4 };
/// Entries per query head in a stats buffer.
constexpr int64_t kStatsWidth = 5;
/// Stats entries: the omitted-mass bound eps_hat, positions attended, extra
/// units added, the dense-fallback flag and the output-error bound.
enum StatsEntry : int64_t {
  StatEpsHat = 0,
  StatAttended = 1,
  StatExtra = 2,
  StatFallback = 3,
  StatOutputBound = 4
};
/// Rows of a value box (certify's `vbox`): per-channel min, then max.
constexpr int64_t kValueBoxRows = 2;
/// Entries per split in a partial (m, l, c) buffer.
constexpr int64_t kPartialMLWidth = 3;

/// Name of the module attribute that maps each expanded model to its layer
/// table: {<model> = {append = @fn, layers = [@fn, ...], adaptive =
/// array<i64: ...>}}.
constexpr llvm::StringLiteral kLayerTablesAttrName = "condensate.layer_tables";

/// True if `attr` is a PolicyAttr or a DenseAttr.
bool isPolicyLike(Attribute attr);

} // namespace mlir::condensate

#endif // CONDENSATE_DIALECT_CONDENSATEDIALECT_H
