//===- Reference.cpp - plain float64 reference of condensate attention ----===//
//
// Written for clarity, not speed: every quantity is recomputed from the
// definitions in docs/semantics.md in float64.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Reference.h"

#include "condensate/ABI/AttentionABI.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>

namespace condensate::reference {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Seq {
  const Inputs &in;
  int64_t b;
  int64_t n;

  const float *key(int64_t g, int64_t t) const {
    int64_t page = in.pageTable[b * in.maxPages + t / in.pageSize];
    int64_t off = t % in.pageSize;
    return in.k + ((page * in.kvHeads + g) * in.pageSize + off) * in.headDim;
  }
  const float *value(int64_t g, int64_t t) const {
    int64_t page = in.pageTable[b * in.maxPages + t / in.pageSize];
    int64_t off = t % in.pageSize;
    return in.v + ((page * in.kvHeads + g) * in.pageSize + off) * in.headDim;
  }
  const float *query(int64_t h) const {
    return in.q + (b * in.qHeads + h) * in.headDim;
  }
  /// scale * q.k; `magnitude`, when given, gets scale * sum_c |q_c k_c|,
  /// the size of the terms whose float32 sum the kernels compute.
  double logit(int64_t h, int64_t g, int64_t t,
               double *magnitude = nullptr) const {
    const float *q = query(h), *k = key(g, t);
    double s = 0.0, a = 0.0;
    for (int64_t c = 0; c < in.headDim; ++c) {
      double x = static_cast<double>(q[c]) * static_cast<double>(k[c]);
      s += x;
      a += std::fabs(x);
    }
    if (magnitude)
      *magnitude = std::fabs(in.scale) * a;
    return in.scale * s;
  }
};

/// Per-channel min/max/sum of keys of one unit's positions [lo, hi).
void pageBounds(const Seq &s, int64_t g, int64_t lo, int64_t hi,
                std::vector<double> &mn, std::vector<double> &mx,
                std::vector<double> &sum) {
  int64_t d = s.in.headDim;
  mn.assign(d, kInf);
  mx.assign(d, -kInf);
  sum.assign(d, 0.0);
  for (int64_t t = lo; t < hi; ++t) {
    const float *k = s.key(g, t);
    for (int64_t c = 0; c < d; ++c) {
      mn[c] = std::min(mn[c], static_cast<double>(k[c]));
      mx[c] = std::max(mx[c], static_cast<double>(k[c]));
      sum[c] += k[c];
    }
  }
}

} // namespace

uint32_t sketchCode(double k, double lo, double hi, int64_t bits,
                    double *quotient) {
  double levels = double((int64_t(1) << bits) - 1);
  double x = hi > lo ? (k - lo) / ((hi - lo) / levels) : 0.0;
  if (quotient)
    *quotient = x;
  double r = std::floor(x + 0.5);
  r = std::clamp(r, 0.0, levels);
  return static_cast<uint32_t>(r);
}

double sketchBound(const float *q, const float *rows, int64_t d, int64_t off,
                   int64_t bits, bool full, double scale, double *magnitude,
                   double *width) {
  const float *lo = rows + abi::KMin * d, *hi = rows + abi::KMax * d;
  double s = 0.0, mag = 0.0, slack = 0.0;
  if (!full) {
    // A page still filling: its box bound, and no lower bound.
    if (width)
      *width = kInf;
    for (int64_t c = 0; c < d; ++c) {
      s += std::max(double(q[c]) * lo[c], double(q[c]) * hi[c]);
      mag += std::fabs(q[c]) * std::max(std::fabs(lo[c]), std::fabs(hi[c]));
    }
    if (magnitude)
      *magnitude = scale * mag;
    return scale * s;
  }
  double levels = double((int64_t(1) << bits) - 1);
  int64_t perWord = abi::codesPerWord(bits);
  const float *words = rows + (abi::kSketchRow0 + off / perWord) * d;
  int shift = int((off % perWord) * bits);
  double gamma = abi::sketchGamma(d);
  for (int64_t c = 0; c < d; ++c) {
    uint32_t w;
    std::memcpy(&w, &words[c], 4);
    double code = double((w >> shift) & uint32_t(levels));
    double step = (double(hi[c]) - lo[c]) / levels;
    double deq = lo[c] + code * step;
    double err = abi::sketchChannelError(lo[c], hi[c], step);
    double m = abi::sketchMagnitude(lo[c], step, bits);
    double aq = std::fabs(q[c]);
    s += q[c] * deq;
    slack += aq * err + gamma * aq * m;
    mag += aq * m;
  }
  if (magnitude)
    *magnitude = scale * mag;
  // The bound less the width is a lower bound: score_sketch's widths.
  if (width)
    *width = 2.0 * scale * slack;
  return scale * (s + slack);
}

