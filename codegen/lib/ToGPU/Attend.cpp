//===- Attend.cpp - sparse and dense attention kernels --------------------===//
//
// Lowers sparse_attend and dense_attend to one block per (split, kv head,
// sequence; a sparse launch runs the splits its batch needs): lane groups of L
// lanes each read one key and one value row with 16-byte loads, serve all G
// query heads of the group (GQA), keep online-softmax state in registers, and
// combine through shared memory.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"
#include "condensate/Passes/Passes.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// Rows of an mma.sync.m16n8k16 tile: the query heads of a GQA group the
/// tensor-core body serves at once.
constexpr int64_t kMmaRows = 16;
/// Keys per tile of the tensor-core body: the k extent of one m16n8k16
/// product of weights and values (two n-tiles of the score product).
constexpr int64_t kMmaKeys = 16;
/// The head_dim the tensor-core body takes only with a cp.async ring
/// (attend-stages >= 2; 64 and 128 take either pipeline).
constexpr int64_t kMmaRingOnlyDim = 256;
/// Query-fragment entries a thread of the tensor-core body fills a round,
/// their loads issued together.
constexpr int64_t kFillUnroll = 8;

/// Shared state of the attention kernel builder.
struct AttentionShape {
  int64_t hq, hkv, group, d, p;
  RowSplit split;
  int64_t groups;  // lane groups per block (warps of the tensor-core body)
  int64_t threads; // groups * lanes
  bool mma;        // the tensor-core body (AttendArgs::emitMma)
  int64_t steps;   // k-steps of 16 channels in its score product
  /// The tensor-core body's pipeline: 1, the next tile's rows prefetched
  /// into registers; N >= 2, a ring of N tiles a warp in dynamic shared
  /// memory filled by cp.async (`ringBytes` of it).
  int64_t stages = 1;
  int64_t ringBytes = 0;
  /// 16-byte fragments a lane loads a tile: two key rows of D / 32 and
  /// four value rows of D / 64.
  int64_t fragments() const { return 2 * (d / 32) + 4 * (d / 64); }
};

SmallVector<Type> attentionSharedTypes(MLIRContext *ctx,
                                       const AttentionShape &s);

