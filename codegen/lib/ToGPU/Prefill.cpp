//===- Prefill.cpp - prefill attention as a flash-attention kernel --------===//
//
// Lowers prefill_attention to one block per (tile of rows, key/value head,
// sequence). The tile's query vectors (its rows times the group's G query
// heads, prescaled; or a chunk of the heads when a whole group would not
// fit) are staged in shared memory once; the visible keys then
// stream through a shared tile of kKeys rows, keys first and values after
// (rows wider than kMaxSliceChannels a slice of channels at a time), each
// loaded from the paged cache once for the whole tile:
//   - scores: lane j of a warp owns key j of the tile and computes its
//     logit against each of the warp's query vectors (the query row read
//     as a broadcast, the key row from a padded, conflict-free tile);
//   - online softmax: a warp maximum per query vector and tile, one rescale;
//   - values: lane c owns channels c, c + 32, ...; the weights of the tile's
//     keys come from their lanes by shuffle.
// Causality, the window and the anchor are masks on the logits; the block
// walks only the key tiles its rows can see.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// Keys per tile: one per lane.
constexpr int64_t kKeys = kWarp;
/// Warps per block.
constexpr int64_t kWarps = 4;
/// Static shared memory a block may use (the launch plan has no dynamic
/// shared memory).
constexpr int64_t kSharedBytes = kStaticSharedBytes;
/// The widest slice of a key or value row the shared tile holds: wider
/// heads stream through it in slices of at most this many channels (a
/// multiple of kWarp, so a lane's value channels stay in one slice).
constexpr int64_t kMaxSliceChannels = 256;
/// Accumulator registers a lane may hold (query vectors x channels), and
/// query vectors a warp may own (each also holds a logit, a maximum and a
/// share of the sum).
constexpr int64_t kMaxAccumulators = 64;
constexpr int64_t kMaxPerWarp = 16;

struct PrefillShape {
  int64_t hq, hkv, group, d, p;
  int64_t channels;   ///< channels a lane owns in the value phase
  int64_t perWarp;    ///< query vectors a warp owns
  int64_t heads;      ///< query heads of the group a block serves
  int64_t headChunks; ///< blocks per row tile and group (group / heads)
  int64_t vectors;    ///< query vectors a block stages (rows * heads)
  int64_t rows;       ///< rows of a block's tile
  int64_t slice;      ///< channels of a row the tile holds at once
  int64_t slices;     ///< slices per row: ceil(d / slice)
  int64_t tileStride; ///< floats per key row of the shared tile (slice + 1)
  int64_t loadElems;  ///< elements of one cache load
};

PrefillShape prefillShape(PrefillAttentionOp op) {
  PrefillShape s;
  s.hq = staticDim(op.getQ(), 1);
  s.d = staticDim(op.getQ(), 2);
  s.hkv = staticDim(op.getKCache(), 1);
  s.p = staticDim(op.getKCache(), 2);
  s.group = s.hq / s.hkv;
  s.channels = (s.d + kWarp - 1) / kWarp;
  s.slices = (s.d + kMaxSliceChannels - 1) / kMaxSliceChannels;
  s.slice = (s.d + s.slices - 1) / s.slices;
  s.slice = (s.slice + kWarp - 1) / kWarp * kWarp;
  s.tileStride = s.slice + 1;
  int64_t tileBytes = kKeys * s.tileStride * 4;
  int64_t byMemory = (kSharedBytes - tileBytes) / (s.d * 4);
  int64_t maxVectors = std::min(
      byMemory,
      kWarps * std::min(kMaxPerWarp, kMaxAccumulators / s.channels));
  // A block stages `heads` query heads of the group for each of its rows
  // (the whole group when it fits, else the group in chunks of heads).
  s.heads = std::min(s.group, maxVectors);
  s.headChunks = (s.group + s.heads - 1) / s.heads;
  s.rows = std::max<int64_t>(1, maxVectors / s.heads);
  s.vectors = s.rows * s.heads;
  s.perWarp = (s.vectors + kWarps - 1) / kWarps;
  // 16-byte loads where the row allows them.
  int64_t eltBytes = elementBytes(elementType(op.getKCache()));
  s.loadElems = std::max<int64_t>(1, 16 / eltBytes);
  while (s.d % s.loadElems != 0)
    s.loadElems /= 2;
  return s;
}

