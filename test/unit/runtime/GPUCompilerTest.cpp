//===- GPUCompilerTest.cpp - PTX, launch plans and the JIT cache ----------===//
//
// Runs without a GPU: compiles schedules to PTX in-process, checks the PTX
// and the launch plan, the manifest round trip, and the memory and disk
// caches of getGPULibrary.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Files.h"
#include "condensate/Runtime/GPUProgram.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
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
  // sm_90: every kernel waits for the grids before it, so every launch may
  // be programmatic.
  EXPECT_NE(ptx.find("griddepcontrol.wait;"), std::string::npos);
  for (const auto &[name, fn] : plan.functions)
    for (const KernelLaunch &l : fn.launches)
      EXPECT_TRUE(l.gridDependency) << l.kernel;
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
  // Only select_topk claims dynamic shared memory by default: its key
  // cache, as much as sm_90 lets a block opt in to (227 KB, its static
  // arrays included). (At this head_dim the attention's cp.async rings
  // are a knob, attend-stages, off by default; at 256 they are the rule.)
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

// The dense launch's grid x as the launch plan evaluates it: one wave of
// the chip (256 blocks of the tensor-core body at head_dim 128) below 128
// (sequence, kv head) pairs, 512 blocks from there (the plan's arithmetic
// for the choice: min, max, add, multiply, a subtraction folded in).
TEST(GPUCompiler, DenseLaunchFillsOneWaveThenTwo) {
  SKIP_WITHOUT_LIBDEVICE();
  GPUCompileOptions options;
  options.cacheDir = "";
  auto lib = getGPULibrary(benchShape(), benchSchedule(), options);
  ASSERT_TRUE(lib.ok()) << lib.message();
  const FunctionPlan &dense = (*lib)->plan.functions.at((*lib)->plan.layers[1]);
  const KernelLaunch *attend = nullptr;
  for (const KernelLaunch &l : dense.launches)
    if (l.kernel.find("dense_attend") != std::string::npos)
      attend = &l;
  ASSERT_NE(attend, nullptr);
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  for (int64_t batch : {1, 2, 8, 15, 16, 17, 32, 64, 200}) {
    std::vector<std::vector<int64_t>> shapes = {{batch, 32, 128},
                                                {4096, 8, 64, 128},
                                                {4096, 8, 64, 128},
                                                {batch, 2048},
                                                {batch},
                                                {batch},
                                                {4096, 8, 5, 128},
                                                {batch, 32, 128},
                                                {batch, 32, 4}};
    auto gx = attend->grid[0].eval(shapes);
    ASSERT_TRUE(gx.ok()) << gx.message();
    int64_t rows = batch * 8;
    int64_t want = ceilDiv(rows < 128 ? 256 : 512, rows);
    EXPECT_EQ(*gx, want) << "batch " << batch;
  }
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

TEST(GPUTuning, JSONRoundTripAndLimits) {
  GPUTuning t;
  t.tensorCores = false;
  t.denseSplits = 96;
  t.sparseSplits = 3;
  t.attendWarps = 2;
  t.sketchOccupancy = 24;
  t.attendStages = 3;
  t.attendOccupancy = 12;
  auto back = GPUTuning::fromJSON(t.toJSON());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, t);
  EXPECT_EQ(t.options(),
            "tensor-cores=0 dense-splits=96 splits=3 attend-warps=2 "
            "sketch-occupancy=24 attend-stages=3 attend-occupancy=12");
  auto partial = GPUTuning::fromJSON(R"({"attend_warps": 8})");
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE(partial->tensorCores);
  EXPECT_EQ(partial->attendWarps, 8);
  for (const char *bad :
       {R"({"dense_splits": 4097})", R"({"splits": -1})",
        R"({"attend_warps": 33})", R"({"sketch_occupancy": 65})",
        R"({"attend_stages": 9})", R"({"attend_occupancy": 65})",
        R"({"warps": 2})", R"({"tensor_cores": 1})", R"({"splits": 1.5})", "[]",
        "{", R"({"splits": 1, "splits": 2})"}) {
    auto r = GPUTuning::fromJSON(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
    }
  }
}

/// A tuning record as condensate-tune writes it (only the fields readers
/// check), for `best`.
std::string recordFor(const ModelShape &shape, const Schedule &schedule,
                      const std::string &chip, const GPUTuning &best) {
  return std::string("{\"condensate_tuning\": 1, \"compiler\": \"") +
         compilerIdentity() + "\", \"chip\": \"" + chip +
         "\", \"model_mlir\": " +
         nlohmann::json(tuningModelText(shape, schedule)).dump() +
         ", \"best\": " + best.toJSON() + "}";
}

