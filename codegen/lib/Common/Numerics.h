//===- Numerics.h - numerics both lowerings share ---------------*- C++ -*-===//
//
// The formulas the loop and GPU lowerings must agree on, written once: a
// sequence's effective window and the candidate positions of a unit, the
// ranking keys of selection, the virtual list of sparse attention and the
// dense splits, dot products of head_dim rows spread over lanes, the
// partials' softmax sums, and the KV append with its page summaries. The
// certificate's formulas are in Certificate.h.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_NUMERICS_H
#define CONDENSATE_CODEGEN_COMMON_NUMERICS_H

#include "Emitter.h"
#include "TargetInfo.h"

namespace mlir::condensate {

/// Additive safety margin, relative to 1 + |u|, applied to a unit's logit
/// bound before it enters the certificate: it covers float32 rounding in
/// the bound and in the partials, so eps_hat stays an upper bound.
constexpr double kBoundMargin = 1.0 / 16384.0;
/// Factor applied to the output-error bound: float32 sums of head_dim
/// squares are off by at most head_dim * 2^-24 relative (2^-15 at 512).
constexpr double kOutputBoundRoundUp = 1.0 + 1.0 / 4096.0;
/// Dense attention gives each split at least this many tokens on the CPU
/// (16 splits: float32 online softmax within 1e-5 of exact at 8K): short
/// contexts use fewer splits and leave the others empty.
constexpr int64_t kMinDenseChunk = 256;
/// ... and on a GPU, whose launch runs only the splits that fill the chip
/// (ToGPU/Attend.cpp, denseLiveSplits), so shorter chunks keep a short
/// context's blocks busy.
constexpr int64_t kMinDenseChunkGPU = 128;

//===----------------------------------------------------------------------===//
// Windows and units
//===----------------------------------------------------------------------===//

/// The effective window of sequence b: windows[b] clamped to
/// [window, window_max], or the static window.
Value effectiveWindow(Emitter &e, Value windows, Value b, int64_t window,
                      int64_t windowMax);

/// The units (pages or tokens) of one sequence as candidates for selection:
/// the positions of a unit that are neither anchor nor window nor past n.
struct CandidateUnits {
  Value unit;   // index: tokens per unit
  Value anchor; // index: anchor count A
  Value n;      // index: context length
  Value w;      // index: effective window W

  /// Candidate positions of unit u.
  Value count(Emitter &e, Value u) const;
};

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

/// Maps a float to an unsigned 32-bit key that orders like the float:
/// larger floats give larger keys (NaN-free inputs).
Value orderedKey(Emitter &e, Value f);

/// The max of a group's scores, in order (maximumf: NaN propagates, +0
/// above -0): what select_topk ranks a unit by, and what a scorer writes
/// in a key/value head's row (score_tokens, score_sketch).
Value groupMax(Emitter &e, ArrayRef<Value> scores);

/// Whether selection ranks a group's units relative to each head: with
/// token units and a score row per query head (what the certificate
/// takes), unit u ranks by max_i (scores[b, h_i, u] - r_i), r_i head h_i's
/// largest score over the sequence's forced positions (anchor and window:
/// `forcedScoreMax`, then `rankOffset`). A plain max lets the heads whose
/// scores sit high rank everything while the others' mass waits, so one
/// set serving a GQA group takes more extras before every head's
/// certificate holds (measured: docs/CERTIFICATE.md, "Grouped-query
/// heads"). The order only decides which extras come first: eps_hat
/// bounds whatever is left out. Policy::ranksRelative is the runtime's
/// view of the same rule (certified token policies, whose scores have a
/// row per query head).
bool rankRelative(Granularity granularity, int64_t group);

/// The per-head maxima of scores[b, g * group + i, t] over the forced
/// positions t (anchor [0, min(A, n)) and window [max(A, n - W), n)) taken
/// j = first, first + step, ... of [0, A + W); -inf where none. A warp
/// takes them a lane each (first = lane, step = the warp) and combines
/// the lanes' maxima; the loops take them all (first 0, step 1).
SmallVector<Value> forcedScoreMax(Emitter &e, const CandidateUnits &units,
                                  Value scores, Value b, Value g, int64_t group,
                                  Value first, Value step);
/// A head's ranking offset r from its forced scores' max: the max where it
/// is finite, else 0 (no forced position, or no real bound).
Value rankOffset(Emitter &e, Value forcedMax);
/// The offsets of the group's heads in one thread (the loops).
SmallVector<Value> rankOffsets(Emitter &e, const CandidateUnits &units,
                               Value scores, Value b, Value g, int64_t group);

/// The ranking key of unit u for kv head g (i32, compared unsigned): the
/// ordered key of the best score over the group's `group` query heads,
/// scores[b, g * group + i, u], less each head's `offsets[i]` where given
/// (rankRelative); 0 for a non-candidate, at least 1 for a candidate, so a
/// candidate scoring -inf (no real bound) still ranks last. Ties rank by
/// increasing unit.
struct RankingKey {
  Value key;
  Value candidate; // i1: u has a candidate position
};
/// `zero` and `one` are the i32 constants the loop order takes from outside
/// its unit loop (the kernel order makes its own).
RankingKey rankingKey(Emitter &e, const TargetInfo &target,
                      const CandidateUnits &units, Value scores, Value b,
                      Value g, Value u, int64_t group, Value zero = {},
                      Value one = {}, ArrayRef<Value> offsets = {});

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The static shape of a sparse_attend op's virtual list: `forced` anchor
/// and window slots, then `unitTokens` slots for each of the first `count`
/// selected units from indices[b, g, first], cut into `splits` splits of
/// `perSplit` slots.
struct SparseList {
  int64_t unitTokens, forced, length, splits, perSplit, first, count;

