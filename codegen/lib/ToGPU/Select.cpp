//===- Select.cpp - the top-k selection kernel ----------------------------===//
//
// Lowers select_topk to one block of 1024 threads per (kv head, sequence)
// (and, past the first list of extras, one per further list). The units'
// ranking keys are computed once into dynamic shared memory (as
// many as the chip allows), counting their top 8 bits on the way; an 8-bit
// radix search (3 more histogram passes, an atomic per key on the prefix)
// finds the base-th largest key, and one the (base + extras)-th when the op
// ranks extras; then each warp walks a contiguous range of units, its warp
// scans placing the base set in unit order and appending the extras to a
// shared list, which a bitonic network sorts by (key desc, unit asc).
// More extras than the list holds are ranked the same way a list at a
// time, each further list of 1024 ranks by a block of a second kernel:
// radix searches for its start and end, and the units between them listed
// and sorted. Every pass
// takes 4 rounds of 32 units a warp at a time, so that each lane has
// independent work in flight.
//
// Token selection first runs a prefilter over the whole grid where a
// sequence is long (three small kernels): a histogram of the keys' top
// bits, then per chunk of units the units at or above the bin where the
// top `slots` end, compacted in unit order. The ranking block then walks
// those candidates only: a superset of the top `slots` units, in unit
// order, so that its result is the same.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// The prefilter's histogram bins: the top kPrefilterBits bits of a
/// ranking key (sign, exponent and 3 mantissa bits of the score: each bin
/// 1/8 to 1/15 of its lower end wide, so that on real scores the bin where
/// the top `slots` end holds few units beyond them).
constexpr int64_t kPrefilterBits = 12;
constexpr int64_t kPrefilterBins = int64_t(1) << kPrefilterBits;
/// Units a prefilter block takes, and its threads.
constexpr int64_t kPrefilterChunk = 2048;
constexpr int64_t kPrefilterThreads = 256;
constexpr int64_t kPrefilterRounds = kPrefilterChunk / kPrefilterThreads;
/// A count block takes k = min(kMaxCountChunks, ceil(chunks hkv B /
/// kCountBlocksPerChunk)) chunks, so that where the grid would have many
/// blocks (over about 6 a multiprocessor on 132) its histogram's fixed
/// costs (clearing and flushing kPrefilterBins bins, the fence and the
/// done counter) are paid once for several chunks' units. On the H200,
/// 128K tokens (reports/gpu/session24, run 2; medians of 4): 4 chunks a
/// block against 1 took 50.5 -> 40.2 us at 8 sequences of 8 kv heads and
/// 26.3 -> 21.4 at 8 of 4, but 12.3 -> 14.2 and 9.2 -> 13.3 with one
/// sequence (fewer blocks than multiprocessors), where k stays 1.
constexpr int64_t kMaxCountChunks = 4;
constexpr int64_t kCountBlocksPerChunk = 768;
/// The prefilter runs where a sequence has at least this many units and
/// at least twice the slots: below, the ranking block reads them all at
/// about the cost of the prefilter's launches.
constexpr int64_t kPrefilterMinUnits = 8192;

/// What every kernel of one select_topk needs to rank the units of
/// sequence bb for kv head g.
struct SelectContext {
  Value scores, bb, g, nu;
  CandidateUnits units;
  int64_t G;
  SmallVector<Value> offsets; // rankRelative's, else empty
  /// The ranking key of unit u (0: no candidate).
  Value key(GPUEmitter &e, Value u) const {
    return rankingKey(e, nvvmTarget(), units, scores, bb, g, u, G, {}, {},
                      offsets)
        .key;
  }
  /// Whether this sequence's selection goes through the prefilter: the
  /// same uniform answer in every kernel of the op.
  Value prefiltered(Emitter &e, int64_t slots) const {
    return e.band(e.ge(nu, e.idx(kPrefilterMinUnits)),
                  e.ge(nu, e.idx(2 * slots)));
  }
};

SelectContext selectContext(GPUEmitter &e, SelectTopKOp op, Value scores,
                            Value lens, Value windows, Value bb, Value g) {
  int64_t hq = staticDim(op.getScores(), 1);
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t unitTokens =
      op.getGranularity() == Granularity::page ? op.getPageSize() : 1;
  Value n = e.loadIndex(lens, {bb});
  Value w = effectiveWindow(e, windows, bb, op.getWindow(), op.getWindowMax());
  Value unit = e.idx(unitTokens);
  // Units past the context are no candidates (key 0): the loops stop at
  // the context, not at the page table's width.
  Value nu = e.mins(e.dim(scores, 2), e.ceilDiv(n, unit));
  SelectContext sc{
      scores,  bb, g, nu, CandidateUnits{unit, e.idx(op.getAnchor()), n, w},
      hq / hkv};
  if (rankRelative(op.getGranularity(), sc.G))
    sc.offsets = warpRankOffsets(e, sc.units, scores, bb, g, sc.G);
  return sc;
}

/// The prefilter's buffers (scratch of the launch plan), per (sequence,
/// kv head): the key histogram, each chunk's candidate count, the chunks'
/// candidates (unit and key, at the chunk's own offset), and the
/// candidates gathered in unit order by the ranking block.
struct Prefilter {
  /// state[bb, g]: [0] the count blocks done, [1] the threshold bin.
  Value hist, state, counts, chunkUnits, chunkKeys, units, keys;
  Value batch, chunks; // host values: the grid
};

Prefilter allocPrefilter(OpBuilder &b, Location loc, SelectTopKOp op) {
  int64_t hkv = staticDim(op.getIndices(), 1);
  Type i32 = b.getI32Type();
  int64_t dyn = ShapedType::kDynamic;
  Value batch = memref::DimOp::create(b, loc, op.getScores(), 0);
  Value width = memref::DimOp::create(b, loc, op.getScores(), 2);
  Value chunks = arith::CeilDivSIOp::create(
      b, loc, width, arith::ConstantIndexOp::create(b, loc, kPrefilterChunk));
  auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) -> Value {
    return memref::AllocOp::create(b, loc, MemRefType::get(shape, i32), sizes);
  };
  Prefilter pf;
  pf.hist = alloc({dyn, hkv, kPrefilterBins}, {batch});
  pf.state = alloc({dyn, hkv, 2}, {batch});
  pf.counts = alloc({dyn, hkv, dyn}, {batch, chunks});
  pf.chunkUnits = alloc({dyn, hkv, dyn}, {batch, width});
  pf.chunkKeys = alloc({dyn, hkv, dyn}, {batch, width});
  pf.units = alloc({dyn, hkv, dyn}, {batch, width});
  pf.keys = alloc({dyn, hkv, dyn}, {batch, width});
  pf.batch = batch;
  pf.chunks = chunks;
  return pf;
}

