//===- Prefill.cpp - prefill attention as loops ---------------------------===//
//
// Lowers prefill_attention to loops. For every key/value head, a
// sequence's rows are taken a tile at a time (about kTileQueries query
// vectors: rows times the group's query heads); the tile walks the keys its
// rows see (the anchor, then the window or every earlier position) a block
// of 16 keys at a time (8 for head_dim > 128), from a multiple of the block
// size. A block's keys and values are read once per tile (then from
// cache), in three passes over the tile's query vectors whose work is
// independent from one query vector to the next:
//
// - dot products, kUnroll query vectors at a time sharing each key chunk
//   loaded: per key a vector of partial sums, eight keys' vectors summed
//   together by a shuffle tree into one vector of eight dot products;
// - online softmax: logits scaled and masked to -inf where the row may not
//   see the key, a running maximum and a vector of per-lane sums (added up
//   once at the end), exponentials by the vector polynomial vexp (no libm
//   call);
// - values: the unnormalised output rows, in a stack buffer, rescaled and
//   accumulated with the block's weights, again kUnroll query vectors at a
//   time sharing each value chunk loaded.
//
// Key positions are clamped to the sequence's last, so the last block reads
// no position past the length, nor its page; masking makes the clamped
// keys weigh exactly 0.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

constexpr int64_t L = kLanes;
/// Query vectors (rows times query heads of a group) per tile of rows: a
/// block's keys and values are read from memory once per tile.
constexpr int64_t kTileQueries = 48;
/// Bound on the floats of a tile's stack scratch (32 KiB): fewer query
/// vectors per tile for wide heads.
constexpr int64_t kScratchFloats = 8192;
/// Query vectors that share each key or value chunk loaded.
constexpr int64_t kUnroll = 2;
/// Chunks of a head_dim row held in registers at a time.
constexpr int64_t kChunkGroup = 8;

//===----------------------------------------------------------------------===//
// Vector helpers
//===----------------------------------------------------------------------===//

VectorType f32Vec(Emitter &e) {
  return VectorType::get({L}, e.builder().getF32Type());
}
VectorType i32Vec(Emitter &e) {
  return VectorType::get({L}, e.builder().getI32Type());
}
Value vf(Emitter &e, double c) { return e.splat(e.f32(c), L); }
Value shuffle(Emitter &e, Value a, Value b, ArrayRef<int64_t> mask) {
  return vector::ShuffleOp::create(e.builder(), e.location(), a, b, mask);
}
/// a > b ? a : b (one maxps on x86).
Value vmax(Emitter &e, Value a, Value b) {
  return e.select(e.fcmp(arith::CmpFPredicate::OGT, a, b), a, b);
}
/// The maximum of the lanes of `v`, in every lane.
Value splatMax(Emitter &e, Value v) {
  v = vmax(e, v, shuffle(e, v, v, {1, 0, 3, 2, 5, 4, 7, 6}));
  v = vmax(e, v, shuffle(e, v, v, {2, 3, 0, 1, 6, 7, 4, 5}));
  return vmax(e, v, shuffle(e, v, v, {4, 5, 6, 7, 0, 1, 2, 3}));
}
/// Lane j of the result: the sum of the lanes of a[j] (8 vectors of 8).
Value laneSums(Emitter &e, ArrayRef<Value> a) {
  static_assert(L == 8, "the shuffle tree sums 8 vectors of 8 lanes");
  SmallVector<Value> pairs, quads;
  for (int64_t i = 0; i < 8; i += 2)
    pairs.push_back(
        e.fadd(shuffle(e, a[i], a[i + 1], {0, 8, 1, 9, 4, 12, 5, 13}),
               shuffle(e, a[i], a[i + 1], {2, 10, 3, 11, 6, 14, 7, 15})));
  for (int64_t i = 0; i < 4; i += 2)
    quads.push_back(
        e.fadd(shuffle(e, pairs[i], pairs[i + 1], {0, 1, 8, 9, 4, 5, 12, 13}),
               shuffle(e, pairs[i], pairs[i + 1], {2, 3, 10, 11, 6, 7, 14, 15})));
  return e.fadd(shuffle(e, quads[0], quads[1], {0, 1, 2, 3, 8, 9, 10, 11}),
                shuffle(e, quads[0], quads[1], {4, 5, 6, 7, 12, 13, 14, 15}));
}

