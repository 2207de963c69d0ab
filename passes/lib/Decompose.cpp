//===- Decompose.cpp - decode attention into stages -----------------------===//
//
// Implements condensate-decompose: a specialised decode attention becomes
// scoring, selection, sparse attention, certificate, dense fallback and merge
// stages over scratch buffers.
//
//===----------------------------------------------------------------------===//
#include "condensate/ABI/Limits.h"
#include "condensate/Passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace mlir::condensate {
#define GEN_PASS_DEF_CONDENSATEDECOMPOSE
#include "condensate/Passes/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

/// A maximal run of key/value heads [begin, end) that share one policy.
struct HeadRun {
  int64_t begin, end;
  Attribute policy;
};

SmallVector<HeadRun> headRuns(DecodeAttentionOp op, int64_t numKVHeads) {
  SmallVector<HeadRun> runs;
  for (int64_t g = 0; g < numKVHeads; ++g) {
    Attribute policy = op.getPolicyForHead(g);
    if (!runs.empty() && runs.back().policy == policy)
      runs.back().end = g + 1;
    else
      runs.push_back({g, g + 1, policy});
  }
  return runs;
}

/// Builds the stages of one decode attention.
class Decomposer {
public:
  Decomposer(DecodeAttentionOp op, int64_t denseSplits)
      : op(op), spec(op.getSpecAttr()), b(op), loc(op.getLoc()),
        denseSplits(denseSplits) {}

  void run() {
    batch = dim(op.getQ(), 0);
    maxPages = dim(op.getPageTable(), 1);
    for (const HeadRun &run : headRuns(op, spec.getKvHeads()))
      emitRun(run);
    for (Value buffer : scratch)
      memref::DeallocOp::create(b, loc, buffer);
    op.erase();
  }

private:
  Value dim(Value memref, int64_t i) {
    return memref::DimOp::create(b, loc, memref, i);
  }
  Value index(int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }

  /// A scratch buffer of `shape` (kDynamic entries take `dynSizes` in order).
  Value alloc(ArrayRef<int64_t> shape, Type elt, ValueRange dynSizes) {
    auto type = MemRefType::get(shape, elt);
    Value buffer = memref::AllocOp::create(b, loc, type, dynSizes);
    scratch.push_back(buffer);
    return buffer;
  }

