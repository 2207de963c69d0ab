//===- condensate-decode.cpp - Generate text with a condensate policy -----===//
//
// Loads a Llama-family GGUF, prefills a prompt (dense), decodes greedily with
// the chosen attention policy through the compiled CPU kernels, and reports
// speed and, with --compare dense, the policy's fidelity to dense decoding.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Chat.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"
#include "condensate/Runtime/Engine.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace condensate;
using namespace condensate::decoder;
using nlohmann::json;

namespace {

constexpr const char *kTool = "condensate-decode";
constexpr const char *kDefaultModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char *kPaperSchedule = "examples/paper.mlir";

const char *kUsage =
    "usage: condensate-decode [options]\n"
    "  --model PATH           GGUF model (default " /* */
    "models/SmolLM2-135M-Instruct.Q4_1.gguf,\n"
    "                         looked up in the current directory, then the "
    "repository)\n"
    "  --prompt TEXT          prompt text\n"
    "  --prompt-file PATH     prompt read from a file\n"
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
    "  --page-size N          KV page size (re-pages the policy)\n"
    "  --threads N            OpenBLAS threads\n"
    "  --json                 print one JSON object instead of text\n"
    "  --quiet                print only the generated text\n"
    "  --profile              time the parts of the policy's decode steps\n"
    "  --help                 this message\n";

/// A failure to report as `condensate-decode: error: ...`.
struct Failure {
  std::string message;
};

[[noreturn]] void fail(const std::string &message) { throw Failure{message}; }

template <typename T> T take(Result<T> r) {
  if (!r)
    fail(r.message());
  return r.take();
}
void check(const Status &s) {
  if (!s.ok())
    fail(s.message());
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> readFile(const std::string &path) {
  if (!fileExists(path))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return std::nullopt;
  return ss.str();
}

/// Contents of a file that locate() found.
std::string readFound(const std::string &path) {
  auto content = readFile(path);
  if (!content)
    fail("cannot read '" + path + "'");
  return *content;
}

/// `relative` in the current directory, else in the source tree.
std::string locate(const std::string &relative) {
  if (fileExists(relative))
    return relative;
  std::string repo = std::string(CONDENSATE_SOURCE_DIR) + "/" + relative;
  if (fileExists(repo))
    return repo;
  return "";
}

int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < min || v > max)
    fail(flag + " expects an integer in [" + std::to_string(min) + ", " +
         std::to_string(max) + "], got '" + text + "'");
  return v;
}

struct Options {
  std::string model;
  std::optional<std::string> prompt, promptFile, policy, system;
  bool chat = false, json = false, quiet = false, ignoreEos = false;
  bool compareDense = false, profile = false;
  int64_t maxNew = 64, pageSize = 0, threads = 0;
  KVType kvType = KVType::F32;
  bool kvTypeGiven = false;
  std::string device = "cpu";
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
    else if (arg == "--system")
      o.system = next();
    else if (arg == "--policy")
      o.policy = next();
    else if (arg == "--max-new-tokens")
      o.maxNew = parseInt(arg, next(), 0, 1 << 20);
    else if (arg == "--page-size")
      o.pageSize = parseInt(arg, next(), 1, 1024);
    else if (arg == "--threads")
      o.threads = parseInt(arg, next(), 1, 1024);
    else if (arg == "--kv-type") {
      std::string t = next();
      if (t == "f32")
        o.kvType = KVType::F32, o.kvTypeGiven = true;
      else if (t == "f16")
        o.kvType = KVType::F16, o.kvTypeGiven = true;
      else if (t == "bf16")
        o.kvType = KVType::BF16, o.kvTypeGiven = true;
      else
        fail("--kv-type must be f32, f16 or bf16, got '" + t + "'");
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
  if (o.prompt && o.promptFile)
    fail("give either --prompt or --prompt-file, not both");
  if (!o.help && !o.prompt && !o.promptFile)
    fail("no prompt: pass --prompt TEXT or --prompt-file PATH");
  if (o.system && !o.chat)
    fail("--system needs --chat");
  return o;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       since)
      .count();
}

