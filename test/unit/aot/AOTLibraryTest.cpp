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
#include <cstdio>
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
/// The fat library's index (sm_80 and sm_90 images): the build's, or
/// $CONDENSATE_AOT_FAT.
const std::string kFat = std::getenv("CONDENSATE_AOT_FAT")
                             ? std::getenv("CONDENSATE_AOT_FAT")
                             : CONDENSATE_AOT_FAT;


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
  // Three distinct layer configurations, one prefill function (no layer
  // is a static window), one append.
  EXPECT_EQ(lib.plan.functions.size(), 5u);
  ASSERT_EQ(static_cast<int64_t>(lib.plan.prefill.size()),
            spec->shape.numLayers);
  for (const std::string &fn : lib.plan.prefill)
    EXPECT_EQ(fn, lib.plan.prefill.front());
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
  // The prefill list: absent in manifests written before prefill existed
  // (accepted, the library has none); of the wrong length, rejected.
  at = manifest.find("\"prefill\": [");
  ASSERT_NE(at, std::string::npos);
  size_t end = manifest.find(']', at);
  ASSERT_NE(end, std::string::npos);
  std::string noPrefill = manifest;
  noPrefill.replace(at, end + 1 - at, "\"no_prefill\": []");
  auto old = GPULibrary::fromManifest(noPrefill, ptx);
  ASSERT_TRUE(old.ok()) << old.message();
  EXPECT_TRUE(old->plan.prefill.empty());
  std::string shortPrefill = manifest;
  shortPrefill.replace(at, end + 1 - at,
                       "\"prefill\": [\"" + good->plan.prefill.front() +
                           "\"]");
  expectError(GPULibrary::fromManifest(shortPrefill, ptx),
              "a prefill list shorter than the layers");
  // Unreadable files name the path.
  auto absent = GPULibrary::load(kPrefix + ".nope.ptx", kPrefix + ".json");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.message().find(".nope.ptx"), std::string::npos);
}

TEST(AOTLibrary, ImageChoiceFollowsTheDevice) {
  bool exact = false;
  auto pick = GPULibrary::chooseImage({"sm_80", "sm_90"}, 90, &exact);
  ASSERT_TRUE(pick.ok()) << pick.message();
  EXPECT_EQ(*pick, 1u);
  EXPECT_TRUE(exact);
  pick = GPULibrary::chooseImage({"sm_90", "sm_80"}, 89, &exact);
  ASSERT_TRUE(pick.ok()) << pick.message();
  EXPECT_EQ(*pick, 1u); // sm_80's PTX, JIT-compiled for sm_89
  EXPECT_FALSE(exact);
  pick = GPULibrary::chooseImage({"sm_80", "sm_90"}, 100, &exact);
  ASSERT_TRUE(pick.ok()) << pick.message();
  EXPECT_EQ(*pick, 1u);
  EXPECT_FALSE(exact);
  pick = GPULibrary::chooseImage({"sm_80", "sm_90"}, 75, &exact);
  ASSERT_FALSE(pick.ok());
  EXPECT_NE(pick.message().find("sm_80, sm_90 only; this GPU is sm_75"),
            std::string::npos)
      << pick.message();
  EXPECT_FALSE(GPULibrary::chooseImage({"sm_9x"}, 90, &exact).ok());
  EXPECT_FALSE(GPULibrary::chooseImage({}, 90, &exact).ok());
}

TEST(AOTLibrary, FatLibraryLoadsTheImageOfEachChip) {
  REQUIRE_LIBRARY();
  auto on90 = GPULibrary::loadForDevice(kFat, 90);
  ASSERT_TRUE(on90.ok()) << on90.message();
  EXPECT_EQ(on90->chip, "sm_90");
  EXPECT_NE(on90->ptx.find(".target sm_90"), std::string::npos);
  bool cubins = text(kFat).find("\"cubin\"") != std::string::npos;
  EXPECT_EQ(!on90->cubin.empty(), cubins);
  auto on86 = GPULibrary::loadForDevice(kFat, 86);
  ASSERT_TRUE(on86.ok()) << on86.message();
  EXPECT_EQ(on86->chip, "sm_80");
  EXPECT_NE(on86->ptx.find(".target sm_80"), std::string::npos);
  EXPECT_TRUE(on86->cubin.empty()) << "an sm_80 cubin cannot run on sm_86";
  EXPECT_EQ(on86->plan.functions.size(), on90->plan.functions.size());
  auto on75 = GPULibrary::loadForDevice(kFat, 75);
  ASSERT_FALSE(on75.ok());
  EXPECT_NE(on75.message().find("this GPU is sm_75"), std::string::npos)
      << on75.message();
  // A one-chip library: its own manifest, and only for its chip and later.
  auto single = GPULibrary::loadForDevice(kPrefix + ".json", 90);
  ASSERT_TRUE(single.ok()) << single.message();
  EXPECT_EQ(single->chip, "sm_90");
  auto older = GPULibrary::loadForDevice(kPrefix + ".json", 80);
  ASSERT_FALSE(older.ok());
  EXPECT_NE(older.message().find("sm_90 only; this GPU is sm_80"),
            std::string::npos)
      << older.message();
  // Damaged indexes are one-line errors naming the file.
  std::string dir = kFat.substr(0, kFat.rfind('/') + 1);
  for (const char *bad :
       {"{\"images\": []}", "{\"images\": [{\"chip\": \"sm_90\"}]}",
        "{\"images\": [{\"chip\": \"sm_90\", \"manifest\": \"nope.json\", "
        "\"ptx\": \"nope.ptx\"}]}",
        "{\"images\": 3}"}) {
    std::string path = dir + "damaged-index.json";
    ASSERT_TRUE(writeFileAtomic(path, bad).ok());
    auto r = GPULibrary::loadForDevice(path, 90);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
  }
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

/// Appends a paged cache with `library` on the GPU and runs every layer
/// against the float64 reference.
void checkAppendAndAttend(GPULibrary library) {
  const ModelShape s = library.shape;
  auto program =
      GPUProgram::load(std::make_shared<const GPULibrary>(std::move(library)));
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

TEST(AOTLibraryGPU, AppendAndAttendMatchTheReference) {
  REQUIRE_LIBRARY();
  REQUIRE_GPU();
  auto lib = GPULibrary::load(kPrefix + ".ptx", kPrefix + ".json");
  ASSERT_TRUE(lib.ok()) << lib.message();
  checkAppendAndAttend(lib.take());
}

/// The fat library on this GPU: its own chip's cubin when it has one.
TEST(AOTLibraryGPU, FatLibraryRunsThisGPUsImage) {
  REQUIRE_LIBRARY();
  REQUIRE_GPU();
  auto driver = cuda::Driver::get();
  ASSERT_TRUE(driver.ok()) << driver.message();
  int cc = (*driver)->device(0).computeCapability();
  auto lib = GPULibrary::loadForDevice(kFat, cc);
  ASSERT_TRUE(lib.ok()) << lib.message();
  std::printf("[aot] fat library on sm_%d: image %s, %s\n", cc,
              lib->chip.c_str(),
              lib->cubin.empty() ? "PTX (driver JIT)" : "cubin");
  if (lib->chip == "sm_" + std::to_string(cc) &&
      text(kFat).find("\"cubin\"") != std::string::npos) {
    EXPECT_FALSE(lib->cubin.empty());
  }
  checkAppendAndAttend(lib.take());
}

} // namespace