/// Whether `mem` is a row-major memref without offset whose dimensions past
/// the first are static: cp.async reads its elements at addresses computed
/// from its shape.
bool plainRowMajor(Value mem) {
  auto type = cast<MemRefType>(mem.getType());
  if (!type.getLayout().isIdentity())
    return false;
  for (int64_t i = 1; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      return false;
  return true;
}

AttentionShape attentionShape(Value q, Value k, Value v,
                              const KernelBuilder &kb) {
  bool tensorCores = kb.tensorCores();
  AttentionShape s;
  s.hq = staticDim(q, 1);
  s.d = staticDim(q, 2);
  s.hkv = staticDim(k, 1);
  s.p = staticDim(k, 2);
  s.group = s.hq / s.hkv;
  s.split = RowSplit::of(s.d, elementType(k));
  // Up to 128 threads (or the attend-warps option's count of warps or lane
  // groups), limited by the shared memory of the final combine (and of the
  // tensor-core body's query fragments).
  auto sizeBlock = [&](AttentionShape &s) {
    int64_t perGroupBytes = s.group * (s.d + 2) * 4 + 4;
    int64_t fragmentBytes = s.mma ? s.steps * 2 * kWarp * 4 * 4 : 0;
    int64_t byMemory =
        std::max<int64_t>(1, (40 * 1024 - fragmentBytes) / perGroupBytes);
    int64_t lanes = s.mma ? kWarp : s.split.lanes;
    int64_t wanted = kb.attendWarps() > 0 ? kb.attendWarps() : 128 / lanes;
    s.groups = std::max<int64_t>(1, std::min(wanted, byMemory));
    s.threads = s.groups * lanes;
  };
  s.mma = tensorCores && elementType(k).isBF16() && s.group <= kMmaRows &&
          (s.d == 64 || s.d == 128 || s.d == kMmaRingOnlyDim);
  s.steps = s.d / 16;
  sizeBlock(s);
  // The ring, where attend-stages asks for one: as many stages as
  // requested that fit beside the static buffers; fewer than 2, registers.
  // The rule is registers at head_dim 64 and 128 (the rings measured
  // slower there, with the same outputs: docs/BENCHMARKS-HISTORY.md,
  // session 35) and a ring of 2 at kMmaRingOnlyDim.
  int64_t requested = kb.attendStages();
  if (requested == 0 && s.d == kMmaRingOnlyDim)
    requested = 2;
  if (s.mma && requested >= 2 && plainRowMajor(k) &&
      k.getType() == v.getType()) {
    int64_t perStage = s.groups * kWarp * s.fragments() * 16;
    AttentionShape withRing = s;
    withRing.stages = 2;
    int64_t fixed = KernelBuilder::workgroupBytes(
        attentionSharedTypes(k.getContext(), withRing));
    int64_t stages =
        std::min(requested, (kb.sharedBytesOptin() - fixed) / perStage);
    if (stages >= 2) {
      s.stages = stages;
      s.ringBytes = stages * perStage;
    }
  }
  // With a ring and no attend-warps request, the warps a block that pack
  // the most warps an SM into its shared memory (each block's ring, its
  // static buffers and the 1 KB the driver reserves a block; the SM holds
  // the opt-in limit plus that 1 KB), up to 128 threads, ties to the
  // larger block. At head_dim 256, 8 heads: 3 warps, 2 blocks an SM (6
  // warps) where 2 a block fitted 2 blocks (4 warps); Nsight Compute found
  // those 4 warps issuing an instruction every 5 cycles each, bound by
  // their own latencies (docs/BENCHMARKS-HISTORY.md, session 36).
  if (s.stages >= 2 && kb.attendWarps() == 0) {
    const int64_t perWarp = s.stages * kWarp * s.fragments() * 16;
    const int64_t capacity = kb.sharedBytesOptin() + 1024;
    int64_t bestWarps = 0;
    AttentionShape best = s;
    for (int64_t w = 1; w * kWarp <= 128; ++w) {
      AttentionShape t = s;
      t.groups = w;
      t.threads = w * kWarp;
      t.ringBytes = w * perWarp;
      int64_t fixed = KernelBuilder::workgroupBytes(
          attentionSharedTypes(k.getContext(), t));
      // The block must fit, and its accumulators the ring after the loop.
      if (fixed + t.ringBytes > kb.sharedBytesOptin() ||
          w * s.group * s.d * 4 > t.ringBytes)
        continue;
      int64_t warps = capacity / (fixed + t.ringBytes + 1024) * w;
      if (warps >= bestWarps) {
        bestWarps = warps;
        best = t;
      }
    }
    if (bestWarps > 0)
      s = best;
  }
  // At kMmaRingOnlyDim the tensor-core body runs with a ring only: a tile
  // prefetched in registers beside a lane's accumulators spills (ptxas,
  // 255 registers: 556 bytes beside 128 untransposed, 48-100 beside the
  // transposed body's 64 at 8/1/256, against none with a ring of 2).
  if (s.mma && s.d == kMmaRingOnlyDim && s.stages < 2) {
    s.mma = false;
    sizeBlock(s);
  }
  return s;
}

/// The slot of a body's list as (position, valid).
using PositionFn = std::function<std::pair<Value, Value>(GPUEmitter &, Value)>;

/// What an attention body reads and writes for its block: the operands, the
/// block's (sequence b, kv head g, split) and its slots [v0, v1).
struct AttendArgs {
  Value q, k, v, pageTable, po, pml;
  Value b, g, split, v0, v1, scale;
  ValueRange smem;
  PositionFn position;

  /// The lane-group body (CUDA cores).
  void emitLanes(GPUEmitter &e, const AttentionShape &s) const;
  /// The tensor-core body.
  void emitMma(GPUEmitter &e, const AttentionShape &s) const;
};

/// The block's partial for its split, from the per-group state in shared
/// memory (sm_m[groups][G], sm_l[groups][G], sm_c[groups],
/// sm_acc[groups][G][D], written before a barrier): threads over (head,
/// channel) pairs merge the groups' online-softmax states.
void emitSplitPartial(GPUEmitter &e, const AttentionShape &s, Value tid,
                      ValueRange smem, Value po, Value pml, Value b, Value g,
                      Value split) {
  int64_t G = s.group;
  Value smM = smem[0], smL = smem[1], smC = smem[2], smAcc = smem[3];
  // Threads over (head, channel) pairs produce the split's partial.
  Value total = e.idx(G * s.d);
  e.forLoop(
      tid, total, e.idx(s.threads), {},
      [&](Emitter &e, Value pair, ValueRange) -> SmallVector<Value> {
        Value i = e.divs(pair, e.idx(s.d));
        Value c = e.rems(pair, e.idx(s.d));
        Value m = e.forLoop(
            e.idx(0), e.idx(s.groups), e.idx(1), {e.negInf()},
            [&](Emitter &e, Value r, ValueRange acc) -> SmallVector<Value> {
              return {e.fmax(acc[0], e.load(smM, {r, i}))};
            })[0];
        Value live = e.fcmp(arith::CmpFPredicate::OGT, m, e.negInf());
        auto sums = e.forLoop(
            e.idx(0), e.idx(s.groups), e.idx(1),
            {e.f32(0.0), e.f32(0.0), e.f32(0.0)},
            [&](Emitter &ee, Value r, ValueRange acc) -> SmallVector<Value> {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value mr = e.load(smM, {r, i});
              Value w = e.select(live, e.fastExp(e.fsub(mr, m)), e.f32(0.0));
              w = e.select(e.fcmp(arith::CmpFPredicate::OGT, mr, e.negInf()), w,
                           e.f32(0.0));
              return {e.fadd(acc[0], e.fmul(w, e.load(smL, {r, i}))),
                      e.fadd(acc[1], e.fmul(w, e.load(smAcc, {r, i, c}))),
                      e.fadd(acc[2], e.load(smC, {r}))};
            });
        Value h = e.add(e.mul(g, e.idx(G)), i);
        e.store(sums[1], po, {b, h, split, c});
        e.ifThen(e.eq(c, e.idx(0)), [&](Emitter &e) {
          e.store(m, pml, {b, h, split, e.idx(0)});
          e.store(sums[0], pml, {b, h, split, e.idx(1)});
          e.store(sums[2], pml, {b, h, split, e.idx(2)});
        });
        return {};
      });
}

/// Emits the body of an attention kernel: lane groups walk `slots`
/// [v0, v1) with stride `groups`; `position(v)` yields (t, valid).
void AttendArgs::emitLanes(GPUEmitter &e, const AttentionShape &s) const {
  int64_t L = s.split.lanes, E = s.split.elems, G = s.group;
  LanePlace at = e.lanePlace(s.split);
  Value tid = at.tid, gid = at.group, li = at.lane, col = at.col;
  Type f32 = e.builder().getF32Type();
  int64_t kvBytes = elementBytes(elementType(k));
  int64_t align = vectorAlign(E * kvBytes);
  // Query slices of the group's heads, prescaled by the softmax scale.
  SmallVector<Value> qs;
  for (int64_t i = 0; i < G; ++i) {
    Value h = e.add(e.mul(g, e.idx(G)), e.idx(i));
    Value qv = e.vecLoad(q, {b, h, col}, E, vectorAlign(E * 4));
    qs.push_back(e.fmul(qv, e.splat(scale, E)));
  }
  // Online-softmax state: m[G], l[G], count, acc[G].
  SmallVector<Value> init;
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.negInf());
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.f32(0.0));
  init.push_back(e.f32(0.0));
  for (int64_t i = 0; i < G; ++i)
    init.push_back(e.splat(e.f32(0.0), E));
  // Warp-uniform rounds: every lane runs the same trip count so the group
  // shuffles stay converged; out-of-range or masked slots read a safe row
  // and leave the state unchanged. Each round a group takes kUnroll slots.
  // The loop is software-pipelined: a round issues the loads of the next
  // round's rows before its own arithmetic, so a lane keeps 2 * kUnroll
  // K/V rows in flight across the exp/shuffle latency.
  constexpr int64_t kUnroll = 2;
  int64_t perRound = s.groups * kUnroll;
  Value count = e.maxs(e.sub(v1, v0), e.idx(0));
  Value rounds = e.ceilDiv(count, e.idx(perRound));
  // (valid[kUnroll], k rows[kUnroll], v rows[kUnroll]) of round r; only
  // called with r < rounds + 1 and rounds > 0, so v0 is a slot in range.
  auto loadRound = [&](GPUEmitter &e, Value r) {
    SmallVector<Value> valid, kr, vr;
    for (int64_t u = 0; u < kUnroll; ++u) {
      Value slot = e.add(e.add(v0, e.mul(r, e.idx(perRound))),
                         e.add(e.idx(u * s.groups), gid));
      Value inRange = e.lt(slot, v1);
      auto [t, posValid] = position(e, e.select(inRange, slot, v0));
      Value ok = e.band(inRange, posValid);
      Value tSafe = e.select(ok, t, e.idx(0));
      Value page = e.loadIndex(pageTable, {b, e.divs(tSafe, e.idx(s.p))});
      Value off = e.rems(tSafe, e.idx(s.p));
      valid.push_back(ok);
      kr.push_back(e.vecLoad(k, {page, g, off, col}, E, align));
      vr.push_back(e.vecLoad(v, {page, g, off, col}, E, align));
    }
    SmallVector<Value> out(valid);
    out.append(kr.begin(), kr.end());
    out.append(vr.begin(), vr.end());
    return out;
  };
  // The first round's rows (none when the split is empty).
  SmallVector<Type> rowTypes(kUnroll, e.builder().getI1Type());
  for (int64_t u = 0; u < 2 * kUnroll; ++u)
    rowTypes.push_back(VectorType::get({E}, elementType(k)));
  SmallVector<Value> first = e.ifElse(
      e.gt(rounds, e.idx(0)), rowTypes,
      [&](Emitter &ee) -> SmallVector<Value> {
        return loadRound(static_cast<GPUEmitter &>(ee), ee.idx(0));
      },
      [&](Emitter &ee) -> SmallVector<Value> {
        SmallVector<Value> none(kUnroll, ee.i1(false));
        for (int64_t u = 0; u < 2 * kUnroll; ++u)
          none.push_back(arith::ConstantOp::create(
              ee.builder(), ee.location(),
              DenseElementsAttr::get(
                  cast<ShapedType>(rowTypes[kUnroll + u]),
                  ee.builder().getZeroAttr(elementType(k)))));
        return none;
      });
  int64_t stateSize = init.size();
  init.append(first.begin(), first.end());
  auto state =
      e.forLoop(e.idx(0), rounds, e.idx(1), init,
                [&](Emitter &ee, Value r, ValueRange st) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  // Prefetch round r + 1 (its slots past v1 read the safe row).
                  SmallVector<Value> next = loadRound(e, e.add(r, e.idx(1)));
                  for (int64_t i = kUnroll; i < 3 * kUnroll; ++i)
                    next[i] = opaque(e, next[i]);
                  ValueRange rows = st.drop_front(stateSize);
                  ValueRange valid = rows.take_front(kUnroll);
                  ValueRange kr = rows.slice(kUnroll, kUnroll);
                  ValueRange vr = rows.slice(2 * kUnroll, kUnroll);
                  // One online-softmax update per round for all its slots: a
                  // single rescale of the accumulators instead of one per key.
                  SmallVector<Value> out(st.begin(), st.begin() + stateSize);
                  SmallVector<Value> kf, vf;
                  Value any = valid[0];
                  for (int64_t u = 0; u < kUnroll; ++u) {
                    kf.push_back(e.toF32(kr[u]));
                    vf.push_back(e.toF32(vr[u]));
                    if (u > 0)
                      any = e.bor(any, valid[u]);
                  }
                  for (int64_t i = 0; i < G; ++i) {
                    SmallVector<Value> dots;
                    Value mNew = out[i];
                    for (int64_t u = 0; u < kUnroll; ++u) {
                      Value dot = rowDot(e, nvvmTarget(), qs[i], kf[u], L);
                      dot = e.select(valid[u], dot, e.negInf());
                      dots.push_back(dot);
                      mNew = e.fmax(mNew, dot);
                    }
                    Value m = out[i], l = out[G + i], acc = out[2 * G + 1 + i];
                    Value corr = e.fastExp(e.fsub(m, mNew));
                    Value lNew = e.fmul(l, corr);
                    Value accNew = e.fmul(acc, e.splat(corr, E));
                    for (int64_t u = 0; u < kUnroll; ++u) {
                      Value pw = e.fastExp(e.fsub(dots[u], mNew));
                      lNew = e.fadd(lNew, pw);
                      accNew = e.fma(vf[u], e.splat(pw, E), accNew);
                    }
                    // A round with no valid slot leaves the state as it was
                    // (and avoids exp(-inf - -inf)).
                    out[i] = e.select(any, mNew, m);
                    out[G + i] = e.select(any, lNew, l);
                    out[2 * G + 1 + i] = e.select(any, accNew, acc);
                  }
                  for (int64_t u = 0; u < kUnroll; ++u)
                    out[2 * G] = e.select(
                        valid[u], e.fadd(out[2 * G], e.f32(1.0)), out[2 * G]);
                  out.append(next.begin(), next.end());
                  return out;
                });
  // Combine lane groups through shared memory: sm_m[groups][G],
  // sm_l[groups][G], sm_c[groups], sm_acc[groups][G][D].
  Value smM = smem[0], smL = smem[1], smC = smem[2], smAcc = smem[3];
  for (int64_t i = 0; i < G; ++i) {
    Value ii = e.idx(i);
    e.ifThen(e.eq(li, e.idx(0)), [&](Emitter &e) {
      e.store(state[i], smM, {gid, ii});
      e.store(state[G + i], smL, {gid, ii});
    });
    for (int64_t j = 0; j < E; ++j)
      e.store(e.extractElt(state[2 * G + 1 + i], j), smAcc,
              {gid, ii, e.add(col, e.idx(j))});
  }
  e.ifThen(e.eq(li, e.idx(0)),
           [&](Emitter &e) { e.store(state[2 * G], smC, {gid}); });
  e.barrier();
  emitSplitPartial(e, s, tid, smem, po, pml, b, g, split);
  (void)f32;
}

