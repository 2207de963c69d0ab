//===- AttentionHarness.h - kernels vs. the float64 reference ---*- C++ -*-===//
//
// Builds a random paged KV cache through a program's append kernel, runs one
// layer's decode attention with poisoned outputs, and compares outputs and
// stats with reference::attend evaluated on the same stored keys and values
// (and, for certified policies, on the kernel's own extra/fallback
// decisions). For certified heads it also checks the output-error bound
// (stats column 4) against the reference's and against the true error of
// the kernel's output. Shared by the CPU and GPU test suites through
// `Executor`.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_ATTENTIONHARNESS_H
#define CONDENSATE_TEST_ATTENTIONHARNESS_H

#include "../Half.h"

#include "condensate/ABI/AttentionABI.h"
#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace condensate::test {

/// Runs a program's kernels on host-visible buffers (copying as needed).
class Executor {
public:
  virtual ~Executor() = default;
  virtual const ModelShape &shape() const = 0;
  virtual bool isAdaptive(int64_t layer) const = 0;
  virtual Status append(const AppendArgs &args) = 0;
  virtual Status attend(int64_t layer, const AttentionArgs &args) = 0;
};

/// The CPU program; with `parts` > 1 every attention call runs as that many
/// calls at once on as many threads, each on its share of the kv heads
/// (CPUProgram::KVShare), as the decoder runs a step's attention.
class CPUExecutor : public Executor {
public:
  explicit CPUExecutor(std::shared_ptr<const CPUProgram> program,
                       int64_t parts = 1)
      : program(std::move(program)), parts(parts) {}
  const ModelShape &shape() const override { return program->shape(); }
  bool isAdaptive(int64_t layer) const override {
    return program->isAdaptive(layer);
  }
  Status append(const AppendArgs &a) override { return program->append(a); }
  Status attend(int64_t l, const AttentionArgs &a) override {
    if (parts == 1)
      return program->attend(l, a);
    std::vector<Status> status(static_cast<size_t>(parts));
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < parts; ++i)
      threads.emplace_back([&, i] {
        status[static_cast<size_t>(i)] = program->attend(l, a, {i, parts});
      });
    for (std::thread &t : threads)
      t.join();
    for (const Status &st : status)
      if (!st.ok())
        return st;
    return Status::success();
  }

private:
  std::shared_ptr<const CPUProgram> program;
  int64_t parts;
};

/// How keys and queries are drawn: quarter steps in [-1, 1] (exact scores,
/// many ties), N(0, 1), or clustered: one N(0, 16) key per page (exact
/// ties inside a page, so no near-ties that float32 scoring could break
/// differently) and queries per GQA group (a N(0, 1) group query plus
/// N(0, 0.1^2) per head), so page bounds are tight, a few pages carry most
/// of the softmax mass for the whole group, and certificates pass with
/// pages left out. Values are N(0, 1) throughout.
enum class Values { Discrete, Continuous, Clustered };

/// A random paged cache for a batch of sequences.
struct CacheCase {
  int64_t batch = 0, maxPages = 0, numPages = 0;
  std::vector<int32_t> lens, pageTable;
  std::vector<uint8_t> kRaw, vRaw; ///< storage bytes as the kernels see them
  std::vector<float> summaries;
  std::vector<float> q;
};

inline float storedValue(KVType t, const uint8_t *raw, int64_t i) {
  if (t == KVType::F32) {
    float f;
    std::memcpy(&f, raw + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw + 2 * i, 2);
  return t == KVType::F16 ? halfToFloat(h) : bf16ToFloat(h);
}

inline float roundToKV(KVType t, float f) {
  if (t == KVType::F16)
    return halfToFloat(floatToHalf(f));
  if (t == KVType::BF16)
    return bf16ToFloat(floatToBF16(f));
  return f;
}

inline std::vector<float> toFloats(KVType t, const std::vector<uint8_t> &raw) {
  std::vector<float> out(raw.size() / kvTypeBytes(t));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = storedValue(t, raw.data(), static_cast<int64_t>(i));
  return out;
}

inline float drawValue(std::mt19937 &rng, Values mode) {
  if (mode == Values::Discrete)
    return static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(rng)) *
           0.25f;
  return std::normal_distribution<float>(0.0f, 1.0f)(rng);
}