  static SparseList of(SparseAttendOp op);
  /// Slots [v0, v1) of split s.
  std::pair<Value, Value> splitRange(Emitter &e, Value s) const;
  /// How many selected units (b, g) attends: limits[b, g], or count.
  Value limit(Emitter &e, Value limits, Value b, Value g) const;
};

/// The condensate-set layout of one sequence in sparse attention: slot v of
/// the virtual list maps to a position t and a validity flag.
struct CondensateSlots {
  Value anchor;    // index: anchor count A
  Value windowMax; // index: window slots Wmax
  Value window;    // index: effective window W of this sequence
  Value forced;    // index: forced slots (A + Wmax, or 0 without forced)
  Value unit;      // index: tokens per unit (1 or P)
  Value n;         // index: context length

  /// The layout of op for a sequence of length n with effective window w.
  static CondensateSlots of(Emitter &e, SparseAttendOp op,
                            const SparseList &list, Value w, Value n);
  /// Position of forced slot v (< forced) and whether it is attended.
  std::pair<Value, Value> forcedSlot(Emitter &e, Value v) const;
  /// Whether position t of a selected unit is attended: inside the context
  /// and neither anchor nor window (those come from the forced slots).
  Value unitPositionValid(Emitter &e, Value t) const;
  /// Position of slot v and whether it is attended: a forced slot, or a
  /// position of selected unit indices[b, g, first + j] (j < limit; no unit
  /// when there are no indices).
  std::pair<Value, Value> position(Emitter &e, Value v, const SparseList &list,
                                   Value indices, Value b, Value g,
                                   Value limit) const;
};

/// Tokens [t0, t1) of dense split s for a context of n tokens over at most
/// `splits` equal chunks of at least `minChunk` tokens: min(splits,
/// ceil(n / minChunk)) of them, at least 1.
std::pair<Value, Value> denseSplitRange(Emitter &e, Value n,
                                        OpFoldResult splits, Value s,
                                        int64_t minChunk);

//===----------------------------------------------------------------------===//
// Rows spread over lanes
//===----------------------------------------------------------------------===//

/// q . k for one head_dim row held as f32 chunks, each lane holding its
/// share: the chunks' products summed per lane, then over `lanes` lanes.
Value rowDot(Emitter &e, const TargetInfo &target, ArrayRef<Value> q,
             ArrayRef<Value> k, int64_t lanes);
/// The page bound of block_minmax scoring: sum_c max(q_c lo_c, q_c hi_c)
/// over the row, summed over `lanes` lanes like rowDot.
Value rowBoxDot(Emitter &e, const TargetInfo &target, ArrayRef<Value> q,
                ArrayRef<Value> lo, ArrayRef<Value> hi, int64_t lanes);

//===----------------------------------------------------------------------===//
// Partials and merge
//===----------------------------------------------------------------------===//

/// Merges the (m, l, c) of splits [0, splits) of `pml` for (b, h): returns
/// the max logit M and the total Z = sum l_s exp(m_s - M) as f32.
std::pair<Value, Value> partialMaxAndTotal(Emitter &e, Value pml, Value splits,
                                           Value b, Value h);
/// The max logit over the live splits (l > 0) of `pml` for (b, h) that this
/// lane visits (splits lane, lane + stride, ...; stride 0 means
/// warpSize()), and one past the last live split it visited (i32, 0 when
/// none): the merge reads no split past the largest of these over the
/// lanes.
std::pair<Value, Value> liveSplitMax(Emitter &e, const TargetInfo &target,
                                     Value pml, Value b, Value h,
                                     OpFoldResult lane, int64_t stride = 0);
/// The stats of a merge whose certificate is fixed (stats_eps): eps_hat
/// and the output bound are eps, nothing extra, no fallback.
void storeFixedCertificate(Emitter &e, Value stats, Value b, Value h,
                           double eps);

//===----------------------------------------------------------------------===//
// KV append
//===----------------------------------------------------------------------===//

/// Where sequence b's new row goes: its physical page, the offset in it,
/// and whether the row opens the page (its summaries then start afresh).
struct AppendSlot {
  Value page, off, first;
};
AppendSlot appendSlot(Emitter &e, Value positions, Value pageTable, Value b,
                      int64_t pageSize);
/// Stores channel c of kv head g of the new key and value rows of sequence
/// b into the caches (in their element type) and folds it into the page's
/// summaries (min, max and sum of keys, min and max of values) when there
/// are any. With `sketchBits`, the row that fills the page (offset P - 1:
/// a page's positions are appended in order) also writes channel c of the
/// page's key sketch (Sketch.h).
void appendChannel(Emitter &e, const AppendSlot &slot, Value kNew, Value vNew,
                   Value kCache, Value vCache, Value summaries, Value b,
                   Value g, Value c, int64_t sketchBits);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_NUMERICS_H
