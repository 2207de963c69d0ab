//===- DecoderTest.cpp - The reference decoder against independent forwards ===//
//
// Synthetic Llama and Qwen2-style models (random float32 weights written as
// GGUF in memory) against a naive float64 forward in this file; the real
// SmolLM2 model against test/python/gguf_reference.py; decode steps against
// prefill; a full-window sparse policy against dense; load and CLI errors.
//
//===----------------------------------------------------------------------===//
#include "ModelTestSupport.h"
#include "SyntheticModel.h"

#include "condensate/Compiler/Compiler.h"
#include "condensate/Decoder/Chat.h"
#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Fidelity.h"
#include "condensate/Decoder/Model.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"
#include "condensate/Support/BFloat16.h"

#include <gtest/gtest.h>

#include <limits>

#include <functional>

#include <chrono>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <sys/wait.h>

using namespace condensate;
using namespace condensate::decoder;
using namespace condensate::model;
using namespace condensate::model::testsupport;
using namespace condensate::decoder::testsupport;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// max |a - b| / max |b| over n values.
double relError(const float *a, const float *b, int64_t n) {
  double diff = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

Schedule denseSchedule(int64_t layers) {
  return Schedule::uniform(layers, Policy::makeDense());
}

Schedule parseOrDie(const std::string &text, int64_t layers) {
  Result<Schedule> s = parseSchedule(text, layers, "test");
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? *s : denseSchedule(layers);
}

std::unique_ptr<Decoder> makeDecoder(std::shared_ptr<const ModelWeights> w,
                                        const Schedule &schedule,
                                        DecoderOptions options = {}) {
  if (!options.maxTokens)
    options.maxTokens = 4096;
  auto d = Decoder::create(std::move(w), schedule, options);
  EXPECT_TRUE(d.ok()) << d.message();
  return d.ok() ? d.take() : nullptr;
}

/// Logits of every position by prefill, and by decode steps after a
/// one-token prefill, against the naive forward.
void checkAgainstNaive(const TinySpec &spec, KVType kvType, double tol,
                       WeightStorage storage = WeightStorage::Float32) {
  TensorMap tensors = tinyTensors(spec, 7);
  auto w = loadTiny(spec, tensors, storage);
  ASSERT_TRUE(w);
  const std::vector<int32_t> ids = randomTokens(45, spec.vocab, 3);
  const std::vector<double> ref = naiveForward(spec, tensors, ids);
  std::vector<float> reff(ref.begin(), ref.end());
  const int64_t V = spec.vocab, T = int64_t(ids.size());

  DecoderOptions opts;
  opts.kvType = kvType;
  opts.prefillChunk = 16; // several blocks, crossing pages of 16
  auto dec = makeDecoder(w, denseSchedule(spec.layers), opts);
  ASSERT_TRUE(dec);
  auto a = dec->newSequence();
  std::vector<float> all, last(static_cast<size_t>(V));
  ASSERT_TRUE(dec->prefill(a, ids.data(), T, last.data(), &all).ok());
  double worst = 0;
  for (int64_t p = 0; p < T; ++p)
    worst = std::max(worst, relError(all.data() + p * V,
                                     reff.data() + p * V, V));
  EXPECT_LT(worst, tol) << "prefill vs naive float64";
  EXPECT_EQ(relError(last.data(), all.data() + (T - 1) * V, V), 0.0);

  auto b = dec->newSequence();
  std::vector<float> first(static_cast<size_t>(V)), steps;
  ASSERT_TRUE(dec->prefill(b, ids.data(), 1, first.data()).ok());
  ASSERT_TRUE(dec->teacherForce(b, ids.data() + 1, T - 1, steps).ok());
  worst = relError(first.data(), reff.data(), V);
  for (int64_t p = 1; p < T; ++p)
    worst = std::max(worst, relError(steps.data() + (p - 1) * V,
                                     reff.data() + p * V, V));
  EXPECT_LT(worst, tol) << "decode steps vs naive float64";
}

//===----------------------------------------------------------------------===//
// Synthetic models
//===----------------------------------------------------------------------===//

TEST(DecoderSynthetic, LlamaMatchesNaiveForward) {
  checkAgainstNaive(TinySpec(), KVType::F32, 1e-4);
}

TEST(DecoderSynthetic, Qwen2BiasesAndHalvesRope) {
  TinySpec s;
  s.arch = "qwen2";
  s.bias = true;
  s.tied = false;
  checkAgainstNaive(s, KVType::F32, 1e-4);
}

// Gemma 3's block: scaled embeddings, QK-norm, post-norms, GeGLU, head_dim
// apart from hidden / heads, and five local layers (window 8, base 10000)
// before a global one (linear RoPE scaling on it alone); 45 positions cross
// the window many times, in prefill blocks and in decode steps.
TEST(DecoderSynthetic, Gemma3LocalLayersQKNormAndPostNorms) {
  TinySpec s;
  s.arch = "gemma3";
  s.layers = 7;
  s.keyLength = 24;
  s.slidingWindow = 8;
  s.theta = 1e6;
  s.linearScale = 2.0;
  s.kvHeads = 1;
  checkAgainstNaive(s, KVType::F32, 1e-4);
  auto w = loadTiny(s, tinyTensors(s, 1));
  ASSERT_TRUE(w);
  const ModelConfig &c = w->config();
  EXPECT_TRUE(c.qkNorm && c.postNorms && c.tiedOutput);
  EXPECT_EQ(c.activation, Activation::GeGLU);
  EXPECT_EQ(c.headDim, 24);
  EXPECT_FLOAT_EQ(c.embedScale, 8.0f);
  for (int64_t l = 0; l < 7; ++l)
    EXPECT_EQ(c.localLayer(l), l != 5) << "layer " << l;
  // The roles: local layers take the window policy whatever the schedule
  // says; the global layer keeps the schedule's.
  Schedule sparse = Schedule::uniform(7, parseOrDie(R"({"anchor": 1,
      "window": 4, "topk": 8, "selector": "exact"})", 7).defaultPolicy);
  Schedule roles = withModelRoles(c, sparse, 16);
  for (int64_t l = 0; l < 7; ++l) {
    const Policy &p = roles.policyFor(l, 0);
    if (l == 5) {
      EXPECT_EQ(p, sparse.defaultPolicy);
    } else {
      EXPECT_EQ(p.anchor, 0);
      EXPECT_EQ(p.window, 8);
      EXPECT_EQ(p.topk, 0);
    }
  }
}

// A sparse schedule on Gemma 3's global layer alone: the local layers'
// decode steps stay exactly the model's (window) attention, so a policy
// that covers the whole context on the global layer reproduces dense.
TEST(DecoderSynthetic, Gemma3ScheduleAppliesToGlobalLayers) {
  TinySpec s;
  s.arch = "gemma3";
  s.layers = 6;
  s.slidingWindow = 8;
  TensorMap tensors = tinyTensors(s, 5);
  auto w = loadTiny(s, tensors);
  ASSERT_TRUE(w);
  const std::vector<int32_t> ids = randomTokens(30, s.vocab, 9);
  const std::vector<double> ref = naiveForward(s, tensors, ids);
  std::vector<float> reff(ref.begin(), ref.end());
  const int64_t V = s.vocab, T = int64_t(ids.size());
  DecoderOptions opts;
  opts.prefillChunk = 16;
  auto dec = makeDecoder(
      w, parseOrDie(R"({"anchor": 1, "window": 32, "topk": 16,
                        "selector": "exact"})", 6), opts);
  ASSERT_TRUE(dec);
  for (int64_t l = 0; l < 6; ++l)
    EXPECT_EQ(dec->schedule().policyFor(l, 0).window, l == 5 ? 32 : 8);
  auto seq = dec->newSequence();
  std::vector<float> first(static_cast<size_t>(V)), steps;
  ASSERT_TRUE(dec->prefill(seq, ids.data(), 1, first.data()).ok());
  ASSERT_TRUE(dec->teacherForce(seq, ids.data() + 1, T - 1, steps).ok());
  double worst = relError(first.data(), reff.data(), V);
  for (int64_t p = 1; p < T; ++p)
    worst = std::max(worst, relError(steps.data() + (p - 1) * V,
                                     reff.data() + p * V, V));
  EXPECT_LT(worst, 1e-4);
}

// Llama 3.1's rope scaling as llama.cpp stores it: rope_freqs.weight
// divides each pair's frequency.
TEST(DecoderSynthetic, Llama3RopeFactors) {
  TinySpec s;
  s.ropeFactors = true;
  s.theta = 500000.0;
  checkAgainstNaive(s, KVType::F32, 1e-4);
}

// Weights held as the file's blocks: Q8_0 matrices (and float32 ones) give
// the float64 forward of the values the blocks decode to, through the
// decode steps' row-block products and prefill's dequantised tiles, for
// Llama and Gemma 3 blocks; the same model held as float32 agrees.
TEST(DecoderSynthetic, QuantizedWeightsInMemory) {
  for (const char *arch : {"llama", "gemma3"}) {
    TinySpec s;
    s.arch = arch;
    s.q8 = true;
    s.hidden = 96; // rows of 96 and 32-multiple widths: Q8_0 blocks
    s.ffn = 128;
    s.qHeads = 4;
    s.kvHeads = 2;
    s.keyLength = 32;
    if (s.gemma()) {
      s.layers = 6;
      s.slidingWindow = 8;
    }
    SCOPED_TRACE(arch);
    checkAgainstNaive(s, KVType::F32, 1e-4, WeightStorage::Quantized);
    checkAgainstNaive(s, KVType::F32, 1e-4, WeightStorage::Float32);
    auto q = loadTiny(s, tinyTensors(s, 7), WeightStorage::Quantized);
    auto f = loadTiny(s, tinyTensors(s, 7), WeightStorage::Float32);
    ASSERT_TRUE(q && f);
    EXPECT_EQ(q->storage(), WeightStorage::Quantized);
    EXPECT_TRUE(q->layer(0).wqkv.quantized());
    EXPECT_FALSE(f->layer(0).wqkv.quantized());
    // Q8_0 is 34 bytes per 32 values against float32's 128.
    EXPECT_LT(double(q->bytes()), 0.5 * double(f->bytes()));
    EXPECT_EQ(q->layer(0).wGateUp.toF32(), f->layer(0).wGateUp.toF32());
  }
}

// Dummy weights of a named architecture: its shape, the same values for
// the same seed, finite logits; a prefill window at least the prompt's
// length changes nothing, a shorter one changes the prompt's late logits.
TEST(DecoderSynthetic, DummyWeightsAndPrefillWindow) {
  auto a = ModelWeights::dummy("tiny-llama", 7);
  ASSERT_TRUE(a.ok()) << a.message();
  auto b = ModelWeights::dummy("tiny-llama", 7);
  auto c = ModelWeights::dummy("tiny-llama", 8);
  ASSERT_TRUE(b.ok() && c.ok());
  const ModelConfig &cfg = (*a)->config();
  EXPECT_EQ(cfg.numLayers, 2);
  EXPECT_EQ(cfg.hidden, 128);
  EXPECT_EQ(cfg.kvHeads, 2);
  EXPECT_EQ(cfg.headDim, 32);
  EXPECT_EQ((*a)->layer(1).wGateUp.toF32(), (*b)->layer(1).wGateUp.toF32());
  EXPECT_NE((*a)->layer(1).wGateUp.toF32(), (*c)->layer(1).wGateUp.toF32());
  auto bad = ModelWeights::dummy("llama-9000");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("known: llama-3.2-1b, llama-3-8b"),
            std::string::npos)
      << bad.message();

  const std::vector<int32_t> ids = randomTokens(120, cfg.vocab, 5);
  const int64_t T = int64_t(ids.size()), V = cfg.vocab;
  std::vector<float> logits[3];
  int i = 0;
  for (int64_t window : {int64_t(0), int64_t(200), int64_t(40)}) {
    DecoderOptions opts;
    opts.prefillChunk = 32;
    opts.prefillWindow = window;
    auto dec = makeDecoder(*a, denseSchedule(2), opts);
    ASSERT_TRUE(dec);
    auto seq = dec->newSequence();
    ASSERT_TRUE(dec->prefill(seq, ids.data(), T, nullptr, &logits[i]).ok());
    for (float v : logits[i])
      ASSERT_TRUE(std::isfinite(v));
    ++i;
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_EQ(relError(logits[2].data(), logits[0].data(), 40 * V), 0.0);
  EXPECT_GT(relError(logits[2].data() + (T - 1) * V,
                     logits[0].data() + (T - 1) * V, V),
            1e-4);
  DecoderOptions neg;
  neg.prefillWindow = -1;
  EXPECT_FALSE(Decoder::create(*a, denseSchedule(2), neg).ok());
}

TEST(DecoderSynthetic, LinearRopeScalingAndNoGQA) {
  TinySpec s;
  s.kvHeads = s.qHeads;
  s.linearScale = 4.0;
  checkAgainstNaive(s, KVType::F32, 1e-4);
}

TEST(DecoderSynthetic, HalfPrecisionKVStaysClose) {
  // f16/bf16 caches round keys and values; the forward stays close.
  checkAgainstNaive(TinySpec(), KVType::F16, 1e-2);
  checkAgainstNaive(TinySpec(), KVType::BF16, 5e-2);
}

TEST(DecoderSynthetic, ConfigFromMetadata) {
  TinySpec s;
  s.arch = "qwen2";
  s.bias = true;
  s.tied = false;
  s.linearScale = 2.0;
  auto w = loadTiny(s, tinyTensors(s, 1));
  ASSERT_TRUE(w);
  const ModelConfig &c = w->config();
  EXPECT_EQ(c.numLayers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.qHeads, 4);
  EXPECT_EQ(c.kvHeads, 2);
  EXPECT_EQ(c.headDim, 16);
  EXPECT_EQ(c.ffn, 96);
  EXPECT_EQ(c.vocab, 50);
  EXPECT_EQ(c.contextLength, 4096);
  EXPECT_EQ(c.ropeDim, 16);
  EXPECT_EQ(c.ropeMode, RopeMode::Halves);
  EXPECT_DOUBLE_EQ(c.ropeLinearScale, 2.0);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_FALSE(c.tiedOutput);
}

TEST(DecoderSynthetic, MissingAndMisshapenTensorsAreNamed) {
  TinySpec s;
  TensorMap t = tinyTensors(s, 1);
  t.erase("blk.1.ffn_down.weight");
  Result<GGUFFile> f = GGUFFile::fromBuffer(tinyGGUF(s, t), "tiny.gguf");
  ASSERT_TRUE(f.ok());
  auto w = ModelWeights::load(*f);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.message(), "tiny.gguf: missing tensor 'blk.1.ffn_down.weight'");

  t = tinyTensors(s, 1);
  t["blk.0.attn_k.weight"].first = {64, 16};
  t["blk.0.attn_k.weight"].second.resize(64 * 16);
  f = GGUFFile::fromBuffer(tinyGGUF(s, t), "tiny.gguf");
  ASSERT_TRUE(f.ok());
  w = ModelWeights::load(*f);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.message(), "tiny.gguf: tensor 'blk.0.attn_k.weight' has shape "
                         "[64, 16], expected [64, 32]");

  GGUFBuilder g;
  g.addString("general.architecture", "gpt2");
  f = GGUFFile::fromBuffer(g.build(), "other.gguf");
  ASSERT_TRUE(f.ok());
  w = ModelWeights::load(*f);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("unsupported architecture 'gpt2'"),
            std::string::npos)
      << w.message();

  GGUFBuilder h;
  h.addString("general.architecture", "llama");
  h.addU32("llama.block_count", 2);
  f = GGUFFile::fromBuffer(h.build(), "keys.gguf");
  ASSERT_TRUE(f.ok());
  w = ModelWeights::load(*f);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.message(), "keys.gguf: missing key 'llama.embedding_length'");
}

