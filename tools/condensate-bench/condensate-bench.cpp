//===- condensate-bench.cpp - Decode speed of a model: dense against policies ===//
//
// Times batched decode steps of one model (a GGUF file, or the dummy
// weights of a named architecture at a scale whose real weights cannot
// travel) at a given context and batch: dense first, then each policy, in
// the same process on the same cache contents (every policy's batch is a
// fresh copy of one prefilled sequence, each sequence with its own pages).
// Prints tokens/s, the speedup over dense, the bytes of the cache each
// read, and the memory-bound floor of a step (weights and KV bytes over the
// device's copy bandwidth) next to the measured time.
//
//===----------------------------------------------------------------------===//
#include "../common/ToolSupport.h"

#include "condensate/ABI/Limits.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Cuda/Driver.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"
#include "condensate/Runtime/Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <random>

using namespace condensate;
using namespace condensate::decoder;
using namespace condensate::tools;

namespace {

/// The H200's measured device copy bandwidth (DESIGN.md section 5).
constexpr double kH200CopyGBps = 4146.0;

const char *kUsage =
    "usage: condensate-bench (--dummy NAME | --model PATH) [options]\n"
    "Times batched decode steps, dense against each policy, in one process.\n"
    "  --dummy NAME          random weights of a real architecture (%s)\n"
    "  --model PATH          a GGUF model instead\n"
    "  --device cpu|gpu      (default gpu)\n"
    "  --context N           prompt tokens of every sequence (default 4096)\n"
    "  --prompt-file PATH    with --model: the prompt is the first N tokens\n"
    "                        of this text and the decode steps feed the\n"
    "                        tokens after them (default: random tokens)\n"
    "  --batch B             sequences decoded together (default 1)\n"
    "  --steps S             timed decode steps (default 32)\n"
    "  --warmup W            untimed steps first (default 4)\n"
    "  --policy P            a policy or schedule (JSON, MLIR, @file,\n"
    "                        dense or paper); may repeat; dense is always\n"
    "                        run first\n"
    "  --kv-type T           f32, f16 or bf16 (default bf16 on the GPU)\n"
    "  --gpu-weights T       f32 or bf16 (default): the type the GPU holds\n"
    "                        the weight matrices in\n"
    "  --page-size N         KV page size (default 64 on the GPU, 16 on the "
    "CPU)\n"
    "  --prefill-window W    prefill attends to the last W positions only\n"
    "                        (default 1024 with --dummy, whose cache values\n"
    "                        mean nothing; 0: the model's own attention)\n"
    "  --bandwidth GBPS      the floor's bandwidth (default %.0f, the H200's\n"
    "                        measured device copy, DESIGN.md section 5)\n"
    "  --threads N           CPU threads\n" CONDENSATE_FALLBACK_MEMORY_HELP(
        "  --fallback-memory N   ",
        "                        ") "  --json FILE           also write the "
                                    "results as JSON\n"
                                    "  --tune                tune each "
                                    "policy's GPU kernels for this batch\n"
                                    "                        and context first "
                                    "when the kernel cache has\n"
                                    "                        no tuning record "
                                    "for them (docs/TUNING.md)\n"
                                    "  --profile             one more step of "
                                    "each policy after the timed\n"
                                    "                        ones, inside "
                                    "cuProfilerStart/Stop (for ncu\n"
                                    "                        "
                                    "--profile-from-start off)\n";

struct Options {
  std::string dummy, model, device = "gpu", json, promptFile;
  int64_t context = 4096, batch = 1, steps = 32, warmup = 4, pageSize = 0,
          threads = 0, prefillWindow = -1, fallbackMemory = kFallbackMemory;
  double bandwidthGBps = kH200CopyGBps;
  bool profile = false, tune = false;
  std::optional<KVType> kvType;
  std::optional<WeightType> gpuWeights;
  std::vector<std::string> policies;
};

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--dummy")
      o.dummy = next();
    else if (arg == "--model")
      o.model = next();
    else if (arg == "--device") {
      o.device = next();
      if (o.device != "cpu" && o.device != "gpu")
        fail("--device must be cpu or gpu, got '" + o.device + "'");
    } else if (arg == "--prompt-file")
      o.promptFile = next();
    else if (arg == "--context")
      o.context = parseInt(arg, next(), 1, limits::kMaxPolicyTokens);
    else if (arg == "--batch")
      o.batch = parseInt(arg, next(), 1, 1024);
    else if (arg == "--steps")
      o.steps = parseInt(arg, next(), 1, 100000);
    else if (arg == "--warmup")
      o.warmup = parseInt(arg, next(), 0, 100000);
    else if (arg == "--policy")
      o.policies.push_back(next());
    else if (arg == "--kv-type") {
      Result<KVType> t = parseKVType(next());
      if (!t)
        fail("--kv-type: " + t.message());
      o.kvType = *t;
    } else if (arg == "--gpu-weights") {
      Result<WeightType> t = parseWeightType(next());
      if (!t)
        fail("--gpu-weights: " + t.message());
      o.gpuWeights = *t;
    } else if (arg == "--page-size")
      o.pageSize = parseInt(arg, next(), 1, 1024);
    else if (arg == "--prefill-window")
      o.prefillWindow = parseInt(arg, next(), 0, limits::kMaxPolicyTokens);
    else if (arg == "--bandwidth")
      o.bandwidthGBps = double(parseInt(arg, next(), 1, 1000000));
    else if (arg == "--threads")
      o.threads = parseInt(arg, next(), 1, kMaxThreads);
    else if (arg == "--fallback-memory")
      o.fallbackMemory = parseInt(arg, next(), 0, kMaxGeneratedTokens);
    else if (arg == "--json")
      o.json = next();
    else if (arg == "--profile")
      o.profile = true;
    else if (arg == "--tune")
      o.tune = true;
    else if (arg == "--help" || arg == "-h") {
      std::printf(kUsage, ModelWeights::dummyArchitectures().c_str(),
                  kH200CopyGBps);
      std::exit(0);
    } else
      fail("unknown argument '" + arg + "' (--help lists them)");
  }
  if (o.dummy.empty() == o.model.empty())
    fail("give one of --dummy NAME or --model PATH");
  if (!o.promptFile.empty() && o.model.empty())
    fail("--prompt-file needs --model (random weights have no tokenizer)");
  return o;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

