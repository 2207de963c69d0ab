//===- Score.cpp - page and token scoring kernels -------------------------===//
//
// Lowers score_pages (a lane group per page and kv head, the group's query
// heads in registers; grid (page blocks, Hkv, B)),
// score_tokens (a lane group per token; grid (token blocks, Hkv, B)) and
// score_sketch (the page's terms once per page in shared memory, then a
// lane per word row scoring its tokens for every query head of the group
// with one fma per code and head; grid (page blocks, Hkv, B)). Blocks
// wholly past a sequence's context write nothing.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "../Common/Sketch.h"
#include "KernelBuilder.h"

#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

/// The query slices (E elements at `col`) of query heads [first, first +
/// count) (all G by default) of key/value head g's group of sequence bb:
/// what a lane group holds for all its dot products.
SmallVector<Value> groupQueries(GPUEmitter &e, Value q, Value bb, Value g,
                                int64_t G, Value col, int64_t E, int64_t align,
                                Value first = {}, int64_t count = -1) {
  Value base = e.mul(g, e.idx(G));
  if (first)
    base = e.add(base, first);
  SmallVector<Value> qs;
  for (int64_t i = 0; i < (count < 0 ? G : count); ++i)
    qs.push_back(e.vecLoad(q, {bb, e.add(base, e.idx(i)), col}, E, align));
  return qs;
}

/// Runs `body` in a block that holds part of the context. A block wholly
/// past it writes nothing: the page table is as wide as the longest context
/// the engine allows, the sequence may be far shorter, and no consumer
/// reads score slots past the context (the ops' contract). The condition is
/// uniform over the block, so the body's shuffles see whole warps.
void ifInsideContext(GPUEmitter &e, Value live,
                     const std::function<void(GPUEmitter &)> &body) {
  e.ifThen(live, [&](Emitter &ee) { body(static_cast<GPUEmitter &>(ee)); });
}

void lowerScorePages(ScorePagesOp op, OpBuilder &b, const KernelBuilder &kb,
                     StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize();
  RowSplit rs = RowSplit::of(d, b.getF32Type());
  int64_t L = rs.lanes, E = rs.elems;
  int64_t groups = std::max<int64_t>(1, 256 / L);
  int64_t threads = groups * L;
  // Each lane group scores kPages pages, loading all before computing.
  constexpr int64_t kPages = 4;
  int64_t perBlock = groups * kPages;
  int64_t align = vectorAlign(E * 4);
  bool minmax = op.getSelector() == Selector::block_minmax;
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        LanePlace at = e.lanePlace(rs);
        Value gid = at.group, li = at.lane, col = at.col;
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value first = e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock));
        Value mp = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value pages = e.ceilDiv(n, e.idx(p));
        Value scale = e.f32(op.getScale().convertToDouble());
        ifInsideContext(
            e, e.lt(first, pages), [&](GPUEmitter &e) {
              SmallVector<Value> qs =
                  groupQueries(e, q, bb, g, G, col, E, align);
              // No branch around the group shuffles: out-of-range groups
              // compute on page slot 0 and do not store.
              SmallVector<Value> js, inRange, inside, lo, hi;
              for (int64_t k = 0; k < kPages; ++k) {
                Value j = e.add(first, e.add(e.idx(k * groups), gid));
                Value ok = e.lt(j, mp);
                Value jj = e.select(ok, j, e.idx(0));
                Value in = e.lt(jj, pages);
                Value page = e.loadIndex(pt, {bb, e.select(in, jj, e.idx(0))});
                js.push_back(jj);
                inRange.push_back(ok);
                inside.push_back(in);
                if (minmax) {
                  lo.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KMin), col}, E, align));
                  hi.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KMax), col}, E, align));
                } else {
                  lo.push_back(
                      e.vecLoad(sum, {page, g, e.idx(KSum), col}, E, align));
                }
              }
              for (int64_t k = 0; k < kPages; ++k) {
                Value cnt = e.mins(e.sub(n, e.mul(js[k], e.idx(p))), e.idx(p));
                for (int64_t i = 0; i < G; ++i) {
                  Value sc = minmax ? rowBoxDot(e, nvvmTarget(), qs[i], lo[k],
                                                hi[k], L)
                                    : rowDot(e, nvvmTarget(), qs[i], lo[k], L);
                  if (!minmax)
                    sc = e.fdiv(sc, e.indexToF32(e.maxs(cnt, e.idx(1))));
                  sc = e.select(inside[k], e.fmul(sc, scale), e.negInf());
                  e.ifThen(e.band(inRange[k], e.eq(li, e.idx(0))),
                           [&](Emitter &e) {
                             e.store(sc, scores,
                                     {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)),
                                      js[k]});
                           });
                }
              }
            });
      });
  // The kernel is latency-bound: ask ptxas for more resident blocks where
  // the registers the loads and queries hold (G query slices, kPages x 2
  // bound rows of E floats) leave room, and none where that would spill.
  int64_t held = G * E + 2 * kPages * E;
  if (held <= 48)
    KernelBuilder::launchBounds(fn, threads, 4);
  else if (held <= 64)
    KernelBuilder::launchBounds(fn, threads, 3);
  Value batch = memref::DimOp::create(b, loc, op.getQ(), 0);
  Value mp = memref::DimOp::create(b, loc, op.getScores(), 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, mp, arith::ConstantIndexOp::create(b, loc, perBlock));
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

/// The lane-group-per-token layout of score_tokens and score_sketch: grid
/// (token blocks, Hkv, B), `perBlock` lane groups of `lanes` lanes a block;
/// group `gid` of block x scores token t = x * perBlock + gid for the G
/// query heads of key/value head g, whose query slices it holds.
struct TokenLanes {
  Value t, inRange, inside, tt, lane, col, g, bb, scale;
  SmallVector<Value> qs;

  static TokenLanes of(GPUEmitter &e, const RowSplit &rs, int64_t perBlock,
                       int64_t G, Value q, Value lens, Value scores,
                       double scaleValue) {
    TokenLanes tl;
    LanePlace at = e.lanePlace(rs);
    tl.lane = at.lane;
    tl.col = at.col;
    tl.g = e.bid(gpu::Dimension::y);
    tl.bb = e.bid(gpu::Dimension::z);
    tl.t = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock)), at.group);
    Value n = e.loadIndex(lens, {tl.bb});
    tl.scale = e.f32(scaleValue);
    tl.qs = groupQueries(e, q, tl.bb, tl.g, G, tl.col, rs.elems,
                         vectorAlign(rs.elems * 4));
    // No branch around the group shuffles: out-of-range groups compute on
    // token 0 and do not store.
    tl.inRange = e.lt(tl.t, e.dim(scores, 2));
    tl.inside = e.band(tl.inRange, e.lt(tl.t, n));
    tl.tt = e.select(tl.inside, tl.t, e.idx(0));
    return tl;
  }
  /// Stores the group's G dot products: each query head's scaled score,
  /// or with `perGroup` their max in the key/value head's row (-inf past
  /// the context).
  void store(Emitter &e, Value scores, bool perGroup,
             ArrayRef<Value> dots) const {
    int64_t G = static_cast<int64_t>(dots.size());
    SmallVector<Value> vals;
    for (Value s : dots)
      vals.push_back(e.fmul(s, scale));
    if (perGroup)
      vals = {groupMax(e, vals)};
    e.ifThen(e.band(inRange, e.eq(lane, e.idx(0))), [&](Emitter &e) {
      for (auto [i, v] : llvm::enumerate(vals)) {
        Value row = perGroup ? g : e.add(e.mul(g, e.idx(G)), e.idx(i));
        e.store(e.select(inside, v, e.negInf()), scores, {bb, row, t});
      }
    });
  }
};