/// x (f32) as the bf16 pair hi + lo that represents it to 2^-16 of |x|:
/// two products on bf16 tensor cores keep the f32 kernels' accuracy.
std::pair<Value, Value> splitBF16(GPUEmitter &e, Value x) {
  Type bf16 = e.builder().getBF16Type();
  Value hi = e.truncf(x, bf16);
  Value lo = e.truncf(e.fsub(x, e.toF32(hi)), bf16);
  return {hi, lo};
}

/// A tile's update of 4 output accumulators, in two steps: acc[x] *
/// scale[x] (the online softmax's correction), then + A B for the hi and
/// then the lo half of the weights (A or B, the other side the values).
SmallVector<Value> rescaled(GPUEmitter &e, ArrayRef<Value> acc,
                            ArrayRef<Value> scale) {
  SmallVector<Value> out;
  for (int64_t x = 0; x < 4; ++x)
    out.push_back(e.fmul(acc[x], scale[x]));
  return out;
}
SmallVector<Value> productHiLo(GPUEmitter &e, ArrayRef<Value> acc,
                               ArrayRef<Value> aHi, ArrayRef<Value> aLo,
                               ArrayRef<Value> bHi, ArrayRef<Value> bLo) {
  return mmaBF16(e, aLo, bLo, mmaBF16(e, aHi, bHi, acc));
}

/// A tile's step of the online softmax for head slot h of a tensor-core
/// body's state (its maximum in st[h], its sum in st[2 + h]) given the
/// tile's maximum: the maximum advances and the sum is rescaled. Returns
/// the weights' exponent base (0 while no key is valid, so that the weights
/// are 0) and the correction of the head's accumulators.
std::pair<Value, Value> advanceMax(GPUEmitter &e, MutableArrayRef<Value> st,
                                   int64_t h, Value tileMax) {
  Value mNew = e.fmax(st[h], tileMax);
  Value mSafe = e.select(e.fcmp(arith::CmpFPredicate::OEQ, mNew, e.negInf()),
                         e.f32(0.0), mNew);
  Value corr = e.fastExp(e.fsub(st[h], mSafe));
  st[h] = mNew;
  st[2 + h] = e.fmul(st[2 + h], corr);
  return {mSafe, corr};
}

/// Adds a tile's valid keys (this lane's four value-row flags) to the
/// state's count, st[4].
void countValid(GPUEmitter &e, MutableArrayRef<Value> st,
                ArrayRef<Value> valid) {
  for (int64_t x = 0; x < 4; ++x)
    st[4] = e.select(valid[x], e.fadd(st[4], e.f32(1.0)), st[4]);
}