inline bool expectSummariesMatch(const ModelShape &s, const CacheCase &c,
                                 const std::vector<float> &kf,
                                 const std::vector<float> &vf,
                                 const std::vector<int32_t> &lensNow,
                                 int64_t pos);

/// The append arguments for one step of `positions.size()` new tokens
/// (their page-table rows in `table`) into the cache `c`.
inline AppendArgs appendArgs(CacheCase &c, const std::vector<int32_t> &table,
                             const std::vector<int32_t> &positions,
                             const std::vector<float> &kNew,
                             const std::vector<float> &vNew) {
  AppendArgs a;
  a.batch = static_cast<int64_t>(positions.size());
  a.maxPages = c.maxPages;
  a.numPages = c.numPages;
  a.kNew = kNew.data();
  a.vNew = vNew.data();
  a.kCache = c.kRaw.data();
  a.vCache = c.vRaw.data();
  a.pageTable = table.data();
  a.positions = positions.data();
  a.summaries = c.summaries.data();
  return a;
}

/// Rows of several sequences' prefills in one append (append_kv's
/// contract: a page's rows consecutive, in position order): sequence s
/// (page-table row s of `table`, `maxPages` wide) gets rows at positions
/// runs[s].first .. runs[s].first + runs[s].second - 1, its page-table row
/// repeated for each, and random keys and values.
struct PrefillRows {
  std::vector<int32_t> table, positions;
  std::vector<float> kNew, vNew;
  int64_t rows() const { return static_cast<int64_t>(positions.size()); }
};
inline PrefillRows prefillRows(
    const ModelShape &s, const std::vector<int32_t> &table, int64_t maxPages,
    const std::vector<std::pair<int32_t, int32_t>> &runs, std::mt19937 &rng) {
  PrefillRows r;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t q = 0; q < runs.size(); ++q)
    for (int32_t t = 0; t < runs[q].second; ++t) {
      r.positions.push_back(runs[q].first + t);
      r.table.insert(r.table.end(), table.begin() + q * maxPages,
                     table.begin() + (q + 1) * maxPages);
      for (int64_t i = 0; i < s.kvHeads * s.headDim; ++i) {
        r.kNew.push_back(normal(rng));
        r.vNew.push_back(normal(rng));
      }
    }
  return r;
}

/// `base` (caches, sizes) with `rows`' rows r0 .. r0 + count - 1.
inline AppendArgs rowsArgs(AppendArgs base, const PrefillRows &rows, int64_t r0,
                           int64_t count, int64_t kvDim) {
  base.batch = count;
  base.kNew = rows.kNew.data() + r0 * kvDim;
  base.vNew = rows.vNew.data() + r0 * kvDim;
  base.pageTable = rows.table.data() + r0 * base.maxPages;
  base.positions = rows.positions.data() + r0;
  return base;
}