/// Launches a token-layout kernel over every token slot of `scores`:
/// `perBlock` tokens a block.
void launchTokens(OpBuilder &b, Location loc, gpu::GPUFuncOp fn, Value q,
                  Value scores, int64_t hkv, int64_t perBlock, int64_t threads,
                  ValueRange operands) {
  Value batch = memref::DimOp::create(b, loc, q, 0);
  Value nt = memref::DimOp::create(b, loc, scores, 2);
  Value blocks = arith::CeilDivSIOp::create(
      b, loc, nt, arith::ConstantIndexOp::create(b, loc, perBlock));
  launch(b, loc, fn, blocks, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         threads, operands);
}

void lowerScoreTokens(ScoreTokensOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), G = hq / hkv;
  int64_t p = staticDim(op.getKCache(), 2);
  Type kElt = elementType(op.getKCache());
  RowSplit rs = RowSplit::of(d, kElt);
  int64_t perBlock = std::max<int64_t>(1, 256 / rs.lanes);
  int64_t threads = perBlock * rs.lanes;
  int64_t align = vectorAlign(rs.elems * elementBytes(kElt));
  SmallVector<Value> operands{op.getQ(), op.getKCache(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value k = a[1], pt = a[2];
        Value first = e.mul(e.bid(gpu::Dimension::x), e.idx(perBlock));
        Value bb = e.bid(gpu::Dimension::z);
        ifInsideContext(
            e, e.lt(first, e.loadIndex(a[3], {bb})), [&](GPUEmitter &e) {
              TokenLanes tl =
                  TokenLanes::of(e, rs, perBlock, G, a[0], a[3], a[4],
                                 op.getScale().convertToDouble());
              Value page = e.loadIndex(pt, {tl.bb, e.divs(tl.tt, e.idx(p))});
              Value off = e.rems(tl.tt, e.idx(p));
              Value kr = e.toF32(
                  e.vecLoad(k, {page, tl.g, off, tl.col}, rs.elems, align));
              SmallVector<Value> dots;
              for (int64_t i = 0; i < G; ++i)
                dots.push_back(rowDot(e, nvvmTarget(), tl.qs[i], kr, rs.lanes));
              tl.store(e, a[4], op.scoresPerGroup(), dots);
            });
      });
  launchTokens(b, op.getLoc(), fn, op.getQ(), op.getScores(), hkv, perBlock,
               threads, operands);
}

/// Resident blocks per SM of a key-sketch scoring kernel of `threads`
/// threads: the sketch-occupancy option's warps (at least one block), or
/// `fallback` when it is 0.
int64_t sketchBlocks(const KernelBuilder &kb, int64_t threads,
                     int64_t fallback) {
  int64_t warps = kb.sketchOccupancy();
  if (warps == 0)
    return fallback;
  return std::max<int64_t>(1, warps * 32 / threads);
}

/// Whether score_sketch runs on tensor cores (lowerScoreSketchMma): a chip
/// with them, codes that bf16 holds exactly beside the implicit 1 (bits
/// <= 7: the ABI's 2 and 4), head_dim 64 or 128 (a lane's quarter of the
/// row in registers), pages of 64 and groups of 4 to 8 heads. The mma
/// kernel's work per page hardly depends on the group (its A operand, the
/// codes, is most of it), the CUDA-core kernel's grows with it (an fma per
/// code and head): on the H200 the mma kernel was faster with 7 heads a
/// group, even with 4 (half columns) and slower with 2 and 3
/// (docs/BENCHMARKS-HISTORY.md, "Sketch scoring on tensor cores";
/// reports/gpu/session22). Pages of 16 or 32 (one or two tiles for the
/// same B) were not measured and stay on CUDA cores; the kernel takes up
/// to 4 tiles (their accumulators in registers).
bool sketchOnTensorCores(const KernelBuilder &kb, int64_t bits, int64_t p,
                         int64_t d, int64_t G) {
  return kb.tensorCores() && bits <= 4 && p == 64 && (d == 64 || d == 128) &&
         G >= 4 && G <= 8;
}