void lowerPrefillAttention(PrefillAttentionOp op, OpBuilder &b,
                           const KernelBuilder &kb, StringRef name) {
  Location loc = op.getLoc();
  PrefillShape s = prefillShape(op);
  const int64_t threads = kWarps * kWarp;
  const int64_t window = op.getWindow(), anchor = op.getAnchor();
  const int64_t G = s.group, H = s.heads, D = s.d, QW = s.perWarp,
                NC = s.channels;
  const int64_t E = s.loadElems, P = s.p;
  MLIRContext *ctx = op.getContext();
  Type f32 = Float32Type::get(ctx);
  SmallVector<Type> shared{
      KernelBuilder::workgroupType(ctx, {s.vectors, D}, f32),
      KernelBuilder::workgroupType(ctx, {kKeys, s.tileStride}, f32)};
  SmallVector<Value> operands{op.getQ(),      op.getKCache(),
                              op.getVCache(), op.getPageTable(),
                              op.getLens(),   op.getRowStarts(),
                              op.getOut()};
  const double scaleValue = op.getScale().convertToDouble();
  auto fn = kb.createKernel(name, operands, shared, [&](GPUEmitter &e,
                                                        ValueRange a,
                                                        ValueRange smem) {
    Value q = a[0], k = a[1], v = a[2], pt = a[3], lens = a[4], starts = a[5],
          out = a[6];
    Value qs = smem[0], tile = smem[1];
    Value bx = e.bid(gpu::Dimension::x), gy = e.bid(gpu::Dimension::y),
          seq = e.bid(gpu::Dimension::z);
    Value g = e.divs(gy, e.idx(s.headChunks));
    // The block's first query head of the group.
    Value head0 = e.mul(e.rems(gy, e.idx(s.headChunks)), e.idx(H));
    Value tid = e.tid();
    Value warp = e.divs(tid, e.idx(kWarp)), lane = e.rems(tid, e.idx(kWarp));
    Value n = e.loadIndex(lens, {seq});
    Value r0 = e.loadIndex(starts, {seq});
    Value r1 = e.loadIndex(starts, {e.add(seq, e.idx(1))});
    // This block's rows [rBeg, rEnd); the whole block takes one branch.
    Value rBeg = e.add(r0, e.mul(bx, e.idx(s.rows)));
    Value rEnd = e.mins(e.add(rBeg, e.idx(s.rows)), r1);
    e.ifThen(e.lt(rBeg, rEnd), [&](Emitter &ee) {
      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
      Value first = e.sub(n, e.sub(r1, r0)); // position of row r0
      Value pFirst = e.add(first, e.sub(rBeg, r0));
      Value pLast = e.add(first, e.sub(e.sub(rEnd, e.idx(1)), r0));
      // Keys the block may see: [0, anchorEnd) and [lo, pLast].
      Value lo = e.idx(0), anchorEnd = e.idx(0);
      if (window > 0) {
        lo = e.maxs(e.idx(0), e.sub(pFirst, e.idx(window - 1)));
        if (anchor > 0)
          anchorEnd = e.mins(e.idx(anchor), lo);
      }
      Value anchorTiles = e.ceilDiv(anchorEnd, e.idx(kKeys));
      Value mainTiles =
          e.ceilDiv(e.sub(e.add(pLast, e.idx(1)), lo), e.idx(kKeys));

      // Stage the block's query vectors, prescaled: vector i is row
      // rBeg + i / H, query head g * G + head0 + i % H; rows past rEnd and
      // heads past the group are zero.
      int64_t chunksPerRow = D / 4;
      e.forLoop(
          tid, e.idx(s.vectors * chunksPerRow), e.idx(threads), {},
          [&](Emitter &ee, Value i, ValueRange) -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value vec = e.divs(i, e.idx(chunksPerRow));
            Value c = e.mul(e.rems(i, e.idx(chunksPerRow)), e.idx(4));
            Value row = e.add(rBeg, e.divs(vec, e.idx(H)));
            Value head = e.add(head0, e.rems(vec, e.idx(H)));
            Value ok = e.band(e.lt(row, rEnd), e.lt(head, e.idx(G)));
            Value rowSafe = e.select(ok, row, rBeg);
            Value h =
                e.add(e.mul(g, e.idx(G)), e.select(ok, head, e.idx(0)));
            Value x = e.vecLoad(q, {rowSafe, h, c}, 4, 16);
            x = e.fmul(x, e.splat(e.f32(scaleValue), 4));
            x = e.select(ok, x, e.splat(e.f32(0.0), 4));
            vector::StoreOp::create(e.builder(), e.location(), x, qs,
                                    ValueRange{vec, c});
            return {};
          });

      // The positions of this warp's query vectors (block-uniform values).
      SmallVector<Value> pos, active;
      for (int64_t i = 0; i < QW; ++i) {
        Value vec = e.add(e.mul(warp, e.idx(QW)), e.idx(i));
        Value row = e.add(rBeg, e.divs(vec, e.idx(H)));
        Value head = e.add(head0, e.rems(vec, e.idx(H)));
        active.push_back(e.band(e.band(e.lt(vec, e.idx(s.vectors)),
                                       e.lt(row, rEnd)),
                                e.lt(head, e.idx(G))));
        pos.push_back(e.add(first, e.sub(row, r0)));
      }

      // Loads channels [c0, c0 + width) of keys [t0, t0 + kKeys) of `cache`
      // into the shared tile as f32; keys past pLast read key t0 (masked
      // later).
      auto loadTile = [&](GPUEmitter &e, Value cache, Value t0, int64_t c0,
                          int64_t width) {
        int64_t perKey = width / E;
        e.forLoop(
            tid, e.idx(kKeys * perKey), e.idx(threads), {},
            [&](Emitter &ee, Value i, ValueRange) -> SmallVector<Value> {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value j = e.divs(i, e.idx(perKey));
              Value c = e.mul(e.rems(i, e.idx(perKey)), e.idx(E));
              Value t = e.add(t0, j);
              t = e.select(e.le(t, pLast), t, t0);
              Value page = e.loadIndex(pt, {seq, e.divs(t, e.idx(P))});
              Value off = e.rems(t, e.idx(P));
              int64_t align =
                  vectorAlign(E * elementBytes(elementType(cache)));
              Value x = e.toF32(e.vecLoad(
                  cache, {page, g, off, e.add(c, e.idx(c0))}, E, align));
              for (int64_t u = 0; u < E; ++u)
                e.store(e.extractElt(x, u), tile,
                        {j, e.add(c, e.idx(u))});
              return {};
            });
      };

      // State per query vector of the warp: m (warp-uniform), this lane's
      // share of l, and this lane's channels of the accumulator.
      SmallVector<Value> init;
      for (int64_t i = 0; i < QW; ++i)
        init.push_back(e.negInf());
      for (int64_t i = 0; i < QW; ++i)
        init.push_back(e.f32(0.0));
      for (int64_t i = 0; i < QW * NC; ++i)
        init.push_back(e.f32(0.0));

      Value tiles = e.add(anchorTiles, mainTiles);
      auto state = e.forLoop(
          e.idx(0), tiles, e.idx(1), init,
          [&](Emitter &ee, Value it, ValueRange st) -> SmallVector<Value> {
            GPUEmitter &e = static_cast<GPUEmitter &>(ee);
            Value inAnchor = e.lt(it, anchorTiles);
            Value t0 = e.select(
                inAnchor, e.mul(it, e.idx(kKeys)),
                e.add(lo, e.mul(e.sub(it, anchorTiles), e.idx(kKeys))));
            // This lane's key and its logits against the warp's vectors,
            // a slice of the key rows at a time.
            Value t = e.add(t0, lane);
            Value inRange = e.select(inAnchor, e.lt(t, anchorEnd),
                                     e.le(t, pLast));
            SmallVector<Value> dots(QW, e.f32(0.0));
            for (int64_t sl = 0; sl < s.slices; ++sl) {
              const int64_t c0 = sl * s.slice;
              const int64_t width = std::min(s.slice, D - c0);
              // The previous tile (or slice) is no longer read.
              e.barrier();
              loadTile(e, k, t0, c0, width);
              e.barrier();
              dots = e.forLoop(
                  e.idx(0), e.idx(width / 4), e.idx(1), dots,
                  [&](Emitter &ee, Value c4, ValueRange acc)
                      -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    Value c = e.mul(c4, e.idx(4));
                    Value kk[4];
                    for (int64_t u = 0; u < 4; ++u)
                      kk[u] = e.load(tile, {lane, e.add(c, e.idx(u))});
                    Value qc = e.add(c, e.idx(c0));
                    SmallVector<Value> next;
                    for (int64_t i = 0; i < QW; ++i) {
                      Value vec =
                          e.mins(e.add(e.mul(warp, e.idx(QW)), e.idx(i)),
                                 e.idx(s.vectors - 1));
                      Value qv = e.vecLoad(qs, {vec, qc}, 4, 16);
                      Value x = acc[i];
                      for (int64_t u = 0; u < 4; ++u)
                        x = e.fma(e.extractElt(qv, u), kk[u], x);
                      next.push_back(x);
                    }
                    return next;
                  });
            }
            SmallVector<Value> logit;
            for (int64_t i = 0; i < QW; ++i) {
              Value visible = e.band(inRange, e.le(t, pos[i]));
              if (window > 0) {
                Value inWindow =
                    e.gt(t, e.sub(pos[i], e.idx(window)));
                if (anchor > 0)
                  inWindow = e.bor(inWindow, e.lt(t, e.idx(anchor)));
                visible = e.band(visible, inWindow);
              }
              visible = e.band(visible, active[i]);
              logit.push_back(e.select(visible, dots[i], e.negInf()));
            }
            // Online softmax, one rescale per tile and vector.
            SmallVector<Value> out(st.begin(), st.end());
            SmallVector<Value> weight;
            for (int64_t i = 0; i < QW; ++i) {
              Value m = st[i];
              Value mNew =
                  e.fmax(m, laneMax(e, nvvmTarget(), logit[i], kWarp));
              // No visible key yet: keep everything at zero.
              Value mSafe = e.select(
                  e.fcmp(arith::CmpFPredicate::OEQ, mNew, e.negInf()),
                  e.f32(0.0), mNew);
              Value corr = e.fastExp(e.fsub(m, mSafe));
              Value w = e.fastExp(e.fsub(logit[i], mSafe));
              weight.push_back(w);
              out[i] = mNew;
              out[QW + i] = e.fadd(e.fmul(st[QW + i], corr), w);
              for (int64_t c = 0; c < NC; ++c)
                out[2 * QW + i * NC + c] =
                    e.fmul(st[2 * QW + i * NC + c], corr);
            }
            // acc[i][c] += sum_j w_j(i) * v[j][c] over lane c's channels
            // (c = lane + 32 n), the values a slice at a time into the tile.
            for (int64_t sl = 0; sl < s.slices; ++sl) {
              const int64_t c0 = sl * s.slice;
              const int64_t width = std::min(s.slice, D - c0);
              const int64_t n0 = c0 / kWarp;
              const int64_t n1 = std::min(NC, (c0 + s.slice) / kWarp);
              e.barrier();
              loadTile(e, v, t0, c0, width);
              e.barrier();
              SmallVector<Value> accs;
              for (int64_t i = 0; i < QW; ++i)
                for (int64_t c = n0; c < n1; ++c)
                  accs.push_back(out[2 * QW + i * NC + c]);
              auto summed = e.forLoop(
                  e.idx(0), e.idx(kKeys), e.idx(1), accs,
                  [&](Emitter &ee, Value j, ValueRange acc)
                      -> SmallVector<Value> {
                    GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                    SmallVector<Value> vj;
                    for (int64_t c = n0; c < n1; ++c) {
                      Value ch = e.add(lane, e.idx(c * kWarp - c0));
                      if (c * kWarp + kWarp > D)
                        ch = e.mins(ch, e.idx(width - 1));
                      vj.push_back(e.load(tile, {j, ch}));
                    }
                    SmallVector<Value> next(acc.begin(), acc.end());
                    const int64_t nn = n1 - n0;
                    for (int64_t i = 0; i < QW; ++i) {
                      Value wj = e.shuffleIdx(weight[i], j);
                      for (int64_t c = 0; c < nn; ++c)
                        next[i * nn + c] = e.fma(wj, vj[c], next[i * nn + c]);
                    }
                    return next;
                  });
              for (int64_t i = 0; i < QW; ++i)
                for (int64_t c = n0; c < n1; ++c)
                  out[2 * QW + i * NC + c] = summed[i * (n1 - n0) + c - n0];
            }
            return out;
          });

      // out = acc / l for the warp's active vectors.
      for (int64_t i = 0; i < QW; ++i) {
        Value l = laneSum(e, nvvmTarget(), state[QW + i], kWarp);
        Value vec = e.add(e.mul(warp, e.idx(QW)), e.idx(i));
        Value row = e.add(rBeg, e.divs(vec, e.idx(H)));
        Value h = e.add(e.mul(g, e.idx(G)),
                        e.add(head0, e.rems(vec, e.idx(H))));
        Value inv = e.fdiv(e.f32(1.0), l);
        e.ifThen(active[i], [&](Emitter &e) {
          for (int64_t c = 0; c < NC; ++c) {
            Value ch = e.add(lane, e.idx(c * kWarp));
            Value val = e.fmul(state[2 * QW + i * NC + c], inv);
            if (D % kWarp != 0)
              e.ifThen(e.lt(ch, e.idx(D)),
                       [&](Emitter &e) { e.store(val, out, {row, h, ch}); });
            else
              e.store(val, out, {row, h, ch});
          }
        });
      }
    });
  });
  KernelBuilder::launchBounds(fn, threads, 1);
  Value rows = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value seqs = memref::DimOp::create(b, loc, op.getLens(), 0);
  Value tilesX = arith::CeilDivSIOp::create(
      b, loc, rows, arith::ConstantIndexOp::create(b, loc, s.rows));
  launch(b, loc, fn, tilesX,
         arith::ConstantIndexOp::create(b, loc, s.hkv * s.headChunks), seqs,
         threads, operands);
}

} // namespace

void mlir::condensate::populatePrefillToGPUPatterns(
    RewritePatternSet &patterns, gpu::GPUModuleOp kernels) {
  patterns.add<KernelPattern<PrefillAttentionOp, lowerPrefillAttention>>(
      patterns.getContext(), kernels, "prefill");
}
