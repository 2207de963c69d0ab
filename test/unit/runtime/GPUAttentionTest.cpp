//===- GPUAttentionTest.cpp - generated GPU kernels vs. float64 -----------===//
//
// The GPU suite (ctest label "gpu"): the kernels condensate-to-ptx generates,
// loaded through the driver API, against reference::attend on random paged
// caches with poisoned outputs; the GPU append against the CPU append; long
// contexts (up to 1,048,576) and large batches (64); and the GPU
// certificate against the CPU certificate on the same inputs. Every test
// skips, saying why, without a CUDA driver and device.
//
//===----------------------------------------------------------------------===//
#include "AttentionHarness.h"
#include "TestSchedules.h"
#include "../GPUTestSupport.h"

#include "condensate/Compiler/Compiler.h"
#include "condensate/Compiler/Tuner.h"
#include "condensate/Runtime/GPUProgram.h"

#include <cstdlib>

using namespace condensate;
using namespace condensate::test;

namespace {


/// Device copy of a host buffer, copied back on request.
class Mirror {
public:
  Status upload(const void *host, size_t bytes) {
    if (!host || bytes == 0)
      return Status::success();
    if (buffer.size() < bytes) {
      auto b = cuda::DeviceBuffer::allocate(bytes);
      if (!b.ok())
        return b.status();
      buffer = b.take();
    }
    return buffer.copyFromHost(host, bytes);
  }
  Status download(void *host, size_t bytes) {
    return buffer.copyToHost(host, bytes);
  }
  const void *device(const void *host) const {
    return host ? reinterpret_cast<const void *>(
                      static_cast<uintptr_t>(buffer.address()))
                : nullptr;
  }

private:
  cuda::DeviceBuffer buffer;
};

/// Appends through the CPU program (the GPU append is tested on its own)
/// and attends on the GPU, copying buffers each call.
class GPUExecutor : public Executor {
public:
  static Result<std::unique_ptr<GPUExecutor>> create(const ModelShape &shape,
                                                     const Schedule &schedule) {
    auto cpu = CPUProgram::compile(shape, schedule);
    if (!cpu.ok())
      return cpu.status();
    GPUCompileOptions options;
    options.cacheDir = ""; // always exercise the compiler here
    auto lib = getGPULibrary(shape, schedule, options);
    if (!lib.ok())
      return lib.status();
    auto gpu = GPUProgram::load(*lib);
    if (!gpu.ok())
      return gpu.status();
    auto stream = cuda::Stream::create();
    if (!stream.ok())
      return stream.status();
    std::unique_ptr<GPUExecutor> e(new GPUExecutor());
    e->cpu = *cpu;
    e->gpu = gpu.take();
    e->stream = stream.take();
    return e;
  }
  const ModelShape &shape() const override { return cpu->shape(); }
  bool isAdaptive(int64_t l) const override { return cpu->isAdaptive(l); }
  Status append(const AppendArgs &a) override { return cpu->append(a); }

  Status attend(int64_t layer, const AttentionArgs &a) override {
    const ModelShape &s = shape();
    size_t kv = a.numPages * s.kvHeads * s.pageSize * s.headDim *
                kvTypeBytes(s.kvType);
    size_t qBytes = a.batch * s.qHeads * s.headDim * 4;
    size_t stats = a.batch * s.qHeads * kAttentionStatsWidth * 4;
    CONDENSATE_RETURN_IF_ERROR(m[0].upload(a.q, qBytes));
    CONDENSATE_RETURN_IF_ERROR(m[1].upload(a.kCache, kv));
    CONDENSATE_RETURN_IF_ERROR(m[2].upload(a.vCache, kv));
    CONDENSATE_RETURN_IF_ERROR(
        m[3].upload(a.pageTable, a.batch * a.maxPages * 4));
    CONDENSATE_RETURN_IF_ERROR(m[4].upload(a.lens, a.batch * 4));
    CONDENSATE_RETURN_IF_ERROR(m[5].upload(a.windows, a.batch * 4));
    CONDENSATE_RETURN_IF_ERROR(m[6].upload(
        a.summaries, condensate::abi::summaryElements(a.numPages, modelDims(s)) * 4));
    // Poisoned outputs on the device too.
    CONDENSATE_RETURN_IF_ERROR(m[7].upload(a.out, qBytes));
    CONDENSATE_RETURN_IF_ERROR(m[8].upload(a.stats, stats));
    AttentionArgs d = a;
    d.q = static_cast<const float *>(m[0].device(a.q));
    d.kCache = m[1].device(a.kCache);
    d.vCache = m[2].device(a.vCache);
    d.pageTable = static_cast<const int32_t *>(m[3].device(a.pageTable));
    d.lens = static_cast<const int32_t *>(m[4].device(a.lens));
    d.windows = static_cast<const int32_t *>(m[5].device(a.windows));
    d.summaries = static_cast<const float *>(m[6].device(a.summaries));
    d.out = const_cast<float *>(static_cast<const float *>(m[7].device(a.out)));
    d.stats =
        const_cast<float *>(static_cast<const float *>(m[8].device(a.stats)));
    CONDENSATE_RETURN_IF_ERROR(gpu->attend(layer, d, stream));
    CONDENSATE_RETURN_IF_ERROR(stream.synchronize());
    CONDENSATE_RETURN_IF_ERROR(m[7].download(a.out, qBytes));
    return m[8].download(a.stats, stats);
  }

