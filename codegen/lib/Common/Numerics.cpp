//===- Numerics.cpp - condensate numerics shared by both lowerings --------===//
//
// Implements the formulas of Numerics.h; both targets call these, so the
// CPU and GPU code compute the same function.
//
//===----------------------------------------------------------------------===//
#include "Numerics.h"

#include "Sketch.h"

#include "condensate/ABI/AttentionABI.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::condensate;

//===----------------------------------------------------------------------===//
// Windows and units
//===----------------------------------------------------------------------===//

Value mlir::condensate::effectiveWindow(Emitter &e, Value windows, Value b,
                                        int64_t window, int64_t windowMax) {
  if (!windows)
    return e.idx(window);
  Value w = e.loadIndex(windows, {b});
  return e.mins(e.maxs(w, e.idx(window)), e.idx(windowMax));
}

Value CandidateUnits::count(Emitter &e, Value u) const {
  Value lo = e.maxs(e.mul(u, unit), anchor);
  Value hi = e.mins(e.mins(e.mul(e.add(u, e.idx(1)), unit), n), e.sub(n, w));
  return e.maxs(e.sub(hi, lo), e.idx(0));
}

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

Value mlir::condensate::orderedKey(Emitter &e, Value f) {
  OpBuilder &b = e.builder();
  Value bits = arith::BitcastOp::create(b, e.location(), b.getI32Type(), f);
  Value neg = e.cmp(arith::CmpIPredicate::slt, bits, e.i32(0));
  Value flipAll = e.i32(-1);
  Value flipSign = e.i32(static_cast<int32_t>(0x80000000u));
  return e.bxor(bits, e.select(neg, flipAll, flipSign));
}

Value mlir::condensate::groupMax(Emitter &e, ArrayRef<Value> scores) {
  Value best = scores.front();
  for (Value s : scores.drop_front())
    best = e.fmax(best, s);
  return best;
}

bool mlir::condensate::rankRelative(Granularity granularity, int64_t group) {
  return granularity == Granularity::token && group > 1;
}

SmallVector<Value> mlir::condensate::forcedScoreMax(Emitter &e,
                                                    const CandidateUnits &units,
                                                    Value scores, Value b,
                                                    Value g, int64_t group,
                                                    Value first, Value step) {
  Value n = units.n, anchor = units.anchor;
  Value anchorEnd = e.mins(anchor, n);
  Value windowBegin = e.maxs(anchor, e.sub(n, units.w));
  // Forced positions: the anchor's, then the window's.
  Value count = e.add(anchorEnd, e.sub(n, windowBegin));
  SmallVector<Value> init(group, e.negInf());
  return e.forLoop(
      first, count, step, init,
      [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
        Value t = e.select(e.lt(j, anchorEnd), j,
                           e.add(windowBegin, e.sub(j, anchorEnd)));
        SmallVector<Value> out;
        for (int64_t i = 0; i < group; ++i)
          out.push_back(e.fmax(
              acc[i],
              e.load(scores, {b, e.add(e.mul(g, e.idx(group)), e.idx(i)), t})));
        return out;
      });
}

Value mlir::condensate::rankOffset(Emitter &e, Value forcedMax) {
  Value finite =
      e.band(e.fcmp(arith::CmpFPredicate::OGT, forcedMax, e.negInf()),
             e.fcmp(arith::CmpFPredicate::OLT, forcedMax,
                    e.f32(std::numeric_limits<double>::infinity())));
  return e.select(finite, forcedMax, e.f32(0.0));
}

SmallVector<Value> mlir::condensate::rankOffsets(Emitter &e,
                                                 const CandidateUnits &units,
                                                 Value scores, Value b, Value g,
                                                 int64_t group) {
  SmallVector<Value> best =
      forcedScoreMax(e, units, scores, b, g, group, e.idx(0), e.idx(1));
  for (Value &v : best)
    v = rankOffset(e, v);
  return best;
}