TEST(GPUCompiler, TuningRecordsChooseTheKnobs) {
  SKIP_WITHOUT_LIBDEVICE();
  char dir[] = "/tmp/condensate-tune-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  GPUCompileOptions options;
  options.cacheDir = dir;
  ModelShape shape = benchShape();
  Schedule schedule = benchSchedule();
  // No record: the defaults, not tuned.
  GPUCompileReport plain;
  auto a = getGPULibrary(shape, schedule, options, &plain);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_FALSE(plain.tuned);
  EXPECT_EQ((*a)->tuning, GPUTuning{});
  EXPECT_TRUE((*a)->tuningRecord.empty());

  GPUTuning best;
  best.attendWarps = 2;
  best.denseSplits = 24;
  std::string record = recordFor(shape, schedule, "sm_90", best);
  std::string path = std::string(dir) + "/" +
                     tuningRecordKey(shape, schedule, "sm_90") + ".tune.json";
  ASSERT_TRUE(writeFileAtomic(path, record).ok());
  EXPECT_EQ(findTuningRecord(shape, schedule, "sm_90", dir), record);
  // Another chip, model or compiler has no record.
  EXPECT_EQ(findTuningRecord(shape, schedule, "sm_80", dir), "");
  ModelShape other = shape;
  other.pageSize = 32;
  EXPECT_EQ(findTuningRecord(other, schedule, "sm_90", dir), "");

  GPUCompileReport tuned;
  auto b = getGPULibrary(shape, schedule, options, &tuned);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_TRUE(tuned.tuned);
  EXPECT_EQ(tuned.tuning, best);
  EXPECT_NE(tuned.cacheKey, plain.cacheKey);
  EXPECT_EQ((*b)->tuning, best);
  EXPECT_EQ((*b)->tuningRecord, record);
  // The knobs reached the kernels: 2 warps an attention block, and the
  // dense layer's partials hold 24 splits.
  const LaunchPlan &plan = (*b)->plan;
  int attends = 0;
  for (const auto &[name, fn] : plan.functions)
    for (const KernelLaunch &l : fn.launches)
      if (l.kernel.find("attend") != std::string::npos &&
          l.kernel.find("prefill") == std::string::npos) {
        EXPECT_EQ(l.block[0], 64) << l.kernel;
        ++attends;
      }
  EXPECT_GE(attends, 2);
  EXPECT_NE((*b)->manifestJSON().find("\"dense_splits\": 24"),
            std::string::npos);
  // The manifest carries knobs and record through a round trip.
  auto loaded = GPULibrary::fromManifest((*b)->manifestJSON(), (*b)->ptx);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->tuning, best);
  EXPECT_EQ(nlohmann::json::parse(loaded->tuningRecord),
            nlohmann::json::parse(record));

  // Knobs named by the caller win over the record.
  options.tuning = GPUTuning{};
  GPUCompileReport named;
  auto c = getGPULibrary(shape, schedule, options, &named);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(named.tuned);
  EXPECT_EQ(named.cacheKey, plain.cacheKey);
  // Knobs from CONDENSATE_TUNING win over the record; a bad value is an
  // error naming the variable.
  options.tuning.reset();
  ::setenv("CONDENSATE_TUNING", R"({"attend_stages": 1, "dense_splits": 24})",
           1);
  GPUCompileReport fromEnv;
  auto d = getGPULibrary(shape, schedule, options, &fromEnv);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_FALSE(fromEnv.tuned);
  EXPECT_EQ((*d)->tuning.attendStages, 1);
  EXPECT_EQ((*d)->tuning.denseSplits, 24);
  EXPECT_EQ((*d)->tuning.attendWarps, 0);
  ::setenv("CONDENSATE_TUNING", R"({"attend_stages": 9})", 1);
  auto bad = getGPULibrary(shape, schedule, options, &fromEnv);
  ::unsetenv("CONDENSATE_TUNING");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("CONDENSATE_TUNING"), std::string::npos)
      << bad.message();
  EXPECT_EQ(bad.message().find('\n'), std::string::npos) << bad.message();
  // A damaged record is ignored.
  ASSERT_TRUE(writeFileAtomic(path, "{\"best\": ").ok());
  options.tuning.reset();
  GPUCompileReport damaged;
  ASSERT_TRUE(getGPULibrary(shape, schedule, options, &damaged).ok());
  EXPECT_FALSE(damaged.tuned);
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
/// A plan of one function "f" launching `l` (grid 1 x 1 x 1).
static LaunchPlan onePlan(KernelLaunch l) {
  LaunchPlan plan;
  plan.target = "sm_90";
  FunctionPlan fn;
  fn.name = "f";
  l.grid = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  fn.launches.push_back(l);
  plan.functions["f"] = fn;
  plan.layers = {"f"};
  plan.append = "f";
  return plan;
}