/// exp(x) on a vector of f32, as arithmetic: n = round(x / ln 2) by the
/// 1.5 * 2^23 rounding constant (which also leaves n + 127 in the low bits,
/// shifted into 2^n's exponent), r = x - n ln 2 in two parts, exp(r) by the
/// degree-7 polynomial of SLEEF's expf (all steps fused multiply-adds), and
/// 0 below -87 (exp(-87) = 1.6e-38; -inf gives 0). Inputs above 88 are not
/// supported (the softmax only takes exponentials of x <= 0). At most
/// 0.99 ulp from exp over every float in [-87, 0] (checked exhaustively
/// against a double exp); exp(0) = 1 exactly; NaN stays NaN.
Value vexp(Emitter &e, Value x) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value lo = vf(e, -87.0);
  Value under = e.fcmp(arith::CmpFPredicate::OLT, x, lo);
  Value xc = e.select(under, lo, x);
  Value magic = vf(e, 12583039.0); // 1.5 * 2^23 + 127
  Value t = e.fma(xc, vf(e, 1.44269504088896341), magic);
  Value n = e.fsub(t, magic);
  Value r = e.fma(n, vf(e, -0.693145751953125), xc);
  r = e.fma(n, vf(e, -1.428606765330187045e-06), r);
  Value u = vf(e, 0.000198527617612853646278381);
  for (double c : {0.00139304355252534151077271, 0.00833336077630519866943359,
                   0.0416664853692054748535156, 0.166666671633720397949219,
                   0.5})
    u = e.fma(u, r, vf(e, c));
  u = e.fadd(e.fma(e.fmul(r, r), u, r), vf(e, 1.0));
  Value bits = arith::BitcastOp::create(b, loc, i32Vec(e), t);
  Value pow2 = arith::BitcastOp::create(
      b, loc, f32Vec(e),
      arith::ShLIOp::create(b, loc, bits, e.splat(e.i32(23), L)));
  return e.select(under, vf(e, 0.0), e.fmul(u, pow2));
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

/// Visible keys of one row in one walk: lo <= t <= hi (lo absent: 0).
struct RowBounds {
  Value lo, hi; // index
};
using BoundsFn = std::function<RowBounds(Emitter &, Value)>;
/// (page, offset) of each key of a block.
using KeyRows = SmallVector<std::pair<Value, Value>>;

struct PrefillLowering {
  PrefillAttentionOp op;
  int64_t hq, d, hkv, p, group, window, anchor;
  int64_t chunks, block, subs, tileRows, slots;
  Value k, v, pt, scale;
  // Scratch, one row per query vector of a tile (slot), padded to a
  // multiple of kUnroll.
  Value acc;   // [slots, d]: unnormalised outputs
  Value state; // [slots, 2 * L]: per-lane sums, running maximum, the
               // block's rescale
  Value probs; // [slots, block]: a block's dot products, then weights

  explicit PrefillLowering(PrefillAttentionOp op) : op(op) {
    hq = staticDim(op.getQ(), 1);
    d = staticDim(op.getQ(), 2);
    hkv = staticDim(op.getKCache(), 1);
    p = staticDim(op.getKCache(), 2);
    group = hq / hkv;
    window = op.getWindow();
    anchor = op.getAnchor();
    chunks = d / L;
    // Sixteen keys a block up to head_dim 128, eight beyond (a block's
    // keys and values stay in L1).
    block = d <= 128 ? 2 * L : L;
    subs = block / L;
    int64_t perSlot = d + 2 * L + block;
    tileRows = std::max<int64_t>(
        1, std::min(kTileQueries, kScratchFloats / perSlot) / group);
    slots = (tileRows * group + kUnroll - 1) / kUnroll * kUnroll;
  }

  Value loadVec(Emitter &e, Value mem, ValueRange ivs) {
    return vector::LoadOp::create(e.builder(), e.location(), f32Vec(e), mem,
                                  ivs);
  }
  void storeVec(Emitter &e, Value vec, Value mem, ValueRange ivs) {
    vector::StoreOp::create(e.builder(), e.location(), vec, mem, ivs);
  }
  /// Chunk c of key/value row `row` of head g, as f32.
  Value loadChunk(Emitter &e, Value mem, std::pair<Value, Value> row, Value g,
                  int64_t c) {
    Type elt = cast<MemRefType>(mem.getType()).getElementType();
    Value raw = vector::LoadOp::create(
        e.builder(), e.location(), VectorType::get({L}, elt), mem,
        ValueRange{row.first, g, row.second, e.idx(c * L)});
    return e.toF32(raw);
  }