TEST(DecoderSynthetic, HostileMetadataAndWeightsAreRefusedEarly) {
  // A small file whose metadata promises a huge model: refused before any
  // buffer is sized from it, with the key named.
  struct Case {
    const char *what;
    std::function<void(TinySpec &)> change;
    const char *expect;
  };
  TinySpec base;
  std::vector<Case> cases = {
      {"head_count 10^6",
       [](TinySpec &s) { s.qHeads = 1000000; s.kvHeads = 1000000; },
       "attention.head_count = 1000000 is larger than 1024"},
      {"block_count 10^7", [](TinySpec &s) { s.layers = 10000000; },
       "block_count = 10000000 is larger than 1024"},
      {"feed_forward_length 2^30", [](TinySpec &s) { s.ffn = 1 << 30; },
       "feed_forward_length = 1073741824 is larger than 262144"},
  };
  for (const Case &c : cases) {
    TinySpec s = base;
    TensorMap t = tinyTensors(base, 1);
    c.change(s);
    Result<GGUFFile> f = GGUFFile::fromBuffer(tinyGGUF(s, t), "hostile.gguf");
    ASSERT_TRUE(f.ok()) << c.what;
    auto started = std::chrono::steady_clock::now();
    auto w = ModelWeights::load(*f);
    ASSERT_FALSE(w.ok()) << c.what;
    EXPECT_NE(w.message().find(c.expect), std::string::npos) << w.message();
    EXPECT_EQ(w.message().find('\n'), std::string::npos);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            started)
                  .count(),
              1.0)
        << c.what;
  }

  // Metadata that fits the limits but not the tensors: the shapes are
  // checked before anything is allocated.
  TinySpec more = base;
  more.layers = 1000;
  TensorMap few = tinyTensors(base, 1);
  Result<GGUFFile> f =
      GGUFFile::fromBuffer(tinyGGUF(more, few), "short.gguf");
  ASSERT_TRUE(f.ok());
  auto w = ModelWeights::load(*f);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("missing tensor 'blk.2."), std::string::npos)
      << w.message();

  // NaN and inf weights are named at load, not decoded into NaN logits.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    TensorMap t = tinyTensors(base, 1);
    t["blk.1.ffn_up.weight"].second[7] = bad;
    f = GGUFFile::fromBuffer(tinyGGUF(base, t), "nan.gguf");
    ASSERT_TRUE(f.ok());
    w = ModelWeights::load(*f);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.message(), std::string("nan.gguf: tensor "
                                       "'blk.1.ffn_up.weight' holds a "
                                       "non-finite value (") +
                               (std::isnan(bad) ? "NaN" : "inf") +
                               ") at element 7");
  }
}

