//===- KernelBuilder.h - GPU emitter and kernel builder ---------*- C++ -*-===//
//
// What every GPU stage lowering builds on: the GPU as a target of the shared
// numerics (NVVMTargetInfo), GPUEmitter (thread and block ids, shuffles,
// scans, vector loads, atomics on top of Emitter), the KernelBuilder that
// creates kernels in one gpu.module and launches them from the host, and
// KernelPattern, the rewrite pattern that runs a stage's lowering function.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_TOGPU_KERNELBUILDER_H
#define CONDENSATE_CODEGEN_TOGPU_KERNELBUILDER_H

#include "../Common/Emitter.h"
#include "../Common/TargetInfo.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::condensate::kernel {

/// Threads of a warp.
constexpr int64_t kWarp = 32;

/// Static shared memory a block may use on every chip (and dynamic shared
/// memory without opting in).
constexpr int64_t kStaticSharedBytes = 48 * 1024;

inline Type elementType(Value v) {
  return cast<MemRefType>(v.getType()).getElementType();
}
inline int64_t elementBytes(Type t) { return t.getIntOrFloatBitWidth() / 8; }

/// The GPU as seen by the shared numerics: warps of kWarp lanes, 16-byte
/// vector loads, block barriers, the certificate's exponentials in f32.
class NVVMTargetInfo : public TargetInfo {
public:
  int64_t warpSize() const override { return kWarp; }
  int64_t vectorWidth(Type elt) const override {
    return std::max<int64_t>(1, 16 / elementBytes(elt));
  }
  Value shuffleXor(Emitter &e, Value v, int64_t offset) const override;
  void barrier(Emitter &e) const override;
  bool f64Exp() const override { return false; }
  FormulaOrder formulaOrder() const override { return FormulaOrder::Kernels; }
};
const TargetInfo &nvvmTarget();

/// Shared memory a block may claim on `chip` ("sm_90", "sm_80", ...) once a
/// kernel opts in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): static
/// plus dynamic. 48 KB, what every chip allows without opting in, for a
/// chip this table does not know.
int64_t sharedBytesOptin(StringRef chip);

/// The compute capability of `chip` ("sm_90a" -> 90), 0 when it is not
/// of the form sm_<number>.
int64_t computeCapability(StringRef chip);

/// The gpu.module attribute (a unit attribute) through which
/// convert-condensate-to-gpu tells the stage lowerings that they may use
/// the chip's tensor cores (mma.sync with bf16/f16 operands: sm_80 and
/// later, and the pass's tensor-cores option on).
constexpr const char *kTensorCoresAttr = "condensate.tensor_cores";

/// The gpu.module attribute (i64) through which convert-condensate-to-gpu
/// passes its attend-warps option (warps or lane groups per attention
/// block) to the attention lowerings; absent: their own choice.
constexpr const char *kAttendWarpsAttr = "condensate.attend_warps";

/// The gpu.module attribute (i64) through which convert-condensate-to-gpu
/// passes its sketch-occupancy option (resident warps per SM of the
/// key-sketch scoring kernels); absent: their own choice.
constexpr const char *kSketchOccupancyAttr = "condensate.sketch_occupancy";

/// The gpu.module attribute (i64) through which convert-condensate-to-gpu
/// passes its attend-occupancy option (resident warps per SM of the
/// attention kernels); absent: no launch bound.
constexpr const char *kAttendOccupancyAttr = "condensate.attend_occupancy";

/// The gpu.module attribute (i64) through which convert-condensate-to-gpu
/// passes its attend-stages option (pipeline depth of the tensor-core
/// attention loop); absent: the lowering's rule.
constexpr const char *kAttendStagesAttr = "condensate.attend_stages";

/// The gpu.module attribute through which convert-condensate-to-gpu tells
/// the stage lowerings sharedBytesOptin of its chip.
constexpr const char *kSharedOptinAttr = "condensate.shared_bytes_optin";

class GPUEmitter;

/// One mma.sync.m16n8k16.row.col of bf16 operands into f32 accumulators:
/// `a` holds the 4 and `b` the 2 i32 registers of packed bf16 pairs of this
/// lane's fragments, `c` its 4 accumulators.
SmallVector<Value> mmaBF16(GPUEmitter &e, ArrayRef<Value> a, ArrayRef<Value> b,
                           ArrayRef<Value> c);
