//===- Score.cpp - page and token scoring kernels -------------------------===//
//
// Lowers score_pages (a lane group per page and kv head, the group's query
// heads in registers; grid (page blocks, Hkv, B)),
// score_tokens (a lane group per token; grid (token blocks, Hkv, B)) and
// score_sketch (a lane group per 4 pages, each loaded a round ahead, each
// word row's tokens summed by one transposed butterfly; grid (page blocks,
// Hkv, B)).
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

/// The query slices (E elements at `col`) of the G query heads of key/value
/// head g of sequence bb: what a lane group holds for all its dot products.
SmallVector<Value> groupQueries(GPUEmitter &e, Value q, Value bb, Value g,
                                int64_t G, Value col, int64_t E,
                                int64_t align) {
  SmallVector<Value> qs;
  for (int64_t i = 0; i < G; ++i)
    qs.push_back(
        e.vecLoad(q, {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), col}, E, align));
  return qs;
}

/// Runs `body` in a block that holds part of the context; a block wholly
/// past it (the page table is as wide as the longest context the engine
/// allows, the sequence may be far shorter) only stores -inf to its score
/// slots [first, min(first + count, nt)) of the group's G query heads.
/// `first` is the block's first slot; the condition is uniform over the
/// block, so the body's shuffles see whole warps.
void ifInsideContext(GPUEmitter &e, Value live, Value scores, Value bb, Value g,
                     int64_t G, Value first, int64_t count, int64_t threads,
                     const std::function<void(GPUEmitter &)> &body) {
  e.ifThen(live, [&](Emitter &ee) { body(static_cast<GPUEmitter &>(ee)); });
  e.ifThen(e.bnot(live), [&](Emitter &ee) {
    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
    Value end = e.mins(e.add(first, e.idx(count)), e.dim(scores, 2));
    e.forLoop(e.add(first, e.tid()), end, e.idx(threads), {},
              [&](Emitter &e, Value s, ValueRange) -> SmallVector<Value> {
                for (int64_t i = 0; i < G; ++i)
                  e.store(e.negInf(), scores,
                          {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), s});
                return {};
              });
  });
}

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
  int64_t align = vectorAlign(E * 4);
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
        ifInsideContext(
            e, e.lt(first, pages), scores, bb, g, G, first, perBlock, threads,
            [&](GPUEmitter &e) {
              SmallVector<Value> qs =
                  groupQueries(e, q, bb, g, G, col, E, align);
              // No branch around the group shuffles: out-of-range groups
              // compute on page slot 0 and do not store.
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
                  lo.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KMin), col}, E, align));
                  hi.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KMax), col}, E, align));
                } else {
                  lo.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KSum), col}, E, align));
                }
              }
              for (int64_t k = 0; k < kPages; ++k) {
                Value cnt = e.mins(e.sub(n, e.mul(js[k], e.idx(p))), e.idx(p));
                for (int64_t i = 0; i < G; ++i) {
                  Value sc = minmax ? rowBoxDot(e, nvvmTarget(), qs[i], lo[k],
                                                hi[k], L)
                                    : rowDot(e, nvvmTarget(), qs[i], lo[k], L);
                  if (!minmax)
                    sc = e.fdiv(sc, e.indexToF32(e.maxs(cnt, e.idx(1))));
                  sc = e.select(inside[k], e.fmul(sc, scale), e.negInf());
                  e.ifThen(e.band(inRange[k], e.eq(li, e.idx(0))),
                           [&](Emitter &e) {
                             e.store(sc, scores,
                                     {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)),
                                      js[k]});
                           });
                }
              }
            });
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
    tl.qs = groupQueries(e, q, tl.bb, tl.g, G, tl.col, rs.elems,
                         vectorAlign(rs.elems * 4));
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
  int64_t align = vectorAlign(rs.elems * elementBytes(kElt));
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value k = a[1], pt = a[2];
        Value first = e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock));
        Value bb = e.bid(gpu::Dimension::z);
        ifInsideContext(
            e, e.lt(first, e.loadIndex(a[3], {bb})), a[4], bb,
            e.bid(gpu::Dimension::y), G, first, perBlock, threads,
            [&](GPUEmitter &e) {
              TokenLanes tl =
                  TokenLanes::of(e, rs, perBlock, G, a[0], a[3], a[4],
                                 op.getScale().convertToDouble());
              Value page = e.loadIndex(pt, {tl.bb, e.divs(tl.tt, e.idx(p))});
              Value off = e.rems(tl.tt, e.idx(p));
              Value kr = e.toF32(
                  e.vecLoad(k, {page, tl.g, off, tl.col}, rs.elems, align));
              for (int64_t i = 0; i < G; ++i)
                tl.store(e, a[4], G, i,
                         rowDot(e, nvvmTarget(), tl.qs[i], kr, rs.lanes));
            });
      });
  launchTokens(b, op.getLoc(), fn, op.getQ(), op.getScores(), hkv, perBlock,
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
  int64_t groups = std::max<int64_t>(1, 256 / L);
  int64_t threads = groups * L;
  int64_t align = vectorAlign(E * 4);
  // A lane group scores kPagesPerGroup pages, `groups` apart (a block's
  // groups read neighbouring pages each round), with the query slices
  // loaded once. Each round loads the next page's box and first word rows
  // before its arithmetic, so a warp keeps a page's loads in flight while
  // it computes. A page's terms (box, slack) are computed once, then each
  // word row's tokens `chunk` at a time, their dot products summed over the
  // group by one transposed butterfly.
  constexpr int64_t kPagesPerGroup = 4;
  int64_t perWord = ::condensate::abi::codesPerWord(bits);
  int64_t used = std::min(perWord, p);
  int64_t rows = ::condensate::abi::sketchRows(p, bits);
  // Word rows loaded ahead: at most 4 (16 registers at head_dim 128).
  int64_t aheadRows = std::min<int64_t>(rows, std::max<int64_t>(1, 16 / E));
  // Tokens a butterfly sums at once: a power of two (used is one), with
  // their dequantised keys (chunk x E floats) at most 32 registers.
  int64_t chunk = 1;
  while (2 * chunk <= used && 2 * chunk * E <= 32)
    chunk *= 2;
  int64_t outs = std::max<int64_t>(1, chunk / L);
  int64_t spread = chunk >= L ? 1 : L / chunk;
  double scaleValue = op.getScale().convertToDouble();
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        const TargetInfo &target = nvvmTarget();
        LanePlace at = e.lanePlace(rs);
        Value li = at.lane, col = at.col;
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value blockFirst =
            e.mul(e.bid(gpu::Dimension::x), e.idx(kPagesPerGroup * groups));
        Value jFirst = e.add(blockFirst, at.group);
        Value nt = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value ntPages = e.ceilDiv(nt, e.idx(p));
        Value nPages = e.ceilDiv(n, e.idx(p));
        Value scale = e.f32(scaleValue);
        ifInsideContext(
            e, e.lt(blockFirst, nPages), scores, bb, g, G,
            e.mul(blockFirst, e.idx(p)), kPagesPerGroup * groups * p, threads,
            [&](GPUEmitter &e) {
              SmallVector<Value> qs =
                  groupQueries(e, q, bb, g, G, col, E, align);
              // No branch around the group shuffles: a page past the context is
              // computed on page slot 0 and stores -inf (or nothing past nt).
              auto pageOf = [&](GPUEmitter &e, Value j) {
                Value inside = e.lt(j, nPages);
                return e.select(
                    inside,
                    e.loadIndex(pt, {bb, e.select(inside, j, e.idx(0))}),
                    e.idx(0));
              };
              auto row = [&](Emitter &e, Value page, Value r) {
                return static_cast<GPUEmitter &>(e).vecLoad(
                    sum, {page, g, r, col}, E, align);
              };
              // Box rows, then the first aheadRows word rows.
              auto loadPage = [&](GPUEmitter &e, Value j) {
                Value page = pageOf(e, j);
                SmallVector<Value> v{row(e, page, e.idx(KMin)),
                                     row(e, page, e.idx(KMax))};
                for (int64_t r = 0; r < aheadRows; ++r)
                  v.push_back(
                      row(e, page, e.idx(::condensate::abi::kSketchRow0 + r)));
                return v;
              };
              auto scorePage = [&](GPUEmitter &e, Value j, ValueRange loaded) {
                Value inRange = e.lt(j, ntPages);
                Value full = e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
                Value first = e.mul(j, e.idx(p));
                Value lo = loaded[0], hi = loaded[1];
                SketchRow sk = sketchRow(e, lo, hi, bits);
                // Per query head: what a token of a full page adds to its
                // estimate (the slack), and the box bound that a page not yet
                // full gives all its tokens.
                SmallVector<Value> slack, box;
                for (int64_t i = 0; i < G; ++i) {
                  slack.push_back(sketchSlack(e, target, qs[i], sk, d, L));
                  box.push_back(rowBoxDot(e, target, qs[i], lo, hi, L));
                }
                Value storer = spread == 1
                                   ? e.i1(true)
                                   : e.eq(e.rems(li, e.idx(spread)), e.idx(0));
                auto wordRow = [&](Emitter &e, Value r, Value words) {
                  for (int64_t c0 = 0; c0 < used; c0 += chunk) {
                    SmallVector<SmallVector<Value>> keys;
                    for (int64_t s = 0; s < chunk; ++s)
                      keys.push_back(sketchKeys(e, sk, {words},
                                                e.i32((c0 + s) * bits), bits));
                    for (int64_t i = 0; i < G; ++i) {
                      SmallVector<Value> part;
                      for (int64_t s = 0; s < chunk; ++s)
                        part.push_back(rowDot(e, target, qs[i], keys[s], 1));
                      SmallVector<Value> sums =
                          laneSumTransposed(e, target, part, L, li);
                      for (int64_t k = 0; k < outs; ++k) {
                        Value slot = spread == 1 ? e.add(e.mul(li, e.idx(outs)),
                                                         e.idx(k))
                                                 : e.divs(li, e.idx(spread));
                        Value off = e.add(e.mul(r, e.idx(perWord)),
                                          e.add(e.idx(c0), slot));
                        Value t = e.add(first, off);
                        Value v =
                            e.select(full, e.fadd(sums[k], slack[i]), box[i]);
                        v = e.select(e.lt(t, n), e.fmul(v, scale), e.negInf());
                        Value store =
                            e.band(e.band(inRange, storer),
                                   e.band(e.lt(off, e.idx(p)), e.lt(t, nt)));
                        e.ifThen(store, [&](Emitter &e) {
                          e.store(v, scores,
                                  {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), t});
                        });
                      }
                    }
                  }
                };
                for (int64_t r = 0; r < aheadRows; ++r)
                  wordRow(e, e.idx(r), loaded[2 + r]);
                if (rows > aheadRows) {
                  Value page = pageOf(e, j);
                  e.forLoop(
                      e.idx(aheadRows), e.idx(rows), e.idx(1), {},
                      [&](Emitter &e, Value r,
                          ValueRange) -> SmallVector<Value> {
                        wordRow(e, r,
                                row(e, page,
                                    e.add(e.idx(::condensate::abi::kSketchRow0),
                                          r)));
                        return {};
                      });
                }
              };
              e.forLoop(e.idx(0), e.idx(kPagesPerGroup), e.idx(1),
                        loadPage(e, jFirst),
                        [&](Emitter &ee, Value it,
                            ValueRange loaded) -> SmallVector<Value> {
                          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                          Value j = e.add(jFirst, e.mul(it, e.idx(groups)));
                          // The last round reloads its own page (a cache hit)
                          // rather than the next block's.
                          Value more =
                              e.lt(e.add(it, e.idx(1)), e.idx(kPagesPerGroup));
                          SmallVector<Value> next = loadPage(
                              e, e.select(more, e.add(j, e.idx(groups)), j));
                          scorePage(e, j, loaded);
                          return next;
                        });
            });
      });
  // Where the group's query slices are few, two resident blocks at least
  // (128 registers a thread) without spilling; larger groups keep what
  // ptxas takes.
  if (G * E <= 32)
    KernelBuilder::launchBounds(fn, threads, 2);
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value nt = memref::DimOp::create(b, loc, op.getScores(), 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, nt,
      arith::ConstantIndexOp::create(b, loc, p * groups * kPagesPerGroup));
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