TEST(DecoderSynthetic, SequencesForkAndBatch) {
  TinySpec s;
  TensorMap tensors = tinyTensors(s, 5);
  auto w = loadTiny(s, tensors);
  ASSERT_TRUE(w);
  DecoderOptions opts;
  opts.maxTokens = 256;
  auto dec = makeDecoder(w, denseSchedule(s.layers), opts);
  ASSERT_TRUE(dec);
  const int64_t V = s.vocab;
  const auto ids = randomTokens(40, V, 11);
  // Two sequences with different prompts, stepped together, equal the
  // same sequences stepped alone; a fork continues like its source.
  auto a = dec->newSequence(), b = dec->newSequence();
  std::vector<float> la(static_cast<size_t>(V)), lb(static_cast<size_t>(V));
  ASSERT_TRUE(dec->prefill(a, ids.data(), 20, la.data()).ok());
  ASSERT_TRUE(dec->prefill(b, ids.data() + 20, 13, lb.data()).ok());
  auto fa = dec->fork(a);
  ASSERT_TRUE(fa.ok());
  EXPECT_EQ(dec->length(*fa), 20);
  Decoder::SeqId both[2] = {a, b};
  int32_t toks[2] = {ids[35], ids[36]};
  std::vector<float> batch(static_cast<size_t>(2 * V)), alone(static_cast<size_t>(V));
  ASSERT_TRUE(dec->step(both, toks, 2, batch.data()).ok());
  ASSERT_TRUE(dec->step(*fa, toks[0], alone.data()).ok());
  EXPECT_LT(relError(batch.data(), alone.data(), V), 1e-5);
  EXPECT_EQ(dec->lastLens()[0], 21);

  // Releasing returns pages; stepping a released sequence is an error.
  const int64_t before = dec->freePages();
  ASSERT_TRUE(dec->release(*fa).ok());
  EXPECT_GT(dec->freePages(), before);
  Status st = dec->step(*fa, 1, alone.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not exist"), std::string::npos);
  // The same sequence twice in one batch, and bad token ids, are errors.
  Decoder::SeqId twice[2] = {a, a};
  EXPECT_FALSE(dec->step(twice, toks, 2, batch.data()).ok());
  EXPECT_FALSE(dec->step(a, int32_t(V), alone.data()).ok());
  // The pool is finite.
  auto c = dec->newSequence();
  std::vector<int32_t> many(300, 1);
  st = dec->prefill(c, many.data(), 300, alone.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("KV cache full"), std::string::npos);
}

// Attention that reads enough runs as one call a thread, each on a run of
// sequences (a batch) or on a share of the kv heads (one sequence): with 2
// threads the logits and every head's statistics are those of 1 thread, on
// a certified sketch schedule (the statistics land at each call's rows and
// heads) and on dense.
TEST(DecoderSynthetic, BatchedAttentionSplitAcrossThreads) {
  TinySpec s;
  s.hidden = 256;
  s.qHeads = 8;
  s.kvHeads = 4; // 2 x 4 x 32 = 256 elements of K and V a position
  TensorMap tensors = tinyTensors(s, 21);
  auto w = loadTiny(s, tensors);
  ASSERT_TRUE(w);
  const int64_t V = s.vocab;
  const int64_t lens[5] = {1500, 900, 1300, 700, 1100}; // > 2^20 / 256
  const auto ids = randomTokens(1500, V, 12);
  for (const char *policy :
       {"dense", "{\"anchor\":1,\"window\":32,\"topk\":64,"
                 "\"selector\":\"sketch\",\"bits\":4,\"tau\":0.01,"
                 "\"max_extra\":4096}"}) {
    SCOPED_TRACE(policy);
    std::vector<float> logits[2], stats[2];
    for (int threads : {1, 2}) {
      DecoderOptions opts;
      opts.maxTokens = 8192;
      opts.threads = threads;
      opts.sketchBits = std::string(policy) == "dense" ? 0 : 4;
      Schedule schedule = std::string(policy) == "dense"
                              ? denseSchedule(s.layers)
                              : parseOrDie(policy, s.layers);
      auto dec = makeDecoder(w, schedule, opts);
      ASSERT_TRUE(dec);
      std::vector<Decoder::SeqId> seqs;
      std::vector<float> scratch(static_cast<size_t>(V));
      for (int64_t n : lens) {
        seqs.push_back(dec->newSequence());
        ASSERT_TRUE(
            dec->prefill(seqs.back(), ids.data(), n, scratch.data()).ok());
      }
      const int32_t toks[5] = {1, 2, 3, 4, 5};
      logits[threads - 1].assign(static_cast<size_t>(6 * V), std::nanf(""));
      ASSERT_TRUE(
          dec->step(seqs.data(), toks, 5, logits[threads - 1].data()).ok());
      stats[threads - 1] = dec->stats();
      // One sequence: the threads take shares of the kv heads.
      ASSERT_TRUE(
          dec->step(seqs[0], 6, logits[threads - 1].data() + 5 * V).ok());
      const std::vector<float> &one = dec->stats();
      stats[threads - 1].insert(stats[threads - 1].end(), one.begin(),
                                one.end());
    }
    EXPECT_LT(relError(logits[0].data(), logits[1].data(), 5 * V), 1e-6);
    EXPECT_LT(relError(logits[0].data() + 5 * V, logits[1].data() + 5 * V, V),
              1e-6);
    ASSERT_EQ(stats[0].size(), stats[1].size());
    ASSERT_EQ(stats[0].size(),
              size_t(s.layers * 6 * s.qHeads * Decoder::kStatFields));
    for (size_t i = 0; i < stats[0].size(); ++i)
      ASSERT_NEAR(stats[0][i], stats[1][i], 1e-5 * (1 + std::fabs(stats[0][i])))
          << "statistic " << i;
  }
}

// The fallback memory: a certified layer whose trial step read at least
// dense's bytes runs dense attention until the next trial, marked
// kRanDense; a layer whose certificate pays keeps it, an uncertified sparse
// layer is never touched; the logits are those of running every step's
// certificate (a fallback computes dense attention too), and the bytes of
// a kRanDense head are dense's.
TEST(DecoderSynthetic, FallbackMemoryRunsFailingLayersDense) {
  TinySpec s;
  s.layers = 3;
  TensorMap tensors = tinyTensors(s, 31);
  auto w = loadTiny(s, tensors);
  ASSERT_TRUE(w);
  const int64_t V = s.vocab, L = s.layers, hq = s.qHeads,
                F = Decoder::kStatFields;
  const Schedule schedule = parseOrDie(kFallbackMemorySchedule, L);
  const auto ids = randomTokens(320, V, 41);
  const int64_t prompt = 300, steps = 9, memory = 3;
  std::vector<float> logits[2], stats[2];
  for (int64_t m : {int64_t(0), memory}) {
    DecoderOptions opts;
    opts.maxTokens = 512;
    opts.fallbackMemory = m;
    auto dec = makeDecoder(w, schedule, opts);
    ASSERT_TRUE(dec);
    const auto seq = dec->newSequence();
    std::vector<float> scratch(static_cast<size_t>(V));
    ASSERT_TRUE(dec->prefill(seq, ids.data(), prompt, scratch.data()).ok());
    std::vector<float> &lg = logits[m ? 1 : 0], &st = stats[m ? 1 : 0];
    lg.assign(static_cast<size_t>(steps * V), std::nanf(""));
    for (int64_t i = 0; i < steps; ++i) {
      ASSERT_TRUE(
          dec->step(seq, ids[size_t(prompt + i)], lg.data() + i * V).ok());
      st.insert(st.end(), dec->stats().begin(), dec->stats().end());
    }
  }
  EXPECT_LT(relError(logits[0].data(), logits[1].data(), steps * V), 1e-5);
  ModelShape shape;
  shape.numLayers = L;
  shape.qHeads = hq;
  shape.kvHeads = s.kvHeads;
  shape.headDim = s.headDim();
  shape.pageSize = 16;
  shape.sketchBits = 4;
  AttentionStatsAccumulator always(schedule, shape),
      remembered(schedule, shape);
  for (int64_t i = 0; i < steps; ++i) {
    // Steps 0, 4 and 8 try every layer; 1-3 and 5-7 remember layer 0.
    const bool trial = i % (memory + 1) == 0;
    const int32_t len = int32_t(prompt + i + 1);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < hq; ++h) {
        SCOPED_TRACE("step " + std::to_string(i) + ", layer " +
                     std::to_string(l) + ", head " + std::to_string(h));
        const size_t at = size_t(((i * L + l) * hq + h) * F);
        const float *every = stats[0].data() + at, *kept = stats[1].data() + at;
        if (l == 1) {
          ASSERT_EQ(every[kStatFallback], 0.0f); // the certificate passed
        }
        if (l == 0) {
          ASSERT_TRUE(every[kStatFallback] == ::condensate::abi::kFellBack ||
                      every[kStatFallback] ==
                          ::condensate::abi::kFellBackEarly);
          const float expected =
              trial ? every[kStatFallback] : ::condensate::abi::kRanDense;
          EXPECT_EQ(kept[kStatFallback], expected);
          // Dense attention either way: every position.
          EXPECT_EQ(kept[kStatAttended], float(len));
        } else {
          for (int64_t f = 0; f < F; ++f) {
            if (std::isnan(every[f])) // no certificate ran
              EXPECT_TRUE(std::isnan(kept[f])) << "field " << f;
            else
              EXPECT_NEAR(kept[f], every[f], 1e-5 * (1 + std::fabs(every[f])))
                  << "field " << f;
          }
        }
      }
    always.add(stats[0].data() + i * L * hq * F, &len, 1);
    remembered.add(stats[1].data() + i * L * hq * F, &len, 1);
  }
  const AttentionSummary a = always.summary(), r = remembered.summary();
  EXPECT_EQ(a.ranDense, 0);
  EXPECT_EQ(r.ranDense, 6 * hq);
  EXPECT_EQ(a.certified, 2 * steps * hq);
  EXPECT_EQ(r.certified, a.certified - r.ranDense);
  EXPECT_EQ(a.fallbacks, steps * hq); // layer 0, every step
  EXPECT_EQ(r.fallbacks, 3 * hq);     // layer 0 at the trials
  EXPECT_EQ(r.passed, a.passed);      // layer 1, every step
  // A remembered layer reads dense's bytes only (no scoring, no sparse
  // pass): less than its fallbacks, which read both.
  EXPECT_LT(r.bytesRead, a.bytesRead);

  // Kept per program: steps of another program in between (a Batch
  // switching programs) neither count nor reset it; a program compiled
  // afresh starts with a trial.
  {
    DecoderOptions opts;
    opts.maxTokens = 512;
    opts.fallbackMemory = memory;
    auto dec = makeDecoder(w, schedule, opts);
    ASSERT_TRUE(dec);
    auto certified = dec->program();
    auto dense = dec->compile(denseSchedule(L));
    ASSERT_TRUE(dense.ok()) << dense.message();
    const auto seq = dec->newSequence();
    std::vector<float> scratch(static_cast<size_t>(V));
    ASSERT_TRUE(dec->prefill(seq, ids.data(), prompt, scratch.data()).ok());
    auto layer0 = [&] { return dec->stats()[kStatFallback]; }; // head 0
    int64_t fed = 0;
    auto stepWith = [&](std::shared_ptr<const AttentionProgram> p) {
      ASSERT_TRUE(dec->setProgram(std::move(p)).ok());
      ASSERT_TRUE(
          dec->step(seq, ids[size_t(prompt + fed++)], scratch.data()).ok());
    };
    for (int64_t i = 0; i < memory + 2; ++i) {
      stepWith(certified);
      if (i == 0 || i == memory + 1)
        EXPECT_NE(layer0(), ::condensate::abi::kRanDense) << "step " << i;
      else
        EXPECT_EQ(layer0(), ::condensate::abi::kRanDense) << "step " << i;
      stepWith(*dense);
      EXPECT_EQ(layer0(), 0.0f);
    }
    auto again = dec->compile(schedule);
    ASSERT_TRUE(again.ok()) << again.message();
    certified.reset();
    stepWith(*again);
    EXPECT_NE(layer0(), ::condensate::abi::kRanDense); // a trial
    stepWith(*again);
    EXPECT_EQ(layer0(), ::condensate::abi::kRanDense);
  }

  // With a prefill window (speed runs) the remembered layers still attend
  // densely, through a program of their own.
  {
    DecoderOptions opts;
    opts.maxTokens = 512;
    opts.fallbackMemory = memory;
    opts.prefillWindow = 32;
    auto dec = makeDecoder(w, schedule, opts);
    ASSERT_TRUE(dec);
    const auto seq = dec->newSequence();
    std::vector<float> scratch(static_cast<size_t>(V));
    ASSERT_TRUE(dec->prefill(seq, ids.data(), prompt, scratch.data()).ok());
    for (int64_t i = 0; i < 2; ++i)
      ASSERT_TRUE(dec->step(seq, ids[size_t(prompt + i)], scratch.data()).ok());
    for (int64_t h = 0; h < hq; ++h) {
      const float *row = dec->stats().data() + h * F; // layer 0
      EXPECT_EQ(row[kStatFallback], ::condensate::abi::kRanDense);
      EXPECT_EQ(row[kStatAttended], float(prompt + 2));
    }
  }

  DecoderOptions bad;
  bad.fallbackMemory = -1;
  auto refused = Decoder::create(w, schedule, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("fallbackMemory"), std::string::npos);
}

