//===- Certify.cpp - the certificate kernel -------------------------------===//
//
// Lowers precertify (the certificate's early test) to a block per (kv
// head, sequence) for the base set and the forced positions, a grid over
// chunks of units for the pass over every unit, and a block per group for
// the test; certify to one block per (kv head, sequence) with f64 mass
// sums, after a grid kernel summing runs of 32 slots when there are many
// extras (the fast walk of open extras); the omitted-value box with
// threads over (page rows, channels), rows combined through shared
// memory.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Certificate.h"
#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// Units a block of precertify's pass over every unit takes.
constexpr int64_t kPrecertifyChunk = 1024;

/// Lowers precertify (CondensateOps.td) to three kernels. The bound
/// reference M is the largest bound of the base set (base units and the
/// forced positions' units: at least every logit the sparse pass would
/// see), so the only pass over every unit is Ulow's; a unit bound more than
/// ~709 above M overflows Ulow to inf, which fires the test, as the
/// certificate would fail too. The first kernel (a block per (kv head,
/// sequence)) finds M, Zhat and the rank end; the forced positions' exact
/// logits come one (position, head) a thread from straight-line vector
/// loads (no dependent load chain). It leaves them, and Ulow = 0, in
/// scratch. The second (a block per chunk of kPrecertifyChunk units) adds
/// its chunk's Ulow, kUnroll units a round so that their loads are in
/// flight together; the third (a warp per group) takes the test.
void lowerPrecertify(PrecertifyOp op, OpBuilder &b, const KernelBuilder &kb,
                     StringRef name) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getScores(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t G = hq / hkv, base = op.getBaseUnits(), p = op.getPageSize();
  int64_t forcedSlots = op.getAnchor() + op.getWindowMax();
  double tau = op.getTau().convertToDouble();
  int64_t unitTokens = op.getGranularity() == Granularity::page ? p : 1;
  const int64_t threads = 256, warps = threads / kWarp, kUnroll = 4;
  Type kElt = elementType(op.getKCache());
  int64_t vecElems = 16 / elementBytes(kElt); // 16-byte K loads
  Type f32 = b.getF32Type(), f64 = b.getF64Type(), i32 = b.getI32Type();
  SmallVector<Value> operands{
      op.getQ(),      op.getKCache(), op.getPageTable(), op.getScores(),
      op.getBounds(), op.getLens(),   op.getIndices(),   op.getEarly()};
  bool hasWindows = static_cast<bool>(op.getWindows());
  if (hasWindows)
    operands.push_back(op.getWindows());
  // What the first kernel leaves the others, per (sequence, kv head): M per
  // head; Zhat and Ulow per head; whether the test runs, and the rank end
  // (full, key, unit).
  int64_t dyn = ShapedType::kDynamic;
  Value batch = memref::DimOp::create(b, loc, op.getScores(), 0);
  Value stM = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, hkv, G}, f32), ValueRange{batch});
  Value stZU = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, hkv, 2, G}, f64), ValueRange{batch});
  Value stEnd = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, hkv, 4}, i32), ValueRange{batch});
  int64_t stIdx = operands.size();
  operands.append({stM, stZU, stEnd});
  SmallVector<Type> smem{
      KernelBuilder::workgroupType(ctx, {3}, i32),        // full, key, unit
      KernelBuilder::workgroupType(ctx, {warps, G}, f32), // warp maxima
      KernelBuilder::workgroupType(ctx, {G}, f64)};       // Zhat
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value q = a[0], kCache = a[1], pageTable = a[2], scores = a[3];
        Value bounds = a[4], lens = a[5], indices = a[6], earlyOut = a[7];
        Value windows = hasWindows ? a[8] : Value();
        Value outM = a[stIdx], outZU = a[stIdx + 1], outEnd = a[stIdx + 2];
        Value smEnd = sm[0], smMax = sm[1], smZ = sm[2];
        Value tid = e.tid();
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        Value n = e.loadIndex(lens, {bb});
        Value w =
            effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
        Value unit = e.idx(unitTokens), anchor = e.idx(op.getAnchor());
        const TargetInfo &target = nvvmTarget();
        CandidateUnits units{unit, anchor, n, w};
        auto head = [&](Emitter &e, int64_t i) {
          return e.add(e.mul(g, e.idx(G)), e.idx(i));
        };
        // The ranking as select_topk's (every lane is here).
        SmallVector<Value> offsets;
        if (rankRelative(op.getGranularity(), G))
          offsets = warpRankOffsets(e, units, scores, bb, g, G);
        auto key = [&](Emitter &e, Value u) {
          return rankingKey(e, target, units, scores, bb, g, u, G, {}, {},
                            offsets)
              .key;
        };
        // Forced slot v: position t of the anchor [0, min(A, n)) or the
        // window [max(A, n - W), n), and whether it holds one.
        Value anchorEnd = e.mins(anchor, n);
        Value windowBegin = e.maxs(anchor, e.sub(n, w));
        auto forced = [&](Emitter &e, Value v) -> std::pair<Value, Value> {
          Value inAnchor = e.lt(v, anchor);
          Value t =
              e.select(inAnchor, v, e.add(windowBegin, e.sub(v, anchor)));
          Value valid = e.select(inAnchor, e.lt(v, anchorEnd), e.lt(t, n));
          return {e.select(valid, t, e.idx(0)), valid};
        };
        // Empty slots come last: with the last one empty every candidate
        // is in a slot and nothing can be left out (open extras), so the
        // test cannot fire. The branch is the same for the whole block.
        // Without slots nothing is in one.
        Value lastEmpty =
            slots == 0 ? e.i1(false)
                       : e.lt(e.loadIndex(indices, {bb, g, e.idx(slots - 1)}),
                              e.idx(0));
        e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
          e.store(e.select(lastEmpty, e.i32(0), e.i32(1)), outEnd,
                  {bb, g, e.idx(0)});
        });
        e.ifThen(e.band(lastEmpty, e.eq(tid, e.idx(0))), [&](Emitter &e) {
          e.store(e.i32(0), earlyOut, {bb, g});
        });
        e.ifThen(e.bnot(lastEmpty), [&](Emitter &ee) {
          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
            e.store(e.i32(1), smEnd, {e.idx(0)});
            e.store(e.i32(-1), smEnd, {e.idx(1)});
            e.store(e.i32(-1), smEnd, {e.idx(2)});
          });
          for (int64_t i = 0; i < G; ++i)
            e.ifThen(e.eq(tid, e.idx(i)),
                     [&](Emitter &e) { e.store(e.f64(0.0), smZ, {e.idx(i)}); });
          e.barrier();
          // The slots: the rank end's key (an empty slot means nothing is
          // left out) and each head's largest base bound.
          SmallVector<Value> init(G, e.negInf());
          auto local = e.forLoop(
              tid, e.idx(slots), e.idx(threads), init,
              [&](Emitter &ee, Value j, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value u = e.loadIndex(indices, {bb, g, j});
                Value have = e.ge(u, e.idx(0));
                Value uSafe = e.select(have, u, e.idx(0));
                e.ifThen(e.bnot(have), [&](Emitter &e) {
                  e.store(e.i32(0), smEnd, {e.idx(0)});
                });
                e.ifThen(have, [&](Emitter &ee) {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  e.atomic(arith::AtomicRMWKind::minu, smEnd, {e.idx(1)},
                           key(e, uSafe));
                });
                Value isBase = e.band(have, e.lt(j, e.idx(base)));
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i) {
                  Value bd = e.load(bounds, {bb, head(e, i), uSafe});
                  out.push_back(e.select(isBase, e.fmax(acc[i], bd), acc[i]));
                }
                return out;
              });
          // ... and the forced positions' bounds.
          local = e.forLoop(
              tid, e.idx(forcedSlots), e.idx(threads), local,
              [&](Emitter &e, Value v, ValueRange acc) -> SmallVector<Value> {
                auto [t, valid] = forced(e, v);
                Value u = e.divs(t, unit);
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i) {
                  Value bd = e.load(bounds, {bb, head(e, i), u});
                  out.push_back(e.select(valid, e.fmax(acc[i], bd), acc[i]));
                }
                return out;
              });
          Value lane = e.rems(tid, e.idx(kWarp));
          Value warp = e.divs(tid, e.idx(kWarp));
          for (int64_t i = 0; i < G; ++i) {
            Value mw = laneMax(e, target, local[i], kWarp);
            e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
              e.store(mw, smMax, {warp, e.idx(i)});
            });
          }
          e.barrier();
          // The rank end's unit: the highest holding the lowest key.
          Value endKey = e.load(smEnd, {e.idx(1)});
          e
              .forLoop(
                  tid, e.idx(slots), e.idx(threads), {},
                  [&](Emitter &ee, Value j, ValueRange) -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    Value u = e.loadIndex(indices, {bb, g, j});
                    Value have = e.ge(u, e.idx(0));
                    Value uSafe = e.select(have, u, e.idx(0));
                    e.ifThen(e.band(have, e.eq(key(e, uSafe), endKey)),
                             [&](Emitter &ee) {
                               GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                               e.atomic(arith::AtomicRMWKind::maxs, smEnd,
                                        {e.idx(2)}, e.toI32(uSafe));
                             });
                    return {};
                  });
          SmallVector<Value> ms;
          for (int64_t i = 0; i < G; ++i) {
            Value m = e.load(smMax, {e.idx(0), e.idx(i)});
            for (int64_t r = 1; r < warps; ++r)
              m = e.fmax(m, e.load(smMax, {e.idx(r), e.idx(i)}));
            ms.push_back(m);
          }
          auto mass = [&](Emitter &e, Value u, int64_t i) {
            return unitMassBound(e, target, units.count(e, u),
                                 e.load(bounds, {bb, head(e, i), u}), ms[i]);
          };
          SmallVector<Value> zero(G, e.f64(0.0));
          // Zhat: the base units' bounds (with extras_in_z the extras' too:
          // certify may take their lower bounds into Z) ...
          int64_t zUnits = op.getExtrasInZ() ? slots : base;
          auto zBase = e.forLoop(
              tid, e.idx(zUnits), e.idx(threads), zero,
              [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
                Value u = e.loadIndex(indices, {bb, g, j});
                Value have = e.ge(u, e.idx(0));
                Value uSafe = e.select(have, u, e.idx(0));
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i)
                  out.push_back(e.select(
                      have, e.fadd(acc[i], mass(e, uSafe, i)), acc[i]));
                return out;
              });
          // ... and the forced positions' exact logits, one (position,
          // head) pair a thread.
          Value scale = e.f32(op.getScale().convertToDouble());
          auto zForced = e.forLoop(
              tid, e.idx(forcedSlots * G), e.idx(threads), zBase,
              [&](Emitter &ee, Value vi, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value v = e.divs(vi, e.idx(G)), hi = e.rems(vi, e.idx(G));
                auto [t, valid] = forced(e, v);
                Value page = e.loadIndex(pageTable, {bb, e.divs(t, e.idx(p))});
                Value off = e.rems(t, e.idx(p));
                Value h = e.add(e.mul(g, e.idx(G)), hi);
                SmallVector<Value> rows, qs;
                for (int64_t c = 0; c < d; c += vecElems) {
                  rows.push_back(e.toF32(e.vecLoad(
                      kCache, {page, g, off, e.idx(c)}, vecElems, 16)));
                  qs.push_back(e.vecLoad(q, {bb, h, e.idx(c)}, vecElems, 16));
                }
                Value dot = e.splat(e.f32(0.0), vecElems);
                for (size_t c = 0; c < rows.size(); ++c)
                  dot = e.fadd(dot, e.fmul(qs[c], rows[c]));
                Value l = e.fmul(e.reduceAdd(dot), scale);
                Value m = ms[0];
                for (int64_t i = 1; i < G; ++i)
                  m = e.select(e.eq(hi, e.idx(i)), ms[i], m);
                Value term = unitMassBound(e, target, e.idx(1), l, m);
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i)
                  out.push_back(e.select(e.band(valid, e.eq(hi, e.idx(i))),
                                         e.fadd(acc[i], term), acc[i]));
                return out;
              });
          for (int64_t i = 0; i < G; ++i)
            e.warpAtomicAddF64(smZ, {e.idx(i)}, zForced[i]);
          // The rank end's unit is complete once every thread's atomic is.
          e.barrier();
          for (int64_t i = 0; i < G; ++i)
            e.ifThen(e.eq(tid, e.idx(i)), [&](Emitter &e) {
              e.store(ms[i], outM, {bb, g, e.idx(i)});
              e.store(e.load(smZ, {e.idx(i)}), outZU,
                      {bb, g, e.idx(0), e.idx(i)});
              e.store(e.f64(0.0), outZU, {bb, g, e.idx(1), e.idx(i)});
            });
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
            for (int64_t j = 0; j < 3; ++j)
              e.store(e.load(smEnd, {e.idx(j)}), outEnd, {bb, g, e.idx(j + 1)});
          });
        });
      });
  // The unrolled loads want registers; cap them so that every shape
  // launches (128 a thread), spilling rather than failing.
  KernelBuilder::launchBounds(fn, threads, 2);
  launchPerGroup(b, loc, fn, op.getScores(), hkv, threads, operands);

  // Ulow, a chunk of units a block: the candidates no extra can take in.
  SmallVector<Value> lowOperands{
      op.getScores(), op.getBounds(), op.getLens(), stM, stZU, stEnd};
  if (hasWindows)
    lowOperands.push_back(op.getWindows());
  auto low = kb.createKernel(
      (name + "_low").str(), lowOperands,
      {KernelBuilder::workgroupType(ctx, {G}, f64)},
      [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value scores = a[0], bounds = a[1], lens = a[2], inM = a[3], zu = a[4],
              inEnd = a[5];
        Value windows = hasWindows ? a[6] : Value();
        Value smU = sm[0];
        Value tid = e.tid();
        Value x = e.bid(gpu::Dimension::x), g = e.bid(gpu::Dimension::y),
              bb = e.bid(gpu::Dimension::z);
        Value n = e.loadIndex(lens, {bb});
        Value w =
            effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
        Value unit = e.idx(unitTokens);
        Value numUnits = e.ceilDiv(n, unit);
        Value first = e.mul(x, e.idx(kPrecertifyChunk));
        Value last = e.mins(e.add(first, e.idx(kPrecertifyChunk)), numUnits);
        Value run = e.band(e.ne(e.load(inEnd, {bb, g, e.idx(0)}), e.i32(0)),
                           e.lt(first, numUnits));
        // Uniform over the block.
        e.ifThen(run, [&](Emitter &ee) {
          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
          const TargetInfo &target = nvvmTarget();
          CandidateUnits units{unit, e.idx(op.getAnchor()), n, w};
          SmallVector<Value> offsets;
          if (rankRelative(op.getGranularity(), G))
            offsets = warpRankOffsets(e, units, scores, bb, g, G);
          SelectionEnd end{e.ne(e.load(inEnd, {bb, g, e.idx(1)}), e.i32(0)),
                           e.load(inEnd, {bb, g, e.idx(2)}),
                           e.loadIndex(inEnd, {bb, g, e.idx(3)})};
          SmallVector<Value> ms, zero(G, e.f64(0.0));
          for (int64_t i = 0; i < G; ++i)
            ms.push_back(e.load(inM, {bb, g, e.idx(i)}));
          for (int64_t i = 0; i < G; ++i)
            e.ifThen(e.eq(tid, e.idx(i)),
                     [&](Emitter &e) { e.store(e.f64(0.0), smU, {e.idx(i)}); });
          e.barrier();
          auto part = e.forLoop(
              e.add(first, e.mul(tid, e.idx(kUnroll))), last,
              e.idx(threads * kUnroll), zero,
              [&](Emitter &ee, Value u0, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                SmallVector<Value> out(acc.begin(), acc.end());
                for (int64_t r = 0; r < kUnroll; ++r) {
                  Value u = e.add(u0, e.idx(r));
                  Value in = e.lt(u, last);
                  Value uSafe = e.select(in, u, e.idx(0));
                  Value key = rankingKey(e, target, units, scores, bb, g, uSafe,
                                         G, {}, {}, offsets)
                                  .key;
                  Value after = e.band(in, ranksAfter(e, end, key, uSafe));
                  Value cnt = units.count(e, uSafe);
                  for (int64_t i = 0; i < G; ++i) {
                    Value h = e.add(e.mul(g, e.idx(G)), e.idx(i));
                    Value mass = unitMassBound(
                        e, target, cnt, e.load(bounds, {bb, h, uSafe}), ms[i]);
                    out[i] = e.select(after, e.fadd(out[i], mass), out[i]);
                  }
                }
                return out;
              });
          for (int64_t i = 0; i < G; ++i)
            e.warpAtomicAddF64(smU, {e.idx(i)}, part[i]);
          e.barrier();
          for (int64_t i = 0; i < G; ++i)
            e.ifThen(e.eq(tid, e.idx(i)), [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              e.atomicAddF64(zu, {bb, g, e.idx(1), e.idx(i)},
                             e.load(smU, {e.idx(i)}));
            });
        });
      });
  KernelBuilder::launchBounds(low, threads, 2);
  Value chunks = arith::CeilDivSIOp::create(
      b, loc, memref::DimOp::create(b, loc, op.getScores(), 2),
      arith::ConstantIndexOp::create(b, loc, kPrecertifyChunk));
  launch(b, loc, low, chunks, arith::ConstantIndexOp::create(b, loc, hkv),
         batch, threads, lowOperands);

  // The test: a group goes dense early when a head's eps_low exceeds tau.
  SmallVector<Value> testOperands{stZU, stEnd, op.getEarly()};
  auto test = kb.createKernel(
      (name + "_test").str(), testOperands, {},
      [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value zu = a[0], inEnd = a[1], earlyOut = a[2];
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        Value run = e.band(e.eq(e.tid(), e.idx(0)),
                           e.ne(e.load(inEnd, {bb, g, e.idx(0)}), e.i32(0)));
        e.ifThen(run, [&](Emitter &e) {
          const TargetInfo &target = nvvmTarget();
          Value worst = e.f64(0.0);
          for (int64_t i = 0; i < G; ++i)
            worst =
                e.fmax(worst, epsHat(e, target,
                                     e.load(zu, {bb, g, e.idx(1), e.idx(i)}),
                                     e.load(zu, {bb, g, e.idx(0), e.idx(i)})));
          Value early = e.fcmp(arith::CmpFPredicate::OGT, worst, e.f64(tau));
          e.store(e.select(early, e.i32(1), e.i32(0)), earlyOut, {bb, g});
        });
      });
  launchPerGroup(b, loc, test, op.getScores(), hkv, kWarp, testOperands);
}

