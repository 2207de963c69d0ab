//===- Session.cpp - One decode session on either device ------------------===//
//
// The session's runs (greedy, dense comparison, scoring) written once over
// Batch, and the two backends that give it decoders: the CPU's one decoder
// with a program per schedule and forks of the prompt, the GPU's decoder per
// schedule with its single sequence.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Session.h"

#include "condensate/Decoder/Batch.h"
#include "condensate/Decoder/GPUDecoder.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <chrono>

namespace condensate::decoder {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// Whose decoder a lane runs on.
enum class Role { Policy, Dense };

} // namespace

/// What the session needs of a device (an internal seam: with the unified
/// decoder API, one backend serves both).
struct Session::Backend {
  virtual ~Backend() = default;
  /// Prefills the prompt on the decoder of every role; the policy's seconds.
  virtual Result<double> prefill(const std::vector<int32_t> &prompt,
                                 const ProgressFn &progress) = 0;
  /// Next-token logits at the end of the prompt, from `role`'s prefill.
  virtual const std::vector<float> &firstLogits(Role role) const = 0;
  /// The sequence that `role`'s lanes fork from (holding the prompt).
  virtual int64_t base(Role role) const = 0;
  virtual StepTarget &target(Role role) = 0;
  /// Device facts of the report.
  virtual void describe(SessionReport &report) const = 0;
  /// StepProfiles of the prefill and the decode steps so far (CPU only).
  virtual std::optional<StepProfile> prefillProfile() const { return {}; }
  virtual std::optional<StepProfile> decodeProfile() const { return {}; }

  double compileSeconds = 0.0;
};

namespace {

/// The CPU: one decoder, the prompt prefilled once into a base sequence
/// that every lane forks; policy and dense lanes differ only in the program.
struct CPUBackend final : Session::Backend {
  std::unique_ptr<CPUDecoder> decoder;
  std::unique_ptr<StepTarget> policy, dense;
  int64_t baseSeq = -1;
  std::vector<float> first;
  int threads = 0;

  ~CPUBackend() override {
    if (baseSeq >= 0)
      (void)decoder->release(baseSeq);
  }

  static Result<std::unique_ptr<Session::Backend>>
  create(std::shared_ptr<const LlamaWeights> weights, const Schedule &schedule,
         const SessionOptions &o, int64_t perSeq) {
    DecoderOptions dopts;
    dopts.kvType = o.kvType.value_or(KVType::F32);
    dopts.pageSize = o.pageSize;
    dopts.threads = o.threads;
    Result<int64_t> schedulePage = schedulePageSize(schedule);
    if (!schedulePage)
      return schedulePage.status();
    const int64_t page =
        o.pageSize ? o.pageSize : (*schedulePage ? *schedulePage : 16);
    // The prompt's sequence plus the lanes alive at once (one, two with the
    // dense comparison), each wasting at most one page.
    dopts.maxTokens = (o.compareDense ? 3 : 2) * (perSeq + page);
    auto b = std::make_unique<CPUBackend>();
    b->threads = o.threads;
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::unique_ptr<CPUDecoder>> dec =
        CPUDecoder::create(std::move(weights), schedule, dopts);
    if (!dec)
      return dec.status();
    b->decoder = dec.take();
    b->policy = cpuStepTarget(*b->decoder, b->decoder->programPtr());
    if (o.compareDense) {
      Result<std::shared_ptr<const CPUProgram>> denseProgram =
          b->decoder->compile(Schedule::uniform(
              b->decoder->config().numLayers, Policy::makeDense()));
      if (!denseProgram)
        return denseProgram.status();
      b->dense = cpuStepTarget(*b->decoder, denseProgram.take());
    }
    b->compileSeconds = secondsSince(t0);
    return std::unique_ptr<Session::Backend>(std::move(b));
  }

  Result<double> prefill(const std::vector<int32_t> &prompt,
                         const ProgressFn &progress) override {
    if (baseSeq >= 0)
      CONDENSATE_RETURN_IF_ERROR(decoder->release(baseSeq));
    baseSeq = decoder->newSequence();
    first.resize(size_t(decoder->config().vocab));
    const auto t0 = std::chrono::steady_clock::now();
    CONDENSATE_RETURN_IF_ERROR(decoder->prefill(baseSeq, prompt.data(),
                                                int64_t(prompt.size()),
                                                first.data(), nullptr,
                                                progress));
    return secondsSince(t0);
  }
  const std::vector<float> &firstLogits(Role) const override { return first; }
  int64_t base(Role) const override { return baseSeq; }
  StepTarget &target(Role role) override {
    return role == Role::Dense ? *dense : *policy;
  }
  void describe(SessionReport &r) const override {
    r.kvType = decoder->shape().kvType;
    r.pageSize = decoder->shape().pageSize;
    r.threads = threads;
    r.blas = blasDescription();
  }
  std::optional<StepProfile> prefillProfile() const override {
    return decoder->prefillProfile();
  }
  std::optional<StepProfile> decodeProfile() const override {
    return decoder->profile();
  }
};

/// The GPU decoder's one sequence as a StepTarget. A fork hands out that
/// sequence again: as prefilled the first time, re-prefilled with the
/// prompt after that, so only one lane of a target is alive at a time.
class GPUStepTarget final : public StepTarget {
public:
  explicit GPUStepTarget(std::unique_ptr<GPUDecoder> decoder,
                         const LlamaConfig &config)
      : decoder_(std::move(decoder)), config_(config) {}
  GPUDecoder &decoder() { return *decoder_; }