TEST(DecoderSynthetic, ScheduleAndPageSizeMismatch) {
  TinySpec s;
  auto w = loadTiny(s, tinyTensors(s, 1));
  ASSERT_TRUE(w);
  Schedule sparse = parseOrDie(
      R"({"anchor": 1, "window": 8, "topk": 8, "selector": "block_minmax",
          "page_size": 8})",
      s.layers);
  DecoderOptions opts;
  opts.pageSize = 16;
  auto d = Decoder::create(w, sparse, opts);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("page_size 8"), std::string::npos) << d.message();
  d = Decoder::create(w, withPageSize(sparse, 16), opts);
  EXPECT_TRUE(d.ok()) << d.message();
  d = Decoder::create(w, denseSchedule(s.layers + 1), opts);
  EXPECT_FALSE(d.ok());
}

//===----------------------------------------------------------------------===//
// bfloat16 weights (the GPU's WeightType::BF16), on the host
//===----------------------------------------------------------------------===//

/// The value of bfloat16 bits from their fields, in double; the all-ones
/// exponent (infinity) as 2^128, the next step past the largest finite
/// value, which is what rounding compares against.
double bf16Value(uint16_t b) {
  const int exponent = (b >> 7) & 0xff, mantissa = b & 0x7f;
  const double magnitude =
      exponent == 0 ? std::ldexp(double(mantissa), -133)
                    : std::ldexp(double(128 + mantissa), exponent - 134);
  return (b & 0x8000) ? -magnitude : magnitude;
}

/// floatToBF16 by exact arithmetic: of the two bfloat16 values around `f`
/// (its bits truncated, and one step further from zero), the nearer, the
/// one with an even mantissa at a tie.
uint16_t referenceBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t down = uint16_t(u >> 16), up = uint16_t(down + 1);
  const double x = std::fabs(double(f)), lo = std::fabs(bf16Value(down)),
               hi = std::fabs(bf16Value(up));
  if (x - lo < hi - x)
    return down;
  if (hi - x < x - lo)
    return up;
  return (down & 1) ? up : down;
}

