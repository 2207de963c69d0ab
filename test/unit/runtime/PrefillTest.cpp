//===- PrefillTest.cpp - prefill attention vs. float64 --------------------===//
//
// The prefill functions condensate-expand-schedule generates for every
// layer (a static window policy's layer attends in its window and anchor,
// every other layer densely), compiled for the CPU (condensate-to-cpu) and
// the GPU (condensate-to-ptx), against reference::prefill on random paged
// caches: several sequences a call with random row counts (one row, the
// whole context, a later chunk after earlier positions, none), shuffled
// pages from a pool larger than needed, positions past each sequence's
// length and unused pages poisoned with NaN, and outputs poisoned with NaN
// before every call. Shapes cover head_dim 64/72/128/256, GQA groups 1 to
// 7 (16 on the GPU), pages 16/64 and f32/f16/bf16 storage; a model with
// sparse layers checks which layers prefill densely.
//
// Tolerance, as the decode suites (CPUAttentionTest, GPUAttentionTest):
// the relative L2 error of each (row, query head) output vector,
// ||o - o_ref|| / ||o_ref||, at most 1e-5 on the CPU with N(0, 1) keys and
// 3e-5 with N(0, 16) keys (logits spread over about +-15, where float32
// rounding of a logit is amplified by the exponential), and 1e-4 on the
// GPU (fast exp2, other summation orders). Both kernels keep the online
// softmax in float32 against the reference's float64; the worst errors
// seen were about 2e-6 on the CPU and 9e-6 on the GPU (H200, head_dim 512).
//
// Seeds are random and printed; set CONDENSATE_TEST_SEED to replay one.
// The GPU tests (label "gpu") skip, saying why, without a CUDA device.
//
//===----------------------------------------------------------------------===//
#include "../GPUTestSupport.h"
#include "../Half.h"

#include "condensate/ABI/AttentionABI.h"
#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Runtime/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

using namespace condensate;
using namespace condensate::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
/// Failures reported per layer and call before the rest are only counted.
constexpr int kMaxReported = 8;