RankingKey mlir::condensate::rankingKey(Emitter &e, const TargetInfo &target,
                                        const CandidateUnits &units,
                                        Value scores, Value b, Value g, Value u,
                                        int64_t group, Value zero, Value one,
                                        ArrayRef<Value> offsets) {
  assert((offsets.empty() || int64_t(offsets.size()) == group) &&
         "an offset per head of the group");
  auto score = [&](int64_t i, Value s) {
    return offsets.empty() ? s : e.fsub(s, offsets[size_t(i)]);
  };
  if (target.formulaOrder() == FormulaOrder::Loops) {
    Value cnt = units.count(e, u);
    SmallVector<Value> all;
    for (int64_t i = 0; i < group; ++i)
      all.push_back(score(
          i, e.load(scores, {b, e.add(e.mul(g, e.idx(group)), e.idx(i)), u})));
    Value best = groupMax(e, all);
    Value valid = e.gt(cnt, e.idx(0));
    Value key = e.select(valid, orderedKey(e, best), zero);
    key = e.select(e.band(valid, e.eq(key, zero)), one, key);
    return {key, valid};
  }
  Value candidate = e.gt(units.count(e, u), e.idx(0));
  Value base = e.mul(g, e.idx(group));
  SmallVector<Value> all;
  for (int64_t i = 0; i < group; ++i)
    all.push_back(score(i, e.load(scores, {b, e.add(base, e.idx(i)), u})));
  Value best = groupMax(e, all);
  Value key = orderedKey(e, best);
  key = e.select(e.eq(key, e.i32(0)), e.i32(1), key);
  return {e.select(candidate, key, e.i32(0)), candidate};
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

SparseList SparseList::of(SparseAttendOp op) {
  int64_t p = staticDim(op.getKCache(), 2);
  SparseList l;
  bool tokens = op.getGranularity() == Granularity::token;
  l.unitTokens = tokens ? 1 : p;
  l.forced = op.getIncludeForced() ? op.getAnchor() + op.getWindowMax() : 0;
  l.length = op.getVirtualLength();
  l.splits = op.getNumSplits();
  l.perSplit = (l.length + l.splits - 1) / l.splits;
  l.first = op.getFirst();
  l.count = op.getCount();
  return l;
}

std::pair<Value, Value> SparseList::splitRange(Emitter &e, Value s) const {
  Value v0 = e.mul(s, e.idx(perSplit));
  Value v1 = e.mins(e.add(v0, e.idx(perSplit)), e.idx(length));
  return {v0, v1};
}

Value SparseList::limit(Emitter &e, Value limits, Value b, Value g) const {
  return limits ? e.loadIndex(limits, {b, g}) : e.idx(count);
}

CondensateSlots CondensateSlots::of(Emitter &e, SparseAttendOp op,
                                    const SparseList &list, Value w, Value n) {
  return CondensateSlots{e.idx(op.getAnchor()), e.idx(op.getWindowMax()), w,
                         e.idx(list.forced),    e.idx(list.unitTokens),   n};
}

std::pair<Value, Value> CondensateSlots::forcedSlot(Emitter &e, Value v) const {
  Value inAnchor = e.lt(v, anchor);
  Value o = e.sub(v, anchor);
  Value wpos = e.add(e.sub(n, windowMax), o);
  Value wvalid = e.band(e.ge(o, e.sub(windowMax, window)), e.ge(wpos, anchor));
  Value t = e.select(inAnchor, v, wpos);
  Value valid = e.select(inAnchor, e.lt(v, n), wvalid);
  // Window slots cover [n - W, n); positions past n are impossible.
  return {t, valid};
}

Value CondensateSlots::unitPositionValid(Emitter &e, Value t) const {
  Value notAnchor = e.ge(t, anchor);
  Value notWindow = e.lt(t, e.sub(n, window));
  return e.band(e.band(notAnchor, notWindow), e.lt(t, n));
}

std::pair<Value, Value> CondensateSlots::position(Emitter &e, Value v,
                                                  const SparseList &list,
                                                  Value indices, Value b,
                                                  Value g, Value limit) const {
  Type idxT = e.builder().getIndexType();
  Type i1T = e.builder().getI1Type();
  int64_t forcedSlots = list.forced, unitTokens = list.unitTokens;
  auto tv = e.ifElse(
      e.lt(v, e.idx(forcedSlots)), {idxT, i1T},
      [&](Emitter &e) -> SmallVector<Value> {
        auto [t, valid] = forcedSlot(e, v);
        return {t, valid};
      },
      [&](Emitter &e) -> SmallVector<Value> {
        if (!indices)
          return {e.idx(0), e.i1(false)};
        Value rel = e.sub(v, e.idx(forcedSlots));
        Value j = e.divs(rel, e.idx(unitTokens));
        Value off = e.rems(rel, e.idx(unitTokens));
        Value unitIdx =
            e.loadIndex(indices, {b, g, e.add(j, e.idx(list.first))});
        Value t = e.add(e.mul(unitIdx, e.idx(unitTokens)), off);
        Value valid = e.band(e.band(e.lt(j, limit), e.ge(unitIdx, e.idx(0))),
                             unitPositionValid(e, t));
        return {t, valid};
      });
  return {tv[0], tv[1]};
}

std::pair<Value, Value>
mlir::condensate::denseSplitRange(Emitter &e, Value n, OpFoldResult splits,
                                  Value s, int64_t minChunk) {
  Value used = e.mins(e.index(splits),
                      e.maxs(e.ceilDiv(n, e.idx(minChunk)), e.idx(1)));
  Value chunk = e.ceilDiv(n, used);
  Value t0 = e.mins(e.mul(s, chunk), n);
  Value t1 = e.mins(e.add(t0, chunk), n);
  return {t0, t1};
}

//===----------------------------------------------------------------------===//
// Rows spread over lanes
//===----------------------------------------------------------------------===//

Value mlir::condensate::rowDot(Emitter &e, const TargetInfo &target,
                               ArrayRef<Value> q, ArrayRef<Value> k,
                               int64_t lanes) {
  Value acc = e.fmul(q[0], k[0]);
  for (size_t c = 1; c < q.size(); ++c)
    acc = e.fma(q[c], k[c], acc);
  return laneSum(e, target, e.reduceAdd(acc), lanes);
}

Value mlir::condensate::rowBoxDot(Emitter &e, const TargetInfo &target,
                                  ArrayRef<Value> q, ArrayRef<Value> lo,
                                  ArrayRef<Value> hi, int64_t lanes) {
  Value acc;
  for (size_t c = 0; c < q.size(); ++c) {
    Value t = e.fmax(e.fmul(q[c], lo[c]), e.fmul(q[c], hi[c]));
    acc = c == 0 ? t : e.fadd(acc, t);
  }
  return laneSum(e, target, e.reduceAdd(acc), lanes);
}

//===----------------------------------------------------------------------===//
// Partials and merge
//===----------------------------------------------------------------------===//

std::pair<Value, Value> mlir::condensate::partialMaxAndTotal(Emitter &e,
                                                             Value pml,
                                                             Value splits,
                                                             Value b, Value h) {
  // A row of at most kOneRound splits (a sparse list's, whose width is
  // static) is read in one round, every load issued first, and m and Z
  // come from the same registers: on a GPU one thread walks a row, and
  // each round is an L2 round trip. A wider or dynamic row goes kRound
  // splits a round, once for m and again for Z. Terms past the splits add
  // 0, so Z is summed in split order either way (the CPU's and the GPU's
  // certificates take the same decisions).
  constexpr int64_t kOneRound = 32, kRound = 8;
  int64_t width = cast<MemRefType>(pml.getType()).getDimSize(2);
  if (!ShapedType::isDynamic(width) && width <= kOneRound) {
    SmallVector<Value> in, ms, ls;
    for (int64_t s = 0; s < width; ++s) {
      Value sv = e.idx(s);
      in.push_back(e.lt(sv, splits));
      Value safe = e.select(in.back(), sv, e.idx(0));
      ms.push_back(e.load(pml, {b, h, safe, e.idx(0)}));
      ls.push_back(e.load(pml, {b, h, safe, e.idx(1)}));
    }
    Value m = e.negInf();
    for (int64_t s = 0; s < width; ++s)
      m = e.select(in[s], e.fmax(m, ms[s]), m);
    Value z = e.f32(0.0);
    for (int64_t s = 0; s < width; ++s) {
      Value live =
          e.band(in[s], e.fcmp(arith::CmpFPredicate::OGT, ls[s], e.f32(0.0)));
      z = e.fadd(z, e.select(live, e.fmul(ls[s], e.exp(e.fsub(ms[s], m))),
                             e.f32(0.0)));
    }
    return {m, z};
  }
  auto rounds =
      [&](Value init,
          llvm::function_ref<Value(Emitter &, Value, Value, Value, Value)>
              step) {
        return e.forLoop(
            e.idx(0), splits, e.idx(kRound), {init},
            [&](Emitter &e, Value s0, ValueRange acc) -> SmallVector<Value> {
              SmallVector<Value> in, ms, ls;
              for (int64_t r = 0; r < kRound; ++r) {
                Value s = e.add(s0, e.idx(r));
                in.push_back(e.lt(s, splits));
                Value safe = e.select(in.back(), s, e.idx(0));
                ms.push_back(e.load(pml, {b, h, safe, e.idx(0)}));
                ls.push_back(e.load(pml, {b, h, safe, e.idx(1)}));
              }
              Value a = acc[0];
              for (int64_t r = 0; r < kRound; ++r)
                a = step(e, a, in[r], ms[r], ls[r]);
              return {a};
            })[0];
      };
  Value m =
      rounds(e.negInf(), [](Emitter &e, Value acc, Value in, Value ms, Value) {
        return e.select(in, e.fmax(acc, ms), acc);
      });
  Value z = rounds(e.f32(0.0), [&](Emitter &e, Value acc, Value in, Value ms,
                                   Value ls) {
    Value live = e.band(in, e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0)));
    return e.fadd(acc,
                  e.select(live, e.fmul(ls, e.exp(e.fsub(ms, m))), e.f32(0.0)));
  });
  return {m, z};
}

