//===- SessionTest.cpp - The decode session against the decoder by hand ---===//
//
// Session's greedy run, dense comparison and scoring against loops written
// here over Decoder on the real model (skipped without it), and the
// fidelity measures on small inputs.
//
//===----------------------------------------------------------------------===//
#include "ModelTestSupport.h"

#include "condensate/Compiler/Compiler.h"
#include "condensate/Decoder/Batch.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Decoder/Session.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace condensate;
using namespace condensate::decoder;
using namespace condensate::model;
using namespace condensate::model::testsupport;

namespace {

TEST(FidelityMeasures, FirstDivergence) {
  EXPECT_FALSE(firstDivergence({1, 2, 3}, {1, 2, 3}));
  EXPECT_EQ(firstDivergence({1, 2, 3}, {1, 5, 3}), 1);
  EXPECT_EQ(firstDivergence({1, 2}, {1, 2, 3}), 2);
  EXPECT_EQ(firstDivergence({}, {4}), 0);
}

TEST(FidelityMeasures, TeacherForcedStatsAndQuantiles) {
  TeacherForcedStats s;
  EXPECT_EQ(s.agreement(), 1.0);
  EXPECT_EQ(s.klMax(), 0.0);
  const float a[] = {0.f, 1.f, 2.f}, b[] = {0.f, 2.f, 1.f};
  s.add(compareLogits(a, a, 3));
  s.add(compareLogits(a, b, 3));
  EXPECT_EQ(s.steps(), 2);
  EXPECT_EQ(s.agree(), 1);
  EXPECT_EQ(s.identical(), 1);
  EXPECT_EQ(s.kl()[0], 0.0);
  EXPECT_GT(s.klMax(), 0.0);
  EXPECT_DOUBLE_EQ(s.klMean(), s.klMax() / 2);
  EXPECT_DOUBLE_EQ(percentile({3.0, 1.0, 2.0}, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(percentile({1.0, 2.0}, 0.25), 1.25);
  // NLL of the argmax of two equal logits: log 2.
  const float flat[] = {1.f, 1.f};
  EXPECT_NEAR(nll(flat, 2, 0), std::log(2.0), 1e-12);
}

/// The real model, loaded once for the suite; null when it is absent.
struct RealModel {
  Tokenizer tokenizer;
  std::shared_ptr<const ModelWeights> weights;

  static const RealModel *get() {
    static const std::unique_ptr<RealModel> model = []() {
      std::unique_ptr<RealModel> none;
      if (modelPath().empty())
        return none;
      Result<GGUFFile> file = GGUFFile::open(modelPath());
      if (!file)
        return none;
      Result<Tokenizer> tok = Tokenizer::fromGGUF(*file);
      Result<std::shared_ptr<const ModelWeights>> w = ModelWeights::load(*file);
      if (!tok || !w)
        return none;
      return std::unique_ptr<RealModel>(new RealModel{tok.take(), w.take()});
    }();
    return model.get();
  }
};

class SessionRealModel : public ::testing::Test {
protected:
  void SetUp() override {
    if (modelPath().empty())
      GTEST_SKIP() << modelSkipMessage();
    const RealModel *m = RealModel::get();
    ASSERT_TRUE(m) << "cannot load " << modelPath();
    tokenizer_ = &m->tokenizer;
    weights_ = &m->weights;
    prompt_ = tokenizer_->encode(
        "The capital of France is Paris. The capital of Germany is");
  }
  int64_t layers() const { return (*weights_)->config().numLayers; }
  int64_t vocab() const { return (*weights_)->config().vocab; }
  /// A sparse schedule that matters at this prompt's length.
  Schedule window() const {
    Result<Schedule> s =
        parseSchedule("{\"anchor\": 1, \"window\": 4}", layers(), "test");
    EXPECT_TRUE(s.ok()) << s.message();
    return s.take();
  }
  std::unique_ptr<Session> session(const Schedule &schedule,
                                   SessionOptions o) {
    o.threads = 2;
    o.maxPromptTokens = int64_t(prompt_.size());
    Result<std::unique_ptr<Session>> s =
        Session::create(*weights_, *tokenizer_, schedule, o);
    EXPECT_TRUE(s.ok()) << s.message();
    return s.ok() ? s.take() : nullptr;
  }

  const Tokenizer *tokenizer_ = nullptr;
  const std::shared_ptr<const ModelWeights> *weights_ = nullptr;
  std::vector<int32_t> prompt_;
};

TEST_F(SessionRealModel, GreedyMatchesADecoderLoop) {
  SessionOptions o;
  o.maxNewTokens = 8;
  o.ignoreEos = true;
  std::unique_ptr<Session> s = session(window(), o);
  ASSERT_TRUE(s);
  std::vector<int32_t> streamed;
  SessionHooks hooks;
  hooks.onToken = [&](int32_t t) { streamed.push_back(t); };
  Result<SessionReport> r = s->generate(prompt_, hooks);
  ASSERT_TRUE(r.ok()) << r.message();

  DecoderOptions dopts;
  dopts.threads = 2;
  auto dec = Decoder::create(*weights_, window(), dopts);
  ASSERT_TRUE(dec.ok()) << dec.message();
  const int64_t seq = (*dec)->newSequence();
  std::vector<float> logits(static_cast<size_t>(vocab()));
  ASSERT_TRUE((*dec)
                  ->prefill(seq, prompt_.data(), int64_t(prompt_.size()),
                            logits.data())
                  .ok());
  std::vector<int32_t> expected{argmax(logits.data(), vocab())};
  while (expected.size() < 8) {
    ASSERT_TRUE((*dec)->step(seq, expected.back(), logits.data()).ok());
    expected.push_back(argmax(logits.data(), vocab()));
  }
  EXPECT_EQ(r->tokens, expected);
  EXPECT_EQ(streamed, expected);
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(r->decode.steps, 7);
  EXPECT_LT(r->attention.positionsAttended, 1.0);
  EXPECT_EQ(r->text, tokenizer_->decode(expected, false));
}

TEST_F(SessionRealModel, DenseAgainstDenseIsExact) {
  SessionOptions o;
  o.maxNewTokens = 6;
  o.ignoreEos = true;
  o.compareDense = true;
  std::unique_ptr<Session> s =
      session(Schedule::uniform(layers(), Policy::makeDense()), o);
  ASSERT_TRUE(s);
  Result<SessionReport> r = s->generate(prompt_);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE(r->compare);
  const DenseComparison &c = *r->compare;
  EXPECT_EQ(c.denseTokens, r->tokens);
  EXPECT_FALSE(c.firstDivergence);
  EXPECT_EQ(c.compared, 6);
  EXPECT_EQ(c.teacherForced.steps(), 5);
  EXPECT_EQ(c.teacherForced.identical(), 5);
  EXPECT_EQ(c.teacherForced.klMax(), 0.0);
  EXPECT_EQ(c.denseDecode.steps, 5);
  // The report's two forms carry it.
  r->model = "m.gguf";
  r->policyName = "dense";
  auto j = nlohmann::json::parse(reportJSON(*r));
  EXPECT_EQ(j["compare"]["teacher_forced"]["top1_agreement"], 1.0);
  EXPECT_EQ(j["stop"], "length");
  EXPECT_EQ(j["generated_tokens"].size(), 6u);
  const std::string text = reportText(*r);
  EXPECT_NE(text.find("greedy: first divergence none in 6"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("policy: dense, compiled in"), std::string::npos);
}

TEST_F(SessionRealModel, ScoreMatchesTeacherForce) {
  const std::vector<int32_t> cont = tokenizer_->encode(" Berlin. And Spain");
  SessionOptions o;
  o.maxNewTokens = int64_t(cont.size());
  std::unique_ptr<Session> s = session(window(), o);
  ASSERT_TRUE(s);
  Result<ScoreReport> r = s->score(prompt_, cont);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->nll.size(), cont.size());

  DecoderOptions dopts;
  dopts.threads = 2;
  auto dec = Decoder::create(*weights_, window(), dopts);
  ASSERT_TRUE(dec.ok()) << dec.message();
  const int64_t seq = (*dec)->newSequence();
  std::vector<float> first(static_cast<size_t>(vocab())), forced;
  ASSERT_TRUE((*dec)
                  ->prefill(seq, prompt_.data(), int64_t(prompt_.size()),
                            first.data())
                  .ok());
  ASSERT_TRUE((*dec)
                  ->teacherForce(seq, cont.data(), int64_t(cont.size()) - 1,
                                 forced)
                  .ok());
  EXPECT_EQ(r->nll[0], nll(first.data(), vocab(), cont[0]));
  for (size_t i = 1; i < cont.size(); ++i)
    EXPECT_EQ(r->nll[i], nll(forced.data() + (i - 1) * size_t(vocab()),
                             vocab(), cont[i]))
        << i;
  EXPECT_GT(r->attention.headSteps, 0);
}

TEST_F(SessionRealModel, StopTokensEndAGreedyLane) {
  // A greedy lane whose first token is a stop token takes no step.
  DecoderOptions dopts;
  dopts.threads = 2;
  auto dec = Decoder::create(*weights_, window(), dopts);
  ASSERT_TRUE(dec.ok()) << dec.message();
  const StopTokens stop(*tokenizer_);
  ASSERT_TRUE(stop(tokenizer_->eosId()));
  BatchOptions bo;
  bo.stop = &stop;
  Batch batch(**dec, nullptr, bo);
  Lane lane;
  lane.tokens = {tokenizer_->eosId()};
  lane.limit = 4;
  lane.stopAtEos = true;
  const int64_t base = (*dec)->newSequence();
  ASSERT_TRUE((*dec)->prefill(base, prompt_.data(), int64_t(prompt_.size()),
                              nullptr)
                  .ok());
  Result<size_t> i = batch.start(lane, base);
  ASSERT_TRUE(i.ok()) << i.message();
  EXPECT_TRUE(batch.lane(*i).done);
  EXPECT_TRUE(batch.lane(*i).stopped);
  EXPECT_FALSE(batch.live());
  ASSERT_TRUE(batch.run().ok());
  EXPECT_EQ(batch.steps(), 0);
}

} // namespace
