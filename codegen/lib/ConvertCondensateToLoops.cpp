//===- ConvertCondensateToLoops.cpp - stages to scf loops -----------------===//
//
// Implements convert-condensate-to-loops: every condensate stage (and the KV
// append) becomes scf loops over memrefs with arith/math/vector arithmetic,
// which the standard lowering turns into LLVM for the CPU. Head-dimension
// rows are processed as vectors of kLanes floats.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/Passes.h"

#include "Emitter.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONVERTCONDENSATETOLOOPS
#include "condensate/Codegen/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

/// Lanes per vector chunk of a head-dimension row.
constexpr int64_t kLanes = 8;
/// Additive safety margin, relative to 1 + |u|, applied to a unit's logit
/// bound before it enters the certificate: it covers float32 rounding in
/// the bound and in the partials, so eps_hat stays an upper bound.
constexpr double kBoundMargin = 1.0 / 16384.0;
/// Factor applied to the output-error bound: float32 sums of head_dim
/// squares are off by at most head_dim * 2^-24 relative (2^-15 at 512).
constexpr double kOutputBoundRoundUp = 1.0 + 1.0 / 4096.0;

int64_t staticDim(Value v, int64_t i) {
  return cast<MemRefType>(v.getType()).getDimSize(i);
}

/// Row-vector helpers on top of Emitter for the CPU lowering.
struct RowOps {
  Emitter &e;
  int64_t d;

  VectorType vecType(Type elt) const { return VectorType::get({kLanes}, elt); }
  int64_t chunks() const { return d / kLanes; }

  /// Loads row `prefix` (all indices but the last) of `mem` as f32 chunks.
  SmallVector<Value> loadRow(Value mem, ValueRange prefix) {
    Type elt = cast<MemRefType>(mem.getType()).getElementType();
    SmallVector<Value> out;
    for (int64_t c = 0; c < chunks(); ++c) {
      SmallVector<Value> ivs(prefix.begin(), prefix.end());
      ivs.push_back(e.idx(c * kLanes));
      Value v = vector::LoadOp::create(e.builder(), e.location(),
                                       vecType(elt), mem, ivs);
      out.push_back(e.toF32(v));
    }
    return out;
  }
  void storeRow(ArrayRef<Value> chunksIn, Value mem, ValueRange prefix) {
    for (int64_t c = 0; c < chunks(); ++c) {
      SmallVector<Value> ivs(prefix.begin(), prefix.end());
      ivs.push_back(e.idx(c * kLanes));
      vector::StoreOp::create(e.builder(), e.location(), chunksIn[c], mem,
                              ivs);
    }
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(e.builder(), e.location(),
                                       vecType(scalar.getType()), scalar);
  }
  SmallVector<Value> zeros() {
    SmallVector<Value> out;
    for (int64_t c = 0; c < chunks(); ++c)
      out.push_back(splat(e.f32(0.0)));
    return out;
  }
  Value reduceAdd(Value vec) {
    return vector::ReductionOp::create(e.builder(), e.location(),
                                       vector::CombiningKind::ADD, vec,
                                       arith::FastMathFlags::reassoc);
  }
  /// q . row(mem, prefix) with q given as f32 chunks.
  Value dot(ArrayRef<Value> q, Value mem, ValueRange prefix) {
    SmallVector<Value> k = loadRow(mem, prefix);
    Value acc = e.fmul(q[0], k[0]);
    for (int64_t c = 1; c < chunks(); ++c)
      acc = e.fma(q[c], k[c], acc);
    return reduceAdd(acc);
  }
};

/// The effective window of sequence b: windows[b] clamped to
/// [window, window_max], or the static window.
Value effectiveWindow(Emitter &e, Value windows, Value b, int64_t window,
                      int64_t windowMax) {
  if (!windows)
    return e.idx(window);
  Value w = e.loadIndex(windows, {b});
  return e.mins(e.maxs(w, e.idx(window)), e.idx(windowMax));
}