/// The tensor-core attention body (bf16 cache, head_dim 64, 128 or 256, GQA
/// group <= 16). Each warp takes tiles of kMmaKeys slots of [v0, v1) in
/// turn; the G query heads are the 16 rows of mma.sync.m16n8k16 (rows past
/// G are zero queries whose results are dropped), so one pass over a key
/// serves the whole group at the cost of its bytes, not of G shuffled dot
/// products. Lane (r, c) of a warp (r = lane / 4, c = lane % 4):
///   - scores S = Q K^T, two n-tiles of 8 keys: the lane loads 16 bytes of
///     keys r and r + 8 per 32 channels, channels [32 j + 8 c, +8) of chunk
///     j; the product's k order is permuted to match (the query fragments
///     are built in the same order), so no load is split;
///   - the query, prescaled, is split into bf16 hi + lo and both are
///     multiplied: the scores keep f32 accuracy (2^-16 of |q||k|);
///   - online softmax on the accumulators: a quad shuffle finds each row's
///     tile maximum; the weights P (also split hi + lo) become the A
///     fragment of O += P V directly (the score tiles' C layout is the A
///     layout);
///   - values: the lane loads 16 bytes of keys 2c, 2c + 1, 2c + 8, 2c + 9
///     at channels [64 i + 8 r, +8); n-tile (i, j) takes channel
///     64 i + 8 r + j from each, so output column n of that tile is channel
///     64 i + 8 n + j;
///   - a group of at most 8 heads (every real model's shape in
///     BENCHMARKS.md) would fill only rows 0-7, so both products are
///     transposed instead (transposedTile): S^T = K Q^T, the lane's key
///     words the A fragment as they are loaded and the query's row-r
///     registers the B fragment, so a lane holds keys r, r + 8 of heads
///     2c, 2c + 1 and keeps those heads' online softmax (its column's max
///     by shuffles over r); P^T's C fragment becomes the B fragment of
///     O^T += V^T P^T by one movmatrix transpose an 8 x 8 half; m-tile
///     (i, j) of 16 output channels has row r channel 64 i + 8 r + 2 j
///     and row r + 8 the next one (both in this lane's 16 bytes of value
///     rows). Half the products and half the accumulators of the
///     untransposed form (64 a lane at head_dim 256, not 128).
/// Invalid slots read the position-0 row and get weight 0; the warps'
/// states are combined through shared memory as in emitLanes.
void AttendArgs::emitMma(GPUEmitter &e, const AttentionShape &s) const {
  int64_t G = s.group, D = s.d, W = s.groups;
  // Both products transposed (S^T = K Q^T, O^T += V^T P^T: m-tiles of 16
  // channels) where the group fits the 8 columns of a B fragment, else
  // S = Q K^T and O += P V (n-tiles of 8 channels).
  const bool transposed = G <= 8;
  const int64_t tilesN = D / 8;  // n-tiles of O += P V
  const int64_t tilesM = D / 16; // m-tiles of O^T += V^T P^T
  const int64_t accs = 4 * (transposed ? tilesM : tilesN);
  OpBuilder &bd = e.builder();
  Type i32 = bd.getI32Type();
  Value tid = e.tid();
  Value warp = e.divs(tid, e.idx(kWarp));
  Value lane = e.rems(tid, e.idx(kWarp));
  Value r = e.divs(lane, e.idx(4)), c = e.rems(lane, e.idx(4));
  // With a ring the static buffers hold no accumulators (see below).
  const bool inRing = s.stages >= 2;
  Value smM = smem[0], smL = smem[1], smC = smem[2];
  Value smAcc = inRing ? Value() : smem[3];
  Value smQ = smem[inRing ? 3 : 4];

  // Query fragments, hi and lo, in each lane's register order: register x
  // of lane (r', c') at step t holds rows r' (x even) or r' + 8 (x odd),
  // channels 32 (t / 2) + 8 c' + 4 (t % 2) + 2 (x / 2) and the next one.
  // A thread loads its two channels once and writes both words, for
  // kFillUnroll entries a round with every round's loads issued first:
  // a loop of one entry an iteration waited for each entry's loads in
  // turn (64 of them a thread at head_dim 256 with 64 threads, 16 at 128).
  // A block with no slots (an empty split or a sparse group with nothing
  // selected) skips the fill: no warp has a tile to multiply.
  Value count = e.maxs(e.sub(v1, v0), e.idx(0));
  const int64_t entries = s.steps * kWarp * 4;
  const int64_t unroll =
      std::min<int64_t>(kFillUnroll, (entries + s.threads - 1) / s.threads);
  e.ifThen(e.gt(count, e.idx(0)), [&](Emitter &ee) {
    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
    e.forLoop(tid, e.idx(entries), e.idx(s.threads * unroll), {},
              [&](Emitter &ee, Value at0, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                struct Entry {
                  Value valid, step, ln, x, live, y0, y1;
                };
                SmallVector<Entry> items;
                for (int64_t u = 0; u < unroll; ++u) {
                  Value at = e.add(at0, e.idx(u * s.threads));
                  Entry it;
                  it.valid = e.lt(at, e.idx(entries));
                  at = e.select(it.valid, at, e.idx(0));
                  it.x = e.rems(at, e.idx(4));
                  it.ln = e.rems(e.divs(at, e.idx(4)), e.idx(kWarp));
                  it.step = e.divs(at, e.idx(4 * kWarp));
                  Value row = e.add(e.divs(it.ln, e.idx(4)),
                                    e.mul(e.rems(it.x, e.idx(2)), e.idx(8)));
                  Value ch =
                      e.add(e.add(e.mul(e.divs(it.step, e.idx(2)), e.idx(32)),
                                  e.mul(e.rems(it.ln, e.idx(4)), e.idx(8))),
                            e.add(e.mul(e.rems(it.step, e.idx(2)), e.idx(4)),
                                  e.mul(e.divs(it.x, e.idx(2)), e.idx(2))));
                  it.live = e.lt(row, e.idx(G));
                  Value h = e.add(e.mul(g, e.idx(G)),
                                  e.select(it.live, row, e.idx(0)));
                  it.y0 = e.load(q, {b, h, ch});
                  it.y1 = e.load(q, {b, h, e.add(ch, e.idx(1))});
                  items.push_back(it);
                }
                for (const Entry &it : items) {
                  auto element = [&](Value y) {
                    return splitBF16(
                        e, e.select(it.live, e.fmul(y, scale), e.f32(0.0)));
                  };
                  auto [h0, l0] = element(it.y0);
                  auto [h1, l1] = element(it.y1);
                  Value hi = packBF16(e, h0, h1), lo = packBF16(e, l0, l1);
                  e.ifThen(it.valid, [&](Emitter &e) {
                    e.store(hi, smQ, {it.step, e.idx(0), it.ln, it.x});
                    e.store(lo, smQ, {it.step, e.idx(1), it.ln, it.x});
                  });
                }
                return {};
              });
    e.barrier();
  });

  // State: m and l of rows r and r + 8 (transposed: of heads 2c and
  // 2c + 1), the count of keys attended, and the 4 accumulators of each
  // output tile.
  SmallVector<Value> init{e.negInf(), e.negInf(), e.f32(0.0), e.f32(0.0),
                          e.f32(0.0)};
  for (int64_t i = 0; i < accs; ++i)
    init.push_back(e.f32(0.0));
  Value tiles = e.ceilDiv(count, e.idx(kMmaKeys));
  Value mine = e.ceilDiv(e.maxs(e.sub(tiles, warp), e.idx(0)), e.idx(W));
  int64_t kWords = 2 * (D / 32), vRows = 4 * (D / 64);
  const int64_t F = s.fragments(); // kWords + vRows
  Type v4i32 = VectorType::get({4}, i32);
  // A 16-byte fragment of a cache row: the memref and the element at its
  // start.
  struct Fragment {
    Value mem;
    SmallVector<Value, 4> ivs;
  };
  // Where this lane's six rows of tile `it` of this warp are, flat (ok,
  // page, offset) each: the key rows r and r + 8, then the value rows of
  // keys 2c, 2c + 1, 2c + 8, 2c + 9 (the page a load of the page table).
  // Slots past v1 read the row of slot v0 (only called when this warp has
  // a tile, so v0 is in range) and are not ok.
  constexpr int64_t kRows = 6;
  auto tileRows = [&](GPUEmitter &e, Value it) {
    Value base =
        e.add(v0, e.mul(e.add(warp, e.mul(it, e.idx(W))), e.idx(kMmaKeys)));
    SmallVector<Value> rows;
    auto row = [&](Value key) {
      Value slot = e.add(base, key);
      Value inRange = e.lt(slot, v1);
      auto [t, posValid] = position(e, e.select(inRange, slot, v0));
      Value ok = e.band(inRange, posValid);
      Value tSafe = e.select(ok, t, e.idx(0));
      Value page = e.loadIndex(pageTable, {b, e.divs(tSafe, e.idx(s.p))});
      llvm::append_range(rows, ValueRange{ok, page, e.rems(tSafe, e.idx(s.p))});
    };
    for (int64_t j = 0; j < 2; ++j)
      row(e.add(r, e.idx(8 * j)));
    for (int64_t x = 0; x < 4; ++x)
      row(e.add(e.mul(c, e.idx(2)), e.idx((x % 2) + 8 * (x / 2))));
    return rows;
  };
  // The tile's valid flags (of its value rows) and the F fragments this
  // lane loads from `rows`: key words [key r, r + 8][D / 32], then value
  // rows [keys 2c, 2c + 1, 2c + 8, 2c + 9][D / 64].
  auto rowFragments = [&](GPUEmitter &e, ValueRange rows,
                          SmallVector<Value> &valid,
                          SmallVector<Fragment> &frags) {
    for (int64_t j = 0; j < 2; ++j) {
      Value page = rows[3 * j + 1], off = rows[3 * j + 2];
      for (int64_t ch = 0; ch < D / 32; ++ch)
        frags.push_back(
            {k, {page, g, off, e.add(e.idx(32 * ch), e.mul(c, e.idx(8)))}});
    }
    for (int64_t x = 0; x < 4; ++x) {
      Value page = rows[3 * (2 + x) + 1], off = rows[3 * (2 + x) + 2];
      valid.push_back(rows[3 * (2 + x)]);
      for (int64_t i = 0; i < D / 64; ++i)
        frags.push_back(
            {v, {page, g, off, e.add(e.idx(64 * i), e.mul(r, e.idx(8)))}});
    }
  };
  // The rows of tile `it`, flat: valid[4], the key words (vector<4xi32>),
  // the value rows (vector<8xbf16>), loaded into registers.
  auto loadTile = [&](GPUEmitter &e, Value it) {
    SmallVector<Value> out;
    SmallVector<Fragment> frags;
    rowFragments(e, tileRows(e, it), out, frags);
    for (int64_t f = 0; f < F; ++f) {
      Value raw = e.vecLoad(frags[f].mem, frags[f].ivs, 8, 16);
      out.push_back(f < kWords ? vector::BitCastOp::create(
                                     e.builder(), e.location(), v4i32, raw)
                               : raw);
    }
    return out;
  };
  // The ring (s.stages >= 2): per warp S tiles of F fragments of 32 lanes,
  // 16 bytes each ([warp][slot][fragment][lane]); a lane reads back only
  // the fragments it copied itself, so cp.async.wait_group alone orders
  // them (no barrier), and the warps' rings are disjoint.
  const int64_t S = s.stages;
  Value ring, ringBase;
  if (S >= 2) {
    ring = dynamicSharedArray(e, W * S * F * kWarp * 4, i32);
    ringBase =
        memref::ExtractAlignedPointerAsIndexOp::create(bd, e.location(), ring);
  }
  // The i32 index in the ring of this lane's fragment f of slot `slot`.
  auto ringIndex = [&](GPUEmitter &e, Value slot, int64_t f) {
    Value at =
        e.add(e.mul(e.add(e.mul(warp, e.idx(S)), slot), e.idx(F)), e.idx(f));
    return e.mul(e.add(e.mul(at, e.idx(kWarp)), lane), e.idx(4));
  };
  auto pointer = [&](GPUEmitter &e, Value address, unsigned space) -> Value {
    Value a64 = arith::IndexCastOp::create(e.builder(), e.location(),
                                           e.builder().getI64Type(), address);
    return LLVM::IntToPtrOp::create(
        e.builder(), e.location(),
        LLVM::LLVMPointerType::get(e.builder().getContext(), space), a64);
  };
  // The global address of a fragment (a row-major memref whose dimensions
  // past the first are static: plainRowMajor).
  auto globalPointer = [&](GPUEmitter &e, const Fragment &f) {
    auto type = cast<MemRefType>(f.mem.getType());
    Value linear = e.idx(0);
    int64_t stride = 1;
    for (int64_t i = type.getRank() - 1; i >= 0; --i) {
      linear = e.add(linear, e.mul(f.ivs[i], e.idx(stride)));
      if (i > 0)
        stride *= type.getDimSize(i);
    }
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(
        e.builder(), e.location(), f.mem);
    Value bytes = e.mul(linear, e.idx(elementBytes(type.getElementType())));
    return pointer(e, e.add(base, bytes), 1);
  };
  // Copies tile `it`'s fragments (its rows located by tileRows) into ring
  // slot `slot` where the warp has that tile and commits them as one group
  // (an empty group past its tiles, so that every iteration commits one);
  // its valid flags.
  auto issueTile = [&](GPUEmitter &e, Value it, Value slot, ValueRange rows) {
    SmallVector<Value> valid;
    SmallVector<Fragment> frags;
    rowFragments(e, rows, valid, frags);
    e.ifThen(e.lt(it, mine), [&](Emitter &ee) {
      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
      for (int64_t f = 0; f < F; ++f) {
        Value dst = pointer(
            e, e.add(ringBase, e.mul(ringIndex(e, slot, f), e.idx(4))), 3);
        NVVM::CpAsyncOp::create(e.builder(), e.location(), dst,
                                globalPointer(e, frags[f]), 16,
                                NVVM::LoadCacheModifierKind::CG, Value());
      }
    });
    NVVM::CpAsyncCommitGroupOp::create(e.builder(), e.location());
    return valid;
  };
  // Fragment f in ring slot `slot`, as loadTile's.
  auto readFragment = [&](GPUEmitter &e, Value slot, int64_t f) -> Value {
    Value words = e.vecLoad(ring, {ringIndex(e, slot, f)}, 4, 16);
    return f < kWords ? words
                      : vector::BitCastOp::create(
                            e.builder(), e.location(),
                            VectorType::get({8}, bd.getBF16Type()), words);
  };
  // Software pipelining. With registers: the first tile's rows are loaded
  // before the loop and each iteration loads the next tile's before its
  // arithmetic, so a warp keeps its loads in flight across the products
  // and exponentials; the loop carries the rows. With the ring: the first
  // S - 1 tiles are copied before the loop, each iteration copies tile
  // it + S - 1 and waits for tile it's group only, so S - 1 tiles stay in
  // flight; tile it + S - 1's rows were located (its page-table loads
  // issued) an iteration before, so that its copies need not wait for
  // them. The loop carries the valid flags of the tiles in flight and the
  // located rows of the next tile to copy.
  SmallVector<Type> rowTypes;
  if (S >= 2) {
    rowTypes.assign(4 * (S - 1), bd.getI1Type());
    for (int64_t i = 0; i < kRows; ++i)
      rowTypes.append({bd.getI1Type(), bd.getIndexType(), bd.getIndexType()});
  } else {
    rowTypes.assign(4, bd.getI1Type());
    for (int64_t i = 0; i < kWords; ++i)
      rowTypes.push_back(v4i32);
    for (int64_t i = 0; i < vRows; ++i)
      rowTypes.push_back(VectorType::get({8}, bd.getBF16Type()));
  }
  SmallVector<Value> first = e.ifElse(
      e.gt(mine, e.idx(0)), rowTypes,
      [&](Emitter &ee) -> SmallVector<Value> {
        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
        if (S < 2)
          return loadTile(e, e.idx(0));
        SmallVector<Value> flags;
        for (int64_t j = 0; j + 1 < S; ++j)
          llvm::append_range(
              flags, issueTile(e, e.idx(j), e.idx(j), tileRows(e, e.idx(j))));
        llvm::append_range(flags, tileRows(e, e.idx(S - 1)));
        return flags;
      },
      [&](Emitter &ee) -> SmallVector<Value> {
        SmallVector<Value> none;
        for (Type t : rowTypes) {
          if (auto type = dyn_cast<VectorType>(t))
            none.push_back(arith::ConstantOp::create(
                ee.builder(), ee.location(),
                DenseElementsAttr::get(
                    type, ee.builder().getZeroAttr(type.getElementType()))));
          else
            none.push_back(t.isIndex() ? ee.idx(0) : ee.i1(false));
        }
        return none;
      });
  int64_t stateSize = init.size();
  init.append(first.begin(), first.end());
  // One tile of the transposed body: S^T = K Q^T (the
  // tile's 16 keys the rows, this lane's key words as they are the A
  // fragment, the query's row-r registers the B fragment), so a lane holds
  // keys r and r + 8 of query heads 2c and 2c + 1 and keeps their online
  // softmax (m and l of heads 2c, 2c + 1 in the state's row slots, l a
  // partial over its keys); P^T's C fragment becomes the B fragment of
  // O^T += V^T P^T by one movmatrix transpose an 8 x 8 half. Half the
  // score products of S = Q K^T, whose rows 8-15 are empty.
  using FragmentFn = llvm::function_ref<Value(int64_t, int64_t)>;
  auto transposedTile = [&](GPUEmitter &e, ValueRange st, ArrayRef<Value> valid,
                            FragmentFn keyWords, FragmentFn valueRow,
                            ArrayRef<Value> next) -> SmallVector<Value> {
    SmallVector<Value> sT(4, e.f32(0.0));
    for (int64_t t = 0; t < s.steps; ++t) {
      Value hiWords =
          e.vecLoad(smQ, {e.idx(t), e.idx(0), lane, e.idx(0)}, 4, 16);
      Value loWords =
          e.vecLoad(smQ, {e.idx(t), e.idx(1), lane, e.idx(0)}, 4, 16);
      SmallVector<Value> bHi{e.extractElt(hiWords, 0),
                             e.extractElt(hiWords, 2)};
      SmallVector<Value> bLo{e.extractElt(loWords, 0),
                             e.extractElt(loWords, 2)};
      Value w0 = keyWords(0, t / 2), w1 = keyWords(1, t / 2);
      SmallVector<Value> aw{
          e.extractElt(w0, 2 * (t % 2)), e.extractElt(w1, 2 * (t % 2)),
          e.extractElt(w0, 2 * (t % 2) + 1), e.extractElt(w1, 2 * (t % 2) + 1)};
      sT = mmaBF16(e, aw, bHi, sT);
      sT = mmaBF16(e, aw, bLo, sT);
    }
    // Whether keys r and r + 8 are valid: lane r / 2 holds them among its
    // value rows (keys 2c', 2c' + 1, 2c' + 8, 2c' + 9), bits r % 2 and
    // 2 + r % 2 of its mask.
    Value mask = e.i32(0);
    for (int64_t x = 0; x < 4; ++x)
      mask = arith::OrIOp::create(
          e.builder(), e.location(), mask,
          e.select(valid[x], e.i32(int64_t(1) << x), e.i32(0)));
    Value theirs = e.shuffleIdx(mask, e.divs(r, e.idx(2)));
    SmallVector<Value> keyOk;
    for (int64_t h = 0; h < 2; ++h) {
      Value bit = e.toI32(e.add(e.rems(r, e.idx(2)), e.idx(2 * h)));
      Value one = arith::AndIOp::create(
          e.builder(), e.location(),
          arith::ShRUIOp::create(e.builder(), e.location(), theirs, bit),
          e.i32(1));
      keyOk.push_back(e.ne(one, e.i32(0)));
    }
    // Accumulator x: key r + 8 (x / 2), query head 2c + x % 2.
    SmallVector<Value> out(st.begin(), st.begin() + stateSize);
    SmallVector<Value> sv(4), corr(2), mSafe(2);
    for (int64_t x = 0; x < 4; ++x)
      sv[x] = e.select(keyOk[x / 2], sT[x], e.negInf());
    for (int64_t q = 0; q < 2; ++q) {
      Value tileMax = e.fmax(sv[q], sv[2 + q]);
      for (int64_t o : {4, 8, 16})
        tileMax = e.fmax(tileMax, e.shuffleXor(tileMax, o));
      std::tie(mSafe[q], corr[q]) = advanceMax(e, out, q, tileMax);
    }
    SmallVector<Value> pw(4);
    for (int64_t x = 0; x < 4; ++x) {
      pw[x] = e.fastExp(e.fsub(sv[x], mSafe[x % 2]));
      out[2 + x % 2] = e.fadd(out[2 + x % 2], pw[x]);
    }
    countValid(e, out, valid);
    // P^T's B fragment, hi and lo: keys r (then r + 8) of heads 2c, 2c + 1
    // as a packed pair, transposed to keys 2c, 2c + 1 (2c + 8, 2c + 9) of
    // head r.
    SmallVector<Value> pHi, pLo;
    for (int64_t h = 0; h < 2; ++h) {
      auto [h0, l0] = splitBF16(e, pw[2 * h]);
      auto [h1, l1] = splitBF16(e, pw[2 * h + 1]);
      pHi.push_back(transposeB16(e, packBF16(e, h0, h1)));
      pLo.push_back(transposeB16(e, packBF16(e, l0, l1)));
    }
    // O^T = O^T * corr + V^T P^T. Accumulator x of m-tile (i, j): channel
    // 64 i + 8 r + 2 j + x / 2, query head 2c + x % 2.
    for (int64_t m = 0; m < tilesM; ++m) {
      int64_t i = m / 4, j = m % 4;
      SmallVector<Value> acc =
          rescaled(e, ArrayRef<Value>(out).slice(5 + 4 * m, 4),
                   {corr[0], corr[1], corr[0], corr[1]});
      // Rows r and r + 8 (channels 2j, 2j + 1 of this lane's eight) over
      // keys 2c, 2c + 1, then keys 2c + 8, 2c + 9.
      SmallVector<Value> aw;
      for (int64_t k2 = 0; k2 < 2; ++k2)
        for (int64_t h = 0; h < 2; ++h)
          aw.push_back(
              packBF16(e, e.extractElt(valueRow(2 * k2, i), 2 * j + h),
                       e.extractElt(valueRow(2 * k2 + 1, i), 2 * j + h)));
      acc = productHiLo(e, acc, aw, aw, pHi, pLo);
      llvm::copy(acc, out.begin() + 5 + 4 * m);
    }
    out.append(next.begin(), next.end());
    return out;
  };
  auto state = e.forLoop(
      e.idx(0), mine, e.idx(1), init,
      [&](Emitter &ee, Value it, ValueRange st) -> SmallVector<Value> {
        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
        ValueRange carried = st.drop_front(stateSize);
        SmallVector<Value> next, rows;
        Value slot; // the ring slot of tile it
        if (S >= 2) {
          Value ahead = e.add(it, e.idx(S - 1));
          int64_t flags = 4 * (S - 1);
          SmallVector<Value> aheadValid =
              issueTile(e, ahead, e.rems(ahead, e.idx(S)),
                        carried.slice(flags, 3 * kRows));
          SmallVector<Value> located = tileRows(e, e.add(it, e.idx(S)));
          NVVM::CpAsyncWaitGroupOp::create(e.builder(), e.location(),
                                           static_cast<uint32_t>(S - 1));
          // Each fragment is read where the products first use it (below),
          // so that the tile's fragments are not all live beside the
          // accumulators.
          slot = e.rems(it, e.idx(S));
          rows.assign(carried.begin(), carried.begin() + 4);
          next.assign(carried.begin() + 4, carried.begin() + flags);
          llvm::append_range(next, aheadValid);
          llvm::append_range(next, located);
        } else {
          next = loadTile(e, e.add(it, e.idx(1)));
          for (size_t i = 4; i < next.size(); ++i)
            next[i] = opaque(e, next[i]);
          rows.assign(carried.begin(), carried.end());
        }
        SmallVector<Value> valid(rows.begin(), rows.begin() + 4);
        // Fragment f of the tile (rowFragments' order): carried in
        // registers, or read from the ring on first use.
        SmallVector<Value> ringFrags(S >= 2 ? F : 0);
        auto fragment = [&](int64_t f) -> Value {
          if (S < 2)
            return rows[4 + f];
          if (!ringFrags[f])
            ringFrags[f] = readFragment(e, slot, f);
          return ringFrags[f];
        };
        auto keyWords = [&](int64_t j, int64_t ch) {
          return fragment(j * (D / 32) + ch);
        };
        auto valueRow = [&](int64_t x, int64_t i) {
          return fragment(kWords + x * (D / 64) + i);
        };
        if (transposed)
          return transposedTile(e, st, valid, keyWords, valueRow, next);

        // Scores of the tile's two n-tiles.
        SmallVector<SmallVector<Value>> sc(2,
                                           SmallVector<Value>(4, e.f32(0.0)));
        for (int64_t t = 0; t < s.steps; ++t) {
          SmallVector<Value> aHi, aLo;
          Value hiWords =
              e.vecLoad(smQ, {e.idx(t), e.idx(0), lane, e.idx(0)}, 4, 16);
          Value loWords =
              e.vecLoad(smQ, {e.idx(t), e.idx(1), lane, e.idx(0)}, 4, 16);
          for (int64_t x = 0; x < 4; ++x) {
            aHi.push_back(e.extractElt(hiWords, x));
            aLo.push_back(e.extractElt(loWords, x));
          }
          for (int64_t j = 0; j < 2; ++j) {
            Value words = keyWords(j, t / 2);
            SmallVector<Value> bw{e.extractElt(words, 2 * (t % 2)),
                                  e.extractElt(words, 2 * (t % 2) + 1)};
            sc[j] = mmaBF16(e, aHi, bw, sc[j]);
            sc[j] = mmaBF16(e, aLo, bw, sc[j]);
          }
        }
        // Accumulator x of n-tile j: row r + 8 (x / 2), key 8 j + 2 c +
        // x % 2, i.e. value row 2 j + x % 2 of this lane.
        SmallVector<Value> out(st.begin(), st.begin() + stateSize);
        SmallVector<Value> tileMax(2, e.negInf());
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t x = 0; x < 4; ++x) {
            sc[j][x] = e.select(valid[2 * j + x % 2], sc[j][x], e.negInf());
            tileMax[x / 2] = e.fmax(tileMax[x / 2], sc[j][x]);
          }
        SmallVector<Value> corr(2), mSafe(2);
        for (int64_t h = 0; h < 2; ++h) {
          for (int64_t o : {1, 2})
            tileMax[h] = e.fmax(tileMax[h], e.shuffleXor(tileMax[h], o));
          std::tie(mSafe[h], corr[h]) = advanceMax(e, out, h, tileMax[h]);
        }
        SmallVector<SmallVector<Value>> pw(2, SmallVector<Value>(4));
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t x = 0; x < 4; ++x) {
            pw[j][x] = e.fastExp(e.fsub(sc[j][x], mSafe[x / 2]));
            out[2 + x / 2] = e.fadd(out[2 + x / 2], pw[j][x]);
          }
        countValid(e, out, valid);
        // P as the A fragment (registers: row r keys 2c.., row r + 8 keys
        // 2c.., row r keys 2c + 8.., row r + 8 keys 2c + 8..), hi and lo.
        SmallVector<Value> pHi, pLo;
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t h = 0; h < 2; ++h) {
            auto [h0, l0] = splitBF16(e, pw[j][2 * h]);
            auto [h1, l1] = splitBF16(e, pw[j][2 * h + 1]);
            pHi.push_back(packBF16(e, h0, h1));
            pLo.push_back(packBF16(e, l0, l1));
          }
        // O = O * corr + P V.
        for (int64_t n = 0; n < tilesN; ++n) {
          int64_t i = n / 8, j = n % 8;
          SmallVector<Value> acc =
              rescaled(e, ArrayRef<Value>(out).slice(5 + 4 * n, 4),
                       {corr[0], corr[0], corr[1], corr[1]});
          SmallVector<Value> bw{packBF16(e, e.extractElt(valueRow(0, i), j),
                                         e.extractElt(valueRow(1, i), j)),
                                packBF16(e, e.extractElt(valueRow(2, i), j),
                                         e.extractElt(valueRow(3, i), j))};
          acc = productHiLo(e, acc, pHi, pLo, bw, bw);
          llvm::copy(acc, out.begin() + 5 + 4 * n);
        }
        out.append(next.begin(), next.end());
        return out;
      });

  // With a ring, the groups' accumulators go where the rings were, once
  // every warp has read its last tile (all its copies were waited for).
  if (inRing) {
    e.barrier();
    smAcc = dynamicSharedArray(e, {W, G, D}, bd.getF32Type());
  }
  // A row's l and the count are spread over the quad's lanes (with
  // the transposed body a head's l over the lanes of its column).
  SmallVector<Value> total(state.begin(), state.begin() + 5);
  for (int64_t h = 2; h < 5; ++h) {
    SmallVector<int64_t, 3> offsets{1, 2};
    if (transposed && h < 4)
      offsets = {4, 8, 16};
    for (int64_t o : offsets)
      total[h] = e.fadd(total[h], e.shuffleXor(total[h], o));
  }
  if (transposed) {
    // A lane holds query heads 2c and 2c + 1 of its channels.
    for (int64_t x = 0; x < 2; ++x) {
      Value head = e.add(e.mul(c, e.idx(2)), e.idx(x));
      e.ifThen(e.lt(head, e.idx(G)), [&](Emitter &e) {
        e.ifThen(e.eq(r, e.idx(0)), [&](Emitter &e) {
          e.store(total[x], smM, {warp, head});
          e.store(total[2 + x], smL, {warp, head});
        });
        for (int64_t m = 0; m < tilesM; ++m)
          for (int64_t h = 0; h < 2; ++h) {
            Value ch = e.add(e.idx(64 * (m / 4) + 2 * (m % 4) + h),
                             e.mul(r, e.idx(8)));
            e.store(state[5 + 4 * m + 2 * h + x], smAcc, {warp, head, ch});
          }
      });
    }
  } else {
    for (int64_t h = 0; h < 2; ++h) {
      Value rowIdx = e.add(r, e.idx(8 * h));
      e.ifThen(e.lt(rowIdx, e.idx(G)), [&](Emitter &ee) {
        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
        e.ifThen(e.eq(c, e.idx(0)), [&](Emitter &e) {
          e.store(total[h], smM, {warp, rowIdx});
          e.store(total[2 + h], smL, {warp, rowIdx});
        });
        for (int64_t n = 0; n < tilesN; ++n)
          for (int64_t x = 2 * h; x < 2 * h + 2; ++x) {
            // Column 2c + x % 2 of n-tile (i, j) is channel
            // 64 i + 8 (2c + x % 2) + j.
            Value ch = e.add(e.idx(64 * (n / 8) + 8 * (x % 2) + n % 8),
                             e.mul(c, e.idx(16)));
            e.store(state[5 + 4 * n + x], smAcc, {warp, rowIdx, ch});
          }
      });
    }
  }
  e.ifThen(e.eq(lane, e.idx(0)),
           [&](Emitter &e) { e.store(total[4], smC, {warp}); });
  e.barrier();
  emitSplitPartial(e, s, tid, ValueRange{smM, smL, smC, smAcc}, po, pml, b, g,
                   split);
}

