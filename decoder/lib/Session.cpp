//===- Session.cpp - One decode session on either device ------------------===//
//
// The session's runs (greedy, dense comparison, scoring), written once over
// Batch for either backend.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Session.h"

#include "condensate/Decoder/Batch.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <chrono>

namespace condensate::decoder {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// The generation without its stop token, as text.
std::string textOf(const model::Tokenizer &tokenizer,
                   std::vector<int32_t> tokens, bool stopped) {
  if (stopped)
    tokens.pop_back();
  return tokenizer.decode(tokens, false);
}

} // namespace

/// Where one schedule's lanes run: a decoder, the program, and the prompt
/// prefilled there as the sequence lanes fork from.
struct Session::Lanes {
  Decoder *decoder = nullptr;
  std::shared_ptr<const AttentionProgram> program;
  int64_t base = -1;
  std::vector<float> first; ///< next-token logits at the end of the prompt
};

struct Session::Impl {
  const model::Tokenizer &tokenizer;
  Schedule schedule;
  SessionOptions options;
  std::unique_ptr<Decoder> decoder;
  /// The GPU's dense comparison keeps a decoder of its own: its dense
  /// kernels use the GPU's dense page size, not the policy's.
  std::unique_ptr<Decoder> denseDecoder;
  Lanes policy, dense;
  double compileSeconds = 0.0;

  ~Impl() {
    for (Lanes *l : {&policy, &dense})
      if (l->base >= 0 && !(l == &dense && dense.decoder == policy.decoder))
        (void)l->decoder->release(l->base);
  }
  /// Prefills `prompt` for both schedules; the policy's seconds.
  Result<double> prefill(const std::vector<int32_t> &prompt,
                         const ProgressFn &progress);
};