  GPUProgram &program() { return *gpu; }
  cuda::Stream &gpuStream() { return stream; }

private:
  GPUExecutor() = default;
  std::shared_ptr<const CPUProgram> cpu;
  std::unique_ptr<GPUProgram> gpu;
  cuda::Stream stream;
  Mirror m[9];
};

class GPUAttention : public ::testing::TestWithParam<Config> {};

TEST_P(GPUAttention, MatchesReferenceOnRandomCaches) {
  REQUIRE_GPU();
  const Config c = GetParam();
  ModelShape shape{0, c.kvHeads * c.group, c.kvHeads, c.headDim, c.pageSize,
                   c.kvType, 0.0f};
  std::vector<std::vector<Policy>> perLayer;
  Schedule schedule = testSchedule(c, perLayer);
  shape.numLayers = schedule.numLayers;
  auto exec = GPUExecutor::create(shape, schedule);
  ASSERT_TRUE(exec.ok()) << exec.message();
  std::mt19937 rng(std::random_device{}());
  int32_t P = static_cast<int32_t>(c.pageSize);
  std::vector<std::vector<int32_t>> batches = {
      {1, 3, P - 1, P + 1}, {37, 4 * P + 5, 300, 2000}};
  CheckReport total;
  for (Values mode :
       {Values::Discrete, Values::Continuous, Values::Clustered})
    for (const auto &lens : batches) {
      CacheCase cache = buildCache(**exec, lens, rng, mode);
      for (int64_t l = 0; l < schedule.numLayers; ++l) {
        CheckReport r = checkLayer(**exec, l, perLayer[l], cache, rng, 1e-4);
        total.add(r);
        // Sketch bounds carry a float slack, keys relative to each head a
        // rounded difference: they can near-tie.
        if (mode == Values::Discrete &&
            exactTiesHold(perLayer[l], shape.group())) {
          EXPECT_EQ(r.nearTieSkips, 0);
        }
      }
    }
  EXPECT_GT(total.withExtra, 0);
  EXPECT_GT(total.fallbacks, 0);
  EXPECT_GT(total.early, 0);
  // The output bound held against real errors on many heads (as on the
  // CPU, mostly the loose certificates on clustered keys).
  EXPECT_GT(total.boundChecked, 40 * shape.qHeads);
  EXPECT_GT(total.boundNontrivial, shape.qHeads); // as on the CPU
  EXPECT_GT(total.boundSkipped, 0);               // output_bound = false
  std::printf("GPU heads %lld, with extras %lld, fallbacks %lld (%lld "
              "early), worst relative error %.2e; output bound checked on %lld "
              "heads (%lld "
              "with error beyond rounding), worst error/bound %.3f, worst "
              "bound vs reference %.2e\n",
              (long long)total.heads, (long long)total.withExtra,
              (long long)total.fallbacks, (long long)total.early,
              total.worstRelError, (long long)total.boundChecked,
              (long long)total.boundNontrivial, total.worstBoundRatio,
              total.worstBoundRelDiff);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GPUAttention,
    ::testing::Values(
        Config{128, 8, 4, 64, KVType::BF16}, Config{128, 8, 4, 16, KVType::F16},
        Config{64, 3, 3, 16, KVType::F32}, Config{64, 2, 1, 64, KVType::BF16},
        Config{128, 1, 8, 16, KVType::BF16},
        Config{256, 2, 2, 16, KVType::BF16}, Config{64, 4, 2, 64, KVType::F16},
        // Gemma 3's global layers (8 / 1 / 256): the tensor-core body with
        // its ring.
        Config{256, 1, 8, 64, KVType::BF16},
        // The tensor-core body's widest group (16 query heads, every mma
        // row live) and Qwen2.5's 7.
        Config{64, 1, 16, 16, KVType::BF16},
        Config{128, 2, 7, 64, KVType::BF16},
        // A group over 8 at 128 channels: S = Q K^T and O += P V on the
        // mma tiles' 16 rows, 8-15 partly live (groups of 8 and under run
        // both products transposed).
        Config{128, 1, 12, 64, KVType::BF16},
        // head_dim that is not a power of two (Phi-3's 96, Phi-2's 80):
        // lane groups of 8 lanes and 12 or 10 elements.
        Config{96, 4, 3, 16, KVType::BF16}, Config{80, 2, 4, 64, KVType::F32},
        // The widest head the lowering takes: the certificate's value box
        // (1000 extras) keeps 4 rows of 512 channels in shared memory.
        Config{512, 1, 2, 16, KVType::BF16}),
    [](const auto &info) { return name(info.param); });

/// Uncertified token top-k of several budgets, exact and by 2- and 4-bit
/// sketches, at pages of 64 on discrete and continuous keys (2-bit sketches
/// of discrete keys make many near-equal bounds; each layer reports), with
/// one and three query heads a kv head (sketches scored on CUDA cores), 4
/// (tensor cores, two half columns a head) and 7 (one column a head).
static void checkTokenTopK(std::initializer_list<int64_t> qHeadCounts,
                           const std::vector<std::vector<int32_t>> &cases) {
  for (int64_t qHeads : qHeadCounts)
    for (int64_t bits : {2, 4}) {
      ModelShape shape{0, qHeads, 2, 64, 64, KVType::BF16, 0.0f};
      std::vector<Policy> kinds;
      for (int64_t topk : {64, 128, 133, 200})
        for (Selector sel : {Selector::Exact, Selector::Sketch}) {
          Policy p = policy(1, 8, topk, sel, 64);
          if (sel == Selector::Sketch)
            p.sketchBits = bits;
          kinds.push_back(p);
        }
      Schedule s;
      s.numLayers = static_cast<int64_t>(kinds.size());
      s.defaultPolicy = kinds[0];
      for (size_t l = 0; l < kinds.size(); ++l)
        s.rules.push_back({{static_cast<int64_t>(l)}, {}, kinds[l]});
      shape.numLayers = s.numLayers;
      auto exec = GPUExecutor::create(shape, s);
      ASSERT_TRUE(exec.ok()) << exec.message();
      std::mt19937 rng(std::random_device{}());
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        Values mode =
            ci == 0 || ci == 3 ? Values::Discrete : Values::Continuous;
        CacheCase cache = buildCache(**exec, cases[ci], rng, mode);
        for (int64_t l = 0; l < s.numLayers; ++l) {
          std::vector<Policy> kv(2, kinds[size_t(l)]);
          CheckReport r = checkLayer(**exec, l, kv, cache, rng, 1e-4);
          std::printf(
              "token top-k, %lld query heads, %lld-bit sketches, keys "
              "%d, n_max %d, layer %lld %s: heads %lld, near-ties %lld, "
              "worst %.2e\n",
              (long long)qHeads, (long long)bits, int(mode),
              *std::max_element(cases[ci].begin(), cases[ci].end()),
              (long long)l, kinds[size_t(l)].toMLIR().c_str(),
              (long long)r.heads, (long long)r.nearTieSkips, r.worstRelError);
        }
      }
    }
}