/// Online-softmax state of one query head: running max, sum, count and the
/// unnormalised output row.
struct Softmax {
  static SmallVector<Value> init(Emitter &e, RowOps &row) {
    SmallVector<Value> s{e.negInf(), e.f32(0.0), e.f32(0.0)};
    s.append(row.zeros());
    return s;
  }
  /// Folds position (page, off) of key/value head g into `state`.
  static SmallVector<Value> update(Emitter &e, RowOps &row, ValueRange state,
                                   ArrayRef<Value> q, Value k, Value v,
                                   Value page, Value g, Value off,
                                   Value scale) {
    Value logit = e.fmul(row.dot(q, k, {page, g, off}), scale);
    Value m = state[0], l = state[1], c = state[2];
    Value mNew = e.fmax(m, logit);
    Value corr = e.exp(e.fsub(m, mNew));
    Value p = e.exp(e.fsub(logit, mNew));
    SmallVector<Value> out{mNew, e.fadd(e.fmul(l, corr), p),
                           e.fadd(c, e.f32(1.0))};
    SmallVector<Value> vrow = row.loadRow(v, {page, g, off});
    Value corrV = row.splat(corr), pV = row.splat(p);
    for (int64_t i = 0; i < row.chunks(); ++i)
      out.push_back(e.fma(vrow[i], pV, e.fmul(state[3 + i], corrV)));
    return out;
  }
  static void store(Emitter &e, RowOps &row, ValueRange state, Value po,
                    Value pml, Value b, Value h, Value s) {
    e.store(state[0], pml, {b, h, s, e.idx(0)});
    e.store(state[1], pml, {b, h, s, e.idx(1)});
    e.store(state[2], pml, {b, h, s, e.idx(2)});
    row.storeRow(SmallVector<Value>(state.drop_front(3)), po, {b, h, s});
  }
};

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct LowerScorePages : OpRewritePattern<ScorePagesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScorePagesOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
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
      e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
        RowOps row{e, d};
        Value g = e.divs(h, e.idx(group));
        SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
        e.forEach(e.idx(0), mp, [&](Emitter &e, Value j) {
          RowOps row{e, d};
          Value score =
              e.ifElse(e.lt(j, pages), {e.builder().getF32Type()},
                       [&](Emitter &e) -> SmallVector<Value> {
                         RowOps row{e, d};
                         Value page = e.loadIndex(op.getPageTable(), {b, j});
                         Value s;
                         if (minmax) {
                           auto mn = row.loadRow(op.getSummaries(),
                                                 {page, g, e.idx(KMin)});
                           auto mx = row.loadRow(op.getSummaries(),
                                                 {page, g, e.idx(KMax)});
                           Value acc;
                           for (int64_t c = 0; c < row.chunks(); ++c) {
                             Value t = e.fmax(e.fmul(q[c], mn[c]),
                                              e.fmul(q[c], mx[c]));
                             acc = c == 0 ? t : e.fadd(acc, t);
                           }
                           s = row.reduceAdd(acc);
                         } else {
                           Value dotSum = row.dot(q, op.getSummaries(),
                                                  {page, g, e.idx(KSum)});
                           Value cnt = e.mins(
                               e.sub(n, e.mul(j, e.idx(p))), e.idx(p));
                           s = e.fdiv(dotSum, e.indexToF32(cnt));
                         }
                         return {e.fmul(s, scale)};
                       },
                       [&](Emitter &e) -> SmallVector<Value> {
                         return {e.negInf()};
                       })[0];
          e.store(score, op.getScores(), {b, h, j});
        });
      });
      (void)row;
    });
    (void)row;
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerScoreTokens : OpRewritePattern<ScoreTokensOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoreTokensOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
    int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
    int64_t group = hq / hkv;
    Value scale = e.f32(op.getScale().convertToDouble());
    Value batch = e.dim(op.getQ(), 0), nt = e.dim(op.getScores(), 2);
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
        RowOps row{e, d};
        Value g = e.divs(h, e.idx(group));
        SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
        e.forEach(e.idx(0), nt, [&](Emitter &e, Value t) {
          Value score =
              e.ifElse(e.lt(t, n), {e.builder().getF32Type()},
                       [&](Emitter &e) -> SmallVector<Value> {
                         RowOps row{e, d};
                         Value page = e.loadIndex(op.getPageTable(),
                                                  {b, e.divs(t, e.idx(p))});
                         Value off = e.rems(t, e.idx(p));
                         return {e.fmul(
                             row.dot(q, op.getKCache(), {page, g, off}),
                             scale)};
                       },
                       [&](Emitter &e) -> SmallVector<Value> {
                         return {e.negInf()};
                       })[0];
          e.store(score, op.getScores(), {b, h, t});
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Positions of unit u that are neither anchor nor window nor past n.
Value unitCandidateCount(Emitter &e, Value u, Value unit, Value anchor,
                         Value n, Value w) {
  Value lo = e.maxs(e.mul(u, unit), anchor);
  Value hi = e.mins(e.mins(e.mul(e.add(u, e.idx(1)), unit), n), e.sub(n, w));
  return e.maxs(e.sub(hi, lo), e.idx(0));
}

struct LowerSelectTopK : OpRewritePattern<SelectTopKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SelectTopKOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    Location loc = op.getLoc();
    int64_t hq = staticDim(op.getScores(), 1);
    int64_t hkv = staticDim(op.getIndices(), 1);
    int64_t slots = staticDim(op.getIndices(), 2);
    int64_t base = op.getBase();
    int64_t group = hq / hkv;
    int64_t unitTokens =
        op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
    Type i32 = rewriter.getI32Type();
    Value batch = e.dim(op.getScores(), 0), nu = e.dim(op.getScores(), 2);
    // Ordered keys of the current (b, g): 0 marks a non-candidate.
    Value keys = memref::AllocOp::create(
        rewriter, loc, MemRefType::get({ShapedType::kDynamic}, i32),
        ValueRange{nu});
    Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                                op.getWindowMax());
      e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
        // Keys and candidate count.
        Value zero32 = e.i32(0), one32 = e.i32(1);
        Value numValid = e.forLoop(
            e.idx(0), nu, e.idx(1), {zero32},
            [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
              Value cnt = unitCandidateCount(e, u, unit, anchor, n, w);
              Value best = e.load(op.getScores(),
                                  {b, e.mul(g, e.idx(group)), u});
              for (int64_t i = 1; i < group; ++i)
                best = e.fmax(best, e.load(op.getScores(),
                                           {b, e.add(e.mul(g, e.idx(group)),
                                                     e.idx(i)),
                                            u}));
              Value valid = e.gt(cnt, e.idx(0));
              Value key = e.select(valid, e.orderedKey(best), zero32);
              // A candidate scoring -inf (no real bound) still ranks last.
              key = e.select(e.band(valid, e.eq(key, zero32)), one32, key);
              e.store(key, keys, {u});
              return {e.add(acc[0], e.select(valid, one32, zero32))};
            })[0];
        Value numValidIdx = e.toIndex(numValid);
        Value baseIdx = e.idx(base);
        auto countAtLeast = [&](Emitter &e, Value thr, bool strict) {
          return e.forLoop(
              e.idx(0), nu, e.idx(1), {e.i32(0)},
              [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
                Value key = e.load(keys, {u});
                Value hit = e.cmp(strict ? arith::CmpIPredicate::ugt
                                         : arith::CmpIPredicate::uge,
                                  key, thr);
                return {e.add(acc[0], e.select(hit, e.i32(1), e.i32(0)))};
              })[0];
        };
        // Threshold: the base-th largest key (radix search, MSB first).
        Value thr = e.i32(0);
        if (base > 0) {
          thr = e.forLoop(
              e.idx(0), e.idx(32), e.idx(1), {e.i32(0)},
              [&](Emitter &e, Value i, ValueRange acc) -> SmallVector<Value> {
                Value bit = arith::ShLIOp::create(
                    e.builder(), e.location(), e.i32(1),
                    e.toI32(e.sub(e.idx(31), i)));
                Value cand = e.bor(acc[0], bit);
                Value cnt = countAtLeast(e, cand, /*strict=*/false);
                Value enough = e.cmp(arith::CmpIPredicate::uge, cnt,
                                     e.i32(base));
                return {e.select(enough, cand, acc[0])};
              })[0];
        }
        // Few candidates: take them all (threshold 1 keeps every key > 0).
        // With base = 0 there is no base set: only the ranked extras.
        Value few = base == 0 ? e.i1(false) : e.le(numValidIdx, baseIdx);
        if (base == 0)
          thr = e.i32(-1); // above every key: nothing is taken
        thr = e.select(few, e.i32(1), thr);
        Value above = countAtLeast(e, thr, /*strict=*/true);
        Value tiesWanted =
            e.select(few, e.i32(0), e.sub(e.i32(base), above));
        // Base set in increasing unit order: keys above the threshold, then
        // ties at the threshold by increasing unit until base are taken.
        auto collected = e.forLoop(
            e.idx(0), nu, e.idx(1), {e.idx(0), e.i32(0), e.idx(-1)},
            [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
              Value key = e.load(keys, {u});
              Value isAbove = e.cmp(arith::CmpIPredicate::ugt, key, thr);
              Value isTie = e.band(e.eq(key, thr), e.ne(key, e.i32(0)));
              Value takeTie = e.band(isTie, e.lt(acc[1], tiesWanted));
              Value take = e.bor(isAbove, e.band(takeTie, e.bnot(few)));
              take = e.bor(take, e.band(few, e.ne(key, e.i32(0))));
              e.ifThen(take, [&](Emitter &e) {
                e.store(e.toI32(u), op.getIndices(), {b, g, acc[0]});
              });
              Value pos = e.select(take, e.add(acc[0], e.idx(1)), acc[0]);
              Value ties = e.select(takeTie, e.add(acc[1], e.i32(1)), acc[1]);
              Value last = e.select(takeTie, u, acc[2]);
              return {pos, ties, last};
            });
        Value written = collected[0];
        e.forEach(written, baseIdx, [&](Emitter &e, Value j) {
          e.store(e.i32(-1), op.getIndices(), {b, g, j});
        });
        // Extras: the next units in (key desc, unit asc) order.
        if (slots > base) {
          // The order continues after the last base unit; with no base set
          // it starts above every key.
          Value prevKey = e.select(few, e.i32(0), thr);
          Value prevIdx = e.select(few, nu, collected[2]);
          if (base == 0)
            prevIdx = e.idx(-1);
          // With ties exhausted at the threshold the order continues below.
          e.forLoop(
              e.idx(base), e.idx(slots), e.idx(1), {prevKey, prevIdx},
              [&](Emitter &e, Value j, ValueRange prev) -> SmallVector<Value> {
                auto best = e.forLoop(
                    e.idx(0), nu, e.idx(1), {e.i32(0), e.idx(-1)},
                    [&](Emitter &e, Value u,
                        ValueRange acc) -> SmallVector<Value> {
                      Value key = e.load(keys, {u});
                      Value after = e.bor(
                          e.cmp(arith::CmpIPredicate::ult, key, prev[0]),
                          e.band(e.eq(key, prev[0]), e.gt(u, prev[1])));
                      Value better = e.band(
                          e.band(after, e.ne(key, e.i32(0))),
                          e.cmp(arith::CmpIPredicate::ugt, key, acc[0]));
                      return {e.select(better, key, acc[0]),
                              e.select(better, u, acc[1])};
                    });
                Value found = e.ne(best[0], e.i32(0));
                e.store(e.select(found, e.toI32(best[1]), e.i32(-1)),
                        op.getIndices(), {b, g, j});
                return {e.select(found, best[0], e.i32(0)),
                        e.select(found, best[1], nu)};
              });
        }
      });
    });
    memref::DeallocOp::create(rewriter, loc, keys);
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerSparseAttend : OpRewritePattern<SparseAttendOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SparseAttendOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
    int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
    int64_t group = hq / hkv;
    bool tokens = op.getGranularity() == Granularity::token;
    int64_t unitTokens = tokens ? 1 : p;
    int64_t forced =
        op.getIncludeForced() ? op.getAnchor() + op.getWindowMax() : 0;
    int64_t length = op.getVirtualLength();
    int64_t splits = op.getNumSplits();
    int64_t perSplit = (length + splits - 1) / splits;
    Value scale = e.f32(op.getScale().convertToDouble());
    Value batch = e.dim(op.getQ(), 0);
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                                op.getWindowMax());
      CondensateSlots slotsInfo{e.idx(op.getAnchor()),
                                e.idx(op.getWindowMax()),
                                w,
                                e.idx(forced),
                                e.idx(unitTokens),
                                n};
      e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
        RowOps row{e, d};
        Value g = e.divs(h, e.idx(group));
        SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
        Value limit = op.getLimits() ? e.loadIndex(op.getLimits(), {b, g})
                                     : e.idx(op.getCount());
        e.forEach(e.idx(0), e.idx(splits), [&](Emitter &e, Value s) {
          RowOps row{e, d};
          Value v0 = e.mul(s, e.idx(perSplit));
          Value v1 = e.mins(e.add(v0, e.idx(perSplit)), e.idx(length));
          SmallVector<Value> init = Softmax::init(e, row);
          auto state = e.forLoop(
              v0, v1, e.idx(1), init,
              [&](Emitter &e, Value v, ValueRange st) -> SmallVector<Value> {
                RowOps row{e, d};
                Type idxT = e.builder().getIndexType();
                Type i1T = e.builder().getI1Type();
                auto tv = e.ifElse(
                    e.lt(v, e.idx(forced)), {idxT, i1T},
                    [&](Emitter &e) -> SmallVector<Value> {
                      auto [t, valid] = slotsInfo.forcedSlot(e, v);
                      return {t, valid};
                    },
                    [&](Emitter &e) -> SmallVector<Value> {
                      if (!op.getIndices())
                        return {e.idx(0), e.i1(false)};
                      Value rel = e.sub(v, e.idx(forced));
                      Value j = e.divs(rel, e.idx(unitTokens));
                      Value off = e.rems(rel, e.idx(unitTokens));
                      Value unitIdx = e.loadIndex(
                          op.getIndices(),
                          {b, g, e.add(j, e.idx(op.getFirst()))});
                      Value t = e.add(e.mul(unitIdx, e.idx(unitTokens)), off);
                      Value valid = e.band(
                          e.band(e.lt(j, limit), e.ge(unitIdx, e.idx(0))),
                          slotsInfo.unitPositionValid(e, t));
                      return {t, valid};
                    });
                return e.ifElse(
                    tv[1], ValueRange(st).getTypes(),
                    [&](Emitter &e) -> SmallVector<Value> {
                      RowOps row{e, d};
                      Value page = e.loadIndex(op.getPageTable(),
                                               {b, e.divs(tv[0], e.idx(p))});
                      Value off = e.rems(tv[0], e.idx(p));
                      return Softmax::update(e, row, st, q, op.getKCache(),
                                             op.getVCache(), page, g, off,
                                             scale);
                    },
                    [&](Emitter &) -> SmallVector<Value> {
                      return SmallVector<Value>(st);
                    });
              });
          Softmax::store(e, row, state, op.getPartialO(), op.getPartialMl(),
                         b, h, s);
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerDenseAttend : OpRewritePattern<DenseAttendOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DenseAttendOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
    int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
    int64_t group = hq / hkv;
    Value scale = e.f32(op.getScale().convertToDouble());
    Value batch = e.dim(op.getQ(), 0);
    Value splits = e.dim(op.getPartialMl(), 2);
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
        RowOps row{e, d};
        Value g = e.divs(h, e.idx(group));
        Value active = e.i1(true);
        if (op.getMask())
          active = e.ne(e.load(op.getMask(), {b, g}), e.i32(0));
        SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
        e.forEach(e.idx(0), splits, [&](Emitter &e, Value s) {
          RowOps row{e, d};
          // Short contexts use fewer splits of at least 256 tokens, as on
          // the GPU; the others stay empty.
          Value used = e.mins(splits, e.maxs(e.ceilDiv(n, e.idx(256)),
                                             e.idx(1)));
          Value chunk = e.ceilDiv(n, used);
          Value t0 = e.mins(e.mul(s, chunk), n);
          Value t1 = e.mins(e.add(t0, chunk), n);
          t1 = e.select(active, t1, t0);
          auto state = e.forLoop(
              t0, t1, e.idx(1), Softmax::init(e, row),
              [&](Emitter &e, Value t, ValueRange st) -> SmallVector<Value> {
                RowOps row{e, d};
                Value page = e.loadIndex(op.getPageTable(),
                                         {b, e.divs(t, e.idx(p))});
                Value off = e.rems(t, e.idx(p));
                return Softmax::update(e, row, st, q, op.getKCache(),
                                       op.getVCache(), page, g, off, scale);
              });
          Softmax::store(e, row, state, op.getPartialO(), op.getPartialMl(),
                         b, h, s);
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Merges the (m, l, c) of splits [0, S) of `pml` for (b, h): returns the
/// max logit M and the total Z = sum l_s exp(m_s - M) as f32.
std::pair<Value, Value> mergeML(Emitter &e, Value pml, Value b, Value h) {
  Value splits = e.dim(pml, 2);
  Value m = e.forLoop(e.idx(0), splits, e.idx(1), {e.negInf()},
                      [&](Emitter &e, Value s, ValueRange acc)
                          -> SmallVector<Value> {
                        return {e.fmax(acc[0],
                                       e.load(pml, {b, h, s, e.idx(0)}))};
                      })[0];
  Value z = e.forLoop(
      e.idx(0), splits, e.idx(1), {e.f32(0.0)},
      [&](Emitter &e, Value s, ValueRange acc) -> SmallVector<Value> {
        Value ms = e.load(pml, {b, h, s, e.idx(0)});
        Value ls = e.load(pml, {b, h, s, e.idx(1)});
        Value live = e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0));
        Value w = e.select(live, e.fmul(ls, e.exp(e.fsub(ms, m))), e.f32(0.0));
        return {e.fadd(acc[0], w)};
      })[0];
  return {m, z};
}

/// Writes vbox[b, g] of a certify op: the per-channel min and max over the
/// value summaries of every page of sequence b with an omitted position.
/// `marks` flags the units of the final set (pages or tokens). After a
/// fallback nothing is omitted: the box is empty.
void emitValueBox(Emitter &e, CertifyOp op, Value marks, Value b, Value g,
                  Value n, Value w, Value fallback) {
  int64_t p = op.getPageSize();
  int64_t d = staticDim(op.getVbox(), 3);
  bool tokens = op.getGranularity() == Granularity::token;
  RowOps row{e, d};
  Value page = e.idx(p), anchor = e.idx(op.getAnchor());
  Value zero8 = arith::ConstantIntOp::create(e.builder(), e.location(), 0, 8);
  SmallVector<Value> init;
  for (int64_t c = 0; c < row.chunks(); ++c)
    init.push_back(row.splat(e.f32(std::numeric_limits<double>::infinity())));
  for (int64_t c = 0; c < row.chunks(); ++c)
    init.push_back(row.splat(e.negInf()));
  Value pages = e.select(fallback, e.idx(0), e.ceilDiv(n, page));
  auto box = e.forLoop(
      e.idx(0), pages, e.idx(1), init,
      [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
        // Candidate positions of page j against those the final set holds.
        Value cand = unitCandidateCount(e, j, page, anchor, n, w);
        Value covered;
        if (tokens) {
          Value t0 = e.mul(j, page);
          covered = e.forLoop(
              t0, e.mins(e.add(t0, page), n), e.idx(1), {e.idx(0)},
              [&](Emitter &e, Value t, ValueRange cnt) -> SmallVector<Value> {
                Value marked = e.ne(e.load(marks, {t}), zero8);
                return {e.select(marked, e.add(cnt[0], e.idx(1)), cnt[0])};
              })[0];
        } else {
          covered = e.select(e.ne(e.load(marks, {j}), zero8), cand, e.idx(0));
        }
        return e.ifElse(
            e.gt(cand, covered), ValueRange(acc).getTypes(),
            [&](Emitter &e) -> SmallVector<Value> {
              RowOps row{e, d};
              Value phys = e.loadIndex(op.getPageTable(), {b, j});
              SmallVector<Value> lo = row.loadRow(
                  op.getSummaries(), {phys, g, e.idx(VMin)});
              SmallVector<Value> hi = row.loadRow(
                  op.getSummaries(), {phys, g, e.idx(VMax)});
              SmallVector<Value> out;
              for (int64_t c = 0; c < row.chunks(); ++c)
                out.push_back(e.fmin(acc[c], lo[c]));
              for (int64_t c = 0; c < row.chunks(); ++c)
                out.push_back(e.fmax(acc[row.chunks() + c], hi[c]));
              return out;
            },
            [&](Emitter &) -> SmallVector<Value> {
              return SmallVector<Value>(acc);
            });
      });
  ArrayRef<Value> all(box);
  row.storeRow(all.take_front(row.chunks()), op.getVbox(), {b, g, e.idx(0)});
  row.storeRow(all.drop_front(row.chunks()), op.getVbox(), {b, g, e.idx(1)});
}

struct LowerCertify : OpRewritePattern<CertifyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CertifyOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    Location loc = op.getLoc();
    int64_t hq = staticDim(op.getScores(), 1);
    int64_t hkv = staticDim(op.getIndices(), 1);
    int64_t slots = staticDim(op.getIndices(), 2);
    int64_t group = hq / hkv, base = op.getBaseUnits();
    int64_t extraMax = slots - base;
    double tau = op.getTau().convertToDouble();
    int64_t unitTokens =
        op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
    Type f64 = rewriter.getF64Type();
    Value batch = e.dim(op.getScores(), 0), nu = e.dim(op.getScores(), 2);
    Value marks = memref::AllocOp::create(
        rewriter, loc,
        MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type()),
        ValueRange{nu});
    Value zero8 = arith::ConstantIntOp::create(rewriter, loc, 0, 8);
    Value one8 = arith::ConstantIntOp::create(rewriter, loc, 1, 8);
    e.forEach(e.idx(0), nu, [&](Emitter &e, Value u) {
      e.store(zero8, marks, {u});
    });
    Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
    auto markUnits = [&](Emitter &e, Value b, Value g, Value from, Value to,
                         Value mark) {
      e.forEach(from, to, [&](Emitter &e, Value j) {
        Value u = e.loadIndex(op.getIndices(), {b, g, j});
        e.ifThen(e.ge(u, e.idx(0)),
                 [&](Emitter &e) { e.store(mark, marks, {u}); });
      });
    };
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value n = e.loadIndex(op.getLens(), {b});
      Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                                op.getWindowMax());
      e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
        SmallVector<Value> heads, ms, zs;
        for (int64_t i = 0; i < group; ++i) {
          Value h = e.add(e.mul(g, e.idx(group)), e.idx(i));
          auto [m, z] = mergeML(e, op.getPartialMl(), b, h);
          heads.push_back(h);
          ms.push_back(m);
          zs.push_back(e.extf(z, f64));
        }
        // The mass bound of unit u for head i, in f64.
        auto unitMass = [&](Emitter &e, Value u, int64_t i) {
          Value cnt = unitCandidateCount(e, u, unit, anchor, n, w);
          Value bound = e.load(op.getScores(), {b, heads[i], u});
          Value margin = e.fmul(
              e.fadd(e.f32(1.0), math::AbsFOp::create(e.builder(),
                                                      e.location(), bound)),
              e.f32(kBoundMargin));
          Value x = e.extf(e.fsub(e.fadd(bound, margin), ms[i]), f64);
          Value mass = e.fmul(e.indexToF32(cnt), e.f32(1.0));
          Value term = e.fmul(e.extf(mass, f64), e.exp(x));
          return e.select(e.gt(cnt, e.idx(0)), term, e.f64(0.0));
        };
        // U over every unmarked candidate unit.
        auto omitted = [&](Emitter &e) {
          SmallVector<Value> init(group, e.f64(0.0));
          return e.forLoop(
              e.idx(0), nu, e.idx(1), init,
              [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
                Value unmarked = e.eq(e.load(marks, {u}), zero8);
                return e.ifElse(
                    unmarked, ValueRange(acc).getTypes(),
                    [&](Emitter &e) -> SmallVector<Value> {
                      SmallVector<Value> out;
                      for (int64_t i = 0; i < group; ++i)
                        out.push_back(e.fadd(acc[i], unitMass(e, u, i)));
                      return out;
                    },
                    [&](Emitter &) -> SmallVector<Value> {
                      return SmallVector<Value>(acc);
                    });
              });
        };
        // U / (Z + U); a bound that overflowed (inf / inf, NaN) is 1, so it
        // never certifies.
        auto epsOf = [&](Emitter &e, Value uSum, Value z) {
          Value denom = e.fadd(z, uSum);
          Value pos = e.fcmp(arith::CmpFPredicate::OGT, denom, e.f64(0.0));
          Value eps = e.select(pos, e.fdiv(uSum, denom), e.f64(0.0));
          Value finite = e.fcmp(arith::CmpFPredicate::OLE, eps, e.f64(1.0));
          return e.select(finite, eps, e.f64(1.0));
        };
        auto worst = [&](Emitter &e, ValueRange us) {
          Value m = e.f64(0.0);
          for (int64_t i = 0; i < group; ++i)
            m = e.fmax(m, epsOf(e, us[i], zs[i]));
          return m;
        };
        markUnits(e, b, g, e.idx(0), e.idx(base), one8);
        SmallVector<Value> us = omitted(e);
        Value extra = e.idx(0), fallback = e.i1(false);
        if (tau > 0.0) {
          Value tauV = e.f64(tau);
          Value over = e.fcmp(arith::CmpFPredicate::OGT, worst(e, us), tauV);
          // Walk the extras in order, removing their mass, until the worst
          // head's bound is within tau.
          SmallVector<Value> init{e.bnot(over), e.idx(0)};
          init.append(us.begin(), us.end());
          auto walk = e.forLoop(
              e.idx(0), e.idx(extraMax), e.idx(1), init,
              [&](Emitter &e, Value j, ValueRange st) -> SmallVector<Value> {
                return e.ifElse(
                    st[0], ValueRange(st).getTypes(),
                    [&](Emitter &) -> SmallVector<Value> {
                      return SmallVector<Value>(st);
                    },
                    [&](Emitter &e) -> SmallVector<Value> {
                      Value u = e.loadIndex(op.getIndices(),
                                            {b, g, e.add(j, e.idx(base))});
                      Value have = e.ge(u, e.idx(0));
                      Value uSafe = e.select(have, u, e.idx(0));
                      SmallVector<Value> next;
                      for (int64_t i = 0; i < group; ++i) {
                        Value mass = e.select(have, unitMass(e, uSafe, i),
                                              e.f64(0.0));
                        next.push_back(
                            e.fmax(e.fsub(st[2 + i], mass), e.f64(0.0)));
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
          extra = e.select(done, walk[1], e.idx(0));
          // Sum the bound afresh for the final set and decide on it: the
          // walk subtracts, and subtracting a dominant (or infinite) term
          // cancels the rest.
          markUnits(e, b, g, e.idx(base), e.add(e.idx(base), extra), one8);
          us = omitted(e);
          Value fits =
              e.fcmp(arith::CmpFPredicate::OLE, worst(e, us), e.f64(tau));
          fallback = e.bnot(e.band(done, fits));
        }
        // The marks now hold the final set: box the values it leaves out.
        if (op.getVbox())
          emitValueBox(e, op, marks, b, g, n, w, fallback);
        if (tau > 0.0)
          markUnits(e, b, g, e.idx(base), e.add(e.idx(base), extra), zero8);
        markUnits(e, b, g, e.idx(0), e.idx(base), zero8);
        Value extraKept = e.select(fallback, e.idx(0), extra);
        e.store(e.toI32(extraKept), op.getExtra(), {b, g});
        e.store(e.select(fallback, e.i32(1), e.i32(0)), op.getFallback(),
                {b, g});
        Value extraF = e.indexToF32(extraKept);
        Value fbF = e.select(fallback, e.f32(1.0), e.f32(0.0));
        for (int64_t i = 0; i < group; ++i) {
          Value eps = e.truncf(epsOf(e, us[i], zs[i]), e.builder().getF32Type());
          // Round the f64 bound up when narrowing to f32.
          eps = e.fmul(eps, e.f32(1.0 + 1.0 / (1 << 20)));
          eps = e.select(fallback, e.f32(0.0), eps);
          e.store(eps, op.getStats(), {b, heads[i], e.idx(0)});
          e.store(extraF, op.getStats(), {b, heads[i], e.idx(2)});
          e.store(fbF, op.getStats(), {b, heads[i], e.idx(3)});
        }
      });
    });
    memref::DeallocOp::create(rewriter, loc, marks);
    rewriter.eraseOp(op);
    return success();
  }
};

