//===- Merge.cpp - the merge kernel ---------------------------------------===//
//
// Lowers merge to one block per (sequence, query head), of 4 to 16 warps as
// the row's splits need: the block finds the live splits' maximum and where
// they end (its threads over the splits, one read each for up to 512
// splits, combined through shared memory), the warps walk the live splits
// in turn, a group of splits a warp with every load issued first (lanes
// over head_dim), and combine through shared memory; the first warp writes
// the row and the output-error bound, its squared distance summed by warp
// shuffles. A row's partials are read once a round over all its warps:
// with 4 warps a block, 256 splits cost 8 dependent L2 round trips, and the
// dense step's merge was 11-17 us at 1-4 kv heads, 7-8 us at 8 (Nsight
// Compute, B1/128K, caches flushed: reports/benchmarks/).
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

// Splits a warp reads at once, and warps a block.
constexpr int64_t kMergeUnrollMin = 8, kMergeUnrollMax = 16;
constexpr int64_t kMergeWarpsMin = 4, kMergeWarpsMax = 16;

void lowerMerge(MergeOp op, OpBuilder &b, const KernelBuilder &kb,
                StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getOut(), 1), d = staticDim(op.getOut(), 2);
  int64_t group = op.getFallback() ? hq / staticDim(op.getFallback(), 1)
                  : op.getVbox()   ? hq / staticDim(op.getVbox(), 1)
                                   : 1;
  // Channels per lane: the fewest that divide head_dim over at most a warp.
  int64_t perLane = std::max<int64_t>(1, d / kWarp);
  while (d % perLane != 0 || d / perLane > kWarp)
    ++perLane;
  int64_t lanesUsed = d / perLane;
  // Splits a warp loads at once: about 32 floats of partial row a lane, at
  // least 8 and at most 16 splits.
  const int64_t unrollMax =
      std::clamp<int64_t>(32 / perLane, kMergeUnrollMin, kMergeUnrollMax);
  // Warps of a row's block: a row's live splits are walked in groups, each
  // group one L2 round trip for its warp, so the warps shorten that chain:
  // enough for one round over the largest set's splits, 4 to 16.
  int64_t maxSplits = 1;
  for (size_t i = 1; i < op.getPartials().size(); i += 2)
    maxSplits = std::max(maxSplits, staticDim(op.getPartials()[i], 2));
  if (op.getFallback())
    maxSplits = std::max(maxSplits, staticDim(op.getDense()[1], 2));
  const int64_t warpsPerBlock = std::clamp<int64_t>(
      (maxSplits + unrollMax - 1) / unrollMax, kMergeWarpsMin, kMergeWarpsMax);
  const int64_t threads = warpsPerBlock * kWarp;
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
  MLIRContext *ctx = op.getContext();
  Type f32 = Float32Type::get(ctx);
  int64_t numSets = numSparse / 2 + (fallbackIdx >= 0 ? 1 : 0);
  // Each warp's (l, count) and weighted values; each warp's max logit and
  // each set's live end (pass 1).
  SmallVector<Type> shared{
      KernelBuilder::workgroupType(ctx, {warpsPerBlock, 2}, f32),
      KernelBuilder::workgroupType(ctx, {warpsPerBlock, d}, f32),
      KernelBuilder::workgroupType(ctx, {warpsPerBlock}, f32),
      KernelBuilder::workgroupType(ctx, {warpsPerBlock, numSets},
                                   IntegerType::get(ctx, 32))};
  auto fn = kb.createKernel(
      name, operands, shared,
      [&](GPUEmitter &e, ValueRange a, ValueRange smem) {
        Value tid = e.tid();
        Value lane = e.rems(tid, e.idx(kWarp)),
              warp = e.divs(tid, e.idx(kWarp));
        Value row = e.bid(gpu::Dimension::x);
        Value out = a[outIdx];
        Value batch = e.dim(out, 0);
        e.ifThen(e.lt(row, e.mul(batch, e.idx(hq))), [&](Emitter &ee) {
          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
          Value bb = e.divs(row, e.idx(hq)), h = e.rems(row, e.idx(hq));
          Value useDense = e.i1(false);
          if (fallbackIdx >= 0)
            useDense =
                e.ne(e.load(a[fallbackIdx], {bb, e.divs(h, e.idx(group))}),
                     e.i32(0));
          SmallVector<std::tuple<Value, Value, Value>> sets;
          for (int64_t i = 0; i < numSparse; i += 2)
            sets.push_back({a[i], a[i + 1], e.bnot(useDense)});
          if (denseIdx >= 0)
            sets.push_back({a[denseIdx], a[denseIdx + 1], useDense});
          // Pass 1: overall max over live splits (the block's threads
          // stride the splits), and for each set the end of its live
          // splits: the splits past the last live one (a short context's
          // unused dense splits) are not read again. Each warp's share
          // through shared memory; every thread then reduces the warps'.
          auto imax = [&](Value x, Value y) -> Value {
            return arith::MaxSIOp::create(e.builder(), e.location(), x, y);
          };
          Value smM = smem[2], smEnd = smem[3];
          Value m = e.negInf();
          SmallVector<Value> ends;
          for (auto &[po, pml, on] : sets) {
            Value pmlV = pml;
            auto r = liveSplitMax(e, nvvmTarget(), pmlV, bb, h, tid, threads);
            m = e.select(on, e.fmax(m, r.first), m);
            Value end = r.second;
            for (int64_t o = kWarp / 2; o >= 1; o /= 2)
              end = imax(end, e.shuffleXor(end, o));
            ends.push_back(end);
          }
          m = laneMax(e, nvvmTarget(), m, kWarp);
          e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
            e.store(m, smM, {warp});
            for (auto [i, end] : llvm::enumerate(ends))
              e.store(end, smEnd, {warp, e.idx(i)});
          });
          e.barrier();
          SmallVector<Value> liveEnds;
          for (int64_t w = 0; w < warpsPerBlock; ++w)
            m = e.fmax(m, e.load(smM, {e.idx(w)}));
          for (size_t i = 0; i < ends.size(); ++i) {
            Value end = ends[i];
            for (int64_t w = 0; w < warpsPerBlock; ++w)
              end = imax(end, e.load(smEnd, {e.idx(w), e.idx(i)}));
            liveEnds.push_back(e.toIndex(end));
          }
          // Pass 2: weighted sums; the warps take groups of splits in
          // turn, each lane its channels.
          Value col = e.mul(lane, e.idx(perLane));
          Value inRow = e.lt(lane, e.idx(lanesUsed));
          Value colSafe = e.select(inRow, col, e.idx(0));
          SmallVector<Value> st{e.f32(0.0), e.f32(0.0),
                                e.splat(e.f32(0.0), perLane)};
          // Splits are walked a group at a time with every load issued
          // first: a split's row is a dependent-latency L2 read otherwise.
          auto fold = [&](Emitter &ee, ValueRange acc, Value poV, Value pmlV,
                          Value onV, ArrayRef<Value> splitIdx,
                          ArrayRef<Value> inEnd) -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            SmallVector<Value> ms, ls, cs, os;
            for (Value sIdx : splitIdx) {
              ms.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(0)}));
              ls.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(1)}));
              cs.push_back(e.load(pmlV, {bb, h, sIdx, e.idx(2)}));
              os.push_back(e.vecLoad(poV, {bb, h, sIdx, colSafe}, perLane,
                                     vectorAlign(perLane * 4)));
            }
            SmallVector<Value> out(acc.begin(), acc.end());
            for (size_t k = 0; k < splitIdx.size(); ++k) {
              Value on = e.band(onV, inEnd[k]);
              Value live = e.band(
                  on, e.fcmp(arith::CmpFPredicate::OGT, ls[k], e.f32(0.0)));
              Value wgt =
                  e.select(live, e.fastExp(e.fsub(ms[k], m)), e.f32(0.0));
              out[2] = e.select(
                  live, e.fma(os[k], e.splat(wgt, perLane), out[2]), out[2]);
              out[0] = e.fadd(out[0], e.fmul(ls[k], wgt));
              out[1] = e.fadd(out[1], e.select(on, cs[k], e.f32(0.0)));
            }
            return out;
          };
          // Groups of up to unrollMax splits up to the set's live end; a
          // group's indices past it are clamped to a split that exists and
          // masked.
          for (auto [set, end] : llvm::zip(sets, liveEnds)) {
            auto &[po, pml, on] = set;
            Value poV = po, pmlV = pml, onV = on, endV = end;
            int64_t numSplits = staticDim(pmlV, 2);
            int64_t unroll = std::min(unrollMax, numSplits);
            st = e.forLoop(e.mul(warp, e.idx(unroll)), endV,
                           e.idx(unroll * warpsPerBlock), st,
                           [&](Emitter &e, Value s0,
                               ValueRange acc) -> SmallVector<Value> {
                             SmallVector<Value> idxs, inEnd;
                             for (int64_t k = 0; k < unroll; ++k) {
                               Value sIdx = e.add(s0, e.idx(k));
                               inEnd.push_back(e.lt(sIdx, endV));
                               idxs.push_back(
                                   e.mins(sIdx, e.idx(numSplits - 1)));
                             }
                             return fold(e, acc, poV, pmlV, onV, idxs, inEnd);
                           });
          }
          // The warps' sums through shared memory; warp 0 finishes the row.
          Value smLC = smem[0], smAcc = smem[1];
          e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
            e.store(st[0], smLC, {warp, e.idx(0)});
            e.store(st[1], smLC, {warp, e.idx(1)});
          });
          e.ifThen(inRow, [&](Emitter &e) {
            vector::StoreOp::create(e.builder(), e.location(), st[2], smAcc,
                                    ValueRange{warp, col});
          });
          e.barrier();
          e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            for (int64_t w = 1; w < warpsPerBlock; ++w) {
              st[0] = e.fadd(st[0], e.load(smLC, {e.idx(w), e.idx(0)}));
              st[1] = e.fadd(st[1], e.load(smLC, {e.idx(w), e.idx(1)}));
              st[2] =
                  e.fadd(st[2], e.vecLoad(smAcc, {e.idx(w), colSafe}, perLane,
                                          vectorAlign(perLane * 4)));
            }
            Value total = st[0];
            Value inv =
                e.select(e.fcmp(arith::CmpFPredicate::OGT, total, e.f32(0.0)),
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
              int64_t align = vectorAlign(perLane * 4);
              Value lo =
                  e.vecLoad(vbox, {bb, g, e.idx(0), colSafe}, perLane, align);
              Value hi =
                  e.vecLoad(vbox, {bb, g, e.idx(1), colSafe}, perLane, align);
              Value zero = e.splat(e.f32(0.0), perLane);
              Value far =
                  e.fmax(e.fmax(e.fsub(hi, res), e.fsub(res, lo)), zero);
              Value part = e.reduceAdd(e.fmul(far, far));
              part = e.select(inRow, part, e.f32(0.0));
              Value dist =
                  math::SqrtOp::create(e.builder(), e.location(),
                                       laneSum(e, nvvmTarget(), part, kWarp));
              bound = e.fmul(
                  e.fmul(e.load(a[statsIdx], {bb, h, e.idx(StatEpsHat)}), dist),
                  e.f32(kOutputBoundRoundUp));
              bound = e.select(useDense, e.f32(0.0), bound);
            }
            if (statsIdx >= 0) {
              Value stats = a[statsIdx];
              e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
                e.store(st[1], stats, {bb, h, e.idx(StatAttended)});
                if (epsAttr) {
                  storeFixedCertificate(e, stats, bb, h,
                                        epsAttr.getValueAsDouble());
                } else {
                  e.store(bound ? bound : e.nan(), stats,
                          {bb, h, e.idx(StatOutputBound)});
                }
              });
            }
          });
        });
      });
  Value batch = memref::DimOp::create(b, loc, op.getOut(), 0);
  Value rows = arith::MulIOp::create(
      b, loc, batch, arith::ConstantIndexOp::create(b, loc, hq));
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  launch(b, loc, fn, rows, one, one, threads, operands);
}

} // namespace

void mlir::condensate::populateMergeToGPUPatterns(RewritePatternSet &patterns,
                                                  gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<MergeOp, lowerMerge>>(ctx, kernels, "merge");
}
