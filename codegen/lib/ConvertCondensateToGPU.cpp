//===- ConvertCondensateToGPU.cpp - stages to GPU kernels -----------------===//
//
// Implements convert-condensate-to-gpu: every stage op becomes a gpu.func
// kernel with an explicit thread mapping plus a gpu.launch_func in the host
// function. The mapping, per stage:
//   - score_pages: a lane group (16-byte loads) per page and kv head, the
//     group's query heads held in registers; grid (page blocks, Hkv, B).
//   - score_tokens: a lane group per token; grid (token blocks, Hkv, B).
//   - select_topk: one block per (kv head, sequence); an 8-bit radix search
//     (4 histogram passes in shared memory) for the base-th largest key, a
//     block-wide scan that writes the set in unit order, and argmax passes
//     for the ranked extras.
//   - sparse_attend / dense_attend: one block per (split, kv head, sequence);
//     lane groups of L lanes each read one key and one value row with 16-byte
//     loads, serve all G query heads of the group (GQA), keep online-softmax
//     state in registers, and combine through shared memory.
//   - certify: one block per (kv head, sequence), f64 mass sums; the
//     omitted-value box with threads over (page rows, channels), rows
//     combined through shared memory.
//   - merge: one warp per (sequence, query head), lanes over head_dim; the
//     output-error bound's squared distance summed by warp shuffles.
//   - append_kv: one block per sequence, threads over (kv head, channel).
// The numerics are those of the loop lowering (same slot enumeration, same
// ranking keys and tie-breaking, same certificate margins).
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/Passes.h"

#include "Common/Emitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::condensate {
#define GEN_PASS_DEF_CONVERTCONDENSATETOGPU
#include "condensate/Codegen/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

constexpr double kBoundMargin = 1.0 / 16384.0; // as in the loop lowering
constexpr double kOutputBoundRoundUp = 1.0 + 1.0 / 4096.0; // likewise
constexpr int64_t kMinDenseChunk = 256;          // as in the loop lowering
constexpr int64_t kWarp = 32;

int64_t staticDim(Value v, int64_t i) {
  return cast<MemRefType>(v.getType()).getDimSize(i);
}
Type elementType(Value v) {
  return cast<MemRefType>(v.getType()).getElementType();
}
int64_t elementBytes(Type t) { return t.getIntOrFloatBitWidth() / 8; }

/// How a lane group covers one head_dim row: `lanes` lanes, `elems`
/// consecutive elements each (16 bytes when the row allows it).
struct RowSplit {
  int64_t lanes;
  int64_t elems;
  static RowSplit of(int64_t d, int64_t bytes) {
    int64_t elems = std::max<int64_t>(1, 16 / bytes);
    int64_t lanes = d / elems;
    if (lanes > kWarp) {
      lanes = kWarp;
      elems = d / kWarp;
    }
    if (lanes < 1) {
      lanes = 1;
      elems = d;
    }
    return {lanes, elems};
  }
};

/// Emitter with GPU-specific helpers.
class GPUEmitter : public Emitter {
public:
  using Emitter::Emitter;
  std::unique_ptr<Emitter> nested(OpBuilder &nb, Location nloc) const override {
    return std::make_unique<GPUEmitter>(nb, nloc);
  }

  Value tid() { return gpu::ThreadIdOp::create(builder(), location(), gpu::Dimension::x); }
  Value bid(gpu::Dimension d) {
    return gpu::BlockIdOp::create(builder(), location(), d);
  }
  void barrier() { gpu::BarrierOp::create(builder(), location()); }

  /// XOR shuffle of a 32-bit value across `width` lanes.
  Value shuffleXor(Value v, int64_t offset) {
    Value off = i32(offset), width = i32(kWarp);
    return gpu::ShuffleOp::create(builder(), location(), v, off, width,
                                  gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  Value shuffleUp(Value v, int64_t offset) {
    Value off = i32(offset), width = i32(kWarp);
    return gpu::ShuffleOp::create(builder(), location(), v, off, width,
                                  gpu::ShuffleMode::UP)
        .getShuffleResult();
  }
  Value shuffleDown(Value v, int64_t offset) {
    Value off = i32(offset), width = i32(kWarp);
    return gpu::ShuffleOp::create(builder(), location(), v, off, width,
                                  gpu::ShuffleMode::DOWN)
        .getShuffleResult();
  }
  /// Sum over the `lanes` lanes of an aligned lane group.
  Value groupSum(Value v, int64_t lanes) {
    for (int64_t o = lanes / 2; o >= 1; o /= 2)
      v = fadd(v, shuffleXor(v, o));
    return v;
  }
  Value groupMax(Value v, int64_t lanes) {
    for (int64_t o = lanes / 2; o >= 1; o /= 2)
      v = fmax(v, shuffleXor(v, o));
    return v;
  }
  Value warpSumI32(Value v) {
    for (int64_t o = kWarp / 2; o >= 1; o /= 2)
      v = add(v, shuffleXor(v, o));
    return v;
  }
  /// Inclusive prefix sum of an i32 across the warp.
  Value warpScanI32(Value v, Value lane) {
    for (int64_t o = 1; o < kWarp; o *= 2) {
      Value up = shuffleUp(v, o);
      v = select(ge(lane, idx(o)), add(v, up), v);
    }
    return v;
  }
  Value fastExp(Value x) {
    auto flags = arith::FastMathFlagsAttr::get(ctx(), arith::FastMathFlags::afn);
    return math::ExpOp::create(builder(), location(), x, flags);
  }
  Value vecLoad(Value mem, ValueRange ivs, int64_t n, int64_t alignBytes) {
    auto type = VectorType::get({n}, elementType(mem));
    return vector::LoadOp::create(builder(), location(), type, mem, ivs,
                                  /*nontemporal=*/false,
                                  llvm::MaybeAlign(alignBytes));
  }
  Value splat(Value scalar, int64_t n) {
    return vector::BroadcastOp::create(
        builder(), location(), VectorType::get({n}, scalar.getType()), scalar);
  }
  Value reduceAdd(Value vec) {
    return vector::ReductionOp::create(builder(), location(),
                                       vector::CombiningKind::ADD, vec,
                                       arith::FastMathFlags::reassoc);
  }
  Value extractElt(Value vec, int64_t i) {
    return vector::ExtractOp::create(builder(), location(), vec, i);
  }
  Value atomicAddI32(Value mem, ValueRange ivs, Value v) {
    return memref::AtomicRMWOp::create(builder(), location(),
                                       arith::AtomicRMWKind::addi, v, mem, ivs);
  }
  Value atomicAddF64(Value mem, ValueRange ivs, Value v) {
    return memref::AtomicRMWOp::create(builder(), location(),
                                       arith::AtomicRMWKind::addf, v, mem, ivs);
  }
};

/// Builds kernels into one gpu.module and launches them from the host.
class KernelBuilder {
public:
  KernelBuilder(ModuleOp module, gpu::GPUModuleOp kernels)
      : module(module), kernels(kernels) {}

  /// Creates kernel `name` taking `operands`' types; `body` receives the
  /// kernel arguments and an emitter at the kernel entry.
  gpu::GPUFuncOp createKernel(
      StringRef base, ValueRange operands, ArrayRef<Type> workgroup,
      const std::function<void(GPUEmitter &, ValueRange, ValueRange)> &body) {
    std::string name = uniqueName(base);
    OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
    SmallVector<Type> types(operands.getTypes());
    auto fnType = b.getFunctionType(types, {});
    auto fn = gpu::GPUFuncOp::create(b, kernels.getLoc(), name, fnType,
                                     workgroup, TypeRange{});
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    // Shared buffers are 16-byte aligned: LLVM merges neighbouring scalar
    // accesses into 16-byte vector ones, which need that alignment.
    for (unsigned i = 0; i < workgroup.size(); ++i)
      fn.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(16));
    Block &entry = fn.getBody().front();
    OpBuilder kb = OpBuilder::atBlockBegin(&entry);
    GPUEmitter e(kb, fn.getLoc());
    SmallVector<Value> args(fn.getArguments());
    SmallVector<Value> wg(fn.getWorkgroupAttributions());
    body(e, args, wg);
    gpu::ReturnOp::create(kb, fn.getLoc());
    return fn;
  }

  /// Launch bounds for ptxas: at most `threads` threads per block and at
  /// least `minBlocks` resident blocks per SM, which caps the registers a
  /// thread may use (65536 / (threads * minBlocks)).
  static void launchBounds(gpu::GPUFuncOp fn, int64_t threads,
                           int64_t minBlocks) {
    Builder b(fn.getContext());
    fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
    fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                b.getI32IntegerAttr(static_cast<int32_t>(minBlocks)));
  }

  static MemRefType workgroupType(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                  Type elt) {
    auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    return MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), space);
  }

private:
  std::string uniqueName(StringRef base) {
    std::string name = base.str();
    for (int i = 0; SymbolTable::lookupSymbolIn(kernels, name); ++i)
      name = (base + "_" + Twine(i)).str();
    return name;
  }

  ModuleOp module;
  gpu::GPUModuleOp kernels;
};

/// Host-side launch of `fn` with grid (x, y, z) and `threads` threads.
void launch(OpBuilder &b, Location loc, gpu::GPUFuncOp fn, Value x, Value y,
            Value z, int64_t threads, ValueRange operands) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value t = arith::ConstantIndexOp::create(b, loc, threads);
  gpu::LaunchFuncOp::create(b, loc, fn, gpu::KernelDim3{x, y, z},
                            gpu::KernelDim3{t, one, one}, Value(), operands);
}

/// The effective window of sequence b (as in the loop lowering).
Value effectiveWindow(Emitter &e, Value windows, Value b, int64_t window,
                      int64_t windowMax) {
  if (!windows)
    return e.idx(window);
  Value w = e.loadIndex(windows, {b});
  return e.mins(e.maxs(w, e.idx(window)), e.idx(windowMax));
}

Value unitCandidateCount(Emitter &e, Value u, Value unit, Value anchor,
                         Value n, Value w) {
  Value lo = e.maxs(e.mul(u, unit), anchor);
  Value hi = e.mins(e.mins(e.mul(e.add(u, e.idx(1)), unit), n), e.sub(n, w));
  return e.maxs(e.sub(hi, lo), e.idx(0));
}