TEST(GPUAttentionTokenTopK, UncertifiedBudgets) {
  REQUIRE_GPU();
  // The last cases are long enough for the selection's prefilter (8192
  // tokens), and longer than its key cache in shared memory (56K keys on
  // sm_90); on discrete keys most of a chunk shares the threshold's
  // histogram bin.
  checkTokenTopK({2, 6, 8, 14}, {{37, 261, 300, 2000},
                                 {37, 261, 300, 2000},
                                 {70001, 1500},
                                 {9000, 20000, 300}});
}

/// The same on short caches only, for the sanitizers: the tensor-core
/// sketch kernel with half columns (4 query heads a kv head) and whole
/// ones (7), partial pages included.
TEST(GPUAttentionTokenTopK, ShortCaches) {
  REQUIRE_GPU();
  checkTokenTopK({8, 14}, {{37, 261, 300, 2000}, {37, 261, 300, 2000}});
}

/// One group through the selection's prefilter (two sequences past 8192
/// tokens, one short beside them), small enough for the sanitizers: the
/// count kernel's last block per sequence and kv head, found by a counter,
/// fixes the threshold bin the compaction reads.
TEST(GPUAttentionTokenTopK, PrefilterCaches) {
  REQUIRE_GPU();
  checkTokenTopK({14}, {{300, 9000, 17000}});
}