TEST(GPUCompiler, ManifestSharedBytesAreChecked) {
  KernelLaunch l;
  l.kernel = "f_select_topk";
  l.block = {512, 1, 1};
  l.sharedBytes = 200 * 1024;
  LaunchPlan plan = onePlan(l);
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

// A launch's grid_dependency round-trips, is false in manifests written
// before it existed, and must be a boolean.
TEST(GPUCompiler, ManifestGridDependency) {
  KernelLaunch l;
  l.kernel = "f_merge";
  l.block = {128, 1, 1};
  l.gridDependency = true;
  std::string text = onePlan(l).toJSON();
  auto back = LaunchPlan::fromJSON(text);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_TRUE(back->functions.at("f").launches.at(0).gridDependency);
  const std::string key = "\"grid_dependency\": true";
  size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  std::string old = text, bad = text;
  old.erase(at, key.size() + 1); // and its comma
  auto r = LaunchPlan::fromJSON(old);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->functions.at("f").launches.at(0).gridDependency);
  bad.replace(at, key.size(), "\"grid_dependency\": \"yes\"");
  r = LaunchPlan::fromJSON(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("manifest"), std::string::npos) << r.message();
}

// A manifest's buffers are checked when it is read: element sizes, and
// every parameter's buffer among the function's arguments or scratch; its
// expressions refuse to overflow or divide by zero when evaluated.
TEST(GPUCompiler, ManifestBuffersAndExpressionsAreChecked) {
  LaunchPlan plan;
  plan.target = "sm_90";
  FunctionPlan fn;
  fn.name = "f";
  fn.numArgs = 2;
  ScratchBuffer sb;
  sb.elementType = "i32";
  sb.elementBytes = 4;
  sb.shape = {Expr::argDim(0, 0), Expr::constant(16)};
  fn.scratch.push_back(sb);
  KernelLaunch l;
  l.kernel = "f_select_topk";
  l.grid = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  l.block = {256, 1, 1};
  MemRefParam p;
  p.buffer = {BufferRef::Kind::Scratch, 0};
  p.elementType = "i32";
  p.elementBytes = 4;
  p.offset = Expr::constant(0);
  p.sizes = sb.shape;
  p.strides = {Expr::constant(16), Expr::constant(1)};
  l.params.push_back(p);
  fn.launches.push_back(l);
  plan.functions["f"] = fn;
  plan.layers = {"f"};
  plan.append = "f";
  ASSERT_TRUE(LaunchPlan::fromJSON(plan.toJSON()).ok());
  auto refused = [&](LaunchPlan bad, const std::string &what) {
    auto r = LaunchPlan::fromJSON(bad.toJSON());
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
  };
  for (int64_t bytes :
       {int64_t(0), int64_t(3), int64_t(-8), int64_t(1) << 40}) {
    LaunchPlan bad = plan;
    bad.functions["f"].scratch[0].elementBytes = bytes;
    refused(bad, "scratch buffer 0 of f has element_bytes");
    bad = plan;
    bad.functions["f"].launches[0].params[0].elementBytes = bytes;
    refused(bad, "f_select_topk has a parameter of element_bytes");
  }
  for (auto [kind, index] :
       {std::pair{BufferRef::Kind::Scratch, int64_t(1)},
        std::pair{BufferRef::Kind::Scratch, int64_t(-1)},
        std::pair{BufferRef::Kind::Argument, int64_t(2)},
        std::pair{BufferRef::Kind::Argument, int64_t(-3)}}) {
    LaunchPlan bad = plan;
    bad.functions["f"].launches[0].params[0].buffer = {kind, index};
    refused(bad, "f_select_topk reads");
  }
  LaunchPlan bad = plan;
  bad.functions["f"].numArgs = -1;
  refused(bad, "function f has -1 arguments");

  const int64_t big = int64_t(1) << 62;
  using K = Expr::Kind;
  auto mul = Expr::binary(K::Mul, Expr::constant(big), Expr::argDim(0, 0));
  ASSERT_TRUE(mul.eval({{1}}).ok());
  EXPECT_EQ(*mul.eval({{1}}), big);
  auto over = mul.eval({{2}});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("overflows"), std::string::npos);
  EXPECT_FALSE(Expr::binary(K::Add, Expr::constant(big), Expr::constant(big))
                   .eval({})
                   .ok());
  for (int64_t d : {int64_t(0), int64_t(-4)})
    EXPECT_FALSE(Expr::binary(K::CeilDiv, Expr::constant(10), Expr::constant(d))
                     .eval({})
                     .ok())
        << d;
  EXPECT_EQ(*Expr::binary(K::CeilDiv,
                          Expr::constant(std::numeric_limits<int64_t>::max()),
                          Expr::constant(2))
                 .eval({}),
            (std::numeric_limits<int64_t>::max() / 2) + 1);
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