uint32_t testSeed() {
  if (const char *s = std::getenv("CONDENSATE_TEST_SEED"))
    return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

/// Prints the seed and names it in every failure of the calling scope.
#define SEEDED_RNG(rng)                                                        \
  const uint32_t seed_ = testSeed();                                           \
  std::printf("seed %u (CONDENSATE_TEST_SEED=%u replays it)\n", seed_, seed_); \
  SCOPED_TRACE("seed " + std::to_string(seed_) +                               \
               " (set CONDENSATE_TEST_SEED to replay)");                       \
  std::mt19937 rng(seed_)

Policy windowPolicy(int64_t anchor, int64_t window, int64_t page) {
  Policy p;
  p.anchor = anchor;
  p.window = p.windowMax = window;
  p.topk = 0;
  p.pageSize = page;
  return p;
}

/// The prefill window and anchor of a layer whose key/value heads follow
/// `heads`: a static window policy shared by every head (no top-k, no
/// certificate, not adaptive) prefills in its window, every other layer
/// densely (window 0).
std::pair<int64_t, int64_t> prefillWindowOf(const std::vector<Policy> &heads) {
  const Policy &p = heads.front();
  for (const Policy &h : heads)
    if (h != p)
      return {0, 0};
  if (p.dense || p.topk > 0 || p.certified() || p.adaptive() || p.window <= 0)
    return {0, 0};
  return {p.window, p.anchor};
}

/// A model of static window layers (with and without anchors, a window of
/// 1) and a dense one; with `sparse`, also layers that prefill densely
/// although they decode sparsely (top-k, adaptive window, certificate,
/// anchor only) and one with per-head windows.
struct Model {
  ModelShape shape;
  Schedule schedule;
  std::vector<std::vector<Policy>> perLayer; ///< [layer][kv head]
  std::vector<std::pair<int64_t, int64_t>> windows; ///< prefill (W, anchor)
};

Model makeModel(int64_t hq, int64_t hkv, int64_t d, int64_t page, KVType t,
                bool sparse) {
  Model m;
  m.shape = ModelShape{0, hq, hkv, d, page, t, 0.0f};
  std::vector<Policy> kinds;
  kinds.push_back(Policy::makeDense());
  kinds.push_back(windowPolicy(0, 5, page));
  kinds.push_back(windowPolicy(1, 17, page));
  kinds.push_back(windowPolicy(4, 64, page));
  kinds.push_back(windowPolicy(2, 1, page));
  kinds.push_back(windowPolicy(3, 40, page));
  if (sparse) {
    Policy topk = windowPolicy(3, 17, page);
    topk.topk = 2 * page;
    kinds.push_back(topk);
    Policy adaptive = windowPolicy(1, 8, page);
    adaptive.windowMax = 40;
    kinds.push_back(adaptive);
    Policy cert = windowPolicy(1, 16, page);
    cert.topk = 8;
    cert.selector = Selector::Exact;
    cert.tau = 1e-3;
    cert.maxExtra = 4;
    kinds.push_back(cert);
    kinds.push_back(windowPolicy(4, 0, page)); // the anchor alone
  }
  Schedule &s = m.schedule;
  s.numLayers = static_cast<int64_t>(kinds.size());
  s.defaultPolicy = kinds[0];
  for (size_t l = 0; l < kinds.size(); ++l) {
    s.rules.push_back({{static_cast<int64_t>(l)}, {}, kinds[l]});
    m.perLayer.push_back(std::vector<Policy>(hkv, kinds[l]));
  }
  if (sparse) {
    // Per-head windows on the last layer: the last head's differs (with
    // one head, the layer is that head's window).
    const int64_t last = s.numLayers++;
    s.rules.push_back({{last}, {}, kinds[2]});
    s.rules.push_back({{last}, {hkv - 1}, kinds[1]});
    std::vector<Policy> mixed(hkv, kinds[2]);
    mixed[hkv - 1] = kinds[1];
    m.perLayer.push_back(mixed);
  }
  m.shape.numLayers = s.numLayers;
  for (const auto &heads : m.perLayer)
    m.windows.push_back(prefillWindowOf(heads));
  return m;
}

std::string windowName(std::pair<int64_t, int64_t> w) {
  if (w.first == 0)
    return "dense";
  return "window " + std::to_string(w.first) + " anchor " +
         std::to_string(w.second);
}

/// Stores `x` as the cache type at element `i` of `raw`.
void storeKV(KVType t, std::vector<uint8_t> &raw, int64_t i, float x) {
  if (t == KVType::F32) {
    std::memcpy(raw.data() + 4 * i, &x, 4);
    return;
  }
  uint16_t h = t == KVType::F16 ? floatToHalf(x) : floatToBF16(x);
  std::memcpy(raw.data() + 2 * i, &h, 2);
}

float loadKV(KVType t, const std::vector<uint8_t> &raw, int64_t i) {
  if (t == KVType::F32) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw.data() + 2 * i, 2);
  return t == KVType::F16 ? halfToFloat(h) : bf16ToFloat(h);
}

/// One prefill call's host buffers: S sequences of (length, rows).
struct Call {
  int64_t seqs = 0, rows = 0, maxPages = 0, numPages = 0;
  std::vector<int32_t> lens, rowStarts, pageTable;
  std::vector<uint8_t> kRaw, vRaw; ///< as the kernels read them
  std::vector<float> k, v;         ///< the same, as floats
  std::vector<float> q;
  double tolerance = 1e-5; ///< of the CPU (see the file comment)
  std::string label;

  PrefillArgs args(float *out) const {
    PrefillArgs a;
    a.rows = rows;
    a.seqs = seqs;
    a.maxPages = maxPages;
    a.numPages = numPages;
    a.q = q.data();
    a.kCache = kRaw.data();
    a.vCache = vRaw.data();
    a.pageTable = pageTable.data();
    a.lens = lens.data();
    a.rowStarts = rowStarts.data();
    a.out = out;
    return a;
  }

  reference::PrefillInputs inputs(const ModelShape &s) const {
    reference::PrefillInputs in;
    in.rows = rows;
    in.seqs = seqs;
    in.qHeads = s.qHeads;
    in.kvHeads = s.kvHeads;
    in.headDim = s.headDim;
    in.pageSize = s.pageSize;
    in.maxPages = maxPages;
    in.scale = s.effectiveScale();
    in.q = q.data();
    in.k = k.data();
    in.v = v.data();
    in.pageTable = pageTable.data();
    in.lens = lens.data();
    in.rowStarts = rowStarts.data();
    return in;
  }

  std::string describe() const {
    std::ostringstream os;
    os << label << " [";
    for (int64_t s = 0; s < seqs; ++s)
      os << (s ? ", " : "") << "len " << lens[s] << " rows "
         << rowStarts[s + 1] - rowStarts[s];
    os << "]";
    return os.str();
  }
};

