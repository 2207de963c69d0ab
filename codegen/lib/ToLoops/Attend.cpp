//===- Attend.cpp - sparse and dense attention as loops -------------------===//
//
// Lowers sparse_attend (the virtual condensate list) and dense_attend
// (every position) to online-softmax loops, one partial per split and
// query head, the heads of a kv group walked together (each key and value
// row loaded once for them) in tiles of positions.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

/// Positions the online softmax folds at a time: their logits first, then
/// one max, one rescale and their exponentials as one vector (a libm call
/// a position, two with the rescale, spilled the row accumulators around
/// each call).
constexpr int64_t kTile = kLanes;

/// exp(x) for each lane of an f32 vector x <= 0 (a softmax's logit less its
/// running max), in vector arithmetic: Cephes' expf (S. L. Moshier, public
/// domain): x = k ln 2 + r by a two-part ln 2, e^r by a degree-7
/// polynomial, times 2^k from the exponent bits; about 1 ulp (2 at most)
/// on [-87.3, 0]. Below -87.3 (-inf: a position not attended) it is 0, where
/// e^x < 1.2e-38 weighs nothing against a softmax sum of at least 1; NaN
/// stays NaN.
Value expLanes(Emitter &e, Value x) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto vt = cast<VectorType>(x.getType());
  int64_t n = vt.getNumElements();
  auto c = [&](double v) { return e.splat(e.f32(v), n); };
  auto ic = [&](int64_t v) { return e.splat(e.i32(v), n); };
  constexpr double kLow = -87.3;
  Value xc = e.fmin(e.fmax(x, c(kLow)), c(0.0));
  Value k =
      math::FloorOp::create(b, loc, e.fma(xc, c(1.44269504088896341), c(0.5)));
  Value r = e.fsub(e.fsub(xc, e.fmul(k, c(0.693359375))),
                   e.fmul(k, c(-2.12194440e-4)));
  Value z = e.fmul(r, r);
  Value y = c(1.9875691500e-4);
  for (double coef : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                      1.6666665459e-1, 5.0000001201e-1})
    y = e.fma(y, r, c(coef));
  y = e.fadd(e.fma(y, z, r), c(1.0));
  // 2^k, k in [-126, 0]: a normal float's exponent field.
  auto i32v = VectorType::get({n}, b.getI32Type());
  Value ki = arith::FPToSIOp::create(b, loc, i32v, k);
  Value bits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, ki, ic(127)), ic(23));
  Value out = e.fmul(y, arith::BitcastOp::create(b, loc, vt, bits));
  out = e.select(e.fcmp(arith::CmpFPredicate::OLT, x, c(kLow)), c(0.0), out);
  return e.select(e.fcmp(arith::CmpFPredicate::UNO, x, x), x, out);
}

/// Query heads of a group that one walk over the positions serves: each
/// key and value row is loaded once for all of them (a walk a head read
/// the group's rows once a head). As many as keep their rows and
/// accumulators within about 64 vectors, at least one.
int64_t headsPerWalk(int64_t group, int64_t chunks) {
  return std::clamp<int64_t>(32 / chunks, 1, group);
}

/// A tile's logits for up to `heads` heads (heads x kTile) and its rows'
/// pages and offsets (2 x kTile; page -1: not attended), on the stack,
/// allocated where the op was, outside its loops.
struct TileScratch {
  Value logits, rows;
  static TileScratch of(Emitter &e, int64_t heads) {
    OpBuilder &b = e.builder();
    return {
        memref::AllocaOp::create(
            b, e.location(), MemRefType::get({heads, kTile}, b.getF32Type())),
        memref::AllocaOp::create(
            b, e.location(), MemRefType::get({2, kTile}, b.getIndexType()))};
  }
};

/// Online-softmax states of `heads` query heads of one kv head: each its
/// running max, sum, count and unnormalised output row, one after another.
struct Softmax {
  int64_t heads, chunks;
  int64_t width() const { return 3 + chunks; }

