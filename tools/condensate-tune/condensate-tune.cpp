//===- condensate-tune.cpp - tune a model's GPU kernels on this device ----===//
//
// Runs the autotuner (condensate/Compiler/Tuner.h) for one model and
// schedule on the GPU at hand: every candidate compiled, checked against the
// float64 reference and timed cold in L2 on the workloads asked for; the
// winner is stored as a tuning record in the disk cache, where later JIT
// requests (getGPULibrary: the decoder, the Python op) and
// condensate-translate find it. docs/TUNING.md.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"
#include "condensate/Compiler/Tuner.h"
#include "condensate/Runtime/Files.h"

#include "../common/ToolSupport.h"

#include <cstdio>
#include <iostream>
#include <unistd.h>

using namespace condensate;
using namespace condensate::tools;

namespace {

const char *kUsage =
    "usage: condensate-tune INPUT [--batch=B[,B...]] [--context=N[,N...]]\n"
    "                       [--replays=N] [--device=N] [--record=FILE]\n"
    "                       [--no-store] [--quiet]\n"
    "  INPUT      a .mlir file holding a condensate.model op, or a .json spec\n"
    "             (as condensate-translate takes)\n"
    "  --batch    batch sizes to time (default 1)\n"
    "  --context  tokens per sequence to time (default 32768); every batch\n"
    "             is timed at every context, the score is their geometric\n"
    "             mean of per-layer times\n"
    "  --replays  timed CUDA-graph replays per candidate and workload\n"
    "             (default 15; the median counts)\n"
    "  --record   also write the tuning record (JSON) to FILE\n"
    "  --no-store do not store the record in the kernel cache\n"
    "             ($CONDENSATE_CACHE_DIR, else ~/.cache/condensate)\n";

std::vector<int64_t> parseList(const std::string &flag, const std::string &text,
                               int64_t max) {
  std::vector<int64_t> out;
  for (size_t at = 0; at <= text.size();) {
    size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(parseInt(flag, text.substr(at, comma - at), 1, max));
    if (out.size() > 64)
      fail(flag + " takes at most 64 values");
    at = comma + 1;
  }
  return out;
}

int run(int argc, char **argv) {
  std::string input, recordPath;
  std::vector<int64_t> batches = {1}, contexts = {32768};
  TuneOptions options;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> std::optional<std::string> {
      std::string f = std::string(flag) + "=";
      if (a.rfind(f, 0) == 0)
        return a.substr(f.size());
      return std::nullopt;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (auto v = value("--batch"))
      batches = parseList("--batch", *v, 4096);
    else if (auto v = value("--context"))
      contexts = parseList("--context", *v, int64_t(1) << 24);
    else if (auto v = value("--replays"))
      options.replays = static_cast<int>(parseInt("--replays", *v, 1, 10000));
    else if (auto v = value("--device"))
      options.device = static_cast<int>(parseInt("--device", *v, 0, 1024));
    else if (auto v = value("--record"))
      recordPath = *v;
    else if (a == "--no-store")
      options.cacheDir.clear();
    else if (a == "--quiet")
      quiet = true;
    else if (!a.empty() && a[0] == '-')
      fail("unknown option '" + a + "'\n" + kUsage);
    else if (input.empty())
      input = a;
    else
      fail("more than one input ('" + input + "', '" + a + "')");
  }
  if (input.empty())
    fail(std::string("no input\n") + kUsage);
  if (recordPath.empty() && options.cacheDir.empty())
    fail("--no-store without --record would keep nothing");
  std::string text = take(readFile(input));
  ModelShape shape;
  Schedule schedule;
  bool isJSON = input.size() > 5 && input.substr(input.size() - 5) == ".json";
  if (isJSON) {
    ModelSpec spec = take(parseModelSpecJSON(text, input));
    shape = spec.shape;
    schedule = spec.schedule;
  } else {
    auto parsed = take(parseModel(text, input));
    shape = parsed.first;
    schedule = parsed.second;
  }
  options.workloads.clear();
  for (int64_t b : batches)
    for (int64_t n : contexts)
      options.workloads.push_back({b, n});

  ProgressBar bar(!quiet && ::isatty(2), "tuning");
  options.progress = [&](size_t done, size_t total, const std::string &what) {
    bar.update(static_cast<int64_t>(done), static_cast<int64_t>(total), what);
  };
  TuneResult r = take(tuneGPULibrary(shape, schedule, options));
  bar.finish();

  std::printf("tuned %s on %s (%s), %.1f s, %zu candidates\n", input.c_str(),
              r.device.c_str(), r.chip.c_str(), r.seconds, r.candidates.size());
  std::printf("  %-52s", "knobs (* best)");
  for (const TuneWorkload &w : r.workloads)
    std::printf(" %11s", ("B" + std::to_string(w.batch) + "/" +
                          std::to_string(w.context))
                             .c_str());
  std::printf(" %10s %8s\n", "geomean us", "vs dflt");
  const double base = r.candidates[0].score;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneCandidate &c = r.candidates[i];
    std::printf("%s %-52s", i == r.best ? "*" : " ",
                c.tuning.options().c_str());
    if (!c.error.empty()) {
      std::printf(" rejected: %s\n", c.error.c_str());
      continue;
    }
    for (double us : c.microseconds)
      std::printf(" %11.2f", us);
    std::printf(" %10.2f %7.3fx%s\n", c.score, base / c.score,
                c.sameAs >= 0 ? " (same PTX)" : "");
  }
  const TuneCandidate &best = r.candidates[r.best];
  std::printf("best: %s, %.3fx the defaults (geomean %.2f -> %.2f us a "
              "layer)\n",
              best.tuning.options().c_str(), base / best.score, base,
              best.score);
  if (!r.recordPath.empty())
    std::printf("record: %s\n", r.recordPath.c_str());
  if (!recordPath.empty()) {
    check(writeFileAtomic(recordPath, r.record + "\n"));
    std::printf("record written to %s\n", recordPath.c_str());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return runMain("condensate-tune", [&] { return run(argc, argv); });
}