std::vector<float> summaries(const Inputs &in, int64_t numPages,
                             int64_t sketchBits) {
  int64_t d = in.headDim;
  const int64_t R = abi::summaryRows(in.pageSize, sketchBits);
  std::vector<float> out(numPages * in.kvHeads * R * d, 0.0f);
  for (int64_t b = 0; b < in.batch; ++b) {
    int64_t n = in.lens[b];
    for (int64_t j = 0; j * in.pageSize < n; ++j) {
      int64_t page = in.pageTable[b * in.maxPages + j];
      int64_t lo = j * in.pageSize, hi = std::min(n, lo + in.pageSize);
      for (int64_t g = 0; g < in.kvHeads; ++g) {
        float *s = out.data() + (page * in.kvHeads + g) * R * d;
        for (int64_t c = 0; c < d; ++c) {
          float kmin = INFINITY, kmax = -INFINITY, ksum = 0.0f;
          float vmin = INFINITY, vmax = -INFINITY;
          for (int64_t t = lo; t < hi; ++t) {
            int64_t off = t - lo;
            const float *k =
                in.k + ((page * in.kvHeads + g) * in.pageSize + off) * d;
            const float *v =
                in.v + ((page * in.kvHeads + g) * in.pageSize + off) * d;
            kmin = std::min(kmin, k[c]);
            kmax = std::max(kmax, k[c]);
            ksum += k[c]; // float32 in append order, like append_kv
            vmin = std::min(vmin, v[c]);
            vmax = std::max(vmax, v[c]);
          }
          s[0 * d + c] = kmin;
          s[1 * d + c] = kmax;
          s[2 * d + c] = ksum;
          s[3 * d + c] = vmin;
          s[4 * d + c] = vmax;
          if (sketchBits == 0 || hi - lo < in.pageSize)
            continue;
          int64_t perWord = abi::codesPerWord(sketchBits);
          for (int64_t t = lo; t < hi; ++t) {
            int64_t off = t - lo;
            const float *k =
                in.k + ((page * in.kvHeads + g) * in.pageSize + off) * d;
            uint32_t code = sketchCode(k[c], kmin, kmax, sketchBits);
            float *word = &s[(abi::kSketchRow0 + off / perWord) * d + c];
            uint32_t w;
            std::memcpy(&w, word, 4);
            w |= code << ((off % perWord) * sketchBits);
            std::memcpy(word, &w, 4);
          }
        }
      }
    }
  }
  return out;
}