/// The i32 holding bf16 scalars x (low half) and y (high half).
Value packBF16(GPUEmitter &e, Value x, Value y);
/// movmatrix.sync.aligned.m8n8.trans.b16 (sm_75 and later; every lane of
/// the warp takes part): `word` is this lane's pair of an 8 x 8 matrix of
/// 16-bit elements in the mma fragment layout (row lane / 4, columns
/// 2 (lane % 4) and the next); the result is its pair of the transpose.
Value transposeB16(GPUEmitter &e, Value word);
/// PTX lop3.b32 of the i32 values a, b, c with truth table `lut` (a = 0xF0,
/// b = 0xCC, c = 0xAA): one instruction where LLVM would emit an and and
/// an or with two immediates (which ptxas keeps as two).
Value lop3(GPUEmitter &e, Value a, Value b, Value c, uint8_t lut);

/// The vector `v` unchanged, through an empty inline asm whose outputs are
/// tied to its inputs: no PTX instruction, but LLVM cannot see through it
/// (a vector not of whole 32-bit words is returned as it is). A software
/// pipeline's prefetched rows pass through it before they become
/// loop-carried values; otherwise InstCombine folds the loop's phi of two
/// loads (the first round's, the next round's) into one load at the loop's
/// head, issued where it is used, and every round waits for its own loads.
Value opaque(GPUEmitter &e, Value v);
/// The index `i` through `opaque`: addresses computed from it are not known
/// to LLVM, which then cannot speculate a load at them out of the branch
/// that guards it into threads that do not own the entry.
Value opaqueIndex(GPUEmitter &e, Value i);

/// A gpu.shuffle of the 32-bit value v across the warp.
Value shuffle(Emitter &e, Value v, int64_t offset, gpu::ShuffleMode mode);

/// The alignment a vector access of `bytes` bytes at multiples of its own
/// size may claim: the largest power of two dividing it, at most 16.
inline int64_t vectorAlign(int64_t bytes) {
  int64_t a = 1;
  while (a < 16 && bytes % (2 * a) == 0)
    a *= 2;
  return a;
}

/// How a lane group covers one head_dim row: `lanes` lanes (a power of two,
/// at most a warp, so that groups tile warps and xor butterflies stay in
/// the group), `elems` consecutive elements each: the most lanes that still
/// give each a 16-byte load where the row allows it. head_dim 64, 128, 256
/// and 512 split as 16-byte loads; 96 in bf16 as 8 lanes of 12 elements,
/// 80 as 8 of 10, 72 as 8 of 9.
struct RowSplit {
  int64_t lanes;
  int64_t elems;
  static RowSplit of(int64_t d, Type elt) {
    const TargetInfo &target = nvvmTarget();
    int64_t width = target.vectorWidth(elt);
    int64_t lanes = 1;
    while (2 * lanes <= target.warpSize() && d % (2 * lanes) == 0 &&
           d / (2 * lanes) >= width)
      lanes *= 2;
    return {lanes, d / lanes};
  }
};

/// A thread's place in a block of lane groups: its thread id, its lane
/// group, its lane in the group and the first row element it holds.
struct LanePlace {
  Value tid, group, lane, col;
};

/// Emitter with GPU-specific helpers.
class GPUEmitter : public Emitter {
public:
  using Emitter::Emitter;
  std::unique_ptr<Emitter> nested(OpBuilder &nb, Location nloc) const override {
    return std::make_unique<GPUEmitter>(nb, nloc);
  }

  Value tid() {
    return gpu::ThreadIdOp::create(builder(), location(), gpu::Dimension::x);
  }
  Value bid(gpu::Dimension d) {
    return gpu::BlockIdOp::create(builder(), location(), d);
  }
  /// The launch's blocks along d (index).
  Value gridDim(gpu::Dimension d) {
    return gpu::GridDimOp::create(builder(), location(), d);
  }
  void barrier() { nvvmTarget().barrier(*this); }
  /// bar.warp.sync over the whole warp: orders the warp's shared memory
  /// accesses before it against those after it.
  void syncWarp() { NVVM::SyncWarpOp::create(builder(), location(), i32(-1)); }
  /// This thread's place when lane groups cover rows as `split` says.
  LanePlace lanePlace(const RowSplit &split) {
    Value t = tid();
    Value group = divs(t, idx(split.lanes));
    Value lane = rems(t, idx(split.lanes));
    Value col = mul(lane, idx(split.elems));
    return {t, group, lane, col};
  }

