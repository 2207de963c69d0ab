//===- Score.cpp - page and token scoring as loops ------------------------===//
//
// Lowers score_pages (a bound per page from its key summaries) and
// score_tokens (exact logits) to scf loops over (sequence, head, unit), and
// score_sketch (per-token bounds from the key sketches) to loops over
// (sequence, kv head, page, token), the group's heads innermost.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "../Common/Sketch.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;
namespace abi = ::condensate::abi;

namespace {

void lowerScorePages(ScorePagesOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1);
  int64_t group = hq / hkv, p = op.getPageSize();
  bool minmax = op.getSelector() == Selector::block_minmax;
  RowOps row{e, d};
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0), mp = e.dim(op.getScores(), 2);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value pages = e.ceilDiv(n, e.idx(p));
    RowOps row{e, d};
    share.forEachHead(e, hkv, group, [&](Emitter &e, Value h) {
      RowOps row{e, d};
      Value g = e.divs(h, e.idx(group));
      SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
      // Slots past the context are left unwritten (the op's contract).
      e.forEach(e.idx(0), e.mins(mp, pages), [&](Emitter &e, Value j) {
        RowOps row{e, d};
        Value page = e.loadIndex(op.getPageTable(), {b, j});
        Value s;
        if (minmax) {
          auto mn = row.loadRow(op.getSummaries(), {page, g, e.idx(KMin)});
          auto mx = row.loadRow(op.getSummaries(), {page, g, e.idx(KMax)});
          s = rowBoxDot(e, row.target(), q, mn, mx, /*lanes=*/1);
        } else {
          Value dotSum = row.dot(q, op.getSummaries(), {page, g, e.idx(KSum)});
          Value cnt = e.mins(e.sub(n, e.mul(j, e.idx(p))), e.idx(p));
          s = e.fdiv(dotSum, e.indexToF32(cnt));
        }
        e.store(e.fmul(s, scale), op.getScores(), {b, h, j});
      });
    });
    (void)row;
  });
  (void)row;
}

void lowerScoreTokens(ScoreTokensOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t group = hq / hkv;
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0), nt = e.dim(op.getScores(), 2);
  if (op.scoresPerGroup()) {
    // One row per kv head: the max over its query heads of their scores.
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      share.forEach(e, hkv, [&](Emitter &e, Value g) {
        RowOps row{e, d};
        SmallVector<SmallVector<Value>> qs;
        for (int64_t i = 0; i < group; ++i)
          qs.push_back(row.loadRow(
              op.getQ(), {b, e.add(e.mul(g, e.idx(group)), e.idx(i))}));
        e.forEach(e.idx(0), e.mins(nt, n), [&](Emitter &e, Value t) {
          RowOps row{e, d};
          Value page = e.loadIndex(op.getPageTable(), {b, e.divs(t, e.idx(p))});
          Value off = e.rems(t, e.idx(p));
          SmallVector<Value> all;
          for (int64_t i = 0; i < group; ++i)
            all.push_back(
                e.fmul(row.dot(qs[i], op.getKCache(), {page, g, off}), scale));
          e.store(groupMax(e, all), op.getScores(), {b, g, t});
        });
      });
    });
    return;
  }
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    share.forEachHead(e, hkv, group, [&](Emitter &e, Value h) {
      RowOps row{e, d};
      Value g = e.divs(h, e.idx(group));
      SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
      // Slots past the context are left unwritten (the op's contract).
      e.forEach(e.idx(0), e.mins(nt, n), [&](Emitter &e, Value t) {
        RowOps row{e, d};
        Value page = e.loadIndex(op.getPageTable(), {b, e.divs(t, e.idx(p))});
        Value off = e.rems(t, e.idx(p));
        e.store(e.fmul(row.dot(q, op.getKCache(), {page, g, off}), scale),
                op.getScores(), {b, h, t});
      });
    });
  });
}

