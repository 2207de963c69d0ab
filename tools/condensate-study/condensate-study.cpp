//===- condensate-study.cpp - Fidelity study of sparse decode attention ---===//
//
//   condensate-study prompts [--seed N] [--out DIR]   generate the prompts
//   condensate-study run [--quick] [...]              run the study
//
// See reports/fidelity/README.md for what is measured and why.
//
//===----------------------------------------------------------------------===//
#include "Prompts.h"
#include "Study.h"
#include "ToolSupport.h"

#include "condensate/ABI/Limits.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/DefaultModel.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <limits>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace condensate;
using namespace condensate::study;
using namespace condensate::tools;

namespace {

constexpr const char *kTool = "condensate-study";

const char *kUsage =
    "usage: condensate-study prompts [options]   generate the study's prompts\n"
    "       condensate-study run [options]       run the study\n"
    "common options:\n"
    "  --model PATH        GGUF model (default " CONDENSATE_DEFAULT_MODEL ")\n"
    "prompts options:\n"
    "  --seed N            generator seed (default 20261129)\n"
    "  --out DIR           output folder (default reports/fidelity/prompts)\n"
    "  --contexts LIST     comma-separated context lengths (default\n"
    "                      512,1024,2048,4096,8192; others get every passkey\n"
    "                      depth, one multi-needle and one natural prompt)\n"
    "run options:\n"
    "  --prompts FILE      prompts (default "
    "reports/fidelity/prompts/prompts.jsonl)\n"
    "  --out DIR           results folder (default reports/fidelity, or\n"
    "                      reports/fidelity/quick with --quick)\n"
    "  --quick             contexts <= 1024, passkey at 0/50/100%, one prompt\n"
    "                      per other task, 14 policies, 64-token "
    "continuations\n"
    "                      (a few minutes)\n"
    "  --contexts LIST     comma-separated context lengths to run\n"
    "  --policies LIST     comma-separated policy names (dense is always run;\n"
    "                      cert-open-TAU / cert-open8-TAU: the certified\n"
    "                      4-/8-bit sketch policy, open extras, any TAU in\n"
    "                      (0, 1); cert-mass-TAU: cert-open-TAU without the\n"
    "                      output-error bound, which reads no value boxes)\n"
    "  --natural-tokens N  dense greedy continuation of natural text (256)\n"
    "  --metric-steps N    teacher-forced KL/top-1 window on natural text "
    "(32)\n"
    "  --threads N         OpenBLAS threads (default 2)\n"
    "  --pool-tokens N     KV tokens held at once (default 140000, ~7.4 GB)\n"
    "  --page-size N       tokens a page of the cache and of every policy's\n"
    "                      summaries and sketches (default 16; the paper\n"
    "                      schedule needs 16)\n";

/// `relative` in the current directory or the source tree; as given if in
/// neither (the error then names it).
std::string locateOr(const std::string &relative) {
  std::string found = locate(relative);
  return found.empty() ? relative : found;
}

/// The value of the flag at argv[i] (the next argument); i moves onto it.
std::string valueAfter(int argc, char **argv, int &i) {
  if (i + 1 >= argc)
    fail(std::string(argv[i]) + " needs a value");
  return argv[++i];
}

int64_t parseInt(const std::string &flag, const std::string &text) {
  return tools::parseInt(flag, text, 0, std::numeric_limits<int64_t>::max());
}

std::string commandLine(int argc, char **argv) {
  std::string s = kTool;
  for (int i = 1; i < argc; ++i)
    s += std::string(" ") + argv[i];
  return s;
}

int runPrompts(int argc, char **argv) {
  std::string model = locateOr(CONDENSATE_DEFAULT_MODEL);
  std::string out = "reports/fidelity/prompts";
  uint64_t seed = 20261129;
  std::vector<int64_t> contexts;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return valueAfter(argc, argv, i); };
    if (a == "--model")
      model = next();
    else if (a == "--seed")
      seed = uint64_t(parseInt(a, next()));
    else if (a == "--out")
      out = next();
    else if (a == "--contexts") {
      for (const std::string &c : nonEmptyList(a, next()))
        contexts.push_back(parseInt(a, c));
    } else
      fail("unknown argument '" + a + "' (see --help)");
  }
  Result<PromptPlan> planned = planFor(contexts);
  if (!planned)
    fail("--contexts: " + planned.message());
  Result<model::GGUFFile> file = model::GGUFFile::open(model);
  if (!file)
    fail(file.message());
  Result<model::Tokenizer> tok = model::Tokenizer::fromGGUF(*file);
  if (!tok)
    fail(tok.message());
  const PromptPlan plan = *planned;
  Result<std::vector<PromptRecord>> prompts =
      generatePrompts(*file, *tok, plan, seed);
  if (!prompts)
    fail(prompts.message());
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  Status st = writePrompts(out + "/prompts.jsonl", *prompts);
  if (!st.ok())
    fail(st.message());
  nlohmann::json m;
  m["seed"] = seed;
  m["command"] = commandLine(argc, argv);
  m["model"] = model;
  m["generator"] = "tools/condensate-study/Prompts.cpp (SplitMix64, "
                   "portable across standard libraries)";
  m["sources"] = {"/usr/share/common-licenses/*",
                  "/usr/share/doc/*/copyright",
                  "/usr/include/c++/12/bits/*.h, *.tcc"};
  m["contexts"] = plan.contexts;
  m["passkey_depths"] = plan.depths;
  m["per_context"] = {{"multikey", plan.multikey},
                      {"vartrack", plan.vartrack},
                      {"copy", plan.copy},
                      {"natural", plan.natural}};
  m["answer_reserve"] = plan.answerReserve;
  m["natural_reserve"] = plan.naturalReserve;
  m["continuation_tokens"] = plan.continuationTokens;
  int64_t total = 0;
  for (const PromptRecord &p : *prompts)
    total += p.tokens;
  m["prompts"] = int64_t(prompts->size());
  m["total_tokens"] = total;
  std::ofstream mf(out + "/manifest.json");
  mf << m.dump(1) << "\n";
  if (!mf)
    fail("cannot write " + out + "/manifest.json");
  std::fprintf(stderr, "%s: wrote %zu prompts (%lld tokens) to %s\n", kTool,
               prompts->size(), (long long)total, out.c_str());
  return 0;
}

