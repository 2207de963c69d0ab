//===- PolicyTest.cpp - policies, schedules, JSON and MLIR parsing --------===//
#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Policy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

using namespace condensate;

namespace {

TEST(Policy, JSONAndMLIRDescribeTheSameSchedule) {
  const char *json = R"({"default": {"anchor": 1, "window": 64,
      "window_max": 256, "topk": 32, "selector": "exact"},
    "rules": [{"layers": ["0-7"], "policy": {"window": 1024, "topk": 32,
                "selector": "exact"}},
              {"layers": [15], "policy": "dense"},
              {"layers": [3], "kv_heads": [1],
               "policy": {"window": 16, "topk": 64, "tau": "strict",
                          "max_extra": 4}}]})";
  auto fromJson = parseScheduleJSON(json, 30);
  ASSERT_TRUE(fromJson.ok()) << fromJson.message();
  auto fromMLIR = parseSchedule(fromJson->toMLIR(), 30);
  ASSERT_TRUE(fromMLIR.ok()) << fromMLIR.message();
  for (int64_t l = 0; l < 30; ++l)
    for (int64_t h = 0; h < 3; ++h)
      EXPECT_EQ(fromJson->policyFor(l, h), fromMLIR->policyFor(l, h))
          << "layer " << l << " head " << h;
  EXPECT_TRUE(fromJson->policyFor(15, 0).dense);
  EXPECT_EQ(fromJson->policyFor(4, 2).window, 1024);
  EXPECT_EQ(fromJson->policyFor(3, 1).window, 16);
  EXPECT_EQ(fromJson->policyFor(3, 0).window, 1024);
  EXPECT_TRUE(fromJson->policyFor(20, 0).adaptive());
  EXPECT_EQ(fromJson->policyFor(20, 0).budget(), 1 + 256 + 32);
}

/// The layers of `s` whose every kv head (of `kvHeads`) gets a policy for
/// which `pred` holds.
template <typename Pred>
std::vector<int64_t> layersWhere(const Schedule &s, int64_t kvHeads,
                                 Pred pred) {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < s.numLayers; ++l) {
    bool all = true;
    for (int64_t h = 0; h < kvHeads; ++h)
      all = all && pred(s.policyFor(l, h));
    if (all)
      out.push_back(l);
  }
  return out;
}

