//===- Select.cpp - top-k selection as loops ------------------------------===//
//
// Lowers select_topk to scf loops: ranking keys per unit, the candidates
// ordered by a stable radix sort, the base set in unit order, then the
// ranked extras; without extras, the base set from a radix select of its
// threshold key instead of the sort.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

/// Orders the candidates of one (sequence, key/value head) by (key desc,
/// unit asc) with a stable LSD radix sort of their 32-bit ranking keys (four
/// byte passes, descending digits, from `from` into `to` and back): O(units)
/// however many slots are ranked. `from` holds the candidates in unit order
/// on entry and the order on exit.
void sortCandidates(Emitter &e, Value keys, Value from, Value to, Value count,
                    Value numValid) {
  Value n = e.toIndex(numValid);
  Value mask = e.i32(255);
  auto digit = [&](Emitter &e, Value u, int64_t pass) {
    Value key = e.load(keys, {e.toIndex(u)});
    Value byte = e.band(arith::ShRUIOp::create(e.builder(), e.location(), key,
                                               e.i32(8 * pass)),
                        mask);
    return e.toIndex(e.sub(mask, byte)); // descending
  };
  for (int64_t pass = 0; pass < 4; ++pass) {
    Value src = pass % 2 == 0 ? from : to, dst = pass % 2 == 0 ? to : from;
    e.forEach(e.idx(0), e.idx(256),
              [&](Emitter &e, Value d) { e.store(e.i32(0), count, {d}); });
    e.forEach(e.idx(0), n, [&](Emitter &e, Value i) {
      Value d = digit(e, e.load(src, {i}), pass);
      e.store(e.add(e.load(count, {d}), e.i32(1)), count, {d});
    });
    // Exclusive prefix sums: where each digit's run starts.
    e.forLoop(e.idx(0), e.idx(256), e.idx(1), {e.i32(0)},
              [&](Emitter &e, Value d, ValueRange run) -> SmallVector<Value> {
                Value c = e.load(count, {d});
                e.store(run[0], count, {d});
                return {e.add(run[0], c)};
              });
    e.forEach(e.idx(0), n, [&](Emitter &e, Value i) {
      Value u = e.load(src, {i});
      Value d = digit(e, u, pass);
      Value at = e.load(count, {d});
      e.store(u, dst, {e.toIndex(at)});
      e.store(e.add(at, e.i32(1)), count, {d});
    });
  }
}

/// The ranking key that the first `m` of the order (key desc, unit asc)
/// end on, and how many candidates with that key they hold (the first in
/// unit order), for m in [1, numValid]: an MSD radix select, a byte a pass
/// from the top. `count` holds the candidates' top-byte counts on entry;
/// each pass keeps the candidates whose bytes so far are the threshold's
/// (`from` in unit order, then compacted into `to`) and counts their next
/// byte. About two walks of the candidates and a few of what shares the
/// threshold's top byte, against the sort's eight.
std::pair<Value, Value> selectThreshold(Emitter &e, Value keys, Value from,
                                        Value to, Value count, Value numValid,
                                        Value m) {
  Value mask = e.i32(255);
  auto byteOf = [&](Emitter &e, Value key, int64_t pass) {
    return e.band(
        arith::ShRUIOp::create(e.builder(), e.location(), key, e.i32(8 * pass)),
        mask);
  };
  // The digit holding the need-th largest key of those counted, digits
  // from 255 down, and what is still needed within it.
  auto findDigit = [&](Emitter &e, Value need) -> std::pair<Value, Value> {
    auto r =
        e.forLoop(e.idx(0), e.idx(256), e.idx(1), {e.i1(false), e.i32(0), need},
                  [&](Emitter &e, Value i, ValueRange s) -> SmallVector<Value> {
                    Value d = e.sub(e.idx(255), i);
                    Value c = e.load(count, {d});
                    Value open = e.bnot(s[0]);
                    Value hit =
                        e.band(open, e.cmp(arith::CmpIPredicate::sge, c, s[2]));
                    Value pass = e.band(open, e.bnot(hit));
                    return {e.bor(s[0], hit), e.select(hit, e.toI32(d), s[1]),
                            e.select(pass, e.sub(s[2], c), s[2])};
                  });
    return {r[1], r[2]};
  };
  auto [top, need] = findDigit(e, m);
  Value threshold =
      arith::ShLIOp::create(e.builder(), e.location(), top, e.i32(24));
  Value src = from, n = e.toIndex(numValid), digit = top;
  for (int64_t pass = 2; pass >= 0; --pass) {
    e.forEach(e.idx(0), e.idx(256),
              [&](Emitter &e, Value d) { e.store(e.i32(0), count, {d}); });
    n = e.forLoop(e.idx(0), n, e.idx(1), {e.idx(0)},
                  [&](Emitter &e, Value i, ValueRange k) -> SmallVector<Value> {
                    Value u = e.load(src, {i});
                    Value key = e.load(keys, {e.toIndex(u)});
                    Value in = e.eq(byteOf(e, key, pass + 1), digit);
                    e.ifThen(in, [&](Emitter &e) {
                      Value d = e.toIndex(byteOf(e, key, pass));
                      e.store(e.add(e.load(count, {d}), e.i32(1)), count, {d});
                      e.store(u, to, {k[0]});
                    });
                    return {e.select(in, e.add(k[0], e.idx(1)), k[0])};
                  })[0];
    src = to;
    std::tie(digit, need) = findDigit(e, need);
    threshold =
        e.bor(threshold, arith::ShLIOp::create(e.builder(), e.location(), digit,
                                               e.i32(8 * pass)));
  }
  return {threshold, need};
}

