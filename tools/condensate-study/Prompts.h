//===- Prompts.h - Fidelity-study prompts: generation and loading -*- C++ -*-===//
//
// The study's prompts are generated once, offline, from text this machine
// has (licence texts, Debian copyright files, C++ library headers) with a
// fixed seed, and saved as JSON lines so that the study can be re-run
// exactly, on any machine, from the saved files. Tasks:
//   passkey   one "The pass key is N" sentence at a depth of 0..100% of
//             filler; answered with the number;
//   multikey  several name -> number facts, one asked;
//   vartrack  a chain VAR A = N, VAR B = VAR A, ... with a distractor chain;
//   copy      a random reference string at the start, repeated at the end;
//   natural   plain text (no chat template) with its real continuation,
//             for perplexity and long greedy continuations.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_STUDY_PROMPTS_H
#define CONDENSATE_STUDY_PROMPTS_H

#include "condensate/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace condensate::model {
class GGUFFile;
class Tokenizer;
} // namespace condensate::model

namespace condensate::study {

/// One prompt of the study.
struct PromptRecord {
  std::string id;      ///< e.g. "passkey-2048-d50"
  std::string task;    ///< passkey, multikey, vartrack, copy, natural
  int64_t context = 0; ///< nominal context length (prompt + generation)
  int64_t depth = -1;  ///< passkey: depth of the key in percent
  /// Exactly what is tokenised (special tokens parsed; the tokenizer's BOS
  /// is prepended when the model asks for one).
  std::string text;
  int64_t tokens = 0;  ///< token count of `text` (with BOS), checked on load
  std::string answer;  ///< expected answer (QA tasks)
  std::vector<int32_t> continuation; ///< natural: the real next tokens
  std::string source;  ///< where the filler or text came from
};

/// How many prompts of each task per context length, and the lengths.
struct PromptPlan {
  std::vector<int64_t> contexts;
  std::vector<int64_t> depths; ///< passkey depths in percent
  /// Counts per context (parallel to `contexts`).
  std::vector<int64_t> multikey, vartrack, copy, natural;
  int64_t answerReserve = 32;   ///< QA: context - prompt tokens
  int64_t naturalReserve = 256; ///< natural: context - prompt tokens
  int64_t continuationTokens = 64;
};

/// The plan of the full study (see README.md for the sizes' rationale).
PromptPlan defaultPlan();

/// The context lengths a plan may hold: room for a question and its
/// answer reserve at the low end; at the high end, the longest context the
/// study's models allow (the natural-text corpus may run out first, which
/// generation reports).
constexpr int64_t kMinPlanContext = 256;
constexpr int64_t kMaxPlanContext = int64_t(1) << 17; // 131,072

/// The plan for `contexts` (the default plan's when empty): the default's
/// counts at its lengths; at other lengths every passkey depth, one
/// multi-needle and one natural-text prompt (plus one variable-tracking and
/// one copy prompt up to 4096). Errors on a length out of range or listed
/// twice.
Result<PromptPlan> planFor(const std::vector<int64_t> &contexts);

/// Generates every prompt of `plan` with `seed`, using the model's
/// tokenizer and chat template.
Result<std::vector<PromptRecord>> generatePrompts(const model::GGUFFile &file,
                                                  const model::Tokenizer &tok,
                                                  const PromptPlan &plan,
                                                  uint64_t seed);

/// Writes prompts as JSON lines to `path`.
Status writePrompts(const std::string &path,
                    const std::vector<PromptRecord> &prompts);
/// Reads prompts written by writePrompts.
Result<std::vector<PromptRecord>> readPrompts(const std::string &path);

/// Token ids of a prompt as the study feeds them (BOS where the model
/// wants one, special tokens parsed).
std::vector<int32_t> promptTokens(const model::Tokenizer &tok,
                                  const PromptRecord &p);

/// Whether a greedy answer counts as correct: the first run of digits
/// equals the expected number (passkey, multikey, vartrack), or the answer
/// contains the expected string verbatim (copy).
bool scoreAnswer(const std::string &task, const std::string &expected,
                 const std::string &answer);

} // namespace condensate::study

#endif // CONDENSATE_STUDY_PROMPTS_H