SmallVector<Type> attentionSharedTypes(MLIRContext *ctx,
                                       const AttentionShape &s) {
  Type f32 = Float32Type::get(ctx);
  SmallVector<Type> types{
      KernelBuilder::workgroupType(ctx, {s.groups, s.group}, f32),
      KernelBuilder::workgroupType(ctx, {s.groups, s.group}, f32),
      KernelBuilder::workgroupType(ctx, {s.groups}, f32)};
  // The groups' accumulators; with a ring they take its place once the
  // loop is done (emitMma).
  if (s.stages < 2)
    types.push_back(
        KernelBuilder::workgroupType(ctx, {s.groups, s.group, s.d}, f32));
  // The tensor-core body's query fragments: [step][hi, lo][lane][register].
  if (s.mma)
    types.push_back(KernelBuilder::workgroupType(ctx, {s.steps, 2, kWarp, 4},
                                                 IntegerType::get(ctx, 32)));
  return types;
}

/// The attend-occupancy option as launch bounds of attention kernel `fn`:
/// ceil(N / its warps) blocks an SM, so ptxas keeps each thread within
/// their registers.
void attendLaunchBounds(gpu::GPUFuncOp fn, const AttentionShape &s,
                        const KernelBuilder &kb) {
  int64_t warps = kb.attendOccupancy();
  if (warps <= 0)
    return;
  int64_t blockWarps = (s.threads + kWarp - 1) / kWarp;
  KernelBuilder::launchBounds(fn, s.threads,
                              (warps + blockWarps - 1) / blockWarps);
}

