//===- StudyResults.cpp - The fidelity study's results files --------------===//
//
// results.json (every measure per policy and context, with the cases),
// summary.csv (one row per policy and context) and survival.csv (greedy
// survival on natural text), all from the same accumulated records.
//
//===----------------------------------------------------------------------===//
#include "StudyParts.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace condensate::study {

using namespace condensate::decoder;
using nlohmann::json;

namespace {

const int64_t kSurvival[] = {16, 32, 64, 128, 256};

json accJSON(const Acc &a, const Acc *denseAcc, int64_t naturalTokens) {
  json j;
  j["teacher_forced_steps"] = a.tf.steps();
  j["top1_agreement"] = a.tf.agreement();
  j["identical_logits"] = a.tf.identicalRate();
  j["kl_mean"] = a.tf.klMean();
  j["kl_p99"] = percentile(a.tf.kl(), 0.99);
  j["kl_max"] = a.tf.klMax();
  json klq = json::array();
  for (int q = 0; q <= 100; q += 5)
    klq.push_back(percentile(a.tf.kl(), q / 100.0));
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
  j["positions_attended"] = s.positionsAttended;
  j["bytes_read"] = s.bytesRead;
  j["bytes_read_bf16"] = s.bytesReadBF16;
  j["head_steps"] = s.headSteps;
  if (s.certified) {
    j["certified_head_steps"] = s.certified;
    j["cert_pass_rate"] = s.passRate();
    j["cert_fallback_rate"] = s.fallbackRate();
    j["cert_early_fallback_rate"] = s.earlyFallbackRate();
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
  if (a.oracleSamples) {
    j["oracle_samples"] = a.oracleSamples;
    j["certified_tokens_read"] = a.certifiedFraction / double(a.oracleSamples);
    j["oracle_tokens"] = a.oracleFraction / double(a.oracleSamples);
    j["tokens_read_over_oracle"] = a.certifiedFraction / a.oracleFraction;
    j["group_oracle_tokens"] = a.groupOracleFraction / double(a.oracleSamples);
    j["tokens_read_over_group_oracle"] =
        a.certifiedFraction / a.groupOracleFraction;
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
    if (c.divergence >= 0) {
      // How near a tie the step was: dense's margin for its own token, and
      // the policy's for the token it took instead.
      j["dense_gap"] =
          std::isfinite(c.denseGap) ? json(c.denseGap) : json(nullptr);
      j["policy_gap"] =
          std::isfinite(c.policyGap) ? json(c.policyGap) : json(nullptr);
    }
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

std::string csvNum(const json &j, const char *key) {
  if (!j.contains(key) || j[key].is_null())
    return "";
  std::ostringstream os;
  os.precision(6);
  os << j[key].get<double>();
  return os.str();
}

/// Checks that a row's logits do not depend on the other rows of a batch

} // namespace

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

Status writeResults(const StudyOptions &o, const StudyResults &r, bool final,
                    double totalSeconds) {
  std::error_code ec;
  std::filesystem::create_directories(o.outDir, ec);
  json root;
  json m = r.meta;
  m["complete"] = final;
  m["total_seconds"] = totalSeconds;
  m["blas"] = blasDescription();
  m["prefill"] = r.prefillTimes;
  m["skipped_covering_context"] = r.skipped;
  root["meta"] = m;
  json pol = json::array();
  for (const PolicyDef &d : r.policies)
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
         "positions_attended,bytes_read,bytes_read_bf16,cert_pass_rate,"
         "cert_fallback_rate,cert_early_fallback_rate,eps_true_mean,"
         "eps_true_max,eps_true_above_ulp,certified_tokens_read,oracle_tokens,"
         "group_oracle_tokens,seconds\n";
  scsv << "policy,context,tokens,surviving_fraction,runs\n";
  for (size_t pi = 0; pi < r.policies.size(); ++pi) {
    const PolicyDef &d = r.policies[pi];
    for (size_t c = 0; c <= r.contexts.size(); ++c) {
      const Acc &a = c < r.contexts.size() ? *r.perContext[pi][c] : *r.all[pi];
      const Acc &dense = c < r.contexts.size() ? *r.perContext[0][c] : *r.all[0];
      if (a.cases.empty())
        continue;
      json j = accJSON(a, pi ? &dense : nullptr, o.naturalTokens);
      const std::string ctx =
          c < r.contexts.size() ? std::to_string(r.contexts[c]) : "all";
      j["policy"] = d.name;
      j["context"] = ctx;
      j["cases"] = casesJSON(a);
      auto accOf = [&](const char *task) -> std::string {
        if (!j["accuracy"].contains(task))
          return "";
        return csvNum(j["accuracy"][task], "accuracy");
      };
      csv << d.name << "," << d.family << "," << d.budget << "," << ctx
          << "," << a.tf.steps() << "," << csvNum(j, "top1_agreement") << ","
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
      csv << "," << csvNum(j, "qa_identical_answers") << "," << csvNum(j, "ppl")
          << "," << csvNum(j, "ppl_change") << "," << accOf("passkey") << ","
          << accOf("multikey") << "," << accOf("vartrack") << ","
          << accOf("copy") << "," << csvNum(j, "positions_attended") << ","
          << csvNum(j, "bytes_read") << "," << csvNum(j, "bytes_read_bf16")
          << "," << csvNum(j, "cert_pass_rate") << ","
          << csvNum(j, "cert_fallback_rate") << ","
          << csvNum(j, "cert_early_fallback_rate") << ","
          << csvNum(j, "eps_true_mean") << "," << csvNum(j, "eps_true_max")
          << "," << csvNum(j, "eps_true_above_float32_ulp") << ","
          << csvNum(j, "certified_tokens_read") << ","
          << csvNum(j, "oracle_tokens") << ","
          << csvNum(j, "group_oracle_tokens") << "," << csvNum(j, "seconds")
          << "\n";
      res.push_back(j);
    }
  }
  root["results"] = res;
  std::ofstream out(o.outDir + "/results.json");
  out << root.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  if (!out || !csv || !scsv)
    return Status::error("error writing results under '" + o.outDir + "'");
  return Status::success();
}

} // namespace condensate::study