/// A call of sequences (length, rows) in random order, their keys and
/// values N(0, keyScale^2) and N(0, 1), queries N(0, 1). The pool holds a
/// few spare pages beyond those used, in shuffled order; the page table has
/// spare columns, -1 or spare pages; every cache element past a sequence's
/// length or in a spare page is NaN.
Call makeCall(const ModelShape &s, std::vector<std::pair<int32_t, int32_t>> seqs,
              std::mt19937 &rng, float keyScale, const std::string &label) {
  std::shuffle(seqs.begin(), seqs.end(), rng);
  Call c;
  c.label = label;
  c.seqs = static_cast<int64_t>(seqs.size());
  const int64_t P = s.pageSize, d = s.headDim, hkv = s.kvHeads;
  int64_t longest = 0, used = 0;
  c.rowStarts.push_back(0);
  for (auto [n, rows] : seqs) {
    c.lens.push_back(n);
    c.rowStarts.push_back(c.rowStarts.back() + rows);
    longest = std::max<int64_t>(longest, n);
    used += (n + P - 1) / P;
  }
  c.rows = c.rowStarts.back();
  c.maxPages = (longest + P - 1) / P +
               std::uniform_int_distribution<int64_t>(0, 2)(rng);
  c.numPages = used + std::uniform_int_distribution<int64_t>(1, 6)(rng);
  std::vector<int32_t> ids(c.numPages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int64_t elems = c.numPages * hkv * P * d;
  const int bytes = kvTypeBytes(s.kvType);
  c.kRaw.assign(elems * bytes, 0xff); // NaN in every type
  c.vRaw.assign(elems * bytes, 0xff);
  c.pageTable.assign(c.seqs * c.maxPages, -1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t next = 0; // into ids
  for (int64_t b = 0; b < c.seqs; ++b) {
    const int64_t n = c.lens[b];
    for (int64_t j = 0; j < c.maxPages; ++j) {
      if (j * P < n)
        c.pageTable[b * c.maxPages + j] = ids[next++];
      else if (b % 2 == 1) // a spare column naming a (poisoned) spare page
        c.pageTable[b * c.maxPages + j] = ids[c.numPages - 1];
    }
    for (int64_t t = 0; t < n; ++t) {
      int64_t page = c.pageTable[b * c.maxPages + t / P];
      for (int64_t g = 0; g < hkv; ++g)
        for (int64_t ch = 0; ch < d; ++ch) {
          int64_t at = ((page * hkv + g) * P + t % P) * d + ch;
          storeKV(s.kvType, c.kRaw, at, keyScale * normal(rng));
          storeKV(s.kvType, c.vRaw, at, normal(rng));
        }
    }
  }
  c.k.resize(elems);
  c.v.resize(elems);
  for (int64_t i = 0; i < elems; ++i) {
    c.k[i] = loadKV(s.kvType, c.kRaw, i);
    c.v[i] = loadKV(s.kvType, c.vRaw, i);
  }
  c.q.resize(c.rows * s.qHeads * d);
  for (float &x : c.q)
    x = normal(rng);
  return c;
}

/// The calls every suite runs: (a) the mixed case, with a sequence of one
/// row, one prefilled whole, later chunks (rows < length; one beyond the
/// largest window and anchor), one with no rows and one of length 1; (b) a
/// whole prompt alone, long enough for several GPU tiles of rows and keys;
/// (c) eight random sequences with wide keys (N(0, 16): peaked softmax,
/// running maxima that move).
std::vector<Call> makeCalls(const ModelShape &s, std::mt19937 &rng,
                            int64_t prompt) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return static_cast<int32_t>(
        std::uniform_int_distribution<int64_t>(lo, hi)(rng));
  };
  const int64_t P = s.pageSize;
  std::vector<Call> calls;
  std::vector<std::pair<int32_t, int32_t>> mixed;
  mixed.push_back({uniform(1, 3 * P), 1});
  int32_t whole = uniform(1, 2 * P + 3);
  mixed.push_back({whole, whole});
  int32_t n = uniform(P + 1, 200);
  mixed.push_back({n, uniform(2, n - 1)});
  mixed.push_back({uniform(1, 100), 0});
  mixed.push_back({1, 1});
  n = uniform(130, 300);
  mixed.push_back({n, uniform(1, 80)});
  calls.push_back(makeCall(s, mixed, rng, 1.0f, "mixed"));
  int32_t m = uniform(prompt / 2, prompt);
  calls.push_back(makeCall(s, {{m, m}}, rng, 1.0f, "prompt"));
  std::vector<std::pair<int32_t, int32_t>> many;
  for (int i = 0; i < 8; ++i) {
    int32_t len = uniform(1, 160);
    many.push_back({len, uniform(0, std::min<int32_t>(len, 48))});
  }
  many[0].second = std::max(many[0].second, 1); // at least one row
  Call wide = makeCall(s, many, rng, 4.0f, "many, wide keys");
  wide.tolerance = 3e-5;
  calls.push_back(std::move(wide));
  return calls;
}

