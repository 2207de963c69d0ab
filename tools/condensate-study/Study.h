//===- Study.h - The fidelity study of sparse policies vs. dense decoding -===//
//
// Runs every policy of the study on every prompt through one Decoder:
// prompts are prefilled once (dense) and forked per policy; a dense run
// produces the reference continuations and logits, and every policy is
// then teacher-forced on them in the same batch layout, so that the only
// difference between a policy and dense decoding is its attention.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_STUDY_STUDY_H
#define CONDENSATE_STUDY_STUDY_H

#include "condensate/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace condensate::study {

struct StudyOptions {
  std::string model;   ///< GGUF path
  std::string prompts; ///< prompts.jsonl
  std::string outDir;  ///< results.json, summary.csv, survival.csv go here
  std::string paperSchedule; ///< examples/paper.mlir
  std::string command; ///< the command line, recorded in results.json
  bool quick = false;
  int threads = 2; ///< OpenBLAS threads (the noise-floor run uses 1)
  std::vector<int64_t> contexts;     ///< empty: every context of the prompts
  std::vector<std::string> policies; ///< empty: all (or the quick set)
  int64_t naturalTokens = 256; ///< dense greedy continuation of natural text
  int64_t metricSteps = 32;    ///< teacher-forced KL/top-1 window (natural)
  int64_t answerTokens = 24;   ///< longest QA answer
  int64_t poolTokens = 140000; ///< KV tokens held at once (~7.4 GB)
  /// Tokens a page of the decoder's cache and of every study policy (the
  /// paper schedule keeps its own and needs 16).
  int64_t pageSize = 16;
};

/// Runs the study and writes its results; progress goes to stderr.
Status runStudy(const StudyOptions &options);

} // namespace condensate::study

#endif // CONDENSATE_STUDY_STUDY_H