Output attend(const Inputs &in, const std::vector<Policy> &kvHeadPolicies,
              const std::vector<Decision> *decisions) {
  int64_t d = in.headDim, group = in.qHeads / in.kvHeads;
  Output result;
  result.out.assign(in.batch * in.qHeads * d, 0.0);
  result.denseOut.assign(in.batch * in.qHeads * d, 0.0);
  result.heads.resize(in.batch * in.qHeads);
  result.baseUnits.resize(in.batch * in.kvHeads);
  result.extraUnits.resize(in.batch * in.kvHeads);
  result.selectionMargin.assign(in.batch * in.kvHeads, kInf);
  result.relativeRanking.assign(in.batch * in.kvHeads, 0);

  // The sketch selector reads codes from the kernels' summaries, or from
  // float64 ones: when none are given, or when they hold sketches of
  // another width than the policies' (then they cannot be read as such).
  int64_t sketchBits = in.sketchBits;
  for (const Policy &p : kvHeadPolicies)
    if (!p.dense && p.selector == Selector::Sketch)
      sketchBits = p.sketchBits;
  int64_t R = abi::summaryRows(in.pageSize, sketchBits);
  std::vector<float> ownSummaries;
  const float *sums = in.summaries;
  if (sketchBits != 0 && (!sums || sketchBits != in.sketchBits)) {
    int64_t numPages = in.numPages;
    for (int64_t i = 0; i < in.batch * in.maxPages; ++i)
      numPages = std::max<int64_t>(numPages, in.pageTable[i] + 1);
    ownSummaries = summaries(in, numPages, sketchBits);
    sums = ownSummaries.data();
  }

  for (int64_t b = 0; b < in.batch; ++b) {
    Seq s{in, b, in.lens[b]};
    int64_t n = s.n;
    for (int64_t g = 0; g < in.kvHeads; ++g) {
      const Policy &p = kvHeadPolicies[g];
      std::vector<char> attended(n, 0);
      std::vector<int64_t> unitCount; // non-forced positions per unit
      std::vector<std::vector<double>> bound(group); // certificate bounds
      // Lower bounds of the units' logits, where the certificate takes the
      // extras' into Z (Policy::extrasLowerBounds).
      std::vector<std::vector<double>> lower(group);
      int64_t unit = p.dense ? 1 : p.unitTokens();
      int64_t w = p.window;
      if (!p.dense && p.adaptive() && in.windows)
        w = std::clamp<int64_t>(in.windows[b], p.window, p.windowMax);
      bool haveBounds = false;
      if (p.dense) {
        std::fill(attended.begin(), attended.end(), 1);
      } else {
        for (int64_t t = 0; t < n; ++t)
          if (t < p.anchor || t >= n - w)
            attended[t] = 1;
        int64_t numUnits = (n + unit - 1) / unit;
        unitCount.assign(numUnits, 0);
        for (int64_t u = 0; u < numUnits; ++u) {
          int64_t lo = std::max(u * unit, p.anchor);
          int64_t hi = std::min(std::min((u + 1) * unit, n), n - w);
          unitCount[u] = std::max<int64_t>(0, hi - lo);
        }
        bool wantScores = p.topk > 0 || p.certified();
        if (wantScores) {
          haveBounds = p.certified();
          // Ranking scores and certificate bounds per head.
          std::vector<std::vector<double>> rank(group);
          std::vector<double> mn, mx, sum;
          // The magnitude of the terms of each unit's score (sketches).
          std::vector<double> termSize(numUnits, 0.0);
          for (int64_t i = 0; i < group; ++i) {
            rank[i].assign(numUnits, -kInf);
            bound[i].assign(numUnits, -kInf);
            lower[i].assign(numUnits, -kInf);
          }
          for (int64_t u = 0; u < numUnits; ++u) {
            int64_t lo = u * unit, hi = std::min(n, lo + unit);
            if (!p.tokenGranularity())
              pageBounds(s, g, lo, hi, mn, mx, sum);
            for (int64_t i = 0; i < group; ++i) {
              int64_t h = g * group + i;
              if (p.selector == Selector::Exact) {
                double mag = 0.0;
                rank[i][u] = bound[i][u] = s.logit(h, g, u, &mag);
                termSize[u] = std::max(termSize[u], mag);
                continue;
              }
              if (p.selector == Selector::Sketch) {
                int64_t j = u / in.pageSize;
                int64_t page = in.pageTable[b * in.maxPages + j];
                bool full = (j + 1) * in.pageSize <= n;
                double mag = 0.0, width = kInf;
                rank[i][u] = bound[i][u] = sketchBound(
                    s.query(h), sums + (page * in.kvHeads + g) * R * d, d,
                    u % in.pageSize, p.sketchBits, full, in.scale, &mag,
                    &width);
                lower[i][u] = bound[i][u] - width;
                termSize[u] = std::max(termSize[u], mag);
                continue;
              }
              const float *q = s.query(h);
              double ub = 0.0, mean = 0.0;
              for (int64_t c = 0; c < d; ++c) {
                ub += std::max(q[c] * mn[c], q[c] * mx[c]);
                mean += q[c] * sum[c];
              }
              bound[i][u] = in.scale * ub;
              rank[i][u] = p.selector == Selector::BlockMean
                               ? in.scale * mean / static_cast<double>(hi - lo)
                               : bound[i][u];
            }
          }
          // Rank candidates by (group-max score desc, unit asc); with a
          // score row per query head and token units (certified), each
          // head's score less its largest over the forced positions (0
          // where that is not finite): codegen's rankRelative.
          std::vector<double> offset(group, 0.0);
          const bool relative = p.ranksRelative(group);
          result.relativeRanking[b * in.kvHeads + g] = relative;
          if (relative)
            for (int64_t i = 0; i < group; ++i) {
              double best = -kInf;
              for (int64_t t = 0; t < n; ++t)
                if (t < p.anchor || t >= n - w)
                  best = std::max(best, rank[i][t]);
              offset[i] = std::isfinite(best) ? best : 0.0;
            }
          std::vector<int64_t> order;
          std::vector<double> key(numUnits, -kInf);
          for (int64_t u = 0; u < numUnits; ++u) {
            if (unitCount[u] == 0)
              continue;
            for (int64_t i = 0; i < group; ++i)
              key[u] = std::max(key[u], rank[i][u] - offset[i]);
            order.push_back(u);
          }
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t a, int64_t c) { return key[a] > key[c]; });
          int64_t k = p.topUnits();
          std::vector<int64_t> base(order.begin(),
                                    order.begin() +
                                        std::min<int64_t>(k, order.size()));
          // The gap at the base's boundary; with the kernel's decisions,
          // also the one after the extras it took (a near-tie there lets
          // the kernel's float keys take a different unit as legally as at
          // the base's boundary: 2-bit sketch scores tie often); ranked
          // relative to each head without its decisions, every gap among
          // the extras.
          auto gap = [&](int64_t j) {
            double a = key[order[j]], c = key[order[j + 1]];
            double mag = std::max({std::fabs(a), std::fabs(c), 1e-30,
                                   termSize[order[j]], termSize[order[j + 1]]});
            for (double r : offset)
              mag = std::max(mag, std::fabs(r));
            return (a - c) / mag;
          };
          double &margin = result.selectionMargin[b * in.kvHeads + g];
          const int64_t ranked = static_cast<int64_t>(order.size());
          if (ranked > k && k > 0)
            margin = gap(k - 1);
          if (decisions) {
            const Decision &dec = (*decisions)[b * in.kvHeads + g];
            const int64_t taken = dec.extra;
            if (!dec.fallback && taken > 0 && k + taken < ranked)
              margin = std::min(margin, gap(k + taken - 1));
          } else if (relative) {
            for (int64_t j = k; j + 1 < std::min(ranked, k + p.maxExtra); ++j)
              margin = std::min(margin, gap(j));
          }
          std::vector<int64_t> extras;
          for (int64_t j = k;
               j < std::min<int64_t>(k + p.maxExtra, order.size()); ++j)
            extras.push_back(order[j]);
          std::sort(base.begin(), base.end());
          result.baseUnits[b * in.kvHeads + g] = base;
          result.extraUnits[b * in.kvHeads + g] = extras;

          auto attendUnit = [&](int64_t u) {
            for (int64_t t = u * unit; t < std::min(n, (u + 1) * unit); ++t)
              if (t >= p.anchor && t < n - w)
                attended[t] = 1;
          };
          for (int64_t u : base)
            attendUnit(u);

          // Certificate: Z over the base set, U over unselected candidates.
          std::vector<char> selected(numUnits, 0);
          for (int64_t u : base)
            selected[u] = 1;
          auto headMassTerms = [&](int64_t i, double m) {
            double sumU = 0.0;
            for (int64_t u = 0; u < numUnits; ++u)
              if (!selected[u] && unitCount[u] > 0)
                sumU += unitCount[u] * std::exp(bound[i][u] - m);
            return sumU;
          };
          std::vector<double> ms(group), zs(group);
          for (int64_t i = 0; i < group; ++i) {
            int64_t h = g * group + i;
            double m = -kInf;
            for (int64_t t = 0; t < n; ++t)
              if (attended[t])
                m = std::max(m, s.logit(h, g, t));
            double z = 0.0;
            for (int64_t t = 0; t < n; ++t)
              if (attended[t])
                z += std::exp(s.logit(h, g, t) - m);
            ms[i] = m;
            zs[i] = z;
          }
          // U / (Z + U); a bound that overflowed (inf / inf) is 1, so it
          // never certifies.
          auto epsOf = [](double u, double z) {
            double eps = z + u > 0 ? u / (z + u) : 0.0;
            return eps <= 1.0 ? eps : 1.0;
          };
          // Z grows by the lower bounds of the first `taken` extras; a term
          // that is not a finite number (an infinite width, an overflow)
          // adds nothing, as in the kernels (unitLowerMass).
          auto zWith = [&](int64_t i, int64_t taken) {
            double z = zs[i];
            if (p.extrasLowerBounds())
              for (int64_t j = 0; j < taken && j < (int64_t)extras.size();
                   ++j) {
                double t = unitCount[extras[j]] *
                           std::exp(lower[i][extras[j]] - ms[i]);
                if (std::isfinite(t))
                  z += t;
              }
            return z;
          };
          auto worstEps = [&](int64_t taken) {
            double worst = 0.0;
            for (int64_t i = 0; i < group; ++i)
              worst = std::max(worst,
                               epsOf(headMassTerms(i, ms[i]), zWith(i, taken)));
            return worst;
          };
          // The early test (precertify): a lower bound on every eps_hat the
          // certificate can reach, from the exact logits of anchor and
          // window, the base units' bounds (at least their logits) and the
          // units no extra can take in; above tau the certificate cannot
          // pass, so the kernels fall back before the sparse pass.
          double worstEarly = 0.0;
          if (p.certified()) {
            std::vector<char> kept(numUnits, 0);
            for (int64_t u : base)
              kept[u] = 1;
            for (int64_t u : extras)
              kept[u] = 1;
            for (int64_t i = 0; i < group; ++i) {
              // M: the base set's largest bound (any reference point
              // gives the same ratio; the kernels take this one).
              double m = -kInf;
              for (int64_t u : base)
                m = std::max(m, bound[i][u]);
              for (int64_t t = 0; t < n; ++t)
                if (t < p.anchor || t >= n - w)
                  m = std::max(m, bound[i][t / unit]);
              double zHat = 0.0, uLo = 0.0;
              int64_t h = g * group + i;
              for (int64_t t = 0; t < n; ++t)
                if (t < p.anchor || t >= n - w)
                  zHat += std::exp(s.logit(h, g, t) - m);
              // With the extras' lower bounds in Z, Zhat holds the extras'
              // bounds too (precertify's extras_in_z).
              const bool extrasInZ = p.extrasLowerBounds();
              for (int64_t u = 0; u < numUnits; ++u) {
                if (unitCount[u] == 0)
                  continue;
                double mass = unitCount[u] * std::exp(bound[i][u] - m);
                if (kept[u] && (extrasInZ || std::binary_search(base.begin(),
                                                                base.end(), u)))
                  zHat += mass;
                else if (!kept[u])
                  uLo += mass;
              }
              double eps = zHat + uLo > 0 ? uLo / (zHat + uLo) : 0.0;
              worstEarly = std::max(worstEarly, eps <= 1.0 ? eps : 1.0);
            }
          }
          bool early = p.certified() && p.tau > 0.0 && worstEarly > p.tau;
          int64_t extra = 0;
          bool fallback = false;
          if (p.certified()) {
            if (decisions) {
              extra = (*decisions)[b * in.kvHeads + g].extra;
              fallback = (*decisions)[b * in.kvHeads + g].fallback;
            } else if (worstEps(0) > p.tau) {
              fallback = true;
              for (size_t j = 0; j < extras.size(); ++j) {
                selected[extras[j]] = 1;
                if (worstEps(static_cast<int64_t>(j) + 1) <= p.tau) {
                  extra = static_cast<int64_t>(j) + 1;
                  fallback = false;
                  break;
                }
              }
              std::fill(selected.begin(), selected.end(), 0);
              for (int64_t u : base)
                selected[u] = 1;
            }
            for (int64_t j = 0; j < extra && j < (int64_t)extras.size(); ++j) {
              selected[extras[j]] = 1;
              attendUnit(extras[j]);
            }
            if (fallback)
              std::fill(attended.begin(), attended.end(), 1);
          }
          // Bounds reported for the final set, Z the base set's (and the
          // lower bounds of the extras taken).
          for (int64_t i = 0; i < group; ++i) {
            HeadResult &hr = result.heads[b * in.qHeads + g * group + i];
            double u = headMassTerms(i, ms[i]);
            hr.epsHat = fallback ? 0.0 : epsOf(u, zWith(i, extra));
            hr.extra = extra;
            hr.fallback = fallback;
            hr.epsEarly = worstEarly;
            hr.early = early;
          }
        }
      }
      // The value box of the pages holding an omitted position, over the
      // positions < n of each page, as the page summaries hold it.
      std::vector<double> vmin(d, kInf), vmax(d, -kInf);
      for (int64_t j = 0; j * in.pageSize < n; ++j) {
        int64_t lo = j * in.pageSize, hi = std::min(n, lo + in.pageSize);
        bool omits = false;
        for (int64_t t = lo; t < hi; ++t)
          omits |= !attended[t];
        if (!omits)
          continue;
        for (int64_t t = lo; t < hi; ++t) {
          const float *v = s.value(g, t);
          for (int64_t c = 0; c < d; ++c) {
            vmin[c] = std::min(vmin[c], static_cast<double>(v[c]));
            vmax[c] = std::max(vmax[c], static_cast<double>(v[c]));
          }
        }
      }
      // Attention over the attended set, the true omitted mass and the
      // true output error against dense attention.
      for (int64_t i = 0; i < group; ++i) {
        int64_t h = g * group + i;
        HeadResult &hr = result.heads[b * in.qHeads + h];
        if (!haveBounds)
          hr.epsHat = p.dense ? 0.0 : std::numeric_limits<double>::quiet_NaN();
        double m = -kInf;
        std::vector<double> logits(n);
        for (int64_t t = 0; t < n; ++t) {
          logits[t] = s.logit(h, g, t);
          if (attended[t])
            m = std::max(m, logits[t]);
        }
        double z = 0.0, omitted = 0.0;
        double *o = result.out.data() + (b * in.qHeads + h) * d;
        std::vector<double> dense(d, 0.0); // unnormalised, every position
        hr.attended = 0;
        for (int64_t t = 0; t < n; ++t) {
          double e = std::exp(logits[t] - m);
          const float *v = s.value(g, t);
          for (int64_t c = 0; c < d; ++c)
            dense[c] += e * v[c];
          if (!attended[t]) {
            omitted += e;
            continue;
          }
          ++hr.attended;
          z += e;
          for (int64_t c = 0; c < d; ++c)
            o[c] += e * v[c];
        }
        if (z > 0)
          for (int64_t c = 0; c < d; ++c)
            o[c] /= z;
        hr.epsTrue = (z + omitted) > 0 ? omitted / (z + omitted) : 0.0;
        double *od = result.denseOut.data() + (b * in.qHeads + h) * d;
        double far2 = 0.0, err2 = 0.0;
        for (int64_t c = 0; c < d; ++c) {
          // An empty box (nothing omitted) contributes 0.
          double far = std::max({vmax[c] - o[c], o[c] - vmin[c], 0.0});
          far2 += far * far;
          od[c] = (z + omitted) > 0 ? dense[c] / (z + omitted) : 0.0;
          err2 += (od[c] - o[c]) * (od[c] - o[c]);
        }
        hr.boxDistance = std::sqrt(far2);
        hr.outErrTrue = std::sqrt(err2);
        if (p.dense || hr.fallback)
          hr.outBound = 0.0;
        else
          hr.outBound = hr.epsHat * hr.boxDistance; // NaN stays NaN
      }
    }
  }
  return result;
}

