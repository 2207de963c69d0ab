//===- Score.cpp - page and token scoring kernels -------------------------===//
//
// Lowers score_pages (a lane group per page and kv head, the group's query
// heads in registers; grid (page blocks, Hkv, B)), score_tokens and
// score_sketch (a lane group per token; grid (token blocks, Hkv, B)).
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "../Common/Sketch.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

void lowerScorePages(ScorePagesOp op, OpBuilder &b, const KernelBuilder &kb,
                     StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize();
  RowSplit rs = RowSplit::of(d, b.getF32Type());
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
        LanePlace at = e.lanePlace(rs);
        Value gid = at.group, li = at.lane, col = at.col;
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
            Value sc = minmax
                           ? rowBoxDot(e, nvvmTarget(), qs[i], lo[k], hi[k], L)
                           : rowDot(e, nvvmTarget(), qs[i], lo[k], L);
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
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

void lowerScoreTokens(ScoreTokensOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), G = hq / hkv;
  int64_t p = staticDim(op.getKCache(), 2);
  Type kElt = elementType(op.getKCache());
  RowSplit rs = RowSplit::of(d, kElt);
  int64_t L = rs.lanes, E = rs.elems;
  int64_t perBlock = std::max<int64_t>(1, 256 / L);
  int64_t threads = perBlock * L;
  int64_t align = std::min<int64_t>(16, E * elementBytes(kElt));
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], k = a[1], pt = a[2], lens = a[3], scores = a[4];
        LanePlace at = e.lanePlace(rs);
        Value gid = at.group, li = at.lane, col = at.col;
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value t = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock)), gid);
        Value nt = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value scale = e.f32(op.getScale().convertToDouble());
        SmallVector<Value> qs;
        for (int64_t i = 0; i < G; ++i)
          qs.push_back(e.vecLoad(q,
                                 {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), col},
                                 E, std::min<int64_t>(16, E * 4)));
        Value inRange = e.lt(t, nt);
        Value inside = e.band(inRange, e.lt(t, n));
        Value tt = e.select(inside, t, e.idx(0));
        Value page = e.loadIndex(pt, {bb, e.divs(tt, e.idx(p))});
        Value off = e.rems(tt, e.idx(p));
        Value kr = e.toF32(e.vecLoad(k, {page, g, off, col}, E, align));
        for (int64_t i = 0; i < G; ++i) {
          Value s = rowDot(e, nvvmTarget(), qs[i], kr, L);
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
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

void lowerScoreSketch(ScoreSketchOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize(), bits = op.getBits();
  RowSplit rs = RowSplit::of(d, b.getF32Type());
  int64_t L = rs.lanes, E = rs.elems;
  int64_t perBlock = std::max<int64_t>(1, 256 / L);
  int64_t threads = perBlock * L;
  int64_t align = std::min<int64_t>(16, E * 4);
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        LanePlace at = e.lanePlace(rs);
        Value gid = at.group, li = at.lane, col = at.col;
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value t = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock)), gid);
        Value nt = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value scale = e.f32(op.getScale().convertToDouble());
        SmallVector<Value> qs;
        for (int64_t i = 0; i < G; ++i)
          qs.push_back(e.vecLoad(
              q, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), col}, E, align));
        // No branch around the group shuffles: every lane group computes
        // both bounds and selects.
        Value inRange = e.lt(t, nt);
        Value inside = e.band(inRange, e.lt(t, n));
        Value tt = e.select(inside, t, e.idx(0));
        Value j = e.divs(tt, e.idx(p)), off = e.rems(tt, e.idx(p));
        Value page = e.loadIndex(pt, {bb, j});
        Value full = e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
        Value lo = e.vecLoad(sum, {page, g, e.idx(KMin), col}, E, align);
        Value hi = e.vecLoad(sum, {page, g, e.idx(KMax), col}, E, align);
        auto [wordRow, shift] = sketchSlot(e, off, bits);
        Value words = e.vecLoad(sum, {page, g, wordRow, col}, E, align);
        SketchRow sk = sketchRow(e, lo, hi, bits);
        SmallVector<Value> keys = sketchKeys(e, sk, words, shift, bits);
        for (int64_t i = 0; i < G; ++i) {
          Value est = rowDot(e, nvvmTarget(), qs[i], keys, L);
          Value slack = sketchSlack(e, nvvmTarget(), qs[i], sk, d, L);
          Value box = rowBoxDot(e, nvvmTarget(), qs[i], lo, hi, L);
          Value s = e.select(full, e.fadd(est, slack), box);
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
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

} // namespace

void mlir::condensate::populateScoreToGPUPatterns(RewritePatternSet &patterns,
                                                  gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<ScorePagesOp, lowerScorePages>>(ctx, kernels,
                                                             "score_pages");
  patterns.add<KernelPattern<ScoreTokensOp, lowerScoreTokens>>(ctx, kernels,
                                                               "score_tokens");
  patterns.add<KernelPattern<ScoreSketchOp, lowerScoreSketch>>(ctx, kernels,
                                                               "score_sketch");
}