/// Fills a cache of `lens` through the executor's append kernel and checks
/// the stored values and summaries it maintains.
inline CacheCase buildCache(Executor &exec, const std::vector<int32_t> &lens,
                            std::mt19937 &rng, Values mode,
                            int duplicateKeysEvery = 0) {
  const ModelShape &s = exec.shape();
  CacheCase c;
  c.batch = static_cast<int64_t>(lens.size());
  c.lens = lens;
  int64_t longest = *std::max_element(lens.begin(), lens.end());
  c.maxPages = (longest + s.pageSize - 1) / s.pageSize + 1;
  c.numPages = c.batch * c.maxPages + 3;
  // Shuffled page ids: the kernels must follow the page table.
  std::vector<int32_t> ids(c.numPages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.pageTable.assign(c.batch * c.maxPages, -1);
  for (int64_t i = 0; i < c.batch * c.maxPages; ++i)
    c.pageTable[i] = ids[i];
  int64_t d = s.headDim, hkv = s.kvHeads;
  int64_t elems = c.numPages * hkv * s.pageSize * d;
  int bytes = kvTypeBytes(s.kvType);
  c.kRaw.assign(elems * bytes, 0xff); // poison: NaN patterns
  c.vRaw.assign(elems * bytes, 0xff);
  c.summaries.assign(condensate::abi::summaryElements(c.numPages, modelDims(s)),
                     std::numeric_limits<float>::quiet_NaN());
  // What the appends should store, as floats, for the summary checks.
  std::vector<float> kWant(static_cast<size_t>(elems),
                           std::numeric_limits<float>::quiet_NaN());
  std::vector<float> vWant(kWant);
  // Append position by position for the sequences still growing.
  std::vector<float> firstKey(hkv * d), centre(c.batch * hkv * d);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bool summariesOk = true; // report the first mismatch only
  const int64_t shortest = *std::min_element(lens.begin(), lens.end());
  std::vector<int32_t> rows, positions;
  std::vector<float> kNew, vNew;
  for (int64_t pos = 0; pos < longest; ++pos) {
    // While every sequence grows, the page table rows are the whole table;
    // after that, the rows of the sequences still growing.
    const bool all = pos < shortest;
    rows.clear();
    positions.clear();
    kNew.clear();
    vNew.clear();
    for (int64_t b = 0; b < c.batch; ++b) {
      if (pos >= lens[b])
        continue;
      if (!all)
        rows.insert(rows.end(), c.pageTable.begin() + b * c.maxPages,
                    c.pageTable.begin() + (b + 1) * c.maxPages);
      positions.push_back(static_cast<int32_t>(pos));
      for (int64_t i = 0; i < hkv * d; ++i) {
        float kv = drawValue(rng, mode);
        if (mode == Values::Clustered) {
          float &at = centre[b * hkv * d + i];
          if (pos % s.pageSize == 0)
            at = 4.0f * normal(rng);
          kv = at;
        }
        if (duplicateKeysEvery > 0 && pos > 0 &&
            pos % duplicateKeysEvery == 0)
          kv = firstKey[i];
        if (pos == 0)
          firstKey[i] = kv;
        kNew.push_back(kv);
        vNew.push_back(std::normal_distribution<float>(0.0f, 1.0f)(rng));
      }
    }
    const std::vector<int32_t> &table = all ? c.pageTable : rows;
    AppendArgs a = appendArgs(c, table, positions, kNew, vNew);
    Status st = exec.append(a);
    EXPECT_TRUE(st.ok()) << st.message();
    // The stored values are the rounded inputs.
    for (int64_t i = 0; i < a.batch; ++i) {
      int64_t page = table[i * c.maxPages + pos / s.pageSize];
      int64_t off = pos % s.pageSize;
      for (int64_t g = 0; g < hkv; ++g)
        for (int64_t ch = 0; ch < d; ++ch) {
          int64_t at = ((page * hkv + g) * s.pageSize + off) * d + ch;
          kWant[at] = roundToKV(s.kvType, kNew[(i * hkv + g) * d + ch]);
          vWant[at] = roundToKV(s.kvType, vNew[(i * hkv + g) * d + ch]);
        }
      for (int64_t g = 0; g < hkv; ++g)
        for (int64_t ch = 0; ch < d; ch += 7) {
          int64_t at = ((page * hkv + g) * s.pageSize + off) * d + ch;
          if (storedValue(s.kvType, c.kRaw.data(), at) != kWant[at] ||
              storedValue(s.kvType, c.vRaw.data(), at) != vWant[at]) {
            ADD_FAILURE() << "append stored a wrong value at position " << pos
                          << " head " << g << " channel " << ch;
            return c;
          }
        }
    }
    // The summaries stay exact under appends: after every few appends
    // early on, then at positions 2^k - 1 (a recomputation reads every page
    // in use, so these checks cost O(n) in all), and after the last, they
    // equal the summaries recomputed from what was appended.
    if (summariesOk && ((pos < 400 && pos % 13 == 0) ||
                        (pos & (pos + 1)) == 0 || pos + 1 == longest)) {
      std::vector<int32_t> lensNow(c.batch);
      for (int64_t b = 0; b < c.batch; ++b)
        lensNow[b] = std::min<int32_t>(lens[b], static_cast<int32_t>(pos + 1));
      summariesOk = expectSummariesMatch(s, c, kWant, vWant, lensNow, pos);
    }
  }
  c.q.resize(c.batch * s.qHeads * d);
  for (float &x : c.q)
    x = drawValue(rng, mode);
  if (mode == Values::Clustered) {
    int64_t group = s.group();
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < s.qHeads; ++h)
        for (int64_t ch = 0; ch < d; ++ch) {
          int64_t lead = (b * s.qHeads + h / group * group) * d + ch;
          float &x = c.q[(b * s.qHeads + h) * d + ch];
          x = (h % group == 0 ? x : c.q[lead]) + 0.1f * normal(rng);
        }
  }
  return c;
}

