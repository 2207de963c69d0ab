//===- StudyParts.h - The fidelity study's parts, shared by its files -----===//
//
// The study's policies (StudyPolicies.cpp), what it accumulates per policy
// and context, the runner of one group of prompts under a policy
// (StudyGroup.cpp), and its results files (StudyResults.cpp). runStudy
// (Study.cpp) ties them together.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_STUDY_STUDYPARTS_H
#define CONDENSATE_STUDY_STUDYPARTS_H

#include "Prompts.h"
#include "Study.h"

#include "condensate/Decoder/Batch.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Runtime/Policy.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace condensate::model {
class Tokenizer;
} // namespace condensate::model

namespace condensate::study {

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
bool coversContext(const Schedule &s, int64_t n, int64_t kvHeads);

/// The study's policies (dense first), or those options.policies names.
Result<std::vector<PolicyDef>> studyPolicies(const StudyOptions &o,
                                             int64_t numLayers);

//===----------------------------------------------------------------------===//
// Accumulated results
//===----------------------------------------------------------------------===//

struct CaseRecord {
  std::string prompt, task;
  int64_t context = 0, depth = -1;
  /// Index of the first generated token that differs from dense; -1 if
  /// none within `compared` tokens.
  int64_t divergence = -1;
  /// At the divergence: dense's top-1 logit less its second (how near a
  /// tie dense's own choice was there) and the policy's own top-1 logit
  /// less its logit of dense's token; NaN without a divergence.
  double denseGap = std::nan(""), policyGap = std::nan("");
  int64_t compared = 0;
  std::string answer;
  bool correct = false;
  double nll = 0.0; ///< natural: summed NLL of the real continuation
  int64_t nllTokens = 0;
};

/// Everything measured for one policy on one context (or on all).
struct Acc {
  decoder::TeacherForcedStats tf;
  std::optional<decoder::AttentionStatsAccumulator> attention;
  std::vector<CaseRecord> cases;
  double seconds = 0.0;
  int64_t steps = 0, rowSteps = 0;
  double stepSeconds = 0.0;      ///< inside Decoder::step
  double attentionSeconds = 0.0; ///< of which the attention kernels
  // True omitted softmax mass (float64 reference on the real KV cache).
  std::vector<double> epsTrue;
  int64_t epsChecked = 0, epsViolations = 0, epsAboveUlp = 0;
  double worstEpsRatio = 0.0;
  // Certified heads at sampled steps: positions whose K and V rows the
  // policy read (all of them after a fallback), and the fewest an oracle
  // knowing the exact scores needs for the same tau (per head, and the
  // most over the head's group: the fewest one set serving the group can
  // hold), each over the context; summed over the samples.
  double certifiedFraction = 0.0, oracleFraction = 0.0;
  double groupOracleFraction = 0.0;
  int64_t oracleSamples = 0;
};

//===----------------------------------------------------------------------===//
// One group of prompts under every policy
//===----------------------------------------------------------------------===//

/// Prompts prefilled once into base sequences of one decoder, then run
/// under each policy in turn (see Study.cpp's file comment for the rows).
class GroupRunner {
public:
  GroupRunner(const StudyOptions &o, const model::Tokenizer &tok,
              decoder::Decoder &dec,
              const std::vector<const PromptRecord *> &prompts,
              const std::vector<std::vector<int32_t>> &promptIds);

  Status prefill();
  /// Runs `policy`; the first call must be the dense reference.
  Status run(const PolicyDef &policy,
             std::shared_ptr<const decoder::AttentionProgram> program,
             const std::vector<Acc *> &accs);
  Status releaseBases();

private:
  /// What the dense run leaves for the policies of one prompt.
  struct Reference {
    std::vector<int32_t> gen;  ///< dense greedy tokens (answer or natural)
    std::vector<float> logits; ///< [steps, V] of the first steps
    std::vector<float> gap;    ///< per step: top-1 logit less the second
  };

  bool isQA(size_t p) const { return prompts_[p]->task != "natural"; }
  void sampleOmittedMass(const PolicyDef &policy, int64_t b, int64_t batch,
                         int64_t seq, const std::vector<Acc *> &accs) const;

  const StudyOptions &o_;
  const model::Tokenizer &tok_;
  decoder::Decoder &dec_;
  std::vector<const PromptRecord *> prompts_;
  const std::vector<std::vector<int32_t>> &ids_;
  const int64_t V_;
  std::vector<int64_t> bases_;
  int64_t padBase_ = -1;
  std::vector<std::vector<float>> prefillLogits_;
  std::vector<Reference> refs_; ///< per prompt: answer or natural
  bool haveReference_ = false;
};

/// Whether a row's logits do not depend on the other rows of a batch of
/// >= 3 (the premise of teacher forcing in mixed batches).
Result<bool> checkBatchInvariance(decoder::Decoder &dec,
                                  const model::Tokenizer &tok);

//===----------------------------------------------------------------------===//
// Results files
//===----------------------------------------------------------------------===//

/// What results.json, summary.csv and survival.csv are written from.
struct StudyResults {
  nlohmann::json meta;
  std::vector<nlohmann::json> prefillTimes, skipped;
  std::vector<PolicyDef> policies;
  std::vector<int64_t> contexts;
  /// [policy][context index], and [policy] over all contexts.
  std::vector<std::vector<std::unique_ptr<Acc>>> perContext;
  std::vector<std::unique_ptr<Acc>> all;
};

/// Writes the results so far (`final`: the run is complete).
Status writeResults(const StudyOptions &o, const StudyResults &r, bool final,
                    double totalSeconds);

/// "Intel(R) Xeon(R) ..." from /proc/cpuinfo; the time now, ISO 8601 UTC.
std::string cpuModel();
std::string nowUTC();

} // namespace condensate::study

#endif // CONDENSATE_STUDY_STUDYPARTS_H
