//===- Fidelity.cpp - Measures of a sparse policy against dense decoding --===//
//
// Argmax, KL divergence and NLL of next-token distributions, teacher-forced
// comparisons and the accumulator of the attention kernels' per-head
// statistics.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

double nll(const float *logits, int64_t n, int32_t token) {
  double m = logits[0];
  for (int64_t i = 1; i < n; ++i)
    m = std::max(m, double(logits[i]));
  double z = 0.0;
  for (int64_t i = 0; i < n; ++i)
    z += std::exp(double(logits[i]) - m);
  return m + std::log(z) - double(logits[token]);
}

double mean(const std::vector<double> &v) {
  double s = 0.0;
  for (double x : v)
    s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const size_t i = size_t(pos);
  const double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

std::optional<int64_t> firstDivergence(const std::vector<int32_t> &a,
                                       const std::vector<int32_t> &b) {
  const size_t common = std::min(a.size(), b.size());
  for (size_t i = 0; i < common; ++i)
    if (a[i] != b[i])
      return int64_t(i);
  if (a.size() != b.size())
    return int64_t(common);
  return std::nullopt;
}

TokenComparison compareLogits(const float *reference, const float *policy,
                              int64_t n) {
  TokenComparison c;
  c.agree = argmax(reference, n) == argmax(policy, n);
  c.identical = std::memcmp(reference, policy, size_t(n) * sizeof(float)) == 0;
  c.kl = klDivergence(reference, policy, n);
  return c;
}

void TeacherForcedStats::add(const TokenComparison &c) {
  agree_ += c.agree;
  identical_ += c.identical;
  kl_.push_back(c.kl);
}

double TeacherForcedStats::agreement() const {
  return steps() ? double(agree_) / double(steps()) : 1.0;
}

double TeacherForcedStats::identicalRate() const {
  return steps() ? double(identical_) / double(steps()) : 1.0;
}

double TeacherForcedStats::klMax() const {
  return kl_.empty() ? 0.0 : *std::max_element(kl_.begin(), kl_.end());
}

AttentionStatsAccumulator::AttentionStatsAccumulator(const Schedule &schedule,
                                                     const ModelShape &shape,
                                                     std::vector<int64_t> spans)
    : tau_(size_t(shape.numLayers * shape.qHeads), 0.0),
      policy_(size_t(shape.numLayers * shape.qHeads)), spans_(std::move(spans)),
      shape_(shape), shapeBF16_(shape), numLayers_(shape.numLayers),
      qHeads_(shape.qHeads) {
  shapeBF16_.kvType = KVType::BF16;
  spans_.resize(size_t(numLayers_), 0);
  const int64_t group = shape.group();
  for (int64_t l = 0; l < numLayers_; ++l)
    for (int64_t h = 0; h < qHeads_; ++h) {
      const Policy &p = schedule.policyFor(l, h / group);
      tau_[size_t(l * qHeads_ + h)] = p.certified() ? p.tau : 0.0;
      policy_[size_t(l * qHeads_ + h)] = p;
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
        const int64_t span = spans_[size_t(l)];
        const int64_t seen = span > 0 ? std::min<int64_t>(span, lens[b])
                                      : int64_t(lens[b]);
        keysRead_ += double(s[1]) / double(seen);
        const Policy &policy = policy_[size_t(l * qHeads_ + h)];
        bytesRead_ += bytesRead(policy, shape_, lens[b], s);
        bytesReadBF16_ += bytesRead(policy, shapeBF16_, lens[b], s);
        for (auto [dense, type] : {std::pair{&denseBytes_, shape_.kvType},
                                   std::pair{&denseBytesBF16_, KVType::BF16}})
          *dense +=
              double(abi::denseBytes(seen, shape_.headDim, kvTypeBytes(type))) /
              double(shape_.group());
        const double tau = tau_[size_t(l * qHeads_ + h)];
        if (tau <= 0.0)
          continue;
        if (s[3] == abi::kRanDense) {
          ++ranDense_;
          continue;
        }
        ++certified_;
        extraSum_ += double(s[2]);
        // A fallback attends densely and reports eps_hat = 0: no
        // certificate was issued, so it neither passes nor enters the
        // eps_hat statistics.
        if (s[3] > 0.0f) {
          ++fallbacks_;
          earlyFallbacks_ += s[3] == abi::kFellBackEarly;
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
  s.positionsAttended = count_ ? keysRead_ / double(count_) : 0.0;
  s.bytesRead = denseBytes_ > 0.0 ? bytesRead_ / denseBytes_ : 0.0;
  s.bytesReadBF16 =
      denseBytesBF16_ > 0.0 ? bytesReadBF16_ / denseBytesBF16_ : 0.0;
  s.certified = certified_;
  s.epsComputed = epsComputed_;
  s.epsMean = epsComputed_ ? epsSum_ / double(epsComputed_) : 0.0;
  s.epsMax = epsMax_;
  s.passed = passed_;
  s.fallbacks = fallbacks_;
  s.earlyFallbacks = earlyFallbacks_;
  s.extraMean = certified_ ? extraSum_ / double(certified_) : 0.0;
  s.ranDense = ranDense_;
  return s;
}

} // namespace condensate::decoder