std::pair<Value, Value>
mlir::condensate::liveSplitMax(Emitter &e, const TargetInfo &target, Value pml,
                               Value b, Value h, OpFoldResult lane,
                               int64_t stride) {
  auto r =
      e.forLoop(e.index(lane), e.dim(pml, 2),
                e.idx(stride > 0 ? stride : target.warpSize()),
                {e.negInf(), e.i32(0)},
                [&](Emitter &e, Value s, ValueRange acc) -> SmallVector<Value> {
                  Value ls = e.load(pml, {b, h, s, e.idx(1)});
                  Value ms = e.load(pml, {b, h, s, e.idx(0)});
                  Value live =
                      e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0));
                  return {e.select(live, e.fmax(acc[0], ms), acc[0]),
                          e.select(live, e.toI32(e.add(s, e.idx(1))), acc[1])};
                });
  return {r[0], r[1]};
}

void mlir::condensate::storeFixedCertificate(Emitter &e, Value stats, Value b,
                                             Value h, double eps) {
  Value epsV = e.f32(eps);
  e.store(epsV, stats, {b, h, e.idx(StatEpsHat)});
  e.store(e.f32(0.0), stats, {b, h, e.idx(StatExtra)});
  e.store(e.f32(0.0), stats, {b, h, e.idx(StatFallback)});
  e.store(epsV, stats, {b, h, e.idx(StatOutputBound)});
}