/// Either attention body, as the shape says.
void emitAttention(GPUEmitter &e, const AttentionShape &s,
                   const AttendArgs &args) {
  if (s.mma)
    args.emitMma(e, s);
  else
    args.emitLanes(e, s);
}

/// The blocks a sparse_attend launch aims for over all sequences and kv
/// heads: about 2 a multiprocessor on 132. Its selected set is short (~1K
/// slots), so a block's time is mostly the latency of its tiles' chained
/// loads (slot, page table, rows), not their bytes: at one sequence and
/// few kv heads more, shorter splits finish sooner, while at batch 8 of 8
/// kv heads 4 splits (256 blocks) beat 8 and 16 (session 19's tuner,
/// docs/TUNING.md).
constexpr int64_t kSparseBlockTarget = 256;

/// The multiprocessors a dense launch counts on (of sm_90's 132).
constexpr int64_t kMultiprocessors = kGPUDenseBlockTarget / 4;

/// The blocks a dense_attend launch aims for over all sequences and kv
/// heads: one wave of the chip, the blocks a multiprocessor holds at once
/// times 128 (of sm_90's 132; kGPUDenseBlockTarget, what chooseDenseSplits
/// sizes the buffers for, is 4 of them, the most this picks by default).
/// Its time is its bytes only while every resident block streams; a
/// second, partial wave or blocks of a few tiles (each paying the query's
/// load, the warps' combine and a partial row the merge reads) cost more.
/// Measured cold (H100, session 45, reports/gpu/session45/): 256 blocks
/// beat 512 at head_dim 128 (16/2/128, B1/128K 59.9 against 67.3 us;
/// 28/4/128, B1/16K 23.0 against 28.8) and beat 128 at head_dim 256
/// (8/1/256, B1/128K 87.5 against 117.8); 512 beat 256 at
/// head_dim 64 (14/2/64, B1/128K 35.6 against 40.8); and a batch's blocks
/// shared (8 splits of 2K tokens at batch 8 of 8 kv heads and 16K, not 64
/// of 256) took 28/4/128 B32/16K from 478 to 365 us.
int64_t denseBlockTarget(const AttentionShape &s, const KernelBuilder &kb) {
  int64_t blockWarps = (s.threads + kWarp - 1) / kWarp;
  int64_t resident;
  if (kb.attendOccupancy() > 0)
    resident = (kb.attendOccupancy() + blockWarps - 1) / blockWarps;
  else if (s.mma && s.d >= 128)
    // 174 registers a thread at head_dim 128 (4 warps: 2 blocks), the
    // ring's shared memory at 256 (2 blocks of 3 warps).
    resident = 2;
  else
    // 104 registers at head_dim 64; the lane groups as before (unmeasured).
    resident = 4;
  return resident * kMultiprocessors;
}