/// Non-NaN ranking key of (b, g, u): ordered key of the group max, 0 for a
/// non-candidate, at least 1 for a candidate.
Value rankingKey(GPUEmitter &e, Value scores, Value b, Value g, Value u,
                 int64_t group, Value candidate) {
  Value base = e.mul(g, e.idx(group));
  Value best = e.load(scores, {b, base, u});
  for (int64_t i = 1; i < group; ++i)
    best = e.fmax(best, e.load(scores, {b, e.add(base, e.idx(i)), u}));
  Value key = e.orderedKey(best);
  key = e.select(e.eq(key, e.i32(0)), e.i32(1), key);
  return e.select(candidate, key, e.i32(0));
}

//===----------------------------------------------------------------------===//
// Attention (sparse and dense)
//===----------------------------------------------------------------------===//

/// Shared state of the attention kernel builder.
struct AttentionShape {
  int64_t hq, hkv, group, d, p;
  RowSplit split;
  int64_t groups;  // lane groups per block
  int64_t threads; // groups * lanes
};

AttentionShape attentionShape(Value q, Value k) {
  AttentionShape s;
  s.hq = staticDim(q, 1);
  s.d = staticDim(q, 2);
  s.hkv = staticDim(k, 1);
  s.p = staticDim(k, 2);
  s.group = s.hq / s.hkv;
  s.split = RowSplit::of(s.d, elementBytes(elementType(k)));
  // Up to 128 threads, limited by the shared memory of the final combine.
  int64_t perGroupBytes = s.group * (s.d + 2) * 4 + 4;
  int64_t byMemory = std::max<int64_t>(1, (40 * 1024) / perGroupBytes);
  s.groups = std::max<int64_t>(1, std::min(128 / s.split.lanes, byMemory));
  s.threads = s.groups * s.split.lanes;
  return s;
}

/// Emits the body of an attention kernel: lane groups walk `slots`
/// [v0, v1) with stride `groups`; `position(v)` yields (t, valid).
void emitAttentionBody(
    GPUEmitter &e, const AttentionShape &s, Value q, Value k, Value v,
    Value pageTable, Value po, Value pml, Value b, Value g, Value split,
    Value v0, Value v1, Value scale, ValueRange smem,
    const std::function<std::pair<Value, Value>(GPUEmitter &, Value)>
        &position) {
  int64_t L = s.split.lanes, E = s.split.elems, G = s.group;
  Value tid = e.tid();
  Value gid = e.divs(tid, e.idx(L));
  Value li = e.rems(tid, e.idx(L));
  Value col = e.mul(li, e.idx(E));
  Type f32 = e.builder().getF32Type();
  int64_t kvBytes = elementBytes(elementType(k));
  int64_t align = std::min<int64_t>(16, E * kvBytes);
  // Query slices of the group's heads, prescaled by the softmax scale.
  SmallVector<Value> qs;
  for (int64_t i = 0; i < G; ++i) {
    Value h = e.add(e.mul(g, e.idx(G)), e.idx(i));
    Value qv = e.vecLoad(q, {b, h, col}, E, std::min<int64_t>(16, E * 4));
    qs.push_back(e.fmul(qv, e.splat(scale, E)));
  }
  // Online-softmax state: m[G], l[G], count, acc[G].
  SmallVector<Value> init;
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.negInf());
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.f32(0.0));
  init.push_back(e.f32(0.0));
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.splat(e.f32(0.0), E));
  // Warp-uniform rounds: every lane runs the same trip count so the group
  // shuffles stay converged; out-of-range or masked slots read a safe row
  // and leave the state unchanged. Each round a group takes kUnroll slots.
  // The loop is software-pipelined: a round issues the loads of the next
  // round's rows before its own arithmetic, so a lane keeps 2 * kUnroll
  // K/V rows in flight across the exp/shuffle latency.
  constexpr int64_t kUnroll = 2;
  int64_t perRound = s.groups * kUnroll;
  Value count = e.maxs(e.sub(v1, v0), e.idx(0));
  Value rounds = e.ceilDiv(count, e.idx(perRound));
  // (valid[kUnroll], k rows[kUnroll], v rows[kUnroll]) of round r; only
  // called with r < rounds + 1 and rounds > 0, so v0 is a slot in range.
  auto loadRound = [&](GPUEmitter &e, Value r) {
    SmallVector<Value> valid, kr, vr;
    for (int64_t u = 0; u < kUnroll; ++u) {
      Value slot = e.add(e.add(v0, e.mul(r, e.idx(perRound))),
                         e.add(e.idx(u * s.groups), gid));
      Value inRange = e.lt(slot, v1);
      auto [t, posValid] = position(e, e.select(inRange, slot, v0));
      Value ok = e.band(inRange, posValid);
      Value tSafe = e.select(ok, t, e.idx(0));
      Value page = e.loadIndex(pageTable, {b, e.divs(tSafe, e.idx(s.p))});
      Value off = e.rems(tSafe, e.idx(s.p));
      valid.push_back(ok);
      kr.push_back(e.vecLoad(k, {page, g, off, col}, E, align));
      vr.push_back(e.vecLoad(v, {page, g, off, col}, E, align));
    }
    SmallVector<Value> out(valid);
    out.append(kr.begin(), kr.end());
    out.append(vr.begin(), vr.end());
    return out;
  };
  // The first round's rows (none when the split is empty).
  SmallVector<Type> rowTypes(kUnroll, e.builder().getI1Type());
  for (int64_t u = 0; u < 2 * kUnroll; ++u)
    rowTypes.push_back(VectorType::get({E}, elementType(k)));
  SmallVector<Value> first = e.ifElse(
      e.gt(rounds, e.idx(0)), rowTypes,
      [&](Emitter &ee) -> SmallVector<Value> {
        return loadRound(static_cast<GPUEmitter &>(ee), ee.idx(0));
      },
      [&](Emitter &ee) -> SmallVector<Value> {
        SmallVector<Value> none(kUnroll, ee.i1(false));
        for (int64_t u = 0; u < 2 * kUnroll; ++u)
          none.push_back(arith::ConstantOp::create(
              ee.builder(), ee.location(),
              DenseElementsAttr::get(cast<ShapedType>(rowTypes[kUnroll + u]),
                                     ee.builder().getZeroAttr(
                                         elementType(k)))));
        return none;
      });
  int64_t stateSize = init.size();
  init.append(first.begin(), first.end());
  auto state = e.forLoop(
      e.idx(0), rounds, e.idx(1), init,
      [&](Emitter &ee, Value r, ValueRange st) -> SmallVector<Value> {
        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
        // Prefetch round r + 1 (its slots past v1 read the safe row).
        SmallVector<Value> next = loadRound(e, e.add(r, e.idx(1)));
        ValueRange rows = st.drop_front(stateSize);
        ValueRange valid = rows.take_front(kUnroll);
        ValueRange kr = rows.slice(kUnroll, kUnroll);
        ValueRange vr = rows.slice(2 * kUnroll, kUnroll);
        // One online-softmax update per round for all its slots: a single
        // rescale of the accumulators instead of one per key.
        SmallVector<Value> out(st.begin(), st.begin() + stateSize);
        SmallVector<Value> kf, vf;
        Value any = valid[0];
        for (int64_t u = 0; u < kUnroll; ++u) {
          kf.push_back(e.toF32(kr[u]));
          vf.push_back(e.toF32(vr[u]));
          if (u > 0)
            any = e.bor(any, valid[u]);
        }
        for (int64_t i = 0; i < G; ++i) {
          SmallVector<Value> dots;
          Value mNew = out[i];
          for (int64_t u = 0; u < kUnroll; ++u) {
            Value dot = e.groupSum(e.reduceAdd(e.fmul(qs[i], kf[u])), L);
            dot = e.select(valid[u], dot, e.negInf());
            dots.push_back(dot);
            mNew = e.fmax(mNew, dot);
          }
          Value m = out[i], l = out[G + i], acc = out[2 * G + 1 + i];
          Value corr = e.fastExp(e.fsub(m, mNew));
          Value lNew = e.fmul(l, corr);
          Value accNew = e.fmul(acc, e.splat(corr, E));
          for (int64_t u = 0; u < kUnroll; ++u) {
            Value pw = e.fastExp(e.fsub(dots[u], mNew));
            lNew = e.fadd(lNew, pw);
            accNew = e.fma(vf[u], e.splat(pw, E), accNew);
          }
          // A round with no valid slot leaves the state as it was (and
          // avoids exp(-inf - -inf)).
          out[i] = e.select(any, mNew, m);
          out[G + i] = e.select(any, lNew, l);
          out[2 * G + 1 + i] = e.select(any, accNew, acc);
        }
        for (int64_t u = 0; u < kUnroll; ++u)
          out[2 * G] =
              e.select(valid[u], e.fadd(out[2 * G], e.f32(1.0)), out[2 * G]);
        out.append(next.begin(), next.end());
        return out;
      });
  // Combine lane groups through shared memory: sm_m[groups][G],
  // sm_l[groups][G], sm_c[groups], sm_acc[groups][G][D].
  Value smM = smem[0], smL = smem[1], smC = smem[2], smAcc = smem[3];
  for (int64_t i = 0; i < G; ++i) {
    Value ii = e.idx(i);
    e.ifThen(e.eq(li, e.idx(0)), [&](Emitter &e) {
      e.store(state[i], smM, {gid, ii});
      e.store(state[G + i], smL, {gid, ii});
    });
    for (int64_t j = 0; j < E; ++j)
      e.store(e.extractElt(state[2 * G + 1 + i], j), smAcc,
              {gid, ii, e.add(col, e.idx(j))});
  }
  e.ifThen(e.eq(li, e.idx(0)),
           [&](Emitter &e) { e.store(state[2 * G], smC, {gid}); });
  e.barrier();
  // Threads over (head, channel) pairs produce the split's partial.
  Value total = e.idx(G * s.d);
  e.forLoop(tid, total, e.idx(s.threads), {},
            [&](Emitter &e, Value pair, ValueRange) -> SmallVector<Value> {
              Value i = e.divs(pair, e.idx(s.d));
              Value c = e.rems(pair, e.idx(s.d));
              Value m = e.forLoop(
                  e.idx(0), e.idx(s.groups), e.idx(1), {e.negInf()},
                  [&](Emitter &e, Value r, ValueRange acc) -> SmallVector<Value> {
                    return {e.fmax(acc[0], e.load(smM, {r, i}))};
                  })[0];
              Value live = e.fcmp(arith::CmpFPredicate::OGT, m, e.negInf());
              auto sums = e.forLoop(
                  e.idx(0), e.idx(s.groups), e.idx(1),
                  {e.f32(0.0), e.f32(0.0), e.f32(0.0)},
                  [&](Emitter &ee, Value r, ValueRange acc) -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    Value mr = e.load(smM, {r, i});
                    Value w = e.select(live, e.fastExp(e.fsub(mr, m)),
                                       e.f32(0.0));
                    w = e.select(e.fcmp(arith::CmpFPredicate::OGT, mr,
                                        e.negInf()),
                                 w, e.f32(0.0));
                    return {e.fadd(acc[0], e.fmul(w, e.load(smL, {r, i}))),
                            e.fadd(acc[1],
                                   e.fmul(w, e.load(smAcc, {r, i, c}))),
                            e.fadd(acc[2], e.load(smC, {r}))};
                  });
              Value h = e.add(e.mul(g, e.idx(G)), i);
              e.store(sums[1], po, {b, h, split, c});
              e.ifThen(e.eq(c, e.idx(0)), [&](Emitter &e) {
                e.store(m, pml, {b, h, split, e.idx(0)});
                e.store(sums[0], pml, {b, h, split, e.idx(1)});
                e.store(sums[2], pml, {b, h, split, e.idx(2)});
              });
              return {};
            });
  (void)f32;
}

