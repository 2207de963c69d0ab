//===- Select.cpp - top-k selection as loops ------------------------------===//
//
// Lowers select_topk to scf loops: ranking keys per unit, a radix search
// for the base-th largest, the base set in unit order, then ranked extras.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

void lowerSelectTopK(SelectTopKOp op, Emitter &e, PatternRewriter &rewriter) {
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
    CandidateUnits units{unit, anchor, n, w};
    e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
      // Keys and candidate count.
      Value zero32 = e.i32(0), one32 = e.i32(1);
      Value numValid = e.forLoop(
          e.idx(0), nu, e.idx(1), {zero32},
          [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
            auto [key, valid] =
                rankingKey(e, loopsTarget(), units, op.getScores(), b, g, u,
                           group, zero32, one32);
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
              Value bit =
                  arith::ShLIOp::create(e.builder(), e.location(), e.i32(1),
                                        e.toI32(e.sub(e.idx(31), i)));
              Value cand = e.bor(acc[0], bit);
              Value cnt = countAtLeast(e, cand, /*strict=*/false);
              Value enough = e.cmp(arith::CmpIPredicate::uge, cnt, e.i32(base));
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
      Value tiesWanted = e.select(few, e.i32(0), e.sub(e.i32(base), above));
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
                    Value after =
                        e.bor(e.cmp(arith::CmpIPredicate::ult, key, prev[0]),
                              e.band(e.eq(key, prev[0]), e.gt(u, prev[1])));
                    Value better =
                        e.band(e.band(after, e.ne(key, e.i32(0))),
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
}

} // namespace

void mlir::condensate::populateSelectToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<SelectTopKOp, lowerSelectTopK>>(
      patterns.getContext());
}