/// Whether a full page's tokens are scored kLanes at a time, a lane a
/// token (the codes of kLanes consecutive tokens share a word: bits of 4
/// or fewer, pages of whole vectors).
bool tokensInLanes(int64_t pageSize, int64_t bits) {
  return abi::codesPerWord(bits) % kLanes == 0 && pageSize % kLanes == 0;
}

/// Token vectors (kLanes tokens each) a channel sweep of scoreFullPage
/// takes at once: about 8 accumulators in all, a divisor of the page's.
int64_t tokenVectorsPerSweep(int64_t pageSize, int64_t group) {
  int64_t vectors = pageSize / kLanes, t = 4;
  while (t > 1 && (t * group > 8 || vectors % t != 0))
    t /= 2;
  return t;
}

/// A full page's scores in the lanes-over-tokens form (Sketch.h): per head
/// a_c = q_c * step_c (into `coef`, a [group, d] f32 scratch) and the
/// constant sum_c q_c lo_c + slack once, then a sweep over the channels
/// per vector of tokens, each a word broadcast, shifted to its lanes'
/// codes and converted (exact), and one fma a head. No horizontal sum a
/// token; `store` takes each head's vector of kLanes tokens' scores.
void scoreFullPage(
    Emitter &e, RowOps &row, const SketchRow &sk,
    ArrayRef<SmallVector<Value>> qs, ArrayRef<Value> slack, Value sum,
    Value coef, Value page, Value g, int64_t p, int64_t bits, Value scale,
    const std::function<void(Emitter &, ArrayRef<Value>, Value)> &store) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t group = qs.size(), d = row.d;
  int64_t perWord = abi::codesPerWord(bits);
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  VectorType fvec = VectorType::get({kLanes}, f32),
             ivec = VectorType::get({kLanes}, i32);
  SmallVector<Value> offsets;
  for (int64_t i = 0; i < group; ++i) {
    Value acc;
    for (int64_t c = 0; c < row.chunks(); ++c) {
      vector::StoreOp::create(b, loc, e.fmul(qs[i][c], sk.step[c]), coef,
                              ValueRange{e.idx(i), e.idx(c * kLanes)});
      Value t = e.fmul(qs[i][c], sk.lo[c]);
      acc = c == 0 ? t : e.fadd(acc, t);
    }
    offsets.push_back(e.splat(e.fadd(e.reduceAdd(acc), slack[i]), kLanes));
  }
  // Lane l's bit offset within its word, before the vector's own.
  SmallVector<Attribute> laneShift;
  for (int64_t l = 0; l < kLanes; ++l)
    laneShift.push_back(b.getI32IntegerAttr(l * bits));
  Value laneShifts = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(ivec, laneShift));
  Value mask = e.splat(e.i32((int64_t(1) << bits) - 1), kLanes);
  Value scaleV = e.splat(scale, kLanes);
  int64_t T = tokenVectorsPerSweep(p, group);
  e.forEach(e.idx(0), e.idx(p / (kLanes * T)), [&](Emitter &e, Value sweep) {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    // The T vectors' word rows and lane shifts.
    SmallVector<Value> rows, shifts, first;
    for (int64_t t = 0; t < T; ++t) {
      Value o = e.mul(e.add(e.mul(sweep, e.idx(T)), e.idx(t)), e.idx(kLanes));
      first.push_back(o);
      rows.push_back(e.add(e.idx(abi::kSketchRow0), e.divs(o, e.idx(perWord))));
      Value s = e.toI32(e.mul(e.rems(o, e.idx(perWord)), e.idx(bits)));
      shifts.push_back(
          arith::AddIOp::create(b, loc, e.splat(s, kLanes), laneShifts));
    }
    SmallVector<Value> init(group * T, e.splat(e.f32(0.0), kLanes));
    SmallVector<Value> acc = e.forLoop(
        e.idx(0), e.idx(d), e.idx(kLanes), init,
        [&](Emitter &e, Value c0, ValueRange in) -> SmallVector<Value> {
          OpBuilder &b = e.builder();
          Location loc = e.location();
          SmallVector<Value> acc(in.begin(), in.end());
          for (int64_t cc = 0; cc < kLanes; ++cc) {
            Value c = e.add(c0, e.idx(cc));
            SmallVector<Value> codes;
            for (int64_t t = 0; t < T; ++t) {
              Value w = arith::BitcastOp::create(
                  b, loc, i32, e.load(sum, {page, g, rows[t], c}));
              Value v = e.band(
                  arith::ShRUIOp::create(b, loc, e.splat(w, kLanes), shifts[t]),
                  mask);
              // Codes below 2^bits: the conversion is exact.
              codes.push_back(arith::SIToFPOp::create(b, loc, fvec, v));
            }
            for (int64_t i = 0; i < group; ++i) {
              Value a = e.splat(e.load(coef, {e.idx(i), c}), kLanes);
              for (int64_t t = 0; t < T; ++t)
                acc[i * T + t] = e.fma(codes[t], a, acc[i * T + t]);
            }
          }
          return acc;
        });
    for (int64_t t = 0; t < T; ++t) {
      SmallVector<Value> vals;
      for (int64_t i = 0; i < group; ++i)
        vals.push_back(e.fmul(e.fadd(acc[i * T + t], offsets[i]), scaleV));
      store(e, vals, first[t]);
    }
  });
}