Result<double> Session::Impl::prefill(const std::vector<int32_t> &prompt,
                                      const ProgressFn &progress) {
  auto into = [&](Lanes &l, const ProgressFn &p) -> Status {
    if (l.base >= 0)
      CONDENSATE_RETURN_IF_ERROR(l.decoder->release(l.base));
    l.base = l.decoder->newSequence();
    l.first.resize(size_t(l.decoder->config().vocab));
    return l.decoder->prefill(l.base, prompt.data(), int64_t(prompt.size()),
                              l.first.data(), nullptr, p);
  };
  const auto t0 = std::chrono::steady_clock::now();
  CONDENSATE_RETURN_IF_ERROR(into(policy, progress));
  const double seconds = secondsSince(t0);
  if (dense.decoder == policy.decoder) {
    dense.base = policy.base;
    dense.first = policy.first;
  } else if (dense.decoder) {
    CONDENSATE_RETURN_IF_ERROR(into(dense, {}));
  }
  return seconds;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() = default;

Result<std::unique_ptr<Session>>
Session::create(std::shared_ptr<const ModelWeights> weights,
                const model::Tokenizer &tokenizer, const Schedule &schedule,
                const SessionOptions &options) {
  const ModelConfig &cfg = weights->config();
  const bool gpu = options.device == BackendKind::GPU;
  const int64_t maxNew = options.maxNewTokens;
  const int64_t perSeq = options.maxPromptTokens + maxNew + 1;
  if (cfg.contextLength > 0 && perSeq - 1 > cfg.contextLength)
    return Status::error(
        "prompt (" + std::to_string(options.maxPromptTokens) +
        " tokens) plus " + std::to_string(maxNew) +
        " new tokens exceeds the model's context length " +
        std::to_string(cfg.contextLength));
  DecoderOptions dopts;
  dopts.backend = gpu ? BackendKind::GPU : BackendKind::CPU;
  dopts.kvType = options.kvType.value_or(gpu ? KVType::BF16 : KVType::F32);
  dopts.weightType = options.gpuWeights;
  dopts.pageSize = options.pageSize;
  dopts.threads = options.threads;
  dopts.fallbackMemory = options.fallbackMemory;
  Result<int64_t> schedulePage = schedulePageSize(schedule);
  if (!schedulePage)
    return schedulePage.status();
  const int64_t page = options.pageSize     ? options.pageSize
                       : *schedulePage      ? *schedulePage
                       : gpu                ? 64
                                            : 16;
  // The prompt's sequence plus the lanes alive at once (one, two with the
  // dense comparison); a lane shares the prompt's full pages and holds its
  // new tokens and at most two partial pages.
  const int64_t lanes = options.compareDense ? 2 : 1;
  dopts.maxTokens = perSeq + page + lanes * (maxNew + 2 * page);

  auto impl = std::unique_ptr<Impl>(
      new Impl{tokenizer, schedule, options, nullptr, nullptr, {}, {}, 0.0});
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Decoder>> dec =
      Decoder::create(weights, schedule, dopts);
  if (!dec)
    return dec.status();
  impl->decoder = dec.take();
  // The schedule as it runs (a model's local layers keep their window
  // policy, withModelRoles): statistics and bytes read follow it.
  impl->schedule = impl->decoder->schedule();
  impl->policy.decoder = impl->decoder.get();
  impl->policy.program = impl->decoder->program();
  if (options.compareDense) {
    const Schedule dense = Schedule::uniform(cfg.numLayers, Policy::makeDense());
    if (gpu) {
      Result<std::unique_ptr<Decoder>> d =
          Decoder::create(weights, dense, dopts);
      if (!d)
        return d.status();
      impl->denseDecoder = d.take();
      impl->dense.decoder = impl->denseDecoder.get();
      impl->dense.program = impl->denseDecoder->program();
    } else {
      Result<std::shared_ptr<const AttentionProgram>> program =
          impl->decoder->compile(dense);
      if (!program)
        return program.status();
      impl->dense.decoder = impl->decoder.get();
      impl->dense.program = program.take();
    }
  }
  impl->compileSeconds = secondsSince(t0);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<SessionReport> Session::generate(const std::vector<int32_t> &prompt,
                                        const SessionHooks &hooks) {
  Impl &m = *impl_;
  const SessionOptions &o = m.options;
  const Decoder &dec = *m.decoder;
  const ModelConfig &cfg = dec.config();
  const int64_t V = cfg.vocab, maxNew = o.maxNewTokens;
  if (prompt.empty() || int64_t(prompt.size()) > o.maxPromptTokens)
    return Status::error("the prompt has " + std::to_string(prompt.size()) +
                         " tokens; the session takes 1 to " +
                         std::to_string(o.maxPromptTokens));
  SessionReport r;
  r.device = o.device;
  r.kvType = dec.shape().kvType;
  if (o.device == BackendKind::GPU) {
    r.deviceDescription = dec.deviceDescription();
    r.gpuWeights = dec.options().weightType;
  } else {
    r.pageSize = dec.shape().pageSize;
    r.threads = o.threads;
    r.blas = blasDescription();
  }
  r.architecture = cfg.describe();
  r.scheduleMLIR = m.schedule.toMLIR();
  r.compileSeconds = m.compileSeconds;
  r.promptTokens = int64_t(prompt.size());
  Result<double> prefillSeconds = m.prefill(prompt, hooks.progress);
  if (!prefillSeconds)
    return prefillSeconds.status();
  r.prefillSeconds = *prefillSeconds;

  const StopTokens stop(m.tokenizer);
  // A greedy lane from the prompt: its first token from the prefill.
  auto greedyLane = [&](const Lanes &l) {
    Lane lane;
    lane.limit = maxNew;
    lane.stopAtEos = !o.ignoreEos;
    if (maxNew > 0)
      lane.tokens.push_back(argmax(l.first.data(), V));
    return lane;
  };
  BatchOptions bopts;
  bopts.stop = &stop;

  // Greedy decoding under the policy, streamed.
  AttentionStatsAccumulator policyStats(m.schedule, m.policy.decoder->shape(),
      m.policy.decoder->config().attentionSpans());
  {
    BatchOptions go = bopts;
    go.stats = {&policyStats};
    Batch greedy(*m.policy.decoder, m.policy.program, go);
    Result<size_t> lane = greedy.start(greedyLane(m.policy), m.policy.base);
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
  r.text = textOf(m.tokenizer, r.tokens, r.stopped);
  r.attention = policyStats.summary();
  r.deviceMemory = dec.memoryUse();
  // The GPU backend times only whole steps; its profile says nothing more.
  if (o.profile && o.device == BackendKind::CPU) {
    r.prefillProfile = dec.prefillProfile();
    r.decodeProfile = dec.profile();
  }
  if (!o.compareDense)
    return r;

  // Dense greedy decoding, and the policy teacher-forced on the dense
  // tokens in lockstep (each step's logits compared at once, none stored).
  DenseComparison c;
  AttentionStatsAccumulator forcedStats(m.schedule, m.policy.decoder->shape(),
      m.policy.decoder->config().attentionSpans());
  Batch dense(*m.dense.decoder, m.dense.program, bopts);
  BatchOptions fo = bopts;
  fo.stats = {&forcedStats};
  Batch forced(*m.policy.decoder, m.policy.program, fo);
  Result<size_t> d = dense.start(greedyLane(m.dense), m.dense.base);
  if (!d)
    return d.status();
  Lane f;
  f.feed = Lane::Feed::Forced;
  f.tokens = dense.lane(*d).tokens;
  f.limit = std::max<int64_t>(maxNew - 1, 0);
  Result<size_t> t = forced.start(std::move(f), m.policy.base);
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
  c.denseText = textOf(m.tokenizer, dl.tokens, dl.stopped);
  c.denseDecode = {dense.steps(), dense.seconds()};
  c.firstDivergence = firstDivergence(c.denseTokens, r.tokens);
  c.compared = int64_t(std::min(c.denseTokens.size(), r.tokens.size()));
  c.teacherForcedAttention = forcedStats.summary();
  r.compare = std::move(c);
  return r;
}

Result<ScoreReport> Session::score(const std::vector<int32_t> &prompt,
                                   const std::vector<int32_t> &continuation) {
  Impl &m = *impl_;
  const ModelConfig &cfg = m.decoder->config();
  const int64_t V = cfg.vocab;
  if (prompt.empty() || int64_t(prompt.size()) > m.options.maxPromptTokens ||
      int64_t(continuation.size()) > m.options.maxNewTokens)
    return Status::error("score: the session takes prompts of 1 to " +
                         std::to_string(m.options.maxPromptTokens) +
                         " tokens and continuations of at most " +
                         std::to_string(m.options.maxNewTokens));
  Result<double> prefilled = m.prefill(prompt, {});
  if (!prefilled)
    return prefilled.status();
  ScoreReport s;
  if (continuation.empty())
    return s;
  // The first token's NLL comes from the prefill, each later one from the
  // step that fed its predecessor.
  s.nll.push_back(nll(m.policy.first.data(), V, continuation[0]));
  AttentionStatsAccumulator stats(m.schedule, m.policy.decoder->shape(),
      m.policy.decoder->config().attentionSpans());
  BatchOptions o;
  o.stats = {&stats};
  Batch batch(*m.policy.decoder, m.policy.program, o);
  Lane lane;
  lane.feed = Lane::Feed::Forced;
  lane.tokens = continuation;
  lane.limit = int64_t(continuation.size()) - 1;
  Result<size_t> started = batch.start(std::move(lane), m.policy.base);
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