/// Comparison of one layer's output with a reference.
struct Check {
  int64_t vectors = 0, failures = 0;
  double worst = 0.0;
};

/// Compares `out` [R, Hq, D] with `ref` vector by vector (relative L2
/// error at most `tolerance`; NaN is an unwritten output).
Check compare(const ModelShape &s, const Call &c, const float *out,
              const std::vector<double> &ref, double tolerance,
              const std::string &what) {
  Check k;
  const int64_t d = s.headDim;
  for (int64_t b = 0; b < c.seqs; ++b)
    for (int64_t r = c.rowStarts[b]; r < c.rowStarts[b + 1]; ++r)
      for (int64_t h = 0; h < s.qHeads; ++h) {
        const float *o = out + (r * s.qHeads + h) * d;
        const double *w = ref.data() + (r * s.qHeads + h) * d;
        double num = 0.0, den = 0.0;
        for (int64_t ch = 0; ch < d; ++ch) {
          num += (o[ch] - w[ch]) * (o[ch] - w[ch]);
          den += w[ch] * w[ch];
        }
        double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
        ++k.vectors;
        if (!(rel <= tolerance)) { // NaN fails too
          if (++k.failures <= kMaxReported)
            ADD_FAILURE() << what << ": sequence " << b << " (len "
                          << c.lens[b] << ", rows " << c.rowStarts[b] << ".."
                          << c.rowStarts[b + 1] << ") row " << r
                          << " position "
                          << condensate::abi::prefillPosition(c.lens[b], c.rowStarts[b],
                                                  c.rowStarts[b + 1], r)
                          << " head " << h << ": relative error " << rel
                          << " > " << tolerance << " (out[0] " << o[0]
                          << ", reference " << w[0] << ")";
          continue;
        }
        k.worst = std::max(k.worst, rel);
      }
  if (k.failures > kMaxReported)
    ADD_FAILURE() << what << ": " << k.failures << " of " << k.vectors
                  << " vectors failed in all";
  return k;
}

/// The reference output of `c` for each distinct prefill window of `m`.
std::map<std::pair<int64_t, int64_t>, std::vector<double>>
references(const Model &m, const Call &c) {
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> refs;
  const reference::PrefillInputs in = c.inputs(m.shape);
  for (auto w : m.windows)
    if (!refs.count(w))
      refs[w] = reference::prefill(in, w.first, w.second);
  return refs;
}

//===----------------------------------------------------------------------===//
// The reference against the decode reference
//===----------------------------------------------------------------------===//

// Row r of a prefill is decode attention of its query over the first
// position + 1 positions: dense, or the decode window policy (anchor A,
// window W, no top-k) whose set, t < A or t >= n - W, is the prefill
// window's at n = position + 1. reference::attend never uses
// abi::prefillPosition or abi::prefillVisible, so this checks the prefill
// reference's rows, positions and masks independently.
TEST(PrefillReference, RowsAreDecodeAttentionAtTheirPositions) {
  SEEDED_RNG(rng);
  const ModelShape s{1, 6, 2, 16, 4, KVType::F32, 0.0f};
  int64_t rowsChecked = 0;
  for (int rep = 0; rep < 4; ++rep) {
    Call c = makeCall(s, {{1, 1}, {9, 9}, {23, 7}, {5, 0}, {40, 13}}, rng,
                      rep % 2 ? 4.0f : 1.0f, "reference");
    // The decode batch: one sequence per row, its context cut at the row's
    // position.
    std::vector<int32_t> table, lens;
    for (int64_t b = 0; b < c.seqs; ++b)
      for (int64_t r = c.rowStarts[b]; r < c.rowStarts[b + 1]; ++r) {
        table.insert(table.end(), c.pageTable.begin() + b * c.maxPages,
                     c.pageTable.begin() + (b + 1) * c.maxPages);
        lens.push_back(static_cast<int32_t>(
            condensate::abi::prefillPosition(c.lens[b], c.rowStarts[b],
                                 c.rowStarts[b + 1], r) +
            1));
      }
    reference::Inputs dec = reference::inputsFor(s);
    dec.batch = c.rows;
    dec.maxPages = c.maxPages;
    dec.q = c.q.data();
    dec.k = c.k.data();
    dec.v = c.v.data();
    dec.pageTable = table.data();
    dec.lens = lens.data();
    dec.numPages = c.numPages;
    for (auto [window, anchor] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 0}, {1, 0}, {5, 0}, {3, 2}, {7, 4}, {100, 1}}) {
      Policy p = window == 0 ? Policy::makeDense()
                             : windowPolicy(anchor, window, s.pageSize);
      reference::Output want =
          reference::attend(dec, std::vector<Policy>(s.kvHeads, p));
      std::vector<double> got =
          reference::prefill(c.inputs(s), window, anchor);
      ASSERT_EQ(got.size(), want.out.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want.out[i], 1e-12 * (1 + std::fabs(want.out[i])))
            << windowName({window, anchor}) << ", element " << i << " of "
            << c.describe();
      rowsChecked += c.rows;
    }
  }
  std::printf("%lld rows agree with decode attention\n",
              (long long)rowsChecked);
}

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

