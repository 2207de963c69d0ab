//===- GPUCompilerTest.cpp - PTX, launch plans and the JIT cache ----------===//
//
// Runs without a GPU: compiles schedules to PTX in-process, checks the PTX
// and the launch plan, the manifest round trip, and the memory and disk
// caches of getGPULibrary.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/GPUProgram.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

using namespace condensate;

namespace {

ModelShape benchShape() { return {2, 32, 8, 128, 64, KVType::BF16, 0.0f}; }

Schedule benchSchedule() {
  Policy p;
  p.anchor = 1;
  p.window = p.windowMax = 64;
  p.topk = 960;
  p.pageSize = 64;
  Schedule s = Schedule::uniform(2, p);
  s.rules.push_back({{1}, {}, Policy::makeDense()});
  return s;
}

// Kernels call CUDA's libdevice math; without a CUDA toolkit there is no
// libdevice to link and the compiler rightly refuses the PTX.
#define SKIP_WITHOUT_LIBDEVICE()                                              \
  do {                                                                        \
    if (libdevicePath().empty())                                              \
      GTEST_SKIP() << "no CUDA libdevice (set CUDA_HOME to a CUDA toolkit)";  \
  } while (false)

TEST(GPUCompiler, EmitsPTXAndALaunchPlan) {
  SKIP_WITHOUT_LIBDEVICE();
  GPUCompileOptions options;
  options.cacheDir = "";
  GPUCompileReport report;
  auto lib = getGPULibrary(benchShape(), benchSchedule(), options, &report);
  ASSERT_TRUE(lib.ok()) << lib.message();
  std::printf("compile time of one new specialisation: %.3f s\n",
              report.seconds);
  const std::string &ptx = (*lib)->ptx;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(ptx.find("ld.global.v4"), std::string::npos)
      << "16-byte vector loads expected";
  EXPECT_EQ(ptx.find(".local"), std::string::npos) << "no local memory";
  const LaunchPlan &plan = (*lib)->plan;
  ASSERT_EQ(plan.layers.size(), 2u);
  const FunctionPlan &sparse = plan.functions.at(plan.layers[0]);
  std::vector<std::string> kernels;
  for (const KernelLaunch &l : sparse.launches)
    kernels.push_back(l.kernel);
  ASSERT_GE(kernels.size(), 4u);
  EXPECT_NE(kernels[0].find("score_pages"), std::string::npos);
  EXPECT_NE(kernels[1].find("select_topk"), std::string::npos);
  EXPECT_NE(kernels[2].find("sparse_attend"), std::string::npos);
  EXPECT_NE(kernels.back().find("merge"), std::string::npos);
  for (const std::string &k : kernels)
    EXPECT_NE(ptx.find(".entry " + k + "("), std::string::npos) << k;
  // Grids evaluate on concrete shapes: batch 2, 2048 pages per sequence.
  std::vector<std::vector<int64_t>> shapes = {
      {2, 32, 128}, {4096, 8, 64, 128}, {4096, 8, 64, 128}, {2, 2048},
      {2},          {2},                {4096, 8, 5, 128},  {2, 32, 128},
      {2, 32, 4}};
  auto gx = sparse.launches[0].grid[0].eval(shapes);
  ASSERT_TRUE(gx.ok());
  EXPECT_GT(*gx, 0);
  EXPECT_EQ(*sparse.launches[0].grid[2].eval(shapes), 2);
  // The scoring grid follows the pages per sequence.
  shapes[3][1] = 4096;
  EXPECT_EQ(*sparse.launches[0].grid[0].eval(shapes), 2 * *gx);
  // Only select_topk claims dynamic shared memory: its key cache, as much
  // as sm_90 lets a block opt in to (227 KB, its static arrays included).
  for (const KernelLaunch &l : sparse.launches) {
    bool select = l.kernel.find("select_topk") != std::string::npos;
    EXPECT_EQ(l.sharedBytes > 48 * 1024, select) << l.kernel;
    EXPECT_LE(l.sharedBytes, 227 * 1024) << l.kernel;
  }
  EXPECT_NE(ptx.find(".extern .shared .align 16 .b8 __dynamic_shmem__0[]"),
            std::string::npos)
      << "dynamic shared memory must be an extern array, not a static byte";
  // The manifest round-trips.
  auto back = GPULibrary::fromManifest((*lib)->manifestJSON(), ptx);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->plan.toJSON(), plan.toJSON());
  EXPECT_EQ(back->shape.headDim, 128);
  EXPECT_EQ(back->schedule.policyFor(0, 0), benchSchedule().policyFor(0, 0));
}