TEST(Policy, RelativeDepthMapsRulesOntoAnyDepth) {
  // The paper's schedule, written for 30 layers: dense pillar 15, a wide
  // window on layers 0..7, a per-head override on layer 20.
  const char *text = R"(#condensate.schedule<layers = 30, depth = relative,
      default = #condensate.policy<anchor = 1, window = 64, window_max = 256,
                                   topk = 32, selector = exact>,
      rules = [
        #condensate.rule<layers = [0 to 7], policy = #condensate.policy<
            anchor = 1, window = 1024, topk = 32, selector = exact>>,
        #condensate.rule<layers = [15], policy = #condensate.dense>,
        #condensate.rule<layers = [20], kv_heads = [1],
            policy = #condensate.policy<window = 16>>]>)";
  auto dense = [](const Policy &p) { return p.dense; };
  auto wide = [](const Policy &p) { return !p.dense && p.window == 1024; };
  // At its own depth it is itself, relative flag included.
  auto own = parseSchedule(text, 30);
  ASSERT_TRUE(own.ok()) << own.message();
  EXPECT_TRUE(own->relativeDepth);
  EXPECT_EQ(layersWhere(*own, 3, dense), std::vector<int64_t>{15});
  // Qwen2.5-0.5B's 24 layers: layer l takes layer (2l + 1) * 30 / 48.
  auto qwen = parseSchedule(text, 24);
  ASSERT_TRUE(qwen.ok()) << qwen.message();
  EXPECT_EQ(qwen->numLayers, 24);
  EXPECT_FALSE(qwen->relativeDepth);
  EXPECT_EQ(layersWhere(*qwen, 3, dense), std::vector<int64_t>{12});
  EXPECT_EQ(layersWhere(*qwen, 3, wide),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(qwen->policyFor(16, 1).window, 16); // (2*16+1)*30/48 = 20
  EXPECT_EQ(qwen->policyFor(16, 0).window, 64);
  // Deeper (80 layers): every layer of the pillar's depth band is dense,
  // the same fraction of depth as 1 of 30.
  auto deep = parseSchedule(text, 80);
  ASSERT_TRUE(deep.ok()) << deep.message();
  EXPECT_EQ(layersWhere(*deep, 3, dense), (std::vector<int64_t>{40, 41, 42}));
  // Shallower than the rules are fine-grained (12 layers): no layer has its
  // centre on layer 15, yet the pillar keeps its nearest layer.
  auto shallow = parseSchedule(text, 12);
  ASSERT_TRUE(shallow.ok()) << shallow.message();
  EXPECT_EQ(layersWhere(*shallow, 3, dense), std::vector<int64_t>{6});
  EXPECT_EQ(layersWhere(*shallow, 3, wide),
            (std::vector<int64_t>{0, 1, 2, 3}));
  // The MLIR text of the mapped schedule is a fixed-depth schedule.
  auto again = parseSchedule(qwen->toMLIR(), 24);
  ASSERT_TRUE(again.ok()) << again.message();
  for (int64_t l = 0; l < 24; ++l)
    for (int64_t h = 0; h < 3; ++h)
      EXPECT_EQ(again->policyFor(l, h), qwen->policyFor(l, h)) << l;
  EXPECT_FALSE(parseSchedule(qwen->toMLIR(), 30).ok());

  // Without `depth = relative` rules are for their own depth only.
  std::string fixed = text;
  fixed.replace(fixed.find("depth = relative"), 16, "depth = fixed");
  auto refused = parseSchedule(fixed, 24, "s.mlir");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("s.mlir: the schedule is for 30 layers"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("depth = relative"), std::string::npos);

  // JSON: "depth": "relative" with the layers the rules were written for;
  // it round-trips at its own depth and maps like the MLIR form.
  const char *json = R"({"layers": 30, "depth": "relative",
      "default": {"window": 64, "topk": 32, "selector": "exact"},
      "rules": [{"layers": [15], "policy": "dense"}]})";
  auto j24 = parseScheduleJSON(json, 24);
  ASSERT_TRUE(j24.ok()) << j24.message();
  EXPECT_EQ(layersWhere(*j24, 3, dense), std::vector<int64_t>{12});
  auto j30 = parseScheduleJSON(json, 30);
  ASSERT_TRUE(j30.ok()) << j30.message();
  auto back = parseScheduleJSON(scheduleToJSON(*j30), 24);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(layersWhere(*back, 3, dense), std::vector<int64_t>{12});
  EXPECT_FALSE(parseScheduleJSON(
                   R"({"depth": "relative", "default": "dense",
                       "rules": [{"layers": [1], "policy": "dense"}]})",
                   24)
                   .ok());
  auto badDepth = parseScheduleJSON(
      R"({"layers": 30, "depth": "deep", "default": "dense"})", 24);
  ASSERT_FALSE(badDepth.ok());
  EXPECT_NE(badDepth.message().find("'depth' must be"), std::string::npos);

  // examples/paper.mlir is relative: it applies to a 24-layer model.
  std::ifstream f(CONDENSATE_EXAMPLES_DIR "/paper.mlir");
  std::stringstream paper;
  paper << f.rdbuf();
  auto p24 = parseSchedule(paper.str(), 24, "paper.mlir");
  ASSERT_TRUE(p24.ok()) << p24.message();
  EXPECT_EQ(layersWhere(*p24, 2, dense), std::vector<int64_t>{12});
}