SmallVector<Type> attentionSharedTypes(MLIRContext *ctx,
                                       const AttentionShape &s) {
  Type f32 = Float32Type::get(ctx);
  return {KernelBuilder::workgroupType(ctx, {s.groups, s.group}, f32),
          KernelBuilder::workgroupType(ctx, {s.groups, s.group}, f32),
          KernelBuilder::workgroupType(ctx, {s.groups}, f32),
          KernelBuilder::workgroupType(ctx, {s.groups, s.group, s.d}, f32)};
}

void lowerSparseAttend(SparseAttendOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  AttentionShape s = attentionShape(op.getQ(), op.getKCache());
  bool tokens = op.getGranularity() == Granularity::token;
  int64_t unitTokens = tokens ? 1 : s.p;
  int64_t forced =
      op.getIncludeForced() ? op.getAnchor() + op.getWindowMax() : 0;
  int64_t length = op.getVirtualLength();
  int64_t splits = op.getNumSplits();
  int64_t perSplit = (length + splits - 1) / splits;
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getVCache(),
                              op.getPageTable(), op.getLens(),
                              op.getPartialO(), op.getPartialMl()};
  int64_t windowsIdx = -1, indicesIdx = -1, limitsIdx = -1;
  if (op.getWindows()) {
    windowsIdx = operands.size();
    operands.push_back(op.getWindows());
  }
  if (op.getIndices()) {
    indicesIdx = operands.size();
    operands.push_back(op.getIndices());
  }
  if (op.getLimits()) {
    limitsIdx = operands.size();
    operands.push_back(op.getLimits());
  }
  auto fn = kb.createKernel(
      name, operands, attentionSharedTypes(op.getContext(), s),
      [&](GPUEmitter &e, ValueRange a, ValueRange smem) {
        Value q = a[0], k = a[1], v = a[2], pt = a[3], lens = a[4];
        Value po = a[5], pml = a[6];
        Value windows = windowsIdx >= 0 ? a[windowsIdx] : Value();
        Value indices = indicesIdx >= 0 ? a[indicesIdx] : Value();
        Value limits = limitsIdx >= 0 ? a[limitsIdx] : Value();
        Value split = e.bid(gpu::Dimension::x);
        Value g = e.bid(gpu::Dimension::y);
        Value bb = e.bid(gpu::Dimension::z);
        Value n = e.loadIndex(lens, {bb});
        Value w = effectiveWindow(e, windows, bb, op.getWindow(),
                                  op.getWindowMax());
        CondensateSlots slotsInfo{e.idx(op.getAnchor()),
                                  e.idx(op.getWindowMax()),
                                  w,
                                  e.idx(forced),
                                  e.idx(unitTokens),
                                  n};
        Value limit = limits ? e.loadIndex(limits, {bb, g})
                             : e.idx(op.getCount());
        Value v0 = e.mul(split, e.idx(perSplit));
        Value v1 = e.mins(e.add(v0, e.idx(perSplit)), e.idx(length));
        Value scale = e.f32(op.getScale().convertToDouble());
        emitAttentionBody(
            e, s, q, k, v, pt, po, pml, bb, g, split, v0, v1, scale, smem,
            [&](GPUEmitter &e, Value slot) -> std::pair<Value, Value> {
              Type idxT = e.builder().getIndexType();
              Type i1T = e.builder().getI1Type();
              auto tv = e.ifElse(
                  e.lt(slot, e.idx(forced)), {idxT, i1T},
                  [&](Emitter &e) -> SmallVector<Value> {
                    auto [t, valid] = slotsInfo.forcedSlot(e, slot);
                    return {t, valid};
                  },
                  [&](Emitter &e) -> SmallVector<Value> {
                    if (!indices)
                      return {e.idx(0), e.i1(false)};
                    Value rel = e.sub(slot, e.idx(forced));
                    Value j = e.divs(rel, e.idx(unitTokens));
                    Value off = e.rems(rel, e.idx(unitTokens));
                    Value unitIdx = e.loadIndex(
                        indices, {bb, g, e.add(j, e.idx(op.getFirst()))});
                    Value t = e.add(e.mul(unitIdx, e.idx(unitTokens)), off);
                    Value valid =
                        e.band(e.band(e.lt(j, limit), e.ge(unitIdx, e.idx(0))),
                               slotsInfo.unitPositionValid(e, t));
                    return {t, valid};
                  });
              return {tv[0], tv[1]};
            });
      });
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  launch(b, loc, fn, arith::ConstantIndexOp::create(b, loc, splits),
         arith::ConstantIndexOp::create(b, loc, s.hkv), batch, s.threads,
         operands);
  op.erase();
}

void lowerDenseAttend(DenseAttendOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  AttentionShape s = attentionShape(op.getQ(), op.getKCache());
  int64_t splitsStatic = staticDim(op.getPartialMl(), 2);
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getVCache(),
                              op.getPageTable(), op.getLens(),
                              op.getPartialO(), op.getPartialMl()};
  if (op.getMask())
    operands.push_back(op.getMask());
  bool masked = static_cast<bool>(op.getMask());
  auto fn = kb.createKernel(
      name, operands, attentionSharedTypes(op.getContext(), s),
      [&](GPUEmitter &e, ValueRange a, ValueRange smem) {
        Value split = e.bid(gpu::Dimension::x);
        Value g = e.bid(gpu::Dimension::y);
        Value bb = e.bid(gpu::Dimension::z);
        Value n = e.loadIndex(a[4], {bb});
        // Short contexts use fewer splits (at least kMinChunk tokens each);
        // the others are empty and cost a block that exits at once.
        Value used = e.mins(e.idx(splitsStatic),
                            e.maxs(e.ceilDiv(n, e.idx(kMinDenseChunk)),
                                   e.idx(1)));
        Value chunk = e.ceilDiv(n, used);
        Value t0 = e.mins(e.mul(split, chunk), n);
        Value t1 = e.mins(e.add(t0, chunk), n);
        if (masked) {
          Value active = e.ne(e.load(a[7], {bb, g}), e.i32(0));
          t1 = e.select(active, t1, t0);
        }
        t1 = e.maxs(t1, t0);
        Value scale = e.f32(op.getScale().convertToDouble());
        emitAttentionBody(e, s, a[0], a[1], a[2], a[3], a[5], a[6], bb, g,
                          split, t0, t1, scale, smem,
                          [&](GPUEmitter &e, Value t) -> std::pair<Value, Value> {
                            return {t, e.i1(true)};
                          });
      });
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value splits = arith::ConstantIndexOp::create(b, loc, splitsStatic);
  launch(b, loc, fn, splits, arith::ConstantIndexOp::create(b, loc, s.hkv),
         batch, s.threads, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Scoring
//===----------------------------------------------------------------------===//

void lowerScorePages(ScorePagesOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize();
  RowSplit rs = RowSplit::of(d, 4);
  int64_t L = rs.lanes, E = rs.elems;
  int64_t groups = std::max<int64_t>(1, 256 / L);
  int64_t threads = groups * L;
  // Each lane group scores kPages pages, loading all before computing.
  constexpr int64_t kPages = 4;
  int64_t perBlock = groups * kPages;
  int64_t align = std::min<int64_t>(16, E * 4);
  bool minmax = op.getSelector() == Selector::block_minmax;
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        Value tid = e.tid();
        Value gid = e.divs(tid, e.idx(L)), li = e.rems(tid, e.idx(L));
        Value col = e.mul(li, e.idx(E));
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value first = e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock));
        Value mp = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value pages = e.ceilDiv(n, e.idx(p));
        Value scale = e.f32(op.getScale().convertToDouble());
        SmallVector<Value> qs;
        for (int64_t i = 0; i < G; ++i)
          qs.push_back(e.vecLoad(
              q, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), col}, E, align));
        // No branch around the group shuffles: out-of-range groups compute
        // on page slot 0 and do not store.
        SmallVector<Value> js, inRange, inside, lo, hi;
        for (int64_t k = 0; k < kPages; ++k) {
          Value j = e.add(first, e.add(e.idx(k * groups), gid));
          Value ok = e.lt(j, mp);
          Value jj = e.select(ok, j, e.idx(0));
          Value in = e.lt(jj, pages);
          Value page = e.loadIndex(pt, {bb, e.select(in, jj, e.idx(0))});
          js.push_back(jj);
          inRange.push_back(ok);
          inside.push_back(in);
          if (minmax) {
            lo.push_back(e.vecLoad(sum, {page, g, e.idx(KMin), col}, E, align));
            hi.push_back(e.vecLoad(sum, {page, g, e.idx(KMax), col}, E, align));
          } else {
            lo.push_back(e.vecLoad(sum, {page, g, e.idx(KSum), col}, E, align));
          }
        }
        for (int64_t k = 0; k < kPages; ++k) {
          Value cnt = e.mins(e.sub(n, e.mul(js[k], e.idx(p))), e.idx(p));
          for (int64_t i = 0; i < G; ++i) {
            Value partial =
                minmax ? e.reduceAdd(e.fmax(e.fmul(qs[i], lo[k]),
                                            e.fmul(qs[i], hi[k])))
                       : e.reduceAdd(e.fmul(qs[i], lo[k]));
            Value sc = e.groupSum(partial, L);
            if (!minmax)
              sc = e.fdiv(sc, e.indexToF32(e.maxs(cnt, e.idx(1))));
            sc = e.select(inside[k], e.fmul(sc, scale), e.negInf());
            e.ifThen(e.band(inRange[k], e.eq(li, e.idx(0))), [&](Emitter &e) {
              e.store(sc, scores,
                      {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), js[k]});
            });
          }
        }
      });
  // The kernel is latency-bound: ask ptxas for more resident blocks where
  // the registers the loads and queries hold (G query slices, kPages x 2
  // bound rows of E floats) leave room, and none where that would spill.
  int64_t held = G * E + 2 * kPages * E;
  if (held <= 48)
    KernelBuilder::launchBounds(fn, threads, 4);
  else if (held <= 64)
    KernelBuilder::launchBounds(fn, threads, 3);
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value mp = memref::DimOp::create(b, loc, op.getScores(), 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, mp, arith::ConstantIndexOp::create(b, loc, perBlock));
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv),
         batch, threads, operands);
  op.erase();
}

