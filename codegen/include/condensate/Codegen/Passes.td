//===- Passes.td - condensate lowerings ---------------------*- tablegen -*-===//
//
// Conversions out of the condensate dialect: to loops for the CPU, and to GPU
// kernels for NVIDIA targets. Sorted by name.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_PASSES_TD
#define CONDENSATE_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCondensateToLoops
    : Pass<"convert-condensate-to-loops", "::mlir::ModuleOp"> {
  let summary = "Lowers condensate stages to scf loops for the CPU";
  let description = [{
    Rewrites every stage op (and `condensate.append_kv`) into scf loops over
    memrefs with arith, math and vector arithmetic: head-dimension rows are
    processed 8 lanes at a time, softmax is online (running max, sum and
    output per split), top-k is a radix search over order-preserving
    integer keys, and the certificate accumulates omitted mass in f64.
    The result lowers to LLVM with the standard conversions.

    Before:

    ```mlir
    condensate.merge partials(%po, %pml : memref<?x4x1x64xf32>, memref<?x4x1x3xf32>)
        out(%out : memref<?x4x64xf32>)
    ```

    After (abridged):

    ```mlir
    scf.for %b = %c0 to %batch step %c1 {
      scf.for %h = %c0 to %c4 step %c1 {
        %m = scf.for %s = ... iter_args(%acc = %neg_inf) -> (f32) { ... }
        ...
        vector.store %row0, %out[%b, %h, %c0] : memref<?x4x64xf32>, vector<8xf32>
      }
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // CONDENSATE_CODEGEN_PASSES_TD
