//===- Study.cpp - The fidelity study of sparse policies vs. dense decoding ===//
//
// Layout of one run. Per context length, prompts are split into groups that
// fit the KV pool; per group, prompts are prefilled once (dense) and kept as
// base sequences; every policy forks them. Rows of a batched decode step:
//   answer   QA prompt, teacher-forced on the dense answer; at its first
//            disagreement a `greedy` row is forked off to finish the
//            policy's own answer;
//   natural  natural text, teacher-forced on the dense greedy continuation:
//            KL and top-1 over the first metricSteps steps, then kept only
//            while it still agrees (greedy survival up to naturalTokens);
//   real     natural text, teacher-forced on the real continuation (NLL);
//   pad      filler rows that keep every batch at >= 3 sequences.
// Why pads: OpenBLAS computes a row of sgemm identically whatever the other
// rows are once M >= 3, but M = 1 (sgemv) and M = 2 take other kernels
// whose rounding differs; the study checks this invariance at start-up.
// With it, a teacher-forced policy whose argmax matches at every step is
// exactly the greedy run, and any difference from dense is the attention's.
//
//===----------------------------------------------------------------------===//
#include "StudyParts.h"

#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sys/utsname.h>

namespace condensate::study {

using namespace condensate::decoder;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

} // namespace

