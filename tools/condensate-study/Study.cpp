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
#include "Study.h"
#include "Prompts.h"

#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"
#include "condensate/Runtime/Engine.h"
#include "condensate/Runtime/Reference.h"

#include <cblas.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <sys/utsname.h>

namespace condensate::study {

namespace {

using namespace condensate::decoder;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using SeqId = Decoder::SeqId;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

//===----------------------------------------------------------------------===//
// Policies
//===----------------------------------------------------------------------===//

struct PolicyDef {
  std::string name;
  std::string family; ///< dense, noise, window, exact, block_minmax, ...
  int64_t budget = 0; ///< nominal positions attended; 0 where n/a
  std::string spec;   ///< JSON or MLIR given to parseSchedule
  Schedule schedule;
  int threads = 0; ///< > 0: OpenBLAS threads for this run (noise floor)
  /// Follow greedy survival past the metric window (off for the noise
  /// floor, which only needs its logits compared).
  bool survival = true;
};

/// Whether every layer of `s` attends all of an n-token context: dense by
/// construction (up to summation order), so not worth a run.
bool coversContext(const Schedule &s, int64_t n, int64_t kvHeads) {
  for (int64_t l = 0; l < s.numLayers; ++l)
    for (int64_t g = 0; g < kvHeads; ++g) {
      const Policy &p = s.policyFor(l, g);
      if (!p.dense && (p.certified() || p.anchor + p.windowMax + p.topk < n))
        return false;
    }
  return true;
}

std::string topkJSON(int64_t topk, const char *selector) {
  return "{\"anchor\": 1, \"window\": 64, \"topk\": " + std::to_string(topk) +
         ", \"selector\": \"" + selector + "\", \"page_size\": 16}";
}

Result<std::vector<PolicyDef>> studyPolicies(const StudyOptions &o,
                                             int64_t numLayers) {
  std::vector<PolicyDef> defs;
  auto add = [&](std::string name, std::string family, int64_t budget,
                 std::string spec, int threads = 0) {
    PolicyDef d;
    d.name = std::move(name);
    d.family = std::move(family);
    d.budget = budget;
    d.spec = std::move(spec);
    d.threads = threads;
    defs.push_back(std::move(d));
  };
  add("dense", "dense", 0, "#condensate.dense");
  add("dense-1thread", "noise", 0, "#condensate.dense", 1);
  defs.back().survival = false;
  add("window-97", "window", 97, "{\"anchor\": 1, \"window\": 96}");
  add("window-1025", "window", 1025, "{\"anchor\": 1, \"window\": 1024}");
  for (int64_t b : {97, 257, 513, 1025}) {
    add("exact-" + std::to_string(b), "exact", b, topkJSON(b - 65, "exact"));
    add("minmax-" + std::to_string(b), "block_minmax", b,
        topkJSON(b - 65, "block_minmax"));
    add("mean-" + std::to_string(b), "block_mean", b,
        topkJSON(b - 65, "block_mean"));
  }
  const std::pair<const char *, const char *> taus[] = {
      {"cert-1e-2", "0.01"}, {"cert-1e-4", "0.0001"},
      {"cert-strict", "\"strict\""}};
  for (const auto &[name, tau] : taus)
    add(name, "certified", 97,
        "{\"anchor\": 1, \"window\": 64, \"topk\": 32, \"selector\": "
        "\"block_minmax\", \"page_size\": 16, \"tau\": " +
            std::string(tau) + ", \"max_extra\": 60}");
  std::ifstream in(o.paperSchedule);
  if (!in)
    return Status::error("cannot read the paper schedule '" +
                         o.paperSchedule + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  add("paper", "paper", 97, ss.str());
  add("paper-nopillar", "paper", 97, ""); // derived below

  for (PolicyDef &d : defs) {
    if (d.name == "paper-nopillar")
      continue;
    Result<Schedule> s = parseSchedule(d.spec, numLayers, d.name);
    if (!s)
      return s.status();
    d.schedule = s.take();
  }
  // The paper schedule without its pillar: drop the rules that make a
  // layer dense, so layer 15 gets the default adaptive policy.
  const auto paper = std::find_if(defs.begin(), defs.end(), [](auto &d) {
    return d.name == "paper";
  });
  for (PolicyDef &d : defs)
    if (d.name == "paper-nopillar") {
      d.schedule = paper->schedule;
      auto &rules = d.schedule.rules;
      rules.erase(std::remove_if(rules.begin(), rules.end(),
                                 [](const ScheduleRule &r) {
                                   return r.policy.dense;
                                 }),
                  rules.end());
      d.spec = d.schedule.toMLIR();
    }

  static const char *kQuick[] = {"dense",     "dense-1thread", "window-97",
                                 "exact-97",  "minmax-97",     "mean-97",
                                 "cert-1e-2", "cert-1e-4",     "cert-strict",
                                 "paper",     "paper-nopillar"};
  std::vector<std::string> wanted = o.policies;
  if (wanted.empty() && o.quick)
    wanted.assign(std::begin(kQuick), std::end(kQuick));
  if (wanted.empty())
    return defs;
  for (const std::string &w : wanted)
    if (std::none_of(defs.begin(), defs.end(),
                     [&](const PolicyDef &d) { return d.name == w; }))
      return Status::error("unknown policy '" + w + "'");
  if (std::find(wanted.begin(), wanted.end(), "dense") == wanted.end())
    wanted.insert(wanted.begin(), "dense"); // the reference is always run
  std::vector<PolicyDef> picked;
  for (PolicyDef &d : defs)
    if (std::find(wanted.begin(), wanted.end(), d.name) != wanted.end())
      picked.push_back(std::move(d));
  return picked;
}

//===----------------------------------------------------------------------===//
// Accumulated results
//===----------------------------------------------------------------------===//

struct CaseRecord {
  std::string prompt, task;
  int64_t context = 0, depth = -1;
  /// Index of the first generated token that differs from dense; -1 if
  /// none within `compared` tokens.
  int64_t divergence = -1;
  int64_t compared = 0;
  std::string answer;
  bool correct = false;
  double nll = 0.0; ///< natural: summed NLL of the real continuation
  int64_t nllTokens = 0;
};

/// Everything measured for one policy on one context (or on all).
struct Acc {
  int64_t tfSteps = 0, tfAgree = 0, identical = 0;
  std::vector<double> kl;
  std::optional<AttentionStatsAccumulator> attention;
  std::vector<CaseRecord> cases;
  double seconds = 0.0;
  int64_t steps = 0, rowSteps = 0;
  double stepSeconds = 0.0;      ///< inside Decoder::step
  double attentionSeconds = 0.0; ///< of which the attention kernels
  // True omitted softmax mass (float64 reference on the real KV cache).
  std::vector<double> epsTrue;
  int64_t epsChecked = 0, epsViolations = 0, epsAboveUlp = 0;
  double worstEpsRatio = 0.0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  double pos = p * double(v.size() - 1);
  size_t i = size_t(pos);
  double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

double mean(const std::vector<double> &v) {
  double s = 0.0;
  for (double x : v)
    s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

//===----------------------------------------------------------------------===//
// One group of prompts under every policy
//===----------------------------------------------------------------------===//

enum class RowKind { Answer, Natural, Real, Greedy, Pad };

struct Row {
  RowKind kind = RowKind::Pad;
  size_t prompt = 0;
  SeqId seq = -1;
  std::vector<int32_t> tokens; ///< generated (reference rows, greedy rows)
  int64_t step = 0;
  bool done = false;
  bool diverged = false;
};

/// What the dense run leaves for the policies of one prompt.
struct Reference {
  std::vector<int32_t> gen;   ///< dense greedy tokens (answer or natural)
  std::vector<float> logits;  ///< [steps, V] of the first steps
  int64_t storedSteps = 0;
};

class GroupRunner {
public:
  GroupRunner(const StudyOptions &o, const model::Tokenizer &tok,
              Decoder &dec, const std::vector<const PromptRecord *> &prompts,
              const std::vector<std::vector<int32_t>> &promptIds)
      : o_(o), tok_(tok), dec_(dec), prompts_(prompts), ids_(promptIds),
        V_(dec.config().vocab) {}

  Status prefill();
  /// Runs `policy`; the first call must be the dense reference.
  Status run(const PolicyDef &policy,
             std::shared_ptr<const AttentionProgram> program,
             const std::vector<Acc *> &accs);
  Status releaseBases();

private:
  bool isStop(int32_t t) const {
    return t == tok_.eosId() ||
           tok_.tokenType(t) == model::TokenType::Control;
  }
  bool isQA(size_t p) const { return prompts_[p]->task != "natural"; }
  int32_t nextToken(const Row &r, bool reference) const;
  void sampleOmittedMass(const PolicyDef &policy, int64_t b, int64_t batch,
                         SeqId seq, const std::vector<Acc *> &accs) const;

  const StudyOptions &o_;
  const model::Tokenizer &tok_;
  Decoder &dec_;
  std::vector<const PromptRecord *> prompts_;
  const std::vector<std::vector<int32_t>> &ids_;
  const int64_t V_;
  std::vector<SeqId> bases_;
  SeqId padBase_ = -1;
  std::vector<std::vector<float>> prefillLogits_;
  std::vector<Reference> refs_;  ///< per prompt: answer or natural
  std::vector<Reference> real_;  ///< per prompt: real continuation (dense)
  bool haveReference_ = false;
};

Status GroupRunner::prefill() {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    SeqId s = dec_.newSequence();
    std::vector<float> logits(static_cast<size_t>(V_));
    CONDENSATE_RETURN_IF_ERROR(
        dec_.prefill(s, ids_[p].data(), int64_t(ids_[p].size()), logits.data())
            .withContext("prefill " + prompts_[p]->id));
    bases_.push_back(s);
    prefillLogits_.push_back(std::move(logits));
  }
  // Pads: a short sequence, forked per pad row.
  std::vector<int32_t> pad = tok_.encode("The quick brown fox jumps over");
  padBase_ = dec_.newSequence();
  return dec_.prefill(padBase_, pad.data(), int64_t(pad.size()), nullptr);
}

Status GroupRunner::releaseBases() {
  for (SeqId s : bases_)
    CONDENSATE_RETURN_IF_ERROR(dec_.release(s));
  bases_.clear();
  if (padBase_ >= 0)
    CONDENSATE_RETURN_IF_ERROR(dec_.release(padBase_));
  padBase_ = -1;
  return Status::success();
}

int32_t GroupRunner::nextToken(const Row &r, bool reference) const {
  switch (r.kind) {
  case RowKind::Answer:
  case RowKind::Natural:
    return reference ? r.tokens.back() : refs_[r.prompt].gen[size_t(r.step)];
  case RowKind::Real:
    return prompts_[r.prompt]->continuation[size_t(r.step)];
  case RowKind::Greedy:
    return r.tokens.back();
  case RowKind::Pad:
    break;
  }
  return 13; // a pad row feeds any fixed token
}

/// Negative log-likelihood of token `t` under `logits` (float64).
double nll(const float *logits, int64_t n, int32_t t) {
  double m = logits[0];
  for (int64_t i = 1; i < n; ++i)
    m = std::max(m, double(logits[i]));
  double z = 0.0;
  for (int64_t i = 0; i < n; ++i)
    z += std::exp(double(logits[i]) - m);
  return m + std::log(z) - double(logits[t]);
}

void GroupRunner::sampleOmittedMass(const PolicyDef &policy, int64_t b,
                                    int64_t batch, SeqId seq,
                                    const std::vector<Acc *> &accs) const {
  const ModelShape &s = dec_.shape();
  const int64_t L = s.numLayers, Hq = s.qHeads, Hkv = s.kvHeads,
                D = s.headDim, G = s.group();
  const std::vector<int32_t> &pages = dec_.pages(seq);
  const std::vector<int32_t> &tokens = dec_.tokens(seq);
  const int32_t len = int32_t(tokens.size());
  const double rep =
      repetitionScore(tokens.data(), len, dec_.options().repetitionSpan);
  const std::vector<float> &q = dec_.lastQueries();
  const std::vector<float> &stats = dec_.stats();
  constexpr int64_t F = Decoder::kStatFields;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Policy> kv;
    bool anySparse = false;
    for (int64_t g = 0; g < Hkv; ++g) {
      kv.push_back(policy.schedule.policyFor(l, g));
      anySparse |= !kv.back().dense;
    }
    if (!anySparse)
      continue;
    const int32_t window = int32_t(policy.schedule.policyFor(l, 0).windowFor(rep));
    Decoder::CacheView c = dec_.cache(l);
    reference::Inputs in;
    in.batch = 1;
    in.qHeads = Hq;
    in.kvHeads = Hkv;
    in.headDim = D;
    in.pageSize = s.pageSize;
    in.maxPages = int64_t(pages.size());
    in.scale = s.effectiveScale();
    in.q = q.data() + (l * batch + b) * Hq * D;
    in.k = static_cast<const float *>(c.k);
    in.v = static_cast<const float *>(c.v);
    in.pageTable = pages.data();
    in.lens = &len;
    in.windows = &window;
    const float *st = stats.data() + (l * batch + b) * Hq * F;
    std::vector<reference::Decision> decisions(static_cast<size_t>(Hkv));
    for (int64_t g = 0; g < Hkv; ++g) {
      decisions[size_t(g)].extra = int64_t(st[g * G * F + 2]);
      decisions[size_t(g)].fallback = st[g * G * F + 3] != 0.0f;
    }
    reference::Output out = reference::attend(in, kv, &decisions);
    for (int64_t h = 0; h < Hq; ++h) {
      const Policy &p = kv[size_t(h / G)];
      if (p.dense)
        continue;
      const double eps = out.heads[size_t(h)].epsTrue;
      for (Acc *a : accs) {
        a->epsTrue.push_back(eps);
        a->epsAboveUlp += eps > 5.9604644775390625e-08;
        if (p.certified() && !std::isnan(st[h * F])) {
          ++a->epsChecked;
          const double hat = st[h * F];
          a->epsViolations += eps > hat;
          if (hat > 0)
            a->worstEpsRatio = std::max(a->worstEpsRatio, eps / hat);
        }
      }
    }
  }
}

Status GroupRunner::run(const PolicyDef &policy,
                        std::shared_ptr<const AttentionProgram> program,
                        const std::vector<Acc *> &accs) {
  const bool reference = !haveReference_;
  const ModelShape &shape = dec_.shape();
  const int64_t L = shape.numLayers, Hq = shape.qHeads;
  CONDENSATE_RETURN_IF_ERROR(dec_.setProgram(program));
  if (policy.threads > 0)
    openblas_set_num_threads(policy.threads);
  const Clock::time_point start = Clock::now();

  if (reference) {
    refs_.assign(prompts_.size(), Reference());
    real_.assign(prompts_.size(), Reference());
  }
  std::vector<CaseRecord> records(prompts_.size());
  std::vector<Row> rows;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    const PromptRecord &pr = *prompts_[p];
    CaseRecord &rec = records[p];
    rec.prompt = pr.id;
    rec.task = pr.task;
    rec.context = pr.context;
    rec.depth = pr.depth;
    const int32_t first = argmax(prefillLogits_[p].data(), V_);
    Row r;
    r.prompt = p;
    r.kind = isQA(p) ? RowKind::Answer : RowKind::Natural;
    if (reference) {
      r.tokens.push_back(first);
      if (r.kind == RowKind::Answer && isStop(first))
        r.done = true;
      refs_[p].gen = r.tokens;
    } else {
      // Every policy shares the dense prefill, hence the first token.
      r.done = refs_[p].gen.size() < 2;
    }
    if (!r.done) {
      Result<SeqId> f = dec_.fork(bases_[p]);
      if (!f)
        return f.status();
      r.seq = *f;
    }
    rows.push_back(r);
    if (!isQA(p)) {
      Row real;
      real.prompt = p;
      real.kind = RowKind::Real;
      Result<SeqId> f = dec_.fork(bases_[p]);
      if (!f)
        return f.status();
      real.seq = *f;
      // The first real token's NLL comes from the shared prefill logits.
      rec.nll = nll(prefillLogits_[p].data(), V_, pr.continuation[0]);
      rec.nllTokens = 1;
      rows.push_back(real);
    }
  }

  std::vector<SeqId> ids;
  std::vector<int32_t> feed;
  std::vector<size_t> live;
  std::vector<float> logits, statsLive;
  std::vector<int32_t> lensLive;
  std::vector<SeqId> pads;
  int64_t steps = 0, rowSteps = 0;
  dec_.resetProfile();
  for (;;) {
    live.clear();
    for (size_t i = 0; i < rows.size(); ++i)
      if (!rows[i].done)
        live.push_back(i);
    if (live.empty())
      break;
    const size_t real = live.size();
    // Pad to >= 3 sequences (see the file comment).
    while (live.size() < 3) {
      if (pads.size() < 3 - real) {
        Result<SeqId> f = dec_.fork(padBase_);
        if (!f)
          return f.status();
        pads.push_back(*f);
      }
      live.push_back(SIZE_MAX);
    }
    const int64_t B = int64_t(live.size());
    ids.assign(size_t(B), -1);
    feed.assign(size_t(B), 0);
    size_t padUsed = 0;
    for (int64_t i = 0; i < B; ++i) {
      if (live[size_t(i)] == SIZE_MAX) {
        ids[size_t(i)] = pads[padUsed++];
        feed[size_t(i)] = 13;
        continue;
      }
      const Row &r = rows[live[size_t(i)]];
      ids[size_t(i)] = r.seq;
      feed[size_t(i)] = nextToken(r, reference);
    }
    logits.resize(size_t(B * V_));
    CONDENSATE_RETURN_IF_ERROR(
        dec_.step(ids.data(), feed.data(), B, logits.data())
            .withContext(policy.name));
    ++steps;
    rowSteps += int64_t(real);

    // Attention statistics of the real rows only.
    const std::vector<float> &st = dec_.stats();
    constexpr int64_t F = Decoder::kStatFields;
    statsLive.resize(size_t(L * int64_t(real) * Hq * F));
    lensLive.resize(real);
    for (int64_t l = 0; l < L; ++l)
      for (size_t i = 0; i < real; ++i)
        std::memcpy(statsLive.data() + (l * int64_t(real) + int64_t(i)) * Hq * F,
                    st.data() + (l * B + int64_t(i)) * Hq * F,
                    size_t(Hq * F) * sizeof(float));
    for (size_t i = 0; i < real; ++i)
      lensLive[i] = dec_.lastLens()[i];
    for (Acc *a : accs)
      a->attention->add(statsLive.data(), lensLive.data(), int64_t(real));

    std::vector<Row> spawned;
    for (size_t i = 0; i < real; ++i) {
      Row &r = rows[live[i]];
      const float *lg = logits.data() + int64_t(i) * V_;
      const int32_t pred = argmax(lg, V_);
      CaseRecord &rec = records[r.prompt];
      switch (r.kind) {
      case RowKind::Answer:
      case RowKind::Natural: {
        const bool answer = r.kind == RowKind::Answer;
        Reference &ref = refs_[r.prompt];
        const bool metric = answer || r.step < o_.metricSteps;
        if (reference) {
          if (metric) {
            ref.logits.insert(ref.logits.end(), lg, lg + V_);
            ++ref.storedSteps;
          }
          r.tokens.push_back(pred);
          ref.gen = r.tokens;
          ++r.step;
          r.done = answer ? isStop(pred) || int64_t(r.tokens.size()) >=
                                                o_.answerTokens
                          : int64_t(r.tokens.size()) >= o_.naturalTokens;
          break;
        }
        const int32_t expected = ref.gen[size_t(r.step + 1)];
        if (metric) {
          const float *d = ref.logits.data() + r.step * V_;
          for (Acc *a : accs) {
            ++a->tfSteps;
            a->tfAgree += pred == expected;
            a->identical += std::memcmp(d, lg, size_t(V_) * sizeof(float)) == 0;
            a->kl.push_back(klDivergence(d, lg, V_));
          }
        }
        if (pred != expected && !r.diverged) {
          r.diverged = true;
          rec.divergence = r.step + 1;
          if (answer) {
            // The policy's own answer continues greedily from here.
            Row g;
            g.kind = RowKind::Greedy;
            g.prompt = r.prompt;
            g.tokens.assign(ref.gen.begin(), ref.gen.begin() + r.step + 1);
            g.tokens.push_back(pred);
            g.done = isStop(pred) ||
                     int64_t(g.tokens.size()) >= o_.answerTokens;
            if (!g.done) {
              Result<SeqId> f = dec_.fork(r.seq);
              if (!f)
                return f.status();
              g.seq = *f;
            } else {
              rec.answer = tok_.decode(g.tokens, false);
            }
            spawned.push_back(std::move(g));
          }
        }
        ++r.step;
        r.done = r.step + 1 >= int64_t(ref.gen.size()) ||
                 (!answer && (r.diverged || !policy.survival) &&
                  r.step >= o_.metricSteps);
        break;
      }
      case RowKind::Real: {
        const std::vector<int32_t> &cont = prompts_[r.prompt]->continuation;
        rec.nll += nll(lg, V_, cont[size_t(r.step + 1)]);
        ++rec.nllTokens;
        if (!reference && r.step == 0)
          sampleOmittedMass(policy, int64_t(i), B, r.seq, accs);
        ++r.step;
        r.done = r.step + 1 >= int64_t(cont.size());
        break;
      }
      case RowKind::Greedy:
        r.tokens.push_back(pred);
        r.done = isStop(pred) || int64_t(r.tokens.size()) >= o_.answerTokens;
        if (r.done)
          rec.answer = tok_.decode(r.tokens, false);
        break;
      case RowKind::Pad:
        break;
      }
      if (r.done && r.seq >= 0) {
        CONDENSATE_RETURN_IF_ERROR(dec_.release(r.seq));
        r.seq = -1;
      }
    }
    for (Row &g : spawned)
      rows.push_back(std::move(g));
  }
  for (SeqId s : pads)
    CONDENSATE_RETURN_IF_ERROR(dec_.release(s));
  if (policy.threads > 0)
    openblas_set_num_threads(o_.threads);

  // Case outcomes.
  for (size_t p = 0; p < prompts_.size(); ++p) {
    CaseRecord &rec = records[p];
    const Reference &ref = refs_[p];
    rec.compared = int64_t(ref.gen.size());
    if (isQA(p)) {
      if (rec.divergence < 0)
        rec.answer = tok_.decode(ref.gen, false);
      rec.correct = scoreAnswer(rec.task, prompts_[p]->answer, rec.answer);
    }
  }
  const double seconds = since(start);
  const StepProfile &prof = dec_.profile();
  for (Acc *a : accs) {
    a->cases.insert(a->cases.end(), records.begin(), records.end());
    a->seconds += seconds;
    a->stepSeconds += prof.total;
    a->attentionSeconds += prof.attention;
    a->steps += steps;
    a->rowSteps += rowSteps;
  }
  haveReference_ = true;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

const int64_t kSurvival[] = {16, 32, 64, 128, 256};

json accJSON(const Acc &a, const Acc *denseAcc, int64_t naturalTokens) {
  json j;
  j["teacher_forced_steps"] = a.tfSteps;
  j["top1_agreement"] = a.tfSteps ? double(a.tfAgree) / double(a.tfSteps) : 1.0;
  j["identical_logits"] = a.tfSteps ? double(a.identical) / double(a.tfSteps) : 1.0;
  j["kl_mean"] = mean(a.kl);
  j["kl_p99"] = percentile(a.kl, 0.99);
  j["kl_max"] = a.kl.empty() ? 0.0 : *std::max_element(a.kl.begin(), a.kl.end());
  json klq = json::array();
  for (int q = 0; q <= 100; q += 5)
    klq.push_back(percentile(a.kl, q / 100.0));
  j["kl_quantiles"] = klq; // 0, 5, ..., 100th percentiles
  // Survival of greedy decoding on natural text: identical to dense through
  // t generated tokens.
  json surv = json::object();
  int64_t runs = 0;
  for (const CaseRecord &c : a.cases)
    runs += c.task == "natural";
  for (int64_t t : kSurvival) {
    if (t > naturalTokens)
      continue;
    int64_t alive = 0;
    for (const CaseRecord &c : a.cases)
      if (c.task == "natural" && (c.divergence < 0 || c.divergence >= t))
        ++alive;
    surv[std::to_string(t)] = runs ? double(alive) / double(runs) : 0.0;
  }
  j["survival"] = surv;
  j["natural_runs"] = runs;
  // Answers identical to dense (QA), and accuracy per task.
  int64_t qa = 0, same = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> acc, denseAccMap;
  for (const CaseRecord &c : a.cases) {
    if (c.task == "natural")
      continue;
    ++qa;
    same += c.divergence < 0;
    auto &e = acc[c.task];
    e.first += c.correct;
    ++e.second;
  }
  j["qa_answers"] = qa;
  j["qa_identical_answers"] = qa ? double(same) / double(qa) : 0.0;
  json accj = json::object();
  for (auto &[task, e] : acc)
    accj[task] = {{"correct", e.first}, {"total", e.second},
                  {"accuracy", double(e.first) / double(e.second)}};
  j["accuracy"] = accj;
  // Perplexity of the real continuation.
  double nllSum = 0.0;
  int64_t nllN = 0;
  for (const CaseRecord &c : a.cases) {
    nllSum += c.nll;
    nllN += c.nllTokens;
  }
  if (nllN) {
    j["ppl"] = std::exp(nllSum / double(nllN));
    j["ppl_tokens"] = nllN;
    if (denseAcc) {
      // Dense on the same prompts (a policy skipped at some contexts
      // pools fewer prompts than dense does).
      std::map<std::string, const CaseRecord *> dense;
      for (const CaseRecord &c : denseAcc->cases)
        dense[c.prompt] = &c;
      double dn = 0.0;
      int64_t dc = 0;
      for (const CaseRecord &c : a.cases)
        if (c.nllTokens && dense.count(c.prompt)) {
          dn += dense[c.prompt]->nll;
          dc += dense[c.prompt]->nllTokens;
        }
      if (dc)
        j["ppl_change"] = std::exp(nllSum / double(nllN)) /
                              std::exp(dn / double(dc)) -
                          1.0;
    }
  }
  const AttentionSummary s = a.attention->summary();
  j["keys_read"] = s.keysRead;
  j["head_steps"] = s.headSteps;
  if (s.certified) {
    j["certified_head_steps"] = s.certified;
    j["cert_pass_rate"] = s.passRate();
    j["cert_fallback_rate"] = s.fallbackRate();
    j["eps_hat_mean"] = s.epsMean;
    j["eps_hat_max"] = s.epsMax;
    j["extra_units_mean"] = s.extraMean;
  }
  if (!a.epsTrue.empty()) {
    j["eps_true_samples"] = int64_t(a.epsTrue.size());
    j["eps_true_mean"] = mean(a.epsTrue);
    j["eps_true_p50"] = percentile(a.epsTrue, 0.5);
    j["eps_true_p99"] = percentile(a.epsTrue, 0.99);
    j["eps_true_max"] = *std::max_element(a.epsTrue.begin(), a.epsTrue.end());
    json q = json::array();
    for (int k = 0; k <= 100; k += 5)
      q.push_back(percentile(a.epsTrue, k / 100.0));
    j["eps_true_quantiles"] = q;
    j["eps_true_above_float32_ulp"] =
        double(a.epsAboveUlp) / double(a.epsTrue.size());
    if (a.epsChecked) {
      j["eps_checked"] = a.epsChecked;
      j["eps_violations"] = a.epsViolations;
      j["eps_worst_ratio"] = a.worstEpsRatio;
    }
  }
  j["seconds"] = a.seconds;
  j["step_seconds"] = a.stepSeconds;
  j["attention_seconds"] = a.attentionSeconds;
  j["decode_steps"] = a.steps;
  j["row_steps"] = a.rowSteps;
  return j;
}

json casesJSON(const Acc &a) {
  json arr = json::array();
  for (const CaseRecord &c : a.cases) {
    json j;
    j["prompt"] = c.prompt;
    j["task"] = c.task;
    j["context"] = c.context;
    if (c.depth >= 0)
      j["depth"] = c.depth;
    j["divergence"] = c.divergence < 0 ? json(nullptr) : json(c.divergence);
    j["compared"] = c.compared;
    if (c.task != "natural") {
      j["answer"] = c.answer;
      j["correct"] = c.correct;
    } else {
      j["nll"] = c.nll;
      j["nll_tokens"] = c.nllTokens;
    }
    arr.push_back(j);
  }
  return arr;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown";
}

std::string nowUTC() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string csvNum(const json &j, const char *key) {
  if (!j.contains(key) || j[key].is_null())
    return "";
  std::ostringstream os;
  os.precision(6);
  os << j[key].get<double>();
  return os.str();
}

/// Checks that a row's logits do not depend on the other rows of a batch
/// of >= 3 (the premise of teacher forcing in mixed batches).
Result<bool> checkBatchInvariance(Decoder &dec,
                                  const model::Tokenizer &tok) {
  std::vector<int32_t> ids = tok.encode(
      "Batch invariance: a row's logits must not depend on its neighbours.");
  SeqId base = dec.newSequence();
  CONDENSATE_RETURN_IF_ERROR(
      dec.prefill(base, ids.data(), int64_t(ids.size()), nullptr));
  const int64_t V = dec.config().vocab;
  auto runBatch = [&](const std::vector<int32_t> &feed)
      -> Result<std::vector<float>> {
    std::vector<SeqId> seqs;
    for (size_t i = 0; i < feed.size(); ++i) {
      Result<SeqId> f = dec.fork(base);
      if (!f)
        return f.status();
      seqs.push_back(*f);
    }
    std::vector<float> logits(feed.size() * size_t(V));
    Status st = dec.step(seqs.data(), feed.data(), int64_t(feed.size()),
                         logits.data());
    for (SeqId s : seqs)
      (void)dec.release(s);
    if (!st.ok())
      return st;
    return logits;
  };
  Result<std::vector<float>> big = runBatch({100, 200, 300, 400, 500, 600, 700});
  Result<std::vector<float>> small = runBatch({600, 300, 100});
  CONDENSATE_RETURN_IF_ERROR(dec.release(base));
  if (!big)
    return big.status();
  if (!small)
    return small.status();
  auto row = [&](const std::vector<float> &v, int64_t r) {
    return v.data() + r * V;
  };
  return std::memcmp(row(*big, 5), row(*small, 0), size_t(V) * sizeof(float)) == 0 &&
         std::memcmp(row(*big, 2), row(*small, 1), size_t(V) * sizeof(float)) == 0 &&
         std::memcmp(row(*big, 0), row(*small, 2), size_t(V) * sizeof(float)) == 0;
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
  std::vector<PolicyDef> policies = policiesR.take();

  // Accumulators: [policy][context index], plus [policy] over all contexts.
  auto makeAcc = [&](const PolicyDef &d) {
    auto a = std::make_unique<Acc>();
    a->attention.emplace(d.schedule, cfg.numLayers, cfg.qHeads, cfg.kvHeads);
    return a;
  };
  std::vector<std::vector<std::unique_ptr<Acc>>> perCtx(policies.size());
  std::vector<std::unique_ptr<Acc>> all;
  for (const PolicyDef &d : policies) {
    all.push_back(makeAcc(d));
    for (size_t c = 0; c < contexts.size(); ++c)
      perCtx[&d - policies.data()].push_back(makeAcc(d));
  }

  json meta;
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
  std::vector<json> prefillTimes, skipped;
  bool invarianceChecked = false;

  auto writeResults = [&](bool final) -> Status {
    std::error_code ec;
    std::filesystem::create_directories(o.outDir, ec);
    json root;
    json m = meta;
    m["complete"] = final;
    m["total_seconds"] = since(t0);
    m["blas"] = blasDescription();
    m["prefill"] = prefillTimes;
    m["skipped_covering_context"] = skipped;
    root["meta"] = m;
    json pol = json::array();
    for (const PolicyDef &d : policies)
      pol.push_back({{"name", d.name},
                     {"family", d.family},
                     {"budget", d.budget},
                     {"threads", d.threads ? d.threads : o.threads},
                     {"mlir", d.schedule.toMLIR()}});
    root["policies"] = pol;
    json res = json::array();
    std::ofstream csv(o.outDir + "/summary.csv");
    std::ofstream scsv(o.outDir + "/survival.csv");
    csv << "policy,family,budget,context,tf_steps,top1_agreement,"
           "identical_logits,kl_mean,kl_p99,kl_max,natural_runs,surv16,"
           "surv32,surv64,surv128,surv256,qa_identical_answers,ppl,"
           "ppl_change,passkey_acc,multikey_acc,vartrack_acc,copy_acc,"
           "keys_read,cert_pass_rate,cert_fallback_rate,eps_true_mean,"
           "eps_true_max,eps_true_above_ulp,seconds\n";
    scsv << "policy,context,tokens,surviving_fraction,runs\n";
    for (size_t pi = 0; pi < policies.size(); ++pi) {
      const PolicyDef &d = policies[pi];
      for (size_t c = 0; c <= contexts.size(); ++c) {
        const Acc &a = c < contexts.size() ? *perCtx[pi][c] : *all[pi];
        const Acc &dense = c < contexts.size() ? *perCtx[0][c] : *all[0];
        if (a.cases.empty())
          continue;
        json j = accJSON(a, pi ? &dense : nullptr, o.naturalTokens);
        const std::string ctx =
            c < contexts.size() ? std::to_string(contexts[c]) : "all";
        j["policy"] = d.name;
        j["context"] = ctx;
        j["cases"] = casesJSON(a);
        auto accOf = [&](const char *task) -> std::string {
          if (!j["accuracy"].contains(task))
            return "";
          return csvNum(j["accuracy"][task], "accuracy");
        };
        csv << d.name << "," << d.family << "," << d.budget << "," << ctx
            << "," << a.tfSteps << "," << csvNum(j, "top1_agreement") << ","
            << csvNum(j, "identical_logits") << "," << csvNum(j, "kl_mean")
            << "," << csvNum(j, "kl_p99") << "," << csvNum(j, "kl_max") << ","
            << j["natural_runs"].get<int64_t>();
        for (int64_t t : kSurvival) {
          csv << ",";
          const std::string k = std::to_string(t);
          if (j["survival"].contains(k)) {
            csv << csvNum(j["survival"], k.c_str());
            scsv << d.name << "," << ctx << "," << t << ","
                 << csvNum(j["survival"], k.c_str()) << ","
                 << j["natural_runs"].get<int64_t>() << "\n";
          }
        }
        csv << "," << csvNum(j, "qa_identical_answers") << ","
            << csvNum(j, "ppl") << "," << csvNum(j, "ppl_change") << ","
            << accOf("passkey") << "," << accOf("multikey") << ","
            << accOf("vartrack") << "," << accOf("copy") << ","
            << csvNum(j, "keys_read") << "," << csvNum(j, "cert_pass_rate")
            << "," << csvNum(j, "cert_fallback_rate") << ","
            << csvNum(j, "eps_true_mean") << "," << csvNum(j, "eps_true_max")
            << "," << csvNum(j, "eps_true_above_float32_ulp") << ","
            << csvNum(j, "seconds") << "\n";
        res.push_back(j);
      }
    }
    root["results"] = res;
    std::ofstream out(o.outDir + "/results.json");
    out << root.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out || !csv || !scsv)
      return Status::error("error writing results under '" + o.outDir + "'");
    return Status::success();
  };

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
      prefillTimes.push_back(
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
            skipped.push_back({{"policy", d.name}, {"context", ctx}});
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
            runner.run(d, *prog, {perCtx[pi][ci].get(), all[pi].get()}));
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
    CONDENSATE_RETURN_IF_ERROR(writeResults(false));
  }
  CONDENSATE_RETURN_IF_ERROR(writeResults(true));
  log("done; results in " + o.outDir);
  return Status::success();
}

} // namespace condensate::study
