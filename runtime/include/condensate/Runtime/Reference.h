//===- Reference.h - plain float64 reference of condensate attention -*- C++ -*-===//
//
// A direct, loop-by-loop float64 implementation of decode attention under a
// policy: the condensate set (anchor, window, top-k units by each selector,
// GQA group max), the certificate with extra units and dense fallback, its
// output-error bound, the true omitted softmax mass and the true output
// error. Tests compare the generated kernels with it; the fidelity study
// uses its true omitted mass.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_REFERENCE_H
#define CONDENSATE_RUNTIME_REFERENCE_H

#include "condensate/Runtime/Policy.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace condensate::reference {

/// Decode-attention inputs, with keys and values as stored (already rounded
/// to the cache type) in float. Layouts as in the dialect:
/// q [B, Hq, D]; k, v [NP, Hkv, P, D]; pageTable [B, MP]; lens [B];
/// windows [B] (may be empty).
struct Inputs {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, headDim = 0, pageSize = 0;
  int64_t maxPages = 0;
  double scale = 0.0;
  const float *q = nullptr;
  const float *k = nullptr;
  const float *v = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *lens = nullptr;
  const int32_t *windows = nullptr;
  /// The summaries as the kernels hold them ([NP, Hkv, summaryRows(P,
  /// sketchBits), D]); the `sketch` selector reads its codes from here. When
  /// null it uses summaries(*this, ...) instead.
  const float *summaries = nullptr;
  int64_t numPages = 0;
  int64_t sketchBits = 0;
};

/// Inputs with the fields a model shape gives (heads, head_dim, page size,
/// the attention scale and the sketch bits); batch and buffers are the
/// caller's.
Inputs inputsFor(const ModelShape &shape);

/// Decisions a certified kernel took for one (sequence, kv head), used to
/// evaluate the reference on the same set.
struct Decision {
  int64_t extra = 0;
  bool fallback = false;
};

struct HeadResult {
  double epsTrue = 0.0; ///< exact omitted softmax mass of the attended set
  double epsHat = 0.0;  ///< certificate bound (no safety margin); NaN if none
  int64_t attended = 0; ///< positions in the attended set
  int64_t extra = 0;
  bool fallback = false;
  /// The early test's lower bound on the certificate's best eps_hat (its
  /// group's worst head; docs/CERTIFICATE.md "Deciding early"): when it
  /// exceeds tau the group falls back before any exact key is read. NaN
  /// where no certificate runs.
  double epsEarly = std::numeric_limits<double>::quiet_NaN();
  /// Whether the early test fired (then the certificate fails: a fallback).
  bool early = false;
  /// sqrt(sum_c max(Vmax_c - o_c, o_c - Vmin_c, 0)^2) for the exact output
  /// o over the attended set and the per-channel box [Vmin, Vmax] of the
  /// values of every page holding an omitted position (the box the kernels
  /// build from the page summaries); 0 when nothing is omitted.
  double boxDistance = 0.0;
  /// The output-error bound epsHat * boxDistance (stats column 4): 0 for
  /// dense heads and after a fallback, NaN where epsHat is.
  double outBound = 0.0;
  /// The true ||o_dense - o||_2 of the exact outputs.
  double outErrTrue = 0.0;
};

struct Output {
  std::vector<double> out;          ///< [B, Hq, D]
  std::vector<double> denseOut;     ///< [B, Hq, D] over every position
  std::vector<HeadResult> heads;    ///< [B, Hq]
  std::vector<std::vector<int64_t>> baseUnits; ///< [B * Hkv], increasing
  std::vector<std::vector<int64_t>> extraUnits; ///< [B * Hkv], ranked
  /// The gap between the scores of the last base unit and the first unit
  /// left out, relative to their magnitude (for sketch bounds, at least the
  /// magnitude of the terms summed, see sketchBound), per (b, g); +inf
  /// without one.
  /// A kernel computing scores in float32 may legally disagree on near-ties.
  /// With the kernel's decisions, also the gap after the extras a head that
  /// did not fall back took; ranked relative to each head
  /// (`relativeRanking`) without decisions, the least gap among the extras.
  std::vector<double> selectionMargin;
  /// Per (b, g): units ranked by each head's score less its largest over
  /// the forced positions (token units, certified, a GQA group: codegen's
  /// rankRelative), where ties between heads' keys are not exact.
  std::vector<char> relativeRanking;
};

