//===- Certify.cpp - the certificate as loops -----------------------------===//
//
// Lowers precertify, the certificate's early test, and certify: the
// omitted-mass bound eps_hat in f64 over the base set, the walk over the
// extras until it is within tau, and the value box of the omitted
// positions.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Certificate.h"
#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

/// Per-unit f64 sums of `heads` heads over units [0, count), kLanes units
/// at a time: `gather` stores unit u's inputs (u in range, else unit 0 with
/// `in` false) into lane l of `lanes` (a [rows, kLanes] f32 scratch), then
/// `terms` turns the lanes' rows (row(r) the vector of row r) into head
/// i's f64 terms of the kLanes units from u0. Returns each head's total.
using LaneGather =
    llvm::function_ref<void(Emitter &, Value u, Value in, Value l)>;
using LaneRow = llvm::function_ref<Value(int64_t)>;
using LaneTerms =
    llvm::function_ref<Value(Emitter &, Value u0, LaneRow row, int64_t i)>;
SmallVector<Value> laneSums(Emitter &e, Value lanes, Value count, int64_t heads,
                            LaneGather gather, LaneTerms terms) {
  SmallVector<Value> sums = e.forLoop(
      e.idx(0), count, e.idx(kLanes),
      SmallVector<Value>(heads, e.splat(e.f64(0.0), kLanes)),
      [&](Emitter &e, Value u0, ValueRange acc) -> SmallVector<Value> {
        e.forEach(e.idx(0), e.idx(kLanes), [&](Emitter &e, Value l) {
          Value u = e.add(u0, l);
          Value in = e.lt(u, count);
          gather(e, e.select(in, u, e.idx(0)), in, l);
        });
        auto row = [&](int64_t r) -> Value {
          return vector::LoadOp::create(
              e.builder(), e.location(),
              VectorType::get({kLanes}, e.builder().getF32Type()), lanes,
              ValueRange{e.idx(r), e.idx(0)});
        };
        SmallVector<Value> out;
        for (int64_t i = 0; i < heads; ++i)
          out.push_back(e.fadd(acc[i], terms(e, u0, row, i)));
        return out;
      });
  for (Value &sum : sums)
    sum = e.reduceAdd(sum);
  return sums;
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
        Value cand = CandidateUnits{page, anchor, n, w}.count(e, j);
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
              SmallVector<Value> lo =
                  row.loadRow(op.getSummaries(), {phys, g, e.idx(VMin)});
              SmallVector<Value> hi =
                  row.loadRow(op.getSummaries(), {phys, g, e.idx(VMax)});
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

/// Lowers precertify (CondensateOps.td): per (sequence, kv head) the rank
/// end of the slots, then per query head the bound reference M (the base
/// set's largest bound), Zhat over the forced positions' exact logits and
/// the base units' bounds, and Ulow over the candidates no extra can take
/// in.
void lowerPrecertify(PrecertifyOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getScores(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t group = hq / hkv, base = op.getBaseUnits(), p = op.getPageSize();
  double tau = op.getTau().convertToDouble();
  int64_t unitTokens = op.getGranularity() == Granularity::page ? p : 1;
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getScores(), 0);
  Value zero32 = e.i32(0), one32 = e.i32(1);
  Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
  const TargetInfo &target = loopsTarget();
  // kLanes units' counts (0 unless ranked after every slot) and the
  // group's bounds, for Ulow (on the stack, outside the loops).
  Value lanes = memref::AllocaOp::create(
      rewriter, op.getLoc(),
      MemRefType::get({1 + group, kLanes}, rewriter.getF32Type()));
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                              op.getWindowMax());
    Value numUnits = e.ceilDiv(n, unit);
    CandidateUnits units{unit, anchor, n, w};
    // Forced positions: [0, min(A, n)) and [max(A, n - W), n).
    Value anchorEnd = e.mins(anchor, n);
    Value windowBegin = e.maxs(anchor, e.sub(n, w));
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      // Empty slots come last: with the last one empty every candidate is
      // in a slot, nothing can be left out, and the test cannot fire (open
      // extras); it costs one load. Without slots nothing is in one.
      Value lastEmpty =
          slots == 0
              ? e.i1(false)
              : e.lt(e.loadIndex(op.getIndices(), {b, g, e.idx(slots - 1)}),
                     e.idx(0));
      e.ifThen(lastEmpty, [&](Emitter &e) {
        e.store(zero32, op.getEarly(), {b, g});
      });
      e.ifThen(e.bnot(lastEmpty), [&](Emitter &e) {
        // The ranking as select_topk's.
        SmallVector<Value> offsets;
        if (rankRelative(op.getGranularity(), group))
          offsets = rankOffsets(e, units, op.getScores(), b, g, group);
        auto key = [&](Emitter &e, Value u) {
          return rankingKey(e, target, units, op.getScores(), b, g, u, group,
                            zero32, one32, offsets)
              .key;
        };
        // The rank end of the slots.
        SmallVector<Value> endInit{e.i1(true), e.i32(-1), e.idx(-1)};
        auto end = e.forLoop(
            e.idx(0), e.idx(slots), e.idx(1), endInit,
            [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
              Value u = e.loadIndex(op.getIndices(), {b, g, j});
              Value have = e.ge(u, e.idx(0));
              Value uSafe = e.select(have, u, e.idx(0));
              Value k = key(e, uSafe);
              SelectionEnd cur{acc[0], acc[1], acc[2]};
              // A unit ranked after the running end becomes the end.
              Value later = ranksAfter(
                  e, SelectionEnd{e.i1(true), acc[1], acc[2]}, k, uSafe);
              Value first = e.lt(acc[2], e.idx(0));
              Value take = e.band(have, e.bor(first, later));
              return {e.band(cur.full, have), e.select(take, k, acc[1]),
                      e.select(take, uSafe, acc[2])};
            });
        SelectionEnd selEnd{end[0], end[1], end[2]};
        Value bounds = op.getBounds();
        SmallVector<Value> heads, ms, zs;
        for (int64_t i = 0; i < group; ++i) {
          Value h = e.add(e.mul(g, e.idx(group)), e.idx(i));
          heads.push_back(h);
          // M: the largest bound of the base set (base units, and the units
          // of the anchor and window positions).
          auto maxOver = [&](Emitter &e, Value t0, Value t1, Value m) {
            return e.forLoop(
                t0, t1, e.idx(1), {m},
                [&](Emitter &e, Value t, ValueRange acc) -> SmallVector<Value> {
                  Value u = e.divs(t, unit);
                  return {e.fmax(acc[0], e.load(bounds, {b, h, u}))};
                })[0];
          };
          Value m = maxOver(e, e.idx(0), anchorEnd, e.negInf());
          m = maxOver(e, windowBegin, n, m);
          m = e.forLoop(
              e.idx(0), e.idx(base), e.idx(1), {m},
              [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
                Value u = e.loadIndex(op.getIndices(), {b, g, j});
                Value have = e.ge(u, e.idx(0));
                Value bd = e.load(bounds, {b, h, e.select(have, u, e.idx(0))});
                return {e.select(have, e.fmax(acc[0], bd), acc[0])};
              })[0];
          RowOps row{e, d};
          SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
          auto forcedMass = [&](Emitter &e, Value t0, Value t1, Value z) {
            return e.forLoop(
                t0, t1, e.idx(1), {z},
                [&](Emitter &e, Value t, ValueRange acc) -> SmallVector<Value> {
                  RowOps row{e, d};
                  Value page =
                      e.loadIndex(op.getPageTable(), {b, e.divs(t, e.idx(p))});
                  Value off = e.rems(t, e.idx(p));
                  Value l =
                      e.fmul(row.dot(q, op.getKCache(), {page, g, off}), scale);
                  return {
                      e.fadd(acc[0], unitMassBound(e, target, e.idx(1), l, m))};
                })[0];
          };
          Value z = forcedMass(e, e.idx(0), anchorEnd, e.f64(0.0));
          z = forcedMass(e, windowBegin, n, z);
          // The base units' bounds, and with extras_in_z the extras' too
          // (certify may take their lower bounds into Z).
          int64_t zUnits = op.getExtrasInZ() ? slots : base;
          z = e.forLoop(
              e.idx(0), e.idx(zUnits), e.idx(1), {z},
              [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
                Value u = e.loadIndex(op.getIndices(), {b, g, j});
                Value have = e.ge(u, e.idx(0));
                Value uSafe = e.select(have, u, e.idx(0));
                Value mass = unitMassBound(e, target, units.count(e, uSafe),
                                           e.load(bounds, {b, h, uSafe}), m);
                return {e.select(have, e.fadd(acc[0], mass), acc[0])};
              })[0];
          ms.push_back(m);
          zs.push_back(z);
        }
        // Ulow of every head of the group, kLanes units at a time: whether
        // a unit ranks after every slot is decided once for the group, its
        // count (0 otherwise) and the heads' bounds gathered through
        // `lanes`, the terms as vectors.
        SmallVector<Value> lows = laneSums(
            e, lanes, numUnits, group,
            [&](Emitter &e, Value u, Value in, Value l) {
              Value after = e.band(in, ranksAfter(e, selEnd, key(e, u), u));
              e.store(
                  e.select(after, e.indexToF32(units.count(e, u)), e.f32(0.0)),
                  lanes, {e.idx(0), l});
              for (int64_t i = 0; i < group; ++i)
                e.store(e.load(bounds, {b, heads[i], u}), lanes,
                        {e.idx(1 + i), l});
            },
            [&](Emitter &e, Value, LaneRow row, int64_t i) {
              return unitMassBoundLanes(e, target, row(0), row(1 + i), ms[i]);
            });
        Value worst = e.f64(0.0);
        for (int64_t i = 0; i < group; ++i)
          worst = e.fmax(worst, epsHat(e, target, lows[i], zs[i]));
        Value early = e.fcmp(arith::CmpFPredicate::OGT, worst, e.f64(tau));
        e.store(e.select(early, one32, zero32), op.getEarly(), {b, g});
      });
    });
  });
}

