//===- Select.cpp - the top-k selection kernel ----------------------------===//
//
// Lowers select_topk to one block per (kv head, sequence): an 8-bit radix
// search (4 histogram passes in shared memory) for the base-th largest key,
// a block-wide scan that writes the set in unit order, and argmax passes for
// the ranked extras.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// Block-wide exclusive prefix sum of an index value; `warpSums` is a
/// workgroup buffer of (threads / 32 + 1) i32. Returns (exclusive, total).
std::pair<Value, Value> blockExclusiveScan(GPUEmitter &e, Value x,
                                           int64_t threads, Value warpSums) {
  Value tid = e.tid();
  Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
  int64_t warps = threads / kWarp;
  Value x32 = e.toI32(x);
  Value incl = e.warpScanI32(x32, lane);
  e.ifThen(e.eq(lane, e.idx(kWarp - 1)),
           [&](Emitter &e) { e.store(incl, warpSums, {warp}); });
  e.barrier();
  // Warp 0 scans the warp totals.
  e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
    // Only lanes that own a warp total read one (no lane reads a slot
    // another lane writes below).
    Value mine = e.ifElse(
        e.lt(lane, e.idx(warps)), {e.builder().getI32Type()},
        [&](Emitter &e) -> SmallVector<Value> {
          return {e.load(warpSums, {lane})};
        },
        [&](Emitter &e) -> SmallVector<Value> { return {e.i32(0)}; })[0];
    Value sc = e.warpScanI32(mine, lane);
    e.ifThen(e.lt(lane, e.idx(warps)),
             [&](Emitter &e) { e.store(sc, warpSums, {lane}); });
  });
  e.barrier();
  Value before = e.select(
      e.gt(warp, e.idx(0)),
      e.load(warpSums, {e.maxs(e.sub(warp, e.idx(1)), e.idx(0))}), e.i32(0));
  Value total = e.load(warpSums, {e.idx(warps - 1)});
  Value excl = e.sub(e.add(before, incl), x32);
  e.barrier();
  return {e.toIndex(excl), e.toIndex(total)};
}