inline reference::Inputs referenceInputs(const ModelShape &s,
                                         const CacheCase &c,
                                         const std::vector<float> &kf,
                                         const std::vector<float> &vf,
                                         const int32_t *windows) {
  reference::Inputs in = reference::inputsFor(s);
  in.batch = c.batch;
  in.maxPages = c.maxPages;
  in.q = c.q.data();
  in.k = kf.data();
  in.v = vf.data();
  in.pageTable = c.pageTable.data();
  in.lens = c.lens.data();
  in.windows = windows;
  in.summaries = c.summaries.data();
  in.numPages = c.numPages;
  return in;
}

/// Expects the appended summaries of `c` (sequences at `lensNow`) to equal
/// reference::summaries of `kf`/`vf` (float copies of what the appends
/// should have stored): key and value min/max exactly, key sums to float32
/// rounding. The reference reads only the pages in use.
inline bool expectSummariesMatch(const ModelShape &s, const CacheCase &c,
                                 const std::vector<float> &kf,
                                 const std::vector<float> &vf,
                                 const std::vector<int32_t> &lensNow,
                                 int64_t pos) {
  reference::Inputs in = referenceInputs(s, c, kf, vf, nullptr);
  in.lens = lensNow.data();
  std::vector<float> want =
      reference::summaries(in, c.numPages, s.sketchBits);
  const int64_t d = s.headDim,
                R = condensate::abi::summaryRows(s.pageSize, s.sketchBits);
  const int64_t perWord =
      s.sketchBits ? condensate::abi::codesPerWord(s.sketchBits) : 1;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j * s.pageSize < lensNow[b]; ++j) {
      int64_t page = c.pageTable[b * c.maxPages + j];
      bool full = (j + 1) * s.pageSize <= lensNow[b];
      for (int64_t g = 0; g < s.kvHeads; ++g) {
        const int64_t base = (page * s.kvHeads + g) * R * d;
        for (int64_t e = 0; e < condensate::abi::kSummarySlots; ++e)
          for (int64_t ch = 0; ch < d; ++ch) {
            int64_t at = base + e * d + ch;
            float got = c.summaries[at], ref = want[at];
            bool ok = e == 2 ? std::fabs(got - ref) <=
                                   1e-5f * (1.0f + std::fabs(ref)) * s.pageSize
                             : got == ref;
            if (!ok) {
              ADD_FAILURE() << "summary entry " << e << " of page " << j
                            << " (sequence " << b << ", head " << g
                            << ", channel " << ch << ") is " << got
                            << ", recomputed " << ref << " after appending "
                            << "position " << pos;
              return false;
            }
          }
        if (!full || s.sketchBits == 0)
          continue;
        // Sketch codes: equal to the float64 rounding, except that a
        // quotient within 2^-12 of a midpoint may round either way; and
        // every dequantised key within the error e_c of Sketch.h.
        const float *lo = &c.summaries[base + 0 * d];
        const float *hi = &c.summaries[base + 1 * d];
        double levels = double((1 << s.sketchBits) - 1);
        for (int64_t off = 0; off < s.pageSize; ++off)
          for (int64_t ch = 0; ch < d; ++ch) {
            int64_t w =
                base + (condensate::abi::kSketchRow0 + off / perWord) * d + ch;
            uint32_t gotW, wantW;
            std::memcpy(&gotW, &c.summaries[w], 4);
            std::memcpy(&wantW, &want[w], 4);
            int shift = int((off % perWord) * s.sketchBits);
            uint32_t mask = uint32_t(levels);
            int64_t got = (gotW >> shift) & mask, ref = (wantW >> shift) & mask;
            int64_t t = j * s.pageSize + off;
            float key = kf[((page * s.kvHeads + g) * s.pageSize + off) * d + ch];
            double quotient = 0.0;
            reference::sketchCode(key, lo[ch], hi[ch], s.sketchBits, &quotient);
            double frac = quotient - std::floor(quotient);
            bool nearMid = std::fabs(frac - 0.5) < 1.0 / 4096.0;
            double step = (double(hi[ch]) - lo[ch]) / levels;
            double deq = lo[ch] + double(got) * step;
            double err = condensate::abi::sketchChannelError(lo[ch], hi[ch], step);
            if ((got != ref && !(nearMid && std::abs(got - ref) == 1)) ||
                std::fabs(double(key) - deq) > err) {
              ADD_FAILURE() << "sketch code of position " << t
                            << " (sequence " << b << ", head " << g
                            << ", channel " << ch << ") is " << got
                            << ", float64 " << ref << " (key " << key
                            << ", box [" << lo[ch] << ", " << hi[ch]
                            << "]) after appending position " << pos;
              return false;
            }
          }
      }
    }
  return true;
}