void lowerSelectTopK(SelectTopKOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
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
  auto alloc = [&](Value size) {
    return memref::AllocOp::create(
        rewriter, loc, MemRefType::get({ShapedType::kDynamic}, i32),
        ValueRange{size});
  };
  // Ordered keys of the current (b, g): 0 marks a non-candidate. The
  // candidates, then their order; the radix sort's digit counts.
  Value keys = alloc(nu), order = alloc(nu), spare = alloc(nu);
  Value count = alloc(e.idx(256));
  Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
  // No extras: only the base set's membership matters, not its order.
  bool onlyBase = slots == base && base > 0;
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                              op.getWindowMax());
    CandidateUnits units{unit, anchor, n, w};
    // Units past the context are no candidates: the loops stop at it, not
    // at the page table's width.
    Value live = e.mins(nu, e.ceilDiv(n, unit));
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      // Keys, and the candidates in unit order.
      Value zero32 = e.i32(0), one32 = e.i32(1);
      SmallVector<Value> offsets;
      if (rankRelative(op.getGranularity(), group))
        offsets = rankOffsets(e, units, op.getScores(), b, g, group);
      if (onlyBase)
        e.forEach(e.idx(0), e.idx(256),
                  [&](Emitter &e, Value d) { e.store(zero32, count, {d}); });
      Value numValid = e.forLoop(
          e.idx(0), live, e.idx(1), {zero32},
          [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
            auto [key, valid] =
                rankingKey(e, loopsTarget(), units, op.getScores(), b, g, u,
                           group, zero32, one32, offsets);
            e.store(key, keys, {u});
            e.ifThen(valid, [&](Emitter &e) {
              e.store(e.toI32(u), order, {e.toIndex(acc[0])});
              if (onlyBase) {
                Value d = e.toIndex(arith::ShRUIOp::create(
                    e.builder(), e.location(), key, e.i32(24)));
                e.store(e.add(e.load(count, {d}), one32), count, {d});
              }
            });
            return {e.add(acc[0], e.select(valid, one32, zero32))};
          })[0];
      if (onlyBase) {
        // The first `base` of the order, in unit order: every candidate
        // when there are no more, else those above the threshold key and
        // the first `ties` at it.
        Value m = e.mins(numValid, e.i32(base));
        Value all = e.le(numValid, e.i32(base));
        auto sel = e.ifElse(
            all, SmallVector<Type>{i32, i32},
            [&](Emitter &e) -> SmallVector<Value> {
              return {one32, numValid};
            },
            [&](Emitter &e) -> SmallVector<Value> {
              auto [t, ties] =
                  selectThreshold(e, keys, order, spare, count, numValid, m);
              return {t, ties};
            });
        Value written = e.forLoop(
            e.idx(0), live, e.idx(1), {e.idx(0), sel[1]},
            [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
              Value key = e.load(keys, {u});
              Value above = e.cmp(arith::CmpIPredicate::ugt, key, sel[0]);
              Value tie = e.band(e.eq(key, sel[0]), e.gt(acc[1], zero32));
              Value take = e.bor(above, tie);
              e.ifThen(take, [&](Emitter &e) {
                e.store(e.toI32(u), op.getIndices(), {b, g, acc[0]});
              });
              return {e.select(take, e.add(acc[0], e.idx(1)), acc[0]),
                      e.select(tie, e.sub(acc[1], one32), acc[1])};
            })[0];
        e.forEach(written, e.idx(base), [&](Emitter &e, Value j) {
          e.store(e.i32(-1), op.getIndices(), {b, g, j});
        });
        return;
      }
      sortCandidates(e, keys, order, spare, count, numValid);
      // The base set: the first `base` of the order, written in unit order.
      // The keys are done with: they become marks of the base set.
      Value valid = e.toIndex(numValid);
      if (base > 0) {
        Value taken = e.mins(valid, e.idx(base));
        e.forEach(e.idx(0), valid, [&](Emitter &e, Value i) {
          Value u = e.toIndex(e.load(order, {i}));
          e.store(e.select(e.lt(i, taken), one32, zero32), keys, {u});
        });
        Value written = e.forLoop(
            e.idx(0), live, e.idx(1), {e.idx(0)},
            [&](Emitter &e, Value u, ValueRange acc) -> SmallVector<Value> {
              Value take = e.ne(e.load(keys, {u}), zero32);
              e.ifThen(take, [&](Emitter &e) {
                e.store(e.toI32(u), op.getIndices(), {b, g, acc[0]});
              });
              return {e.select(take, e.add(acc[0], e.idx(1)), acc[0])};
            })[0];
        e.forEach(written, e.idx(base), [&](Emitter &e, Value j) {
          e.store(e.i32(-1), op.getIndices(), {b, g, j});
        });
      }
      // Extras: the units that follow the base set in the order, then -1
      // in every slot left (two plain loops: open extras leave most of
      // their slots empty, and a branch a slot cost more than the rest of
      // the selection).
      Value filled = e.maxs(e.mins(valid, e.idx(slots)), e.idx(base));
      e.forEach(e.idx(base), filled, [&](Emitter &e, Value j) {
        e.store(e.load(order, {j}), op.getIndices(), {b, g, j});
      });
      e.forEach(filled, e.idx(slots), [&](Emitter &e, Value j) {
        e.store(e.i32(-1), op.getIndices(), {b, g, j});
      });
    });
  });
  for (Value buffer : {keys, order, spare, count})
    memref::DeallocOp::create(rewriter, loc, buffer);
}

} // namespace

void mlir::condensate::populateSelectToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<SelectTopKOp, lowerSelectTopK>>(
      patterns.getContext());
}