void lowerScoreTokens(ScoreTokensOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), G = hq / hkv;
  int64_t p = staticDim(op.getKCache(), 2);
  Type kElt = elementType(op.getKCache());
  RowSplit rs = RowSplit::of(d, elementBytes(kElt));
  int64_t L = rs.lanes, E = rs.elems;
  int64_t perBlock = std::max<int64_t>(1, 256 / L);
  int64_t threads = perBlock * L;
  int64_t align = std::min<int64_t>(16, E * elementBytes(kElt));
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], k = a[1], pt = a[2], lens = a[3], scores = a[4];
        Value tid = e.tid();
        Value gid = e.divs(tid, e.idx(L)), li = e.rems(tid, e.idx(L));
        Value col = e.mul(li, e.idx(E));
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value t = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock)), gid);
        Value nt = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value scale = e.f32(op.getScale().convertToDouble());
        SmallVector<Value> qs;
        for (int64_t i = 0; i < G; ++i)
          qs.push_back(e.vecLoad(q, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), col},
                                 E, std::min<int64_t>(16, E * 4)));
        Value inRange = e.lt(t, nt);
        Value inside = e.band(inRange, e.lt(t, n));
        Value tt = e.select(inside, t, e.idx(0));
        Value page = e.loadIndex(pt, {bb, e.divs(tt, e.idx(p))});
        Value off = e.rems(tt, e.idx(p));
        Value kr = e.toF32(e.vecLoad(k, {page, g, off, col}, E, align));
        for (int64_t i = 0; i < G; ++i) {
          Value s = e.groupSum(e.reduceAdd(e.fmul(qs[i], kr)), L);
          s = e.select(inside, e.fmul(s, scale), e.negInf());
          e.ifThen(e.band(inRange, e.eq(li, e.idx(0))), [&](Emitter &e) {
            e.store(s, scores, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), t});
          });
        }
      });
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value nt = memref::DimOp::create(b, loc, op.getScores(), 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, nt, arith::ConstantIndexOp::create(b, loc, perBlock));
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv),
         batch, threads, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

/// Block-wide exclusive prefix sum of an index value; `warpSums` is a
/// workgroup buffer of (threads / 32 + 1) i32. Returns (exclusive, total).
std::pair<Value, Value> blockExclusiveScan(GPUEmitter &e, Value x,
                                           int64_t threads, Value warpSums) {
  Value tid = e.tid();
  Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
  int64_t warps = threads / kWarp;
  Value x32 = e.toI32(x);
  Value incl = e.warpScanI32(x32, lane);
  e.ifThen(e.eq(lane, e.idx(kWarp - 1)),
           [&](Emitter &e) { e.store(incl, warpSums, {warp}); });
  e.barrier();
  // Warp 0 scans the warp totals.
  e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
    // Only lanes that own a warp total read one (no lane reads a slot
    // another lane writes below).
    Value mine = e.ifElse(e.lt(lane, e.idx(warps)), {e.builder().getI32Type()},
                          [&](Emitter &e) -> SmallVector<Value> {
                            return {e.load(warpSums, {lane})};
                          },
                          [&](Emitter &e) -> SmallVector<Value> {
                            return {e.i32(0)};
                          })[0];
    Value sc = e.warpScanI32(mine, lane);
    e.ifThen(e.lt(lane, e.idx(warps)),
             [&](Emitter &e) { e.store(sc, warpSums, {lane}); });
  });
  e.barrier();
  Value before = e.select(e.gt(warp, e.idx(0)),
                          e.load(warpSums, {e.maxs(e.sub(warp, e.idx(1)),
                                                   e.idx(0))}),
                          e.i32(0));
  Value total = e.load(warpSums, {e.idx(warps - 1)});
  Value excl = e.sub(e.add(before, incl), x32);
  e.barrier();
  return {e.toIndex(excl), e.toIndex(total)};
}