/// Whether the early test's bound eps_early is too near tau for a kernel and
/// the float64 reference to agree on it: the kernels add the certificate's
/// margin to every term and round the anchor and window logits in float32,
/// so they may differ by 2% (+1e-7, as eps_hat is compared).
inline bool earlyNearTau(double epsEarly, double tau) {
  return std::fabs(epsEarly - tau) <= 0.02 * tau + 1e-7;
}

/// Summary of one comparison.
struct CheckReport {
  int64_t heads = 0;
  int64_t nearTieSkips = 0;
  double worstRelError = 0.0;
  double worstEpsRatio = 0.0; ///< max epsTrue / eps_hat over checked heads
  int64_t withExtra = 0, fallbacks = 0, certified = 0;
  /// Fallbacks the certificate's early test decided before the sparse pass.
  int64_t early = 0;
  /// Certified, non-fallback heads whose output error was checked against
  /// the bound, and those among them with an error over 100 times the float
  /// rounding allowance (where the check has something to hold).
  int64_t boundChecked = 0, boundNontrivial = 0;
  /// Certified heads of policies without the output bound (output_bound =
  /// false), whose stats column 4 was checked to be NaN.
  int64_t boundSkipped = 0;
  /// max ||o_dense - o_kernel|| / bound over the nontrivial checked heads.
  double worstBoundRatio = 0.0;
  /// max |bound_kernel - eps_hat_kernel * distance_reference| / that.
  double worstBoundRelDiff = 0.0;

  void add(const CheckReport &r) {
    heads += r.heads;
    certified += r.certified;
    withExtra += r.withExtra;
    fallbacks += r.fallbacks;
    early += r.early;
    boundChecked += r.boundChecked;
    boundNontrivial += r.boundNontrivial;
    boundSkipped += r.boundSkipped;
    worstRelError = std::max(worstRelError, r.worstRelError);
    worstEpsRatio = std::max(worstEpsRatio, r.worstEpsRatio);
    worstBoundRatio = std::max(worstBoundRatio, r.worstBoundRatio);
    worstBoundRelDiff = std::max(worstBoundRelDiff, r.worstBoundRelDiff);
  }
};