  /// The prompt, prefilled; logits of its last position to `first`.
  Status prefill(const std::vector<int32_t> &prompt, std::vector<float> &first,
                 const ProgressFn &progress = {}) {
    prompt_ = prompt;
    first.resize(size_t(config_.vocab));
    decoder_->reset();
    CONDENSATE_RETURN_IF_ERROR(decoder_->prefill(
        prompt.data(), int64_t(prompt.size()), first.data(), progress));
    fresh_ = true;
    return Status::success();
  }

  const LlamaConfig &config() const override { return config_; }
  Status step(const int64_t *seqs, const int32_t *tokens, int64_t batch,
              float *logits) override {
    if (batch != 1 || seqs[0] != 0)
      return Status::error("the GPU decoder decodes one sequence");
    CONDENSATE_RETURN_IF_ERROR(decoder_->step(tokens[0], logits));
    len_ = int32_t(decoder_->length());
    return Status::success();
  }
  const float *stats() const override { return decoder_->stats().data(); }
  const int32_t *lens() const override { return &len_; }
  Result<int64_t> fork(int64_t) override {
    if (!fresh_) {
      decoder_->reset();
      CONDENSATE_RETURN_IF_ERROR(decoder_->prefill(
          prompt_.data(), int64_t(prompt_.size()), nullptr));
    }
    fresh_ = false;
    return int64_t(0);
  }
  Status release(int64_t) override { return Status::success(); }
  double stepSeconds() const override {
    return decoder_->timings().decodeSeconds;
  }

private:
  std::unique_ptr<GPUDecoder> decoder_;
  LlamaConfig config_;
  std::vector<int32_t> prompt_;
  bool fresh_ = false; ///< holds the prompt only, not yet handed out
  int32_t len_ = 0;
};

/// The GPU: a decoder per schedule (its kernels are specialised to it).
struct GPUBackend final : Session::Backend {
  std::unique_ptr<GPUStepTarget> policy, dense;
  std::vector<float> policyFirst, denseFirst;
  KVType kvType = KVType::BF16;

  static Result<std::unique_ptr<Session::Backend>>
  create(std::shared_ptr<const LlamaWeights> weights, const Schedule &schedule,
         const SessionOptions &o, int64_t perSeq) {
    GPUDecoderOptions gopts;
    gopts.kvType = o.kvType.value_or(KVType::BF16);
    gopts.pageSize = o.pageSize;
    gopts.maxTokens = perSeq;
    auto b = std::make_unique<GPUBackend>();
    b->kvType = gopts.kvType;
    const LlamaConfig &cfg = weights->config();
    const auto t0 = std::chrono::steady_clock::now();
    auto make = [&](const Schedule &s) -> Result<std::unique_ptr<GPUStepTarget>> {
      Result<std::unique_ptr<GPUDecoder>> dec =
          GPUDecoder::create(weights, s, gopts);
      if (!dec)
        return dec.status();
      return std::make_unique<GPUStepTarget>(dec.take(), cfg);
    };
    Result<std::unique_ptr<GPUStepTarget>> p = make(schedule);
    if (!p)
      return p.status();
    b->policy = p.take();
    if (o.compareDense) {
      Result<std::unique_ptr<GPUStepTarget>> d =
          make(Schedule::uniform(cfg.numLayers, Policy::makeDense()));
      if (!d)
        return d.status();
      b->dense = d.take();
    }
    b->compileSeconds = secondsSince(t0);
    return std::unique_ptr<Session::Backend>(std::move(b));
  }