struct Shape {
  int64_t qHeads, kvHeads, headDim, pageSize;
  KVType kvType;
  int64_t prompt; ///< longest whole prompt of call (b)
};

std::string shapeName(const Shape &c) {
  std::ostringstream os;
  os << "hq" << c.qHeads << "_kv" << c.kvHeads << "_d" << c.headDim << "_p"
     << c.pageSize << "_" << kvTypeName(c.kvType);
  return os.str();
}

void PrintTo(const Shape &s, std::ostream *os) { *os << shapeName(s); }

// Every KV type on two shapes or more (bf16 also on the model with sparse
// layers). The whole prompts shrink as Hq * D grows: the JIT compile takes
// most of the time, the float64 reference should not.
const Shape kShapes[] = {
    {8, 2, 64, 16, KVType::F32, 300},   {9, 3, 64, 16, KVType::BF16, 300},
    {14, 2, 64, 64, KVType::F16, 300},  {4, 1, 256, 16, KVType::F32, 200},
    {32, 8, 128, 64, KVType::BF16, 160}, {7, 7, 72, 16, KVType::F16, 300},
    {28, 4, 128, 16, KVType::F32, 160},
};

/// Worst errors of a suite's checks.
struct Tally {
  int64_t vectors = 0, calls = 0;
  double worst = 0.0, worstWide = 0.0; ///< N(0, 1) and N(0, 16) keys
  void add(const Call &c, const Check &k) {
    vectors += k.vectors;
    double &w = c.tolerance > 1e-5 ? worstWide : worst;
    w = std::max(w, k.worst);
  }
};

/// Runs every layer of `program` on the calls against the reference of the
/// layer's prefill window.
void checkCPU(const Model &m, const CPUProgram &program,
              const std::vector<Call> &calls, Tally &tally) {
  const ModelShape &s = program.shape();
  for (const Call &c : calls) {
    auto refs = references(m, c);
    std::vector<float> out(c.rows * s.qHeads * s.headDim);
    ++tally.calls;
    for (int64_t l = 0; l < s.numLayers; ++l) {
      std::fill(out.begin(), out.end(), kNaN);
      Status st = program.prefill(l, c.args(out.data()));
      ASSERT_TRUE(st.ok()) << st.message();
      std::string what = "CPU layer " + std::to_string(l) + " (" +
                         windowName(m.windows[l]) + ", policy " +
                         m.perLayer[l].back().toMLIR() + "), " + c.describe();
      tally.add(c, compare(s, c, out.data(), refs.at(m.windows[l]),
                           c.tolerance, what));
    }
  }
}

class PrefillCPU : public ::testing::TestWithParam<Shape> {};

TEST_P(PrefillCPU, MatchesReferenceOnRandomCaches) {
  const Shape sh = GetParam();
  SEEDED_RNG(rng);
  Model m = makeModel(sh.qHeads, sh.kvHeads, sh.headDim, sh.pageSize,
                      sh.kvType, /*sparse=*/false);
  auto program = CPUProgram::compile(m.shape, m.schedule);
  ASSERT_TRUE(program.ok()) << program.message();
  Tally tally;
  checkCPU(m, **program, makeCalls(m.shape, rng, sh.prompt), tally);
  std::printf("%s: %lld vectors checked over %lld layers and %lld calls, "
              "worst relative error %.2e (wide keys %.2e); compiled in "
              "%.2f s\n",
              shapeName(sh).c_str(), (long long)tally.vectors,
              (long long)m.shape.numLayers, (long long)tally.calls,
              tally.worst, tally.worstWide, (*program)->info().seconds);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillCPU, ::testing::ValuesIn(kShapes),
                         [](const auto &info) { return shapeName(info.param); });

