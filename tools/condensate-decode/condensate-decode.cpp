//===- condensate-decode.cpp - Generate text with a condensate policy -----===//
//
// Loads a Llama-family GGUF, prefills a prompt (dense), decodes greedily with
// the chosen attention policy on the CPU or the GPU, and reports speed and,
// with --compare dense, the policy's fidelity to dense decoding. The run is
// a decoder::Session; this file parses arguments, finds the model, prompt
// and policy, and prints.
//
//===----------------------------------------------------------------------===//
#include "Capture.h"
#include "ToolSupport.h"

#include "condensate/ABI/Limits.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Decoder/Chat.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Decoder/Session.h"
#include "condensate/DefaultModel.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace condensate;
using namespace condensate::decoder;
using namespace condensate::tools;

namespace {

constexpr const char *kTool = "condensate-decode";
/// Set when this program re-executed itself for OpenBLAS (main).
constexpr const char *kReexecMarker = "CONDENSATE_DECODE_REEXEC";

const char *kUsage =
    "usage: condensate-decode [options]\n"
    "  --model PATH           GGUF model (default " CONDENSATE_DEFAULT_MODEL
    ",\n"
    "                         looked up in the current directory, then the "
    "repository)\n"
    "  --prompt TEXT          prompt text\n"
    "  --prompt-file PATH     prompt read from a file\n"
    "  --long-prompt N        a document of N tokens built from the texts in\n"
    "                         /usr/share/common-licenses (name order,\n"
    "                         repeated as needed), then a question about it\n"
    "  --chat                 wrap the prompt in the model's ChatML template\n"
    "  --system TEXT          system prompt for --chat (default: the "
    "template's)\n"
    "  --policy TEXT|@FILE    schedule or policy as JSON or MLIR; 'dense', "
    "'paper'\n"
    "                         (default: examples/paper.mlir if found, else "
    "dense)\n"
    "  --max-new-tokens N     tokens to generate (default 64)\n"
    "  --ignore-eos           do not stop at end-of-generation tokens\n"
    "  --compare dense        also decode densely and report fidelity\n"
    "  --device cpu|gpu       where to decode (gpu: an NVIDIA GPU through the\n"
    "                         generated PTX kernels, cuBLAS and a CUDA graph\n"
    "                         per step; KV type defaults to bf16 there)\n"
    "  --kv-type T            f32 (default), f16 or bf16\n"
    "  --gpu-weights T        f32 (default) or bf16: the type the GPU holds\n"
    "                         the weight matrices in (bf16 halves the bytes\n"
    "                         a step reads)\n"
    "  --page-size N          KV page size (re-pages the policy)\n"
    "  --threads N            CPU threads (OpenBLAS, the products over\n"
    "                         quantised weights, prefill and decode\n"
    "                         attention)\n"
    "  --weights auto|quantized|f32\n"
    "                         hold the matrices as the file's quantised\n"
    "                         blocks (about the file's size in memory) or\n"
    "                         as float32 (4-8x the file); auto (default):\n"
    "                         quantised where this CPU multiplies every\n"
    "                         matrix's type in place, else float32 when\n"
    "                         that fits in half the memory\n"
    "  --json                 print one JSON object instead of text\n"
    "  --quiet                print only the generated text\n"
    "  --profile              time the parts of the policy's decode "
    "steps\n"
    "  --capture-kv DIR       instead of generating: prefill the prompt but\n"
    "                         its last token, decode that token (dense, on\n"
    "                         the CPU) and write the step's queries and the\n"
    "                         cache's keys and values to DIR (.npy files and\n"
    "                         capture.json) for bench/bench_captured.py\n"
    "  --capture-layers LIST  layers --capture-kv writes (comma-separated;\n"
    "                         default: all)\n" CONDENSATE_FALLBACK_MEMORY_HELP(
        "  --fallback-memory N    ",
        "                         ") "  --help                 this message\n";

struct Options {
  std::string model;
  std::optional<std::string> prompt, promptFile, policy, system;
  std::optional<std::string> captureDir, captureLayers;
  bool chat = false, json = false, quiet = false, ignoreEos = false;
  bool compareDense = false, profile = false;
  int64_t maxNew = 64, pageSize = 0, threads = 0, longPrompt = 0;
  int64_t fallbackMemory = kFallbackMemory;
  std::optional<KVType> kvType; ///< default: the device's
  std::optional<WeightType> gpuWeights;
  std::string device = "cpu";
  WeightStorage weights = WeightStorage::Auto;
  bool help = false;
};

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasValue = true;
      }
    }
    auto next = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        fail(arg + " needs a value");
      return argv[++i];
    };
    auto flagOnly = [&]() {
      if (hasValue)
        fail(arg + " takes no value");
    };
    if (arg == "--model")
      o.model = next();
    else if (arg == "--prompt")
      o.prompt = next();
    else if (arg == "--prompt-file")
      o.promptFile = next();
    else if (arg == "--long-prompt")
      o.longPrompt = parseInt(arg, next(), 16, limits::kMaxPolicyTokens);
    else if (arg == "--system")
      o.system = next();
    else if (arg == "--policy")
      o.policy = next();
    else if (arg == "--max-new-tokens")
      o.maxNew = parseInt(arg, next(), 0, kMaxGeneratedTokens);
    else if (arg == "--page-size")
      o.pageSize = parseInt(arg, next(), 1, 1024);
    else if (arg == "--threads")
      o.threads = parseInt(arg, next(), 1, kMaxThreads);
    else if (arg == "--capture-kv")
      o.captureDir = next();
    else if (arg == "--capture-layers")
      o.captureLayers = next();
    else if (arg == "--fallback-memory")
      o.fallbackMemory = parseInt(arg, next(), 0, kMaxGeneratedTokens);
    else if (arg == "--kv-type") {
      auto t = parseKVType(next());
      if (!t.ok())
        fail("--kv-type: " + t.message());
      o.kvType = *t;
    } else if (arg == "--gpu-weights") {
      auto t = parseWeightType(next());
      if (!t.ok())
        fail("--gpu-weights: " + t.message());
      o.gpuWeights = *t;
    } else if (arg == "--compare") {
      std::string what = next();
      if (what != "dense")
        fail("--compare supports only 'dense', got '" + what + "'");
      o.compareDense = true;
    } else if (arg == "--chat") {
      flagOnly();
      o.chat = true;
    } else if (arg == "--device") {
      o.device = next();
      if (o.device != "cpu" && o.device != "gpu")
        fail("--device must be cpu or gpu, got '" + o.device + "'");
    } else if (arg == "--weights") {
      const std::string w = next();
      if (w == "auto")
        o.weights = WeightStorage::Auto;
      else if (w == "quantized")
        o.weights = WeightStorage::Quantized;
      else if (w == "f32")
        o.weights = WeightStorage::Float32;
      else
        fail("--weights must be auto, quantized or f32, got '" + w + "'");
    } else if (arg == "--json") {
      flagOnly();
      o.json = true;
    } else if (arg == "--quiet") {
      flagOnly();
      o.quiet = true;
    } else if (arg == "--profile") {
      flagOnly();
      o.profile = true;
    } else if (arg == "--ignore-eos") {
      flagOnly();
      o.ignoreEos = true;
    } else if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else {
      fail("unknown argument '" + std::string(argv[i]) + "' (see --help)");
    }
  }
  if (int(bool(o.prompt)) + int(bool(o.promptFile)) + int(o.longPrompt > 0) >
      1)
    fail("give one of --prompt, --prompt-file and --long-prompt");
  if (!o.help && !o.prompt && !o.promptFile && o.longPrompt == 0)
    fail("no prompt: pass --prompt TEXT, --prompt-file PATH or "
         "--long-prompt N");
  if (o.system && !o.chat)
    fail("--system needs --chat");
  if (o.gpuWeights && o.device != "gpu")
    fail("--gpu-weights needs --device gpu");
  if (o.captureLayers && !o.captureDir)
    fail("--capture-layers needs --capture-kv");
  if (o.captureDir && o.device != "cpu")
    fail("--capture-kv runs on the CPU (--device cpu)");
  if (o.captureDir && o.compareDense)
    fail("--capture-kv generates nothing to compare (drop --compare)");
  if (o.captureDir && o.policy)
    fail("--capture-kv decodes its one step densely (drop --policy)");
  if (o.captureDir && o.captureDir->empty())
    fail("--capture-kv needs a folder");
  return o;
}