  Result<double> prefill(const std::vector<int32_t> &prompt,
                         const ProgressFn &progress) override {
    const double before = policy->decoder().timings().prefillSeconds;
    CONDENSATE_RETURN_IF_ERROR(policy->prefill(prompt, policyFirst, progress));
    const double seconds = policy->decoder().timings().prefillSeconds - before;
    if (dense)
      CONDENSATE_RETURN_IF_ERROR(dense->prefill(prompt, denseFirst));
    return seconds;
  }
  const std::vector<float> &firstLogits(Role role) const override {
    return role == Role::Dense ? denseFirst : policyFirst;
  }
  int64_t base(Role) const override { return 0; }
  StepTarget &target(Role role) override {
    return role == Role::Dense ? *dense : *policy;
  }
  void describe(SessionReport &r) const override {
    r.kvType = kvType;
    r.deviceDescription = policy->decoder().deviceDescription();
  }
};

/// The generation without its stop token, as text.
std::string textOf(const model::Tokenizer &tokenizer,
                   std::vector<int32_t> tokens, bool stopped) {
  if (stopped)
    tokens.pop_back();
  return tokenizer.decode(tokens, false);
}

} // namespace

Session::Session(std::unique_ptr<Backend> backend,
                 const model::Tokenizer &tokenizer, Schedule schedule,
                 SessionOptions options)
    : backend_(std::move(backend)), tokenizer_(tokenizer),
      schedule_(std::move(schedule)), options_(options) {}

Session::~Session() = default;

Result<std::unique_ptr<Session>>
Session::create(std::shared_ptr<const LlamaWeights> weights,
                const model::Tokenizer &tokenizer, const Schedule &schedule,
                const SessionOptions &options) {
  const LlamaConfig &cfg = weights->config();
  const int64_t perSeq = options.maxPromptTokens + options.maxNewTokens + 1;
  if (cfg.contextLength > 0 && perSeq - 1 > cfg.contextLength)
    return Status::error(
        "prompt (" + std::to_string(options.maxPromptTokens) +
        " tokens) plus " + std::to_string(options.maxNewTokens) +
        " new tokens exceeds the model's context length " +
        std::to_string(cfg.contextLength));
  Result<std::unique_ptr<Backend>> backend =
      options.device == Device::GPU
          ? GPUBackend::create(weights, schedule, options, perSeq)
          : CPUBackend::create(weights, schedule, options, perSeq);
  if (!backend)
    return backend.status();
  return std::unique_ptr<Session>(
      new Session(backend.take(), tokenizer, schedule, options));
}