/// score_sketch on tensor cores: a warp per (page, kv head), the page's
/// tokens the 16 rows of mma.sync.m16n8k16 tiles, 16 channels a k-step.
/// Lane l (r = l / 4, s = l % 4) holds channels 16 ks + 4 s + [0, 4) of
/// k-step ks of the A operand (v_c), the k order permuted so that they are
/// one 16-byte load: logical k 2s, 2s + 1 are channels 4s, 4s + 1 and
/// logical k 2s + 8, 2s + 9 are 4s + 2, 4s + 3. Its rows r and r + 8 of
/// tile t are tokens 8r + 2t and 8r + 2t + 1: the lane's eight tokens share
/// one word row, so a k-step is one load (reports/gpu/session23: eight
/// before, one token used of each word).
/// B column r (a_c, Sketch.h) is head r of the group, or for groups of 4
/// or less ("half columns") head r % 4 over channels 4s, 4s + 1 (r < 4) or
/// 4s + 2, 4s + 3 (r >= 4), the other two rows zero, so that a lane builds
/// two a_c instead of four and columns h and h + 4 add up to head h.
///  - the page's per-channel terms (lo_c, step_c 2^bits and the slack
///    weight e_c + gamma m_c) are computed once, d / 32 channels a lane,
///    into the warp's slice of shared memory, rather than by each of the 8
///    lanes that share a channel at every k-step;
///  - a_c = fl(q_c step_c 2^bits) becomes two bf16, its top 16 bits (one
///    permute packs two channels') and the rest rounded; v_c = 1 + code
///    2^-bits is exact in bf16 (0x3F80 | code << (7 - bits): a byte
///    permute, shared by the byte's two tokens, then a shift and one lop3),
///    so every product is exact in f32;
///  - two k-steps' four products a tile (mid before hi) are chained in the
///    mma addend from zero and then added to the tile's f32 sums: the
///    dropped third part and the tensor cores' own rounding are bounded per
///    chain (Sketch.h, kSketchMmaStepsChained);
///  - the page's constant (sum_c q_c lo_c - a_c plus the slack, each
///    channel's terms by two fma) and, for a page that is not full, its
///    box bound, are this lane's channels' partial sums added over the
///    lanes of a head;
///  - the first two k-steps' words are loaded before the page's box; each
///    iteration's second codes become A fragments first, then the next
///    pair's words are loaded (into the registers the codes held) before
///    its arithmetic, the query read where it is used; ptxas is asked for
///    4 blocks a SM (64 registers): a warp has one page, so only many
///    resident warps hide the loads (reports/gpu/session21/README.md, run4
///    and run5);
///  - each head's eight scores of a lane are two 16-byte stores where the
///    row is aligned (one by one otherwise).
void lowerScoreSketchMma(ScoreSketchOp op, OpBuilder &b,
                         const KernelBuilder &kb, StringRef name) {
  Location loc = op.getLoc();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize(), bits = op.getBits();
  int64_t perWord = ::condensate::abi::codesPerWord(bits);
  int64_t tiles = p / 16, steps = d / 16;
  constexpr int64_t kWarps = 8;
  constexpr int64_t kTermRows = 3; // lo_c, step_c 2^bits, slack weight
  // k-steps whose products a tile chains in one mma addend (Sketch.h).
  constexpr int64_t kStepsChained = kSketchMmaStepsChained;
  const int64_t cpl = d / kWarp;   // channels whose terms a lane computes
  // Groups of 4 or less take two B columns a head, each half of a k-step's
  // channels (the other half zero): a lane builds 2 of its a_c, not 4.
  const bool half = G <= 4;
  const int64_t cw = half ? 2 : 4; // channels of a lane's B column a k-step
  const int64_t threads = kWarps * kWarp;
  bool perGroup = op.scoresPerGroup();
  double scaleValue = op.getScale().convertToDouble();
  int64_t levels = (int64_t(1) << bits) - 1;
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  if (op.getWidths())
    operands.push_back(op.getWidths());
  // Per warp, its page's per-channel terms: lo_c, step_c 2^bits and the
  // slack weight, d floats each.
  SmallVector<Type> smem{KernelBuilder::workgroupType(
      op.getContext(), {kWarps * kTermRows * d}, b.getF32Type())};
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        Value widths = op.getWidths() ? a[5] : Value();
        const TargetInfo &target = nvvmTarget();
        Type i32 = e.builder().getI32Type(), f32 = e.builder().getF32Type();
        Type v4i32 = VectorType::get({4}, i32);
        Value tid = e.tid();
        Value warp = e.divs(tid, e.idx(kWarp));
        Value lane = e.rems(tid, e.idx(kWarp));
        Value r = e.divs(lane, e.idx(4)), s = e.rems(lane, e.idx(4));
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value j = e.add(e.mul(e.bid(gpu::Dimension::x), e.idx(kWarps)), warp);
        Value n = e.loadIndex(lens, {bb});
        Value nPages = e.ceilDiv(n, e.idx(p));
        Value nt = e.dim(scores, 2);
        // The warp's page holds context (uniform over the warp: no shuffle
        // below runs in part of it).
        e.ifThen(
            e.band(e.lt(j, nPages), e.lt(e.mul(j, e.idx(p)), nt)),
            [&](Emitter &ee) {
              GPUEmitter &e = static_cast<GPUEmitter &>(ee);
              Value page = e.loadIndex(pt, {bb, j});
              Value full = e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
              // This lane's B column r: head r of the group, or with half
              // columns head r % 4 and the first (r < 4) or second half of
              // this lane's four channels. Columns past the group repeat head
              // G - 1: an mma's columns are independent, and their scores are
              // never stored.
              Value head = half ? e.rems(r, e.idx(4)) : r;
              Value upper = e.ge(r, e.idx(4)); // half: the second two channels
              Value qRow =
                  e.add(e.mul(g, e.idx(G)), e.mins(head, e.idx(G - 1)));
              auto channel0 = [&](GPUEmitter &e, Value ks) {
                return e.add(e.mul(ks, e.idx(16)), e.mul(s, e.idx(4)));
              };
              // The channels of this lane's B column in k-step ks.
              auto columnChannel = [&](GPUEmitter &e, Value ks) {
                Value c0 = channel0(e, ks);
                return half ? e.add(c0, e.select(upper, e.idx(2), e.idx(0)))
                            : c0;
              };
              auto queryAt = [&](GPUEmitter &e, Value c0, int64_t width) {
                return e.vecLoad(q, {bb, qRow, c0}, width, 4 * width);
              };
              // The head's four lanes' partial sums, added (every lane of the
              // quad ends with head r's total).
              auto quadSum = [&](GPUEmitter &e, Value v) {
                return laneSum(e, target, v, 4);
              };
              // Lane r's tokens are the eight 8 r .. 8 r + 7 of the page, which
              // share a word row (a stretch of one with 2-bit codes): tile t's
              // row r is token 8 r + 2 t, its row r + 8 token 8 r + 2 t + 1.
              // A k-step's codes are then one 16-byte load a lane (the words
              // of its four channels), and one byte permute a channel pair
              // serves both rows of a tile.
              const int64_t tokensPerLane = 2 * tiles;
              assert(perWord % tokensPerLane == 0 && "bits <= 4");
              Value tokenBase = e.mul(r, e.idx(tokensPerLane));
              Value wordRow = e.add(e.idx(::condensate::abi::kSketchRow0),
                                    e.divs(tokenBase, e.idx(perWord)));
              // The bit offset of token 8 r in its word (2-bit codes: 0 or
              // 16), shifted out first so that every later offset is a
              // constant.
              Value preShift =
                  perWord > tokensPerLane
                      ? e.toI32(e.mul(e.rems(tokenBase, e.idx(perWord)),
                                      e.idx(bits)))
                      : Value();
              Value codeMask =
                  e.i32((levels << (7 - bits)) | (levels << (23 - bits)));
              Value oneOne = e.i32(0x3F803F80);
              auto permute = [&](GPUEmitter &e, Value x, Value y,
                                 int64_t selector) -> Value {
                return NVVM::PermuteOp::create(e.builder(), e.location(), i32,
                                               x, y, e.i32(selector),
                                               NVVM::PermuteMode::DEFAULT);
              };
              // The A fragments of every tile from the lane's four words:
              // register 2 k + h of tile t is token 8 r + 2 t + h over
              // channels 4 s + 2 k, 4 s + 2 k + 1, v = 1 + code 2^-bits as
              // bf16 (0x3F80 | code << (7 - bits)): the code's byte of both
              // words brought to bytes 0 and 2 by a permute (shared by the
              // tokens of one byte), shifted to the mantissa's top bits and
              // merged with 1.0 by one lop3.
              auto decode = [&](GPUEmitter &e, SmallVector<Value> w) {
                if (preShift)
                  for (Value &x : w)
                    x = arith::ShRUIOp::create(e.builder(), e.location(), x,
                                               preShift);
                std::map<std::pair<int64_t, int64_t>, Value> permuted;
                SmallVector<SmallVector<Value>> A(tiles, SmallVector<Value>(4));
                for (int64_t t = 0; t < tiles; ++t)
                  for (int64_t k = 0; k < 2; ++k)
                    for (int64_t h = 0; h < 2; ++h) {
                      int64_t bit = (2 * t + h) * bits;
                      int64_t byte = bit / 8, shift = (7 - bits) - bit % 8;
                      Value &x = permuted[{byte, k}];
                      if (!x)
                        x = permute(e, w[2 * k], w[2 * k + 1],
                                    byte | byte << 4 | (4 + byte) << 8 |
                                        (4 + byte) << 12);
                      Value y = x;
                      if (shift > 0)
                        y = arith::ShLIOp::create(e.builder(), e.location(), y,
                                                  e.i32(shift));
                      else if (shift < 0)
                        y = arith::ShRUIOp::create(e.builder(), e.location(), y,
                                                   e.i32(-shift));
                      A[t][2 * k + h] = lop3(e, y, codeMask, oneOne, 0xEA);
                    }
                return A;
              };
              // The B fragment's two registers of one bf16 part: with half
              // columns the lane's pair sits in the first register (k rows
              // 2s, 2s + 1: channels 4s, 4s + 1) or the second (4s + 2,
              // 4s + 3), the other zero.
              Value zeroPair = e.i32(0);
              auto placed = [&](GPUEmitter &e, SmallVector<Value> regs) {
                if (!half)
                  return regs;
                return SmallVector<Value>{e.select(upper, zeroPair, regs[0]),
                                          e.select(upper, regs[0], zeroPair)};
              };
              // a_c's two parts (Sketch.h): hi, its encoding's top 16 bits
              // (a permute packs two channels' at once), and mid, the rest
              // rounded to bf16.
              Value himask = e.splat(e.i32(-65536), cw); // 0xFFFF0000
              auto splitParts = [&](GPUEmitter &e, Value av) {
                Type vi = VectorType::get({cw}, i32);
                Value bitsOf =
                    arith::BitcastOp::create(e.builder(), e.location(), vi, av);
                Value top = arith::BitcastOp::create(e.builder(), e.location(),
                                                     VectorType::get({cw}, f32),
                                                     e.band(bitsOf, himask));
                Value rest = e.fsub(av, top);
                Type bf16 = e.builder().getBF16Type();
                SmallVector<Value> hiRegs, midRegs;
                for (int64_t i = 0; i < cw; i += 2) {
                  hiRegs.push_back(permute(e, e.extractElt(bitsOf, i),
                                           e.extractElt(bitsOf, i + 1),
                                           0x7632));
                  midRegs.push_back(
                      packBF16(e, e.truncf(e.extractElt(rest, i), bf16),
                               e.truncf(e.extractElt(rest, i + 1), bf16)));
                }
                return std::make_pair(placed(e, hiRegs), placed(e, midRegs));
              };
              // A k-step's loads ahead of use: the words of this lane's four
              // channels for its eight tokens. (The query, the same for every
              // page, is read where it is used: from L1, and without holding
              // registers across the step.)
              auto loadStep = [&](GPUEmitter &e, Value ks) {
                return SmallVector<Value>{
                    e.vecLoad(sum, {page, g, wordRow, channel0(e, ks)}, 4, 16)};
              };
              // Full page: per k-step the B fragments, then each tile's two
              // products; returns the tiles' 4 sums each and the constant.
              // Each pair of k-steps loads the next pair's words before its
              // second step's arithmetic.
              Value terms = sm[0];
              Value termBase = e.mul(warp, e.idx(kTermRows * d));
              auto termAt = [&](GPUEmitter &e, int64_t row, Value c0) {
                return e.add(termBase, e.add(e.idx(row * d), c0));
              };
              auto fullPage = [&](Emitter &ee) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                // Two k-steps an iteration (d / 16 is even): their four
                // products a tile chained in the mma's addend from zero, then
                // added to the tile's sums once (Sketch.h bounds the chain).
                static_assert(kStepsChained == 2, "one iteration a pair");
                assert(steps % kStepsChained == 0 && "d is 64 or 128");
                auto loadPair = [&](GPUEmitter &e, Value first) {
                  SmallVector<Value> v = loadStep(e, first);
                  llvm::append_range(v, loadStep(e, e.add(first, e.idx(1))));
                  return v;
                };
                // The first pair's loads go out before the terms' (they do
                // not depend on them): a warp has one page, and its first
                // words would otherwise wait for the box's round trip.
                SmallVector<Value> init(4 * tiles + 1, e.f32(0.0));
                llvm::append_range(init, loadPair(e, e.idx(0)));
                // The page's per-channel terms once (Sketch.h's sketchRow,
                // d / 32 channels a lane) instead of in each of the 8 lanes
                // that share a channel at every k-step.
                {
                  Value cp = e.mul(lane, e.idx(cpl));
                  Value lo =
                      e.vecLoad(sum, {page, g, e.idx(KMin), cp}, cpl, 4 * cpl);
                  Value hi =
                      e.vecLoad(sum, {page, g, e.idx(KMax), cp}, cpl, 4 * cpl);
                  SketchRow sk = sketchRow(e, {lo}, {hi}, bits, d);
                  Value rows[kTermRows] = {
                      lo,
                      e.fmul(sk.step[0],
                             e.splat(e.f32(double(int64_t(1) << bits)), cpl)),
                      sk.slack[0]};
                  for (int64_t i = 0; i < kTermRows; ++i)
                    vector::StoreOp::create(e.builder(), e.location(), rows[i],
                                            terms, ValueRange{termAt(e, i, cp)},
                                            /*nontemporal=*/false,
                                            llvm::MaybeAlign(4 * cpl));
                  e.syncWarp();
                  // Each head's page width, 2 scale sum_c |q_c| (e_c +
                  // gamma m_c), summed apart from the scores (which fold the
                  // slack into their constant).
                  if (widths)
                    for (int64_t i = 0; i < G; ++i) {
                      Value h = e.add(e.mul(g, e.idx(G)), e.idx(i));
                      Value qv = e.vecLoad(q, {bb, h, cp}, cpl, 4 * cpl);
                      Value aq =
                          math::AbsFOp::create(e.builder(), e.location(), qv);
                      Value tot =
                          laneSum(e, target,
                                  e.reduceAdd(e.fmul(aq, sk.slack[0])), kWarp);
                      e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
                        e.store(e.fmul(e.fadd(tot, tot), e.f32(scaleValue)),
                                widths, {bb, h, j});
                      });
                    }
                }
                int64_t nAcc = 4 * tiles + 1;
                SmallVector<Value> res = e.forLoop(
                    e.idx(0), e.idx(steps), e.idx(kStepsChained), init,
                    [&](Emitter &ee, Value ks0,
                        ValueRange it) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      SmallVector<SmallVector<Value>> dk(
                          tiles, SmallVector<Value>(4, e.f32(0.0)));
                      Value part = it[4 * tiles];
                      SmallVector<Value> next;
                      for (int64_t sub = 0; sub < kStepsChained; ++sub) {
                        Value ks = e.add(ks0, e.idx(sub));
                        // This step's codes as A fragments first: after the
                        // last step's, the words' registers are free for the
                        // next pair's, loaded before the arithmetic.
                        Value words = arith::BitcastOp::create(
                            e.builder(), e.location(), v4i32, it[nAcc + sub]);
                        SmallVector<Value> w;
                        for (int64_t i = 0; i < 4; ++i)
                          w.push_back(e.extractElt(words, i));
                        SmallVector<SmallVector<Value>> A = decode(e, w);
                        if (sub == kStepsChained - 1) {
                          Value after = e.add(ks0, e.idx(kStepsChained));
                          next = loadPair(e, e.select(e.lt(after, e.idx(steps)),
                                                      after, ks0));
                        }
                        Value c0 = columnChannel(e, ks);
                        Value qv = queryAt(e, c0, cw);
                        auto term = [&](int64_t row) {
                          return e.vecLoad(terms, {termAt(e, row, c0)}, cw,
                                           4 * cw);
                        };
                        Value lo = term(0), bigStep = term(1), slack = term(2);
                        // a_c = fl(q_c step_c 2^bits) (Sketch.h: the same as
                        // fl(q_c step_c) 2^bits barring underflow); this
                        // lane's part of the constant, per channel
                        // q_c lo_c - a_c + |q_c| (e_c + gamma m_c), each with
                        // fewer roundings than the separate products.
                        Value av = e.fmul(qv, bigStep);
                        part = e.fadd(
                            part,
                            e.reduceAdd(e.fma(
                                math::AbsFOp::create(e.builder(), e.location(),
                                                     qv),
                                slack,
                                e.fma(qv, lo,
                                      arith::NegFOp::create(
                                          e.builder(), e.location(), av)))));
                        auto [bHi, bMid] = splitParts(e, av);
                        // The small part first (Sketch.h's bound counts an
                        // mma's addend, the chain so far).
                        for (int64_t t = 0; t < tiles; ++t) {
                          dk[t] = mmaBF16(e, A[t], bMid, dk[t]);
                          dk[t] = mmaBF16(e, A[t], bHi, dk[t]);
                        }
                      }
                      SmallVector<Value> out;
                      for (int64_t t = 0; t < tiles; ++t)
                        for (int64_t i = 0; i < 4; ++i)
                          out.push_back(e.fadd(it[4 * t + i], dk[t][i]));
                      out.push_back(part);
                      llvm::append_range(out, next);
                      return out;
                    });
                res.resize(nAcc);
                res.back() = quadSum(e, res.back());
                if (half) {
                  // Head h's sums are columns h and h + 4: lanes s and s ^ 2
                  // hold them; its constant's halves lanes r and r ^ 4.
                  for (int64_t i = 0; i + 1 < nAcc; ++i)
                    res[i] = e.fadd(res[i], e.shuffleXor(res[i], 2));
                  res.back() = e.fadd(res.back(), e.shuffleXor(res.back(), 16));
                }
                return res;
              };
              // A page that is not full has no sketch: its box bound (and no
              // lower bound: an infinite width).
              auto partialPage = [&](Emitter &ee) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                if (widths)
                  e.ifThen(e.eq(lane, e.idx(0)), [&](Emitter &e) {
                    for (int64_t i = 0; i < G; ++i)
                      e.store(e.f32(std::numeric_limits<double>::infinity()),
                              widths,
                              {bb, e.add(e.mul(g, e.idx(G)), e.idx(i)), j});
                  });
                SmallVector<Value> box = e.forLoop(
                    e.idx(0), e.idx(steps), e.idx(1), {e.f32(0.0)},
                    [&](Emitter &ee, Value ks,
                        ValueRange it) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      Value c0 = channel0(e, ks);
                      Value lo =
                          e.vecLoad(sum, {page, g, e.idx(KMin), c0}, 4, 16);
                      Value hi =
                          e.vecLoad(sum, {page, g, e.idx(KMax), c0}, 4, 16);
                      return {e.fadd(it[0],
                                     rowBoxDot(e, target, {queryAt(e, c0, 4)},
                                               {lo}, {hi}, 1))};
                    });
                SmallVector<Value> out(4 * tiles, e.f32(0.0));
                out.push_back(quadSum(e, box[0]));
                return out;
              };
              SmallVector<Type> types(4 * tiles + 1, f32);
              SmallVector<Value> res =
                  e.ifElse(full, types, fullPage, partialPage);
              // Lane (r, s) holds tokens 8 r + m (m = 2 t + h: tile t's
              // sums 2 h and 2 h + 1) for heads 2s and 2s + 1 (half columns:
              // 2 (s % 2) and 2 (s % 2) + 1, stored by lanes s < 2); their
              // constants come from those heads' lanes.
              Value h0 = e.mul(half ? e.rems(s, e.idx(2)) : s, e.idx(2));
              Value h1 = e.add(h0, e.idx(1));
              Value cst0 = e.shuffleIdx(res.back(), e.mul(h0, e.idx(4)));
              Value cst1 = e.shuffleIdx(res.back(), e.mul(h1, e.idx(4)));
              Value scale = e.f32(scaleValue);
              Value ok0 = e.lt(h0, e.idx(G)), ok1 = e.lt(h1, e.idx(G));
              if (half) {
                ok0 = e.band(ok0, e.lt(s, e.idx(2)));
                ok1 = e.band(ok1, e.lt(s, e.idx(2)));
              }
              Value tok0 = e.add(e.mul(j, e.idx(p)), tokenBase);
              SmallVector<Value> v0s, v1s;
              for (int64_t m = 0; m < tokensPerLane; ++m) {
                Value inside = e.lt(e.add(tok0, e.idx(m)), n);
                auto value = [&](Value acc, Value cst) {
                  return e.select(inside, e.fmul(e.fadd(acc, cst), scale),
                                  e.negInf());
                };
                int64_t at = 4 * (m / 2) + 2 * (m % 2);
                v0s.push_back(value(res[at], cst0));
                v1s.push_back(value(res[at + 1], cst1));
              }
              // A row's eight tokens as two 16-byte stores where the scores
              // allow (aligned rows, all eight inside the width), else one
              // by one.
              Value base = memref::ExtractAlignedPointerAsIndexOp::create(
                  e.builder(), e.location(), scores);
              Value whole =
                  e.band(e.band(e.eq(e.rems(base, e.idx(16)), e.idx(0)),
                                e.eq(e.rems(nt, e.idx(4)), e.idx(0))),
                         e.le(e.add(tok0, e.idx(tokensPerLane)), nt));
              auto storeRow = [&](Emitter &e, Value row, ArrayRef<Value> v) {
                e.ifThen(whole, [&](Emitter &e) {
                  for (int64_t m0 = 0; m0 < tokensPerLane; m0 += 4) {
                    Value four = vector::FromElementsOp::create(
                        e.builder(), e.location(), VectorType::get({4}, f32),
                        v.slice(m0, 4));
                    vector::StoreOp::create(
                        e.builder(), e.location(), four, scores,
                        ValueRange{bb, row, e.add(tok0, e.idx(m0))},
                        /*nontemporal=*/false, llvm::MaybeAlign(16));
                  }
                });
                e.ifThen(e.bnot(whole), [&](Emitter &e) {
                  for (int64_t m = 0; m < tokensPerLane; ++m) {
                    Value tok = e.add(tok0, e.idx(m));
                    e.ifThen(e.lt(tok, nt), [&](Emitter &e) {
                      e.store(v[m], scores, {bb, row, tok});
                    });
                  }
                });
              };
              if (perGroup) {
                SmallVector<Value> best;
                for (int64_t m = 0; m < tokensPerLane; ++m)
                  best.push_back(
                      laneMax(e, target,
                              e.fmax(e.select(ok0, v0s[m], e.negInf()),
                                     e.select(ok1, v1s[m], e.negInf())),
                              4));
                e.ifThen(e.eq(s, e.idx(0)),
                         [&](Emitter &e) { storeRow(e, g, best); });
                return;
              }
              Value row0 = e.add(e.mul(g, e.idx(G)), h0);
              e.ifThen(ok0, [&](Emitter &e) { storeRow(e, row0, v0s); });
              e.ifThen(ok1, [&](Emitter &e) {
                storeRow(e, e.add(row0, e.idx(1)), v1s);
              });
            });
      });
  // 32 resident warps (64 registers a thread) unless sketch-occupancy says.
  KernelBuilder::launchBounds(fn, threads,
                              sketchBlocks(kb, threads, 1024 / threads));
  launchTokens(b, loc, fn, op.getQ(), op.getScores(), hkv, p * kWarps, threads,
               operands);
}