/// The CPU and GPU appends of one cache shape (a dense one-layer model:
/// the append is the same function whatever the policy) over caches of
/// `numPages` pages that start poisoned; start() copies the CPU's caches to
/// the device, expectSame() compares the device's with the CPU's, bit for
/// bit.
struct AppendPair {
  std::shared_ptr<const CPUProgram> cpu;
  std::unique_ptr<GPUProgram> gpu;
  cuda::Stream stream;
  std::vector<uint8_t> kc, vc, gk, gv;
  std::vector<float> sum, gsum;
  Mirror dk, dv, ds, dkn, dvn, dpt, dpos;
  int64_t numPages = 0;

  Status create(const ModelShape &shape, int64_t pages) {
    numPages = pages;
    Schedule schedule = Schedule::uniform(1, Policy::makeDense());
    auto c = CPUProgram::compile(shape, schedule);
    if (!c.ok())
      return c.status();
    cpu = *c;
    GPUCompileOptions options;
    options.cacheDir = "";
    auto lib = getGPULibrary(shape, schedule, options);
    if (!lib.ok())
      return lib.status();
    auto g = GPUProgram::load(*lib);
    if (!g.ok())
      return g.status();
    gpu = g.take();
    auto st = cuda::Stream::create();
    if (!st.ok())
      return st.status();
    stream = st.take();
    const ModelShape &s = cpu->shape();
    kc.assign(numPages * s.kvHeads * s.pageSize * s.headDim *
                  kvTypeBytes(s.kvType),
              0xff);
    vc = kc;
    sum.assign(condensate::abi::summaryElements(numPages, modelDims(s)), NAN);
    return Status::success();
  }
  /// The host arguments of an append into the CPU's caches.
  AppendArgs cpuArgs(int64_t maxPages) {
    return AppendArgs{0,         maxPages,  numPages, nullptr, nullptr,
                      kc.data(), vc.data(), nullptr,  nullptr, sum.data()};
  }
  Status start() {
    gk = kc;
    gv = vc;
    gsum = sum;
    CONDENSATE_RETURN_IF_ERROR(dk.upload(gk.data(), gk.size()));
    CONDENSATE_RETURN_IF_ERROR(dv.upload(gv.data(), gv.size()));
    return ds.upload(gsum.data(), gsum.size() * 4);
  }
  /// The rows of `a` (host buffers) appended on the device's caches.
  Status gpuAppend(const AppendArgs &a) {
    const ModelShape &s = cpu->shape();
    size_t rowBytes = a.batch * s.kvHeads * s.headDim * 4;
    CONDENSATE_RETURN_IF_ERROR(dkn.upload(a.kNew, rowBytes));
    CONDENSATE_RETURN_IF_ERROR(dvn.upload(a.vNew, rowBytes));
    CONDENSATE_RETURN_IF_ERROR(
        dpt.upload(a.pageTable, a.batch * a.maxPages * 4));
    CONDENSATE_RETURN_IF_ERROR(dpos.upload(a.positions, a.batch * 4));
    AppendArgs d = a;
    d.kNew = static_cast<const float *>(dkn.device(a.kNew));
    d.vNew = static_cast<const float *>(dvn.device(a.vNew));
    d.kCache = const_cast<void *>(dk.device(gk.data()));
    d.vCache = const_cast<void *>(dv.device(gv.data()));
    d.pageTable = static_cast<const int32_t *>(dpt.device(a.pageTable));
    d.positions = static_cast<const int32_t *>(dpos.device(a.positions));
    d.summaries =
        const_cast<float *>(static_cast<const float *>(ds.device(gsum.data())));
    CONDENSATE_RETURN_IF_ERROR(gpu->append(d, stream));
    return stream.synchronize();
  }
  void expectSame(const std::string &what) {
    ASSERT_TRUE(dk.download(gk.data(), gk.size()).ok());
    ASSERT_TRUE(dv.download(gv.data(), gv.size()).ok());
    ASSERT_TRUE(ds.download(gsum.data(), gsum.size() * 4).ok());
    EXPECT_EQ(gk, kc) << what;
    EXPECT_EQ(gv, vc) << what;
    EXPECT_EQ(0, std::memcmp(gsum.data(), sum.data(), sum.size() * 4)) << what;
  }
};