/// About `tokens` tokens of real text from this machine: the files in
/// /usr/share/common-licenses in name order, repeated until long enough,
/// cut at a token boundary.
std::string longDocument(const model::Tokenizer &tokenizer, int64_t tokens) {
  const std::string dir = "/usr/share/common-licenses";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file(ec))
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::string texts;
  for (const std::string &f : files) {
    auto content = condensate::readFile(f);
    if (content && !content->empty())
      texts += *content + "\n\n";
  }
  if (texts.empty())
    fail("--long-prompt: no text found in " + dir);
  // Whole copies first (cheap to count), then cut at a token boundary.
  const int64_t perCopy = int64_t(tokenizer.encode(texts).size());
  std::string doc;
  for (int64_t have = 0; have < tokens; have += std::max<int64_t>(perCopy, 1))
    doc += texts;
  std::vector<int32_t> ids = tokenizer.encode(doc);
  ids.resize(size_t(std::min<int64_t>(tokens, int64_t(ids.size()))));
  return tokenizer.decode(ids, /*renderSpecial=*/false);
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       since)
      .count();
}

/// Contents of a file that locate() found.
/// The policy to decode with: its name for the report and its text.
struct PolicyChoice : PolicySpec {
  bool isDefault = false; ///< not asked for: may not fit the model
};

