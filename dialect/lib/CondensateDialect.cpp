//===- CondensateDialect.cpp - condensate dialect registration ------------===//
//
// Registers the condensate dialect's attributes and operations.
//
//===----------------------------------------------------------------------===//
#include "condensate/Dialect/CondensateDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::condensate;

#include "condensate/Dialect/CondensateDialect.cpp.inc"

void CondensateDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "condensate/Dialect/CondensateOps.cpp.inc"
      >();
}

bool mlir::condensate::isPolicyLike(Attribute attr) {
  return isa_and_nonnull<PolicyAttr, DenseAttr>(attr);
}