struct Row {
  std::string name;
  std::string tuning; ///< the kernels' tuned knobs, "" for the defaults
  double secondsPerStep = 0.0, bytesRead = 0.0, positions = 0.0,
         floorSeconds = 0.0;
  AttentionSummary summary; ///< the timed steps' attention statistics
};

/// The tokens of `path`'s text under the model file's tokenizer; at least
/// `need` of them, or a one-line error naming the file.
std::vector<int32_t> promptTokens(const std::string &path,
                                  const model::GGUFFile &file, int64_t need) {
  // A prompt of up to 2^20 tokens is a few MB of text: 64 MB bounds it.
  const std::string text = take(readFile(path, int64_t(64) << 20));
  model::Tokenizer tokenizer = take(model::Tokenizer::fromGGUF(file));
  std::vector<int32_t> ids = tokenizer.encode(text);
  if (int64_t(ids.size()) < need)
    fail("--prompt-file: '" + path + "' holds " + std::to_string(ids.size()) +
         " tokens; --context, --warmup and --steps need " +
         std::to_string(need));
  return ids;
}

} // namespace

int main(int argc, char **argv) {
  return runMain("condensate-bench", [&]() -> int {
    const Options o = parseArgs(argc, argv);
    const bool gpu = o.device == "gpu";
    if (o.profile && !gpu)
      fail("--profile needs --device gpu");
    if (o.gpuWeights && !gpu)
      fail("--gpu-weights needs --device gpu");
    if (o.tune && !gpu)
      fail("--tune needs --device gpu");
    const auto loadStart = std::chrono::steady_clock::now();
    // The model file, opened once: its weights and, with --prompt-file,
    // its tokenizer.
    std::optional<model::GGUFFile> file;
    if (o.dummy.empty())
      file.emplace(take(model::GGUFFile::open(o.model)));
    std::shared_ptr<const ModelWeights> weights =
        file ? take(ModelWeights::load(*file))
             : take(ModelWeights::dummy(o.dummy));
    const ModelConfig &cfg = weights->config();
    const double loadSeconds = secondsSince(loadStart);
    if (cfg.contextLength > 0 && o.context + o.warmup + o.steps > cfg.contextLength)
      fail("--context " + std::to_string(o.context) + " plus " +
           std::to_string(o.warmup + o.steps) +
           " steps exceeds the model's context length " +
           std::to_string(cfg.contextLength));

    // Policies: dense first; all on one page size and one sketch width.
    const int64_t page = o.pageSize ? o.pageSize : (gpu ? 64 : 16);
    std::vector<std::pair<std::string, Schedule>> runs = {
        {"dense", Schedule::uniform(cfg.numLayers, Policy::makeDense())}};
    int64_t sketchBits = 0;
    for (const std::string &p : o.policies) {
      Schedule s = withPageSize(
          take(parseSchedule(policySpec(p).text, cfg.numLayers, "--policy")),
          page);
      if (int64_t b = s.sketchBits()) {
        if (sketchBits && b != sketchBits)
          fail("the policies use sketches of " + std::to_string(sketchBits) +
               " and " + std::to_string(b) + " bits; one cache holds one");
        sketchBits = b;
      }
      runs.emplace_back(p, std::move(s));
    }

    // One prompt (prefilled once below): random tokens, or the text's first
    // --context tokens, the decode steps then feeding the ones after them
    // (each policy the same), so that the cache and the queries are the
    // model's own on real text. Read before the decoder is made, so that a
    // bad file fails fast.
    std::mt19937 rng(20261202);
    std::uniform_int_distribution<int32_t> token(0, int32_t(cfg.vocab - 1));
    std::vector<int32_t> prompt;
    if (!o.promptFile.empty()) {
      prompt =
          promptTokens(o.promptFile, *file, o.context + o.warmup + o.steps + 1);
    } else {
      prompt.resize(static_cast<size_t>(o.context));
      for (int32_t &t : prompt)
        t = token(rng);
    }
    DecoderOptions opts;
    opts.backend = gpu ? BackendKind::GPU : BackendKind::CPU;
    opts.kvType = o.kvType.value_or(gpu ? KVType::BF16 : KVType::F32);
    if (gpu)
      opts.weightType = o.gpuWeights.value_or(WeightType::BF16);
    opts.pageSize = page;
    opts.sketchBits = sketchBits;
    opts.threads = int(o.threads);
    opts.fallbackMemory = o.fallbackMemory;
    opts.maxBatch = o.batch;
    if (o.tune)
      opts.tuneFor = {{o.batch, o.context}};
    opts.prefillWindow =
        o.prefillWindow >= 0 ? o.prefillWindow : (o.dummy.empty() ? 0 : 1024);
    // The prefilled sequence and one batch of copies at a time.
    const int64_t perSeq = o.context + o.warmup + o.steps + 2 * page;
    opts.maxTokens = (o.batch + 1) * perSeq;
    std::unique_ptr<Decoder> dec =
        take(Decoder::create(weights, runs.front().second, opts));

    const Decoder::SeqId base = dec->newSequence();
    const auto prefillStart = std::chrono::steady_clock::now();
    check(dec->prefill(base, prompt.data(), o.context, nullptr));
    const double prefillSeconds = secondsSince(prefillStart);

    // The floor of a step: every weight matrix read once in the type the
    // device holds it (the embedding table only for the batch's rows), and
    // the KV the policy read.
    const WeightFootprint &held = dec->weightFootprint();
    const double kvDense =
        double(o.batch) * double(cfg.numLayers) * double(cfg.kvHeads) *
        double(abi::denseBytes(o.context, cfg.headDim,
                               kvTypeBytes(opts.kvType)));
    const double weightBytes = double(held.stepBytes);
    const double bandwidth = o.bandwidthGBps * 1e9;

    std::vector<Row> rows;
    std::string memory;
    std::vector<float> logits(static_cast<size_t>(o.batch * cfg.vocab));
    for (auto &[name, schedule] : runs) {
      std::shared_ptr<const AttentionProgram> program =
          take(dec->compile(schedule));
      check(dec->setProgram(program));
      std::vector<Decoder::SeqId> seqs;
      for (int64_t b = 0; b < o.batch; ++b)
        seqs.push_back(take(dec->fork(base, /*shareFullPages=*/false)));
      std::vector<int32_t> next(static_cast<size_t>(o.batch));
      for (int32_t &t : next)
        t = token(rng);
      // With a prompt file every step feeds the text's next token to every
      // sequence (outside the timing: a vector fill).
      int64_t fed = o.context;
      auto feed = [&]() {
        if (!o.promptFile.empty())
          std::fill(next.begin(), next.end(), prompt[size_t(fed++)]);
      };
      AttentionStatsAccumulator stats(dec->schedule(), dec->shape(),
                                      cfg.attentionSpans());
      for (int64_t s = 0; s < o.warmup; ++s) {
        feed();
        check(dec->step(seqs.data(), next.data(), o.batch, logits.data()));
      }
      double stepSeconds = 0.0;
      for (int64_t s = 0; s < o.steps; ++s) {
        feed();
        const auto start = std::chrono::steady_clock::now();
        check(dec->step(seqs.data(), next.data(), o.batch, logits.data()));
        stepSeconds += secondsSince(start);
        stats.add(dec->stats().data(), dec->lastLens(), o.batch);
      }
      Row r;
      r.name = name;
      r.tuning = program->tuning();
      r.secondsPerStep = stepSeconds / double(o.steps);
      if (o.profile && gpu) {
        feed();
        cuda::Context ctx = take(cuda::Context::primary(0));
        check(ctx.synchronize());
        check(ctx.setProfiling(true));
        check(dec->step(seqs.data(), next.data(), o.batch, logits.data()));
        check(ctx.synchronize());
        check(ctx.setProfiling(false));
      }
      const AttentionSummary sum = stats.summary();
      r.bytesRead = sum.bytesRead;
      r.positions = sum.positionsAttended;
      r.summary = sum;
      // The device's bandwidth: a floor for the GPU only.
      r.floorSeconds =
          gpu ? (weightBytes + kvDense * sum.bytesRead) / bandwidth : 0.0;
      if (memory.empty())
        memory = dec->memoryUse(); // with the batch's copies allocated
      rows.push_back(r);
      for (Decoder::SeqId id : seqs)
        check(dec->release(id));
    }

    // What the decoder holds: on the GPU, of the weight type; on the CPU,
    // as loaded.
    const std::string weightKind =
        gpu ? std::string(weightTypeName(opts.weightType)) + " on the GPU"
        : weights->storage() == WeightStorage::Quantized ? "quantized"
                                                         : "float32";
    std::printf("model: %s (%s); weights %.2f GB %s, loaded in %.1f s\n",
                o.dummy.empty() ? o.model.c_str()
                                : ("dummy " + o.dummy).c_str(),
                cfg.describe().c_str(), double(held.heldBytes) / 1e9,
                weightKind.c_str(), loadSeconds);
    std::printf("device: %s; kv %s, page %lld; context %lld x batch %lld of "
                "%s; prefill %.1f s (%s); %lld timed steps after %lld\n",
                dec->deviceDescription().c_str(), kvTypeName(opts.kvType),
                (long long)page, (long long)o.context, (long long)o.batch,
                o.promptFile.empty() ? "random tokens"
                                     : ("'" + o.promptFile + "'").c_str(),
                prefillSeconds,
                opts.prefillWindow > 0
                    ? ("window " + std::to_string(opts.prefillWindow)).c_str()
                    : "the model's attention",
                (long long)o.steps, (long long)o.warmup);
    if (gpu)
      std::printf("floor: weights %.2f GB + dense KV %.2f GB a step at %.0f "
                  "GB/s; device memory %s\n",
                  weightBytes / 1e9, kvDense / 1e9, o.bandwidthGBps,
                  memory.c_str());
    std::printf("%-10s %10s %9s %8s %10s %10s %10s  %s\n", "policy", "tok/s",
                "ms/step", "speedup", "bytes", "positions", "floor ms",
                "schedule");
    nlohmann::json j;
    j["model"] = o.dummy.empty() ? o.model : "dummy " + o.dummy;
    j["architecture"] = cfg.describe();
    j["device"] = dec->deviceDescription();
    j["context"] = o.context;
    j["prompt"] = o.promptFile.empty() ? "random tokens" : o.promptFile;
    j["batch"] = o.batch;
    j["steps"] = o.steps;
    j["kv_type"] = kvTypeName(opts.kvType);
    if (gpu)
      j["gpu_weights"] = weightTypeName(opts.weightType);
    j["weights_held_bytes"] = held.heldBytes;
    j["page_size"] = page;
    j["prefill_seconds"] = prefillSeconds;
    j["prefill_window"] = opts.prefillWindow;
    j["weight_bytes"] = weightBytes;
    j["dense_kv_bytes"] = kvDense;
    j["bandwidth_gbps"] = o.bandwidthGBps;
    if (!memory.empty())
      j["device_memory"] = memory;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row &r = rows[i];
      const double tps = double(o.batch) / r.secondsPerStep;
      const double speedup = rows.front().secondsPerStep / r.secondsPerStep;
      std::printf("%-10s %10.1f %9.3f %7.2fx %9.1f%% %9.1f%% %10.3f  %s\n",
                  i == 0 ? "dense" : ("policy " + std::to_string(i)).c_str(),
                  tps, r.secondsPerStep * 1e3, speedup, 100.0 * r.bytesRead,
                  100.0 * r.positions, r.floorSeconds * 1e3,
                  i == 0 ? "" : r.name.c_str());
      if (!r.tuning.empty())
        std::printf("%-10s kernels tuned: %s\n", "", r.tuning.c_str());
      const AttentionSummary &a = r.summary;
      // Head-steps of certified layers: the certificate ran on
      // a.certified, the fallback memory ran a.ranDense dense.
      const int64_t certifiable = a.certified + a.ranDense;
      const double ranDense =
          certifiable ? double(a.ranDense) / double(certifiable) : 0.0;
      if (a.certified)
        std::printf("%-10s certified %.1f%% of head-steps, fell back on "
                    "%.1f%% (%.1f%% early)",
                    "", 100.0 * a.passRate(), 100.0 * a.fallbackRate(),
                    100.0 * a.earlyFallbackRate());
      if (a.ranDense)
        std::printf("%s%.1f%% of certified layers' head-steps ran dense "
                    "(fallback memory)",
                    a.certified ? "; " : "           ", 100.0 * ranDense);
      if (certifiable)
        std::printf("\n");
      nlohmann::json run = {{"policy", r.name},
                            {"kernel_tuning", r.tuning},
                            {"tokens_per_second", tps},
                            {"seconds_per_step", r.secondsPerStep},
                            {"speedup_over_dense", speedup},
                            {"bytes_read", r.bytesRead},
                            {"positions_attended", r.positions},
                            {"floor_seconds_per_step", r.floorSeconds}};
      if (a.certified) {
        run["certified_pass_rate"] = a.passRate();
        run["certified_fallback_rate"] = a.fallbackRate();
        run["certified_early_fallback_rate"] = a.earlyFallbackRate();
      }
      if (certifiable)
        run["ran_dense_rate"] = ranDense;
      j["runs"].push_back(run);
    }
    if (!o.json.empty())
      check(writeFileAtomic(o.json, j.dump(1) + "\n"));
    return 0;
  });
}