std::vector<double> prefill(const PrefillInputs &in, int64_t window,
                            int64_t anchor) {
  const int64_t d = in.headDim, group = in.qHeads / in.kvHeads;
  std::vector<double> out(in.rows * in.qHeads * d, 0.0);
  std::vector<double> logits;
  for (int64_t s = 0; s < in.seqs; ++s) {
    const int64_t n = in.lens[s];
    const int64_t rowBegin = in.rowStarts[s], rowEnd = in.rowStarts[s + 1];
    // Key or value row of position t of this sequence, key/value head g.
    auto at = [&](const float *cache, int64_t g, int64_t t) {
      int64_t page = in.pageTable[s * in.maxPages + t / in.pageSize];
      return cache +
             ((page * in.kvHeads + g) * in.pageSize + t % in.pageSize) * d;
    };
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
      const int64_t pos = abi::prefillPosition(n, rowBegin, rowEnd, r);
      for (int64_t h = 0; h < in.qHeads; ++h) {
        const int64_t g = h / group;
        const float *q = in.q + (r * in.qHeads + h) * d;
        logits.assign(n, 0.0);
        double m = -kInf;
        for (int64_t t = 0; t < n; ++t) {
          if (!abi::prefillVisible(pos, t, window, anchor))
            continue;
          const float *k = at(in.k, g, t);
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += static_cast<double>(q[c]) * static_cast<double>(k[c]);
          logits[t] = in.scale * dot;
          m = std::max(m, logits[t]);
        }
        double z = 0.0;
        double *o = out.data() + (r * in.qHeads + h) * d;
        for (int64_t t = 0; t < n; ++t) {
          if (!abi::prefillVisible(pos, t, window, anchor))
            continue;
          const double e = std::exp(logits[t] - m);
          const float *v = at(in.v, g, t);
          z += e;
          for (int64_t c = 0; c < d; ++c)
            o[c] += e * static_cast<double>(v[c]);
        }
        // z >= 1: the row's own position is always visible.
        for (int64_t c = 0; c < d; ++c)
          o[c] /= z;
      }
    }
  }
  return out;
}

