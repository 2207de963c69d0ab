//===- Batch.cpp - Sequences decoded together, greedy or teacher-forced ---===//
//
// The decode loop: lanes gathered, padded, stepped, observed, released.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Batch.h"

#include "condensate/Decoder/Decoder.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace condensate::decoder {

bool StopTokens::operator()(int32_t token) const {
  return token == tokenizer_->eosId() ||
         tokenizer_->tokenType(token) == model::TokenType::Control;
}

Batch::Batch(Decoder &decoder, std::shared_ptr<const AttentionProgram> program,
             BatchOptions options)
    : decoder_(decoder), program_(std::move(program)),
      options_(std::move(options)) {}

Batch::~Batch() { (void)finish(); }

bool Batch::complete(Lane &lane) const {
  if (lane.feed == Lane::Feed::Forced)
    return lane.steps >= lane.limit;
  if (lane.tokens.empty())
    return true;
  if (lane.stopAtEos && (*options_.stop)(lane.tokens.back())) {
    lane.stopped = true;
    return true;
  }
  return int64_t(lane.tokens.size()) >= lane.limit;
}

Result<size_t> Batch::start(Lane lane, int64_t from) {
  if (lane.stopAtEos && !options_.stop)
    return Status::error("a lane that stops at end of generation needs the "
                         "batch's stop tokens");
  lane.seq = -1;
  lane.done = complete(lane);
  if (!lane.done) {
    Result<int64_t> seq = decoder_.fork(from);
    if (!seq)
      return seq.status();
    lane.seq = *seq;
  }
  lanes_.push_back(std::move(lane));
  return lanes_.size() - 1;
}

bool Batch::live() const {
  return std::any_of(lanes_.begin(), lanes_.end(),
                     [](const Lane &l) { return !l.done; });
}

Status Batch::step(const Observer &observe) {
  live_.clear();
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (!lanes_[i].done)
      live_.push_back(i);
  if (live_.empty())
    return Status::success();
  const size_t real = live_.size();
  const size_t rows = std::max(real, size_t(std::max<int64_t>(
                                         options_.minRows, 1)));
  while (pads_.size() < rows - real) {
    Result<int64_t> pad = decoder_.fork(options_.padFrom);
    if (!pad)
      return pad.status().withContext("padding the batch");
    pads_.push_back(*pad);
  }
  seqs_.assign(rows, -1);
  feed_.assign(rows, options_.padToken);
  for (size_t i = 0; i < real; ++i) {
    const Lane &l = lanes_[live_[i]];
    seqs_[i] = l.seq;
    if (l.feed == Lane::Feed::Greedy) {
      feed_[i] = l.tokens.back();
    } else {
      if (l.steps >= int64_t(l.tokens.size()))
        return Status::error("a teacher-forced lane ran out of tokens");
      feed_[i] = l.tokens[size_t(l.steps)];
    }
  }
  for (size_t i = real; i < rows; ++i)
    seqs_[i] = pads_[i - real];

  const ModelConfig &cfg = decoder_.config();
  const int64_t V = cfg.vocab, B = int64_t(rows);
  logits_.resize(size_t(B * V));
  if (program_)
    CONDENSATE_RETURN_IF_ERROR(decoder_.setProgram(program_));
  const auto t0 = std::chrono::steady_clock::now();
  CONDENSATE_RETURN_IF_ERROR(
      decoder_.step(seqs_.data(), feed_.data(), B, logits_.data()));
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            t0)
                  .count();
  ++steps_;
  rowSteps_ += int64_t(real);

  if (!options_.stats.empty()) {
    // The lanes' rows come first in every layer; leave the pads out.
    const float *st = decoder_.stats().data();
    if (rows != real) {
      const int64_t n = int64_t(real), F = kAttentionStatsWidth,
                    row = cfg.qHeads * F;
      stats_.resize(size_t(cfg.numLayers * n * row));
      for (int64_t l = 0; l < cfg.numLayers; ++l)
        std::memcpy(stats_.data() + l * n * row, st + l * B * row,
                    size_t(n * row) * sizeof(float));
      st = stats_.data();
    }
    for (AttentionStatsAccumulator *acc : options_.stats)
      acc->add(st, decoder_.lastLens(), int64_t(real));
  }

  for (size_t i = 0; i < real; ++i) {
    Lane &lane = lanes_[live_[i]];
    Row row;
    row.lane = live_[i];
    row.step = lane.steps++;
    row.index = int64_t(i);
    row.rows = B;
    row.logits = logits_.data() + int64_t(i) * V;
    row.argmax = argmax(row.logits, V);
    if (lane.feed == Lane::Feed::Greedy)
      lane.tokens.push_back(row.argmax);
    lane.done = complete(lane);
    if (observe)
      CONDENSATE_RETURN_IF_ERROR(observe(lane, row));
    if (lane.done && lane.seq >= 0) {
      CONDENSATE_RETURN_IF_ERROR(decoder_.release(lane.seq));
      lane.seq = -1;
    }
  }
  return Status::success();
}

Status Batch::run(const Observer &observe) {
  while (live())
    CONDENSATE_RETURN_IF_ERROR(step(observe));
  return Status::success();
}

Status Batch::finish() {
  Status first;
  auto release = [&](int64_t &seq) {
    if (seq < 0)
      return;
    Status st = decoder_.release(seq);
    if (first.ok() && !st.ok())
      first = st;
    seq = -1;
  };
  for (int64_t &pad : pads_)
    release(pad);
  pads_.clear();
  for (Lane &lane : lanes_)
    release(lane.seq);
  return first;
}

} // namespace condensate::decoder
