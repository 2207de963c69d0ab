//===- Session.h - One decode session on either device ---------*- C++ -*-===//
//
// A Session decodes one prompt with a schedule on the CPU or the GPU: a dense
// prefill, greedy generation that stops at end-of-generation tokens, and on
// request the same run densely with the policy teacher-forced on the dense
// tokens, which measures the policy's fidelity (first greedy divergence,
// top-1 agreement, KL, attention statistics). The report it returns prints
// as JSON or text (condensate-decode's output). score() teacher-forces a
// given continuation instead (its negative log-likelihood).
//
// Every run is lanes of a Batch (Batch.h) on one Decoder, whatever its
// backend: the policy and dense lanes share the decoder and fork one prefill
// of the prompt (on the GPU the dense lanes have a decoder of their own).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_SESSION_H
#define CONDENSATE_DECODER_SESSION_H

#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace condensate::model {
class Tokenizer;
} // namespace condensate::model

namespace condensate::decoder {

struct SessionOptions {
  BackendKind device = BackendKind::CPU;
  /// KV element type; by default f32 on the CPU, bf16 on the GPU.
  std::optional<KVType> kvType;
  /// The GPU's weight matrices (DecoderOptions::weightType); the CPU takes
  /// only F32.
  WeightType gpuWeights = WeightType::F32;
  /// KV page size (0: the schedule's); the schedule must already use it
  /// (withPageSize).
  int64_t pageSize = 0;
  /// OpenBLAS threads on the CPU (0: OpenBLAS's choice).
  int threads = 0;
  /// DecoderOptions::fallbackMemory of the policy's decoder.
  int64_t fallbackMemory = 0;
  /// Longest prompt the session will be given (sizes the KV cache).
  int64_t maxPromptTokens = 0;
  int64_t maxNewTokens = 64;
  /// Generate to maxNewTokens whatever the tokens are.
  bool ignoreEos = false;
  /// Also decode densely and measure the policy against it.
  bool compareDense = false;
  /// Record where the CPU decoder's time goes (StepProfile).
  bool profile = false;
};

/// Decode steps and the seconds they took.
struct DecodeTimes {
  int64_t steps = 0;
  double seconds = 0.0;
  double tokensPerSecond() const {
    return seconds > 0 ? double(steps) / seconds : 0.0;
  }
};

/// The policy against dense decoding of the same prompt.
struct DenseComparison {
  std::vector<int32_t> denseTokens; ///< including a stop token
  bool denseStopped = false;
  std::string denseText;
  DecodeTimes denseDecode;
  /// First index where the greedy generations differ, over `compared`
  /// tokens (the shorter generation).
  std::optional<int64_t> firstDivergence;
  int64_t compared = 0;
  /// The policy fed the dense tokens, its logits compared at every step.
  TeacherForcedStats teacherForced;
  AttentionSummary teacherForcedAttention;
};

/// What a session did, with what the caller adds (model, policy name,
/// load and total time) for the report.
struct SessionReport {
  // Filled by the caller.
  std::string model;
  double loadSeconds = 0.0;
  /// How the weights are held ("float32" or "quantized") and their bytes.
  std::string weightStorage;
  int64_t weightBytes = 0;
  std::string policyName;
  double totalSeconds = 0.0;
  /// Appended to the text report's blas line (why OPENBLAS_CORETYPE is set).
  std::string blasNote;

  // Filled by the session.
  BackendKind device = BackendKind::CPU;
  std::string deviceDescription; ///< the GPU's name; empty on the CPU
  /// The GPU's memory in use after decoding; empty on the CPU.
  std::string deviceMemory;
  std::string architecture;      ///< ModelConfig::describe()
  std::string scheduleMLIR;
  double compileSeconds = 0.0;
  KVType kvType = KVType::F32;
  WeightType gpuWeights = WeightType::F32; ///< GPU
  int64_t pageSize = 0; ///< CPU
  int threads = 0;      ///< CPU, as asked (0: default)
  std::string blas;     ///< CPU: blasDescription()
  int64_t promptTokens = 0;
  std::vector<int32_t> tokens; ///< generated, including a stop token
  bool stopped = false;        ///< at a stop token (else the length limit)
  std::string text;            ///< the generated tokens without the stop
  double prefillSeconds = 0.0;
  DecodeTimes decode;
  AttentionSummary attention;
  /// CPU with SessionOptions::profile: prefill and the greedy steps.
  std::optional<StepProfile> prefillProfile, decodeProfile;
  std::optional<DenseComparison> compare;
};

/// condensate-decode's --json object and its text report.
std::string reportJSON(const SessionReport &report);
std::string reportText(const SessionReport &report);

/// A continuation scored under the policy (teacher-forced).
struct ScoreReport {
  /// NLL in nats of each continuation token given the ones before it.
  std::vector<double> nll;
  AttentionSummary attention;
  double meanNLL() const { return mean(nll); }
};

struct SessionHooks {
  /// Each generated token as it is chosen, stop tokens excepted.
  std::function<void(int32_t token)> onToken;
  /// Prefill progress (work done, total).
  ProgressFn progress;
};

class Session {
public:
  /// Compiles `schedule` (and the dense schedule with compareDense) for the
  /// device and sizes the KV cache for SessionOptions' prompt and new
  /// tokens.
  static Result<std::unique_ptr<Session>>
  create(std::shared_ptr<const ModelWeights> weights,
         const model::Tokenizer &tokenizer, const Schedule &schedule,
         const SessionOptions &options);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Prefills `prompt` densely and decodes greedily under the schedule
  /// (and with compareDense, measures it against dense decoding).
  Result<SessionReport> generate(const std::vector<int32_t> &prompt,
                                 const SessionHooks &hooks = {});
  /// Prefills `prompt` and feeds `continuation` one decode step at a time
  /// under the schedule.
  Result<ScoreReport> score(const std::vector<int32_t> &prompt,
                            const std::vector<int32_t> &continuation);

private:
  struct Lanes;
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_SESSION_H