// Bytes read as a share of dense, for the f32 cache the decoder keeps on
// the CPU and for a bf16 one (GPU engines): K/V rows cost half at bf16,
// the f32 page boxes and sketches do not, so the same decisions read a
// larger share. 1600 tokens = 100 full pages of 16, token top-k by 4-bit
// sketches attending 100 positions: scoring reads 2 box and 2 word rows
// a page (4 x 100 x 64 x 4 bytes), attention 2 x 100 rows.
TEST(AttentionStats, BytesReadAtF32AndBF16) {
  ModelShape shape{2, 4, 2, 64, 16, KVType::F32, 0.0f};
  shape.sketchBits = 4;
  Policy sketch;
  sketch.window = sketch.windowMax = 64;
  sketch.topk = 35;
  sketch.selector = Selector::Sketch;
  sketch.sketchBits = 4;
  Schedule schedule = Schedule::uniform(2, sketch);
  schedule.rules.push_back({{1}, {}, Policy::makeDense()}); // layer 1 dense
  AttentionStatsAccumulator acc(schedule, shape);
  std::vector<float> stats(2 * 4 * kAttentionStatsWidth, 0.0f);
  for (int64_t h = 0; h < 4; ++h)
    stats[size_t(h * kAttentionStatsWidth + 1)] = 100.0f; // layer 0
  const int32_t len = 1600;
  acc.add(stats.data(), &len, 1);
  const double scoring = 4.0 * 100 * 64 * 4;
  auto share = [&](double kvBytes) {
    const double dense = 2.0 * 1600 * 64 * kvBytes;
    return (scoring + 2.0 * 100 * 64 * kvBytes + dense) / (2 * dense);
  };
  const AttentionSummary s = acc.summary();
  EXPECT_DOUBLE_EQ(s.bytesRead, share(4.0));
  EXPECT_DOUBLE_EQ(s.bytesReadBF16, share(2.0));
  EXPECT_GT(s.bytesReadBF16, s.bytesRead);
  // A bf16 cache: both shares are the same.
  shape.kvType = KVType::BF16;
  AttentionStatsAccumulator half(schedule, shape);
  half.add(stats.data(), &len, 1);
  EXPECT_DOUBLE_EQ(half.summary().bytesRead, share(2.0));
  EXPECT_DOUBLE_EQ(half.summary().bytesReadBF16, share(2.0));
}

// Every bfloat16 pattern's neighbourhood (the low halves 0, 1, just under,
// at and over a tie, all ones, and random ones): finite values round as
// exact arithmetic says (ties to even, denormals, overflow to infinity
// from half a unit past the largest finite value), infinities stay, NaNs
// stay NaNs of their sign, however little payload they have.
TEST(BFloat16, RoundsToNearestEven) {
  std::mt19937 rng(5);
  int64_t checked = 0;
  for (uint32_t high = 0; high < 0x10000; ++high) {
    for (uint32_t low : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu,
                         uint32_t(rng() & 0xffffu)}) {
      const uint32_t u = high << 16 | low;
      float f;
      std::memcpy(&f, &u, 4);
      const uint16_t b = floatToBF16(f);
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(bf16ToFloat(b))) << std::hex << u;
        ASSERT_EQ(uint32_t(b & 0x8000), high & 0x8000) << std::hex << u;
        continue;
      }
      ASSERT_EQ(b, std::isinf(f) ? uint16_t(high) : referenceBF16(f))
          << std::hex << "bits 0x" << u;
      ++checked;
    }
  }
  EXPECT_GT(checked, 450000);
  // Named cases, by value.
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3f80); // a tie, to even (down)
  EXPECT_EQ(floatToBF16(1.0f + 0x3p-8f), 0x3f82); // a tie, to even (up)
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBF16(0x1p-133f), 0x0001); // smallest denormal
  EXPECT_EQ(floatToBF16(0x1p-134f), 0x0000); // half of it, a tie
  EXPECT_EQ(floatToBF16(0x3p-134f), 0x0002); // 1.5 of it, a tie
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  float nan;
  const uint32_t nanBits = 0x7f800001u; // the rounding add alone gives inf
  std::memcpy(&nan, &nanBits, 4);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(nan))));
  std::vector<float> in = {1.0f, 3.0f, -2.5f};
  std::vector<uint16_t> out(in.size());
  floatsToBF16(in.data(), in.size(), out.data());
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3f80, 0x4040, 0xc020}));
}

// WeightMatrix::toBF16 rounds every element of float32 and of quantised
// matrices (decoded tile by tile, a partial last tile included) as the
// element-wise conversion of toF32 does.
TEST(BFloat16, WeightMatricesRoundElementwise) {
  TinySpec s;
  s.q8 = true;
  s.hidden = 96;
  s.ffn = 128;
  s.keyLength = 32;
  s.vocab = 150; // embedding rows: two tiles of 64 and a partial one
  for (WeightStorage storage :
       {WeightStorage::Quantized, WeightStorage::Float32}) {
    auto w = loadTiny(s, tinyTensors(s, 3), storage);
    ASSERT_TRUE(w);
    for (const WeightMatrix *m :
         {&w->layer(0).wqkv, &w->layer(1).wDown, &w->tokenEmbedding()}) {
      EXPECT_EQ(m->quantized(), storage == WeightStorage::Quantized);
      const std::vector<float> f = m->toF32();
      std::vector<uint16_t> expected(f.size());
      for (size_t i = 0; i < f.size(); ++i)
        expected[i] = referenceBF16(f[i]);
      EXPECT_EQ(m->toBF16(), expected);
    }
  }
}

// The option's names, and the CPU backend's refusal of bfloat16 (it holds
// the weights as loaded) and its footprint.
TEST(BFloat16, WeightTypeOption) {
  for (WeightType t : {WeightType::F32, WeightType::BF16}) {
    auto parsed = parseWeightType(weightTypeName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  auto bad = parseWeightType("f16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "weight type must be f32 or bf16, got 'f16'");

  TinySpec s;
  auto w = loadTiny(s, tinyTensors(s, 1));
  ASSERT_TRUE(w);
  DecoderOptions opts;
  opts.weightType = WeightType::BF16;
  auto d = Decoder::create(w, denseSchedule(s.layers), opts);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("weight type bf16 is for the GPU backend"),
            std::string::npos)
      << d.message();
  auto cpu = makeDecoder(w, denseSchedule(s.layers));
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->weightFootprint().heldBytes, w->bytes());
  EXPECT_EQ(cpu->weightFootprint().stepBytes, w->bytes()); // tied output
}

// The GPU's kernels lower to PTX without a GPU (but with CUDA's libdevice,
// whose math they call); round_bf16 rounds with the hardware's
// round-to-nearest-even conversion, and so do the kernels that write a
// projection's bf16 input rows beside their own (rmsnorm, the activations).
TEST(BFloat16, DecoderKernelsLowerToPTX) {
  if (libdevicePath().empty())
    GTEST_SKIP() << "no CUDA libdevice (set CUDA_HOME to a CUDA toolkit)";
  const std::string text =
      readFile(repoRoot() + "/decoder/lib/DecoderKernels.mlir");
  ASSERT_FALSE(text.empty());
  auto ptx = compileGPUModulesToPTX(text, "DecoderKernels.mlir", "sm_90");
  ASSERT_TRUE(ptx.ok()) << ptx.message();
  EXPECT_NE(ptx->find(".entry round_bf16("), std::string::npos);
  EXPECT_NE(ptx->find("cvt.rn.bf16.f32"), std::string::npos);
  // Each kernel the GPU backend looks up, and the rounding in those that
  // write bf16 rows: the text from its entry to the next one's.
  auto body = [&](const std::string &name) {
    size_t at = ptx->find(".entry " + name + "(");
    if (at == std::string::npos)
      return std::string();
    size_t next = ptx->find(".entry ", at + 1);
    return ptx->substr(at, next == std::string::npos ? std::string::npos
                                                     : next - at);
  };
  for (const char *name : {"embed", "rmsnorm", "rope", "silu_mul", "gelu_mul",
                           "add_bias", "split_qkv", "split_rope"})
    EXPECT_FALSE(body(name).empty()) << name;
  for (const char *name : {"rmsnorm", "silu_mul", "gelu_mul"})
    EXPECT_NE(body(name).find("cvt.rn.bf16.f32"), std::string::npos) << name;
}

//===----------------------------------------------------------------------===//
// The real model
//===----------------------------------------------------------------------===//

class DecoderRealModel : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (modelPath().empty())
      return;
    auto f = GGUFFile::open(modelPath());
    ASSERT_TRUE(f.ok()) << f.message();
    auto tk = Tokenizer::fromGGUF(*f);
    ASSERT_TRUE(tk.ok()) << tk.message();
    tokenizer_ = new Tokenizer(tk.take());
    auto w = ModelWeights::load(*f);
    ASSERT_TRUE(w.ok()) << w.message();
    weights_ = new std::shared_ptr<const ModelWeights>(*w);
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete tokenizer_;
    weights_ = nullptr;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (modelPath().empty())
      GTEST_SKIP() << modelSkipMessage();
    ASSERT_TRUE(weights_ && tokenizer_);
  }
  static std::shared_ptr<const ModelWeights> weights() { return *weights_; }
  static const Tokenizer &tokenizer() { return *tokenizer_; }
  static int64_t layers() { return (*weights_)->config().numLayers; }
  static int64_t vocab() { return (*weights_)->config().vocab; }

  static inline std::shared_ptr<const ModelWeights> *weights_ = nullptr;
  static inline Tokenizer *tokenizer_ = nullptr;
};