/// The GPU append writes the same bits as the CPU append, key sketches
/// (none, 2, 4 and 8 bits) included.
TEST(GPUAppend, MatchesCPUAppend) {
  REQUIRE_GPU();
  for (int64_t bits : {0, 2, 4, 8})
    for (KVType t : {KVType::F32, KVType::F16, KVType::BF16}) {
      ModelShape shape{1, 8, 2, 128, 16, t, 0.0f};
      shape.sketchBits = bits;
      int64_t batch = 5, maxPages = 8, numPages = batch * maxPages;
      AppendPair pair;
      Status made = pair.create(shape, numPages);
      ASSERT_TRUE(made.ok()) << made.message();
      ASSERT_TRUE(pair.start().ok());
      std::mt19937 rng(std::random_device{}());
      std::vector<int32_t> pt(batch * maxPages);
      for (size_t i = 0; i < pt.size(); ++i)
        pt[i] = static_cast<int32_t>((i * 7) % numPages);
      for (int32_t pos = 0; pos < 100; ++pos) {
        std::vector<float> kn(batch * 2 * 128), vn(kn.size());
        for (float &x : kn)
          x = std::normal_distribution<float>()(rng);
        for (float &x : vn)
          x = std::normal_distribution<float>()(rng);
        std::vector<int32_t> positions(batch, pos);
        AppendArgs a = pair.cpuArgs(maxPages);
        a.batch = batch;
        a.kNew = kn.data();
        a.vNew = vn.data();
        a.pageTable = pt.data();
        a.positions = positions.data();
        ASSERT_TRUE(pair.cpu->append(a).ok());
        ASSERT_TRUE(pair.gpuAppend(a).ok());
      }
      pair.expectSame(std::string(kvTypeName(t)) + ", " + std::to_string(bits) +
                      "-bit sketches");
    }
}

/// A prefill's rows in one GPU append (one block a page's run, in position
/// order) write the same bits as the CPU appending one row a call: runs
/// that start mid-page, fill pages (key sketches) and end mid-page, in
/// several sequences at once.
TEST(GPUAppend, PrefillRunsInOneCall) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  for (int64_t bits : {0, 4, 8})
    for (KVType t : {KVType::F32, KVType::BF16}) {
      ModelShape shape{1, 8, 2, 128, 16, t, 0.0f};
      shape.sketchBits = bits;
      const int64_t maxPages = 12, numPages = 4 * maxPages, kvDim = 2 * 128;
      AppendPair pair;
      Status made = pair.create(shape, numPages);
      ASSERT_TRUE(made.ok()) << made.message();
      const ModelShape &s = pair.cpu->shape();
      std::vector<int32_t> table(4 * maxPages);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      AppendArgs base = pair.cpuArgs(maxPages);
      PrefillRows before = prefillRows(s, table, maxPages,
                                       {{0, 3}, {0, 0}, {0, 40}, {0, 16}}, rng);
      for (int64_t r = 0; r < before.rows(); ++r)
        ASSERT_TRUE(pair.cpu->append(rowsArgs(base, before, r, 1, kvDim)).ok());
      ASSERT_TRUE(pair.start().ok());
      PrefillRows rows = prefillRows(
          s, table, maxPages, {{3, 150}, {0, 1}, {40, 9}, {16, 32}}, rng);
      for (int64_t r = 0; r < rows.rows(); ++r)
        ASSERT_TRUE(pair.cpu->append(rowsArgs(base, rows, r, 1, kvDim)).ok());
      ASSERT_TRUE(
          pair.gpuAppend(rowsArgs(base, rows, 0, rows.rows(), kvDim)).ok());
      pair.expectSame(std::string(kvTypeName(t)) + ", " + std::to_string(bits) +
                      "-bit sketches");
    }
}