/// The smallest i32 over the warp's lanes (every lane gets it).
Value warpMin(GPUEmitter &e, Value v) {
  return laneReduce(e, nvvmTarget(), v, kWarp,
                    [&](Value x, Value y) { return e.mins(x, y); });
}

/// A unit's terms for head i of kv head g's group, as certify and its run
/// sums take them: the omitted mass of its bound (unitMassBound) and, with
/// the pages' widths, the mass its lower bound adds to Z (unitLowerMass).
struct GroupMasses {
  Value scores, widths, bb, g;
  CandidateUnits units;
  SmallVector<Value> ms; // the heads' max logits
  Value pageSize;
  int64_t group;

  Value head(Emitter &e, int64_t i) const {
    return e.add(e.mul(g, e.idx(group)), e.idx(i));
  }
  Value mass(Emitter &e, Value u, int64_t i) const {
    Value cnt = units.count(e, u);
    Value bound = e.load(scores, {bb, head(e, i), u});
    return unitMassBound(e, nvvmTarget(), cnt, bound, ms[i]);
  }
  Value lower(Emitter &e, Value u, int64_t i) const {
    Value h = head(e, i);
    Value bound = e.load(scores, {bb, h, u});
    Value width = e.load(widths, {bb, h, e.divs(u, pageSize)});
    return unitLowerMass(e, nvvmTarget(), units.count(e, u), bound, width,
                         ms[i]);
  }
};

