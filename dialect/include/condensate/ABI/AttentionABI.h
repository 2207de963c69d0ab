//===- AttentionABI.h - the calling convention of generated kernels -*- C++ -*-===//
//
// The one definition of how generated condensate functions are called: the
// argument order and shapes of a layer's decode attention and of the KV
// append, the page-summary slots and the stats columns. Plain C++ with no
// MLIR, so the dialect and passes (which build these signatures), codegen
// (which reads them), the runtime (which fills them from host or device
// buffers) and the decoder include this header alike.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_ABI_ATTENTIONABI_H
#define CONDENSATE_ABI_ATTENTIONABI_H

#include <cstdint>
#include <limits>
#include <vector>

namespace condensate::abi {

/// The strict certificate tolerance, `tau = strict` in a policy: one float32
/// ulp of 1 (2^-24).
constexpr double kStrictTau = 5.9604644775390625e-08;

/// Summary vectors kept per page and key/value head, each [head_dim] f32.
constexpr int64_t kSummarySlots = 5;
/// What each summary slot holds, over the page's positions written so far.
enum SummarySlot : int64_t { KMin = 0, KMax = 1, KSum = 2, VMin = 3, VMax = 4 };

/// Key sketches (selector `sketch`). When a model's schedule uses them, each
/// page's summary rows are followed by sketchRows() rows of 32-bit words
/// (stored in the f32 buffer, read through a bitcast). Once a page is full
/// the append writes, for every channel c, the key of each token t of the
/// page quantised to `bits` bits against the page's own key box:
///   step_c = (KMax_c - KMin_c) * (1 / (2^bits - 1))
///   code   = round((k_tc - KMin_c) * ((2^bits - 1) / (KMax_c - KMin_c)))
///            clamped to [0, 2^bits - 1] (0 when KMax_c == KMin_c)
/// at bits [(t % codesPerWord) * bits, +bits) of word row
/// kSummarySlots + t / codesPerWord, column c. A page that is not full has
/// no sketch yet; its tokens are bounded by the page box.
constexpr int64_t kSketchRow0 = kSummarySlots;
/// Whether `bits` is a sketch width the compiler generates.
constexpr bool validSketchBits(int64_t bits) {
  return bits == 2 || bits == 4 || bits == 8;
}
/// Codes in one 32-bit word.
constexpr int64_t codesPerWord(int64_t bits) { return 32 / bits; }
/// Word rows of a page's sketch (0 without sketches).
constexpr int64_t sketchRows(int64_t pageSize, int64_t bits) {
  return bits == 0 ? 0
                   : (pageSize + codesPerWord(bits) - 1) / codesPerWord(bits);
}
/// The sketch bound's error terms (derivation: codegen/lib/Common/Sketch.h).
/// A channel's dequantised key is within
///   e_c = step_c * kSketchStepSlack + (|lo_c| + |hi_c|) *
///   kSketchMagnitudeSlack
/// of the stored key, and the float32 evaluation of q . (lo + code * step)
/// over a row of `headDim` channels, in either form the kernels use, is off
/// by at most sketchGamma(headDim) * sum_c |q_c| * sketchMagnitude(lo_c,
/// step_c, bits).
/// (step_c's factor: 1/2 plus the margin for float32 quantisation and the
/// tensor cores' split and accumulation; its apportionment is Sketch.h's.)
constexpr double kSketchStepSlack = 0.5 + 1.0 / 512.0;
constexpr double kSketchMagnitudeSlack = 1.0 / 1048576.0;
constexpr double sketchGamma(int64_t headDim) {
  return double(4 * headDim + 8) / 16777216.0;
}
/// The factor of step_c in sketchMagnitude: 4 * 2^bits.
constexpr double sketchStepWeight(int64_t bits) {
  return 4.0 * double(int64_t(1) << bits);
}
/// e_c of one channel with box [lo, hi] and step `step` (float64).
inline double sketchChannelError(double lo, double hi, double step) {
  return step * kSketchStepSlack +
         ((lo < 0 ? -lo : lo) + (hi < 0 ? -hi : hi)) * kSketchMagnitudeSlack;
}
/// The magnitude one channel adds to the rounding term: |lo| + 4 * 2^bits *
/// step (float64).
inline double sketchMagnitude(double lo, double step, int64_t bits) {
  return (lo < 0 ? -lo : lo) + sketchStepWeight(bits) * step;
}

/// Rows of the summaries of one page and key/value head.
constexpr int64_t summaryRows(int64_t pageSize, int64_t sketchBits) {
  return kSummarySlots + sketchRows(pageSize, sketchBits);
}

/// Entries per (sequence, query head) of the stats output.
constexpr int64_t kStatsWidth = 5;
/// What each stats entry holds. Both bounds are 0 for dense attention and
/// after a dense fallback, NaN where no certificate ran (uncertified sparse
/// policies).
enum StatsEntry : int64_t {
  /// eps_hat: bound on the softmax mass the attended set leaves out.
  StatEpsHat = 0,
  /// Positions attended.
  StatAttended = 1,
  /// Extra units the certificate added.
  StatExtra = 2,
  /// Nonzero when the head's group fell back to dense attention:
  /// kFellBack after its sparse pass, kFellBackEarly when the certificate's
  /// early test decided before it (no sparse pass ran); in a decoder's
  /// statistics also kRanDense.
  StatFallback = 3,
  /// Bound on ||o_dense - o||_2 of the output:
  /// eps_hat * sqrt(sum_c max(Vmax_c - o_c, o_c - Vmin_c, 0)^2) over the
  /// per-channel box [Vmin, Vmax] of the omitted values; 0 for dense heads
  /// and after a fallback, NaN where no certificate ran or its policy says
  /// output_bound = false.
  StatOutputBound = 4,
};
/// stats[b, h, StatEpsHat] of a certified head: the float64 bound the
/// certificate compared with tau, rounded to float32 and then up by this
/// factor so that it stays a bound. So a certified head may report up to
/// tau * kEpsHatRoundUp * (1 + 2^-23) (the two float32 roundings).
constexpr double kEpsHatRoundUp = 1.0 + 1.0 / 1048576.0;
/// The stats columns' names, in StatsEntry order (the Python package's
/// field names).
constexpr const char *kStatsNames[] = {"eps_hat", "attended", "extra",
                                       "fallback", "output_bound"};
static_assert(sizeof(kStatsNames) / sizeof(kStatsNames[0]) == kStatsWidth);

/// The values of stats[b, h, StatFallback] after a fallback.
constexpr float kFellBack = 1.0f;
constexpr float kFellBackEarly = 2.0f;
/// Never written by a kernel: the decoder's value for a certified head
/// whose layer it ran with dense attention instead of the certified step
/// (its fallback memory, DecoderOptions::fallbackMemory): no scoring, no
/// certificate, K and V read once.
constexpr float kRanDense = 3.0f;

/// Written by a CPU decode-attention function to stats[0][0][StatFallback]
/// when it could not allocate its scratch memory; it returns at once (other
/// outputs undefined) and the runtime reports the failure.
constexpr float kWorkspaceFailed = -1.0f;

/// Arguments of a layer's decode-attention function, in order. Shapes
/// (B batch, MP max pages per sequence, NP pages in the pool):
///   q, out     [B, Hq, D] f32
///   k, v       [NP, Hkv, P, D] of the model's KV type
///   pageTable  [B, MP] i32
///   lens       [B] i32: context length including the query's own position
///   windows    [B] i32: per-sequence window of adaptive layers
///   summaries  [NP, Hkv, summaryRows(P, sketchBits), D] f32
///   stats      [B, Hq, kStatsWidth] f32
enum AttendArg : int {
  AttendQ = 0,
  AttendK,
  AttendV,
  AttendPageTable,
  AttendLens,
  AttendWindows,
  AttendSummaries,
  AttendOut,
  AttendStats,
  kAttendArgs
};

/// The CPU's decode-attention functions compute the key/value heads g =
/// part, part + parts, ... of the calling thread's share: at their start
/// they call `int64_t condensate_cpu_kv_share(int64_t which)` (the host
/// provides it to the JIT), which returns part (which = 0) and parts
/// (which = 1), (0, 1) unless the caller set a share. Each head's work,
/// scratch and outputs are its own, so a layer may run as several calls at
/// once over the same arguments, one a share.
constexpr const char *kCpuKVShareSymbol = "condensate_cpu_kv_share";

/// Arguments of the KV-append function, in order: kNew, vNew [B, Hkv, D]
/// f32 are written at positions[b] ([B] i32) of sequence b through its page
/// table row, and the page summaries are updated.
enum AppendArg : int {
  AppendKNew = 0,
  AppendVNew,
  AppendK,
  AppendV,
  AppendPageTable,
  AppendPositions,
  AppendSummaries,
  kAppendArgs
};

/// Arguments of a layer's prefill-attention function, in order: causal
/// attention of R query rows over the cache, the rows of S sequences
/// concatenated. Shapes (R rows, S sequences, MP, NP as above):
///   q, out     [R, Hq, D] f32
///   k, v       [NP, Hkv, P, D] of the model's KV type
///   pageTable  [S, MP] i32
///   lens       [S] i32: context length of sequence s including its rows,
///              whose keys and values are already appended
///   rowStarts  [S + 1] i32: the rows of sequence s are [rowStarts[s],
///              rowStarts[s + 1]), rowStarts[0] = 0, rowStarts[S] = R.
/// With c = rowStarts[s + 1] - rowStarts[s], row r of sequence s is the
/// query at position lens[s] - c + (r - rowStarts[s]) (prefillPosition).
enum PrefillArg : int {
  PrefillQ = 0,
  PrefillK,
  PrefillV,
  PrefillPageTable,
  PrefillLens,
  PrefillRowStarts,
  PrefillOut,
  kPrefillArgs
};

/// The position of row `row` of a sequence of context length `len` whose
/// rows are [rowBegin, rowEnd).
constexpr int64_t prefillPosition(int64_t len, int64_t rowBegin,
                                  int64_t rowEnd, int64_t row) {
  return len - (rowEnd - rowBegin) + (row - rowBegin);
}

/// Whether the query at `position` attends key `t` in a layer whose prefill
/// window is `window` (0: every earlier position) with `anchor` leading
/// positions always kept.
constexpr bool prefillVisible(int64_t position, int64_t t, int64_t window,
                              int64_t anchor) {
  return t <= position &&
         (window <= 0 || t > position - window || t < anchor);
}

/// The causal window a layer's prefill function attends in: the window and
/// anchor of a static window policy shared by all its key/value heads (no
/// selection, no certificate, not adaptive), else none (window 0: dense).
/// condensate-expand-schedule generates the functions by it; the runtime
/// describes them by it.
struct PrefillWindow {
  int64_t window = 0, anchor = 0;
};
/// `uniform`: every key/value head of the layer has the same policy;
/// `dense`: it is #condensate.dense; `selects`: it scores positions (top-k
/// or a certificate).
constexpr PrefillWindow prefillWindowOf(bool uniform, bool dense, bool selects,
                                        bool adaptive, int64_t window,
                                        int64_t anchor) {
  if (!uniform || dense || selects || adaptive || window <= 0)
    return {};
  return {window, anchor};
}

/// Element type of an argument.
enum class Element { F32, KV, I32 };

/// A dimension not fixed by the model (batch and pool sizes in a signature).
/// Equal to MLIR's ShapedType::kDynamic.
constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

/// The model dimensions a signature is specialised for.
struct ModelDims {
  int64_t qHeads = 0, kvHeads = 0, headDim = 0, pageSize = 0;
  /// Bits of the key sketches in the summaries; 0 without sketches.
  int64_t sketchBits = 0;
};
/// The per-call dimensions (kDynamic in a signature).
struct CallDims {
  int64_t batch = kDynamic, maxPages = kDynamic, numPages = kDynamic;
};

using Shape = std::vector<int64_t>;

/// Shapes of the decode-attention arguments, indexed by AttendArg.
inline std::vector<Shape> attendShapes(const ModelDims &m, const CallDims &c) {
  Shape kv = {c.numPages, m.kvHeads, m.pageSize, m.headDim};
  return {{c.batch, m.qHeads, m.headDim},
          kv,
          kv,
          {c.batch, c.maxPages},
          {c.batch},
          {c.batch},
          {c.numPages, m.kvHeads, summaryRows(m.pageSize, m.sketchBits),
           m.headDim},
          {c.batch, m.qHeads, m.headDim},
          {c.batch, m.qHeads, kStatsWidth}};
}

/// Shapes of the append arguments, indexed by AppendArg.
inline std::vector<Shape> appendShapes(const ModelDims &m, const CallDims &c) {
  Shape kv = {c.numPages, m.kvHeads, m.pageSize, m.headDim};
  return {{c.batch, m.kvHeads, m.headDim},
          {c.batch, m.kvHeads, m.headDim},
          kv,
          kv,
          {c.batch, c.maxPages},
          {c.batch},
          {c.numPages, m.kvHeads, summaryRows(m.pageSize, m.sketchBits),
           m.headDim}};
}

/// The per-call dimensions of a prefill call (kDynamic in a signature).
struct PrefillCallDims {
  int64_t rows = kDynamic, seqs = kDynamic, maxPages = kDynamic,
          numPages = kDynamic;
};

/// Shapes of the prefill arguments, indexed by PrefillArg.
inline std::vector<Shape> prefillShapes(const ModelDims &m,
                                        const PrefillCallDims &c) {
  Shape kv = {c.numPages, m.kvHeads, m.pageSize, m.headDim};
  return {{c.rows, m.qHeads, m.headDim},
          kv,
          kv,
          {c.seqs, c.maxPages},
          {c.seqs},
          {c.seqs == kDynamic ? kDynamic : c.seqs + 1},
          {c.rows, m.qHeads, m.headDim}};
}

/// Element types of the prefill arguments, indexed by PrefillArg.
inline Element prefillElement(int arg) {
  switch (arg) {
  case PrefillK:
  case PrefillV:
    return Element::KV;
  case PrefillPageTable:
  case PrefillLens:
  case PrefillRowStarts:
    return Element::I32;
  default:
    return Element::F32;
  }
}

/// Element types of the decode-attention arguments, indexed by AttendArg.
inline Element attendElement(int arg) {
  switch (arg) {
  case AttendK:
  case AttendV:
    return Element::KV;
  case AttendPageTable:
  case AttendLens:
  case AttendWindows:
    return Element::I32;
  default:
    return Element::F32;
  }
}

/// Element types of the append arguments, indexed by AppendArg.
inline Element appendElement(int arg) {
  switch (arg) {
  case AppendK:
  case AppendV:
    return Element::KV;
  case AppendPageTable:
  case AppendPositions:
    return Element::I32;
  default:
    return Element::F32;
  }
}

/// f32 elements of a summaries buffer of `numPages` pages.
inline int64_t summaryElements(int64_t numPages, const ModelDims &m) {
  return numPages * m.kvHeads * summaryRows(m.pageSize, m.sketchBits) *
         m.headDim;
}

/// Bytes dense attention reads for one sequence of `n` tokens and one
/// key/value head: its K and V rows (`kvBytes` bytes an element).
inline int64_t denseBytes(int64_t n, int64_t headDim, int64_t kvBytes) {
  return 2 * n * headDim * kvBytes;
}

} // namespace condensate::abi

#endif // CONDENSATE_ABI_ATTENTIONABI_H
