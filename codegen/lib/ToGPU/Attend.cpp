//===- Attend.cpp - sparse and dense attention kernels --------------------===//
//
// Lowers sparse_attend and dense_attend to one block per (split, kv head,
// sequence): lane groups of L lanes each read one key and one value row with
// 16-byte loads, serve all G query heads of the group (GQA), keep
// online-softmax state in registers, and combine through shared memory.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

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
  s.split = RowSplit::of(s.d, elementType(k));
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
  LanePlace at = e.lanePlace(s.split);
  Value tid = at.tid, gid = at.group, li = at.lane, col = at.col;
  Type f32 = e.builder().getF32Type();
  int64_t kvBytes = elementBytes(elementType(k));
  int64_t align = vectorAlign(E * kvBytes);
  // Query slices of the group's heads, prescaled by the softmax scale.
  SmallVector<Value> qs;
  for (int64_t i = 0; i < G; ++i) {
    Value h = e.add(e.mul(g, e.idx(G)), e.idx(i));
    Value qv = e.vecLoad(q, {b, h, col}, E, vectorAlign(E * 4));
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
              DenseElementsAttr::get(
                  cast<ShapedType>(rowTypes[kUnroll + u]),
                  ee.builder().getZeroAttr(elementType(k)))));
        return none;
      });
  int64_t stateSize = init.size();
  init.append(first.begin(), first.end());
  auto state =
      e.forLoop(e.idx(0), rounds, e.idx(1), init,
                [&](Emitter &ee, Value r, ValueRange st) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  // Prefetch round r + 1 (its slots past v1 read the safe row).
                  SmallVector<Value> next = loadRound(e, e.add(r, e.idx(1)));
                  ValueRange rows = st.drop_front(stateSize);
                  ValueRange valid = rows.take_front(kUnroll);
                  ValueRange kr = rows.slice(kUnroll, kUnroll);
                  ValueRange vr = rows.slice(2 * kUnroll, kUnroll);
                  // One online-softmax update per round for all its slots: a
                  // single rescale of the accumulators instead of one per key.
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
                      Value dot = rowDot(e, nvvmTarget(), qs[i], kf[u], L);
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
                    // A round with no valid slot leaves the state as it was
                    // (and avoids exp(-inf - -inf)).
                    out[i] = e.select(any, mNew, m);
                    out[G + i] = e.select(any, lNew, l);
                    out[2 * G + 1 + i] = e.select(any, accNew, acc);
                  }
                  for (int64_t u = 0; u < kUnroll; ++u)
                    out[2 * G] = e.select(
                        valid[u], e.fadd(out[2 * G], e.f32(1.0)), out[2 * G]);
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
  e.forLoop(
      tid, total, e.idx(s.threads), {},
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
              Value w = e.select(live, e.fastExp(e.fsub(mr, m)), e.f32(0.0));
              w = e.select(e.fcmp(arith::CmpFPredicate::OGT, mr, e.negInf()), w,
                           e.f32(0.0));
              return {e.fadd(acc[0], e.fmul(w, e.load(smL, {r, i}))),
                      e.fadd(acc[1], e.fmul(w, e.load(smAcc, {r, i, c}))),
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

void lowerSparseAttend(SparseAttendOp op, OpBuilder &b, const KernelBuilder &kb,
                       StringRef name) {
  Location loc = op.getLoc();
  AttentionShape s = attentionShape(op.getQ(), op.getKCache());
  SparseList list = SparseList::of(op);
  SmallVector<Value> operands{
      op.getQ(),    op.getKCache(),   op.getVCache(),   op.getPageTable(),
      op.getLens(), op.getPartialO(), op.getPartialMl()};
  int64_t windowsIdx = -1, indicesIdx = -1, limitsIdx = -1, skipIdx = -1;
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
  if (op.getSkip()) {
    skipIdx = operands.size();
    operands.push_back(op.getSkip());
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
        Value w =
            effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
        CondensateSlots slotsInfo = CondensateSlots::of(e, op, list, w, n);
        Value limit = list.limit(e, limits, bb, g);
        auto [v0, v1] = list.splitRange(e, split);
        // A skipped group attends nothing: its blocks write empty partials.
        if (skipIdx >= 0)
          v1 = e.select(e.ne(e.load(a[skipIdx], {bb, g}), e.i32(0)), v0, v1);
        Value scale = e.f32(op.getScale().convertToDouble());
        emitAttentionBody(
            e, s, q, k, v, pt, po, pml, bb, g, split, v0, v1, scale, smem,
            [&](GPUEmitter &e, Value slot) -> std::pair<Value, Value> {
              return slotsInfo.position(e, slot, list, indices, bb, g, limit);
            });
      });
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  launch(b, loc, fn, arith::ConstantIndexOp::create(b, loc, list.splits),
         arith::ConstantIndexOp::create(b, loc, s.hkv), batch, s.threads,
         operands);
}

void lowerDenseAttend(DenseAttendOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  Location loc = op.getLoc();
  AttentionShape s = attentionShape(op.getQ(), op.getKCache());
  int64_t splitsStatic = staticDim(op.getPartialMl(), 2);
  SmallVector<Value> operands{
      op.getQ(),    op.getKCache(),   op.getVCache(),   op.getPageTable(),
      op.getLens(), op.getPartialO(), op.getPartialMl()};
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
        // The empty splits of a short context cost a block that exits at
        // once.
        auto [t0, t1] = denseSplitRange(
            e, n, e.builder().getIndexAttr(splitsStatic), split);
        if (masked) {
          Value active = e.ne(e.load(a[7], {bb, g}), e.i32(0));
          t1 = e.select(active, t1, t0);
        }
        t1 = e.maxs(t1, t0);
        Value scale = e.f32(op.getScale().convertToDouble());
        emitAttentionBody(
            e, s, a[0], a[1], a[2], a[3], a[5], a[6], bb, g, split, t0, t1,
            scale, smem,
            [&](GPUEmitter &e, Value t) -> std::pair<Value, Value> {
              return {t, e.i1(true)};
            });
      });
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value splits = arith::ConstantIndexOp::create(b, loc, splitsStatic);
  launch(b, loc, fn, splits, arith::ConstantIndexOp::create(b, loc, s.hkv),
         batch, s.threads, operands);
}

} // namespace

void mlir::condensate::populateAttendToGPUPatterns(RewritePatternSet &patterns,
                                                   gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<SparseAttendOp, lowerSparseAttend>>(
      ctx, kernels, "sparse_attend");
  patterns.add<KernelPattern<DenseAttendOp, lowerDenseAttend>>(ctx, kernels,
                                                               "dense_attend");
}