/// The GPU computes the same certificate as the CPU: on the same caches,
/// the same extra-unit and fallback decisions and the same eps_hat (up to
/// float rounding of the two softmax sums).
TEST(GPUCertificate, MatchesCPUCertificate) {
  REQUIRE_GPU();
  ModelShape shape{5, 12, 4, 64, 16, KVType::BF16, 0.0f};
  Policy minmax = policy(1, 16, 64, Selector::BlockMinMax, 16);
  minmax.tau = 1e-2;
  minmax.maxExtra = 6;
  Policy exact = policy(1, 16, 32, Selector::Exact, 16);
  exact.tau = 1e-3;
  exact.maxExtra = 32;
  Policy mean = policy(1, 16, 64, Selector::BlockMean, 16);
  mean.tau = 1e-2;
  mean.maxExtra = 4;
  Policy sketch = policy(1, 16, 64, Selector::Sketch, 16);
  sketch.sketchBits = 4;
  sketch.tau = 1e-3;
  // Open extras (more slots than the longest context's tokens): past 64
  // the certificate walks from chunk sums and marks what it took in shared
  // memory; past 1024 select_topk ranks them a list of 1024 at a time.
  sketch.maxExtra = 32768;
  // Extras past the first list with fewer slots than a long context's
  // tokens: the long sequences go through the prefilter, whose gathered
  // candidates the later lists' kernel ranks.
  Policy capped = sketch;
  capped.maxExtra = 2048;
  Schedule s;
  s.numLayers = 5;
  s.defaultPolicy = minmax;
  s.rules = {
      {{1}, {}, exact}, {{2}, {}, mean}, {{3}, {}, sketch}, {{4}, {}, capped}};
  auto exec = GPUExecutor::create(shape, s);
  ASSERT_TRUE(exec.ok()) << exec.message();
  auto cpu = CPUProgram::compile(shape, s);
  ASSERT_TRUE(cpu.ok());
  std::mt19937 rng(std::random_device{}());
  int64_t compared = 0, sameDecision = 0, epsClose = 0, boundClose = 0,
          passes = 0, passesWithExtra = 0, sketchCompared = 0, sketchSame = 0,
          sketchPasses = 0, sketchPast1024 = 0, cappedCompared = 0,
          cappedSame = 0, cappedPast1024 = 0, nearTies = 0, sketchNearTies = 0;
  // Random keys almost never certify (the min/max bounds are loose);
  // clustered keys (tight pages, a few dominant ones) certify often, with
  // and without extras, so both outcomes are compared.
  // The last round's first two sequences are long enough for the token
  // selection's prefilter (8192 tokens, twice the slots).
  const std::vector<Values> modes = {Values::Continuous, Values::Clustered,
                                     Values::Clustered, Values::Clustered};
  for (size_t mi = 0; mi < modes.size(); ++mi) {
    Values mode = modes[mi];
    std::vector<int32_t> lens(6);
    for (int32_t &n : lens)
      n = std::uniform_int_distribution<int32_t>(50, 3000)(rng);
    if (mi + 1 == modes.size())
      for (int i = 0; i < 2; ++i)
        lens[size_t(i)] =
            std::uniform_int_distribution<int32_t>(9000, 16000)(rng);
    CacheCase c = buildCache(**exec, lens, rng, mode);
    for (int64_t l = 0; l < 5; ++l) {
      const int64_t W = kAttentionStatsWidth;
      std::vector<float> out(c.batch * 12 * 64), cpuStats(c.batch * 12 * W),
          gpuStats(c.batch * 12 * W, NAN);
      AttentionArgs a{c.batch,          c.maxPages,     c.numPages,
                      c.q.data(),       c.kRaw.data(),  c.vRaw.data(),
                      c.pageTable.data(), c.lens.data(), nullptr,
                      c.summaries.data(), out.data(),   cpuStats.data()};
      ASSERT_TRUE((*cpu)->attend(l, a).ok());
      a.stats = gpuStats.data();
      ASSERT_TRUE((*exec)->attend(l, a).ok());
      for (int64_t i = 0; i < c.batch * 12; ++i) {
        const float *x = &cpuStats[i * W], *y = &gpuStats[i * W];
        ++compared;
        bool same = x[2] == y[2] && x[3] == y[3];
        sameDecision += same;
        // A walk ends at the first extra that brings eps_hat to tau: where
        // the CPU's chain of subtractions and the GPU's chunk sums round a
        // near-tie apart, the walks end a slot or so apart (long walks
        // subtract most of U). Counted, bounded, and not compared further.
        bool nearTie =
            !same && x[3] == y[3] &&
            std::fabs(x[2] - y[2]) <= 1.0f + 1e-2f * std::max(x[2], y[2]);
        nearTies += nearTie;
        if (l == 3) {
          ++sketchCompared;
          sketchSame += same;
          sketchNearTies += nearTie;
          sketchPasses += same && x[3] == 0.0f;
          sketchPast1024 += same && x[2] > 1024.0f;
        }
        if (l == 4) {
          ++cappedCompared;
          cappedSame += same + nearTie;
          cappedPast1024 += same && x[2] > 1024.0f;
        }
        passes += same && x[3] == 0.0f;
        passesWithExtra += same && x[3] == 0.0f && x[2] > 0.0f;
        if (same) {
          epsClose += std::fabs(x[0] - y[0]) <= 1e-2 * std::max(x[0], y[0]) +
                                                    1e-9;
          // The output bound scales eps_hat by a distance both compute
          // from (nearly) the same output and the same box.
          float bx = x[kStatOutputBound], by = y[kStatOutputBound];
          boundClose += std::fabs(bx - by) <= 1.5e-2 * std::max(bx, by) + 1e-9;
        }
      }
    }
  }
  std::printf("certificate CPU vs GPU: %lld heads, same decision %lld, "
              "eps_hat within 1%% %lld, output bound within 1.5%% %lld, "
              "certified without fallback %lld (with extras %lld), walks "
              "ending a near-tie apart %lld\n",
              (long long)compared, (long long)sameDecision, (long long)epsClose,
              (long long)boundClose, (long long)passes,
              (long long)passesWithExtra, (long long)nearTies);
  std::printf("sketch certificate CPU vs GPU: %lld heads, same decision "
              "%lld (and %lld a near-tie apart), certified %lld, more than "
              "1024 extras %lld\n",
              (long long)sketchCompared, (long long)sketchSame,
              (long long)sketchNearTies, (long long)sketchPasses,
              (long long)sketchPast1024);
  std::printf("sketch with 2048 extras CPU vs GPU: %lld heads, same "
              "decision (or a near-tie apart) %lld, more than 1024 extras "
              "%lld\n",
              (long long)cappedCompared, (long long)cappedSame,
              (long long)cappedPast1024);
  EXPECT_GE(sketchSame + sketchNearTies, sketchCompared * 99 / 100);
  EXPECT_GE(cappedSame, cappedCompared * 99 / 100);
  EXPECT_GT(cappedPast1024, 0);
  EXPECT_LE(nearTies, compared / 50);
  // Walks that took extras ranked past the first list of 1024.
  EXPECT_GT(sketchPast1024, 0);
  EXPECT_GE(sameDecision + nearTies, compared * 99 / 100);
  EXPECT_GT(passes, 0);
  EXPECT_GT(passesWithExtra, 0);
  EXPECT_EQ(epsClose, sameDecision);
  EXPECT_EQ(boundClose, sameDecision);
}