Inputs inputsFor(const ModelShape &shape) {
  Inputs in;
  in.qHeads = shape.qHeads;
  in.kvHeads = shape.kvHeads;
  in.headDim = shape.headDim;
  in.pageSize = shape.pageSize;
  in.scale = shape.effectiveScale();
  in.sketchBits = shape.sketchBits;
  return in;
}

std::vector<Decision> decisionsFromStats(const float *stats, int64_t batch,
                                         int64_t qHeads, int64_t kvHeads) {
  const int64_t W = abi::kStatsWidth, group = qHeads / kvHeads;
  std::vector<Decision> out(batch * kvHeads);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < kvHeads; ++g) {
      const float *st = stats + (b * qHeads + g * group) * W;
      out[b * kvHeads + g].extra = static_cast<int64_t>(st[abi::StatExtra]);
      out[b * kvHeads + g].fallback = st[abi::StatFallback] != 0.0f;
    }
  return out;
}

bool selectionMayDiffer(const Output &out, const Policy &policy, int64_t b,
                        int64_t g, int64_t kvHeads) {
  double margin = out.selectionMargin[b * kvHeads + g];
  bool exactTiesHold = policy.dense || (policy.selector != Selector::Sketch &&
                                        !out.relativeRanking[b * kvHeads + g]);
  return (margin > 0.0 || !exactTiesHold) && margin < 1e-5;
}

} // namespace condensate::reference