TEST(Policy, ParsesPoliciesAndModelOps) {
  auto p = parseSchedule("#condensate.policy<window = 64, topk = 32, "
                         "selector = block_mean, page_size = 64>",
                         4);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->policyFor(2, 0).selector, Selector::BlockMean);
  EXPECT_EQ(p->policyFor(2, 0).topUnits(), 1);
  auto d = parseSchedule("  #condensate.dense // pillar\n", 2);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_TRUE(d->policyFor(1, 0).dense);
  const char *model = R"(condensate.model @m layers = 2, q_heads = 4,
      kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f16,
      schedule = #condensate.schedule<layers = 2,
        default = #condensate.policy<window = 8>, rules = []>)";
  auto m = parseSchedule(model, 2);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->policyFor(0, 1).window, 8);
}

TEST(Policy, ErrorsAreOneLocatedLine) {
  auto bad = parseSchedule("#condensate.policy<window = -3>", 4, "p.mlir");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("window must be >= 0"), std::string::npos)
      << bad.message();
  EXPECT_EQ(bad.message().find('\n'), std::string::npos);
  auto unknown = parseSchedule("#condensate.policy<windw = 3>", 4, "p.mlir");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unknown policy field 'windw'"),
            std::string::npos)
      << unknown.message();
  // A schedule whose rules name layers is for its own depth only; one
  // policy for every layer applies at any depth.
  auto layers = parseSchedule(
      "#condensate.schedule<layers = 3, default = #condensate.dense, "
      "rules = [#condensate.rule<layers = [1], policy = "
      "#condensate.policy<window = 8>>]>",
      4, "s.mlir");
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.message().find(
                "for 3 layers (its rules name layers) but the model has 4"),
            std::string::npos)
      << layers.message();
  auto uniform = parseSchedule(
      "#condensate.schedule<layers = 30, default = #condensate.policy<window "
      "= 8, topk = 16>, rules = []>",
      24, "s.mlir");
  ASSERT_TRUE(uniform.ok()) << uniform.message();
  EXPECT_EQ(uniform->numLayers, 24);
  EXPECT_EQ(uniform->policyFor(23, 0).topk, 16);
  auto json = parseSchedule(R"({"window": 8, "selector": "fastest"})", 4,
                            "p.json");
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.message().find("p.json: policy: unknown selector"),
            std::string::npos)
      << json.message();
  // output_bound: a boolean, and only for a certified policy.
  auto notBool = parseSchedule(
      R"({"window": 8, "topk": 16, "tau": 0.1, "output_bound": 0})", 4,
      "p.json");
  ASSERT_FALSE(notBool.ok());
  EXPECT_NE(notBool.message().find("'output_bound' must be true or false"),
            std::string::npos)
      << notBool.message();
  auto uncertified = parseSchedule(
      R"({"window": 8, "topk": 16, "output_bound": false})", 4, "p.json");
  ASSERT_FALSE(uncertified.ok());
  EXPECT_NE(uncertified.message().find(
                "output_bound = false needs a certified policy (tau > 0)"),
            std::string::npos)
      << uncertified.message();
  EXPECT_FALSE(parseSchedule("{not json", 4).ok());
  EXPECT_FALSE(parseSchedule("", 4).ok());
  EXPECT_FALSE(parseSchedule(std::string("\x00\xff\x13", 3), 4).ok());
  auto range = parseScheduleJSON(
      R"({"default": "dense", "rules": [{"layers": [9], "policy": "dense"}]})",
      4);
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.message().find("names layer 9"), std::string::npos);
}