// The layers prefill as condensate-expand-schedule decides: the test's
// statement of the rule (prefillWindowOf) gives these windows, and layers
// that decode sparsely (top-k, adaptive, certified, anchor only, heads with
// different windows) match the dense reference, on the CPU.
TEST(PrefillLayers, SparseLayersPrefillDensely) {
  SEEDED_RNG(rng);
  using W = std::pair<int64_t, int64_t>;
  const std::vector<W> common = {{0, 0},  {5, 0}, {17, 1}, {64, 4}, {1, 2},
                                 {40, 3}, {0, 0}, {0, 0},  {0, 0},  {0, 0}};
  std::vector<W> wantOne = common, wantTwo = common;
  wantOne.push_back({5, 0}); // one head: the override is the layer's policy
  wantTwo.push_back({0, 0}); // heads differ: dense
  EXPECT_EQ(makeModel(4, 1, 64, 16, KVType::F32, true).windows, wantOne);
  Model m = makeModel(8, 2, 64, 16, KVType::BF16, true);
  EXPECT_EQ(m.windows, wantTwo);
  auto program = CPUProgram::compile(m.shape, m.schedule);
  ASSERT_TRUE(program.ok()) << program.message();
  Tally tally;
  checkCPU(m, **program, makeCalls(m.shape, rng, 200), tally);
  std::printf("%lld vectors checked over %lld layers, worst relative error "
              "%.2e (wide keys %.2e)\n",
              (long long)tally.vectors, (long long)m.shape.numLayers,
              tally.worst, tally.worstWide);
}

//===----------------------------------------------------------------------===//
// Bad arguments
//===----------------------------------------------------------------------===//

/// A valid call of two sequences (lengths 20 and 5, 3 and 5 rows) whose
/// output holds a sentinel that a kernel call would overwrite.
struct SmallCall {
  std::vector<float> q, out, kv;
  std::vector<int32_t> pt{0, 1, 2, -1}, lens{20, 5}, starts{0, 3, 8};
  PrefillArgs a;

  explicit SmallCall(const ModelShape &s)
      : q(8 * s.qHeads * s.headDim, 0.5f), out(q.size(), 1234.5f),
        kv(4 * s.kvHeads * s.pageSize * s.headDim, 0.25f) {
    a.rows = 8;
    a.seqs = 2;
    a.maxPages = 2;
    a.numPages = 4;
    a.q = q.data();
    a.kCache = a.vCache = kv.data();
    a.pageTable = pt.data();
    a.lens = lens.data();
    a.rowStarts = starts.data();
    a.out = out.data();
  }
  bool untouched() const {
    return std::all_of(out.begin(), out.end(),
                       [](float x) { return x == 1234.5f; });
  }
};

