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

/// The lane-group-per-token layout of score_tokens and score_sketch: grid
/// (token blocks, Hkv, B), `perBlock` lane groups of `lanes` lanes a block;
/// group `gid` of block x scores token t = x * perBlock + gid for the G
/// query heads of key/value head g, whose query slices it holds.
struct TokenLanes {
  Value t, inRange, inside, tt, lane, col, g, bb, scale;
  SmallVector<Value> qs;

  static TokenLanes of(GPUEmitter &e, const RowSplit &rs, int64_t perBlock,
                       int64_t G, Value q, Value lens, Value scores,
                       double scaleValue) {
    TokenLanes tl;
    LanePlace at = e.lanePlace(rs);
    tl.lane = at.lane;
    tl.col = at.col;
    tl.g = e.bid(gpu::Dimension::y);
    tl.bb = e.bid(gpu::Dimension::z);
    tl.t = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock)), at.group);
    Value n = e.loadIndex(lens, {tl.bb});
    tl.scale = e.f32(scaleValue);
    for (int64_t i = 0; i < G; ++i)
      tl.qs.push_back(e.vecLoad(
          q, {tl.bb, e.add(e.mul(tl.g, e.idx(G)), e.idx(i)), tl.col},
          rs.elems, std::min<int64_t>(16, rs.elems * 4)));
    // No branch around the group shuffles: out-of-range groups compute on
    // token 0 and do not store.
    tl.inRange = e.lt(tl.t, e.dim(scores, 2));
    tl.inside = e.band(tl.inRange, e.lt(tl.t, n));
    tl.tt = e.select(tl.inside, tl.t, e.idx(0));
    return tl;
  }
  /// Stores query head i's scaled score s (-inf past the context).
  void store(Emitter &e, Value scores, int64_t G, int64_t i, Value s) const {
    Value v = e.select(inside, e.fmul(s, scale), e.negInf());
    e.ifThen(e.band(inRange, e.eq(lane, e.idx(0))), [&](Emitter &e) {
      e.store(v, scores, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), t});
    });
  }
};

/// Launches a token-layout kernel over every token slot of `scores`.
void launchTokens(OpBuilder &b, Location loc, gpu::GPUFuncOp fn, Value q,
                  Value scores, int64_t hkv, int64_t perBlock, int64_t threads,
                  ValueRange operands) {
  Value batch = memref::DimOp::create(b, loc, q, 0);
  Value nt = memref::DimOp::create(b, loc, scores, 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, nt, arith::ConstantIndexOp::create(b, loc, perBlock));
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

void lowerScoreTokens(ScoreTokensOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), G = hq / hkv;
  int64_t p = staticDim(op.getKCache(), 2);
  Type kElt = elementType(op.getKCache());
  RowSplit rs = RowSplit::of(d, kElt);
  int64_t perBlock = std::max<int64_t>(1, 256 / rs.lanes);
  int64_t threads = perBlock * rs.lanes;
  int64_t align = std::min<int64_t>(16, rs.elems * elementBytes(kElt));
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value k = a[1], pt = a[2];
        TokenLanes tl = TokenLanes::of(e, rs, perBlock, G, a[0], a[3], a[4],
                                       op.getScale().convertToDouble());
        Value page = e.loadIndex(pt, {tl.bb, e.divs(tl.tt, e.idx(p))});
        Value off = e.rems(tl.tt, e.idx(p));
        Value kr =
            e.toF32(e.vecLoad(k, {page, tl.g, off, tl.col}, rs.elems, align));
        for (int64_t i = 0; i < G; ++i)
          tl.store(e, a[4], G, i, rowDot(e, nvvmTarget(), tl.qs[i], kr,
                                         rs.lanes));
      });
  launchTokens(b, op.getLoc(), fn, op.getQ(), op.getScores(), hkv, perBlock,
               threads, operands);
}

void lowerScoreSketch(ScoreSketchOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize(), bits = op.getBits();
  RowSplit rs = RowSplit::of(d, b.getF32Type());
  int64_t perBlock = std::max<int64_t>(1, 256 / rs.lanes);
  int64_t threads = perBlock * rs.lanes;
  int64_t align = std::min<int64_t>(16, rs.elems * 4);
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value sum = a[1], pt = a[2];
        TokenLanes tl = TokenLanes::of(e, rs, perBlock, G, a[0], a[3], a[4],
                                       op.getScale().convertToDouble());
        // Both bounds are computed and one is selected (no branch around
        // the shuffles): the sketch for a full page, the box otherwise.
        Value j = e.divs(tl.tt, e.idx(p)), off = e.rems(tl.tt, e.idx(p));
        Value page = e.loadIndex(pt, {tl.bb, j});
        Value n = e.loadIndex(a[3], {tl.bb});
        Value full = e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
        auto row = [&](Value r) {
          return e.vecLoad(sum, {page, tl.g, r, tl.col}, rs.elems, align);
        };
        Value lo = row(e.idx(KMin)), hi = row(e.idx(KMax));
        auto [wordRow, shift] = sketchSlot(e, off, bits);
        SketchRow sk = sketchRow(e, lo, hi, bits);
        SmallVector<Value> keys = sketchKeys(e, sk, row(wordRow), shift, bits);
        for (int64_t i = 0; i < G; ++i) {
          Value est = rowDot(e, nvvmTarget(), tl.qs[i], keys, rs.lanes);
          Value slack = sketchSlack(e, nvvmTarget(), tl.qs[i], sk, d, rs.lanes);
          Value box = rowBoxDot(e, nvvmTarget(), tl.qs[i], lo, hi, rs.lanes);
          tl.store(e, a[4], G, i, e.select(full, e.fadd(est, slack), box));
        }
      });
  launchTokens(b, op.getLoc(), fn, op.getQ(), op.getScores(), hkv, perBlock,
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