const char *kPrompt = "The capital of France is Paris. The capital of Germany is";
const char *kLongPrompt =
    "Once upon a time, in a small village at the edge of a great forest, "
    "there lived an old clockmaker who repaired every clock in the valley. "
    "One winter morning a stranger knocked at his door with a broken watch.";

/// Reads a little-endian float32 C-order .npy file (v1.0-3.0).
bool readNpy(const std::string &path, std::vector<int64_t> &shape,
             std::vector<float> &data, std::string &err) {
  const std::string bytes = readFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return err = "not an npy file", false;
  const int major = uint8_t(bytes[6]);
  size_t headerLen, start;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    start = 10;
  } else {
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    start = 12;
  }
  const std::string header = bytes.substr(start, headerLen);
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos)
    return err = "unexpected npy header: " + header, false;
  size_t open = header.find("'shape': ("), close = header.find(')', open);
  std::string dims = header.substr(open + 10, close - open - 10);
  shape.clear();
  int64_t count = 1;
  for (size_t p = 0; p < dims.size();) {
    size_t q = dims.find(',', p);
    std::string d = dims.substr(p, q == std::string::npos ? q : q - p);
    if (d.find_first_not_of(' ') != std::string::npos) {
      shape.push_back(std::stoll(d));
      count *= shape.back();
    }
    if (q == std::string::npos)
      break;
    p = q + 1;
  }
  const size_t offset = start + headerLen;
  if (bytes.size() < offset + size_t(count) * 4)
    return err = "npy data truncated", false;
  data.resize(static_cast<size_t>(count));
  std::memcpy(data.data(), bytes.data() + offset, size_t(count) * 4);
  return true;
}

/// The tokenizer and weights of the GGUF at `path`; empty (with the
/// failure recorded) when either does not load.
std::pair<std::optional<Tokenizer>, std::shared_ptr<const ModelWeights>>
loadModel(const std::string &path,
          WeightStorage storage = WeightStorage::Auto) {
  auto f = GGUFFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok())
    return {};
  auto tk = Tokenizer::fromGGUF(*f);
  EXPECT_TRUE(tk.ok()) << tk.message();
  auto w = ModelWeights::load(*f, storage);
  EXPECT_TRUE(w.ok()) << w.message();
  if (!tk.ok() || !w.ok())
    return {};
  return {tk.take(), *w};
}

/// Every prompt position's logits of `w` on `prompt`, by prefill (blocks of
/// 16 rows) and by decode steps, against the numpy reference's float64
/// forward of the model at `path` (its own tokenizer and dequantisation):
/// same token ids, relative error below 1e-3 and the same argmax at every
/// position. Returns the text of the last position's argmax.
std::string expectLogitsMatchReference(const std::string &path,
                                       std::shared_ptr<const ModelWeights> w,
                                       const Tokenizer &tk,
                                       const std::string &prompt,
                                       const char *label) {
  const TempPath npy("decoder_ref_logits.npy"), js("decoder_ref_logits.json");
  std::string log;
  const int rc = runReference("logits " + shellQuote(path) + " --prompt " +
                                  shellQuote(prompt) + " --out " +
                                  shellQuote(npy),
                              log);
  EXPECT_EQ(rc, 0) << log;
  if (rc != 0)
    return {};
  auto meta = nlohmann::json::parse(readFile(js), nullptr, false);
  EXPECT_FALSE(meta.is_discarded()) << "unreadable " << js.str();
  if (meta.is_discarded())
    return {};
  const std::vector<int32_t> refIds = meta["token_ids"];
  const std::vector<int32_t> ids = tk.encode(prompt, true);
  EXPECT_EQ(ids, refIds);
  std::vector<int64_t> shape;
  std::vector<float> ref;
  std::string err;
  EXPECT_TRUE(readNpy(npy, shape, ref, err)) << err;
  const int64_t T = int64_t(ids.size()), V = w->config().vocab;
  EXPECT_EQ(shape, (std::vector<int64_t>{T, V}));
  if (ids != refIds || shape != std::vector<int64_t>{T, V})
    return {};

  DecoderOptions opts;
  opts.prefillChunk = 16;
  auto dec = makeDecoder(w, denseSchedule(w->config().numLayers), opts);
  EXPECT_TRUE(dec);
  if (!dec)
    return {};
  auto seq = dec->newSequence();
  std::vector<float> all;
  EXPECT_TRUE(dec->prefill(seq, ids.data(), T, nullptr, &all).ok());
  double worst = 0;
  for (int64_t p = 0; p < T; ++p) {
    const double e = relError(all.data() + p * V, ref.data() + p * V, V);
    worst = std::max(worst, e);
    EXPECT_LT(e, 1e-3) << "prefill position " << p;
    EXPECT_EQ(argmax(all.data() + p * V, V), argmax(ref.data() + p * V, V))
        << "position " << p;
  }
  // The decode path (compiled dense kernel) against the same reference.
  auto dseq = dec->newSequence();
  std::vector<float> first(static_cast<size_t>(V)), steps;
  EXPECT_TRUE(dec->prefill(dseq, ids.data(), 1, first.data()).ok());
  EXPECT_TRUE(dec->teacherForce(dseq, ids.data() + 1, T - 1, steps).ok());
  double worstDecode = relError(first.data(), ref.data(), V);
  for (int64_t p = 1; p < T; ++p) {
    const double e =
        relError(steps.data() + (p - 1) * V, ref.data() + p * V, V);
    worstDecode = std::max(worstDecode, e);
    EXPECT_LT(e, 1e-3) << "decode position " << p;
  }
  std::printf("[ logits ] %s: %lld positions, max |cpp - py| / max |py| "
              "prefill %.3g, decode steps %.3g\n",
              label, (long long)T, worst, worstDecode);
  return tk.decode({argmax(all.data() + (T - 1) * V, V)});
}

// (a) Every prompt position's logits against the independent numpy forward
// (float64, its own tokenizer and dequantisation). The prompt spans four KV
// pages and, with blocks of 16 rows, four prefill blocks.
TEST_F(DecoderRealModel, LogitsMatchPythonReference) {
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  const std::string prompt = std::string(kLongPrompt) + " " + kPrompt;
  EXPECT_EQ(expectLogitsMatchReference(modelPath(), weights(), tokenizer(),
                                       prompt, "SmolLM2"),
            " Berlin");
}

// The second family: Qwen2.5-Coder-0.5B (q/k/v biases, NEOX rope, theta
// 1e6, 14/2 heads, Q5_0/Q8_0/Q4_K/Q6_K weights), prefill and decode logits
// against the numpy reference, which has its own tokenizer, dequantisation
// and forward pass.
TEST(DecoderQwen2Model, LogitsMatchPythonReference) {
  const std::string path = qwenModelPath();
  if (path.empty())
    GTEST_SKIP() << qwenSkipMessage();
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  auto [tk, w] = loadModel(path);
  ASSERT_TRUE(tk && w);
  EXPECT_TRUE(w->config().attentionBias);
  const std::string prompt =
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
      "    if n < 2:\n        return n\n    return";
  EXPECT_EQ(expectLogitsMatchReference(path, w, *tk, prompt, "Qwen2"),
            " fibonacci");
}

