//===- Batch.h - Sequences decoded together, greedy or teacher-forced -----===//
//
// The one decode loop of the tools. A Batch holds lanes, each one sequence of
// a decoder fed one token per step: a greedy lane feeds its own last argmax
// and stops at a stop token or its length limit; a forced lane feeds given
// tokens (teacher forcing). Every step() advances all live lanes in one
// decoder call, adds the step's attention statistics to accumulators, lets an
// observer look at each lane's logits, and frees the sequences of lanes that
// finished. condensate-decode runs one lane per batch; the fidelity study
// runs many (BatchOptions::minRows).
//
// A batch's lanes run under one attention program, set on the decoder
// before each step, so that batches under two schedules (a policy and
// dense) can share one decoder and fork the same prompt.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_BATCH_H
#define CONDENSATE_DECODER_BATCH_H

#include "condensate/Decoder/Fidelity.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace condensate::model {
class Tokenizer;
} // namespace condensate::model

namespace condensate::decoder {

class AttentionProgram;
class Decoder;

/// The tokens that end a generation: the tokenizer's end-of-generation token
/// and every control token (<|im_end|> and the like).
class StopTokens {
public:
  explicit StopTokens(const model::Tokenizer &tokenizer)
      : tokenizer_(&tokenizer) {}
  bool operator()(int32_t token) const;

private:
  const model::Tokenizer *tokenizer_;
};

/// One sequence advanced by a Batch.
struct Lane {
  enum class Feed {
    Greedy, ///< feeds tokens.back(), then appends the step's argmax
    Forced, ///< feeds tokens[steps]
  };
  Feed feed = Feed::Greedy;
  /// Greedy: the tokens generated so far, the first one chosen by the
  /// caller (from the prefill logits). Forced: the tokens to feed, in
  /// order; the caller may append while the lane runs.
  std::vector<int32_t> tokens;
  /// Greedy: the most tokens; forced: the most steps. The lane is done when
  /// it reaches it (or at once if it starts there).
  int64_t limit = 0;
  /// Greedy: a stop token (StopTokens) ends the lane, kept as its last.
  bool stopAtEos = false;

  int64_t seq = -1;   ///< the decoder's sequence; -1 once released
  int64_t steps = 0;  ///< decode steps taken
  bool stopped = false; ///< ended at a stop token
  bool done = false;  ///< no more steps (the caller may also set it)
};

struct BatchOptions {
  /// Needed by greedy lanes with stopAtEos.
  const StopTokens *stop = nullptr;
  /// Rows per decoder call at least, filled with forks of `padFrom` fed
  /// `padToken`: the fidelity study pads to 3 so that a lane's logits do
  /// not depend on how many others are live (why: its Study.cpp).
  int64_t minRows = 1;
  int64_t padFrom = -1;
  int32_t padToken = 13;
  /// Where each step's statistics of the lanes' rows (not the pads') go.
  std::vector<AttentionStatsAccumulator *> stats;
};

class Batch {
public:
  /// One live lane's row of the step just taken.
  struct Row {
    size_t lane;   ///< the lane's index in the batch
    int64_t step;  ///< index of this step in the lane (0-based)
    int64_t index; ///< row in the decoder call (stats, queries)
    int64_t rows;  ///< rows in the decoder call, pads included
    const float *logits; ///< [vocab]
    int32_t argmax;
  };
  /// Called for every live lane after a step, in lane order, once the lane
  /// has taken its token and its own completion rule has run: it may set
  /// lane.done and start() new lanes (they join from the next step). A
  /// lane that is done is released after its observer returns.
  using Observer = std::function<Status(Lane &lane, const Row &row)>;

  /// Lanes of `decoder` under `program` (null: the decoder's current one).
  Batch(Decoder &decoder, std::shared_ptr<const AttentionProgram> program,
        BatchOptions options = {});
  /// Releases what is still held (errors ignored; call finish() to see
  /// them).
  ~Batch();
  Batch(const Batch &) = delete;
  Batch &operator=(const Batch &) = delete;

  /// Adds `lane`, forking `from` for it unless it is complete already
  /// (then it is added done, holding no sequence). Returns its index.
  Result<size_t> start(Lane lane, int64_t from);
  /// One decode step of every live lane.
  Status step(const Observer &observe = {});
  /// Steps until no lane is live.
  Status run(const Observer &observe = {});
  /// Releases the pads and the sequences of lanes still held.
  Status finish();

  bool live() const;
  size_t size() const { return lanes_.size(); }
  Lane &lane(size_t i) { return lanes_[i]; }
  const Lane &lane(size_t i) const { return lanes_[i]; }
  /// Decoder calls made and the seconds they took (wall time).
  int64_t steps() const { return steps_; }
  double seconds() const { return seconds_; }
  /// Lane rows stepped (pads not counted).
  int64_t rowSteps() const { return rowSteps_; }

private:
  bool complete(Lane &lane) const;

  Decoder &decoder_;
  std::shared_ptr<const AttentionProgram> program_;
  BatchOptions options_;
  std::deque<Lane> lanes_; ///< stable references while lanes are added
  std::vector<int64_t> pads_;
  int64_t steps_ = 0, rowSteps_ = 0;
  double seconds_ = 0.0;
  // Per-step buffers.
  std::vector<size_t> live_;
  std::vector<int64_t> seqs_;
  std::vector<int32_t> feed_;
  std::vector<float> logits_, stats_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_BATCH_H