/// The keys of prefilter block x's chunk: kPrefilterRounds rounds of
/// kPrefilterThreads consecutive units, all loads issued before any use.
struct ChunkRound {
  Value u, valid, key;
};
SmallVector<ChunkRound> chunkRounds(GPUEmitter &e, const SelectContext &sc,
                                    Value x) {
  SmallVector<ChunkRound> rounds;
  Value first = e.mul(x, e.idx(kPrefilterChunk));
  for (int64_t r = 0; r < kPrefilterRounds; ++r) {
    Value u = e.add(first, e.add(e.idx(r * kPrefilterThreads), e.tid()));
    Value valid = e.lt(u, sc.nu);
    rounds.push_back({u, valid, Value()});
  }
  for (ChunkRound &r : rounds)
    r.key = e.select(r.valid, sc.key(e, e.select(r.valid, r.u, e.idx(0))),
                     e.i32(0));
  return rounds;
}

Value binOf(Emitter &e, Value key) {
  return e.toIndex(arith::ShRUIOp::create(e.builder(), e.location(), key,
                                          e.i32(32 - kPrefilterBits)));
}

/// The threshold bin of sequence bb's keys for kv head g: the highest bin
/// whose count from the top reaches `slots` (0, every candidate, when
/// fewer), stored at state[bb, g, 1]. Run by a whole block of
/// kPrefilterThreads; `sums` (a value a warp) and `found` (one) are shared.
void storeThresholdBin(GPUEmitter &e, Value hist, Value state, Value bb,
                       Value g, int64_t slots, Value sums, Value found) {
  constexpr int64_t perThread = kPrefilterBins / kPrefilterThreads;
  const int64_t warps = kPrefilterThreads / kWarp;
  Value tid = e.tid();
  Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
  // Thread t holds bins [perThread t, perThread (t + 1)).
  // (Kept in registers for the crossing thread's walk below.)
  Value firstBin = e.mul(tid, e.idx(perThread));
  SmallVector<Value> counts;
  Value mine = e.i32(0);
  for (int64_t j = 0; j < perThread; ++j) {
    counts.push_back(e.load(hist, {bb, g, e.add(firstBin, e.idx(j))}));
    mine = e.add(mine, counts.back());
  }
  // Counts in the bins of higher threads: within the warp by a suffix
  // scan, across warps through shared memory.
  Value suffix = mine;
  for (int64_t o = 1; o < kWarp; o *= 2) {
    Value down = e.shuffleDown(suffix, o);
    suffix = e.select(e.lt(e.add(lane, e.idx(o)), e.idx(kWarp)),
                      e.add(suffix, down), suffix);
  }
  e.ifThen(e.eq(lane, e.idx(0)),
           [&](Emitter &e) { e.store(suffix, sums, {warp}); });
  e.ifThen(e.eq(tid, e.idx(0)),
           [&](Emitter &e) { e.store(e.i32(0), found, {e.idx(0)}); });
  e.barrier();
  Value later =
      e.forLoop(e.add(warp, e.idx(1)), e.idx(warps), e.idx(1), {e.i32(0)},
                [&](Emitter &e, Value w, ValueRange acc) -> SmallVector<Value> {
                  return {e.add(acc[0], e.load(sums, {w}))};
                })[0];
  Value above = e.add(later, e.sub(suffix, mine));
  Value k = e.i32(slots);
  Value crosses =
      e.band(e.cmp(arith::CmpIPredicate::sge, e.add(above, mine), k),
             e.cmp(arith::CmpIPredicate::slt, above, k));
  e.ifThen(crosses, [&](Emitter &e) {
    Value cum = above, bin = e.i32(-1);
    for (int64_t j = perThread - 1; j >= 0; --j) {
      cum = e.add(cum, counts[size_t(j)]);
      Value hit = e.band(e.eq(bin, e.i32(-1)),
                         e.cmp(arith::CmpIPredicate::sge, cum, k));
      bin = e.select(hit, e.toI32(e.add(firstBin, e.idx(j))), bin);
    }
    e.store(bin, found, {e.idx(0)});
  });
  e.barrier();
  e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
    e.store(e.load(found, {e.idx(0)}), state, {bb, g, e.idx(1)});
  });
}

