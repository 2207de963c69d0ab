//===- GPUDecoderTest.cpp - the GPU decoder against the CPU decoder -------===//
//
// Label "gpu": on the real model, the GPU decoder's dense prefill and decode
// steps (CUDA graph replays) give the CPU decoder's logits (float32 KV on
// both), and a sparse schedule runs and reports statistics. Skips, saying
// why, without a GPU or the model.
//
//===----------------------------------------------------------------------===//
#include "ModelTestSupport.h"

#include "condensate/Cuda/Driver.h"
#include "condensate/Decoder/CPUDecoder.h"
#include "condensate/Decoder/GPUDecoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace condensate;
using namespace condensate::decoder;
using condensate::model::testsupport::modelPath;
using condensate::model::testsupport::modelSkipMessage;

namespace {

double maxRelative(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}

TEST(GPUDecoder, MatchesCPUDecoderDense) {
  auto drv = cuda::Driver::get();
  if (!drv.ok())
    GTEST_SKIP() << "no CUDA driver: " << drv.message();
  if ((*drv)->deviceCount() == 0)
    GTEST_SKIP() << "no CUDA device";
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  auto file = model::GGUFFile::open(modelPath());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = model::Tokenizer::fromGGUF(*file);
  ASSERT_TRUE(tok.ok());
  auto weights = LlamaWeights::load(*file);
  ASSERT_TRUE(weights.ok()) << weights.message();
  const LlamaConfig &cfg = (*weights)->config();
  std::vector<int32_t> prompt = tok->encode(
      "The capital of France is Paris. The capital of Germany is Berlin. "
      "Rivers: the Seine flows through Paris and the Spree through",
      true);
  // Longer than one prefill chunk and several pages.
  while (prompt.size() < 300)
    prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 20);
  Schedule dense = Schedule::uniform(cfg.numLayers, Policy::makeDense());

  DecoderOptions copts;
  copts.kvType = KVType::F32;
  copts.pageSize = 64;
  auto cpu = CPUDecoder::create(*weights, dense, copts);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  GPUDecoderOptions gopts;
  gopts.kvType = KVType::F32;
  gopts.pageSize = 64;
  gopts.maxTokens = 1024;
  gopts.prefillChunk = 128;
  auto gpu = GPUDecoder::create(*weights, dense, gopts);
  ASSERT_TRUE(gpu.ok()) << gpu.message();

  int64_t V = cfg.vocab;
  std::vector<float> cl(V), gl(V, NAN);
  auto seq = (*cpu)->newSequence();
  ASSERT_TRUE((*cpu)->prefill(seq, prompt.data(), prompt.size(), cl.data()).ok());
  ASSERT_TRUE((*gpu)->prefill(prompt.data(), prompt.size(), gl.data()).ok());
  double prefillErr = maxRelative(gl, cl);
  std::printf("prefill (%zu tokens): max |gpu - cpu| / max |cpu| = %.2e\n",
              prompt.size(), prefillErr);
  EXPECT_LT(prefillErr, 1e-3);
  EXPECT_EQ(argmax(gl.data(), V), argmax(cl.data(), V));
  // Decode steps (graph replays) follow the CPU decoder's greedy tokens.
  for (int i = 0; i < 24; ++i) {
    int32_t next = argmax(cl.data(), V);
    std::fill(gl.begin(), gl.end(), NAN);
    ASSERT_TRUE((*cpu)->step(seq, next, cl.data()).ok());
    ASSERT_TRUE((*gpu)->step(next, gl.data()).ok());
    double err = maxRelative(gl, cl);
    EXPECT_LT(err, 1e-3) << "step " << i;
    if (i % 8 == 0)
      std::printf("step %d: max relative logit difference %.2e\n", i, err);
  }
  const GPUTimings &t = (*gpu)->timings();
  std::printf("GPU: %s; prefill %.0f tok/s; %lld decode steps\n",
              (*gpu)->deviceDescription().c_str(),
              t.prefillTokens / t.prefillSeconds, (long long)t.decodeSteps);
}

TEST(GPUDecoder, SparseScheduleRuns) {
  auto drv = cuda::Driver::get();
  if (!drv.ok() || (*drv)->deviceCount() == 0)
    GTEST_SKIP() << "no CUDA driver or device";
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  auto file = model::GGUFFile::open(modelPath());
  ASSERT_TRUE(file.ok());
  auto weights = LlamaWeights::load(*file);
  ASSERT_TRUE(weights.ok());
  const LlamaConfig &cfg = (*weights)->config();
  Policy p;
  p.anchor = 1;
  p.window = p.windowMax = 64;
  p.topk = 128;
  p.pageSize = 16;
  p.tau = 1e-2;
  p.maxExtra = 4;
  Schedule s = Schedule::uniform(cfg.numLayers, p);
  GPUDecoderOptions gopts;
  gopts.maxTokens = 2048;
  auto gpu = GPUDecoder::create(*weights, s, gopts);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  std::vector<int32_t> prompt(1000);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = int32_t(100 + (i * 37) % 5000);
  std::vector<float> logits(cfg.vocab);
  ASSERT_TRUE((*gpu)->prefill(prompt.data(), prompt.size(), logits.data()).ok());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*gpu)->step(argmax(logits.data(), cfg.vocab), logits.data()).ok());
    for (float x : logits)
      ASSERT_TRUE(std::isfinite(x));
    // Every head reports either a bound within tau or a dense fallback.
    const std::vector<float> &st = (*gpu)->stats();
    for (size_t h = 0; h < st.size(); h += kAttentionStatsWidth) {
      if (st[h + 3] == 0.0f) {
        EXPECT_LE(st[h], 1e-2 * (1 + 1e-3));
      }
      EXPECT_GT(st[h + 1], 0.0f);
    }
  }
}

} // namespace