TEST(Policy, AdaptiveWindowFollowsRepetitionScore) {
  Policy p;
  p.window = 64;
  p.windowMax = 256;
  p.topk = 32;
  p.selector = Selector::Exact;
  EXPECT_EQ(p.windowFor(0.0), 64);
  EXPECT_EQ(p.windowFor(1.0), 256);
  EXPECT_EQ(p.windowFor(0.5), 160);
  EXPECT_EQ(p.windowFor(7.0), 256);
  // No repetition in distinct tokens; full repetition in a repeated phrase.
  std::vector<int32_t> distinct(100);
  for (int i = 0; i < 100; ++i)
    distinct[i] = i;
  EXPECT_EQ(repetitionScore(distinct.data(), 100), 0.0);
  std::vector<int32_t> phrase;
  for (int r = 0; r < 20; ++r)
    for (int t : {5, 6, 7, 8})
      phrase.push_back(t);
  double rep = repetitionScore(phrase.data(), phrase.size());
  EXPECT_GT(rep, 0.9);
  EXPECT_LE(rep, 1.0);
  // Random tokens from a small vocabulary repeat sometimes.
  std::mt19937 rng(std::random_device{}());
  std::vector<int32_t> noise(200);
  for (int32_t &t : noise)
    t = std::uniform_int_distribution<int32_t>(0, 3)(rng);
  double r = repetitionScore(noise.data(), noise.size());
  EXPECT_GT(r, 0.5);
  EXPECT_EQ(repetitionScore(noise.data(), 2), 0.0);
}


TEST(Policy, JSONRoundTripsSchedulesAndShapes) {
  const char *json = R"({"default": {"anchor": 2, "window": 64,
      "window_max": 256, "topk": 32, "selector": "exact"},
    "rules": [{"layers": ["0-7", 9], "policy": {"window": 1024}},
              {"layers": [15], "policy": "dense"},
              {"layers": [3, 4, 5, 6], "kv_heads": [1, 2],
               "policy": {"window": 16, "topk": 64, "tau": "strict",
                          "max_extra": 4, "selector": "block_mean",
                          "page_size": 64}},
              {"layers": [11], "policy": {"window": 8, "topk": 16,
                          "tau": 0.123456789012345}},
              {"layers": [12], "policy": {"window": 8, "topk": 16,
                          "selector": "sketch", "tau": 0.5,
                          "max_extra": 64, "output_bound": false}}]})";
  auto s = parseScheduleJSON(json, 16);
  ASSERT_TRUE(s.ok()) << s.message();
  std::string printed = scheduleToJSON(*s);
  auto back = parseScheduleJSON(printed, 16);
  ASSERT_TRUE(back.ok()) << back.message() << "\n" << printed;
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t h = 0; h < 4; ++h)
      EXPECT_EQ(s->policyFor(l, h), back->policyFor(l, h))
          << "layer " << l << " head " << h << ": " << printed;
  // Exact doubles survive (the MLIR text rounds to ten digits).
  EXPECT_EQ(back->policyFor(11, 0).tau, 0.123456789012345);
  EXPECT_EQ(back->policyFor(4, 1).tau, condensate::abi::kStrictTau);
  EXPECT_NE(printed.find("\"0-7\""), std::string::npos) << printed;
  EXPECT_FALSE(back->policyFor(12, 0).outputBound);
  EXPECT_TRUE(back->policyFor(11, 0).outputBound);
  // ... and through the MLIR text and the compiler's parser.
  auto viaMLIR = parseSchedule(s->toMLIR(), 16);
  ASSERT_TRUE(viaMLIR.ok()) << viaMLIR.message();
  EXPECT_EQ(viaMLIR->policyFor(12, 1), s->policyFor(12, 1));
  EXPECT_NE(s->policyFor(12, 1).toMLIR().find("output_bound = false"),
            std::string::npos);
  // The schedule knows its layer count.
  EXPECT_FALSE(parseScheduleJSON(printed, 17).ok());

  ModelShape shape{28, 28, 4, 128, 64, KVType::BF16, 0.0f};
  auto shapeBack = parseModelShapeJSON(modelShapeToJSON(shape));
  ASSERT_TRUE(shapeBack.ok()) << shapeBack.message();
  EXPECT_EQ(shapeBack->numLayers, 28);
  EXPECT_EQ(shapeBack->kvHeads, 4);
  EXPECT_EQ(shapeBack->kvType, KVType::BF16);
  EXPECT_EQ(shapeBack->effectiveScale(), shape.effectiveScale());
}