/// The splits a launch runs (its grid's x), on the host:
/// ceil(target / (batch * kv heads)), at most `splits` (the partial
/// buffers' width; Specialize sizes them for the smallest grid).
Value liveSplits(OpBuilder &b, Location loc, Value batch, int64_t hkv,
                 int64_t splits, int64_t target) {
  auto c = [&](int64_t x) { return arith::ConstantIndexOp::create(b, loc, x); };
  Value rows = arith::MaxSIOp::create(
      b, loc, arith::MulIOp::create(b, loc, batch, c(hkv)), c(1));
  Value want = arith::CeilDivSIOp::create(b, loc, c(target), rows);
  return arith::MinSIOp::create(b, loc, want, c(splits));
}

/// A dense launch's splits (its grid's x), on the host: one wave
/// (denseBlockTarget) while the sequences' kv heads are fewer than the
/// chip's multiprocessors (128 of them, kGPUDenseBlockTarget / 4). From
/// there a wave's blocks would each walk most of a context, and one that
/// starts late (a multiprocessor still busy with the kernel before it,
/// which a programmatic launch overlaps) holds the step up by all of its
/// walk: kGPUDenseBlockTarget blocks, a second wave of shorter blocks, as
/// before the one-wave rule. Measured cold (H100, session 47,
/// reports/gpu/session47/): one wave at 128 and 256 (sequence, kv head)
/// pairs slowed the certified step's dense fallback at B32/16K (28/4/128
/// 500.5 -> 604.7 us, 32/8/128 896.0 -> 977.9) while plain dense was
/// unchanged (361.7 against 364.8, 728.2 against 727.0); below 128 pairs
/// it won (16/2/128 B8/16K 64.5 -> 58.4, 8/1/256 B1/128K 119.9 -> 87.2).
Value denseLiveSplits(OpBuilder &b, Location loc, Value batch,
                      const AttentionShape &s, const KernelBuilder &kb,
                      int64_t splits) {
  auto c = [&](int64_t x) { return arith::ConstantIndexOp::create(b, loc, x); };
  int64_t target = denseBlockTarget(s, kb);
  Value oneWave = liveSplits(b, loc, batch, s.hkv, splits, target);
  if (target == kGPUDenseBlockTarget)
    return oneWave;
  Value twoWaves =
      liveSplits(b, loc, batch, s.hkv, splits, kGPUDenseBlockTarget);
  // many = [batch * hkv >= kMultiprocessors] and the choice in the
  // arithmetic a launch plan expresses (no compare or select there).
  Value rows = arith::MulIOp::create(b, loc, batch, c(s.hkv));
  Value many = arith::MinSIOp::create(
      b, loc,
      arith::MaxSIOp::create(
          b, loc, arith::AddIOp::create(b, loc, rows, c(1 - kMultiprocessors)),
          c(0)),
      c(1));
  Value diff = arith::AddIOp::create(
      b, loc, twoWaves, arith::MulIOp::create(b, loc, oneWave, c(-1)));
  return arith::AddIOp::create(b, loc, oneWave,
                               arith::MulIOp::create(b, loc, many, diff));
}