  /// Position i of a tile: whether it is attended, and where its key and
  /// value rows are (page, offset; any in-range values when not attended).
  using TileAt =
      llvm::function_ref<std::tuple<Value, Value, Value>(Emitter &, Value)>;
  SmallVector<Value> init(Emitter &e, RowOps &row) const {
    SmallVector<Value> s;
    for (int64_t j = 0; j < heads; ++j) {
      s.append({e.negInf(), e.f32(0.0), e.f32(0.0)});
      s.append(row.zeros());
    }
    return s;
  }
  /// Folds a tile of kTile positions of key/value head g into `state`, for
  /// the heads whose query rows are qs[j]: the rows of positions not
  /// attended are not read.
  SmallVector<Value> updateTile(Emitter &e, RowOps &row, ValueRange state,
                                ArrayRef<SmallVector<Value>> qs, Value k,
                                Value v, Value g, Value scale,
                                const TileScratch &scratch, TileAt at) const {
    Type f32 = e.builder().getF32Type();
    const int64_t d = row.d;
    // The tile's logits, head by head, and its rows, through `scratch`:
    // the positions are loops, not unrolled, so that a layer's program
    // compiles in about the time it did a position at a time.
    Value count = e.forLoop(
        e.idx(0), e.idx(kTile), e.idx(1), {e.f32(0.0)},
        [&](Emitter &e, Value i, ValueRange acc) -> SmallVector<Value> {
          auto [valid, page, off] = at(e, i);
          // The rows wanted next, in cache before their loads: this
          // position's value row (the values' pass follows this loop) and
          // the key row of the next tile's position i (gathered by index,
          // or across a page, neither of which the hardware foresees).
          // A position not attended asks for a row in range, harmlessly.
          RowOps ahead{e, d};
          ahead.prefetchRow(v, {page, g, off});
          auto [nextValid, nextPage, nextOff] = at(e, e.add(i, e.idx(kTile)));
          (void)nextValid;
          ahead.prefetchRow(k, {nextPage, g, nextOff});
          SmallVector<Value> li = e.ifElse(
              valid, SmallVector<Type>(heads, f32),
              [&](Emitter &e) -> SmallVector<Value> {
                RowOps row{e, d};
                SmallVector<Value> krow = row.loadRow(k, {page, g, off});
                SmallVector<Value> out;
                for (int64_t j = 0; j < heads; ++j)
                  out.push_back(
                      e.fmul(rowDot(e, row.target(), qs[j], krow, 1), scale));
                return out;
              },
              [&](Emitter &e) -> SmallVector<Value> {
                return SmallVector<Value>(heads, e.negInf());
              });
          for (int64_t j = 0; j < heads; ++j)
            e.store(li[j], scratch.logits, {e.idx(j), i});
          // Where the row is, for the values' pass (-1: not attended).
          e.store(e.select(valid, page, e.idx(-1)), scratch.rows,
                  {e.idx(0), i});
          e.store(off, scratch.rows, {e.idx(1), i});
          return {e.fadd(acc[0], e.select(valid, e.f32(1.0), e.f32(0.0)))};
        })[0];
    return e.ifElse(
        e.fcmp(arith::CmpFPredicate::OGT, count, e.f32(0.0)),
        ValueRange(state).getTypes(),
        [&](Emitter &e) -> SmallVector<Value> {
          RowOps row{e, d};
          SmallVector<Value> out(state.begin(), state.end());
          SmallVector<Value> ps;
          for (int64_t j = 0; j < heads; ++j) {
            Value *st = &out[j * width()];
            Value lv = vector::LoadOp::create(
                e.builder(), e.location(), VectorType::get({kTile}, f32),
                scratch.logits, ValueRange{e.idx(j), e.idx(0)});
            Value tileMax = vector::ReductionOp::create(
                e.builder(), e.location(), vector::CombiningKind::MAXIMUMF, lv);
            Value m = st[0];
            Value mNew = e.fmax(m, tileMax);
            Value corr = vector::ExtractOp::create(
                e.builder(), e.location(),
                expLanes(e, e.splat(e.fsub(m, mNew), kTile)), int64_t(0));
            Value p = expLanes(e, e.fsub(lv, e.splat(mNew, kTile)));
            ps.push_back(p);
            st[0] = mNew;
            st[1] = e.fadd(e.fmul(st[1], corr), e.reduceAdd(p));
            st[2] = e.fadd(st[2], count);
            Value corrV = row.splat(corr);
            for (int64_t c = 0; c < chunks; ++c)
              st[3 + c] = e.fmul(st[3 + c], corrV);
          }
          SmallVector<Value> accs;
          for (int64_t j = 0; j < heads; ++j)
            for (int64_t c = 0; c < chunks; ++c)
              accs.push_back(out[j * width() + 3 + c]);
          SmallVector<Value> next = e.forLoop(
              e.idx(0), e.idx(kTile), e.idx(1), accs,
              [&](Emitter &e, Value i, ValueRange acc) -> SmallVector<Value> {
                Value page = e.load(scratch.rows, {e.idx(0), i});
                Value off = e.load(scratch.rows, {e.idx(1), i});
                Value valid = e.ge(page, e.idx(0));
                return e.ifElse(
                    valid, ValueRange(acc).getTypes(),
                    [&](Emitter &e) -> SmallVector<Value> {
                      RowOps row{e, d};
                      SmallVector<Value> vrow = row.loadRow(v, {page, g, off});
                      SmallVector<Value> res;
                      for (int64_t j = 0; j < heads; ++j) {
                        Value pV = row.splat(vector::ExtractOp::create(
                            e.builder(), e.location(), ps[j],
                            ArrayRef<OpFoldResult>{i}));
                        for (int64_t c = 0; c < chunks; ++c)
                          res.push_back(
                              e.fma(vrow[c], pV, acc[j * chunks + c]));
                      }
                      return res;
                    },
                    [&](Emitter &) -> SmallVector<Value> {
                      return SmallVector<Value>(acc);
                    });
              });
          for (int64_t j = 0; j < heads; ++j)
            for (int64_t c = 0; c < chunks; ++c)
              out[j * width() + 3 + c] = next[j * chunks + c];
          return out;
        },
        [&](Emitter &) -> SmallVector<Value> {
          return SmallVector<Value>(state);
        });
  }
  /// Position of slot x of a walk (x in its range) and whether it is
  /// attended.
  using PositionOf =
      llvm::function_ref<std::pair<Value, Value>(Emitter &, Value)>;
  /// Folds slots [from, to) of sequence b's key/value head g, a tile at a
  /// time, into a fresh state for the heads whose query rows are qs.
  SmallVector<Value> walk(Emitter &e, int64_t d,
                          ArrayRef<SmallVector<Value>> qs, Value k, Value v,
                          Value pageTable, Value b, Value g, Value scale,
                          const TileScratch &scratch, Value from, Value to,
                          PositionOf positionOf) const {
    RowOps row{e, d};
    const int64_t p = staticDim(k, 2);
    return e.forLoop(
        from, to, e.idx(kTile), init(e, row),
        [&](Emitter &e, Value x0, ValueRange st) -> SmallVector<Value> {
          RowOps row{e, d};
          return updateTile(
              e, row, st, qs, k, v, g, scale, scratch,
              [&](Emitter &e, Value i) -> std::tuple<Value, Value, Value> {
                Value x = e.add(x0, i);
                Value in = e.lt(x, to);
                auto [t, valid] = positionOf(e, e.select(in, x, from));
                Value ok = e.band(in, valid);
                // A position not attended reads the page table's first
                // entry (always there) and no row.
                Value pos = e.select(ok, t, e.idx(0));
                Value page = e.loadIndex(pageTable, {b, e.divs(pos, e.idx(p))});
                return {ok, page, e.rems(pos, e.idx(p))};
              });
        });
  }
  /// Stores the state of each head j as split s of head h0 + j.
  void store(Emitter &e, RowOps &row, ValueRange state, Value po, Value pml,
             Value b, Value h0, Value s) const {
    for (int64_t j = 0; j < heads; ++j) {
      ValueRange st = state.slice(j * width(), width());
      Value h = e.add(h0, e.idx(j));
      e.store(st[0], pml, {b, h, s, e.idx(0)});
      e.store(st[1], pml, {b, h, s, e.idx(1)});
      e.store(st[2], pml, {b, h, s, e.idx(2)});
      row.storeRow(SmallVector<Value>(st.drop_front(3)), po, {b, h, s});
    }
  }
};