TEST(Policy, ModelSpecErrorsAreOneLine) {
  auto bad = [](const std::string &text, const std::string &expect) {
    auto r = parseModelSpecJSON(text, "spec.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.message().find(expect), std::string::npos) << r.message();
    EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
    EXPECT_EQ(r.message().rfind("spec.json", 0), 0u) << r.message();
  };
  const std::string schedule = R"("schedule": "dense")";
  bad("[", "invalid JSON");
  bad(R"({"model": {}})", "needs 'model' and 'schedule'");
  bad(R"({"model": {"layers": 2}, )" + schedule + "}", "needs 'q_heads'");
  bad(R"({"model": {"layers": 2, "q_heads": 4, "kv_heads": 2,
          "head_dim": 64, "kv_type": "f64"}, )" + schedule + "}",
      "kv_type must be f32, f16 or bf16");
  bad(R"({"model": {"layers": 2, "q_heads": 4, "kv_heads": 2,
          "head_dim": 64, "colour": 1}, )" + schedule + "}",
      "unknown field 'colour'");
  bad(R"({"model": {"layers": "2", "q_heads": 4, "kv_heads": 2,
          "head_dim": 64}, )" + schedule + "}",
      "'layers' must be an integer");
  bad(R"({"model": {"layers": 2, "q_heads": 6, "kv_heads": 4,
          "head_dim": 64}, )" + schedule + "}", "GQA ratio");
  auto ok = parseModelSpecJSON(R"({"model": {"layers": 2, "q_heads": 4,
      "kv_heads": 2, "head_dim": 64}, )" + schedule + "}", "spec.json");
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->shape.pageSize, 16);
  EXPECT_EQ(ok->shape.kvType, KVType::F32);
  EXPECT_TRUE(ok->schedule.policyFor(1, 1).dense);
}


TEST(Policy, HostileJSONIsRefusedWithOneLine) {
  auto expect = [](const std::string &text, const std::string &what) {
    auto r = parseScheduleJSON(text, 4);
    ASSERT_FALSE(r.ok()) << text.substr(0, 80);
    EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
    EXPECT_EQ(r.message().find('\n'), std::string::npos);
    EXPECT_LT(r.message().size(), 400u) << r.message();
  };
  expect(std::string(100000, '[') + std::string(100000, ']'),
         "nested deeper than 64 levels");
  expect(R"({"window": 8, "window": 16})", "duplicated key 'window'");
  expect(R"({"window": 18446744073709551615})", "'window' is too large");
  expect(R"({"window": 8, "topk": 1099511627776, "selector": "exact"})",
         "topk must be at most 4194304");
  expect(R"({"default": "dense", "rules": [{"layers":
      ["-9223372036854775808-9223372036854775807"], "policy": "dense"}]})",
         "out of bounds");
  std::string many = R"({"default": "dense", "rules": [)";
  for (int i = 0; i < 300; ++i)
    many += std::string(i ? "," : "") +
            R"({"layers": ["0-1048575"], "policy": "dense"})";
  expect(many + "]}", "out of bounds");
  // Brackets inside strings do not count towards the nesting.
  auto ok = parseScheduleJSON(R"({"window": 8, "x[[[[": 1})", 4);
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.message().find("unknown policy field"), std::string::npos)
      << ok.message();
}


TEST(Policy, DeepMLIRIsRefusedBeforeParsing) {
  std::string deep = "#condensate.schedule<layers = 2, default = ";
  for (int i = 0; i < 10000; ++i)
    deep += "#condensate.policy<";
  auto r = parseSchedule(deep, 2, "deep.mlir");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("deep.mlir:1:"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("nested deeper than 64 levels"), std::string::npos)
      << r.message();
  auto m = parseModel("module {" + std::string(10000, '[') + "}", "m.mlir");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("nested deeper"), std::string::npos)
      << m.message();
  // Arrows, comments and strings are not brackets.
  auto ok = parseSchedule("// <<<<[[[[ a comment\n#condensate.policy<window = 4>",
                          2, "ok.mlir");
  EXPECT_TRUE(ok.ok()) << ok.message();
}

} // namespace