/// The splits a launch left out (from `live`, the grid's x, to the partial
/// buffers' width) read as empty to the merge and the certificate: split
/// 0's block writes their (m, l, count) for its (sequence, kv head).
void writeUnlaunchedSplits(GPUEmitter &e, const AttentionShape &s, Value pml,
                           Value bb, Value g, Value split, Value live) {
  Value tid = e.tid();
  e.ifThen(e.eq(split, e.idx(0)), [&](Emitter &e) {
    Value dead = e.mul(e.sub(e.dim(pml, 2), live), e.idx(s.group));
    e.forLoop(tid, dead, e.idx(s.threads), {},
              [&](Emitter &e, Value x, ValueRange) -> SmallVector<Value> {
                Value sp = e.add(live, e.divs(x, e.idx(s.group)));
                Value h =
                    e.add(e.mul(g, e.idx(s.group)), e.rems(x, e.idx(s.group)));
                e.store(e.negInf(), pml, {bb, h, sp, e.idx(0)});
                e.store(e.f32(0.0), pml, {bb, h, sp, e.idx(1)});
                e.store(e.f32(0.0), pml, {bb, h, sp, e.idx(2)});
                return {};
              });
  });
}

void lowerSparseAttend(SparseAttendOp op, OpBuilder &b, const KernelBuilder &kb,
                       StringRef name) {
  Location loc = op.getLoc();
  AttentionShape s =
      attentionShape(op.getQ(), op.getKCache(), op.getVCache(), kb);
  SparseList list = SparseList::of(op);
  SmallVector<Value> operands{
      op.getQ(),    op.getKCache(),   op.getVCache(),   op.getPageTable(),
      op.getLens(), op.getPartialO(), op.getPartialMl()};
  int64_t windowsIdx = -1, indicesIdx = -1, limitsIdx = -1, skipIdx = -1;
  if (op.getWindows()) {
    windowsIdx = operands.size();
    operands.push_back(op.getWindows());
  }
  if (op.getIndices()) {
    indicesIdx = operands.size();
    operands.push_back(op.getIndices());
  }
  if (op.getLimits()) {
    limitsIdx = operands.size();
    operands.push_back(op.getLimits());
  }
  if (op.getSkip()) {
    skipIdx = operands.size();
    operands.push_back(op.getSkip());
  }
  auto fn = kb.createKernel(
      name, operands, attentionSharedTypes(op.getContext(), s),
      [&](GPUEmitter &e, ValueRange a, ValueRange smem) {
        Value q = a[0], k = a[1], v = a[2], pt = a[3], lens = a[4];
        Value po = a[5], pml = a[6];
        Value windows = windowsIdx >= 0 ? a[windowsIdx] : Value();
        Value indices = indicesIdx >= 0 ? a[indicesIdx] : Value();
        Value limits = limitsIdx >= 0 ? a[limitsIdx] : Value();
        Value split = e.bid(gpu::Dimension::x);
        Value g = e.bid(gpu::Dimension::y);
        Value bb = e.bid(gpu::Dimension::z);
        Value n = e.loadIndex(lens, {bb});
        Value w =
            effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
        CondensateSlots slotsInfo = CondensateSlots::of(e, op, list, w, n);
        Value limit = list.limit(e, limits, bb, g);
        // The launch runs the first `live` of the list's splits
        // (liveSplits); they share the slots attended in whole tiles
        // of 16. With a limit the slots past the units attended hold
        // nothing: the splits share the slots before it, not the list's
        // length (open extras leave most of a list's slots past the limit;
        // walking them read position 0's row for each).
        Value live = e.gridDim(gpu::Dimension::x);
        Value end = e.idx(list.length);
        if (limits) {
          Value used = e.add(e.idx(list.forced), e.mul(e.maxs(limit, e.idx(0)),
                                                       e.idx(list.unitTokens)));
          end = e.mins(used, end);
        }
        Value per =
            e.mul(e.ceilDiv(e.ceilDiv(end, live), e.idx(16)), e.idx(16));
        Value v0 = e.mins(e.mul(split, per), end);
        Value v1 = e.mins(e.add(v0, per), end);
        writeUnlaunchedSplits(e, s, pml, bb, g, split, live);
        // A skipped group attends nothing: its blocks write empty partials.
        if (skipIdx >= 0)
          v1 = e.select(e.ne(e.load(a[skipIdx], {bb, g}), e.i32(0)), v0, v1);
        Value scale = e.f32(op.getScale().convertToDouble());
        emitAttention(
            e, s,
            {q, k, v, pt, po, pml, bb, g, split, v0, v1, scale, smem,
             [&](GPUEmitter &e, Value slot) -> std::pair<Value, Value> {
               return slotsInfo.position(e, slot, list, indices, bb, g, limit);
             }});
      });
  attendLaunchBounds(fn, s, kb);
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  launch(b, loc, fn,
         liveSplits(b, loc, batch, s.hkv, list.splits, kSparseBlockTarget),
         arith::ConstantIndexOp::create(b, loc, s.hkv), batch, s.threads,
         operands, s.ringBytes);
}

void lowerDenseAttend(DenseAttendOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  Location loc = op.getLoc();
  AttentionShape s =
      attentionShape(op.getQ(), op.getKCache(), op.getVCache(), kb);
  int64_t splitsStatic = staticDim(op.getPartialMl(), 2);
  SmallVector<Value> operands{
      op.getQ(),    op.getKCache(),   op.getVCache(),   op.getPageTable(),
      op.getLens(), op.getPartialO(), op.getPartialMl()};
  if (op.getMask())
    operands.push_back(op.getMask());
  bool masked = static_cast<bool>(op.getMask());
  auto fn = kb.createKernel(
      name, operands, attentionSharedTypes(op.getContext(), s),
      [&](GPUEmitter &e, ValueRange a, ValueRange smem) {
        Value split = e.bid(gpu::Dimension::x);
        Value g = e.bid(gpu::Dimension::y);
        Value bb = e.bid(gpu::Dimension::z);
        Value n = e.loadIndex(a[4], {bb});
        // The launch runs the first `live` splits (liveSplits); the empty
        // ones of a short context cost a block that exits at once.
        Value live = e.gridDim(gpu::Dimension::x);
        writeUnlaunchedSplits(e, s, a[6], bb, g, split, live);
        auto [t0, t1] = denseSplitRange(e, n, live, split, kMinDenseChunkGPU);
        if (masked) {
          Value active = e.ne(e.load(a[7], {bb, g}), e.i32(0));
          t1 = e.select(active, t1, t0);
        }
        t1 = e.maxs(t1, t0);
        Value scale = e.f32(op.getScale().convertToDouble());
        // An empty split (past a short context's chunks, or a masked
        // group) writes only its (m, l, count) as empty: the merge skips
        // the values of splits whose l is 0 and stops at the last live one.
        e.ifElse(
            e.gt(t1, t0), {},
            [&](Emitter &ee) -> SmallVector<Value> {
              emitAttention(
                  static_cast<GPUEmitter &>(ee), s,
                  {a[0], a[1], a[2], a[3], a[5], a[6], bb, g, split, t0, t1,
                   scale, smem,
                   [&](GPUEmitter &e, Value t) -> std::pair<Value, Value> {
                     return {t, e.i1(true)};
                   }});
              return {};
            },
            [&](Emitter &ee) -> SmallVector<Value> {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value tid = e.tid();
              e.ifThen(e.lt(tid, e.idx(s.group)), [&](Emitter &e) {
                Value h = e.add(e.mul(g, e.idx(s.group)), tid);
                e.store(e.negInf(), a[6], {bb, h, split, e.idx(0)});
                e.store(e.f32(0.0), a[6], {bb, h, split, e.idx(1)});
                e.store(e.f32(0.0), a[6], {bb, h, split, e.idx(2)});
              });
              return {};
            });
      });
  attendLaunchBounds(fn, s, kb);
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  launch(b, loc, fn, denseLiveSplits(b, loc, batch, s, kb, splitsStatic),
         arith::ConstantIndexOp::create(b, loc, s.hkv), batch, s.threads,
         operands, s.ringBytes);
}

} // namespace

void mlir::condensate::populateAttendToGPUPatterns(RewritePatternSet &patterns,
                                                   gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<SparseAttendOp, lowerSparseAttend>>(
      ctx, kernels, "sparse_attend");
  patterns.add<KernelPattern<DenseAttendOp, lowerDenseAttend>>(ctx, kernels,
                                                               "dense_attend");
}