  /// The slice of heads [begin, end) of `value` along dimension `headDim`
  /// (scaled by `perHead` rows per key/value head); the value itself when
  /// the run covers every head.
  Value sliceHeads(Value value, int64_t headDim, int64_t begin, int64_t end,
                   int64_t perHead) {
    if (!value)
      return value;
    auto type = cast<MemRefType>(value.getType());
    int64_t total = type.getDimSize(headDim);
    if (begin == 0 && end * perHead == total)
      return value;
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t i = 0; i < type.getRank(); ++i) {
      strides.push_back(b.getIndexAttr(1));
      if (i == headDim) {
        offsets.push_back(b.getIndexAttr(begin * perHead));
        sizes.push_back(b.getIndexAttr((end - begin) * perHead));
      } else if (ShapedType::isDynamic(type.getDimSize(i))) {
        offsets.push_back(b.getIndexAttr(0));
        sizes.push_back(dim(value, i));
      } else {
        offsets.push_back(b.getIndexAttr(0));
        sizes.push_back(b.getIndexAttr(type.getDimSize(i)));
      }
    }
    return memref::SubViewOp::create(b, loc, value, offsets, sizes, strides);
  }

  void emitRun(const HeadRun &run) {
    int64_t group = spec.getGroup();
    int64_t hq = (run.end - run.begin) * group;
    int64_t hkv = run.end - run.begin;
    q = sliceHeads(op.getQ(), 1, run.begin, run.end, group);
    k = sliceHeads(op.getKCache(), 1, run.begin, run.end, 1);
    v = sliceHeads(op.getVCache(), 1, run.begin, run.end, 1);
    summaries = sliceHeads(op.getSummaries(), 1, run.begin, run.end, 1);
    out = sliceHeads(op.getOut(), 1, run.begin, run.end, group);
    stats = sliceHeads(op.getStats(), 1, run.begin, run.end, group);
    runQHeads = hq;
    runKVHeads = hkv;
    minMaxBounds = Value();
    if (auto policy = dyn_cast<PolicyAttr>(run.policy))
      emitSparse(policy);
    else
      emitDense();
  }

  int64_t numDenseSplits() {
    return denseSplits > 0 ? denseSplits
                           : chooseDenseSplits(spec.getTarget(), runKVHeads);
  }

  /// Dense partials over the whole context; `mask` limits the heads.
  std::pair<Value, Value> emitDenseAttend(Value mask) {
    int64_t s = numDenseSplits();
    int64_t d = spec.getHeadDim();
    int64_t dyn = ShapedType::kDynamic;
    Value po = alloc({dyn, runQHeads, s, d}, b.getF32Type(), {batch});
    Value pml = alloc({dyn, runQHeads, s, kPartialMLWidth}, b.getF32Type(),
                      {batch});
    DenseAttendOp::create(b, loc, q, k, v, op.getPageTable(), op.getLens(),
                          mask, po, pml, op.getScaleAttr());
    return {po, pml};
  }

  void emitDense() {
    auto [po, pml] = emitDenseAttend(Value());
    MergeOp::create(b, loc, ValueRange{po, pml}, Value(), ValueRange{}, out,
                    stats, Value(), b.getF32FloatAttr(0.0f));
  }

  void emitSparse(PolicyAttr policy) {
    auto gran = GranularityAttr::get(b.getContext(), policy.getGranularity());
    int64_t unit = policy.getUnitTokens();
    int64_t topUnits = policy.getTopUnits(), extra = policy.getMaxExtra();
    int64_t p = spec.getPageSize(), d = spec.getHeadDim();
    int64_t dyn = ShapedType::kDynamic;
    Type f32 = b.getF32Type(), i32 = b.getI32Type();
    Value windows = policy.isAdaptive() ? op.getWindows() : Value();
    auto anchor = b.getI64IntegerAttr(policy.getAnchor());
    auto window = b.getI64IntegerAttr(policy.getWindow());
    auto windowMax = b.getI64IntegerAttr(policy.getWindowMax());
    auto pageSize = b.getI64IntegerAttr(p);
    bool certified = policy.isCertified();

    // Scores: needed by top-k and by the certificate. An uncertified policy
    // reports eps_hat as NaN (not computed) rather than paying for it.
    bool wantScores = policy.needsScores();
    Value scores, widths;
    if (wantScores) {
      if (policy.getGranularity() == Granularity::page) {
        scores = alloc({dyn, runQHeads, dyn}, f32, {batch, maxPages});
        ScorePagesOp::create(b, loc,
                             SelectorAttr::get(b.getContext(),
                                               policy.getSelector()), q, summaries,
                             op.getPageTable(), op.getLens(), scores,
                             pageSize, op.getScaleAttr());
      } else {
        Value tokens = arith::MulIOp::create(b, loc, maxPages, index(p));
        // Top-k alone ranks by each group's max: one row per key/value
        // head (1/G of the bytes written and read). The certificate bounds
        // every query head, so it takes every head's row.
        int64_t rows = certified ? runQHeads : runKVHeads;
        scores = alloc({dyn, rows, dyn}, f32, {batch, tokens});
        // Sketch scores are upper bounds, so they also serve the
        // certificate; exact logits are their own bounds.
        // With extras to walk, a certified sketch policy also takes the
        // lower bounds of the extras it adds into Z: score_sketch writes
        // each page's interval width for certify.
        if (policy.takesExtrasLowerBounds())
          widths = alloc({dyn, runQHeads, dyn}, f32, {batch, maxPages});
        if (policy.getSelector() == Selector::sketch)
          ScoreSketchOp::create(b, loc, q, summaries, op.getPageTable(),
                                op.getLens(), scores, widths, pageSize,
                                b.getI64IntegerAttr(policy.getSketchBits()),
                                op.getScaleAttr());
        else
          ScoreTokensOp::create(b, loc, q, k, op.getPageTable(),
                                op.getLens(), scores, op.getScaleAttr());
      }
    }

    // Selection: top units, then the certificate's candidates in order.
    Value indices;
    int64_t slots = topUnits + extra;
    if (wantScores) {
      indices = alloc({dyn, runKVHeads, slots}, i32, {batch});
      SelectTopKOp::create(b, loc, gran, scores, op.getLens(), windows,
                           indices, anchor, window, windowMax, pageSize,
                           b.getI64IntegerAttr(topUnits));
    }

    // The certificate's early test: groups whose certificate cannot pass
    // go dense before their sparse pass (only a tolerance can fail).
    Value early;
    if (certified && policy.getTauValue() > 0.0) {
      early = alloc({dyn, runKVHeads}, i32, {batch});
      Value bounds = scores;
      if (policy.getSelector() == Selector::block_mean)
        bounds = emitMinMaxBounds(pageSize);
      PrecertifyOp::create(
          b, loc, gran, q, k, op.getPageTable(), scores, bounds, op.getLens(),
          windows, indices, early, anchor, window, windowMax, pageSize,
          b.getI64IntegerAttr(topUnits),
          b.getF64FloatAttr(policy.getTauValue()), op.getScaleAttr(),
          widths ? b.getUnitAttr() : UnitAttr());
    }

    // Sparse attention over anchor, window and the top units.
    int64_t splits = spec.getSplits();
    Value po = alloc({dyn, runQHeads, splits, d}, f32, {batch});
    Value pml = alloc({dyn, runQHeads, splits, kPartialMLWidth}, f32, {batch});
    SparseAttendOp::create(
        b, loc, gran, q, k, v, op.getPageTable(), op.getLens(), windows,
        topUnits > 0 ? indices : Value(), Value(), early, po, pml, anchor,
        window, windowMax, b.getI64IntegerAttr(0),
        b.getI64IntegerAttr(topUnits), b.getBoolAttr(true), op.getScaleAttr());

    if (!certified) {
      MergeOp::create(b, loc, ValueRange{po, pml}, Value(), ValueRange{}, out,
                      stats, Value(),
                      b.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
      return;
    }

    // Certificate: bound the omitted mass; with tau > 0 pick extra units
    // or dense fallback per group.
    // block_mean scores are not bounds: the certificate takes min/max ones.
    Value bounds = scores;
    if (policy.getSelector() == Selector::block_mean)
      bounds = emitMinMaxBounds(pageSize);
    Value extraCount = alloc({dyn, runKVHeads}, i32, {batch});
    Value fallback = alloc({dyn, runKVHeads}, i32, {batch});
    Value statsBuffer = stats;
    if (!statsBuffer)
      statsBuffer = alloc({dyn, runQHeads, kStatsWidth}, f32, {batch});
    // The box of omitted values bounds the output error (stats column 4);
    // it comes from the page summaries, so only with them and with stats,
    // and not when the policy drops that bound (output_bound = false).
    Value vbox, boxSummaries, boxPages;
    if (stats && summaries && policy.getOutputBound()) {
      vbox = alloc({dyn, runKVHeads, kValueBoxRows, d}, f32, {batch});
      boxSummaries = summaries;
      boxPages = op.getPageTable();
    }
    CertifyOp::create(b, loc, gran, bounds, widths, op.getLens(), windows,
                      indices, po, pml, extraCount, fallback, statsBuffer,
                      early, boxSummaries, boxPages, vbox, anchor, window,
                      windowMax, pageSize, b.getI64IntegerAttr(topUnits),
                      b.getF64FloatAttr(policy.getTauValue()));

    SmallVector<Value> partials{po, pml};
    if (extra > 0) {
      int64_t extraSplits =
          chooseSparseSplits(spec.getTarget(), extra * unit);
      Value po2 = alloc({dyn, runQHeads, extraSplits, d}, f32, {batch});
      Value pml2 =
          alloc({dyn, runQHeads, extraSplits, kPartialMLWidth}, f32, {batch});
      SparseAttendOp::create(
          b, loc, gran, q, k, v, op.getPageTable(), op.getLens(), windows,
          indices, extraCount, Value(), po2, pml2, anchor, window, windowMax,
          b.getI64IntegerAttr(topUnits), b.getI64IntegerAttr(extra),
          b.getBoolAttr(false), op.getScaleAttr());
      partials.append({po2, pml2});
    }
    auto [pod, pmld] = emitDenseAttend(fallback);
    MergeOp::create(b, loc, partials, fallback, ValueRange{pod, pmld}, out,
                    statsBuffer, vbox, FloatAttr());
  }

  /// The min/max page bounds that certify block_mean policies (block_mean
  /// scores rank but bound nothing); computed once per run.
  Value emitMinMaxBounds(IntegerAttr pageSize) {
    if (minMaxBounds)
      return minMaxBounds;
    minMaxBounds =
        alloc({ShapedType::kDynamic, runQHeads, ShapedType::kDynamic},
              b.getF32Type(), {batch, maxPages});
    ScorePagesOp::create(
        b, loc, SelectorAttr::get(b.getContext(), Selector::block_minmax), q,
        summaries, op.getPageTable(), op.getLens(), minMaxBounds, pageSize,
        op.getScaleAttr());
    return minMaxBounds;
  }

  DecodeAttentionOp op;
  SpecAttr spec;
  OpBuilder b;
  Location loc;
  int64_t denseSplits;
  Value batch, maxPages;
  Value q, k, v, summaries, out, stats;
  int64_t runQHeads = 0, runKVHeads = 0;
  Value minMaxBounds; // per run: emitRun resets it
  SmallVector<Value> scratch;
};

struct DecomposePass : public mlir::condensate::impl::CondensateDecomposeBase<DecomposePass> {
  using Base::Base;

  void runOnOperation() override {
    if (denseSplits < 0 || denseSplits > ::condensate::limits::kMaxSplits) {
      getOperation().emitError()
          << "dense-splits must be in [0, " << ::condensate::limits::kMaxSplits
          << "], got " << static_cast<int64_t>(denseSplits);
      return signalPassFailure();
    }
    SmallVector<DecodeAttentionOp> ops;
    getOperation().walk([&](DecodeAttentionOp op) { ops.push_back(op); });
    for (DecodeAttentionOp op : ops) {
      if (!op.getSpecAttr()) {
        op.emitOpError() << "must be specialised before decomposition (run "
                            "condensate-specialize)";
        return signalPassFailure();
      }
      Decomposer(op, denseSplits).run();
    }
  }
};

} // namespace