  void emit(Emitter &e) {
    k = op.getKCache();
    v = op.getVCache();
    pt = op.getPageTable();
    scale = vf(e, op.getScale().convertToDouble());
    allocateScratch(e);
    Value seqs = e.dim(op.getLens(), 0);
    e.forEach(e.idx(0), seqs, [&](Emitter &e, Value s) {
      Value n = e.loadIndex(op.getLens(), {s});
      Value r0 = e.loadIndex(op.getRowStarts(), {s});
      Value r1 = e.loadIndex(op.getRowStarts(), {e.add(s, e.idx(1))});
      Value first = e.sub(n, e.sub(r1, r0)); // position of row r0
      // Heads outermost: one head's keys and values stay in cache while
      // the tiles of rows walk them.
      e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
        e.forLoop(r0, r1, e.idx(tileRows), {},
                  [&](Emitter &e, Value ra, ValueRange) {
                    Value rb = e.mins(r1, e.add(ra, e.idx(tileRows)));
                    Tile tile{s, n, g, ra, e.sub(rb, ra),
                              e.add(first, e.sub(ra, r0))};
                    emitTile(e, tile);
                    return SmallVector<Value>();
                  });
      });
    });
  }

  void allocateScratch(Emitter &e) {
    OpBuilder &b = e.builder();
    OpBuilder::InsertionGuard guard(b);
    if (auto fn = op->getParentOfType<FunctionOpInterface>())
      b.setInsertionPointToStart(&fn.getFunctionBody().front());
    Type f32 = b.getF32Type();
    auto buffer = [&](int64_t width) -> Value {
      return memref::AllocaOp::create(b, e.location(),
                                      MemRefType::get({slots, width}, f32));
    };
    acc = buffer(d);
    state = buffer(2 * L);
    probs = buffer(block);
  }

  /// Rows [ra, ra + rows) of sequence s (length n) for key/value head g,
  /// row ra at position pos0.
  struct Tile {
    Value s, n, g, ra, rows, pos0;
  };

  /// The first position of the window of the row at `pos`.
  Value windowStart(Emitter &e, Value pos) {
    return e.maxs(e.idx(0), e.sub(e.add(pos, e.idx(1)), e.idx(window)));
  }

  /// The query vector of slot `slot` (the last one for padding slots):
  /// its row within the tile and its query head.
  std::pair<Value, Value> query(Emitter &e, const Tile &t, Value queries,
                                Value slot) {
    Value i = e.mins(slot, e.sub(queries, e.idx(1)));
    return {e.divs(i, e.idx(group)),
            e.add(e.mul(t.g, e.idx(group)), e.rems(i, e.idx(group)))};
  }

  void emitTile(Emitter &e, const Tile &t) {
    Value queries = e.mul(t.rows, e.idx(group));
    Value units = e.ceilDiv(queries, e.idx(kUnroll));
    Value used = e.mul(units, e.idx(kUnroll));
    Value posLast = e.add(t.pos0, e.sub(t.rows, e.idx(1)));
    // Empty state.
    e.forEach(e.idx(0), used, [&](Emitter &e, Value slot) {
      Value zero = vf(e, 0.0);
      for (int64_t c = 0; c < chunks; ++c)
        storeVec(e, zero, acc, {slot, e.idx(c * L)});
      storeVec(e, zero, state, {slot, e.idx(0)});
      e.store(e.negInf(), state, {slot, e.idx(L)});
    });
    if (window > 0 && anchor > 0) {
      // Keys t < min(anchor, window start of the row); the tile's last row
      // has the latest window start.
      Value end = e.mins(e.idx(anchor), windowStart(e, posLast));
      walk(e, t, queries, units, e.idx(0), end, [&](Emitter &e, Value pos) {
        return RowBounds{
            Value(), e.sub(e.mins(e.idx(anchor), windowStart(e, pos)),
                           e.idx(1))};
      });
    }
    Value from = window > 0 ? windowStart(e, t.pos0) : e.idx(0);
    walk(e, t, queries, units, from, e.add(posLast, e.idx(1)),
         [&](Emitter &e, Value pos) {
           return RowBounds{window > 0 ? windowStart(e, pos) : Value(), pos};
         });
    // out = acc / l (l >= 1: the row's own key is always visible).
    e.forEach(e.idx(0), queries, [&](Emitter &e, Value slot) {
      auto [row, head] = query(e, t, queries, slot);
      Value l = e.reduceAdd(loadVec(e, state, {slot, e.idx(0)}));
      Value inv = e.splat(e.fdiv(e.f32(1.0), l), L);
      for (int64_t c = 0; c < chunks; ++c)
        storeVec(e, e.fmul(loadVec(e, acc, {slot, e.idx(c * L)}), inv),
                 op.getOut(), {e.add(t.ra, row), head, e.idx(c * L)});
    });
  }

  /// Folds keys [from, to) into the tile's state a block at a time;
  /// `bounds` gives the keys the row at a position sees among them.
  void walk(Emitter &e, const Tile &t, Value queries, Value units, Value from,
            Value to, const BoundsFn &bounds) {
    Value start = e.mul(e.divs(from, e.idx(block)), e.idx(block));
    e.forLoop(start, to, e.idx(block), {},
              [&](Emitter &e, Value t0, ValueRange) {
                // Every key position clamped to the sequence's last: the
                // last block reads no position past the length, nor its
                // page.
                KeyRows keys;
                Value last = e.sub(t.n, e.idx(1));
                for (int64_t j = 0; j < block; ++j) {
                  Value pos = e.mins(e.add(t0, e.idx(j)), last);
                  keys.push_back(
                      {e.loadIndex(pt, {t.s, e.divs(pos, e.idx(p))}),
                       e.rems(pos, e.idx(p))});
                }
                foldBlock(e, t, queries, units, t0, keys, bounds);
                return SmallVector<Value>();
              });
  }

  /// Folds the block of keys at t0 into every query vector of the tile, in
  /// three passes whose work is independent from one query vector to the
  /// next: dot products, softmax, values. The first and last take kUnroll
  /// query vectors at a time, each key or value chunk loaded once for
  /// them.
  void foldBlock(Emitter &e, const Tile &t, Value queries, Value units,
                 Value t0, const KeyRows &keys, const BoundsFn &bounds) {
    e.forEach(e.idx(0), units, [&](Emitter &e, Value u) {
      dotProducts(e, t, queries, u, keys);
    });
    e.forEach(e.idx(0), e.mul(units, e.idx(kUnroll)),
              [&](Emitter &e, Value slot) {
                softmax(e, t, queries, slot, t0, bounds);
              });
    e.forEach(e.idx(0), units,
              [&](Emitter &e, Value u) { values(e, t, u, keys); });
  }

  /// probs[slot] = q . k_j for the kUnroll slots of unit u.
  void dotProducts(Emitter &e, const Tile &t, Value queries, Value u,
                   const KeyRows &keys) {
    SmallVector<Value> slot, row, head;
    for (int64_t i = 0; i < kUnroll; ++i) {
      slot.push_back(e.add(e.mul(u, e.idx(kUnroll)), e.idx(i)));
      auto [r, h] = query(e, t, queries, slot.back());
      row.push_back(e.add(t.ra, r));
      head.push_back(h);
    }
    for (int64_t sb = 0; sb < subs; ++sb) {
      // dots[i][j]: lanes of partial sums of query i . key sb * L + j.
      SmallVector<SmallVector<Value>> dots(kUnroll, SmallVector<Value>(L));
      for (int64_t c = 0; c < chunks; ++c) {
        SmallVector<Value> q;
        for (int64_t i = 0; i < kUnroll; ++i)
          q.push_back(loadVec(e, op.getQ(), {row[i], head[i], e.idx(c * L)}));
        for (int64_t j = 0; j < L; ++j) {
          Value kc = loadChunk(e, k, keys[sb * L + j], t.g, c);
          for (int64_t i = 0; i < kUnroll; ++i)
            dots[i][j] = c ? e.fma(q[i], kc, dots[i][j]) : e.fmul(q[i], kc);
        }
      }
      for (int64_t i = 0; i < kUnroll; ++i)
        storeVec(e, laneSums(e, dots[i]), probs, {slot[i], e.idx(sb * L)});
    }
  }

  /// Online softmax of one slot over the block: the logits scaled and
  /// masked, the running maximum and sums updated, probs[slot] turned into
  /// weights and the rescale of the earlier output left in
  /// state[slot][L + 1].
  void softmax(Emitter &e, const Tile &t, Value queries, Value slot, Value t0,
               const BoundsFn &bounds) {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    RowBounds rb = bounds(e, e.add(t.pos0, query(e, t, queries, slot).first));
    SmallVector<int32_t> iota(L);
    for (int64_t i = 0; i < L; ++i)
      iota[i] = static_cast<int32_t>(i);
    Value lanes = arith::ConstantOp::create(
        b, loc,
        cast<TypedAttr>(DenseElementsAttr::get(i32Vec(e), ArrayRef(iota))));
    Value negInf = vf(e, -std::numeric_limits<double>::infinity());
    SmallVector<Value> logit;
    for (int64_t sb = 0; sb < subs; ++sb) {
      Value keyPos = arith::AddIOp::create(
          b, loc, e.splat(e.toI32(e.add(t0, e.idx(sb * L))), L), lanes);
      Value ok = e.cmp(arith::CmpIPredicate::sle, keyPos,
                       e.splat(e.toI32(rb.hi), L));
      if (rb.lo)
        ok = e.band(ok, e.cmp(arith::CmpIPredicate::sge, keyPos,
                              e.splat(e.toI32(rb.lo), L)));
      Value dot = loadVec(e, probs, {slot, e.idx(sb * L)});
      logit.push_back(e.select(ok, e.fmul(dot, scale), negInf));
    }
    Value mOld = e.splat(e.load(state, {slot, e.idx(L)}), L);
    Value lOld = loadVec(e, state, {slot, e.idx(0)});
    Value top = logit[0];
    for (int64_t sb = 1; sb < subs; ++sb)
      top = vmax(e, top, logit[sb]);
    Value mNew = vmax(e, mOld, splatMax(e, top));
    // With nothing visible yet, mNew is -inf: take exponentials against 0.
    Value ref = e.select(e.fcmp(arith::CmpFPredicate::OEQ, mNew, negInf),
                         vf(e, 0.0), mNew);
    Value corr = vexp(e, e.fsub(mOld, ref));
    Value l = e.fmul(lOld, corr);
    for (int64_t sb = 0; sb < subs; ++sb) {
      Value w = vexp(e, e.fsub(logit[sb], ref));
      storeVec(e, w, probs, {slot, e.idx(sb * L)});
      l = e.fadd(l, w);
    }
    storeVec(e, l, state, {slot, e.idx(0)});
    e.store(vector::ExtractOp::create(b, loc, mNew, ArrayRef<int64_t>{0}),
            state, {slot, e.idx(L)});
    e.store(vector::ExtractOp::create(b, loc, corr, ArrayRef<int64_t>{0}),
            state, {slot, e.idx(L + 1)});
  }

  /// acc[slot] = acc[slot] * rescale + sum_j weight_j v_j for the kUnroll
  /// slots of unit u.
  void values(Emitter &e, const Tile &t, Value u, const KeyRows &keys) {
    SmallVector<Value> slot, corr;
    for (int64_t i = 0; i < kUnroll; ++i) {
      slot.push_back(e.add(e.mul(u, e.idx(kUnroll)), e.idx(i)));
      corr.push_back(e.splat(e.load(state, {slot[i], e.idx(L + 1)}), L));
    }
    for (int64_t c0 = 0; c0 < chunks; c0 += kChunkGroup) {
      int64_t c1 = std::min(chunks, c0 + kChunkGroup);
      SmallVector<SmallVector<Value>> o(kUnroll);
      for (int64_t i = 0; i < kUnroll; ++i)
        for (int64_t c = c0; c < c1; ++c)
          o[i].push_back(
              e.fmul(loadVec(e, acc, {slot[i], e.idx(c * L)}), corr[i]));
      for (int64_t j = 0; j < block; ++j) {
        SmallVector<Value> w;
        for (int64_t i = 0; i < kUnroll; ++i)
          w.push_back(e.splat(e.load(probs, {slot[i], e.idx(j)}), L));
        for (int64_t c = c0; c < c1; ++c) {
          Value vc = loadChunk(e, v, keys[j], t.g, c);
          for (int64_t i = 0; i < kUnroll; ++i)
            o[i][c - c0] = e.fma(vc, w[i], o[i][c - c0]);
        }
      }
      for (int64_t i = 0; i < kUnroll; ++i)
        for (int64_t c = c0; c < c1; ++c)
          storeVec(e, o[i][c - c0], acc, {slot[i], e.idx(c * L)});
    }
  }
};

void lowerPrefillAttention(PrefillAttentionOp op, Emitter &e,
                           PatternRewriter &rewriter) {
  PrefillLowering(op).emit(e);
  (void)rewriter;
}

} // namespace

void mlir::condensate::populatePrefillToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<PrefillAttentionOp, lowerPrefillAttention>>(
      patterns.getContext());
}
