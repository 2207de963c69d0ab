//===- CondensateDialect.h - The condensate dialect -------------*- C++ -*-===//
//
// Declares the condensate dialect, its attributes and its operations.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DIALECT_CONDENSATEDIALECT_H
#define CONDENSATE_DIALECT_CONDENSATEDIALECT_H

#include "condensate/ABI/AttentionABI.h"

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

// The calling convention of the generated functions (summary slots, stats
// columns, argument order) is defined once, in plain C++, by AttentionABI.h.
using ::condensate::abi::kFellBack;
using ::condensate::abi::kFellBackEarly;
using ::condensate::abi::KMax;
using ::condensate::abi::KMin;
using ::condensate::abi::kStatsWidth;
using ::condensate::abi::KSum;
using ::condensate::abi::kSummarySlots;
using ::condensate::abi::StatAttended;
using ::condensate::abi::StatEpsHat;
using ::condensate::abi::StatExtra;
using ::condensate::abi::StatFallback;
using ::condensate::abi::StatOutputBound;
using ::condensate::abi::StatsEntry;
using ::condensate::abi::SummarySlot;
using ::condensate::abi::VMax;
using ::condensate::abi::VMin;
/// Rows of a value box (certify's `vbox`): per-channel min, then max.
constexpr int64_t kValueBoxRows = 2;
/// Entries per split in a partial (m, l, c) buffer.
constexpr int64_t kPartialMLWidth = 3;

/// Name of the module attribute that maps each expanded model to its layer
/// table: {<model> = {append = @fn, layers = [@fn, ...], adaptive =
/// array<i64: ...>}}.
constexpr llvm::StringLiteral kLayerTablesAttrName = "condensate.layer_tables";

/// Programmatic dependent launch (sm_90 and later). On a gpu.module: its
/// kernels wait, before their first memory access, until the grids before
/// them have completed and their writes are visible (griddepcontrol.wait),
/// then let the next grid be launched (griddepcontrol.launch_dependents).
/// On a gpu.func and a gpu.launch_func: that kernel does so, so the launch
/// may overlap the previous grid's tail (the launch plan's
/// grid_dependency). Without the attribute on its launch the wait returns
/// at once.
constexpr llvm::StringLiteral kGridDependencyAttrName =
    "condensate.grid_dependency";

/// True if `attr` is a PolicyAttr or a DenseAttr.
bool isPolicyLike(Attribute attr);

/// Whether `op` is a stage op (the ops condensate-decompose emits,
/// append_kv and prefill_attention): the ops both lowerings must replace.
bool isStageOp(Operation *op);

} // namespace mlir::condensate

#endif // CONDENSATE_DIALECT_CONDENSATEDIALECT_H