TEST(PrefillAPI, RejectsBadArgumentsWithoutCallingTheKernel) {
  ModelShape shape{2, 4, 2, 64, 16, KVType::F32, 0.0f};
  Schedule schedule = Schedule::uniform(2, windowPolicy(1, 8, 16));
  auto program = CPUProgram::compile(shape, schedule);
  ASSERT_TRUE(program.ok()) << program.message();
  const ModelShape &s = (*program)->shape();
  {
    SmallCall ok(s);
    Status st = (*program)->prefill(1, ok.a);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_FALSE(ok.untouched()) << "a valid call writes its output";
  }
  // Each case breaks one thing; the message names it.
  struct Case {
    const char *what;
    void (*mutate)(SmallCall &);
    const char *message;
  };
  const Case cases[] = {
      {"row_starts[0] != 0", [](SmallCall &c) { c.starts[0] = 1; },
       "layer 0: prefill: row_starts[0] = 1, expected 0"},
      {"row_starts decreasing",
       [](SmallCall &c) { c.starts = {0, 9, 8}; },
       "layer 0: prefill: row_starts decreases at 2"},
      {"last row start != rows", [](SmallCall &c) { c.starts[2] = 7; },
       "layer 0: prefill: row_starts[2] = 7, expected the row count 8"},
      {"more rows than positions",
       [](SmallCall &c) { c.starts = {0, 2, 8}; },
       "layer 0: prefill: sequence 1 has 6 rows but only 5 positions"},
      {"page out of the pool", [](SmallCall &c) { c.pt[1] = 4; },
       "layer 0: prefill: page_table[0, 1] = 4 outside [0, 4)"},
      {"negative page", [](SmallCall &c) { c.pt[2] = -1; },
       "layer 0: prefill: page_table[1, 0] = -1 outside [0, 4)"},
      {"length 0", [](SmallCall &c) { c.lens[1] = 0; },
       "layer 0: prefill: lens[1] = 0 outside [1, 32]"},
      {"length past the page table", [](SmallCall &c) { c.lens[0] = 33; },
       "layer 0: prefill: lens[0] = 33 outside [1, 32]"},
      {"no rows", [](SmallCall &c) { c.a.rows = 0; },
       "layer 0: prefill: rows, seqs, maxPages and numPages must be > 0"},
      {"null buffer", [](SmallCall &c) { c.a.rowStarts = nullptr; },
       "layer 0: prefill: a required buffer is null"},
  };
  for (const Case &k : cases) {
    SmallCall c(s);
    k.mutate(c);
    Status st = (*program)->prefill(0, c.a);
    EXPECT_FALSE(st.ok()) << k.what;
    EXPECT_EQ(st.message(), k.message) << k.what;
    EXPECT_TRUE(c.untouched()) << k.what << ": the kernel ran";
    // The same check the GPU program makes on its host copies.
    if (c.a.rowStarts) {
      Status direct = checkPrefillArgs(s, c.a, /*hostTables=*/true);
      EXPECT_FALSE(direct.ok()) << k.what;
    }
  }
  // Out-of-range layers.
  SmallCall c(s);
  for (int64_t layer : {int64_t(-1), int64_t(2)}) {
    Status st = (*program)->prefill(layer, c.a);
    EXPECT_EQ(st.message(), "prefill: layer " + std::to_string(layer) +
                                " out of range [0, 2)");
  }
  EXPECT_TRUE(c.untouched());
  // Without host tables only sizes and pointers are checked (the GPU
  // program's case): a bad row start passes, a null buffer does not.
  c.starts[0] = 1;
  EXPECT_TRUE(checkPrefillArgs(s, c.a, /*hostTables=*/false).ok());
  c.a.q = nullptr;
  EXPECT_FALSE(checkPrefillArgs(s, c.a, /*hostTables=*/false).ok());
}

//===----------------------------------------------------------------------===//
// GPU
//===----------------------------------------------------------------------===//

/// Device buffers of one call, outputs poisoned with NaN.
struct DeviceCall {
  cuda::DeviceBuffer q, k, v, pt, lens, starts, out;

  static Result<DeviceCall> upload(const Call &c) {
    DeviceCall d;
    size_t kvBytes = c.kRaw.size();
    size_t qBytes = c.q.size() * 4;
    std::vector<float> poison(c.q.size(), kNaN);
    struct Item {
      cuda::DeviceBuffer *buffer;
      const void *host;
      size_t bytes;
    } items[] = {{&d.q, c.q.data(), qBytes},
                 {&d.k, c.kRaw.data(), kvBytes},
                 {&d.v, c.vRaw.data(), kvBytes},
                 {&d.pt, c.pageTable.data(), c.pageTable.size() * 4},
                 {&d.lens, c.lens.data(), c.lens.size() * 4},
                 {&d.starts, c.rowStarts.data(), c.rowStarts.size() * 4},
                 {&d.out, poison.data(), qBytes}};
    for (Item &i : items) {
      auto b = cuda::DeviceBuffer::allocate(i.bytes);
      if (!b.ok())
        return b.status();
      *i.buffer = b.take();
      CONDENSATE_RETURN_IF_ERROR(i.buffer->copyFromHost(i.host, i.bytes));
    }
    return d;
  }

  PrefillArgs args(const Call &c) const {
    auto ptr = [](const cuda::DeviceBuffer &b) {
      return reinterpret_cast<void *>(static_cast<uintptr_t>(b.address()));
    };
    PrefillArgs a = c.args(nullptr);
    a.q = static_cast<const float *>(ptr(q));
    a.kCache = ptr(k);
    a.vCache = ptr(v);
    a.pageTable = static_cast<const int32_t *>(ptr(pt));
    a.lens = static_cast<const int32_t *>(ptr(lens));
    a.rowStarts = static_cast<const int32_t *>(ptr(starts));
    a.out = static_cast<float *>(ptr(out));
    return a;
  }
};

class PrefillGPU : public ::testing::TestWithParam<Shape> {};