/// The certificate decisions a kernel took, read from its stats output
/// ([B, Hq, abi::kStatsWidth]; the first head of each group carries them),
/// as attend() takes them: [B * Hkv].
std::vector<Decision> decisionsFromStats(const float *stats, int64_t batch,
                                         int64_t qHeads, int64_t kvHeads);

/// Whether a kernel computing in float32 may legally select other units
/// than the reference for (sequence b, kv head g) under `policy`: a
/// near-tie at the selection boundary (relative margin below 1e-5). Exact
/// ties (margin 0) are broken by unit order on every target, except
/// between sketch bounds, which are float32 sums each target rounds its
/// own way, and between keys ranked relative to each head (differences
/// each target rounds).
bool selectionMayDiffer(const Output &out, const Policy &policy, int64_t b,
                        int64_t g, int64_t kvHeads);

/// Runs `policyFor(g)` for every key/value head g. With `decisions`
/// ([B * Hkv]) certified heads use those extra counts and fallback flags
/// instead of deciding themselves.
Output attend(const Inputs &in,
              const std::vector<Policy> &kvHeadPolicies,
              const std::vector<Decision> *decisions = nullptr);

/// Page summaries as append_kv maintains them: [NP, Hkv, summaryRows(P,
/// sketchBits), D] with key min, max, sum and value min, max over the
/// positions < lens of every page referenced by the page table, and for
/// every full page the key sketch of AttentionABI.h with codes rounded in
/// float64 (entries of other pages are 0).
std::vector<float> summaries(const Inputs &in, int64_t numPages,
                             int64_t sketchBits = 0);

/// The float64 sketch code of `k` against the box [lo, hi] with `bits`
/// bits; `quotient` receives (k - lo) / step (for near-midpoint checks).
uint32_t sketchCode(double k, double lo, double hi, int64_t bits,
                    double *quotient = nullptr);

/// The per-token upper bound on the scaled logit that the `sketch` selector
/// ranks by, in float64, from summaries rows `rows` of one page (key box
/// and words) for query q: the dequantised dot product plus the slack of
/// codegen's Sketch.h (full page), or the page box bound (`full` false).
/// `magnitude`, when given, receives scale * sum_c |q_c| m_c (m_c =
/// abi::sketchMagnitude; for a page not full, max(|lo_c|, |hi_c|)): the
/// size of the terms whose float32 rounding a kernel's bound carries.
/// `width`, when given, receives twice the scaled slack (score_sketch's
/// page width: the bound less it is a lower bound on the logit), +inf for
/// a page not full.
double sketchBound(const float *q, const float *rows, int64_t headDim,
                   int64_t off, int64_t bits, bool full, double scale,
                   double *magnitude = nullptr, double *width = nullptr);

/// Prefill-attention inputs (abi::PrefillArg), with keys and values as
/// stored (already rounded to the cache type) in float: q [R, Hq, D]; k, v
/// [NP, Hkv, P, D]; pageTable [S, MP]; lens [S]; rowStarts [S + 1] (the rows
/// of sequence s are [rowStarts[s], rowStarts[s + 1])).
struct PrefillInputs {
  int64_t rows = 0, seqs = 0, qHeads = 0, kvHeads = 0, headDim = 0,
          pageSize = 0;
  int64_t maxPages = 0;
  double scale = 0.0;
  const float *q = nullptr;
  const float *k = nullptr;
  const float *v = nullptr;
  const int32_t *pageTable = nullptr;
  const int32_t *lens = nullptr;
  const int32_t *rowStarts = nullptr;
};

/// Prefill attention in float64: out [R, Hq, D], row r of sequence s at
/// abi::prefillPosition attending the keys abi::prefillVisible admits in a
/// layer of prefill `window` (0: dense) and `anchor`, query head h reading
/// key/value head h / (Hq / Hkv). The inputs must satisfy
/// checkPrefillArgs.
std::vector<double> prefill(const PrefillInputs &in, int64_t window,
                            int64_t anchor);

} // namespace condensate::reference

#endif // CONDENSATE_RUNTIME_REFERENCE_H
