//===- LaunchPlan.h - how to launch generated GPU kernels -------*- C++ -*-===//
//
// The launch plan of a compiled model: for every generated function (one per
// layer configuration, one per prefill window, plus the append), the scratch
// buffers it needs and the kernels it launches in order, with grids and
// memref parameters written
// as small expressions over the arguments' dimensions. It is what the JSON
// manifest of an AOT kernel library holds, so engines other than this
// runtime can launch the kernels too.
//
// A memref parameter expands, in the kernel's parameter list, to: allocated
// pointer, aligned pointer, offset, sizes[rank], strides[rank] (pointers as
// 64-bit addresses, the rest as int64), MLIR's memref descriptor.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_ABI_LAUNCHPLAN_H
#define CONDENSATE_ABI_LAUNCHPLAN_H

#include "condensate/Support/Status.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace condensate {

/// An integer expression over argument dimensions: a constant, `arg[i].dim
/// [d]`, or add/mul/ceildiv/max/min of two expressions.
struct Expr {
  enum class Kind { Const, Dim, Add, Mul, CeilDiv, Max, Min };
  Kind kind = Kind::Const;
  int64_t value = 0; ///< Const: the value; Dim: argument index
  int64_t dim = 0;   ///< Dim: dimension index
  std::vector<Expr> operands;

  static Expr constant(int64_t v) {
    Expr e;
    e.value = v;
    return e;
  }
  static Expr argDim(int64_t arg, int64_t d) {
    Expr e;
    e.kind = Kind::Dim;
    e.value = arg;
    e.dim = d;
    return e;
  }
  static Expr binary(Kind k, Expr a, Expr b) {
    Expr e;
    e.kind = k;
    e.operands = {std::move(a), std::move(b)};
    return e;
  }
  bool isConstant() const { return kind == Kind::Const; }
  /// Evaluates with `argShapes[i][d]` the size of dimension d of argument i.
  Result<int64_t> eval(const std::vector<std::vector<int64_t>> &argShapes) const;
  std::string toString() const;
};

/// Where a memref parameter's data lives.
struct BufferRef {
  enum class Kind { Argument, Scratch };
  Kind kind = Kind::Argument;
  int64_t index = 0;
};

/// One memref kernel parameter: a view (offset, sizes, strides in elements)
/// of an argument or scratch buffer.
struct MemRefParam {
  BufferRef buffer;
  std::string elementType; ///< f64, f32, f16, bf16, i32, i8
  int64_t elementBytes = 4;
  Expr offset;
  std::vector<Expr> sizes, strides;
};

struct ScratchBuffer {
  std::string elementType;
  int64_t elementBytes = 4;
  std::vector<Expr> shape;
};

struct KernelLaunch {
  std::string kernel;
  std::array<Expr, 3> grid;
  std::array<int64_t, 3> block{1, 1, 1};
  /// Dynamic shared memory of each launch (JSON `shared_bytes`). Past 48 KB
  /// the loader must opt the kernel in first
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), as GPUProgram::load
  /// does; select_topk's key cache takes what the chip allows.
  int64_t sharedBytes = 0;
  /// The kernel waits for the grids before it at entry (griddepcontrol), so
  /// it may be launched programmatically (JSON `grid_dependency`; false in
  /// manifests written before it existed): the loader then sets
  /// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION and the launch
  /// can overlap the previous kernel's tail.
  bool gridDependency = false;
  std::vector<MemRefParam> params;
};

/// The launches of one generated function.
struct FunctionPlan {
  std::string name;
  int64_t numArgs = 0;
  std::vector<ScratchBuffer> scratch;
  std::vector<KernelLaunch> launches;
};

/// Everything needed to run a compiled model's kernels.
struct LaunchPlan {
  std::string target; ///< e.g. sm_90
  std::map<std::string, FunctionPlan> functions;
  std::vector<std::string> layers; ///< function of each layer
  std::string append;              ///< function of the KV append
  /// Prefill function of each layer (empty in manifests written before
  /// prefill_attention existed).
  std::vector<std::string> prefill;
  std::vector<int64_t> adaptive;   ///< layers that take per-sequence windows

  std::string toJSON() const;
  static Result<LaunchPlan> fromJSON(const std::string &text);
};

} // namespace condensate

#endif // CONDENSATE_ABI_LAUNCHPLAN_H