TEST_P(PrefillGPU, MatchesReferenceAndCPU) {
  REQUIRE_GPU();
  const Shape sh = GetParam();
  SEEDED_RNG(rng);
  Model m = makeModel(sh.qHeads, sh.kvHeads, sh.headDim, sh.pageSize,
                      sh.kvType, /*sparse=*/true);
  auto cpu = CPUProgram::compile(m.shape, m.schedule);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  GPUCompileOptions options;
  options.cacheDir = ""; // always exercise the compiler here
  auto lib = getGPULibrary(m.shape, m.schedule, options);
  ASSERT_TRUE(lib.ok()) << lib.message();
  auto gpu = GPUProgram::load(*lib);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  ASSERT_TRUE((*gpu)->hasPrefill());
  auto stream = cuda::Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.message();
  const ModelShape &s = (*cpu)->shape();
  constexpr double kGPUTolerance = 1e-4;
  int64_t vectors = 0;
  double worst = 0.0, worstVsCPU = 0.0;
  // Longer whole prompts than the CPU suite's: many tiles of rows and keys.
  for (const Call &c : makeCalls(s, rng, 4 * sh.prompt)) {
    auto refs = references(m, c);
    auto dev = DeviceCall::upload(c);
    ASSERT_TRUE(dev.ok()) << dev.message();
    const size_t qBytes = c.q.size() * 4;
    std::vector<float> out(c.q.size()), cpuOut(c.q.size());
    std::vector<float> poison(c.q.size(), kNaN);
    for (int64_t l = 0; l < s.numLayers; ++l) {
      ASSERT_TRUE(dev->out.copyFromHost(poison.data(), qBytes).ok());
      Status st = (*gpu)->prefill(l, dev->args(c), *stream);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_TRUE(stream->synchronize().ok());
      ASSERT_TRUE(dev->out.copyToHost(out.data(), qBytes).ok());
      std::string what = "GPU layer " + std::to_string(l) + " (" +
                         windowName(m.windows[l]) + "), " + c.describe();
      Check k = compare(s, c, out.data(), refs.at(m.windows[l]),
                        kGPUTolerance, what);
      vectors += k.vectors;
      worst = std::max(worst, k.worst);
      // The CPU and GPU agree (both float32, to the same tolerance).
      std::fill(cpuOut.begin(), cpuOut.end(), kNaN);
      ASSERT_TRUE((*cpu)->prefill(l, c.args(cpuOut.data())).ok());
      std::vector<double> cpuRef(cpuOut.begin(), cpuOut.end());
      Check x = compare(s, c, out.data(), cpuRef, kGPUTolerance,
                        what + " vs CPU");
      worstVsCPU = std::max(worstVsCPU, x.worst);
    }
  }
  std::printf("GPU %s: %lld vectors checked over %lld layers, worst "
              "relative error %.2e, vs CPU %.2e\n",
              shapeName(sh).c_str(), (long long)vectors,
              (long long)s.numLayers, worst, worstVsCPU);
}

// The CPU's shapes, plus a group larger than a block's tile of query
// vectors at head_dim 256 (the group split over blocks), and head_dims
// whose key rows stream through the shared tile in two slices (320, 512).
std::vector<Shape> gpuShapes() {
  std::vector<Shape> v(std::begin(kShapes), std::end(kShapes));
  v.push_back({16, 1, 256, 16, KVType::BF16, 96});
  v.push_back({8, 2, 320, 16, KVType::F16, 64});
  v.push_back({8, 1, 512, 16, KVType::BF16, 48});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillGPU, ::testing::ValuesIn(gpuShapes()),
                         [](const auto &info) { return shapeName(info.param); });

// A call the device rejects by size alone, and a library's answer for a
// layer it does not have.
TEST(PrefillGPUAPI, RejectsBadArguments) {
  REQUIRE_GPU();
  ModelShape shape{2, 4, 2, 64, 16, KVType::F32, 0.0f};
  Schedule schedule = Schedule::uniform(2, windowPolicy(1, 8, 16));
  GPUCompileOptions options;
  options.cacheDir = "";
  auto lib = getGPULibrary(shape, schedule, options);
  ASSERT_TRUE(lib.ok()) << lib.message();
  auto gpu = GPUProgram::load(*lib);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  auto stream = cuda::Stream::create();
  ASSERT_TRUE(stream.ok());
  SmallCall c((*gpu)->shape());
  Status st = (*gpu)->prefill(2, c.a, *stream);
  EXPECT_EQ(st.message(), "prefill: layer 2 out of range [0, 2)");
  c.a.rows = 0;
  st = (*gpu)->prefill(0, c.a, *stream);
  EXPECT_EQ(st.message(),
            "layer 0: prefill: rows, seqs, maxPages and numPages must be > 0");
}

} // namespace
