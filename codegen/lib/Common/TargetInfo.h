//===- TargetInfo.h - what the shared numerics ask of a target --*- C++ -*-===//
//
// The target choices the shared numerics depend on, behind one small
// interface (after Triton's TargetInfoBase): how many lanes run in lockstep
// and how they exchange values, how threads wait for each other, how wide a
// vector load is, and the precision of the certificate's exponentials. The
// loop lowering is a target of one lane with no barriers
// (ToLoops/Lowering.h); the GPU lowering's is NVVMTargetInfo
// (ToGPU/KernelBuilder.h).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_TARGETINFO_H
#define CONDENSATE_CODEGEN_COMMON_TARGETINFO_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::condensate {

class Emitter;

/// The loop and GPU lowerings were written apart, and a few formulas they
/// now share came out with the same operations in a different order (the
/// GPU copies nest the calls that the loop copies name one by one, and GCC
/// evaluates call arguments right to left). Each target keeps its order so
/// that the generated code stays byte-identical; a change that may alter
/// the generated code can settle on one.
enum class FormulaOrder { Loops, Kernels };

class TargetInfo {
public:
  virtual ~TargetInfo() = default;

  /// Lanes that run in lockstep and exchange registers by shuffles (a
  /// warp); 1 where a thread runs alone.
  virtual int64_t warpSize() const = 0;
  /// Elements of type `elt` that one vector load moves per lane.
  virtual int64_t vectorWidth(Type elt) const = 0;
  /// `v` as held by the lane whose index differs from this one's by xor
  /// `offset` (< warpSize()).
  virtual Value shuffleXor(Emitter &e, Value v, int64_t offset) const = 0;
  /// Waits for every thread of the block and makes their shared-memory
  /// writes visible; nothing where a thread runs alone.
  virtual void barrier(Emitter &e) const = 0;
  /// Whether the certificate takes each unit's exponential in f64 (cheap on
  /// a CPU), or in f32 with only the sums in f64 (f64 exponentials are slow
  /// on GPUs).
  virtual bool f64Exp() const = 0;
  /// The operation order of the formulas the two lowerings wrote apart.
  virtual FormulaOrder formulaOrder() const = 0;
};

/// Combines `v` over an aligned group of `lanes` lanes (a power of two, at
/// most warpSize()) by xor butterflies, so every lane of the group gets the
/// result; one lane is left as it is.
Value laneReduce(Emitter &e, const TargetInfo &target, Value v, int64_t lanes,
                 llvm::function_ref<Value(Value, Value)> combine);
/// Float sum and max over the group (laneReduce).
Value laneSum(Emitter &e, const TargetInfo &target, Value v, int64_t lanes);
Value laneMax(Emitter &e, const TargetInfo &target, Value v, int64_t lanes);
/// Float sums of N values (`values`, N a power of two) over an aligned group
/// of `lanes` lanes, each lane exchanging half of what it still holds per
/// butterfly stage: N/2 + N/4 + ... shuffles in all, against N log2(lanes)
/// for N laneSums. Returns max(1, N / lanes) sums; lane l (`lane`, its index
/// in the group) holds those of values l * (N / lanes) + k when N >= lanes,
/// else of value l / (lanes / N) (as every lane of its l / (lanes / N)
/// subgroup does).
SmallVector<Value> laneSumTransposed(Emitter &e, const TargetInfo &target,
                                     ArrayRef<Value> values, int64_t lanes,
                                     Value lane);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_TARGETINFO_H