Status runStudy(const StudyOptions &o) {
  const Clock::time_point t0 = Clock::now();
  auto log = [&](const std::string &m) {
    std::fprintf(stderr, "[%7.1f s] %s\n", since(t0), m.c_str());
  };
  Result<model::GGUFFile> file = model::GGUFFile::open(o.model);
  if (!file)
    return file.status();
  Result<model::Tokenizer> tok = model::Tokenizer::fromGGUF(*file);
  if (!tok)
    return tok.status();
  Result<std::shared_ptr<const ModelWeights>> weights = ModelWeights::load(*file);
  if (!weights)
    return weights.status();
  const ModelConfig &cfg = (*weights)->config();

  Result<std::vector<PromptRecord>> loaded = readPrompts(o.prompts);
  if (!loaded)
    return loaded.status();
  std::vector<PromptRecord> prompts = loaded.take();
  // --quick: passkey at 0/50/100%, the first prompt of every other task.
  if (o.quick) {
    std::map<std::pair<std::string, int64_t>, int> seen;
    std::vector<PromptRecord> kept;
    for (PromptRecord &p : prompts) {
      if (p.task == "passkey" ? p.depth % 50 != 0
                              : seen[{p.task, p.context}]++ > 0)
        continue;
      kept.push_back(std::move(p));
    }
    prompts = std::move(kept);
  }
  std::vector<int64_t> contexts = o.contexts;
  if (contexts.empty()) {
    for (const PromptRecord &p : prompts)
      if (std::find(contexts.begin(), contexts.end(), p.context) ==
          contexts.end())
        contexts.push_back(p.context);
    if (o.quick)
      contexts.erase(std::remove_if(contexts.begin(), contexts.end(),
                                    [](int64_t c) { return c > 1024; }),
                     contexts.end());
  }
  std::sort(contexts.begin(), contexts.end());

  Result<std::vector<PolicyDef>> policiesR = studyPolicies(o, cfg.numLayers);
  if (!policiesR)
    return policiesR.status();

  StudyResults results;
  results.policies = policiesR.take();
  results.contexts = contexts;
  // One decoder runs every policy: its cache carries the sketches of the
  // sketch policies (which must agree on their bits).
  int64_t sketchBits = 0;
  for (const PolicyDef &d : results.policies)
    if (int64_t b = d.schedule.sketchBits()) {
      if (sketchBits && b != sketchBits)
        return Status::error("study policies use " +
                             std::to_string(sketchBits) + "- and " +
                             std::to_string(b) +
                             "-bit sketches; one decoder holds one width: "
                             "run them in separate --policies lists");
      sketchBits = b;
    }
  // The decoder's attention shape (its page, --page-size, and the CPU
  // decoder's f32 cache), for the bytes-read statistics.
  ModelShape studyShape;
  studyShape.numLayers = cfg.numLayers;
  studyShape.qHeads = cfg.qHeads;
  studyShape.kvHeads = cfg.kvHeads;
  studyShape.headDim = cfg.headDim;
  studyShape.pageSize = o.pageSize;
  studyShape.kvType = KVType::F32;
  studyShape.sketchBits = sketchBits;
  auto makeAcc = [&](const PolicyDef &d) {
    auto a = std::make_unique<Acc>();
    // The schedule as the decoder runs it (a model's local layers keep
    // their window policy).
    a->attention.emplace(withModelRoles(cfg, d.schedule, studyShape.pageSize),
                         studyShape, cfg.attentionSpans());
    return a;
  };
  for (const PolicyDef &d : results.policies) {
    results.all.push_back(makeAcc(d));
    results.perContext.emplace_back();
    for (size_t c = 0; c < contexts.size(); ++c)
      results.perContext.back().push_back(makeAcc(d));
  }
  const std::vector<PolicyDef> &policies = results.policies;
  json &meta = results.meta;
  meta["date"] = nowUTC();
  meta["command"] = o.command;
  meta["model"] = o.model;
  meta["architecture"] = cfg.describe();
  meta["prompts"] = o.prompts;
  meta["quick"] = o.quick;
  meta["threads"] = o.threads;
  meta["cpu"] = cpuModel();
  struct utsname u;
  if (uname(&u) == 0)
    meta["kernel"] = std::string(u.sysname) + " " + u.release;
  meta["natural_tokens"] = o.naturalTokens;
  meta["metric_steps"] = o.metricSteps;
  meta["answer_tokens"] = o.answerTokens;
  meta["contexts"] = contexts;

  Schedule denseSchedule = Schedule::uniform(cfg.numLayers, Policy::makeDense());
  bool invarianceChecked = false;

  log("model " + cfg.describe() + "; " + std::to_string(prompts.size()) +
      " prompts, " + std::to_string(policies.size()) + " policies");
  for (size_t ci = 0; ci < contexts.size(); ++ci) {
    const int64_t ctx = contexts[ci];
    std::vector<const PromptRecord *> mine;
    std::vector<std::vector<int32_t>> ids;
    for (const PromptRecord &p : prompts)
      if (p.context == ctx) {
        mine.push_back(&p);
        ids.push_back(promptTokens(*tok, p));
        if (int64_t(ids.back().size()) != p.tokens)
          return Status::error("prompt " + p.id + " encodes to " +
                               std::to_string(ids.back().size()) +
                               " tokens, the file says " +
                               std::to_string(p.tokens) +
                               " (a different tokenizer?)");
      }
    // Groups that fit the pool: a base plus two live rows per prompt.
    std::vector<std::vector<size_t>> groups(1);
    int64_t used = 0;
    for (size_t p = 0; p < mine.size(); ++p) {
      const int64_t need = 3 * (int64_t(ids[p].size()) + o.naturalTokens + 32);
      if (!groups.back().empty() && used + need > o.poolTokens) {
        groups.emplace_back();
        used = 0;
      }
      groups.back().push_back(p);
      used += need;
    }
    for (const std::vector<size_t> &group : groups) {
      if (group.empty())
        continue;
      std::vector<const PromptRecord *> gp;
      std::vector<std::vector<int32_t>> gi;
      int64_t need = 4 * (64 + o.naturalTokens + 32); // pads
      for (size_t p : group) {
        gp.push_back(mine[p]);
        gi.push_back(ids[p]);
        need += 3 * (int64_t(ids[p].size()) + o.naturalTokens + 32);
      }
      DecoderOptions dopts;
      dopts.threads = o.threads;
      dopts.maxTokens = need;
      dopts.prefillChunk = 1024; // ~10% faster prefill than 256 at 4K
      dopts.pageSize = studyShape.pageSize;
      dopts.sketchBits = sketchBits;
      Result<std::unique_ptr<Decoder>> dec =
          Decoder::create(*weights, denseSchedule, dopts);
      if (!dec)
        return dec.status();
      if (!invarianceChecked) {
        Result<bool> inv = checkBatchInvariance(**dec, *tok);
        if (!inv)
          return inv.status();
        meta["batch_invariant"] = *inv;
        log(std::string("batch invariance (rows of a batch of >= 3): ") +
            (*inv ? "holds" : "DOES NOT HOLD; results include BLAS noise"));
        invarianceChecked = true;
      }
      GroupRunner runner(o, *tok, **dec, gp, gi);
      const Clock::time_point pt = Clock::now();
      CONDENSATE_RETURN_IF_ERROR(runner.prefill());
      int64_t tokens = 0;
      for (auto &v : gi)
        tokens += int64_t(v.size());
      results.prefillTimes.push_back(
          {{"context", ctx}, {"prompts", int64_t(gp.size())},
           {"tokens", tokens}, {"seconds", since(pt)}});
      log("context " + std::to_string(ctx) + ": prefilled " +
          std::to_string(gp.size()) + " prompts (" + std::to_string(tokens) +
          " tokens) in " + std::to_string(since(pt)) + " s");
      for (size_t pi = 0; pi < policies.size(); ++pi) {
        const PolicyDef &d = policies[pi];
        if (pi > 0 && d.threads == 0 &&
            coversContext(d.schedule, ctx, cfg.kvHeads)) {
          if (&group == &groups.front()) {
            results.skipped.push_back({{"policy", d.name}, {"context", ctx}});
            log("  " + d.name + ": skipped (its budget covers the context)");
          }
          continue;
        }
        Result<std::shared_ptr<const AttentionProgram>> prog =
            (*dec)->compile(d.schedule);
        if (!prog)
          return prog.status().withContext(d.name);
        const Clock::time_point rt = Clock::now();
        CONDENSATE_RETURN_IF_ERROR(
            runner.run(d, *prog, {results.perContext[pi][ci].get(),
                              results.all[pi].get()}));
        char line[256];
        const StepProfile &pr = (*dec)->profile();
        std::snprintf(line, sizeof line,
                      "  %-15s %6.1f s (%lld steps, %.1f ms/step in the "
                      "decoder, %.1f in attention)",
                      d.name.c_str(), since(rt), (long long)pr.steps,
                      pr.steps ? 1e3 * pr.total / double(pr.steps) : 0.0,
                      pr.steps ? 1e3 * pr.attention / double(pr.steps) : 0.0);
        log(line);
      }
      CONDENSATE_RETURN_IF_ERROR(runner.releaseBases());
    }
    CONDENSATE_RETURN_IF_ERROR(writeResults(o, results, false, since(t0)));
  }
  CONDENSATE_RETURN_IF_ERROR(writeResults(o, results, true, since(t0)));
  log("done; results in " + o.outDir);
  return Status::success();
}

} // namespace condensate::study