int runStudyCommand(int argc, char **argv) {
  StudyOptions o;
  o.model = locateOr(CONDENSATE_DEFAULT_MODEL);
  o.prompts = locateOr("reports/fidelity/prompts/prompts.jsonl");
  o.paperSchedule = locateOr("examples/paper.mlir");
  o.command = commandLine(argc, argv);
  std::string out;
  bool naturalSet = false, metricSet = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return valueAfter(argc, argv, i); };
    if (a == "--model")
      o.model = next();
    else if (a == "--prompts")
      o.prompts = next();
    else if (a == "--out")
      out = next();
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--contexts") {
      for (const std::string &c : nonEmptyList(a, next()))
        o.contexts.push_back(parseInt(a, c));
    } else if (a == "--policies")
      o.policies = nonEmptyList(a, next());
    else if (a == "--natural-tokens") {
      o.naturalTokens = tools::parseInt(a, next(), 2, kMaxGeneratedTokens);
      naturalSet = true;
    } else if (a == "--metric-steps") {
      o.metricSteps = tools::parseInt(a, next(), 1, kMaxGeneratedTokens);
      metricSet = true;
    } else if (a == "--threads")
      o.threads = int(tools::parseInt(a, next(), 1, kMaxThreads));
    else if (a == "--pool-tokens")
      o.poolTokens = tools::parseInt(a, next(), 1, limits::kMaxPolicyTokens);
    else if (a == "--page-size") {
      o.pageSize = tools::parseInt(a, next(), 1, 1024);
      if (o.pageSize & (o.pageSize - 1))
        fail("--page-size: " + std::to_string(o.pageSize) +
             " is not a power of two");
    } else
      fail("unknown argument '" + a + "' (see --help)");
  }
  if (o.quick) {
    if (!naturalSet)
      o.naturalTokens = 64;
    if (!metricSet)
      o.metricSteps = 16;
  }
  o.outDir = out.empty() ? (o.quick ? "reports/fidelity/quick"
                                    : "reports/fidelity")
                         : out;
  Status st = runStudy(o);
  if (!st.ok())
    fail(st.message());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // OpenBLAS 0.3.21 does not know this CPU generation and falls back to
  // generic kernels (2-3x slower): re-execute with the core type set, as
  // condensate-decode does.
  reexecWith(argv, "OPENBLAS_CORETYPE", decoder::blasCoreRecommendation(),
             "CONDENSATE_STUDY_REEXEC");
  return runMain(kTool, [&] {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd.empty()) {
      std::fputs(kUsage, cmd.empty() ? stderr : stdout);
      return cmd.empty() ? 1 : 0;
    }
    if (cmd == "prompts")
      return runPrompts(argc, argv);
    if (cmd == "run")
      return runStudyCommand(argc, argv);
    fail("unknown command '" + cmd + "' (expected 'prompts' or 'run')");
  });
}
