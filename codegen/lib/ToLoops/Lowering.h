//===- Lowering.h - what the loop lowering's stages share -------*- C++ -*-===//
//
// The CPU as a target (one lane, no barriers, vectors of kLanes), head_dim
// rows as vectors of kLanes floats (RowOps), and the populate functions of
// the stage files that make up convert-condensate-to-loops.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_TOLOOPS_LOWERING_H
#define CONDENSATE_CODEGEN_TOLOOPS_LOWERING_H

#include "../Common/Emitter.h"
#include "../Common/Numerics.h"
#include "../Common/TargetInfo.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::condensate {

namespace loops {

/// Lanes per vector chunk of a head-dimension row.
constexpr int64_t kLanes = 8;

/// The CPU as seen by the shared numerics: one lane, no barriers, vectors
/// of kLanes elements, the certificate's exponentials in f64.
const TargetInfo &loopsTarget();

/// Row-vector helpers on top of Emitter for the CPU lowering.
struct RowOps {
  Emitter &e;
  int64_t d;

  VectorType vecType(Type elt) const { return VectorType::get({kLanes}, elt); }
  int64_t chunks() const { return d / kLanes; }
  const TargetInfo &target() const { return loopsTarget(); }

  /// Loads row `prefix` (all indices but the last) of `mem` as f32 chunks.
  SmallVector<Value> loadRow(Value mem, ValueRange prefix) {
    Type elt = cast<MemRefType>(mem.getType()).getElementType();
    SmallVector<Value> out;
    for (int64_t c = 0; c < chunks(); ++c) {
      SmallVector<Value> ivs(prefix.begin(), prefix.end());
      ivs.push_back(e.idx(c * kLanes));
      Value v = vector::LoadOp::create(e.builder(), e.location(), vecType(elt),
                                       mem, ivs);
      out.push_back(e.toF32(v));
    }
    return out;
  }
  /// Asks for row `prefix` of `mem` in cache (a prefetch a 64-byte line),
  /// for a load soon after: hides the latency of rows gathered by index,
  /// which the hardware prefetcher cannot guess.
  void prefetchRow(Value mem, ValueRange prefix) {
    auto type = cast<MemRefType>(mem.getType());
    const int64_t perLine = 64 * 8 / type.getElementTypeBitWidth();
    for (int64_t c = 0; c < d; c += perLine) {
      SmallVector<Value> ivs(prefix.begin(), prefix.end());
      ivs.push_back(e.idx(c));
      memref::PrefetchOp::create(e.builder(), e.location(), mem, ivs,
                                 /*isWrite=*/false, /*localityHint=*/3,
                                 /*isDataCache=*/true);
    }
  }
  void storeRow(ArrayRef<Value> chunksIn, Value mem, ValueRange prefix) {
    for (int64_t c = 0; c < chunks(); ++c) {
      SmallVector<Value> ivs(prefix.begin(), prefix.end());
      ivs.push_back(e.idx(c * kLanes));
      vector::StoreOp::create(e.builder(), e.location(), chunksIn[c], mem, ivs);
    }
  }
  Value splat(Value scalar) { return e.splat(scalar, kLanes); }
  SmallVector<Value> zeros() {
    SmallVector<Value> out;
    for (int64_t c = 0; c < chunks(); ++c)
      out.push_back(splat(e.f32(0.0)));
    return out;
  }
  /// q . row(mem, prefix) with q given as f32 chunks.
  Value dot(ArrayRef<Value> q, Value mem, ValueRange prefix) {
    SmallVector<Value> k = loadRow(mem, prefix);
    return rowDot(e, target(), q, k, /*lanes=*/1);
  }
};

/// The key/value heads a call of a decode layer's function computes (the
/// calling thread's share, AttentionABI.h kCpuKVShareSymbol): g = part,
/// part + parts, ... below hkv. Read at the op, before its loops, where
/// the module declares the share function (kv-share); else every head.
struct KVShare {
  Value part, parts;
  bool all = false; ///< every head: plain loops from 0 by 1
  static KVShare of(Emitter &e, Operation *op);
  /// body(h) for every query head h of the share's kv heads (groups of
  /// `group`).
  void forEachHead(Emitter &e, int64_t hkv, int64_t group,
                   const std::function<void(Emitter &, Value)> &body) const {
    if (all) {
      e.forEach(e.idx(0), e.idx(hkv * group), body);
      return;
    }
    forEach(e, hkv, [&](Emitter &e, Value g) {
      e.forEach(e.idx(0), e.idx(group), [&](Emitter &e, Value j) {
        body(e, e.add(e.mul(g, e.idx(group)), j));
      });
    });
  }
  /// body(g) for every head g of the share.
  void forEach(Emitter &e, int64_t hkv,
               const std::function<void(Emitter &, Value)> &body) const {
    if (all) {
      e.forEach(e.idx(0), e.idx(hkv), body);
      return;
    }
    e.forLoop(part, e.idx(hkv), parts, {},
              [&](Emitter &e, Value g, ValueRange) -> SmallVector<Value> {
                body(e, g);
                return {};
              });
  }
};

/// Declares the share function in `module` (once), and notes on each merge
/// the kv heads of its function (kKVHeadsAttr: a merge without a fallback
/// sees only query heads).
void declareKVShare(ModuleOp module);
constexpr const char *kKVHeadsAttr = "condensate.kv_heads";

/// Lowers one stage op in place with `Lower`, which emits its loops through
/// an emitter at the op; the op is then erased.
template <typename Op, void (*Lower)(Op, Emitter &, PatternRewriter &)>
struct LoopPattern : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    Lower(op, e, rewriter);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Makes every function of `module` test its scratch allocations (see
/// CheckAllocations.cpp); fails on an allocation it cannot guard.
LogicalResult checkAllocations(ModuleOp module);

} // namespace loops

/// score_pages and score_tokens.
void populateScoreToLoopsPatterns(RewritePatternSet &patterns);
/// select_topk.
void populateSelectToLoopsPatterns(RewritePatternSet &patterns);
/// sparse_attend and dense_attend.
void populateAttendToLoopsPatterns(RewritePatternSet &patterns);
/// certify.
void populateCertifyToLoopsPatterns(RewritePatternSet &patterns);
/// merge.
void populateMergeToLoopsPatterns(RewritePatternSet &patterns);
/// append_kv.
void populateAppendToLoopsPatterns(RewritePatternSet &patterns);
/// prefill_attention.
void populatePrefillToLoopsPatterns(RewritePatternSet &patterns);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_TOLOOPS_LOWERING_H