//===----------------------------------------------------------------------===//
// KV append
//===----------------------------------------------------------------------===//

AppendSlot mlir::condensate::appendSlot(Emitter &e, Value positions,
                                        Value pageTable, Value b,
                                        int64_t pageSize) {
  Value pos = e.loadIndex(positions, {b});
  Value page = e.loadIndex(pageTable, {b, e.divs(pos, e.idx(pageSize))});
  Value off = e.rems(pos, e.idx(pageSize));
  Value first = e.eq(off, e.idx(0));
  return {page, off, first};
}

void mlir::condensate::appendChannel(Emitter &e, const AppendSlot &slot,
                                     Value kNew, Value vNew, Value kCache,
                                     Value vCache, Value summaries, Value b,
                                     Value g, Value c, int64_t sketchBits) {
  Type kvElt = cast<MemRefType>(kCache.getType()).getElementType();
  Value page = slot.page, off = slot.off;
  Value k = e.truncf(e.load(kNew, {b, g, c}), kvElt);
  Value v = e.truncf(e.load(vNew, {b, g, c}), kvElt);
  e.store(k, kCache, {page, g, off, c});
  e.store(v, vCache, {page, g, off, c});
  if (!summaries)
    return;
  Value k32 = e.toF32(k), v32 = e.toF32(v);
  auto update = [&](SummarySlot s, Value x,
                    llvm::function_ref<Value(Value, Value)> fold) {
    Value old = e.load(summaries, {page, g, e.idx(s), c});
    e.store(e.select(slot.first, x, fold(old, x)), summaries,
            {page, g, e.idx(s), c});
  };
  update(KMin, k32, [&](Value a, Value x) { return e.fmin(a, x); });
  update(KMax, k32, [&](Value a, Value x) { return e.fmax(a, x); });
  update(KSum, k32, [&](Value a, Value x) { return e.fadd(a, x); });
  update(VMin, v32, [&](Value a, Value x) { return e.fmin(a, x); });
  update(VMax, v32, [&](Value a, Value x) { return e.fmax(a, x); });
  if (sketchBits == 0)
    return;
  int64_t p = staticDim(kCache, 2);
  int64_t perWord = ::condensate::abi::codesPerWord(sketchBits);
  int64_t inWord = std::min(perWord, p);
  int64_t rows = ::condensate::abi::sketchRows(p, sketchBits);
  e.ifThen(e.eq(off, e.idx(p - 1)), [&](Emitter &e) {
    // The page's final box, as just stored.
    Value lo = e.load(summaries, {page, g, e.idx(KMin), c});
    Value hi = e.load(summaries, {page, g, e.idx(KMax), c});
    e.forEach(e.idx(0), e.idx(rows), [&](Emitter &e, Value w) {
      Value word = e.forLoop(
          e.idx(0), e.idx(inWord), e.idx(1), {e.i32(0)},
          [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
            Value t = e.add(e.mul(w, e.idx(perWord)), j);
            Value kt = e.toF32(e.load(kCache, {page, g, t, c}));
            Value code = sketchCode(e, kt, lo, hi, sketchBits);
            Value shift = e.toI32(e.mul(j, e.idx(sketchBits)));
            Value placed = arith::ShLIOp::create(e.builder(), e.location(),
                                                 code, shift);
            return {e.bor(acc[0], placed)};
          })[0];
      Value asFloat = arith::BitcastOp::create(
          e.builder(), e.location(), e.builder().getF32Type(), word);
      e.store(asFloat, summaries,
              {page, g, e.add(e.idx(::condensate::abi::kSketchRow0), w), c});
    });
  });
}