  /// Shuffles of a 32-bit value across the warp.
  Value shuffleXor(Value v, int64_t offset) {
    return shuffle(*this, v, offset, gpu::ShuffleMode::XOR);
  }
  Value shuffleUp(Value v, int64_t offset) {
    return shuffle(*this, v, offset, gpu::ShuffleMode::UP);
  }
  Value shuffleDown(Value v, int64_t offset) {
    return shuffle(*this, v, offset, gpu::ShuffleMode::DOWN);
  }
  /// The value `v` of lane `lane` (index or i32) of the warp.
  Value shuffleIdx(Value v, Value lane) {
    return gpu::ShuffleOp::create(builder(), location(), v, toI32(lane),
                                  i32(kWarp), gpu::ShuffleMode::IDX)
        .getShuffleResult();
  }
  /// Inclusive scan of `v` over the warp's lanes (Hillis-Steele, log2(32)
  /// rounds): lane l combines lanes 0..l, or with `down` lanes l..31.
  /// `move(x, o)` brings the value o lanes away (shuffleUp, or shuffleDown
  /// with `down`). Every lane of the warp must reach it.
  Value warpScan(Value v, Value lane, bool down,
                 llvm::function_ref<Value(Value, int64_t)> move,
                 llvm::function_ref<Value(Value, Value)> combine) {
    for (int64_t o = 1; o < kWarp; o *= 2) {
      Value other = move(v, o);
      Value has = down ? lt(lane, idx(kWarp - o)) : ge(lane, idx(o));
      v = select(has, combine(v, other), v);
    }
    return v;
  }
  /// Inclusive prefix sum of an i32 across the warp.
  Value warpScanI32(Value v, Value lane) {
    return warpScan(
        v, lane, /*down=*/false,
        [&](Value x, int64_t o) { return shuffleUp(x, o); },
        [&](Value x, Value y) { return add(x, y); });
  }
  Value fastExp(Value x) {
    auto flags =
        arith::FastMathFlagsAttr::get(ctx(), arith::FastMathFlags::afn);
    return math::ExpOp::create(builder(), location(), x, flags);
  }
  Value vecLoad(Value mem, ValueRange ivs, int64_t n, int64_t alignBytes) {
    auto type = VectorType::get({n}, elementType(mem));
    return vector::LoadOp::create(builder(), location(), type, mem, ivs,
                                  /*nontemporal=*/false,
                                  llvm::MaybeAlign(alignBytes));
  }
  Value extractElt(Value vec, int64_t i) {
    return vector::ExtractOp::create(builder(), location(), vec, i);
  }
  /// The mask of the warp's lanes whose i32 `v` equals this lane's
  /// (match.any.sync over the full warp: every lane must reach it).
  Value matchAny(Value v) {
    return NVVM::MatchSyncOp::create(builder(), location(),
                                     builder().getI32Type(), i32(-1), v,
                                     NVVM::MatchSyncKind::any);
  }
  /// The number of set bits of an i32.
  Value popc(Value v) {
    return LLVM::CtPopOp::create(builder(), location(), v);
  }
  /// The i32 (1 << lane) of this lane in a warp mask.
  Value laneBit(Value lane) {
    return arith::ShLIOp::create(builder(), location(), i32(1), toI32(lane));
  }
  Value atomicAddI32(Value mem, ValueRange ivs, Value v) {
    return memref::AtomicRMWOp::create(builder(), location(),
                                       arith::AtomicRMWKind::addi, v, mem, ivs);
  }
  Value atomicAddF64(Value mem, ValueRange ivs, Value v) {
    return memref::AtomicRMWOp::create(builder(), location(),
                                       arith::AtomicRMWKind::addf, v, mem, ivs);
  }
  /// An f64 moved between a warp's lanes as its two 32-bit halves: `move`
  /// shuffles one half (shuffleXor, shuffleUp, ...). Every lane of the warp
  /// must reach it.
  Value shuffleF64(Value v, const std::function<Value(Value)> &move);
  /// The f64 `v` summed over the warp (xor butterflies on its two 32-bit
  /// halves; every lane gets the sum). Every lane of the warp must reach it.
  Value warpSumF64(Value v);
  /// Inclusive prefix sums of an f64 over the warp's lanes (lane l gets
  /// lanes 0..l), and inclusive suffix sums (lanes l..31): warpScan's
  /// additions, so sums of positive terms stay rigorous upper bounds up to
  /// their rounding. Every lane of the warp must reach them.
  Value warpPrefixF64(Value v, Value lane);
  Value warpSuffixF64(Value v, Value lane);
  /// Adds every thread's f64 `v` to `mem[ivs]`: summed over the warp first,
  /// then one atomic a warp (lane 0 of a 1-D block's warp), not 32
  /// contended ones. Every lane of the warp must reach it.
  void warpAtomicAddF64(Value mem, ValueRange ivs, Value v);
  Value atomic(arith::AtomicRMWKind kind, Value mem, ValueRange ivs, Value v) {
    return memref::AtomicRMWOp::create(builder(), location(), kind, v, mem,
                                       ivs);
  }
};