/// A one-line progress bar on a terminal's stderr.
class ProgressBar {
public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() { finish(); }
  void update(int64_t done, int64_t total) {
    if (!enabled_ || total <= 0)
      return;
    const int width = 40, filled = int(width * done / total);
    std::fprintf(stderr, "\rprefill [%s%s] %3d%%",
                 std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(),
                 int(100 * done / total));
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_)
      std::fprintf(stderr, "\r%60s\r", "");
    drawn_ = false;
  }

private:
  bool enabled_;
  bool drawn_ = false;
};

json attentionJSON(const AttentionSummary &s) {
  json j;
  j["head_steps"] = s.headSteps;
  j["keys_read"] = s.keysRead;
  j["certified_head_steps"] = s.certified;
  if (s.certified) {
    j["eps_hat_computed"] = s.epsComputed;
    j["eps_hat_mean"] = s.epsMean;
    j["eps_hat_max"] = s.epsMax;
    j["pass_rate"] = s.passRate();
    j["fallback_rate"] = s.fallbackRate();
    j["extra_units_mean"] = s.extraMean;
  } else {
    j["eps_hat_mean"] = nullptr;
    j["eps_hat_max"] = nullptr;
    j["pass_rate"] = nullptr;
    j["fallback_rate"] = nullptr;
  }
  return j;
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * f);
  return buf;
}

std::string number(double v, const char *fmt = "%.3g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string certificateLine(const AttentionSummary &s) {
  if (!s.certified)
    return "n/a (no certified layers)";
  return "eps_hat mean " + number(s.epsMean) + ", max " + number(s.epsMax) +
         " over " + std::to_string(s.epsComputed) + " head-steps; pass " +
         percent(s.passRate()) + ", fallback " + percent(s.fallbackRate()) +
         ", extra units " + number(s.extraMean);
}

/// (name, seconds) of each part of a StepProfile.
std::vector<std::pair<const char *, double>> profileParts(const StepProfile &p) {
  return {{"qkv", p.qkv},       {"append", p.append}, {"attention", p.attention},
          {"output", p.output}, {"mlp", p.mlp},       {"logits", p.logits},
          {"elementwise", p.norms}};
}

json profileJSON(const StepProfile &p) {
  json j;
  j["steps"] = p.steps;
  j["total_seconds"] = p.total;
  for (auto &[name, sec] : profileParts(p))
    j[std::string(name) + "_seconds"] = sec;
  return j;
}

std::string profileText(const char *what, const char *unit,
                        const StepProfile &p) {
  std::ostringstream os;
  const double steps = p.steps ? double(p.steps) : 1.0;
  os << "profile " << what << ": " << number(1e3 * p.total / steps, "%.2f")
     << " ms per " << unit << ":";
  for (auto &[name, sec] : profileParts(p))
    os << " " << name << " " << number(1e3 * sec / steps, "%.2f");
  os << " (ms)\n";
  return os.str();
}

/// Greedy decoding state of one sequence.
struct Run {
  Decoder::SeqId seq = -1;
  std::vector<int32_t> tokens; ///< generated, including a stop token
  bool stoppedAtEos = false;
  int64_t steps = 0;
  double stepSeconds = 0.0;
};

