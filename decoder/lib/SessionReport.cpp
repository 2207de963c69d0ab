//===- SessionReport.cpp - A session's report as JSON and as text ---------===//
//
// condensate-decode's two outputs, written once for both devices: the few
// facts only one device has (the GPU's name; the CPU's page size, threads,
// BLAS and profile) are the only differences.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Session.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <utility>

namespace condensate::decoder {

namespace {

using nlohmann::json;

json attentionJSON(const AttentionSummary &s) {
  json j;
  j["head_steps"] = s.headSteps;
  j["positions_attended"] = s.positionsAttended;
  j["bytes_read"] = s.bytesRead;
  j["bytes_read_bf16"] = s.bytesReadBF16;
  j["certified_head_steps"] = s.certified;
  j["ran_dense_head_steps"] = s.ranDense;
  if (s.certified) {
    j["eps_hat_computed"] = s.epsComputed;
    j["eps_hat_mean"] = s.epsMean;
    j["eps_hat_max"] = s.epsMax;
    j["pass_rate"] = s.passRate();
    j["fallback_rate"] = s.fallbackRate();
    j["early_fallback_rate"] = s.earlyFallbackRate();
    j["extra_units_mean"] = s.extraMean;
  } else {
    j["eps_hat_mean"] = nullptr;
    j["eps_hat_max"] = nullptr;
    j["pass_rate"] = nullptr;
    j["fallback_rate"] = nullptr;
    j["early_fallback_rate"] = nullptr;
  }
  return j;
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

json timesJSON(const DecodeTimes &t) {
  return {{"steps", t.steps},
          {"seconds", t.seconds},
          {"tokens_per_second", t.tokensPerSecond()}};
}

json compareJSON(const DenseComparison &c) {
  const TeacherForcedStats &tf = c.teacherForced;
  json j;
  j["against"] = "dense";
  j["dense_tokens"] = c.denseTokens;
  j["dense_text"] = c.denseText;
  j["dense_decode"] = timesJSON(c.denseDecode);
  j["first_divergence"] =
      c.firstDivergence ? json(*c.firstDivergence) : json(nullptr);
  j["compared_tokens"] = c.compared;
  j["teacher_forced"] = {{"steps", tf.steps()},
                         {"top1_agree", tf.agree()},
                         {"top1_agreement", tf.agreement()},
                         {"kl_mean", tf.klMean()},
                         {"kl_max", tf.klMax()},
                         {"attention", attentionJSON(c.teacherForcedAttention)}};
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

/// Bytes read as a share of dense K+V, and of a bf16 cache's when the
/// cache is not 16-bit; then positions attended.
std::string bytesLine(const AttentionSummary &s) {
  std::string line = percent(s.bytesRead) + " of dense K+V (summaries, "
                                            "sketches, K/V attended, fallbacks";
  if (s.bytesReadBF16 != s.bytesRead)
    line += "; " + percent(s.bytesReadBF16) + " with a bf16 cache";
  return line + "); positions attended: " + percent(s.positionsAttended);
}

std::string certificateLine(const AttentionSummary &s) {
  // Head-steps of certified layers that the fallback memory ran dense.
  const std::string ranDense =
      s.ranDense ? "; " + std::to_string(s.ranDense) +
                       " head-steps ran dense without a certificate (fallback "
                       "memory)"
                 : "";
  if (!s.certified)
    return s.ranDense ? "no certificate ran" + ranDense
                      : "n/a (no certified layers)";
  return "eps_hat mean " + number(s.epsMean) + ", max " + number(s.epsMax) +
         " over " + std::to_string(s.epsComputed) + " head-steps; pass " +
         percent(s.passRate()) + ", fallback " + percent(s.fallbackRate()) +
         " (" + percent(s.earlyFallbackRate()) +
         " decided before the sparse pass), extra units " +
         number(s.extraMean) + ranDense;
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

double prefillRate(const SessionReport &r) {
  return double(r.promptTokens) / r.prefillSeconds;
}

} // namespace

std::string reportJSON(const SessionReport &r) {
  const bool gpu = r.device == BackendKind::GPU;
  json j;
  if (gpu)
    j["device"] = r.deviceDescription;
  if (!r.deviceMemory.empty())
    j["device_memory"] = r.deviceMemory;
  j["model"] = r.model;
  j["architecture"] = r.architecture;
  j["load_seconds"] = r.loadSeconds;
  if (!r.weightStorage.empty())
    j["weights"] = {{"storage", r.weightStorage}, {"bytes", r.weightBytes}};
  j["policy"] = {{"name", r.policyName}, {"mlir", r.scheduleMLIR}};
  j["compile_seconds"] = r.compileSeconds;
  j["kv_type"] = kvTypeName(r.kvType);
  if (gpu) {
    j["gpu_weights"] = weightTypeName(r.gpuWeights);
  } else {
    j["page_size"] = r.pageSize;
    j["threads"] = r.threads;
    j["blas"] = r.blas;
  }
  if (r.prefillProfile && r.decodeProfile)
    j["profile"] = {{"prefill", profileJSON(*r.prefillProfile)},
                    {"decode", profileJSON(*r.decodeProfile)}};
  j["prompt_tokens"] = r.promptTokens;
  j["generated_tokens"] = r.tokens;
  j["text"] = r.text;
  j["stop"] = r.stopped ? "eos" : "length";
  j["prefill"] = {{"tokens", r.promptTokens},
                  {"seconds", r.prefillSeconds},
                  {"tokens_per_second", prefillRate(r)},
                  {"attention", "dense"}};
  j["decode"] = timesJSON(r.decode);
  if (gpu)
    j["decode"]["cuda_graph"] = true;
  j["attention"] = attentionJSON(r.attention);
  if (r.compare)
    j["compare"] = compareJSON(*r.compare);
  j["total_seconds"] = r.totalSeconds;
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string reportText(const SessionReport &r) {
  const bool gpu = r.device == BackendKind::GPU;
  std::ostringstream os;
  os << "---\n";
  if (gpu)
    os << "device: " << r.deviceDescription
       << (r.deviceMemory.empty() ? "" : "; " + r.deviceMemory) << "\n";
  os << "model: " << r.model << " (" << r.architecture << "), loaded in "
     << number(r.loadSeconds, "%.2f") << " s";
  if (!r.weightStorage.empty())
    os << "; weights " << r.weightStorage << ", "
       << number(double(r.weightBytes) / 1e6, "%.0f") << " MB";
  os << "\n";
  if (gpu) {
    os << "policy: " << r.policyName << "; kernels compiled/loaded in "
       << number(r.compileSeconds, "%.2f") << " s; kv "
       << kvTypeName(r.kvType) << "\n";
  } else {
    os << "policy: " << r.policyName << ", compiled in "
       << number(r.compileSeconds, "%.2f") << " s; kv "
       << kvTypeName(r.kvType) << ", page " << r.pageSize << ", threads "
       << (r.threads ? std::to_string(r.threads) : std::string("default"))
       << "\n";
    os << "blas: " << r.blas << r.blasNote << "\n";
  }
  os << "prefill (dense): " << r.promptTokens << " tokens in "
     << number(r.prefillSeconds, "%.3f") << " s = "
     << number(prefillRate(r), "%.1f") << " tok/s\n";
  const double rate = r.decode.tokensPerSecond();
  if (gpu)
    os << "decode (CUDA graph per step): " << r.tokens.size() << " tokens, "
       << r.decode.steps << " steps = " << number(rate, "%.1f") << " tok/s\n";
  else
    os << "decode: " << r.tokens.size() << " tokens ("
       << (r.stopped ? "stopped at end of generation" : "length limit")
       << "), " << r.decode.steps << " decode steps in "
       << number(r.decode.seconds, "%.3f") << " s = " << number(rate, "%.1f")
       << " tok/s\n";
  os << "bytes read: " << bytesLine(r.attention) << "\n";
  os << "certificate: " << certificateLine(r.attention) << "\n";
  if (r.prefillProfile && r.decodeProfile) {
    os << profileText("prefill", "token", *r.prefillProfile);
    os << profileText("decode", "step", *r.decodeProfile);
  }
  if (!r.compare)
    return os.str();

  const DenseComparison &c = *r.compare;
  const TeacherForcedStats &tf = c.teacherForced;
  const double denseRate = c.denseDecode.tokensPerSecond();
  if (gpu) {
    os << "compare dense (GPU):\n";
    os << "  dense decode: " << c.denseDecode.steps << " steps = "
       << number(denseRate, "%.1f") << " tok/s\n";
  } else {
    os << "compare dense:\n";
    os << "  dense text: "
       << json(c.denseText).dump(-1, ' ', false,
                                 json::error_handler_t::replace)
       << "\n";
    os << "  dense decode: " << c.denseDecode.steps << " steps in "
       << number(c.denseDecode.seconds, "%.2f") << " s = "
       << number(denseRate, "%.1f") << " tok/s\n";
  }
  os << "  greedy: first divergence "
     << (c.firstDivergence ? "at token " + std::to_string(*c.firstDivergence) +
                                 " of " + std::to_string(c.compared)
                           : "none in " + std::to_string(c.compared))
     << "\n";
  os << "  teacher-forced ("
     << (gpu ? "" : "policy on dense tokens, ") << tf.steps()
     << " steps): top-1 agreement " << tf.agree() << "/" << tf.steps() << " ("
     << percent(tf.agreement()) << "), KL(dense||policy) mean "
     << number(tf.klMean()) << ", max " << number(tf.klMax()) << " nats\n";
  os << "  bytes read: " << bytesLine(c.teacherForcedAttention) << "\n";
  os << "  certificate: " << certificateLine(c.teacherForcedAttention) << "\n";
  return os.str();
}

} // namespace condensate::decoder
