//===- InitCondensate.h - one registration for every tool -------*- C++ -*-===//
//
// Registers the dialects, passes, pipelines and translations that condensate
// tools and the runtime's in-process compiler need.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_INITCONDENSATE_H
#define CONDENSATE_CODEGEN_INITCONDENSATE_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::condensate {

/// Adds the condensate dialect and every dialect its lowerings produce,
/// with their LLVM IR translations and interface extensions.
void registerCondensateDialects(DialectRegistry &registry);

/// Registers condensate passes and pipelines plus the upstream passes the
/// pipelines use, so tools can run each step by flag.
void registerCondensatePasses();

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_INITCONDENSATE_H
