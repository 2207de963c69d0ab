//===- Attention.h - buffers of one attention or append call ----*- C++ -*-===//
//
// The arguments a caller passes to a compiled model's decode attention and
// KV append, on the CPU (host pointers) or the GPU (device pointers). Their
// order, shapes and the stats columns are defined by condensate/ABI/
// AttentionABI.h; this header names them for the runtime API.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_ATTENTION_H
#define CONDENSATE_RUNTIME_ATTENTION_H

#include "condensate/ABI/AttentionABI.h"
#include "condensate/Runtime/Policy.h"

#include <cstdint>
#include <vector>

namespace condensate {

/// Entries per (sequence, query head) of AttentionArgs::stats, and what each
/// holds (abi::StatsEntry).
constexpr int64_t kAttentionStatsWidth = abi::kStatsWidth;
enum AttentionStat : int64_t {
  kStatEpsHat = abi::StatEpsHat,
  kStatAttended = abi::StatAttended,
  kStatExtra = abi::StatExtra,
  kStatFallback = abi::StatFallback,
  kStatOutputBound = abi::StatOutputBound,
};

/// Buffers of one decode-attention call, shaped as abi::attendShapes says
/// (B = batch, MP = maxPages, NP = numPages): q, out [B, Hq, D] f32;
/// k/vCache [NP, Hkv, P, D] of the model's KV type; pageTable [B, MP] i32;
/// lens [B] i32 (context length including the query's own, already
/// appended position); windows [B] i32 (per-sequence window of adaptive
/// layers; may be null otherwise); summaries [NP, Hkv,
/// abi::summaryRows(P, sketchBits), D] f32; stats [B, Hq, abi::kStatsWidth] f32.
struct AttentionArgs {
  int64_t batch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  const float *q = nullptr;
  const void *kCache = nullptr;
  const void *vCache = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *lens = nullptr;
  const int32_t *windows = nullptr;
  const float *summaries = nullptr;
  float *out = nullptr;
  float *stats = nullptr;

  /// The pointers in abi::AttendArg order.
  std::vector<const void *> pointers() const {
    return {q,    kCache,  vCache,    pageTable, lens,
            windows, summaries, out, stats};
  }
};

/// Buffers of one append: kNew/vNew [B, Hkv, D] f32 row b written at
/// positions[b] of the sequence whose page table is row b, page summaries
/// updated. Rows that land in one page must be consecutive, in position
/// order (append_kv's contract; one decoding row per sequence, or a
/// prefill's run of positions, is; the CPU refuses other orders).
struct AppendArgs {
  int64_t batch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  const float *kNew = nullptr;
  const float *vNew = nullptr;
  void *kCache = nullptr;
  void *vCache = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *positions = nullptr;
  float *summaries = nullptr;

  /// The pointers in abi::AppendArg order.
  std::vector<const void *> pointers() const {
    return {kNew, vNew, kCache, vCache, pageTable, positions, summaries};
  }
};

/// Buffers of one prefill-attention call (abi::PrefillArg): q, out [R, Hq,
/// D] f32, the rows of S sequences concatenated; k/vCache [NP, Hkv, P, D];
/// pageTable [S, MP] i32; lens [S] i32 (context length of each sequence
/// including its rows, already appended); rowStarts [S + 1] i32 (the rows
/// of sequence s are [rowStarts[s], rowStarts[s + 1]), rowStarts[0] = 0,
/// rowStarts[S] = R). Row r of sequence s attends causally from position
/// abi::prefillPosition(lens[s], rowStarts[s], rowStarts[s + 1], r).
struct PrefillArgs {
  int64_t rows = 0;
  int64_t seqs = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  const float *q = nullptr;
  const void *kCache = nullptr;
  const void *vCache = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *lens = nullptr;
  const int32_t *rowStarts = nullptr;
  float *out = nullptr;

  /// The pointers in abi::PrefillArg order.
  std::vector<const void *> pointers() const {
    return {q, kCache, vCache, pageTable, lens, rowStarts, out};
  }
};

/// The ABI's model dimensions of `shape`.
inline abi::ModelDims modelDims(const ModelShape &shape) {
  return {shape.qHeads, shape.kvHeads, shape.headDim, shape.pageSize,
          shape.sketchBits};
}

/// Argument shapes of one call (abi::attendShapes / abi::appendShapes).
inline std::vector<abi::Shape> shapesOf(const ModelShape &s,
                                        const AttentionArgs &a) {
  return abi::attendShapes(modelDims(s), {a.batch, a.maxPages, a.numPages});
}
inline std::vector<abi::Shape> shapesOf(const ModelShape &s,
                                        const AppendArgs &a) {
  return abi::appendShapes(modelDims(s), {a.batch, a.maxPages, a.numPages});
}

inline std::vector<abi::Shape> shapesOf(const ModelShape &s,
                                        const PrefillArgs &a) {
  return abi::prefillShapes(modelDims(s),
                            {a.rows, a.seqs, a.maxPages, a.numPages});
}

/// Bytes of the cache one query head's share of a decode-attention call
/// read, for a sequence of `n` tokens under `policy`, from that head's stats
/// row (stats [kStatsWidth]): what the generated stages read for its
/// key/value group (page summaries and sketches scored, K rows scored
/// exactly, K and V rows attended, the value box of a certificate that
/// passed, the sparse and the dense pass of a fallback; K and V once where
/// the decoder ran the layer dense instead, abi::kRanDense) divided by the
/// group's query heads. abi::denseBytes(n, D, kv bytes) / group is what
/// dense attention reads for the same share.
double bytesRead(const Policy &policy, const ModelShape &shape, int64_t n,
                 const float *stats);

/// Checks an attention call's scalar arguments and host-visible buffers:
/// sizes, required pointers, and (when `hostTables`, i.e. lens and the page
/// table are host memory) every length and referenced page. `adaptive`
/// says whether the layer needs `windows`.
Status checkAttentionArgs(const ModelShape &shape, const AttentionArgs &a,
                          bool adaptive, bool hostTables);
/// The same for a prefill call; with `hostTables` (rowStarts, lens and the
/// page table in host memory) also that the row starts partition [0, rows),
/// that no sequence has more rows than positions, and every length and
/// referenced page.
Status checkPrefillArgs(const ModelShape &shape, const PrefillArgs &a,
                        bool hostTables);
/// The same for an append; with `hostTables` (host buffers: the CPU
/// program) also that every new key and value is finite.
Status checkAppendArgs(const ModelShape &shape, const AppendArgs &a,
                       bool hostTables);

} // namespace condensate

#endif // CONDENSATE_RUNTIME_ATTENTION_H