// The model held as its Q4_1/Q8_0 blocks decodes to the logits of the same
// model dequantised to float32 (the same weights; only the order of the
// sums differs), in prefill (tiles into sgemm) and in decode steps (row
// blocks across threads), at about a fifth of the memory.
TEST_F(DecoderRealModel, QuantizedWeightsMatchFloat32) {
  auto f = GGUFFile::open(modelPath());
  ASSERT_TRUE(f.ok()) << f.message();
  auto q = ModelWeights::load(*f, WeightStorage::Quantized);
  ASSERT_TRUE(q.ok()) << q.message();
  auto fp = ModelWeights::load(*f, WeightStorage::Float32);
  ASSERT_TRUE(fp.ok()) << fp.message();
  std::printf("[ weights ] quantized %.1f MB, float32 %.1f MB\n",
              double((*q)->bytes()) / 1e6, double((*fp)->bytes()) / 1e6);
  EXPECT_LT(double((*q)->bytes()), 0.3 * double((*fp)->bytes()));
  const std::vector<int32_t> ids = tokenizer().encode(kLongPrompt, true);
  const int64_t T = int64_t(ids.size()), V = vocab(), split = T - 8;
  std::vector<float> logits[2];
  int i = 0;
  for (auto w : {*q, *fp}) {
    DecoderOptions opts;
    opts.prefillChunk = 24;
    auto dec = makeDecoder(w, denseSchedule(layers()), opts);
    ASSERT_TRUE(dec);
    auto seq = dec->newSequence();
    std::vector<float> all, steps;
    ASSERT_TRUE(dec->prefill(seq, ids.data(), split, nullptr, &all).ok());
    ASSERT_TRUE(
        dec->teacherForce(seq, ids.data() + split, T - split, steps).ok());
    all.insert(all.end(), steps.begin(), steps.end());
    logits[i++] = std::move(all);
  }
  ASSERT_EQ(logits[0].size(), size_t(T * V));
  double worst = 0.0;
  for (int64_t p = 0; p < T; ++p) {
    worst = std::max(worst, relError(logits[0].data() + p * V,
                                     logits[1].data() + p * V, V));
    EXPECT_EQ(argmax(logits[0].data() + p * V, V),
              argmax(logits[1].data() + p * V, V))
        << "position " << p;
  }
  std::printf("[ weights ] max |quantized - float32| / max = %.2e\n", worst);
  EXPECT_LT(worst, 1e-4);
}

// The third family: Gemma-3-270M (QK-norm, post-norms, GeGLU, scaled
// embeddings, head_dim 256 over one KV head, local layers with a 512-token
// window and RoPE base 10000, Q5_0/Q8_0/Q4_K/Q6_K weights, SentencePiece
// vocabulary of 262,144), prefill and decode logits against the numpy
// reference (its own forward, dequantisation and sentencepiece tokenizer),
// on a prompt longer than the window so local and global layers differ.
TEST(DecoderGemma3Model, LogitsMatchPythonReference) {
  const std::string path = gemmaModelPath();
  if (path.empty())
    GTEST_SKIP() << gemmaSkipMessage();
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  auto [tk, w] = loadModel(path, WeightStorage::Quantized);
  ASSERT_TRUE(tk && w);
  EXPECT_TRUE(w->config().qkNorm && w->config().postNorms);
  EXPECT_EQ(w->config().slidingWindow, 512);
  std::string prompt = "<bos>";
  while (tk->encode(prompt, true).size() < 530)
    prompt += std::string(kLongPrompt) + " ";
  prompt += "The capital of France is";
  EXPECT_EQ(expectLogitsMatchReference(path, w, *tk, prompt, "Gemma 3"),
            " Paris");
}

// (b) Teacher-forced dense decode steps reproduce prefill's logits. With an
// f16 cache the two paths store the same keys only up to rounding-boundary
// flips (their float32 keys differ by ~1e-7 from sgemv vs sgemm summation,
// which moves an occasional element to the neighbouring f16 value, ~5e-4
// relative), hence the looser bound there.
TEST_F(DecoderRealModel, DecodeStepsMatchPrefill) {
  const std::vector<int32_t> ids = tokenizer().encode(kLongPrompt, true);
  const int64_t T = int64_t(ids.size()), V = vocab(), k = 5;
  ASSERT_GT(T, 40);
  for (auto [kv, tol] : {std::pair{KVType::F32, 1e-4},
                         std::pair{KVType::F16, 2e-3}}) {
    DecoderOptions opts;
    opts.kvType = kv;
    opts.prefillChunk = 24;
    auto dec = makeDecoder(weights(), denseSchedule(layers()), opts);
    ASSERT_TRUE(dec);
    auto a = dec->newSequence(), b = dec->newSequence();
    std::vector<float> all, steps;
    ASSERT_TRUE(dec->prefill(a, ids.data(), T, nullptr, &all).ok());
    ASSERT_TRUE(dec->prefill(b, ids.data(), k, nullptr).ok());
    ASSERT_TRUE(dec->teacherForce(b, ids.data() + k, T - k, steps).ok());
    double worst = 0;
    for (int64_t p = k; p < T; ++p)
      worst = std::max(worst, relError(steps.data() + (p - k) * V,
                                       all.data() + p * V, V));
    std::printf("[ consistency ] kv %s: decode vs prefill max rel %.3g\n",
                kvTypeName(kv), worst);
    EXPECT_LT(worst, tol) << kvTypeName(kv);
  }
}

// (c) A sparse policy whose window covers the context is dense.
TEST_F(DecoderRealModel, FullWindowPolicyEqualsDense) {
  const std::vector<int32_t> ids = tokenizer().encode(kLongPrompt, true);
  const int64_t T = int64_t(ids.size()), k = 8;
  Schedule wide = parseOrDie(
      R"({"anchor": 1, "window": 4096, "topk": 32, "selector": "exact"})",
      layers());
  auto dense = makeDecoder(weights(), denseSchedule(layers()));
  auto sparse = makeDecoder(weights(), wide);
  ASSERT_TRUE(dense && sparse);
  std::vector<float> ld, ls, sd, ss, stats;
  auto a = dense->newSequence(), b = sparse->newSequence();
  ASSERT_TRUE(dense->prefill(a, ids.data(), k, nullptr).ok());
  ASSERT_TRUE(sparse->prefill(b, ids.data(), k, nullptr).ok());
  ASSERT_TRUE(dense->teacherForce(a, ids.data() + k, T - k, ld).ok());
  ASSERT_TRUE(sparse->teacherForce(b, ids.data() + k, T - k, ls, &stats).ok());
  const double e = relError(ls.data(), ld.data(), int64_t(ld.size()));
  std::printf("[ full window ] sparse vs dense max rel %.3g\n", e);
  EXPECT_LT(e, 1e-5);
  // Every step attended to every position.
  const int64_t Hq = weights()->config().qHeads, L = layers();
  for (int64_t i = 0; i < T - k; ++i)
    for (int64_t j = 0; j < L * Hq; ++j)
      ASSERT_EQ(stats[size_t((i * L * Hq + j) * kAttentionStatsWidth +
                             kStatAttended)],
                float(k + i + 1));
}

// A genuinely sparse schedule with certified layers: it reads fewer keys,
// stays close to dense, and every certified head either carries a
// certificate eps_hat <= tau or fell back to dense attention.
TEST_F(DecoderRealModel, CertifiedSparsePolicyReportsStatistics) {
  const std::vector<int32_t> ids = tokenizer().encode(
      std::string(kLongPrompt) + " " + kLongPrompt + " " + kLongPrompt, true);
  const int64_t T = int64_t(ids.size()), V = vocab(), k = T - 24;
  const double tau = 0.01;
  Schedule policy = parseOrDie(
      R"({"default": {"anchor": 1, "window": 16, "topk": 32,
                      "selector": "exact", "tau": 0.01, "max_extra": 4},
          "rules": [{"layers": ["0-9"],
                     "policy": {"anchor": 1, "window": 16, "topk": 16,
                                "selector": "block_minmax"}}]})",
      layers());
  auto dense = makeDecoder(weights(), denseSchedule(layers()));
  auto sparse = makeDecoder(weights(), policy);
  ASSERT_TRUE(dense && sparse);
  std::vector<float> ld, ls, stats;
  auto a = dense->newSequence(), b = sparse->newSequence();
  ASSERT_TRUE(dense->prefill(a, ids.data(), k, nullptr).ok());
  ASSERT_TRUE(sparse->prefill(b, ids.data(), k, nullptr).ok());
  ASSERT_TRUE(dense->teacherForce(a, ids.data() + k, T - k, ld).ok());
  ASSERT_TRUE(sparse->teacherForce(b, ids.data() + k, T - k, ls, &stats).ok());
  const ModelShape &shape = sparse->shape();
  AttentionStatsAccumulator acc(policy, shape);
  const int64_t per = layers() * shape.qHeads * kAttentionStatsWidth;
  double kl = 0;
  int agree = 0;
  for (int64_t i = 0; i < T - k; ++i) {
    int32_t len = int32_t(k + i + 1);
    acc.add(stats.data() + i * per, &len, 1);
    kl = std::max(kl, klDivergence(ld.data() + i * V, ls.data() + i * V, V));
    agree += argmax(ld.data() + i * V, V) == argmax(ls.data() + i * V, V);
  }
  AttentionSummary s = acc.summary();
  std::printf("[ certified ] T=%lld keys read %.3f, eps mean %.3g max %.3g, "
              "pass %.3f, fallback %.3f, max KL %.3g, top-1 %d/%lld\n",
              (long long)T, s.positionsAttended, s.epsMean, s.epsMax, s.passRate(),
              s.fallbackRate(), kl, agree, (long long)(T - k));
  EXPECT_LT(s.positionsAttended, 0.9);
  EXPECT_EQ(s.headSteps, (T - k) * layers() * shape.qHeads);
  EXPECT_EQ(s.certified, (T - k) * (layers() - 10) * shape.qHeads);
  EXPECT_EQ(s.epsComputed, s.certified - s.fallbacks);
  EXPECT_EQ(s.passed, s.epsComputed);
  EXPECT_LE(s.epsMax, tau);
  // Layers 0-9 are aggressive (33 of ~130 positions), so only sanity here.
  EXPECT_TRUE(std::isfinite(kl));
  EXPECT_GE(2 * agree, T - k);
}