/// Runs layer `layer` on `c` and compares with the reference.
inline CheckReport checkLayer(Executor &exec, int64_t layer,
                              const std::vector<Policy> &kvPolicies,
                              const CacheCase &c, std::mt19937 &rng,
                              double tolerance = 1e-5) {
  const ModelShape &s = exec.shape();
  CheckReport report;
  int64_t d = s.headDim, hq = s.qHeads, group = s.group();
  std::vector<int32_t> windows(c.batch, 0);
  bool adaptive = exec.isAdaptive(layer);
  if (adaptive) {
    const Policy *p = nullptr;
    for (const Policy &kp : kvPolicies)
      if (kp.adaptive())
        p = &kp;
    for (int32_t &w : windows)
      w = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(
          std::max<int64_t>(0, p->window - 8), p->windowMax + 8)(rng));
  }
  std::vector<float> out(c.batch * hq * d,
                         std::numeric_limits<float>::quiet_NaN());
  const int64_t W = kAttentionStatsWidth;
  std::vector<float> stats(c.batch * hq * W,
                           std::numeric_limits<float>::quiet_NaN());
  AttentionArgs a;
  a.batch = c.batch;
  a.maxPages = c.maxPages;
  a.numPages = c.numPages;
  a.q = c.q.data();
  a.kCache = c.kRaw.data();
  a.vCache = c.vRaw.data();
  a.pageTable = c.pageTable.data();
  a.lens = c.lens.data();
  a.windows = adaptive ? windows.data() : nullptr;
  a.summaries = c.summaries.data();
  a.out = out.data();
  a.stats = stats.data();
  Status st = exec.attend(layer, a);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok())
    return report;

  std::vector<float> kf = toFloats(s.kvType, c.kRaw);
  std::vector<float> vf = toFloats(s.kvType, c.vRaw);
  auto in = referenceInputs(s, c, kf, vf, adaptive ? windows.data() : nullptr);
  // The kernel's certificate decisions, to evaluate the reference on them.
  std::vector<reference::Decision> decisions =
      reference::decisionsFromStats(stats.data(), c.batch, hq, s.kvHeads);
  reference::Output ref = reference::attend(in, kvPolicies, &decisions);

  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      int64_t g = h / group;
      const Policy &p = kvPolicies[g];
      std::ostringstream where;
      where << "layer " << layer << " b=" << b << " h=" << h
            << " n=" << c.lens[b] << " policy " << p.toMLIR();
      // Near-ties at the selection boundary may legally differ.
      if (reference::selectionMayDiffer(ref, p, b, g, s.kvHeads)) {
        ++report.nearTieSkips;
        continue;
      }
      ++report.heads;
      const float *o = out.data() + (b * hq + h) * d;
      const double *r = ref.out.data() + (b * hq + h) * d;
      double num = 0.0, den = 0.0;
      bool unwritten = false;
      for (int64_t ch = 0; ch < d; ++ch) {
        unwritten |= std::isnan(o[ch]);
        num += (o[ch] - r[ch]) * (o[ch] - r[ch]);
        den += r[ch] * r[ch];
      }
      if (unwritten) {
        ADD_FAILURE() << where.str() << ": output left unwritten (NaN)";
        continue;
      }
      double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
      report.worstRelError = std::max(report.worstRelError, rel);
      EXPECT_LE(rel, tolerance) << where.str();
      const float *st0 = stats.data() + (b * hq + h) * W;
      const reference::HeadResult &hr = ref.heads[b * hq + h];
      EXPECT_EQ(static_cast<int64_t>(st0[1]), hr.attended) << where.str();
      if (p.dense) {
        EXPECT_EQ(st0[0], 0.0f) << where.str();
        EXPECT_EQ(st0[kStatOutputBound], 0.0f) << where.str();
        continue;
      }
      if (std::isnan(hr.epsHat)) {
        EXPECT_TRUE(std::isnan(st0[0])) << where.str();
        EXPECT_TRUE(std::isnan(st0[kStatOutputBound])) << where.str();
        continue;
      }
      // The certificate bounds the true omitted mass of the attended set.
      if (std::isnan(st0[0])) {
        ADD_FAILURE() << where.str() << ": eps_hat not written";
        continue;
      }
      EXPECT_GE(static_cast<double>(st0[0]), hr.epsTrue) << where.str();
      if (hr.epsTrue > 0)
        report.worstEpsRatio =
            std::max(report.worstEpsRatio, hr.epsTrue / st0[0]);
      // And agrees with the reference's bound up to the safety margin.
      double hat = hr.epsHat;
      EXPECT_LE(std::fabs(st0[0] - hat), 0.02 * hat + 1e-7)
          << where.str() << " kernel " << st0[0] << " reference " << hat;
      if (p.certified()) {
        ++report.certified;
        report.withExtra += st0[2] > 0;
        report.fallbacks += st0[3] != 0;
        // The early test agrees with the reference's, up to rounding at
        // tau.
        const bool early =
            st0[kStatFallback] == ::condensate::abi::kFellBackEarly;
        report.early += early;
        if (p.tau > 0.0 && !earlyNearTau(hr.epsEarly, p.tau)) {
          EXPECT_EQ(early, hr.early)
              << where.str() << " reference eps_early " << hr.epsEarly;
        }
      }
      if (p.certified() && st0[3] == 0.0f) {
        EXPECT_LE(st0[0], p.tau * (1 + 1e-3) + 1e-12) << where.str();
      }
      // A policy without the output bound leaves its column NaN.
      if (!p.outputBound) {
        EXPECT_TRUE(std::isnan(st0[kStatOutputBound])) << where.str();
        ++report.boundSkipped;
        continue;
      }
      if (st0[kStatFallback] != 0.0f) {
        EXPECT_EQ(st0[kStatOutputBound], 0.0f) << where.str();
        continue;
      }
      // The output-error bound: the kernel's eps_hat times the distance from
      // its output to the far corner of the omitted-value box. (a) It agrees
      // with the reference's distance (exact o_S, same boxes) times the
      // kernel's eps_hat, which carries the certificate's safety margin
      // (checked against the reference's eps_hat above).
      double bound = st0[kStatOutputBound];
      if (std::isnan(bound)) {
        ADD_FAILURE() << where.str() << ": output bound not written";
        continue;
      }
      double want = static_cast<double>(st0[0]) * hr.boxDistance;
      double boundDiff = std::fabs(bound - want);
      EXPECT_LE(boundDiff, 1e-3 * want + 1e-9)
          << where.str() << " kernel bound " << bound << " reference " << want
          << " (eps_hat " << st0[0] << ", distance " << hr.boxDistance
          << ", reference bound " << hr.outBound << ")";
      if (want > 0)
        report.worstBoundRelDiff =
            std::max(report.worstBoundRelDiff, boundDiff / want);
      EXPECT_LE(std::fabs(bound - hr.outBound), 0.02 * hr.outBound + 1e-7)
          << where.str() << " kernel bound " << bound << " reference "
          << hr.outBound;
      // The bound of exact arithmetic holds for the exact outputs.
      EXPECT_LE(hr.outErrTrue, hr.outBound * (1 + 1e-9) + 1e-12)
          << where.str() << " reference bound " << hr.outBound;
      // (b) It bounds the true error of the kernel's output, up to float
      // rounding of that output.
      const double *od = ref.denseOut.data() + (b * hq + h) * d;
      double err2 = 0.0, dense2 = 0.0;
      for (int64_t ch = 0; ch < d; ++ch) {
        err2 += (od[ch] - o[ch]) * (od[ch] - o[ch]);
        dense2 += od[ch] * od[ch];
      }
      // The bound holds for the exact output over the attended set; the
      // kernel's output differs from it by its float32 rounding (checked
      // against `tolerance` above), which the bound's distance term sees
      // at most (1 + eps_hat) times.
      double err = std::sqrt(err2);
      double rounding =
          1e-6 * std::sqrt(dense2) + (1.0 + st0[0]) * std::sqrt(num);
      ++report.boundChecked;
      EXPECT_LE(err, bound * (1 + 1e-4) + rounding)
          << where.str() << ": ||o_dense - o|| = " << err << " above the bound "
          << bound << " (eps_hat " << st0[0] << ", true eps " << hr.epsTrue
          << ", float32 rounding of o " << std::sqrt(num) << ")";
      if (err > 100 * rounding) {
        ++report.boundNontrivial;
        report.worstBoundRatio = std::max(report.worstBoundRatio, err / bound);
      }
    }
  return report;
}

} // namespace condensate::test

#endif // CONDENSATE_TEST_ATTENTIONHARNESS_H