void lowerSelectTopK(SelectTopKOp op, OpBuilder &b, const KernelBuilder &kb,
                     StringRef name) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getScores(), 1);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t base = op.getBase(), G = hq / hkv;
  int64_t unitTokens =
      op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
  const int64_t threads = 512;
  Type i32 = b.getI32Type();
  SmallVector<Value> operands{op.getScores(), op.getLens(), op.getIndices()};
  if (op.getWindows())
    operands.push_back(op.getWindows());
  bool hasWindows = static_cast<bool>(op.getWindows());
  // Ranking keys of the first kCachedKeys units live in shared memory;
  // further units (contexts past 512K tokens at pages of 64) recompute theirs.
  constexpr int64_t kCachedKeys = 8192;
  SmallVector<Type> smem{
      KernelBuilder::workgroupType(ctx, {256}, i32),                 // hist
      KernelBuilder::workgroupType(ctx, {8}, i32),                   // state
      KernelBuilder::workgroupType(ctx, {threads / kWarp + 1}, i32), // scan
      KernelBuilder::workgroupType(ctx, {2 * (threads / kWarp)}, i32),
      KernelBuilder::workgroupType(ctx, {kCachedKeys}, i32)}; // keys
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value scores = a[0], lens = a[1], indices = a[2];
        Value windows = hasWindows ? a[3] : Value();
        Value hist = sm[0], state = sm[1], scan = sm[2], red = sm[3];
        Value cached = sm[4];
        Value tid = e.tid();
        Value lane = e.rems(tid, e.idx(kWarp)),
              warp = e.divs(tid, e.idx(kWarp));
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        Value n = e.loadIndex(lens, {bb});
        Value w =
            effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
        Value nu = e.dim(scores, 2);
        Value anchor = e.idx(op.getAnchor()), unit = e.idx(unitTokens);
        CandidateUnits units{unit, anchor, n, w};
        auto computeKey = [&](GPUEmitter &e, Value u) {
          return rankingKey(e, nvvmTarget(), units, scores, bb, g, u, G).key;
        };
        e.forLoop(tid, e.mins(nu, e.idx(kCachedKeys)), e.idx(threads), {},
                  [&](Emitter &ee, Value u, ValueRange) -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    e.store(computeKey(e, u), cached, {u});
                    return {};
                  });
        e.barrier();
        auto key = [&](GPUEmitter &e, Value u) -> Value {
          return e.ifElse(
              e.lt(u, e.idx(kCachedKeys)), {e.builder().getI32Type()},
              [&](Emitter &e) -> SmallVector<Value> {
                return {e.load(cached, {u})};
              },
              [&](Emitter &ee) -> SmallVector<Value> {
                return {computeKey(static_cast<GPUEmitter &>(ee), u)};
              })[0];
        };
        auto forUnits = [&](GPUEmitter &e, ValueRange inits,
                            const Emitter::LoopBody &body) {
          return e.forLoop(tid, nu, e.idx(threads), inits, body);
        };
        // Number of candidates.
        e.ifThen(e.lt(tid, e.idx(8)),
                 [&](Emitter &e) { e.store(e.i32(0), state, {tid}); });
        e.barrier();
        Value myValid = forUnits(
            e, {e.i32(0)},
            [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value kk = key(e, u);
              return {e.add(acc[0],
                            e.select(e.ne(kk, e.i32(0)), e.i32(1), e.i32(0)))};
            })[0];
        e.atomicAddI32(state, {e.idx(0)}, myValid);
        e.barrier();
        Value numValid = e.toIndex(e.load(state, {e.idx(0)}));
        Value few = e.le(numValid, e.idx(base));
        // Radix search for the base-th largest key, 8 bits at a time.
        Value prefix = e.i32(0), mask = e.i32(0);
        Value remaining = e.i32(base);
        if (base > 0) {
          for (int64_t shift = 24; shift >= 0; shift -= 8) {
            Value sh = e.i32(shift);
            e.forLoop(
                tid, e.idx(256), e.idx(threads), {},
                [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                  e.store(e.i32(0), hist, {i});
                  return {};
                });
            e.barrier();
            forUnits(
                e, {},
                [&](Emitter &ee, Value u, ValueRange) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value kk = key(e, u);
                  Value match = e.band(e.ne(kk, e.i32(0)),
                                       e.eq(e.band(kk, mask), prefix));
                  e.ifThen(match, [&](Emitter &ee) {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    Value digit = e.band(arith::ShRUIOp::create(
                                             e.builder(), e.location(), kk, sh),
                                         e.i32(255));
                    e.atomicAddI32(hist, {e.toIndex(digit)}, e.i32(1));
                  });
                  return {};
                });
            e.barrier();
            // Warp 0: lane l owns bins [8l, 8l+8); find the bin where the
            // count from the top reaches `remaining`.
            e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value laneBase = e.mul(lane, e.idx(8));
              Value mine = e.i32(0);
              for (int64_t j = 0; j < 8; ++j)
                mine = e.add(mine, e.load(hist, {e.add(laneBase, e.idx(j))}));
              // Suffix sums: lanes above hold higher bins.
              Value suffix = mine;
              for (int64_t o = 1; o < kWarp; o *= 2) {
                Value down = e.shuffleDown(suffix, o);
                suffix = e.select(e.lt(e.add(lane, e.idx(o)), e.idx(kWarp)),
                                  e.add(suffix, down), suffix);
              }
              Value above = e.sub(suffix, mine); // bins of higher lanes
              Value crosses =
                  e.band(e.cmp(arith::CmpIPredicate::sge, suffix, remaining),
                         e.cmp(arith::CmpIPredicate::slt, above, remaining));
              e.ifThen(crosses, [&](Emitter &e) {
                auto found = e.forLoop(
                    e.idx(0), e.idx(8), e.idx(1), {above, e.i32(-1), e.i32(0)},
                    [&](Emitter &e, Value jj,
                        ValueRange acc) -> SmallVector<Value> {
                      Value bin = e.add(laneBase, e.sub(e.idx(7), jj));
                      Value cnt = e.load(hist, {bin});
                      Value cum = e.add(acc[0], cnt);
                      Value hit = e.band(
                          e.eq(acc[1], e.i32(-1)),
                          e.cmp(arith::CmpIPredicate::sge, cum, remaining));
                      return {cum, e.select(hit, e.toI32(bin), acc[1]),
                              e.select(hit, e.sub(remaining, acc[0]), acc[2])};
                    });
                e.store(found[1], state, {e.idx(1)});
                e.store(found[2], state, {e.idx(2)});
              });
            });
            e.barrier();
            Value digit = e.load(state, {e.idx(1)});
            remaining = e.load(state, {e.idx(2)});
            prefix = e.bor(prefix, arith::ShLIOp::create(
                                       e.builder(), e.location(), digit, sh));
            mask = e.bor(mask, e.i32(static_cast<int64_t>(255) << shift));
            e.barrier();
          }
        }
        // Threshold and how many ties at it to take (all candidates if few).
        // With base = 0 there is no base set, only the ranked extras.
        Value thr = e.select(few, e.i32(1), prefix);
        Value tiesWanted = e.select(few, e.i32(0), remaining);
        Value tiesWantedIdx = e.toIndex(tiesWanted);
        Value chunk = e.ceilDiv(nu, e.idx(threads));
        Value lo = e.mins(e.mul(tid, chunk), nu);
        Value hi = e.mins(e.add(lo, chunk), nu);
        Value tiesBefore = e.idx(0);
        // Whether key kk is above the threshold (with few candidates: any
        // candidate), or a tie at it.
        auto isAboveKey = [&](Emitter &e, Value kk) {
          return e.bor(e.cmp(arith::CmpIPredicate::ugt, kk, thr),
                       e.band(few, e.ne(kk, e.i32(0))));
        };
        auto isTieKey = [&](Emitter &e, Value kk) {
          return e.band(e.bnot(few), e.band(e.eq(kk, thr), e.ne(kk, e.i32(0))));
        };
        // (above, ties) counts so far, advanced past one unit.
        auto advance = [&](Emitter &e, ValueRange acc, Value isAbove,
                           Value isTie) -> SmallVector<Value> {
          return {e.select(isAbove, e.add(acc[0], e.idx(1)), acc[0]),
                  e.select(isTie, e.add(acc[1], e.idx(1)), acc[1])};
        };
        if (base > 0) {
          // Collection in unit order: thread t owns a contiguous chunk.
          auto counts = e.forLoop(
              lo, hi, e.idx(1), {e.idx(0), e.idx(0)},
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value kk = key(e, u);
                Value isAbove = isAboveKey(e, kk);
                Value isTie = isTieKey(e, kk);
                return advance(e, acc, isAbove, isTie);
              });
          auto [aboveBefore, aboveTotal] =
              blockExclusiveScan(e, counts[0], threads, scan);
          auto tiesScan = blockExclusiveScan(e, counts[1], threads, scan);
          tiesBefore = tiesScan.first;
          (void)aboveTotal;
          e.forLoop(
              lo, hi, e.idx(1), {aboveBefore, tiesBefore},
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value kk = key(e, u);
                Value isAbove = isAboveKey(e, kk);
                Value isTie = isTieKey(e, kk);
                Value takeTie = e.band(isTie, e.lt(acc[1], tiesWantedIdx));
                Value take = e.bor(isAbove, takeTie);
                Value pos = e.add(acc[0], e.mins(acc[1], tiesWantedIdx));
                e.ifThen(take, [&](Emitter &e) {
                  e.store(e.toI32(u), indices, {bb, g, pos});
                });
                return advance(e, acc, isAbove, isTie);
              });
          // Pad the base set.
          Value written = e.mins(numValid, e.idx(base));
          e.forLoop(e.add(written, tid), e.idx(base), e.idx(threads), {},
                    [&](Emitter &e, Value j, ValueRange) -> SmallVector<Value> {
                      e.store(e.i32(-1), indices, {bb, g, j});
                      return {};
                    });
        }
        // Ranked extras: argmax passes after (prevKey, prevIdx).
        if (slots > base) {
          // The base set's last tie (prevIdx) is the largest unit taken at
          // the threshold: recover it as the tiesWanted-th tie.
          Value lastTie = e.forLoop(
              lo, hi, e.idx(1), {tiesBefore, e.idx(-1)},
              [&](Emitter &ee, Value u, ValueRange acc) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value kk = key(e, u);
                Value isTie = isTieKey(e, kk);
                Value isLast =
                    e.band(isTie, e.eq(e.add(acc[0], e.idx(1)), tiesWantedIdx));
                return {e.select(isTie, e.add(acc[0], e.idx(1)), acc[0]),
                        e.select(isLast, u, acc[1])};
              })[1];
          e.ifThen(e.ge(lastTie, e.idx(0)), [&](Emitter &e) {
            e.store(e.toI32(lastTie), state, {e.idx(4)});
          });
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
            if (base == 0) {
              // Start above every key.
              e.store(e.i32(-1), state, {e.idx(3)});
              e.store(e.i32(-1), state, {e.idx(4)});
              return;
            }
            e.ifThen(e.bor(few, e.eq(tiesWanted, e.i32(0))), [&](Emitter &e) {
              e.store(e.toI32(nu), state, {e.idx(4)});
            });
            e.store(e.select(few, e.i32(0), thr), state, {e.idx(3)});
          });
          e.barrier();
          // One argmax pass per extra slot, as a loop (uniform bounds: the
          // barriers inside are reached by every thread), not unrolled: a
          // certificate may rank hundreds of extras.
          e.forLoop(e.idx(base), e.idx(slots), e.idx(1), {},
                    [&](Emitter &ej, Value j,
                        ValueRange) -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ej);
            Value prevKey = e.load(state, {e.idx(3)});
            Value prevIdx = e.toIndex(e.load(state, {e.idx(4)}));
            auto best = forUnits(
                e, {e.i32(0), e.i32(-1)},
                [&](Emitter &ee, Value u,
                    ValueRange acc) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value kk = key(e, u);
                  Value after =
                      e.bor(e.cmp(arith::CmpIPredicate::ult, kk, prevKey),
                            e.band(e.eq(kk, prevKey), e.gt(u, prevIdx)));
                  Value ok = e.band(after, e.ne(kk, e.i32(0)));
                  Value better = e.band(
                      ok, e.bor(e.cmp(arith::CmpIPredicate::ugt, kk, acc[0]),
                                e.band(e.eq(kk, acc[0]),
                                       e.lt(e.toI32(u), acc[1]))));
                  // Ties between candidates go to the lower unit; a thread
                  // visits its units in increasing order, so acc[1] is the
                  // lowest so far at equal key.
                  better = e.band(ok, e.bor(better, e.eq(acc[1], e.i32(-1))));
                  return {e.select(better, kk, acc[0]),
                          e.select(better, e.toI32(u), acc[1])};
                });
            // Warp argmax (key desc, unit asc), then across warps.
            Value bk = best[0], bu = best[1];
            for (int64_t o = kWarp / 2; o >= 1; o /= 2) {
              Value ok = e.shuffleXor(bk, o), ou = e.shuffleXor(bu, o);
              Value otherBetter = e.bor(
                  e.cmp(arith::CmpIPredicate::ugt, ok, bk),
                  e.band(
                      e.eq(ok, bk),
                      e.band(e.ne(ou, e.i32(-1)),
                             e.bor(e.eq(bu, e.i32(-1)),
                                   e.cmp(arith::CmpIPredicate::slt, ou, bu)))));
              bk = e.select(otherBetter, ok, bk);
              bu = e.select(otherBetter, ou, bu);
            }
            e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
              e.store(bk, red, {warp});
              e.store(bu, red, {e.add(warp, e.idx(threads / kWarp))});
            });
            e.barrier();
            e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
              auto fin = e.forLoop(
                  e.idx(0), e.idx(threads / kWarp), e.idx(1),
                  {e.i32(0), e.i32(-1)},
                  [&](Emitter &e, Value r,
                      ValueRange acc) -> SmallVector<Value> {
                    Value ok = e.load(red, {r});
                    Value ou = e.load(red, {e.add(r, e.idx(threads / kWarp))});
                    Value otherBetter = e.band(
                        e.ne(ok, e.i32(0)),
                        e.bor(e.cmp(arith::CmpIPredicate::ugt, ok, acc[0]),
                              e.band(e.eq(ok, acc[0]),
                                     e.bor(e.eq(acc[1], e.i32(-1)),
                                           e.cmp(arith::CmpIPredicate::slt, ou,
                                                 acc[1])))));
                    return {e.select(otherBetter, ok, acc[0]),
                            e.select(otherBetter, ou, acc[1])};
                  });
              Value found = e.ne(fin[0], e.i32(0));
              e.store(e.select(found, fin[1], e.i32(-1)), indices,
                      {bb, g, j});
              e.store(e.select(found, fin[0], e.i32(0)), state, {e.idx(3)});
              e.store(e.select(found, fin[1], e.toI32(nu)), state, {e.idx(4)});
            });
            e.barrier();
            return {};
          });
        }
      });
  launchPerGroup(b, loc, fn, op.getScores(), hkv, threads, operands);
}

} // namespace

void mlir::condensate::populateSelectToGPUPatterns(RewritePatternSet &patterns,
                                                   gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<SelectTopKOp, lowerSelectTopK>>(ctx, kernels,
                                                             "select_topk");
}