TEST_F(DecoderRealModel, ChatTemplateAddsDefaultSystemPrompt) {
  auto f = GGUFFile::open(modelPath());
  ASSERT_TRUE(f.ok());
  auto text = applyChatTemplate(*f, "Hi");
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, "<|im_start|>system\nYou are a helpful AI assistant named "
                   "SmolLM, trained by Hugging Face<|im_end|>\n"
                   "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  text = applyChatTemplate(*f, "Hi", "Be brief.");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("<|im_start|>system\nBe brief.<|im_end|>\n", 0), 0u);
  EXPECT_FALSE(applyChatTemplate("{{ bos }}[INST]", "Hi").ok());
}

//===----------------------------------------------------------------------===//
// (d) Errors
//===----------------------------------------------------------------------===//

TEST(DecoderErrors, MissingModelFile) {
  auto w = ModelWeights::load("/nonexistent/model.gguf");
  ASSERT_FALSE(w.ok());
  expectOneLineError(w.status(), "/nonexistent/model.gguf");
}

TEST(DecoderErrors, TruncatedModel) {
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  const std::string bytes = readFile(modelPath());
  ASSERT_GT(bytes.size(), 1u << 20);
  const TempPath cut("truncated.gguf");
  writeFile(cut, bytes.data(), 1u << 20);
  auto w = ModelWeights::load(cut.str());
  ASSERT_FALSE(w.ok());
  expectOneLineError(w.status(), cut.str());
  std::printf("[ truncated ] %s\n", w.message().c_str());
}

/// Runs the CLI; returns its exit code, stdout and stderr.
int runTool(const std::string &args, std::string &out, std::string &err) {
  const TempPath o("tool.out"), e("tool.err");
  const std::string cmd = shellQuote(CONDENSATE_DECODE_TOOL) + " " + args +
                          " >" + shellQuote(o) + " 2>" + shellQuote(e);
  const int status = std::system(cmd.c_str());
  out = readFile(o);
  err = readFile(e);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void expectToolError(const std::string &args, const std::string &needle) {
  std::string out, err;
  EXPECT_EQ(runTool(args, out, err), 1) << args;
  EXPECT_EQ(err.rfind("condensate-decode: error: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(needle), std::string::npos) << err;
}

TEST(DecoderCLI, Errors) {
  expectToolError("--model /nonexistent.gguf --prompt hi",
                  "/nonexistent.gguf: cannot open");
  expectToolError("--prompt hi --bogus", "unknown argument '--bogus'");
  expectToolError("--prompt hi --max-new-tokens x", "--max-new-tokens");
  expectToolError("--prompt hi --compare sparse", "--compare");
  expectToolError("--prompt hi --kv-type f8", "--kv-type");
  expectToolError("", "no prompt");
  expectToolError("--prompt", "--prompt needs a value");
  expectToolError("--long-prompt 5", "--long-prompt expects an integer in [16");
  expectToolError("--long-prompt 100 --prompt hi",
                  "give one of --prompt, --prompt-file and --long-prompt");
  expectToolError("--prompt hi --weights f16", "--weights must be auto");
  expectToolError("--prompt hi --device gpu --gpu-weights f16",
                  "--gpu-weights: weight type must be f32 or bf16");
  expectToolError("--prompt hi --gpu-weights bf16",
                  "--gpu-weights needs --device gpu");
  expectToolError("--prompt hi --fallback-memory -1", "--fallback-memory");
  expectToolError("--prompt hi --fallback-memory 99999999999999999999",
                  "--fallback-memory");
  if (modelPath().empty())
    return;
  const std::string m = "--model " + shellQuote(modelPath()) + " ";
  expectToolError(m + "--prompt-file /nonexistent.txt",
                  "prompt file: cannot read");
  expectToolError(m + "--prompt hi --policy '{\"window\": -1}'", "window");
  expectToolError(m + "--prompt hi --policy '#condensate.policy<nonsense>'",
                  "--policy");
  expectToolError(m + "--prompt hi --policy @/nonexistent.json",
                  "policy file: cannot read");
  const std::string bytes = readFile(modelPath());
  const TempPath cut("cli_truncated.gguf");
  writeFile(cut, bytes.data(), 1u << 20);
  expectToolError("--model " + shellQuote(cut) + " --prompt hi",
                  cut.str());
}

// --long-prompt builds a document of the asked length from the texts on
// this machine and reports the weights' storage in the JSON.
TEST(DecoderCLI, LongPromptAndWeights) {
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  std::string out, err;
  ASSERT_EQ(runTool("--model " + shellQuote(modelPath()) +
                        " --long-prompt 600 --max-new-tokens 2 --threads 2 "
                        "--json --ignore-eos --weights quantized",
                    out, err),
            0)
      << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  // 600 tokens of text and the question after them.
  EXPECT_GE(j["prompt_tokens"].get<int64_t>(), 600) << out;
  EXPECT_LE(j["prompt_tokens"].get<int64_t>(), 640) << out;
  EXPECT_EQ(j["weights"]["storage"], "quantized");
  EXPECT_LT(j["weights"]["bytes"].get<int64_t>(), 150000000);
}

TEST(DecoderCLI, JsonCompareDense) {
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  std::string out, err;
  ASSERT_EQ(runTool("--model " + shellQuote(modelPath()) + " --prompt " +
                        shellQuote(kPrompt) +
                        " --max-new-tokens 8 --threads 2 --json "
                        "--compare dense --ignore-eos",
                    out, err),
            0)
      << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["generated_tokens"].size(), 8u);
  EXPECT_EQ(j["text"].get<std::string>().rfind(" Berlin", 0), 0u) << out;
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_GT(j["decode"]["tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(j["compare"]["teacher_forced"]["steps"], 7);
  EXPECT_TRUE(j["compare"].contains("first_divergence"));
  EXPECT_LE(j["attention"]["positions_attended"].get<double>(), 1.0);
}

// The fallback memory end to end: a certified policy that cannot pass
// (tau 1e-12, a 256-token prompt) runs dense on the steps between trials, keeps
// the dense text, and reads dense's bytes there (the trials read more); without
// it every step falls back.
TEST(DecoderCLI, FallbackMemory) {
  if (modelPath().empty())
    GTEST_SKIP() << modelSkipMessage();
  const std::string policy =
      R"('{"anchor":1,"window":4,"topk":8,"selector":"sketch","bits":4,)"
      R"("tau":1e-12,"max_extra":4}')";
  nlohmann::json runs[2];
  for (int memory : {0, 3}) {
    std::string out, err;
    ASSERT_EQ(runTool("--model " + shellQuote(modelPath()) +
                          " --long-prompt 256 --max-new-tokens 9 --threads 2 "
                          "--json --compare dense --ignore-eos --policy " +
                          policy + " --fallback-memory " +
                          std::to_string(memory),
                      out, err),
              0)
        << err;
    runs[memory ? 1 : 0] = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(runs[memory ? 1 : 0].is_discarded()) << out;
  }
  for (const nlohmann::json &j : runs) {
    EXPECT_TRUE(j["compare"]["first_divergence"].is_null()) << j.dump();
    EXPECT_EQ(j["attention"]["pass_rate"].get<double>(), 0.0);
  }
  const nlohmann::json &every = runs[0]["attention"],
                       &kept = runs[1]["attention"];
  EXPECT_EQ(every["ran_dense_head_steps"], 0);
  EXPECT_EQ(every["fallback_rate"].get<double>(), 1.0);
  // 8 steps: trials at 0 and 4, the memory's dense at 1-3 and 5-7.
  EXPECT_EQ(kept["ran_dense_head_steps"].get<int64_t>(),
            3 * kept["certified_head_steps"].get<int64_t>());
  EXPECT_LT(kept["bytes_read"].get<double>(),
            every["bytes_read"].get<double>());
  EXPECT_GE(kept["bytes_read"].get<double>(), 1.0);
}

} // namespace
