//===- AOTLibraryTest.cpp - an AOT kernel library without the compiler ----===//
//
// Links libCondensateRuntime alone. The library was written at build time by
// condensate-translate from spec.json; this test reads its manifest, checks
// it against the spec, rejects damaged copies with clear errors, and (on a
// GPU) appends a paged KV cache and runs every layer's decode attention
// against the float64 reference. GPU cases skip, saying why, without one.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Files.h"
#include "condensate/Runtime/GPUProgram.h"
#include "condensate/Runtime/Reference.h"

#include <gtest/gtest.h>
#include "../GPUTestSupport.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

using namespace condensate;

namespace {

/// Where the library lies: the build's, or $CONDENSATE_AOT_PREFIX (a copy
/// carried to a GPU machine).
const std::string kPrefix = std::getenv("CONDENSATE_AOT_PREFIX")
                                ? std::getenv("CONDENSATE_AOT_PREFIX")
                                : CONDENSATE_AOT_PREFIX;


/// Skips when the build had no CUDA libdevice to compile the library with.
#define REQUIRE_LIBRARY()                                                      \
  do {                                                                         \
    auto skip = readFile(kPrefix + ".skip");                                   \
    if (skip.ok())                                                             \
      GTEST_SKIP() << "the AOT library was not built: " << *skip;             \
  } while (0)

GPULibrary loadLibrary() {
  auto lib = GPULibrary::load(kPrefix + ".ptx", kPrefix + ".json");
  EXPECT_TRUE(lib.ok()) << lib.message();
  return lib.ok() ? lib.take() : GPULibrary();
}

std::string text(const std::string &path) {
  auto t = readFile(path);
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? *t : std::string();
}

TEST(AOTLibrary, ManifestMatchesItsSpec) {
  REQUIRE_LIBRARY();
  GPULibrary lib = loadLibrary();
  auto specText = readFile(CONDENSATE_AOT_SPEC);
  if (!specText.ok())
    GTEST_SKIP() << "the spec is not on this machine: " << specText.message();
  auto spec = parseModelSpecJSON(*specText, "spec.json");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(lib.shape.numLayers, spec->shape.numLayers);
  EXPECT_EQ(lib.shape.qHeads, spec->shape.qHeads);
  EXPECT_EQ(lib.shape.kvHeads, spec->shape.kvHeads);
  EXPECT_EQ(lib.shape.headDim, spec->shape.headDim);
  EXPECT_EQ(lib.shape.pageSize, spec->shape.pageSize);
  EXPECT_EQ(lib.shape.kvType, spec->shape.kvType);
  EXPECT_EQ(lib.chip, "sm_90");
  ASSERT_EQ(static_cast<int64_t>(lib.plan.layers.size()),
            spec->shape.numLayers);
  for (int64_t l = 0; l < spec->shape.numLayers; ++l)
    for (int64_t h = 0; h < spec->shape.kvHeads; ++h)
      EXPECT_EQ(lib.schedule.policyFor(l, h), spec->schedule.policyFor(l, h))
          << "layer " << l << " head " << h;
  EXPECT_TRUE(lib.schedule.policyFor(1, 0).dense);
  // Three distinct layer configurations, one append.
  EXPECT_EQ(lib.plan.functions.size(), 4u);
  EXPECT_EQ(lib.specs.size(), 3u);
}

TEST(AOTLibrary, DamagedLibrariesAreRejected) {
  REQUIRE_LIBRARY();
  std::string manifest = text(kPrefix + ".json");
  std::string ptx = text(kPrefix + ".ptx");
  ASSERT_TRUE(GPULibrary::fromManifest(manifest, ptx).ok());

  auto expectError = [](const Result<GPULibrary> &r, const std::string &what) {
    ASSERT_FALSE(r.ok()) << "accepted: " << what;
    EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
    EXPECT_FALSE(r.message().empty());
  };
  expectError(GPULibrary::fromManifest("{not json", ptx), "bad JSON");
  expectError(GPULibrary::fromManifest("{}", ptx), "empty manifest");
  expectError(GPULibrary::fromManifest(manifest, ""), "no PTX");
  // A kernel the plan launches is missing from the PTX.
  auto good = GPULibrary::fromManifest(manifest, ptx);
  ASSERT_TRUE(good.ok()) << good.message();
  const LaunchPlan &plan = good->plan;
  std::string kernel = plan.functions.at(plan.append).launches.front().kernel;
  std::string renamed = ptx;
  size_t at = renamed.find(".entry " + kernel + "(");
  ASSERT_NE(at, std::string::npos);
  renamed.replace(at, 7 + kernel.size(), ".entry other_kernel");
  auto missing = GPULibrary::fromManifest(manifest, renamed);
  expectError(missing, "a missing kernel");
  EXPECT_NE(missing.message().find(kernel), std::string::npos)
      << missing.message();
  // The model claims more layers than the plan has.
  std::string layers = manifest;
  at = layers.find("\"model\"");
  ASSERT_NE(at, std::string::npos);
  at = layers.find("\"layers\": 3", at);
  ASSERT_NE(at, std::string::npos);
  layers.replace(at, 11, "\"layers\": 4");
  expectError(GPULibrary::fromManifest(layers, ptx), "a layer count mismatch");
  // Unreadable files name the path.
  auto absent = GPULibrary::load(kPrefix + ".nope.ptx", kPrefix + ".json");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.message().find(".nope.ptx"), std::string::npos);
}

/// A device buffer holding a copy of `host`.
template <typename T> cuda::DeviceBuffer deviceCopy(const std::vector<T> &host) {
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(1, host.size() * sizeof(T)));
  EXPECT_TRUE(b.ok()) << b.message();
  if (!b.ok())
    return cuda::DeviceBuffer();
  if (!host.empty()) {
    Status st = b->upload(host);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return b.take();
}