/// The prefilter's kernels, launched before the ranking block: the
/// histograms cleared (grid (hkv, B)), counted (grid (ceil(chunks / k),
/// hkv, B), k chunks a block; the last block of a sequence and kv head to
/// finish finds the threshold bin, once), and each chunk's candidates
/// compacted in unit order (grid (chunks, hkv, B)).
void emitPrefilter(SelectTopKOp op, OpBuilder &b, const KernelBuilder &kb,
                   StringRef name, const Prefilter &pf) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  Type i32 = b.getI32Type();
  const int64_t T = kPrefilterThreads, warps = T / kWarp;
  bool hasWindows = static_cast<bool>(op.getWindows());
  SmallVector<Value> inputs{op.getScores(), op.getLens()};
  if (hasWindows)
    inputs.push_back(op.getWindows());
  int64_t nIn = inputs.size();
  // Grid (chunks, hkv, B); the body runs in blocks whose chunk holds units
  // of a sequence that takes the prefilter (a uniform condition).
  auto chunkBody = [&](GPUEmitter &e, ValueRange a,
                       const std::function<void(
                           GPUEmitter &, const SelectContext &, Value)> &body) {
    Value x = e.bid(gpu::Dimension::x), g = e.bid(gpu::Dimension::y),
          bb = e.bid(gpu::Dimension::z);
    SelectContext sc =
        selectContext(e, op, a[0], a[1], hasWindows ? a[2] : Value(), bb, g);
    Value run = e.band(sc.prefiltered(e, slots),
                       e.lt(e.mul(x, e.idx(kPrefilterChunk)), sc.nu));
    e.ifThen(run,
             [&](Emitter &ee) { body(static_cast<GPUEmitter &>(ee), sc, x); });
  };
  Value batch = pf.batch, chunks = pf.chunks;
  Value hkvV = arith::ConstantIndexOp::create(b, loc, hkv);

  // Clearing.
  auto clear = kb.createKernel(
      (name + "_clear").str(), {pf.hist, pf.state}, {},
      [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value g = e.bid(gpu::Dimension::x), bb = e.bid(gpu::Dimension::y);
        e.forLoop(e.tid(), e.idx(kPrefilterBins), e.idx(T), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    e.store(e.i32(0), a[0], {bb, g, i});
                    return {};
                  });
        e.ifThen(e.eq(e.tid(), e.idx(0)), [&](Emitter &e) {
          e.store(e.i32(0), a[1], {bb, g, e.idx(0)});
        });
      });
  launchPerGroup(b, loc, clear, op.getScores(), hkv, T, {pf.hist, pf.state});

  // Counting: a block's histogram in shared memory (the lanes of a warp
  // with one bin add their count once: most keys share their top bits),
  // then its non-empty bins added to the sequence's.
  SmallVector<Value> histOperands(inputs);
  histOperands.push_back(pf.hist);
  histOperands.push_back(pf.state);
  auto count = kb.createKernel(
      (name + "_count").str(), histOperands,
      {KernelBuilder::workgroupType(ctx, {kPrefilterBins}, i32),
       KernelBuilder::workgroupType(ctx, {warps}, i32), // sums
       KernelBuilder::workgroupType(ctx, {1}, i32),     // last block
       KernelBuilder::workgroupType(ctx, {1}, i32)},    // bin
      [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value local = sm[0], hist = a[nIn], state = a[nIn + 1];
        Value sums = sm[1], flag = sm[2], bin = sm[3];
        e.forLoop(e.tid(), e.idx(kPrefilterBins), e.idx(T), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    e.store(e.i32(0), local, {i});
                    return {};
                  });
        e.barrier();
        Value lane = e.rems(e.tid(), e.idx(kWarp));
        Value x = e.bid(gpu::Dimension::x), g = e.bid(gpu::Dimension::y),
              bb = e.bid(gpu::Dimension::z);
        SelectContext sc = selectContext(e, op, a[0], a[1],
                                         hasWindows ? a[2] : Value(), bb, g);
        // The grid's width gives the chunks a block takes (the launch
        // chose it from the batch): per = ceil(chunks / blocks).
        Value per = e.ceilDiv(e.ceilDiv(e.dim(a[0], 2), e.idx(kPrefilterChunk)),
                              gpu::GridDimOp::create(e.builder(), e.location(),
                                                     gpu::Dimension::x));
        Value liveChunks = e.ceilDiv(sc.nu, e.idx(kPrefilterChunk));
        Value firstChunk = e.mul(x, per);
        Value run =
            e.band(sc.prefiltered(e, slots), e.lt(firstChunk, liveChunks));
        // Uniform over the block: every lane reaches the match below.
        e.ifThen(run, [&](Emitter &ee) {
          GPUEmitter &e = static_cast<GPUEmitter &>(ee);
          // The block's chunks one after another (those inside the
          // context), into one shared histogram.
          Value lastChunk = e.mins(e.add(firstChunk, per), liveChunks);
          e.forLoop(
              firstChunk, lastChunk, e.idx(1), {},
              [&](Emitter &ee, Value c, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                SmallVector<ChunkRound> rounds = chunkRounds(e, sc, c);
                SmallVector<Value> bins, peers;
                for (const ChunkRound &r : rounds)
                  bins.push_back(e.select(e.ne(r.key, e.i32(0)),
                                          e.toI32(binOf(e, r.key)),
                                          e.i32(kPrefilterBins)));
                for (Value bin : bins)
                  peers.push_back(e.matchAny(bin));
                for (size_t j = 0; j < bins.size(); ++j) {
                  Value lowest = e.band(peers[j], e.sub(e.i32(0), peers[j]));
                  Value leader = e.eq(lowest, e.laneBit(lane));
                  e.ifThen(e.band(e.ne(rounds[j].key, e.i32(0)), leader),
                           [&](Emitter &ee) {
                             GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                             e.atomicAddI32(local, {e.toIndex(bins[j])},
                                            e.popc(peers[j]));
                           });
                }
                return {};
              });
          e.barrier();
          e.forLoop(
              e.tid(), e.idx(kPrefilterBins), e.idx(T), {},
              [&](Emitter &ee, Value i, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value c = e.load(local, {i});
                e.ifThen(e.ne(c, e.i32(0)), [&](Emitter &ee) {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  e.atomicAddI32(hist, {sc.bb, sc.g, i}, c);
                });
                return {};
              });
          // The last of the sequence's blocks to get here (a counter; each
          // block's adds made visible first) finds the threshold bin from
          // the complete histogram: once, not in each compaction block.
          NVVM::MembarOp::create(e.builder(), e.location(),
                                 NVVM::MemScopeKind::GPU);
          e.barrier();
          Value blocks = e.ceilDiv(liveChunks, per);
          e.ifThen(e.eq(e.tid(), e.idx(0)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value done =
                e.atomicAddI32(state, {sc.bb, sc.g, e.idx(0)}, e.i32(1));
            Value last = e.eq(e.toIndex(done), e.sub(blocks, e.idx(1)));
            e.store(e.select(last, e.i32(1), e.i32(0)), flag, {e.idx(0)});
          });
          e.barrier();
          e.ifThen(e.ne(e.load(flag, {e.idx(0)}), e.i32(0)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            NVVM::MembarOp::create(e.builder(), e.location(),
                                   NVVM::MemScopeKind::GPU);
            storeThresholdBin(e, hist, state, sc.bb, sc.g, slots, sums, bin);
          });
        });
      });
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value total = arith::MulIOp::create(
      b, loc, arith::MulIOp::create(b, loc, chunks, hkvV), batch);
  // (At least 1: an empty batch or table launches nothing, yet divides.)
  Value per = arith::MaxSIOp::create(
      b, loc, cst(1),
      arith::MinSIOp::create(b, loc, cst(kMaxCountChunks),
                             arith::CeilDivSIOp::create(
                                 b, loc, total, cst(kCountBlocksPerChunk))));
  Value countBlocks = arith::CeilDivSIOp::create(b, loc, chunks, per);
  launch(b, loc, count, countBlocks, hkvV, batch, T, histOperands);

  // Compaction: the chunk's units at or above the threshold bin (the
  // count's last block found it) written in unit order at the chunk's
  // offset.
  constexpr int64_t places = kPrefilterRounds * warps;
  static_assert(places == 2 * kWarp, "one warp scans the places, 2 a lane");
  SmallVector<Value> compactOperands(inputs);
  llvm::append_range(compactOperands, ValueRange{pf.state, pf.counts,
                                                 pf.chunkUnits, pf.chunkKeys});
  auto compact = kb.createKernel(
      (name + "_compact").str(), compactOperands,
      {KernelBuilder::workgroupType(ctx, {places}, i32),      // kept a place
       KernelBuilder::workgroupType(ctx, {places + 1}, i32)}, // offsets
      [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value state = a[nIn], counts = a[nIn + 1], outUnits = a[nIn + 2],
              outKeys = a[nIn + 3];
        Value warpCounts = sm[0], offsets = sm[1];
        Value tid = e.tid();
        Value lane = e.rems(tid, e.idx(kWarp)),
              warp = e.divs(tid, e.idx(kWarp));
        chunkBody(e, a, [&](GPUEmitter &e, const SelectContext &sc, Value x) {
          Value threshold = arith::ShLIOp::create(
              e.builder(), e.location(), e.load(state, {sc.bb, sc.g, e.idx(1)}),
              e.i32(32 - kPrefilterBits));
          // Kept: candidates (key not 0) at or above the threshold's bin.
          SmallVector<ChunkRound> rounds = chunkRounds(e, sc, x);
          SmallVector<Value> keeps, incls;
          for (const ChunkRound &r : rounds) {
            Value keep =
                e.band(e.ne(r.key, e.i32(0)),
                       e.cmp(arith::CmpIPredicate::uge, r.key, threshold));
            keeps.push_back(keep);
            incls.push_back(
                e.warpScanI32(e.select(keep, e.i32(1), e.i32(0)), lane));
          }
          // Place (round r, warp w) = r warps + w, in unit order.
          for (int64_t r = 0; r < kPrefilterRounds; ++r) {
            Value total =
                shuffle(e, incls[r], kWarp - 1, gpu::ShuffleMode::IDX);
            e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
              e.store(total, warpCounts, {e.add(e.idx(r * warps), warp)});
            });
          }
          e.barrier();
          // The places' offsets: one warp's scan, two places a lane.
          e.ifThen(e.eq(warp, e.idx(0)), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value first = e.mul(lane, e.idx(2));
            Value c0 = e.load(warpCounts, {first});
            Value c1 = e.load(warpCounts, {e.add(first, e.idx(1))});
            Value incl = e.warpScanI32(e.add(c0, c1), lane);
            Value excl = e.sub(incl, e.add(c0, c1));
            e.store(excl, offsets, {first});
            e.store(e.add(excl, c0), offsets, {e.add(first, e.idx(1))});
            e.ifThen(e.eq(lane, e.idx(kWarp - 1)), [&](Emitter &e) {
              e.store(incl, offsets, {e.idx(places)});
            });
          });
          e.barrier();
          Value chunkFirst = e.mul(x, e.idx(kPrefilterChunk));
          for (int64_t r = 0; r < kPrefilterRounds; ++r) {
            Value before = e.load(offsets, {e.add(e.idx(r * warps), warp)});
            Value at =
                e.add(chunkFirst,
                      e.toIndex(e.sub(e.add(before, incls[r]), e.i32(1))));
            e.ifThen(keeps[r], [&](Emitter &e) {
              e.store(e.toI32(rounds[r].u), outUnits, {sc.bb, sc.g, at});
              e.store(rounds[r].key, outKeys, {sc.bb, sc.g, at});
            });
          }
          e.ifThen(e.eq(tid, e.idx(0)), [&](Emitter &e) {
            e.store(e.load(offsets, {e.idx(places)}), counts, {sc.bb, sc.g, x});
          });
        });
      });
  launch(b, loc, compact, chunks, hkvV, batch, T, compactOperands);
}