Result<SessionReport> Session::generate(const std::vector<int32_t> &prompt,
                                        const SessionHooks &hooks) {
  const LlamaConfig &cfg = backend_->target(Role::Policy).config();
  const int64_t V = cfg.vocab, maxNew = options_.maxNewTokens;
  if (prompt.empty() || int64_t(prompt.size()) > options_.maxPromptTokens)
    return Status::error("the prompt has " + std::to_string(prompt.size()) +
                         " tokens; the session takes 1 to " +
                         std::to_string(options_.maxPromptTokens));
  SessionReport r;
  r.device = options_.device;
  backend_->describe(r);
  r.architecture = cfg.describe();
  r.scheduleMLIR = schedule_.toMLIR();
  r.compileSeconds = backend_->compileSeconds;
  r.promptTokens = int64_t(prompt.size());
  Result<double> prefillSeconds = backend_->prefill(prompt, hooks.progress);
  if (!prefillSeconds)
    return prefillSeconds.status();
  r.prefillSeconds = *prefillSeconds;

  const StopTokens stop(tokenizer_);
  // A greedy lane from the prompt: its first token from the prefill.
  auto greedyLane = [&](Role role) {
    Lane lane;
    lane.limit = maxNew;
    lane.stopAtEos = !options_.ignoreEos;
    if (maxNew > 0)
      lane.tokens.push_back(argmax(backend_->firstLogits(role).data(), V));
    return lane;
  };
  BatchOptions bopts;
  bopts.stop = &stop;

  // Greedy decoding under the policy, streamed.
  AttentionStatsAccumulator policyStats(schedule_, cfg.numLayers, cfg.qHeads,
                                        cfg.kvHeads);
  {
    BatchOptions o = bopts;
    o.stats = {&policyStats};
    Batch greedy(backend_->target(Role::Policy), o);
    Result<size_t> lane =
        greedy.start(greedyLane(Role::Policy), backend_->base(Role::Policy));
    if (!lane)
      return lane.status();
    const Lane &l = greedy.lane(*lane);
    if (hooks.onToken && !l.tokens.empty() && !l.stopped)
      hooks.onToken(l.tokens[0]);
    CONDENSATE_RETURN_IF_ERROR(greedy.run([&](Lane &g, const Batch::Row &) {
      if (hooks.onToken && !g.stopped)
        hooks.onToken(g.tokens.back());
      return Status::success();
    }));
    CONDENSATE_RETURN_IF_ERROR(greedy.finish());
    r.tokens = l.tokens;
    r.stopped = l.stopped;
    r.decode = {greedy.steps(), greedy.seconds()};
  }
  r.text = textOf(tokenizer_, r.tokens, r.stopped);
  r.attention = policyStats.summary();
  if (options_.profile) {
    r.prefillProfile = backend_->prefillProfile();
    r.decodeProfile = backend_->decodeProfile();
  }
  if (!options_.compareDense)
    return r;

  // Dense greedy decoding, and the policy teacher-forced on the dense
  // tokens in lockstep (each step's logits compared at once, none stored).
  DenseComparison c;
  AttentionStatsAccumulator forcedStats(schedule_, cfg.numLayers, cfg.qHeads,
                                        cfg.kvHeads);
  Batch dense(backend_->target(Role::Dense), bopts);
  BatchOptions fo = bopts;
  fo.stats = {&forcedStats};
  Batch forced(backend_->target(Role::Policy), fo);
  Result<size_t> d =
      dense.start(greedyLane(Role::Dense), backend_->base(Role::Dense));
  if (!d)
    return d.status();
  Lane f;
  f.feed = Lane::Feed::Forced;
  f.tokens = dense.lane(*d).tokens;
  f.limit = std::max<int64_t>(maxNew - 1, 0);
  Result<size_t> t = forced.start(std::move(f), backend_->base(Role::Policy));
  if (!t)
    return t.status();
  std::vector<float> denseLogits(static_cast<size_t>(V));
  while (dense.live()) {
    CONDENSATE_RETURN_IF_ERROR(
        dense.step([&](Lane &, const Batch::Row &row) {
          std::copy(row.logits, row.logits + V, denseLogits.begin());
          return Status::success();
        }));
    forced.lane(*t).tokens.push_back(dense.lane(*d).tokens.back());
    CONDENSATE_RETURN_IF_ERROR(
        forced.step([&](Lane &, const Batch::Row &row) {
          c.teacherForced.add(
              compareLogits(denseLogits.data(), row.logits, V));
          return Status::success();
        }));
  }
  CONDENSATE_RETURN_IF_ERROR(dense.finish());
  CONDENSATE_RETURN_IF_ERROR(forced.finish());
  const Lane &dl = dense.lane(*d);
  c.denseTokens = dl.tokens;
  c.denseStopped = dl.stopped;
  c.denseText = textOf(tokenizer_, dl.tokens, dl.stopped);
  c.denseDecode = {dense.steps(), dense.seconds()};
  c.firstDivergence = firstDivergence(c.denseTokens, r.tokens);
  c.compared = int64_t(std::min(c.denseTokens.size(), r.tokens.size()));
  c.teacherForcedAttention = forcedStats.summary();
  r.compare = std::move(c);
  return r;
}

Result<ScoreReport> Session::score(const std::vector<int32_t> &prompt,
                                   const std::vector<int32_t> &continuation) {
  const LlamaConfig &cfg = backend_->target(Role::Policy).config();
  const int64_t V = cfg.vocab;
  if (prompt.empty() || int64_t(prompt.size()) > options_.maxPromptTokens ||
      int64_t(continuation.size()) > options_.maxNewTokens)
    return Status::error("score: the session takes prompts of 1 to " +
                         std::to_string(options_.maxPromptTokens) +
                         " tokens and continuations of at most " +
                         std::to_string(options_.maxNewTokens));
  Result<double> prefilled = backend_->prefill(prompt, {});
  if (!prefilled)
    return prefilled.status();
  ScoreReport s;
  if (continuation.empty())
    return s;
  // The first token's NLL comes from the prefill, each later one from the
  // step that fed its predecessor.
  s.nll.push_back(nll(backend_->firstLogits(Role::Policy).data(), V,
                      continuation[0]));
  AttentionStatsAccumulator stats(schedule_, cfg.numLayers, cfg.qHeads,
                                  cfg.kvHeads);
  BatchOptions o;
  o.stats = {&stats};
  Batch batch(backend_->target(Role::Policy), o);
  Lane lane;
  lane.feed = Lane::Feed::Forced;
  lane.tokens = continuation;
  lane.limit = int64_t(continuation.size()) - 1;
  Result<size_t> started =
      batch.start(std::move(lane), backend_->base(Role::Policy));
  if (!started)
    return started.status();
  CONDENSATE_RETURN_IF_ERROR(batch.run([&](Lane &, const Batch::Row &row) {
    s.nll.push_back(nll(row.logits, V, continuation[size_t(row.step + 1)]));
    return Status::success();
  }));
  CONDENSATE_RETURN_IF_ERROR(batch.finish());
  s.attention = stats.summary();
  return s;
}

} // namespace condensate::decoder