TEST(GPUCompiler, CachesInMemoryAndOnDisk) {
  SKIP_WITHOUT_LIBDEVICE();
  char dir[] = "/tmp/condensate-cache-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  GPUCompileOptions options;
  options.cacheDir = dir;
  Policy p;
  p.window = p.windowMax = 32;
  p.topk = 64;
  p.selector = Selector::Exact;
  ModelShape shape{1, 6, 2, 64, 16, KVType::F16, 0.0f};
  Schedule s = Schedule::uniform(1, p);
  GPUCompileReport first, second;
  auto a = getGPULibrary(shape, s, options, &first);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(first.source, GPUCompileReport::Source::Compiled);
  auto b = getGPULibrary(shape, s, options, &second);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(second.source, GPUCompileReport::Source::MemoryCache);
  EXPECT_EQ(a->get(), b->get());
  std::string ptxPath = std::string(dir) + "/" + first.cacheKey + ".ptx";
  EXPECT_EQ(::access(ptxPath.c_str(), R_OK), 0) << ptxPath;
  EXPECT_EQ(::access((std::string(dir) + "/" + first.cacheKey + ".json").c_str(),
                     R_OK),
            0);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(GPUCompiler, BadManifestsAreRejected) {
  EXPECT_FALSE(GPULibrary::fromManifest("{}", ".entry x(").ok());
  EXPECT_FALSE(GPULibrary::fromManifest("not json", "").ok());
  auto r = LaunchPlan::fromJSON(R"({"format": "other"})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not a condensate launch plan"),
            std::string::npos);
}

// A manifest's dynamic shared memory is checked: negative or absurd sizes
// are refused with the kernel's name, what is valid round-trips.
TEST(GPUCompiler, ManifestSharedBytesAreChecked) {
  LaunchPlan plan;
  plan.target = "sm_90";
  FunctionPlan fn;
  fn.name = "f";
  KernelLaunch l;
  l.kernel = "f_select_topk";
  l.grid = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  l.block = {512, 1, 1};
  l.sharedBytes = 200 * 1024;
  fn.launches.push_back(l);
  plan.functions["f"] = fn;
  plan.layers = {"f"};
  plan.append = "f";
  auto back = LaunchPlan::fromJSON(plan.toJSON());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->functions.at("f").launches.at(0).sharedBytes, 200 * 1024);
  for (int64_t bad : {int64_t(-1), int64_t(1) << 30}) {
    plan.functions["f"].launches[0].sharedBytes = bad;
    auto r = LaunchPlan::fromJSON(plan.toJSON());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("f_select_topk"), std::string::npos)
        << r.message();
  }
}

// The runtime builds models from its structures; the result is what the
// text of the same model compiles to, byte for byte.
TEST(GPUCompiler, StructuresAndTextCompileToTheSamePTX) {
  SKIP_WITHOUT_LIBDEVICE();
  Schedule s = benchSchedule();
  s.defaultPolicy.tau = 1e-3;
  s.defaultPolicy.maxExtra = 2;
  auto fromStructs = compileGPULibrary(benchShape(), s);
  ASSERT_TRUE(fromStructs.ok()) << fromStructs.message();
  auto fromText = compileGPULibrary(modelToMLIR("model", benchShape(), s),
                                    "<text>");
  ASSERT_TRUE(fromText.ok()) << fromText.message();
  EXPECT_TRUE(fromStructs->ptx == fromText->ptx);
  EXPECT_EQ(fromStructs->plan.toJSON(), fromText->plan.toJSON());
  EXPECT_EQ(fromStructs->specs, fromText->specs);
  EXPECT_EQ(fromStructs->modelText, fromText->modelText);
}

TEST(GPURuntime, ReportsMissingDriverCleanly) {
  if (cuda::Driver::available())
    GTEST_SKIP() << "a CUDA driver is present";
  GPUCompileOptions options;
  options.cacheDir = "";
  auto lib = getGPULibrary(benchShape(), benchSchedule(), options);
  ASSERT_TRUE(lib.ok());
  auto prog = GPUProgram::load(*lib);
  ASSERT_FALSE(prog.ok());
  EXPECT_FALSE(prog.message().empty());
}

} // namespace
