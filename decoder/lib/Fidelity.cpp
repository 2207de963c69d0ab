//===- Fidelity.cpp - Measures of a sparse policy against dense decoding --===//
//
// Argmax, KL divergence of next-token distributions and the accumulator of
// the attention kernels' per-head statistics.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Fidelity.h"

#include <algorithm>
#include <cmath>

namespace condensate::decoder {

int32_t argmax(const float *logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best])
      best = i;
  return int32_t(best);
}

double klDivergence(const float *p, const float *q, int64_t n) {
  // log-softmax of each in float64: log p_i = l_i - m - log(sum exp(l - m)).
  double mp = p[0], mq = q[0];
  for (int64_t i = 1; i < n; ++i) {
    mp = std::max(mp, double(p[i]));
    mq = std::max(mq, double(q[i]));
  }
  double zp = 0.0, zq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    zp += std::exp(double(p[i]) - mp);
    zq += std::exp(double(q[i]) - mq);
  }
  const double lzp = mp + std::log(zp), lzq = mq + std::log(zq);
  double kl = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double lp = double(p[i]) - lzp, lq = double(q[i]) - lzq;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl); // Rounding can leave a tiny negative.
}

AttentionStatsAccumulator::AttentionStatsAccumulator(const Schedule &schedule,
                                                     int64_t numLayers,
                                                     int64_t qHeads,
                                                     int64_t kvHeads)
    : tau_(size_t(numLayers * qHeads), 0.0), numLayers_(numLayers),
      qHeads_(qHeads) {
  const int64_t group = qHeads / kvHeads;
  for (int64_t l = 0; l < numLayers; ++l)
    for (int64_t h = 0; h < qHeads; ++h) {
      const Policy &p = schedule.policyFor(l, h / group);
      tau_[size_t(l * qHeads + h)] = p.certified() ? p.tau : 0.0;
    }
}

void AttentionStatsAccumulator::add(const float *stats, const int32_t *lens,
                                    int64_t batch) {
  for (int64_t l = 0; l < numLayers_; ++l)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < qHeads_; ++h) {
        const float *s =
            stats + ((l * batch + b) * qHeads_ + h) * kAttentionStatsWidth;
        ++count_;
        keysRead_ += double(s[1]) / double(lens[b]);
        const double tau = tau_[size_t(l * qHeads_ + h)];
        if (tau <= 0.0)
          continue;
        ++certified_;
        extraSum_ += double(s[2]);
        // A fallback attends densely and reports eps_hat = 0: no
        // certificate was issued, so it neither passes nor enters the
        // eps_hat statistics.
        if (s[3] > 0.0f) {
          ++fallbacks_;
          continue;
        }
        if (std::isfinite(s[0])) {
          ++epsComputed_;
          epsSum_ += double(s[0]);
          epsMax_ = std::max(epsMax_, double(s[0]));
          if (double(s[0]) <= tau)
            ++passed_;
        }
      }
}

AttentionSummary AttentionStatsAccumulator::summary() const {
  AttentionSummary s;
  s.headSteps = count_;
  s.keysRead = count_ ? keysRead_ / double(count_) : 0.0;
  s.certified = certified_;
  s.epsComputed = epsComputed_;
  s.epsMean = epsComputed_ ? epsSum_ / double(epsComputed_) : 0.0;
  s.epsMax = epsMax_;
  s.passed = passed_;
  s.fallbacks = fallbacks_;
  s.extraMean = certified_ ? extraSum_ / double(certified_) : 0.0;
  return s;
}

} // namespace condensate::decoder