/// Builds kernels into one gpu.module and launches them from the host.
class KernelBuilder {
public:
  explicit KernelBuilder(gpu::GPUModuleOp kernels) : kernels(kernels) {}

  /// sharedBytesOptin of the chip the kernels are built for (the module's
  /// kSharedOptinAttr; 48 KB without it).
  int64_t sharedBytesOptin() const;
  /// Whether the kernels may use tensor cores (kTensorCoresAttr).
  bool tensorCores() const;
  /// Warps or lane groups per attention block requested through
  /// kAttendWarpsAttr; 0 when the lowering chooses.
  int64_t attendWarps() const;
  /// The sketch-occupancy option: resident warps per SM (0: the
  /// lowering's own rule).
  int64_t sketchOccupancy() const;
  /// The attend-occupancy option: resident warps per SM (0: none asked).
  int64_t attendOccupancy() const;
  /// The attend-stages option (0: the lowering's rule).
  int64_t attendStages() const;

  /// Creates kernel `name` taking `operands`' types; `body` receives the
  /// kernel arguments and an emitter at the kernel entry.
  gpu::GPUFuncOp
  createKernel(StringRef base, ValueRange operands, ArrayRef<Type> workgroup,
               const std::function<void(GPUEmitter &, ValueRange, ValueRange)>
                   &body) const;

  /// Launch bounds for ptxas: at most `threads` threads per block and at
  /// least `minBlocks` resident blocks per SM, which caps the registers a
  /// thread may use (65536 / (threads * minBlocks)).
  static void launchBounds(gpu::GPUFuncOp fn, int64_t threads,
                           int64_t minBlocks);

  static MemRefType workgroupType(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                  Type elt);
  /// Static shared memory the `workgroup` buffers take (their sizes summed).
  static int64_t workgroupBytes(ArrayRef<Type> workgroup);

private:
  std::string uniqueName(StringRef base) const;

  gpu::GPUModuleOp kernels;
};

/// Host-side launch of `fn` with grid (x, y, z) and `threads` threads, and
/// `dynamicShared` bytes of dynamic shared memory (a constant the launch
/// plan carries).
void launch(OpBuilder &b, Location loc, gpu::GPUFuncOp fn, Value x, Value y,
            Value z, int64_t threads, ValueRange operands,
            int64_t dynamicShared = 0);

/// The kernel's dynamic shared memory as a workgroup memref of `shape`
/// elements of `elt` (gpu.dynamic_shared_memory viewed from its start).
Value dynamicSharedArray(Emitter &e, ArrayRef<int64_t> shape, Type elt);

/// Launches `fn` with one block of `threads` threads per (kv head,
/// sequence): grid (hkv, batch), the batch being dimension 0 of `batched`.
void launchPerGroup(OpBuilder &b, Location loc, gpu::GPUFuncOp fn,
                    Value batched, int64_t hkv, int64_t threads,
                    ValueRange operands, int64_t dynamicShared = 0);

/// The name of the kernel for stage `stage` of op: "<function>_<stage>".
std::string kernelName(Operation *op, StringRef stage);

/// Lowers one stage op with `Lower`: a kernel built by `kernels` and its
/// launch, created where the op stood; the op is then erased.
template <typename Op,
          void (*Lower)(Op, OpBuilder &, const KernelBuilder &, StringRef)>
class KernelPattern : public OpRewritePattern<Op> {
public:
  KernelPattern(MLIRContext *ctx, gpu::GPUModuleOp kernels, StringRef stage)
      : OpRewritePattern<Op>(ctx), kernels(kernels), stage(stage.str()) {}

  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    Lower(op, rewriter, kernels, kernelName(op, stage));
    rewriter.eraseOp(op);
    return success();
  }

private:
  KernelBuilder kernels;
  std::string stage;
};

} // namespace mlir::condensate::kernel

#endif // CONDENSATE_CODEGEN_TOGPU_KERNELBUILDER_H