void lowerCertify(CertifyOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
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
  // Every candidate unit's mass bound for each head of a group, from the
  // first sum of U (its lanes padded to kLanes): the walk and the final sum
  // read them instead of evaluating the exponentials again (the same
  // values: unitMassBound and its lanes form are the same arithmetic).
  Value massStride = e.add(nu, e.idx(kLanes));
  Value masses = memref::AllocOp::create(
      rewriter, loc, MemRefType::get({ShapedType::kDynamic}, f64),
      ValueRange{e.mul(massStride, e.idx(group))});
  Value zero8 = arith::ConstantIntOp::create(rewriter, loc, 0, 8);
  Value one8 = arith::ConstantIntOp::create(rewriter, loc, 1, 8);
  e.forEach(e.idx(0), nu,
            [&](Emitter &e, Value u) { e.store(zero8, marks, {u}); });
  // kLanes units' counts, whether each is counted (unmarked) and the
  // group's bounds, for the omitted sums (on the stack, outside the loops).
  Value lanes = memref::AllocaOp::create(
      rewriter, loc,
      MemRefType::get({2 + group, kLanes}, rewriter.getF32Type()));
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
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      // A group the early test sent to dense had no sparse pass.
      Value early = e.i1(false);
      if (op.getEarly())
        early = e.ne(e.load(op.getEarly(), {b, g}), e.i32(0));
      e.ifThen(early, [&](Emitter &e) {
        if (op.getVbox())
          emitValueBox(e, op, marks, b, g, n, w, e.i1(true));
        e.store(e.i32(0), op.getExtra(), {b, g});
        e.store(e.i32(1), op.getFallback(), {b, g});
        for (int64_t i = 0; i < group; ++i) {
          Value h = e.add(e.mul(g, e.idx(group)), e.idx(i));
          e.store(e.f32(0.0), op.getStats(), {b, h, e.idx(StatEpsHat)});
          e.store(e.f32(0.0), op.getStats(), {b, h, e.idx(StatExtra)});
          e.store(e.f32(kFellBackEarly), op.getStats(),
                  {b, h, e.idx(StatFallback)});
        }
      });
      e.ifThen(e.bnot(early), [&](Emitter &e) {
        SmallVector<Value> heads, ms, zs;
        for (int64_t i = 0; i < group; ++i) {
          Value h = e.add(e.mul(g, e.idx(group)), e.idx(i));
          auto [m, z] = partialMaxAndTotal(e, op.getPartialMl(),
                                           e.dim(op.getPartialMl(), 2), b, h);
          heads.push_back(h);
          ms.push_back(m);
          zs.push_back(e.extf(z, f64));
        }
        const TargetInfo &target = loopsTarget();
        CandidateUnits units{unit, anchor, n, w};
        // Units past the context hold no candidate position (and no mass):
        // the sums stop at the context, not at the page table's width.
        Value live = e.mins(nu, e.ceilDiv(n, unit));
        // The mass bound of unit u for head i, in f64, as the first sum
        // of U cached it.
        auto unitMass = [&](Emitter &e, Value u, int64_t i) {
          // Units past the context hold no mass (nor a cached term).
          Value in = e.lt(u, live);
          Value at =
              e.add(e.mul(e.idx(i), massStride), e.select(in, u, e.idx(0)));
          return e.select(in, e.load(masses, {at}), e.f64(0.0));
        };
        // U over every unmarked candidate unit, kLanes units at a time:
        // their counts (0 past the context), whether each is counted (not
        // marked) and the group's bounds gathered through `lanes`, the
        // terms as vectors. The first sum (`cache`) evaluates every unit's
        // term and keeps it in `masses`; later sums read them.
        auto omitted = [&](Emitter &e, bool cache) {
          Type f64v = VectorType::get({kLanes}, f64);
          return laneSums(
              e, lanes, live, group,
              [&](Emitter &e, Value u, Value in, Value l) {
                Value counted = e.band(in, e.eq(e.load(marks, {u}), zero8));
                e.store(e.select(counted, e.f32(1.0), e.f32(0.0)), lanes,
                        {e.idx(1), l});
                if (!cache)
                  return;
                e.store(
                    e.select(in, e.indexToF32(units.count(e, u)), e.f32(0.0)),
                    lanes, {e.idx(0), l});
                for (int64_t i = 0; i < group; ++i)
                  e.store(e.load(op.getScores(), {b, heads[i], u}), lanes,
                          {e.idx(2 + i), l});
              },
              [&](Emitter &e, Value u0, LaneRow row, int64_t i) {
                Value at = e.add(e.mul(e.idx(i), massStride), u0);
                Value terms;
                if (cache) {
                  terms =
                      unitMassBoundLanes(e, target, row(0), row(2 + i), ms[i]);
                  vector::StoreOp::create(e.builder(), e.location(), terms,
                                          masses, ValueRange{at});
                } else {
                  terms = vector::LoadOp::create(e.builder(), e.location(),
                                                 f64v, masses, ValueRange{at});
                }
                Value counted = e.fcmp(arith::CmpFPredicate::OGT, row(1),
                                       e.splat(e.f32(0.0), kLanes));
                return e.select(counted, terms, e.splat(e.f64(0.0), kLanes));
              });
        };
        // With widths: the mass of unit u's lower bound for head i, which
        // a taken extra adds to Z.
        Value widths = op.getWidths();
        Value pageV = e.idx(op.getPageSize());
        auto lowerMass = [&](Emitter &e, Value u, int64_t i) {
          Value bound = e.load(op.getScores(), {b, heads[i], u});
          Value width = e.load(widths, {b, heads[i], e.divs(u, pageV)});
          return unitLowerMass(e, target, units.count(e, u), bound, width,
                               ms[i]);
        };
        markUnits(e, b, g, e.idx(0), e.idx(base), one8);
        SmallVector<Value> us = omitted(e, /*cache=*/true);
        Value extra = e.idx(0), fallback = e.i1(false);
        if (tau > 0.0) {
          // Walk the extras in order, removing their mass (and adding their
          // lower bounds' to Z), until the worst head's bound is within tau.
          ExtrasWalk walk = walkExtras(
              e, target, op.getIndices(), b, g, base, extraMax, tau, us, zs,
              unitMass, widths ? UnitMassFn(lowerMass) : nullptr);
          Value done = walk.done;
          extra = e.select(done, walk.taken, e.idx(0));
          // Sum the bound afresh for the final set and decide on it: the
          // walk subtracts, and subtracting a dominant (or infinite) term
          // cancels the rest.
          markUnits(e, b, g, e.idx(base), e.add(e.idx(base), extra), one8);
          us = omitted(e, /*cache=*/false);
          // Z with the taken extras' lower bounds: the walk's own sums
          // (the same terms in the same order as summing them afresh).
          if (widths)
            for (int64_t i = 0; i < group; ++i)
              zs[size_t(i)] = e.select(done, walk.zs[size_t(i)], zs[size_t(i)]);
          Value fits = e.fcmp(arith::CmpFPredicate::OLE,
                              worstEpsHat(e, target, us, zs), e.f64(tau));
          fallback = e.bnot(e.band(done, fits));
        }
        // The marks now hold the final set: box the values it leaves out.
        if (op.getVbox())
          emitValueBox(e, op, marks, b, g, n, w, fallback);
        markUnits(e, b, g, e.idx(0), e.idx(base), zero8);
        if (tau > 0.0) {
          // The taken extras back in their slots in unit order, their
          // marks cleared on the way: the attention then gathers them
          // the way the cache lies, not in bound order (a walk of a
          // thousand extras is a thousand scattered rows otherwise).
          e.forLoop(
              e.idx(0), live, e.idx(1), {e.idx(base)},
              [&](Emitter &e, Value u, ValueRange at) -> SmallVector<Value> {
                Value taken = e.ne(e.load(marks, {u}), zero8);
                e.ifThen(taken, [&](Emitter &e) {
                  e.store(e.toI32(u), op.getIndices(), {b, g, at[0]});
                  e.store(zero8, marks, {u});
                });
                return {e.select(taken, e.add(at[0], e.idx(1)), at[0])};
              });
        }
        Value extraKept = e.select(fallback, e.idx(0), extra);
        e.store(e.toI32(extraKept), op.getExtra(), {b, g});
        e.store(e.select(fallback, e.i32(1), e.i32(0)), op.getFallback(),
                {b, g});
        Value extraF = e.indexToF32(extraKept);
        Value fbF = e.select(fallback, e.f32(kFellBack), e.f32(0.0));
        for (int64_t i = 0; i < group; ++i) {
          Value eps =
              reportedEpsHat(e, epsHat(e, target, us[i], zs[i]), fallback);
          e.store(eps, op.getStats(), {b, heads[i], e.idx(StatEpsHat)});
          e.store(extraF, op.getStats(), {b, heads[i], e.idx(StatExtra)});
          e.store(fbF, op.getStats(), {b, heads[i], e.idx(StatFallback)});
        }
      });
    });
  });
  memref::DeallocOp::create(rewriter, loc, marks);
  memref::DeallocOp::create(rewriter, loc, masses);
}

} // namespace

void mlir::condensate::populateCertifyToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<CertifyOp, lowerCertify>>(patterns.getContext());
  patterns.add<LoopPattern<PrecertifyOp, lowerPrecertify>>(
      patterns.getContext());
}