void lowerSelectTopK(SelectTopKOp op, OpBuilder &b, const KernelBuilder &kb,
                     StringRef name) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hkv = staticDim(op.getIndices(), 1);
  int64_t slots = staticDim(op.getIndices(), 2);
  int64_t base = op.getBase();
  const int64_t threads = 1024;
  // Each warp takes kUnroll rounds of 32 units at a time, so that every
  // lane has that many independent keys (loads, matches, scans) in flight:
  // the passes are latency-bound with one block on an SM. (On the H200,
  // 512 threads or 8 rounds were slower: 4.53 and 4.52 ms against 4.38 for
  // the sketch step of dummy Llama-3.2-1B at 32K x 8.)
  constexpr int64_t kUnroll = 4;
  Type i32 = b.getI32Type();
  SmallVector<Value> operands{op.getScores(), op.getLens(), op.getIndices()};
  if (op.getWindows())
    operands.push_back(op.getWindows());
  bool hasWindows = static_cast<bool>(op.getWindows());
  // The prefilter pays off for token selection: a long context has far
  // more tokens than pages.
  bool prefilter = op.getGranularity() == Granularity::token;
  Prefilter pf;
  int64_t pfArg = operands.size();
  if (prefilter) {
    pf = allocPrefilter(b, loc, op);
    emitPrefilter(op, b, kb, name, pf);
    llvm::append_range(operands, ValueRange{pf.counts, pf.chunkUnits,
                                            pf.chunkKeys, pf.units, pf.keys});
  }
  // The extras are collected in shared memory and ordered by rank,
  // kSharedExtras at a time.
  constexpr int64_t kSharedExtras = 1024;
  const int64_t warps = threads / kWarp;
  int64_t extras = slots - base;
  int64_t listCap = std::max<int64_t>(1, std::min(extras, kSharedExtras));
  // The list is sorted by a bitonic network over a power of two entries,
  // each (~key << 32 | unit): ascending is (key desc, unit asc).
  int64_t sortLen = int64_t(llvm::PowerOf2Ceil(listCap));
  Type i64 = b.getI64Type();
  SmallVector<Type> smem{
      KernelBuilder::workgroupType(ctx, {256}, i32),       // hist
      KernelBuilder::workgroupType(ctx, {256}, i32),       // first pass
      KernelBuilder::workgroupType(ctx, {8}, i32),         // state
      KernelBuilder::workgroupType(ctx, {3 * warps}, i32), // per-warp
      KernelBuilder::workgroupType(ctx, {sortLen}, i64)};  // extras
  int64_t staticBytes = KernelBuilder::workgroupBytes(smem);
  // The ranking keys of the first `cachedKeys` units live in dynamic shared
  // memory, as many as the chip lets a block claim (less 1 KB the driver
  // may reserve); further units recompute theirs at each pass.
  int64_t cachedKeys =
      std::max<int64_t>(threads, (kb.sharedBytesOptin() - staticBytes - 1024) /
                                     (4 * threads) * threads);
  // The first kernel (a block per (kv head, sequence)) ranks the base set
  // and the first list of extras and pads the slots no candidate fills;
  // with more extras a second kernel ranks each further list in a block of
  // its own (grid (list, kv head, sequence)), so that the lists of a long
  // context run side by side rather than one after another in one block.
  const int64_t firstEnd = std::min(slots, base + kSharedExtras);
  auto body = [&](bool later) {
    return [&, later](GPUEmitter &e, ValueRange a, ValueRange sm) {
      Value scores = a[0], lens = a[1], indices = a[2];
      Value windows = hasWindows ? a[3] : Value();
      Value hist = sm[0], hist0 = sm[1], state = sm[2], red = sm[3];
      Value list = sm[4];
      Value cached = dynamicSharedArray(e, cachedKeys, i32);
      Value tid = e.tid();
      Value lane = e.rems(tid, e.idx(kWarp)), warp = e.divs(tid, e.idx(kWarp));
      Value g = e.bid(later ? gpu::Dimension::y : gpu::Dimension::x);
      Value bb = e.bid(later ? gpu::Dimension::z : gpu::Dimension::y);
      SelectContext sc = selectContext(e, op, scores, lens, windows, bb, g);
      Value nu = sc.nu;
      // The later kernel's list: ranks [listFrom, listTo).
      Value listFrom, listTo;
      if (later) {
        listFrom = e.add(e.idx(firstEnd),
                         e.mul(e.bid(gpu::Dimension::x), e.idx(kSharedExtras)));
        listTo = e.mins(e.add(listFrom, e.idx(kSharedExtras)), e.idx(slots));
      }
      // With the prefilter the units walked are its candidates, gathered
      // here in unit order: unit i of the walk is candUnits[i], its key
      // candKeys[i].
      Value filtered = e.i1(false), candUnits, candKeys;
      if (prefilter) {
        filtered = sc.prefiltered(e, slots);
        Value counts = a[pfArg], chunkUnits = a[pfArg + 1],
              chunkKeys = a[pfArg + 2];
        candUnits = a[pfArg + 3];
        candKeys = a[pfArg + 4];
        nu =
            e.ifElse(
                filtered, {e.builder().getIndexType()},
                [&](Emitter &ee) -> SmallVector<Value> {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  Value chunks = e.ceilDiv(sc.nu, e.idx(kPrefilterChunk));
                  // The later kernel walks what the first one gathered: it
                  // only needs their number.
                  if (later)
                    return {e.toIndex(e.forLoop(
                        e.idx(0), chunks, e.idx(1), {e.i32(0)},
                        [&](Emitter &e, Value j,
                            ValueRange acc) -> SmallVector<Value> {
                          return {e.add(acc[0], e.load(counts, {bb, g, j}))};
                        })[0])};
                  // Warp w gathers chunks w, w + warps, ...: its offset is
                  // the count of the chunks before it.
                  e.forLoop(
                      warp, chunks, e.idx(warps), {},
                      [&](Emitter &ee, Value c,
                          ValueRange) -> SmallVector<Value> {
                        GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                        Value part = e.forLoop(
                            lane, c, e.idx(kWarp), {e.i32(0)},
                            [&](Emitter &e, Value j,
                                ValueRange acc) -> SmallVector<Value> {
                              return {
                                  e.add(acc[0], e.load(counts, {bb, g, j}))};
                            })[0];
                        Value offset = e.toIndex(laneReduce(
                            e, nvvmTarget(), part, kWarp,
                            [&](Value x, Value y) { return e.add(x, y); }));
                        Value cnt = e.loadIndex(counts, {bb, g, c});
                        Value from = e.mul(c, e.idx(kPrefilterChunk));
                        e
                            .forLoop(
                                lane, cnt, e.idx(kWarp), {},
                                [&](Emitter &e, Value j,
                                    ValueRange) -> SmallVector<Value> {
                                  Value src = e.add(from, j),
                                        dst = e.add(offset, j);
                                  e.store(e.load(chunkUnits, {bb, g, src}),
                                          candUnits, {bb, g, dst});
                                  e.store(e.load(chunkKeys, {bb, g, src}),
                                          candKeys, {bb, g, dst});
                                  return {};
                                });
                        e.ifThen(e.band(e.eq(c, e.sub(chunks, e.idx(1))),
                                        e.eq(lane, e.idx(0))),
                                 [&](Emitter &e) {
                                   e.store(e.toI32(e.add(offset, cnt)), state,
                                           {e.idx(6)});
                                 });
                        return {};
                      });
                  e.barrier();
                  Value total = e.loadIndex(state, {e.idx(6)});
                  e.barrier();
                  return {total};
                },
                [&](Emitter &) -> SmallVector<Value> { return {sc.nu}; })[0];
      }
      // A later list that starts past every candidate walks no unit (its
      // passes are empty, its barriers still reached by every thread).
      if (later)
        nu = e.select(e.lt(listFrom, nu), nu, e.idx(0));
      // A list entry: (~key) << 32 | unit, so that ascending order is
      // key desc, then unit asc (units are non-negative i32; a
      // candidate's key is at least 1, so no entry is all ones).
      auto sortEntry = [&](Emitter &e, Value kk, Value unitI32) -> Value {
        OpBuilder &ob = e.builder();
        Location l = e.location();
        Value hi = arith::ExtUIOp::create(ob, l, i64, e.bxor(kk, e.i32(-1)));
        Value lo = arith::ExtUIOp::create(ob, l, i64, unitI32);
        Value c32 = arith::ConstantIntOp::create(ob, l, 32, 64);
        return e.bor(arith::ShLIOp::create(ob, l, hi, c32), lo);
      };
      // The unit walked i-th (i32).
      auto unitOf = [&](Emitter &e, Value i) -> Value {
        if (!prefilter)
          return e.toI32(i);
        return e.ifElse(
            filtered, {e.builder().getI32Type()},
            [&](Emitter &e) -> SmallVector<Value> {
              return {e.load(candUnits, {bb, g, i})};
            },
            [&](Emitter &e) -> SmallVector<Value> { return {e.toI32(i)}; })[0];
      };
      auto computeKey = [&](GPUEmitter &e, Value i) -> Value {
        if (!prefilter)
          return sc.key(e, i);
        return e.ifElse(
            filtered, {e.builder().getI32Type()},
            [&](Emitter &e) -> SmallVector<Value> {
              return {e.load(candKeys, {bb, g, i})};
            },
            [&](Emitter &ee) -> SmallVector<Value> {
              return {sc.key(static_cast<GPUEmitter &>(ee), i)};
            })[0];
      };
      using KeyFn = std::function<Value(GPUEmitter &, Value)>;
      KeyFn key = [&](GPUEmitter &e, Value u) -> Value {
        return e.ifElse(
            e.lt(u, e.idx(cachedKeys)), {e.builder().getI32Type()},
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
      // A pass over the keys in two variants: plain shared-memory loads
      // when every candidate's key is cached (the common case, and no
      // branch per key), key() otherwise.
      auto byCache = [&](GPUEmitter &e, TypeRange types,
                         const std::function<SmallVector<Value>(
                             GPUEmitter &, const KeyFn &)> &pass) {
        KeyFn cachedKey = [&](GPUEmitter &e, Value u) -> Value {
          return e.load(cached, {u});
        };
        return e.ifElse(
            e.le(nu, e.idx(cachedKeys)), types,
            [&](Emitter &ee) -> SmallVector<Value> {
              return pass(static_cast<GPUEmitter &>(ee), cachedKey);
            },
            [&](Emitter &ee) -> SmallVector<Value> {
              return pass(static_cast<GPUEmitter &>(ee), key);
            });
      };
      // Every unit once, each warp on kUnroll rounds of 32 consecutive
      // units an iteration so that all its lanes run the same rounds
      // (match.any needs the whole warp): body(us, valids), one unit per
      // round, lanes past nu with valid false (and unit 0).
      using RoundsBody =
          std::function<void(GPUEmitter &, ArrayRef<Value>, ArrayRef<Value>)>;
      auto forUnitsByWarp = [&](GPUEmitter &e, const RoundsBody &body) {
        e.forLoop(e.mul(warp, e.idx(kWarp)), nu, e.idx(threads * kUnroll), {},
                  [&](Emitter &ee, Value u0, ValueRange) -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    SmallVector<Value> us, valids;
                    for (int64_t j = 0; j < kUnroll; ++j) {
                      Value u = e.add(e.add(u0, e.idx(j * threads)), lane);
                      valids.push_back(e.lt(u, nu));
                      us.push_back(e.select(valids.back(), u, e.idx(0)));
                    }
                    body(e, us, valids);
                    return {};
                  });
      };
      // hist[digit] += 1 for each lane and round where `match` holds.
      // With `aggregate` (the first pass: most keys share their top
      // bits, and same-bin atomics would serialise) the lanes of a warp
      // with one digit add their count once, found by match.any. Later
      // passes' digits are lower bits, mostly distinct within a warp:
      // one atomic per lane is cheaper there than the match (on the H200
      // the sketch step of dummy Llama-3.2-1B at 32K x 8 fell from 4.38
      // to 4.12 ms).
      auto countDigits = [&](GPUEmitter &e, Value h, ArrayRef<Value> matches,
                             ArrayRef<Value> digits, bool aggregate) {
        if (!aggregate) {
          for (auto [match, digit] : llvm::zip(matches, digits))
            e.ifThen(match, [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              e.atomicAddI32(h, {e.toIndex(digit)}, e.i32(1));
            });
          return;
        }
        SmallVector<Value> ds, peers;
        for (auto [match, digit] : llvm::zip(matches, digits))
          ds.push_back(e.select(match, digit, e.i32(256)));
        for (Value d : ds)
          peers.push_back(e.matchAny(d));
        for (size_t j = 0; j < ds.size(); ++j) {
          Value lowest = e.band(peers[j], e.sub(e.i32(0), peers[j]));
          Value leader = e.eq(lowest, e.laneBit(lane));
          e.ifThen(e.band(matches[j], leader), [&](Emitter &ee) {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            e.atomicAddI32(h, {e.toIndex(ds[j])}, e.popc(peers[j]));
          });
        }
      };
      auto digitOf = [&](GPUEmitter &e, Value kk, int64_t shift) {
        return e.band(
            arith::ShRUIOp::create(e.builder(), e.location(), kk, e.i32(shift)),
            e.i32(255));
      };
      // The keys, cached, and the first radix pass's histogram (top 8
      // bits of every candidate's key), which both searches start from.
      e.forLoop(tid, e.idx(256), e.idx(threads), {},
                [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                  e.store(e.i32(0), hist0, {i});
                  return {};
                });
      e.barrier();
      forUnitsByWarp(
          e, [&](GPUEmitter &e, ArrayRef<Value> us, ArrayRef<Value> valids) {
            // Every round's loads first, then their uses.
            SmallVector<Value> kks, matches, digits;
            for (auto [u, valid] : llvm::zip(us, valids))
              kks.push_back(e.select(valid, computeKey(e, u), e.i32(0)));
            for (auto [u, valid, kk] : llvm::zip(us, valids, kks)) {
              e.ifThen(e.band(valid, e.lt(u, e.idx(cachedKeys))),
                       [&](Emitter &e) { e.store(kk, cached, {u}); });
              matches.push_back(e.ne(kk, e.i32(0)));
              digits.push_back(digitOf(e, kk, 24));
            }
            countDigits(e, hist0, matches, digits, /*aggregate=*/true);
          });
      e.barrier();
      e.ifThen(e.lt(tid, e.idx(8)),
               [&](Emitter &e) { e.store(e.i32(0), state, {tid}); });
      e.barrier();
      // Radix search for the k-th largest key, 8 bits at a time: its
      // value, and how many units at it are among the k largest.
      auto radixSearch = [&](Value k) -> std::pair<Value, Value> {
        Value prefix = e.i32(0), mask = e.i32(0);
        Value remaining = k;
        for (int64_t shift = 24; shift >= 0; shift -= 8) {
          Value sh = e.i32(shift);
          e.forLoop(tid, e.idx(256), e.idx(threads), {},
                    [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                      e.store(shift == 24 ? e.load(hist0, {i}) : e.i32(0), hist,
                              {i});
                      return {};
                    });
          e.barrier();
          if (shift != 24) {
            byCache(e, {}, [&](GPUEmitter &e, const KeyFn &keyOf) {
              forUnitsByWarp(e, [&](GPUEmitter &e, ArrayRef<Value> us,
                                    ArrayRef<Value> valids) {
                SmallVector<Value> kks, matches, digits;
                for (Value u : us)
                  kks.push_back(keyOf(e, u));
                for (auto [valid, kk] : llvm::zip(valids, kks)) {
                  matches.push_back(
                      e.band(valid, e.band(e.ne(kk, e.i32(0)),
                                           e.eq(e.band(kk, mask), prefix))));
                  digits.push_back(digitOf(e, kk, shift));
                }
                countDigits(e, hist, matches, digits, /*aggregate=*/false);
              });
              return SmallVector<Value>{};
            });
            e.barrier();
          }
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
            // The first pass counts every candidate: lane 0's suffix is
            // their number.
            if (shift == 24)
              e.ifThen(e.eq(lane, e.idx(0)),
                       [&](Emitter &e) { e.store(suffix, state, {e.idx(0)}); });
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
        return {prefix, remaining};
      };
      // The k largest units in (key desc, unit asc) order: keys above
      // `thr`, and the first `ties` units (in unit order) at it; every
      // candidate when there are at most k.
      struct TopSet {
        Value few, thr, ties;
        Value above(Emitter &e, Value kk) const {
          return e.bor(e.cmp(arith::CmpIPredicate::ugt, kk, thr),
                       e.band(few, e.ne(kk, e.i32(0))));
        }
        Value tie(Emitter &e, Value kk) const {
          return e.band(e.bnot(few), e.band(e.eq(kk, thr), e.ne(kk, e.i32(0))));
        }
      };
      // The number of candidates, known once a radix search ran.
      Value numValid;
      auto topSetOf = [&](Value k) {
        auto [prefix, remaining] = radixSearch(k);
        Value count = e.toIndex(e.load(state, {e.idx(0)}));
        Value few = e.le(count, e.toIndex(k));
        return std::make_pair(TopSet{few, e.select(few, e.i32(1), prefix),
                                     e.select(few, e.i32(0), remaining)},
                              count);
      };
      auto topSet = [&](int64_t k) {
        auto [set, count] = topSetOf(e.i32(k));
        numValid = count;
        return set;
      };
      // The base set, then the extras by rank in chunks of up to
      // kSharedExtras: chunk c holds the ranks [N_c, N_c+1) of the
      // (key desc, unit asc) order (N_0 = base), the units of the top
      // N_c+1 that are not among the top N_c, collected in shared memory
      // and placed by their rank there. A chunk costs one radix search
      // and two passes over the units, so open extras (as many slots as
      // units) cost a pass per kSharedExtras slots, not one a slot.
      const TopSet none{e.i1(false), e.i32(0), e.i32(0)};
      TopSet baseSet = none, firstSet = none;
      if (!later) {
        if (base > 0)
          baseSet = topSet(base);
        if (extras > 0)
          firstSet = topSet(firstEnd);
      }
      auto field = [&](Emitter &e, Value packed, int64_t which) {
        return e.toIndex(
            e.band(arith::ShRUIOp::create(e.builder(), e.location(), packed,
                                          e.i32(10 * which)),
                   e.i32(1023)));
      };
      // Collection in unit order: warp w walks its contiguous range of
      // units 32 at a time. Per unit three flags, packed 10 bits apart in
      // one i32 so that one warp scan counts them: above `lo`'s
      // threshold, a tie at it, a tie at `hi`'s. The units of `hi` not in
      // `lo` go to the shared list and then to the slots from `slot0` by
      // their rank among them; with `writeLo` (the base set) `lo`'s
      // units are written in unit order at the front.
      Value perWarp =
          e.mul(e.ceilDiv(e.ceilDiv(nu, e.idx(warps)), e.idx(kWarp * kUnroll)),
                e.idx(kWarp * kUnroll));
      Value wlo = e.mins(e.mul(warp, perWarp), nu);
      Value whi = e.mins(e.add(wlo, perWarp), nu);
      // The units of the kUnroll rounds from u0 in this warp's range
      // and their keys (0 past it).
      auto roundsAt = [&](GPUEmitter &e, const KeyFn &keyOf, Value u0,
                          SmallVector<Value> &us, SmallVector<Value> &kks) {
        for (int64_t j = 0; j < kUnroll; ++j)
          us.push_back(e.add(e.add(u0, e.idx(j * kWarp)), lane));
        for (Value u : us)
          kks.push_back(e.select(e.lt(u, whi),
                                 keyOf(e, e.mins(u, e.sub(whi, e.idx(1)))),
                                 e.i32(0)));
      };
      Type indexType = e.builder().getIndexType();
      auto collect = [&](const TopSet *lo, bool writeLo, const TopSet *hi,
                         Value slot0) {
        e.ifThen(e.eq(tid, e.idx(0)),
                 [&](Emitter &e) { e.store(e.i32(0), state, {e.idx(5)}); });
        auto flagsOf = [&](Emitter &e, Value kk) {
          Value f = e.i32(0);
          if (lo)
            f = e.add(e.select(lo->above(e, kk), e.i32(1), e.i32(0)),
                      e.select(lo->tie(e, kk), e.i32(1 << 10), e.i32(0)));
          if (hi)
            f = e.add(f, e.select(hi->tie(e, kk), e.i32(1 << 20), e.i32(0)));
          return f;
        };
        // Counting: each warp's totals, then the totals of the warps
        // before it.
        auto counts = byCache(
            e, {indexType, indexType, indexType},
            [&](GPUEmitter &e, const KeyFn &keyOf) {
              return e.forLoop(wlo, whi, e.idx(kWarp * kUnroll),
                               {e.idx(0), e.idx(0), e.idx(0)},
                               [&](Emitter &ee, Value u0,
                                   ValueRange acc) -> SmallVector<Value> {
                                 GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                                 SmallVector<Value> us, kks;
                                 roundsAt(e, keyOf, u0, us, kks);
                                 // At most kUnroll per 10-bit field.
                                 Value f = e.i32(0);
                                 for (Value kk : kks)
                                   f = e.add(f, flagsOf(e, kk));
                                 return {e.add(acc[0], field(e, f, 0)),
                                         e.add(acc[1], field(e, f, 1)),
                                         e.add(acc[2], field(e, f, 2))};
                               });
            });
        for (int64_t c = 0; c < 3; ++c) {
          Value t = laneReduce(e, nvvmTarget(), e.toI32(counts[c]), kWarp,
                               [&](Value x, Value y) { return e.add(x, y); });
          e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
            e.store(t, red, {e.add(e.mul(warp, e.idx(3)), e.idx(c))});
          });
        }
        e.barrier();
        SmallVector<Value> before = e.forLoop(
            e.idx(0), warp, e.idx(1), {e.idx(0), e.idx(0), e.idx(0)},
            [&](Emitter &e, Value w, ValueRange acc) -> SmallVector<Value> {
              SmallVector<Value> next;
              for (int64_t c = 0; c < 3; ++c)
                next.push_back(e.add(
                    acc[c],
                    e.loadIndex(red, {e.add(e.mul(w, e.idx(3)), e.idx(c))})));
              return next;
            });
        Value loTies = lo ? e.toIndex(lo->ties) : Value();
        Value hiTies = hi ? e.toIndex(hi->ties) : Value();
        // Writing: `lo`'s units at their position in unit order (with
        // writeLo), the others of `hi` appended to the shared list (any
        // order). One round of 32 units: f its flags, incl their
        // inclusive scan, acc the counts before the round.
        auto writeRound = [&](GPUEmitter &e, Value u, Value kk, Value f,
                              Value incl, ValueRange acc) {
          Value excl = e.sub(incl, f);
          Value valid = e.lt(u, whi);
          Value inLo = e.i1(false);
          if (lo) {
            Value isAbove = e.ne(field(e, f, 0), e.idx(0));
            Value isTie = e.ne(field(e, f, 1), e.idx(0));
            Value tieRank = e.add(acc[1], field(e, excl, 1));
            Value takeTie = e.band(isTie, e.lt(tieRank, loTies));
            inLo = e.band(valid, e.bor(isAbove, takeTie));
            if (writeLo) {
              Value pos = e.add(e.add(acc[0], field(e, excl, 0)),
                                e.mins(tieRank, loTies));
              e.ifThen(inLo, [&](Emitter &e) {
                e.store(unitOf(e, u), indices, {bb, g, pos});
              });
            }
          }
          if (hi) {
            Value tieRank = e.add(acc[2], field(e, excl, 2));
            Value isTie = e.ne(field(e, f, 2), e.idx(0));
            Value inHi =
                e.band(valid, e.bor(hi->above(e, kk),
                                    e.band(isTie, e.lt(tieRank, hiTies))));
            e.ifThen(e.band(inHi, e.bnot(inLo)), [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value at = e.toIndex(e.atomicAddI32(state, {e.idx(5)}, e.i32(1)));
              // At most listCap units qualify (hi ranks at most that
              // many past lo); the guard only keeps the list's bounds.
              e.ifThen(e.lt(at, e.idx(listCap)), [&](Emitter &e) {
                e.store(sortEntry(e, kk, unitOf(e, u)), list, {at});
              });
            });
          }
        };
        byCache(e, {}, [&](GPUEmitter &e, const KeyFn &keyOf) {
          e.forLoop(wlo, whi, e.idx(kWarp * kUnroll), before,
                    [&](Emitter &ee, Value u0,
                        ValueRange acc0) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      SmallVector<Value> us, kks, fs, incls;
                      roundsAt(e, keyOf, u0, us, kks);
                      // The rounds' scans are independent; their totals
                      // chain.
                      for (Value kk : kks) {
                        fs.push_back(flagsOf(e, kk));
                        incls.push_back(e.warpScanI32(fs.back(), lane));
                      }
                      SmallVector<Value> acc(acc0);
                      for (int64_t j = 0; j < kUnroll; ++j) {
                        writeRound(e, us[j], kks[j], fs[j], incls[j], acc);
                        Value total = shuffle(e, incls[j], kWarp - 1,
                                              gpu::ShuffleMode::IDX);
                        for (int64_t c = 0; c < 3; ++c)
                          acc[c] = e.add(acc[c], field(e, total, c));
                      }
                      return acc;
                    });
          return SmallVector<Value>{};
        });
        if (writeLo) {
          // Pad the base set.
          Value written = e.mins(numValid, e.idx(base));
          e.forLoop(e.add(written, tid), e.idx(base), e.idx(threads), {},
                    [&](Emitter &e, Value j, ValueRange) -> SmallVector<Value> {
                      e.store(e.i32(-1), indices, {bb, g, j});
                      return {};
                    });
        }
        if (!hi)
          return;
        // Each extra's slot is its rank in (key desc, unit asc) order
        // among the chunk's: the list, padded past its count with
        // entries above every real one, is sorted ascending by a bitonic
        // network (log2(n) (log2(n) + 1) / 2 compare-exchange rounds of
        // one barrier each; the rank of each by counting the entries
        // before it took count^2 / threads shared loads a thread, most
        // of a list's time).
        e.barrier();
        Value count = e.mins(e.loadIndex(state, {e.idx(5)}), e.idx(listCap));
        Value pad =
            arith::ConstantIntOp::create(e.builder(), e.location(), -1, 64);
        e.forLoop(e.add(count, tid), e.idx(sortLen), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    e.store(pad, list, {i});
                    return {};
                  });
        e.barrier();
        // Round (kk, t): blocks of k = 2^kk entries, partners j =
        // 2^(kk - 1 - t) apart; none for an empty list (a uniform count).
        int64_t sortLog = llvm::Log2_64(sortLen);
        auto shl = [&](Emitter &e, Value x) {
          return arith::ShLIOp::create(e.builder(), e.location(), e.idx(1), x);
        };
        e
            .forLoop(
                e.idx(1),
                e.select(e.gt(count, e.idx(0)), e.idx(sortLog + 1), e.idx(1)),
                e.idx(1), {},
                [&](Emitter &e, Value kk, ValueRange) -> SmallVector<Value> {
                  Value k = shl(e, kk);
                  e
                      .forLoop(
                          e.idx(0), kk, e.idx(1), {},
                          [&](Emitter &ee, Value t,
                              ValueRange) -> SmallVector<Value> {
                            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                            Value j = shl(e, e.sub(e.sub(kk, e.idx(1)), t));
                            // A thread a pair (i, i + j), i the pair's
                            // lower entry, so that no thread reads an entry
                            // another writes in the round. The pair's index
                            // is opaque to LLVM: with one pair (a list of 2)
                            // it would otherwise load the pair in every
                            // thread and let only the owner store.
                            e.forLoop(
                                tid, e.idx(sortLen / 2), e.idx(threads), {},
                                [&](Emitter &ee, Value pair,
                                    ValueRange) -> SmallVector<Value> {
                                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                                  Value pr = opaqueIndex(e, pair);
                                  Value low = e.band(pr, e.sub(j, e.idx(1)));
                                  Value i = e.add(
                                      e.mul(e.sub(pr, low), e.idx(2)), low);
                                  Value partner = e.add(i, j);
                                  Value x = e.load(list, {i});
                                  Value y = e.load(list, {partner});
                                  Value up = e.eq(e.band(i, k), e.idx(0));
                                  Value swap = e.select(
                                      up,
                                      e.cmp(arith::CmpIPredicate::ugt, x, y),
                                      e.cmp(arith::CmpIPredicate::ult, x, y));
                                  e.ifThen(swap, [&](Emitter &e) {
                                    e.store(y, list, {i});
                                    e.store(x, list, {partner});
                                  });
                                  return {};
                                });
                            e.barrier();
                            return {};
                          });
                  return {};
                });
        e.forLoop(tid, count, e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value unit = arith::TruncIOp::create(
                        e.builder(), e.location(), e.builder().getI32Type(),
                        e.load(list, {i}));
                    e.store(unit, indices, {bb, g, e.add(slot0, i)});
                    return {};
                  });
        // The list is read until here; the next chunk refills it.
        e.barrier();
      };
      if (later) {
        // A list past every candidate skips its searches (a uniform
        // branch; the lambdas emit through the same builder).
        e.ifThen(e.gt(nu, e.idx(0)), [&](Emitter &) {
          TopSet lo = topSetOf(e.toI32(listFrom)).first;
          TopSet hi = topSetOf(e.toI32(listTo)).first;
          collect(&lo, false, &hi, listFrom);
        });
        return;
      }
      collect(base > 0 ? &baseSet : nullptr, base > 0,
              extras > 0 ? &firstSet : nullptr, e.idx(base));
      if (extras > 0) {
        // The slots the candidates fill: every extra past the base set,
        // up to the slots (those past the first list: the later kernel).
        Value filled = e.mins(e.idx(slots), e.maxs(numValid, e.idx(base)));
        e.forLoop(e.add(filled, tid), e.idx(slots), e.idx(threads), {},
                  [&](Emitter &e, Value j, ValueRange) -> SmallVector<Value> {
                    e.store(e.i32(-1), indices, {bb, g, j});
                    return {};
                  });
      }
    };
  };
  auto fn = kb.createKernel(name, operands, smem, body(false));
  KernelBuilder::launchBounds(fn, threads, 1);
  launchPerGroup(b, loc, fn, op.getScores(), hkv, threads, operands,
                 4 * cachedKeys);
  if (slots > firstEnd) {
    // A block for each later list that can hold a candidate (no more
    // than the units), at least one.
    auto lists =
        kb.createKernel((name + "_lists").str(), operands, smem, body(true));
    KernelBuilder::launchBounds(lists, threads, 1);
    auto idx = [&](int64_t v) {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    Value units = memref::DimOp::create(b, loc, op.getScores(), 2);
    Value ranked = arith::MinSIOp::create(b, loc, units, idx(slots));
    // (The launch plan expresses add, mul, ceildiv, min and max.)
    Value past = arith::MaxSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, ranked, idx(-firstEnd)), idx(1));
    Value count = arith::CeilDivSIOp::create(b, loc, past, idx(kSharedExtras));
    launch(b, loc, lists, count, idx(hkv),
           memref::DimOp::create(b, loc, op.getScores(), 0), threads, operands,
           4 * cachedKeys);
  }
}

} // namespace

SmallVector<Value>
mlir::condensate::warpRankOffsets(GPUEmitter &e, const CandidateUnits &units,
                                  Value scores, Value bb, Value g,
                                  int64_t group) {
  SmallVector<Value> best =
      forcedScoreMax(e, units, scores, bb, g, group,
                     e.rems(e.tid(), e.idx(kWarp)), e.idx(kWarp));
  for (Value &v : best) {
    for (int64_t o = kWarp / 2; o >= 1; o /= 2)
      v = e.fmax(v, e.shuffleXor(v, o));
    v = rankOffset(e, v);
  }
  return best;
}

void mlir::condensate::populateSelectToGPUPatterns(RewritePatternSet &patterns,
                                                   gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<SelectTopKOp, lowerSelectTopK>>(ctx, kernels,
                                                             "select_topk");
}