void lowerScoreSketch(ScoreSketchOp op, OpBuilder &b, const KernelBuilder &kb,
                      StringRef name) {
  {
    int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
    int64_t G = hq / staticDim(op.getSummaries(), 1);
    if (sketchOnTensorCores(kb, op.getBits(), op.getPageSize(), d, G))
      return lowerScoreSketchMma(op, b, kb, name);
  }
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getSummaries(), 1), G = hq / hkv;
  int64_t p = op.getPageSize(), bits = op.getBits();
  RowSplit rs = RowSplit::of(d, b.getF32Type());
  int64_t L = rs.lanes, E = rs.elems;
  int64_t align = vectorAlign(E * 4);
  int64_t perWord = ::condensate::abi::codesPerWord(bits);
  int64_t used = std::min(perWord, p);
  int64_t rows = ::condensate::abi::sketchRows(p, bits);
  // Query heads scored per pass (Gh): the whole group where one page's a_c
  // for all of them fit in shared memory, else the largest divisor of G
  // that does; each further pass re-reads the words (from L2).
  // Static shared memory a block's terms may take (under the 48 KB every
  // chip allows without opting in).
  constexpr int64_t kTermBytes = 40 * 1024;
  auto fits = [&](int64_t h) { return (d * h + 4 + 2 * h) * 4 <= kTermBytes; };
  int64_t Gh = 1;
  for (int64_t h = G; h >= 1; --h)
    if (G % h == 0 && fits(h)) {
      Gh = h;
      break;
    }
  int64_t passes = G / Gh;
  bool perGroup = op.scoresPerGroup();
  // A lane scores `tpl` tokens of one word row for the pass's Gh query
  // heads (tpl x Gh accumulators, at most 16 where Gh allows); `parts`
  // lanes share a row. 16 rather than 32 lets 4 blocks share an SM at 64
  // registers a thread instead of 3 at 80: the kernel waits on shared
  // memory (the broadcast a_c), and the extra warps hide it. On the H200
  // (dummy Llama-3-8B, 32K x 8) the sketch step fell from 14.08 to
  // 13.38 ms; at Llama-3.2-1B's 64 channels it was even (4.38, 4.36).
  constexpr int64_t kMaxAccumulators = 16;
  int64_t tpl = 1;
  while (used % (2 * tpl) == 0 && 2 * tpl * Gh <= kMaxAccumulators)
    tpl *= 2;
  int64_t parts = used / tpl, lanesPerPage = rows * parts;
  // A block scores `pages` neighbouring page slots. Per page, shared memory
  // holds a_c = q_c step_c 2^bits for every channel and query head (the
  // lanes of the page read them by broadcast), the head's constant term
  // (sum_c q_c lo_c - a_c, plus the slack) and its page box bound.
  // a_c is kept [page][head][channel], a page's block padded by 4 floats so
  // that the pages a warp reads at once start in different banks.
  int64_t pageStride = d * Gh + 4;
  int64_t pageFloats = pageStride + 2 * Gh;
  int64_t pages = std::max<int64_t>(1, 256 / lanesPerPage);
  while (pages > 1 && pages * pageFloats * 4 > kTermBytes)
    pages /= 2;
  int64_t items = pages * lanesPerPage;
  int64_t threads = std::min<int64_t>(256, (items + kWarp - 1) / kWarp * kWarp);
  threads = std::max<int64_t>(threads, L);
  int64_t groups = threads / L;
  // Channels whose words a lane loads at once (16-byte vectors), the next
  // chunk's loads issued before the current chunk's arithmetic.
  int64_t vec = d % 4 == 0 ? 4 : 1;
  int64_t chunk = d % (2 * vec) == 0 ? 2 * vec : vec;
  double scaleValue = op.getScale().convertToDouble();
  Type f32 = b.getF32Type();
  SmallVector<Type> smem{
      KernelBuilder::workgroupType(ctx, {pages * pageStride}, f32), // a_c
      KernelBuilder::workgroupType(ctx, {pages * Gh}, f32),         // constant
      KernelBuilder::workgroupType(ctx, {pages * Gh}, f32)};        // box
  SmallVector<Value> operands{op.getQ(), op.getSummaries(), op.getPageTable(),
                              op.getLens(), op.getScores()};
  if (op.getWidths())
    operands.push_back(op.getWidths());
  auto fn = kb.createKernel(
      name, operands, smem, [&](GPUEmitter &e, ValueRange a, ValueRange sm) {
        Value q = a[0], sum = a[1], pt = a[2], lens = a[3], scores = a[4];
        Value widths = op.getWidths() ? a[5] : Value();
        Value aHat = sm[0], constant = sm[1], boxes = sm[2];
        const TargetInfo &target = nvvmTarget();
        Value g = e.bid(gpu::Dimension::y), bb = e.bid(gpu::Dimension::z);
        Value blockFirst = e.mul(e.bid(gpu::Dimension::x), e.idx(pages));
        Value nt = e.dim(scores, 2);
        Value n = e.loadIndex(lens, {bb});
        Value nPages = e.ceilDiv(n, e.idx(p));
        Value scale = e.f32(scaleValue);
        // The tpl x Gh accumulators of one lane over the d channels of its
        // word row of (full) page slot j: acc += a_c v_c, v_c the biased
        // code (Sketch.h), a chunk of channels at a time.
        auto sketchTokens = [&](GPUEmitter &e, Value j, Value pp, Value r,
                                Value part,
                                ArrayRef<Value> init) -> SmallVector<Value> {
          Value page = e.loadIndex(pt, {bb, j});
          Value rowIdx = e.add(e.idx(::condensate::abi::kSketchRow0), r);
          auto loadChunk = [&](GPUEmitter &e, Value c0) {
            SmallVector<Value> v;
            for (int64_t k = 0; k < chunk / vec; ++k)
              v.push_back(
                  e.vecLoad(sum, {page, g, rowIdx, e.add(c0, e.idx(k * vec))},
                            vec, 4 * vec));
            return v;
          };
          int64_t nChunks = d / chunk, nAcc = tpl * Gh;
          SmallVector<Value> inits(init.begin(), init.end());
          llvm::append_range(inits, loadChunk(e, e.idx(0)));
          Type i32 = e.builder().getI32Type();
          Value partShift =
              parts > 1 ? e.toI32(e.mul(part, e.idx(tpl * bits))) : Value();
          SmallVector<Value> res = e.forLoop(
              e.idx(0), e.idx(nChunks), e.idx(1), inits,
              [&](Emitter &ee, Value ci, ValueRange it) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value c0 = e.mul(ci, e.idx(chunk));
                Value more = e.lt(e.add(ci, e.idx(1)), e.idx(nChunks));
                SmallVector<Value> next =
                    loadChunk(e, e.select(more, e.add(c0, e.idx(chunk)), c0));
                SmallVector<Value> acc(it.begin(), it.begin() + nAcc);
                for (int64_t k = 0; k < chunk / vec; ++k) {
                  // a_c of these vec channels for every head: broadcast
                  // reads (a page's lanes read the same address).
                  SmallVector<Value> aVec;
                  for (int64_t i = 0; i < Gh; ++i)
                    aVec.push_back(e.vecLoad(
                        aHat,
                        {e.add(e.mul(pp, e.idx(pageStride)),
                               e.add(e.idx(i * d), e.add(c0, e.idx(k * vec))))},
                        vec, 4 * vec));
                  Value words = it[nAcc + k];
                  Type wt = VectorType::get({vec}, i32);
                  words = arith::BitcastOp::create(e.builder(), e.location(),
                                                   wt, words);
                  if (partShift)
                    words =
                        arith::ShRUIOp::create(e.builder(), e.location(), words,
                                               e.splat(partShift, vec));
                  for (int64_t m = 0; m < vec; ++m) {
                    Value word = e.extractElt(words, m);
                    SmallVector<Value> ah;
                    for (int64_t i = 0; i < Gh; ++i)
                      ah.push_back(e.extractElt(aVec[i], m));
                    for (int64_t s = 0; s < tpl; ++s) {
                      Value v = sketchBiasedCode(e, word, s * bits, bits);
                      for (int64_t i = 0; i < Gh; ++i)
                        acc[s * Gh + i] = e.fma(ah[i], v, acc[s * Gh + i]);
                    }
                  }
                }
                llvm::append_range(acc, next);
                return acc;
              });
          res.resize(nAcc);
          return res;
        };
        // One pass: query heads [hb, hb + Gh) of the group.
        auto pass = [&](GPUEmitter &e, Value hb) {
          // Per page, a lane group of L lanes: the box, a_c, the
          // constant term and the slack. A page past the context is
          // computed on page slot 0; nothing reads its terms.
          LanePlace at = e.lanePlace(rs);
          Value col = at.col;
          SmallVector<Value> qs =
              groupQueries(e, q, bb, g, G, col, E, align, hb, Gh);
          Value scaleBits = e.splat(e.f32(double(1 << bits)), E);
          // The same trip count for every group of a warp: the
          // shuffles below take the whole warp.
          int64_t rounds = (pages + groups - 1) / groups;
          e.forLoop(
              e.idx(0), e.idx(rounds), e.idx(1), {},
              [&](Emitter &ee, Value round, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value slotPage = e.add(e.mul(round, e.idx(groups)), at.group);
                Value valid = e.lt(slotPage, e.idx(pages));
                Value pp = e.select(valid, slotPage, e.idx(0));
                Value j = e.add(blockFirst, pp);
                Value inside = e.lt(j, nPages);
                Value page = e.select(
                    inside,
                    e.loadIndex(pt, {bb, e.select(inside, j, e.idx(0))}),
                    e.idx(0));
                Value lo =
                    e.vecLoad(sum, {page, g, e.idx(KMin), col}, E, align);
                Value hi =
                    e.vecLoad(sum, {page, g, e.idx(KMax), col}, E, align);
                SketchRow sk = sketchRow(e, {lo}, {hi}, bits, d);
                for (int64_t i = 0; i < Gh; ++i) {
                  Value box = rowBoxDot(e, target, {qs[i]}, {lo}, {hi}, L);
                  Value slack = sketchSlack(e, target, {qs[i]}, sk, L);
                  Value ai = e.fmul(e.fmul(qs[i], sk.step[0]), scaleBits);
                  Value base = laneSum(
                      e, target, e.reduceAdd(e.fsub(e.fmul(qs[i], lo), ai)), L);
                  Value slot = e.add(e.mul(pp, e.idx(Gh)), e.idx(i));
                  e.ifThen(valid, [&](Emitter &e) {
                    vector::StoreOp::create(
                        e.builder(), e.location(), ai, aHat,
                        ValueRange{e.add(e.mul(pp, e.idx(pageStride)),
                                         e.add(e.idx(i * d), col))},
                        /*nontemporal=*/false, llvm::MaybeAlign(align));
                    e.ifThen(e.eq(at.lane, e.idx(0)), [&](Emitter &e) {
                      e.store(e.fadd(base, slack), constant, {slot});
                      e.store(box, boxes, {slot});
                    });
                    // The page's width for each head (+inf for a page
                    // still filling: no lower bound from its box).
                    if (widths)
                      e.ifThen(
                          e.band(inside, e.eq(at.lane, e.idx(0))),
                          [&](Emitter &e) {
                            Value full =
                                e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
                            Value width = e.select(
                                full, e.fmul(e.fadd(slack, slack), scale),
                                e.f32(std::numeric_limits<double>::infinity()));
                            Value h =
                                e.add(e.mul(g, e.idx(G)), e.add(hb, e.idx(i)));
                            e.store(width, widths, {bb, h, j});
                          });
                  });
                }
                return {};
              });
          e.barrier();
          // A lane per (page, word row, part): tpl tokens, Gh heads.
          e.forLoop(
              e.tid(), e.idx(items), e.idx(threads), {},
              [&](Emitter &ee, Value item, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                Value pp = e.divs(item, e.idx(lanesPerPage));
                Value w = e.rems(item, e.idx(lanesPerPage));
                Value r = e.divs(w, e.idx(parts));
                Value part = e.rems(w, e.idx(parts));
                Value j = e.add(blockFirst, pp);
                Value full = e.le(e.mul(e.add(j, e.idx(1)), e.idx(p)), n);
                SmallVector<Value> init;
                for (int64_t s = 0; s < tpl; ++s)
                  for (int64_t i = 0; i < Gh; ++i)
                    init.push_back(e.load(
                        constant, {e.add(e.mul(pp, e.idx(Gh)), e.idx(i))}));
                SmallVector<Type> accTypes(tpl * Gh, f32);
                SmallVector<Value> acc = e.ifElse(
                    full, accTypes,
                    [&](Emitter &ee) -> SmallVector<Value> {
                      GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                      return sketchTokens(e, j, pp, r, part, init);
                    },
                    [&](Emitter &e) -> SmallVector<Value> {
                      SmallVector<Value> out;
                      for (int64_t s = 0; s < tpl; ++s)
                        for (int64_t i = 0; i < Gh; ++i)
                          out.push_back(e.load(
                              boxes, {e.add(e.mul(pp, e.idx(Gh)), e.idx(i))}));
                      return out;
                    });
                // The lane's tpl tokens are consecutive: where whole
                // 16-byte groups of them fall inside the row, they are
                // stored as vectors (full sectors, not tpl partial
                // ones); otherwise token by token.
                Value off0 =
                    e.add(e.mul(r, e.idx(perWord)), e.mul(part, e.idx(tpl)));
                Value t0 = e.add(e.mul(j, e.idx(p)), off0);
                // The rows this lane writes and their tpl values: each
                // query head's, or per group the heads' max (merged with
                // the earlier passes' in the row).
                SmallVector<Value> rows;
                SmallVector<SmallVector<Value>> vals;
                for (int64_t i = 0; i < Gh; ++i)
                  rows.push_back(
                      e.add(e.mul(g, e.idx(G)), e.add(hb, e.idx(i))));
                vals.resize(Gh);
                for (int64_t s = 0; s < tpl; ++s) {
                  Value inside = e.lt(e.add(t0, e.idx(s)), n);
                  for (int64_t i = 0; i < Gh; ++i)
                    vals[i].push_back(e.select(
                        inside, e.fmul(acc[s * Gh + i], scale), e.negInf()));
                }
                if (perGroup) {
                  SmallVector<Value> best;
                  for (int64_t s = 0; s < tpl; ++s) {
                    SmallVector<Value> heads;
                    for (int64_t i = 0; i < Gh; ++i)
                      heads.push_back(vals[i][s]);
                    best.push_back(groupMax(e, heads));
                  }
                  rows = {g};
                  vals = {best};
                }
                // v, or (per group, after the first pass) its max with the
                // row's value at `at`.
                auto merged = [&](Emitter &e, Value v, ValueRange at) -> Value {
                  if (!perGroup || passes == 1)
                    return v;
                  return e.ifElse(
                      e.eq(hb, e.idx(0)), {v.getType()},
                      [&](Emitter &) -> SmallVector<Value> { return {v}; },
                      [&](Emitter &e) -> SmallVector<Value> {
                        Value old =
                            isa<VectorType>(v.getType())
                                ? vector::LoadOp::create(
                                      e.builder(), e.location(), v.getType(),
                                      scores, at, /*nontemporal=*/false,
                                      llvm::MaybeAlign(16))
                                      .getResult()
                                : e.load(scores, at);
                        return {e.fmax(old, v)};
                      })[0];
                };
                auto storeScalars = [&](Emitter &e) {
                  for (int64_t s = 0; s < tpl; ++s) {
                    Value off = e.add(off0, e.idx(s));
                    Value t = e.add(t0, e.idx(s));
                    e.ifThen(e.band(e.lt(off, e.idx(p)), e.lt(t, nt)),
                             [&](Emitter &e) {
                               for (auto [row, v] : llvm::zip(rows, vals)) {
                                 SmallVector<Value> at{bb, row, t};
                                 e.store(merged(e, v[s], at), scores, at);
                               }
                             });
                  }
                };
                bool vectorRows = tpl % 4 == 0 && p % 4 == 0;
                if (!vectorRows) {
                  storeScalars(e);
                  return {};
                }
                Value base = memref::ExtractAlignedPointerAsIndexOp::create(
                    e.builder(), e.location(), scores);
                Value aligned = e.eq(e.rems(base, e.idx(16)), e.idx(0));
                Value whole = e.band(
                    e.band(aligned, e.eq(e.rems(nt, e.idx(4)), e.idx(0))),
                    e.band(e.le(e.add(off0, e.idx(tpl)), e.idx(p)),
                           e.le(e.add(t0, e.idx(tpl)), nt)));
                e.ifThen(whole, [&](Emitter &ee) {
                  GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                  for (auto [row, v] : llvm::zip(rows, vals))
                    for (int64_t s0 = 0; s0 < tpl; s0 += 4) {
                      Value four = vector::FromElementsOp::create(
                          e.builder(), e.location(), VectorType::get({4}, f32),
                          ArrayRef<Value>(v).slice(s0, 4));
                      SmallVector<Value> at{bb, row, e.add(t0, e.idx(s0))};
                      vector::StoreOp::create(e.builder(), e.location(),
                                              merged(e, four, at), scores, at,
                                              /*nontemporal=*/false,
                                              llvm::MaybeAlign(16));
                    }
                });
                e.ifThen(e.bnot(whole), storeScalars);
                return {};
              });
        };
        ifInsideContext(e, e.lt(blockFirst, nPages), [&](GPUEmitter &e) {
          if (passes == 1) {
            pass(e, e.idx(0));
            return;
          }
          e.forLoop(
              e.idx(0), e.idx(passes), e.idx(1), {},
              [&](Emitter &ee, Value hc, ValueRange) -> SmallVector<Value> {
                GPUEmitter &e = static_cast<GPUEmitter &>(ee);
                pass(e, e.mul(hc, e.idx(Gh)));
                // The next pass overwrites the shared terms.
                e.barrier();
                return {};
              });
        });
      });
  // Half the SM's threads resident (64 registers a thread) where the
  // accumulators and one chunk's words and a_c leave room, unless
  // sketch-occupancy says.
  if (kb.sketchOccupancy() > 0 || tpl * Gh + 2 * chunk + Gh * vec <= 48)
    KernelBuilder::launchBounds(
        fn, threads,
        sketchBlocks(kb, threads, std::max<int64_t>(1, 1024 / threads)));
  launchTokens(b, loc, fn, op.getQ(), op.getScores(), hkv, p * pages, threads,
               operands);
}

} // namespace

void mlir::condensate::populateScoreToGPUPatterns(RewritePatternSet &patterns,
                                                  gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<ScorePagesOp, lowerScorePages>>(ctx, kernels,
                                                             "score_pages");
  patterns.add<KernelPattern<ScoreTokensOp, lowerScoreTokens>>(ctx, kernels,
                                                               "score_tokens");
  patterns.add<KernelPattern<ScoreSketchOp, lowerScoreSketch>>(ctx, kernels,
                                                               "score_sketch");
}