PolicyChoice choosePolicy(const Options &o) {
  if (o.policy)
    return {policySpec(*o.policy)};
  // The paper's schedule where it is found, else dense.
  PolicyChoice c{locate(kPaperSchedule).empty() ? policySpec("dense")
                                                : policySpec("paper")};
  c.isDefault = true;
  return c;
}

int runTool(const Options &o) {
  const auto start = std::chrono::steady_clock::now();
  const bool json = o.json, chatty = !o.json && !o.quiet;

  // Model -------------------------------------------------------------------
  std::string modelPath = o.model;
  if (modelPath.empty()) {
    modelPath = locate(CONDENSATE_DEFAULT_MODEL);
    if (modelPath.empty())
      fail(std::string("model not found: ") + CONDENSATE_DEFAULT_MODEL +
           " (looked in the current directory and " + CONDENSATE_SOURCE_DIR +
           "); pass --model PATH");
  }
  auto loadStart = std::chrono::steady_clock::now();
  model::GGUFFile file = take(model::GGUFFile::open(modelPath));
  model::Tokenizer tokenizer = take(model::Tokenizer::fromGGUF(file));
  std::shared_ptr<const ModelWeights> weights =
      take(ModelWeights::load(file, o.weights));
  const ModelConfig &cfg = weights->config();
  const double loadSeconds = seconds(loadStart);

  // Prompt ------------------------------------------------------------------
  std::string promptText;
  if (o.promptFile) {
    auto content = condensate::readFile(*o.promptFile);
    if (!content)
      fail("prompt file: " + content.message());
    promptText = *content;
  } else if (o.longPrompt > 0) {
    promptText = longDocument(tokenizer, o.longPrompt) +
                 "\n\nIn one sentence, what is the first text above about?";
  } else {
    promptText = *o.prompt;
  }
  if (o.chat)
    promptText = take(applyChatTemplate(file, promptText,
                                        o.system ? *o.system : ""));
  std::vector<int32_t> prompt =
      tokenizer.encode(promptText, /*parseSpecial=*/true);
  if (tokenizer.addBosToken() && tokenizer.bosId() >= 0)
    prompt.insert(prompt.begin(), tokenizer.bosId());
  if (prompt.empty())
    fail("the prompt encodes to no tokens");

  if (o.captureDir) {
    CaptureRequest req;
    req.dir = *o.captureDir;
    req.layers = o.captureLayers.value_or("");
    req.modelPath = modelPath;
    req.kvType = o.kvType.value_or(KVType::F32);
    req.threads = int(o.threads);
    std::string done = captureKV(weights, prompt, req);
    if (!o.quiet)
      std::printf("%s\n", done.c_str());
    return 0;
  }

  // Policy ------------------------------------------------------------------
  PolicyChoice policy = choosePolicy(o);
  Result<Schedule> parsed =
      parseSchedule(policy.text, cfg.numLayers, "--policy");
  Schedule schedule;
  if (!parsed) {
    if (!policy.isDefault)
      fail(parsed.message());
    // The paper schedule is written for SmolLM2-135M's 30 layers.
    if (chatty)
      std::fprintf(stderr,
                   "%s: note: the default paper schedule does not fit this "
                   "model (%s); using dense\n",
                   kTool, parsed.message().c_str());
    policy.name = "dense";
    schedule = Schedule::uniform(cfg.numLayers, Policy::makeDense());
  } else {
    schedule = parsed.take();
  }
  if (o.pageSize)
    schedule = withPageSize(schedule, o.pageSize);

  // Session -----------------------------------------------------------------
  SessionOptions so;
  so.device = o.device == "gpu" ? BackendKind::GPU : BackendKind::CPU;
  so.kvType = o.kvType;
  so.gpuWeights = o.gpuWeights.value_or(WeightType::F32);
  so.pageSize = o.pageSize;
  so.threads = int(o.threads);
  so.fallbackMemory = o.fallbackMemory;
  so.maxPromptTokens = int64_t(prompt.size());
  so.maxNewTokens = o.maxNew;
  so.ignoreEos = o.ignoreEos;
  so.compareDense = o.compareDense;
  so.profile = o.profile;
  std::unique_ptr<Session> session =
      take(Session::create(weights, tokenizer, schedule, so));

  ProgressBar bar(chatty && prompt.size() > 256 && ::isatty(2), "prefill");
  SessionHooks hooks;
  hooks.progress = [&](int64_t d, int64_t t) { bar.update(d, t); };
  if (!json)
    hooks.onToken = [&](int32_t token) {
      bar.finish();
      std::string piece = tokenizer.tokenToPiece(token, false);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  SessionReport report = take(session->generate(prompt, hooks));
  bar.finish();
  if (!json)
    std::fputs("\n", stdout);

  // Report ------------------------------------------------------------------
  report.model = modelPath;
  report.loadSeconds = loadSeconds;
  report.weightStorage = weights->storage() == WeightStorage::Quantized
                             ? "quantized"
                             : "float32";
  report.weightBytes = weights->bytes();
  report.policyName = policy.name;
  if (std::getenv(kReexecMarker))
    report.blasNote = " (OPENBLAS_CORETYPE set by condensate-decode: "
                      "OpenBLAS did not know this CPU)";
  report.totalSeconds = seconds(start);
  if (json)
    std::cout << reportJSON(report) << std::endl;
  else if (!o.quiet)
    std::cout << reportText(report) << std::flush;
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // OpenBLAS falls back to generic kernels on a CPU it does not know;
  // re-execute with the core type that suits this one.
  reexecWith(argv, "OPENBLAS_CORETYPE", blasCoreRecommendation(),
             kReexecMarker);
  return runMain(kTool, [&] {
    Options o = parseArgs(argc, argv);
    if (o.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return runTool(o);
  });
}
