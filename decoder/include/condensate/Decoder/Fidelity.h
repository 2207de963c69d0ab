//===- Fidelity.h - Measures of a sparse policy against dense decoding ----===//
//
// Next-token comparisons (argmax, KL divergence of the softmax
// distributions, negative log-likelihood), their accumulation over the
// steps of a teacher-forced run, and an accumulator of the attention
// kernels' per-head statistics: the fraction of keys read and the
// certificate's eps_hat, pass rate and dense fallbacks.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_FIDELITY_H
#define CONDENSATE_DECODER_FIDELITY_H

#include "condensate/Runtime/Attention.h"
#include "condensate/Runtime/Policy.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace condensate::decoder {

/// Index of the largest logit (the first one on ties).
int32_t argmax(const float *logits, int64_t n);

/// KL(softmax(p) || softmax(q)) in nats, computed in float64.
double klDivergence(const float *pLogits, const float *qLogits, int64_t n);

/// Negative log-likelihood in nats of `token` under softmax(logits),
/// computed in float64.
double nll(const float *logits, int64_t n, int32_t token);

/// The mean of `v` (0 if empty) and its p-quantile (0 <= p <= 1, linear
/// between order statistics; 0 if empty).
double mean(const std::vector<double> &v);
double percentile(std::vector<double> v, double p);

/// Index of the first token where two generations differ; the shorter
/// one's length when one is a prefix of the other; none if they are equal.
std::optional<int64_t> firstDivergence(const std::vector<int32_t> &a,
                                       const std::vector<int32_t> &b);

/// One teacher-forced step: a policy's next-token logits against the
/// reference's (dense) at the same position.
struct TokenComparison {
  bool agree = false;     ///< same argmax
  bool identical = false; ///< bitwise equal logits
  double kl = 0.0;        ///< KL(reference || policy), nats
};
TokenComparison compareLogits(const float *reference, const float *policy,
                              int64_t n);

/// Comparisons accumulated over the steps of teacher-forced runs.
class TeacherForcedStats {
public:
  void add(const TokenComparison &c);
  int64_t steps() const { return int64_t(kl_.size()); }
  int64_t agree() const { return agree_; }
  int64_t identical() const { return identical_; }
  /// Fractions of the steps (1 when there were none: nothing disagreed).
  double agreement() const;
  double identicalRate() const;
  double klMean() const { return mean(kl_); }
  double klMax() const;
  /// Every step's KL, in order (for quantiles).
  const std::vector<double> &kl() const { return kl_; }

private:
  int64_t agree_ = 0, identical_ = 0;
  std::vector<double> kl_;
};

/// Aggregate of decode-step attention statistics.
struct AttentionSummary {
  int64_t headSteps = 0;    ///< (layer, sequence, query head, step) entries
  /// Mean of attended positions / the positions the model's own attention
  /// sees (the context, or a local layer's window). Positions, not savings:
  /// exact top-k attends few positions and reads every key.
  double positionsAttended = 0.0;
  /// Bytes of the cache read (bytesRead()) over the bytes the model's own
  /// dense attention reads (K and V of every position it sees: the whole
  /// context, or a local layer's window), summed over all entries.
  double bytesRead = 0.0;
  /// The same share for the same decisions with a 16-bit (bf16) cache,
  /// as GPU engines keep it: K/V rows cost half, the page summaries and
  /// sketches stay f32, so fixed costs weigh twice as much. Equal to
  /// bytesRead when the cache is 16-bit already.
  double bytesReadBF16 = 0.0;
  /// Entries under a certified policy (tau > 0) whose certificate ran:
  /// not those in `ranDense`.
  int64_t certified = 0;
  /// Certified entries that did not fall back and have a finite eps_hat
  /// (a fallback attends densely and reports eps_hat = 0).
  int64_t epsComputed = 0;
  double epsMean = 0.0;     ///< over epsComputed
  double epsMax = 0.0;
  int64_t passed = 0;       ///< non-fallback certified entries, eps_hat <= tau
  int64_t fallbacks = 0;    ///< certified entries that fell back to dense
  /// Of those, the ones the early test sent to dense before the sparse pass.
  int64_t earlyFallbacks = 0;
  double extraMean = 0.0;   ///< mean extra units over certified entries
  /// Entries under a certified policy that the decoder's fallback memory
  /// ran with dense attention instead (abi::kRanDense): no certificate.
  int64_t ranDense = 0;

  double passRate() const {
    return certified ? double(passed) / double(certified) : 0.0;
  }
  double fallbackRate() const {
    return certified ? double(fallbacks) / double(certified) : 0.0;
  }
  double earlyFallbackRate() const {
    return certified ? double(earlyFallbacks) / double(certified) : 0.0;
  }
};

/// Accumulates Decoder::stats() of decode steps under one schedule.
class AttentionStatsAccumulator {
public:
  /// `shape`: the decoder's (its layers, heads, page size, KV type and
  /// sketch bits). `spans`: per layer, the positions the model's own
  /// attention sees (ModelConfig::attentionSpans; 0 or absent: the whole
  /// context), the baseline of positions and bytes read.
  AttentionStatsAccumulator(const Schedule &schedule, const ModelShape &shape,
                            std::vector<int64_t> spans = {});
  /// stats [numLayers, batch, qHeads, kAttentionStatsWidth]; lens [batch]
  /// the context length of each sequence at that step.
  void add(const float *stats, const int32_t *lens, int64_t batch);
  AttentionSummary summary() const;

private:
  std::vector<double> tau_; ///< per (layer, query head); 0 if uncertified
  std::vector<Policy> policy_; ///< per (layer, query head)
  std::vector<int64_t> spans_; ///< per layer, 0: the whole context
  ModelShape shape_, shapeBF16_;
  int64_t numLayers_, qHeads_;
  double bytesRead_ = 0.0, denseBytes_ = 0.0;
  double bytesReadBF16_ = 0.0, denseBytesBF16_ = 0.0;
  int64_t count_ = 0, certified_ = 0, epsComputed_ = 0, passed_ = 0,
          fallbacks_ = 0, earlyFallbacks_ = 0, ranDense_ = 0;
  double keysRead_ = 0.0, epsSum_ = 0.0, epsMax_ = 0.0, extraSum_ = 0.0;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_FIDELITY_H
