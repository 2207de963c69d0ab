//===- LaunchPlan.h - the host launch plan of lowered models ----*- C++ -*-===//
//
// Reads a module after convert-condensate-to-gpu back as the plain launch
// plan (condensate/ABI/LaunchPlan.h) that the runtime executes and the AOT
// manifest stores. Tested by the condensate-test-launch-plan pass.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_LAUNCHPLAN_H
#define CONDENSATE_CODEGEN_LAUNCHPLAN_H

#include "condensate/ABI/LaunchPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir::condensate {

/// The launch plan of model `model` (an entry of the module's layer tables)
/// for `target`: its layer and append functions, and for every host
/// function its scratch buffers and kernel launches. Emits an error on the
/// offending op and fails when a function holds something a plan cannot
/// express.
FailureOr<::condensate::LaunchPlan>
extractLaunchPlan(ModuleOp module, StringRef model, StringRef target);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_LAUNCHPLAN_H