/// The query rows of heads [h0, h0 + heads) of sequence b, as chunks.
SmallVector<SmallVector<Value>> loadQueries(RowOps &row, Value q, Value b,
                                            Value h0, int64_t heads) {
  SmallVector<SmallVector<Value>> qs;
  for (int64_t j = 0; j < heads; ++j)
    qs.push_back(row.loadRow(q, {b, row.e.add(h0, row.e.idx(j))}));
  return qs;
}

void lowerSparseAttend(SparseAttendOp op, Emitter &e,
                       PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1);
  int64_t group = hq / hkv;
  SparseList list = SparseList::of(op);
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0);
  const int64_t perWalk = headsPerWalk(group, d / kLanes);
  TileScratch scratch = TileScratch::of(e, perWalk);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                              op.getWindowMax());
    CondensateSlots slotsInfo = CondensateSlots::of(e, op, list, w, n);
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      Value limit = list.limit(e, op.getLimits(), b, g);
      Value skipped;
      if (op.getSkip())
        skipped = e.ne(e.load(op.getSkip(), {b, g}), e.i32(0));
      for (int64_t j0 = 0; j0 < group; j0 += perWalk) {
        Softmax sm{std::min(perWalk, group - j0), d / kLanes};
        Value h0 = e.add(e.mul(g, e.idx(group)), e.idx(j0));
        e.forEach(e.idx(0), e.idx(list.splits), [&](Emitter &e, Value s) {
          RowOps row{e, d};
          SmallVector<SmallVector<Value>> qs =
              loadQueries(row, op.getQ(), b, h0, sm.heads);
          auto [v0, v1] = list.splitRange(e, s);
          // With a limit the slots past the units attended hold nothing:
          // each split stops there (open extras leave most of a list's
          // slots past the limit), walking the same slots in the same
          // order.
          if (op.getLimits()) {
            Value used =
                e.add(e.idx(list.forced),
                      e.mul(e.maxs(limit, e.idx(0)), e.idx(list.unitTokens)));
            v1 = e.maxs(e.mins(v1, used), v0);
          }
          if (skipped)
            v1 = e.select(skipped, v0, v1);
          SmallVector<Value> state = sm.walk(
              e, d, qs, op.getKCache(), op.getVCache(), op.getPageTable(), b, g,
              scale, scratch, v0, v1, [&](Emitter &e, Value slot) {
                return slotsInfo.position(e, slot, list, op.getIndices(), b, g,
                                          limit);
              });
          sm.store(e, row, state, op.getPartialO(), op.getPartialMl(), b, h0,
                   s);
        });
      }
    });
  });
}