/// eps_hat * sqrt(sum_c max(vmax_c - o_c, o_c - vmin_c, 0)^2) for the box
/// vbox[b, g], rounded up so float32 rounding of the sum cannot shrink it.
Value outputBound(Emitter &e, RowOps &row, ArrayRef<Value> o, Value vbox,
                  Value b, Value g, Value epsHat) {
  SmallVector<Value> lo = row.loadRow(vbox, {b, g, e.idx(0)});
  SmallVector<Value> hi = row.loadRow(vbox, {b, g, e.idx(1)});
  Value zero = row.splat(e.f32(0.0));
  Value acc = zero;
  for (int64_t c = 0; c < row.chunks(); ++c) {
    Value far = e.fmax(e.fmax(e.fsub(hi[c], o[c]), e.fsub(o[c], lo[c])), zero);
    acc = e.fma(far, far, acc);
  }
  Value dist = math::SqrtOp::create(e.builder(), e.location(),
                                    row.reduceAdd(acc));
  return e.fmul(e.fmul(epsHat, dist), e.f32(kOutputBoundRoundUp));
}

struct LowerMerge : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hq = staticDim(op.getOut(), 1), d = staticDim(op.getOut(), 2);
    int64_t group = 1;
    if (op.getFallback())
      group = hq / staticDim(op.getFallback(), 1);
    else if (op.getVbox())
      group = hq / staticDim(op.getVbox(), 1);
    Value batch = e.dim(op.getOut(), 0);
    // (o, ml, isDense) for every partial set.
    SmallVector<std::tuple<Value, Value, bool>> sets;
    for (size_t i = 0; i < op.getPartials().size(); i += 2)
      sets.push_back({op.getPartials()[i], op.getPartials()[i + 1], false});
    if (!op.getDense().empty())
      sets.push_back({op.getDense()[0], op.getDense()[1], true});
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
        RowOps row{e, d};
        Value useDense = e.i1(false);
        if (op.getFallback())
          useDense = e.ne(e.load(op.getFallback(),
                                 {b, e.divs(h, e.idx(group))}),
                          e.i32(0));
        auto active = [&](Emitter &e, bool dense) {
          return dense ? useDense : e.bnot(useDense);
        };
        // Pass 1: the overall max.
        Value m = e.negInf();
        for (auto &[po, pml, dense] : sets) {
          Value pmlV = pml;
          Value mSet =
              e.forLoop(e.idx(0), e.dim(pmlV, 2), e.idx(1), {e.negInf()},
                        [&](Emitter &e, Value s, ValueRange acc)
                            -> SmallVector<Value> {
                          Value ls = e.load(pmlV, {b, h, s, e.idx(1)});
                          Value ms = e.load(pmlV, {b, h, s, e.idx(0)});
                          Value live = e.fcmp(arith::CmpFPredicate::OGT, ls,
                                              e.f32(0.0));
                          return {e.select(live, e.fmax(acc[0], ms), acc[0])};
                        })[0];
          m = e.select(active(e, dense), e.fmax(m, mSet), m);
        }
        // Pass 2: weighted sums.
        SmallVector<Value> state{e.f32(0.0), e.f32(0.0)};
        state.append(row.zeros());
        for (auto &[po, pml, dense] : sets) {
          Value poV = po, pmlV = pml;
          Value on = active(e, dense);
          state = e.forLoop(
              e.idx(0), e.dim(pmlV, 2), e.idx(1), state,
              [&](Emitter &e, Value s, ValueRange st) -> SmallVector<Value> {
                RowOps row{e, d};
                Value ms = e.load(pmlV, {b, h, s, e.idx(0)});
                Value ls = e.load(pmlV, {b, h, s, e.idx(1)});
                Value cs = e.load(pmlV, {b, h, s, e.idx(2)});
                Value live = e.band(
                    on, e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0)));
                Value wgt = e.select(live, e.exp(e.fsub(ms, m)), e.f32(0.0));
                SmallVector<Value> out{
                    e.fadd(st[0], e.fmul(ls, wgt)),
                    e.fadd(st[1], e.select(on, cs, e.f32(0.0)))};
                SmallVector<Value> o = row.loadRow(poV, {b, h, s});
                Value wv = row.splat(wgt);
                for (int64_t c = 0; c < row.chunks(); ++c)
                  out.push_back(e.select(live, e.fma(o[c], wv, st[2 + c]),
                                         st[2 + c]));
                return out;
              });
        }
        Value total = state[0];
        Value pos = e.fcmp(arith::CmpFPredicate::OGT, total, e.f32(0.0));
        Value inv = e.select(pos, e.fdiv(e.f32(1.0), total), e.f32(0.0));
        SmallVector<Value> outRow;
        Value invV = row.splat(inv);
        for (int64_t c = 0; c < row.chunks(); ++c)
          outRow.push_back(e.fmul(state[2 + c], invV));
        row.storeRow(outRow, op.getOut(), {b, h});
        if (Value stats = op.getStats()) {
          e.store(state[1], stats, {b, h, e.idx(StatAttended)});
          if (auto eps = op.getStatsEpsAttr()) {
            Value epsV = e.f32(eps.getValueAsDouble());
            e.store(epsV, stats, {b, h, e.idx(StatEpsHat)});
            e.store(e.f32(0.0), stats, {b, h, e.idx(StatExtra)});
            e.store(e.f32(0.0), stats, {b, h, e.idx(StatFallback)});
            e.store(epsV, stats, {b, h, e.idx(StatOutputBound)});
          } else if (Value vbox = op.getVbox()) {
            Value bound = outputBound(e, row, outRow, vbox, b,
                                      e.divs(h, e.idx(group)),
                                      e.load(stats, {b, h, e.idx(StatEpsHat)}));
            e.store(e.select(useDense, e.f32(0.0), bound), stats,
                    {b, h, e.idx(StatOutputBound)});
          } else {
            e.store(e.nan(), stats, {b, h, e.idx(StatOutputBound)});
          }
        }
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerAppendKV : OpRewritePattern<AppendKVOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AppendKVOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
    int64_t d = staticDim(op.getKCache(), 3);
    Type kvElt = op.getKCache().getType().getElementType();
    Value batch = e.dim(op.getKNew(), 0);
    Value summaries = op.getSummaries();
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value pos = e.loadIndex(op.getPositions(), {b});
      Value page = e.loadIndex(op.getPageTable(), {b, e.divs(pos, e.idx(p))});
      Value off = e.rems(pos, e.idx(p));
      Value first = e.eq(off, e.idx(0));
      e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
        e.forEach(e.idx(0), e.idx(d), [&](Emitter &e, Value c) {
          Value k = e.truncf(e.load(op.getKNew(), {b, g, c}), kvElt);
          Value v = e.truncf(e.load(op.getVNew(), {b, g, c}), kvElt);
          e.store(k, op.getKCache(), {page, g, off, c});
          e.store(v, op.getVCache(), {page, g, off, c});
          if (!summaries)
            return;
          Value k32 = e.toF32(k), v32 = e.toF32(v);
          auto slot = [&](SummarySlot s) { return e.idx(s); };
          auto update = [&](SummarySlot s, Value x,
                            std::function<Value(Value, Value)> fold) {
            Value old = e.load(summaries, {page, g, slot(s), c});
            e.store(e.select(first, x, fold(old, x)), summaries,
                    {page, g, slot(s), c});
          };
          update(KMin, k32, [&](Value a, Value x) { return e.fmin(a, x); });
          update(KMax, k32, [&](Value a, Value x) { return e.fmax(a, x); });
          update(KSum, k32, [&](Value a, Value x) { return e.fadd(a, x); });
          update(VMin, v32, [&](Value a, Value x) { return e.fmin(a, x); });
          update(VMax, v32, [&](Value a, Value x) { return e.fmax(a, x); });
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct ConvertCondensateToLoopsPass
    : public mlir::condensate::impl::ConvertCondensateToLoopsBase<
          ConvertCondensateToLoopsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCondensateToLoopsPatterns(patterns);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](Operation *op) {
      if (isa<ScorePagesOp, ScoreTokensOp, SelectTopKOp, SparseAttendOp,
              DenseAttendOp, CertifyOp, MergeOp, AppendKVOp>(op)) {
        op->emitOpError() << "could not be lowered to loops";
        return WalkResult::interrupt();
      }
      if (isa<DecodeAttentionOp>(op)) {
        op->emitOpError() << "must be decomposed before lowering to loops "
                             "(run condensate-decompose)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::condensate::populateCondensateToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerScorePages, LowerScoreTokens, LowerSelectTopK,
               LowerSparseAttend, LowerDenseAttend, LowerCertify, LowerMerge,
               LowerAppendKV>(patterns.getContext());
}
