//===- Support.h - MLIR plumbing of the compiler library --------*- C++ -*-===//
//
// Internal to the compiler library: one MLIR context setup, diagnostics
// captured as one-line located messages, and conversions between the
// dialect's attributes and the runtime's plain Policy/Schedule/ModelShape in
// both directions (so a model is built from the structures, never printed
// and parsed again).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_COMPILER_SUPPORT_H
#define CONDENSATE_COMPILER_SUPPORT_H

#include "condensate/Dialect/CondensateDialect.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Support/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>

namespace condensate::detail {

/// A context with every dialect the pipelines need, single-threaded.
std::unique_ptr<mlir::MLIRContext> makeContext();

/// Collects diagnostics as "file:line:col: error: message" lines.
class DiagnosticCollector {
public:
  /// Locations in a buffer named `rename` are reported as `as` (used for
  /// strings parsed without a file, whose "file name" is their text).
  explicit DiagnosticCollector(mlir::MLIRContext *ctx,
                               std::string rename = "", std::string as = "");
  ~DiagnosticCollector();
  /// The first error, or `fallback` when none was reported.
  Status error(const std::string &fallback) const;

private:
  mlir::MLIRContext *ctx;
  mlir::DiagnosticEngine::HandlerID id;
  std::string rename, as;
  std::vector<std::string> messages;
};

Result<Policy> policyFromAttr(mlir::Attribute attr);
Result<Schedule> scheduleFromAttr(mlir::condensate::ScheduleAttr attr);
Result<ModelShape> shapeFromModel(mlir::condensate::ModelOp model);

/// The attribute of `policy` / `schedule` (verified like parsed ones).
Result<mlir::Attribute> policyToAttr(mlir::MLIRContext *ctx,
                                     const Policy &policy);
Result<mlir::condensate::ScheduleAttr>
scheduleToAttr(mlir::MLIRContext *ctx, const Schedule &schedule);

/// A module holding one `condensate.model @name` op for `shape` under
/// `schedule`, verified: what parsing modelToMLIR(name, shape, schedule)
/// gives.
Result<mlir::OwningOpRef<mlir::ModuleOp>>
buildModelModule(mlir::MLIRContext *ctx, const std::string &name,
                 const ModelShape &shape, const Schedule &schedule);

/// The first condensate.model op of `module`, or an error naming
/// `bufferName`.
Result<mlir::condensate::ModelOp> firstModel(mlir::ModuleOp module,
                                             const std::string &bufferName);

/// Parses `text` as a module; errors are located in `bufferName`.
Result<mlir::OwningOpRef<mlir::ModuleOp>>
parseModule(mlir::MLIRContext *ctx, const std::string &text,
            const std::string &bufferName);

} // namespace condensate::detail

#endif // CONDENSATE_COMPILER_SUPPORT_H