void lowerDenseAttend(DenseAttendOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1);
  int64_t group = hq / hkv;
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0);
  Value splits = e.dim(op.getPartialMl(), 2);
  const int64_t perWalk = headsPerWalk(group, d / kLanes);
  TileScratch scratch = TileScratch::of(e, perWalk);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    share.forEach(e, hkv, [&](Emitter &e, Value g) {
      Value active = e.i1(true);
      if (op.getMask())
        active = e.ne(e.load(op.getMask(), {b, g}), e.i32(0));
      for (int64_t j0 = 0; j0 < group; j0 += perWalk) {
        Softmax sm{std::min(perWalk, group - j0), d / kLanes};
        Value h0 = e.add(e.mul(g, e.idx(group)), e.idx(j0));
        e.forEach(e.idx(0), splits, [&](Emitter &e, Value s) {
          RowOps row{e, d};
          auto [t0, t1] = denseSplitRange(e, n, splits, s, kMinDenseChunk);
          t1 = e.select(active, t1, t0);
          SmallVector<SmallVector<Value>> qs =
              loadQueries(row, op.getQ(), b, h0, sm.heads);
          SmallVector<Value> state = sm.walk(
              e, d, qs, op.getKCache(), op.getVCache(), op.getPageTable(), b, g,
              scale, scratch, t0, t1, [&](Emitter &e, Value t) {
                return std::make_pair(t, e.i1(true));
              });
          sm.store(e, row, state, op.getPartialO(), op.getPartialMl(), b, h0,
                   s);
        });
      }
    });
  });
}

} // namespace

void mlir::condensate::populateAttendToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<SparseAttendOp, lowerSparseAttend>>(
      patterns.getContext());
  patterns.add<LoopPattern<DenseAttendOp, lowerDenseAttend>>(
      patterns.getContext());
}