void lowerCertify(CertifyOp op, OpBuilder &b, const KernelBuilder &kb,
                  StringRef name) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getScores(), 1);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t G = hq / hkv, base = op.getBaseUnits(), extraMax = slots - base;
  double tau = op.getTau().convertToDouble();
  int64_t unitTokens =
      op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
  const int64_t threads = 256;
  Type f32 = b.getF32Type(), f64 = b.getF64Type(), i32 = b.getI32Type();
  SmallVector<Value> operands{
      op.getScores(), op.getLens(),     op.getIndices(), op.getPartialMl(),
      op.getExtra(),  op.getFallback(), op.getStats()};
  if (op.getWindows())
    operands.push_back(op.getWindows());
  bool hasWindows = static_cast<bool>(op.getWindows());
  int64_t earlyIdx = -1;
  if (op.getEarly()) {
    earlyIdx = operands.size();
    operands.push_back(op.getEarly());
  }
  // With widths the extras taken add their lower bounds' mass to Z.
  int64_t widthsIdx = -1;
  if (op.getWidths()) {
    widthsIdx = operands.size();
    operands.push_back(op.getWidths());
  }
  // The selected set (base units, then the extras taken), as a bitmap over
  // the first kMarkUnits units, so that the passes over every unit test
  // membership with one shared load rather than a binary search of the base
  // and a scan of the extras (which a unit past the bitmap still takes).
  // Needed once there are more slots than a scan per unit affords (open
  // extras: max_extra as large as the context); otherwise kept where it
  // fits the 48 KB of static shared memory.
  constexpr int64_t kScanExtras = 64, kMarkUnits = 131072;
  constexpr int64_t kMarkWords = kMarkUnits / 32;
  constexpr int64_t kStaticBudget = kStaticSharedBytes - 1024;
  bool manyExtras = tau > 0.0 && extraMax > kScanExtras;
  // ... and with many extras the walk starts from per-chunk mass sums (f64
  // [chunk][head], 8 KB; with widths [chunk][U of each head, then Z of
  // each head], 16 KB).
  // The chunks split the slots that can hold an extra (no more than the
  // units: open extras leave most of a short context's slots empty).
  const int64_t numChunks = std::clamp<int64_t>(1024 / G, 1, threads);
  const int64_t chunkCols = widthsIdx >= 0 ? 2 * G : G;
  // With many extras a sequence whose last slot is empty (open extras:
  // every candidate is in a slot, so U is the slots' mass and nothing
  // else) takes the fast walk instead: a grid kernel (`_sums`) sums each
  // run of 32 slots (U's and, with widths, Z's columns) into scratch;
  // certify's warps turn them into the omitted sums after each run and
  // find the first run whose end is within tau, and one warp the slot in
  // it. Every decision is taken on sums of positive terms (no
  // subtraction), so it needs no fresh pass over the units. Shared: each
  // warp's sums [warp][column] and the found run's sums [warp][U at its
  // end, Z before it, Z at its end].
  const int64_t warps = threads / kWarp;
  const int64_t runsMax = (std::max<int64_t>(extraMax, 1) + kWarp - 1) / kWarp;
  Type warpSumsType =
      KernelBuilder::workgroupType(ctx, {warps, chunkCols}, f64);
  Type foundType = KernelBuilder::workgroupType(ctx, {warps, 3 * G}, f64);
  SmallVector<Type> smem{KernelBuilder::workgroupType(ctx, {G}, f32), // m
                         KernelBuilder::workgroupType(ctx, {G}, f64), // Z
                         KernelBuilder::workgroupType(ctx, {G}, f64), // U
                         // extras taken, fallback, first chunk within tau
                         KernelBuilder::workgroupType(ctx, {3}, i32)};
  Type marksType = KernelBuilder::workgroupType(ctx, {kMarkWords}, i32);
  Type chunksType =
      KernelBuilder::workgroupType(ctx, {numChunks, chunkCols}, f64);
  // The value box: one warp per page row (lanes over channels, `boxPer`
  // channels each), `boxRows` rows in flight, combined through shared
  // memory: as many rows as the threads allow and, beside the marks and
  // chunk sums many extras need, the 48 KB of static shared memory (wide
  // heads: 4 rows of 512 channels).
  bool hasBox = static_cast<bool>(op.getVbox());
  int64_t d = hasBox ? staticDim(op.getVbox(), 3) : 0;
  int64_t boxLanes = std::min<int64_t>(std::max<int64_t>(d, 1), kWarp);
  int64_t boxRows = threads / boxLanes;
  int64_t boxPer = (d + boxLanes - 1) / boxLanes;
  auto boxType = [&](int64_t rows) {
    return KernelBuilder::workgroupType(ctx, {rows, kValueBoxRows, d}, f32);
  };
  if (hasBox) {
    SmallVector<Type> fixed(smem);
    if (manyExtras)
      fixed.append({marksType, chunksType, warpSumsType, foundType});
    int64_t fixedBytes = KernelBuilder::workgroupBytes(fixed);
    while (boxRows > 1 &&
           fixedBytes + KernelBuilder::workgroupBytes({boxType(boxRows)}) >
               kStaticBudget)
      boxRows /= 2;
  }
  int64_t boxIdx = operands.size();
  if (hasBox) {
    operands.append({op.getSummaries(), op.getPageTable(), op.getVbox()});
    // per-row partial boxes [row][min, max][channel]
    smem.push_back(boxType(boxRows));
  }
  SmallVector<Type> withMarks(smem);
  withMarks.push_back(marksType);
  bool marksOn =
      manyExtras || KernelBuilder::workgroupBytes(withMarks) <= kStaticBudget;
  int64_t marksIdx = smem.size();
  if (marksOn)
    smem.push_back(marksType);
  int64_t chunksIdx = smem.size();
  if (manyExtras)
    smem.push_back(chunksType);
  int64_t warpSumsIdx = smem.size(), foundIdx = warpSumsIdx + 1;
  if (manyExtras)
    smem.append({warpSumsType, foundType});
  // The runs' sums [sequence][kv head][run][column]: U's columns, then
  // Z's; the fast walk overwrites U's with the omitted sums after each
  // run within its warp's share.
  int64_t runsIdx = -1;
  if (manyExtras) {
    runsIdx = operands.size();
    operands.push_back(memref::AllocOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic, hkv, runsMax, chunkCols}, f64),
        ValueRange{memref::DimOp::create(b, loc, op.getScores(), 0)}));
  }
  // What both kernels read of a sequence and group: the context, the
  // window, the early test's decision and the units that can hold mass
  // (none after an early fallback: it sums nothing).
  struct GroupView {
    Value n, w, early, nu;
  };
  auto viewOf = [&](GPUEmitter &e, ValueRange a, Value bb,
                    Value g) -> GroupView {
    Value scores = a[0], lens = a[1];
    Value n = e.loadIndex(lens, {bb});
    Value w = effectiveWindow(e, hasWindows ? a[7] : Value(), bb,
                              op.getWindow(), op.getWindowMax());
    Value early = e.i1(false);
    if (earlyIdx >= 0)
      early = e.ne(e.load(a[earlyIdx], {bb, g}), e.i32(0));
    Value nu =
        e.select(early, e.idx(0),
                 e.mins(e.dim(scores, 2), e.ceilDiv(n, e.idx(unitTokens))));
    return {n, w, early, nu};
  };
  // The fast walk's test: the last slot empty and no early fallback.
  auto fastWalkOf = [&](GPUEmitter &e, Value indices, Value bb, Value g,
                        const GroupView &v) -> Value {
    Value last = e.loadIndex(indices, {bb, g, e.idx(slots - 1)});
    return e.band(e.lt(last, e.idx(0)), e.bnot(v.early));
  };
  if (manyExtras) {
    // A warp a run of 32 slots, 8 runs a block, blocks for the runs that
    // can hold a unit.
    auto sums = kb.createKernel(
        (name + "_sums").str(), operands,
        {KernelBuilder::workgroupType(ctx, {G}, f32)},
        [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
          Value indices = a[2], pml = a[3], runs = a[runsIdx], smM = sm[0];
          Value tid = e.tid(), lane = e.rems(tid, e.idx(kWarp));
          Value run = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(warps)),
                            e.divs(tid, e.idx(kWarp)));
          Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
          GroupView v = viewOf(e, a, bb, g);
          Value filledMax = e.mins(e.idx(extraMax), v.nu);
          Value nRuns = e.ceilDiv(filledMax, e.idx(kWarp));
          Value firstRun =
              e.mul(e.bid(gpu::Dimension::x), e.idx(warps)); // uniform
          e.ifThen(
              e.band(fastWalkOf(e, indices, bb, g, v), e.lt(firstRun, nRuns)),
              [&](Emitter &ee) {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                GroupMasses gm{
                    a[0],
                    widthsIdx >= 0 ? a[widthsIdx] : Value(),
                    bb,
                    g,
                    {e.idx(unitTokens), e.idx(op.getAnchor()), v.n, v.w},
                    {},
                    e.idx(op.getPageSize()),
                    G};
                // One thread a head, the heads' walks side by side.
                e.forLoop(
                    tid, e.idx(G), e.idx(threads), {},
                    [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                      Value h = e.add(e.mul(g, e.idx(G)), i);
                      e.store(
                          partialMaxAndTotal(e, pml, e.dim(pml, 2), bb, h).first,
                          smM, {i});
                      return {};
                    });
                e.barrier();
                for (int64_t i = 0; i < G; ++i)
                  gm.ms.push_back(e.load(smM, {e.idx(i)}));
                // The warp's run (a uniform branch in the warp).
                e.ifThen(e.lt(run, nRuns), [&](Emitter &ee) {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value j = e.add(e.mul(run, e.idx(kWarp)), lane);
                  Value in = e.lt(j, filledMax);
                  Value u = e.loadIndex(
                      indices,
                      {bb, g, e.add(e.idx(base), e.select(in, j, e.idx(0)))});
                  Value have = e.band(in, e.ge(u, e.idx(0)));
                  Value uSafe = e.select(have, u, e.idx(0));
                  SmallVector<Value> cols;
                  for (int64_t i = 0; i < G; ++i)
                    cols.push_back(e.warpSumF64(
                        e.select(have, gm.mass(e, uSafe, i), e.f64(0.0))));
                  if (widthsIdx >= 0)
                    for (int64_t i = 0; i < G; ++i)
                      cols.push_back(e.warpSumF64(
                          e.select(have, gm.lower(e, uSafe, i), e.f64(0.0))));
                  e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
                    for (int64_t c = 0; c < chunkCols; ++c)
                      e.store(cols[c], runs, {bb, g, run, e.idx(c)});
                  });
                });
              });
        });
    KernelBuilder::launchBounds(sums, threads, 2);
    auto cidx = [&](int64_t x) {
      return arith::ConstantIndexOp::create(b, loc, x);
    };
    // (The launch plan expresses add, mul, ceildiv, min and max.)
    Value units = memref::DimOp::create(b, loc, op.getScores(), 2);
    Value blocks = arith::MaxSIOp::create(
        b, loc,
        arith::CeilDivSIOp::create(
            b, loc, arith::MinSIOp::create(b, loc, units, cidx(extraMax)),
            cidx(threads)),
        cidx(1));
    launch(b, loc, sums, blocks, cidx(hkv),
           memref::DimOp::create(b, loc, op.getScores(), 0), threads, operands);
  }
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value scores = a[0], indices = a[2], pml = a[3];
        Value extraOut = a[4], fallbackOut = a[5], stats = a[6];
        Value smM = sm[0], smZ = sm[1], smU = sm[2], smD = sm[3];
        Value tid = e.tid();
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        // A group the early test sent to dense had no sparse pass: it sums
        // nothing and falls back. Units past the context hold no candidate
        // position (and no mass).
        GroupView view = viewOf(e, a, bb, g);
        Value n = view.n, w = view.w, early = view.early, nu = view.nu;
        Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
        Value splits = e.dim(pml, 2);
        auto head = [&](Emitter &e, int64_t i) {
          return e.add(e.mul(g, e.idx(G)), e.idx(i));
        };
        // m and Z of the base partials, one thread a head, the heads' walks
        // side by side (a branch per head ran them one after another in the
        // first warp: 27 us against 20 at 32 splits of 7 heads, Nsight
        // Compute, session 39).
        e.forLoop(tid, e.idx(G), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value h = e.add(e.mul(g, e.idx(G)), i);
                    auto [m, z] = partialMaxAndTotal(e, pml, splits, bb, h);
                    e.store(m, smM, {i});
                    e.store(e.extf(z, f64), smZ, {i});
                    e.store(e.f64(0.0), smU, {i});
                    return {};
                  });
        e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
          e.store(e.i32(0), smD, {e.idx(0)});
          e.store(e.i32(0), smD, {e.idx(1)});
          e.store(e.i32(numChunks), smD, {e.idx(2)});
        });
        Value marks = marksOn ? sm[marksIdx] : Value();
        if (marksOn)
          e.forLoop(tid, e.idx(kMarkWords), e.idx(threads), {},
                    [&](Emitter &e, Value x, ValueRange) -> SmallVector<Value> {
                      e.store(e.i32(0), marks, {x});
                      return {};
                    });
        e.barrier();
        // Sets unit u's bit (u may be -1: an empty slot, or past the
        // bitmap: left to the searches).
        auto mark = [&](GPUEmitter &e, Value u) {
          e.ifThen(e.band(e.ge(u, e.idx(0)), e.lt(u, e.idx(kMarkUnits))),
                   [&](Emitter &ee) {
                     GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                     Value bit = arith::ShLIOp::create(
                         e.builder(), e.location(), e.i32(1),
                         e.toI32(e.rems(u, e.idx(32))));
                     e.atomic(arith::AtomicRMWKind::ori, marks,
                              {e.divs(u, e.idx(32))}, bit);
                   });
        };
        if (marksOn && base > 0) {
          e.forLoop(
              tid, e.idx(base), e.idx(threads), {},
              [&](Emitter &ee, Value j, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                mark(e, e.loadIndex(indices, {bb, g, j}));
                return {};
              });
          e.barrier();
        }
        SmallVector<Value> ms;
        for (int64_t i = 0; i < G; ++i)
          ms.push_back(e.load(smM, {e.idx(i)}));
        // Base units (ascending, -1 padded at the end) below x, by binary
        // search: a lower bound into the base set.
        auto baseBelow = [&](GPUEmitter &e, Value x) -> Value {
          if (base == 0)
            return e.idx(0);
          Value x32 = e.toI32(x);
          return e.forLoop(
              e.idx(0), e.idx(64 - __builtin_clzll(base)), e.idx(1),
              {e.idx(0), e.idx(base)},
              [&](Emitter &e, Value, ValueRange acc) -> SmallVector<Value> {
                Value mid = e.divs(e.add(acc[0], acc[1]), e.idx(2));
                Value mc = e.mins(mid, e.idx(base - 1));
                Value u = e.load(indices, {bb, g, mc});
                Value uk =
                    e.select(e.cmp(arith::CmpIPredicate::slt, u, e.i32(0)),
                             e.i32(std::numeric_limits<int32_t>::max()), u);
                Value goRight = e.cmp(arith::CmpIPredicate::slt, uk, x32);
                Value active = e.lt(acc[0], acc[1]);
                return {e.select(e.band(active, goRight), e.add(mid, e.idx(1)),
                                 acc[0]),
                        e.select(e.band(active, e.bnot(goRight)), mid, acc[1])};
              })[0];
        };
        // Membership in the base set.
        auto inBase = [&](GPUEmitter &e, Value u) -> Value {
          if (base == 0)
            return e.i1(false);
          Value pos = e.mins(baseBelow(e, u), e.idx(base - 1));
          return e.eq(e.load(indices, {bb, g, pos}), e.toI32(u));
        };
        auto scanExtras = [&](Emitter &e, Value u, Value count) -> Value {
          return e.forLoop(
              e.idx(0), count, e.idx(1), {e.i1(false)},
              [&](Emitter &e, Value j, ValueRange acc) -> SmallVector<Value> {
                Value x = e.loadIndex(indices, {bb, g, e.add(e.idx(base), j)});
                return {e.bor(acc[0], e.eq(x, u))};
              })[0];
        };
        // Membership in the base set or the first `count` extras (with
        // marks: they hold exactly the base and the extras taken so far,
        // none of those before the walk).
        auto inSet = [&](GPUEmitter &e, Value u, Value count) -> Value {
          auto search = [&](Emitter &ee) -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            return {e.bor(inBase(e, u), scanExtras(e, u, count))};
          };
          if (!marksOn)
            return search(e)[0];
          return e.ifElse(
              e.lt(u, e.idx(kMarkUnits)), TypeRange{e.builder().getI1Type()},
              [&](Emitter &e) -> SmallVector<Value> {
                Value word = e.load(marks, {e.divs(u, e.idx(32))});
                Value bit =
                    arith::ShRUIOp::create(e.builder(), e.location(), word,
                                           e.toI32(e.rems(u, e.idx(32))));
                return {e.ne(e.band(bit, e.i32(1)), e.i32(0))};
              },
              search)[0];
        };
        const TargetInfo &target = nvvmTarget();
        CandidateUnits units{unit, anchor, n, w};
        // The mass of unit u's bound, and of its lower bound (a token's,
        // from its page's width) that a taken extra adds to Z.
        Value widths = widthsIdx >= 0 ? a[widthsIdx] : Value();
        GroupMasses gm{
            scores, widths, bb, g, units, ms, e.idx(op.getPageSize()), G};
        auto mass = [&](Emitter &e, Value u, int64_t i) {
          return gm.mass(e, u, i);
        };
        auto lowerMass = [&](Emitter &e, Value u, int64_t i) {
          return gm.lower(e, u, i);
        };
        UnitMassFn lower = widths ? UnitMassFn(lowerMass) : nullptr;
        // U over candidates outside base (and the first `count` extras).
        auto sumOmitted = [&](GPUEmitter &e, Value count) {
          SmallVector<Value> init(G, e.f64(0.0));
          auto part = e.forLoop(
              tid, nu, e.idx(threads), init,
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value skip = inSet(e, u, count);
                SmallVector<Value> out;
                for (int64_t i = 0; i < G; ++i)
                  out.push_back(
                      e.select(skip, acc[i], e.fadd(acc[i], mass(e, u, i))));
                return out;
              });
          for (int64_t i = 0; i < G; ++i)
            e.warpAtomicAddF64(smU, {e.idx(i)}, part[i]);
          e.barrier();
        };
        // Marks the first `count` extras (all threads; ends in a barrier).
        auto markTaken = [&](GPUEmitter &e, Value count) {
          e.forLoop(
              tid, count, e.idx(threads), {},
              [&](Emitter &ee, Value j, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                mark(e, e.loadIndex(indices, {bb, g, e.add(e.idx(base), j)}));
                return {};
              });
          e.barrier();
        };
        // The walk in rank order over fresh sums of every unit: U of all
        // but the base, the walk subtracting the extras' masses (from the
        // chunk sums with many extras), and U of the final set afresh.
        auto walkInOrder = [&](GPUEmitter &e) {
          sumOmitted(e, e.idx(0));
          if (tau > 0.0) {
            // With many slots the chunks' sums come first: each of numChunks
            // threads sums the mass of its chunk of slots per head. Each
            // unit is in one slot at most, so slots past the units are empty
            // and the chunks split only the first filledMax.
            Value filledMax, chunkLen;
            if (manyExtras) {
              filledMax = e.mins(e.idx(extraMax), nu);
              chunkLen =
                  e.maxs(e.ceilDiv(filledMax, e.idx(numChunks)), e.idx(1));
              Value cs = sm[chunksIdx];
              e.ifThen(e.lt(tid, e.idx(numChunks)), [&](Emitter &e) {
                Value j0 = e.mul(tid, chunkLen);
                Value j1 = e.mins(e.add(j0, chunkLen), filledMax);
                SmallVector<Value> init(chunkCols, e.f64(0.0));
                auto sums = e.forLoop(
                    j0, j1, e.idx(1), init,
                    [&](Emitter &e, Value j,
                        ValueRange acc) -> SmallVector<Value> {
                      Value u =
                          e.loadIndex(indices, {bb, g, e.add(e.idx(base), j)});
                      Value have = e.ge(u, e.idx(0));
                      Value uSafe = e.select(have, u, e.idx(0));
                      SmallVector<Value> out;
                      for (int64_t i = 0; i < G; ++i)
                        out.push_back(
                            e.fadd(acc[i], e.select(have, mass(e, uSafe, i),
                                                    e.f64(0.0))));
                      if (lower)
                        for (int64_t i = 0; i < G; ++i)
                          out.push_back(e.fadd(
                              acc[G + i],
                              e.select(have, lower(e, uSafe, i), e.f64(0.0))));
                      return out;
                    });
                for (int64_t i = 0; i < chunkCols; ++i)
                  e.store(sums[i], cs, {tid, e.idx(i)});
              });
              e.barrier();
              // Their inclusive prefix sums over the chunks, in place
              // (Hillis-Steele: log2(numChunks) rounds of two barriers).
              for (int64_t off = 1; off < numChunks; off *= 2) {
                Value take =
                    e.band(e.lt(tid, e.idx(numChunks)), e.ge(tid, e.idx(off)));
                SmallVector<Type> f64s(chunkCols, f64);
                SmallVector<Value> before = e.ifElse(
                    take, f64s,
                    [&](Emitter &e) -> SmallVector<Value> {
                      SmallVector<Value> out;
                      for (int64_t i = 0; i < chunkCols; ++i)
                        out.push_back(
                            e.load(cs, {e.sub(tid, e.idx(off)), e.idx(i)}));
                      return out;
                    },
                    [&](Emitter &e) -> SmallVector<Value> {
                      return SmallVector<Value>(chunkCols, e.f64(0.0));
                    });
                e.barrier();
                e.ifThen(take, [&](Emitter &e) {
                  for (int64_t i = 0; i < chunkCols; ++i)
                    e.store(e.fadd(e.load(cs, {tid, e.idx(i)}), before[i]), cs,
                            {tid, e.idx(i)});
                });
                e.barrier();
              }
              // The first chunk after which every head is within tau (the
              // omitted sums only shrink along the slots, so the test is
              // monotone): each thread tests its chunk's end.
              e.ifThen(e.lt(tid, e.idx(numChunks)), [&](Emitter &ee) {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                SmallVector<Value> left, grown;
                for (int64_t i = 0; i < G; ++i) {
                  left.push_back(e.fmax(e.fsub(e.load(smU, {e.idx(i)}),
                                               e.load(cs, {tid, e.idx(i)})),
                                        e.f64(0.0)));
                  Value z = e.load(smZ, {e.idx(i)});
                  grown.push_back(
                      lower ? e.fadd(z, e.load(cs, {tid, e.idx(G + i)})) : z);
                }
                Value ok =
                    e.fcmp(arith::CmpFPredicate::OLE,
                           worstEpsHat(e, target, left, grown), e.f64(tau));
                e.ifThen(ok, [&](Emitter &ee) {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  e.atomic(arith::AtomicRMWKind::mins, smD, {e.idx(2)},
                           e.toI32(tid));
                });
              });
              e.barrier();
            }
            // Thread 0 walks the extras in order; with chunk sums only the
            // first chunk whose end is within tau, slot by slot.
            e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              SmallVector<Value> us, zs;
              for (int64_t i = 0; i < G; ++i) {
                us.push_back(e.load(smU, {e.idx(i)}));
                zs.push_back(e.load(smZ, {e.idx(i)}));
              }
              ExtrasWalk walk;
              if (manyExtras) {
                Value cs = sm[chunksIdx];
                Value first = e.loadIndex(smD, {e.idx(2)});
                Value found = e.lt(first, e.idx(numChunks));
                Value c = e.mins(first, e.idx(numChunks - 1));
                // The sums before chunk c: chunk c - 1's inclusive sums.
                Value hasPrev = e.gt(c, e.idx(0));
                Value prevC = e.select(hasPrev, e.sub(c, e.idx(1)), e.idx(0));
                auto before = [&](int64_t col) {
                  return e.select(hasPrev, e.load(cs, {prevC, e.idx(col)}),
                                  e.f64(0.0));
                };
                SmallVector<Value> left, grown(zs);
                for (int64_t i = 0; i < G; ++i) {
                  left.push_back(e.fmax(e.fsub(us[i], before(i)), e.f64(0.0)));
                  if (lower)
                    grown[i] = e.fadd(zs[i], before(G + i));
                }
                Value from = e.mins(e.mul(c, chunkLen), filledMax);
                Value to = e.select(
                    found, e.mins(e.add(from, chunkLen), filledMax), from);
                walk = walkExtrasFrom(e, target, indices, bb, g, base, from, to,
                                      tau, left, grown, mass, lower);
                // Found: the chunk sums say its end is within tau, so the walk
                // stops inside it (or, by rounding, at its end; the fresh sum
                // below decides either way). Not found: no count passes.
                walk.done = found;
              } else {
                walk = walkExtras(e, target, indices, bb, g, base, extraMax,
                                  tau, us, zs, mass, lower);
              }
              Value done = walk.done;
              e.store(e.toI32(e.select(done, walk.taken, e.idx(0))), smD,
                      {e.idx(0)});
              e.store(e.select(done, e.i32(0), e.i32(1)), smD, {e.idx(1)});
              for (int64_t i = 0; i < G; ++i)
                e.store(e.f64(0.0), smU, {e.idx(i)});
            });
            e.barrier();
            Value extra = e.loadIndex(smD, {e.idx(0)});
            if (marksOn)
              markTaken(e, extra);
            // Z of the final set: the extras taken add their lower bounds'
            // mass (a sum of positive terms, so the walk's own would do; this
            // one is parallel). sumOmitted's barrier orders it before the
            // decision.
            if (lower) {
              SmallVector<Value> init(G, e.f64(0.0));
              auto part =
                  e.forLoop(tid, extra, e.idx(threads), init,
                            [&](Emitter &e, Value j,
                                ValueRange acc) -> SmallVector<Value> {
                              Value u = e.loadIndex(
                                  indices, {bb, g, e.add(e.idx(base), j)});
                              SmallVector<Value> out;
                              for (int64_t i = 0; i < G; ++i)
                                out.push_back(e.fadd(acc[i], lower(e, u, i)));
                              return out;
                            });
              for (int64_t i = 0; i < G; ++i)
                e.warpAtomicAddF64(smZ, {e.idx(i)}, part[i]);
            }
            sumOmitted(e, extra);
          }
        };
        // The fast walk (open extras; see runsIdx). Pass 1: each warp
        // takes its share of the runs from the last, writing over each
        // run's U columns the omitted sums after it within the share, and
        // leaves the share's totals. Pass 2: each warp adds the later
        // shares' U and the earlier shares' Z, and finds its first run
        // whose end is within tau (the sums only shrink along the slots:
        // the test is monotone); the first such run over the warps wins.
        // Then warp 0 finds the slot in it.
        auto fastWalk = [&](GPUEmitter &e) {
          Value runs = a[runsIdx], smT = sm[warpSumsIdx], smF = sm[foundIdx];
          Value lane = e.rems(tid, e.idx(kWarp));
          Value warp = e.divs(tid, e.idx(kWarp));
          Value filledMax = e.mins(e.idx(extraMax), nu);
          Value nRuns = e.ceilDiv(filledMax, e.idx(kWarp));
          Value rounds = e.ceilDiv(nRuns, e.idx(threads));
          Value share = e.maxs(e.mul(rounds, e.idx(kWarp)), e.idx(1));
          Value r0 = e.mul(warp, share);
          Value noRun = e.i32(std::numeric_limits<int32_t>::max());
          e.ifThen(e.eq(tid, e.idx(0)),
                   [&](Emitter &e) { e.store(noRun, smD, {e.idx(2)}); });
          // Lane l of the warp's value at lane `from` (index or i32).
          auto fromLane = [&](GPUEmitter &e, Value v, Value from) {
            return e.shuffleF64(v,
                                [&](Value x) { return e.shuffleIdx(x, from); });
          };
          // The sum over the lanes after this one (0 at the last lane).
          auto afterLane = [&](GPUEmitter &e, Value suffix) {
            Value next = e.shuffleF64(
                suffix, [&](Value x) { return e.shuffleDown(x, 1); });
            return e.select(e.lt(lane, e.idx(kWarp - 1)), next, e.f64(0.0));
          };
          SmallVector<Value> init(chunkCols, e.f64(0.0));
          auto totals = e.forLoop(
              e.idx(0), rounds, e.idx(1), init,
              [&](Emitter &ee, Value r, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value back = e.sub(e.sub(rounds, e.idx(1)), r);
                Value run = e.add(r0, e.add(e.mul(back, e.idx(kWarp)), lane));
                Value in = e.lt(run, nRuns);
                Value at = e.select(in, run, e.idx(0));
                SmallVector<Value> out;
                for (int64_t c = 0; c < chunkCols; ++c) {
                  Value v = e.select(in, e.load(runs, {bb, g, at, e.idx(c)}),
                                     e.f64(0.0));
                  if (c >= G) { // Z's columns: the share's total
                    out.push_back(e.fadd(acc[c], e.warpSumF64(v)));
                    continue;
                  }
                  Value suffix = e.warpSuffixF64(v, lane);
                  Value after = e.fadd(acc[c], afterLane(e, suffix));
                  e.ifThen(in, [&](Emitter &e) {
                    e.store(after, runs, {bb, g, run, e.idx(c)});
                  });
                  out.push_back(e.fadd(acc[c], fromLane(e, suffix, e.idx(0))));
                }
                return out;
              });
          e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
            for (int64_t c = 0; c < chunkCols; ++c)
              e.store(totals[c], smT, {warp, e.idx(c)});
          });
          e.barrier();
          // U of taking no extra; U after this warp's share; Z before it.
          SmallVector<Value> uAll, uAfter, zBase, zIn;
          for (int64_t i = 0; i < G; ++i) {
            Value all = e.f64(0.0), after = e.f64(0.0);
            Value z = e.load(smZ, {e.idx(i)}), before = z;
            for (int64_t v = 0; v < warps; ++v) {
              Value t = e.load(smT, {e.idx(v), e.idx(i)});
              all = e.fadd(all, t);
              after = e.select(e.lt(warp, e.idx(v)), e.fadd(after, t), after);
              if (lower)
                before = e.select(
                    e.gt(warp, e.idx(v)),
                    e.fadd(before, e.load(smT, {e.idx(v), e.idx(G + i)})),
                    before);
            }
            uAll.push_back(all);
            uAfter.push_back(after);
            zBase.push_back(z);
            zIn.push_back(before);
          }
          Value takeNone =
              e.fcmp(arith::CmpFPredicate::OLE,
                     worstEpsHat(e, target, uAll, zBase), e.f64(tau));
          e.ifThen(e.bnot(takeNone), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            // State: (found, round, Z before the round).
            SmallVector<Value> init{e.i1(false), e.idx(0)};
            init.append(zIn.begin(), zIn.end());
            e.whileLoop(
                init,
                [&](Emitter &e, ValueRange st) {
                  return e.band(e.bnot(st[0]), e.lt(st[1], rounds));
                },
                [&](Emitter &ee, ValueRange st) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value run =
                      e.add(r0, e.add(e.mul(st[1], e.idx(kWarp)), lane));
                  Value in = e.lt(run, nRuns);
                  Value at = e.select(in, run, e.idx(0));
                  SmallVector<Value> uEnd, zEnd, prefix;
                  for (int64_t i = 0; i < G; ++i)
                    uEnd.push_back(
                        e.fadd(uAfter[i],
                               e.select(in, e.load(runs, {bb, g, at, e.idx(i)}),
                                        e.f64(0.0))));
                  for (int64_t i = 0; i < G; ++i) {
                    Value z = st[2 + i];
                    if (lower) {
                      Value l =
                          e.select(in, e.load(runs, {bb, g, at, e.idx(G + i)}),
                                   e.f64(0.0));
                      prefix.push_back(e.warpPrefixF64(l, lane));
                      z = e.fadd(z, prefix.back());
                    }
                    zEnd.push_back(z);
                  }
                  Value ok =
                      e.band(in, e.fcmp(arith::CmpFPredicate::OLE,
                                        worstEpsHat(e, target, uEnd, zEnd),
                                        e.f64(tau)));
                  Value first =
                      warpMin(e, e.select(ok, e.toI32(lane), e.i32(kWarp)));
                  Value hit =
                      e.cmp(arith::CmpIPredicate::slt, first, e.i32(kWarp));
                  // A uniform branch in the warp: its first run within tau.
                  e.ifThen(hit, [&](Emitter &ee) {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    SmallVector<Value> zBefore;
                    for (int64_t i = 0; i < G; ++i) {
                      Value z = st[2 + i];
                      if (lower) {
                        Value up = e.shuffleF64(prefix[i], [&](Value x) {
                          return e.shuffleUp(x, 1);
                        });
                        z = e.fadd(
                            z, e.select(e.gt(lane, e.idx(0)), up, e.f64(0.0)));
                      }
                      zBefore.push_back(z);
                    }
                    e.ifThen(e.eq(e.toI32(lane), first), [&](Emitter &ee) {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      for (int64_t i = 0; i < G; ++i) {
                        e.store(uEnd[i], smF, {warp, e.idx(i)});
                        e.store(zBefore[i], smF, {warp, e.idx(G + i)});
                        e.store(zEnd[i], smF, {warp, e.idx(2 * G + i)});
                      }
                      e.atomic(arith::AtomicRMWKind::mins, smD, {e.idx(2)},
                               e.toI32(run));
                    });
                  });
                  SmallVector<Value> out{hit, e.add(st[1], e.idx(1))};
                  for (int64_t i = 0; i < G; ++i)
                    out.push_back(
                        lower ? e.fadd(st[2 + i],
                                       fromLane(e, prefix[i], e.idx(kWarp - 1)))
                              : st[2 + i]);
                  return out;
                });
          });
          e.barrier();
          // Warp 0: the slot in the found run. Lane l takes the run's slot
          // l; U after it is U at the run's end plus the lanes after, Z
          // through it Z before the run plus the lanes up to it.
          e.ifThen(e.lt(tid, e.idx(kWarp)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value found32 = e.load(smD, {e.idx(2)});
            Value found =
                e.band(e.bnot(takeNone),
                       e.cmp(arith::CmpIPredicate::slt, found32, noRun));
            Value run = e.select(found, e.toIndex(found32), e.idx(0));
            Value owner = e.divs(run, share);
            SmallVector<Value> uEnd, zBefore, zEnd, uLane, zLane;
            for (int64_t i = 0; i < G; ++i) {
              uEnd.push_back(e.load(smF, {owner, e.idx(i)}));
              zBefore.push_back(e.load(smF, {owner, e.idx(G + i)}));
              zEnd.push_back(e.load(smF, {owner, e.idx(2 * G + i)}));
            }
            Value j = e.add(e.mul(run, e.idx(kWarp)), lane);
            Value in = e.band(found, e.lt(j, filledMax));
            Value u = e.loadIndex(
                indices,
                {bb, g, e.add(e.idx(base), e.select(in, j, e.idx(0)))});
            Value have = e.band(in, e.ge(u, e.idx(0)));
            Value uSafe = e.select(have, u, e.idx(0));
            for (int64_t i = 0; i < G; ++i) {
              Value m = e.select(have, mass(e, uSafe, i), e.f64(0.0));
              uLane.push_back(
                  e.fadd(uEnd[i], afterLane(e, e.warpSuffixF64(m, lane))));
              Value z = zBefore[i];
              if (lower)
                z = e.fadd(z, e.warpPrefixF64(e.select(have, lower(e, uSafe, i),
                                                       e.f64(0.0)),
                                              lane));
              zLane.push_back(z);
            }
            Value ok = e.band(have, e.fcmp(arith::CmpFPredicate::OLE,
                                           worstEpsHat(e, target, uLane, zLane),
                                           e.f64(tau)));
            Value first = warpMin(e, e.select(ok, e.toI32(lane), e.i32(kWarp)));
            Value hit = e.cmp(arith::CmpIPredicate::slt, first, e.i32(kWarp));
            // Filled slots come first: the run holds the lanes before the
            // first without a unit. No lane within tau (the lanes' sums
            // round apart from the run's): the whole run, on the run's sums.
            Value held =
                warpMin(e, e.select(have, e.i32(kWarp), e.toI32(lane)));
            Value src = e.select(hit, first, e.i32(0));
            Value inRun =
                e.toIndex(e.select(hit, e.add(first, e.i32(1)), held));
            Value taken = e.select(
                found, e.add(e.mul(run, e.idx(kWarp)), inRun), e.idx(0));
            SmallVector<Value> uFinal, zFinal;
            for (int64_t i = 0; i < G; ++i) {
              Value uRun = e.select(hit, fromLane(e, uLane[i], src), uEnd[i]);
              Value zRun = e.select(hit, fromLane(e, zLane[i], src), zEnd[i]);
              uFinal.push_back(e.select(found, uRun, uAll[i]));
              zFinal.push_back(e.select(found, zRun, zBase[i]));
            }
            // Not found and not within tau without extras: a NaN or an
            // overflow kept every run's end over tau; fall back.
            Value fellBack = e.band(e.bnot(takeNone), e.bnot(found));
            e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
              e.store(e.toI32(taken), smD, {e.idx(0)});
              e.store(e.select(fellBack, e.i32(1), e.i32(0)), smD, {e.idx(1)});
              for (int64_t i = 0; i < G; ++i) {
                e.store(uFinal[i], smU, {e.idx(i)});
                e.store(zFinal[i], smZ, {e.idx(i)});
              }
            });
          });
          e.barrier();
          // The value box reads the final set's marks.
          if (hasBox)
            markTaken(e, e.loadIndex(smD, {e.idx(0)}));
        };
        if (manyExtras) {
          Value fast = fastWalkOf(e, indices, bb, g, view);
          e.ifThen(fast, [&](Emitter &ee) {
            fastWalk(static_cast<GPUEmitter &>(ee));
          });
          e.ifThen(e.bnot(fast), [&](Emitter &ee) {
            walkInOrder(static_cast<GPUEmitter &>(ee));
          });
        } else {
          walkInOrder(e);
        }
        Value extra = e.loadIndex(smD, {e.idx(0)});
        Value fallback = e.ne(e.load(smD, {e.idx(1)}), e.i32(0));
        if (tau > 0.0) {
          // Decide on the final set's bound: summed afresh after the walk
          // in rank order (it subtracts, and subtracting a dominant or
          // infinite term cancels the rest), or the fast walk's sums of
          // positive terms. Every thread reads the same shared sums.
          Value worstEps = e.f64(0.0);
          for (int64_t i = 0; i < G; ++i)
            worstEps =
                e.fmax(worstEps, epsHat(e, target, e.load(smU, {e.idx(i)}),
                                        e.load(smZ, {e.idx(i)})));
          Value fits = e.fcmp(arith::CmpFPredicate::OLE, worstEps, e.f64(tau));
          fallback = e.bor(fallback, e.bnot(fits));
        }
        fallback = e.bor(fallback, early);
        Value extraKept = e.select(fallback, e.idx(0), extra);
        if (hasBox) {
          Value summaries = a[boxIdx], pageTable = a[boxIdx + 1];
          Value vbox = a[boxIdx + 2], smBox = sm[4];
          Value pageV = e.idx(op.getPageSize());
          // Whether page j holds a position the final set leaves out.
          auto pageOmitted = [&](GPUEmitter &e, Value j) -> Value {
            Value cand = CandidateUnits{pageV, anchor, n, w}.count(e, j);
            Value covered;
            if (unitTokens == 1) {
              // Selected tokens inside the page (all are candidates).
              Value t0 = e.mul(j, pageV), t1 = e.add(t0, pageV);
              if (marksOn)
                covered = e.forLoop(
                    t0, t1, e.idx(1), {e.idx(0)},
                    [&](Emitter &ee, Value t,
                        ValueRange acc) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      return {e.select(inSet(e, t, extra),
                                       e.add(acc[0], e.idx(1)), acc[0])};
                    })[0];
              else
                covered = e.forLoop(
                    e.idx(0), extra, e.idx(1),
                    {e.sub(baseBelow(e, t1), baseBelow(e, t0))},
                    [&](Emitter &e, Value k,
                        ValueRange acc) -> SmallVector<Value> {
                      Value u =
                          e.loadIndex(indices, {bb, g, e.add(e.idx(base), k)});
                      Value inside = e.band(e.ge(u, t0), e.lt(u, t1));
                      return {
                          e.select(inside, e.add(acc[0], e.idx(1)), acc[0])};
                    })[0];
            } else {
              Value sel = inSet(e, j, extra);
              covered = e.select(sel, cand, e.idx(0));
            }
            return e.gt(cand, covered);
          };
          Value r = e.divs(tid, e.idx(boxLanes));
          Value c0 = e.rems(tid, e.idx(boxLanes));
          e.ifThen(e.lt(r, e.idx(boxRows)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            SmallVector<Value> init;
            for (int64_t k = 0; k < boxPer; ++k)
              init.append(
                  {e.f32(std::numeric_limits<double>::infinity()), e.negInf()});
            // After a fallback nothing is omitted: the box stays empty.
            Value boxPages = e.select(fallback, e.idx(0), e.ceilDiv(n, pageV));
            auto box = e.forLoop(
                r, boxPages, e.idx(boxRows), init,
                [&](Emitter &ee, Value j,
                    ValueRange acc) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  return e.ifElse(
                      pageOmitted(e, j), ValueRange(acc).getTypes(),
                      [&](Emitter &e) -> SmallVector<Value> {
                        Value phys = e.loadIndex(pageTable, {bb, j});
                        SmallVector<Value> out;
                        for (int64_t k = 0; k < boxPer; ++k) {
                          Value c = e.add(c0, e.idx(k * boxLanes));
                          Value cs = e.mins(c, e.idx(d - 1));
                          Value lo =
                              e.load(summaries, {phys, g, e.idx(VMin), cs});
                          Value hi =
                              e.load(summaries, {phys, g, e.idx(VMax), cs});
                          out.push_back(e.fmin(acc[2 * k], lo));
                          out.push_back(e.fmax(acc[2 * k + 1], hi));
                        }
                        return out;
                      },
                      [&](Emitter &) -> SmallVector<Value> {
                        return SmallVector<Value>(acc);
                      });
                });
            for (int64_t k = 0; k < boxPer; ++k) {
              Value c = e.add(c0, e.idx(k * boxLanes));
              e.ifThen(e.lt(c, e.idx(d)), [&](Emitter &e) {
                e.store(box[2 * k], smBox, {r, e.idx(0), c});
                e.store(box[2 * k + 1], smBox, {r, e.idx(1), c});
              });
            }
          });
          e.barrier();
          // Combine the rows; thread t owns channels t, t + threads, ...
          e.forLoop(tid, e.idx(d), e.idx(threads), {},
                    [&](Emitter &e, Value c, ValueRange) -> SmallVector<Value> {
                      Value lo = e.load(smBox, {e.idx(0), e.idx(0), c});
                      Value hi = e.load(smBox, {e.idx(0), e.idx(1), c});
                      for (int64_t rr = 1; rr < boxRows; ++rr) {
                        Value row = e.idx(rr);
                        lo = e.fmin(lo, e.load(smBox, {row, e.idx(0), c}));
                        hi = e.fmax(hi, e.load(smBox, {row, e.idx(1), c}));
                      }
                      e.store(lo, vbox, {bb, g, e.idx(0), c});
                      e.store(hi, vbox, {bb, g, e.idx(1), c});
                      return {};
                    });
        }
        for (int64_t i = 0; i < G; ++i) {
          e.ifThen(e.eq(tid, e.idx(i)), [&](Emitter &e) {
            Value eps =
                reportedEpsHat(e,
                               epsHat(e, target, e.load(smU, {e.idx(i)}),
                                      e.load(smZ, {e.idx(i)})),
                               fallback);
            Value h = head(e, i);
            e.store(eps, stats, {bb, h, e.idx(StatEpsHat)});
            e.store(e.indexToF32(extraKept), stats, {bb, h, e.idx(StatExtra)});
            Value flag = e.select(fallback, e.f32(kFellBack), e.f32(0.0));
            e.store(e.select(early, e.f32(kFellBackEarly), flag), stats,
                    {bb, h, e.idx(StatFallback)});
          });
        }
        e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
          e.store(e.toI32(extraKept), extraOut, {bb, g});
          e.store(e.select(fallback, e.i32(1), e.i32(0)), fallbackOut, {bb, g});
        });
      });
  launchPerGroup(b, loc, fn, op.getScores(), hkv, threads, operands);
}

} // namespace

void mlir::condensate::populateCertifyToGPUPatterns(RewritePatternSet &patterns,
                                                    gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<CertifyOp, lowerCertify>>(ctx, kernels, "certify");
  patterns.add<KernelPattern<PrecertifyOp, lowerPrecertify>>(ctx, kernels,
                                                             "precertify");
}