/// --device gpu: the same run on the GPU decoder. The dense comparison uses
/// a second GPU decoder; teacher forcing re-prefills the policy decoder and
/// feeds it the dense tokens in lockstep.
int runGPU(const Options &o, const std::string &modelPath, double loadSeconds,
           const ModelConfig &cfg, const model::Tokenizer &tokenizer,
           const std::shared_ptr<const ModelWeights> &weights,
           const std::vector<int32_t> &prompt, const Schedule &schedule,
           const std::string &policyName,
           std::chrono::steady_clock::time_point start) {
  const bool text = !o.json && !o.quiet;
  DecoderOptions gopts;
  gopts.backend = BackendKind::GPU;
  gopts.kvType = o.kvTypeGiven ? o.kvType : KVType::BF16;
  gopts.pageSize = o.pageSize;
  gopts.maxTokens = int64_t(prompt.size()) + o.maxNew + 1;
  auto compileStart = std::chrono::steady_clock::now();
  std::unique_ptr<Decoder> dec =
      take(Decoder::create(weights, schedule, gopts));
  Decoder::SeqId seq = dec->newSequence(), denseSeq = -1;
  std::unique_ptr<Decoder> denseDec;
  if (o.compareDense) {
    denseDec = take(Decoder::create(
        weights, Schedule::uniform(cfg.numLayers, Policy::makeDense()), gopts));
    denseSeq = denseDec->newSequence();
  }
  const double compileSeconds = seconds(compileStart);
  const int64_t V = cfg.vocab;
  std::vector<float> first(static_cast<size_t>(V)),
      logits(static_cast<size_t>(V)), dlogits(static_cast<size_t>(V));
  auto isStop = [&](int32_t t) {
    return !o.ignoreEos && (t == tokenizer.eosId() ||
                            tokenizer.tokenType(t) == model::TokenType::Control);
  };
  ProgressBar bar(text && prompt.size() > 256 && ::isatty(2));
  check(dec->prefill(seq, prompt.data(), int64_t(prompt.size()), first.data(),
                     nullptr,
                     [&](int64_t d, int64_t t) { bar.update(d, t); }));
  bar.finish();
  const double prefillSeconds = dec->prefillProfile().total;
  AttentionStatsAccumulator policyStats(schedule, cfg.numLayers, cfg.qHeads,
                                        cfg.kvHeads);
  std::vector<int32_t> tokens;
  bool eos = false;
  const float *current = first.data();
  for (int64_t i = 0; i < o.maxNew; ++i) {
    int32_t next = argmax(current, V);
    tokens.push_back(next);
    if (isStop(next)) {
      eos = true;
      break;
    }
    if (text) {
      std::string piece = tokenizer.tokenToPiece(next, false);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    if (i + 1 == o.maxNew)
      break;
    check(dec->step(seq, next, logits.data()));
    int32_t len = int32_t(dec->length(seq));
    policyStats.add(dec->stats().data(), &len, 1);
    current = logits.data();
  }
  if (text)
    std::fputs("\n", stdout);
  const StepProfile policyTimes = dec->profile();
  json compare;
  std::string compareReport;
  if (o.compareDense) {
    check(denseDec->prefill(denseSeq, prompt.data(), int64_t(prompt.size()),
                            dlogits.data()));
    check(dec->release(seq));
    seq = dec->newSequence();
    check(dec->prefill(seq, prompt.data(), int64_t(prompt.size()),
                       logits.data()));
    dec->resetProfile();
    AttentionStatsAccumulator tfStats(schedule, cfg.numLayers, cfg.qHeads,
                                      cfg.kvHeads);
    std::vector<int32_t> denseTokens;
    int64_t agree = 0, steps = 0;
    double klSum = 0, klMax = 0;
    for (int64_t i = 0; i < o.maxNew; ++i) {
      int32_t next = argmax(dlogits.data(), V);
      denseTokens.push_back(next);
      if (isStop(next) || i + 1 == o.maxNew)
        break;
      check(denseDec->step(denseSeq, next, dlogits.data()));
      check(dec->step(seq, next, logits.data()));
      int32_t len = int32_t(dec->length(seq));
      tfStats.add(dec->stats().data(), &len, 1);
      ++steps;
      agree += argmax(logits.data(), V) == argmax(dlogits.data(), V);
      double kl = klDivergence(dlogits.data(), logits.data(), V);
      klSum += kl;
      klMax = std::max(klMax, kl);
    }
    size_t common = std::min(denseTokens.size(), tokens.size());
    std::optional<int64_t> divergence;
    for (size_t i = 0; i < common && !divergence; ++i)
      if (denseTokens[i] != tokens[i])
        divergence = int64_t(i);
    if (!divergence && denseTokens.size() != tokens.size())
      divergence = int64_t(common);
    const AttentionSummary tf = tfStats.summary();
    const StepProfile dt = denseDec->profile();
    double denseRate = dt.total > 0
                           ? double(dt.steps) / dt.total
                           : 0.0;
    compare["against"] = "dense";
    compare["dense_tokens"] = denseTokens;
    compare["dense_decode"] = {{"steps", dt.steps},
                               {"seconds", dt.total},
                               {"tokens_per_second", denseRate}};
    compare["first_divergence"] =
        divergence ? json(*divergence) : json(nullptr);
    compare["compared_tokens"] = int64_t(common);
    compare["teacher_forced"] = {
        {"steps", steps},
        {"top1_agree", agree},
        {"top1_agreement", steps ? double(agree) / double(steps) : 1.0},
        {"kl_mean", steps ? klSum / double(steps) : 0.0},
        {"kl_max", klMax},
        {"attention", attentionJSON(tf)}};
    std::ostringstream r;
    r << "compare dense (GPU):\n";
    r << "  dense decode: " << dt.steps << " steps = "
      << number(denseRate, "%.1f") << " tok/s\n";
    r << "  greedy: first divergence "
      << (divergence ? "at token " + std::to_string(*divergence) + " of " +
                           std::to_string(common)
                     : "none in " + std::to_string(common))
      << "\n";
    r << "  teacher-forced (" << steps << " steps): top-1 agreement " << agree
      << "/" << steps << " ("
      << percent(steps ? double(agree) / double(steps) : 1.0)
      << "), KL(dense||policy) mean "
      << number(steps ? klSum / double(steps) : 0.0) << ", max "
      << number(klMax) << " nats\n";
    r << "  keys read: " << percent(tf.keysRead) << "\n";
    r << "  certificate: " << certificateLine(tf) << "\n";
    compareReport = r.str();
  }
  std::vector<int32_t> generated = tokens;
  if (eos)
    generated.pop_back();
  const double prefillRate = double(prompt.size()) / prefillSeconds;
  const double decodeRate =
      policyTimes.total > 0
          ? double(policyTimes.steps) / policyTimes.total
          : 0.0;
  const AttentionSummary ps = policyStats.summary();
  if (o.json) {
    json j;
    j["device"] = dec->deviceDescription();
    j["model"] = modelPath;
    j["architecture"] = cfg.describe();
    j["load_seconds"] = loadSeconds;
    j["policy"] = {{"name", policyName}, {"mlir", schedule.toMLIR()}};
    j["compile_seconds"] = compileSeconds;
    j["kv_type"] = kvTypeName(gopts.kvType);
    j["prompt_tokens"] = int64_t(prompt.size());
    j["generated_tokens"] = tokens;
    j["text"] = tokenizer.decode(generated, false);
    j["prefill"] = {{"tokens", int64_t(prompt.size())},
                    {"seconds", prefillSeconds},
                    {"tokens_per_second", prefillRate},
                    {"attention", "dense"}};
    j["decode"] = {{"steps", policyTimes.steps},
                   {"seconds", policyTimes.total},
                   {"tokens_per_second", decodeRate},
                   {"cuda_graph", true}};
    j["attention"] = attentionJSON(ps);
    if (o.compareDense)
      j["compare"] = compare;
    j["total_seconds"] = seconds(start);
    std::cout << j.dump(1, ' ', false, json::error_handler_t::replace)
              << std::endl;
    return 0;
  }
  if (o.quiet)
    return 0;
  std::ostringstream r;
  r << "---\n";
  r << "device: " << dec->deviceDescription() << "\n";
  r << "model: " << modelPath << " (" << cfg.describe() << "), loaded in "
    << number(loadSeconds, "%.2f") << " s\n";
  r << "policy: " << policyName << "; kernels compiled/loaded in "
    << number(compileSeconds, "%.2f") << " s; kv "
    << kvTypeName(gopts.kvType) << "\n";
  r << "prefill (dense): " << prompt.size() << " tokens in "
    << number(prefillSeconds, "%.3f") << " s = " << number(prefillRate, "%.1f")
    << " tok/s\n";
  r << "decode (CUDA graph per step): " << tokens.size() << " tokens, "
    << policyTimes.steps << " steps = " << number(decodeRate, "%.1f")
    << " tok/s\n";
  r << "keys read: " << percent(ps.keysRead) << "\n";
  r << "certificate: " << certificateLine(ps) << "\n";
  r << compareReport;
  std::cout << r.str() << std::flush;
  return 0;
}

int runTool(const Options &o) {
  const auto start = std::chrono::steady_clock::now();
  const bool text = !o.json, chatty = !o.json && !o.quiet;

  // Model -------------------------------------------------------------------
  std::string modelPath = o.model;
  if (modelPath.empty()) {
    modelPath = locate(kDefaultModel);
    if (modelPath.empty())
      fail(std::string("model not found: ") + kDefaultModel +
           " (looked in the current directory and " + CONDENSATE_SOURCE_DIR +
           "); pass --model PATH");
  }
  auto loadStart = std::chrono::steady_clock::now();
  model::GGUFFile file = take(model::GGUFFile::open(modelPath));
  model::Tokenizer tokenizer = take(model::Tokenizer::fromGGUF(file));
  std::shared_ptr<const ModelWeights> weights = take(ModelWeights::load(file));
  const ModelConfig &cfg = weights->config();
  const double loadSeconds = seconds(loadStart);

  // Prompt ------------------------------------------------------------------
  std::string promptText;
  if (o.promptFile) {
    auto content = readFile(*o.promptFile);
    if (!content)
      fail("cannot read prompt file '" + *o.promptFile + "'");
    promptText = *content;
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

  // Policy ------------------------------------------------------------------
  std::string policyName, policyText;
  bool policyIsDefault = false;
  std::string policySpec = o.policy ? *o.policy : "";
  if (!o.policy) {
    std::string paper = locate(kPaperSchedule);
    if (!paper.empty()) {
      policyName = "paper (" + paper + ")";
      policyText = readFound(paper);
    } else {
      policyName = "dense";
      policyText = "#condensate.dense";
    }
    policyIsDefault = true;
  } else if (policySpec == "dense") {
    policyName = "dense";
    policyText = "#condensate.dense";
  } else if (policySpec == "paper") {
    std::string paper = locate(kPaperSchedule);
    if (paper.empty())
      fail(std::string("--policy paper: ") + kPaperSchedule + " not found");
    policyName = "paper (" + paper + ")";
    policyText = readFound(paper);
  } else if (!policySpec.empty() && policySpec[0] == '@') {
    std::string path = policySpec.substr(1);
    auto content = readFile(path);
    if (!content)
      fail("cannot read policy file '" + path + "'");
    policyName = path;
    policyText = *content;
  } else {
    policyName = "inline";
    policyText = policySpec;
  }
  Result<Schedule> parsed =
      parseSchedule(policyText, cfg.numLayers, "--policy");
  Schedule schedule;
  if (!parsed) {
    if (!policyIsDefault)
      fail(parsed.message());
    // The paper schedule is written for SmolLM2-135M's 30 layers.
    if (chatty)
      std::fprintf(stderr,
                   "%s: note: the default paper schedule does not fit this "
                   "model (%s); using dense\n",
                   kTool, parsed.message().c_str());
    policyName = "dense";
    schedule = Schedule::uniform(cfg.numLayers, Policy::makeDense());
  } else {
    schedule = parsed.take();
  }
  if (o.pageSize)
    schedule = withPageSize(schedule, o.pageSize);

  if (o.device == "gpu")
    return runGPU(o, modelPath, loadSeconds, cfg, tokenizer, weights, prompt,
                  schedule, policyName, start);

  // Decoder -----------------------------------------------------------------
  DecoderOptions dopts;
  dopts.kvType = o.kvType;
  dopts.pageSize = o.pageSize;
  dopts.threads = int(o.threads);
  const int64_t schedulePage = take(schedulePageSize(schedule));
  const int64_t page = o.pageSize ? o.pageSize
                                  : (schedulePage ? schedulePage : 16);
  const int64_t perSeq = int64_t(prompt.size()) + o.maxNew + 1;
  if (cfg.contextLength > 0 && perSeq - 1 > cfg.contextLength)
    fail("prompt (" + std::to_string(prompt.size()) + " tokens) plus " +
         std::to_string(o.maxNew) + " new tokens exceeds the model's context "
         "length " + std::to_string(cfg.contextLength));
  // The prompt's sequence, plus one fork alive at a time (two with
  // --compare), each wasting at most one page.
  dopts.maxTokens = (o.compareDense ? 3 : 2) * (perSeq + page);
  auto compileStart = std::chrono::steady_clock::now();
  std::unique_ptr<Decoder> dec =
      take(Decoder::create(weights, schedule, dopts));
  std::shared_ptr<const AttentionProgram> policyProgram = dec->program();
  std::shared_ptr<const AttentionProgram> denseProgram;
  if (o.compareDense)
    denseProgram = take(dec->compile(
        Schedule::uniform(cfg.numLayers, Policy::makeDense())));
  const double compileSeconds = seconds(compileStart);

  // Prefill -----------------------------------------------------------------
  const int64_t V = cfg.vocab;
  std::vector<float> prefillLogits(static_cast<size_t>(V)),
      logits(static_cast<size_t>(V)), denseLogits(static_cast<size_t>(V));
  Decoder::SeqId base = dec->newSequence();
  ProgressBar bar(chatty && prompt.size() > 256 && ::isatty(2));
  auto prefillStart = std::chrono::steady_clock::now();
  check(dec->prefill(base, prompt.data(), int64_t(prompt.size()),
                     prefillLogits.data(), nullptr,
                     [&](int64_t d, int64_t t) { bar.update(d, t); }));
  const double prefillSeconds = seconds(prefillStart);
  bar.finish();
  const StepProfile prefillProfile = dec->prefillProfile();

  auto isStop = [&](int32_t t) {
    if (o.ignoreEos)
      return false;
    return t == tokenizer.eosId() ||
           tokenizer.tokenType(t) == model::TokenType::Control;
  };

  // Greedy decoding with the policy (streamed). -----------------------------
  AttentionStatsAccumulator policyStats(schedule, cfg.numLayers, cfg.qHeads,
                                        cfg.kvHeads);
  auto greedy = [&](const std::shared_ptr<const AttentionProgram> &program,
                    AttentionStatsAccumulator *acc, bool stream) {
    Run run;
    run.seq = take(dec->fork(base));
    check(dec->setProgram(program));
    const float *current = prefillLogits.data();
    for (int64_t i = 0; i < o.maxNew; ++i) {
      const int32_t next = argmax(current, V);
      run.tokens.push_back(next);
      if (isStop(next)) {
        run.stoppedAtEos = true;
        break;
      }
      if (stream) {
        std::string piece = tokenizer.tokenToPiece(next, false);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      if (i + 1 == o.maxNew)
        break;
      auto t0 = std::chrono::steady_clock::now();
      check(dec->step(run.seq, next, logits.data()));
      run.stepSeconds += seconds(t0);
      ++run.steps;
      if (acc)
        acc->add(dec->stats().data(), dec->lastLens(), 1);
      current = logits.data();
    }
    return run;
  };
  Run policyRun = greedy(policyProgram, &policyStats, text);
  const StepProfile profile = dec->profile();
  if (text)
    std::fputs("\n", stdout);
  check(dec->release(policyRun.seq));

  // Dense comparison: dense greedy decoding, and the policy teacher-forced
  // on the dense tokens in lockstep (each step's logits compared at once).
  json compare;
  std::string compareReport;
  if (o.compareDense) {
    AttentionStatsAccumulator tfStats(schedule, cfg.numLayers, cfg.qHeads,
                                      cfg.kvHeads);
    Run dense;
    dense.seq = take(dec->fork(base));
    Decoder::SeqId forced = take(dec->fork(base));
    int64_t agree = 0, tfSteps = 0;
    double klSum = 0.0, klMax = 0.0;
    const float *current = prefillLogits.data();
    for (int64_t i = 0; i < o.maxNew; ++i) {
      const int32_t next = argmax(current, V);
      dense.tokens.push_back(next);
      if (isStop(next)) {
        dense.stoppedAtEos = true;
        break;
      }
      if (i + 1 == o.maxNew)
        break;
      check(dec->setProgram(denseProgram));
      auto t0 = std::chrono::steady_clock::now();
      check(dec->step(dense.seq, next, denseLogits.data()));
      dense.stepSeconds += seconds(t0);
      ++dense.steps;
      check(dec->setProgram(policyProgram));
      check(dec->step(forced, next, logits.data()));
      tfStats.add(dec->stats().data(), dec->lastLens(), 1);
      ++tfSteps;
      agree += argmax(logits.data(), V) == argmax(denseLogits.data(), V);
      const double kl = klDivergence(denseLogits.data(), logits.data(), V);
      klSum += kl;
      klMax = std::max(klMax, kl);
      current = denseLogits.data();
    }
    check(dec->release(dense.seq));
    check(dec->release(forced));

    const size_t common = std::min(dense.tokens.size(), policyRun.tokens.size());
    std::optional<int64_t> divergence;
    for (size_t i = 0; i < common && !divergence; ++i)
      if (dense.tokens[i] != policyRun.tokens[i])
        divergence = int64_t(i);
    if (!divergence && dense.tokens.size() != policyRun.tokens.size())
      divergence = int64_t(common);
    const AttentionSummary tf = tfStats.summary();
    const double klMean = tfSteps ? klSum / double(tfSteps) : 0.0;
    std::vector<int32_t> denseText = dense.tokens;
    if (dense.stoppedAtEos)
      denseText.pop_back();

    compare["against"] = "dense";
    compare["dense_tokens"] = dense.tokens;
    compare["dense_text"] = tokenizer.decode(denseText, false);
    compare["dense_decode"] = {
        {"steps", dense.steps},
        {"seconds", dense.stepSeconds},
        {"tokens_per_second",
         dense.stepSeconds > 0 ? double(dense.steps) / dense.stepSeconds : 0.0}};
    compare["first_divergence"] =
        divergence ? json(*divergence) : json(nullptr);
    compare["compared_tokens"] = int64_t(common);
    compare["teacher_forced"] = {{"steps", tfSteps},
                                 {"top1_agree", agree},
                                 {"top1_agreement",
                                  tfSteps ? double(agree) / double(tfSteps)
                                          : 1.0},
                                 {"kl_mean", klMean},
                                 {"kl_max", klMax},
                                 {"attention", attentionJSON(tf)}};

    std::ostringstream r;
    r << "compare dense:\n";
    r << "  dense text: " << json(compare["dense_text"]).dump(
                                 -1, ' ', false, json::error_handler_t::replace)
      << "\n";
    r << "  dense decode: " << dense.steps << " steps in "
      << number(dense.stepSeconds, "%.2f") << " s = "
      << number(compare["dense_decode"]["tokens_per_second"].get<double>(),
                "%.1f")
      << " tok/s\n";
    r << "  greedy: first divergence "
      << (divergence ? "at token " + std::to_string(*divergence) + " of " +
                           std::to_string(common)
                     : "none in " + std::to_string(common))
      << "\n";
    r << "  teacher-forced (policy on dense tokens, " << tfSteps
      << " steps): top-1 agreement " << agree << "/" << tfSteps << " ("
      << percent(tfSteps ? double(agree) / double(tfSteps) : 1.0)
      << "), KL(dense||policy) mean " << number(klMean) << ", max "
      << number(klMax) << " nats\n";
    r << "  keys read: " << percent(tf.keysRead) << "\n";
    r << "  certificate: " << certificateLine(tf) << "\n";
    compareReport = r.str();
  }

  // Report ------------------------------------------------------------------
  const AttentionSummary ps = policyStats.summary();
  std::vector<int32_t> generated = policyRun.tokens;
  if (policyRun.stoppedAtEos)
    generated.pop_back();
  const double prefillRate = double(prompt.size()) / prefillSeconds;
  const double decodeRate = policyRun.stepSeconds > 0
                                ? double(policyRun.steps) / policyRun.stepSeconds
                                : 0.0;
  if (o.json) {
    json j;
    j["model"] = modelPath;
    j["architecture"] = cfg.describe();
    j["load_seconds"] = loadSeconds;
    j["policy"] = {{"name", policyName}, {"mlir", schedule.toMLIR()}};
    j["compile_seconds"] = compileSeconds;
    j["kv_type"] = kvTypeName(o.kvType);
    j["page_size"] = dec->shape().pageSize;
    j["threads"] = o.threads;
    j["blas"] = blasDescription();
    if (o.profile)
      j["profile"] = {{"prefill", profileJSON(prefillProfile)},
                      {"decode", profileJSON(profile)}};
    j["prompt_tokens"] = int64_t(prompt.size());
    j["generated_tokens"] = policyRun.tokens;
    j["text"] = tokenizer.decode(generated, false);
    j["stop"] = policyRun.stoppedAtEos ? "eos" : "length";
    j["prefill"] = {{"tokens", int64_t(prompt.size())},
                    {"seconds", prefillSeconds},
                    {"tokens_per_second", prefillRate},
                    {"attention", "dense"}};
    j["decode"] = {{"steps", policyRun.steps},
                   {"seconds", policyRun.stepSeconds},
                   {"tokens_per_second", decodeRate}};
    j["attention"] = attentionJSON(ps);
    if (o.compareDense)
      j["compare"] = compare;
    j["total_seconds"] = seconds(start);
    std::cout << j.dump(1, ' ', false, json::error_handler_t::replace)
              << std::endl;
    return 0;
  }
  if (o.quiet)
    return 0;
  std::ostringstream r;
  r << "---\n";
  r << "model: " << modelPath << " (" << cfg.describe() << "), loaded in "
    << number(loadSeconds, "%.2f") << " s\n";
  r << "policy: " << policyName << ", compiled in "
    << number(compileSeconds, "%.2f") << " s; kv " << kvTypeName(o.kvType)
    << ", page " << dec->shape().pageSize << ", threads "
    << (o.threads ? std::to_string(o.threads) : std::string("default"))
    << "\n";
  r << "blas: " << blasDescription()
    << (std::getenv("CONDENSATE_DECODE_REEXEC")
            ? " (OPENBLAS_CORETYPE set by condensate-decode: OpenBLAS did not "
              "know this CPU)"
            : "")
    << "\n";
  r << "prefill (dense): " << prompt.size() << " tokens in "
    << number(prefillSeconds, "%.3f") << " s = " << number(prefillRate, "%.1f")
    << " tok/s\n";
  r << "decode: " << policyRun.tokens.size() << " tokens ("
    << (policyRun.stoppedAtEos ? "stopped at end of generation"
                               : "length limit")
    << "), " << policyRun.steps << " decode steps in "
    << number(policyRun.stepSeconds, "%.3f") << " s = "
    << number(decodeRate, "%.1f") << " tok/s\n";
  r << "keys read: " << percent(ps.keysRead)
    << " (mean over layers, heads and steps of attended / context)\n";
  r << "certificate: " << certificateLine(ps) << "\n";
  if (o.profile) {
    r << profileText("prefill", "token", prefillProfile);
    r << profileText("decode", "step", profile);
  }
  r << compareReport;
  std::cout << r.str() << std::flush;
  return 0;
}

} // namespace

/// Re-executes this program with OPENBLAS_CORETYPE set when OpenBLAS fell
/// back to its generic kernels on a CPU it does not know (see
/// blasCoreRecommendation). A user's own OPENBLAS_CORETYPE is left alone.
void fixBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE") ||
      std::getenv("CONDENSATE_DECODE_REEXEC"))
    return;
  std::string core = blasCoreRecommendation();
  if (core.empty())
    return;
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::setenv("CONDENSATE_DECODE_REEXEC", "1", 1);
  ::execv("/proc/self/exe", argv);
  // If the re-exec failed, carry on with the generic kernels.
}

int main(int argc, char **argv) {
  fixBlasKernels(argv);
  try {
    Options o = parseArgs(argc, argv);
    if (o.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return runTool(o);
  } catch (const Failure &f) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kTool, f.message.c_str());
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "%s: error: out of memory\n", kTool);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: error: %s\n", kTool, e.what());
  }
  return 1;
}