// The autotuner on a small two-layer model (block selection, then dense):
// every candidate it times passed its float64 check, the winner is no
// slower than the defaults, and the record it stores is what the JIT then
// builds with.
TEST(GPUTuner, TunesAndTheJITUsesTheRecord) {
  REQUIRE_GPU();
  char dir[] = "/tmp/condensate-tuner-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ModelShape shape{2, 8, 2, 64, 16, KVType::BF16, 0.0f};
  Policy p;
  p.anchor = 1;
  p.window = p.windowMax = 32;
  p.topk = 128;
  p.pageSize = 16;
  Schedule schedule = Schedule::uniform(2, p);
  schedule.rules.push_back({{1}, {}, Policy::makeDense()});
  TuneOptions options;
  options.workloads = {{1, 4096}, {4, 1024}};
  options.replays = 3;
  options.cacheDir = dir;
  size_t calls = 0;
  options.progress = [&](size_t, size_t, const std::string &) { ++calls; };
  auto r = tuneGPULibrary(shape, schedule, options);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_GE(r->candidates.size(), 4u);
  EXPECT_GE(calls, r->candidates.size());
  EXPECT_TRUE(r->candidates[0].error.empty()) << r->candidates[0].error;
  EXPECT_EQ(r->candidates[0].tuning, GPUTuning{});
  const TuneCandidate &best = r->candidates[r->best];
  EXPECT_TRUE(best.error.empty());
  EXPECT_LE(best.score, r->candidates[0].score);
  int timed = 0;
  for (const TuneCandidate &c : r->candidates) {
    std::printf("%-56s %s", c.tuning.options().c_str(),
                c.error.empty() ? "" : c.error.c_str());
    for (double us : c.microseconds)
      std::printf(" %8.2f us", us);
    std::printf("%s\n", c.sameAs >= 0 ? " (same PTX)" : "");
    if (c.error.empty() && c.sameAs < 0) {
      ++timed;
      EXPECT_EQ(c.microseconds.size(), 2u);
      EXPECT_LE(c.worstRelError, 1e-3);
    }
  }
  EXPECT_GE(timed, 3);
  ASSERT_FALSE(r->recordPath.empty());
  GPUCompileOptions jit;
  jit.chip = r->chip;
  jit.cacheDir = dir;
  GPUCompileReport report;
  auto lib = getGPULibrary(shape, schedule, jit, &report);
  ASSERT_TRUE(lib.ok()) << lib.message();
  EXPECT_TRUE(report.tuned);
  EXPECT_EQ((*lib)->tuning, best.tuning);
  std::system((std::string("rm -rf ") + dir).c_str());
}