void lowerSelectTopK(SelectTopKOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getScores(), 1);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t base = op.getBase(), G = hq / hkv;
  int64_t unitTokens =
      op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
  const int64_t threads = 512;
  Type i32 = b.getI32Type();
  SmallVector<Value> operands{op.getScores(), op.getLens(), op.getIndices()};
  if (op.getWindows())
    operands.push_back(op.getWindows());
  bool hasWindows = static_cast<bool>(op.getWindows());
  // Ranking keys of the first kCachedKeys units live in shared memory;
  // further units (contexts past 512K tokens at pages of 64) recompute theirs.
  constexpr int64_t kCachedKeys = 8192;
  SmallVector<Type> smem{
      KernelBuilder::workgroupType(ctx, {256}, i32),                // hist
      KernelBuilder::workgroupType(ctx, {8}, i32),                  // state
      KernelBuilder::workgroupType(ctx, {threads / kWarp + 1}, i32), // scan
      KernelBuilder::workgroupType(ctx, {2 * (threads / kWarp)}, i32),
      KernelBuilder::workgroupType(ctx, {kCachedKeys}, i32)};       // keys
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value scores = a[0], lens = a[1], indices = a[2];
        Value windows = hasWindows ? a[3] : Value();
        Value hist = sm[0], state = sm[1], scan = sm[2], red = sm[3];
        Value cached = sm[4];
        Value tid = e.tid();
        Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        Value n = e.loadIndex(lens, {bb});
        Value w = effectiveWindow(e, windows, bb, op.getWindow(),
                                  op.getWindowMax());
        Value nu = e.dim(scores, 2);
        Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
        auto computeKey = [&](GPUEmitter &e, Value u) {
          Value cand = e.gt(unitCandidateCount(e, u, unit, anchor, n, w),
                            e.idx(0));
          return rankingKey(e, scores, bb, g, u, G, cand);
        };
        e.forLoop(tid, e.mins(nu, e.idx(kCachedKeys)), e.idx(threads), {},
                  [&](Emitter &ee, Value u, ValueRange) -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    e.store(computeKey(e, u), cached, {u});
                    return {};
                  });
        e.barrier();
        auto key = [&](GPUEmitter &e, Value u) -> Value {
          return e.ifElse(e.lt(u, e.idx(kCachedKeys)),
                          {e.builder().getI32Type()},
                          [&](Emitter &e) -> SmallVector<Value> {
                            return {e.load(cached, {u})};
                          },
                          [&](Emitter &ee) -> SmallVector<Value> {
                            return {computeKey(static_cast<GPUEmitter &>(ee),
                                               u)};
                          })[0];
        };
        auto forUnits = [&](GPUEmitter &e, ValueRange inits,
                            const Emitter::LoopBody &body) {
          return e.forLoop(tid, nu, e.idx(threads), inits, body);
        };
        // Number of candidates.
        e.ifThen(e.lt(tid, e.idx(8)),
                 [&](Emitter &e) { e.store(e.i32(0), state, {tid}); });
        e.barrier();
        Value myValid = forUnits(
            e, {e.i32(0)},
            [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value kk = key(e, u);
              return {e.add(acc[0], e.select(e.ne(kk, e.i32(0)), e.i32(1),
                                              e.i32(0)))};
            })[0];
        e.atomicAddI32(state, {e.idx(0)}, myValid);
        e.barrier();
        Value numValid = e.toIndex(e.load(state, {e.idx(0)}));
        Value few = e.le(numValid, e.idx(base));
        // Radix search for the base-th largest key, 8 bits at a time.
        Value prefix = e.i32(0), mask = e.i32(0);
        Value remaining = e.i32(base);
        if (base > 0) {
          for (int64_t shift = 24; shift >= 0; shift -= 8) {
            Value sh = e.i32(shift);
            e.forLoop(tid, e.idx(256), e.idx(threads), {},
                      [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                        e.store(e.i32(0), hist, {i});
                        return {};
                      });
            e.barrier();
            forUnits(e, {},
                     [&](Emitter &ee, Value u, ValueRange) -> SmallVector<Value> {
                       GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                       Value kk = key(e, u);
                       Value match = e.band(e.ne(kk, e.i32(0)),
                                            e.eq(e.band(kk, mask), prefix));
                       e.ifThen(match, [&](Emitter &ee) {
                         GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                         Value digit = e.band(
                             arith::ShRUIOp::create(e.builder(), e.location(),
                                                    kk, sh),
                             e.i32(255));
                         e.atomicAddI32(hist, {e.toIndex(digit)}, e.i32(1));
                       });
                       return {};
                     });
            e.barrier();
            // Warp 0: lane l owns bins [8l, 8l+8); find the bin where the
            // count from the top reaches `remaining`.
            e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value laneBase = e.mul(lane, e.idx(8));
              Value mine = e.i32(0);
              for (int64_t j = 0; j < 8; ++j)
                mine = e.add(mine, e.load(hist, {e.add(laneBase, e.idx(j))}));
              // Suffix sums: lanes above hold higher bins.
              Value suffix = mine;
              for (int64_t o = 1; o < kWarp; o *= 2) {
                Value down = e.shuffleDown(suffix, o);
                suffix = e.select(e.lt(e.add(lane, e.idx(o)), e.idx(kWarp)),
                                  e.add(suffix, down), suffix);
              }
              Value above = e.sub(suffix, mine); // bins of higher lanes
              Value crosses = e.band(
                  e.cmp(arith::CmpIPredicate::sge, suffix, remaining),
                  e.cmp(arith::CmpIPredicate::slt, above, remaining));
              e.ifThen(crosses, [&](Emitter &e) {
                auto found = e.forLoop(
                    e.idx(0), e.idx(8), e.idx(1),
                    {above, e.i32(-1), e.i32(0)},
                    [&](Emitter &e, Value jj, ValueRange acc)
                        -> SmallVector<Value> {
                      Value bin = e.add(laneBase, e.sub(e.idx(7), jj));
                      Value cnt = e.load(hist, {bin});
                      Value cum = e.add(acc[0], cnt);
                      Value hit = e.band(
                          e.eq(acc[1], e.i32(-1)),
                          e.cmp(arith::CmpIPredicate::sge, cum, remaining));
                      return {cum, e.select(hit, e.toI32(bin), acc[1]),
                              e.select(hit, e.sub(remaining, acc[0]), acc[2])};
                    });
                e.store(found[1], state, {e.idx(1)});
                e.store(found[2], state, {e.idx(2)});
              });
            });
            e.barrier();
            Value digit = e.load(state, {e.idx(1)});
            remaining = e.load(state, {e.idx(2)});
            prefix = e.bor(prefix,
                           arith::ShLIOp::create(e.builder(), e.location(),
                                                 digit, sh));
            mask = e.bor(mask, e.i32(static_cast<int64_t>(255) << shift));
            e.barrier();
          }
        }
        // Threshold and how many ties at it to take (all candidates if few).
        // With base = 0 there is no base set, only the ranked extras.
        Value thr = e.select(few, e.i32(1), prefix);
        Value tiesWanted = e.select(few, e.i32(0), remaining);
        Value tiesWantedIdx = e.toIndex(tiesWanted);
        Value chunk = e.ceilDiv(nu, e.idx(threads));
        Value lo = e.mins(e.mul(tid, chunk), nu);
        Value hi = e.mins(e.add(lo, chunk), nu);
        Value tiesBefore = e.idx(0);
        if (base > 0) {
          // Collection in unit order: thread t owns a contiguous chunk.
          auto counts = e.forLoop(
              lo, hi, e.idx(1), {e.idx(0), e.idx(0)},
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value kk = key(e, u);
                Value isAbove = e.bor(
                    e.cmp(arith::CmpIPredicate::ugt, kk, thr),
                    e.band(few, e.ne(kk, e.i32(0))));
                Value isTie = e.band(e.bnot(few),
                                     e.band(e.eq(kk, thr), e.ne(kk, e.i32(0))));
                return {e.select(isAbove, e.add(acc[0], e.idx(1)), acc[0]),
                        e.select(isTie, e.add(acc[1], e.idx(1)), acc[1])};
              });
          auto [aboveBefore, aboveTotal] =
              blockExclusiveScan(e, counts[0], threads, scan);
          auto tiesScan = blockExclusiveScan(e, counts[1], threads, scan);
          tiesBefore = tiesScan.first;
          (void)aboveTotal;
          e.forLoop(lo, hi, e.idx(1), {aboveBefore, tiesBefore},
                    [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      Value kk = key(e, u);
                      Value isAbove = e.bor(
                          e.cmp(arith::CmpIPredicate::ugt, kk, thr),
                          e.band(few, e.ne(kk, e.i32(0))));
                      Value isTie = e.band(
                          e.bnot(few), e.band(e.eq(kk, thr), e.ne(kk, e.i32(0))));
                      Value takeTie = e.band(isTie, e.lt(acc[1], tiesWantedIdx));
                      Value take = e.bor(isAbove, takeTie);
                      Value pos = e.add(acc[0], e.mins(acc[1], tiesWantedIdx));
                      e.ifThen(take, [&](Emitter &e) {
                        e.store(e.toI32(u), indices, {bb, g, pos});
                      });
                      return {e.select(isAbove, e.add(acc[0], e.idx(1)), acc[0]),
                              e.select(isTie, e.add(acc[1], e.idx(1)), acc[1])};
                    });
          // Pad the base set.
          Value written = e.mins(numValid, e.idx(base));
          e.forLoop(e.add(written, tid), e.idx(base), e.idx(threads), {},
                    [&](Emitter &e, Value j, ValueRange) -> SmallVector<Value> {
                      e.store(e.i32(-1), indices, {bb, g, j});
                      return {};
                    });

        }
        // Ranked extras: argmax passes after (prevKey, prevIdx).
        if (slots > base) {
          // The base set's last tie (prevIdx) is the largest unit taken at
          // the threshold: recover it as the tiesWanted-th tie.
          Value lastTie = e.forLoop(
              lo, hi, e.idx(1), {tiesBefore, e.idx(-1)},
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value kk = key(e, u);
                Value isTie = e.band(
                    e.bnot(few), e.band(e.eq(kk, thr), e.ne(kk, e.i32(0))));
                Value isLast = e.band(
                    isTie, e.eq(e.add(acc[0], e.idx(1)), tiesWantedIdx));
                return {e.select(isTie, e.add(acc[0], e.idx(1)), acc[0]),
                        e.select(isLast, u, acc[1])};
              })[1];
          e.ifThen(e.ge(lastTie, e.idx(0)), [&](Emitter &e) {
            e.store(e.toI32(lastTie), state, {e.idx(4)});
          });
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
            if (base == 0) {
              // Start above every key.
              e.store(e.i32(-1), state, {e.idx(3)});
              e.store(e.i32(-1), state, {e.idx(4)});
              return;
            }
            e.ifThen(e.bor(few, e.eq(tiesWanted, e.i32(0))), [&](Emitter &e) {
              e.store(e.toI32(nu), state, {e.idx(4)});
            });
            e.store(e.select(few, e.i32(0), thr), state, {e.idx(3)});
          });
          e.barrier();
          for (int64_t j = base; j < slots; ++j) {
            Value prevKey = e.load(state, {e.idx(3)});
            Value prevIdx = e.toIndex(e.load(state, {e.idx(4)}));
            auto best = forUnits(
                e, {e.i32(0), e.i32(-1)},
                [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value kk = key(e, u);
                  Value after = e.bor(
                      e.cmp(arith::CmpIPredicate::ult, kk, prevKey),
                      e.band(e.eq(kk, prevKey), e.gt(u, prevIdx)));
                  Value ok = e.band(after, e.ne(kk, e.i32(0)));
                  Value better = e.band(
                      ok, e.bor(e.cmp(arith::CmpIPredicate::ugt, kk, acc[0]),
                                e.band(e.eq(kk, acc[0]),
                                       e.lt(e.toI32(u), acc[1]))));
                  // Ties between candidates go to the lower unit; a thread
                  // visits its units in increasing order, so acc[1] is the
                  // lowest so far at equal key.
                  better = e.band(ok, e.bor(better,
                                            e.eq(acc[1], e.i32(-1))));
                  return {e.select(better, kk, acc[0]),
                          e.select(better, e.toI32(u), acc[1])};
                });
            // Warp argmax (key desc, unit asc), then across warps.
            Value bk = best[0], bu = best[1];
            for (int64_t o = kWarp / 2; o >= 1; o /= 2) {
              Value ok = e.shuffleXor(bk, o), ou = e.shuffleXor(bu, o);
              Value otherBetter = e.bor(
                  e.cmp(arith::CmpIPredicate::ugt, ok, bk),
                  e.band(e.eq(ok, bk),
                         e.band(e.ne(ou, e.i32(-1)),
                                e.bor(e.eq(bu, e.i32(-1)),
                                      e.cmp(arith::CmpIPredicate::slt, ou,
                                            bu)))));
              bk = e.select(otherBetter, ok, bk);
              bu = e.select(otherBetter, ou, bu);
            }
            e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
              e.store(bk, red, {warp});
              e.store(bu, red, {e.add(warp, e.idx(threads / kWarp))});
            });
            e.barrier();
            e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
              auto fin = e.forLoop(
                  e.idx(0), e.idx(threads / kWarp), e.idx(1),
                  {e.i32(0), e.i32(-1)},
                  [&](Emitter &e, Value r, ValueRange acc)
                      -> SmallVector<Value> {
                    Value ok = e.load(red, {r});
                    Value ou = e.load(red, {e.add(r, e.idx(threads / kWarp))});
                    Value otherBetter = e.band(
                        e.ne(ok, e.i32(0)),
                        e.bor(e.cmp(arith::CmpIPredicate::ugt, ok, acc[0]),
                              e.band(e.eq(ok, acc[0]),
                                     e.bor(e.eq(acc[1], e.i32(-1)),
                                           e.cmp(arith::CmpIPredicate::slt,
                                                 ou, acc[1])))));
                    return {e.select(otherBetter, ok, acc[0]),
                            e.select(otherBetter, ou, acc[1])};
                  });
              Value found = e.ne(fin[0], e.i32(0));
              e.store(e.select(found, fin[1], e.i32(-1)), indices,
                      {bb, g, e.idx(j)});
              e.store(e.select(found, fin[0], e.i32(0)), state, {e.idx(3)});
              e.store(e.select(found, fin[1], e.toI32(nu)), state, {e.idx(4)});
            });
            e.barrier();
          }
        }
      });
  Value batch = memref::DimOp::create(b, loc, op.getScores(), 0);
  launch(b, loc, fn, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         arith::ConstantIndexOp::create(b, loc, 1), threads, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Certificate
//===----------------------------------------------------------------------===//

void lowerCertify(CertifyOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getScores(), 1);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t G = hq / hkv, base = op.getBaseUnits(), extraMax = slots - base;
  double tau = op.getTau().convertToDouble();
  int64_t unitTokens =
      op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
  const int64_t threads = 256;
  Type f32 = b.getF32Type(), f64 = b.getF64Type(), i32 = b.getI32Type();
  SmallVector<Value> operands{op.getScores(),   op.getLens(),
                              op.getIndices(),  op.getPartialMl(),
                              op.getExtra(),    op.getFallback(),
                              op.getStats()};
  if (op.getWindows())
    operands.push_back(op.getWindows());
  bool hasWindows = static_cast<bool>(op.getWindows());
  // The value box: one warp per page row (lanes over channels, `boxPer`
  // channels each), `boxRows` rows in flight, combined through shared
  // memory.
  bool hasBox = static_cast<bool>(op.getVbox());
  int64_t d = hasBox ? staticDim(op.getVbox(), 3) : 0;
  int64_t boxLanes = std::min<int64_t>(std::max<int64_t>(d, 1), kWarp);
  int64_t boxRows = threads / boxLanes;
  int64_t boxPer = (d + boxLanes - 1) / boxLanes;
  int64_t boxIdx = operands.size();
  if (hasBox)
    operands.append({op.getSummaries(), op.getPageTable(), op.getVbox()});
  SmallVector<Type> smem{KernelBuilder::workgroupType(ctx, {G}, f32),  // m
                         KernelBuilder::workgroupType(ctx, {G}, f64),  // Z
                         KernelBuilder::workgroupType(ctx, {G}, f64),  // U
                         KernelBuilder::workgroupType(ctx, {2}, i32)}; // e, fb
  if (hasBox) // per-row partial boxes [row][min, max][channel]
    smem.push_back(KernelBuilder::workgroupType(
        ctx, {boxRows, kValueBoxRows, d}, f32));
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value scores = a[0], lens = a[1], indices = a[2], pml = a[3];
        Value extraOut = a[4], fallbackOut = a[5], stats = a[6];
        Value windows = hasWindows ? a[7] : Value();
        Value smM = sm[0], smZ = sm[1], smU = sm[2], smD = sm[3];
        Value tid = e.tid();
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        Value n = e.loadIndex(lens, {bb});
        Value w = effectiveWindow(e, windows, bb, op.getWindow(),
                                  op.getWindowMax());
        Value nu = e.dim(scores, 2);
        Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
        Value splits = e.dim(pml, 2);
        auto head = [&](Emitter &e, int64_t i) {
          return e.add(e.mul(g, e.idx(G)), e.idx(i));
        };
        // m and Z of the base partials, one thread per head.
        for (int64_t i = 0; i < G; ++i) {
          e.ifThen(e.eq(tid, e.idx(i)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value h = head(e, i);
            Value m = e.forLoop(e.idx(0), splits, e.idx(1), {e.negInf()},
                                [&](Emitter &e, Value s, ValueRange acc)
                                    -> SmallVector<Value> {
                                  return {e.fmax(acc[0],
                                                 e.load(pml, {bb, h, s, e.idx(0)}))};
                                })[0];
            Value z = e.forLoop(
                e.idx(0), splits, e.idx(1), {e.f32(0.0)},
                [&](Emitter &ee, Value s, ValueRange acc) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value ms = e.load(pml, {bb, h, s, e.idx(0)});
                  Value ls = e.load(pml, {bb, h, s, e.idx(1)});
                  Value live = e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0));
                  Value wgt = e.select(live, e.fmul(ls, e.exp(e.fsub(ms, m))),
                                       e.f32(0.0));
                  return {e.fadd(acc[0], wgt)};
                })[0];
            e.store(m, smM, {e.idx(i)});
            e.store(e.extf(z, f64), smZ, {e.idx(i)});
            e.store(e.f64(0.0), smU, {e.idx(i)});
          });
        }
        e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
          e.store(e.i32(0), smD, {e.idx(0)});
          e.store(e.i32(0), smD, {e.idx(1)});
        });
        e.barrier();
        SmallVector<Value> ms;
        for (int64_t i = 0; i < G; ++i)
          ms.push_back(e.load(smM, {e.idx(i)}));
        // Base units (ascending, -1 padded at the end) below x, by binary
        // search: a lower bound into the base set.
        auto baseBelow = [&](GPUEmitter &e, Value x) -> Value {
          if (base == 0)
            return e.idx(0);
          Value x32 = e.toI32(x);
          return e.forLoop(
              e.idx(0), e.idx(64 - __builtin_clzll(base)), e.idx(1),
              {e.idx(0), e.idx(base)},
              [&](Emitter &e, Value, ValueRange acc) -> SmallVector<Value> {
                Value mid = e.divs(e.add(acc[0], acc[1]), e.idx(2));
                Value mc = e.mins(mid, e.idx(base - 1));
                Value u = e.load(indices, {bb, g, mc});
                Value uk = e.select(
                    e.cmp(arith::CmpIPredicate::slt, u, e.i32(0)),
                    e.i32(std::numeric_limits<int32_t>::max()), u);
                Value goRight = e.cmp(arith::CmpIPredicate::slt, uk, x32);
                Value active = e.lt(acc[0], acc[1]);
                return {e.select(e.band(active, goRight),
                                 e.add(mid, e.idx(1)), acc[0]),
                        e.select(e.band(active, e.bnot(goRight)), mid,
                                 acc[1])};
              })[0];
        };
        // Membership in the base set.
        auto inBase = [&](GPUEmitter &e, Value u) -> Value {
          if (base == 0)
            return e.i1(false);
          Value pos = e.mins(baseBelow(e, u), e.idx(base - 1));
          return e.eq(e.load(indices, {bb, g, pos}), e.toI32(u));
        };
        auto inExtras = [&](GPUEmitter &e, Value u, Value count) -> Value {
          return e.forLoop(
              e.idx(0), count, e.idx(1), {e.i1(false)},
              [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
                Value x = e.loadIndex(indices, {bb, g, e.add(e.idx(base), j)});
                return {e.bor(acc[0], e.eq(x, u))};
              })[0];
        };
        auto mass = [&](GPUEmitter &e, Value u, int64_t i) -> Value {
          Value cnt = unitCandidateCount(e, u, unit, anchor, n, w);
          Value bound = e.load(scores, {bb, head(e, i), u});
          Value margin = e.fmul(
              e.fadd(e.f32(1.0), math::AbsFOp::create(e.builder(), e.location(),
                                                      bound)),
              e.f32(kBoundMargin));
          Value x = e.fsub(e.fadd(bound, margin), ms[i]);
          Value term = e.fmul(e.indexToF32(cnt), e.exp(x));
          return e.select(e.gt(cnt, e.idx(0)), e.extf(term, f64), e.f64(0.0));
        };
        // U over candidates outside base (and the first `count` extras).
        auto sumOmitted = [&](GPUEmitter &e, Value count) {
          SmallVector<Value> init(G, e.f64(0.0));
          auto part = e.forLoop(
              tid, nu, e.idx(threads), init,
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value skip = e.bor(inBase(e, u), inExtras(e, u, count));
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i)
                  out.push_back(e.select(skip, acc[i],
                                         e.fadd(acc[i], mass(e, u, i))));
                return out;
              });
          for (int64_t i = 0; i < G; ++i)
            e.atomicAddF64(smU, {e.idx(i)}, part[i]);
          e.barrier();
        };
        sumOmitted(e, e.idx(0));
        // U / (Z + U); a bound that overflowed (inf / inf, NaN) is 1, so it
        // never certifies.
        auto epsOf = [&](Emitter &e, Value u, Value z) {
          Value denom = e.fadd(z, u);
          Value eps =
              e.select(e.fcmp(arith::CmpFPredicate::OGT, denom, e.f64(0.0)),
                       e.fdiv(u, denom), e.f64(0.0));
          Value finite = e.fcmp(arith::CmpFPredicate::OLE, eps, e.f64(1.0));
          return e.select(finite, eps, e.f64(1.0));
        };
        if (tau > 0.0) {
          // Thread 0 walks the extras in order.
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            SmallVector<Value> us, zs;
            for (int64_t i = 0; i < G; ++i) {
              us.push_back(e.load(smU, {e.idx(i)}));
              zs.push_back(e.load(smZ, {e.idx(i)}));
            }
            auto worst = [&](Emitter &e, ValueRange uu) {
              Value m = e.f64(0.0);
              for (int64_t i = 0; i < G; ++i)
                m = e.fmax(m, epsOf(e, uu[i], zs[i]));
              return m;
            };
            Value over = e.fcmp(arith::CmpFPredicate::OGT, worst(e, us),
                                e.f64(tau));
            SmallVector<Value> init{e.bnot(over), e.idx(0)};
            init.append(us.begin(), us.end());
            auto walk = e.forLoop(
                e.idx(0), e.idx(extraMax), e.idx(1), init,
                [&](Emitter &ee, Value j, ValueRange st) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  return e.ifElse(
                      st[0], ValueRange(st).getTypes(),
                      [&](Emitter &) -> SmallVector<Value> {
                        return SmallVector<Value>(st);
                      },
                      [&](Emitter &ee) -> SmallVector<Value> {
                        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                        Value u = e.loadIndex(indices,
                                              {bb, g, e.add(j, e.idx(base))});
                        Value have = e.ge(u, e.idx(0));
                        Value uSafe = e.select(have, u, e.idx(0));
                        SmallVector<Value> next;
                        for (int64_t i = 0; i < G; ++i) {
                          Value m = e.select(have, mass(e, uSafe, i),
                                             e.f64(0.0));
                          next.push_back(
                              e.fmax(e.fsub(st[2 + i], m), e.f64(0.0)));
                        }
                        Value ok = e.fcmp(arith::CmpFPredicate::OLE,
                                          worst(e, next), e.f64(tau));
                        SmallVector<Value> out{
                            e.band(ok, have),
                            e.select(have, e.add(j, e.idx(1)), st[1])};
                        out.append(next.begin(), next.end());
                        return out;
                      });
                });
            Value done = walk[0];
            e.store(e.toI32(e.select(done, walk[1], e.idx(0))), smD,
                    {e.idx(0)});
            e.store(e.select(done, e.i32(0), e.i32(1)), smD, {e.idx(1)});
            for (int64_t i = 0; i < G; ++i)
              e.store(e.f64(0.0), smU, {e.idx(i)});
          });
          e.barrier();
          Value extra = e.loadIndex(smD, {e.idx(0)});
          sumOmitted(e, extra);
        }
        Value extra = e.loadIndex(smD, {e.idx(0)});
        Value fallback = e.ne(e.load(smD, {e.idx(1)}), e.i32(0));
        if (tau > 0.0) {
          // Decide on the freshly summed bound of the final set: the walk
          // subtracts, and subtracting a dominant (or infinite) term cancels
          // the rest. Every thread reads the same shared sums.
          Value worstEps = e.f64(0.0);
          for (int64_t i = 0; i < G; ++i)
            worstEps = e.fmax(worstEps, epsOf(e, e.load(smU, {e.idx(i)}),
                                              e.load(smZ, {e.idx(i)})));
          Value fits =
              e.fcmp(arith::CmpFPredicate::OLE, worstEps, e.f64(tau));
          fallback = e.bor(fallback, e.bnot(fits));
        }
        Value extraKept = e.select(fallback, e.idx(0), extra);
        if (hasBox) {
          Value summaries = a[boxIdx], pageTable = a[boxIdx + 1];
          Value vbox = a[boxIdx + 2], smBox = sm[4];
          Value pageV = e.idx(op.getPageSize());
          // Whether page j holds a position the final set leaves out.
          auto pageOmitted = [&](GPUEmitter &e, Value j) -> Value {
            Value cand = unitCandidateCount(e, j, pageV, anchor, n, w);
            Value covered;
            if (unitTokens == 1) {
              // Selected tokens inside the page (all are candidates).
              Value t0 = e.mul(j, pageV), t1 = e.add(t0, pageV);
              Value inBaseCount = e.sub(baseBelow(e, t1), baseBelow(e, t0));
              covered = e.forLoop(
                  e.idx(0), extra, e.idx(1), {inBaseCount},
                  [&](Emitter &e, Value k, ValueRange acc)
                      -> SmallVector<Value> {
                    Value u = e.loadIndex(indices,
                                          {bb, g, e.add(e.idx(base), k)});
                    Value inside = e.band(e.ge(u, t0), e.lt(u, t1));
                    return {e.select(inside, e.add(acc[0], e.idx(1)),
                                     acc[0])};
                  })[0];
            } else {
              Value sel = e.bor(inBase(e, j), inExtras(e, j, extra));
              covered = e.select(sel, cand, e.idx(0));
            }
            return e.gt(cand, covered);
          };
          Value r = e.divs(tid, e.idx(boxLanes));
          Value c0 = e.rems(tid, e.idx(boxLanes));
          e.ifThen(e.lt(r, e.idx(boxRows)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            SmallVector<Value> init;
            for (int64_t k = 0; k < boxPer; ++k)
              init.append({e.f32(std::numeric_limits<double>::infinity()),
                           e.negInf()});
            // After a fallback nothing is omitted: the box stays empty.
            Value boxPages =
                e.select(fallback, e.idx(0), e.ceilDiv(n, pageV));
            auto box = e.forLoop(
                r, boxPages, e.idx(boxRows), init,
                [&](Emitter &ee, Value j, ValueRange acc)
                    -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  return e.ifElse(
                      pageOmitted(e, j), ValueRange(acc).getTypes(),
                      [&](Emitter &e) -> SmallVector<Value> {
                        Value phys = e.loadIndex(pageTable, {bb, j});
                        SmallVector<Value> out;
                        for (int64_t k = 0; k < boxPer; ++k) {
                          Value c = e.add(c0, e.idx(k * boxLanes));
                          Value cs = e.mins(c, e.idx(d - 1));
                          Value lo = e.load(summaries,
                                            {phys, g, e.idx(VMin), cs});
                          Value hi = e.load(summaries,
                                            {phys, g, e.idx(VMax), cs});
                          out.push_back(e.fmin(acc[2 * k], lo));
                          out.push_back(e.fmax(acc[2 * k + 1], hi));
                        }
                        return out;
                      },
                      [&](Emitter &) -> SmallVector<Value> {
                        return SmallVector<Value>(acc);
                      });
                });
            for (int64_t k = 0; k < boxPer; ++k) {
              Value c = e.add(c0, e.idx(k * boxLanes));
              e.ifThen(e.lt(c, e.idx(d)), [&](Emitter &e) {
                e.store(box[2 * k], smBox, {r, e.idx(0), c});
                e.store(box[2 * k + 1], smBox, {r, e.idx(1), c});
              });
            }
          });
          e.barrier();
          // Combine the rows; thread t owns channels t, t + threads, ...
          e.forLoop(tid, e.idx(d), e.idx(threads), {},
                    [&](Emitter &e, Value c, ValueRange) -> SmallVector<Value> {
                      Value lo = e.load(smBox, {e.idx(0), e.idx(0), c});
                      Value hi = e.load(smBox, {e.idx(0), e.idx(1), c});
                      for (int64_t rr = 1; rr < boxRows; ++rr) {
                        Value row = e.idx(rr);
                        lo = e.fmin(lo, e.load(smBox, {row, e.idx(0), c}));
                        hi = e.fmax(hi, e.load(smBox, {row, e.idx(1), c}));
                      }
                      e.store(lo, vbox, {bb, g, e.idx(0), c});
                      e.store(hi, vbox, {bb, g, e.idx(1), c});
                      return {};
                    });
        }
        for (int64_t i = 0; i < G; ++i) {
          e.ifThen(e.eq(tid, e.idx(i)), [&](Emitter &e) {
            Value eps = e.truncf(epsOf(e, e.load(smU, {e.idx(i)}),
                                       e.load(smZ, {e.idx(i)})),
                                 f32);
            eps = e.fmul(eps, e.f32(1.0 + 1.0 / (1 << 20)));
            eps = e.select(fallback, e.f32(0.0), eps);
            Value h = head(e, i);
            e.store(eps, stats, {bb, h, e.idx(0)});
            e.store(e.indexToF32(extraKept), stats, {bb, h, e.idx(2)});
            e.store(e.select(fallback, e.f32(1.0), e.f32(0.0)), stats,
                    {bb, h, e.idx(3)});
          });
        }
        e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
          e.store(e.toI32(extraKept), extraOut, {bb, g});
          e.store(e.select(fallback, e.i32(1), e.i32(0)), fallbackOut, {bb, g});
        });
      });
  Value batch = memref::DimOp::create(b, loc, op.getScores(), 0);
  launch(b, loc, fn, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         arith::ConstantIndexOp::create(b, loc, 1), threads, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

void lowerMerge(MergeOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getOut(), 1), d = staticDim(op.getOut(), 2);
  int64_t group = op.getFallback() ? hq / staticDim(op.getFallback(), 1)
                 : op.getVbox()   ? hq / staticDim(op.getVbox(), 1)
                                  : 1;
  int64_t perLane = std::max<int64_t>(1, d / kWarp);
  int64_t lanesUsed = d / perLane;
  const int64_t warpsPerBlock = 4;
  SmallVector<Value> operands(op.getPartials().begin(), op.getPartials().end());
  int64_t numSparse = operands.size();
  int64_t fallbackIdx = -1, denseIdx = -1;
  if (op.getFallback()) {
    fallbackIdx = operands.size();
    operands.push_back(op.getFallback());
    denseIdx = operands.size();
    operands.append(op.getDense().begin(), op.getDense().end());
  }
  int64_t outIdx = operands.size();
  operands.push_back(op.getOut());
  int64_t statsIdx = -1, vboxIdx = -1;
  if (op.getStats()) {
    statsIdx = operands.size();
    operands.push_back(op.getStats());
  }
  if (op.getVbox()) {
    vboxIdx = operands.size();
    operands.push_back(op.getVbox());
  }
  auto epsAttr = op.getStatsEpsAttr();
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value tid = e.tid();
        Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
        Value row = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(warpsPerBlock)),
                          warp);
        Value out = a[outIdx];
        Value batch = e.dim(out, 0);
        e.ifThen(e.lt(row, e.mul(batch, e.idx(hq))), [&](Emitter &ee) {
          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
          Value bb = e.divs(row, e.idx(hq)), h = e.rems(row, e.idx(hq));
          Value useDense = e.i1(false);
          if (fallbackIdx >= 0)
            useDense = e.ne(e.load(a[fallbackIdx],
                                   {bb, e.divs(h, e.idx(group))}),
                            e.i32(0));
          SmallVector<std::tuple<Value, Value, Value>> sets;
          for (int64_t i = 0; i < numSparse; i += 2)
            sets.push_back({a[i], a[i + 1], e.bnot(useDense)});
          if (denseIdx >= 0)
            sets.push_back({a[denseIdx], a[denseIdx + 1], useDense});
          // Pass 1: overall max over live splits (lanes stride the splits).
          Value m = e.negInf();
          for (auto &[po, pml, on] : sets) {
            Value pmlV = pml;
            Value mm = e.forLoop(
                lane, e.dim(pmlV, 2), e.idx(kWarp), {e.negInf()},
                [&](Emitter &e, Value s, ValueRange acc) -> SmallVector<Value> {
                  Value ls = e.load(pmlV, {bb, h, s, e.idx(1)});
                  Value ms = e.load(pmlV, {bb, h, s, e.idx(0)});
                  Value live = e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0));
                  return {e.select(live, e.fmax(acc[0], ms), acc[0])};
                })[0];
            m = e.select(on, e.fmax(m, mm), m);
          }
          m = e.groupMax(m, kWarp);
          // Pass 2: weighted sums; every lane walks all splits for its
          // channels.
          Value col = e.mul(lane, e.idx(perLane));
          Value inRow = e.lt(lane, e.idx(lanesUsed));
          Value colSafe = e.select(inRow, col, e.idx(0));
          SmallVector<Value> st{e.f32(0.0), e.f32(0.0),
                                e.splat(e.f32(0.0), perLane)};
          // Splits are walked kMergeUnroll at a time with every load issued
          // first: a split's row is a dependent-latency L2 read otherwise.
          constexpr int64_t kMergeUnroll = 8;
          auto fold = [&](Emitter &ee, ValueRange acc, Value poV, Value pmlV,
                          Value onV, ArrayRef<Value> splitIdx)
              -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            SmallVector<Value> ms, ls, cs, os;
            for (Value sIdx : splitIdx) {
              ms.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(0)}));
              ls.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(1)}));
              cs.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(2)}));
              os.push_back(e.vecLoad(poV, {bb, h, sIdx, colSafe}, perLane,
                                     std::min<int64_t>(16, perLane * 4)));
            }
            SmallVector<Value> out(acc.begin(), acc.end());
            for (size_t k = 0; k < splitIdx.size(); ++k) {
              Value live = e.band(
                  onV, e.fcmp(arith::CmpFPredicate::OGT, ls[k], e.f32(0.0)));
              Value wgt = e.select(live, e.fastExp(e.fsub(ms[k], m)),
                                   e.f32(0.0));
              out[2] = e.select(live,
                                e.fma(os[k], e.splat(wgt, perLane), out[2]),
                                out[2]);
              out[0] = e.fadd(out[0], e.fmul(ls[k], wgt));
              out[1] = e.fadd(out[1], e.select(onV, cs[k], e.f32(0.0)));
            }
            return out;
          };
          for (auto &[po, pml, on] : sets) {
            Value poV = po, pmlV = pml, onV = on;
            int64_t numSplits = staticDim(pmlV, 2);
            int64_t main = numSplits / kMergeUnroll * kMergeUnroll;
            if (main > 0)
              st = e.forLoop(
                  e.idx(0), e.idx(main), e.idx(kMergeUnroll), st,
                  [&](Emitter &e, Value s0, ValueRange acc)
                      -> SmallVector<Value> {
                    SmallVector<Value> idxs;
                    for (int64_t k = 0; k < kMergeUnroll; ++k)
                      idxs.push_back(e.add(s0, e.idx(k)));
                    return fold(e, acc, poV, pmlV, onV, idxs);
                  });
            SmallVector<Value> rest;
            for (int64_t k = main; k < numSplits; ++k)
              rest.push_back(e.idx(k));
            if (!rest.empty())
              st = fold(e, st, poV, pmlV, onV, rest);
          }
          Value total = st[0];
          Value inv = e.select(e.fcmp(arith::CmpFPredicate::OGT, total,
                                      e.f32(0.0)),
                               e.fdiv(e.f32(1.0), total), e.f32(0.0));
          Value res = e.fmul(st[2], e.splat(inv, perLane));
          e.ifThen(inRow, [&](Emitter &e) {
            vector::StoreOp::create(e.builder(), e.location(), res, out,
                                    ValueRange{bb, h, col});
          });
          // The output-error bound: each lane's share of the squared
          // distance to the far corner of the omitted-value box, summed
          // over the warp (every lane takes part in the shuffles).
          Value bound;
          if (vboxIdx >= 0 && !epsAttr) {
            Value vbox = a[vboxIdx];
            Value g = e.divs(h, e.idx(group));
            int64_t align = std::min<int64_t>(16, perLane * 4);
            Value lo = e.vecLoad(vbox, {bb, g, e.idx(0), colSafe}, perLane,
                                 align);
            Value hi = e.vecLoad(vbox, {bb, g, e.idx(1), colSafe}, perLane,
                                 align);
            Value zero = e.splat(e.f32(0.0), perLane);
            Value far = e.fmax(e.fmax(e.fsub(hi, res), e.fsub(res, lo)), zero);
            Value part = e.reduceAdd(e.fmul(far, far));
            part = e.select(inRow, part, e.f32(0.0));
            Value dist = math::SqrtOp::create(e.builder(), e.location(),
                                              e.groupSum(part, kWarp));
            bound = e.fmul(e.fmul(e.load(a[statsIdx],
                                         {bb, h, e.idx(StatEpsHat)}),
                                  dist),
                           e.f32(kOutputBoundRoundUp));
            bound = e.select(useDense, e.f32(0.0), bound);
          }
          if (statsIdx >= 0) {
            Value stats = a[statsIdx];
            e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
              e.store(st[1], stats, {bb, h, e.idx(StatAttended)});
              if (epsAttr) {
                Value eps = e.f32(epsAttr.getValueAsDouble());
                e.store(eps, stats, {bb, h, e.idx(StatEpsHat)});
                e.store(e.f32(0.0), stats, {bb, h, e.idx(StatExtra)});
                e.store(e.f32(0.0), stats, {bb, h, e.idx(StatFallback)});
                e.store(eps, stats, {bb, h, e.idx(StatOutputBound)});
              } else {
                e.store(bound ? bound : e.nan(), stats,
                        {bb, h, e.idx(StatOutputBound)});
              }
            });
          }
        });
      });
  Value batch = memref::DimOp::create(b, loc, op.getOut(), 0);
  Value rows = arith::MulIOp::create(
      b, loc, batch, arith::ConstantIndexOp::create(b, loc, hq));
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, rows, arith::ConstantIndexOp::create(b, loc, warpsPerBlock));
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  launch(b, loc, fn, blocks, one, one, warpsPerBlock * kWarp, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Append
//===----------------------------------------------------------------------===//

void lowerAppendKV(AppendKVOp op, KernelBuilder &kb, StringRef name) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t d = staticDim(op.getKCache(), 3);
  Type kvElt = elementType(op.getKCache());
  const int64_t threads = 128;
  SmallVector<Value> operands{op.getKNew(),      op.getVNew(),
                              op.getKCache(),    op.getVCache(),
                              op.getPageTable(), op.getPositions()};
  if (op.getSummaries())
    operands.push_back(op.getSummaries());
  bool hasSummaries = static_cast<bool>(op.getSummaries());
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value bb = e.bid(gpu::Dimension::x);
        Value pos = e.loadIndex(a[5], {bb});
        Value page = e.loadIndex(a[4], {bb, e.divs(pos, e.idx(p))});
        Value off = e.rems(pos, e.idx(p));
        Value first = e.eq(off, e.idx(0));
        e.forLoop(e.tid(), e.idx(hkv * d), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value g = e.divs(i, e.idx(d)), c = e.rems(i, e.idx(d));
                    Value k = e.truncf(e.load(a[0], {bb, g, c}), kvElt);
                    Value v = e.truncf(e.load(a[1], {bb, g, c}), kvElt);
                    e.store(k, a[2], {page, g, off, c});
                    e.store(v, a[3], {page, g, off, c});
                    if (!hasSummaries)
                      return {};
                    Value s = a[6];
                    Value k32 = e.toF32(k), v32 = e.toF32(v);
                    auto update = [&](SummarySlot slot, Value x,
                                      std::function<Value(Value, Value)> fold) {
                      Value old = e.load(s, {page, g, e.idx(slot), c});
                      e.store(e.select(first, x, fold(old, x)), s,
                              {page, g, e.idx(slot), c});
                    };
                    update(KMin, k32, [&](Value o, Value x) { return e.fmin(o, x); });
                    update(KMax, k32, [&](Value o, Value x) { return e.fmax(o, x); });
                    update(KSum, k32, [&](Value o, Value x) { return e.fadd(o, x); });
                    update(VMin, v32, [&](Value o, Value x) { return e.fmin(o, x); });
                    update(VMax, v32, [&](Value o, Value x) { return e.fmax(o, x); });
                    return {};
                  });
      });
  Value batch = memref::DimOp::create(b, loc, op.getKNew(), 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  launch(b, loc, fn, batch, one, one, threads, operands);
  op.erase();
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct ConvertCondensateToGPUPass
    : public condensate::impl::ConvertCondensateToGPUBase<
          ConvertCondensateToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> stages;
    bool decomposed = true;
    module.walk([&](Operation *op) {
      if (isa<ScorePagesOp, ScoreTokensOp, SelectTopKOp, SparseAttendOp,
              DenseAttendOp, CertifyOp, MergeOp, AppendKVOp>(op))
        stages.push_back(op);
      if (auto d = dyn_cast<DecodeAttentionOp>(op)) {
        d.emitOpError() << "must be decomposed before lowering to GPU "
                           "kernels (run condensate-decompose)";
        decomposed = false;
      }
    });
    if (!decomposed)
      return signalPassFailure();
    if (stages.empty())
      return;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto kernels = dyn_cast_or_null<gpu::GPUModuleOp>(
        SymbolTable::lookupSymbolIn(module, moduleName));
    if (!kernels)
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), moduleName);
    KernelBuilder kb(module, kernels);
    for (Operation *op : stages) {
      auto fn = op->getParentOfType<func::FuncOp>();
      std::string prefix =
          (fn ? fn.getSymName() : StringRef("kernel")).str() + "_";
      llvm::TypeSwitch<Operation *>(op)
          .Case([&](ScorePagesOp o) { lowerScorePages(o, kb, prefix + "score_pages"); })
          .Case([&](ScoreTokensOp o) { lowerScoreTokens(o, kb, prefix + "score_tokens"); })
          .Case([&](SelectTopKOp o) { lowerSelectTopK(o, kb, prefix + "select_topk"); })
          .Case([&](SparseAttendOp o) { lowerSparseAttend(o, kb, prefix + "sparse_attend"); })
          .Case([&](DenseAttendOp o) { lowerDenseAttend(o, kb, prefix + "dense_attend"); })
          .Case([&](CertifyOp o) { lowerCertify(o, kb, prefix + "certify"); })
          .Case([&](MergeOp o) { lowerMerge(o, kb, prefix + "merge"); })
          .Case([&](AppendKVOp o) { lowerAppendKV(o, kb, prefix + "append_kv"); });
    }
  }
};

} // namespace