// Bytes read per query head's share of a call, against the definitions:
// dense reads K and V of every position; exact top-k reads every key to
// score and K, V of what it attends; a sketch reads the box rows of every
// page and the word rows of every full page; a fallback pays the sparse
// pass and the dense one, unless the early test decided it.
TEST(Policy, BytesReadFollowsWhatEachStageReads) {
  ModelShape s{1, 8, 2, 64, 16, KVType::F16, 0.0f}; // group 4, 2-byte KV
  const int64_t n = 1000, D = 64, G = 4;
  const double row = D * 2.0, summaryRow = D * 4.0;
  float stats[kAttentionStatsWidth] = {0, 300, 0, 0, 0};
  EXPECT_DOUBLE_EQ(bytesRead(Policy::makeDense(), s, n, stats),
                   double(condensate::abi::denseBytes(n, D, 2)) / G);
  Policy exact;
  exact.window = exact.windowMax = 64;
  exact.topk = 235;
  exact.selector = Selector::Exact;
  EXPECT_DOUBLE_EQ(bytesRead(exact, s, n, stats),
                   (n * row + 2 * 300 * row) / G);
  Policy sketch = exact;
  sketch.selector = Selector::Sketch;
  sketch.sketchBits = 4; // 2 word rows a page of 16
  s.sketchBits = 4;
  const double pages = 63, full = 62; // 1000 = 62 * 16 + 8
  EXPECT_DOUBLE_EQ(bytesRead(sketch, s, n, stats),
                   (pages * 2 * summaryRow + full * 2 * summaryRow +
                    2 * 300 * row) /
                       G);
  sketch.tau = 1e-2;
  sketch.maxExtra = 100;
  // Certified without fallback: the early test's anchor and window keys
  // (65 here) and the value box of the omitted pages too.
  const double forced = double(sketch.anchor + sketch.windowMax) * row;
  EXPECT_DOUBLE_EQ(bytesRead(sketch, s, n, stats),
                   (pages * 2 * summaryRow + full * 2 * summaryRow + forced +
                    2 * 300 * row + pages * 2 * summaryRow) /
                       G);
  stats[condensate::abi::StatFallback] = condensate::abi::kFellBack;
  stats[condensate::abi::StatAttended] = float(n);
  EXPECT_DOUBLE_EQ(bytesRead(sketch, s, n, stats),
                   (pages * 2 * summaryRow + full * 2 * summaryRow + forced +
                    2 * double(sketch.budget()) * row + 2 * n * row) /
                       G);
  // Decided early: no sparse pass.
  stats[condensate::abi::StatFallback] = condensate::abi::kFellBackEarly;
  EXPECT_DOUBLE_EQ(
      bytesRead(sketch, s, n, stats),
      (pages * 2 * summaryRow + full * 2 * summaryRow + forced + 2 * n * row) /
          G);
  // Open extras (a slot for every token): the early test ends at its
  // empty last slot and reads no keys.
  sketch.maxExtra = n - sketch.topUnits();
  stats[condensate::abi::StatFallback] = 0.0f;
  stats[condensate::abi::StatAttended] = 300.0f;
  EXPECT_DOUBLE_EQ(bytesRead(sketch, s, n, stats),
                   (pages * 2 * summaryRow + full * 2 * summaryRow +
                    2 * 300 * row + pages * 2 * summaryRow) /
                       G);
  // Without the output bound no value box is gathered.
  sketch.outputBound = false;
  EXPECT_DOUBLE_EQ(
      bytesRead(sketch, s, n, stats),
      (pages * 2 * summaryRow + full * 2 * summaryRow + 2 * 300 * row) / G);
}