template <typename T> const T *dptr(const cuda::DeviceBuffer &b) {
  return reinterpret_cast<const T *>(static_cast<uintptr_t>(b.address()));
}

TEST(AOTLibraryGPU, AppendAndAttendMatchTheReference) {
  REQUIRE_LIBRARY();
  REQUIRE_GPU();
  auto lib = GPULibrary::load(kPrefix + ".ptx", kPrefix + ".json");
  ASSERT_TRUE(lib.ok()) << lib.message();
  const ModelShape s = lib->shape;
  auto program =
      GPUProgram::load(std::make_shared<const GPULibrary>(lib.take()));
  ASSERT_TRUE(program.ok()) << program.message();
  auto stream = cuda::Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.message();

  // Two sequences of different lengths in interleaved pages.
  const std::vector<int32_t> lens = {203, 77};
  const int64_t batch = 2, maxPages = 16, numPages = 2 * maxPages;
  const int64_t P = s.pageSize, D = s.headDim, H = s.kvHeads;
  std::vector<int32_t> table(batch * maxPages);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < maxPages; ++j)
      table[b * maxPages + j] = static_cast<int32_t>(j * batch + (1 - b));
  std::mt19937 rng(20261201);
  std::normal_distribution<float> normal;
  std::vector<float> kHost(numPages * H * P * D), vHost(kHost.size());
  auto kDev = deviceCopy(std::vector<float>(kHost.size(), 0.0f));
  auto vDev = deviceCopy(std::vector<float>(kHost.size(), 0.0f));
  auto sumDev = deviceCopy(std::vector<float>(
      condensate::abi::summaryElements(numPages, modelDims(s)),
      std::numeric_limits<float>::quiet_NaN()));
  auto tableDev = deviceCopy(table);
  // One append call per position, both sequences while both are live.
  for (int32_t pos = 0; pos < lens[0]; ++pos) {
    std::vector<int32_t> rows, positions;
    std::vector<float> kn, vn;
    std::vector<int32_t> rowTable;
    for (int64_t b = 0; b < batch; ++b) {
      if (pos >= lens[b])
        continue;
      positions.push_back(pos);
      rowTable.insert(rowTable.end(), table.begin() + b * maxPages,
                      table.begin() + (b + 1) * maxPages);
      int32_t page = table[b * maxPages + pos / P];
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < D; ++c) {
          float k = normal(rng), v = normal(rng);
          kn.push_back(k);
          vn.push_back(v);
          size_t at = ((page * H + h) * P + pos % P) * D + c;
          kHost[at] = k;
          vHost[at] = v;
        }
    }
    auto knDev = deviceCopy(kn), vnDev = deviceCopy(vn);
    auto posDev = deviceCopy(positions), rowDev = deviceCopy(rowTable);
    AppendArgs a;
    a.batch = static_cast<int64_t>(positions.size());
    a.maxPages = maxPages;
    a.numPages = numPages;
    a.kNew = dptr<float>(knDev);
    a.vNew = dptr<float>(vnDev);
    a.kCache = const_cast<float *>(dptr<float>(kDev));
    a.vCache = const_cast<float *>(dptr<float>(vDev));
    a.pageTable = dptr<int32_t>(rowDev);
    a.positions = dptr<int32_t>(posDev);
    a.summaries = const_cast<float *>(dptr<float>(sumDev));
    Status st = (*program)->append(a, *stream);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(stream->synchronize().ok());
  }

  std::vector<float> q(batch * s.qHeads * D);
  for (float &x : q)
    x = normal(rng);
  auto qDev = deviceCopy(q), lensDev = deviceCopy(lens);
  reference::Inputs in;
  in.batch = batch;
  in.qHeads = s.qHeads;
  in.kvHeads = H;
  in.headDim = D;
  in.pageSize = P;
  in.maxPages = maxPages;
  in.scale = s.effectiveScale();
  in.q = q.data();
  in.k = kHost.data();
  in.v = vHost.data();
  in.pageTable = table.data();
  in.lens = lens.data();
  for (int64_t layer = 0; layer < s.numLayers; ++layer) {
    auto outDev = deviceCopy(std::vector<float>(
        q.size(), std::numeric_limits<float>::quiet_NaN()));
    auto statsDev = deviceCopy(std::vector<float>(
        batch * s.qHeads * condensate::abi::kStatsWidth,
        std::numeric_limits<float>::quiet_NaN()));
    AttentionArgs a;
    a.batch = batch;
    a.maxPages = maxPages;
    a.numPages = numPages;
    a.q = dptr<float>(qDev);
    a.kCache = dptr<float>(kDev);
    a.vCache = dptr<float>(vDev);
    a.pageTable = dptr<int32_t>(tableDev);
    a.lens = dptr<int32_t>(lensDev);
    a.summaries = dptr<float>(sumDev);
    a.out = const_cast<float *>(dptr<float>(outDev));
    a.stats = const_cast<float *>(dptr<float>(statsDev));
    Status st = (*program)->attend(layer, a, *stream);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(stream->synchronize().ok());
    std::vector<float> out(q.size());
    ASSERT_TRUE(outDev.download(out).ok());
    std::vector<Policy> policies;
    for (int64_t h = 0; h < H; ++h)
      policies.push_back((*program)->library().schedule.policyFor(layer, h));
    reference::Output ref = reference::attend(in, policies);
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << "layer " << layer << " at " << i;
      num += (out[i] - ref.out[i]) * (out[i] - ref.out[i]);
      den += ref.out[i] * ref.out[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5) << "layer " << layer;
  }
}

} // namespace