/// Per kv head and page: the box terms once, then each token's sketch
/// bound (a full page: kLanes tokens at a time where tokensInLanes holds,
/// else a token at a time from its dequantised keys, its codes decoded
/// once for the group's query heads) or the page box bound (a page still
/// filling).
void lowerScoreSketch(ScoreSketchOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1);
  int64_t group = hq / hkv, p = op.getPageSize(), bits = op.getBits();
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0), mp = e.dim(op.getPageTable(), 1);
  Value sum = op.getSummaries(), scores = op.getScores();
  bool perGroup = op.scoresPerGroup();
  bool lanes = tokensInLanes(p, bits);
  // The group's a_c rows (scoreFullPage), on the stack, outside the loops.
  Value coef;
  if (lanes)
    coef = memref::AllocaOp::create(
        rewriter, op.getLoc(),
        MemRefType::get({group, d}, rewriter.getF32Type()));
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value pages = e.ceilDiv(n, e.idx(p));
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      RowOps row{e, d};
      SmallVector<Value> heads;
      SmallVector<SmallVector<Value>> qs;
      for (int64_t i = 0; i < group; ++i) {
        heads.push_back(e.add(e.mul(g, e.idx(group)), e.idx(i)));
        qs.push_back(row.loadRow(op.getQ(), {b, heads.back()}));
      }
      // Token t's scores of the group's heads: each in its head's row, or
      // their max in the kv head's row.
      auto store = [&](Emitter &e, ArrayRef<Value> vals, Value t) {
        if (perGroup) {
          e.store(groupMax(e, vals), scores, {b, g, t});
          return;
        }
        for (int64_t i = 0; i < group; ++i)
          e.store(vals[i], scores, {b, heads[i], t});
      };
      // The same for kLanes tokens from t.
      auto storeVec = [&](Emitter &e, ArrayRef<Value> vals, Value t) {
        OpBuilder &bb = e.builder();
        if (perGroup) {
          vector::StoreOp::create(bb, e.location(), groupMax(e, vals), scores,
                                  ValueRange{b, g, t});
          return;
        }
        for (int64_t i = 0; i < group; ++i)
          vector::StoreOp::create(bb, e.location(), vals[i], scores,
                                  ValueRange{b, heads[i], t});
      };
      // Page slots past the context are left unwritten (the op's contract).
      e.forEach(e.idx(0), e.mins(mp, pages), [&](Emitter &e, Value j) {
        Value t0 = e.mul(j, e.idx(p));
        RowOps row{e, d};
        Value page = e.loadIndex(op.getPageTable(), {b, j});
        // The next page's summaries, in cache by the time its walk starts
        // (pages are where the pool put them, not where a stream goes).
        Value next =
            e.mins(e.add(j, e.idx(1)), e.sub(e.mins(mp, pages), e.idx(1)));
        Value nextPage = e.loadIndex(op.getPageTable(), {b, next});
        row.prefetchRow(sum, {nextPage, g, e.idx(KMin)});
        row.prefetchRow(sum, {nextPage, g, e.idx(KMax)});
        for (int64_t r = 0; r < abi::sketchRows(p, bits); ++r)
          row.prefetchRow(sum, {nextPage, g, e.idx(abi::kSketchRow0 + r)});
        auto lo = row.loadRow(sum, {page, g, e.idx(KMin)});
        auto hi = row.loadRow(sum, {page, g, e.idx(KMax)});
        Value full = e.le(e.add(t0, e.idx(p)), n);
        e.ifElse(
            full, {},
            [&](Emitter &e) -> SmallVector<Value> {
              RowOps row{e, d};
              SketchRow sk = sketchRow(e, lo, hi, bits, d);
              SmallVector<Value> slack;
              for (int64_t i = 0; i < group; ++i)
                slack.push_back(sketchSlack(e, row.target(), qs[i], sk, 1));
              if (Value widths = op.getWidths())
                for (int64_t i = 0; i < group; ++i)
                  e.store(e.fmul(e.fadd(slack[i], slack[i]), scale), widths,
                          {b, heads[i], j});
              if (lanes) {
                scoreFullPage(e, row, sk, qs, slack, sum, coef, page, g, p,
                              bits, scale,
                              [&](Emitter &e, ArrayRef<Value> vals, Value o) {
                                storeVec(e, vals, e.add(t0, o));
                              });
                return {};
              }
              e.forEach(e.idx(0), e.idx(p), [&](Emitter &e, Value o) {
                RowOps row{e, d};
                auto [wordRow, shift] = sketchSlot(e, o, bits);
                auto words = row.loadRow(sum, {page, g, wordRow});
                auto keys = sketchKeys(e, sk, words, shift, bits);
                SmallVector<Value> vals;
                for (int64_t i = 0; i < group; ++i) {
                  Value est = rowDot(e, row.target(), qs[i], keys, 1);
                  vals.push_back(e.fmul(e.fadd(est, slack[i]), scale));
                }
                store(e, vals, e.add(t0, o));
              });
              return {};
            },
            [&](Emitter &e) -> SmallVector<Value> {
              // Still filling: the box bounds every token; past n
              // there are none.
              RowOps row{e, d};
              SmallVector<Value> box;
              for (int64_t i = 0; i < group; ++i)
                box.push_back(e.fmul(
                    rowBoxDot(e, row.target(), qs[i], lo, hi, 1), scale));
              // No lower bound from the box here.
              if (Value widths = op.getWidths())
                for (int64_t i = 0; i < group; ++i)
                  e.store(e.f32(std::numeric_limits<double>::infinity()),
                          widths, {b, heads[i], j});
              e.forEach(e.idx(0), e.idx(p), [&](Emitter &e, Value o) {
                Value t = e.add(t0, o);
                SmallVector<Value> vals;
                for (Value v : box)
                  vals.push_back(e.select(e.lt(t, n), v, e.negInf()));
                store(e, vals, t);
              });
              return {};
            });
      });
    });
  });
}

} // namespace

void mlir::condensate::populateScoreToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<ScorePagesOp, lowerScorePages>>(
      patterns.getContext());
  patterns.add<LoopPattern<ScoreTokensOp, lowerScoreTokens>>(
      patterns.getContext());
  patterns.add<LoopPattern<ScoreSketchOp, lowerScoreSketch>>(
      patterns.getContext());
}