/// Long contexts and large batches: dense, block min/max with a 1K budget,
/// a certified policy and sketch token top-k with a 1K budget.
TEST(GPUAttentionLarge, LongContextsAndLargeBatches) {
  REQUIRE_GPU();
  const char *full = std::getenv("CONDENSATE_GPU_FULL");
  Config c{128, 8, 4, 64, KVType::BF16};
  ModelShape shape{4, 32, 8, 128, 64, KVType::BF16, 0.0f};
  Policy minmax = policy(1, 64, 960, Selector::BlockMinMax, 64);
  Policy cert = minmax;
  cert.tau = 1e-3;
  cert.maxExtra = 4;
  // Token top-k by 4-bit sketches, the benchmark's sketch policy: past
  // 8192 tokens its selection takes the prefilter.
  Policy sketch = policy(1, 64, 960, Selector::Sketch, 64);
  sketch.sketchBits = 4;
  Schedule s;
  s.numLayers = 4;
  s.defaultPolicy = Policy::makeDense();
  s.rules = {{{1}, {}, minmax}, {{2}, {}, cert}, {{3}, {}, sketch}};
  std::vector<std::vector<Policy>> perLayer = {
      std::vector<Policy>(8, Policy::makeDense()),
      std::vector<Policy>(8, minmax), std::vector<Policy>(8, cert),
      std::vector<Policy>(8, sketch)};
  auto exec = GPUExecutor::create(shape, s);
  ASSERT_TRUE(exec.ok()) << exec.message();
  std::mt19937 rng(std::random_device{}());
  std::vector<std::vector<int32_t>> cases = {std::vector<int32_t>(64, 0),
                                             {131072}};
  for (int32_t &n : cases[0])
    n = std::uniform_int_distribution<int32_t>(1, 3000)(rng);
  if (full)
    cases.push_back({1048576});
  for (const auto &lens : cases) {
    CacheCase cache = buildCache(**exec, lens, rng, Values::Discrete);
    for (int64_t l = 0; l < s.numLayers; ++l) {
      CheckReport r = checkLayer(**exec, l, perLayer[l], cache, rng, 1e-4);
      std::printf("batch %zu, n_max %d, layer %lld: worst relative error "
                  "%.2e\n",
                  lens.size(), *std::max_element(lens.begin(), lens.end()),
                  (long long)l, r.worstRelError);
      std::fflush(stdout); // visible even if a time limit stops the run
    }
  }
  (void)c;
}

} // namespace
